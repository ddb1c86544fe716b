//! What commands write: reports on stdout, results to files, and the notes on stderr that a
//! report layout has no place for.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use clap::ValueEnum as _;

use super::flags::{Format, JsonFile, OutputArgs};
use super::signals::StopSignals;
use super::PlanError;
use crate::printable::escaped;
use crate::report::{
    ports_note, save_json_value, HtmlPage, JsonReport, MarkdownReport, Report, TextReport,
};
use crate::stats::{LimiterSide, RunResult, Unanswered};

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

/// The line for a run, or a target (`name`), that answered no request though it sent some:
/// what became of them, and where to look.
pub fn nothing_answered_line(name: Option<&str>, what: Unanswered) -> String {
    let whose = name.map(|n| format!("{n}: ")).unwrap_or_default();
    let advice = if what.in_flight_at_end > 0 {
        "the server answered none before the end (a longer --duration or a working server)"
    } else if what.connect == what.failed {
        "no connection opened (refused or unreachable): is the server listening at that address?"
    } else if what.tls == what.failed {
        "every TLS handshake failed, for the reason said above"
    } else {
        "see the errors in the report"
    };
    format!("archbench: {whose}no request was answered ({what}); {advice}")
}

/// Status for a finished run of a front end (wrk, ab, h2load): as `run`'s, the signal's when
/// interrupted, and 1 (said on stderr) when no request was answered — their layouts print
/// zeros then, so the status and that line say that nothing was measured.
pub fn finish_code(result: &RunResult, signals: &StopSignals) -> i32 {
    Ending::of_run(result).status(signals)
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
        crate::stderr_line!("archbench: {note}");
    }
    if let Some(answers) = result.error_answers() {
        crate::stderr_line!("archbench: warning: {answers}");
    }
    if let Some(note) = result
        .tls
        .as_ref()
        .and_then(crate::report::tls_failure_note)
    {
        crate::stderr_line!("archbench: TLS errors {note}");
    }
    if let Some(note) = crate::report::quic_note(result) {
        crate::stderr_line!("archbench: QUIC errors {note}");
    }
    match result.limiter.side {
        LimiterSide::Client | LimiterSide::Both => crate::stderr_line!(
            "archbench: limiter: {}; {}",
            result.limiter.reason,
            client_advice(front, result.plan.threads as usize)
        ),
        LimiterSide::ServerGone if front != FrontEnd::Run => {
            crate::stderr_line!("archbench: limiter: {}", result.limiter.reason)
        }
        _ => {}
    }
}

/// Every `--cost NAME` must be a target's name, and be given once (the second price was
/// silently ignored).
pub fn check_prices(prices: &[(String, f64)], names: &[&str]) -> Result<(), PlanError> {
    if let Some((n, _)) = prices.iter().find(|(n, _)| !names.contains(&n.as_str())) {
        return Err(PlanError::Invalid(format!(
            "--cost {n}=…: no target named {n:?} (targets: {})",
            names.join(", ")
        )));
    }
    for (k, (n, _)) in prices.iter().enumerate() {
        if prices[..k].iter().any(|(m, _)| m == n) {
            return Err(PlanError::Invalid(format!(
                "--cost {n}=…: {n:?} is given a price twice"
            )));
        }
    }
    Ok(())
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
        crate::stderr_line!("archbench: wrote {}", path.display());
    }
    if let Some(dir) = svg_dir {
        if !dir.is_dir() {
            // One level, its parent checked first (`svg_directory`): a tree made for a
            // mistyped path would hide the mistake.
            std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        for c in report.charts() {
            let file = dir.join(format!("{}.svg", c.id));
            std::fs::write(&file, c.svg.as_bytes())
                .with_context(|| format!("cannot write {}", file.display()))?;
            crate::stderr_line!("archbench: wrote {}", file.display());
        }
    }
    Ok(())
}

/// The page and the charts' places, checked before anything is read or printed: the page as
/// every report file is (never one of the `inputs`), the charts' directory one that exists or
/// can be made in one that does.
pub fn check_html_outputs(
    html: Option<&Path>,
    svg_dir: Option<&Path>,
    inputs: &[PathBuf],
) -> Result<(), PlanError> {
    if let Some(p) = html {
        writable("--html", p)?;
        not_an_input("--html", p, inputs)?;
    }
    let Some(dir) = svg_dir else { return Ok(()) };
    let refuse = |why: String| {
        Err(PlanError::Invalid(format!(
            "--svg {}: {why}",
            dir.display()
        )))
    };
    if dir.exists() {
        return if dir.is_dir() {
            Ok(())
        } else {
            refuse("it is a file; give a directory for the charts".into())
        };
    }
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) if !parent.is_dir() => refuse(format!(
            "no directory {}; create it first",
            parent.display()
        )),
        _ => Ok(()),
    }
}

