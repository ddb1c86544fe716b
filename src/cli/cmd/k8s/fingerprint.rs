//! `archbench k8s fingerprint`: each running variant's node, CPU and nginx build.

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s fingerprint`: one per variant that runs.
pub fn fingerprint(runtime: &tokio::runtime::Runtime, cluster: &Cluster) -> anyhow::Result<i32> {
    let rows = runtime.block_on(k8s::status(cluster))?;
    let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    variants.dedup();
    let mut prints = Vec::new();
    for variant in variants {
        prints.push(runtime.block_on(k8s::fingerprint(cluster, variant))?);
    }
    write_stdout(|out| k8s::write_fingerprints(&prints, out))?;
    Ok(0)
}
