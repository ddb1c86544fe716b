//! attach and port-forward through the API server to the node agent, with the real kubectl:
//! attach's output from the moment of attach and its stdin into a `stdin: true` container,
//! and its refusal of a terminal (kubectl in a tmux pane asks for one);
//! port-forward over SPDY tunnelled in a WebSocket (kubectl's default) and over a plain SPDY
//! upgrade, to the pod's port and to a port only its loopback has, counted in nginx's
//! access log, concurrent connections, a body of over a MiB, and a port nothing listens on.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

const ATTACH: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: nginx:1.27
    command: [sh, -c, 'i=0; while [ $i -lt 100 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done']
---
apiVersion: v1
kind: Pod
metadata: {name: echo}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: nginx:1.27
    stdin: true
    stdinOnce: true
    command: [sh, -c, 'while read l; do echo "got $l"; done; echo bye']
"#;

/// Runs `cmd` (stdin fed with `input`) to completion within `deadline`.
fn run_with_input(mut cmd: Command, input: Vec<u8>, deadline: Duration) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&input);
    });
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            archbench_cluster::process::signal(pid, libc::SIGKILL);
            panic!("{cmd:?} did not finish within {deadline:?}");
        }
    }
}

fn ticks(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .collect()
}

#[test]
fn attach_streams_output_from_now_and_feeds_a_stdin_container() {
    let Some(c) = shared() else { return };
    let ns = "t-attach";
    namespace(c, ns);
    apply(c, ns, ATTACH);
    // the ticker has been running a while: what it printed before is not attach's
    let before = wait_for("the ticker's fifth line", PROMPTLY, || {
        let o = c.kubectl(&["-n", ns, "logs", "ticker"]);
        let seen = ticks(&stdout(&o));
        (seen.len() >= 5).then(|| *seen.last().unwrap())
    });
    let started = Instant::now();
    let o = c.kubectl(&["-n", ns, "attach", "ticker", "-c", "main"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let seen = ticks(&stdout(&o));
    assert!(!seen.is_empty(), "attach saw no output: {}", stderr(&o));
    assert!(
        seen[0] > before,
        "attach replayed old output: {seen:?} after {before}"
    );
    // every line from then on, in order, to the container's last
    let expected: Vec<u32> = (seen[0]..100).collect();
    assert_eq!(seen, expected);
    eprintln!("attach to the ticker: {:?}", started.elapsed());
    // stdin: lines sent come back, and the end of kubectl's input closes the container's
    // (stdinOnce), which ends its loop and so the container and the attach
    wait_for("the echo pod to run", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "echo"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    let mut cmd = c.command("kubectl");
    cmd.args(["-n", ns, "attach", "-i", "echo", "-c", "main"]);
    let o = run_with_input(cmd, b"one\ntwo\nthree\n".to_vec(), PROMPTLY);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "got one\ngot two\ngot three\nbye\n");
    wait_for("the echo pod to succeed", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "echo"]);
        (p["status"]["phase"] == "Succeeded").then_some(())
    });
    // a container that is not running any more cannot be attached to
    let o = c.kubectl(&["-n", ns, "attach", "echo", "-c", "main"]);
    assert!(!o.status.success());
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

const FORWARDED: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: page}
data:
  index.html: "through port-forward\n"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra}
data:
  extra.conf: |
    server { listen 127.0.0.1:8081; location / { return 200 "loopback only\n"; } }
    server { listen 8080; root /run/www; }
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    volumeMounts:
    - {name: page, mountPath: /var/www/html}
    - {name: extra, mountPath: /etc/nginx/conf.d}
  volumes:
  - {name: page, configMap: {name: page}}
  - {name: extra, configMap: {name: extra}}
"#;

