//! What a container's process sees besides its program: volumes (ConfigMaps, Secrets,
//! emptyDir, hostPath, projected — the service-account token among them, requested from the
//! API server as a kubelet does — and downwardAPI), environment (values, downward API,
//! ConfigMap/Secret references, Service variables, `$(VAR)` expansion), /etc/hosts with the
//! Services' names (there is no cluster DNS), and on an arm64 node /proc/cpuinfo of that
//! architecture.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, DownwardAPIVolumeFile, EnvVar, KeyToPath, Pod, ProjectedVolumeSource,
    Secret, ServiceAccount, ServiceAccountTokenProjection, Volume,
};
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use super::sandbox::Mount;
use super::Agent;
use crate::layout::State;
use crate::topology;

/// An image mapped to what runs it here.
#[derive(Debug, Clone, PartialEq)]
pub enum Image {
    /// A program of this machine's, with the machine's files around it (amd64 nodes' nginx).
    Nginx(PathBuf),
    /// This build's archbench, native on every node (the load workers are not emulated).
    Archbench(PathBuf),
    /// An arm64 root filesystem with Debian's arm64 nginx (tools/arm64/fetch), run under
    /// qemu-user on an arm64 node; `build`, an arm64 program, stands in for its nginx.
    Arm64Nginx {
        root: PathBuf,
        build: Option<PathBuf>,
    },
    /// Caddy (`caddy`, `caddy:2`, any tag): this machine's, Debian's (HTTP/3 by quic-go),
    /// with the machine's files around it; amd64 nodes only, as no arm64 root has one.
    Caddy(PathBuf),
}

/// Where Debian's caddy package puts its program (tools/packages installs it).
const DEBIAN_CADDY: &str = "/usr/bin/caddy";

/// `nginx:latest` → `docker.io/library/nginx:latest`, as container statuses show images.
pub fn normalize(image: &str) -> String {
    let (name, tagged) = match image.rsplit_once('/') {
        Some((_, last)) => (image.to_string(), last.contains(':') || last.contains('@')),
        None => (
            format!("library/{image}"),
            image.contains(':') || image.contains('@'),
        ),
    };
    let first = name.split('/').next().unwrap_or("");
    let with_registry = if name.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        name
    } else {
        format!("docker.io/{name}")
    };
    if tagged {
        with_registry
    } else {
        format!("{with_registry}:latest")
    }
}

/// What runs an image on a node of `arch`; the error is the pull failure a runtime would
/// report.
pub fn resolve(state: &State, arch: &str, image: &str) -> Result<Image, String> {
    let full = normalize(image);
    let repo = full
        .rsplit_once([':', '@'])
        .map_or(full.as_str(), |(r, _)| r);
    let last = repo.rsplit('/').next().unwrap_or(repo);
    if repo.contains("archbench") {
        return match &state.archbench_binary {
            Some(p) => Ok(Image::Archbench(p.clone())),
            None => Err(format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": \
                 this cluster was started without an archbench binary (tools/cluster up --archbench)"
            )),
        };
    }
    if last == "caddy" {
        return caddy(arch, &full);
    }
    let build = state
        .nginx_builds
        .iter()
        .find(|(i, _)| i == image)
        .map(|(_, program)| program.clone());
    if build.is_none() && !last.contains("nginx") {
        return Err(format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to \
             resolve reference \"{full}\": {full}: not found"
        ));
    }
    if arch != "arm64" {
        return Ok(Image::Nginx(
            build.unwrap_or_else(|| state.nginx_binary.clone()),
        ));
    }
    match &state.arm64_root {
        Some(root) => Ok(Image::Arm64Nginx {
            root: root.clone(),
            build,
        }),
        None => Err(format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": no \
             match for platform linux/arm64 here: this cluster was started without an arm64 root \
             filesystem (tools/arm64/fetch makes one; tools/cluster up --arm64-root)"
        )),
    }
}

/// A Caddy image: the machine's caddy on an amd64 node; the pull failure a runtime would
/// report elsewhere, or when caddy is not installed.
fn caddy(arch: &str, full: &str) -> Result<Image, String> {
    if arch == "arm64" {
        return Err(format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": no \
             match for platform linux/arm64 here: caddy runs on amd64 nodes only (the arm64 root \
             filesystem has none)"
        ));
    }
    let bin = PathBuf::from(DEBIAN_CADDY);
    if !bin.is_file() {
        return Err(format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": \
             caddy is not installed on this machine (apt-get install caddy)"
        ));
    }
    Ok(Image::Caddy(bin))
}

