//! One container's life in its pod: its image resolved (a failed pull backs off), its volumes
//! and view prepared, its process started and waited for with its probes running, and its
//! restarts by the pod's restart policy with the kubelet's back-off. An init container's
//! loop ends once it has exited 0; a regular one's when it will not run again.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::cgroup::PodCgroup;
use super::logfile::{self, LogWriter};
use super::pod::{signal, sleep_or_stop, PodRuntime, Stop};
use super::probes::{self, ContainerProbes, ProbeEvent, ProbeTarget};
use super::sandbox::{self, EmulatedRoot, Isolation, Mount};
use super::status::{waiting, ContainerKind};
use super::stdio::{self, RunIo};
use super::volumes::{self, Image};
use super::{clock, events, ids, Agent};

/// The first restart's back-off base, as the kubelet's (10 s, doubling, at most 5 min).
const RESTART_BACKOFF: Duration = Duration::from_secs(10);

/// How a container's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited 0 and will not run again (an init container's success).
    Completed,
    /// It failed and will not run again.
    Failed,
    /// The pod is stopping.
    Stopped,
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
/// pod's args (as a runtime does); on the machine's files, the image's program name mapped to
/// the local binary (in an image's own root, the container's PATH finds it).
fn argv(image: &Image, command: Vec<String>, args: Vec<String>) -> Vec<String> {
    let nginx = || vec!["nginx".to_string(), "-g".into(), "daemon off;".into()];
    let (entrypoint, local) = match image {
        Image::Nginx(bin) => (nginx(), Some(("nginx", bin))),
        Image::Archbench(bin) => (vec!["archbench".to_string()], Some(("archbench", bin))),
        Image::Arm64Nginx { .. } => (nginx(), None),
        Image::Caddy(bin) => (
            CADDY_ENTRYPOINT.iter().map(|w| w.to_string()).collect(),
            Some(("caddy", bin)),
        ),
    };
    let mut argv = if command.is_empty() {
        [entrypoint, args].concat()
    } else {
        [command, args].concat()
    };
    if let Some((program, bin)) = local {
        if Path::new(&argv[0])
            .file_name()
            .is_some_and(|f| f == program)
        {
            argv[0] = bin.display().to_string();
        }
    }
    argv
}

/// The official caddy image's command: its Caddyfile at the path the image documents.
const CADDY_ENTRYPOINT: [&str; 6] = [
    "caddy",
    "run",
    "--config",
    "/etc/caddy/Caddyfile",
    "--adapter",
    "caddyfile",
];

/// The environment an image sets (its `ENV`) added under the pod's (a variable the pod sets
/// wins, as with a runtime): the official caddy image's data and configuration directories,
/// here under the container's own /run (a tmpfs), since its /data and /config volumes would
/// be directories of the machine's root.
fn add_image_env(image: &Image, env: &mut Vec<(String, String)>) {
    let own: &[(&str, &str)] = match image {
        Image::Caddy(_) => &[
            ("XDG_DATA_HOME", "/run/caddy/data"),
            ("XDG_CONFIG_HOME", "/run/caddy/config"),
        ],
        _ => &[],
    };
    for (k, v) in own {
        if !env.iter().any(|(set, _)| set == k) {
            env.push((k.to_string(), v.to_string()));
        }
    }
}

/// Where the image's nginx is (Debian's, the test machines'): another build is mounted over it.
const STOCK_NGINX: &str = "/usr/sbin/nginx";

