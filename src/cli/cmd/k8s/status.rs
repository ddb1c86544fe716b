//! `archbench k8s status`: the setup's pods, then what each variant runs (its CPU and nginx
//! build).

use std::io::{self, Write};
use std::time::Duration;

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s status`: the pods and, under them, each variant's build.
pub fn status(runtime: &tokio::runtime::Runtime, cluster: &Cluster) -> anyhow::Result<i32> {
    let rows = runtime.block_on(k8s::status(cluster))?;
    let builds = builds(runtime, cluster, &rows);
    write_stdout(|out| {
        k8s::write_status(&rows, out)?;
        write_builds(&builds, out)
    })?;
    Ok(0)
}

/// What each variant runs: its pod's CPU model and nginx build (None where exec is refused:
/// a reader may list pods without exec).
fn builds(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    rows: &[k8s::PodRow],
) -> Vec<(String, Result<k8s::ArchFingerprint, String>)> {
    let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    variants.dedup();
    variants
        .into_iter()
        .map(|v| {
            let print = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(20), k8s::fingerprint(cluster, v)).await
            });
            // Why it was not read, as it was not: a guess ("exec is not allowed") was
            // wrong where the nodes were what RBAC hid.
            let print = match print {
                Ok(read) => read.map_err(|e| e.to_string()),
                Err(_) => Err("no answer within 20 s".to_string()),
            };
            (v.to_string(), print)
        })
        .collect()
}

/// Under the status table: per variant, the CPU it runs on and its nginx build.
fn write_builds(
    builds: &[(String, Result<k8s::ArchFingerprint, String>)],
    out: &mut dyn Write,
) -> io::Result<()> {
    if builds.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    for (variant, print) in builds {
        match print {
            Ok(f) => {
                let nginx = f
                    .nginx
                    .describe()
                    .unwrap_or_else(|| "nginx -V printed no version".into());
                writeln!(out, "{variant}: {} ({}); {nginx}", f.cpu_model, f.node_arch)?;
                if let Some(line) = f.nginx.binary_line() {
                    writeln!(out, "  {line}")?;
                }
                for w in &f.nginx.warnings {
                    writeln!(out, "  WARNING: {w}")?;
                }
            }
            Err(why) => writeln!(out, "{variant}: CPU and nginx build not read: {why}")?,
        }
    }
    Ok(())
}
