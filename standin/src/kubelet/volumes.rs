//! What a container's process sees besides its program: volumes (ConfigMaps, Secrets,
//! emptyDir, hostPath), environment (values, downward API, ConfigMap/Secret references,
//! `$(VAR)` expansion), /etc/hosts with the Services' names, and the node's /proc/cpuinfo.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::resources;
use crate::state::Shared;
use crate::store;

/// An image mapped to a local program.
#[derive(Debug, Clone, PartialEq)]
pub enum Image {
    Nginx(PathBuf),
    Archbench(PathBuf),
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

/// The local program of an image; the error is the pull failure the real runtime would report.
pub fn resolve(sh: &Shared, image: &str) -> Result<Image, String> {
    let full = normalize(image);
    let repo = full
        .rsplit_once([':', '@'])
        .map_or(full.as_str(), |(r, _)| r);
    let last = repo.rsplit('/').next().unwrap_or(repo);
    if repo.contains("archbench") {
        return match &sh.opts.archbench_binary {
            Some(p) => Ok(Image::Archbench(p.clone())),
            None => Err(format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": \
                 the stand-in has no archbench binary (Options::archbench_binary is None)"
            )),
        };
    }
    if last.contains("nginx") {
        return Ok(Image::Nginx(sh.opts.nginx_binary.clone()));
    }
    Err(format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to \
         resolve reference \"{full}\": {full}: not found"
    ))
}

/// Standard base64 (Secret data, ConfigMap binaryData).
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= val(*c)? << (18 - 6 * i);
        }
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    Some(out)
}

/// A ConfigMap's or Secret's keys and values.
type KeyValues = Vec<(String, Vec<u8>)>;

/// Key → bytes of a ConfigMap (data and binaryData) or Secret (data, base64).
fn key_values(obj: &Value, secret: bool) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    if let Some(m) = obj.get("data").and_then(Value::as_object) {
        for (k, v) in m {
            let s = v.as_str().unwrap_or_default();
            let bytes = if secret {
                base64_decode(s).unwrap_or_default()
            } else {
                s.as_bytes().to_vec()
            };
            out.push((k.clone(), bytes));
        }
    }
    if let Some(m) = obj.get("binaryData").and_then(Value::as_object) {
        for (k, v) in m {
            out.push((
                k.clone(),
                base64_decode(v.as_str().unwrap_or_default()).unwrap_or_default(),
            ));
        }
    }
    out
}

/// Writes the pod's volumes under `dir/volumes/` and returns each volume's host directory.
/// Err is the kubelet's FailedMount message (the pod waits in ContainerCreating).
pub fn materialize(
    sh: &Shared,
    pod: &Value,
    dir: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let ns = store::namespace_of(pod);
    let mut out = HashMap::new();
    let vols = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in vols {
        let name = v["name"].as_str().unwrap_or_default().to_string();
        let target = dir.join("volumes").join(&name);
        let source = if let Some(cm) = v.get("configMap") {
            Some((cm, false, &resources::CONFIGMAPS, "configmap"))
        } else {
            v.get("secret")
                .map(|s| (s, true, &resources::SECRETS, "secret"))
        };
        if let Some((src, secret, res, what)) = source {
            let obj_name = src
                .get(if secret { "secretName" } else { "name" })
                .and_then(Value::as_str)
                .unwrap_or_default();
            let optional = src
                .get("optional")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let obj = sh.store.get(res, ns, obj_name);
            if obj.is_none() && !optional {
                return Err(format!(
                    "MountVolume.SetUp failed for volume \"{name}\" : {what} \"{obj_name}\" not found"
                ));
            }
            let _ = std::fs::remove_dir_all(&target);
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            let mode = src
                .get("defaultMode")
                .and_then(Value::as_u64)
                .unwrap_or(0o644) as u32;
            let kv = obj.map(|o| key_values(&o, secret)).unwrap_or_default();
            let items = src.get("items").and_then(Value::as_array);
            let files: Vec<(String, Vec<u8>)> = match items {
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
            };
            for (rel, bytes) in files {
                let p = target.join(&rel);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::write(&p, bytes).map_err(|e| e.to_string())?;
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode));
            }
            out.insert(name, target);
        } else if v.get("emptyDir").is_some() {
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            out.insert(name, target);
        } else if let Some(p) = v.pointer("/hostPath/path").and_then(Value::as_str) {
            out.insert(name, PathBuf::from(p));
        } else {
            return Err(format!(
                "MountVolume.SetUp failed for volume \"{name}\" : the stand-in supports configMap, \
                 secret, emptyDir and hostPath volumes only"
            ));
        }
    }
    Ok(out)
}

