//! One pod's life on the node: its runtime state, the pod loop (network, readiness, cgroup
//! view, status to the API, graceful deletion) and one task per container (image, volumes,
//! start, wait, restart with back-off).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::cgroup::{PodCgroup, Usage};
use super::logfile::{self, LogWriter};
use super::network::PodNetwork;
use super::sandbox::{self, Isolation, Mount};
use super::stdio::{self, RunIo};
use super::volumes::{self, Image};
use super::{clock, events, Agent};

/// The first restart's back-off base, as the kubelet's (10 s, doubling, at most 5 min).
const RESTART_BACKOFF: Duration = Duration::from_secs(10);

/// How a pod is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// SIGTERM, then SIGKILL after the grace period.
    Graceful(Duration),
    /// SIGKILL now.
    Now,
}

/// What the node knows of one container.
#[derive(Debug, Clone)]
pub struct CState {
    pub name: String,
    pub image: String,
    /// `{"waiting": …}`, `{"running": …}` or `{"terminated": …}`.
    pub state: Value,
    pub last_state: Value,
    pub restart_count: u32,
    pub ready: bool,
    /// Started at least once.
    pub started: bool,
    /// Terminated and will not restart.
    pub done: bool,
    pub container_id: Option<String>,
    /// Index of the current log file (runs started so far − 1).
    pub run: Option<u32>,
    pub middle: Option<u32>,
    pub init: Option<u32>,
    pub env: Vec<(String, String)>,
    pub workdir: String,
    pub probe_port: Option<u16>,
    /// The current run's streams, for attach.
    pub io: Option<Arc<RunIo>>,
}

impl CState {
    fn running(&self) -> bool {
        self.state.get("running").is_some()
    }
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
    pub start_time: String,
    pub containers: Mutex<Vec<CState>>,
    pub stop: watch::Sender<Option<Stop>>,
    /// The newest version of the pod's object the watch delivered.
    latest: watch::Sender<Value>,
    /// The pod's network, once made.
    network: Mutex<Option<PathBuf>>,
    /// The pod's volumes, written once for all its containers and their restarts (rewriting
    /// them under a running container would leave its bind mounts on removed directories).
    volumes: tokio::sync::Mutex<Option<HashMap<String, PathBuf>>>,
    /// (when, cgroup readings), newest last, for the resource metrics.
    pub samples: Mutex<VecDeque<(Instant, Usage)>>,
    /// Condition type → (status, lastTransitionTime).
    pub conditions: Mutex<HashMap<String, (String, String)>>,
    restart_policy: String,
}

