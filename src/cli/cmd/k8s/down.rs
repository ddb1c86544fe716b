//! `archbench k8s down`: archbench's objects deleted, the namespace too when only they were
//! in it.

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s down`: what it deleted, and a namespace it kept and why.
pub fn down(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    d: &crate::cli::k8s_args::K8sDownArgs,
    stop: &crate::stop::Stop,
) -> anyhow::Result<i32> {
    let report = runtime.block_on(k8s::down(
        cluster,
        d.keep_namespace,
        d.wait.wait_timeout,
        stop,
    ))?;
    write_stdout(|out| {
        for what in &report.deleted {
            writeln!(out, "{what}: deleted")?;
        }
        if let Some((ns, others)) = &report.kept_namespace {
            writeln!(
                out,
                "Namespace {ns}: kept, it holds what is not archbench's: {}",
                others.join(", ")
            )?;
        }
        if report.deleted.is_empty() {
            writeln!(
                out,
                "nothing of archbench's in namespace {}",
                cluster.namespace
            )?;
        }
        Ok(())
    })?;
    Ok(0)
}
