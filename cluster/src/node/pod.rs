//! One pod's runtime state on the node: its containers as the node knows them, its cgroup,
//! network and volumes, and what exec, attach, logs and metrics read of it. The pod's loop is
//! `pod_lifecycle`; each container's, `container`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tokio::sync::watch;

use super::cgroup::{PodCgroup, Usage};
use super::exec::ExecTarget;
use super::resources::PodLimits;
use super::status::{waiting, CState, ConditionTimes, ContainerKind, PodFacts};
use super::stdio::RunIo;
use super::{clock, unmodelled, volumes, Agent};

/// How a pod is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// SIGTERM, then SIGKILL after the grace period.
    Graceful(Duration),
    /// SIGKILL now.
    Now,
}

pub struct PodRuntime {
    pub uid: String,
    pub ns: String,
    pub name: String,
    pub host_ip: String,
    pub ip: Ipv4Addr,
    pub hostname: String,
    pub dir: PathBuf,
    pub cgroup: Option<PodCgroup>,
    /// Why the pod has no cgroup although the node has them (its containers do not start).
    pub cgroup_error: Option<String>,
    /// What of the pod's spec this node does not model (its containers do not start).
    pub refused: Option<String>,
    pub start_time: String,
    pub containers: Mutex<Vec<CState>>,
    pub stop: watch::Sender<Option<Stop>>,
    /// The metadata of the newest version of the pod's object the watch delivered.
    latest: watch::Sender<ObjectMeta>,
    /// The pod's network, once made.
    network: Mutex<Option<PathBuf>>,
    /// The pod's volumes, written once for all its containers and their restarts (rewriting
    /// them under a running container would leave its bind mounts on removed directories).
    pub volumes: tokio::sync::Mutex<Option<HashMap<String, PathBuf>>>,
    /// (when, cgroup readings), newest last, for the resource metrics.
    pub samples: Mutex<VecDeque<(Instant, Usage)>>,
    /// Condition type → (status, lastTransitionTime).
    conditions: Mutex<ConditionTimes>,
    pub restart_policy: String,
    /// `terminationGracePeriodSeconds`: how long a container stopped by the node (a failed
    /// liveness probe) has between SIGTERM and SIGKILL.
    pub grace: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A seconds field of the pod (`terminationGracePeriodSeconds`, say), 30 when unset.
fn seconds_or_30(s: Option<i64>) -> Duration {
    Duration::from_secs(s.and_then(|s| u64::try_from(s).ok()).unwrap_or(30))
}

/// What the node knows of a new pod's containers, init ones first: waiting to be created, a
/// regular one behind the init containers, or all refused with the reason.
fn container_records(pod: &Pod, refused: Option<&str>) -> Vec<CState> {
    let first_state = match refused {
        Some(why) => waiting("CreateContainerConfigError", Some(why)),
        None => waiting("ContainerCreating", None),
    };
    let Some(pod_spec) = &pod.spec else {
        return Vec::new();
    };
    let has_init = !ContainerKind::Init.specs(pod_spec).is_empty();
    let mut containers = Vec::new();
    for kind in [ContainerKind::Init, ContainerKind::Regular] {
        for spec in kind.specs(pod_spec) {
            let state = if kind == ContainerKind::Regular && has_init && refused.is_none() {
                waiting("PodInitializing", None)
            } else {
                first_state.clone()
            };
            containers.push(CState::new(spec, kind, state));
        }
    }
    containers
}

/// The pid files of a pod directory's containers (their PID 1s, for `kill-pod`).
pub fn container_pids(pod_dir: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(pod_dir.join("pids")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect()
}

impl PodRuntime {
    pub fn new(agent: &Agent, pod: &Pod) -> io::Result<Arc<PodRuntime>> {
        let meta = &pod.metadata;
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let (ns, name, uid) = (text(&meta.namespace), text(&meta.name), text(&meta.uid));
        let ip = lock(&agent.ips).take().ok_or_else(|| {
            io::Error::other(format!("node {} has no pod address left", agent.spec.name))
        })?;
        let dir = agent
            .pods_dir()
            .join(format!("{ns}_{name}_{}", uid.get(..8).unwrap_or(&uid)));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            lock(&agent.ips).give_back(ip);
            return Err(e);
        }
        // A cgroup that cannot hold the pod's limits keeps its containers from starting,
        // with the reason on the pod (CreateContainerError), as a runtime's failure would.
        let (cgroup, cgroup_error) = match (&agent.cgroups, PodLimits::of(pod)) {
            (None, _) => (None, None),
            (Some(_), Err(e)) => (None, Some(e)),
            (Some(root), Ok(limits)) => match root.pod(&format!("pod{uid}"), limits) {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(format!("the pod's cgroup: {e}"))),
            },
        };
        let spec = pod.spec.as_ref();
        let hostname = spec
            .and_then(|s| s.hostname.as_deref())
            .unwrap_or(&name)
            .to_string();
        let refused = unmodelled::refusal(pod);
        let containers = container_records(pod, refused.as_deref());
        Ok(Arc::new(PodRuntime {
            uid,
            ns,
            name,
            host_ip: agent.spec.ip.to_string(),
            ip,
            hostname,
            dir,
            cgroup,
            cgroup_error,
            refused,
            start_time: clock::now(),
            containers: Mutex::new(containers),
            stop: watch::channel(None).0,
            latest: watch::channel(meta.clone()).0,
            network: Mutex::new(None),
            volumes: tokio::sync::Mutex::new(None),
            samples: Mutex::new(VecDeque::new()),
            conditions: Mutex::new(ConditionTimes::new()),
            restart_policy: spec
                .and_then(|s| s.restart_policy.as_deref())
                .unwrap_or("Always")
                .to_string(),
            grace: seconds_or_30(spec.and_then(|s| s.termination_grace_period_seconds)),
        }))
    }

