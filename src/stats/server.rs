//! What the result document says about the servers that were watched: their CPU and memory
//! during the run, what they are, and their counters. The monitors fill these in; they live
//! here, with the document, so reading a stored result needs no monitor.

use serde::{Deserialize, Serialize};

/// A watched server now: what its last sample interval showed.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerNow {
    /// The target it serves (the compare name).
    pub label: String,
    /// What is watched (`pid:123`, a cgroup).
    pub target: String,
    /// Cores used over the last sample interval.
    pub cores: f64,
    /// Its CPU limit in cores, where a cgroup sets one.
    pub limit_cores: Option<f64>,
    pub memory_bytes: u64,
    /// Seconds into the run of the sample.
    pub at_s: f64,
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
    /// Samples taken (one every 250 ms).
    pub samples: u64,
    /// User CPU seconds over the sampled time.
    pub cpu_user_s: f64,
    /// System CPU seconds over the sampled time.
    pub cpu_system_s: f64,
    /// user + system.
    pub cpu_s: f64,
    /// Average cores busy: cpu_s / sampled_s.
    pub cores: f64,
    /// Share of this machine's cores, in percent.
    pub machine_percent: f64,
    /// Highest resident memory seen in one sample (bytes).
    pub peak_memory_bytes: u64,
    /// Voluntary + involuntary context switches over the sampled time (processes only).
    pub context_switches: u64,
    /// Most processes seen in one sample.
    pub processes: u32,
    /// Answered requests per server CPU-second (filled in by the run that watched it); null
    /// when the CPU measured is below what the sampling resolves (`MEASURABLE_CPU_S`): a
    /// ratio over nearly nothing is no figure.
    #[serde(default)]
    pub requests_per_cpu_s: Option<f64>,
    /// CPU the sampling itself cost archbench (its thread's user + system seconds).
    pub sampler_cpu_s: f64,
    /// What the server is (executable; nginx version, compiler, configure arguments).
    #[serde(default)]
    pub fingerprint: ServerFingerprint,
    /// `--perf` counters over the run.
    #[serde(default)]
    pub counters: Vec<CounterValue>,
    /// Share of one core the busiest single thread ran or waited to run (processes only;
    /// from schedstat, so a thread starved by other load still counts as wanting the core):
    /// an event-loop server like an nginx worker is at its limit when this nears 1.
    pub busiest_thread_demand: Option<f64>,
    /// Set when sampling ended before the run did; the figures above cover `sampled_s` only.
    #[serde(default)]
    pub sampling_stopped: Option<SamplingStopped>,
    /// What happened to the server while it was watched ("pod nginx-arm-… restarted 3.2 s
    /// in"); its CPU figures include the time before and after.
    #[serde(default)]
    pub events: Vec<String>,
}

impl ServerUsage {
    /// A usage with nothing measured, for a target whose sampling never produced a figure.
    pub fn empty(label: String, target: String) -> ServerUsage {
        ServerUsage {
            label,
            target,
            sampled_s: 0.0,
            samples: 0,
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            cpu_s: 0.0,
            cores: 0.0,
            machine_percent: 0.0,
            peak_memory_bytes: 0,
            context_switches: 0,
            processes: 0,
            requests_per_cpu_s: None,
            sampler_cpu_s: 0.0,
            fingerprint: ServerFingerprint::default(),
            counters: Vec::new(),
            busiest_thread_demand: None,
            sampling_stopped: None,
            events: Vec::new(),
        }
    }
}

/// Why a server's sampling ended early, and when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SamplingStopped {
    /// Seconds after sampling began.
    pub after_s: f64,
    /// True when the watched processes exited (the server went away); false when a reading
    /// failed while the server may still have been running (a cgroup removed, a pod restarted).
    pub server_gone: bool,
    /// What happened, in one sentence.
    pub reason: String,
}

/// What a watched server is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerFingerprint {
    /// Path of the watched process's executable.
    pub executable: Option<String>,
    /// First line of `-V` (e.g. "nginx version: nginx/1.22.1"), for nginx only.
    pub version: Option<String>,
    /// "built by gcc 12.2.0 (Debian 12.2.0-14)".
    pub built_by: Option<String>,
    /// The configure arguments nginx was built with.
    pub configure_arguments: Option<String>,
    /// Things a reader must know before trusting a comparison.
    pub warnings: Vec<String>,
}

impl ServerFingerprint {
    /// "nginx version: nginx/1.22.1, built by gcc 12.2.0 …", when the version is known.
    pub fn describe(&self) -> Option<String> {
        let version = self.version.as_ref()?;
        Some(match &self.built_by {
            Some(b) => format!("{version}, {b}"),
            None => version.clone(),
        })
    }
}

/// One perf counter's outcome over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterValue {
    /// The event's name as asked for ("instructions", "r6e").
    pub event: String,
    /// The count, when the kernel could count it.
    pub value: Option<u64>,
    /// "ok", or why there is no value ("not supported here", "not permitted here …").
    pub status: String,
}

/// The least server CPU a per-CPU-second ratio is taken over: two ticks of /proc's 10 ms
/// clock (below it the ratio's error is 50% or more; a server that did nothing — a pod the
/// load never reached — gave "7,672,100 req per CPU-s").
pub const MEASURABLE_CPU_S: f64 = 0.02;

/// Answered requests per server CPU-second, or None when the CPU is too little to divide by.
pub fn requests_per_cpu_s(requests: u64, cpu_s: f64) -> Option<f64> {
    (cpu_s >= MEASURABLE_CPU_S).then(|| requests as f64 / cpu_s)
}

#[cfg(test)]
mod measurable_tests {
    use super::*;

    #[test]
    fn a_ratio_over_too_little_cpu_is_no_figure() {
        // The pods that did nothing: 0.1 ms of CPU against 767 requests answered elsewhere.
        assert_eq!(requests_per_cpu_s(767, 0.000_1), None);
        assert_eq!(requests_per_cpu_s(767, 0.0), None);
        assert_eq!(requests_per_cpu_s(1_000, 0.5), Some(2_000.0));
        assert_eq!(
            requests_per_cpu_s(10, MEASURABLE_CPU_S),
            Some(10.0 / MEASURABLE_CPU_S)
        );
    }
}
