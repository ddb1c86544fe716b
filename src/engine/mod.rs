//! The load engine: worker threads, each owning its connections on one single-threaded event
//! loop (edge-triggered epoll through mio). Nothing is shared on the hot path.
//!
//! The engine takes a [`Plan`] and a stop flag and hands back a merged [`Recorder`]. It knows
//! nothing of reports, terminals or comparisons. It must never allocate per request: the
//! request bytes are encoded once, responses are framed from a per-worker buffer, and
//! recording goes into histograms sized up front.

mod clients;
mod conn;
mod h2;
mod h3;
pub mod hook;
pub mod live;
mod slot_schedule;
mod tickets;
pub mod wake;
mod worker;
mod worker_base;
mod worker_loop;

pub use tickets::CountSplit;
pub use worker_loop::TIMEOUT_SCAN_MIN;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use thiserror::Error;

use crate::http::tls::{self, TlsSetupError};
use crate::http::{Addresses, RequestSpec, Scheme, Target, TargetError, Unresolved};
use crate::stats::{IncompatibleHistograms, Recorder};

/// When a run ends (whichever comes first; a signal always ends it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    pub duration: Option<Duration>,
    /// Exactly this many requests are sent (answered or failed).
    pub requests: Option<u64>,
    /// How those requests are split among the connections.
    pub split: CountSplit,
}

/// How requests are spaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each connection sends its next request as soon as the previous response is complete.
    Closed,
    /// `rate` requests per second in total, evenly spaced over the connections; latency is
    /// measured from each request's intended send time (coordinated-omission correction).
    /// A send due within `slack` after a wake-up goes out in it, early, timed from its send.
    Open { rate: f64, slack: Duration },
}

/// A validated, typed description of one run. Only a plan whose target was resolved
/// (`Plan<Addresses>`, the default) can reach [`run`]; validation builds `Plan<Unresolved>`.
#[derive(Debug, Clone)]
pub struct Plan<A = Addresses> {
    pub target: Target,
    /// Where connections go: resolved [`Addresses`], or [`Unresolved`] before the lookup.
    pub addrs: A,
    pub request: RequestSpec,
    /// Sent as Basic authorization when the URL carried user-info.
    pub basic_auth: Option<(String, String)>,
    /// Connections of the whole load (all parts together; see [`Part`]).
    pub connections: usize,
    pub threads: usize,
    /// Requests of the whole load, when bounded by count (this process sends its share).
    pub stop: StopRule,
    /// Open loop: the rate of the whole load (this process sends its share).
    pub pacing: Pacing,
    /// Open loop: how the rate changes over the run (`--stages`; the pacing's rate is their
    /// mean); None: steady.
    pub stages: Option<crate::stages::Stages>,
    /// Per-request timeout, from the request's start to its last byte.
    pub timeout: Duration,
    /// What becomes of a request still unanswered at its timeout.
    pub at_timeout: AtTimeout,
    pub insecure: bool,
    /// Over https: sessions resumed or not, the versions, suites and groups offered.
    pub tls: tls::TlsOptions,
    /// Which share of the load this process runs.
    pub part: Part,
    /// Start at this wall-clock instant rather than at once (so several processes start
    /// together).
    pub start_at: Option<SystemTime>,
    /// A script's hooks (wrk's Lua API), called by every worker; None: the request above,
    /// encoded once.
    pub hooks: Option<Arc<dyn hook::Hooks>>,
    /// Speak HTTP/2 (prior knowledge over http://) rather than HTTP/1.x.
    pub http2: Option<Http2>,
    /// Speak HTTP/3 over QUIC (https only; never with `http2`).
    pub http3: Option<Http3>,
}

/// What becomes of a request still unanswered at its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtTimeout {
    /// It fails (a timeout error), its connection closed and opened again.
    #[default]
    Abandon,
    /// It is still waited for (up to [`KEEP_WAITING`]) and counted when answered: wrk's `-T`,
    /// which only says which answers its layout counts as timeouts (and leaves out of its
    /// latency), never closes a connection for it.
    KeepWaiting,
}

/// How long a request is waited for under [`AtTimeout::KeepWaiting`]: wrk's longest
/// recordable latency, a day.
pub const KEEP_WAITING: Duration = Duration::from_secs(24 * 60 * 60);

