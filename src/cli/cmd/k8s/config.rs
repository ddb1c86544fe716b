//! `archbench k8s config FILE`: checked in a pod, rolled out, rolled back when the new pods
//! fail.

use super::nginx_config;
use super::up::note_not_answering;
use crate::cli::output::write_stdout;
use crate::cli::progress::ProgressLine;
use crate::cli::EXIT_FAILURE;
use crate::k8s::{self, Cluster, Reconfigured};

/// `k8s config FILE`: checked in a pod, rolled, rolled back when the new pods fail.
pub fn config(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    c: &crate::cli::k8s_args::K8sConfigArgs,
    stop: &crate::stop::Stop,
) -> anyhow::Result<i32> {
    let config = nginx_config(&c.config)?;
    let mut line = ProgressLine::new(true);
    let done = runtime.block_on(k8s::reconfigure(
        cluster,
        config,
        c.wait.wait_timeout,
        &mut |l| line.message(l),
        stop,
    ));
    line.finish();
    Ok(match done? {
        Reconfigured::Unchanged => {
            write_stdout(|out| {
                writeln!(
                    out,
                    "nothing changed: the pods already run this configuration"
                )
            })?;
            0
        }
        Reconfigured::Applied {
            rows,
            checked,
            not_answering,
        } => {
            note_not_answering(&not_answering);
            write_stdout(|out| {
                writeln!(out, "{checked}")?;
                writeln!(out, "applied; the new pods:")?;
                k8s::write_status(&rows, out)
            })?;
            0
        }
        Reconfigured::RolledBack { why } => {
            crate::stderr_line!(
                "archbench: the new configuration failed, the previous one is back: {why}"
            );
            EXIT_FAILURE
        }
    })
}
