//! `archbench h2load`: h2load's core flags and its layout (see report::h2load for what is
//! measured differently).

use std::io::Write as _;

use crate::cli::args::H2loadArgs;
use crate::cli::execute::execute;
use crate::cli::h2load_plan;
use crate::cli::output::{finish_code, notes_on_stderr, write_stdout, FrontEnd, OutputPlan};
use crate::cli::signals::StopSignals;
use crate::engine::Plan;
use crate::report::{H2loadReport, H2loadSetup};

pub fn cmd_h2load(a: &H2loadArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        // h2load's first word, then what answers.
        println!(
            "h2load archbench/{} (nghttp2 1.52 compatible front end)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let plan = h2load_plan(a)?;
    let outputs = OutputPlan::json_only(&a.json)?;
    let setup = H2loadSetup {
        threads: plan.threads,
        clients: plan.connections as u64,
        requests: plan.stop.requests,
        warm_up_s: a.warm_up.map_or(0.0, |d| d.as_secs_f64()),
        duration_s: plan.stop.duration.map_or(0.0, |d| d.as_secs_f64()),
    };
    write_stdout(|out| H2loadReport::preamble(&setup, out))?;
    let started = std::time::Instant::now();
    let mut spoken = ProtocolLine::of(&plan);
    if let Some(warmed) = before_main(a, &plan, &mut spoken, signals)? {
        return Ok(finish_code(&warmed, signals));
    }
    // Count-based tests print their progress every tenth of the requests, as h2load does.
    let mut shown = 0u64;
    let total = plan.stop.requests;
    let result = execute(&plan, &[], &signals.stop, |p, _| {
        spoken.when_spoken(p);
        let Some(n) = total else { return };
        while shown < 10 && p.completed * 10 >= n * (shown + 1) {
            shown += 1;
            let _ = writeln!(std::io::stdout(), "progress: {}% done", shown * 10);
        }
    })?;
    spoken.at_end(&result);
    if plan.stop.duration.is_some() {
        each_thread(&plan, &|w| {
            format!("Main benchmark duration is over for thread #{w}. Stopping all clients.\nStopped all clients for thread #{w}")
        })?;
    }
    if plan.target.scheme == crate::http::Scheme::Https {
        write_stdout(|out| H2loadReport::protocol(&result, out))?;
    }
    let report = H2loadReport { latency: a.latency };
    let elapsed = started.elapsed().as_secs_f64();
    // The report reaches stdout even when the file could not be written.
    let saved = outputs.save_json(&result);
    write_stdout(|out| report.write_body(&result, elapsed, out))?;
    saved?;
    notes_on_stderr(&result, FrontEnd::Wrk);
    Ok(finish_code(&result, signals))
}

/// One line per worker thread, as h2load prints per thread.
fn each_thread(plan: &Plan, what: &dyn Fn(usize) -> String) -> anyhow::Result<()> {
    write_stdout(|out| (0..plan.threads).try_for_each(|w| writeln!(out, "{}", what(w))))
}

/// What h2load says it speaks over http:// (over https the server chooses; those lines come
/// after the load), once a connection has opened: h2load prints it at its first client's
/// connect, and nothing when none opens.
struct ProtocolLine(Option<&'static str>);

impl ProtocolLine {
    fn of(plan: &Plan) -> ProtocolLine {
        ProtocolLine((plan.target.scheme == crate::http::Scheme::Http).then_some(
            if plan.http2.is_some() {
                "h2c"
            } else {
                "http/1.1"
            },
        ))
    }

    /// Printed once the server has said something on a connection (before any progress line
    /// that follows in the same call).
    fn when_spoken(&mut self, p: &crate::engine::Progress) {
        if p.bytes_read > 0 {
            self.print();
        }
    }

    /// At the load's end, if a connection opened that never heard a byte.
    fn at_end(&mut self, r: &crate::stats::RunResult) {
        if r.totals.connections_opened > 0 {
            self.print();
        }
    }

    fn print(&mut self) {
        if let Some(proto) = self.0.take() {
            let _ = writeln!(std::io::stdout(), "Application protocol: {proto}");
        }
    }
}

/// Before the measured load: a timing-based test's phases as h2load prints them (each
/// thread's clients started, the warm-up: the same load for --warm-up-time, not measured);
/// a count-based test's protocol line. The warm-up's result when a signal ended it.
fn before_main(
    a: &H2loadArgs,
    plan: &Plan,
    spoken: &mut ProtocolLine,
    signals: &StopSignals,
) -> anyhow::Result<Option<crate::stats::RunResult>> {
    if plan.stop.duration.is_none() {
        return Ok(None);
    }
    each_thread(plan, &|w| format!("Warm-up started for thread #{w}."))?;
    write_stdout(|out| {
        (0..plan.threads).try_for_each(|w| {
            let clients = crate::engine::Part {
                index: w as u32,
                count: plan.threads as u32,
            }
            .share(plan.connections as u64);
            (1..=clients).try_for_each(|k| {
                writeln!(out, "progress: {}% of clients started", k * 100 / clients)
            })
        })
    })?;
    if let Some(warm) = a.warm_up {
        let mut warm_plan = plan.clone();
        warm_plan.stop.duration = Some(warm);
        let warmed = execute(&warm_plan, &[], &signals.stop, |p, _| spoken.when_spoken(p))?;
        spoken.at_end(&warmed);
        if warmed.interrupted {
            return Ok(Some(warmed));
        }
    }
    each_thread(plan, &|w| {
        format!("Warm-up phase is over for thread #{w}.\nMain benchmark duration is started for thread #{w}.")
    })?;
    Ok(None)
}
