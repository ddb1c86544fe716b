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
    /// Voluntary + involuntary context switches over the sampled time, of every thread seen
    /// at a sample (a thread born and gone between two samples is missed); null where they
    /// are not read (pods: `unmeasured` says why).
    pub context_switches: Option<u64>,
    /// Most processes seen in one sample; null where they are not counted (pods:
    /// `unmeasured` says why).
    pub processes: Option<u32>,
    /// Answered requests per server CPU-second (filled in by the run that watched it); null
    /// when the CPU measured is below what the sampling resolves (`MEASURABLE_CPU_S`), when
    /// sampling stopped early or a pod's CPU was not measured whole (`unmeasured` says which):
    /// a ratio over nearly nothing, or over part of what served the answers, is no figure.
    #[serde(default)]
    pub requests_per_cpu_s: Option<f64>,
    /// Why a figure above is null, where a reader needs to know.
    #[serde(default)]
    pub unmeasured: Vec<Unmeasured>,
    /// A target made of pods (a Kubernetes variant): each pod's figures, every pod seen while
    /// watched (replaced ones too); the CPU and memory above are their sums. Empty for
    /// processes and cgroups.
    #[serde(default)]
    pub pods: Vec<WatchedPod>,
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
    /// The CPU its cgroup (a pod's, a container's) may use, in cores, as the last sample
    /// read it (`cpu.max`, `cpu.cfs_quota_us`); null without a limit, or for a process.
    #[serde(default)]
    pub cpu_limit_cores: Option<f64>,
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
            context_switches: None,
            processes: None,
            requests_per_cpu_s: None,
            unmeasured: Vec::new(),
            pods: Vec::new(),
            sampler_cpu_s: 0.0,
            fingerprint: ServerFingerprint::default(),
            counters: Vec::new(),
            busiest_thread_demand: None,
            cpu_limit_cores: None,
            sampling_stopped: None,
            events: Vec::new(),
        }
    }
}

impl ServerUsage {
    /// Why this usage misses part of what it watched, if it does: nothing sampled, or a pod
    /// whose CPU and memory were not measured whole.
    pub fn gap(&self) -> Option<String> {
        if self.sampled_s <= 0.0 {
            return Some(format!(
                "{}: nothing was sampled (no interval between two samples)",
                self.label
            ));
        }
        self.pods.iter().find_map(|p| {
            let why = p.not_measured.as_ref()?;
            Some(format!("pod {} of {}: {why}", p.name, self.label))
        })
    }

    /// The CPU it used over the whole run, or why the figure it has does not cover the run
    /// (sampling stopped early, a part not measured).
    pub fn run_cpu_s(&self) -> Result<f64, String> {
        if let Some(st) = &self.sampling_stopped {
            return Err(format!(
                "sampling of {} stopped {:.1} s in ({}): the run's answers over part of its CPU would overstate it",
                self.label, st.after_s, st.reason
            ));
        }
        if let Some(gap) = self.gap() {
            return Err(format!(
                "{gap}; the run's answers over part of the CPU that served them would overstate it"
            ));
        }
        Ok(self.cpu_s)
    }

    /// Fills in `requests_per_cpu_s` from the run's answered requests, or says why it has
    /// none (the one place a run, local or in-cluster, rates its servers).
    pub fn rate_answers(&mut self, answered: u64) {
        let rate = self.run_cpu_s().and_then(|cpu| {
            requests_per_cpu_s(answered, cpu).ok_or_else(|| {
                format!(
                    "{:.3} CPU s measured, under the {MEASURABLE_CPU_S} s the sampling resolves: a ratio over nearly nothing is no figure",
                    cpu
                )
            })
        });
        self.unmeasured
            .retain(|u| u.figure != Figure::RequestsPerCpuS);
        match rate {
            Ok(v) => self.requests_per_cpu_s = Some(v),
            Err(reason) => {
                self.requests_per_cpu_s = None;
                self.unmeasured.push(Unmeasured {
                    figure: Figure::RequestsPerCpuS,
                    reason,
                });
            }
        }
    }

    /// Why `figure` is null, when the document says.
    pub fn why_unmeasured(&self, figure: Figure) -> Option<&str> {
        self.unmeasured
            .iter()
            .find(|u| u.figure == figure)
            .map(|u| u.reason.as_str())
    }
}

/// The watched servers' figure summed; None when none was watched or one of them misses part
/// of its target: a sum over a measured and an unmeasured part is unmeasured.
pub fn servers_sum(servers: &[ServerUsage], f: impl Fn(&ServerUsage) -> f64) -> Option<f64> {
    if servers.is_empty() {
        return None;
    }
    servers
        .iter()
        .map(|s| s.gap().is_none().then(|| f(s)))
        .sum()
}

/// The watched servers' CPU over the whole run; None when none was watched or one's figure
/// does not cover the run (see [`ServerUsage::run_cpu_s`]).
pub fn servers_run_cpu_s(servers: &[ServerUsage]) -> Option<f64> {
    if servers.is_empty() {
        return None;
    }
    servers.iter().map(|s| s.run_cpu_s().ok()).sum()
}

