//! `k8s fingerprint`: per architecture, the node's architecture and CPU, LSE atomics, the
//! pod's nginx executable as its bytes say it was built, and its `nginx -V`, with the
//! outline-atomics warning where it applies (the regression the multi-arch test plan hunted:
//! 167k vs 499k req/s).

use std::io::{self, Write};

use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::pod_build::ArchFingerprint;
use super::pods::{exec, pick};
use super::{Cluster, K8sError, Server};
use crate::monitor::fingerprint;
use crate::stats::ServerFingerprint;

/// Prints the server's executable on the pod's PATH (the one its version command runs),
/// bytes as they are.
fn read_program(server: Server) -> String {
    format!(r#"exe=$(command -v {}) && exec cat "$exe""#, server.name())
}

/// What says the server's version: `nginx -V` (its build, read further), `caddy version`.
fn version_command(server: Server) -> &'static str {
    match server {
        Server::Nginx => "nginx -V 2>&1",
        Server::Caddy => "caddy version 2>&1",
    }
}

/// `uname -m`'s spelling of a Kubernetes architecture.
fn machine(kube_arch: &str) -> &str {
    match kube_arch {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        other => other,
    }
}

/// The fingerprint of `variant`'s first pod, read once per pod and process.
pub async fn fingerprint(cluster: &Cluster, variant: &str) -> Result<ArchFingerprint, K8sError> {
    let pod = pick(cluster, variant, None).await?;
    let uid = pod.uid().unwrap_or_default();
    let inspected = || cluster.inspected.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = inspected().get(&uid).filter(|f| f.variant == variant) {
        return Ok(f.clone());
    }
    let (f, whole) = read_fingerprint(cluster, variant, &pod).await?;
    // Only a whole reading is kept: a failed exec or a node not found is tried again.
    if whole && !uid.is_empty() {
        inspected().insert(uid, f.clone());
    }
    Ok(f)
}

/// The pod's fingerprint, and whether every part of it was read (the node found, every
/// command exited 0).
async fn read_fingerprint(
    cluster: &Cluster,
    variant: &str,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Result<(ArchFingerprint, bool), K8sError> {
    let name = pod.name_any();
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    // A user whose Role covers only the namespace may not read nodes: the node's details
    // are unknown then, the pod's own (its CPU, its nginx) still read, as `status` does.
    let node = match Api::<Node>::all(cluster.client.clone())
        .get_opt(&node_name)
        .await
    {
        Ok(node) => node,
        Err(kube::Error::Api(s)) if s.code == 403 => None,
        Err(e) => return Err(api_error(e, "get", "nodes")),
    };
    let info = node
        .as_ref()
        .and_then(|n| n.status.as_ref()?.node_info.clone());
    let node_arch = info
        .as_ref()
        .map(|i| i.architecture.clone())
        .unwrap_or_else(|| "unknown".into());
    let cpuinfo = exec(cluster, &name, &["cat", "/proc/cpuinfo"], None).await?;
    let cpu_read = cpuinfo.exit_code == 0;
    let cpuinfo = cpuinfo.stdout_text();
    let lse_atomics =
        (machine(&node_arch) == "aarch64").then(|| crate::os::lse_in_cpuinfo(&cpuinfo));
    let image = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first()?.image.as_deref())
        .unwrap_or_default();
    let (nginx, server_read) = read_server(
        cluster,
        &name,
        Server::of_image(image),
        machine(&node_arch),
        lse_atomics,
    )
    .await?;
    let whole = node.is_some() && cpu_read && server_read;
    let f = ArchFingerprint {
        variant: variant.to_string(),
        pod: name,
        node: node_name,
        instance_type: node
            .as_ref()
            .and_then(|n| n.labels().get("node.kubernetes.io/instance-type").cloned())
            .unwrap_or_else(|| "-".into()),
        kernel: info
            .as_ref()
            .map(|i| i.kernel_version.clone())
            .unwrap_or_default(),
        cpu_model: crate::os::cpu_model_in(&cpuinfo),
        node_arch,
        lse_atomics,
        nginx,
    };
    Ok((f, whole))
}

/// The server's fingerprint as the pod runs it, and whether every command exited 0: its
/// executable's bytes, its version (nginx's `-V` with the build it tells), and what the
/// kernel runs as the pod's PID 1.
async fn read_server(
    cluster: &Cluster,
    pod: &str,
    server: Server,
    arch: &str,
    lse_atomics: Option<bool>,
) -> Result<(ServerFingerprint, bool), K8sError> {
    let v = exec(cluster, pod, &["sh", "-c", version_command(server)], None).await?;
    // The executable the version command ran, as the pod has it: what runs, whatever it says.
    let exe = exec(cluster, pod, &["sh", "-c", &read_program(server)], None).await?;
    // What the kernel runs as the pod's PID 1 (the server): qemu-user when it is emulated.
    // Not every image has readlink: without it, nothing is said.
    let runner = exec(cluster, pod, &["readlink", "/proc/1/exe"], None).await?;
    let whole = v.exit_code == 0 && exe.exit_code == 0;
    let exe_bytes = match exe.exit_code {
        0 => Ok(exe.stdout),
        code => Err(format!(
            "reading it in the pod exited {code}: {}",
            String::from_utf8_lossy(&exe.stderr).trim()
        )),
    };
    let read = fingerprint::with_executable(
        ServerFingerprint {
            executable: Some(format!("{} (in the pod)", server.name())),
            ..ServerFingerprint::default()
        },
        exe_bytes,
    );
    let version = v.stdout_text();
    let mut fp = match server {
        Server::Nginx => fingerprint::complete(read, Some(&version), arch, lse_atomics),
        Server::Caddy => fingerprint::complete(read, None, arch, lse_atomics),
    };
    if server == Server::Caddy {
        // "2.6.2" (Debian's), "v2.8.4 h1:…" (the official build's): Caddy's version is its whole story (no -V of flags to read).
        fp.version = version
            .lines()
            .next()
            .map(|l| format!("caddy {}", l.trim()));
    }
    let fp = match runner.exit_code {
        0 => fingerprint::with_runner(fp, &runner.stdout_text()),
        _ => fp,
    };
    Ok((fp, whole))
}

pub fn write_fingerprints(prints: &[ArchFingerprint], out: &mut dyn Write) -> io::Result<()> {
    for f in prints {
        writeln!(
            out,
            "{}: pod {} on node {} ({}, {})",
            f.variant, f.pod, f.node, f.node_arch, f.instance_type
        )?;
        writeln!(out, "  CPU      {}", f.cpu_model)?;
        if let Some(lse) = f.lse_atomics {
            writeln!(
                out,
                "  LSE      {}",
                if lse { "yes (ARMv8.1 atomics)" } else { "no" }
            )?;
        }
        if !f.kernel.is_empty() {
            writeln!(out, "  kernel   {}", f.kernel)?;
        }
        writeln!(
            out,
            "  nginx    {}",
            f.nginx
                .describe()
                .unwrap_or_else(|| "nginx -V printed no version".into())
        )?;
        if let Some(args) = &f.nginx.configure_arguments {
            writeln!(out, "  built    {args}")?;
        }
        if let Some(line) = f.nginx.binary_line() {
            writeln!(out, "  binary   {line}")?;
        }
        for w in &f.nginx.warnings {
            writeln!(out, "  WARNING: {w}")?;
        }
    }
    Ok(())
}
