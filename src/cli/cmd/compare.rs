//! `archbench compare`: targets interleaved over repeated runs, with verdicts.

use crate::cli::args::CompareArgs;
use crate::cli::exit::EXIT_FAILURE;
use crate::cli::flags::Format;
use crate::cli::output::{check_prices, write_stdout, Ending, OutputPlan};
use crate::cli::session::Session;
use crate::cli::signals::StopSignals;
use crate::cli::{live, plan, PlanError};

pub fn cmd_compare(a: &CompareArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let plan = plan::compare_plan(a)?;
    let outputs = OutputPlan::new(
        &a.output,
        "compare",
        &[Format::Json, Format::Markdown, Format::Html],
    )?;
    let names: Vec<&str> = plan.contenders.iter().map(|c| c.name.as_str()).collect();
    check_prices(&a.cost.cost, &names)?;
    if let Some(why) = crate::compare::no_verdict_reason(plan.runs, plan.runs) {
        crate::stderr_line!("archbench: {why}; the table will show medians and differences only");
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
        a.quiet.quiet,
        outputs.text(),
        plan.contenders.first().and_then(|c| c.plan.stop.duration),
    )?;
    let title = format!("compare {}", names.join(" vs "));
    let say_runs = !a.quiet.quiet && outputs.text();
    let mut session = Session::begin(&a.live, &plan.contenders, tui, title, say_runs, signals)?;
    let mut save_so_far =
        |c: &crate::compare::ComparisonResult| -> anyhow::Result<()> { outputs.save_json(c) };
    let result = session.compare(&plan, commands, None, None, &mut save_so_far);
    session.close();
    let mut result = result?;
    if let Some(slo) = &a.load.slo.slo {
        result.slo = result.judge_slo(slo);
    }
    result.cost = result.costs(&a.cost.cost);
    outputs.write_files(&result)?;
    for t in &result.targets {
        if let Some(answers) = t.runs.iter().find_map(|r| r.error_answers()) {
            crate::stderr_line!("archbench: warning ({}): {answers}", t.name);
        }
    }
    outputs.write_stdout(&result)?;
    crate::script::flush_lua_output();
    script_reports(&plan.contenders, &result)?;
    // A target's script that failed stopped its run (the figures above keep what it did).
    let failed: Vec<String> = plan
        .contenders
        .iter()
        .filter_map(|c| Some(format!("{}: {}", c.name, c.plan.hooks.as_ref()?.failure()?)))
        .collect();
    if !failed.is_empty() {
        crate::stderr_line!(
            "archbench: a script failed, its load stopped: {}",
            failed.join("; ")
        );
        return Ok(EXIT_FAILURE);
    }
    let ending = Ending::of_comparison(&result);
    session.linger(ending.interrupted());
    Ok(ending.status(signals))
}

/// Each target's script's done() after the report, once per measured run with that run's
/// figures (a run of compare is one run as `run` or wrk would make it), headed by whose run
/// it is. A script that failed reports nothing: its failure is said below.
fn script_reports(
    contenders: &[crate::compare::Contender],
    result: &crate::compare::ComparisonResult,
) -> anyhow::Result<()> {
    for (c, t) in contenders.iter().zip(&result.targets) {
        let Some(h) = c.plan.hooks.as_ref().filter(|h| h.reports()) else {
            continue;
        };
        if h.failure().is_some() {
            continue;
        }
        for (i, run) in t.runs.iter().enumerate() {
            write_stdout(|out| {
                writeln!(
                    out,
                    "done() of {}, run {} of {}:",
                    t.name,
                    i + 1,
                    t.runs.len()
                )
            })?;
            h.done(run)?;
        }
    }
    Ok(())
}