/// A new directory for one command's files, `--out-dir`/<timestamp>/, created: one that
/// cannot be (a file in the way, no permission) is the command line's to fix, said before
/// anything starts.
pub fn results_directory(out_dir: &Path) -> Result<PathBuf, PlanError> {
    let dir = out_dir.join(crate::timefmt::compact(std::time::SystemTime::now()));
    std::fs::create_dir_all(&dir).map_err(|e| {
        PlanError::Invalid(format!(
            "--out-dir {}: cannot create {}: {e}; give a directory you can write",
            out_dir.display(),
            dir.display()
        ))
    })?;
    Ok(dir)
}

/// Whether a file can be written at `path` (given as `flag`): not a directory, in one that
/// exists, where this user may create files (tried with the temporary file a save uses).
fn writable(flag: &str, path: &Path) -> Result<(), PlanError> {
    let refuse = |why: String| {
        Err(PlanError::Invalid(format!(
            "{flag} {}: {why}",
            path.display()
        )))
    };
    match crate::report::save::unwritable(path) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// Refuses an output `path` (given as `flag`) that is one of the `inputs`: the report would
/// replace the document it was made from. Told by device and inode, so `./a.json`, `a.json`
/// and a link to it are one file; only a regular file can be replaced (a pipe read as input
/// and `/dev/stdout` as output are not the same thing even when they share a terminal).
fn not_an_input(flag: &str, path: &Path, inputs: &[PathBuf]) -> Result<(), PlanError> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(out) = std::fs::metadata(path) else {
        return Ok(()); // not there yet: no input is
    };
    let same = |input: &PathBuf| {
        std::fs::metadata(input)
            .is_ok_and(|m| m.is_file() && m.dev() == out.dev() && m.ino() == out.ino())
    };
    match inputs.iter().find(|i| same(i)) {
        Some(input) if input.as_path() == path => Err(PlanError::Invalid(format!(
            "{flag} {}: it is one of the input files; give the report a file of its own",
            path.display()
        ))),
        Some(input) => Err(PlanError::Invalid(format!(
            "{flag} {}: it is the input file {}; give the report a file of its own",
            path.display(),
            input.display()
        ))),
        None => Ok(()),
    }
}

/// A document (of any kind, or one read back) in the layout `report` and `merge` were asked
/// for. `Wrk` is `k8s load`'s alone and never reaches here (`OutputPlan::new` refuses it).
pub fn write_as<D: ?Sized>(doc: &D, fmt: Format, out: &mut dyn Write) -> io::Result<()>
where
    TextReport: Report<D>,
    MarkdownReport: Report<D>,
    JsonReport: Report<D>,
    HtmlPage: Report<D>,
{
    // A document's text (URLs, names, labels) reaches the terminal escaped: an escape
    // sequence in it must not recolour or rewrite the screen. JSON escapes its own.
    match fmt {
        Format::Text | Format::Wrk => escaped(out, |o| TextReport.write(doc, o)),
        Format::Markdown => escaped(out, |o| MarkdownReport.write(doc, o)),
        Format::Json => JsonReport.write(doc, out),
        Format::Html => escaped(out, |o| HtmlPage.write(doc, o)),
    }
}

/// `-o LAYOUT` for `command`, which has a report in text and the `layouts` listed: a layout
/// it has not is a usage error naming those it has.
pub fn checked_layout(
    layout: Format,
    command: &str,
    layouts: &[Format],
) -> Result<Format, PlanError> {
    if layout == Format::Text || layouts.contains(&layout) {
        return Ok(layout);
    }
    let name = |f: &Format| {
        f.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    };
    let have: Vec<String> = std::iter::once(Format::Text)
        .chain(layouts.iter().copied())
        .map(|f| name(&f))
        .collect();
    Err(PlanError::Invalid(format!(
        "-o {}: {command} has no such report (it has {})",
        name(&layout),
        have.join(", ")
    )))
}

