//! Server-side truth: CPU seconds, memory and context switches of the processes serving the
//! load, sampled every 250 ms while a run lasts — from /proc for processes, from cgroup files
//! for containers. One trait, [`ResourceSampler`], at the seam; Kubernetes will be another
//! implementation.
//!
//! Must stay cheap (well under 1% of a core): a sample reads a handful of small files.

mod cgroup;
pub mod fingerprint;
pub mod perf;
mod proc;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::stats::{ClientUsage, Limiter, LimiterSide};

pub use cgroup::CgroupSampler;
pub use proc::{schedstat_demand_ns, ProcSampler};

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
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResourceSample {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Resident memory now (processes: sum of RSS; cgroups: memory.current).
    pub memory_bytes: u64,
    /// Voluntary + involuntary context switches (processes only; 0 for cgroups).
    pub context_switches: u64,
    /// Processes counted in this sample.
    pub processes: u32,
    /// Seconds the busiest single thread ran or waited to run since the sampler started.
    /// None for cgroups.
    pub busiest_thread_demand_s: Option<f64>,
}

pub trait ResourceSampler: Send {
    /// Reads the current cumulative counters.
    fn sample(&mut self) -> Result<ResourceSample, MonitorError>;

    /// The processes being watched now (for per-process tools such as perf counters).
    fn pids(&self) -> Vec<u32> {
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

/// What a watched server used during a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerUsage {
    /// The NAME of `--watch NAME=…`.
    pub label: String,
    /// What was watched ("pid:1234", "name:nginx", "cgroup:/sys/fs/cgroup/…").
    pub target: String,
    /// Seconds between the first and last sample.
    pub sampled_s: f64,
    pub samples: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// user + system.
    pub cpu_s: f64,
    /// Average cores busy: cpu_s / sampled_s.
    pub cores: f64,
    /// Share of this machine's cores, in percent.
    pub machine_percent: f64,
    pub peak_memory_bytes: u64,
    pub context_switches: u64,
    /// Most processes seen in one sample.
    pub processes: u32,
    /// Answered requests per server CPU-second (filled in by the run that watched it).
    pub requests_per_cpu_s: f64,
    /// CPU the sampling itself cost archbench (its thread's user + system seconds).
    pub sampler_cpu_s: f64,
    /// What the server is (executable; nginx version, compiler, configure arguments).
    #[serde(default)]
    pub fingerprint: fingerprint::ServerFingerprint,
    /// `--perf` counters over the run.
    #[serde(default)]
    pub counters: Vec<perf::CounterValue>,
    /// Share of one core the busiest single thread ran or waited to run (processes only;
    /// from schedstat, so a thread starved by other load still counts as wanting the core):
    /// an event-loop server like an nginx worker is at its limit when this nears 1.
    pub busiest_thread_demand: Option<f64>,
}

impl ServerUsage {
    /// At its limit: a thread at >= 90% of a core, or the whole target at >= 90% of the
    /// machine.
    pub fn saturated(&self) -> bool {
        self.busiest_thread_demand.is_some_and(|c| c >= SATURATED)
            || self.machine_percent >= SATURATED * 100.0
    }
}

/// Samples one target on its own thread until stopped.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    wake: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Result<ServerUsage, MonitorError>>,
}

