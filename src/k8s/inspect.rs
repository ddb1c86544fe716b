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
use super::{Cluster, K8sError};
use crate::monitor::fingerprint;
use crate::stats::ServerFingerprint;

/// Prints the nginx executable on the pod's PATH (the one `nginx -V` runs), bytes as they are.
const READ_NGINX: &str = r#"exe=$(command -v nginx) && exec cat "$exe""#;

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
    let node = Api::<Node>::all(cluster.client.clone())
        .get_opt(&node_name)
        .await
        .map_err(|e| api_error(e, "get", "nodes"))?;
    let info = node
        .as_ref()
        .and_then(|n| n.status.as_ref()?.node_info.clone());
    let node_arch = info
        .as_ref()
        .map(|i| i.architecture.clone())
        .unwrap_or_else(|| "unknown".into());
    let cpuinfo = exec(cluster, &name, &["cat", "/proc/cpuinfo"], None).await?;
    let v = exec(cluster, &name, &["sh", "-c", "nginx -V 2>&1"], None).await?;
    // The executable `nginx -V` ran, as the pod has it: what runs, whatever -V says.
    let exe = exec(cluster, &name, &["sh", "-c", READ_NGINX], None).await?;
    // What the kernel runs as the pod's PID 1 (nginx): qemu-user when it is emulated. Not
    // every image has readlink: without it, nothing is said.
    let runner = exec(cluster, &name, &["readlink", "/proc/1/exe"], None).await?;
    let whole = node.is_some() && cpuinfo.exit_code == 0 && v.exit_code == 0 && exe.exit_code == 0;
    let cpuinfo = cpuinfo.stdout_text();
    let lse_atomics =
        (machine(&node_arch) == "aarch64").then(|| crate::os::lse_in_cpuinfo(&cpuinfo));
    let exe_bytes = match exe.exit_code {
        0 => Ok(exe.stdout),
        code => Err(format!(
            "reading it in the pod exited {code}: {}",
            String::from_utf8_lossy(&exe.stderr).trim()
        )),
    };
    let nginx = fingerprint::complete(
        fingerprint::with_executable(
            ServerFingerprint {
                executable: Some("nginx (in the pod)".into()),
                ..ServerFingerprint::default()
            },
            exe_bytes,
        ),
        Some(&v.stdout_text()),
        machine(&node_arch),
        lse_atomics,
    );
    let nginx = match runner.exit_code {
        0 => fingerprint::with_runner(nginx, &runner.stdout_text()),
        _ => nginx,
    };
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
