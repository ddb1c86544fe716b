//! Clusters for tests: one shared by a test process (started on first use, stopped by its
//! supervisor when the process ends), or one of a test's own (stopped on drop). Commands run
//! inside the cluster's network namespace — the only place its addresses may be reached —
//! through [`TestCluster::command`], which refuses a namespace with a default route.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

use crate::error::{ClusterError, Result};
use crate::layout::{ClusterDir, State};
use crate::netns::Netns;
use crate::topology::NodeSpec;

/// A running cluster a test uses.
pub struct TestCluster {
    dir: ClusterDir,
    state: State,
    /// Stopped when dropped (a test's own); the shared one lives as long as the process.
    owned: bool,
}

/// How long one kubectl command may take in a test.
const KUBECTL_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

/// What a test cluster is started with.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    pub nodes: Option<Vec<NodeSpec>>,
    /// The program archbench images run.
    pub archbench_binary: Option<PathBuf>,
    /// Images that run another nginx program (IMAGE, PROGRAM).
    pub nginx_builds: Vec<(String, PathBuf)>,
    /// The scheduler's back-off in seconds at every try (else Kubernetes' default).
    pub scheduler_backoff: Option<u32>,
}

/// The harness binary beside the test binary (`target/debug/archbench-cluster`).
fn harness() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(ClusterError::io("find the test binary"))?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| ClusterError::Invalid("the test binary has no target directory".into()))?;
    let p = dir.join("archbench-cluster");
    if !p.exists() {
        return Err(ClusterError::Invalid(format!(
            "{} is not built: cargo test --workspace builds it (or cargo build -p archbench-cluster)",
            p.display()
        )));
    }
    Ok(p)
}

/// Why no test cluster can run here (None: it can): root is needed (namespaces, cgroups,
/// nftables), and the Kubernetes components, built already or buildable (Go on PATH).
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the test cluster needs root (network namespaces, cgroups, nftables)".into());
    }
    let on_path = |p: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kube/build");
    let built = std::env::var_os("ARCHBENCH_KUBE_BIN").is_some()
        || Command::new(&script)
            .arg("--print")
            .output()
            .ok()
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            .is_some_and(|bin| bin.join("kube-apiserver").exists());
    if !built && !on_path("go") {
        return Some("Go is not installed: the test cluster's components are built with it and the Go module proxy (tools/kube/build)".into());
    }
    if !Path::new(crate::node::emulation::QEMU_AARCH64_BINFMT).is_file() {
        return Some("qemu-aarch64-static is missing: the arm64 node runs Debian's arm64 nginx under it (apt-get install qemu-user-static)".into());
    }
    if harness()
        .ok()
        .and_then(|h| crate::lifecycle::arm64_root_beside(&h))
        .is_none()
    {
        return Some("Debian's arm64 nginx is not fetched: the arm64 node runs it (tools/arm64/fetch, which tools/test runs)".into());
    }
    None
}

