use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::{os, timefmt};

use super::histogram::{latency_histogram, LatencySummary, SerializedHistogram};
use super::latency_series::{LatencySeries, LatencyStep};
use super::recorder::{ErrorKind, Recorder, SecondSample};

/// Bumped when a field changes meaning or disappears; `schema/result.schema.json` follows it.
/// Version 2 added sub-second start times, the open-loop pacing figures, parts, merged
/// sources and coarsened series; version 1 documents still read (the new fields absent).
/// Version 3: a server's `context_switches` and `processes` are null where not measured
/// (earlier versions wrote 0 and 1 there), with the reason in `unmeasured`, and `pods` lists
/// each pod of a variant; version 1 and 2 documents still read.
pub const RESULT_SCHEMA_VERSION: u32 = 3;

/// The result versions this build reads.
pub const READABLE_RESULT_VERSIONS: [u32; 3] = [1, 2, 3];

/// One run's result: the public JSON format (`--json FILE`, `--output json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Always "archbench-result".
    pub kind: String,
    /// Version of this format.
    pub schema_version: u32,
    /// When the load started, RFC 3339 UTC with microseconds (whole seconds before version 2).
    pub started_at: String,
    /// When the first request went out, RFC 3339 UTC with microseconds; later than
    /// `started_at` by the time the first connection took to open.
    #[serde(default)]
    pub first_send_at: Option<String>,
    /// What was asked for (secrets redacted).
    pub plan: PlanSummary,
    /// Where the client ran.
    pub environment: Environment,
    /// True when a signal stopped the run before its stop rule.
    pub interrupted: bool,
    /// Totals over the whole run.
    pub totals: Totals,
    /// Failed requests by kind.
    pub errors: ErrorCounts,
    /// Responses by status code ("200": n).
    pub status_codes: BTreeMap<String, u64>,
    /// What the server answered with (from the responses themselves).
    pub response: ResponseInfo,
    /// Latency summaries in microseconds.
    pub latency: LatencySummaries,
    /// Completed, errors and bytes per step of the run (`series_step_s` seconds each).
    pub series: Vec<SecondSample>,
    /// Seconds each `series` sample covers: 1, more for runs longer than 18 hours.
    #[serde(default = "one")]
    pub series_step_s: u32,
    /// Latency over time: per step (`latency_step_s` seconds; steps without a response left
    /// out), the count, p50/p90/p99/p99.9/max of total latency and the step's histogram.
    /// Their counts add up to `totals.requests`. Absent from documents of older builds.
    #[serde(default)]
    pub latency_series: Vec<LatencyStep>,
    /// Seconds each `latency_series` step covers: 1, more for runs longer than 68 minutes.
    #[serde(default = "one")]
    pub latency_step_s: u32,
    /// Open loop only: how well the client kept its send schedule.
    #[serde(default)]
    pub pacing: Option<PacingSummary>,
    /// Over https: handshakes full and resumed, what was negotiated, failures by reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<super::TlsFigures>,
    /// Over HTTP/2: streams asked for and allowed, GOAWAYs, retried requests, resets and
    /// connection errors by error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<super::H2Figures>,
    /// Over HTTP/3: the QUIC stack's counters (datagrams, losses, congestion, path MTU),
    /// handshakes, GOAWAYs, retried requests, resets and connection errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<super::QuicFigures>,
    /// The full distributions, to merge or re-analyse later.
    pub histograms: Histograms,
    /// What archbench itself used (its worker threads).
    pub client: ClientUsage,
    /// What each `--watch`ed server used during the run.
    #[serde(default)]
    pub servers: Vec<super::ServerUsage>,
    /// Which side's CPU limited the result.
    pub limiter: Limiter,
    /// For a result merged from several (`archbench merge`): each source's own view, in the
    /// order given. Empty for a single run.
    #[serde(default)]
    pub sources: Vec<SourceRun>,
    /// Sources of a distributed run that produced no result (a worker that failed or was
    /// evicted): the figures above lack their share.
    #[serde(default)]
    pub lost_sources: Vec<LostSource>,
    /// Merged: the latest source's first send minus the earliest's, in seconds (how
    /// together the sources started), when every source sent.
    #[serde(default)]
    pub start_skew_s: Option<f64>,
    /// How the run fared against `--slo`, when one was given.
    #[serde(default)]
    pub slo: Option<SloOutcome>,
    /// A request mix (`--requests FILE`): each entry's own figures, in the file's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<EntryResult>,
}

