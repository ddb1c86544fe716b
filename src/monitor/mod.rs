//! Server-side truth: CPU seconds, memory and context switches of the processes serving the
//! load, sampled every 250 ms while a run lasts — from /proc for processes, from cgroup files
//! for containers. One trait, [`ResourceSampler`], at the seam; Kubernetes will be another
//! implementation.
//!
//! Must stay cheap (well under 1% of a core): a sample reads a handful of small files.

pub mod binary;
mod cgroup;
pub mod fingerprint;
pub mod perf;
mod proc;

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::stats::{
    CounterValue, Limiter, LimiterSide, RunResult, SamplingStopped, ServerFingerprint, ServerNow,
    ServerUsage, Unmeasured, WatchedPod,
};

pub use cgroup::{cpu_max_cores, CgroupSampler};
pub use proc::ProcSampler;

/// How often a watched server is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Error)]
pub enum MonitorError {
    #[error("invalid --watch {0:?}; use NAME=pid:1234, NAME=name:nginx or NAME=cgroup:/sys/fs/cgroup/PATH")]
    Spec(String),
    #[error("no running process named {0:?} to watch")]
    NoSuchName(String),
    #[error("process {0} is not running")]
    NoSuchPid(u32),
    #[error("{path} is not a cgroup directory (no cpu.stat or cpuacct.usage found)")]
    NotACgroup { path: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What to watch, as given on the command line: `NAME=pid:1234`, `NAME=name:nginx`,
/// `NAME=cgroup:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSpec {
    pub label: String,
    pub target: WatchTarget,
    /// Counters to read with perf_event_open (`--perf`), for process targets.
    pub perf: Vec<perf::PerfEvent>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchTarget {
    /// A process and all its descendants.
    Pid(u32),
    /// Every process with this command name, and their descendants.
    Name(String),
    /// Everything in a cgroup (v1 or v2).
    Cgroup(PathBuf),
}

impl FromStr for WatchSpec {
    type Err = MonitorError;

    fn from_str(s: &str) -> Result<WatchSpec, MonitorError> {
        let bad = || MonitorError::Spec(s.to_string());
        let (label, rest) = s.split_once('=').ok_or_else(bad)?;
        let (kind, value) = rest.split_once(':').ok_or_else(bad)?;
        if label.is_empty() || value.is_empty() {
            return Err(bad());
        }
        let target = match kind {
            "pid" => WatchTarget::Pid(value.parse().map_err(|_| bad())?),
            "name" => WatchTarget::Name(value.to_string()),
            "cgroup" => WatchTarget::Cgroup(PathBuf::from(value)),
            _ => return Err(bad()),
        };
        Ok(WatchSpec {
            label: label.to_string(),
            target,
            perf: Vec::new(),
        })
    }
}

impl std::fmt::Display for WatchTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchTarget::Pid(p) => write!(f, "pid:{p}"),
            WatchTarget::Name(n) => write!(f, "name:{n}"),
            WatchTarget::Cgroup(p) => write!(f, "cgroup:{}", p.display()),
        }
    }
}

/// Cumulative counters at one instant; usage is the difference of two samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceSample {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Resident memory now (processes: sum of RSS; cgroups: memory.current; pods: the sum
    /// of their cgroups' memory).
    pub memory_bytes: u64,
    /// Voluntary + involuntary context switches of every thread seen so far (one that
    /// exited keeps its last count, so the total never runs backwards); None where the
    /// sampler cannot read them ([`ResourceSampler::unmeasured`] says why).
    pub context_switches: Option<u64>,
    /// Processes counted in this sample; None where the sampler cannot count them.
    pub processes: Option<u32>,
    /// Seconds the busiest single thread ran or waited to run since the sampler started.
    /// None for cgroups.
    pub busiest_thread_demand_s: Option<f64>,
    /// The CPU limit in cores (a cgroup's quota over its period), where one is set.
    pub cpu_limit_cores: Option<f64>,
    /// A target made of pods: each pod's cumulative counters, every pod seen so far (gone
    /// ones with their last), in the order first seen; the figures above are their sums.
    pub pods: Vec<PodSample>,
}

