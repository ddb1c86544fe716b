//! `k8s load --tls` and `k8s sweep --tls`: the certificate the loads from here pin, read from
//! the setup's Secret and kept in the run's directory (so the reproduce line names a file
//! that holds it; in-cluster workers mount the Secret itself).

use std::path::Path;

use anyhow::Context as _;

use crate::cli::plan;
use crate::http::tls::PinnedCert;
use crate::k8s::{self, Cluster};

/// The file the certificate is saved as in the run's directory.
const FILE: &str = "nginx-tls.crt";

/// With `tls`, the Secret's certificate, saved in `dir` and pinned; None without.
pub fn pinned(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    tls: bool,
    dir: &Path,
) -> anyhow::Result<Option<PinnedCert>> {
    if !tls {
        return Ok(None);
    }
    let pem = runtime.block_on(k8s::tls::pinned(cluster))?;
    let path = dir.join(FILE);
    std::fs::write(&path, &pem).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(plan::pinned_cert(Some(&path))?)
}
