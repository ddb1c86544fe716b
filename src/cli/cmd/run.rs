//! `archbench run`: one load, its report, its live views.

use crate::cli::args::RunArgs;
use crate::cli::execute::execute;
use crate::cli::exit::EXIT_FAILURE;
use crate::cli::flags::Format;
use crate::cli::output::{notes_on_stderr, Ending, FrontEnd, OutputPlan};
use crate::cli::progress::ProgressLine;
use crate::cli::signals::StopSignals;
use crate::cli::{live, plan, run_plan};

pub fn cmd_run(a: &RunArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let plan = run_plan(a)?;
    let outputs = OutputPlan::new(
        &a.output,
        "run",
        &[Format::Json, Format::Markdown, Format::Html],
    )?;
    let watch = plan::with_perf(&a.load.request.watch, &a.load.perf)?;
    let name = plan.target.redacted_url.clone();
    let mut views = live::LiveViews::start(&a.live, &[(&name, &plan)])?;
    let text = outputs.text();
    let quiet = a.quiet.quiet;
    let tui = live::want_tui(&a.live, quiet, text, plan.stop.duration)?;
    let dashboard = views.dashboard(tui, "run".into(), signals)?;
    let mut progress = ProgressLine::new(!quiet && text && !tui);
    let waits = |at: std::time::SystemTime| {
        let wait = at.duration_since(std::time::SystemTime::now()).ok()?;
        (wait.as_secs_f64() >= 1.0).then_some((at, wait))
    };
    if let Some((at, wait)) = plan.start_at.and_then(waits).filter(|_| !quiet) {
        // Else a part started early looks hung until the others are ready.
        crate::stderr_line!(
            "archbench: waiting {:.1} s for --start-at {}",
            wait.as_secs_f64(),
            crate::timefmt::rfc3339_micros(at)
        );
    }
    let result = execute(&plan, &watch, &signals.stop, |p, servers| {
        progress.update(p);
        views.update(&name, p, servers);
    });
    progress.finish();
    views.board.finish_run(&name);
    // The terminal is restored before anything else prints.
    live::close(dashboard);
    let mut result = result?;
    if result.interrupted && result.first_send_at.is_none() {
        // Stopped while it waited for --start-at: a report would show zeros it never measured.
        crate::stderr_line!(
            "archbench: interrupted before the load started: nothing was measured, so no report"
        );
        return Ok(signals.exit_code());
    }
    if let Some(slo) = &a.load.slo.slo {
        result.slo = Some(slo.judge_run(&result));
    }
    if let Some(at) = plan.start_at {
        // Within the grace the part keeps --start-at as its clock (its first sends are late,
        // and send lateness shows it); beyond it, it started late and out of phase.
        if result.started_at != crate::timefmt::rfc3339_micros(at) {
            crate::stderr_line!(
                "archbench: --start-at {} had passed by more than {} s when this part could start; it started at {}, out of phase with the other parts",
                crate::timefmt::rfc3339_micros(at),
                crate::engine::START_GRACE.as_secs(),
                result.started_at
            );
        }
    }
    // The report reaches stdout even when a file could not be written.
    let saved = outputs.write_files(&result);
    notes_on_stderr(&result, FrontEnd::Run);
    outputs.write_stdout(&result)?;
    saved?;
    if let Some(h) = &plan.hooks {
        crate::script::flush_lua_output();
        if let Some(e) = h.failure() {
            // What was measured until the script failed is reported and saved above.
            crate::stderr_line!("archbench: the script failed, the load stopped: {e}");
            return Ok(EXIT_FAILURE);
        }
        h.done(&result)?;
    }
    let ending = Ending::of_run(&result);
    views.linger(signals, ending.interrupted());
    Ok(ending.status(signals))
}
