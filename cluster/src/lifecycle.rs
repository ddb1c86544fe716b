//! The commands people, tests and benches share: `up` (make the namespace, the certificates,
//! start the supervisor, report when ready), `down` (stop it, by pid), `exec` (run a command
//! where the cluster's addresses are), `status`, `user` and `fault`.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::{ClusterError, Result};
use crate::laptop;
use crate::layout::{self, ClusterDir, State};
use crate::netns::Netns;
use crate::pki::{Issue, Pki};
use crate::process;
use crate::topology::{self, NodeSpec};

/// How long `up` waits for the supervisor's verdict (cold components, two busy cores).
const UP_WITHIN: Duration = Duration::from_secs(600);
/// Longer than the supervisor's own teardown at worst (node agents 20 + 5 s, then six
/// components 10 + 5 s each).
const DOWN_WITHIN: Duration = Duration::from_secs(150);

/// What `up` is asked for.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Stop the cluster when this process ends (tests pass their own pid).
    pub owner: Option<u32>,
    /// Use this existing network namespace (a name or a path) instead of making one.
    pub netns: Option<String>,
    pub nodes: Vec<NodeSpec>,
    /// The program Job pods of archbench images run.
    pub archbench_binary: Option<PathBuf>,
    pub nginx_binary: PathBuf,
    /// Images that run another nginx program than `nginx_binary` (exact references).
    pub nginx_builds: Vec<(String, PathBuf)>,
    /// The arm64 root filesystem arm64 nodes run nginx images from.
    pub arm64_root: Option<PathBuf>,
    /// Prebuilt Kubernetes binaries (else tools/kube/build builds or finds them).
    pub kube_bin: Option<PathBuf>,
    /// The scheduler's back-off in seconds for a pod it found no room for, first and every
    /// try (else Kubernetes' default): a test's stand-in for a loaded control plane.
    pub scheduler_backoff: Option<u32>,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            owner: None,
            netns: None,
            nodes: topology::default_nodes(),
            archbench_binary: sibling("archbench"),
            nginx_binary: PathBuf::from("/usr/sbin/nginx"),
            nginx_builds: Vec::new(),
            arm64_root: fetched_arm64_root(),
            kube_bin: std::env::var_os("ARCHBENCH_KUBE_BIN").map(PathBuf::from),
            scheduler_backoff: None,
        }
    }
}

/// What tools/arm64/fetch left in this build's target directory (`target/arm64/current`),
/// resolved: a fetch of newer packages does not change a running cluster's pods.
pub fn fetched_arm64_root() -> Option<PathBuf> {
    arm64_root_beside(&std::env::current_exe().ok()?)
}

/// The fetched arm64 root of the target directory `program` (target/PROFILE/NAME) was built in.
pub fn arm64_root_beside(program: &Path) -> Option<PathBuf> {
    let target = program.parent()?.parent()?;
    let root = target.join("arm64/current").canonicalize().ok()?;
    root.join("usr/sbin/nginx").is_file().then_some(root)
}

/// A program beside this one (the same cargo target directory).
fn sibling(name: &str) -> Option<PathBuf> {
    let p = std::env::current_exe().ok()?.parent()?.join(name);
    p.exists().then_some(p)
}

fn require_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(ClusterError::NotRoot);
    }
    Ok(())
}