/// One entry of a request mix: what it sent and how it was answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryResult {
    pub name: String,
    pub method: String,
    /// Path and query.
    pub path: String,
    pub weight: u64,
    /// Answered (any status).
    pub requests: u64,
    /// Failed without an answer (connect, read, write, timeout, …).
    pub errors: u64,
    pub status_codes: BTreeMap<String, u64>,
    /// Latency from the intended start, µs (the run's `latency.total`, of this entry alone).
    pub latency: LatencySummary,
    /// The same, as a histogram (the run's bounds).
    pub histogram: SerializedHistogram,
}

/// How one condition fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionOutcome {
    pub condition: String,
    /// The figure judged, in `unit`; None when the run has none (no request answered).
    pub measured: Option<f64>,
    pub unit: String,
    pub passed: bool,
    /// A latency percentile that lies among the requests still unanswered at the end: more
    /// of them than the percentile leaves above it (see `SloMetric::judged`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_determined: bool,
}

/// How a run (or a target's runs) fared against every condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloOutcome {
    pub passed: bool,
    pub conditions: Vec<ConditionOutcome>,
}

/// A worker of a distributed run whose result never came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LostSource {
    /// Which worker ("worker 2 (pod archbench-load-arm-…-2-x7k)").
    pub name: String,
    /// What happened to it.
    pub reason: String,
    /// Its share of the connections.
    pub connections: u64,
    /// Its share of the open-loop rate.
    pub rate: Option<f64>,
}

fn one() -> u32 {
    1
}

/// How well an open-loop run kept its schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacingSummary {
    /// The rate asked for (requests per second).
    pub target_rate: f64,
    /// Requests sent per second of the run (answered, failed, or unanswered at its end):
    /// what the client kept of the schedule, whatever the server made of it.
    pub achieved_rate: f64,
    /// How late each request went out after it could have: its intended send time, or the
    /// moment its connection came free if that was later (µs). Large values mean the client
    /// could not keep the schedule.
    pub lateness: LatencySummary,
    /// Requests sent before their due time, within the pacing slack (so that sends due close
    /// together share one wake-up); their latency counts from the actual send.
    #[serde(default)]
    pub early_sends: u64,
    /// How early those requests went out (µs); all zero when none did.
    #[serde(default)]
    pub earliness: LatencySummary,
    /// Requests whose connection was still waiting for the previous response at their
    /// intended send time: the server held them up (their latency counts from the intended
    /// time). Many mean too few connections for the rate.
    pub held_by_busy_connection: u64,
}

/// One source of a merged result: where and when it ran, and its own figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceRun {
    /// The file it was read from.
    pub file: String,
    /// Its `started_at`.
    pub started_at: String,
    /// Its `first_send_at`.
    pub first_send_at: Option<String>,
    /// Seconds its start lay after the earliest source's (whole seconds shift its series).
    pub start_offset_s: f64,
    pub plan: PlanSummary,
    pub environment: Environment,
    pub totals: Totals,
    pub interrupted: bool,
    pub client: ClientUsage,
    pub limiter: Limiter,
    #[serde(default)]
    pub pacing: Option<PacingSummary>,
}

/// The verdict on who limited a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limiter {
    pub side: LimiterSide,
    /// One sentence with the figure behind the verdict.
    pub reason: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LimiterSide {
    /// archbench's own threads were saturated.
    Client,
    /// A watched server was at its CPU limit.
    Server,
    Both,
    /// Neither side's CPU was saturated.
    Neither,
    /// The client was not saturated and no server was watched.
    Unknown,
    /// A watched server went away during the run: what followed measures its absence.
    ServerGone,
}

impl LimiterSide {
    /// As the documents spell it (snake_case).
    pub fn as_str(self) -> &'static str {
        match self {
            LimiterSide::Client => "client",
            LimiterSide::Server => "server",
            LimiterSide::Both => "both",
            LimiterSide::Neither => "neither",
            LimiterSide::Unknown => "unknown",
            LimiterSide::ServerGone => "server_gone",
        }
    }
}

/// The load generator's own CPU, so a reader can tell whether it was the bottleneck.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientUsage {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// user + system over all worker threads.
    pub cpu_s: f64,
    /// Answered requests per client CPU-second; null under `MEASURABLE_CPU_S` of CPU (a
    /// run too short to divide by).
    pub requests_per_cpu_s: Option<f64>,
    /// The busiest worker thread's share of the run spent running or waiting to run (its
    /// CPU time where the kernel keeps no schedstat), in percent.
    pub busiest_worker_percent: f64,
}