/// The big body: 1.2 MB of a pattern whose every line is numbered, so a lost or reordered
/// frame shows.
fn big_body() -> Vec<u8> {
    let mut b = Vec::new();
    let mut i = 0u32;
    while b.len() < 1_200_000 {
        b.extend_from_slice(format!("{i:08} abcdefghijklmnopqrstuvwxyz\n").as_bytes());
        i += 1;
    }
    b
}

/// A running `kubectl port-forward`: its local port for each remote one, and its stderr.
struct Forward {
    child: Child,
    local: Vec<(u16, u16)>,
    stderr: mpsc::Receiver<String>,
}

impl Forward {
    fn start(c: &TestCluster, ns: &str, websockets: bool, remote: &[u16]) -> Forward {
        let mut cmd = c.command("kubectl");
        cmd.args(["-n", ns, "port-forward", "pod/web"])
            .args(remote.iter().map(|p| format!(":{p}")))
            .env(
                "KUBECTL_PORT_FORWARD_WEBSOCKETS",
                if websockets { "true" } else { "false" },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let (lines_tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = lines_tx.send(l);
            }
        });
        let (err_tx, stderr) = mpsc::channel();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            let _ = err_tx.send(s);
        });
        // "Forwarding from 127.0.0.1:LOCAL -> REMOTE", one per port (and one for [::1])
        let deadline = Instant::now() + PROMPTLY;
        let mut local = Vec::new();
        while local.len() < remote.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(l) = lines.recv_timeout(left) else {
                let _ = child.kill();
                panic!("kubectl port-forward did not say where it listens: {local:?}");
            };
            if let Some(rest) = l.strip_prefix("Forwarding from 127.0.0.1:") {
                let (l, r) = rest.split_once(" -> ").unwrap();
                local.push((r.parse().unwrap(), l.parse().unwrap()));
            }
        }
        Forward {
            child,
            local,
            stderr,
        }
    }

    fn port(&self, remote: u16) -> u16 {
        self.local.iter().find(|(r, _)| *r == remote).unwrap().1
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET through a local port in the cluster's namespace: (HTTP status, body).
fn get(c: &TestCluster, port: u16, path: &str) -> (String, Vec<u8>) {
    let mut cmd = c.command("curl");
    cmd.args(["-s", "-m", "20", "-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}{path}"));
    let o = output_within(cmd, PROMPTLY);
    let text = o.stdout;
    let at = text.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&text[(at + 1).min(text.len())..]).into_owned();
    (code, text[..at].to_vec())
}

fn forward_once(c: &TestCluster, ns: &str, websockets: bool, big: &[u8]) {
    let mut f = Forward::start(c, ns, websockets, &[80, 8080, 8081, 9]);
    let started = Instant::now();
    let page = ("200".to_string(), b"through port-forward\n".to_vec());
    for _ in 0..5 {
        assert_eq!(get(c, f.port(80), "/"), page);
    }
    // four connections at once, each its own pair of streams in the one session
    let port = f.port(80);
    std::thread::scope(|s| {
        let all: Vec<_> = (0..4).map(|_| s.spawn(move || get(c, port, "/"))).collect();
        for h in all {
            assert_eq!(h.join().unwrap(), page);
        }
    });
    // a port only the pod's loopback has: the node connects inside the pod's namespace
    assert_eq!(
        get(c, f.port(8081), "/lo"),
        ("200".to_string(), b"loopback only\n".to_vec())
    );
    let (code, body) = get(c, f.port(8080), "/big");
    assert_eq!(code, "200");
    assert_eq!(body.len(), big.len());
    assert!(body == big, "the big body arrived altered");
    eprintln!(
        "port-forward (websockets={websockets}): 11 requests in {:?}",
        started.elapsed()
    );
    // nothing listens on 9: kubectl reports it (and client-go ends the forward)
    let (code, _) = get(c, f.port(9), "/");
    assert_eq!(code, "000", "no answer through a refused port");
    let deadline = Instant::now() + PROMPTLY;
    while f.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "kubectl went on after the error");
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = f.stderr.recv_timeout(PROMPTLY).unwrap();
    assert!(err.contains("error forwarding port 9 to pod web"), "{err}");
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains("lost connection to pod"), "{err}");
}