/// Where one command's document goes, read once from its output flags: a layout on stdout and
/// the files `--json`, `--markdown` and `--html` name, with what the command adds (a run
/// directory's own files). Every command that writes a document hands it here (hyperfine's
/// export manager is the model), so a format or a file is written one way everywhere.
#[derive(Debug, Clone, Default)]
pub struct OutputPlan {
    pub layout: Format,
    json: Vec<PathBuf>,
    markdown: Vec<PathBuf>,
    html: Vec<PathBuf>,
}

impl OutputPlan {
    /// The plan of `o`, for `command`, which has a report in the `layouts` listed (a layout
    /// it has not is a usage error).
    pub fn new(o: &OutputArgs, command: &str, layouts: &[Format]) -> Result<OutputPlan, PlanError> {
        OutputPlan {
            layout: checked_layout(o.layout.output, command, layouts)?,
            json: o.json.json.iter().cloned().collect(),
            markdown: o.markdown.iter().cloned().collect(),
            html: o.html.html.iter().cloned().collect(),
        }
        .checked()
    }

    /// The plan, refused when one of its files is one of the documents read (`merge`'s).
    pub fn not_replacing(self, inputs: &[PathBuf]) -> Result<OutputPlan, PlanError> {
        for (flag, p) in self.flagged() {
            not_an_input(flag, p, inputs)?;
        }
        Ok(self)
    }

    /// Every file of the plan with the flag that named it.
    fn flagged(&self) -> Vec<(&'static str, &PathBuf)> {
        [
            ("--json", &self.json),
            ("--markdown", &self.markdown),
            ("--html", &self.html),
        ]
        .into_iter()
        .flat_map(|(flag, paths)| paths.iter().map(move |p| (flag, p)))
        .collect()
    }

    /// Only a JSON file, as the front ends' `--json` (their stdout is the tool's own layout).
    pub fn json_only(j: &JsonFile) -> Result<OutputPlan, PlanError> {
        OutputPlan {
            json: j.json.iter().cloned().collect(),
            ..OutputPlan::default()
        }
        .checked()
    }

    /// The plan if every file of it can be written, checked before any load so that a long
    /// run never ends unable to save what it measured.
    fn checked(self) -> Result<OutputPlan, PlanError> {
        let all = self.flagged();
        for (k, (flag, p)) in all.iter().enumerate() {
            writable(flag, p)?;
            // Two reports into one file: the last would replace the first.
            if let Some((other, q)) = all[..k]
                .iter()
                .find(|(_, q)| crate::report::save::same_file(p, q))
            {
                return Err(PlanError::Invalid(format!(
                    "{other} {} and {flag} {} name the same file; give each report its own",
                    q.display(),
                    p.display()
                )));
            }
        }
        Ok(self)
    }

    /// The report on stdout is archbench's text (progress lines and notes go with it).
    pub fn text(&self) -> bool {
        self.layout == Format::Text
    }

    /// Also the JSON (first) and the Markdown to these files: a run directory's.
    #[cfg(feature = "k8s")]
    pub fn with_run_directory(mut self, json: PathBuf, markdown: Option<PathBuf>) -> OutputPlan {
        self.json.insert(0, json);
        self.markdown.extend(markdown);
        self
    }

    /// The files written, JSON first, for a command's "wrote" line.
    #[cfg(feature = "k8s")]
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.json
            .iter()
            .chain(&self.markdown)
            .chain(&self.html)
            .map(PathBuf::as_path)
    }

    /// The document as JSON to every JSON file: what compare and the sweeps call after every
    /// run, so an interrupted one keeps what was measured.
    pub fn save_json<D: serde::Serialize>(&self, doc: &D) -> anyhow::Result<()> {
        for p in &self.json {
            save(doc, Some(p))?;
        }
        Ok(())
    }

    /// Every file: the JSON, the Markdown and the HTML.
    pub fn write_files<D>(&self, doc: &D) -> anyhow::Result<()>
    where
        D: serde::Serialize,
        MarkdownReport: Report<D>,
        HtmlPage: Report<D>,
    {
        self.save_json(doc)?;
        for p in &self.markdown {
            write_markdown(doc, p)?;
        }
        for p in &self.html {
            crate::report::save_atomic(p, |f| HtmlPage.write(doc, f))
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    }

    /// The report on stdout in the plan's layout (`k8s load` writes its `wrk` one itself).
    pub fn write_stdout<D>(&self, doc: &D) -> anyhow::Result<()>
    where
        TextReport: Report<D>,
        MarkdownReport: Report<D>,
        JsonReport: Report<D>,
        HtmlPage: Report<D>,
    {
        write_stdout(|out| write_as(doc, self.layout, out))
    }

    /// The files, then stdout.
    pub fn write<D>(&self, doc: &D) -> anyhow::Result<()>
    where
        D: serde::Serialize,
        TextReport: Report<D>,
        MarkdownReport: Report<D>,
        JsonReport: Report<D>,
        HtmlPage: Report<D>,
    {
        // The report reaches stdout even when a file could not be written.
        let saved = self.write_files(doc);
        self.write_stdout(doc)?;
        saved
    }
}