impl ClientUsage {
    pub fn from_workers(
        worker_cpu_s: &[(f64, f64)],
        worker_demand_s: &[Option<f64>],
        requests: u64,
        elapsed_s: f64,
    ) -> ClientUsage {
        let (user, system) = worker_cpu_s
            .iter()
            .fold((0.0, 0.0), |(u, s), (wu, ws)| (u + wu, s + ws));
        let cpu_s = user + system;
        // Demand (ran or waited to run) where the kernel reports it, CPU time otherwise.
        let busiest = worker_cpu_s
            .iter()
            .zip(
                worker_demand_s
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(None)),
            )
            .map(|((u, s), demand)| demand.unwrap_or(u + s))
            .fold(0.0, f64::max);
        ClientUsage {
            cpu_user_s: user,
            cpu_system_s: system,
            cpu_s,
            requests_per_cpu_s: super::server::requests_per_cpu_s(requests, cpu_s),
            busiest_worker_percent: if elapsed_s > 0.0 {
                busiest * 100.0 / elapsed_s
            } else {
                0.0
            },
        }
    }
}

/// The run's configuration as it is safe to store.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlanSummary {
    /// Target URL, user-info removed.
    pub url: String,
    pub method: String,
    /// Request headers; values of credential headers are replaced by "REDACTED".
    pub headers: Vec<(String, String)>,
    /// Request body size in bytes.
    pub body_bytes: u64,
    /// "HTTP/1.1" or "HTTP/1.0".
    pub http_version: String,
    pub connections: u64,
    pub threads: u64,
    /// Duration stop rule in seconds, if any.
    pub duration_s: Option<f64>,
    /// Exact request count stop rule, if any.
    pub requests: Option<u64>,
    /// Open-loop target rate in requests per second; null for closed loop. With stages,
    /// their mean.
    pub rate: Option<f64>,
    /// Open loop whose rate changes (`--stages`): the whole load's stages, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<crate::stages::Stage>>,
    pub keepalive: bool,
    /// Per-request timeout in seconds.
    pub timeout_s: f64,
    /// True when TLS certificates were not verified.
    pub insecure: bool,
    /// Set when this process ran one part of a load shared by several (`--part I/N`); the
    /// figures above are this part's.
    #[serde(default)]
    pub part: Option<PartSummary>,
    /// The wall-clock start asked for (`--start-at`), RFC 3339 UTC.
    #[serde(default)]
    pub start_at: Option<String>,
    /// Over https: whether new connections resumed earlier TLS sessions (`--tls-resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resume: Option<bool>,
    /// Over https: the one TLS version asked for (`--tls-version`: "1.2" or "1.3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_version: Option<String>,
    /// Over https: the cipher suites and key-exchange groups offered, when narrowed
    /// (`--tls-ciphers`, `--tls-groups`; rustls's names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ciphers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_groups: Option<Vec<String>>,
    /// Over https: the file of the one certificate accepted (`--pinned-cert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cert: Option<String>,
    /// HTTP/2 (`--http2`): the concurrent streams asked for per connection (`--streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_streams: Option<u32>,
    /// HTTP/3 (`--http3`): the concurrent request streams asked for per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http3_streams: Option<u32>,
    /// `--0rtt`: connections resumed a session fetched before the run and sent their first
    /// requests in 0-RTT early data (the quic block counts what the server accepted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http3_0rtt: bool,
    /// Over https: the application protocols offered by ALPN, in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<Vec<String>>,
    /// Open loop: sends due within this many µs after a wake-up went out in it, early
    /// (`--pacing-slack`); absent for a closed loop and in documents of older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_slack_us: Option<u64>,
    /// The wrk Lua script that built the requests (`--script`, `wrk -s`): method, headers
    /// and body above are only its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The request mix sent (`--mix`): its entries are in the result's `entries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<String>,
}

/// One part of a load run by several processes together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartSummary {
    /// This part's index, from 0.
    pub index: u32,
    /// How many parts the whole load has.
    pub count: u32,
    /// Connections of the whole load.
    pub connections: u64,
    /// Requests of the whole load, when bounded by count.
    pub requests: Option<u64>,
    /// Open-loop rate of the whole load (requests per second).
    pub rate: Option<f64>,
}