/// What every container of the pod has mounted besides its volumes: /etc/hosts, the host
/// name, its cgroup at /sys/fs/cgroup, an arm64 node's /proc/cpuinfo.
fn pod_mounts(agent: &Agent, rt: &PodRuntime, own_root: bool) -> io::Result<Vec<Mount>> {
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
    if own_root || Path::new("/etc/hostname").exists() {
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
    pod: &Pod,
    spec: &Container,
    image: &Image,
) -> Result<Prepared, PrepareError> {
    if let Some(e) = &rt.cgroup_error {
        return Err(("CreateContainerError", e.clone(), "Failed"));
    }
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
    let status = with_status.status.get_or_insert_with(Default::default);
    status.pod_ip = Some(rt.ip.to_string());
    status.host_ip = Some(rt.host_ip.clone());
    with_status
        .spec
        .get_or_insert_with(Default::default)
        .node_name = Some(agent.spec.name.clone());
    let mut env = volumes::environment(agent, &with_status, spec, &rt.hostname)
        .await
        .map_err(|m| ("CreateContainerConfigError", m, "Failed"))?;
    add_image_env(image, &mut env);
    let strings = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter()
            .flatten()
            .map(|s| volumes::expand(s, &env))
            .collect()
    };
    let argv = argv(image, strings(&spec.command), strings(&spec.args));
    let own_root = matches!(image, Image::Arm64Nginx { .. });
    let mut m = image_mounts(image);
    m.extend(mounts);
    m.extend(
        pod_mounts(agent, rt, own_root)
            .map_err(|e| ("CreateContainerError", e.to_string(), "Failed"))?,
    );
    let workdir = spec.working_dir.as_deref().unwrap_or("/").to_string();
    let emulated = match image {
        Image::Arm64Nginx { root, .. } => Some(emulated_root(agent, rt, spec, root)?),
        _ => None,
    };
    let cgroup_procs = match &rt.cgroup {
        Some(cg) => {
            let own = cg.container(&spec.name);
            own.create()
                .map_err(|e| ("CreateContainerError", e.to_string(), "Failed"))?;
            own.procs_files()
        }
        None => Vec::new(),
    };
    Ok(Prepared {
        argv,
        stdin: spec.stdin.unwrap_or(false),
        stdin_once: spec.stdin_once.unwrap_or(false),
        env,
        iso: Isolation {
            hostname: rt.hostname.clone(),
            mounts: m,
            cgroup_procs,
            netns: rt.netns(),
            workdir: PathBuf::from(workdir),
            emulated,
        },
    })
}

/// What an image brings besides the pod's mounts: a tmpfs /run; for nginx, its logs as the
/// container's output (as the official image links them) and another build over its nginx.
fn image_mounts(image: &Image) -> Vec<Mount> {
    let mut m: Vec<Mount> = vec![Mount::Tmpfs { dst: "/run".into() }];
    let (nginx_logs, build) = match image {
        Image::Nginx(bin) => {
            // Another build of the machine's nginx: in the container it is the nginx, so
            // `nginx -V` through exec names the build the pod runs.
            let stock = Path::new(STOCK_NGINX);
            let other = (bin != stock && stock.exists()).then_some(bin);
            (Path::new("/var/log/nginx").is_dir(), other)
        }
        Image::Arm64Nginx { build, .. } => (true, build.as_ref()),
        Image::Archbench(_) | Image::Caddy(_) => (false, None),
    };
    if nginx_logs {
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
    if let Some(bin) = build {
        m.push(Mount::Bind {
            src: bin.clone(),
            dst: STOCK_NGINX.into(),
            read_only: true,
        });
    }
    m
}

/// An arm64 image's root for this container, run by the node's emulator.
fn emulated_root(
    agent: &Agent,
    rt: &PodRuntime,
    spec: &Container,
    image: &Path,
) -> Result<EmulatedRoot, PrepareError> {
    let emulator = agent
        .emulator
        .as_ref()
        .map_err(|why| ("CreateContainerError", why.clone(), "Failed"))?
        .as_ref()
        .ok_or((
            "CreateContainerError",
            format!("node {} runs no emulator for arm64 images", agent.spec.name),
            "Failed",
        ))?;
    Ok(EmulatedRoot {
        image: image.to_path_buf(),
        scratch: rt.dir.join("roots").join(&spec.name),
        user_ns: emulator.user_ns().to_path_buf(),
    })
}

/// One container's loop: pull (resolve), prepare, start, wait, restart.
pub async fn run(agent: Arc<Agent>, rt: Arc<PodRuntime>, pod: Arc<Pod>, idx: usize) -> Ended {
    let Some(c) = rt.container_states().get(idx).cloned() else {
        return Ended::Stopped;
    };
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| c.kind.specs(s).iter().find(|s| s.name == c.name))
        .cloned()
        .unwrap_or_default();
    let mut stop = rt.stop.subscribe();
    let mut backoff_n = 0u32;
    if let Some(why) = &rt.refused {
        // the pod's spec asks for what this node does not model: it never starts
        let text = format!("Error: {why}");
        events::record(&agent, &pod.metadata, "Warning", "Failed", &text).await;
        let _ = stop.changed().await;
        return Ended::Stopped;
    }
    loop {
        let Some(img) = pull(&agent, &rt, &pod, idx, &c.image, &mut stop).await else {
            return Ended::Stopped;
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
                events::record(&agent, &pod.metadata, "Warning", ev, &msg).await;
                if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                    return Ended::Stopped;
                }
                continue;
            }
        };
        let started_at = clock::now();
        let (exit_code, by_probe) = run_once(
            &agent,
            &rt,
            &pod,
            idx,
            &spec,
            &prepared,
            &started_at,
            &mut stop,
        )
        .await;
        if stop.borrow().is_some() {
            rt.set(idx, |c| c.done = true);
            return Ended::Stopped;
        }
        if !restarts(c.kind, &rt.restart_policy, exit_code, by_probe) {
            rt.set(idx, |c| c.done = true);
            return if exit_code == 0 {
                Ended::Completed
            } else {
                Ended::Failed
            };
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
        if back_off(&agent, &rt, &pod, idx, delay, &mut stop).await {
            return Ended::Stopped;
        }
    }
}

