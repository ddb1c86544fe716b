//! What a container's process sees besides its program: volumes (ConfigMaps, Secrets,
//! emptyDir, hostPath, projected — the service-account token among them, requested from the
//! API server as a kubelet does — and downwardAPI), environment (values, downward API,
//! ConfigMap/Secret references, Service variables, `$(VAR)` expansion), /etc/hosts with the
//! Services' names (there is no cluster DNS), and on an arm64 node /proc/cpuinfo of that
//! architecture.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
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
}

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

/// Key → bytes of the ConfigMap (`secret` false) or Secret named `r["name"]`; None when it is
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

/// The files of a ConfigMap/Secret volume: all keys, or the `items` chosen.
fn select(kv: KeyValues, items: Option<&Value>) -> Vec<(String, Vec<u8>)> {
    match items.and_then(Value::as_array) {
        Some(items) => items
            .iter()
            .filter_map(|i| {
                let key = i["key"].as_str()?;
                let path = i["path"].as_str().unwrap_or(key);
                kv.iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, b)| (path.to_string(), b.clone()))
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

/// A service-account token bound to the pod, from the TokenRequest API.
async fn token(agent: &Agent, pod: &Value, source: &Value) -> Result<Vec<u8>, String> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let sa = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let mut spec = json!({
        "expirationSeconds": source.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(3600),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": pod.pointer("/metadata/name"), "uid": pod.pointer("/metadata/uid")},
    });
    if let Some(a) = source.get("audience").and_then(Value::as_str) {
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
fn downward_files(pod: &Value, items: Option<&Value>) -> Vec<(String, Vec<u8>)> {
    items
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let path = i["path"].as_str()?;
            let field = i.pointer("/fieldRef/fieldPath").and_then(Value::as_str)?;
            Some((path.to_string(), field_ref(pod, field).into_bytes()))
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

/// The keys of the ConfigMap or Secret a volume source names (`name`, or `secretName` for a
/// Secret volume), the `items` chosen.
async fn referenced(
    agent: &Agent,
    ns: &str,
    secret: bool,
    src: &Value,
    name_key: &str,
) -> Result<KeyValues, String> {
    let optional = src
        .get("optional")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let name = src[name_key].as_str().unwrap_or_default();
    let kv = lookup(agent, ns, secret, name, optional)
        .await?
        .unwrap_or_default();
    Ok(select(kv, src.get("items")))
}

/// The files of a projected volume: token, ConfigMaps, Secrets and downward API in order.
async fn projected(agent: &Agent, pod: &Value, ns: &str, p: &Value) -> Result<KeyValues, String> {
    let mut all = Vec::new();
    for src in p
        .get("sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = src.get("serviceAccountToken") {
            let path = t["path"].as_str().unwrap_or("token").to_string();
            all.push((path, token(agent, pod, t).await?));
        } else if let Some(cm) = src.get("configMap") {
            all.extend(referenced(agent, ns, false, cm, "name").await?);
        } else if let Some(s) = src.get("secret") {
            all.extend(referenced(agent, ns, true, s, "name").await?);
        } else if let Some(d) = src.get("downwardAPI") {
            all.extend(downward_files(pod, d.get("items")));
        }
    }
    Ok(all)
}

async fn source(agent: &Agent, pod: &Value, ns: &str, v: &Value) -> Result<Source, String> {
    let mode = |src: &Value| {
        src.get("defaultMode")
            .and_then(Value::as_u64)
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(0o644)
    };
    if let Some(cm) = v.get("configMap") {
        let files = referenced(agent, ns, false, cm, "name").await?;
        return Ok(Source::Files(files, mode(cm)));
    }
    if let Some(s) = v.get("secret") {
        let files = referenced(agent, ns, true, s, "secretName").await?;
        return Ok(Source::Files(files, mode(s)));
    }
    if let Some(p) = v.get("projected") {
        return Ok(Source::Files(projected(agent, pod, ns, p).await?, mode(p)));
    }
    if let Some(d) = v.get("downwardAPI") {
        return Ok(Source::Files(downward_files(pod, d.get("items")), mode(d)));
    }
    if v.get("emptyDir").is_some() {
        return Ok(Source::Empty);
    }
    if let Some(p) = v.pointer("/hostPath/path").and_then(Value::as_str) {
        return Ok(Source::Host(PathBuf::from(p)));
    }
    Err("the node agent supports configMap, secret, projected, downwardAPI, emptyDir and hostPath volumes only".into())
}

/// Writes the pod's volumes under `dir/volumes/` and returns each volume's host directory.
/// Err is the kubelet's FailedMount message (the pod waits in ContainerCreating).
pub async fn materialize(
    agent: &Agent,
    pod: &Value,
    dir: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let mut out = HashMap::new();
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = v["name"].as_str().unwrap_or_default().to_string();
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
    container: &Value,
    volumes: &HashMap<String, PathBuf>,
) -> Result<Vec<Mount>, String> {
    let mut out = Vec::new();
    for m in container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = m["name"].as_str().unwrap_or_default();
        let Some(src) = volumes.get(name) else {
            return Err(format!(
                "volume \"{name}\" of a volumeMount is not in spec.volumes"
            ));
        };
        let src = match m
            .get("subPath")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            Some(sub) => src.join(sub),
            None => src.clone(),
        };
        let dst = PathBuf::from(m["mountPath"].as_str().unwrap_or_default());
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
        let read_only = m.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
        out.push(Mount::Bind {
            src,
            dst,
            read_only,
        });
    }
    Ok(out)
}

/// `metadata.labels['x']` and friends.
fn field_ref(pod: &Value, path: &str) -> String {
    let bracket = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['").or_else(|| r.strip_prefix("[\"")))
            .and_then(|r| r.strip_suffix("']").or_else(|| r.strip_suffix("\"]")))
    };
    for (prefix, field) in [
        ("metadata.labels", "labels"),
        ("metadata.annotations", "annotations"),
    ] {
        if let Some(k) = bracket(prefix) {
            return pod
                .pointer(&format!("/metadata/{field}"))
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into();
        }
    }
    let p = match path {
        "status.podIPs" => "/status/podIP".to_string(),
        "status.hostIPs" => "/status/hostIP".to_string(),
        other => format!("/{}", other.replace('.', "/")),
    };
    match pod.pointer(&p) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
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
    pod: &Value,
    container: &Value,
    hostname: &str,
) -> Result<Vec<(String, String)>, String> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let mut env = service_environment(agent, pod, ns, hostname);
    env_from(agent, ns, container, &mut env).await?;
    for e in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = e["name"].as_str().unwrap_or_default().to_string();
        let value = env_value(agent, pod, ns, e, &env).await?;
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    Ok(env)
}