/// The client machine, so figures can be read in context.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Environment {
    pub archbench_version: String,
    /// CPU architecture (x86_64, aarch64, …).
    pub arch: String,
    pub cpu_model: String,
    /// Logical CPUs available to the process.
    pub cores: u64,
    /// Kernel release (uname -r).
    pub kernel: String,
    pub os: String,
    pub hostname: String,
    /// aarch64 only: whether the CPU has ARMv8.1 LSE atomics ("atomics" in /proc/cpuinfo).
    #[serde(default)]
    pub lse_atomics: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Totals {
    /// Responses received in full (any status).
    pub requests: u64,
    /// Requests that failed (sum of `errors`).
    pub errors: u64,
    /// Requests attempted: requests + errors.
    pub attempted: u64,
    /// Requests sent whose response had not come in full when the run ended (neither
    /// answered nor failed): a server slower than the run shows here.
    #[serde(default)]
    pub unanswered_at_end: u64,
    /// Wall time from first request to stop, in seconds.
    pub elapsed_s: f64,
    pub requests_per_sec: f64,
    /// Bytes received (heads and bodies).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Response body bytes (after de-chunking).
    pub body_bytes: u64,
    pub bytes_read_per_sec: f64,
    /// Responses after which the connection stayed open.
    pub keepalive_responses: u64,
    /// TCP connections opened (successfully).
    pub connections_opened: u64,
    /// Responses whose status was not 2xx or 3xx.
    pub non_2xx_3xx: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorCounts {
    pub connect: u64,
    /// Of the connect errors: no free local port (ephemeral ports exhausted, EADDRNOTAVAIL).
    pub connect_no_local_port: u64,
    pub tls: u64,
    pub timeout: u64,
    pub read: u64,
    pub write: u64,
    pub protocol: u64,
}

impl ErrorCounts {
    pub fn get(&self, kind: ErrorKind) -> u64 {
        match kind {
            ErrorKind::Connect => self.connect,
            ErrorKind::Tls => self.tls,
            ErrorKind::Timeout => self.timeout,
            ErrorKind::Read => self.read,
            ErrorKind::Write => self.write,
            ErrorKind::Protocol => self.protocol,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResponseInfo {
    /// `Server` header of the first response.
    pub server: Option<String>,
    /// Body length of the first response.
    pub first_body_bytes: Option<u64>,
    /// Responses whose body length differed from the first.
    pub body_length_mismatches: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencySummaries {
    /// From intended start to last byte (coordinated-omission corrected under a rate).
    pub total: LatencySummary,
    /// From writing the request to the last byte (uncorrected service time).
    pub service: LatencySummary,
    /// TCP connect, for requests that opened a connection.
    pub connect: LatencySummary,
    /// From writing the request to the first response byte.
    pub first_byte: LatencySummary,
}

/// Base64 of HdrHistogram V2 compressed encodings, values in microseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Histograms {
    pub total: SerializedHistogram,
    pub service: SerializedHistogram,
    pub connect: SerializedHistogram,
    pub first_byte: SerializedHistogram,
    /// Per-worker requests per second sampled every 100 ms.
    pub worker_rate: SerializedHistogram,
    /// Open loop: send lateness (see `pacing.lateness`), µs.
    #[serde(default)]
    pub send_lateness: Option<SerializedHistogram>,
    /// Open loop: how early the early sends went out (see `pacing.earliness`), µs; absent
    /// when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_earliness: Option<SerializedHistogram>,
    /// Over https: handshake times (see `tls.handshake`), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake: Option<SerializedHistogram>,
    /// Per connection that got a response: from its connect start to the first response
    /// byte read on it (the TLS handshake included), µs; h2load's "time to 1st byte".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_first_byte: Option<SerializedHistogram>,
    /// Not a histogram: each client's (a connection slot's, across reconnects) answers over
    /// its span, in requests per second, exact; h2load's per-client req/s. None from a build
    /// that kept none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_rates: Option<Vec<f64>>,
}

/// Above this share of a run's answers outside 2xx/3xx, its figures are said to describe
/// error responses (a wrong path, a server refusing the load), in every report and on stderr.
pub const ERROR_ANSWERS_WARN: f64 = 0.01;

/// The requests of a run that answered none, though it tried: those that failed, and those
/// still waiting for their answer when it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unanswered {
    pub failed: u64,
    pub in_flight_at_end: u64,
    /// Of the failed: connects that failed (refused, unreachable), and TLS handshakes.
    pub connect: u64,
    pub tls: u64,
}

impl std::ops::Add for Unanswered {
    type Output = Unanswered;
    fn add(self, other: Unanswered) -> Unanswered {
        Unanswered {
            failed: self.failed + other.failed,
            in_flight_at_end: self.in_flight_at_end + other.in_flight_at_end,
            connect: self.connect + other.connect,
            tls: self.tls + other.tls,
        }
    }
}

impl std::fmt::Display for Unanswered {
    /// "3 failed", "2 still unanswered when it ended", or both.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.failed, self.in_flight_at_end) {
            (failed, 0) => write!(f, "{failed} failed"),
            (0, open) => write!(f, "{open} still unanswered when it ended"),
            (failed, open) => write!(f, "{failed} failed, {open} still unanswered when it ended"),
        }
    }
}

/// What became of the requests of `runs` when none of them answered one though they sent
/// some (a comparison's target over its runs, a sweep's over every step); None when one was
/// answered, or there was no run.
pub fn answered_nothing_in<'a>(
    runs: impl IntoIterator<Item = &'a RunResult>,
) -> Option<Unanswered> {
    let mut runs = runs.into_iter().peekable();
    runs.peek()?;
    runs.map(RunResult::answered_nothing)
        .try_fold(Unanswered::default(), |sum, r| Some(sum + r?))
}