/// A container's volume mounts as (host source, path in the pod, read-only). Mount points
/// must exist on the host: pods share the host's filesystem, and the stand-in does not create
/// directories outside its own temp dir.
pub fn container_mounts(
    container: &Value,
    volumes: &HashMap<String, PathBuf>,
) -> Result<Vec<(PathBuf, PathBuf, bool)>, String> {
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
            return Err(format!(
                "the stand-in cannot mount at {}: it does not exist on this host (pods share the host's filesystem)",
                dst.display()
            ));
        }
        let ro = m.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
        out.push((src, dst, ro));
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
    if let Some(k) = bracket("metadata.labels") {
        return pod
            .pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into();
    }
    if let Some(k) = bracket("metadata.annotations") {
        return pod
            .pointer("/metadata/annotations")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into();
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

/// The environment of a container: the defaults every container gets, Service variables,
/// then `envFrom` and `env` in order (later wins). `pod` must carry its status (podIP).
pub fn environment(
    sh: &Shared,
    pod: &Value,
    container: &Value,
    hostname: &str,
) -> Result<Vec<(String, String)>, String> {
    let ns = store::namespace_of(pod);
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOSTNAME".into(), hostname.into()),
        ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
        ("KUBERNETES_SERVICE_PORT".into(), sh.api_port.to_string()),
        (
            "KUBERNETES_PORT".into(),
            format!("tcp://127.0.0.1:{}", sh.api_port),
        ),
    ];
    if pod
        .pointer("/spec/enableServiceLinks")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
        for svc in sh.store.list(&resources::SERVICES, Some(ns)).0 {
            let Some(ip) = svc
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .filter(|ip| *ip != "None")
            else {
                continue;
            };
            let prefix = store::name_of(&svc).to_uppercase().replace('-', "_");
            if let Some(port) = svc.pointer("/spec/ports/0/port").and_then(Value::as_u64) {
                env.push((format!("{prefix}_SERVICE_HOST"), ip.into()));
                env.push((format!("{prefix}_SERVICE_PORT"), port.to_string()));
            }
        }
    }
    let lookup = |kind: &str, r: &Value| -> Result<Option<KeyValues>, String> {
        let (res, secret) = if kind == "secret" {
            (&resources::SECRETS, true)
        } else {
            (&resources::CONFIGMAPS, false)
        };
        let name = r["name"].as_str().unwrap_or_default();
        match sh.store.get(res, ns, name) {
            Some(o) => Ok(Some(key_values(&o, secret))),
            None if r.get("optional").and_then(Value::as_bool) == Some(true) => Ok(None),
            None => Err(format!("{kind} \"{name}\" not found")),
        }
    };
    for from in container
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = from.get("prefix").and_then(Value::as_str).unwrap_or("");
        let (kind, r) = match (from.get("configMapRef"), from.get("secretRef")) {
            (Some(r), _) => ("configmap", r),
            (_, Some(r)) => ("secret", r),
            _ => continue,
        };
        for (k, v) in lookup(kind, r)?.unwrap_or_default() {
            env.push((
                format!("{prefix}{k}"),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
    }
    for e in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = e["name"].as_str().unwrap_or_default().to_string();
        let value = if let Some(v) = e.get("value").and_then(Value::as_str) {
            expand(v, &env)
        } else if let Some(f) = e
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        {
            field_ref(pod, f)
        } else if let Some(r) = e.pointer("/valueFrom/configMapKeyRef") {
            lookup("configmap", r)?
                .and_then(|kv| {
                    kv.into_iter()
                        .find(|(k, _)| Some(k.as_str()) == r["key"].as_str())
                })
                .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default()
        } else if let Some(r) = e.pointer("/valueFrom/secretKeyRef") {
            lookup("secret", r)?
                .and_then(|kv| {
                    kv.into_iter()
                        .find(|(k, _)| Some(k.as_str()) == r["key"].as_str())
                })
                .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    Ok(env)
}

/// /etc/hosts of a pod: itself, then every Service's cluster DNS names.
pub fn hosts(sh: &Shared, ip: &str, hostname: &str, ns: &str) -> String {
    let mut s = format!(
        "# Kubernetes-managed hosts file (stand-in).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{hostname}\n"
    );
    for svc in sh.store.list(&resources::SERVICES, None).0 {
        let Some(cip) = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .filter(|ip| *ip != "None")
        else {
            continue;
        };
        let (name, sns) = (store::name_of(&svc), store::namespace_of(&svc));
        let short = if sns == ns {
            format!(" {name}")
        } else {
            String::new()
        };
        s.push_str(&format!(
            "{cip}\t{name}.{sns}.svc.cluster.local {name}.{sns}.svc {name}.{sns}{short}\n"
        ));
    }
    s
}

/// /proc/cpuinfo of a node whose architecture differs from the host's (None: use the host's).
pub fn cpuinfo(node_arch: &str, cpus: usize) -> Option<String> {
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
            // Azure Dpsv5: Ampere Altra (Neoverse-N1), with LSE atomics
            s.push_str(&format!(
                "processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
            ));
        } else {
            s.push_str(&format!(
                "processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\nmodel name\t: Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz\nstepping\t: 6\ncpu MHz\t\t: 2793.437\ncache size\t: 49152 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {}\ncpu cores\t: {}\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch avx2 bmi1 bmi2 erms avx512f avx512dq avx512bw avx512vl\n\n",
                i / 2,
                cpus / 2
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
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGk").unwrap(), b"hi");
        assert!(cpuinfo("arm64", 2).unwrap().contains("atomics"));
    }
}
