//! The side-by-side comparison table: medians with their range, the difference against the
//! baseline with its interval, the test's p-value and verdict, and how to reproduce each run.

use std::io::{self, Write};

use super::{Report, TextReport};
use crate::compare::{ComparisonResult, TargetRuns, ALPHA};
use crate::units::metric_figure as figure;

impl Report<ComparisonResult> for TextReport {
    fn write(&self, c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        write_heading(c, out)?;
        writeln!(out)?;
        write_table(c, out)?;
        writeln!(out)?;
        write_method(c, out)?;
        for t in &c.slo {
            super::write_slo(&format!("SLO {}", t.name), &t.outcome, out)?;
        }
        write_costs(c, out)?;
        for (label, line) in super::placement_lines(&c.placements, &c.scaling, "at the median") {
            writeln!(out, "  {label:<10} {line}")?;
        }
        write_client(c, out)?;
        for t in &c.targets {
            write_target_notes(t, out)?;
        }
        writeln!(out)?;
        writeln!(out, "  Reproduce one run of each target:")?;
        for t in &c.targets {
            writeln!(out, "    {}: {}", t.name, t.command)?;
        }
        Ok(())
    }
}

/// The first line: the baseline, runs per target, schedule, warm-ups, interruption.
fn write_heading(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    let schedule = c.schedule.describe();
    writeln!(
        out,
        "archbench compare: baseline {}; {} runs per target, {schedule}{}{}",
        c.targets.first().map_or("-", |t| t.name.as_str()),
        c.runs_per_target,
        if c.warmup {
            ", one warm-up run each discarded"
        } else {
            ""
        },
        if c.interrupted { "  [INTERRUPTED]" } else { "" }
    )
}

/// What the table's figures are (medians, the test, the intervals) and why there is no
/// verdict, when there is none.
fn write_method(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "  Medians over runs [min..max]. Verdicts: Mann-Whitney U test, two-sided, alpha={ALPHA}; \"~\" = no significant difference."
    )?;
    writeln!(
        out,
        "  Intervals: 95% bootstrap of the relative difference of medians against the baseline."
    )?;
    for why in c.no_verdict_reasons() {
        writeln!(out, "  No verdict: {why}.")?;
    }
    Ok(())
}

/// One Cost line per priced target (see [`cost_sentence`]).
fn write_costs(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    for t in &c.cost {
        writeln!(out, "  Cost       {}", cost_sentence(c, t))?;
    }
    Ok(())
}

/// A priced target's cost, as the text and HTML reports say it: a million requests
/// at its median throughput, and how much less or more that is than the first target's, with
/// the requests per dollar that makes and whether both met the SLO.
pub(super) fn cost_sentence(c: &ComparisonResult, t: &crate::compare::TargetCost) -> String {
    let first = c
        .cost
        .first()
        .and_then(|f| f.cost_per_million.map(|v| (f, v)));
    let per_million = match t.cost_per_million {
        Some(v) => format!(
            "{} per million requests at {} req/s",
            money(v),
            crate::units::grouped_rounded(t.requests_per_sec)
        ),
        None => "nothing answered, no cost per request".into(),
    };
    let withheld = [Some(t), first.map(|(f, _)| f)]
        .into_iter()
        .flatten()
        .find_map(|c| Some(format!("{}: {}", c.name, c.withheld.as_deref()?)));
    let versus = match (first, t.cost_per_million, withheld) {
        (Some((f, _)), Some(_), Some(why)) if f.name != t.name => {
            format!(" (no per-dollar verdict against {}: {why})", f.name)
        }
        (Some((f, base)), Some(v), None) if f.name != t.name && base > 0.0 && v > 0.0 => {
            let d = (v / base - 1.0) * 100.0;
            format!(
                " ({:.1}% {} than {}: {:.2}x its requests per dollar{})",
                d.abs(),
                if d <= 0.0 { "less" } else { "more" },
                f.name,
                base / v,
                under_slo(c, &f.name, &t.name)
            )
        }
        _ => String::new(),
    };
    let basis = t
        .basis
        .as_ref()
        .map(|b| format!(" [{b}]"))
        .unwrap_or_default();
    format!(
        "{} at {}/h{basis}: {per_million}{versus}",
        t.name,
        money(t.price_per_hour)
    )
}