/// A figure of [`ServerUsage`] that may be null, by its JSON name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    ContextSwitches,
    Processes,
    RequestsPerCpuS,
}

/// Why one figure is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unmeasured {
    pub figure: Figure,
    /// One sentence: what kept it from being measured.
    pub reason: String,
}

/// One pod of a watched target, over the time it was watched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedPod {
    /// The pod's name.
    pub name: String,
    /// The node it ran on (`spec.nodeName`), once scheduled.
    pub node: Option<String>,
    /// User CPU seconds while watched (from the run's first sample; a pod that appeared
    /// during the run, from its start).
    pub cpu_user_s: f64,
    /// System CPU seconds while watched.
    pub cpu_system_s: f64,
    /// user + system.
    pub cpu_s: f64,
    /// Highest memory charged to its cgroup in one sample (bytes).
    pub peak_memory_bytes: u64,
    /// Seconds after the sampling began of the first and last sample that read it; null when
    /// none did.
    pub seen_from_s: Option<f64>,
    pub seen_until_s: Option<f64>,
    /// Set when its figures miss part of the time it ran while watched (its cgroup could not
    /// be read, its stream was lost): why. The target's sums then miss it too.
    pub not_measured: Option<String>,
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
    /// First line of `-V` (e.g. "nginx version: nginx/1.22.1") for nginx; "caddy 2.6.2 …"
    /// (its `caddy version`) for a Caddy pod of `k8s load`.
    pub version: Option<String>,
    /// "built by gcc 12.2.0 (Debian 12.2.0-14)".
    pub built_by: Option<String>,
    /// The configure arguments nginx was built with.
    pub configure_arguments: Option<String>,
    /// Things a reader must know before trusting a comparison.
    pub warnings: Vec<String>,
    /// What its executable was built as, read from the executable itself.
    #[serde(default)]
    pub binary: Option<BinaryBuild>,
    /// Why `binary` is absent: the executable could not be read.
    #[serde(default)]
    pub binary_unread: Option<String>,
    /// The emulator that runs the server's code when it is not the machine's own (qemu-user,
    /// seen as the pod's PID 1 executable): its figures are the emulator's, not the CPU's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
}

/// What an executable was built as, read from its bytes (ELF headers and code).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryBuild {
    /// The ELF machine in `uname -m`'s spelling (x86_64, aarch64).
    pub machine: String,
    /// The GNU build id, in hex, when the linker wrote one.
    pub build_id: Option<String>,
    /// aarch64 only: the atomic instructions in its code.
    pub atomics: Option<AtomicInstructions>,
}

/// Counts of aarch64 atomic instructions in an executable's code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AtomicInstructions {
    /// ARMv8.1 LSE atomics: CAS*, LDADD and its kin, SWP*.
    pub lse: u64,
    /// LL/SC exclusives: LDXR, LDAXR, STXR, STLXR.
    pub exclusive: u64,
}

impl AtomicInstructions {
    /// How its atomics run on a CPU with LSE.
    pub fn describe(&self) -> String {
        match (self.lse > 0, self.exclusive > 0) {
            (true, true) => format!(
                "LSE ({}) and LL/SC ({}) paths: outline atomics, LSE used where the CPU has it",
                self.lse, self.exclusive
            ),
            (true, false) => format!("LSE only ({}): built for ARMv8.1 or later", self.lse),
            (false, true) => format!(
                "LL/SC only ({} exclusives, no LSE instruction): slow under contention on CPUs with LSE",
                self.exclusive
            ),
            (false, false) => "no atomic instructions".into(),
        }
    }
}

impl BinaryBuild {
    /// "aarch64 executable, build id 1a2b…; atomics: …".
    pub fn describe(&self) -> String {
        let mut text = format!("{} executable", self.machine);
        if let Some(id) = &self.build_id {
            text += &format!(", build id {id}");
        }
        if let Some(a) = &self.atomics {
            text += &format!("; atomics: {}", a.describe());
        }
        text
    }
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

    /// What its executable is, or why that could not be read.
    pub fn binary_line(&self) -> Option<String> {
        match (&self.binary, &self.binary_unread) {
            (Some(b), _) => Some(b.describe()),
            (None, Some(why)) => Some(format!("executable not read: {why}")),
            (None, None) => None,
        }
    }