    /// A newer version of the object (its metadata: all that is read of it once the pod
    /// runs): deletion asks the pod to stop within its grace period.
    pub fn observe(&self, meta: ObjectMeta) {
        if meta.deletion_timestamp.is_some() {
            let grace = seconds_or_30(meta.deletion_grace_period_seconds);
            self.request_stop(if grace.is_zero() {
                Stop::Now
            } else {
                Stop::Graceful(grace)
            });
        }
        self.latest.send_replace(meta);
    }

    pub fn request_stop(&self, s: Stop) {
        self.stop.send_if_modified(|cur| {
            let stronger = matches!((*cur, s), (None, _) | (Some(Stop::Graceful(_)), Stop::Now));
            if stronger {
                *cur = Some(s);
            }
            stronger
        });
    }

    pub fn stopping(&self) -> bool {
        self.stop.borrow().is_some()
    }

    pub fn set(&self, idx: usize, f: impl FnOnce(&mut CState)) {
        if let Some(c) = lock(&self.containers).get_mut(idx) {
            f(c);
        }
    }

    pub fn container_states(&self) -> Vec<CState> {
        lock(&self.containers).clone()
    }

    /// The pod status to report now.
    pub fn status(&self) -> Value {
        let containers = self.container_states();
        let facts = PodFacts {
            containers: &containers,
            host_ip: &self.host_ip,
            ip: self.ip,
            start_time: &self.start_time,
        };
        super::status::pod_status(&facts, &mut lock(&self.conditions))
    }

    pub fn container_names(&self) -> Vec<String> {
        lock(&self.containers)
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Sends a signal to every container's main process (its PID namespace's PID 1).
    pub fn kill_all(&self, sig: i32) {
        for c in lock(&self.containers).iter() {
            signal(c.init, c.middle, sig);
        }
    }

    pub fn has_processes(&self) -> bool {
        if let Some(cg) = &self.cgroup {
            return !cg.pids().is_empty();
        }
        lock(&self.containers).iter().any(|c| {
            c.middle
                .is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
        })
    }