/// The directory of the Kubernetes binaries: given, or built (cached by version) by
/// tools/kube/build, which prints what it builds and how long it took on stderr.
pub fn kube_bin(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kube/build");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(ClusterError::io(format!("run {}", script.display())))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            what: script.display().to_string(),
            status: out.status.to_string(),
            stderr: "see the lines above".into(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .last()
        .map(PathBuf::from)
        .ok_or_else(|| ClusterError::Invalid(format!("{} printed nothing", script.display())))
}

pub fn up(dir: &Path, opts: &UpOptions) -> Result<()> {
    require_root()?;
    std::fs::create_dir_all(dir).map_err(ClusterError::io(format!("create {}", dir.display())))?;
    let dir = std::fs::canonicalize(dir)
        .map_err(ClusterError::io(format!("resolve {}", dir.display())))?;
    let cdir = ClusterDir::new(&dir);
    if let Ok(state) = cdir.read_state() {
        if state.supervisor_running() {
            println!(
                "cluster in {} is already up (supervisor pid {}); kubeconfig {}",
                dir.display(),
                state.supervisor_pid,
                cdir.kubeconfig().display()
            );
            return Ok(());
        }
    }
    // The one check before anything else: a namespace we are handed must lead nowhere.
    if let Some(spec) = &opts.netns {
        Netns::existing(spec).refuse_unless_empty()?;
    }
    let kube_bin = kube_bin(opts.kube_bin.as_deref())?;
    let ns = match &opts.netns {
        Some(spec) => Netns::existing(spec),
        None => Netns::create(&layout::netns_name(&dir))?,
    };
    let started = start(&cdir, &ns, opts, kube_bin);
    if started.is_err() {
        let _ = ns.delete();
        let _ = laptop_of(&layout::netns_name(&cdir.root)).delete();
    }
    started
}

/// The cluster's files, network and supervisor, once the namespace exists.
fn start(cdir: &ClusterDir, ns: &Netns, opts: &UpOptions, kube_bin: PathBuf) -> Result<()> {
    fresh(cdir)?;
    ns.configure(&opts.nodes)?;
    let laptop = laptop::create(&laptop::name_for(&layout::netns_name(&cdir.root)), ns)?;
    credentials(cdir, &opts.nodes)?;
    crate::pki::write_file(
        &cdir.config_file(crate::components::SCHEDULER_CONFIG),
        &crate::components::scheduler_config(
            &cdir.config("kube-scheduler"),
            opts.scheduler_backoff,
        ),
        false,
    )?;
    let mut state = State {
        netns_path: ns.path.clone(),
        netns_name: ns.name.clone(),
        laptop_netns: laptop.name.clone(),
        supervisor_pid: 0,
        nodes: opts.nodes.clone(),
        kube_bin,
        archbench_binary: opts.archbench_binary.clone(),
        nginx_binary: opts.nginx_binary.clone(),
        nginx_builds: opts.nginx_builds.clone(),
        arm64_root: opts.arm64_root.clone(),
        scheduler_backoff: opts.scheduler_backoff,
    };
    cdir.write_state(&state)?;
    let mut child = start_supervisor(cdir, opts.owner)?;
    state.supervisor_pid = child.id();
    cdir.write_state(&state)?;
    match relay_progress(&mut child) {
        Ok(()) => {
            println!(
                "cluster ready: kubeconfig {}; run commands where its addresses are with: tools/cluster exec {} -- COMMAND",
                cdir.kubeconfig().display(),
                cdir.root.display()
            );
            Ok(())
        }
        Err(e) => {
            // It stops what it started after an `error:` line; a timeout or a lost
            // supervisor gets a SIGTERM, then a SIGKILL.
            if !wait_child(&mut child, DOWN_WITHIN) {
                process::signal(child.id(), libc::SIGTERM);
                if !wait_child(&mut child, Duration::from_secs(30)) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Err(e)
        }
    }
}

/// Clears what a previous cluster in this directory left (its data and certificates would
/// not match the new ones).
fn fresh(cdir: &ClusterDir) -> Result<()> {
    for sub in ["etcd", "pki", "config", "nodes", "logs", "faults", "users"] {
        let p = cdir.root.join(sub);
        if p.exists() {
            std::fs::remove_dir_all(&p)
                .map_err(ClusterError::io(format!("remove {}", p.display())))?;
        }
    }
    let _ = std::fs::remove_file(cdir.state_file());
    std::fs::create_dir_all(cdir.root.join("logs"))
        .map_err(ClusterError::io("create the log directory"))
}

/// Certificates, the admin kubeconfig, one per component and per node.
fn credentials(cdir: &ClusterDir, nodes: &[NodeSpec]) -> Result<()> {
    let pki = Pki::new(cdir.pki());
    pki.create()?;
    pki.kubeconfig_for(
        &cdir.kubeconfig(),
        "archbench-admin",
        &["system:masters"],
        None,
    )?;
    for (name, user) in [
        ("kube-controller-manager", "system:kube-controller-manager"),
        ("kube-scheduler", "system:kube-scheduler"),
        ("kube-proxy", "system:kube-proxy"),
    ] {
        pki.kubeconfig_for(&cdir.config(name), user, &[], None)?;
    }
    // metrics-server is the cluster's plumbing, not under test: it may do anything.
    pki.kubeconfig_for(
        &cdir.config("metrics-server"),
        "system:metrics-server",
        &["system:masters"],
        None,
    )?;
    pki.issue(&Issue {
        name: "metrics-server",
        common_name: "metrics-server",
        groups: &[],
        sans: &[
            "metrics-server.kube-system.svc".to_string(),
            topology::METRICS_SERVER_IP.to_string(),
        ],
        server: true,
        client: false,
    })?;
    crate::pki::write_file(
        &cdir.config_file(crate::components::AUDIT_POLICY),
        crate::components::AUDIT_POLICY_TEXT,
        false,
    )?;
    for n in nodes {
        let user = format!("system:node:{}", n.name);
        pki.kubeconfig_for(
            &cdir.config(&format!("node-{}", n.name)),
            &user,
            &["system:nodes"],
            None,
        )?;
        pki.issue(&Issue {
            name: &format!("kubelet-{}", n.name),
            common_name: &user,
            groups: &["system:nodes"],
            sans: &[n.name.clone(), n.ip.to_string()],
            server: true,
            client: false,
        })?;
    }
    Ok(())
}

fn start_supervisor(cdir: &ClusterDir, owner: Option<u32>) -> Result<std::process::Child> {
    let this = std::env::current_exe().map_err(ClusterError::io("find this program"))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cdir.log("supervisor"))
        .map_err(ClusterError::io("open the supervisor's log"))?;
    let mut cmd = Command::new(this);
    cmd.arg("supervise").arg(&cdir.root);
    if let Some(pid) = owner {
        cmd.arg("--owner").arg(pid.to_string());
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
    // SAFETY: setsid is async-signal-safe: the supervisor leaves our session (a Ctrl-C meant
    // for `up` must not stop a cluster that is meant to stay).
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(ClusterError::io("start the supervisor"))
}

/// Whether a child ended within `within` (polled: std's Child has no timed wait).
fn wait_child(child: &mut std::process::Child, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Prints the supervisor's `step:` lines until `ready` (Ok), `error: …` or its end (Err),
/// within UP_WITHIN.
fn relay_progress(child: &mut std::process::Child) -> Result<()> {
    let Some(out) = child.stdout.take() else {
        return Err(ClusterError::Invalid("the supervisor has no output".into()));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + UP_WITHIN;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == "ready" => return Ok(()),
            Ok(line) => match line.strip_prefix("error: ") {
                Some(e) => return Err(ClusterError::Invalid(e.to_string())),
                None => println!("{}", line.strip_prefix("step: ").unwrap_or(&line)),
            },
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                return Err(ClusterError::Invalid(format!(
                    "the cluster was not ready within {} s",
                    UP_WITHIN.as_secs()
                )))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                return Err(ClusterError::Invalid(format!(
                    "the supervisor ended ({status}) before the cluster was ready"
                )));
            }
        }
    }
}

pub async fn down(dir: &Path) -> Result<()> {
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    // Everything the supervisor started (components, node agents, pods) is its descendant;
    // nothing else is touched (a shell someone runs in the namespace is theirs).
    let started = process::descendants(state.supervisor_pid);
    if state.supervisor_running() {
        process::signal(state.supervisor_pid, libc::SIGTERM);
        if !process::wait_gone(state.supervisor_pid, DOWN_WITHIN).await {
            process::signal(state.supervisor_pid, libc::SIGKILL);
            process::wait_gone(state.supervisor_pid, Duration::from_secs(5)).await;
        }
    }
    // What the supervisor's end takes with it (PR_SET_PDEATHSIG) may still be dying: `down`
    // returns once all of it has ended (killed if it outlasts the grace).
    let me = std::process::id();
    let started: Vec<u32> = started.into_iter().filter(|p| *p != me).collect();
    let gone = futures::future::join_all(
        started
            .iter()
            .map(|pid| process::wait_gone(*pid, Duration::from_secs(10))),
    )
    .await;
    for (pid, gone) in started.iter().zip(gone) {
        if !gone {
            process::signal(*pid, libc::SIGKILL);
        }
    }
    // A supervisor killed outright leaves the namespace's name behind.
    Netns::recorded(&state.netns_path, state.netns_name.as_deref()).delete()?;
    if let Some(name) = &state.laptop_netns {
        laptop_of_name(name).delete()?;
    }
    std::fs::remove_file(cdir.state_file()).map_err(ClusterError::io(format!(
        "remove {}",
        cdir.state_file().display()
    )))?;
    println!("cluster in {} stopped", dir.display());
    Ok(())
}

/// The laptop namespace of a cluster namespace named `cluster_netns` (to delete).
fn laptop_of(cluster_netns: &str) -> Netns {
    laptop_of_name(&laptop::name_for(cluster_netns))
}

fn laptop_of_name(name: &str) -> Netns {
    Netns::recorded(&Path::new("/run/netns").join(name), Some(name))
}

/// Where `exec` runs a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seat {
    /// Inside the cluster's namespace: every cluster address answers.
    Cluster,
    /// The laptop's: the API server, load balancers and node external addresses only.
    Laptop,
}

