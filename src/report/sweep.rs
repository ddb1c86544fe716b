//! The text layout of a sweep: per target, a row per load (throughput, percentiles, errors,
//! server CPU, SLO), then its knee, why the ladder stopped early for it, and its USL fit.

use std::io::{self, Write};

use super::{MarkdownReport, Report, TextReport};
use crate::sweep::{LadderKind, SweepResult, TargetSweep};
use crate::units::{grouped_rounded, wrk_time_us};

impl Report<SweepResult> for TextReport {
    fn write(&self, s: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
        write_heading(s, out)?;
        for t in &s.targets {
            writeln!(out, "\n{}", t.name)?;
            write_points(s.ladder, t, out)?;
            // A search's answer stands for the knee: its probes are no ladder.
            if let Some(m) = s.find_max.iter().find(|m| m.name == t.name) {
                writeln!(out, "  Find max   {}", m.verdict)?;
                continue;
            }
            writeln!(out, "  Knee       {}", t.knee_reason)?;
            if let Some(cost) = cost_line(t) {
                writeln!(out, "  Cost       {cost}")?;
            }
            if let Some(stop) = &t.stopped {
                writeln!(
                    out,
                    "  Stopped    after {}: {}; higher loads not run",
                    load_text(stop.after),
                    stop.reason
                )?;
            }
            write_usl(t, out)?;
        }
        let mut lines = super::placement_lines(&s.placements, &s.scaling, "at the knee");
        lines.extend(per_dollar(s).into_iter().map(|l| ("Per dollar", l)));
        if !lines.is_empty() {
            writeln!(out)?;
        }
        for (label, line) in lines {
            writeln!(out, "  {label:<10} {line}")?;
        }
        Ok(())
    }
}

/// With `--cost`: a million requests at the knee, and the price given ("0.06945 per million
/// requests at the knee (0.1000/h)"); the text's Cost line and the page's.
pub(super) fn cost_line(t: &TargetSweep) -> Option<String> {
    let (price, cost) = (t.price_per_hour?, t.cost_per_million_at_knee?);
    Some(format!(
        "{} per million requests at the knee ({}/h)",
        super::compare::money(cost),
        super::compare::money(price)
    ))
}

/// The guide's claim, measured: each priced target's requests per dollar at its knee against
/// the first priced one's ("large: 0.78x the requests per dollar of small at the knee, p99<5ms").
pub(super) fn per_dollar(s: &SweepResult) -> Vec<String> {
    let priced: Vec<(&str, f64)> = s
        .targets
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.cost_per_million_at_knee?)))
        .filter(|(_, c)| *c > 0.0)
        .collect();
    let Some(&(base, base_cost)) = priced.first() else {
        return Vec::new();
    };
    let under = if s.slo.is_empty() {
        String::new()
    } else {
        format!(", {}", s.slo.join(", "))
    };
    let withheld = |name: &str| {
        s.targets
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| Some(format!("{name}: {}", t.withheld.as_deref()?)))
    };
    priced[1..]
        .iter()
        .map(
            |(name, cost)| match withheld(name).or_else(|| withheld(base)) {
                Some(why) => format!("{name}: no per-dollar verdict against {base}: {why}"),
                None => format!(
                    "{name}: {:.2}x the requests per dollar of {base} at the knee{under}",
                    base_cost / cost
                ),
            },
        )
        .collect()
}

/// The first line: the ladder's loads, the duration and runs of each step, the SLO.
fn write_heading(s: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let loads: Vec<String> = s.loads.iter().map(|l| load_text(*l)).collect();
    let what = if s.find_max.is_empty() {
        format!(
            "{} {} ({} steps)",
            s.ladder.unit(),
            loads.join(", "),
            s.loads.len()
        )
    } else {
        let range = match crate::sweep::find_max::range_asked(&s.loads) {
            (lo, Some(hi)) => format!("{} to {}", load_text(lo), load_text(hi)),
            (lo, None) => format!("{} up", load_text(lo)),
        };
        format!(
            "--find-max from {range} {} ({} probes)",
            s.ladder.unit(),
            s.steps.len()
        )
    };
    let plural = if s.runs_per_step == 1 { "" } else { "s" };
    let runs = if s.find_max.is_empty() {
        format!("{} run{plural} per step", s.runs_per_step)
    } else {
        format!("1 run per probe, {} at the boundary", s.runs_per_step)
    };
    writeln!(
        out,
        "archbench sweep: {what}, {:.1}s per run, {runs}{}{}",
        s.duration_s,
        if s.slo.is_empty() {
            String::new()
        } else {
            format!("; SLO {}", s.slo.join(","))
        },
        if s.interrupted { " [INTERRUPTED]" } else { "" }
    )
}