    /// OOM kills in the pod's cgroup so far.
    pub fn oom_kills(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, PodCgroup::oom_kills)
    }

    /// A process of the pod killed by the kernel's OOM killer (an nginx worker, say) ends its
    /// containers, as the kubelet's `memory.oom.group` does on cgroup v2; a v1 host has no
    /// such setting, so the agent does it.
    /// Only a run that was under way when the kill came is ended: the kill that ended a run
    /// is counted before its restart reads its own start count.
    pub fn end_on_oom(&self) {
        let kills = self.oom_kills();
        for c in lock(&self.containers).iter() {
            if c.init.is_some() && kills > c.ooms_at_start {
                signal(c.init, c.middle, libc::SIGKILL);
            }
        }
    }

    pub fn view_dir(&self) -> PathBuf {
        self.dir.join("cgroup")
    }

    /// Rewrites the pod's cgroup view (v1 hosts) without recording a sample.
    pub fn refresh_view(&self) {
        if let Some(cg) = self.cgroup.as_ref().filter(|cg| cg.v2_dir().is_none()) {
            let _ = cg.write_view(&self.view_dir());
        }
    }

    /// Rewrites the pod's cgroup view (v1 hosts) and records a usage sample (none when its
    /// cgroup cannot be read: a gap, never a zero).
    pub fn refresh_usage(&self) {
        let Some(cg) = &self.cgroup else { return };
        let usage = if cg.v2_dir().is_some() {
            cg.usage()
        } else {
            cg.write_view(&self.view_dir()).or_else(|_| cg.usage())
        };
        let Ok(usage) = usage else { return };
        let mut s = lock(&self.samples);
        s.push_back((Instant::now(), usage));
        while s.len() > 40 {
            s.pop_front();
        }
    }

    /// Rewrites the pod's /etc/hosts when Services came or went (in place: it is
    /// bind-mounted, so the file must stay the same inode).
    pub fn refresh_hosts(&self, agent: &Agent) {
        let path = self.dir.join("hosts");
        let Ok(old) = std::fs::read_to_string(&path) else {
            return;
        };
        let new = volumes::hosts(agent, &self.ip.to_string(), &self.hostname, &self.ns);
        if new != old {
            let _ = std::fs::write(&path, new);
        }
    }

    /// The log file of a container's current or previous run; the bool says whether that run
    /// is still going. Err is what the API answers (400).
    pub fn log_path(&self, container: &str, previous: bool) -> Result<(PathBuf, bool), String> {
        let cs = lock(&self.containers);
        let Some(c) = cs.iter().find(|c| c.name == container) else {
            return Err(format!(
                "container {container} is not valid for pod {}",
                self.name
            ));
        };
        let dir = self.dir.join("logs").join(&c.name);
        if previous {
            return match c.run {
                Some(r) if r > 0 => Ok((dir.join(format!("{}.log", r - 1)), false)),
                _ => Err(format!(
                    "previous terminated container \"{}\" in pod \"{}\" not found",
                    c.name, self.name
                )),
            };
        }
        match c.run {
            Some(r) => Ok((dir.join(format!("{r}.log")), c.running())),
            None => {
                let reason = c
                    .state
                    .pointer("/waiting/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("ContainerCreating");
                let why = match reason {
                    "ErrImagePull" | "ImagePullBackOff" => {
                        "trying and failing to pull image".to_string()
                    }
                    r => r.to_string(),
                };
                Err(format!(
                    "container \"{}\" in pod \"{}\" is waiting to start: {why}",
                    c.name, self.name
                ))
            }
        }
    }

    /// Whether a container's run `run` is still the current, running one.
    pub fn run_is_live(&self, container: &str, run: u32) -> bool {
        lock(&self.containers)
            .iter()
            .find(|c| c.name == container)
            .is_some_and(|c| c.run == Some(run) && c.running())
    }

    pub fn exec_target(&self, container: &str) -> Result<ExecTarget, String> {
        let cs = lock(&self.containers);
        let Some(c) = cs.iter().find(|c| c.name == container) else {
            return Err(format!(
                "container {container} is not valid for pod {}",
                self.name
            ));
        };
        if !c.running() || c.init.is_none() {
            return Err(format!("container not found (\"{}\")", c.name));
        }
        let mut env = c.env.clone();
        env.retain(|(k, _)| k != "HOSTNAME");
        env.push(("HOSTNAME".into(), self.hostname.clone()));
        Ok(ExecTarget {
            init_pid: c.init,
            env,
            workdir: c.workdir.clone(),
            user_ns: c.emulated,
            // what is exec'd in a container is in its cgroup, as the kubelet puts it
            cgroup_procs: self
                .cgroup
                .as_ref()
                .map(|cg| cg.container(&c.name).procs_files())
                .unwrap_or_default(),
        })
    }

    /// The running container's streams, for attach.
    pub fn attach_target(&self, container: &str) -> Result<Arc<RunIo>, String> {
        let cs = lock(&self.containers);
        let Some(c) = cs.iter().find(|c| c.name == container) else {
            return Err(format!(
                "container {container} is not valid for pod {}",
                self.name
            ));
        };
        match &c.io {
            Some(io) if c.running() => Ok(io.clone()),
            _ => Err(format!("container {container} is not running")),
        }
    }

    pub fn set_network(&self, netns: PathBuf) {
        *lock(&self.network) = Some(netns);
    }

    /// Whether the pod's object is being deleted.
    pub fn deleting(&self) -> bool {
        self.latest.borrow().deletion_timestamp.is_some()
    }

    /// The file of the pod's network namespace, once it has one.
    pub fn netns(&self) -> Option<PathBuf> {
        lock(&self.network).clone()
    }

    pub fn cleanup(&self) {
        if let Some(cg) = &self.cgroup {
            for _ in 0..50 {
                if cg.pids().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            cg.remove();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    pub fn write_pid(&self, container: &str, pid: Option<u32>) {
        let dir = self.dir.join("pids");
        let path = dir.join(container);
        match pid {
            Some(p) => {
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(path, p.to_string());
            }
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Signals a container: its PID 1 (which takes its PID namespace down on SIGKILL), or the
/// middle process's group before PID 1 is known.
pub fn signal(init: Option<u32>, middle: Option<u32>, sig: i32) {
    match (init, middle) {
        (Some(p), _) => crate::process::signal(p, sig),
        (None, Some(m)) => {
            if let Ok(m) = i32::try_from(m) {
                // SAFETY: kill(2) on our own child's process group.
                unsafe {
                    libc::kill(-m, sig);
                }
            }
        }
        _ => {}
    }
    if sig == libc::SIGKILL {
        if let Some(m) = middle {
            crate::process::signal(m, libc::SIGKILL);
        }
    }
}

/// Sleeps, or returns true early when the pod is asked to stop.
pub async fn sleep_or_stop(d: Duration, stop: &mut watch::Receiver<Option<Stop>>) -> bool {
    if stop.borrow().is_some() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => stop.borrow().is_some(),
        _ = stop.changed() => true,
    }
}
