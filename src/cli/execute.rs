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
    on_progress: impl FnMut(&Progress, &[crate::stats::ServerNow]),
) -> anyhow::Result<RunResult> {
    crate::measure::execute(plan, watch, stop, on_progress).map_err(|e| match e {
        crate::measure::MeasureError::Watch(w) => PlanError::Watch(w).into(),
        other => anyhow::Error::new(other),
    })
}
