use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::histogram::{LatencySummary, SerializedHistogram};
use super::recorder::{ErrorKind, Recorder, SecondSample};

/// Bumped when a field changes meaning or disappears; `schema/result.schema.json` follows it.
pub const RESULT_SCHEMA_VERSION: u32 = 1;

/// One run's result: the public JSON format (`--json FILE`, `--output json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Always "archbench-result".
    pub kind: String,
    /// Version of this format.
    pub schema_version: u32,
    /// When the load started, RFC 3339 UTC.
    pub started_at: String,
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
    /// Completed, errors and bytes per second of the run.
    pub series: Vec<SecondSample>,
    /// The full distributions, to merge or re-analyse later.
    pub histograms: Histograms,
    /// What archbench itself used (its worker threads).
    pub client: ClientUsage,
    /// What each `--watch`ed server used during the run.
    #[serde(default)]
    pub servers: Vec<crate::monitor::ServerUsage>,
    /// Which side's CPU limited the result.
    pub limiter: Limiter,
}

/// The verdict on who limited a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limiter {
    pub side: LimiterSide,
    /// One sentence with the figure behind the verdict.
    pub reason: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
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
}

/// The load generator's own CPU, so a reader can tell whether it was the bottleneck.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientUsage {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// user + system over all worker threads.
    pub cpu_s: f64,
    /// Answered requests per client CPU-second.
    pub requests_per_cpu_s: f64,
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
            requests_per_cpu_s: if cpu_s > 0.0 {
                requests as f64 / cpu_s
            } else {
                0.0
            },
            busiest_worker_percent: if elapsed_s > 0.0 {
                busiest * 100.0 / elapsed_s
            } else {
                0.0
            },
        }
    }
}

/// The run's configuration as it is safe to store.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Open-loop target rate in requests per second; null for closed loop.
    pub rate: Option<f64>,
    pub keepalive: bool,
    /// Per-request timeout in seconds.
    pub timeout_s: f64,
    /// True when TLS certificates were not verified.
    pub insecure: bool,
}

/// The client machine, so figures can be read in context.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Totals {
    /// Responses received in full (any status).
    pub requests: u64,
    /// Requests that failed (sum of `errors`).
    pub errors: u64,
    /// Requests attempted: requests + errors.
    pub attempted: u64,
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
}

impl RunResult {
    pub fn from_recording(
        rec: Recorder,
        plan: PlanSummary,
        environment: Environment,
        started_at: String,
        elapsed_s: f64,
        interrupted: bool,
    ) -> RunResult {
        let errors = ErrorCounts {
            connect: rec.errors[ErrorKind::Connect as usize],
            connect_no_local_port: rec.ports_exhausted,
            tls: rec.errors[ErrorKind::Tls as usize],
            timeout: rec.errors[ErrorKind::Timeout as usize],
            read: rec.errors[ErrorKind::Read as usize],
            write: rec.errors[ErrorKind::Write as usize],
            protocol: rec.errors[ErrorKind::Protocol as usize],
        };
        let status_codes: BTreeMap<String, u64> = rec
            .status_counts()
            .map(|(c, n)| (c.to_string(), n))
            .collect();
        let non_2xx_3xx = rec
            .status_counts()
            .filter(|(c, _)| !(200..400).contains(c))
            .map(|(_, n)| n)
            .sum();
        let per_sec = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let error_total = rec.error_total();
        // The series ends with the run: drop buckets past the elapsed time.
        let mut series = rec.series.clone();
        series.truncate(elapsed_s.ceil() as usize);
        RunResult {
            kind: "archbench-result".to_string(),
            schema_version: RESULT_SCHEMA_VERSION,
            started_at,
            plan,
            environment,
            interrupted,
            totals: Totals {
                requests: rec.completed,
                errors: error_total,
                attempted: rec.completed + error_total,
                elapsed_s,
                requests_per_sec: per_sec(rec.completed),
                bytes_read: rec.bytes_read,
                bytes_written: rec.bytes_written,
                body_bytes: rec.body_bytes,
                keepalive_responses: rec.keepalive_responses,
                bytes_read_per_sec: per_sec(rec.bytes_read),
                connections_opened: rec.connections_opened,
                non_2xx_3xx,
            },
            errors,
            status_codes,
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
            histograms: Histograms {
                total: SerializedHistogram(rec.total),
                service: SerializedHistogram(rec.service),
                connect: SerializedHistogram(rec.connect),
                first_byte: SerializedHistogram(rec.first_byte),
                worker_rate: SerializedHistogram(rec.worker_rate),
            },
            client: ClientUsage::default(),
            servers: Vec::new(),
            limiter: Limiter {
                side: LimiterSide::Unknown,
                reason: String::new(),
            },
        }
    }
}

impl Environment {
    /// Reads the local machine's fingerprint from /proc and uname.
    pub fn local() -> Environment {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpuinfo = read("/proc/cpuinfo");
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let cpu_model = field("model name")
            .or_else(|| {
                // aarch64 kernels name the part, not the model.
                field("CPU part").map(|p| {
                    format!(
                        "implementer {} part {p}",
                        field("CPU implementer").unwrap_or_default()
                    )
                })
            })
            .unwrap_or_else(|| "unknown".to_string());
        Environment {
            archbench_version: env!("CARGO_PKG_VERSION").to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            kernel: read("/proc/sys/kernel/osrelease"),
            os: std::env::consts::OS.to_string(),
            hostname: read("/proc/sys/kernel/hostname"),
            lse_atomics: crate::monitor::fingerprint::cpu_has_lse(),
        }
    }
}
