//! The edge: parse the command line, build a plan, run it, report. Maps every failure to a
//! one-line message and an exit status (0 ok, 1 failure, 2 usage, 130/143 interrupted).

mod agent;
mod args;
mod demo;
mod k8s;
mod live;
mod plan;
mod session;
mod sweep;
mod values;

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use clap::Parser as _;

pub use args::{
    AbArgs, Cli, Command, CompareArgs, DemoArgs, LoadArgs, MergeArgs, OutputFormat, RunArgs,
    ServeArgs, WrkArgs,
};
pub use plan::{
    ab_draft, ab_plan, compare_plan, reproduce, run_draft, run_plan, wrk_draft, wrk_plan, PlanError,
};

use crate::engine::{Plan, Progress};
use crate::monitor::WatchSpec;
use crate::report::{ports_note, save_json, AbReport, JsonReport, Report, TextReport, WrkReport};
use crate::serve::{ServeOptions, Server};
use crate::stats::{LimiterSide, RunResult};
use crate::timefmt;
use session::Session;

/// Exit statuses.
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Invoked as `wrk` or `ab` (a symlink or copy of the binary), archbench is that front end,
/// so a script keeps working when only the binary behind the name changes.
fn with_front_end(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let invoked_as = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .map(str::to_string);
    if let Some(name @ ("wrk" | "ab")) = invoked_as.as_deref() {
        args.insert(1, OsString::from(name));
    }
    args
}

/// Runs archbench with these arguments and returns the process exit status.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = with_front_end(args);
    let subcommand = args
        .get(1)
        .and_then(|a| a.to_str())
        .filter(|a| {
            [
                "run", "wrk", "ab", "compare", "report", "serve", "demo", "merge", "k8s", "agent",
                "sweep",
            ]
            .contains(a)
        })
        .map(str::to_string);
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            eprintln!(
                "archbench: {}",
                one_line_usage_error(&e, subcommand.as_deref())
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            // --help and --version: clap's own text, on stdout.
            let _ = e.print();
            return 0;
        }
    };
    let signals = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("archbench: cannot install signal handlers: {e}");
            return EXIT_FAILURE;
        }
    };
    let outcome = match cli.command {
        Command::Run(a) => cmd_run(&a, &signals),
        Command::Wrk(a) => cmd_wrk(&a, &signals),
        Command::Ab(a) => cmd_ab(&a, &signals),
        Command::Compare(a) => cmd_compare(&a, &signals),
        Command::Report(a) => cmd_report(&a),
        Command::Serve(a) => cmd_serve(&a, &signals),
        Command::Demo(a) => cmd_demo(&a, &signals),
        Command::Merge(a) => cmd_merge(&a),
        Command::K8s { args } => run_k8s_executable(&args),
        Command::Agent(a) => agent::cmd_agent(&a, &signals),
        Command::Sweep(a) => sweep::cmd_sweep(&a, &signals),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => exit_for(&e),
    }
}

/// The executable that carries the Kubernetes client (kube-rs and its TLS, YAML and async
/// stacks): kept out of `archbench` itself, so the load generator's own memory stays what it
/// was (peak RSS at -c10000: 8.7 MiB, against 10.1 MiB with kube linked in; more code paged
/// in, not more data).
pub const K8S_EXECUTABLE: &str = "archbench-k8s";

/// `archbench k8s ARGS…`: becomes `archbench-k8s ARGS…` (the same directory), so exit status,
/// signals and the terminal are its own.
fn run_k8s_executable(args: &[OsString]) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().context("cannot find archbench's own path")?;
    let sibling = me.with_file_name(K8S_EXECUTABLE);
    let program = if sibling.exists() {
        sibling
    } else {
        std::path::PathBuf::from(K8S_EXECUTABLE)
    };
    let err = std::process::Command::new(&program).args(args).exec();
    Err(PlanError::Invalid(format!(
        "cannot run {} ({err}); it is built and installed beside archbench (cargo build --release, cargo install --path .)",
        program.display()
    ))
    .into())
}

