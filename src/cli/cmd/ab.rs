//! `archbench ab`: ApacheBench's command line, heartbeat and report.

use crate::cli::ab_plan;
use crate::cli::args::AbArgs;
use crate::cli::execute::execute;
use crate::cli::output::{finish_code, notes_on_stderr, write_stdout, FrontEnd, OutputPlan};
use crate::cli::signals::StopSignals;
use crate::report::{AbReport, Report};

pub fn cmd_ab(a: &AbArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        println!(
            "This is ApacheBench, Version 2.3 <archbench {}>",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let plan = ab_plan(a)?;
    let outputs = OutputPlan::json_only(&a.json)?;
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
            crate::stderr_line!("Completed {shown} requests");
        }
    };
    // ab counts a request done when it finished, answered or failed.
    let result = execute(&plan, &[], &signals.stop, |p, _| {
        beat(p.completed + p.errors)
    })?;
    beat(result.totals.attempted);
    if heartbeat > 0 {
        crate::stderr_line!("Finished {} requests", result.totals.requests);
    } else {
        write_stdout(|out| writeln!(out, "..done"))?;
    }
    let report = AbReport {
        variable_length: a.variable_length,
    };
    // The report reaches stdout even when the file could not be written.
    let saved = outputs.save_json(&result);
    write_stdout(|out| report.write(&result, out))?;
    saved?;
    notes_on_stderr(&result, FrontEnd::Ab);
    Ok(finish_code(&result, signals))
}