    /// What a report prints of it, one line each: the version and compiler, then what its
    /// executable is.
    pub fn lines(&self) -> Vec<String> {
        self.describe()
            .into_iter()
            .chain(self.binary_line())
            .chain(self.emulator.as_ref().map(|e| format!("emulated by {e}")))
            .collect()
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

    fn pod(name: &str, cpu_s: f64, not_measured: Option<&str>) -> WatchedPod {
        WatchedPod {
            name: name.into(),
            node: Some("aks-arm-0".into()),
            cpu_user_s: cpu_s,
            cpu_system_s: 0.0,
            cpu_s,
            peak_memory_bytes: 1 << 20,
            seen_from_s: Some(0.0),
            seen_until_s: Some(2.0),
            not_measured: not_measured.map(str::to_string),
        }
    }

    fn usage(pods: Vec<WatchedPod>) -> ServerUsage {
        ServerUsage {
            sampled_s: 2.0,
            samples: 9,
            cpu_s: pods.iter().map(|p| p.cpu_s).sum(),
            cores: 0.5,
            pods,
            ..ServerUsage::empty("arm".into(), "pod:ns/nginx-arm-deployment".into())
        }
    }

    #[test]
    fn answers_are_rated_over_every_pods_cpu_or_not_at_all() {
        let mut both = usage(vec![pod("a", 0.6, None), pod("b", 0.4, None)]);
        both.rate_answers(5_000);
        assert_eq!(both.requests_per_cpu_s, Some(5_000.0));
        assert_eq!(both.why_unmeasured(Figure::RequestsPerCpuS), None);
        // One pod's CPU missing: no ratio over the other's alone, and the reason names it.
        let mut half = usage(vec![
            pod("a", 0.6, None),
            pod("b", 0.0, Some("no cgroup reading")),
        ]);
        half.rate_answers(5_000);
        assert_eq!(half.requests_per_cpu_s, None);
        let why = half.why_unmeasured(Figure::RequestsPerCpuS).unwrap();
        assert!(why.contains("pod b of arm: no cgroup reading"), "{why}");
        // Sampling stopped early: the run's answers over part of its CPU would overstate.
        let mut stopped = usage(vec![]);
        stopped.cpu_s = 1.0;
        stopped.sampling_stopped = Some(SamplingStopped {
            after_s: 1.2,
            server_gone: false,
            reason: "cannot read".into(),
        });
        stopped.rate_answers(5_000);
        assert_eq!(stopped.requests_per_cpu_s, None);
        let why = stopped.why_unmeasured(Figure::RequestsPerCpuS).unwrap();
        assert!(why.contains("stopped 1.2 s in"), "{why}");
        // Too little CPU: said with the figure, and rating again replaces the reason.
        let mut idle = usage(vec![pod("a", 0.001, None)]);
        idle.rate_answers(767);
        let why = idle.why_unmeasured(Figure::RequestsPerCpuS).unwrap();
        assert!(why.contains("0.001 CPU s measured"), "{why}");
        idle.pods[0].cpu_s = 0.5;
        idle.cpu_s = 0.5;
        idle.rate_answers(767);
        assert_eq!(idle.requests_per_cpu_s, Some(1_534.0));
        assert!(idle.unmeasured.is_empty(), "{:?}", idle.unmeasured);
    }

    #[test]
    fn a_sum_over_a_measured_and_an_unmeasured_part_is_unmeasured() {
        let whole = usage(vec![pod("a", 0.6, None)]);
        let part = usage(vec![pod("b", 0.2, Some("stream lost"))]);
        let cores = |s: &ServerUsage| s.cores;
        assert_eq!(servers_sum(std::slice::from_ref(&whole), cores), Some(0.5));
        assert_eq!(servers_sum(&[whole.clone(), part.clone()], cores), None);
        assert_eq!(servers_sum(&[], cores), None);
        assert_eq!(servers_run_cpu_s(std::slice::from_ref(&whole)), Some(0.6));
        assert_eq!(servers_run_cpu_s(&[whole, part]), None);
        // Nothing sampled is no zero to add either.
        let nothing = ServerUsage::empty("x".into(), "pid:1".into());
        assert!(nothing.gap().unwrap().contains("nothing was sampled"));
    }

    #[test]
    fn unmeasured_figures_are_null_in_json_with_their_reason() {
        let mut u = usage(vec![pod("a", 0.6, None)]);
        u.unmeasured.push(Unmeasured {
            figure: Figure::ContextSwitches,
            reason: "not read in pods".into(),
        });
        let v = serde_json::to_value(&u).unwrap();
        assert!(v["context_switches"].is_null());
        assert!(v["processes"].is_null());
        assert_eq!(v["unmeasured"][0]["figure"], "context_switches");
        assert_eq!(v["pods"][0]["node"], "aks-arm-0");
        let back: ServerUsage = serde_json::from_value(v).unwrap();
        assert_eq!(back, u);
        // A document of an older build, with counts and without the new fields, still reads.
        let mut old = serde_json::to_value(&u).unwrap();
        old["context_switches"] = 12.into();
        old["processes"] = 3.into();
        let obj = old.as_object_mut().unwrap();
        obj.remove("unmeasured");
        obj.remove("pods");
        let back: ServerUsage = serde_json::from_value(old).unwrap();
        assert_eq!((back.context_switches, back.processes), (Some(12), Some(3)));
        assert!(back.pods.is_empty());
    }

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