/// What exec needs to run a command inside a container.
pub struct ExecTarget {
    pub init_pid: Option<u32>,
    pub env: Vec<(String, String)>,
    pub workdir: String,
    pub cgroup_procs: Vec<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Random enough for container ids and event names (std's per-process random SipHash keys
/// plus a counter), without a rand dependency.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish()
}

fn waiting(reason: &str, message: Option<&str>) -> Value {
    let mut w = json!({"reason": reason});
    if let Some(m) = message {
        w["message"] = json!(m);
    }
    json!({"waiting": w})
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The port readiness is checked on: the readiness probe's, else the first container port.
fn probe_port(c: &Value) -> Option<u16> {
    let named = |name: &str| {
        c.get("ports")
            .and_then(Value::as_array)?
            .iter()
            .find(|p| p["name"] == name)?
            .get("containerPort")?
            .as_u64()
    };
    let from_probe = |p: &Value| match p {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok().or_else(|| named(s)),
        _ => None,
    };
    let probe = c.get("readinessProbe");
    let port = probe
        .and_then(|p| p.pointer("/tcpSocket/port").or(p.pointer("/httpGet/port")))
        .and_then(from_probe)
        .or_else(|| c.pointer("/ports/0/containerPort").and_then(Value::as_u64));
    port.and_then(|p| u16::try_from(p).ok())
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
    pub fn new(agent: &Agent, pod: &Value) -> io::Result<Arc<PodRuntime>> {
        let (ns, name, uid) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
            str_at(pod, "/metadata/uid"),
        );
        let ip = lock(&agent.ips).take().ok_or_else(|| {
            io::Error::other(format!("node {} has no pod address left", agent.spec.name))
        })?;
        let dir = agent
            .pods_dir()
            .join(format!("{ns}_{name}_{}", &uid[..uid.len().min(8)]));
        let made = std::fs::create_dir_all(&dir).and_then(|()| match &agent.cgroups {
            Some(root) => root.pod(&format!("pod{uid}")).map(Some),
            None => Ok(None),
        });
        let cgroup = match made {
            Ok(c) => c,
            Err(e) => {
                lock(&agent.ips).give_back(ip);
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let hostname = pod
            .pointer("/spec/hostname")
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_string();
        let containers = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|c| CState {
                name: str_at(c, "/name").to_string(),
                image: str_at(c, "/image").to_string(),
                state: waiting("ContainerCreating", None),
                last_state: json!({}),
                restart_count: 0,
                ready: false,
                started: false,
                done: false,
                container_id: None,
                run: None,
                middle: None,
                init: None,
                env: Vec::new(),
                workdir: c["workingDir"].as_str().unwrap_or("/").to_string(),
                probe_port: probe_port(c),
                io: None,
            })
            .collect();
        Ok(Arc::new(PodRuntime {
            uid: uid.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            host_ip: agent.spec.ip.to_string(),
            ip,
            hostname,
            dir,
            cgroup,
            start_time: clock::now(),
            containers: Mutex::new(containers),
            stop: watch::channel(None).0,
            latest: watch::channel(pod.clone()).0,
            network: Mutex::new(None),
            volumes: tokio::sync::Mutex::new(None),
            samples: Mutex::new(VecDeque::new()),
            conditions: Mutex::new(HashMap::new()),
            restart_policy: pod
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("Always")
                .to_string(),
        }))
    }

    /// A newer version of the object: deletion asks the pod to stop within its grace period.
    pub fn observe(&self, pod: Value) {
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            let grace = pod
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(30);
            self.request_stop(if grace == 0 {
                Stop::Now
            } else {
                Stop::Graceful(Duration::from_secs(grace))
            });
        }
        self.latest.send_replace(pod);
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

    fn stopping(&self) -> bool {
        self.stop.borrow().is_some()
    }

    fn set(&self, idx: usize, f: impl FnOnce(&mut CState)) {
        if let Some(c) = lock(&self.containers).get_mut(idx) {
            f(c);
        }
    }

    pub fn container_states(&self) -> Vec<CState> {
        lock(&self.containers).clone()
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

    pub fn view_dir(&self) -> PathBuf {
        self.dir.join("cgroup")
    }

    /// Rewrites the pod's cgroup view (v1 hosts) without recording a sample.
    pub fn refresh_view(&self) {
        if let Some(cg) = self.cgroup.as_ref().filter(|cg| cg.v2_dir().is_none()) {
            let _ = cg.write_view(&self.view_dir());
        }
    }

    /// Rewrites the pod's cgroup view (v1 hosts) and records a usage sample.
    pub fn refresh_usage(&self) {
        let Some(cg) = &self.cgroup else { return };
        let usage = if cg.v2_dir().is_some() {
            cg.usage()
        } else {
            match cg.write_view(&self.view_dir()) {
                Ok(u) => u,
                Err(_) => cg.usage(),
            }
        };
        let mut s = lock(&self.samples);
        s.push_back((Instant::now(), usage));
        while s.len() > 40 {
            s.pop_front();
        }
    }

    /// Rewrites the pod's /etc/hosts when Services came or went (in place: it is
    /// bind-mounted, so the file must stay the same inode).
    fn refresh_hosts(&self, agent: &Agent) {
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
            cgroup_procs: self
                .cgroup
                .as_ref()
                .map(PodCgroup::procs_files)
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

    fn write_pid(&self, container: &str, pid: Option<u32>) {
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
fn signal(init: Option<u32>, middle: Option<u32>, sig: i32) {
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

/// A pod that was deleted before this node ran it: its object goes at once.
pub async fn finalize_unstarted(agent: Arc<Agent>, pod: Value) {
    let (ns, name, uid) = (
        str_at(&pod, "/metadata/namespace"),
        str_at(&pod, "/metadata/name"),
        str_at(&pod, "/metadata/uid"),
    );
    delete_object(&agent, ns, name, uid).await;
}

async fn delete_object(agent: &Agent, ns: &str, name: &str, uid: &str) {
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => eprintln!("node agent: delete pod {ns}/{name}: {e}"),
    }
}

/// The pod loop: makes the network, starts the containers, runs readiness probes, refreshes
/// the cgroup view, writes status; on deletion stops the containers and removes the object.
pub async fn run(agent: Arc<Agent>, rt: Arc<PodRuntime>, pod: Value) {
    let mut stop = rt.stop.subscribe();
    let network = loop {
        match PodNetwork::create(&rt.uid, rt.ip, agent.spec.ip).await {
            Ok(n) => break Some(n),
            Err(e) => {
                let msg = format!("Failed to create pod sandbox: {e}");
                events::record(&agent, &pod, "Warning", "FailedCreatePodSandBox", &msg).await;
                write_status(&agent, &rt, &mut None).await;
                if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                    break None;
                }
            }
        }
    };
    if let Some(n) = &network {
        *lock(&rt.network) = Some(n.netns.path.clone());
    }
    let n = if network.is_some() {
        pod.pointer("/spec/containers")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    } else {
        0
    };
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(tokio::spawn(container(
            agent.clone(),
            rt.clone(),
            pod.clone(),
            i,
        )));
    }
    let mut last_sample = Instant::now() - Duration::from_secs(5);
    let mut written: Option<Value> = None;
    loop {
        if rt.stopping() || agent.stopping() {
            break;
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            rt.refresh_usage();
            rt.refresh_hosts(&agent);
            last_sample = Instant::now();
        } else {
            // A kernel's cgroup counts continuously; a v1 host's view is rewritten every pass
            // (200 ms), so a watcher reading every 250 ms sees a 1 s run's CPU, not one tick.
            rt.refresh_view();
        }
        probe(&rt).await;
        write_status(&agent, &rt, &mut written).await;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = stop.changed() => {}
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    if agent.stopping() {
        return;
    }
    write_status(&agent, &rt, &mut written).await;
    if let Some(n) = network {
        n.remove().await;
    }
    let deleting = rt
        .latest
        .borrow()
        .pointer("/metadata/deletionTimestamp")
        .is_some();
    if deleting || *rt.stop.borrow() == Some(Stop::Now) {
        delete_object(&agent, &rt.ns, &rt.name, &rt.uid).await;
    }
    agent.forget(&rt.uid);
    lock(&agent.ips).give_back(rt.ip);
    let rt2 = rt.clone();
    let _ = tokio::task::spawn_blocking(move || rt2.cleanup()).await;
}

/// Readiness: TCP connect to podIP:port for running containers with a port; running is ready
/// otherwise.
async fn probe(rt: &PodRuntime) {
    let targets: Vec<(usize, Option<u16>, bool)> = lock(&rt.containers)
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.probe_port, c.running()))
        .collect();
    for (i, port, running) in targets {
        let ready = match (running, port) {
            (false, _) => false,
            (true, None) => true,
            (true, Some(p)) => matches!(
                tokio::time::timeout(
                    Duration::from_millis(500),
                    tokio::net::TcpStream::connect((rt.ip, p))
                )
                .await,
                Ok(Ok(_))
            ),
        };
        rt.set(i, |c| c.ready = ready && c.running());
    }
}

/// Writes the pod's status when it differs from what was last written.
async fn write_status(agent: &Agent, rt: &PodRuntime, written: &mut Option<Value>) {
    let status = super::status::pod_status(rt);
    if written.as_ref() == Some(&status) {
        return;
    }
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), &rt.ns);
    let patch = json!({"metadata": {"uid": rt.uid}, "status": status});
    match api
        .patch_status(&rt.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => *written = Some(status),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
            // the object is gone (or another pod of that name): stop
            rt.request_stop(Stop::Now);
        }
        Err(e) => eprintln!("node agent: status of {}/{}: {e}", rt.ns, rt.name),
    }
}