/// A ConfigMap's or Secret's keys and values.
type KeyValues = Vec<(String, Vec<u8>)>;

fn configmap_values(cm: &ConfigMap) -> KeyValues {
    let mut out: KeyValues = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    out.extend(
        cm.binary_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone())),
    );
    out
}

fn secret_values(s: &Secret) -> KeyValues {
    let mut out: KeyValues = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    out.extend(
        s.string_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_bytes().to_vec())),
    );
    out
}

/// Key → bytes of the ConfigMap (`secret` false) or Secret named `name`; None when it is
/// absent and optional; Err (the kubelet's words) when absent and required.
async fn lookup(
    agent: &Agent,
    ns: &str,
    secret: bool,
    name: &str,
    optional: bool,
) -> Result<Option<KeyValues>, String> {
    let kind = if secret { "secret" } else { "configmap" };
    let found = if secret {
        let api: Api<Secret> = Api::namespaced(agent.client.clone(), ns);
        api.get_opt(name)
            .await
            .map(|o| o.map(|s| secret_values(&s)))
    } else {
        let api: Api<ConfigMap> = Api::namespaced(agent.client.clone(), ns);
        api.get_opt(name)
            .await
            .map(|o| o.map(|c| configmap_values(&c)))
    };
    match found {
        Ok(Some(kv)) => Ok(Some(kv)),
        Ok(None) if optional => Ok(None),
        Ok(None) => Err(format!("{kind} \"{name}\" not found")),
        Err(e) => Err(format!("{kind} \"{name}\": {e}")),
    }
}

/// The files of a ConfigMap/Secret volume: all keys, or the `items` chosen (each at its
/// `path`, else at its key).
fn select(kv: KeyValues, items: Option<&[KeyToPath]>) -> Vec<(String, Vec<u8>)> {
    match items {
        Some(items) => items
            .iter()
            .filter_map(|i| {
                let path = if i.path.is_empty() { &i.key } else { &i.path };
                kv.iter()
                    .find(|(k, _)| *k == i.key)
                    .map(|(_, b)| (path.clone(), b.clone()))
            })
            .collect(),
        None => kv,
    }
}

fn write_files(target: &Path, files: &[(String, Vec<u8>)], mode: u32) -> Result<(), String> {
    for (rel, bytes) in files {
        if rel.split('/').any(|c| c == "..") {
            return Err(format!("volume path {rel:?} leaves the volume"));
        }
        let p = target.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&p, bytes).map_err(|e| e.to_string())?;
        let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode));
    }
    Ok(())
}

/// A service-account token bound to the pod, from the TokenRequest API. (The request and its
/// answer are JSON: the answer's only field read is `status.token`.)
async fn token(
    agent: &Agent,
    pod: &Pod,
    source: &ServiceAccountTokenProjection,
) -> Result<Vec<u8>, String> {
    let meta = &pod.metadata;
    let ns = meta.namespace.as_deref().unwrap_or("default");
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    let mut spec = json!({
        "expirationSeconds": source.expiration_seconds.unwrap_or(3600),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": meta.name, "uid": meta.uid},
    });
    if let Some(a) = &source.audience {
        spec["audiences"] = json!([a]);
    }
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let api: Api<ServiceAccount> = Api::namespaced(agent.client.clone(), ns);
    let answer: Value = api
        .create_subresource("token", sa, &PostParams::default(), &body)
        .await
        .map_err(|e| format!("failed to fetch token: {e}"))?;
    answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .map(|t| t.as_bytes().to_vec())
        .ok_or_else(|| "failed to fetch token: the answer has no token".into())
}

/// The files of a downwardAPI volume (or projected source).
fn downward_files(pod: &Pod, items: Option<&[DownwardAPIVolumeFile]>) -> Vec<(String, Vec<u8>)> {
    items
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let field = &i.field_ref.as_ref()?.field_path;
            Some((i.path.clone(), field_ref(pod, field).into_bytes()))
        })
        .collect()
}

