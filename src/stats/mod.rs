//! Measurement: per-worker recording (HDR histograms, counters, a per-second series), the exact
//! merge of workers' recordings, latency summaries, and the versioned result document.
//!
//! Recording must cost no allocation per request: histograms are sized once, counters are
//! fixed arrays, and the per-second series grows once per second at most.

mod histogram;
mod recorder;
mod result;

pub use histogram::{
    latency_histogram, within_one_stdev as histogram_within_stdev, LatencySummary,
    SerializedHistogram,
};
pub use recorder::{ErrorKind, Recorder, ResponseTimes, SecondSample};
pub use result::{
    ClientUsage, Environment, ErrorCounts, Histograms, LatencySummaries, Limiter, LimiterSide,
    PlanSummary, ResponseInfo, RunResult, Totals, RESULT_SCHEMA_VERSION,
};
