//! `archbench wrk`: wrk's command line and report, byte for byte.

use crate::cli::args::WrkArgs;
use crate::cli::execute::execute;
use crate::cli::output::{finish_code, notes_on_stderr, save, write_stdout, FrontEnd};
use crate::cli::signals::StopSignals;
use crate::cli::wrk_plan;
use crate::report::WrkReport;

pub fn cmd_wrk(a: &WrkArgs, signals: &StopSignals) -> anyhow::Result<i32> {
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