/// `archbench-k8s`'s entry point: `archbench k8s`'s command line, run.
pub fn k8s_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match args::K8sCli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("archbench: a k8s command is missing (up, manifests, status, config, curl, login, top, load, fingerprint, down); see `archbench k8s --help`");
            return EXIT_USAGE;
        }
        Err(e) if e.use_stderr() => {
            eprintln!("archbench: {}", one_line_usage_error(&e, Some("k8s")));
            return EXIT_USAGE;
        }
        Err(e) => {
            let _ = e.print();
            return 0;
        }
    };
    let signals = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("archbench: cannot install signal handlers: {e}");
            return EXIT_FAILURE;
        }
    };
    match k8s::cmd_k8s(&cli.args, &signals) {
        Ok(code) => code,
        Err(e) => exit_for(&e),
    }
}

/// clap's message without its usage block: the first line, and where to read more.
fn one_line_usage_error(e: &clap::Error, subcommand: Option<&str>) -> String {
    let rendered = e.to_string();
    let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    let head = lines
        .next()
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ");
    // "… were not provided:" lists what on the lines below, up to a blank line.
    let listed: Vec<&str> = if head.ends_with(':') {
        lines
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect()
    } else {
        Vec::new()
    };
    let first = if listed.is_empty() {
        head.trim_end_matches('.').to_string()
    } else {
        format!("{} {}", head, listed.join(", "))
    };
    let help = match subcommand {
        Some(sub) => format!("archbench {sub} --help"),
        None => "archbench --help".to_string(),
    };
    format!("{first}; see `{help}`")
}

/// Prints the error on one line and picks the status: usage errors are 2, a closed stdout
/// (`archbench … | head`) is a quiet 0, everything else 1.
fn exit_for(e: &anyhow::Error) -> i32 {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        if io.kind() == io::ErrorKind::BrokenPipe {
            return 0;
        }
    }
    eprintln!("archbench: {}", one_line(e));
    if e.downcast_ref::<PlanError>().is_some()
        || e.downcast_ref::<crate::document::DocumentError>().is_some()
        || e.downcast_ref::<crate::stats::MergeError>().is_some()
        || e.downcast_ref::<crate::k8s::K8sError>()
            .is_some_and(crate::k8s::K8sError::is_usage)
    {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}

/// The error and its causes on one line, each cause once: messages that already quote their
/// source (`cannot read X: No such file`) are not followed by it again, and a k8s error's
/// sentence already says what its source means (the rest of the chain is for code to inspect).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        if cause.downcast_ref::<crate::k8s::K8sError>().is_some() {
            break;
        }
    }
    line.replace('\n', " ")
}

/// SIGINT/SIGTERM set `stop`; a second one exits at once.
pub struct StopSignals {
    pub stop: Arc<AtomicBool>,
    which: Arc<AtomicUsize>,
}

impl StopSignals {
    fn install() -> io::Result<StopSignals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(AtomicBool::new(false));
        let which = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM] {
            // Registered first so it sees the flag before this signal sets it.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, stop.clone())?;
            signal_hook::flag::register(sig, stop.clone())?;
            signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?;
        }
        Ok(StopSignals { stop, which })
    }

    /// What a key that stops the load does: what SIGINT would (stop, exit status 130).
    fn as_if_interrupted(&self) -> Box<dyn Fn() + Send> {
        let (stop, which) = (self.stop.clone(), self.which.clone());
        Box::new(move || {
            // A signal that came first keeps its own status.
            let _ = which.compare_exchange(
                0,
                signal_hook::consts::SIGINT as usize,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            stop.store(true, Ordering::Relaxed);
        })
    }

    /// 130 after SIGINT, 143 after SIGTERM, as shells report them.
    fn exit_code(&self) -> i32 {
        128 + self.which.load(Ordering::Relaxed) as i32
    }
}

/// Runs a plan watching local specs (the front ends' `--watch`): `measure::execute`, with a
/// target that cannot be watched reported as a usage error.
pub fn execute(
    plan: &Plan,
    watch: &[WatchSpec],
    stop: &AtomicBool,
    on_progress: impl FnMut(&Progress, &[crate::stats::ServerNow]),
) -> anyhow::Result<RunResult> {
    measure_sources(plan, &crate::measure::sources(watch), stop, on_progress)
}

fn measure_sources(
    plan: &Plan,
    watch: &[std::sync::Arc<dyn crate::monitor::WatchSource>],
    stop: &AtomicBool,
    on_progress: impl FnMut(&Progress, &[crate::stats::ServerNow]),
) -> anyhow::Result<RunResult> {
    crate::measure::execute(plan, watch, stop, on_progress).map_err(|e| match e {
        crate::measure::MeasureError::Watch(w) => PlanError::Watch(w).into(),
        other => anyhow::Error::new(other),
    })
}