impl RunResult {
    /// What became of the requests, when the run answered none though it sent some: a
    /// measurement of nothing, which a command must not end with success.
    pub fn answered_nothing(&self) -> Option<Unanswered> {
        let t = &self.totals;
        (t.requests == 0 && t.errors + t.unanswered_at_end > 0).then_some(Unanswered {
            failed: t.errors,
            in_flight_at_end: t.unanswered_at_end,
            connect: self.errors.connect,
            tls: self.errors.tls,
        })
    }

    /// The percentage of answers that were not 2xx/3xx, when more than 1% were: such answers
    /// are counted as requests (they were answered) but measure the error path, not the page.
    pub fn error_answer_percent(&self) -> Option<f64> {
        let (bad, all) = (self.totals.non_2xx_3xx, self.totals.requests);
        (all > 0 && (bad as f64) > ERROR_ANSWERS_WARN * all as f64)
            .then(|| bad as f64 * 100.0 / all as f64)
    }

    /// The warning sentence of [`RunResult::error_answer_percent`], with the codes.
    pub fn error_answers(&self) -> Option<String> {
        let percent = self.error_answer_percent()?;
        let codes: Vec<String> = self
            .status_codes
            .iter()
            .filter(|(c, _)| !c.parse::<u32>().is_ok_and(|c| (200..400).contains(&c)))
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        Some(format!(
            "{} of {} answers ({percent:.1}%) were not 2xx/3xx ({}): the figures describe error responses",
            self.totals.non_2xx_3xx,
            self.totals.requests,
            codes.join(", ")
        ))
    }

    pub fn from_recording(
        rec: Recorder,
        plan: PlanSummary,
        environment: Environment,
        times: RunTimes,
    ) -> RunResult {
        let RunTimes {
            started_at,
            first_send_at,
            elapsed_s,
            interrupted,
        } = times;
        let totals = recorded_totals(&rec, elapsed_s);
        // The series ends with the run: drop the empty steps past the elapsed time (made
        // ahead for the run's expected length). A merge shifts each source by its start
        // rounded to the second, which can put a source's last step one past the merged
        // run's elapsed time: kept, or the series would not add up to the totals.
        let mut series = rec.series.clone();
        let elapsed_steps = (elapsed_s / f64::from(rec.series_step_s)).ceil() as usize;
        let with_data = series
            .iter()
            .rposition(|s| s.completed + s.errors > 0 || s.bytes_read > 0)
            .map_or(0, |last| last + 1);
        series.truncate(elapsed_steps.max(with_data));
        staged_targets(&mut series, rec.series_step_s, &plan);
        let open_loop = plan.rate.is_some();
        let pacing = plan
            .rate
            .map(|target_rate| recorded_pacing(&rec, target_rate, &totals));
        RunResult {
            kind: RESULT_KIND.to_string(),
            schema_version: RESULT_SCHEMA_VERSION,
            started_at: timefmt::rfc3339_micros(started_at),
            first_send_at: first_send_at.map(timefmt::rfc3339_micros),
            plan,
            environment,
            interrupted,
            totals,
            errors: recorded_errors(&rec),
            status_codes: rec
                .status_counts()
                .map(|(c, n)| (c.to_string(), n))
                .collect(),
            response: ResponseInfo {
                server: rec.server_header.clone(),
                first_body_bytes: rec.first_body_len,
                body_length_mismatches: rec.body_len_mismatches,
            },
            latency: LatencySummaries {
                total: LatencySummary::of(&rec.total),
                service: LatencySummary::of(&rec.service),
                connect: LatencySummary::of(&rec.connect),
                first_byte: LatencySummary::of(&rec.first_byte),
            },
            series,
            series_step_s: rec.series_step_s,
            // Encoding a histogram into a Vec cannot fail in practice; should it, the
            // document goes without the series rather than with one that does not add up.
            latency_series: rec.latency.to_steps().unwrap_or_default(),
            latency_step_s: rec.latency.step_s,
            pacing,
            tls: recorded_tls(&rec, elapsed_s),
            http2: rec.h2.as_deref().cloned(),
            quic: rec.quic.as_deref().cloned(),
            histograms: recorded_histograms(rec, open_loop),
            client: ClientUsage::default(),
            servers: Vec::new(),
            limiter: Limiter {
                side: LimiterSide::Unknown,
                reason: String::new(),
            },
            sources: Vec::new(),
            lost_sources: Vec::new(),
            start_skew_s: None,
            slo: None,
            entries: Vec::new(),
        }
    }