/// One pod's cumulative counters in a [`ResourceSample`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSample {
    pub name: String,
    /// The node it runs on.
    pub node: Option<String>,
    /// CPU since its cgroup was made (carried over container restarts).
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Memory charged to its cgroup now (0 once it is gone).
    pub memory_bytes: u64,
    /// Its counters are current: read since the last sample's time, the pod still there.
    pub live: bool,
    /// How many readings of its counters were taken so far.
    pub reads: u64,
    /// Why its counters miss part of its time, when they do.
    pub not_measured: Option<String>,
}

pub trait ResourceSampler: Send {
    /// Reads the current cumulative counters.
    fn sample(&mut self) -> Result<ResourceSample, MonitorError>;

    /// The processes being watched now (for per-process tools such as perf counters).
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }

    /// What happened to the target while it was watched (a pod restarted, say), taken once
    /// when sampling ends.
    fn events(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Why the figures this sampler leaves None are not measured (for the result).
    fn unmeasured(&self) -> Vec<Unmeasured> {
        Vec::new()
    }
}

/// Builds the sampler for a spec; fails now if the target does not exist.
pub fn sampler_for(spec: &WatchSpec) -> Result<Box<dyn ResourceSampler>, MonitorError> {
    Ok(match &spec.target {
        WatchTarget::Pid(p) => Box::new(ProcSampler::for_pid(*p)?),
        WatchTarget::Name(n) => Box::new(ProcSampler::for_name(n)?),
        WatchTarget::Cgroup(p) => Box::new(CgroupSampler::new(p)?),
    })
}

/// The process that stands for a target: the pid, the first process of that name, or the
/// first process in the cgroup.
fn root_pid(target: &WatchTarget) -> Option<u32> {
    match target {
        WatchTarget::Pid(p) => Some(*p),
        WatchTarget::Name(n) => proc::pids_named(n).into_iter().min(),
        WatchTarget::Cgroup(dir) => std::fs::read_to_string(dir.join("cgroup.procs"))
            .ok()?
            .lines()
            .find_map(|l| l.trim().parse().ok()),
    }
}

/// At its limit: a thread at >= 90% of a core, or the whole target at >= 90% of the machine.
pub fn saturated(s: &ServerUsage) -> bool {
    s.busiest_thread_demand.is_some_and(|c| c >= SATURATED)
        || s.machine_percent >= SATURATED * 100.0
        || at_cpu_limit(s).is_some()
}

/// The share of its CPU limit a limited server used, when that is at saturation.
fn at_cpu_limit(s: &ServerUsage) -> Option<f64> {
    let share = s.cores / s.cpu_limit_cores.filter(|&l| l > 0.0)?;
    (share >= SATURATED).then_some(share)
}

/// Something a run can watch. Each run opens it afresh; opening checks the target exists, so a
/// bad one fails before any load. A local process or cgroup ([`WatchSpec`]) is one kind; the
/// `k8s` module adds pods, sampled through the API server.
pub trait WatchSource: Send + Sync + std::fmt::Debug {
    /// The name reports use (`--watch NAME=…`, a target's name).
    fn label(&self) -> &str;
    /// What is watched, for reports ("pid:1234", "pod:nginx/nginx-arm-…").
    fn target(&self) -> String;
    /// A sampler for one run, with what is known about the server.
    fn open(&self) -> Result<OpenedWatch, MonitorError>;
}

/// A source opened for one run.
pub struct OpenedWatch {
    pub sampler: Box<dyn ResourceSampler>,
    pub fingerprint: ServerFingerprint,
    /// Open perf counters, when asked for and possible.
    pub counters: Option<perf::Counters>,
    /// Counters asked for that this kind of target cannot have, with why.
    pub counters_unavailable: Vec<CounterValue>,
}