/// Replaces this process with `command`, inside the cluster's namespace (or the laptop's),
/// with KUBECONFIG (unless set) and the cluster's kubectl first on PATH.
pub fn exec(dir: &Path, seat: Seat, command: &[String]) -> Result<()> {
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    if !state.supervisor_running() {
        return Err(ClusterError::NoCluster {
            dir: dir.to_path_buf(),
            why: "its supervisor is not running".into(),
        });
    }
    let ns = match (seat, &state.laptop_netns) {
        (Seat::Cluster, _) => Netns::recorded(&state.netns_path, state.netns_name.as_deref()),
        (Seat::Laptop, Some(name)) => laptop_of_name(name),
        (Seat::Laptop, None) => {
            return Err(ClusterError::Invalid(
                "this cluster was started without a laptop namespace; start it again".into(),
            ))
        }
    };
    ns.refuse_default_route()?;
    let Some((program, args)) = command.split_first() else {
        return Err(ClusterError::Invalid(
            "exec needs a command after --".into(),
        ));
    };
    ns.enter()?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![state.kube_bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Ok(joined) = std::env::join_paths(paths) {
        cmd.env("PATH", joined);
    }
    if std::env::var_os("KUBECONFIG").is_none() {
        cmd.env("KUBECONFIG", cdir.kubeconfig());
    }
    let e = cmd.exec();
    Err(ClusterError::Io {
        what: format!("run {program}"),
        source: e,
    })
}

pub fn status(dir: &Path) -> Result<()> {
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    let up = state.supervisor_running();
    println!(
        "cluster in {}: {}",
        dir.display(),
        if up { "up" } else { "not running" }
    );
    println!("  supervisor pid {}", state.supervisor_pid);
    println!("  network namespace {}", state.netns_path.display());
    println!("  kubeconfig {}", cdir.kubeconfig().display());
    for n in &state.nodes {
        println!(
            "  node {} ({}, {}, pool {})",
            n.name, n.arch, n.instance_type, n.pool
        );
    }
    // Not the nodes' 10.x addresses: from where this runs they would go out of the default
    // route. They are shown where they answer.
    println!(
        "  addresses of nodes, pods and services exist only inside its namespace: tools/cluster exec {} -- kubectl get nodes,services -o wide",
        dir.display()
    );
    if !up {
        return Err(ClusterError::NoCluster {
            dir: dir.to_path_buf(),
            why: "its supervisor is not running".into(),
        });
    }
    Ok(())
}

/// Writes `DIR/users/NAME.kubeconfig` for a user with a client certificate.
pub fn user(dir: &Path, name: &str, groups: &[String], namespace: Option<&str>) -> Result<PathBuf> {
    let cdir = ClusterDir::new(dir);
    cdir.read_state()?;
    if name.is_empty() || name.contains(['/', '\0']) {
        return Err(ClusterError::Invalid(format!("not a user name: {name:?}")));
    }
    let path = cdir.users().join(format!("{name}.kubeconfig"));
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    Pki::new(cdir.pki()).kubeconfig_for(&path, name, &groups, namespace)?;
    Ok(path)
}