#[test]
fn port_forward_through_a_websocket_tunnel_and_plain_spdy() {
    let Some(c) = shared() else { return };
    let ns = "t-forward";
    namespace(c, ns);
    apply(c, ns, FORWARDED);
    wait_for("the pod to run", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "web"]);
        (p["status"]["containerStatuses"][0]["ready"] == true).then_some(())
    });
    let big = big_body();
    let mut cmd = c.command("kubectl");
    cmd.args(["-n", ns, "exec", "-i", "web", "--", "sh", "-c"])
        .arg("mkdir -p /run/www && cat > /run/www/big");
    let o = run_with_input(cmd, big.clone(), PROMPTLY);
    assert!(o.status.success(), "{}", stderr(&o));
    forward_once(c, ns, true, &big);
    forward_once(c, ns, false, &big);
    // each way was the one asked for
    let agents: String = c
        .nodes()
        .iter()
        .map(|n| c.log(&format!("node-{}", n.name)))
        .collect();
    let said = |how: &str| {
        agents
            .lines()
            .filter(|l| l.ends_with(&format!("port-forward to {ns}/web: {how}")))
            .count()
    };
    assert_eq!(said("SPDY/3.1 in a WebSocket"), 1, "{agents}");
    assert_eq!(said("SPDY/3.1"), 1, "{agents}");
    // nginx logged exactly the requests made: 9 of the page and 1 of the big body each way
    let log = c.pod_log(ns, "web");
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("\"GET / HTTP/1.1\" 200"), 18, "{log}");
    assert_eq!(count("\"GET /big HTTP/1.1\" 200"), 2, "{log}");
    assert_eq!(count("\"GET /lo HTTP/1.1\" 200"), 2, "{log}");
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

const TERMINAL: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: terminal}
spec:
  containers:
  - name: main
    image: nginx:1.27
    tty: true
    stdin: true
    command: [sleep, "600"]
"#;

/// A tmux command that must succeed.
fn tmux(args: &[&str]) -> String {
    let o = Command::new("tmux").args(args).output().unwrap();
    assert!(o.status.success(), "tmux {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// The tmux session, killed when the test ends (an assertion failing first too).
struct Tmux(&'static str);

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", self.0])
            .output();
    }
}

#[test]
fn attach_with_a_terminal_is_refused_in_one_message() {
    let Some(c) = shared() else { return };
    if Command::new("tmux").arg("-V").output().is_err() {
        archbench_cluster::skips::cannot_run("tmux is not installed (apt-get install tmux)");
        return;
    }
    let ns = "t-terminal";
    namespace(c, ns);
    apply(c, ns, TERMINAL);
    wait_for("the pod to run", PROMPTLY, || {
        let p = c.get_json(&["-n", ns, "pod", "terminal"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    // kubectl asks for a TTY only when its stdin is a terminal: a tmux pane's is
    let cmd = c.command("kubectl");
    let path = cmd
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v)
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap();
    let script = format!(
        "{} env PATH={path} KUBECONFIG={} kubectl -n {ns} attach -it terminal -c main; echo EXIT=$?",
        c.shell_prefix(),
        c.kubeconfig().display()
    );
    let session = "archbench-attach-tty";
    let _guard = Tmux(session);
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "120",
        "-y",
        "30",
        "sh",
        "-c",
        &script,
        ";",
        "set-option",
        "-t",
        session,
        "remain-on-exit",
        "on",
    ]);
    let screen = wait_for("kubectl to give up", PROMPTLY, || {
        let s = tmux(&["capture-pane", "-p", "-J", "-t", session]);
        s.contains("EXIT=").then_some(s)
    });
    assert!(
        screen.contains("attach with a TTY is not supported"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=1"), "{screen}");
    c.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}
