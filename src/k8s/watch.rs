//! Watching a variant's nginx pods during a load: a [`WatchSource`] whose sampler reads every
//! pod's own cgroup through one long-running exec each (a loop printing the counters every
//! 250 ms), so a sample costs no API round trip. The variant's pods are listed again every
//! second: a pod that appears (a replacement, a scale-up) is followed from its start, one
//! that goes away keeps what it used, a restarted container is read again. The sampler's
//! figures are the pods' sums; each pod's own are kept beside them.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::AttachParams;
use kube::{Api, ResourceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use super::pods::{pods_of, why_no_pod, CONTAINER};
use super::usage::{parse_cgroup, CgroupReading, READ_CGROUP};
use super::Cluster;
use crate::monitor::{
    MonitorError, OpenedWatch, PodSample, ResourceSample, ResourceSampler, WatchSource,
};
use crate::stats::{Figure, Unmeasured};

/// How often the variant's pods are listed again while watched.
const LIST_EVERY: Duration = Duration::from_secs(1);
/// How long opening waits for the first reading of every running pod.
const FIRST_READINGS: Duration = Duration::from_secs(30);
/// Failed attempts in a row before a pod's stream (or the listing) is given up.
const ATTEMPTS: u32 = 20;
/// The pause before a stream is opened again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The pods of one variant, watched through the API server.
#[derive(Clone)]
pub struct PodWatch {
    pub label: String,
    /// The variant's name ("arm", "arm-large").
    pub variant: String,
    pub cluster: Cluster,
    /// The runtime the exec streams run on (the monitor's thread is not async).
    pub runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for PodWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PodWatch({}, {})", self.label, self.variant)
    }
}

/// What the watch's tasks share with the sampler. The tasks hold it weakly: once the sampler
/// is dropped they end, and their execs with them.
#[derive(Default)]
struct Shared {
    /// Every pod seen, in the order seen.
    pods: Vec<PodState>,
    events: Vec<String>,
    /// Why the listing ended for good (the sampler then fails).
    ended: Option<String>,
}

impl Shared {
    fn pod(&mut self, name: &str) -> Option<&mut PodState> {
        self.pods.iter_mut().find(|p| p.name == name)
    }
}

/// One pod of the variant as the watch knows it.
struct PodState {
    name: String,
    node: Option<String>,
    /// The latest reading of its cgroup, and CPU carried over from earlier cgroups.
    latest: Option<CgroupReading>,
    carried: CgroupTotals,
    /// How many readings were taken.
    reads: u64,
    phase: Phase,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Its stream runs, or is being opened (again).
    Followed,
    /// The pod went away: its last reading stands.
    Gone,
    /// Its cgroup could not be read (any more): why.
    Lost(String),
}

#[derive(Default, Clone, Copy)]
struct CgroupTotals {
    usage_usec: u64,
    user_usec: u64,
    system_usec: u64,
}

impl PodState {
    fn new(pod: &Pod) -> PodState {
        PodState {
            name: pod.name_any(),
            node: node_of(pod),
            latest: None,
            carried: CgroupTotals::default(),
            reads: 0,
            phase: Phase::Followed,
        }
    }

    /// Takes a reading. Counters that went backwards belong to a new cgroup (a container
    /// restarted into a cgroup of its own starts again at zero; one that keeps the pod's
    /// cgroup counts on), so the old ones are carried over.
    fn read(&mut self, r: CgroupReading) {
        if let Some(last) = self.latest.filter(|l| r.usage_usec < l.usage_usec) {
            self.carried.usage_usec += last.usage_usec;
            self.carried.user_usec += last.user_usec.unwrap_or(0);
            self.carried.system_usec += last.system_usec.unwrap_or(0);
        }
        self.latest = Some(r);
        self.reads += 1;
    }