/// Sleeps, or returns true early when the pod is asked to stop.
async fn sleep_or_stop(d: Duration, stop: &mut watch::Receiver<Option<Stop>>) -> bool {
    if stop.borrow().is_some() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => stop.borrow().is_some(),
        _ = stop.changed() => true,
    }
}

/// The restart back-off before restart number `n` (0-based): none for the first, then
/// base · 2^(n−1), capped at 30 · base (Kubernetes: 10 s … 5 min).
fn backoff(base: Duration, n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let factor = 1u32 << (n - 1).min(10);
    (base * factor).min(base * 30)
}

/// What a container start needs, prepared; Err is (waiting reason, message, event reason).
struct Prepared {
    argv: Vec<String>,
    /// `stdin: true`: the container gets a pipe the node keeps for attach.
    stdin: bool,
    stdin_once: bool,
    env: Vec<(String, String)>,
    iso: Isolation,
}

type PrepareError = (&'static str, String, &'static str);

/// The program and arguments: the pod's command, else the image's entrypoint, with the
/// pod's args (as a runtime does); the image's program name mapped to the local binary.
fn argv(image: &Image, command: Vec<String>, args: Vec<String>) -> Vec<String> {
    let (entrypoint, program, bin) = match image {
        Image::Nginx(bin) => (
            vec!["nginx".to_string(), "-g".into(), "daemon off;".into()],
            "nginx",
            bin,
        ),
        Image::Archbench(bin) => (vec!["archbench".to_string()], "archbench", bin),
    };
    let mut argv = if command.is_empty() {
        [entrypoint, args].concat()
    } else {
        [command, args].concat()
    };
    if Path::new(&argv[0])
        .file_name()
        .is_some_and(|f| f == program)
    {
        argv[0] = bin.display().to_string();
    }
    argv
}

