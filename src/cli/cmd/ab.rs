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
    let mut quiet = Quiet::new(a.timeout);
    let result = execute(&plan, &[], &signals.stop, |p, _| {
        let done = p.completed + p.errors;
        beat(done);
        // Activity as ab sees it: a request finishing, or bytes arriving.
        if quiet.for_too_long(done + p.bytes_read) {
            signals.stop.request();
        }
    })?;
    if quiet.fired {
        return Ok(gave_up(&result, &outputs));
    }
    // ab's Ctrl-C goes straight to its report: no last heartbeat, "Finished" or "..done".
    if !result.interrupted {
        beat(result.totals.attempted);
        if heartbeat > 0 {
            crate::stderr_line!("Finished {} requests", result.totals.requests);
        } else {
            write_stdout(|out| writeln!(out, "..done"))?;
        }
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

/// ab's `-s`: how long the run may go without activity before it is given up. ab waits that
/// long for any socket to stir; the progress shows requests finishing and bytes arriving.
struct Quiet {
    limit: std::time::Duration,
    done: u64,
    since: std::time::Instant,
    fired: bool,
}

impl Quiet {
    fn new(limit: std::time::Duration) -> Quiet {
        Quiet {
            limit,
            done: 0,
            since: std::time::Instant::now(),
            fired: false,
        }
    }

    /// True once, when `done` (a count that moves with any activity) has not moved for the
    /// limit.
    fn for_too_long(&mut self, done: u64) -> bool {
        let now = std::time::Instant::now();
        if done != self.done {
            self.done = done;
            self.since = now;
            return false;
        }
        if self.fired || now.duration_since(self.since) < self.limit {
            return false;
        }
        self.fired = true;
        true
    }
}

/// ab's ending when its socket timeout expires: its error and, when any finished, the
/// requests done (answered or failed), no report (the JSON, when asked for, keeps what was
/// measured); status 1 (ab's is 119, its error code 70007 cut to a byte).
fn gave_up(result: &crate::stats::RunResult, outputs: &OutputPlan) -> i32 {
    crate::stderr_line!("apr_pollset_poll: The timeout specified has expired (70007)");
    let saved = outputs.save_json(result);
    let done = result.totals.attempted;
    let said = write_stdout(|out| match done {
        0 => Ok(()),
        n => writeln!(out, "Total of {n} requests completed"),
    });
    if let Err(e) = saved.and(said) {
        crate::stderr_line!("archbench: {e}");
    }
    crate::cli::EXIT_FAILURE
}