    /// Its cumulative counters for a sample.
    fn sample(&self) -> PodSample {
        let live = self.phase == Phase::Followed && self.latest.is_some();
        let (user, system) = match self.latest {
            Some(CgroupReading {
                user_usec: Some(u),
                system_usec: Some(s),
                ..
            }) => (self.carried.user_usec + u, self.carried.system_usec + s),
            // Without the split, count it all as user time.
            latest => (
                self.carried.usage_usec + latest.map_or(0, |l| l.usage_usec),
                0,
            ),
        };
        PodSample {
            name: self.name.clone(),
            node: self.node.clone(),
            cpu_user_s: user as f64 / 1e6,
            cpu_system_s: system as f64 / 1e6,
            memory_bytes: match (live, self.latest) {
                (true, Some(l)) => l.memory_bytes,
                _ => 0,
            },
            live,
            reads: self.reads,
            not_measured: match &self.phase {
                Phase::Lost(why) => Some(why.clone()),
                Phase::Followed | Phase::Gone => None,
            },
        }
    }
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// What became of a followed pod when its stream ended.
enum PodNow {
    /// Deleted, being deleted, or ended (Succeeded, Failed): how, for the event.
    Gone(&'static str),
    /// Not running yet.
    Pending,
    /// Running (its container may have restarted), on this node.
    Running(Option<String>),
}

impl PodNow {
    fn of(pod: Option<&Pod>) -> PodNow {
        let Some(pod) = pod.filter(|p| p.metadata.deletion_timestamp.is_none()) else {
            return PodNow::Gone("was deleted");
        };
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Running") => PodNow::Running(node_of(pod)),
            Some("Pending") | None => PodNow::Pending,
            Some(_) => PodNow::Gone("ended"),
        }
    }
}

/// What the tasks of one watch work with.
#[derive(Clone)]
struct Watching {
    w: PodWatch,
    shared: Weak<Mutex<Shared>>,
    /// Told at each first reading and each pod given up, for the wait in `open`.
    changed: Arc<Notify>,
    opened: Instant,
}

impl Watching {
    /// Runs `f` on the shared state; None once the sampler is gone.
    fn with<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> Option<T> {
        let shared = self.shared.upgrade()?;
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut s))
    }

    fn since_open(&self) -> f64 {
        self.opened.elapsed().as_secs_f64()
    }

    /// Adds the pods not seen before and starts following each; false once the sampler is
    /// gone.
    fn add_new(&self, pods: &[Pod], announce: bool) -> bool {
        let added = self.with(|s| {
            let mut added = Vec::new();
            for pod in pods {
                if s.pod(&pod.name_any()).is_none() {
                    s.pods.push(PodState::new(pod));
                    added.push(pod.name_any());
                }
            }
            if announce {
                for name in &added {
                    let note = format!(
                        "pod {name} of {} appeared {:.1} s in; followed from its start",
                        self.w.variant,
                        self.since_open()
                    );
                    s.events.push(note);
                }
            }
            added
        });
        let Some(added) = added else { return false };
        for name in added {
            tokio::spawn(self.clone().follow(name));
        }
        true
    }

    /// Lists the variant's pods again every [`LIST_EVERY`], following the new ones, until
    /// the sampler is gone or the listing keeps failing.
    async fn list_until_dropped(self) {
        let mut failures = 0u32;
        loop {
            tokio::time::sleep(LIST_EVERY).await;
            match pods_of(&self.w.cluster, Some(&self.w.variant)).await {
                Ok(pods) => {
                    failures = 0;
                    if !self.add_new(&pods, true) {
                        return;
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures >= ATTEMPTS {
                        let why = format!("listing the pods of {}: {e}", self.w.variant);
                        self.with(|s| s.ended = Some(why));
                        return;
                    }
                }
            }
        }
    }

    /// Follows one pod: its stream, opened again after a container restart or a lost
    /// connection, until the pod goes away, its cgroup cannot be read, or the sampler is
    /// gone.
    async fn follow(self, name: String) {
        let cluster = &self.w.cluster;
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
        let mut attempts = 0u32;
        loop {
            let outcome = match self.stream_once(&api, &name).await {
                // RBAC does not change between tries: said at once, in its own words.
                Err(Unread::Refused(why)) => return self.give_up(&name, &why),
                Err(Unread::Failed(why)) => Err(why),
                Ok(read) => Ok(read),
            };
            if !self.still_followed(&name) {
                return;
            }
            let failed = match api.get_opt(&name).await {
                Err(e) => Some(format!("get pod {name}: {e}")),
                Ok(pod) => match PodNow::of(pod.as_ref()) {
                    PodNow::Gone(how) => return self.went_away(&name, how),
                    // Not started yet: nothing of it is missed while it waits.
                    PodNow::Pending => None,
                    PodNow::Running(node) => {
                        self.with(|s| s.pod(&name).map(|p| p.node = node.or(p.node.take())));
                        match outcome {
                            Err(why) => Some(why),
                            Ok(read) => {
                                if read {
                                    self.note_stream_ended(&name);
                                }
                                None
                            }
                        }
                    }
                },
            };
            attempts = if failed.is_some() { attempts + 1 } else { 0 };
            if let Some(why) = failed.filter(|_| attempts >= ATTEMPTS) {
                return self.give_up(&name, &why);
            }
            tokio::time::sleep(RETRY_AFTER).await;
        }
    }

    fn still_followed(&self, name: &str) -> bool {
        self.with(|s| s.pod(name).is_some_and(|p| p.phase == Phase::Followed))
            .unwrap_or(false)
    }

    fn went_away(&self, name: &str, how: &str) {
        let at = self.since_open();
        self.with(|s| {
            if let Some(p) = s.pod(name) {
                p.phase = Phase::Gone;
            }
            // Its CPU after the last reading (at most one reading interval) is not counted.
            s.events.push(format!(
                "pod {name} {how} {at:.1} s in; what it used until its last reading is kept"
            ));
        });
        self.changed.notify_waiters();
    }

    fn give_up(&self, name: &str, why: &str) {
        let at = self.since_open();
        self.with(|s| {
            if let Some(p) = s.pod(name) {
                p.phase = Phase::Lost(format!(
                    "its cgroup could not be read from {at:.1} s after the watch opened: {why}"
                ));
            }
        });
        self.changed.notify_waiters();
    }

    fn note_stream_ended(&self, name: &str) {
        let note = format!(
            "the cgroup stream of {name} ended {:.1} s in; following it again",
            self.since_open()
        );
        self.with(|s| s.events.push(note));
    }

    /// One exec of the reading loop in the pod, until it ends: whether it read anything, or
    /// why it could not.
    async fn stream_once(&self, api: &Api<Pod>, name: &str) -> Result<bool, Unread> {
        let script = format!("while :; do {READ_CGROUP}; echo ---; sleep 0.25; done");
        let params = AttachParams::default()
            .container(CONTAINER)
            .stdout(true)
            .stderr(false);
        let mut process = match api
            .exec(name, ["sh".to_string(), "-c".into(), script], &params)
            .await
        {
            Ok(p) => p,
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 403) => {
                let refused = super::client::api_error(e, "create", "pods/exec");
                return Err(Unread::Refused(refused.to_string()));
            }
            Err(e) => return Err(Unread::Failed(format!("exec in {name}: {e}"))),
        };
        let stdout = process
            .stdout()
            .ok_or_else(|| Unread::Failed("the exec has no stdout".to_string()))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let (mut block, mut read) = (String::new(), false);
        loop {
            if !self.still_followed(name) {
                process.abort();
                return Ok(read);
            }
            match lines.next_line().await {
                Ok(Some(line)) if line == "---" => {
                    let Some(reading) = parse_cgroup(&block) else {
                        process.abort();
                        return Err(Unread::Failed(format!(
                            "no cgroup counters readable in {name} (neither cpu.stat nor cpuacct.usage)"
                        )));
                    };
                    self.with(|s| s.pod(name).map(|p| p.read(reading)));
                    if !read {
                        self.changed.notify_waiters();
                    }
                    read = true;
                    block.clear();
                }
                Ok(Some(line)) => {
                    block.push_str(&line);
                    block.push('\n');
                }
                Ok(None) | Err(_) => return Ok(read),
            }
        }
    }
}