/// Where the image's nginx is (Debian's, the test machines'): another build is mounted over it.
const STOCK_NGINX: &str = "/usr/sbin/nginx";

/// What every container of the pod has mounted besides its volumes: /etc/hosts, the host
/// name, its cgroup at /sys/fs/cgroup, an arm64 node's /proc/cpuinfo.
fn pod_mounts(agent: &Agent, rt: &PodRuntime) -> io::Result<Vec<Mount>> {
    let mut m = Vec::new();
    let hosts = rt.dir.join("hosts");
    std::fs::write(
        &hosts,
        volumes::hosts(agent, &rt.ip.to_string(), &rt.hostname, &rt.ns),
    )?;
    m.push(Mount::Bind {
        src: hosts,
        dst: "/etc/hosts".into(),
        read_only: false,
    });
    let hostname = rt.dir.join("hostname");
    std::fs::write(&hostname, format!("{}\n", rt.hostname))?;
    if Path::new("/etc/hostname").exists() {
        m.push(Mount::Bind {
            src: hostname,
            dst: "/etc/hostname".into(),
            read_only: true,
        });
    }
    if let Some(cg) = &rt.cgroup {
        let src = match cg.v2_dir() {
            Some(d) => d.to_path_buf(),
            None => {
                std::fs::create_dir_all(rt.view_dir())?;
                let _ = cg.write_view(&rt.view_dir());
                rt.view_dir()
            }
        };
        m.push(Mount::Bind {
            src,
            dst: "/sys/fs/cgroup".into(),
            read_only: false,
        });
    }
    if let Some(text) = volumes::cpuinfo(&agent.spec.arch, agent.spec.cpus) {
        let p = rt.dir.join("cpuinfo");
        std::fs::write(&p, text)?;
        m.push(Mount::Bind {
            src: p,
            dst: "/proc/cpuinfo".into(),
            read_only: true,
        });
    }
    Ok(m)
}

