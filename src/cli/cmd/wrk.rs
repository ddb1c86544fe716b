//! `archbench wrk`: wrk's command line and report, byte for byte, and its Lua scripts.

use std::sync::Arc;

use crate::cli::args::WrkArgs;
use crate::cli::execute::execute;
use crate::cli::output::{finish_code, notes_on_stderr, write_stdout, FrontEnd, OutputPlan};
use crate::cli::signals::StopSignals;
use crate::cli::wrk_plan;
use crate::cli::EXIT_FAILURE;
use crate::report::WrkReport;
use crate::script::{ScriptFile, Session};

pub fn cmd_wrk(a: &WrkArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        // wrk's first word, as scripts read it, then what answers.
        println!(
            "wrk archbench/{} [epoll] (wrk 4.x compatible front end)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let mut plan = wrk_plan(a)?;
    let outputs = OutputPlan::json_only(&a.json)?;
    // The script runs its setup and init before any load, as in wrk: a failure is a usage
    // error (exit 2) with nothing sent.
    if let Some(path) = &a.script {
        let file = ScriptFile {
            path: path.clone(),
            args: a.script_args.clone(),
        };
        let url = a.url.as_deref().unwrap_or_default();
        let session = Session::start(&file, url, &plan.target, &a.headers, plan.local_threads())
            .map_err(crate::cli::PlanError::from)?;
        plan.hooks = Some(Arc::new(session));
    }
    let report = WrkReport { latency: a.latency };
    write_stdout(|out| WrkReport::preamble(&plan.summary(), out))?;
    let result = execute(&plan, &[], &signals.stop, |_, _| {})?;
    crate::script::flush_lua_output();
    // The report reaches stdout even when the file could not be written.
    let saved = outputs.save_json(&result);
    write_stdout(|out| report.write_body(&result, out))?;
    saved?;
    notes_on_stderr(&result, FrontEnd::Wrk);
    if let Some(h) = &plan.hooks {
        if let Some(e) = h.failure() {
            // What was measured until the script failed is reported and saved above.
            crate::stderr_line!("archbench: the script failed, the load stopped: {e}");
            return Ok(EXIT_FAILURE);
        }
        h.done(&result)?;
    }
    Ok(finish_code(&result, signals))
}