/// With `--slo`: whether the two targets a cost line compares both met it, so the ratio is
/// the guide's claim measured ("at p99<5ms"), or which one missed it.
fn under_slo(c: &ComparisonResult, base: &str, name: &str) -> String {
    let outcome = |n: &str| c.slo.iter().find(|t| t.name == n).map(|t| &t.outcome);
    let (Some(b), Some(t)) = (outcome(base), outcome(name)) else {
        return String::new();
    };
    let conditions: Vec<&str> = t.conditions.iter().map(|c| c.condition.as_str()).collect();
    match (b.passed, t.passed) {
        (true, true) => format!(" at {}", conditions.join(", ")),
        (true, false) => format!(", but {name} misses the SLO"),
        (false, true) => format!(", but {base} misses the SLO"),
        (false, false) => ", but both miss the SLO".into(),
    }
}

/// The client machine of the first run: architecture, CPU, cores, kernel, LSE atomics.
fn write_client(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(env) = c
        .targets
        .first()
        .and_then(|t| t.runs.first())
        .map(|r| &r.environment)
    else {
        return Ok(());
    };
    writeln!(
        out,
        "  Client: {} {}, {} cores, kernel {}{}",
        env.arch,
        env.cpu_model,
        env.cores,
        env.kernel,
        match env.lse_atomics {
            Some(true) => ", LSE atomics",
            Some(false) => ", no LSE atomics",
            None => "",
        }
    )
}

/// A target's notes: what happened to its servers in each run, a warning when its answers
/// were errors, and its first run's server fingerprints and limiter.
fn write_target_notes(t: &TargetRuns, out: &mut dyn Write) -> io::Result<()> {
    let Some(run) = t.runs.first() else {
        return Ok(());
    };
    write_server_events(t, out)?;
    if let Some(kinds) = errors_by_kind(t) {
        writeln!(out, "  Errors {}: {kinds} (its runs together)", t.name)?;
    }
    if let Some(answers) = t.runs.iter().find_map(|r| r.error_answers()) {
        writeln!(out, "  WARNING ({}): {answers}", t.name)?;
    }
    for s in &run.servers {
        let f = &s.fingerprint;
        for line in f.lines() {
            writeln!(out, "  Server {}: {line}", t.name)?;
        }
        for w in &f.warnings {
            writeln!(out, "  WARNING ({}): {w}", t.name)?;
        }
    }
    if !run.limiter.reason.is_empty() {
        writeln!(
            out,
            "  Limiter {} (first run): {}",
            t.name, run.limiter.reason
        )?;
    }
    Ok(())
}

/// A target's failed requests by kind over its runs ("protocol 2,434, read 2"): the table
/// has their count only, and "see the errors in the report" must find them.
pub(super) fn errors_by_kind(t: &TargetRuns) -> Option<String> {
    let kinds: Vec<String> = crate::stats::ErrorKind::ALL
        .iter()
        .filter_map(|k| {
            // Wide: a document's runs may each hold up to 10^18.
            let n: u128 = t.runs.iter().map(|r| u128::from(r.errors.get(*k))).sum();
            (n > 0).then(|| {
                format!(
                    "{} {}",
                    k.name(),
                    crate::units::group_digits(&n.to_string())
                )
            })
        })
        .collect();
    (!kinds.is_empty()).then(|| kinds.join(", "))
}

/// Each run's events on a target's watched servers, where their sampling stopped, their
/// pods when there were several, and why a ratio the table leaves blank has no figure.
fn write_server_events(t: &TargetRuns, out: &mut dyn Write) -> io::Result<()> {
    for (k, r) in t.runs.iter().enumerate() {
        for s in &r.servers {
            if s.pods.len() > 1 {
                for p in &s.pods {
                    let line = super::pod_line(p);
                    writeln!(out, "  Run {} of {} ({}): {line}", k + 1, t.name, s.label)?;
                }
            }
            if let Some(why) = s.why_unmeasured(crate::stats::Figure::RequestsPerCpuS) {
                writeln!(
                    out,
                    "  Run {} of {} ({}): no req per CPU-s: {why}",
                    k + 1,
                    t.name,
                    s.label
                )?;
            }
            for e in &s.events {
                writeln!(
                    out,
                    "  During run {} of {} ({}): {e}",
                    k + 1,
                    t.name,
                    s.label
                )?;
            }
            if let Some(st) = &s.sampling_stopped {
                writeln!(
                    out,
                    "  Sampling of {} stopped {:.1} s into run {} of {}: {}",
                    s.label,
                    st.after_s,
                    k + 1,
                    t.name,
                    st.reason
                )?;
            }
        }
    }
    Ok(())
}

