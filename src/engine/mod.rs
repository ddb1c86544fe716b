//! The load engine: worker threads, each owning its connections on one single-threaded event
//! loop (edge-triggered epoll through mio). Nothing is shared on the hot path.
//!
//! The engine takes a [`Plan`] and a stop flag and hands back a merged [`Recorder`]. It knows
//! nothing of reports, terminals or comparisons. It must never allocate per request: the
//! request bytes are encoded once, responses are framed from a per-worker buffer, and
//! recording goes into histograms sized up front.

mod conn;
mod worker;

pub use worker::thread_cpu;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use thiserror::Error;

use crate::http::tls::{self, TlsSetupError};
use crate::http::{RequestSpec, Scheme, Target};
use crate::stats::Recorder;

/// When a run ends (whichever comes first; a signal always ends it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    pub duration: Option<Duration>,
    /// Exactly this many requests are sent (answered or failed).
    pub requests: Option<u64>,
}

/// How requests are spaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each connection sends its next request as soon as the previous response is complete.
    Closed,
    /// `rate` requests per second in total, evenly spaced over the connections; latency is
    /// measured from each request's intended send time (coordinated-omission correction).
    Open { rate: f64 },
}

/// A validated, typed description of one run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub request: RequestSpec,
    /// Sent as Basic authorization when the URL carried user-info.
    pub basic_auth: Option<(String, String)>,
    pub connections: usize,
    pub threads: usize,
    pub stop: StopRule,
    pub pacing: Pacing,
    /// Per-request timeout, from the request's start to its last byte.
    pub timeout: Duration,
    pub insecure: bool,
}

/// Live counters, for progress lines.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub elapsed: Duration,
    pub completed: u64,
    pub errors: u64,
}

/// What a run measured.
#[derive(Debug)]
pub struct RunOutcome {
    pub recording: Recorder,
    pub started_at: SystemTime,
    pub elapsed: Duration,
    /// A signal stopped the run before its stop rule did.
    pub interrupted: bool,
    /// Each worker thread's CPU: (user, system) seconds.
    pub worker_cpu_s: Vec<(f64, f64)>,
    /// Each worker thread's demand: seconds it ran or waited to run.
    pub worker_demand_s: Vec<Option<f64>>,
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{connections} connections need {needed} open files but the hard limit is {hard}; raise it (ulimit -Hn {needed}, as root) or use fewer connections")]
    FileLimit {
        connections: usize,
        needed: u64,
        hard: u64,
    },
    #[error("cannot create an event loop: {0}")]
    Poll(#[source] std::io::Error),
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    #[error("a worker thread panicked; this is a bug in archbench")]
    WorkerPanic,
}

/// Per-worker counters the progress reporter reads; written once per loop iteration.
#[derive(Debug, Default)]
struct WorkerProgress {
    completed: AtomicU64,
    errors: AtomicU64,
}

/// Runs the plan to completion (or until `stop` is set) and merges the workers' recordings.
/// `on_progress` is called about four times a second from the calling thread.
pub fn run(
    plan: &Plan,
    stop: &AtomicBool,
    mut on_progress: impl FnMut(&Progress),
) -> Result<RunOutcome, EngineError> {
    let threads = plan.threads.clamp(1, plan.connections.max(1));
    raise_file_limit(plan.connections)?;
    let request: Arc<[u8]> = plan
        .request
        .encode(&plan.target, plan.basic_auth.clone())
        .into();
    let tls = match plan.target.scheme {
        Scheme::Https => Some(worker::TlsSetup {
            config: tls::client_config(plan.insecure)?,
            name: tls::server_name(&plan.target.host)?,
        }),
        Scheme::Http => None,
    };
    let progress: Vec<WorkerProgress> = (0..threads).map(|_| WorkerProgress::default()).collect();
    let started_at = SystemTime::now();
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel::<()>();

    let results = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut first_conn = 0;
        for (w, prog) in progress.iter().enumerate() {
            let conns = share(plan.connections as u64, threads, w) as usize;
            let spec = worker::WorkerSpec {
                addr: plan.target.addrs[0],
                request: request.clone(),
                head_request: plan.request.is_head(),
                keepalive: plan.request.keepalive,
                tls: tls.clone(),
                connections: conns,
                first_conn,
                total_connections: plan.connections,
                tickets: plan.stop.requests.map(|n| share(n, threads, w)),
                deadline: plan.stop.duration.map(|d| start + d),
                pacing: plan.pacing,
                timeout: plan.timeout,
                start,
                expected: plan.stop.duration,
            };
            first_conn += conns;
            let done = done_tx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("archbench-worker-{w}"))
                    .spawn_scoped(scope, move || {
                        let r = worker::Worker::new(spec, stop, prog).and_then(|w| w.run());
                        let _ = done.send(());
                        r
                    })
                    .map_err(EngineError::Poll),
            );
        }
        drop(done_tx);
        let spawned = handles.iter().filter(|h| h.is_ok()).count();
        let mut finished = 0;
        while finished < spawned {
            match done_rx.recv_timeout(Duration::from_millis(250)) {
                Ok(()) => finished += 1,
                Err(mpsc::RecvTimeoutError::Timeout) => on_progress(&Progress {
                    elapsed: start.elapsed(),
                    completed: progress
                        .iter()
                        .map(|p| p.completed.load(Ordering::Relaxed))
                        .sum(),
                    errors: progress
                        .iter()
                        .map(|p| p.errors.load(Ordering::Relaxed))
                        .sum(),
                }),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().map_err(|_| EngineError::WorkerPanic)?,
                Err(e) => Err(e),
            })
            .collect::<Vec<_>>()
    });
    let mut merged = Recorder::new(plan.stop.duration);
    let mut interrupted = false;
    let mut stopped_at = start;
    let mut worker_cpu_s = Vec::with_capacity(threads);
    let mut worker_demand_s = Vec::with_capacity(threads);
    for r in results {
        let w = r?;
        worker_cpu_s.push(w.cpu_s);
        worker_demand_s.push(w.demand_s);
        interrupted |= w.interrupted;
        stopped_at = stopped_at.max(w.stopped_at);
        merged.merge(&w.recording);
    }
    let elapsed = stopped_at.duration_since(start);
    Ok(RunOutcome {
        recording: merged,
        started_at,
        elapsed,
        interrupted,
        worker_cpu_s,
        worker_demand_s,
    })
}