/// What every container gets: PATH, HOSTNAME, the API server's Service variables, and (with
/// `enableServiceLinks`, the default) each Service of the namespace's host and port.
fn service_environment(
    agent: &Agent,
    pod: &Value,
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
    if pod
        .pointer("/spec/enableServiceLinks")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
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
    container: &Value,
    env: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for from in container
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = from.get("prefix").and_then(Value::as_str).unwrap_or("");
        let (secret, r) = match (from.get("configMapRef"), from.get("secretRef")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => continue,
        };
        let optional = r.get("optional").and_then(Value::as_bool) == Some(true);
        for (k, v) in lookup(
            agent,
            ns,
            secret,
            r["name"].as_str().unwrap_or_default(),
            optional,
        )
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
    pod: &Value,
    ns: &str,
    e: &Value,
    env: &[(String, String)],
) -> Result<String, String> {
    if let Some(v) = e.get("value").and_then(Value::as_str) {
        return Ok(expand(v, env));
    }
    if let Some(f) = e
        .pointer("/valueFrom/fieldRef/fieldPath")
        .and_then(Value::as_str)
    {
        return Ok(field_ref(pod, f));
    }
    let Some((secret, r)) = e
        .pointer("/valueFrom/configMapKeyRef")
        .map(|r| (false, r))
        .or_else(|| e.pointer("/valueFrom/secretKeyRef").map(|r| (true, r)))
    else {
        return Ok(String::new());
    };
    let obj = r["name"].as_str().unwrap_or_default();
    let optional = r.get("optional").and_then(Value::as_bool) == Some(true);
    let key = r["key"].as_str().unwrap_or_default();
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
    fn downward_files_read_the_pod() {
        let pod = json!({"metadata": {"namespace": "nginx", "labels": {"app": "web"}}});
        let items = json!([
            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
            {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
        ]);
        let files = downward_files(&pod, Some(&items));
        assert_eq!(files[0], ("namespace".to_string(), b"nginx".to_vec()));
        assert_eq!(files[1], ("app".to_string(), b"web".to_vec()));
    }
}