/// The metrics table: one row per metric, one column per target (median [min..max]), then
/// the differences against the baseline. Columns are as wide as their widest cell (at least
/// the usual 28), so long figures never run into the next column.
fn write_table(c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
    let names: Vec<String> = c
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i == 0 {
                format!("{} (baseline)", t.name)
            } else {
                t.name.clone()
            }
        })
        .collect();
    let rows: Vec<(String, Vec<String>, String)> = c
        .metrics
        .iter()
        .map(|m| {
            let label = metric_label(m);
            // The range without units: the median's unit applies.
            let bare = |v: f64| {
                figure(v, &m.unit)
                    .trim_end_matches(" MiB/s")
                    .trim_end_matches(" MiB")
                    .to_string()
            };
            let cells = m
                .targets
                .iter()
                .map(|t| match (t.median, t.min, t.max) {
                    (Some(median), Some(lo), Some(hi)) => {
                        format!("{} [{}..{}]", figure(median, &m.unit), bare(lo), bare(hi))
                    }
                    _ => "–".to_string(),
                })
                .collect();
            let deltas: Vec<String> = m
                .targets
                .iter()
                .skip(1)
                .filter_map(|t| Some(format!("{}: {}", t.name, delta_text(t)?)))
                .collect();
            (label, cells, deltas.join("; "))
        })
        .collect();
    let chars = |s: &str| s.chars().count();
    let label_width = rows
        .iter()
        .map(|(l, _, _)| chars(l) + 2)
        .chain(std::iter::once(22))
        .max()
        .unwrap_or(22);
    let widths: Vec<usize> = (0..names.len())
        .map(|i| {
            rows.iter()
                .filter_map(|(_, cells, _)| cells.get(i))
                .chain(std::iter::once(&names[i]))
                .map(|cell| chars(cell) + 2)
                .chain(std::iter::once(28))
                .max()
                .unwrap_or(28)
        })
        .collect();
    write!(out, "  {:<label_width$}", "metric")?;
    for (n, w) in names.iter().zip(&widths) {
        write!(out, "{n:>w$}")?;
    }
    writeln!(out, "   vs baseline")?;
    for (label, cells, deltas) in &rows {
        write!(out, "  {label:<label_width$}")?;
        for (cell, w) in cells.iter().zip(&widths) {
            write!(out, "{cell:>w$}")?;
        }
        writeln!(out, "   {deltas}")?;
    }
    Ok(())
}

/// A metric's name as a table's row header: with its unit when the cells' figures do not
/// carry one (latencies in µs, cores), without when they do (MiB, MiB/s) or the name says it
/// (req/s).
pub(super) fn metric_label(m: &crate::compare::MetricComparison) -> String {
    if m.unit.is_empty() || m.unit.starts_with('B') || m.unit == "req/s" || m.unit == "req/CPU-s" {
        m.metric.clone()
    } else {
        format!("{} ({})", m.metric, m.unit)
    }
}

/// A price with the digits that matter (4 significant), currency left to the reader.
pub(super) fn money(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
        format!("{v:.digits$}")
    }
}

