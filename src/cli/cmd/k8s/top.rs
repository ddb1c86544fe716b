//! `archbench k8s top`: each pod's CPU and memory (its cgroup through exec, else the metrics
//! API), once or every second with `--watch`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s top`.
pub fn top(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    watch: bool,
    stop: &AtomicBool,
) -> anyhow::Result<i32> {
    loop {
        // Listed afresh each time: a restarted pod is followed by its new name.
        let pods = runtime.block_on(k8s::pods_of(cluster, None))?;
        if pods.is_empty() {
            runtime.block_on(k8s::namespace_exists(&cluster.client, &cluster.namespace))?;
        }
        let usage = runtime.block_on(k8s::top(cluster, &pods))?;
        let w = usage
            .iter()
            .map(|u| u.variant.len() + 2)
            .max()
            .unwrap_or(0)
            .max(9);
        write_stdout(|out| {
            writeln!(
                out,
                "{:<w$}{:<40}{:>12}{:>14}  SOURCE",
                "VARIANT", "POD", "CPU (cores)", "MEMORY"
            )?;
            for u in &usage {
                writeln!(
                    out,
                    "{:<w$}{:<40}{:>12}{:>14}  {}",
                    u.variant,
                    u.pod,
                    u.cores.map_or("-".into(), |c| format!("{c:.3}")),
                    u.memory_bytes
                        .map_or("-".into(), |m| crate::units::bytes_iec(m as f64)),
                    u.source
                )?;
            }
            if usage.is_empty() {
                writeln!(
                    out,
                    "(no pods of archbench's; `archbench k8s up` creates them)"
                )?;
            }
            Ok(())
        })?;
        if !watch || stop.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        write_stdout(|out| writeln!(out))?;
    }
}
