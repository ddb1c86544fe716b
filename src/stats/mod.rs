//! Measurement: per-worker recording (HDR histograms, counters, a per-second series), the exact
//! merge of workers' recordings, latency summaries, and the versioned result document.
//!
//! Recording must cost no allocation per request: histograms are sized once, counters are
//! fixed arrays, and the per-second series grows once per second at most.

mod h2;
mod histogram;
mod latency_series;
mod merge;
mod quic;
mod recorder;
mod result;
mod server;
mod tls;

pub use h2::{H2CodeCount, H2Figures};
pub use histogram::{
    latency_histogram, within_one_stdev as histogram_within_stdev, LatencySummary,
    SerializedHistogram, HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS,
};
pub use latency_series::{Buckets, LatencySeries, LatencyStep, MAX_LATENCY_STEPS};
pub use merge::{
    first_send_vs_schedule, merge_results, same_load, start_skew, started_at, MergeError, Merger,
    NamedResult,
};
pub use quic::{QuicConnectionCounts, QuicFigures};
pub use recorder::{
    step_covered, ErrorKind, IncompatibleHistograms, Recorder, ResponseTimes, SecondSample,
    MAX_SERIES, STATUS_SLOTS,
};
pub use result::{
    answered_nothing_in, ClientUsage, ConditionOutcome, EntryResult, Environment, ErrorCounts,
    Histograms, LatencySummaries, Limiter, LimiterSide, LostSource, PacingSummary, PartSummary,
    PlanSummary, ResponseInfo, RunResult, RunTimes, SloOutcome, SourceRun, Totals, Unanswered,
    READABLE_RESULT_VERSIONS, RESULT_KIND, RESULT_SCHEMA_VERSION,
};
pub use server::{
    requests_per_cpu_s, servers_run_cpu_s, servers_sum, AtomicInstructions, BinaryBuild,
    CounterValue, Figure, SamplingStopped, ServerFingerprint, ServerNow, ServerUsage, Unmeasured,
    WatchedPod, MEASURABLE_CPU_S,
};
pub use tls::{TlsFailure, TlsFailureCount, TlsFigures, CIPHER_SUITES, KX_GROUPS};