/// A target's difference against the baseline, as the table prints it ("-12.3% [-14.0%,
/// -10.1%] p=0.008 worse", "~ …", "+3.1%, no verdict").
pub(super) fn delta_text(t: &crate::compare::MetricSummary) -> Option<String> {
    let d = t.versus_baseline.as_ref()?;
    let judgement = match d.better {
        Some(true) => " better",
        Some(false) => " worse",
        None => "",
    };
    Some(match (d.ci_low, d.ci_high, d.p_value) {
        (_, _, Some(p)) if d.from_zero => format!("{} p={p:.3}{judgement}", d.verdict),
        _ if d.from_zero => "up from 0, no verdict".into(),
        (Some(lo), Some(hi), Some(p)) => format!(
            "{} [{:+.1}%, {:+.1}%] p={p:.3}{judgement}",
            d.verdict,
            lo * 100.0,
            hi * 100.0,
        ),
        _ => format!("{:+.1}%, no verdict", d.relative * 100.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rise from a zero baseline has a verdict and a p-value but no interval.
    #[test]
    fn a_rise_from_zero_is_said_without_an_interval() {
        let t = super::super::rise_from_zero();
        assert_eq!(delta_text(&t).as_deref(), Some("up from 0 p=0.008 worse"));
    }

    #[test]
    fn a_cost_whose_figures_are_not_the_servers_capacity_gets_no_per_dollar_verdict() {
        let cost = |name: &str, rps: f64, withheld: Option<&str>| crate::compare::TargetCost {
            name: name.into(),
            price_per_hour: 0.1,
            requests_per_sec: rps,
            cost_per_million: crate::compare::cost_per_million(0.1, rps),
            basis: None,
            withheld: withheld.map(String::from),
        };
        let mut c = wide();
        c.cost = vec![cost("a", 1000.0, None), cost("b", 2000.0, None)];
        let verdict = cost_sentence(&c, &c.cost[1]);
        assert!(
            verdict.contains("2.00x its requests per dollar"),
            "{verdict}"
        );
        // The client limited b: its cost stays, the verdict against a does not.
        c.cost[1].withheld = Some("its servers did not limit it (client)".into());
        let held = cost_sentence(&c, &c.cost[1]);
        assert!(
            held.contains("per million requests at 2,000 req/s"),
            "{held}"
        );
        assert!(
            held.ends_with(
                "(no per-dollar verdict against a: b: its servers did not limit it (client))"
            ),
            "{held}"
        );
        // The baseline's figures withheld: no verdict against it either.
        c.cost[1].withheld = None;
        c.cost[0].withheld = Some("its pods run under emulation (qemu)".into());
        let held = cost_sentence(&c, &c.cost[1]);
        assert!(
            held.contains("no per-dollar verdict against a: a: its pods run under emulation"),
            "{held}"
        );
    }

    /// A comparison of two targets with figures wider than the usual column.
    fn wide() -> ComparisonResult {
        let summary = |name: &str, v: f64| {
            serde_json::json!({"name": name, "median": v, "min": v * 0.8, "max": v * 1.1, "n": 3,
                "versus_baseline": null})
        };
        serde_json::from_value(serde_json::json!({
            "kind": "archbench-comparison", "schema_version": 2, "schedule": "interleave",
            "runs_per_target": 3, "warmup": false, "interrupted": false,
            "targets": [
                {"name": "a", "url": "http://a/", "command": "archbench run http://a/", "runs": []},
                {"name": "b", "url": "http://b/", "command": "archbench run http://b/", "runs": []}
            ],
            "metrics": [
                {"metric": "transfer", "unit": "B/s", "higher_is_better": true,
                 "targets": [summary("a", 103_340_000.0), summary("b", 130_050_000.0)]},
                {"metric": "req/server CPU-s", "unit": "req/CPU-s", "higher_is_better": true,
                 "targets": [summary("a", 7_672_100.0), summary("b", 7_669_800.0)]}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn wide_figures_keep_their_columns_apart() {
        let mut out = Vec::new();
        TextReport.write(&wide(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let header = text
            .lines()
            .find(|l| l.trim_start().starts_with("metric"))
            .unwrap();
        for row in ["transfer", "req/server CPU-s"] {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(row))
                .unwrap();
            // Each target's cell ends where its column (and its name in the header) ends, two
            // spaces at least after the one before.
            let cells: Vec<&str> = line
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            assert_eq!(cells.len(), 3, "{line:?}: {cells:?}");
            assert!(
                cells[1].ends_with(']') && cells[2].ends_with(']'),
                "{line:?}"
            );
            let end_a = line.find(cells[1]).unwrap() + cells[1].len();
            assert_eq!(
                end_a,
                header.find("a (baseline)").unwrap() + "a (baseline)".len()
            );
        }
    }
}
