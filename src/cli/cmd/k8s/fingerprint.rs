//! `archbench k8s fingerprint`: each running variant's node, CPU and nginx build.

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s fingerprint`: one per variant that runs.
pub fn fingerprint(runtime: &tokio::runtime::Runtime, cluster: &Cluster) -> anyhow::Result<i32> {
    let rows = runtime.block_on(k8s::status(cluster))?;
    let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    variants.dedup();
    // A variant that cannot be read (its pods restarting) is said, and the others still
    // shown: one such pod made the whole command fail without naming it.
    let mut prints = Vec::new();
    let mut unread = Vec::new();
    for variant in variants {
        match runtime.block_on(k8s::fingerprint(cluster, variant)) {
            Ok(f) => prints.push(f),
            Err(e) => unread.push(format!("{variant}: {e}")),
        }
    }
    write_stdout(|out| k8s::write_fingerprints(&prints, out))?;
    for line in &unread {
        crate::stderr_line!("archbench: {line}");
    }
    Ok(if unread.is_empty() {
        0
    } else {
        crate::cli::EXIT_FAILURE
    })
}