/// What one volume is on the node.
enum Source {
    /// Files written under the pod's directory, with their mode.
    Files(KeyValues, u32),
    /// An empty directory of the pod's own.
    Empty,
    /// A directory of the host.
    Host(PathBuf),
}

/// The keys of the ConfigMap or Secret `name` a volume source names, the `items` chosen.
async fn referenced(
    agent: &Agent,
    ns: &str,
    secret: bool,
    name: &str,
    optional: Option<bool>,
    items: Option<&[KeyToPath]>,
) -> Result<KeyValues, String> {
    let kv = lookup(agent, ns, secret, name, optional.unwrap_or(false))
        .await?
        .unwrap_or_default();
    Ok(select(kv, items))
}

/// The files of a projected volume: token, ConfigMaps, Secrets and downward API in order.
async fn projected(
    agent: &Agent,
    pod: &Pod,
    ns: &str,
    p: &ProjectedVolumeSource,
) -> Result<KeyValues, String> {
    let mut all = Vec::new();
    for src in p.sources.iter().flatten() {
        if let Some(t) = &src.service_account_token {
            let path = if t.path.is_empty() { "token" } else { &t.path };
            all.push((path.to_string(), token(agent, pod, t).await?));
        } else if let Some(cm) = &src.config_map {
            let items = cm.items.as_deref();
            all.extend(referenced(agent, ns, false, &cm.name, cm.optional, items).await?);
        } else if let Some(s) = &src.secret {
            let items = s.items.as_deref();
            all.extend(referenced(agent, ns, true, &s.name, s.optional, items).await?);
        } else if let Some(d) = &src.downward_api {
            all.extend(downward_files(pod, d.items.as_deref()));
        }
    }
    Ok(all)
}

async fn source(agent: &Agent, pod: &Pod, ns: &str, v: &Volume) -> Result<Source, String> {
    let mode = |m: Option<i32>| m.and_then(|m| u32::try_from(m).ok()).unwrap_or(0o644);
    if let Some(cm) = &v.config_map {
        let items = cm.items.as_deref();
        let files = referenced(agent, ns, false, &cm.name, cm.optional, items).await?;
        return Ok(Source::Files(files, mode(cm.default_mode)));
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        let files = referenced(agent, ns, true, name, s.optional, s.items.as_deref()).await?;
        return Ok(Source::Files(files, mode(s.default_mode)));
    }
    if let Some(p) = &v.projected {
        let files = projected(agent, pod, ns, p).await?;
        return Ok(Source::Files(files, mode(p.default_mode)));
    }
    if let Some(d) = &v.downward_api {
        let files = downward_files(pod, d.items.as_deref());
        return Ok(Source::Files(files, mode(d.default_mode)));
    }
    if v.empty_dir.is_some() {
        return Ok(Source::Empty);
    }
    if let Some(h) = &v.host_path {
        return Ok(Source::Host(PathBuf::from(&h.path)));
    }
    Err("the node agent supports configMap, secret, projected, downwardAPI, emptyDir and hostPath volumes only".into())
}

/// Writes the pod's volumes under `dir/volumes/` and returns each volume's host directory.
/// Err is the kubelet's FailedMount message (the pod waits in ContainerCreating).
pub async fn materialize(
    agent: &Agent,
    pod: &Pod,
    dir: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = HashMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let name = v.name.clone();
        let fail = |why: String| format!("MountVolume.SetUp failed for volume \"{name}\" : {why}");
        let target = dir.join("volumes").join(&name);
        match source(agent, pod, ns, v).await.map_err(fail)? {
            Source::Host(p) => {
                out.insert(name, p);
            }
            Source::Empty => {
                std::fs::create_dir_all(&target).map_err(|e| fail(e.to_string()))?;
                out.insert(name, target);
            }
            Source::Files(files, mode) => {
                let _ = std::fs::remove_dir_all(&target);
                std::fs::create_dir_all(&target).map_err(|e| fail(e.to_string()))?;
                write_files(&target, &files, mode).map_err(fail)?;
                out.insert(name, target);
            }
        }
    }
    Ok(out)
}