/// Removes the directories of earlier test processes' clusters (their supervisors stopped
/// them when those processes ended; the files stay behind).
fn sweep_stale(root: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let owner = name.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        let stale = owner.is_some_and(|pid| !crate::process::alive(pid));
        let state = ClusterDir::new(e.path()).read_state();
        let stopped = state.map_or(true, |s| !crate::process::alive(s.supervisor_pid));
        if stale && stopped {
            // A supervisor killed outright leaves its namespace's name mounted.
            if let Ok(state) = ClusterDir::new(e.path()).read_state() {
                let _ = Netns::recorded(&state.netns_path, state.netns_name.as_deref()).delete();
                if let Some(name) = &state.laptop_netns {
                    let path = Path::new("/run/netns").join(name);
                    let _ = Netns::recorded(&path, Some(name)).delete();
                }
            }
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl TestCluster {
    /// The cluster of this name shared by this test process: started once, on first use
    /// (with the options of that first use), stopped when the process ends.
    pub fn shared(name: &str, opts: &TestOptions) -> Result<&'static TestCluster> {
        type Started = std::result::Result<&'static TestCluster, String>;
        static SHARED: OnceLock<Mutex<HashMap<String, Started>>> = OnceLock::new();
        let mut map = SHARED
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let started = map.entry(name.to_string()).or_insert_with(|| {
            TestCluster::start_as(opts, name, false)
                .map(|c| &*Box::leak(Box::new(c)))
                .map_err(|e| e.to_string())
        });
        started
            .clone()
            .map_err(|e| ClusterError::Invalid(format!("the shared test cluster {name}: {e}")))
    }

    /// A cluster of the caller's own (other nodes, faults that would disturb others).
    pub fn start(opts: &TestOptions, name: &str) -> Result<TestCluster> {
        TestCluster::start_as(opts, name, true)
    }

    fn start_as(opts: &TestOptions, name: &str, owned: bool) -> Result<TestCluster> {
        let root = std::env::temp_dir().join("archbench-test-clusters");
        std::fs::create_dir_all(&root)
            .map_err(ClusterError::io("create the clusters' directory"))?;
        sweep_stale(&root);
        let pid = std::process::id();
        let dir = root.join(format!("owner-{pid}-{name}"));
        let mut cmd = Command::new(harness()?);
        cmd.arg("up").arg(&dir).arg("--owner").arg(pid.to_string());
        if let Some(b) = &opts.archbench_binary {
            cmd.arg("--archbench").arg(b);
        }
        for (image, program) in &opts.nginx_builds {
            cmd.arg("--nginx-build")
                .arg(format!("{image}={}", program.display()));
        }
        if let Some(s) = opts.scheduler_backoff {
            cmd.arg("--scheduler-backoff").arg(s.to_string());
        }
        if let Some(nodes) = &opts.nodes {
            let spec = serde_json::to_string(nodes)
                .map_err(|e| ClusterError::Invalid(format!("nodes: {e}")))?;
            cmd.arg("--nodes-json").arg(spec);
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(ClusterError::io("run archbench-cluster up"))?;
        if !out.status.success() {
            return Err(ClusterError::Command {
                what: format!("archbench-cluster up {}", dir.display()),
                status: out.status.to_string(),
                stderr: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        let cdir = ClusterDir::new(&dir);
        let state = cdir.read_state()?;
        Ok(TestCluster {
            dir: cdir,
            state,
            owned,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir.root
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.kubeconfig()
    }

    pub fn nodes(&self) -> &[NodeSpec] {
        &self.state.nodes
    }

    /// `program` set up to run inside the cluster's network namespace, with KUBECONFIG and
    /// the cluster's kubectl first on PATH. Panics (a test's set-up failed) if the namespace
    /// has a default route.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.command_in(Netns::recorded(&self.state.netns_path, None), program)
    }

    /// The same from the laptop's namespace (see `laptop`): the cluster as a laptop reaches
    /// AKS — the API server, load balancers and node external addresses only.
    pub fn laptop_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.command_in(self.laptop(), program)
    }

    /// The laptop's namespace.
    fn laptop(&self) -> Netns {
        let Some(name) = &self.state.laptop_netns else {
            panic!(
                "the cluster in {} has no laptop namespace",
                self.dir.root.display()
            );
        };
        Netns::recorded(&Path::new("/run/netns").join(name), None)
    }

    fn command_in(&self, ns: Netns, program: impl AsRef<std::ffi::OsStr>) -> Command {
        if let Err(e) = ns.refuse_default_route() {
            panic!("{e}");
        }
        let file = match File::open(&ns.path) {
            Ok(f) => f,
            Err(e) => panic!("the network namespace {}: {e}", ns.path.display()),
        };
        let mut cmd = Command::new(program);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.state.kube_bin.clone()];
        paths.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
        cmd.env("KUBECONFIG", self.kubeconfig());
        // The kubectl cache of a test's own (discovery), never the user's.
        cmd.env("KUBECACHEDIR", self.dir.root.join("kubectl-cache"));
        // SAFETY: setns is async-signal-safe; the descriptor stays open in the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// The words that run a command inside the cluster's network namespace from a shell
    /// (a tmux pane's script): `nsenter --net=PATH --`. Panics if it has a default route.
    pub fn shell_prefix(&self) -> String {
        shell_prefix_of(&Netns::recorded(&self.state.netns_path, None))
    }

    /// The same for the laptop's namespace.
    pub fn laptop_shell_prefix(&self) -> String {
        shell_prefix_of(&self.laptop())
    }

    /// Runs `f` on a thread of its own inside the cluster's network namespace (a scrape of an
    /// endpoint that listens there). Panics if the namespace has a default route.
    pub fn within<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        within(Netns::recorded(&self.state.netns_path, None), f)
    }

    /// The same in the laptop's namespace (an endpoint a command run there listens on).
    pub fn laptop_within<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        within(self.laptop(), f)
    }

    /// The cluster's kubectl with these arguments, run to completion (within 2 minutes).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(self.state.kube_bin.join("kubectl"));
        cmd.args(args).stdin(Stdio::null());
        output_within(cmd, KUBECTL_WITHIN)
    }

    /// kubectl that must succeed: its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let o = self.kubectl(args);
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `kubectl get … -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        let text = self.kubectl_ok(&a);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {a:?}: {e}: {text}"))
    }

    /// The API server's audit log so far: one JSON object per request it answered.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        self.log("audit")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// A container's log as the node agent wrote it (all runs, in order): for counting a
    /// pod's access-log lines without an API round trip.
    pub fn pod_log(&self, ns: &str, pod: &str) -> String {
        let prefix = format!("{ns}_{pod}_");
        let mut out = String::new();
        for n in &self.state.nodes {
            let Ok(rd) = std::fs::read_dir(self.dir.node_dir(&n.name).join("pods")) else {
                continue;
            };
            for e in rd.flatten() {
                if !e.file_name().to_string_lossy().starts_with(&prefix) {
                    continue;
                }
                let Ok(containers) = std::fs::read_dir(e.path().join("logs")) else {
                    continue;
                };
                for c in containers.flatten() {
                    let mut runs: Vec<PathBuf> = std::fs::read_dir(c.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|r| r.path())
                        .collect();
                    runs.sort_by_key(|p| {
                        p.file_stem()
                            .and_then(|s| s.to_str())
                            .and_then(|s| s.parse::<u32>().ok())
                    });
                    for r in runs {
                        let data = std::fs::read(&r).unwrap_or_default();
                        let text = crate::node::logfile::render(
                            &data,
                            &crate::node::logfile::Read::default(),
                        );
                        out.push_str(&String::from_utf8_lossy(&text));
                    }
                }
            }
        }
        out
    }

    /// A kubeconfig for a user with a client certificate (groups as its organisations).
    pub fn user(&self, name: &str, groups: &[&str], namespace: Option<&str>) -> PathBuf {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        match crate::lifecycle::user(&self.dir.root, name, &groups, namespace) {
            Ok(p) => p,
            Err(e) => panic!("user {name}: {e}"),
        }
    }

    /// Turns a fault on or off (`withhold-load-balancers`, `stop-heartbeats:NODE`).
    pub fn fault(&self, name: &str, on: bool) {
        let set =
            crate::faults::Fault::parse(name).and_then(|f| crate::faults::set(&self.dir, &f, on));
        if let Err(e) = set {
            panic!("fault {name}: {e}");
        }
    }

    /// SIGKILLs a pod's containers (its restart policy then applies).
    pub fn kill_pod(&self, ns: &str, pod: &str) {
        if let Err(e) = crate::node::kill_pod(&self.dir.root, &format!("{ns}/{pod}")) {
            panic!("kill {ns}/{pod}: {e}");
        }
    }

    /// A component's log.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.log(name)).unwrap_or_default()
    }
}

impl TestCluster {
    /// What the API server holds of the workloads, written beside the logs for a failed
    /// test: pods, Deployments and ReplicaSets, endpoint slices and events, all namespaces.
    fn write_what_it_holds(&self) {
        let mut text = String::new();
        for what in [
            "pods,deployments,replicasets,endpointslices",
            "events --sort-by=.lastTimestamp",
        ] {
            let mut args = vec!["get"];
            args.extend(what.split(' '));
            args.extend(["-A", "-o", "wide"]);
            let o = self.kubectl(&args);
            text.push_str(&format!(
                "$ kubectl {}\n{}{}\n",
                args.join(" "),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        let _ = std::fs::write(self.dir.root.join("at-failure.txt"), text);
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // A failed test's cluster keeps what tells why: the API server's view, every
        // component's and pod's log, moved where no later run sweeps it.
        let failed = std::thread::panicking();
        if failed {
            self.write_what_it_holds();
        }
        if let Ok(exe) = harness() {
            let _ = Command::new(exe)
                .arg("down")
                .arg(&self.dir.root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let kept = std::env::temp_dir().join("archbench-failed-clusters");
        let to = self.dir.root.file_name().map(|n| kept.join(n));
        let moved = failed
            && to.as_ref().is_some_and(|to| {
                let _ = std::fs::remove_dir_all(to);
                std::fs::create_dir_all(&kept).is_ok()
                    && std::fs::rename(&self.dir.root, to).is_ok()
            });
        match to {
            Some(to) if moved => eprintln!("the failed test's cluster is kept in {}", to.display()),
            _ => {
                let _ = std::fs::remove_dir_all(&self.dir.root);
            }
        }
    }
}

/// Runs a command to completion within `deadline`, its output captured; panics (killing it)
/// when it outlasts the deadline.
pub fn output_within(mut cmd: Command, deadline: std::time::Duration) -> Output {
    let what = format!("{cmd:?}");
    let child = match cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => panic!("{what}: {e}"),
    };
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => {
            crate::process::signal(pid, libc::SIGKILL);
            panic!("{what} did not finish within {deadline:?}");
        }
    }
}

fn shell_prefix_of(ns: &Netns) -> String {
    if let Err(e) = ns.refuse_default_route() {
        panic!("{e}");
    }
    format!("nsenter --net={} --", ns.path.display())
}

/// Runs `f` on a thread of its own in `ns`; panics if it has a default route.
fn within<T: Send + 'static>(ns: Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    if let Err(e) = ns.refuse_default_route() {
        panic!("{e}");
    }
    match ns.within(move || Ok(f())) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}
