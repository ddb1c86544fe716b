//! One pod's life: its runtime state, the pod loop (readiness, cgroup view, status, deletion)
//! and one task per container (image, volumes, start, wait, restart with back-off).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::cgroup::{CgroupRoot, PodCgroup, Usage};
use super::logfile::{self, LogWriter};
use super::nginx;
use super::sandbox::{self, Isolation, Mount};
use super::volumes::{self, Image};
use crate::clock;
use crate::controllers::events;
use crate::controllers::nodes::node_arch;
use crate::error::ApiError;
use crate::ids;
use crate::options::CgroupView;
use crate::resources;
use crate::state::Shared;
use crate::store::{self, Obj};

/// How a pod is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// SIGTERM, then SIGKILL after the grace period.
    Graceful(Duration),
    /// SIGKILL now.
    Now,
}

/// What the kubelet knows of one container.
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
    pub node: String,
    pub node_arch: String,
    pub host_ip: String,
    pub ip: Ipv4Addr,
    pub hostname: String,
    pub dir: PathBuf,
    pub cgroup: Option<PodCgroup>,
    pub view: CgroupView,
    pub isolate: bool,
    pub start_time: String,
    pub containers: Mutex<Vec<CState>>,
    pub stop: watch::Sender<Option<Stop>>,
    /// (when, cgroup readings), newest last, for the metrics API.
    pub samples: Mutex<VecDeque<(Instant, Usage)>>,
    /// Condition type → (status, lastTransitionTime).
    pub conditions: Mutex<HashMap<String, (String, String)>>,
    restart_policy: String,
    grace_cap: Option<Duration>,
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