/// Where a mount point that does not exist on the host may be made: inside the container's
/// own tmpfs on /run (/var/run leads there on this host).
fn makeable(dst: &Path) -> bool {
    // /var/run only where it leads to /run (Debian's symlink): else a mkdir there would
    // reach the host's own filesystem.
    let var_run_is_run = std::fs::canonicalize("/var/run").is_ok_and(|p| p == Path::new("/run"));
    dst.starts_with("/run/") || (var_run_is_run && dst.starts_with("/var/run/"))
}

/// A container's volume mounts, in order. Mount points must exist on the host (pods share
/// its filesystem) unless they lie under the container's /run.
pub fn container_mounts(
    container: &Container,
    volumes: &HashMap<String, PathBuf>,
) -> Result<Vec<Mount>, String> {
    let mut out = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let name = m.name.as_str();
        let Some(src) = volumes.get(name) else {
            return Err(format!(
                "volume \"{name}\" of a volumeMount is not in spec.volumes"
            ));
        };
        let src = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) => src.join(sub),
            None => src.clone(),
        };
        let dst = PathBuf::from(&m.mount_path);
        if !src.exists() {
            return Err(format!(
                "failed to prepare subPath for volumeMount \"{name}\": {} does not exist",
                src.display()
            ));
        }
        if !dst.exists() {
            if !(makeable(&dst) && src.is_dir()) {
                return Err(format!(
                    "the node agent cannot mount at {}: it does not exist on this host (pods share the host's filesystem)",
                    dst.display()
                ));
            }
            out.push(Mount::Dir { dst: dst.clone() });
        }
        let read_only = m.read_only.unwrap_or(false);
        out.push(Mount::Bind {
            src,
            dst,
            read_only,
        });
    }
    Ok(out)
}

/// The value of a downward-API `fieldPath`: the ones the API server accepts, `metadata.name`
/// to `status.podIPs` and `metadata.labels['x']` and friends (a whole map as its JSON text);
/// what is unset, empty.
fn field_ref(pod: &Pod, path: &str) -> String {
    let bracket = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['").or_else(|| r.strip_prefix("[\"")))
            .and_then(|r| r.strip_suffix("']").or_else(|| r.strip_suffix("\"]")))
    };
    let meta = &pod.metadata;
    let maps = [
        ("metadata.labels", &meta.labels),
        ("metadata.annotations", &meta.annotations),
    ];
    for (prefix, map) in maps {
        if let Some(k) = bracket(prefix) {
            return map
                .as_ref()
                .and_then(|m| m.get(k))
                .cloned()
                .unwrap_or_default();
        }
        if path == prefix {
            // serializing a map of strings cannot fail
            return map
                .as_ref()
                .and_then(|m| serde_json::to_string(m).ok())
                .unwrap_or_default();
        }
    }
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let text = match path {
        "metadata.name" => meta.name.as_ref(),
        "metadata.namespace" => meta.namespace.as_ref(),
        "metadata.uid" => meta.uid.as_ref(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.as_ref()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.as_ref()),
        "status.podIP" | "status.podIPs" => status.and_then(|s| s.pod_ip.as_ref()),
        "status.hostIP" | "status.hostIPs" => status.and_then(|s| s.host_ip.as_ref()),
        _ => None,
    };
    text.cloned().unwrap_or_default()
}