async fn prepare(
    agent: &Agent,
    rt: &PodRuntime,
    pod: &Value,
    spec: &Value,
    image: &Image,
) -> Result<Prepared, PrepareError> {
    let vols = {
        let mut made = rt.volumes.lock().await;
        match made.as_ref() {
            Some(v) => v.clone(),
            None => {
                let v = volumes::materialize(agent, pod, &rt.dir)
                    .await
                    .map_err(|m| ("ContainerCreating", m, "FailedMount"))?;
                *made = Some(v.clone());
                v
            }
        }
    };
    let mounts = volumes::container_mounts(spec, &vols)
        .map_err(|m| ("CreateContainerError", m, "Failed"))?;
    let mut with_status = pod.clone();
    with_status["status"]["podIP"] = json!(rt.ip.to_string());
    with_status["status"]["hostIP"] = json!(rt.host_ip);
    with_status["spec"]["nodeName"] = json!(agent.spec.name);
    let env = volumes::environment(agent, &with_status, spec, &rt.hostname)
        .await
        .map_err(|m| ("CreateContainerConfigError", m, "Failed"))?;
    let strings = |k: &str| -> Vec<String> {
        spec.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(|s| volumes::expand(s, &env))
                    .collect()
            })
            .unwrap_or_default()
    };
    let argv = argv(image, strings("command"), strings("args"));
    let mut m: Vec<Mount> = vec![Mount::Tmpfs { dst: "/run".into() }];
    if matches!(image, Image::Nginx(_)) && Path::new("/var/log/nginx").is_dir() {
        // As the official image: the access and error logs are the container's output.
        m.push(Mount::Tmpfs {
            dst: "/var/log/nginx".into(),
        });
        m.push(Mount::Symlink {
            target: "/dev/stdout".into(),
            link: "/var/log/nginx/access.log".into(),
        });
        m.push(Mount::Symlink {
            target: "/dev/stderr".into(),
            link: "/var/log/nginx/error.log".into(),
        });
    }
    if let Image::Nginx(bin) = image {
        // Another build of the image's nginx: in the container it is the nginx, so `nginx -V`
        // through exec names the build the pod runs.
        let stock = Path::new(STOCK_NGINX);
        if bin != stock && stock.exists() {
            m.push(Mount::Bind {
                src: bin.clone(),
                dst: stock.into(),
                read_only: true,
            });
        }
    }
    m.extend(mounts);
    m.extend(pod_mounts(agent, rt).map_err(|e| ("CreateContainerError", e.to_string(), "Failed"))?);
    let workdir = spec["workingDir"].as_str().unwrap_or("/").to_string();
    Ok(Prepared {
        argv,
        stdin: spec["stdin"].as_bool().unwrap_or(false),
        stdin_once: spec["stdinOnce"].as_bool().unwrap_or(false),
        env,
        iso: Isolation {
            hostname: rt.hostname.clone(),
            mounts: m,
            cgroup_procs: rt
                .cgroup
                .as_ref()
                .map(PodCgroup::procs_files)
                .unwrap_or_default(),
            netns: lock(&rt.network).clone(),
            workdir: PathBuf::from(workdir),
        },
    })
}

