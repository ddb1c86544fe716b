//! `archbench k8s curl TARGET`: requests through a variant's Service, each answer's pod named,
//! and for several variants how the answers split.

use crate::cli::output::write_stdout;
use crate::k8s::{self, Cluster};

/// `k8s curl`: `--count` requests to the target's Service address from here.
pub fn curl(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    c: &crate::cli::k8s_args::K8sCurlArgs,
) -> anyhow::Result<i32> {
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
    Ok(0)
}
