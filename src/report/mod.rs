//! Reports: one [`Report`] trait, an implementation per format and kind of document (a run, a
//! comparison, a sweep). Reporters write to any `Write`; they never print on their own and
//! never reach into the engine. A format that writes all three kinds writes any stored
//! [`Document`] through the blanket impl, so `archbench report` is one call whatever it reads;
//! a new format or kind of document is one impl. HTML is such a format too (`HtmlPage`: one
//! document's page); `HtmlReport` draws several documents on one page with their charts.

mod ab;
mod charts;
mod compare;
mod h2load;
mod html;
#[cfg(feature = "k8s")]
pub mod k8s_load;
mod markdown;
pub mod save;
mod sweep;
mod text;
mod wrk;

use std::io::{self, Write};

pub use ab::AbReport;
pub use h2load::{H2loadReport, H2loadSetup};
pub use html::{Chart, HtmlDoc, HtmlPage, HtmlReport};
pub use save::save_atomic;
pub use text::{ports_note, quic_note, tls_failure_note, TextReport};
pub use wrk::WrkReport;

use crate::compare::ComparisonResult;
use crate::document::Document;
use crate::stats::RunResult;
use crate::sweep::SweepResult;

/// One format's layout of one kind of document.
pub trait Report<D: ?Sized> {
    fn write(&self, doc: &D, out: &mut dyn Write) -> io::Result<()>;
}

/// Any stored document, in a format that writes every kind.
impl<F> Report<Document> for F
where
    F: Report<RunResult> + Report<ComparisonResult> + Report<SweepResult>,
{
    fn write(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        match doc {
            Document::Result(r) => Report::<RunResult>::write(self, r, out),
            Document::Comparison(c) => Report::<ComparisonResult>::write(self, c, out),
            Document::Sweep(s) => Report::<SweepResult>::write(self, s, out),
        }
    }
}

/// Markdown for a pull request: tables for runs and comparisons, a sweep's text fenced.
pub struct MarkdownReport;

/// The document itself, pretty-printed (what `--json` saves).
pub struct JsonReport;

impl<D: serde::Serialize + StoredKind> Report<D> for JsonReport {
    fn write(&self, doc: &D, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, doc)?;
        writeln!(out)
    }
}

/// The kinds of document archbench stores: what JSON is written of.
pub trait StoredKind {}
impl StoredKind for RunResult {}
impl StoredKind for ComparisonResult {}
impl StoredKind for SweepResult {}

/// Writes a document (run, comparison, sweep) as JSON where `path` points ([`save_atomic`]).
pub fn save_json_value<T: serde::Serialize>(doc: &T, path: &std::path::Path) -> io::Result<()> {
    save_atomic(path, |f| {
        serde_json::to_writer_pretty(&mut *f, doc)?;
        writeln!(f)
    })
}

/// One line per objective: the condition, the figure measured, pass or FAIL.
/// An objective's figure as reports show it: in its unit, else why there is none.
pub fn condition_figure(c: &crate::stats::ConditionOutcome) -> String {
    match c.measured {
        Some(v) => crate::units::slo_figure(v, &c.unit),
        None if c.not_determined => "not determined: too many still unanswered".into(),
        None => "nothing to measure".into(),
    }
}

pub fn write_slo(
    label: &str,
    o: &crate::stats::SloOutcome,
    out: &mut dyn io::Write,
) -> io::Result<()> {
    for c in &o.conditions {
        let measured = condition_figure(c);
        let verdict = if c.passed { "pass" } else { "FAIL" };
        writeln!(
            out,
            "  {label:<10} {:<16} {measured:>14}  {verdict}",
            c.condition
        )?;
    }
    Ok(())
}

/// Where each target ran and how throughput scaled with its vCPUs, as labelled lines
/// ("Ran on", "Scaling") every format prints; `at` says where throughput was taken.
pub(crate) fn placement_lines(
    placements: &[crate::placement::Placement],
    scaling: &[crate::placement::Scaling],
    at: &str,
) -> Vec<(&'static str, String)> {
    placements
        .iter()
        .map(|p| ("Ran on", format!("{}: {}", p.name, p.describe())))
        .chain(scaling.iter().map(|s| ("Scaling", s.describe(at))))
        .collect()
}

/// One pod of a watched server: where it ran, what it used, when it was seen.
pub(crate) fn pod_line(p: &crate::stats::WatchedPod) -> String {
    let mut line = format!(
        "pod {} on {}: {:.2} CPU s (user {:.2}, sys {:.2}), peak memory {}",
        p.name,
        p.node.as_deref().unwrap_or("an unknown node"),
        p.cpu_s,
        p.cpu_user_s,
        p.cpu_system_s,
        crate::units::bytes_iec(p.peak_memory_bytes as f64)
    );
    if let (Some(from), Some(until)) = (p.seen_from_s, p.seen_until_s) {
        line.push_str(&format!(", read {from:.1}-{until:.1} s"));
    }
    if let Some(why) = &p.not_measured {
        line.push_str(&format!("; not measured whole: {why}"));
    }
    line
}

/// Tests' comparison figure: errors up from a zero baseline, significantly (p = 0.008).
#[cfg(test)]
fn rise_from_zero() -> crate::compare::MetricSummary {
    crate::compare::MetricSummary {
        name: "errors".into(),
        median: Some(86_971.0),
        min: Some(80_000.0),
        max: Some(90_000.0),
        n: 5,
        versus_baseline: Some(crate::compare::Delta {
            relative: 0.0,
            ci_low: None,
            ci_high: None,
            p_value: Some(0.008),
            verdict: "up from 0".into(),
            better: Some(false),
            no_verdict: None,
            from_zero: true,
        }),
    }
}