    /// The recording this document holds, to merge it with others. Refuses a document whose
    /// own figures disagree (counts that do not add up), since a merge would spread the error.
    pub fn recording(&self) -> Result<Recorder, String> {
        let t = &self.totals;
        let e = &self.errors;
        let status = self.status_slots()?;
        self.check_figures()?;
        let latency = LatencySeries::from_steps(self.latency_step_s, &self.latency_series)
            .map_err(|why| format!("its figures disagree: {why}"))?;
        let mut rec = Recorder::new(None);
        rec.total = self.histograms.total.0.clone();
        rec.service = self.histograms.service.0.clone();
        rec.connect = self.histograms.connect.0.clone();
        rec.first_byte = self.histograms.first_byte.0.clone();
        rec.worker_rate = self.histograms.worker_rate.0.clone();
        rec.send_lateness = self.histograms.send_lateness.as_ref().map(|h| h.0.clone());
        rec.send_earliness = self.histograms.send_earliness.as_ref().map(|h| h.0.clone());
        rec.tls_handshake = self.histograms.tls_handshake.as_ref().map(|h| h.0.clone());
        rec.connection_first_byte = self
            .histograms
            .connection_first_byte
            .as_ref()
            .map(|h| h.0.clone());
        rec.client_rates = self.histograms.client_rates.clone().unwrap_or_default();
        rec.sends_held_by_busy_connection = self
            .pacing
            .as_ref()
            .map_or(0, |p| p.held_by_busy_connection);
        rec.completed = t.requests;
        for kind in ErrorKind::ALL {
            rec.errors[kind as usize] = e.get(kind);
        }
        for (code, n) in status {
            rec.status[code] = n;
        }
        rec.bytes_read = t.bytes_read;
        rec.bytes_written = t.bytes_written;
        rec.body_bytes = t.body_bytes;
        rec.keepalive_responses = t.keepalive_responses;
        rec.connections_opened = t.connections_opened;
        rec.unanswered_at_end = t.unanswered_at_end;
        rec.ports_exhausted = e.connect_no_local_port;
        rec.first_body_len = self.response.first_body_bytes;
        rec.body_len_mismatches = self.response.body_length_mismatches;
        rec.server_header.clone_from(&self.response.server);
        rec.tls = self.tls.clone().map(Box::new);
        rec.h2 = self.http2.clone().map(Box::new);
        rec.quic = self.quic.clone().map(Box::new);
        rec.series.clone_from(&self.series);
        rec.series_step_s = self.series_step_s;
        rec.latency = latency;
        Ok(rec)
    }

    /// The status codes as the recorder's slots.
    fn status_slots(&self) -> Result<Vec<(usize, u64)>, String> {
        self.status_codes
            .iter()
            .map(|(code, n)| match code.parse::<usize>() {
                Ok(c) if c < super::recorder::STATUS_SLOTS => Ok((c, *n)),
                _ => Err(format!(
                    "status code {code:?} is not a number below {}",
                    super::recorder::STATUS_SLOTS
                )),
            })
            .collect()
    }

    /// Whether the document's figures agree with each other, as every run archbench writes
    /// does: requests and errors add up to attempts, errors by kind to errors, status codes
    /// to requests, one total latency per request (histogram and summary), the series and
    /// latency series to the totals, the rate to requests over the elapsed time. `report`
    /// and `merge` refuse a document that fails (it was edited, or made elsewhere): its
    /// report would contradict itself, its merge spread the error. Sums are taken in u128,
    /// so counts near u64's top cannot wrap into agreement.
    pub fn check_figures(&self) -> Result<(), String> {
        let mut checks = self.count_checks().into_iter().chain(self.series_checks());
        match checks.find(|(ok, _)| !ok) {
            Some((_, why)) => Err(format!("its figures disagree: {why}")),
            None => Ok(()),
        }
    }