/// Whether a container that ended with `exit_code` runs again: by the pod's restart policy
/// (an init container only until it succeeds; one a probe ended, unless the policy is Never).
fn restarts(kind: ContainerKind, policy: &str, exit_code: i32, by_probe: bool) -> bool {
    match (kind, policy) {
        (_, "Never") => false,
        (ContainerKind::Init, _) => exit_code != 0,
        (ContainerKind::Regular, "OnFailure") => exit_code != 0 || by_probe,
        (ContainerKind::Regular, _) => true,
    }
}

/// The image as a local program, once it resolves; a failed pull is reported and tried again
/// with back-off. None when the pod stops first.
async fn pull(
    agent: &Arc<Agent>,
    rt: &PodRuntime,
    pod: &Pod,
    idx: usize,
    image: &str,
    stop: &mut watch::Receiver<Option<Stop>>,
) -> Option<Image> {
    let mut pull_n = 0u32;
    loop {
        if stop.borrow().is_some() {
            return None;
        }
        let msg = match volumes::resolve(&agent.state, &agent.spec.arch, image) {
            Ok(i) => return Some(i),
            Err(msg) => msg,
        };
        rt.set(idx, |c| c.state = waiting("ErrImagePull", Some(&msg)));
        let text = format!("Failed to pull image \"{image}\": {msg}");
        events::record(agent, &pod.metadata, "Warning", "Failed", &text).await;
        if sleep_or_stop(Duration::from_secs(1), stop).await {
            return None;
        }
        let back = format!("Back-off pulling image \"{image}\"");
        rt.set(idx, |c| c.state = waiting("ImagePullBackOff", Some(&back)));
        events::record(agent, &pod.metadata, "Normal", "BackOff", &back).await;
        pull_n += 1;
        if sleep_or_stop(backoff(Duration::from_secs(1), pull_n), stop).await {
            return None;
        }
    }
}

/// Waits out a restart's back-off in CrashLoopBackOff (none for the first restart), then
/// counts the restart. True when the pod stops first.
async fn back_off(
    agent: &Arc<Agent>,
    rt: &PodRuntime,
    pod: &Pod,
    idx: usize,
    delay: Duration,
    stop: &mut watch::Receiver<Option<Stop>>,
) -> bool {
    let terminated = rt
        .container_states()
        .get(idx)
        .map(|c| c.state.clone())
        .unwrap_or(Value::Null);
    if !delay.is_zero() {
        let name = rt
            .container_states()
            .get(idx)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let msg = format!(
            "back-off {} restarting failed container={name} pod={}_{}({})",
            fmt_duration(delay),
            rt.name,
            rt.ns,
            rt.uid
        );
        rt.set(idx, |c| {
            c.last_state = terminated.clone();
            c.state = waiting("CrashLoopBackOff", Some(&msg));
        });
        let text = "Back-off restarting failed container";
        events::record(agent, &pod.metadata, "Warning", "BackOff", text).await;
        if sleep_or_stop(delay, stop).await {
            return true;
        }
    }
    rt.set(idx, |c| {
        c.last_state = terminated;
        c.restart_count += 1;
    });
    false
}

/// One run of the container: started, its probes watched, until it exits, the pod stops or
/// a probe asks for a restart; its terminated state recorded. The exit code, and whether a
/// probe ended it.
#[allow(clippy::too_many_arguments)]
async fn run_once(
    agent: &Arc<Agent>,
    rt: &Arc<PodRuntime>,
    pod: &Pod,
    idx: usize,
    spec: &Container,
    prepared: &Prepared,
    started_at: &str,
    stop: &mut watch::Receiver<Option<Stop>>,
) -> (i32, bool) {
    let name = spec.name.clone();
    let ooms_before = rt.oom_kills();
    rt.set(idx, |c| c.ooms_at_start = ooms_before);
    let run = rt
        .container_states()
        .get(idx)
        .map_or(0, |c| c.restart_count);
    let log_path = rt.dir.join("logs").join(&name).join(format!("{run}.log"));
    let outcome = start(rt, idx, prepared, &log_path, run, started_at).await;
    let (exit_code, message, pumps, by_probe) = match outcome {
        Ok((mut child, pumps)) => {
            let text = format!("Started container {name}");
            events::record(agent, &pod.metadata, "Normal", "Started", &text).await;
            let (code, by_probe) = wait(agent, rt, pod, idx, spec, &mut child, stop).await;
            (code, None, pumps, by_probe)
        }
        Err(e) => (128, Some(e.to_string()), Vec::new(), false),
    };
    rt.write_pid(&name, None);
    for p in pumps {
        let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
    }
    let oom_killed = exit_code == 137 && rt.oom_kills() > ooms_before;
    let mut terminated = terminated_state(exit_code, message, oom_killed, started_at);
    if oom_killed {
        let limit = rt.cgroup.as_ref().and_then(PodCgroup::memory_limit);
        let text = format!(
            "Container {name} was killed by the kernel's OOM killer: the pod's memory reached its limit ({} bytes)",
            limit.map_or("?".into(), |b| b.to_string())
        );
        events::record(agent, &pod.metadata, "Warning", "OOMKilled", &text).await;
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
        c.startup_passed = false;
        c.middle = None;
        c.init = None;
    });
    (exit_code, by_probe)
}