impl Monitor {
    /// Takes the first sample now (so a bad target fails before the load starts).
    pub fn start(spec: &WatchSpec) -> Result<Monitor, MonitorError> {
        let mut sampler = sampler_for(spec)?;
        let fingerprint = root_pid(&spec.target)
            .map(fingerprint::fingerprint_pid)
            .unwrap_or_default();
        let counters = match (&spec.target, spec.perf.is_empty()) {
            (_, true) => None,
            (WatchTarget::Cgroup(_), false) => None,
            (_, false) => Some(perf::Counters::open(&spec.perf, &sampler.pids())),
        };
        let perf_events = spec.perf.clone();
        let cgroup_target = matches!(spec.target, WatchTarget::Cgroup(_));
        let first = sampler.sample()?;
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (wake, wait) = mpsc::channel::<()>();
        let (label, target) = (spec.label.clone(), spec.target.to_string());
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("archbench-watch-{label}"))
            .spawn(move || {
                let mut peak = first.memory_bytes;
                let mut processes = first.processes;
                let mut samples = 1u64;
                let last = loop {
                    // Sleeps until the next tick, or returns at once when stopped.
                    let stopping = flag.load(Ordering::Relaxed)
                        || !matches!(
                            wait.recv_timeout(SAMPLE_EVERY),
                            Err(mpsc::RecvTimeoutError::Timeout)
                        );
                    let s = sampler.sample()?;
                    samples += 1;
                    peak = peak.max(s.memory_bytes);
                    processes = processes.max(s.processes);
                    if stopping {
                        break s;
                    }
                };
                let sampled_s = started.elapsed().as_secs_f64();
                let cpu_user_s = (last.cpu_user_s - first.cpu_user_s).max(0.0);
                let cpu_system_s = (last.cpu_system_s - first.cpu_system_s).max(0.0);
                let cpu_s = cpu_user_s + cpu_system_s;
                let cores = if sampled_s > 0.0 {
                    cpu_s / sampled_s
                } else {
                    0.0
                };
                let machine = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
                Ok(ServerUsage {
                    label,
                    target,
                    sampled_s,
                    samples,
                    cpu_user_s,
                    cpu_system_s,
                    cpu_s,
                    cores,
                    machine_percent: cores * 100.0 / machine,
                    peak_memory_bytes: peak,
                    context_switches: last.context_switches.saturating_sub(first.context_switches),
                    processes,
                    requests_per_cpu_s: 0.0,
                    fingerprint,
                    counters: match counters {
                        Some(c) => c.finish(),
                        None if cgroup_target => perf_events
                            .iter()
                            .map(|e| perf::CounterValue {
                                event: e.name.clone(),
                                value: None,
                                status: "not supported for cgroup targets yet".into(),
                            })
                            .collect(),
                        None => Vec::new(),
                    },
                    sampler_cpu_s: {
                        let (u, s) = crate::engine::thread_cpu();
                        u + s
                    },
                    busiest_thread_demand: last.busiest_thread_demand_s.map(|cpu| {
                        if sampled_s > 0.0 {
                            cpu / sampled_s
                        } else {
                            0.0
                        }
                    }),
                })
            })
            .map_err(|source| MonitorError::Read {
                path: "monitor thread".into(),
                source,
            })?;
        Ok(Monitor { stop, wake, thread })
    }

    /// Takes a last sample and returns what was used since [`Monitor::start`].
    pub fn finish(self) -> Result<ServerUsage, MonitorError> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake.send(());
        self.thread.join().unwrap_or_else(|_| {
            Err(MonitorError::Read {
                path: "monitor thread".into(),
                source: std::io::Error::other("monitor thread panicked"),
            })
        })
    }
}

/// Share of a core at which a thread or process counts as saturated.
const SATURATED: f64 = 0.9;

/// Which side limited a run, from the client's and the watched servers' CPU: the check a
/// careful engineer makes by hand before believing a benchmark.
pub fn limiter(client: &ClientUsage, servers: &[ServerUsage]) -> Limiter {
    let client_full = client.busiest_worker_percent >= SATURATED * 100.0;
    let full: Vec<&ServerUsage> = servers.iter().filter(|s| s.saturated()).collect();
    let server_reason = |s: &ServerUsage| match s.busiest_thread_demand {
        Some(c) if c >= SATURATED => format!(
            "server {}: one of its threads ran or waited to run {:.0}% of the time",
            s.label,
            c * 100.0
        ),
        _ => format!(
            "server {}: {:.0}% of the machine's CPU",
            s.label, s.machine_percent
        ),
    };
    let client_reason = format!(
        "client: a worker thread ran or waited to run {:.0}% of the time; the figures describe archbench, not the server (add -t threads or a second machine)",
        client.busiest_worker_percent
    );
    let (side, reason) = match (client_full, full.first(), servers.is_empty()) {
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
    };
    Limiter { side, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(busy: f64) -> ClientUsage {
        ClientUsage {
            busiest_worker_percent: busy,
            ..ClientUsage::default()
        }
    }

    fn server(thread_cores: f64, machine_percent: f64) -> ServerUsage {
        ServerUsage {
            label: "web".into(),
            target: "pid:1".into(),
            sampled_s: 10.0,
            samples: 40,
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            cpu_s: 0.0,
            cores: machine_percent / 50.0,
            machine_percent,
            peak_memory_bytes: 0,
            context_switches: 0,
            processes: 2,
            requests_per_cpu_s: 0.0,
            sampler_cpu_s: 0.0,
            busiest_thread_demand: Some(thread_cores),
            fingerprint: Default::default(),
            counters: Vec::new(),
        }
    }

    #[test]
    fn names_the_saturated_side() {
        let busy_nginx_worker = server(0.97, 48.0);
        let idle_server = server(0.3, 15.0);
        assert_eq!(
            limiter(&client(60.0), std::slice::from_ref(&busy_nginx_worker)).side,
            LimiterSide::Server
        );
        assert_eq!(
            limiter(&client(98.0), std::slice::from_ref(&idle_server)).side,
            LimiterSide::Client
        );
        assert_eq!(
            limiter(&client(98.0), &[busy_nginx_worker]).side,
            LimiterSide::Both
        );
        assert_eq!(
            limiter(&client(40.0), &[idle_server]).side,
            LimiterSide::Neither
        );
        assert_eq!(limiter(&client(40.0), &[]).side, LimiterSide::Unknown);
        assert_eq!(limiter(&client(95.0), &[]).side, LimiterSide::Client);
        // Many threads each below a core, but the machine full: saturated as a whole.
        assert_eq!(
            limiter(&client(50.0), &[server(0.5, 95.0)]).side,
            LimiterSide::Server
        );
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