impl WatchSource for WatchSpec {
    fn label(&self) -> &str {
        &self.label
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    fn open(&self) -> Result<OpenedWatch, MonitorError> {
        let sampler = sampler_for(self)?;
        let fingerprint = root_pid(&self.target)
            .map(fingerprint::fingerprint_pid)
            .unwrap_or_default();
        let (counters, counters_unavailable) = match (&self.target, self.perf.is_empty()) {
            (_, true) => (None, Vec::new()),
            (WatchTarget::Cgroup(_), false) => (
                None,
                self.perf
                    .iter()
                    .map(|e| CounterValue {
                        event: e.name.clone(),
                        value: None,
                        status: "not supported for cgroup targets yet".into(),
                    })
                    .collect(),
            ),
            (_, false) => (
                Some(perf::Counters::open(&self.perf, &sampler.pids())),
                Vec::new(),
            ),
        };
        Ok(OpenedWatch {
            sampler,
            fingerprint,
            counters,
            counters_unavailable,
        })
    }
}

/// Samples one target on its own thread until stopped.
pub struct Monitor {
    /// The latest sample interval, for live views.
    now: Arc<Mutex<Option<ServerNow>>>,
    stop: Arc<AtomicBool>,
    wake: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<ServerUsage>,
    label: String,
    target: String,
}

impl Monitor {
    /// Opens the source and samples it once now (so a bad target fails before the load
    /// starts); the figures then run from `run_start` (a `--start-at` may lie ahead), so they
    /// cover the run, not a wait before it.
    pub fn start(source: &dyn WatchSource, run_start: Instant) -> Result<Monitor, MonitorError> {
        let OpenedWatch {
            mut sampler,
            fingerprint,
            counters,
            counters_unavailable,
        } = source.open()?;
        let validated = sampler.sample()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (wake, wait) = mpsc::channel::<()>();
        let (label, target) = (source.label().to_string(), source.target());
        let now = Arc::new(Mutex::new(None));
        let name = format!("archbench-watch-{label}");
        let sampling = Sampling {
            sampler,
            label,
            target,
            run_start,
            wait,
            stop: stop.clone(),
            publish: now.clone(),
            fingerprint,
            counters,
            counters_unavailable,
        };
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || sampling.run(validated))
            .map_err(|source| MonitorError::Read {
                path: "monitor thread".into(),
                source,
            })?;
        Ok(Monitor {
            now,
            stop,
            wake,
            thread,
            label: source.label().to_string(),
            target: source.target(),
        })
    }

    /// The latest sample interval (None before the first one after the start).
    pub fn now(&self) -> Option<ServerNow> {
        self.now.lock().ok().and_then(|n| n.clone())
    }

    /// Takes a last sample and returns what was used since [`Monitor::start`]. Never fails:
    /// a sampler that broke down reports what it measured before, and why it stopped.
    pub fn finish(self) -> ServerUsage {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake.send(());
        let (label, target) = (self.label, self.target);
        self.thread.join().unwrap_or_else(|_| ServerUsage {
            sampling_stopped: Some(SamplingStopped {
                after_s: 0.0,
                server_gone: false,
                reason: "the monitor thread panicked; this is a bug in archbench".into(),
            }),
            ..ServerUsage::empty(label, target)
        })
    }
}

/// A monitor's thread: the opened source, sampled from the run's start until stopped.
struct Sampling {
    sampler: Box<dyn ResourceSampler>,
    label: String,
    target: String,
    run_start: Instant,
    /// Wakes the thread at once when the monitor finishes.
    wait: mpsc::Receiver<()>,
    stop: Arc<AtomicBool>,
    /// Where the latest interval goes for live views.
    publish: Arc<Mutex<Option<ServerNow>>>,
    fingerprint: ServerFingerprint,
    counters: Option<perf::Counters>,
    counters_unavailable: Vec<CounterValue>,
}

/// What the samples so far add up to.
struct Tally {
    first: ResourceSample,
    started: Instant,
    peak: u64,
    processes: Option<u32>,
    samples: u64,
    last: (ResourceSample, Instant),
    stopped: Option<SamplingStopped>,
    /// Per pod (by name): what no single sample holds.
    pods: HashMap<String, PodTally>,
}

/// One pod's highest memory and when samples found it live.
#[derive(Default)]
struct PodTally {
    peak: u64,
    seen: Option<(Instant, Instant)>,
}

/// Why a pod's CPU over the run is not measured when its counters were read only before it.
const UNREAD: &str =
    "its counters were read only at the run's start, and it went before the next reading";

