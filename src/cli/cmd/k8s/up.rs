//! `archbench k8s up`: the setup applied, what it took over, the status.

use crate::cli::output::write_stdout;
use crate::cli::progress::ProgressLine;
use crate::k8s::{self, Cluster, Setup};

/// `k8s up`: what it applied (and took over), what stays unreachable from here, the status.
pub fn up(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    setup: &Setup,
    stop: &crate::stop::Stop,
) -> anyhow::Result<i32> {
    let mut line = ProgressLine::new(true);
    let report = runtime.block_on(k8s::up(cluster, setup, &mut |l| line.message(l), stop));
    line.finish();
    let report = report?;
    note_not_answering(&report.not_answering);
    write_stdout(|out| {
        for a in &report.changes {
            write!(out, "{}: {}", a.what, a.change.as_str())?;
            if !a.took_over.is_empty() {
                write!(out, ", taking over {}", a.took_over.join(", "))?;
            }
            writeln!(out)?;
        }
        if report.changed_nothing() {
            writeln!(out, "nothing changed: the cluster already runs this setup")?;
        }
        writeln!(out)?;
        k8s::write_status(&report.rows, out)
    })?;
    Ok(0)
}

/// On stderr, each Service address that did not accept connections from here when `up` or
/// `config` ended.
pub fn note_not_answering(addresses: &[String]) {
    for a in addresses {
        crate::stderr_line!(
            "archbench: note: {a} does not accept every connection from here yet (its pods are \
             ready; a load from this machine would fail until it does)"
        );
    }
}