/// Why a pod's cgroup was not read: a failure worth another try, or a refusal (RBAC) that
/// another try would only repeat.
enum Unread {
    Failed(String),
    Refused(String),
}

impl WatchSource for PodWatch {
    fn label(&self) -> &str {
        &self.label
    }

    fn target(&self) -> String {
        format!(
            "pod:{}/nginx-{}-deployment",
            self.cluster.namespace, self.variant
        )
    }

    fn open(&self) -> Result<OpenedWatch, MonitorError> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let watching = Watching {
            w: self.clone(),
            shared: Arc::downgrade(&shared),
            changed: Arc::new(Notify::new()),
            opened: Instant::now(),
        };
        let failed = |why: String| MonitorError::Read {
            path: self.target(),
            source: std::io::Error::other(why),
        };
        // The listing's and the execs' API calls, bounded as the wait for readings is.
        self.runtime
            .block_on(async {
                tokio::time::timeout(FIRST_READINGS * 2, first_readings(watching)).await
            })
            .unwrap_or_else(|_| Err("no answer from the API server in time".into()))
            .map_err(failed)?;
        // The pod's own nginx -V (and the outline-atomics warning on its node), so every
        // report says which build each variant ran; a pod that refuses the exec keeps none.
        let fingerprint = self
            .runtime
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(30),
                    super::inspect::fingerprint(&self.cluster, &self.variant),
                )
                .await
            })
            .ok()
            .and_then(Result::ok)
            .map(|f| f.nginx)
            .unwrap_or_default();
        Ok(OpenedWatch {
            sampler: Box::new(PodSampler {
                shared,
                started: Instant::now(),
            }),
            fingerprint,
            counters: None,
            counters_unavailable: Vec::new(),
        })
    }
}