/// A target's table: a row per load with its throughput, percentiles, errors, server CPU
/// and SLO verdict.
fn write_points(ladder: LadderKind, t: &TargetSweep, out: &mut dyn Write) -> io::Result<()> {
    let first = match ladder {
        LadderKind::Connections => "conns",
        LadderKind::Rates => "offered",
    };
    writeln!(
        out,
        "  {first:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>11} {:>10} {:>5}",
        "req/s", "p50", "p90", "p99", "p99.9", "errors", "cores", "req/CPU-s", "memory", "SLO"
    )?;
    for p in &t.points {
        writeln!(
            out,
            "  {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>6.2}% {:>7} {:>11} {:>10} {:>5}",
            load_text(p.load),
            grouped_rounded(p.requests_per_sec),
            p.p50_us.map_or("-".into(), wrk_time_us),
            p.p90_us.map_or("-".into(), wrk_time_us),
            p.p99_us.map_or("-".into(), wrk_time_us),
            p.p99_9_us.map_or("-".into(), wrk_time_us),
            p.error_percent,
            p.server_cores.map_or("-".into(), |c| format!("{c:.2}")),
            p.requests_per_server_cpu_s
                .map_or("-".into(), grouped_rounded),
            p.server_memory_bytes
                .map_or("-".into(), crate::units::bytes_iec),
            match p.slo_passed {
                Some(true) => "pass",
                Some(false) => "FAIL",
                None => "-",
            }
        )?;
    }
    if let Some(note) = cut_short_note(t) {
        writeln!(out, "  ({note})")?;
    }
    Ok(())
}

/// The load where an interruption cut the target's run short, said beside its table.
pub(super) fn cut_short_note(t: &TargetSweep) -> Option<String> {
    let p = t.points.iter().find(|p| p.cut_short)?;
    Some(format!(
        "at {} the run was cut short by the interruption: shown, not judged",
        load_text(p.load)
    ))
}

/// The USL line: the fit's coefficients, where throughput peaks and how well it fits, or
/// why there is no fit.
fn write_usl(t: &TargetSweep, out: &mut dyn Write) -> io::Result<()> {
    match (&t.usl, &t.usl_refused) {
        (Some(f), _) => {
            let peak = match (f.peak_concurrency, f.peak_throughput) {
                (Some(n), Some(x)) => format!(
                    "throughput peaks at {n:.0} connections ({} req/s)",
                    grouped_rounded(x)
                ),
                (None, Some(x)) => format!(
                    "no peak; throughput approaches {} req/s",
                    grouped_rounded(x)
                ),
                _ => "throughput grows linearly".into(),
            };
            writeln!(
                out,
                "  USL        σ = {:.4} (contention), κ = {:.6} (coherency), λ = {} req/s per connection; {peak}; R² = {:.3}",
                f.sigma,
                f.kappa,
                grouped_rounded(f.lambda),
                f.r_squared
            )
        }
        (None, Some(why)) => writeln!(out, "  USL        {why}"),
        (None, None) => Ok(()),
    }
}

/// The sweep's text layout in a fenced block: its columns line up only in a fixed font.
impl Report<SweepResult> for MarkdownReport {
    fn write(&self, s: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "```")?;
        TextReport.write(s, out)?;
        writeln!(out, "```")
    }
}

/// 1000 → "1k", 1500 → "1.5k", 8 → "8".
pub(super) fn load_text(v: f64) -> String {
    if v >= 1000.0 && (v / 1000.0).fract().abs() < 1e-9 {
        format!("{}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