fn waiting(reason: &str, message: Option<&str>) -> Value {
    let mut w = json!({"reason": reason});
    if let Some(m) = message {
        w["message"] = json!(m);
    }
    json!({"waiting": w})
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

impl PodRuntime {
    pub fn new(
        sh: &Shared,
        pod: &Value,
        cgroups: Option<&CgroupRoot>,
        isolate: bool,
    ) -> io::Result<Arc<PodRuntime>> {
        let (ns, name, uid) = (
            store::namespace_of(pod),
            store::name_of(pod),
            store::uid_of(pod),
        );
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let dir = super::pod_dir(&sh.dir, ns, name, uid);
        std::fs::create_dir_all(&dir)?;
        let cgroup = match cgroups {
            Some(root) => Some(root.pod(&format!("pod{uid}"))?),
            None => None,
        };
        let node_index = sh
            .opts
            .nodes
            .iter()
            .position(|n| n.name == node)
            .unwrap_or(0);
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
                name: c["name"].as_str().unwrap_or_default().to_string(),
                image: c["image"].as_str().unwrap_or_default().to_string(),
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
            })
            .collect();
        Ok(Arc::new(PodRuntime {
            uid: uid.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            node_arch: node_arch(sh, &node),
            host_ip: sh.alloc.node_ip(node_index).to_string(),
            node,
            ip: sh.alloc.pod_ip(),
            hostname,
            dir,
            cgroup,
            view: sh.opts.pod_cgroup_view,
            isolate,
            start_time: clock::now(),
            containers: Mutex::new(containers),
            stop: watch::channel(None).0,
            samples: Mutex::new(VecDeque::new()),
            conditions: Mutex::new(HashMap::new()),
            restart_policy: pod
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("Always")
                .to_string(),
            grace_cap: sh.opts.termination_grace_cap,
        }))
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

    /// Sends a signal to every container's main process (its PID namespace's PID 1).
    pub fn kill_all(&self, sig: i32) {
        for c in lock(&self.containers).iter() {
            signal(self.isolate, c.init, c.middle, sig);
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

    /// Rewrites the pod's cgroup view (v1 hosts) and records a usage sample.
    pub fn refresh_usage(&self) {
        let Some(cg) = &self.cgroup else { return };
        let usage = if cg.v2_dir().is_some() {
            cg.usage()
        } else {
            match cg.write_view(&self.view_dir(), self.view) {
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
    pub fn refresh_hosts(&self, sh: &Shared) {
        let path = self.dir.join("hosts");
        let Ok(old) = std::fs::read_to_string(&path) else {
            return;
        };
        let new = volumes::hosts(sh, &self.ip.to_string(), &self.hostname, &self.ns);
        if new != old {
            let _ = std::fs::write(&path, new);
        }
    }

    /// The log file of a container's current or previous run; the bool says whether that run
    /// is still going.
    pub fn log_path(
        &self,
        container: Option<&str>,
        previous: bool,
    ) -> Result<(PathBuf, bool), ApiError> {
        let cs = lock(&self.containers);
        let c = match container {
            Some(n) => cs.iter().find(|c| c.name == n),
            None => cs.first(),
        };
        let Some(c) = c else {
            return Err(ApiError::bad_request(format!(
                "container {} is not valid for pod {}",
                container.unwrap_or(""),
                self.name
            )));
        };
        let dir = self.dir.join("logs").join(&c.name);
        if previous {
            return match c.run {
                Some(r) if r > 0 => Ok((dir.join(format!("{}.log", r - 1)), false)),
                _ => Err(ApiError::bad_request(format!(
                    "previous terminated container \"{}\" in pod \"{}\" not found",
                    c.name, self.name
                ))),
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
                Err(ApiError::bad_request(format!(
                    "container \"{}\" in pod \"{}\" is waiting to start: {why}",
                    c.name, self.name
                )))
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

    pub fn exec_target(&self, container: Option<&str>) -> Result<ExecTarget, ApiError> {
        let cs = lock(&self.containers);
        let c = match container {
            Some(n) => cs.iter().find(|c| c.name == n),
            None => cs.first(),
        };
        let Some(c) = c else {
            return Err(ApiError::bad_request(format!(
                "container {} is not valid for pod {}",
                container.unwrap_or(""),
                self.name
            )));
        };
        if !c.running() {
            return Err(ApiError::bad_request(format!(
                "unable to upgrade connection: container not found (\"{}\")",
                c.name
            )));
        }
        let mut env = c.env.clone();
        env.retain(|(k, _)| k != "HOSTNAME");
        env.push(("HOSTNAME".into(), self.hostname.clone()));
        Ok(ExecTarget {
            init_pid: if self.isolate { c.init } else { None },
            env,
            workdir: c.workdir.clone(),
            cgroup_procs: self
                .cgroup
                .as_ref()
                .map(PodCgroup::procs_files)
                .unwrap_or_default(),
        })
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
}

/// Signals a container: its PID 1 (which takes its PID namespace down on SIGKILL), or the
/// process group when it runs without namespaces.
fn signal(isolate: bool, init: Option<u32>, middle: Option<u32>, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; pids come from our own children.
    unsafe {
        match (isolate, init, middle) {
            (true, Some(p), _) => {
                libc::kill(p as i32, sig);
            }
            (_, _, Some(m)) => {
                libc::kill(-(m as i32), sig);
            }
            _ => {}
        }
        if sig == libc::SIGKILL {
            if let Some(m) = middle {
                libc::kill(m as i32, libc::SIGKILL);
            }
        }
    }
}

/// The pod loop: watches its object, runs readiness probes, refreshes the cgroup view,
/// writes status; on deletion stops the containers and removes the object.
pub async fn run(sh: Arc<Shared>, rt: Arc<PodRuntime>, pod: Obj) {
    let n = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(tokio::spawn(container(
            sh.clone(),
            rt.clone(),
            pod.clone(),
            i,
        )));
    }
    let mut stop = rt.stop.subscribe();
    let mut last_sample = Instant::now() - Duration::from_secs(5);
    loop {
        match sh.store.get(&resources::PODS, &rt.ns, &rt.name) {
            Some(p) if store::uid_of(&p) == rt.uid => {
                if p.pointer("/metadata/deletionTimestamp").is_some() {
                    let grace = p
                        .pointer("/metadata/deletionGracePeriodSeconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(30);
                    let mut d = Duration::from_secs(grace);
                    if let Some(cap) = rt.grace_cap {
                        d = d.min(cap);
                    }
                    rt.request_stop(if grace == 0 {
                        Stop::Now
                    } else {
                        Stop::Graceful(d)
                    });
                }
            }
            _ => rt.request_stop(Stop::Now),
        }
        if rt.stopping() || sh.stopping() {
            break;
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            rt.refresh_usage();
            rt.refresh_hosts(&sh);
            last_sample = Instant::now();
        }
        probe(&rt).await;
        write_status(&sh, &rt);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = stop.changed() => {}
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    if sh.stopping() {
        return;
    }
    write_status(&sh, &rt);
    if let Some(p) = sh.store.get(&resources::PODS, &rt.ns, &rt.name) {
        if store::uid_of(&p) == rt.uid && p.pointer("/metadata/deletionTimestamp").is_some() {
            sh.store.remove(&resources::PODS, &rt.ns, &rt.name);
        }
    }
    sh.kubelet.forget(&rt.uid);
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

pub fn write_status(sh: &Shared, rt: &PodRuntime) {
    let status = super::status::pod_status(rt);
    let _ = sh.store.update(&resources::PODS, &rt.ns, &rt.name, |o| {
        if store::uid_of(o) != rt.uid {
            return Err(ApiError::conflict(&resources::PODS, &rt.name));
        }
        o["status"] = status;
        Ok(())
    });
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
    env: Vec<(String, String)>,
    iso: Isolation,
}

fn prepare(
    sh: &Shared,
    rt: &PodRuntime,
    pod: &Value,
    spec: &Value,
    image: &Image,
) -> Result<Prepared, (&'static str, String, &'static str)> {
    let vols = volumes::materialize(sh, pod, &rt.dir)
        .map_err(|m| ("ContainerCreating", m, "FailedMount"))?;
    let mounts = volumes::container_mounts(spec, &vols)
        .map_err(|m| ("CreateContainerError", m, "Failed"))?;
    let mut with_status = pod.clone();
    with_status["status"]["podIP"] = json!(rt.ip.to_string());
    with_status["status"]["hostIP"] = json!(rt.host_ip);
    with_status["spec"]["nodeName"] = json!(rt.node);
    let env = volumes::environment(sh, &with_status, spec, &rt.hostname)
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
    let (command, args) = (strings("command"), strings("args"));
    let cname = spec["name"].as_str().unwrap_or("c");
    let io_err = |e: io::Error| ("CreateContainerError", e.to_string(), "Failed");
    let mut m: Vec<Mount> = vec![Mount::Tmpfs { dst: "/run".into() }];
    let argv: Vec<String> = match image {
        Image::Nginx(bin) => {
            let mut argv = if !command.is_empty() {
                [command, args].concat()
            } else if !args.is_empty() {
                args
            } else {
                vec!["nginx".into(), "-g".into(), "daemon off;".into()]
            };
            if Path::new(&argv[0])
                .file_name()
                .is_some_and(|f| f == "nginx")
            {
                let overlays: Vec<(PathBuf, PathBuf)> = mounts
                    .iter()
                    .filter(|(_, dst, _)| dst.starts_with(nginx::ETC_NGINX))
                    .map(|(src, dst, _)| (dst.clone(), src.clone()))
                    .collect();
                let conf = nginx::prepare(&rt.dir.join("nginx").join(cname), &overlays, rt.ip)
                    .map_err(io_err)?;
                argv[0] = bin.display().to_string();
                argv.insert(1, "-c".into());
                argv.insert(2, conf.display().to_string());
            }
            if Path::new("/var/log/nginx").is_dir() {
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
            argv
        }
        Image::Archbench(bin) => {
            let mut argv = if command.is_empty() {
                [vec!["archbench".to_string()], args].concat()
            } else {
                [command, args].concat()
            };
            if Path::new(&argv[0])
                .file_name()
                .is_some_and(|f| f == "archbench")
            {
                argv[0] = bin.display().to_string();
            }
            argv
        }
    };
    for (src, dst, ro) in mounts {
        m.push(Mount::Bind {
            src,
            dst,
            read_only: ro,
        });
    }
    let hosts = rt.dir.join("hosts");
    std::fs::write(
        &hosts,
        volumes::hosts(sh, &rt.ip.to_string(), &rt.hostname, &rt.ns),
    )
    .map_err(io_err)?;
    m.push(Mount::Bind {
        src: hosts,
        dst: "/etc/hosts".into(),
        read_only: false,
    });
    let hostname = rt.dir.join("hostname");
    std::fs::write(&hostname, format!("{}\n", rt.hostname)).map_err(io_err)?;
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
                std::fs::create_dir_all(rt.view_dir()).map_err(io_err)?;
                let _ = cg.write_view(&rt.view_dir(), rt.view);
                rt.view_dir()
            }
        };
        m.push(Mount::Bind {
            src,
            dst: "/sys/fs/cgroup".into(),
            read_only: false,
        });
    }
    let cpus = sh
        .store
        .get(&resources::NODES, "", &rt.node)
        .and_then(|n| {
            n.pointer("/status/capacity/cpu")
                .and_then(Value::as_str)
                .and_then(|c| c.parse().ok())
        })
        .unwrap_or(4);
    if let Some(text) = volumes::cpuinfo(&rt.node_arch, cpus) {
        let p = rt.dir.join("cpuinfo");
        std::fs::write(&p, text).map_err(io_err)?;
        m.push(Mount::Bind {
            src: p,
            dst: "/proc/cpuinfo".into(),
            read_only: true,
        });
    }
    let workdir = spec["workingDir"].as_str().unwrap_or("/").to_string();
    Ok(Prepared {
        argv,
        env,
        iso: Isolation {
            namespaces: rt.isolate,
            hostname: rt.hostname.clone(),
            mounts: m,
            cgroup_procs: rt
                .cgroup
                .as_ref()
                .map(PodCgroup::procs_files)
                .unwrap_or_default(),
            workdir: PathBuf::from(workdir),
        },
    })
}

fn event(sh: &Shared, rt: &PodRuntime, ty: &str, reason: &str, message: &str) {
    if let Some(p) = sh.store.get(&resources::PODS, &rt.ns, &rt.name) {
        events::record(sh, &p, ty, reason, message, "kubelet");
    }
}

/// One container's loop: pull (resolve), prepare, start, wait, restart.
async fn container(sh: Arc<Shared>, rt: Arc<PodRuntime>, pod: Obj, idx: usize) {
    let spec = pod["spec"]["containers"][idx].clone();
    let name = spec["name"].as_str().unwrap_or_default().to_string();
    let image = spec["image"].as_str().unwrap_or_default().to_string();
    let base = sh.opts.restart_backoff;
    let mut stop = rt.stop.subscribe();
    let mut backoff_n = 0u32;
    let mut pull_n = 0u32;
    loop {
        if stop.borrow().is_some() {
            return;
        }
        let img = match volumes::resolve(&sh, &image) {
            Ok(i) => i,
            Err(msg) => {
                rt.set(idx, |c| c.state = waiting("ErrImagePull", Some(&msg)));
                event(
                    &sh,
                    &rt,
                    "Warning",
                    "Failed",
                    &format!("Failed to pull image \"{image}\": {msg}"),
                );
                if sleep_or_stop(base.min(Duration::from_secs(1)), &mut stop).await {
                    return;
                }
                let back = format!("Back-off pulling image \"{image}\"");
                rt.set(idx, |c| c.state = waiting("ImagePullBackOff", Some(&back)));
                event(&sh, &rt, "Normal", "BackOff", &back);
                pull_n += 1;
                if sleep_or_stop(backoff(base, pull_n), &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let prepared = match prepare(&sh, &rt, &pod, &spec, &img) {
            Ok(p) => p,
            Err((reason, msg, ev)) => {
                rt.set(idx, |c| {
                    c.state = waiting(
                        reason,
                        (reason != "ContainerCreating").then_some(msg.as_str()),
                    )
                });
                event(&sh, &rt, "Warning", ev, &msg);
                if sleep_or_stop(Duration::from_secs(1).min(base * 5), &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let started_at = clock::now();
        let run = rt
            .containers
            .lock()
            .map(|c| c[idx].restart_count)
            .unwrap_or(0);
        let log_path = rt.dir.join("logs").join(&name).join(format!("{run}.log"));
        let outcome = start(&rt, idx, &prepared, &log_path, run, &started_at).await;
        let (exit_code, message, pumps) = match outcome {
            Ok((mut child, pumps)) => {
                event(
                    &sh,
                    &rt,
                    "Normal",
                    "Started",
                    &format!("Started container {name}"),
                );
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
        if ran > base * 60 {
            backoff_n = 0;
        }
        let delay = backoff(base, backoff_n);
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
            event(
                &sh,
                &rt,
                "Warning",
                "BackOff",
                "Back-off restarting failed container",
            );
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

/// Spawns the container's process with its log pumps.
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let files = sandbox::prepare(&mut cmd, &p.iso)?;
    let mut child = cmd.spawn()?;
    drop(files);
    let middle = child.id();
    let init = match (rt.isolate, middle) {
        (true, Some(m)) => sandbox::init_pid(m),
        _ => middle,
    };
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(tokio::spawn(logfile::pump(out, "stdout", writer.clone())));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(tokio::spawn(logfile::pump(err, "stderr", writer)));
    }
    let id = ids::container_id();
    rt.set(idx, |c| {
        c.state = json!({"running": {"startedAt": started_at}});
        c.started = true;
        c.ready = false;
        c.container_id = Some(id);
        c.run = Some(run);
        c.middle = middle;
        c.init = init;
        c.env = p.env.clone();
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
    let (init, middle) = rt
        .containers
        .lock()
        .map(|c| (c[idx].init, c[idx].middle))
        .unwrap_or((None, None));
    if let Stop::Graceful(grace) = how {
        signal(rt.isolate, init, middle, libc::SIGTERM);
        if let Ok(st) = tokio::time::timeout(grace, child.wait()).await {
            return exit_code(st);
        }
    }
    signal(rt.isolate, init, middle, libc::SIGKILL);
    exit_code(child.wait().await)
}