/// Lists the variant's pods, follows each, starts the listing that finds new ones, and
/// returns once every running pod has its first reading or was given up (at most
/// [`FIRST_READINGS`]); fails when no pod was read at all.
async fn first_readings(watching: Watching) -> Result<(), String> {
    let w = &watching.w;
    let pods = pods_of(&w.cluster, Some(&w.variant))
        .await
        .map_err(|e| e.to_string())?;
    if pods.is_empty() {
        return Err(why_no_pod(&w.cluster, &w.variant).await.to_string());
    }
    let running: Vec<String> = pods
        .iter()
        .filter(|p| is_running(p))
        .map(|p| p.name_any())
        .collect();
    if running.is_empty() {
        return Err(format!(
            "none of the {} pods of {} is running yet; wait for `archbench k8s status` to show them ready",
            pods.len(),
            w.variant
        ));
    }
    watching.add_new(&pods, false);
    tokio::spawn(watching.clone().list_until_dropped());
    let waited = tokio::time::timeout(FIRST_READINGS, async {
        loop {
            let changed = watching.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if watching.with(|s| all_first_read(s, &running)) != Some(false) {
                return;
            }
            changed.await;
        }
    })
    .await;
    let give_up = format!(
        "no cgroup reading within {} s of the watch opening",
        FIRST_READINGS.as_secs()
    );
    watching
        .with(|s| {
            for p in s.pods.iter_mut().filter(|p| running.contains(&p.name)) {
                if waited.is_err() && p.latest.is_none() && p.phase == Phase::Followed {
                    p.phase = Phase::Lost(give_up.clone());
                }
            }
            if s.pods.iter().any(|p| p.latest.is_some()) {
                return Ok(());
            }
            Err(s
                .pods
                .iter()
                .find_map(|p| match &p.phase {
                    Phase::Lost(why) => Some(why.clone()),
                    _ => None,
                })
                .unwrap_or(give_up.clone()))
        })
        .unwrap_or(Err(give_up.clone()))
}

/// Every pod running when the watch opened has been read once, or given up.
fn all_first_read(s: &Shared, running: &[String]) -> bool {
    s.pods
        .iter()
        .filter(|p| running.contains(&p.name))
        .all(|p| p.latest.is_some() || p.phase != Phase::Followed)
}

struct PodSampler {
    shared: Arc<Mutex<Shared>>,
    started: Instant,
}