/// Waits for the running container to exit, with its probes running: the exit code, and
/// whether a failed startup or liveness probe ended it.
async fn wait(
    agent: &Arc<Agent>,
    rt: &Arc<PodRuntime>,
    pod: &Pod,
    idx: usize,
    spec: &Container,
    child: &mut tokio::process::Child,
    stop: &mut watch::Receiver<Option<Stop>>,
) -> (i32, bool) {
    let name = spec.name.as_str();
    // Refusals were made before the pod started: what is here parses.
    let probes = ContainerProbes::of(spec).unwrap_or_default();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let target = ProbeTarget {
        pod_ip: rt.ip,
        exec: rt.exec_target(name).ok(),
    };
    let watcher = tokio::spawn(probes::watch(probes, target, tx));
    let ended = loop {
        tokio::select! {
            st = child.wait() => break (exit_code(st), false),
            _ = stop.changed() => {
                let how = (*stop.borrow()).unwrap_or(Stop::Now);
                break (terminate(rt, idx, child, how).await, false);
            }
            Some(event) = rx.recv() => match event {
                ProbeEvent::Started => rt.set(idx, |c| c.startup_passed = true),
                ProbeEvent::Ready(ready) => rt.set(idx, |c| c.ready = ready && c.running()),
                ProbeEvent::Unhealthy { kind, output } => {
                    let text = format!("{} probe failed: {output}", kind.title());
                    events::record(agent, &pod.metadata, "Warning", "Unhealthy", &text).await;
                }
                ProbeEvent::Restart { kind } => {
                    let text = format!(
                        "Container {name} failed {} probe, will be restarted",
                        kind.title().to_lowercase()
                    );
                    events::record(agent, &pod.metadata, "Normal", "Killing", &text).await;
                    break (terminate(rt, idx, child, Stop::Graceful(rt.grace)).await, true);
                }
            },
        }
    };
    watcher.abort();
    ended
}

/// A container's `terminated` state, its reason as the kubelet gives it.
fn terminated_state(
    exit_code: i32,
    start_error: Option<String>,
    oom_killed: bool,
    started_at: &str,
) -> Value {
    let reason = match (exit_code, &start_error, oom_killed) {
        (_, Some(_), _) => "StartError",
        (_, None, true) => "OOMKilled",
        (0, None, false) => "Completed",
        _ => "Error",
    };
    let mut t = json!({"exitCode": exit_code, "reason": reason, "startedAt": started_at, "finishedAt": clock::now()});
    if let Some(m) = start_error {
        t["message"] = json!(m);
    }
    t
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
    let id = format!("{:016x}{:016x}", ids::random_u64(), ids::random_u64());
    let name = rt
        .container_states()
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
        c.emulated = p.iso.emulated.is_some();
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
    let (init, middle) = rt
        .container_states()
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
    fn a_caddy_image_runs_the_official_images_command_with_the_machines_caddy() {
        let image = Image::Caddy("/usr/bin/caddy".into());
        assert_eq!(
            argv(&image, Vec::new(), Vec::new()),
            [
                "/usr/bin/caddy",
                "run",
                "--config",
                "/etc/caddy/Caddyfile",
                "--adapter",
                "caddyfile"
            ]
        );
        let own = argv(&image, vec!["caddy".into()], vec!["version".into()]);
        assert_eq!(own, ["/usr/bin/caddy", "version"]);
        let mut env = vec![("XDG_DATA_HOME".to_string(), "/mine".to_string())];
        add_image_env(&image, &mut env);
        assert_eq!(
            env,
            [
                ("XDG_DATA_HOME".to_string(), "/mine".to_string()),
                ("XDG_CONFIG_HOME".into(), "/run/caddy/config".into())
            ]
        );
    }

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
}
