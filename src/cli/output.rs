//! What commands write: reports on stdout, results to files, and the notes on stderr that a
//! report layout has no place for.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context as _;

use super::args::ReportFormat;
use super::signals::StopSignals;
use super::PlanError;
use crate::report::{
    ports_note, save_json_value, HtmlPage, JsonReport, MarkdownReport, Report, TextReport,
};
use crate::stats::{LimiterSide, RunResult};

pub fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    f(&mut out)?;
    out.flush()?;
    Ok(())
}

/// Saves a document (a run, comparison or sweep) as JSON where `path` says, if anywhere.
pub fn save<T: serde::Serialize>(doc: &T, path: Option<&Path>) -> anyhow::Result<()> {
    if let Some(p) = path {
        save_json_value(doc, p).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// The line for a run, or a comparison's target (`name`), that answered no request though it
/// tried `failed` times.
pub fn nothing_answered_line(name: Option<&str>, failed: u64) -> String {
    let whose = name.map(|n| format!("{n}: ")).unwrap_or_default();
    format!(
        "archbench: {whose}no request was answered ({failed} failed); see the errors in the report"
    )
}

/// Says on stderr which targets of a comparison answered no request though they tried (one
/// line each); true when any did, so the command exits 1 rather than 0 on a measurement of
/// nothing.
pub fn say_answered_nothing(c: &crate::compare::ComparisonResult) -> bool {
    let nothing = c.answered_nothing();
    for (name, failed) in &nothing {
        eprintln!("{}", nothing_answered_line(Some(name), *failed));
    }
    !nothing.is_empty()
}

/// Status for a finished run: interrupted runs report the signal.
pub fn finish_code(result: &RunResult, signals: &StopSignals) -> i32 {
    if result.interrupted {
        signals.exit_code()
    } else {
        0
    }
}

/// Which command line the user is speaking, for advice in its own flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontEnd {
    Run,
    Wrk,
    Ab,
}

/// What to do about a client-bound run, in the flags of the front end in use.
pub fn client_advice(front: FrontEnd, threads: usize) -> String {
    let cores = crate::os::logical_cores() as usize;
    let second_machine =
        "load from a second machine (`archbench run --part I/N` on each, then `archbench merge`)";
    match front {
        FrontEnd::Run | FrontEnd::Wrk if threads < cores => {
            format!(
                "raise -t (it is {threads}; this machine has {cores} cores), or {second_machine}"
            )
        }
        FrontEnd::Run | FrontEnd::Wrk => {
            format!("every core already runs a worker: {second_machine}")
        }
        // ab's -t is a time limit; archbench ab already runs one worker per core.
        FrontEnd::Ab => format!("archbench ab already uses every core ({cores}); {second_machine}"),
    }
}

/// What the report layouts of wrk and ab have no place for, on stderr: ports exhausted, why TLS
/// failed, a client-bound or server-gone verdict (with advice in the front end's own flags).
pub fn notes_on_stderr(result: &RunResult, front: FrontEnd) {
    if let Some(note) = ports_note(result) {
        eprintln!("archbench: {note}");
    }
    if let Some(answers) = result.error_answers() {
        eprintln!("archbench: warning: {answers}");
    }
    if let Some(note) = result
        .tls
        .as_ref()
        .and_then(crate::report::tls_failure_note)
    {
        eprintln!("archbench: TLS errors {note}");
    }
    match result.limiter.side {
        LimiterSide::Client | LimiterSide::Both => eprintln!(
            "archbench: limiter: {}; {}",
            result.limiter.reason,
            client_advice(front, result.plan.threads as usize)
        ),
        LimiterSide::ServerGone if front != FrontEnd::Run => {
            eprintln!("archbench: limiter: {}", result.limiter.reason)
        }
        _ => {}
    }
}

/// Says on stderr which objectives failed, per target; true when any did.
pub fn slo_failed(outcomes: &[(&str, Option<&crate::stats::SloOutcome>)]) -> bool {
    let mut failed = false;
    for (name, outcome) in outcomes {
        let Some(o) = outcome.filter(|o| !o.passed) else {
            continue;
        };
        failed = true;
        let which: Vec<String> = o
            .conditions
            .iter()
            .filter(|c| !c.passed)
            .map(|c| match c.measured {
                Some(v) => format!(
                    "{} (measured {})",
                    c.condition,
                    crate::units::slo_figure(v, &c.unit)
                ),
                None => format!("{} (nothing to measure)", c.condition),
            })
            .collect();
        eprintln!("archbench: {name}: SLO not met: {}", which.join(", "));
    }
    failed
}

/// Every `--cost NAME` must be a target's name.
pub fn check_prices(prices: &[(String, f64)], names: &[&str]) -> Result<(), PlanError> {
    match prices.iter().find(|(n, _)| !names.contains(&n.as_str())) {
        Some((n, _)) => Err(PlanError::Invalid(format!(
            "--cost {n}=…: no target named {n:?} (targets: {})",
            names.join(", ")
        ))),
        None => Ok(()),
    }
}

pub fn write_markdown<D: ?Sized>(c: &D, path: &Path) -> anyhow::Result<()>
where
    MarkdownReport: Report<D>,
{
    let mut text = Vec::new();
    MarkdownReport.write(c, &mut text)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The HTML report (temp file, then rename) and each chart as SVG; says where on stderr.
pub fn write_html(
    docs: &[crate::report::HtmlDoc],
    html: Option<&Path>,
    svg_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let report = crate::report::HtmlReport::new(docs)?;
    if let Some(path) = html {
        crate::report::save_atomic(path, |f| report.write(f))
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("archbench: wrote {}", path.display());
    }
    if let Some(dir) = svg_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for c in report.charts() {
            let file = dir.join(format!("{}.svg", c.id));
            std::fs::write(&file, c.svg.as_bytes())
                .with_context(|| format!("cannot write {}", file.display()))?;
            eprintln!("archbench: wrote {}", file.display());
        }
    }
    Ok(())
}

/// A document (of any kind, or one read back) in the format `report` and `merge` were asked for.
pub fn write_as<D: ?Sized>(doc: &D, fmt: ReportFormat, out: &mut dyn Write) -> io::Result<()>
where
    TextReport: Report<D>,
    MarkdownReport: Report<D>,
    JsonReport: Report<D>,
    HtmlPage: Report<D>,
{
    match fmt {
        ReportFormat::Text => TextReport.write(doc, out),
        ReportFormat::Markdown => MarkdownReport.write(doc, out),
        ReportFormat::Json => JsonReport.write(doc, out),
        ReportFormat::Html => HtmlPage.write(doc, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_speaks_the_front_ends_own_flags() {
        let cores = crate::os::logical_cores() as usize;
        // ab's -t is a time limit: its advice never suggests it.
        let ab = client_advice(FrontEnd::Ab, cores);
        assert!(!ab.contains("-t"), "{ab}");
        assert!(ab.contains("second machine"), "{ab}");
        // run and wrk with fewer threads than cores: raise -t.
        if cores > 1 {
            assert!(client_advice(FrontEnd::Wrk, 1).starts_with("raise -t (it is 1;"));
        }
        assert!(!client_advice(FrontEnd::Run, cores).contains("raise -t"));
    }
}