/// One container's loop: pull (resolve), prepare, start, wait, restart.
async fn container(agent: Arc<Agent>, rt: Arc<PodRuntime>, pod: Value, idx: usize) {
    let spec = pod["spec"]["containers"][idx].clone();
    let name = str_at(&spec, "/name").to_string();
    let image = str_at(&spec, "/image").to_string();
    let mut stop = rt.stop.subscribe();
    let mut backoff_n = 0u32;
    let mut pull_n = 0u32;
    loop {
        if stop.borrow().is_some() {
            return;
        }
        let img = match volumes::resolve(&agent.state, &image) {
            Ok(i) => i,
            Err(msg) => {
                rt.set(idx, |c| c.state = waiting("ErrImagePull", Some(&msg)));
                let text = format!("Failed to pull image \"{image}\": {msg}");
                events::record(&agent, &pod, "Warning", "Failed", &text).await;
                if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                    return;
                }
                let back = format!("Back-off pulling image \"{image}\"");
                rt.set(idx, |c| c.state = waiting("ImagePullBackOff", Some(&back)));
                events::record(&agent, &pod, "Normal", "BackOff", &back).await;
                pull_n += 1;
                if sleep_or_stop(backoff(Duration::from_secs(1), pull_n), &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let prepared = match prepare(&agent, &rt, &pod, &spec, &img).await {
            Ok(p) => p,
            Err((reason, msg, ev)) => {
                rt.set(idx, |c| {
                    c.state = waiting(
                        reason,
                        (reason != "ContainerCreating").then_some(msg.as_str()),
                    )
                });
                events::record(&agent, &pod, "Warning", ev, &msg).await;
                if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let started_at = clock::now();
        let run = lock(&rt.containers).get(idx).map_or(0, |c| c.restart_count);
        let log_path = rt.dir.join("logs").join(&name).join(format!("{run}.log"));
        let outcome = start(&rt, idx, &prepared, &log_path, run, &started_at).await;
        let (exit_code, message, pumps) = match outcome {
            Ok((mut child, pumps)) => {
                let text = format!("Started container {name}");
                events::record(&agent, &pod, "Normal", "Started", &text).await;
                let code = tokio::select! {
                    st = child.wait() => exit_code(st),
                    _ = stop.changed() => {
                        let how = (*stop.borrow()).unwrap_or(Stop::Now);
                        terminate(&rt, idx, &mut child, how).await
                    }
                };
                (code, None, pumps)
            }
            Err(e) => (128, Some(e.to_string()), Vec::new()),
        };
        rt.write_pid(&name, None);
        for p in pumps {
            let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
        }
        let finished_at = clock::now();
        let reason = match (exit_code, &message) {
            (_, Some(_)) => "StartError",
            (0, None) => "Completed",
            _ => "Error",
        };
        let mut terminated = json!({"exitCode": exit_code, "reason": reason, "startedAt": started_at, "finishedAt": finished_at});
        if let Some(m) = &message {
            terminated["message"] = json!(m);
        }
        rt.set(idx, |c| {
            if let Some(id) = &c.container_id {
                terminated["containerID"] = json!(format!("containerd://{id}"));
            }
            c.state = json!({"terminated": terminated.clone()});
            // attached clients have had the output (the pumps are done): they end here
            if let Some(io) = c.io.take() {
                io.end();
            }
            c.ready = false;
            c.middle = None;
            c.init = None;
        });
        if stop.borrow().is_some() {
            rt.set(idx, |c| c.done = true);
            return;
        }
        let restart = match rt.restart_policy.as_str() {
            "Never" => false,
            "OnFailure" => exit_code != 0,
            _ => true,
        };
        if !restart {
            rt.set(idx, |c| c.done = true);
            return;
        }
        // a container that ran long enough starts its back-off over, as the kubelet's does
        let ran = SystemTime::now()
            .duration_since(clock::parse(&started_at).unwrap_or(SystemTime::now()))
            .unwrap_or_default();
        if ran > RESTART_BACKOFF * 60 {
            backoff_n = 0;
        }
        let delay = backoff(RESTART_BACKOFF, backoff_n);
        backoff_n += 1;
        if !delay.is_zero() {
            let msg = format!(
                "back-off {} restarting failed container={name} pod={}_{}({})",
                fmt_duration(delay),
                rt.name,
                rt.ns,
                rt.uid
            );
            rt.set(idx, |c| {
                c.last_state = json!({"terminated": terminated.clone()});
                c.state = waiting("CrashLoopBackOff", Some(&msg));
            });
            let text = "Back-off restarting failed container";
            events::record(&agent, &pod, "Warning", "BackOff", text).await;
            if sleep_or_stop(delay, &mut stop).await {
                return;
            }
        }
        rt.set(idx, |c| {
            c.last_state = json!({"terminated": terminated.clone()});
            c.restart_count += 1;
        });
    }
}

fn fmt_duration(d: Duration) -> String {
    if d.as_secs() >= 60 {
        format!("{}m{}s", d.as_secs() / 60, d.as_secs() % 60)
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn exit_code(st: io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match st {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
        Err(_) => 128,
    }
}

type Pumps = Vec<tokio::task::JoinHandle<()>>;

/// Spawns the container's process with its log pumps (which also feed attach).
async fn start(
    rt: &PodRuntime,
    idx: usize,
    p: &Prepared,
    log_path: &Path,
    run: u32,
    started_at: &str,
) -> io::Result<(tokio::process::Child, Pumps)> {
    let writer = LogWriter::create(log_path)?;
    let mut cmd = tokio::process::Command::new(&p.argv[0]);
    cmd.args(&p.argv[1..])
        .env_clear()
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdin(if p.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let files = sandbox::prepare(&mut cmd, &p.iso)?;
    let mut child = cmd.spawn()?;
    drop(files);
    let middle = child.id();
    let init = middle.and_then(sandbox::init_pid);
    let io = RunIo::new(child.stdin.take(), p.stdin_once);
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        let tee = io.clone();
        let to = move |b: &[u8]| tee.output(stdio::STDOUT, b);
        pumps.push(tokio::spawn(logfile::pump(
            out,
            "stdout",
            writer.clone(),
            to,
        )));
    }
    if let Some(err) = child.stderr.take() {
        let tee = io.clone();
        let to = move |b: &[u8]| tee.output(stdio::STDERR, b);
        pumps.push(tokio::spawn(logfile::pump(err, "stderr", writer, to)));
    }
    let id = format!("{:016x}{:016x}", random_u64(), random_u64());
    let name = lock(&rt.containers)
        .get(idx)
        .map(|c| c.name.clone())
        .unwrap_or_default();
    rt.write_pid(&name, init);
    rt.set(idx, |c| {
        c.state = json!({"running": {"startedAt": started_at}});
        c.started = true;
        c.ready = false;
        c.container_id = Some(id);
        c.run = Some(run);
        c.middle = middle;
        c.init = init;
        c.env = p.env.clone();
        c.io = Some(io);
    });
    Ok((child, pumps))
}

/// Stops a running container: SIGTERM, then SIGKILL after the grace period (or at once).
async fn terminate(
    rt: &PodRuntime,
    idx: usize,
    child: &mut tokio::process::Child,
    how: Stop,
) -> i32 {
    let (init, middle) = lock(&rt.containers)
        .get(idx)
        .map_or((None, None), |c| (c.init, c.middle));
    if let Stop::Graceful(grace) = how {
        signal(init, middle, libc::SIGTERM);
        if let Ok(st) = tokio::time::timeout(grace, child.wait()).await {
            return exit_code(st);
        }
    }
    signal(init, middle, libc::SIGKILL);
    // SIGKILL ends it; the bound is for a process stuck in the kernel (D state).
    match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(st) => exit_code(st),
        Err(_) => 137,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_back_off_doubles_to_five_minutes() {
        let b = Duration::from_secs(10);
        assert_eq!(backoff(b, 0), Duration::ZERO);
        assert_eq!(backoff(b, 1), b);
        assert_eq!(backoff(b, 2), b * 2);
        assert_eq!(backoff(b, 9), Duration::from_secs(300));
        assert_eq!(fmt_duration(Duration::from_secs(20)), "20s");
        assert_eq!(fmt_duration(Duration::from_secs(80)), "1m20s");
    }

    #[test]
    fn readiness_port_from_probe_or_first_port() {
        let c = json!({"ports": [{"name": "http", "containerPort": 80}],
                       "readinessProbe": {"httpGet": {"port": "http"}}});
        assert_eq!(probe_port(&c), Some(80));
        let c = json!({"ports": [{"containerPort": 8080}]});
        assert_eq!(probe_port(&c), Some(8080));
        assert_eq!(probe_port(&json!({})), None);
    }
}