impl<A> Plan<A> {
    /// The timeout the workers apply: the plan's, or a day when late answers are waited for.
    pub fn abandon_after(&self) -> Duration {
        match self.at_timeout {
            AtTimeout::Abandon => self.timeout,
            AtTimeout::KeepWaiting => KEEP_WAITING.max(self.timeout),
        }
    }
}

/// How a run speaks HTTP/3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http3 {
    /// Concurrent request streams per QUIC connection (`--streams`).
    pub streams: u32,
    /// `--0rtt`: a session fetched before the run, resumed by every connection, whose first
    /// requests go in 0-RTT early data.
    pub zero_rtt: bool,
}

/// How a run speaks HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2 {
    /// Concurrent streams per connection (`--streams`).
    pub streams: u32,
    /// Over https: offer http/1.1 beside h2 by ALPN and speak what the server chooses
    /// (`--alpn h2,http/1.1`); otherwise only h2 is offered.
    pub offer_http11: bool,
}

/// What a run offers by ALPN over https, in order of preference.
fn alpn_offer(http2: Option<Http2>, http3: Option<Http3>) -> &'static [&'static [u8]] {
    if http3.is_some() {
        return &[b"h3"];
    }
    match http2 {
        None => &[b"http/1.1"],
        Some(Http2 {
            offer_http11: false,
            ..
        }) => &[b"h2"],
        Some(_) => &[b"h2", b"http/1.1"],
    }
}

/// This process's share of a load that `count` processes run together: every `count`-th
/// connection of the whole, starting at connection `index`, with its place in the open-loop
/// schedule. Together the parts send one smooth rate, not `count` bursts in lockstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub index: u32,
    pub count: u32,
}

impl Part {
    /// The whole load in one process.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    /// This part's share of `total` (connections, requests): `total / count`, one more for
    /// the first `total % count` parts.
    pub fn share(self, total: u64) -> u64 {
        share(total, self.count as usize, self.index as usize)
    }
}

impl Plan<Unresolved> {
    /// Looks the target's host up: the one step between a validated plan and a runnable one.
    pub fn resolve(self) -> Result<Plan, TargetError> {
        let addrs = self.target.resolve()?;
        Ok(self.at(addrs))
    }

    /// The plan with addresses known without a lookup here: a Kubernetes Service's ClusterIP,
    /// which only the cluster's own DNS resolves the name to.
    pub fn at(self, addrs: Addresses) -> Plan {
        Plan {
            target: self.target,
            addrs,
            request: self.request,
            basic_auth: self.basic_auth,
            connections: self.connections,
            threads: self.threads,
            stop: self.stop,
            pacing: self.pacing,
            stages: self.stages,
            timeout: self.timeout,
            at_timeout: self.at_timeout,
            insecure: self.insecure,
            tls: self.tls,
            part: self.part,
            start_at: self.start_at,
            hooks: self.hooks,
            http2: self.http2,
            http3: self.http3,
        }
    }
}

impl<A> Plan<A> {
    /// Connections this process opens.
    pub fn local_connections(&self) -> usize {
        self.part.share(self.connections as u64) as usize
    }

    /// Requests this process sends, when bounded by count: those of its connections.
    pub fn local_requests(&self) -> Option<u64> {
        let part = self.part;
        self.stop.requests.map(|n| {
            requests_of(
                n,
                self.connections as u64,
                part.index as u64,
                part.count as u64,
                self.local_connections() as u64,
            )
        })
    }

    /// Open loop: the rate this process sends (its connections' share of the whole rate).
    pub fn local_rate(&self) -> Option<f64> {
        match self.pacing {
            Pacing::Closed => None,
            Pacing::Open { rate, .. } => {
                Some(rate * self.local_connections() as f64 / self.connections as f64)
            }
        }
    }

    /// Worker threads this process runs: never more than its connections.
    pub fn local_threads(&self) -> usize {
        self.threads.clamp(1, self.local_connections().max(1))
    }
}