/// Worker `w`'s share of `total` when split as evenly as possible over `parts`.
fn share(total: u64, parts: usize, w: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((w as u64) < total % parts)
}

/// Makes room for one descriptor per connection plus headroom, or says what is needed.
fn raise_file_limit(connections: usize) -> Result<(), EngineError> {
    let needed = connections as u64 + 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if lim.rlim_cur >= needed {
        return Ok(());
    }
    if lim.rlim_max < needed {
        return Err(EngineError::FileLimit {
            connections,
            needed,
            hard: lim.rlim_max,
        });
    }
    lim.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct we own.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    Ok(())
}

/// Header names whose values never reach a report or a stored plan.
const SECRET_HEADERS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

impl Plan {
    /// The plan as it is safe to store: credentials redacted.
    pub fn summary(&self) -> crate::stats::PlanSummary {
        let headers = self
            .request
            .headers
            .iter()
            .map(|(n, v)| {
                let secret = SECRET_HEADERS.iter().any(|s| n.eq_ignore_ascii_case(s));
                (
                    n.clone(),
                    if secret {
                        "REDACTED".to_string()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect();
        crate::stats::PlanSummary {
            url: self.target.redacted_url.clone(),
            method: self.request.method.clone(),
            headers,
            body_bytes: self.request.body.len() as u64,
            http_version: self.request.version.as_str().to_string(),
            connections: self.connections as u64,
            threads: self.threads as u64,
            duration_s: self.stop.duration.map(|d| d.as_secs_f64()),
            requests: self.stop.requests,
            rate: match self.pacing {
                Pacing::Closed => None,
                Pacing::Open { rate } => Some(rate),
            },
            keepalive: self.request.keepalive,
            timeout_s: self.timeout.as_secs_f64(),
            insecure: self.insecure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_add_up() {
        for total in [0u64, 1, 7, 1000, 1001] {
            for parts in 1..6 {
                let sum: u64 = (0..parts).map(|w| share(total, parts, w)).sum();
                assert_eq!(sum, total);
            }
        }
    }
}
