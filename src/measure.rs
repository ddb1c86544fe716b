//! One measured run: the watched servers' monitors started, the engine run, and both turned
//! into the result document with its limiter verdict. `cli` (run, wrk, ab), `compare` (through
//! the `run_one` it is handed) and `k8s` all measure through here.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use thiserror::Error;

use crate::engine::{self, EngineError, Plan, Progress, RunOutcome};
use crate::monitor::{Monitor, MonitorError, WatchSource};
use crate::stats::{ClientUsage, Environment, RunResult, RunTimes, ServerNow};

#[derive(Debug, Error)]
pub enum MeasureError {
    /// A watched target could not be opened: nothing was loaded.
    #[error(transparent)]
    Watch(#[from] MonitorError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs `plan`, watching `watch`, and returns the result document.
pub fn execute(
    plan: &Plan,
    watch: &[Arc<dyn WatchSource>],
    stop: &AtomicBool,
    on_progress: impl FnMut(&Progress, &[ServerNow]),
) -> Result<RunResult, MeasureError> {
    // With --start-at, one start for the load and its monitors (it may lie ahead, and the
    // monitors' figures must not cover the wait). Without, the load's clock starts when its
    // workers do: opening monitors (fingerprints, perf) must not eat into the run.
    let clock = plan.start_at.map(|_| engine::start_instant(plan.start_at));
    let monitors_from = clock.map_or_else(std::time::Instant::now, |c| c.1);
    // Monitors sample once now, so a bad target fails before any load.
    let monitors = watch
        .iter()
        .map(|w| Monitor::start(w.as_ref(), monitors_from))
        .collect::<Result<Vec<_>, _>>()?;
    // With the progress, the watched servers' latest figures.
    let mut on_progress = on_progress;
    let with_servers = |p: &Progress| {
        let servers: Vec<ServerNow> = monitors.iter().filter_map(Monitor::now).collect();
        on_progress(p, &servers);
    };
    let outcome = match clock {
        Some(clock) => engine::run_from(plan, clock, stop, with_servers),
        None => engine::run(plan, stop, with_servers),
    };
    // Monitors stop even when the engine failed, so no sampling thread outlives the run.
    let servers: Vec<_> = monitors.into_iter().map(Monitor::finish).collect();
    let RunOutcome {
        recording,
        started_at,
        first_send_at,
        elapsed,
        interrupted,
        worker_cpu_s,
        worker_demand_s,
    } = outcome?;
    let mut result = RunResult::from_recording(
        recording,
        plan.summary(),
        Environment::local(),
        RunTimes {
            started_at,
            first_send_at,
            elapsed_s: elapsed.as_secs_f64(),
            interrupted,
        },
    );
    let answered = result.totals.requests;
    result.client = ClientUsage::from_workers(
        &worker_cpu_s,
        &worker_demand_s,
        answered,
        elapsed.as_secs_f64(),
    );
    result.servers = servers;
    for s in &mut result.servers {
        s.rate_answers(answered);
    }
    result.limiter = crate::monitor::limiter(&result);
    if let Some(h) = &plan.hooks {
        result.entries = h.entries();
    }
    Ok(result)
}

/// Local watch specs (`--watch`) as sources.
pub fn sources(specs: &[crate::monitor::WatchSpec]) -> Vec<Arc<dyn WatchSource>> {
    specs
        .iter()
        .map(|s| Arc::new(s.clone()) as Arc<dyn WatchSource>)
        .collect()
}
