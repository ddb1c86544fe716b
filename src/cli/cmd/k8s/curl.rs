//! `archbench k8s curl TARGET`: requests through a variant's Service, each answer's pod named,
//! and for several variants how the answers split.

use std::sync::atomic::Ordering;

use crate::cli::k8s_args::K8sCurlArgs;
use crate::cli::output::write_stdout;
use crate::cli::StopSignals;
use crate::k8s::{self, Cluster, K8sError};

/// Bad values before any cluster is asked: `--count 0` did nothing and exited 0, and a zero
/// `--timeout` was no timeout at all.
pub fn check(c: &K8sCurlArgs) -> Result<(), K8sError> {
    if c.count == 0 {
        return Err(K8sError::Usage(
            "--count must be at least 1 (requests to send)".into(),
        ));
    }
    if c.timeout.timeout.is_zero() {
        return Err(K8sError::Usage(
            "timeout must be above zero; use e.g. --timeout 2s".into(),
        ));
    }
    Ok(())
}

/// `k8s curl`: `--count` requests to the target's Service address from here; Ctrl-C stops
/// before the next one, and what was answered is still split and said.
pub fn curl(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    c: &K8sCurlArgs,
    signals: &StopSignals,
) -> anyhow::Result<i32> {
    let stop = &signals.stop;
    let targets = runtime.block_on(k8s::targets(
        cluster,
        std::slice::from_ref(&c.target),
        (k8s::Vantage::Outside, k8s::Port::Http),
        runtime.handle(),
    ))?;
    let rows = runtime.block_on(k8s::status(cluster))?;
    let variant_of = rows
        .iter()
        .map(|r| (r.pod.clone(), r.variant.clone()))
        .collect();
    let mut answers = Vec::new();
    for t in &targets {
        let addr = t
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let addr = if addr.contains(':') {
            addr
        } else {
            format!("{addr}:80")
        };
        for n in 0..c.count {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let f = runtime.block_on(k8s::fetch(&addr, "/", c.timeout.timeout))?;
            write_stdout(|out| {
                writeln!(
                    out,
                    "{} {}: {} in {:.2} ms, answered by {}",
                    t.name,
                    n + 1,
                    f.status,
                    f.elapsed.as_secs_f64() * 1000.0,
                    f.answered_by
                        .as_deref()
                        .unwrap_or("(the body does not name its pod)")
                )?;
                if n == 0 {
                    writeln!(out, "{}", f.body_text())?;
                }
                Ok(())
            })?;
            answers.push(f);
        }
    }
    if c.target == k8s::LoadSelection::Multiarch || targets.len() > 1 {
        let by = k8s::split(&answers, &variant_of);
        write_stdout(|out| {
            let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
            writeln!(out, "answers by variant: {}", parts.join(", "))
        })?;
    }
    if stop.load(Ordering::Relaxed) {
        crate::stderr_line!(
            "archbench: interrupted after {} of {} requests",
            answers.len(),
            c.count * targets.len() as u64
        );
        return Ok(signals.exit_code());
    }
    Ok(0)
}
