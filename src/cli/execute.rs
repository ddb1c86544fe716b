//! Running a plan from the command line: the measurement, with a target that cannot be
//! watched reported as a usage error.

use std::sync::atomic::AtomicBool;

use super::PlanError;
use crate::engine::{Plan, Progress};
use crate::monitor::WatchSpec;
use crate::stats::RunResult;

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

pub fn measure_sources(
    plan: &Plan,
    watch: &[std::sync::Arc<dyn crate::monitor::WatchSource>],
    stop: &AtomicBool,
    mut on_progress: impl FnMut(&Progress, &[crate::stats::ServerNow]),
) -> anyhow::Result<RunResult> {
    let on_progress = |p: &Progress, servers: &[crate::stats::ServerNow]| {
        if let Some(s) = p.stuck {
            abandon(s);
        }
        on_progress(p, servers)
    };
    crate::measure::execute(plan, watch, stop, on_progress).map_err(|e| match e {
        // What could not be read (a pod gone, a variant scaled to 0) is no usage error: the
        // command line was right, the thing watched was not there.
        crate::measure::MeasureError::Watch(w @ crate::monitor::MonitorError::Read { .. }) => {
            anyhow::Error::new(w)
        }
        crate::measure::MeasureError::Watch(w) => PlanError::Watch(w).into(),
        other => anyhow::Error::new(other),
    })
}

/// Ends the process when workers did not stop with the run: a script's function that never
/// returns (LuaJIT's compiled loops cannot be interrupted) holds them, and waiting for them
/// would wait for ever. What they measured is in their threads, out of reach: the line says so.
fn abandon(stuck: crate::engine::StuckWorkers) -> ! {
    crate::live::tui::release_terminal();
    crate::stderr_line!(
        "archbench: {} worker thread{} still running {:.1} s after the run ended: a script function that never returns (an endless loop in request(), response() or delay()?) holds {}; what {} measured cannot be reported",
        stuck.count,
        if stuck.count == 1 { " is" } else { "s are" },
        stuck.for_s,
        if stuck.count == 1 { "it" } else { "them" },
        if stuck.count == 1 { "it" } else { "they" },
    );
    std::process::exit(super::exit::EXIT_FAILURE)
}