impl ResourceSampler for PodSampler {
    fn sample(&mut self) -> Result<ResourceSample, MonitorError> {
        let s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &s.ended {
            return Err(MonitorError::Read {
                path: "the pods' cgroups".into(),
                source: std::io::Error::other(format!(
                    "{why} ({:.1} s in)",
                    self.started.elapsed().as_secs_f64()
                )),
            });
        }
        let pods: Vec<PodSample> = s.pods.iter().map(PodState::sample).collect();
        // The limit of what the live pods may use together, when each has one.
        let limits: Option<Vec<f64>> = s
            .pods
            .iter()
            .filter(|p| p.phase == Phase::Followed)
            .filter_map(|p| p.latest)
            .map(|l| l.cpu_limit_cores)
            .collect();
        Ok(ResourceSample {
            cpu_user_s: pods.iter().map(|p| p.cpu_user_s).sum(),
            cpu_system_s: pods.iter().map(|p| p.cpu_system_s).sum(),
            memory_bytes: pods.iter().map(|p| p.memory_bytes).sum(),
            context_switches: None,
            processes: None,
            busiest_thread_demand_s: None,
            cpu_limit_cores: limits.filter(|l| !l.is_empty()).map(|l| l.iter().sum()),
            pods,
        })
    }

    fn events(&mut self) -> Vec<String> {
        self.shared
            .lock()
            .map(|mut s| std::mem::take(&mut s.events))
            .unwrap_or_default()
    }

    fn unmeasured(&self) -> Vec<Unmeasured> {
        let why = "not read in pods: their cgroup files hold no context switches, and cgroup.procs would count the reading loop's own shell with nginx";
        [Figure::ContextSwitches, Figure::Processes]
            .into_iter()
            .map(|figure| Unmeasured {
                figure,
                reason: why.to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(usage_usec: u64, memory_bytes: u64) -> CgroupReading {
        CgroupReading {
            usage_usec,
            user_usec: Some(usage_usec * 3 / 4),
            system_usec: Some(usage_usec / 4),
            memory_bytes,
            cpu_limit_cores: Some(1.0),
        }
    }

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_pods_counters_carry_over_a_new_cgroup_and_not_over_a_kept_one() {
        let mut p = PodState::new(&pod(serde_json::json!({
            "metadata": {"name": "nginx-arm-1"}, "spec": {"nodeName": "aks-arm-0", "containers": []}
        })));
        assert_eq!(p.node.as_deref(), Some("aks-arm-0"));
        assert!(!p.sample().live, "not read yet");
        p.read(reading(2_000_000, 10));
        // A container restarted in the pod's own cgroup (the counters go on): nothing carried.
        p.read(reading(3_000_000, 20));
        let s = p.sample();
        assert_eq!((s.cpu_user_s, s.cpu_system_s), (2.25, 0.75));
        assert!(s.live);
        // One restarted into a cgroup of its own starts again at zero: the old is carried.
        p.read(reading(400_000, 30));
        let s = p.sample();
        assert_eq!((s.cpu_user_s, s.cpu_system_s), (2.55, 0.85));
        assert_eq!(s.memory_bytes, 30);
        // Gone: what it used stands, its memory is no longer held.
        p.phase = Phase::Gone;
        let s = p.sample();
        assert_eq!((s.cpu_user_s, s.memory_bytes, s.live), (2.55, 0, false));
        assert_eq!(s.not_measured, None);
        p.phase = Phase::Lost("exec refused".into());
        assert_eq!(p.sample().not_measured.as_deref(), Some("exec refused"));
    }

    #[test]
    fn what_became_of_a_pod_whose_stream_ended() {
        let with = |phase: &str, deleting: bool| {
            let mut meta = serde_json::json!({"name": "p"});
            if deleting {
                meta["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
            }
            pod(serde_json::json!({
                "metadata": meta, "spec": {"nodeName": "n", "containers": []},
                "status": {"phase": phase}
            }))
        };
        assert!(matches!(PodNow::of(None), PodNow::Gone("was deleted")));
        assert!(matches!(
            PodNow::of(Some(&with("Running", true))),
            PodNow::Gone("was deleted")
        ));
        assert!(matches!(
            PodNow::of(Some(&with("Failed", false))),
            PodNow::Gone("ended")
        ));
        assert!(matches!(
            PodNow::of(Some(&with("Pending", false))),
            PodNow::Pending
        ));
        assert!(
            matches!(PodNow::of(Some(&with("Running", false))), PodNow::Running(Some(n)) if n == "n")
        );
    }
}