impl Tally {
    /// The tally of the run's first sample.
    fn new(first: ResourceSample, started: Instant) -> Tally {
        let mut tally = Tally {
            first: first.clone(),
            started,
            peak: 0,
            processes: None,
            samples: 1,
            last: (first.clone(), started),
            stopped: None,
            pods: HashMap::new(),
        };
        tally.take(&first, started);
        tally
    }

    /// Takes a sample's memory, processes and pods into the running figures.
    fn take(&mut self, s: &ResourceSample, at: Instant) {
        self.peak = self.peak.max(s.memory_bytes);
        self.processes = self.processes.max(s.processes);
        for p in &s.pods {
            let t = self.pods.entry(p.name.clone()).or_default();
            t.peak = t.peak.max(p.memory_bytes);
            if p.live {
                t.seen = Some((t.seen.map_or(at, |(from, _)| from), at));
            }
        }
    }

    /// Each pod's usage between the first sample and the last.
    fn pods(&self) -> Vec<WatchedPod> {
        let (last, _) = &self.last;
        let since = |at: Instant| at.saturating_duration_since(self.started).as_secs_f64();
        last.pods
            .iter()
            .map(|p| {
                // A pod the first sample lacks appeared during the run: its cgroup's counters
                // began with it.
                let first = self.first.pods.iter().find(|f| f.name == p.name);
                let (user0, system0) = first.map_or((0.0, 0.0), |f| (f.cpu_user_s, f.cpu_system_s));
                // Read at the start and gone before its next reading: what it used during the
                // run is unknown, not zero.
                let unread = first.is_some_and(|f| f.reads == p.reads) && !p.live;
                let not_measured = match &p.not_measured {
                    None if unread => Some(UNREAD.to_string()),
                    why => why.clone(),
                };
                let cpu_user_s = (p.cpu_user_s - user0).max(0.0);
                let cpu_system_s = (p.cpu_system_s - system0).max(0.0);
                let tally = self.pods.get(&p.name);
                let seen = tally.and_then(|t| t.seen);
                WatchedPod {
                    name: p.name.clone(),
                    node: p.node.clone(),
                    cpu_user_s,
                    cpu_system_s,
                    cpu_s: cpu_user_s + cpu_system_s,
                    peak_memory_bytes: tally.map_or(0, |t| t.peak),
                    seen_from_s: seen.map(|(from, _)| since(from)),
                    seen_until_s: seen.map(|(_, until)| since(until)),
                    not_measured,
                }
            })
            .collect()
    }
}

impl Sampling {
    /// The thread's whole life; `validated` is the sample [`Monitor::start`] took, the first
    /// one should the sample at the run's start fail.
    fn run(mut self, validated: ResourceSample) -> ServerUsage {
        let stopped_before_start = self.wait_for_start();
        let (first, started) = match self.sampler.sample() {
            Ok(s) => (s, Instant::now()),
            Err(_) => (validated, Instant::now()),
        };
        let mut tally = Tally::new(first, started);
        // A run stopped before it started has nothing to sample.
        if !stopped_before_start {
            self.sample_until_stopped(&mut tally);
        }
        self.usage(tally)
    }

    /// Waits for the run's start; whether the monitor was stopped before it.
    fn wait_for_start(&self) -> bool {
        let left = self.run_start.saturating_duration_since(Instant::now());
        !left.is_zero()
            && !matches!(
                self.wait.recv_timeout(left),
                Err(mpsc::RecvTimeoutError::Timeout)
            )
    }