/// The exit status a load command ends with, for `run`, `compare`, the sweeps and `k8s load`
/// alike: the signal's when interrupted (what was measured is written by then); 1 when a
/// target answered nothing or missed its objectives, each said on stderr in one line; else 0.
#[derive(Debug, Default)]
pub struct Ending {
    interrupted: bool,
    failures: Vec<String>,
}

impl Ending {
    /// A run's: it answered nothing, or missed its objectives.
    pub fn of_run(r: &RunResult) -> Ending {
        let mut failures: Vec<String> = r
            .answered_nothing()
            .map(|what| nothing_answered_line(None, what))
            .into_iter()
            .collect();
        failures.extend(slo_missed("run", r.slo.as_ref()));
        Ending {
            interrupted: r.interrupted,
            failures,
        }
    }

    /// A comparison's: a target answered nothing, or one missed the objectives (judged on its
    /// medians).
    pub fn of_comparison(c: &crate::compare::ComparisonResult) -> Ending {
        let mut failures: Vec<String> = c
            .answered_nothing()
            .iter()
            .map(|(name, what)| nothing_answered_line(Some(name), *what))
            .collect();
        for t in &c.slo {
            failures.extend(slo_missed(&t.name, Some(&t.outcome)));
        }
        Ending {
            interrupted: c.interrupted,
            failures,
        }
    }

    /// A sweep's: a target met the objectives at no load (`judged`: there were objectives).
    pub fn of_sweep(s: &crate::sweep::SweepResult, judged: bool, stopped: bool) -> Ending {
        let missed: Vec<&str> = s
            .targets
            .iter()
            .filter(|t| judged && t.knee.is_none())
            .map(|t| t.name.as_str())
            .collect();
        let mut failures: Vec<String> = s
            .answered_nothing()
            .into_iter()
            .map(|(name, what)| nothing_answered_line(Some(name), what))
            .collect();
        if !missed.is_empty() {
            failures.push(format!(
                "archbench: SLO not met at any load by {}",
                missed.join(", ")
            ));
        }
        Ending {
            interrupted: s.interrupted || stopped,
            failures,
        }
    }

    /// Whether the command was interrupted.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// Says each failure on stderr and gives the status.
    pub fn status(&self, signals: &StopSignals) -> i32 {
        if self.interrupted {
            return signals.exit_code();
        }
        for line in &self.failures {
            crate::stderr_line!("{line}");
        }
        if self.failures.is_empty() {
            0
        } else {
            super::exit::EXIT_FAILURE
        }
    }
}

/// The line for a target that missed objectives, naming each missed one with what was
/// measured; None when it met them (or had none).
fn slo_missed(name: &str, outcome: Option<&crate::stats::SloOutcome>) -> Option<String> {
    let o = outcome.filter(|o| !o.passed)?;
    let which: Vec<String> = o
        .conditions
        .iter()
        .filter(|c| !c.passed)
        .map(|c| match c.measured {
            Some(_) => format!(
                "{} (measured {})",
                c.condition,
                crate::report::condition_figure(c)
            ),
            None => format!("{} ({})", c.condition, crate::report::condition_figure(c)),
        })
        .collect();
    Some(format!(
        "archbench: {name}: SLO not met: {}",
        which.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_a_command_has_no_report_in_is_refused_naming_those_it_has() {
        let all = [Format::Json, Format::Markdown, Format::Html];
        assert_eq!(
            checked_layout(Format::Text, "run", &[]).ok(),
            Some(Format::Text)
        );
        assert_eq!(
            checked_layout(Format::Html, "run", &all).ok(),
            Some(Format::Html)
        );
        let e = checked_layout(Format::Wrk, "report", &all).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-o wrk: report has no such report (it has text, json, markdown, html)"
        );
    }

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