/// `secs` seconds after `start`, never panicking: an instant beyond the clock's range (which
/// validation keeps out) becomes a century away.
pub(crate) fn after(start: Instant, secs: f64) -> Instant {
    start
        .checked_add(seconds(secs))
        .or_else(|| start.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(start)
}

/// Seconds as a duration, saturating instead of panicking on what validation should have
/// kept out (negative, NaN, beyond `Duration::MAX`).
pub(crate) fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(if s > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

/// The run as it goes, about four times a second: what progress lines, the dashboard and
/// the Prometheus endpoint show.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub elapsed: Duration,
    /// Answered and failed so far (the workers' counters, read without waiting for them).
    pub completed: u64,
    pub errors: u64,
    /// Bytes read so far (responses arriving, finished or not: ab's "activity").
    pub bytes_read: u64,
    /// Latencies and errors by kind of the intervals every worker has handed over.
    pub latency: &'a live::LiveLatency,
    /// Each worker thread's demand since the previous progress call, as a share of a core: the
    /// time it ran plus waited to run, as the final limiter verdict counts it (None where the
    /// kernel does not say).
    pub worker_busy: &'a [Option<f64>],
    /// The QUIC counters of every worker, as of its latest tick (HTTP/3 runs; at the end the
    /// run's own figures).
    pub quic: Option<crate::stats::QuicFigures>,
    /// Workers still running [`STUCK_AFTER`] or longer after the run ended (its duration
    /// passed, or a signal stopped it): none of ours blocks, so a script's function that
    /// never returns holds them, and this run will not end by itself.
    pub stuck: Option<StuckWorkers>,
}

/// How long after its end a run's workers may take to stop before they are called stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(2);

/// Workers that did not stop when the run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StuckWorkers {
    pub count: usize,
    /// Since the run ended.
    pub for_s: f64,
}

