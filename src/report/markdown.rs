//! Markdown: the comparison table (or a single run's summary) ready to paste into a pull
//! request.

use std::io::{self, Write};

use super::{MarkdownReport, Report};
use crate::compare::{ComparisonResult, MetricComparison, MetricSummary, ALPHA};
use crate::stats::{LatencySummary, RunResult};
use crate::units::grouped;
use crate::units::metric_figure as figure;

impl Report<ComparisonResult> for MarkdownReport {
    fn write(&self, c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        let base = c.targets.first().map_or("-", |t| t.name.as_str());
        writeln!(out, "### archbench compare: baseline `{base}`")?;
        writeln!(out)?;
        write_table_head(c, base, out)?;
        for m in &c.metrics {
            write_metric_row(m, out)?;
        }
        writeln!(out)?;
        write_method(c, out)?;
        writeln!(out)?;
        let lines = super::placement_lines(&c.placements, &c.scaling, "at the median");
        for (label, line) in &lines {
            writeln!(out, "- **{label}** {line}")?;
        }
        if !lines.is_empty() {
            writeln!(out)?;
        }
        let errors: Vec<(&str, String)> = c
            .targets
            .iter()
            .filter_map(|t| Some((t.name.as_str(), super::compare::errors_by_kind(t)?)))
            .collect();
        for (name, kinds) in &errors {
            writeln!(out, "- **Errors {name}** {kinds} (its runs together)")?;
        }
        if !errors.is_empty() {
            writeln!(out)?;
        }
        writeln!(
            out,
            "<details><summary>Reproduce one run of each target</summary>"
        )?;
        writeln!(out)?;
        for t in &c.targets {
            writeln!(out, "    # {}", t.name)?;
            writeln!(out, "    {}", t.command)?;
        }
        writeln!(out)?;
        writeln!(out, "</details>")
    }
}

/// The table's header row (metric, each target, each target against the baseline) and its
/// alignment row.
fn write_table_head(c: &ComparisonResult, base: &str, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "| metric |")?;
    for (i, t) in c.targets.iter().enumerate() {
        if i == 0 {
            write!(out, " {} (baseline) |", t.name)?;
        } else {
            write!(out, " {} |", t.name)?;
        }
    }
    for t in c.targets.iter().skip(1) {
        write!(out, " {} vs {base} |", t.name)?;
    }
    writeln!(out)?;
    write!(out, "|---|")?;
    for _ in &c.targets {
        write!(out, "---:|")?;
    }
    for _ in c.targets.iter().skip(1) {
        write!(out, "---|")?;
    }
    writeln!(out)
}

/// A metric's row: each target's median (min–max), then each difference against the
/// baseline.
fn write_metric_row(m: &MetricComparison, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "| {} |", super::compare::metric_label(m))?;
    for t in &m.targets {
        match (t.median, t.min, t.max) {
            (Some(median), Some(lo), Some(hi)) => write!(
                out,
                " {} ({}–{}) |",
                figure(median, &m.unit),
                figure(lo, &m.unit),
                figure(hi, &m.unit)
            )?,
            _ => write!(out, " – |")?,
        }
    }
    for t in m.targets.iter().skip(1) {
        write_delta_cell(t, out)?;
    }
    writeln!(out)
}

/// A target's difference against the baseline: the verdict in bold with its interval and
/// p-value, "~" with its p-value, or the bare difference without a verdict.
fn write_delta_cell(t: &MetricSummary, out: &mut dyn Write) -> io::Result<()> {
    let Some(d) = &t.versus_baseline else {
        return write!(out, " – |");
    };
    let judgement = if d.better == Some(true) {
        "better"
    } else {
        "worse"
    };
    match (d.ci_low, d.ci_high, d.p_value) {
        (_, _, Some(p)) if d.verdict == "~" => write!(out, " ~ (p={p:.3}) |"),
        (_, _, Some(p)) if d.from_zero => write!(out, " **{}** p={p:.3} {judgement} |", d.verdict),
        _ if d.from_zero => write!(out, " up from 0, no verdict |"),
        (Some(lo), Some(hi), Some(p)) => write!(
            out,
            " **{}** [{:+.1}%, {:+.1}%] p={p:.3} {judgement} |",
            d.verdict,
            lo * 100.0,
            hi * 100.0,
        ),
        _ => write!(out, " {:+.1}%, no verdict |", d.relative * 100.0),
    }
}

/// The line under the table: runs, schedule, what the figures are and the test, whether
/// the comparison was interrupted; then why there is no verdict, when there is none.
fn write_method(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    let schedule = c.schedule.describe();
    writeln!(
        out,
        "{} runs per target, {schedule}{}. Medians (min–max). Mann-Whitney U, two-sided, α={ALPHA}; ~ = no significant difference; intervals: 95% bootstrap of the relative difference of medians.{}",
        c.runs_per_target,
        if c.warmup { ", one warm-up run each discarded" } else { "" },
        if c.interrupted { " **Interrupted: partial results.**" } else { "" }
    )?;
    for why in c.no_verdict_reasons() {
        writeln!(out, "No verdict: {why}.")?;
    }
    Ok(())
}

impl Report<RunResult> for MarkdownReport {
    fn write(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let l = &r.latency.total;
        writeln!(out, "### archbench run: `{} {}`", r.plan.method, r.plan.url)?;
        writeln!(out)?;
        writeln!(
            out,
            "| req/s | p50 (µs) | p90 (µs) | p99 (µs) | p99.9 (µs) | errors | limiter |"
        )?;
        writeln!(out, "|---:|---:|---:|---:|---:|---:|---|")?;
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            figure(r.totals.requests_per_sec, "req/s"),
            latency(l, l.p50_us),
            latency(l, l.p90_us),
            latency(l, l.p99_us),
            latency(l, l.p99_9_us),
            grouped(r.totals.errors),
            r.limiter.side.as_str()
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "{} connections, {} threads, {:.2} s, {} requests answered{}.",
            r.plan.connections,
            r.plan.threads,
            r.totals.elapsed_s,
            grouped(r.totals.requests),
            super::text::unanswered_note(&r.totals)
        )
    }
}

/// One figure (`us`) of a latency summary, "–" when nothing was recorded (never a 0).
fn latency(l: &LatencySummary, us: u64) -> String {
    l.recorded().map_or("–".into(), |_| grouped(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rise from a zero baseline has a verdict and a p-value but no interval.
    #[test]
    fn a_rise_from_zero_is_said_without_an_interval() {
        let t = super::super::rise_from_zero();
        let mut cell = Vec::new();
        write_delta_cell(&t, &mut cell).unwrap();
        assert_eq!(
            String::from_utf8(cell).unwrap(),
            " **up from 0** p=0.008 worse |"
        );
    }
}