    /// The totals against each other, the status codes, the errors and the latency.
    fn count_checks(&self) -> [(bool, String); 7] {
        let t = &self.totals;
        let (requests, errors) = (u128::from(t.requests), u128::from(t.errors));
        let expected_rate = per_second(t.requests, t.elapsed_s);
        [
            (
                requests + errors == u128::from(t.attempted),
                "requests + errors != attempted".to_string(),
            ),
            (
                wide_sum(ErrorKind::ALL.iter().map(|k| self.errors.get(*k))) == errors,
                "errors by kind do not add up to errors".into(),
            ),
            (
                wide_sum(self.status_codes.values().copied()) == requests,
                "status codes do not add up to requests".into(),
            ),
            (
                self.histograms.total.0.len() == t.requests
                    && self.latency.total.count == t.requests,
                "the total-latency histogram and summary do not hold one value per request".into(),
            ),
            (
                ordered(&self.latency.total),
                "the total-latency percentiles are out of order (min ≤ p50 ≤ … ≤ max)".into(),
            ),
            (
                t.requests == 0 || t.elapsed_s > 0.0,
                "requests were answered in no time (elapsed_s is 0)".into(),
            ),
            // Written as requests / elapsed_s; a report rounds it to hundredths.
            (
                (t.requests_per_sec - expected_rate).abs() <= 0.005 + 1e-9 * expected_rate,
                format!(
                    "requests_per_sec is {}, not requests / elapsed_s ({})",
                    t.requests_per_sec,
                    if expected_rate < 1e15 {
                        format!("{expected_rate:.2}")
                    } else {
                        format!("{expected_rate:e}")
                    }
                ),
            ),
        ]
    }

    /// The series and the latency series against the totals.
    fn series_checks(&self) -> [(bool, String); 4] {
        let t = &self.totals;
        let counted = wide_sum(self.latency_series.iter().map(|s| s.count));
        [
            (
                self.series_step_s.is_power_of_two(),
                "series_step_s is not a power of two".into(),
            ),
            // A run's series coarsen rather than grow past these: longer ones were not
            // written by archbench, and only cost a reader memory.
            (
                self.series.len() <= super::recorder::MAX_SERIES
                    && self.latency_series.len() <= super::latency_series::MAX_LATENCY_STEPS,
                format!(
                    "its series hold {} and {} steps, more than a run keeps ({} and {})",
                    self.series.len(),
                    self.latency_series.len(),
                    super::recorder::MAX_SERIES,
                    super::latency_series::MAX_LATENCY_STEPS
                ),
            ),
            (
                self.series.is_empty()
                    || (wide_sum(self.series.iter().map(|s| s.completed))
                        == u128::from(t.requests)
                        && wide_sum(self.series.iter().map(|s| s.errors)) == u128::from(t.errors)),
                "the series does not add up to requests and errors".into(),
            ),
            (
                self.latency_series.is_empty() || counted == u128::from(t.requests),
                format!(
                    "latency_series counts {counted} responses, totals.requests {}",
                    t.requests
                ),
            ),
        ]
    }
}

/// A sum of counts that cannot wrap (u64's would, in a release build, into agreement).
fn wide_sum(counts: impl Iterator<Item = u64>) -> u128 {
    counts.map(u128::from).sum()
}

/// Whether a latency summary's figures rise from min to max, as any distribution's do.
fn ordered(l: &LatencySummary) -> bool {
    let p = [
        l.min_us,
        l.p50_us,
        l.p75_us,
        l.p90_us,
        l.p99_us,
        l.p99_9_us,
        l.p99_99_us,
        l.max_us,
    ];
    p.windows(2).all(|w| w[0] <= w[1])
}

/// `n` a second over `elapsed_s` (0 for a run that took no time).
fn per_second(n: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        n as f64 / elapsed_s
    } else {
        0.0
    }
}

/// With stages, each step's target rate: this process's share (its mean rate over the
/// stages') of what the stages ask for over the step.
fn staged_targets(series: &mut [SecondSample], step_s: u32, plan: &PlanSummary) {
    let (Some(list), Some(rate)) = (&plan.stages, plan.rate) else {
        return;
    };
    let Ok(stages) = crate::stages::Stages::new(list.clone()) else {
        return;
    };
    let share = rate / stages.mean_rate();
    let step = f64::from(step_s);
    for sample in series {
        let from = f64::from(sample.second);
        sample.target_rate = Some(share * stages.rate_over(from, from + step));
    }
}