/// What a run measured.
#[derive(Debug)]
pub struct RunOutcome {
    pub recording: Recorder,
    /// When the run's clock started (the `start_at` asked for, unless it had passed).
    pub started_at: SystemTime,
    /// When the first request went out, if one did.
    pub first_send_at: Option<SystemTime>,
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
    // Its own message, and the TLS error as its source: the exit status looks it up there.
    #[error("{0}")]
    Tls(#[from] TlsSetupError),
    #[error("a worker thread panicked; this is a bug in archbench")]
    WorkerPanic,
    #[error("merging the workers' recordings failed: {0}; this is a bug in archbench")]
    Merge(#[from] IncompatibleHistograms),
    #[error("{0}")]
    Script(#[from] hook::HookError),
}

/// Per-worker counters the progress reporter reads; written once per loop iteration.
#[derive(Debug, Default)]
struct WorkerProgress {
    completed: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    /// The worker thread's kernel id, for its CPU time in /proc (0 until it starts).
    tid: AtomicU64,
    /// Its QUIC counters as of its latest tick (None: it speaks no QUIC). A lock taken once a
    /// tick by each side, never per request.
    quic: std::sync::Mutex<Option<crate::stats::QuicFigures>>,
}

impl WorkerProgress {
    fn publish_quic(&self, q: crate::stats::QuicFigures) {
        // A reader that panicked leaves counters that are still whole.
        *self.quic.lock().unwrap_or_else(|e| e.into_inner()) = Some(q);
    }

    fn quic(&self) -> Option<crate::stats::QuicFigures> {
        self.quic.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Each worker's demand (ran + waited) since the previous reading, from
/// /proc/self/task/TID/schedstat.
struct WorkerBusy {
    last: Vec<Option<(u64, Instant)>>,
    busy: Vec<Option<f64>>,
}

impl WorkerBusy {
    fn new(workers: usize) -> WorkerBusy {
        WorkerBusy {
            last: vec![None; workers],
            busy: vec![None; workers],
        }
    }

    fn read(&mut self, progress: &[WorkerProgress]) -> &[Option<f64>] {
        for (k, p) in progress.iter().enumerate() {
            let tid = p.tid.load(Ordering::Relaxed);
            let now = Instant::now();
            let demand = (tid != 0)
                .then(|| {
                    crate::os::schedstat_demand_ns(&format!("/proc/self/task/{tid}/schedstat"))
                })
                .flatten();
            match (demand, self.last[k]) {
                (Some(ns), Some((before, at))) => {
                    let wall = now.duration_since(at).as_nanos() as f64;
                    if wall > 0.0 {
                        self.busy[k] = Some(ns.saturating_sub(before) as f64 / wall);
                    }
                }
                // A worker that has ended keeps its last reading (the final view of a
                // client-bound run still says so).
                (None, _) if tid != 0 => {}
                _ => self.busy[k] = None,
            }
            if let Some(ns) = demand {
                self.last[k] = Some((ns, now));
            }
        }
        &self.busy
    }
}

/// Runs the plan to completion (or until `stop` is set) and merges the workers' recordings.
/// `on_progress` is called about four times a second from the calling thread.
pub fn run(
    plan: &Plan,
    stop: &AtomicBool,
    on_progress: impl FnMut(&Progress),
) -> Result<RunOutcome, EngineError> {
    let prepared = prepare(plan)?;
    run_prepared(
        plan,
        prepared,
        start_instant(plan.start_at),
        stop,
        on_progress,
    )
}

/// [`run`] from a start already fixed (`start_instant`), so monitors can start their figures
/// at the same instant.
pub fn run_from(
    plan: &Plan,
    clock: (SystemTime, Instant),
    stop: &AtomicBool,
    on_progress: impl FnMut(&Progress),
) -> Result<RunOutcome, EngineError> {
    let prepared = prepare(plan)?;
    run_prepared(plan, prepared, clock, stop, on_progress)
}

/// The run itself, all that comes before its clock done.
fn run_prepared(
    plan: &Plan,
    prepared: Prepared,
    (started_at, start): (SystemTime, Instant),
    stop: &AtomicBool,
    mut on_progress: impl FnMut(&Progress),
) -> Result<RunOutcome, EngineError> {
    let threads = plan.local_threads();
    raise_file_limit(plan.local_connections(), threads)?;
    let progress: Vec<WorkerProgress> = (0..threads).map(|_| WorkerProgress::default()).collect();
    let (mut collector, shippers) = live::channels(threads, start);
    let specs = worker_specs(plan, &prepared, start, shippers)?;
    let mut busy = WorkerBusy::new(threads);
    let results = std::thread::scope(|scope| {
        let (handles, done) = spawn_workers(scope, specs, &prepared.wire, stop, &progress);
        let spawned = handles.iter().filter(|h| h.is_ok()).count();
        let mut watch = Watch {
            start,
            end: plan.stop.duration.map(|d| start + d),
            stop,
            progress: &progress,
            collector: &mut collector,
            busy: &mut busy,
        };
        watch.until_done(&done, spawned, &mut on_progress);
        join(handles)
    });
    let mut merged = Merged::new(plan.stop.duration, start);
    for r in results {
        merged.add(r?)?;
    }
    merged.recording.latency = collector.finish();
    if let Some(p) = prepared.primed {
        let q = merged.recording.quic();
        q.sessions_fetched += p.tickets;
        q.fetch_handshakes += p.handshakes;
    }
    let elapsed = merged.stopped_at.saturating_duration_since(start);
    // One last view of the whole run, every interval in.
    on_progress(&Progress {
        elapsed,
        completed: merged.recording.completed,
        errors: merged.recording.error_total(),
        bytes_read: merged.recording.bytes_read,
        latency: collector.live(),
        worker_busy: busy.read(&progress),
        quic: merged.recording.quic.as_deref().cloned(),
        stuck: None,
    });
    Ok(RunOutcome {
        recording: merged.recording,
        started_at,
        first_send_at: merged
            .first_send
            .map(|f| started_at + f.saturating_duration_since(start)),
        elapsed,
        interrupted: merged.interrupted,
        worker_cpu_s: merged.worker_cpu_s,
        worker_demand_s: merged.worker_demand_s,
    })
}

/// What an HTTP/2 run's workers share (the header blocks encoded once), or None for
/// HTTP/1.1 — also when ALPN was offered both and the server chose http/1.1: one handshake
/// before the run says which, so each worker speaks one protocol (a server chooses the same
/// on every connection).
fn h2_spec(plan: &Plan, tls: Option<&worker_base::TlsSetup>) -> Option<h2::H2Spec> {
    let h = plan.http2?;
    if let (Some(t), true) = (tls, h.offer_http11) {
        let chosen = tls::probe_alpn(
            plan.addrs.first(),
            t.config.clone(),
            t.name.clone(),
            plan.timeout,
        );
        if chosen.is_some_and(|p| p != b"h2") {
            return None;
        }
    }
    let fields = crate::http::h2::hpack::request_fields(
        &plan.request,
        &plan.target,
        plan.target.scheme == Scheme::Https,
        plan.basic_auth.clone(),
    );
    Some(h2::H2Spec {
        blocks: Arc::new(crate::http::h2::hpack::RequestBlocks::encode(&fields)),
        body: plan.request.body.clone().into(),
        streams: h.streams,
    })
}

/// The protocol a run's workers speak, with what they send encoded once for all of them.
enum Wire {
    Http1,
    Http2(h2::H2Spec),
    Http3(h3::H3Spec),
}

/// What an HTTP/3 run's workers share: the request's frames and the control stream encoded
/// once, and the QUIC client configuration (TLS 1.3, ALPN h3) over the run's TLS settings.
fn h3_spec(plan: &Plan, h: Http3, tls: &worker_base::TlsSetup) -> Result<h3::H3Spec, EngineError> {
    let fields = crate::http::h2::hpack::request_fields(
        &plan.request,
        &plan.target,
        true,
        plan.basic_auth.clone(),
    );
    let request = crate::http::h3::encode_request(&fields, &plan.request.body)
        .map_err(|e| EngineError::Tls(tls::TlsSetupError::Settings(e.to_string())))?;
    let mut rustls_config = (*tls.config).clone();
    if plan.tls.resume {
        // A store that keeps a ticket for each connection (and counts them as they come).
        let per_server = 2 * plan.local_connections().max(4);
        rustls_config.resumption = rustls::client::Resumption::store(Arc::new(
            crate::http::handshake_witness::TicketStore::new(per_server),
        ));
    }
    rustls_config.enable_early_data = h.zero_rtt;
    let crypto =
        quinn_proto::crypto::rustls::QuicClientConfig::try_from(rustls_config).map_err(|e| {
            EngineError::Tls(tls::TlsSetupError::Settings(format!(
                "QUIC needs TLS 1.3 with TLS_AES_128_GCM_SHA256: {e}"
            )))
        })?;
    let mut quic = quinn_proto::ClientConfig::new(Arc::new(crypto));
    quic.transport_config(Arc::new(h3::transport()));
    Ok(h3::H3Spec {
        request: bytes::Bytes::copy_from_slice(request.as_bytes()),
        head: request.is_head(),
        control: crate::http::h3::control_stream().into(),
        streams: h.streams,
        quic,
        server_name: plan.target.host.clone(),
        zero_rtt: h.zero_rtt,
    })
}

/// What a run needs before its clock starts: the request encoded once, the TLS client, the
/// protocol its workers speak, and for `--0rtt` the sessions to resume (fetched by
/// handshakes that must not eat into the run).
struct Prepared {
    request: Arc<[u8]>,
    tls: Option<worker_base::TlsSetup>,
    wire: Wire,
    primed: Option<h3::Primed>,
}

fn prepare(plan: &Plan) -> Result<Prepared, EngineError> {
    let request: Arc<[u8]> = plan
        .request
        .encode(&plan.target, plan.basic_auth.clone())
        .into();
    let tls = match plan.target.scheme {
        Scheme::Https => Some(worker_base::TlsSetup {
            config: tls::client_config(
                plan.insecure,
                &plan.tls,
                alpn_offer(plan.http2, plan.http3),
            )?,
            name: tls::server_name(&plan.target.host)?,
        }),
        Scheme::Http => None,
    };
    let wire = match (plan.http3, &tls) {
        (Some(h), Some(t)) => Wire::Http3(h3_spec(plan, h, t)?),
        _ => h2_spec(plan, tls.as_ref()).map_or(Wire::Http1, Wire::Http2),
    };
    let primed = match &wire {
        Wire::Http3(h) if h.zero_rtt => Some(h3::fetch_tickets(
            &h3::Fetch {
                config: &h.quic,
                server_name: &h.server_name,
                addr: plan.addrs.first(),
                timeout: plan.timeout,
            },
            plan.local_connections() as u64,
        )?),
        _ => None,
    };
    Ok(Prepared {
        request,
        tls,
        wire,
        primed,
    })
}

/// One spec per worker thread: its share of the connections, its place in the open-loop
/// schedule and of a count-bounded load, and the request encoded once for all of them.
fn worker_specs(
    plan: &Plan,
    prepared: &Prepared,
    start: Instant,
    shippers: Vec<live::IntervalShipper>,
) -> Result<Vec<worker_base::WorkerSpec>, EngineError> {
    let threads = shippers.len();
    let local_connections = plan.local_connections();
    let (request, tls) = (&prepared.request, &prepared.tls);
    let part = plan.part;
    let mut first_conn = 0;
    let mut specs = Vec::with_capacity(threads);
    let mut scripts: Vec<Option<hook::WorkerScript>> = match &plan.hooks {
        Some(h) => h.workers(threads)?.into_iter().map(Some).collect(),
        None => Vec::new(),
    };
    for (w, live) in shippers.into_iter().enumerate() {
        let script = scripts.get_mut(w).and_then(Option::take);
        let conns = share(local_connections as u64, threads, w) as usize;
        // Local connection j is global connection index + count * j.
        let schedule = worker_base::SchedulePosition {
            first: part.index as usize + part.count as usize * first_conn,
            stride: part.count as usize,
        };
        specs.push(worker_base::WorkerSpec {
            addr: script
                .as_ref()
                .and_then(|s| s.addr)
                .unwrap_or(plan.addrs.first()),
            request: script
                .as_ref()
                .and_then(|s| s.request.clone())
                .unwrap_or_else(|| request.clone()),
            head_request: script
                .as_ref()
                .map_or(plan.request.is_head(), |s| s.head_requests),
            keepalive: plan.request.keepalive,
            tls: tls.clone(),
            connections: conns,
            schedule,
            total_connections: plan.connections,
            tickets: match plan.stop.requests {
                None => tickets::Tickets::Unbounded,
                Some(n) => tickets::Tickets::split(
                    plan.stop.split,
                    // Global connection g's share of n, as `requests_of` sums them.
                    (0..conns)
                        .map(|j| share(n, plan.connections, schedule.first + schedule.stride * j))
                        .collect(),
                ),
            },
            deadline: plan.stop.duration.map(|d| start + d),
            pacing: plan.pacing,
            stages: plan.stages.clone(),
            timeout: plan.abandon_after(),
            start,
            expected: plan.stop.duration,
            live,
            script,
        });
        first_conn += conns;
    }
    Ok(specs)
}

type WorkerHandle<'scope> = Result<
    std::thread::ScopedJoinHandle<'scope, Result<worker_base::WorkerOutcome, EngineError>>,
    EngineError,
>;

/// Starts one thread per spec, each on the worker of the run's protocol; each says on the
/// returned channel when it has ended.
fn spawn_workers<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    specs: Vec<worker_base::WorkerSpec>,
    wire: &Wire,
    stop: &'env AtomicBool,
    progress: &'env [WorkerProgress],
) -> (Vec<WorkerHandle<'scope>>, mpsc::Receiver<()>) {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handles = specs
        .into_iter()
        .zip(progress)
        .enumerate()
        .map(|(w, (spec, prog))| {
            let done = done_tx.clone();
            let wire = match wire {
                Wire::Http1 => Wire::Http1,
                Wire::Http2(h) => Wire::Http2(h.clone()),
                Wire::Http3(h) => Wire::Http3(h.clone()),
            };
            std::thread::Builder::new()
                .name(format!("archbench-worker-{w}"))
                .spawn_scoped(scope, move || {
                    // Each protocol has a worker of its own, all in the one worker loop.
                    let r = match wire {
                        Wire::Http2(h2) => {
                            h2::H2Worker::new(spec, h2, stop, prog).and_then(|w| w.run())
                        }
                        Wire::Http3(h3) => {
                            h3::H3Worker::new(spec, h3, stop, prog).and_then(|w| w.run())
                        }
                        Wire::Http1 => worker::Worker::new(spec, stop, prog).and_then(|w| w.run()),
                    };
                    let _ = done.send(());
                    r
                })
                .map_err(EngineError::Poll)
        })
        .collect();
    (handles, done_rx)
}

/// Each worker's outcome, or why it has none.
fn join(handles: Vec<WorkerHandle<'_>>) -> Vec<Result<worker_base::WorkerOutcome, EngineError>> {
    handles
        .into_iter()
        .map(|h| match h {
            Ok(h) => h.join().map_err(|_| EngineError::WorkerPanic)?,
            Err(e) => Err(e),
        })
        .collect()
}

/// The calling thread while the workers run: it drains their intervals and reports progress.
struct Watch<'a> {
    start: Instant,
    /// When the run's duration ends, if it has one.
    end: Option<Instant>,
    stop: &'a AtomicBool,
    progress: &'a [WorkerProgress],
    collector: &'a mut live::Collector,
    busy: &'a mut WorkerBusy,
}

impl Watch<'_> {
    /// Until `spawned` workers have said they ended, a progress call every tick.
    fn until_done(
        &mut self,
        done: &mpsc::Receiver<()>,
        spawned: usize,
        on_progress: &mut impl FnMut(&Progress),
    ) {
        let mut finished = 0;
        let mut ended: Option<Instant> = None;
        while finished < spawned {
            let waited = done.recv_timeout(live::TICK);
            self.collector.drain();
            match waited {
                Ok(()) => finished += 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    if ended.is_none()
                        && (self.stop.load(Ordering::Relaxed) || self.end.is_some_and(|e| now >= e))
                    {
                        ended = Some(now);
                    }
                    let stuck = ended
                        .map(|e| now.saturating_duration_since(e))
                        .filter(|late| *late >= STUCK_AFTER)
                        .map(|late| StuckWorkers {
                            count: spawned - finished,
                            for_s: late.as_secs_f64(),
                        });
                    let quic = self.quic();
                    on_progress(&Progress {
                        elapsed: self.start.elapsed(),
                        completed: self.sum(|p| &p.completed),
                        errors: self.sum(|p| &p.errors),
                        bytes_read: self.sum(|p| &p.bytes_read),
                        latency: self.collector.live(),
                        worker_busy: self.busy.read(self.progress),
                        quic,
                        stuck,
                    })
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// The workers' QUIC counters added up, if any worker has published some.
    fn quic(&self) -> Option<crate::stats::QuicFigures> {
        self.progress
            .iter()
            .filter_map(WorkerProgress::quic)
            .reduce(|mut a, b| {
                a.add(&b);
                a
            })
    }

    fn sum(&self, counter: impl Fn(&WorkerProgress) -> &AtomicU64) -> u64 {
        self.progress
            .iter()
            .map(|p| counter(p).load(Ordering::Relaxed))
            .sum()
    }
}

/// The workers' outcomes folded into one: recordings merged exactly, the latest stop, the
/// earliest first send, each thread's CPU kept apart.
struct Merged {
    recording: Recorder,
    interrupted: bool,
    stopped_at: Instant,
    first_send: Option<Instant>,
    worker_cpu_s: Vec<(f64, f64)>,
    worker_demand_s: Vec<Option<f64>>,
}

impl Merged {
    fn new(expected: Option<Duration>, start: Instant) -> Merged {
        Merged {
            recording: Recorder::new(expected),
            interrupted: false,
            stopped_at: start,
            first_send: None,
            worker_cpu_s: Vec::new(),
            worker_demand_s: Vec::new(),
        }
    }

    fn add(&mut self, w: worker_base::WorkerOutcome) -> Result<(), EngineError> {
        self.worker_cpu_s.push(w.cpu_s);
        self.worker_demand_s.push(w.demand_s);
        self.interrupted |= w.interrupted;
        self.stopped_at = self.stopped_at.max(w.stopped_at);
        self.first_send = match (self.first_send, w.first_send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.recording.merge(&w.recording, 0)?;
        Ok(())
    }
}

/// How late a part may start and still keep `start_at` as its clock: its first sends are
/// then late (and send lateness says so), but it stays in phase with the other parts.
pub const START_GRACE: Duration = Duration::from_secs(1);

/// The run's start as a wall-clock time and as an instant: `start_at` when it is ahead or at
/// most [`START_GRACE`] past, else now.
pub fn start_instant(start_at: Option<SystemTime>) -> (SystemTime, Instant) {
    let (wall, now) = (SystemTime::now(), Instant::now());
    let Some(at) = start_at else {
        return (wall, now);
    };
    match at.duration_since(wall) {
        Ok(ahead) => match now.checked_add(ahead) {
            Some(start) => (at, start),
            None => (wall, now),
        },
        Err(past) => match now.checked_sub(past.duration()) {
            Some(start) if past.duration() <= START_GRACE => (at, start),
            _ => (wall, now),
        },
    }
}

/// The requests of a run of `n` that fall to the `conns` connections `first`, `first +
/// stride`, … of `total_conns`: request k belongs to connection k mod `total_conns` (in the
/// open loop it is due at k / rate), so connections below `n mod total_conns` send one more.
/// Parts and workers then finish together instead of the ones with fewer connections
/// trailing at a lower rate.
pub fn requests_of(n: u64, total_conns: u64, first: u64, stride: u64, conns: u64) -> u64 {
    if total_conns == 0 || stride == 0 {
        return 0;
    }
    let (base, extra) = (n / total_conns, n % total_conns);
    let with_extra = if extra > first {
        (extra - first).div_ceil(stride).min(conns)
    } else {
        0
    };
    conns * base + with_extra
}

/// Worker `w`'s share of `total` when split as evenly as possible over `parts`.
fn share(total: u64, parts: usize, w: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((w as u64) < total % parts)
}

/// Makes room for one descriptor per connection, three per worker (its epoll, and in the open
/// loop the timer's epoll and the timerfd) and headroom, or says what is needed.
fn raise_file_limit(connections: usize, threads: usize) -> Result<(), EngineError> {
    let needed = connections as u64 + 3 * threads as u64 + 64;
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

impl<A> Plan<A> {
    /// The plan as it is safe to store, as this process ran it: credentials redacted, and
    /// this part's connections, requests and rate (the whole load's are in `part`).
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
            connections: self.local_connections() as u64,
            threads: self.local_threads() as u64,
            duration_s: self.stop.duration.map(|d| d.as_secs_f64()),
            requests: self.local_requests(),
            rate: self.local_rate(),
            stages: self.stages.as_ref().map(|s| s.list().to_vec()),
            keepalive: self.request.keepalive,
            timeout_s: self.timeout.as_secs_f64(),
            insecure: self.insecure,
            part: (self.part != Part::WHOLE).then_some(crate::stats::PartSummary {
                index: self.part.index,
                count: self.part.count,
                connections: self.connections as u64,
                requests: self.stop.requests,
                rate: match self.pacing {
                    Pacing::Closed => None,
                    Pacing::Open { rate, .. } => Some(rate),
                },
            }),
            start_at: self.start_at.map(crate::timefmt::rfc3339_micros),
            tls_resume: (self.target.scheme == Scheme::Https).then_some(self.tls.resume),
            tls_ciphers: (!self.tls.ciphers.is_empty()).then(|| self.tls.ciphers.clone()),
            tls_groups: (!self.tls.groups.is_empty()).then(|| self.tls.groups.clone()),
            pinned_cert: self.tls.pinned.as_ref().map(|p| p.path.clone()),
            tls_version: self.tls.version.map(|v| v.number().to_string()),
            http2_streams: self.http2.map(|h| h.streams),
            http3_streams: self.http3.map(|h| h.streams),
            http3_0rtt: self.http3.is_some_and(|h| h.zero_rtt),
            alpn: (self.target.scheme == Scheme::Https).then(|| {
                alpn_offer(self.http2, self.http3)
                    .iter()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect()
            }),
            pacing_slack_us: match self.pacing {
                Pacing::Closed => None,
                Pacing::Open { slack, .. } => Some(slack.as_micros() as u64),
            },
            script: self.hook_flag("script"),
            mix: self.hook_flag("mix"),
        }
    }

    /// The value of argument `id` among the hooks' flags (the script's or the mix's file).
    fn hook_flag(&self, id: &str) -> Option<String> {
        let flags = self.hooks.as_ref()?.flags();
        flags.into_iter().find(|(i, _)| *i == id).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn parts_and_workers_cover_every_connection_once_and_every_request() {
        use super::requests_of;
        for total_conns in [1u64, 2, 3, 6, 7, 50] {
            for parts in 1..=total_conns.min(4) {
                for threads in 1..=3u64 {
                    for n in [total_conns, total_conns * 3 + 1, 1000, 2100] {
                        let mut seen = vec![0u32; total_conns as usize];
                        let mut sent = 0;
                        for index in 0..parts {
                            let part = super::Part {
                                index: index as u32,
                                count: parts as u32,
                            };
                            let local = part.share(total_conns);
                            let mut first_conn = 0;
                            let mut part_sent = 0;
                            for w in 0..threads.min(local.max(1)) {
                                let conns =
                                    share(local, threads.min(local.max(1)) as usize, w as usize);
                                let first = index + parts * first_conn;
                                for j in 0..conns {
                                    seen[(first + parts * j) as usize] += 1;
                                }
                                part_sent += requests_of(n, total_conns, first, parts, conns);
                                first_conn += conns;
                            }
                            // The part's own figure is the sum of its workers'.
                            assert_eq!(part_sent, requests_of(n, total_conns, index, parts, local));
                            sent += part_sent;
                        }
                        assert!(
                            seen.iter().all(|&c| c == 1),
                            "{total_conns} {parts} {threads}: {seen:?}"
                        );
                        assert_eq!(
                            sent, n,
                            "{total_conns} conns, {parts} parts, {threads} threads"
                        );
                    }
                }
            }
        }
        // -c 7 -n 2100 --part I/3: 3, 2 and 2 connections send 900, 600 and 600 requests,
        // 300 each, so the parts end together at 700 req/s.
        assert_eq!(requests_of(2100, 7, 0, 3, 3), 900);
        assert_eq!(requests_of(2100, 7, 1, 3, 2), 600);
    }

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