/// Which command line the user is speaking, for advice in its own flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrontEnd {
    Run,
    Wrk,
    Ab,
}

/// What to do about a client-bound run, in the flags of the front end in use.
fn client_advice(front: FrontEnd, threads: usize) -> String {
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

/// What the report layouts of wrk and ab have no place for, on stderr: ports exhausted, a
/// client-bound or server-gone verdict (with advice in the front end's own flags).
fn notes_on_stderr(result: &RunResult, front: FrontEnd) {
    if let Some(note) = ports_note(result) {
        eprintln!("archbench: {note}");
    }
    if let Some(answers) = result.error_answers() {
        eprintln!("archbench: warning: {answers}");
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

/// A one-line live status on stderr: rewritten in place on a terminal, one line per second
/// otherwise (so CI logs show progress without drowning).
struct ProgressLine {
    enabled: bool,
    terminal: bool,
    last_second: u64,
}

impl ProgressLine {
    fn new(enabled: bool) -> ProgressLine {
        ProgressLine {
            enabled,
            terminal: io::stderr().is_terminal(),
            last_second: 0,
        }
    }

    fn update(&mut self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let secs = p.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            p.completed as f64 / secs
        } else {
            0.0
        };
        let line = format!(
            "  {secs:6.1}s  {} requests  {rate:.0} req/s  {} errors",
            p.completed, p.errors
        );
        if self.terminal {
            eprint!("\r\x1b[K{line}");
        } else if p.elapsed.as_secs() > self.last_second {
            self.last_second = p.elapsed.as_secs();
            eprintln!("{line}");
        }
    }

    /// A status line that changes now and then (waiting for a rollout): rewritten in place
    /// on a terminal, one line per change otherwise.
    fn message(&mut self, line: &str) {
        if !self.enabled {
            return;
        }
        if self.terminal {
            eprint!("\r\x1b[K  {line}");
        } else {
            eprintln!("  {line}");
        }
    }

    fn finish(&self) {
        if self.enabled && self.terminal {
            eprint!("\r\x1b[K");
        }
    }
}

fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    f(&mut out)?;
    out.flush()?;
    Ok(())
}

fn save(result: &RunResult, path: Option<&Path>) -> anyhow::Result<()> {
    if let Some(p) = path {
        save_json(result, p).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// Status for a finished run: interrupted runs report the signal.
fn finish_code(result: &RunResult, signals: &StopSignals) -> i32 {
    if result.interrupted {
        signals.exit_code()
    } else {
        0
    }
}

fn cmd_run(a: &RunArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let plan = run_plan(a)?;
    let watch = plan::with_perf(&a.load.request.watch, &a.load.perf)?;
    let name = plan.target.redacted_url.clone();
    let mut views = live::LiveViews::start(&a.live, &[(&name, &plan)])?;
    let text = a.output == OutputFormat::Text;
    let tui = live::want_tui(&a.live, a.quiet, text, plan.stop.duration)?;
    let dashboard = views.dashboard(tui, "run".into(), signals)?;
    let mut progress = ProgressLine::new(!a.quiet && text && !tui);
    let result = execute(&plan, &watch, &signals.stop, |p, servers| {
        progress.update(p);
        views.update(&name, p, servers);
    });
    progress.finish();
    views.board.finish_run(&name);
    // The terminal is restored before anything else prints.
    live::close(dashboard);
    let mut result = result?;
    if let Some(slo) = &a.load.slo {
        result.slo = Some(slo.judge_run(&result));
    }
    if let Some(at) = plan.start_at {
        // Within the grace the part keeps --start-at as its clock (its first sends are late,
        // and send lateness shows it); beyond it, it started late and out of phase.
        if result.started_at != crate::timefmt::rfc3339_micros(at) {
            eprintln!(
                "archbench: --start-at {} had passed by more than {} s when this part could start; it started at {}, out of phase with the other parts",
                crate::timefmt::rfc3339_micros(at),
                crate::engine::START_GRACE.as_secs(),
                result.started_at
            );
        }
    }
    save(&result, a.json.as_deref())?;
    notes_on_stderr(&result, FrontEnd::Run);
    write_stdout(|out| match a.output {
        OutputFormat::Text => TextReport.write(&result, out),
        OutputFormat::Json => JsonReport.write(&result, out),
    })?;
    if result.totals.requests == 0 && result.totals.errors > 0 && !result.interrupted {
        eprintln!(
            "archbench: no request was answered ({} failed); see Errors above",
            result.totals.errors
        );
        return Ok(EXIT_FAILURE);
    }
    views.linger(signals, result.interrupted);
    if !result.interrupted && slo_failed(std::slice::from_ref(&("run", result.slo.as_ref()))) {
        return Ok(EXIT_FAILURE);
    }
    Ok(finish_code(&result, signals))
}

/// Says on stderr which objectives failed, per target; true when any did.
fn slo_failed(outcomes: &[(&str, Option<&crate::stats::SloOutcome>)]) -> bool {
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
                    crate::report::slo_figure(v, &c.unit)
                ),
                None => format!("{} (nothing to measure)", c.condition),
            })
            .collect();
        eprintln!("archbench: {name}: SLO not met: {}", which.join(", "));
    }
    failed
}