/// `$(VAR)` → value of an earlier variable; `$$(VAR)` → literal `$(VAR)`; unknown stays as is.
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix('(') {
            match r.find(')') {
                Some(j) => {
                    let name = &r[..j];
                    match env.iter().rev().find(|(k, _)| k == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &r[j + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// (name, namespace, ClusterIP, first port) of every Service with a ClusterIP.
fn service_addresses(agent: &Agent) -> Vec<(String, String, String, Option<i32>)> {
    agent
        .services
        .state()
        .iter()
        .filter_map(|s| {
            let spec = s.spec.as_ref()?;
            let ip = spec
                .cluster_ip
                .clone()
                .filter(|ip| ip != "None" && !ip.is_empty())?;
            let port = spec.ports.as_ref().and_then(|p| p.first()).map(|p| p.port);
            Some((
                s.metadata.name.clone()?,
                s.metadata.namespace.clone()?,
                ip,
                port,
            ))
        })
        .collect()
}

/// The environment of a container: the defaults every container gets, the `kubernetes`
/// Service's address, Service variables of its namespace, then `envFrom` and `env` in order
/// (later wins). `pod` must carry its status (podIP).
pub async fn environment(
    agent: &Agent,
    pod: &Pod,
    container: &Container,
    hostname: &str,
) -> Result<Vec<(String, String)>, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env = service_environment(agent, pod, ns, hostname);
    env_from(agent, ns, container, &mut env).await?;
    for e in container.env.iter().flatten() {
        let value = env_value(agent, pod, ns, e, &env).await?;
        env.retain(|(k, _)| *k != e.name);
        env.push((e.name.clone(), value));
    }
    Ok(env)
}

/// What every container gets: PATH, HOSTNAME, the API server's Service variables, and (with
/// `enableServiceLinks`, the default) each Service of the namespace's host and port.
fn service_environment(
    agent: &Agent,
    pod: &Pod,
    ns: &str,
    hostname: &str,
) -> Vec<(String, String)> {
    let api = format!("{}", topology::KUBERNETES_SERVICE_IP);
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOSTNAME".into(), hostname.into()),
        ("KUBERNETES_SERVICE_HOST".into(), api.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), "443".into()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), "443".into()),
        ("KUBERNETES_PORT".into(), format!("tcp://{api}:443")),
    ];
    let links = pod.spec.as_ref().and_then(|s| s.enable_service_links);
    if links.unwrap_or(true) {
        for (name, sns, ip, port) in service_addresses(agent) {
            if sns != ns || name == "kubernetes" {
                continue;
            }
            let prefix = name.to_uppercase().replace('-', "_");
            if let Some(port) = port {
                env.push((format!("{prefix}_SERVICE_HOST"), ip));
                env.push((format!("{prefix}_SERVICE_PORT"), port.to_string()));
            }
        }
    }
    env
}

/// `envFrom`: every key of a ConfigMap or Secret, with its prefix.
async fn env_from(
    agent: &Agent,
    ns: &str,
    container: &Container,
    env: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        let (secret, name, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(r), _) => (false, &r.name, r.optional),
            (_, Some(r)) => (true, &r.name, r.optional),
            _ => continue,
        };
        let optional = optional == Some(true);
        for (k, v) in lookup(agent, ns, secret, name, optional)
            .await?
            .unwrap_or_default()
        {
            env.push((
                format!("{prefix}{k}"),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
    }
    Ok(())
}

/// One `env` entry's value: literal (with `$(VAR)` expanded against `env` so far), a field
/// of the pod, or a key of a ConfigMap or Secret.
async fn env_value(
    agent: &Agent,
    pod: &Pod,
    ns: &str,
    e: &EnvVar,
    env: &[(String, String)],
) -> Result<String, String> {
    if let Some(v) = &e.value {
        return Ok(expand(v, env));
    }
    let from = e.value_from.as_ref();
    if let Some(f) = from.and_then(|f| f.field_ref.as_ref()) {
        return Ok(field_ref(pod, &f.field_path));
    }
    let Some((secret, obj, key, optional)) = from.and_then(|f| {
        f.config_map_key_ref
            .as_ref()
            .map(|r| (false, &r.name, &r.key, r.optional))
            .or_else(|| {
                f.secret_key_ref
                    .as_ref()
                    .map(|r| (true, &r.name, &r.key, r.optional))
            })
    }) else {
        return Ok(String::new());
    };
    let optional = optional == Some(true);
    Ok(lookup(agent, ns, secret, obj, optional)
        .await?
        .and_then(|kv| kv.into_iter().find(|(k, _)| k == key))
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default())
}

/// /etc/hosts of a pod: itself, then every Service's cluster DNS names (no DNS server runs:
/// this file stands in for cluster DNS, rewritten as Services come and go).
pub fn hosts(agent: &Agent, ip: &str, hostname: &str, ns: &str) -> String {
    let mut s = format!(
        "# Kubernetes-managed hosts file (archbench node agent; no cluster DNS).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{hostname}\n"
    );
    let mut services = service_addresses(agent);
    services.sort();
    let domain = topology::CLUSTER_DOMAIN;
    for (name, sns, cip, _) in services {
        let short = if sns == ns {
            format!(" {name}")
        } else {
            String::new()
        };
        s.push_str(&format!(
            "{cip}\t{name}.{sns}.svc.{domain} {name}.{sns}.svc {name}.{sns}{short}\n"
        ));
    }
    s
}

/// /proc/cpuinfo of a node whose architecture differs from the host's (None: use the host's).
pub fn cpuinfo(node_arch: &str, cpus: u32) -> Option<String> {
    let host = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    if node_arch == host || node_arch.is_empty() {
        return None;
    }
    let mut s = String::new();
    for i in 0..cpus {
        if node_arch == "arm64" {
            // Azure Dpsv6: Cobalt 100 (Neoverse-N2), with LSE atomics
            s.push_str(&format!(
                "processor\t: {i}\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd49\nCPU revision\t: 0\n\n"
            ));
        } else {
            s.push_str(&format!(
                "processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: INTEL(R) XEON(R) PLATINUM 8573C\nstepping\t: 2\ncpu MHz\t\t: 2300.000\ncache size\t: 266240 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {}\ncpu cores\t: {}\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch avx2 bmi1 bmi2 erms avx512f avx512dq avx512bw avx512vl\n\n",
                i / 2,
                cpus.div_ceil(2)
            ));
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_and_expansion() {
        assert_eq!(normalize("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(normalize("nginx:1.27"), "docker.io/library/nginx:1.27");
        assert_eq!(
            normalize("ghcr.io/x/archbench:v1"),
            "ghcr.io/x/archbench:v1"
        );
        assert_eq!(normalize("me/app"), "docker.io/me/app:latest");
        let env = vec![("A".to_string(), "1".to_string())];
        assert_eq!(expand("x$(A)y$(B)$$(A)", &env), "x1y$(B)$(A)");
        assert!(cpuinfo("arm64", 2).unwrap().contains("atomics"));
        assert!(makeable(Path::new(
            "/var/run/secrets/kubernetes.io/serviceaccount"
        )));
        assert!(!makeable(Path::new("/etc/archbench")));
    }

    #[test]
    fn a_caddy_image_is_the_machines_caddy_on_amd64_nodes_only() {
        let arm = caddy("arm64", "docker.io/library/caddy:2").unwrap_err();
        assert!(arm.contains("no match for platform linux/arm64"), "{arm}");
        match caddy("amd64", "docker.io/library/caddy:2") {
            Ok(image) => assert_eq!(image, Image::Caddy(DEBIAN_CADDY.into())),
            // Said as a pull failure with the package to install.
            Err(e) => assert!(e.contains("apt-get install caddy"), "{e}"),
        }
    }

    #[test]
    fn items_choose_keys_and_their_paths() {
        let kv: KeyValues = vec![("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())];
        let items: Vec<KeyToPath> = serde_json::from_value(json!([
            {"key": "b", "path": "dir/b.txt"}, {"key": "missing", "path": "m"}]))
        .unwrap();
        assert_eq!(
            select(kv.clone(), Some(&items)),
            vec![("dir/b.txt".to_string(), b"2".to_vec())]
        );
        assert_eq!(select(kv.clone(), None), kv);
    }

    #[test]
    fn downward_files_read_the_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "nginx", "labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [], "serviceAccountName": "runner"},
            "status": {"podIP": "10.244.0.5"}}))
        .unwrap();
        let items: Vec<DownwardAPIVolumeFile> = serde_json::from_value(json!([
            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
            {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "limits", "resourceFieldRef": {"resource": "limits.cpu"}},
        ]))
        .unwrap();
        let files = downward_files(&pod, Some(&items));
        assert_eq!(files[0], ("namespace".to_string(), b"nginx".to_vec()));
        assert_eq!(files[1], ("app".to_string(), b"web".to_vec()));
        assert_eq!(
            files[2],
            (
                "labels".to_string(),
                br#"{"app":"web","tier":"front"}"#.to_vec()
            )
        );
        assert_eq!(files.len(), 3, "a resourceFieldRef is not modelled");
        assert_eq!(field_ref(&pod, "status.podIPs"), "10.244.0.5");
        assert_eq!(field_ref(&pod, "spec.serviceAccountName"), "runner");
        assert_eq!(field_ref(&pod, "spec.nodeName"), "");
        assert_eq!(field_ref(&pod, "metadata.annotations['a']"), "");
    }
}