    /// One sample a tick until stopped, or until the target is gone or cannot be read.
    fn sample_until_stopped(&mut self, tally: &mut Tally) {
        loop {
            // Sleeps until the next tick, or returns at once when stopped.
            let stopping = self.stop.load(Ordering::Relaxed)
                || !matches!(
                    self.wait.recv_timeout(SAMPLE_EVERY),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
            // A failed reading ends the sampling, never the run: what was measured
            // until then stays, and the report says what was lost.
            match self.sampler.sample() {
                Ok(s) if s.processes == Some(0) && tally.first.processes.is_some_and(|n| n > 0) => {
                    tally.stopped = Some(SamplingStopped {
                        after_s: self.run_start.elapsed().as_secs_f64(),
                        server_gone: true,
                        reason: format!("every watched process of {} exited", self.target),
                    });
                    break;
                }
                Ok(s) => self.record(tally, s),
                Err(e) => {
                    tally.stopped = Some(SamplingStopped {
                        after_s: self.run_start.elapsed().as_secs_f64(),
                        // A failed reading does not prove the server gone: a removed
                        // cgroup may belong to a container restarted elsewhere.
                        server_gone: false,
                        reason: e.to_string(),
                    });
                    break;
                }
            }
            if stopping {
                break;
            }
        }
    }

    /// Adds a sample to the tally and publishes the interval since the last one.
    fn record(&self, tally: &mut Tally, s: ResourceSample) {
        tally.samples += 1;
        let at = Instant::now();
        tally.take(&s, at);
        let last = &tally.last;
        let dt = at.duration_since(last.1).as_secs_f64();
        let used = (s.cpu_user_s + s.cpu_system_s) - (last.0.cpu_user_s + last.0.cpu_system_s);
        if let Ok(mut n) = self.publish.lock() {
            *n = Some(ServerNow {
                label: self.label.clone(),
                target: self.target.clone(),
                cores: if dt > 0.0 { used.max(0.0) / dt } else { 0.0 },
                limit_cores: s.cpu_limit_cores,
                memory_bytes: s.memory_bytes,
                at_s: at.saturating_duration_since(self.run_start).as_secs_f64(),
            });
        }
        tally.last = (s, at);
    }

    /// What was used between the first and the last sample.
    fn usage(mut self, tally: Tally) -> ServerUsage {
        let pods = tally.pods();
        let Tally { first, started, .. } = tally;
        let (last, last_at) = tally.last;
        let sampled_s = last_at.duration_since(started).as_secs_f64();
        let cpu_user_s = (last.cpu_user_s - first.cpu_user_s).max(0.0);
        let cpu_system_s = (last.cpu_system_s - first.cpu_system_s).max(0.0);
        let cpu_s = cpu_user_s + cpu_system_s;
        let per_second = |x: f64| if sampled_s > 0.0 { x / sampled_s } else { 0.0 };
        let cores = per_second(cpu_s);
        ServerUsage {
            label: self.label,
            target: self.target,
            sampled_s,
            samples: tally.samples,
            cpu_user_s,
            cpu_system_s,
            cpu_s,
            cores,
            machine_percent: cores * 100.0 / crate::os::logical_cores() as f64,
            peak_memory_bytes: tally.peak,
            context_switches: last
                .context_switches
                .zip(first.context_switches)
                .map(|(l, f)| l.saturating_sub(f)),
            processes: tally.processes,
            requests_per_cpu_s: None,
            unmeasured: self.sampler.unmeasured(),
            pods,
            fingerprint: self.fingerprint,
            counters: match self.counters {
                Some(c) => c.finish(),
                None => self.counters_unavailable,
            },
            sampler_cpu_s: {
                let (u, s) = crate::os::thread_cpu();
                u + s
            },
            busiest_thread_demand: last.busiest_thread_demand_s.map(per_second),
            cpu_limit_cores: last.cpu_limit_cores,
            sampling_stopped: tally.stopped,
            events: self.sampler.events(),
        }
    }
}

/// Share of a core at which a thread or process counts as saturated (also in live views).
pub const SATURATED: f64 = 0.9;

/// p99 send lateness beyond which an open-loop client did not keep its schedule: requests
/// went out late enough to inflate the latencies measured from their intended times.
pub const LATE_SENDS_US: u64 = 1_000;

/// Which side limited a run, from the client's and the watched servers' CPU and the open-loop
/// schedule: the check a careful engineer makes by hand before believing a benchmark. The
/// reason gives figures, not flags: each front end adds advice in its own flags.
pub fn limiter(r: &RunResult) -> Limiter {
    if let Some(gone) = server_gone(r) {
        return gone;
    }
    if let Some(what) = r.answered_nothing() {
        // A busy client then only retried failures, or waited: no load to attribute to
        // either side.
        return Limiter {
            side: LimiterSide::Unknown,
            reason: format!("no request was answered ({what}): there was no load to attribute"),
        };
    }
    let (side, mut reason) = saturated_side(r);
    // Short: the report's WARNING line (and stderr) give the whole sentence with the codes.
    if let Some(percent) = r.error_answer_percent() {
        reason.push_str(&format!(
            "; {percent:.1}% of answers were not 2xx/3xx: the figures describe error responses"
        ));
    }
    if let Some(p) = &r.pacing {
        let attempted = r.totals.attempted.max(1);
        if p.held_by_busy_connection * 100 > attempted {
            reason.push_str(&format!(
                "; {:.1}% of requests were due while their connection still waited for a response: too few connections for this rate at this latency",
                p.held_by_busy_connection as f64 * 100.0 / attempted as f64
            ));
        }
    }
    Limiter { side, reason }
}

/// A watched server that went away during the run limited it, whatever else did.
fn server_gone(r: &RunResult) -> Option<Limiter> {
    let (s, stopped) = r.servers.iter().find_map(|s| {
        s.sampling_stopped
            .as_ref()
            .filter(|st| st.server_gone)
            .map(|st| (s, st))
    })?;
    let from = stopped.after_s.floor() as u32;
    let failed_after: u64 = r
        .series
        .iter()
        .filter(|x| x.second + r.series_step_s > from)
        .map(|x| x.errors)
        .sum();
    Some(Limiter {
        side: LimiterSide::ServerGone,
        reason: format!(
            "server {} went away {:.1} s into the run ({}); {} requests failed from then on: the figures after that measure its absence, not its speed",
            s.label, stopped.after_s, stopped.reason, failed_after
        ),
    })
}

/// Which side's CPU (or, open loop, the schedule) was saturated, and the figures that say so.
fn saturated_side(r: &RunResult) -> (LimiterSide, String) {
    let (client, servers) = (&r.client, &r.servers);
    let late_p99 = r
        .pacing
        .as_ref()
        .map(|p| p.lateness.p99_us)
        .filter(|&us| us > LATE_SENDS_US);
    let client_full = client.busiest_worker_percent >= SATURATED * 100.0 || late_p99.is_some();
    let full: Vec<&ServerUsage> = servers.iter().filter(|s| saturated(s)).collect();
    let client_reason = client_reason(client, late_p99);
    match (client_full, full.first(), servers.is_empty()) {
        (true, Some(s), _) => (LimiterSide::Both, format!("{client_reason}; and {}", server_reason(s))),
        (true, None, _) => (LimiterSide::Client, client_reason),
        (false, Some(s), _) => (LimiterSide::Server, server_reason(s)),
        (false, None, true) => (
            LimiterSide::Unknown,
            format!(
                "client not saturated (busiest worker busy {:.0}% of the time); server not watched (--watch NAME=pid:PID tells)",
                client.busiest_worker_percent
            ),
        ),
        (false, None, false) => (
            LimiterSide::Neither,
            "neither side's CPU was saturated: latency-, network- or lock-bound".to_string(),
        ),
    }
}

/// Why a saturated server limited the run: one thread at its core, or the machine's CPU.
fn server_reason(s: &ServerUsage) -> String {
    match s.busiest_thread_demand {
        Some(c) if c >= SATURATED => format!(
            "server {}: one of its threads ran or waited to run {:.0}% of the time",
            s.label,
            c * 100.0
        ),
        _ => match (at_cpu_limit(s), s.cpu_limit_cores) {
            (Some(share), Some(limit)) => format!(
                "server {}: {:.2} cores of its CPU limit of {limit} ({:.0}%)",
                s.label,
                s.cores,
                share * 100.0
            ),
            _ => format!(
                "server {}: {:.0}% of the machine's CPU",
                s.label, s.machine_percent
            ),
        },
    }
}

/// Why the client limited the run: late sends (`late_p99`, in µs) or a busy worker.
fn client_reason(client: &crate::stats::ClientUsage, late_p99: Option<u64>) -> String {
    match late_p99 {
        Some(us) => format!(
            "client: requests went out late against the open-loop schedule (p99 send lateness {:.1} ms; busiest worker {:.0}% of the time running or waiting to run), which inflates the latencies measured",
            us as f64 / 1000.0,
            client.busiest_worker_percent
        ),
        None => format!(
            "client: a worker thread ran or waited to run {:.0}% of the time; the figures describe archbench, not the server",
            client.busiest_worker_percent
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stats::{ClientUsage, Environment, PacingSummary, PlanSummary, Recorder, RunTimes};

    fn run(busy: f64, servers: &[ServerUsage]) -> RunResult {
        let mut r = RunResult::from_recording(
            Recorder::new(None),
            PlanSummary::default(),
            Environment::default(),
            RunTimes {
                started_at: std::time::SystemTime::now(),
                first_send_at: None,
                elapsed_s: 10.0,
                interrupted: false,
            },
        );
        r.client = ClientUsage {
            busiest_worker_percent: busy,
            ..ClientUsage::default()
        };
        r.servers = servers.to_vec();
        r
    }

    fn server(thread_cores: f64, machine_percent: f64) -> ServerUsage {
        ServerUsage {
            sampled_s: 10.0,
            samples: 40,
            cores: machine_percent / 50.0,
            machine_percent,
            processes: Some(2),
            busiest_thread_demand: Some(thread_cores),
            ..ServerUsage::empty("web".into(), "pid:1".into())
        }
    }

    #[test]
    fn a_server_at_its_cgroups_cpu_limit_limits_the_run() {
        // A 200m pod using 0.19 cores: under 10% of the machine, but all its limit gives.
        let pod = |cores: f64| ServerUsage {
            sampled_s: 10.0,
            samples: 40,
            cores,
            machine_percent: cores * 50.0,
            cpu_limit_cores: Some(0.2),
            ..ServerUsage::empty("fifth".into(), "pod:nginx/fifth".into())
        };
        let l = limiter(&run(30.0, &[pod(0.19)]));
        assert_eq!(l.side, LimiterSide::Server, "{}", l.reason);
        assert!(
            l.reason
                .contains("0.19 cores of its CPU limit of 0.2 (95%)"),
            "{}",
            l.reason
        );
        // Half its limit: not saturated.
        assert_eq!(limiter(&run(30.0, &[pod(0.1)])).side, LimiterSide::Neither);
    }

    #[test]
    fn each_pod_counts_from_the_first_sample_or_from_its_start() {
        let pod = |name: &str, cpu_s: f64, live: bool, reads: u64| PodSample {
            name: name.into(),
            node: Some("aks-arm-0".into()),
            cpu_user_s: cpu_s,
            cpu_system_s: cpu_s / 4.0,
            memory_bytes: if live { 4 << 20 } else { 0 },
            live,
            reads,
            not_measured: None,
        };
        let with = |pods: Vec<PodSample>| ResourceSample {
            cpu_user_s: pods.iter().map(|p| p.cpu_user_s).sum(),
            memory_bytes: pods.iter().map(|p| p.memory_bytes).sum(),
            pods,
            ..ResourceSample::default()
        };
        let t0 = Instant::now();
        // Pod a ran before the run (5 CPU s already); b replaces it a second in. Pod c was
        // read at the start and went before its next reading.
        let first = with(vec![pod("a", 5.0, true, 3), pod("c", 2.0, true, 7)]);
        let mut tally = Tally::new(first, t0);
        let t1 = t0 + Duration::from_secs(1);
        let both = with(vec![
            pod("a", 6.0, true, 4),
            pod("c", 2.0, false, 7),
            pod("b", 0.5, true, 1),
        ]);
        tally.take(&both, t1);
        let t2 = t0 + Duration::from_secs(2);
        let replaced = with(vec![
            pod("a", 6.0, false, 4),
            pod("c", 2.0, false, 7),
            pod("b", 1.5, true, 2),
        ]);
        tally.take(&replaced, t2);
        tally.last = (replaced, t2);
        let pods = tally.pods();
        assert_eq!(pods.len(), 3);
        let (a, c, b) = (&pods[0], &pods[1], &pods[2]);
        assert_eq!((a.cpu_user_s, a.cpu_system_s), (1.0, 0.25));
        assert_eq!(a.cpu_s, 1.25);
        assert_eq!((b.cpu_user_s, b.cpu_s), (1.5, 1.875));
        assert_eq!((a.seen_from_s, a.seen_until_s), (Some(0.0), Some(1.0)));
        assert_eq!((b.seen_from_s, b.seen_until_s), (Some(1.0), Some(2.0)));
        assert_eq!(a.peak_memory_bytes, 4 << 20);
        // Gone after a reading during the run: measured. Never read after the start: its
        // 0 would be invented, so it says why it is not measured.
        assert_eq!((&a.not_measured, &b.not_measured), (&None, &None));
        assert_eq!(c.not_measured.as_deref(), Some(UNREAD));
        // Two pods at once (a and c, then a and b) held twice one pod's memory.
        assert_eq!(tally.peak, 8 << 20);
    }

    #[test]
    fn names_the_saturated_side() {
        let busy_nginx_worker = server(0.97, 48.0);
        let idle_server = server(0.3, 15.0);
        let side = |busy, servers: &[ServerUsage]| limiter(&run(busy, servers)).side;
        assert_eq!(
            side(60.0, std::slice::from_ref(&busy_nginx_worker)),
            LimiterSide::Server
        );
        assert_eq!(
            side(98.0, std::slice::from_ref(&idle_server)),
            LimiterSide::Client
        );
        assert_eq!(side(98.0, &[busy_nginx_worker]), LimiterSide::Both);
        assert_eq!(side(40.0, &[idle_server]), LimiterSide::Neither);
        assert_eq!(side(40.0, &[]), LimiterSide::Unknown);
        assert_eq!(side(95.0, &[]), LimiterSide::Client);
        // Many threads each below a core, but the machine full: saturated as a whole.
        assert_eq!(side(50.0, &[server(0.5, 95.0)]), LimiterSide::Server);
    }

    #[test]
    fn late_sends_blame_the_client_and_busy_connections_are_named() {
        let mut r = run(30.0, &[]);
        r.totals.attempted = 1000;
        let mut pacing = PacingSummary {
            target_rate: 100.0,
            achieved_rate: 100.0,
            lateness: Default::default(),
            early_sends: 0,
            earliness: Default::default(),
            held_by_busy_connection: 0,
        };
        pacing.lateness.p99_us = 4_000;
        r.pacing = Some(pacing.clone());
        let l = limiter(&r);
        assert_eq!(l.side, LimiterSide::Client);
        assert!(
            l.reason.contains("p99 send lateness 4.0 ms"),
            "{}",
            l.reason
        );
        pacing.lateness.p99_us = 150;
        pacing.held_by_busy_connection = 200;
        r.pacing = Some(pacing);
        let l = limiter(&r);
        assert_eq!(l.side, LimiterSide::Unknown);
        assert!(
            l.reason.contains("20.0% of requests were due"),
            "{}",
            l.reason
        );
    }

    #[test]
    fn a_server_that_went_away_is_named_with_the_failures_after() {
        let mut gone = server(0.2, 10.0);
        gone.sampling_stopped = Some(SamplingStopped {
            after_s: 2.3,
            server_gone: true,
            reason: "every watched process of pid:1 exited".into(),
        });
        let mut r = run(20.0, &[gone]);
        for (second, errors) in [(0, 0), (1, 0), (2, 40), (3, 100)] {
            r.series.push(crate::stats::SecondSample {
                second,
                errors,
                ..Default::default()
            });
        }
        let l = limiter(&r);
        assert_eq!(l.side, LimiterSide::ServerGone);
        assert!(
            l.reason.contains("went away 2.3 s into the run"),
            "{}",
            l.reason
        );
        assert!(l.reason.contains("140 requests failed"), "{}", l.reason);
    }

    #[test]
    fn parses_watch_specs() {
        assert_eq!(
            "web=pid:42".parse::<WatchSpec>().unwrap(),
            WatchSpec {
                label: "web".into(),
                target: WatchTarget::Pid(42),
                perf: Vec::new(),
            }
        );
        assert_eq!(
            "a=name:nginx".parse::<WatchSpec>().unwrap().target,
            WatchTarget::Name("nginx".into())
        );
        assert_eq!(
            "c=cgroup:/sys/fs/cgroup/x"
                .parse::<WatchSpec>()
                .unwrap()
                .target,
            WatchTarget::Cgroup("/sys/fs/cgroup/x".into())
        );
        for bad in ["pid:1", "x=pid:abc", "x=port:80", "=pid:1", "x=name:"] {
            assert!(bad.parse::<WatchSpec>().is_err(), "{bad}");
        }
    }
}
