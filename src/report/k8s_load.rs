//! The layouts only `archbench k8s load` prints: the guide's script's own (`--layout wrk`),
//! and how each target's in-cluster workers did.

use std::io::{self, Write};

use super::WrkReport;
use crate::compare::{ComparePlan, ComparisonResult};
use crate::stats::LimiterSide;

/// The guide's script's own layout (`--layout wrk`): each target's result as wrk prints it,
/// under "NAME RESULTS:", then the script's closing line.
pub struct ScriptReport<'a> {
    pub plan: &'a ComparePlan,
}

impl ScriptReport<'_> {
    pub fn write(&self, result: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        for (t, c) in result.targets.iter().zip(&self.plan.contenders) {
            writeln!(out, "{} RESULTS:", t.name.to_uppercase())?;
            if let Some(run) = t.runs.first() {
                WrkReport::preamble(&c.plan.summary(), out)?;
                WrkReport { latency: false }.write_body(run, out)?;
            }
        }
        Ok(())
    }

    pub fn done(result: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        let done = match result.targets.len() {
            1 => "Test completed",
            2 => "Both tests completed",
            _ => "All tests completed",
        };
        writeln!(out, "{done}")
    }
}

/// How each target's workers did: how many merged, how far apart they started, which were
/// lost; with `--per-worker`, each one's own figures, so a slow one stands out.
pub fn write_workers(
    result: &ComparisonResult,
    per_worker: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    for t in &result.targets {
        for (n, run) in t.runs.iter().enumerate() {
            let skew = run
                .start_skew_s
                .map(|d| format!(", first sends {:.3} ms apart", d * 1e3))
                .unwrap_or_default();
            writeln!(
                out,
                "{} run {}: {} workers merged{skew}{}",
                t.name,
                n + 1,
                run.sources.len(),
                match run.lost_sources.len() {
                    0 => String::new(),
                    k => format!(", {k} lost"),
                }
            )?;
            if per_worker {
                // First sends less their place in the open-loop schedule: how late each
                // worker began, not when it was due.
                let first = run
                    .sources
                    .iter()
                    .filter_map(crate::stats::first_send_vs_schedule)
                    .min();
                let w = run.sources.iter().map(|s| s.file.len()).max().unwrap_or(6);
                writeln!(
                    out,
                    "  {:<w$} {:>10} {:>11} {:>7} {:>11} {:>8}  client-bound",
                    "worker", "requests", "req/s", "errors", "first send", "busiest"
                )?;
                for s in &run.sources {
                    let offset = crate::stats::first_send_vs_schedule(s)
                        .zip(first)
                        .and_then(|(f, lo)| f.duration_since(lo).ok())
                        .map_or("-".to_string(), |d| {
                            format!("+{:.3}ms", d.as_secs_f64() * 1e3)
                        });
                    let bound = matches!(s.limiter.side, LimiterSide::Client | LimiterSide::Both);
                    writeln!(
                        out,
                        "  {:<w$} {:>10} {:>11.1} {:>7} {:>11} {:>7.0}%  {}",
                        s.file,
                        s.totals.requests,
                        s.totals.requests_per_sec,
                        s.totals.errors,
                        offset,
                        s.client.busiest_worker_percent,
                        if bound { "yes" } else { "no" }
                    )?;
                }
            }
            for l in &run.lost_sources {
                writeln!(
                    out,
                    "  lost {}: {} (its {} connections are missing)",
                    l.name, l.reason, l.connections
                )?;
            }
        }
    }
    Ok(())
}