/// A recording's totals over a run of `elapsed_s`.
fn recorded_totals(rec: &Recorder, elapsed_s: f64) -> Totals {
    let non_2xx_3xx = rec
        .status_counts()
        .filter(|(c, _)| !(200..400).contains(c))
        .map(|(_, n)| n)
        .sum();
    let error_total = rec.error_total();
    let attempted = rec.completed + error_total;
    Totals {
        requests: rec.completed,
        errors: error_total,
        attempted,
        unanswered_at_end: rec.unanswered_at_end,
        elapsed_s,
        requests_per_sec: per_second(rec.completed, elapsed_s),
        bytes_read: rec.bytes_read,
        bytes_written: rec.bytes_written,
        body_bytes: rec.body_bytes,
        keepalive_responses: rec.keepalive_responses,
        bytes_read_per_sec: per_second(rec.bytes_read, elapsed_s),
        connections_opened: rec.connections_opened,
        non_2xx_3xx,
    }
}

/// An open loop's pacing: the rate asked for, the rate sent, how late requests went out.
fn recorded_pacing(rec: &Recorder, target_rate: f64, totals: &Totals) -> PacingSummary {
    // Every request that went out has its lateness recorded, so their count is what was
    // sent: the answered and failed ones would leave out those a queueing server still held
    // at the end, and call the client short of a rate it kept.
    let sent = rec
        .send_lateness
        .as_ref()
        .map_or(totals.attempted, |h| h.len());
    PacingSummary {
        target_rate,
        achieved_rate: per_second(sent, totals.elapsed_s),
        lateness: rec
            .send_lateness
            .as_ref()
            .map(LatencySummary::of)
            .unwrap_or_default(),
        early_sends: rec.send_earliness.as_ref().map_or(0, |h| h.len()),
        earliness: rec
            .send_earliness
            .as_ref()
            .map(LatencySummary::of)
            .unwrap_or_default(),
        held_by_busy_connection: rec.sends_held_by_busy_connection,
    }
}

/// A recording's failed requests by kind.
fn recorded_errors(rec: &Recorder) -> ErrorCounts {
    ErrorCounts {
        connect: rec.errors[ErrorKind::Connect as usize],
        connect_no_local_port: rec.ports_exhausted,
        tls: rec.errors[ErrorKind::Tls as usize],
        timeout: rec.errors[ErrorKind::Timeout as usize],
        read: rec.errors[ErrorKind::Read as usize],
        write: rec.errors[ErrorKind::Write as usize],
        protocol: rec.errors[ErrorKind::Protocol as usize],
    }
}

/// A recording's histograms, kept whole; the send lateness only of an open loop.
fn recorded_histograms(rec: Recorder, open_loop: bool) -> Histograms {
    Histograms {
        total: SerializedHistogram(rec.total),
        service: SerializedHistogram(rec.service),
        connect: SerializedHistogram(rec.connect),
        first_byte: SerializedHistogram(rec.first_byte),
        worker_rate: SerializedHistogram(rec.worker_rate),
        send_lateness: open_loop
            .then(|| SerializedHistogram(rec.send_lateness.unwrap_or_else(latency_histogram))),
        send_earliness: rec.send_earliness.map(SerializedHistogram),
        tls_handshake: rec.tls_handshake.map(SerializedHistogram),
        connection_first_byte: rec.connection_first_byte.map(SerializedHistogram),
        client_rates: (!rec.client_rates.is_empty()).then_some(rec.client_rates),
    }
}

/// A recording's TLS figures, with the handshake times summarised and their rate.
fn recorded_tls(rec: &Recorder, elapsed_s: f64) -> Option<super::TlsFigures> {
    let mut t = rec.tls.as_deref().cloned()?;
    t.handshake = rec.tls_handshake.as_ref().map(LatencySummary::of);
    let handshakes = t.handshakes();
    t.handshakes_per_s = (handshakes > 0).then(|| per_second(handshakes, elapsed_s));
    Some(t)
}

/// Always "archbench-result".
pub const RESULT_KIND: &str = "archbench-result";

/// When a run happened and how it ended.
#[derive(Debug, Clone, Copy)]
pub struct RunTimes {
    /// When its clock started.
    pub started_at: SystemTime,
    /// When its first request went out.
    pub first_send_at: Option<SystemTime>,
    /// Seconds from start to stop.
    pub elapsed_s: f64,
    /// A signal stopped it before its stop rule.
    pub interrupted: bool,
}

impl Environment {
    /// Reads the local machine's fingerprint from /proc and uname.
    pub fn local() -> Environment {
        Environment {
            archbench_version: env!("CARGO_PKG_VERSION").to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpu_model: os::cpu_model(),
            cores: os::logical_cores(),
            kernel: os::proc_sys("/proc/sys/kernel/osrelease"),
            os: std::env::consts::OS.to_string(),
            hostname: os::proc_sys("/proc/sys/kernel/hostname"),
            lse_atomics: os::cpu_has_lse(),
        }
    }
}
