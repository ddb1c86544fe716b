//! Fixtures: the archbench binary, plans built from command lines, and real nginx.

#![allow(dead_code)]

pub mod caddy;
pub mod faulty;
pub mod faulty_h2;
pub mod faulty_h3;
pub mod kube;
pub mod nginx;
pub mod noise;
pub mod prometheus;
pub mod schema;
pub mod stalling;
pub mod synthetic;

use std::process::{Command, Output};
use std::sync::atomic::AtomicBool;

use archbench::cli::{Cli, Command as Sub};
use archbench::engine::Plan;
use archbench::stats::RunResult;
use clap::Parser as _;

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_archbench"))
}

/// Runs the archbench binary, killed should it outlast `timeout` (for commands that could
/// wait for something: a signal, a lingering endpoint, a slow server).
pub fn archbench_within(args: &[&str], timeout: std::time::Duration) -> Output {
    let child = bin()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("archbench binary runs");
    finish_within(child, timeout)
}

/// Runs the archbench binary to completion (every test command carries its own stop rule).
pub fn archbench(args: &[&str]) -> Output {
    bin().args(args).output().expect("archbench binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The real tool at `tool` and `archbench FRONT_END`, each run with the same `args`: their
/// outputs, the real one's first.
pub fn real_and_ours(tool: &std::path::Path, front_end: &str, args: &[&str]) -> (Output, Output) {
    let real = Command::new(tool).args(args).output().unwrap();
    let mut ours_args = vec![front_end];
    ours_args.extend_from_slice(args);
    (real, archbench(&ours_args))
}

/// What wrk says (and `archbench wrk` after it) when its check connect to a loopback `url`
/// is refused.
pub fn wrk_refused(url: &str) -> String {
    let port = url.rsplit(':').next().unwrap_or("").trim_end_matches('/');
    format!("unable to connect to 127.0.0.1:{port} Connection refused")
}

/// A JSON document a command wrote.
pub fn read_json(path: impl AsRef<std::path::Path>) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("the command wrote its JSON");
    serde_json::from_str(&text).expect("valid JSON")
}

/// The plan `archbench run ARGS…` would execute.
pub fn run_plan(args: &[&str]) -> Plan {
    let mut argv = vec!["archbench", "run"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv)
        .expect("valid test command line")
        .command
    {
        Sub::Run(a) => archbench::cli::run_plan(&a).expect("valid test plan"),
        _ => unreachable!("parsed as run"),
    }
}

/// `archbench run URL -n REQUESTS -c 1 -t 1 -o json`, which must succeed: its document.
pub fn run_json(url: &str, requests: u64) -> serde_json::Value {
    let n = requests.to_string();
    let o = archbench(&["run", url, "-n", &n, "-c", "1", "-t", "1", "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)))
}

/// Executes `archbench run ARGS…` in-process and returns its result.
pub fn run(args: &[&str]) -> RunResult {
    let stop = AtomicBool::new(false);
    archbench::cli::execute(&run_plan(args), &[], &stop, |_, _| {}).expect("run completes")
}

/// Asserts the invariant every run keeps: answered + failed = attempted, and the per-second
/// series and histograms agree with the totals.
pub fn assert_consistent(r: &RunResult) {
    let t = &r.totals;
    assert_eq!(t.requests + t.errors, t.attempted);
    let e = &r.errors;
    assert_eq!(
        e.connect + e.tls + e.timeout + e.read + e.write + e.protocol,
        t.errors
    );
    assert_eq!(r.histograms.total.0.len(), t.requests);
    assert_eq!(r.status_codes.values().sum::<u64>(), t.requests);
    let series: u64 = r.series.iter().map(|s| s.completed).sum();
    assert_eq!(series, t.requests, "per-second series adds up to the total");
    // Latency over time: the steps' histograms together are the run's, value for value.
    let mut steps = archbench::stats::latency_histogram();
    for s in &r.latency_series {
        let h = s.decode().expect("a step's histogram decodes");
        assert_eq!(h.len(), s.count);
        steps.add(&h).unwrap();
    }
    assert_eq!(
        steps, r.histograms.total.0,
        "latency series = the total histogram"
    );
}

/// A tool from Debian's packages; without it the test fails naming the package to install,
/// or, under ARCHBENCH_ALLOW_SKIPS=1, None and the skip listed when the run ends.
pub fn require_tool(name: &str) -> Option<std::path::PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let p = std::path::Path::new(dir).join(name);
        if p.exists() {
            return Some(p);
        }
    }
    let package = archbench_cluster::skips::package_of(name);
    cannot_run(&format!(
        "{name} is not installed (apt-get install {package})"
    ));
    None
}

/// This test cannot run here, because `why` (see `archbench_cluster::skips`).
pub fn cannot_run(why: &str) {
    archbench_cluster::skips::cannot_run(why);
}

/// Whether this process may make a network namespace of its own (`unshare -n`: root, or user
/// namespaces); otherwise a failure, or a listed skip.
pub fn network_namespace() -> bool {
    let Some(unshare) = require_tool("unshare") else {
        return false;
    };
    let o = std::process::Command::new(unshare)
        .args(["-n", "true"])
        .output()
        .unwrap();
    if o.status.success() {
        return true;
    }
    cannot_run(&format!(
        "cannot create a network namespace here ({}): run as root",
        stderr(&o).trim()
    ));
    false
}

/// `archbench serve` in a child process (so its CPU can be watched apart from the test's).
pub struct ServeChild {
    child: std::process::Child,
    pub url: String,
}

impl ServeChild {
    pub fn start(extra: &[&str]) -> ServeChild {
        let mut child = bin()
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("archbench serve starts");
        // It prints its URL once it is listening.
        let line = LineReader::new(child.stdout.take().unwrap()).wait_for("http://", PROMPTLY);
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("serve prints its URL")
            .to_string();
        ServeChild { child, url }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process that burns exactly one CPU-second (by its own clock) each time it is told
/// to, says so, and otherwise waits until it is dropped.
pub struct Burner {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: LineReader,
}

impl Burner {
    /// None (a listed skip, or a failure) without python3.
    pub fn spawn() -> Option<Burner> {
        let python = require_tool("python3")?;
        let mut child = std::process::Command::new(python)
            .args([
                "-c",
                "import sys,time\nfor _ in sys.stdin:\n    t=time.process_time()\n    while time.process_time()-t<1.0: pass\n    print('burnt',flush=True)",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 starts");
        let stdin = child.stdin.take();
        let out = LineReader::new(child.stdout.take().expect("burner stdout"));
        Some(Burner { child, stdin, out })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Burns one CPU-second and returns once the child reports it done.
    pub fn burn_one_second(&mut self) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("burner stdin");
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
        self.out.wait_for("burnt", PROMPTLY);
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a child process gets for anything it should do promptly; a test waiting longer
/// fails with a message instead of hanging.
pub const PROMPTLY: std::time::Duration = std::time::Duration::from_secs(60);

/// Polls `cond` until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Polls `f` until it gives a value; panics naming `what` after `timeout`.
pub fn wait_for_value<T>(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gave up after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Waits until `sample` gives a value other than the first it gave (None: nothing to compare
/// yet): live figures that move.
pub fn wait_for_change<T: PartialEq>(
    what: &str,
    timeout: std::time::Duration,
    mut sample: impl FnMut() -> Option<T>,
) {
    let mut first = None;
    wait_until(what, timeout, || match (sample(), &first) {
        (Some(now), None) => {
            first = Some(now);
            false
        }
        (Some(now), Some(then)) => now != *then,
        (None, _) => false,
    });
}

/// The lines of a child's stream, read on a thread so that waiting for one has a deadline.
pub struct LineReader {
    rx: std::sync::mpsc::Receiver<String>,
}

impl LineReader {
    pub fn new(stream: impl std::io::Read + Send + 'static) -> LineReader {
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LineReader { rx }
    }

    /// The first line containing `needle`; panics if the stream ends or `timeout` passes.
    pub fn wait_for(&self, needle: &str, timeout: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no line with {needle:?} within {timeout:?}")
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the stream ended before a line with {needle:?}")
                }
            }
        }
    }

    /// Every line until the stream ends (at most `timeout`), joined.
    pub fn rest(&self, timeout: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::new();
        while let Ok(line) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            out.push(line);
        }
        out.join("\n")
    }
}

/// Waits for a child to exit and collects its output; kills it and fails after `timeout`.
pub fn finish_within(child: std::process::Child, timeout: std::time::Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.expect("child output"),
        Err(_) => {
            // SAFETY: killing our own child, which did not exit in time.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("process {pid} did not exit within {timeout:?}");
        }
    }
}

/// Output of a tmux pane, as a user sees it.
pub fn tmux_capture(session: &str) -> String {
    let o = std::process::Command::new("tmux")
        .args(["capture-pane", "-p", "-t", session])
        .output()
        .unwrap();
    stdout(&o)
}

/// A tmux command that must succeed.
pub fn tmux(args: &[&str]) {
    let o = std::process::Command::new("tmux")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "tmux {args:?}: {}", stderr(&o));
}

/// A tmux session, killed when the test ends (also when an assertion fails first).
pub struct TmuxSession(String);

impl Drop for TmuxSession {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

/// A detached tmux session of 100×30 running `sh -c script`, its pane kept after it ends so
/// that what it printed can be captured.
pub fn tmux_pane(session: &str, script: &str) -> TmuxSession {
    // One tmux command list: the option is set before the server goes back to its event
    // loop, so a script that ends at once still leaves its pane to capture.
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "100",
        "-y",
        "30",
        "sh",
        "-c",
        script,
        ";",
        "set-option",
        "-t",
        session,
        "remain-on-exit",
        "on",
    ]);
    TmuxSession(session.to_string())
}

/// A pane's terminal modes as the shell line of the tmux tests prints them ("MODE icanon").
pub const PRINT_TERMINAL_MODES: &str =
    "stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)' | sed 's/^/MODE /'";

/// Whether a screen shows what [`PRINT_TERMINAL_MODES`] prints for a restored (cooked)
/// terminal: `icanon` and `echo` on.
pub fn terminal_restored(screen: &str) -> bool {
    let on = |mode: &str| screen.lines().any(|l| l.trim() == format!("MODE {mode}"));
    on("icanon") && on("echo")
}

/// A child killed when the test ends without collecting it: a failed assertion must not leave
/// a process behind (a `--linger` one would wait for Ctrl-C forever).
pub struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    pub fn new(child: std::process::Child) -> KillOnDrop {
        KillOnDrop(Some(child))
    }

    /// Sends `signal` (SIGINT: Ctrl-C) and collects the child within `timeout`.
    pub fn signal_and_finish(mut self, signal: i32, timeout: std::time::Duration) -> Output {
        let child = self.0.take().expect("the child is collected once");
        // SAFETY: signalling our own child, not yet waited for (its pid is still its own).
        unsafe { libc::kill(child.id() as i32, signal) };
        finish_within(child, timeout)
    }

    /// [`finish_within`], taking the child over.
    pub fn finish_within(mut self, timeout: std::time::Duration) -> Output {
        let child = self.0.take().expect("the child is collected once");
        finish_within(child, timeout)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A comparison document's metric by name (`req/s`, `p99`, ...).
pub fn metric<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no metric {name}"))
}

/// The embedded server on two threads, framing its bodies as asked, each response `delay` late.
pub fn embedded_server(
    framing: archbench::serve::Framing,
    delay: std::time::Duration,
) -> archbench::serve::Server {
    archbench::serve::Server::start(archbench::serve::ServeOptions {
        threads: 2,
        framing,
        delay,
        ..archbench::serve::ServeOptions::default()
    })
    .expect("embedded server starts")
}

/// A staged open loop's per-second series follows what it asked (after its first second):
/// each second's requests within 2% of its target rate, and within what the client's own
/// worst send lateness (`pacing.lateness.max_us`) moves across a second's edge: a starved
/// client (a loaded test machine stalling it for a second) sends late and says so in its
/// lateness, which other tests bound; this one checks the schedule's shape.
pub fn assert_series_follows_its_targets(series: &[serde_json::Value], pacing: &serde_json::Value) {
    let late_s = pacing["lateness"]["max_us"].as_f64().unwrap_or(0.0) / 1e6;
    for s in &series[1..] {
        let sent = s["completed"].as_f64().unwrap() + s["errors"].as_f64().unwrap();
        let target = s["target_rate"].as_f64().unwrap();
        let slack = 0.02 * target + target * late_s.min(1.0);
        assert!(
            (sent - target).abs() <= slack,
            "second {}: {sent} sent for {target} (max send lateness {late_s} s): {series:?}",
            s["second"]
        );
    }
}