fn cmd_wrk(a: &WrkArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        println!(
            "archbench {} (wrk 4.x compatible front end) [epoll]",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let plan = wrk_plan(a)?;
    let report = WrkReport { latency: a.latency };
    write_stdout(|out| WrkReport::preamble(&plan.summary(), out))?;
    let result = execute(&plan, &[], &signals.stop, |_, _| {})?;
    save(&result, a.json.as_deref())?;
    write_stdout(|out| report.write_body(&result, out))?;
    notes_on_stderr(&result, FrontEnd::Wrk);
    Ok(finish_code(&result, signals))
}

fn cmd_ab(a: &AbArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        println!(
            "This is ApacheBench, Version 2.3 <archbench {}>",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let plan = ab_plan(a)?;
    let total = plan.stop.requests.unwrap_or(0);
    // ab's heartbeat: every tenth of the requests (at least 100), when more than 150.
    let heartbeat = if !a.quiet && total > 150 {
        (total / 10).max(100)
    } else {
        0
    };
    write_stdout(|out| AbReport::preamble(&plan.target.redacted_url, heartbeat == 0, out))?;
    let mut shown = 0;
    // ab prints each tenth as it is reached; progress arrives every 250 ms, so a fast run
    // catches up on the lines it passed, here and once more at the end.
    let mut beat = |done: u64| {
        while heartbeat > 0 && done >= shown + heartbeat {
            shown += heartbeat;
            eprintln!("Completed {shown} requests");
        }
    };
    // ab counts a request done when it finished, answered or failed.
    let result = execute(&plan, &[], &signals.stop, |p, _| {
        beat(p.completed + p.errors)
    })?;
    beat(result.totals.attempted);
    if heartbeat > 0 {
        eprintln!("Finished {} requests", result.totals.requests);
    } else {
        write_stdout(|out| writeln!(out, "..done"))?;
    }
    save(&result, a.json.as_deref())?;
    let report = AbReport {
        variable_length: a.variable_length,
    };
    write_stdout(|out| report.write(&result, out))?;
    notes_on_stderr(&result, FrontEnd::Ab);
    Ok(finish_code(&result, signals))
}

/// Every `--cost NAME` must be a target's name.
fn check_prices(prices: &[(String, f64)], names: &[&str]) -> Result<(), PlanError> {
    match prices.iter().find(|(n, _)| !names.contains(&n.as_str())) {
        Some((n, _)) => Err(PlanError::Invalid(format!(
            "--cost {n}=…: no target named {n:?} (targets: {})",
            names.join(", ")
        ))),
        None => Ok(()),
    }
}

fn cmd_compare(a: &CompareArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let plan = plan::compare_plan(a)?;
    let names: Vec<&str> = plan.contenders.iter().map(|c| c.name.as_str()).collect();
    check_prices(&a.cost, &names)?;
    if let Some(why) = crate::compare::no_verdict_reason(plan.runs, plan.runs) {
        eprintln!("archbench: {why}; the table will show medians and differences only");
    }
    // Monitors must find their targets before any load: check them all now.
    for c in &plan.contenders {
        for w in &c.watch {
            w.open().map_err(PlanError::Watch)?;
        }
    }
    let commands = plan
        .contenders
        .iter()
        .map(|c| plan::reproduce(&c.plan))
        .collect();
    let tui = live::want_tui(
        &a.live,
        a.quiet,
        true,
        plan.contenders.first().and_then(|c| c.plan.stop.duration),
    )?;
    let title = format!("compare {}", names.join(" vs "));
    let mut session = Session::begin(&a.live, &plan.contenders, tui, title, !a.quiet, signals)?;
    let mut save_so_far = |c: &crate::compare::ComparisonResult| -> anyhow::Result<()> {
        if let Some(p) = &a.json {
            crate::report::save_json_value(c, p)
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    };
    let result = session.compare(&plan, commands, None, None, &mut save_so_far);
    session.close();
    let mut result = result?;
    if let Some(slo) = &a.load.slo {
        result.slo = result.judge_slo(slo);
    }
    result.cost = result.costs(&a.cost);
    save_so_far(&result)?;
    if let Some(p) = &a.markdown {
        write_markdown(&result, p)?;
    }
    for t in &result.targets {
        if let Some(answers) = t.runs.iter().find_map(|r| r.error_answers()) {
            eprintln!("archbench: warning ({}): {answers}", t.name);
        }
    }
    write_stdout(|out| crate::report::ComparisonReport.write(&result, out))?;
    session.linger(result.interrupted);
    if result.interrupted {
        return Ok(signals.exit_code());
    }
    let outcomes: Vec<(&str, Option<&crate::stats::SloOutcome>)> = result
        .slo
        .iter()
        .map(|t| (t.name.as_str(), Some(&t.outcome)))
        .collect();
    Ok(if slo_failed(&outcomes) {
        EXIT_FAILURE
    } else {
        0
    })
}

fn write_markdown(c: &crate::compare::ComparisonResult, path: &Path) -> anyhow::Result<()> {
    let mut text = Vec::new();
    crate::report::MarkdownReport.comparison(c, &mut text)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn cmd_report(a: &args::ReportArgs) -> anyhow::Result<i32> {
    use crate::document::Document;
    use crate::report::{ComparisonReport, HtmlDoc, MarkdownReport};
    let fmt = a.format;
    let mut docs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        docs.push((f, crate::document::read(f)?));
    }
    if a.html.is_some() || a.svg.is_some() {
        let html_docs: Vec<HtmlDoc> = docs
            .into_iter()
            .map(|(f, d)| match d {
                Document::Result(r) => {
                    let name = f.file_stem().map_or_else(
                        || f.display().to_string(),
                        |s| s.to_string_lossy().into_owned(),
                    );
                    HtmlDoc::Run(name, r)
                }
                Document::Comparison(c) => HtmlDoc::Comparison(c),
                Document::Sweep(s) => HtmlDoc::Sweep(s),
            })
            .collect();
        write_html(&html_docs, a.html.as_deref(), a.svg.as_deref())?;
        return Ok(0);
    }
    for (_, doc) in docs {
        match doc {
            Document::Result(r) => write_stdout(|out| write_result(&r, fmt, out))?,
            Document::Sweep(sw) => write_stdout(|out| match fmt {
                args::ReportFormat::Text => crate::report::SweepReport.write(&sw, out),
                args::ReportFormat::Markdown => {
                    writeln!(out, "```")?;
                    crate::report::SweepReport.write(&sw, out)?;
                    writeln!(out, "```")
                }
                args::ReportFormat::Json => {
                    serde_json::to_writer_pretty(&mut *out, &sw)?;
                    writeln!(out)
                }
            })?,
            Document::Comparison(c) => write_stdout(|out| match fmt {
                args::ReportFormat::Text => ComparisonReport.write(&c, out),
                args::ReportFormat::Markdown => MarkdownReport.comparison(&c, out),
                args::ReportFormat::Json => {
                    serde_json::to_writer_pretty(&mut *out, &c)?;
                    writeln!(out)
                }
            })?,
        }
    }
    Ok(0)
}

/// The HTML report (temp file, then rename) and each chart as SVG; says where on stderr.
fn write_html(
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

fn write_result(r: &RunResult, fmt: args::ReportFormat, out: &mut dyn Write) -> io::Result<()> {
    match fmt {
        args::ReportFormat::Text => TextReport.write(r, out),
        args::ReportFormat::Markdown => crate::report::MarkdownReport.run(r, out),
        args::ReportFormat::Json => JsonReport.write(r, out),
    }
}

fn cmd_merge(a: &MergeArgs) -> anyhow::Result<i32> {
    use crate::stats::{Merger, NamedResult};
    const WANTED: &str = "merge takes run results (the --json of run, wrk, ab or merge)";
    // Two passes, so memory holds one source's histograms at a time: every file is read and
    // checked first (a refusal comes before any merging) and its start noted; then each is
    // read again and merged. What cannot be read twice (a pipe, `<(ssh … cat r.json)`) is
    // kept as text from the first pass.
    let mut earliest = None;
    let mut kept: Vec<Option<String>> = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let text = crate::document::read_text(f)?;
        let r = crate::document::read_result_text(f, &text, WANTED)?;
        let at = crate::stats::started_at(&f.display().to_string(), &r.started_at)?;
        earliest = Some(earliest.map_or(at, |e: SystemTime| e.min(at)));
        let regular = std::fs::metadata(f).is_ok_and(|m| m.is_file());
        kept.push((!regular).then_some(text));
    }
    let mut merger = Merger::new(earliest.context("no file to merge")?);
    for (f, text) in a.files.iter().zip(kept) {
        let text = match text {
            Some(t) => t,
            None => crate::document::read_text(f)?,
        };
        merger.add(NamedResult {
            file: f.display().to_string(),
            result: crate::document::read_result_text(f, &text, WANTED)?,
        })?;
    }
    let mut merged = merger.finish()?;
    for note in merge_notes(&merged.sources) {
        eprintln!("archbench: note: {note}");
    }
    merged.limiter = crate::monitor::limiter(&merged);
    save(&merged, a.json.as_deref())?;
    write_stdout(|out| write_result(&merged, a.output, out))?;
    Ok(0)
}

/// What looks wrong about a merge's sources: another URL than the first's, the same run
/// twice, sources that never ran at the same time. A few lines, however many sources.
fn merge_notes(sources: &[crate::stats::SourceRun]) -> Vec<String> {
    const SHOWN: usize = 3;
    let mut notes = Vec::new();
    let Some(first) = sources.first() else {
        return notes;
    };
    if let Some(other) = sources
        .iter()
        .find(|s| !crate::stats::same_load(&s.plan, &first.plan))
    {
        notes.push(format!(
            "{} loaded {} {}, not {} {} as {} did; merged anyway",
            other.file,
            other.plan.method,
            other.plan.url,
            first.plan.method,
            first.plan.url,
            first.file
        ));
    }
    let mut same: std::collections::BTreeMap<(&str, &str, u64), Vec<&str>> =
        std::collections::BTreeMap::new();
    for s in sources {
        same.entry((&s.environment.hostname, &s.started_at, s.totals.requests))
            .or_default()
            .push(&s.file);
    }
    let twice: Vec<&Vec<&str>> = same.values().filter(|files| files.len() > 1).collect();
    for files in twice.iter().take(SHOWN) {
        let more = match files.len() {
            2 => String::new(),
            n => format!(" (and {} more)", n - 2),
        };
        notes.push(format!(
            "{} and {}{more} look like the same run (same host, start and count): merged twice?",
            files[0], files[1]
        ));
    }
    if twice.len() > SHOWN {
        notes.push(format!(
            "{} more groups of sources look like the same run",
            twice.len() - SHOWN
        ));
    }
    // Sources that never ran at the same time do not make one load.
    let latest_start = sources.iter().map(|s| s.start_offset_s).fold(0.0, f64::max);
    let earliest_end = sources
        .iter()
        .map(|s| s.start_offset_s + s.totals.elapsed_s)
        .fold(f64::INFINITY, f64::min);
    if latest_start > earliest_end {
        notes.push(format!(
            "the sources did not all run at the same time (one started {latest_start:.1} s after the first, after another had ended); the merged rate and series mix different times"
        ));
    }
    notes
}

fn cmd_serve(a: &ServeArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if let Some(profile) = a.nginx {
        let mut nginx = profile.start(a.workers)?;
        println!(
            "archbench serve: nginx ({}) listening on {} pid {} (Ctrl-C to stop)",
            profile.name(),
            nginx.url(),
            nginx.pid()
        );
        wait_for(&signals.stop);
        nginx.stop();
        return Ok(signals.exit_code());
    }
    let addr = a.addr.parse().map_err(|_| {
        PlanError::Invalid(format!(
            "invalid --addr {:?}; use e.g. 127.0.0.1:8080",
            a.addr
        ))
    })?;
    let mut opts = ServeOptions {
        addr,
        delay: a.delay,
        burn: a.burn,
        ..ServeOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    let server = Server::start(opts)?;
    println!(
        "archbench serve: listening on {} (Ctrl-C to stop)",
        server.url()
    );
    wait_for(&signals.stop);
    let served = server.requests();
    server.stop();
    eprintln!("archbench serve: answered {served} requests");
    Ok(signals.exit_code())
}

/// Blocks until the stop flag is set, without spinning.
fn wait_for(stop: &AtomicBool) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Ok(mut s) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        if !stop.load(Ordering::Relaxed) {
            let _ = s.forever().next();
        }
    }
}

fn cmd_demo(a: &DemoArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    plan::runs(a.runs)?;
    let servers = demo::start_servers(a.embedded)?;
    eprintln!("archbench demo: {}", servers.description(a.embedded));
    let targets = servers.targets();
    let mut argv: Vec<String> = vec!["archbench".into(), "compare".into()];
    argv.extend(targets.iter().map(|(n, u, _)| format!("{n}={u}")));
    for (_, _, w) in &targets {
        argv.push("--watch".into());
        argv.push(w.clone());
    }
    argv.extend([
        "-c".into(),
        a.connections.to_string(),
        "-d".into(),
        format!("{}ms", a.duration.as_millis()),
        "--runs".into(),
        a.runs.to_string(),
    ]);
    let dir = a.out_dir.join(timefmt::compact(SystemTime::now()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (json, md) = (dir.join("comparison.json"), dir.join("comparison.md"));
    argv.extend(["--json".into(), json.display().to_string()]);
    argv.extend(["--markdown".into(), md.display().to_string()]);
    let Command::Compare(args) = Cli::try_parse_from(&argv)?.command else {
        anyhow::bail!("internal error: demo arguments did not parse as a comparison");
    };
    let code = cmd_compare(&args, signals)?;
    drop(servers);
    // The HTML report is drawn from the JSON just written, the way `report --html` would,
    // so what the page shows is what the file holds.
    let html = dir.join("comparison.html");
    let doc = match crate::document::read(&json)? {
        crate::document::Document::Comparison(c) => crate::report::HtmlDoc::Comparison(c),
        _ => anyhow::bail!("internal error: {} holds no comparison", json.display()),
    };
    write_html(&[doc], Some(&html), None)?;
    eprintln!(
        "archbench demo: wrote {}, {} and {}",
        json.display(),
        md.display(),
        html.display()
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_k8s_error_is_one_sentence_however_deep_its_source() {
        // kube wraps the transport's error: its text ("ServiceError: …") is not the
        // sentence's, and must not trail it.
        let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = anyhow::Error::from(crate::k8s::K8sError::Unreachable {
            server: "https://127.0.0.1:1/".into(),
            source: kube::Error::Service(Box::new(refused)),
        })
        .context("k8s status");
        assert_eq!(
            one_line(&e),
            "k8s status: no cluster reachable at https://127.0.0.1:1/: Connection refused; check the address, the VPN or `kubectl cluster-info`"
        );
        // Other errors still show their causes once each.
        let e = anyhow::Error::from(io::Error::other("disk full")).context("cannot write r.json");
        assert_eq!(one_line(&e), "cannot write r.json: disk full");
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

    #[test]
    fn merge_notes_stay_a_few_lines_however_many_sources() {
        let source = |file: String, host: &str| crate::stats::SourceRun {
            file,
            started_at: "2026-12-01T00:00:00.000000Z".into(),
            first_send_at: None,
            start_offset_s: 0.0,
            plan: crate::stats::PlanSummary::default(),
            environment: crate::stats::Environment {
                hostname: host.into(),
                ..Default::default()
            },
            totals: crate::stats::Totals::default(),
            interrupted: false,
            client: crate::stats::ClientUsage::default(),
            limiter: crate::stats::Limiter {
                side: crate::stats::LimiterSide::Unknown,
                reason: String::new(),
            },
            pacing: None,
        };
        // 1,000 distinct workers: nothing to say.
        let distinct: Vec<_> = (0..1000)
            .map(|i| source(format!("w{i}"), &format!("pod-{i}")))
            .collect();
        assert!(merge_notes(&distinct).is_empty());
        // 1,000 copies of one run from 10 hosts: 3 groups named, the rest counted.
        let copies: Vec<_> = (0..1000)
            .map(|i| source(format!("w{i}"), &format!("pod-{}", i % 10)))
            .collect();
        let notes = merge_notes(&copies);
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert_eq!(
            notes[0],
            "w0 and w10 (and 98 more) look like the same run (same host, start and count): merged twice?"
        );
        assert_eq!(notes[3], "7 more groups of sources look like the same run");
    }
}
