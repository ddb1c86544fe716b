//! `archbench k8s` end to end against the stand-in cluster (archbench-standin: the real
//! Kubernetes API over HTTP on 127.0.0.1, two nodes amd64 and arm64, pods backed by real nginx
//! processes on 127.1.x.y). What only the stand-in verified is listed in the README.

use std::process::Output;

use archbench_standin::{Cluster, NodeSpec, Options};

use crate::util::{bin, finish_within, read_json, stderr, stdout, PROMPTLY};

/// A stand-in cluster, or None (with a visible note) where pods cannot run: they need root
/// (namespaces, port 80) and nginx. ARCHBENCH_REQUIRE_NGINX=1 (CI) makes that a failure.
fn cluster(opts: Options) -> Option<Cluster> {
    crate::util::require_tool("nginx")?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("ARCHBENCH_REQUIRE_NGINX").is_none(),
            "the stand-in's pods need root here"
        );
        eprintln!("SKIPPED: the stand-in's pods need root (namespaces, port 80)");
        return None;
    }
    Some(
        Cluster::start(Options {
            restart_backoff: std::time::Duration::from_millis(100),
            termination_grace_cap: Some(std::time::Duration::from_secs(1)),
            ..opts
        })
        .expect("the stand-in starts"),
    )
}

/// `archbench k8s --kubeconfig … ARGS`, bounded in time.
fn k8s(c: &Cluster, args: &[&str]) -> Output {
    let child = bin()
        .arg("k8s")
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("archbench runs");
    finish_within(child, PROMPTLY * 2)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// The tuned configuration with an access log counted per request on the pod's stdout.
fn counted_conf() -> String {
    archbench::k8s::TUNED_NGINX_CONF.replace(
        "access_log off;",
        "log_format counted '$connection $status \"$request\"';\n    access_log /var/log/nginx/access.log counted;",
    )
}

/// Access-log lines of every nginx pod (the counted format: "CONN STATUS \"REQUEST\"").
fn access_lines(c: &Cluster, pods: &[String]) -> usize {
    pods.iter()
        .map(|p| {
            c.pod_log("nginx", p)
                .lines()
                .filter(|l| l.contains("\"GET / HTTP/1.1\""))
                .count()
        })
        .sum()
}

fn pod_names(status: &str) -> Vec<String> {
    status
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

#[test]
fn the_guides_workflow_end_to_end() {
    let Some(c) = cluster(Options::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // up: both architectures on their own nodes, addresses on the load balancer.
    let up = ok(&k8s(&c, &["up", "--wait-timeout", "60s"]));
    assert!(
        up.contains("Deployment nginx-arm-deployment: created"),
        "{up}"
    );
    let rows: Vec<&str> = up
        .lines()
        .filter(|l| l.starts_with("intel ") || l.starts_with("arm "))
        .collect();
    assert_eq!(rows.len(), 2, "{up}");
    for row in &rows {
        let arch = if row.starts_with("arm") {
            "arm64"
        } else {
            "amd64"
        };
        assert!(row.contains(arch), "{row}");
        assert!(row.contains("127.3."), "a LoadBalancer address: {row}");
        assert!(row.contains(" yes "), "ready: {row}");
    }
    // A second up changes nothing and says so.
    let again = ok(&k8s(&c, &["up", "--wait-timeout", "60s"]));
    assert!(again.contains("nothing changed"), "{again}");
    // curl: the tuned JSON names the pod that answered; multiarch spreads over both.
    let one = ok(&k8s(&c, &["curl", "arm"]));
    assert!(one.contains("\"message\": \"nginx response\""), "{one}");
    assert!(one.contains("answered by nginx-arm-deployment-"), "{one}");
    let spread = ok(&k8s(&c, &["curl", "multiarch", "--count", "12"]));
    let split = spread
        .lines()
        .find(|l| l.starts_with("answers by architecture"))
        .unwrap();
    assert!(
        split.contains("arm ") && split.contains("intel "),
        "{split}"
    );
    // config: a file with a counted access log, checked with the pods' nginx -t first.
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    let before = pod_names(&ok(&k8s(&c, &["status"])));
    let applied = ok(&k8s(
        &c,
        &["config", conf.to_str().unwrap(), "--wait-timeout", "60s"],
    ));
    assert!(applied.contains("nginx -t in nginx-"), "{applied}");
    let pods = pod_names(&ok(&k8s(&c, &["status"])));
    assert_eq!(pods.len(), 2);
    assert!(
        pods.iter().all(|p| !before.contains(p)),
        "new pods: {before:?} -> {pods:?}"
    );
    // A configuration nginx rejects changes nothing.
    let bad = dir.path().join("bad.conf");
    std::fs::write(&bad, "events {}\nhttp { no_such_directive on; }\n").unwrap();
    let o = k8s(&c, &["config", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nginx rejects the configuration"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("no_such_directive"), "{}", stderr(&o));
    // One that passes nginx -t but never serves the container's port is rolled back.
    let deaf = dir.path().join("deaf.conf");
    std::fs::write(&deaf, counted_conf().replace("listen 80;", "listen 8080;")).unwrap();
    let o = k8s(
        &c,
        &["config", deaf.to_str().unwrap(), "--wait-timeout", "8s"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the previous one is back"),
        "{}",
        stderr(&o)
    );
    let status = ok(&k8s(&c, &["status"]));
    assert_eq!(status.matches(" yes ").count(), 2, "{status}");
    let pods = pod_names(&status);
    // top: each pod's own cgroup, through exec.
    let top = ok(&k8s(&c, &["top"]));
    assert!(top.contains("cgroup (exec)"), "{top}");
    // login with a command: its output and its exit code.
    let o = k8s(
        &c,
        &[
            "login",
            "arm",
            "--",
            "sh",
            "-c",
            "echo hi from $(hostname); exit 3",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("hi from nginx-arm-deployment-"),
        "{}",
        stdout(&o)
    );
    // fingerprint: the arm node's LSE atomics, the pod's nginx -V.
    let fp = ok(&k8s(&c, &["fingerprint"]));
    assert!(fp.contains("arm: pod nginx-arm-deployment-"), "{fp}");
    assert!(fp.contains("LSE      yes"), "{fp}");
    assert!(fp.contains("nginx version: nginx/"), "{fp}");
    // load both: the pods watched; every request counted is one the pods' nginx logged.
    let out = dir.path().join("results");
    let served_before = access_lines(&c, &pods);
    let load = ok(&k8s(
        &c,
        &[
            "load",
            "both",
            "-d",
            "2s",
            "-c",
            "4",
            "--cost",
            "intel=0.192",
            "--cost",
            "arm=0.154",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    ));
    assert!(load.contains("archbench compare"), "{load}");
    // The guide's claim, measured: each architecture's cost of a million requests.
    assert!(load.contains("Cost       arm at 0.1540/h: "), "{load}");
    let json = the_run_dir(&out).join("k8s-load.json");
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    let mut counted = 0;
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        counted += run["totals"]["requests"].as_u64().unwrap();
        let server = &run["servers"][0];
        assert!(
            server["target"].as_str().unwrap().starts_with("pod:nginx/"),
            "{server}"
        );
        assert!(server["cpu_s"].as_f64().unwrap() > 0.0, "{server}");
        assert!(
            server["peak_memory_bytes"].as_u64().unwrap() > 0,
            "{server}"
        );
    }
    assert!(counted > 0);
    assert_eq!(doc["cost"].as_array().unwrap().len(), 2, "{}", doc["cost"]);
    // Requests in flight when a run's time ran out were answered but not counted: at most
    // one per connection.
    let served = access_lines(&c, &pods) - served_before;
    assert!(
        served as u64 >= counted && served as u64 <= counted + 8,
        "nginx logged {served}, archbench counted {counted}"
    );
    // The script's own layout.
    let wrk = ok(&k8s(
        &c,
        &[
            "load",
            "both",
            "-d",
            "1s",
            "-c",
            "2",
            "--layout",
            "wrk",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    ));
    for line in [
        "INTEL RESULTS:",
        "ARM RESULTS:",
        "Both tests completed",
        "Requests/sec:",
    ] {
        assert!(wrk.contains(line), "{line} in {wrk}");
    }
    // down: only ours, the namespace too (archbench created it), and it waits.
    let down = ok(&k8s(&c, &["down"]));
    assert!(down.contains("Namespace nginx: deleted"), "{down}");
    let status = ok(&k8s(&c, &["status"]));
    assert!(status.contains("no pods of archbench's"), "{status}");
}

#[test]
fn errors_a_user_will_meet_are_one_line_and_say_what_to_do() {
    // One amd64 node only: the arm pods cannot be scheduled.
    let Some(c) = cluster(Options {
        nodes: vec![NodeSpec::new(
            "aks-intel-0",
            "amd64",
            "intel",
            "Standard_D4s_v5",
        )],
        ..Options::default()
    }) else {
        return;
    };
    let o = k8s(&c, &["up", "--wait-timeout", "60s"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no node with kubernetes.io/arch=arm64"),
        "{err}"
    );
    // An image that cannot be pulled.
    let o = k8s(
        &c,
        &[
            "up",
            "--arch",
            "intel",
            "--image",
            "no-such-image:1",
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot be pulled"), "{}", stderr(&o));
    // A configuration nginx rejects at start: the crash loop, with nginx's own words.
    let dir = tempfile::tempdir().unwrap();
    let crash = dir.path().join("crash.conf");
    std::fs::write(
        &crash,
        // Refused as nginx reads it, before it binds a port: never ready even for a moment
        // (`up` runs no nginx -t; `config` would refuse it first).
        "events {}\nhttp { archbench_no_such_directive on; server { listen 80; } }\n",
    )
    .unwrap();
    let o = k8s(
        &c,
        &[
            "up",
            "--arch",
            "intel",
            "--config",
            crash.to_str().unwrap(),
            "--wait-timeout",
            "60s",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("keeps crashing"), "{err}");
    assert!(
        err.contains("archbench_no_such_directive"),
        "nginx's log is quoted: {err}"
    );
    // Forbidden by RBAC: the verb and the resource are named.
    c.faults().forbid("patch", "deployments");
    let o = k8s(&c, &["up", "--arch", "intel"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("forbidden") && err.contains("patch deployments.apps"),
        "{err}"
    );
    c.faults().allow_all();
    // A LoadBalancer address that never comes (new services, in a namespace of their own):
    // NodePort is suggested.
    c.faults().withhold_loadbalancer_addresses(true);
    let o = k8s(
        &c,
        &["-n", "lb", "up", "--arch", "intel", "--wait-timeout", "5s"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--service-type NodePort"),
        "{}",
        stderr(&o)
    );
    // No cluster at all: the server is named.
    let gone = dir.path().join("gone.kubeconfig");
    let (_held, port) = crate::util::nginx::refusing_port();
    std::fs::write(
        &gone,
        std::fs::read_to_string(c.kubeconfig())
            .unwrap()
            .replace(&c.url(), &format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let o = bin()
        .args(["k8s", "--kubeconfig", gone.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("no cluster reachable at http://127.0.0.1:{port}")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_pod_restarted_during_a_load_is_followed_and_reported() {
    let Some(c) = cluster(Options::default()) else {
        return;
    };
    ok(&k8s(&c, &["up", "--arch", "arm", "--wait-timeout", "60s"]));
    let pod = pod_names(&ok(&k8s(&c, &["status"])))[0].clone();
    // exec not allowed: `top` falls back to the metrics API, and says so.
    c.faults().forbid("create", "pods/exec");
    let top = ok(&k8s(&c, &["top"]));
    assert!(top.contains("metrics API"), "{top}");
    c.faults().allow_all();
    // A load whose pod's nginx is killed a moment in: the run is kept, the restart told.
    let dir = tempfile::tempdir().unwrap();
    let child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args(["load", "arm", "-d", "4s", "-c", "2", "--out-dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The load has begun once the pod's cgroup stream (an exec) is open.
    let exec_path = format!("/api/v1/namespaces/nginx/pods/{pod}/exec");
    crate::util::wait_until("the cgroup stream of the pod", PROMPTLY, || {
        c.requests()
            .iter()
            .any(|r| r.path.starts_with(&exec_path) && r.path.contains("while"))
    });
    c.faults().kill_pod_process("nginx", &pod).unwrap();
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    assert!(text.contains("During run 1 of arm"), "{text}");
    let json = the_run_dir(dir.path()).join("k8s-load.json");
    let doc = read_json(&json);
    let server = &doc["targets"][0]["runs"][0]["servers"][0];
    let events = server["events"].as_array().unwrap();
    assert!(!events.is_empty(), "{server}");
    assert!(
        doc["targets"][0]["runs"][0]["totals"]["requests"]
            .as_u64()
            .unwrap()
            > 0
    );
    // top --watch refreshes until Ctrl-C, on the pod as it is now.
    let mut child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args(["top", "--watch"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = crate::util::LineReader::new(child.stdout.take().unwrap());
    for _ in 0..2 {
        out.wait_for("cgroup (exec)", PROMPTLY);
    }
    let child = crate::util::KillOnDrop::new(child);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    // down --keep-namespace: ours go, the namespace stays.
    let down = ok(&k8s(&c, &["down", "--keep-namespace"]));
    assert!(
        down.contains("Deployment nginx-arm-deployment: deleted"),
        "{down}"
    );
    assert!(!down.contains("Namespace"), "{down}");
    let again = ok(&k8s(&c, &["down"]));
    assert!(again.contains("Namespace nginx: deleted"), "{again}");
}

#[test]
fn ctrl_c_while_waiting_says_what_stays_and_exits_130() {
    let Some(c) = cluster(Options::default()) else {
        return;
    };
    // No LoadBalancer address will come: up waits until interrupted.
    c.faults().withhold_loadbalancer_addresses(true);
    let mut child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args(["up", "--arch", "intel", "--wait-timeout", "5m"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = crate::util::LineReader::new(child.stderr.take().unwrap());
    let child = crate::util::KillOnDrop::new(child);
    err.wait_for("waiting:", PROMPTLY);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    let rest = err.rest(PROMPTLY);
    assert!(rest.contains("interrupted while waiting"), "{rest}");
    assert!(rest.contains("archbench k8s down removes it"), "{rest}");
}

#[test]
fn login_gives_a_terminal_that_follows_the_window_and_is_restored() {
    if crate::util::require_tool("tmux").is_none() {
        return;
    }
    let Some(c) = cluster(Options::default()) else {
        return;
    };
    ok(&k8s(&c, &["up", "--arch", "arm", "--wait-timeout", "60s"]));
    let session = format!("archbench-login-{}", std::process::id());
    let script = format!(
        "{} k8s --kubeconfig {} login arm; echo EXIT=$?; {}",
        env!("CARGO_BIN_EXE_archbench"),
        c.kubeconfig().display(),
        crate::util::PRINT_TERMINAL_MODES
    );
    let _pane = crate::util::tmux_pane(&session, &script);
    // A shell in the pod: it answers, and sees the pane's size.
    crate::util::wait_until("the pod's shell prompt", PROMPTLY, || {
        crate::util::tmux_capture(&session).contains('#')
    });
    crate::util::tmux(&[
        "send-keys",
        "-t",
        &session,
        "echo $((6*7)); stty size",
        "Enter",
    ]);
    crate::util::wait_until("the shell's answer", PROMPTLY, || {
        let screen = crate::util::tmux_capture(&session);
        screen.contains("\n42") && screen.contains("30 100")
    });
    crate::util::tmux(&["send-keys", "-t", &session, "exit 5", "Enter"]);
    crate::util::wait_until(
        "the exit status and the restored terminal",
        PROMPTLY,
        || crate::util::tmux_capture(&session).contains("EXIT=5"),
    );
    // Raw mode is gone: the local terminal is canonical and echoes again.
    crate::util::wait_until("stty's report", PROMPTLY, || {
        let screen = crate::util::tmux_capture(&session);
        crate::util::terminal_restored(&screen)
    });
}

/// GET on the stand-in's API (HTTP/1.0: one plain body), as JSON.
fn api_get(c: &Cluster, path: &str) -> serde_json::Value {
    api(c, "GET", path, None)
}

/// A request to the stand-in's API, its answer as JSON.
fn api(
    c: &Cluster,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> serde_json::Value {
    use std::io::{Read, Write};
    let addr = c
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(PROMPTLY)).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The load worker pods now: (name, node, phase).
fn load_pods(c: &Cluster) -> Vec<(String, String, String)> {
    let list = api_get(
        c,
        "/api/v1/namespaces/nginx/pods?labelSelector=app.kubernetes.io%2Fname%3Darchbench-load",
    );
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            (
                s(&p["metadata"]["name"]),
                s(&p["spec"]["nodeName"]),
                s(&p["status"]["phase"]),
            )
        })
        .collect()
}

/// A cluster with a third node for load pods, whose archbench images run this build.
fn cluster_with_load_node() -> Option<Cluster> {
    let mut opts = Options {
        archbench_binary: Some(env!("CARGO_BIN_EXE_archbench").into()),
        ..Options::default()
    };
    opts.nodes.push(NodeSpec::new(
        "aks-load-0",
        "amd64",
        "load",
        "Standard_D8s_v5",
    ));
    cluster(opts)
}

fn the_run_dir(out: &std::path::Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

#[test]
fn an_in_cluster_load_of_three_workers_is_one_run_merged_exactly() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // nginx on the intel and arm pools only (the load node is amd64 too).
    ok(&k8s(
        &c,
        &["up", "--pools-by", "agentpool", "--wait-timeout", "60s"],
    ));
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    ok(&k8s(
        &c,
        &["config", conf.to_str().unwrap(), "--wait-timeout", "60s"],
    ));
    let pods = pod_names(&ok(&k8s(&c, &["status"])));
    let served_before = access_lines(&c, &pods);
    let out = dir.path().join("results");
    // Open loop, 3 workers per target, 7 connections: shares 3, 2, 2.
    let child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args([
            "load",
            "both",
            "--in-cluster",
            "--workers",
            "3",
            "-c",
            "7",
            "--rate",
            "300",
            "-d",
            "3s",
            "--per-worker",
            "--wait-timeout",
            "60s",
            "--out-dir",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs: six workers, all on the node without nginx (pod anti-affinity).
    crate::util::wait_until("six load pods running", PROMPTLY, || {
        let p = load_pods(&c);
        p.len() == 6 && p.iter().all(|(_, _, phase)| phase == "Running")
    });
    for (name, node, _) in load_pods(&c) {
        assert_eq!(node, "aks-load-0", "{name}");
    }
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    let err = stderr(&o);
    assert!(err.contains("3/3 load workers ready"), "{err}");
    for t in ["intel", "arm"] {
        assert!(
            text.contains(&format!("{t} run 1: 3 workers merged, first sends")),
            "{text}"
        );
    }
    assert!(text.contains("worker 2 (pod archbench-load-arm-"), "{text}");
    let run_dir = the_run_dir(&out);
    let doc = read_json(run_dir.join("k8s-load.json"));
    crate::util::schema::assert_valid(&doc);
    let mut counted = 0;
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        counted += run["totals"]["requests"].as_u64().unwrap();
        assert_eq!(run["plan"]["connections"], 7, "{}", run["plan"]);
        assert_eq!(run["sources"].as_array().unwrap().len(), 3);
        let shares: Vec<u64> = run["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["plan"]["connections"].as_u64().unwrap())
            .collect();
        assert_eq!(shares, [3, 2, 2]);
        assert!(run["lost_sources"].as_array().unwrap().is_empty());
        // Started together: the first sends lie within the start's grace.
        let skew = run["start_skew_s"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&skew), "skew {skew}");
        // The nginx pod behind it was watched.
        assert!(
            run["servers"][0]["cpu_s"].as_f64().unwrap() > 0.0,
            "{}",
            run["servers"]
        );
        // Percentiles equal those of one histogram of every worker's own recording.
        let workers: Vec<serde_json::Value> = std::fs::read_dir(run_dir.join("workers"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .contains(&format!("-{}-", t["name"].as_str().unwrap()))
            })
            .flat_map(|job| std::fs::read_dir(job).unwrap())
            .map(|e| read_json(e.unwrap().path()))
            .collect();
        assert_eq!(workers.len(), 3);
        let mut all = archbench::stats::latency_histogram();
        let mut requests = 0;
        for w in &workers {
            requests += w["totals"]["requests"].as_u64().unwrap();
            let h: archbench::stats::SerializedHistogram =
                serde_json::from_value(w["histograms"]["total"].clone()).unwrap();
            all.add(&h.0).unwrap();
        }
        assert_eq!(requests, run["totals"]["requests"].as_u64().unwrap());
        for (q, key) in [(0.5, "p50_us"), (0.99, "p99_us")] {
            assert_eq!(
                all.value_at_quantile(q),
                run["latency"]["total"][key].as_u64().unwrap(),
                "{key}"
            );
        }
    }
    // 300 req/s for 3 s on each target: every request counted was answered by nginx, and
    // nginx answered at most one more per connection (in flight at the deadline).
    assert!(counted > 1_500, "{counted}");
    let served = access_lines(&c, &pods) - served_before;
    assert!(
        served as u64 >= counted && served as u64 <= counted + 14,
        "nginx logged {served}, archbench counted {counted}"
    );
    // The Jobs are gone with their pods.
    crate::util::wait_until("the load pods gone", PROMPTLY, || load_pods(&c).is_empty());
}

#[test]
fn a_load_worker_killed_mid_run_is_reported_lost_and_the_rest_kept() {
    let Some(c) = cluster_with_load_node() else {
        return;
    };
    ok(&k8s(&c, &["up", "--arch", "arm", "--wait-timeout", "60s"]));
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("counted.conf");
    std::fs::write(&conf, counted_conf()).unwrap();
    ok(&k8s(
        &c,
        &["config", conf.to_str().unwrap(), "--wait-timeout", "60s"],
    ));
    let child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args([
            "load",
            "arm",
            "--in-cluster",
            "--workers",
            "3",
            "-c",
            "6",
            "-d",
            "4s",
            "--node-selector",
            "agentpool=load",
            "--out-dir",
        ])
        .arg(dir.path().join("killed"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once every worker has been given its start, kill worker 1's process.
    crate::util::wait_until("three starts through the pod proxy", PROMPTLY, || {
        c.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with(":9090/proxy/start"))
            .count()
            == 3
    });
    let victim = load_pods(&c)
        .into_iter()
        .find(|(name, _, _)| name.contains("-1-"))
        .unwrap();
    assert_eq!(victim.1, "aks-load-0", "--node-selector agentpool=load");
    c.faults().kill_pod_process("nginx", &victim.0).unwrap();
    let o = finish_within(child, PROMPTLY * 2);
    let text = ok(&o);
    assert!(text.contains("arm run 1: 2 workers merged"), "{text}");
    assert!(
        text.contains(&format!("lost worker 1 (pod {})", victim.0)),
        "{text}"
    );
    assert!(
        stderr(&o).contains("the figures lack its 2 connections"),
        "{}",
        stderr(&o)
    );
    let doc = read_json(the_run_dir(&dir.path().join("killed")).join("k8s-load.json"));
    let run = &doc["targets"][0]["runs"][0];
    assert_eq!(run["sources"].as_array().unwrap().len(), 2);
    let lost = &run["lost_sources"][0];
    assert_eq!(lost["connections"], 2);
    assert!(
        lost["reason"].as_str().unwrap().contains("exit 137"),
        "{lost}"
    );
    assert!(run["totals"]["requests"].as_u64().unwrap() > 0);
    assert!(
        run["limiter"]["reason"]
            .as_str()
            .unwrap()
            .contains("1 worker(s) lost"),
        "{}",
        run["limiter"]
    );
    crate::util::wait_until("the load pods gone", PROMPTLY, || load_pods(&c).is_empty());
    // Ctrl-C mid-run: the workers stop, what they measured is merged and saved, the Job goes.
    let out = dir.path().join("interrupted");
    let child = bin()
        .args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args([
            "load",
            "arm",
            "--in-cluster",
            "--workers",
            "2",
            "-c",
            "2",
            "-d",
            "50s",
            "--out-dir",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::util::wait_until("two more starts", PROMPTLY, || {
        c.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with(":9090/proxy/start"))
            .count()
            == 5
    });
    let pods = pod_names(&ok(&k8s(&c, &["status"])));
    let before = access_lines(&c, &pods);
    crate::util::wait_until("requests of this run reaching nginx", PROMPTLY, || {
        access_lines(&c, &pods) > before
    });
    let child = crate::util::KillOnDrop::new(child);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let doc = read_json(the_run_dir(&out).join("k8s-load.json"));
    assert_eq!(doc["interrupted"], true, "{doc}");
    let run = &doc["targets"][0]["runs"][0];
    assert_eq!(run["sources"].as_array().unwrap().len(), 2, "{run}");
    assert!(run["totals"]["requests"].as_u64().unwrap() > 0);
    assert!(run["totals"]["elapsed_s"].as_f64().unwrap() < 40.0);
    crate::util::wait_until("the load pods gone", PROMPTLY, || load_pods(&c).is_empty());
    // A load Job left over (say, by a controller that was killed): `down` removes it.
    let leftover = serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "archbench-load-arm-leftover",
            "labels": {"app.kubernetes.io/managed-by": "archbench"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "archbench", "image": "archbench:0.1.0", "args": ["--version"]}]}}}
    });
    let created = api(
        &c,
        "POST",
        "/apis/batch/v1/namespaces/nginx/jobs",
        Some(&leftover),
    );
    assert_eq!(
        created["metadata"]["name"], "archbench-load-arm-leftover",
        "{created}"
    );
    let down = ok(&k8s(&c, &["down"]));
    assert!(
        down.contains("Job archbench-load-arm-leftover: deleted"),
        "{down}"
    );
}

#[test]
fn in_cluster_flags_are_checked_before_any_cluster_is_asked() {
    for (args, says) in [
        (&["load", "both", "--workers", "3"][..], "--in-cluster"),
        (
            &["load", "both", "--in-cluster", "--workers", "0"][..],
            "--workers 0: give 1 to 1000",
        ),
        (
            &["load", "both", "--in-cluster", "--workers", "1001"][..],
            "--workers 1001: give 1 to 1000",
        ),
        (
            &["load", "arm", "--in-cluster", "--workers", "9", "-c", "4"][..],
            "every worker needs a connection",
        ),
        (
            &["load", "arm", "--in-cluster", "--node-selector", "pool"][..],
            "use KEY=VALUE",
        ),
        (
            &["load", "arm", "--in-cluster", "--prometheus", "9464"][..],
            "--in-cluster workers report only when they end",
        ),
    ] {
        // No cluster exists at this address: a usage error must come first.
        let o = bin()
            .args(["k8s", "--kubeconfig", "/nonexistent/kubeconfig"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
    // The worker's own command: a control address that is none.
    let o = bin()
        .args(["agent", "http://127.0.0.1:1/", "--control", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--control nowhere"), "{}", stderr(&o));
}

/// One HTTP/1.1 request to a worker's control endpoint: the status code and body.
fn control_request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PROMPTLY)).unwrap();
    let token = token
        .map(|t| format!("X-Archbench-Token: {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{token}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        text.split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string(),
    )
}

#[test]
fn a_worker_takes_orders_only_with_its_token_and_prints_its_result() {
    let server = crate::util::ServeChild::start(&[]);
    let mut child = bin()
        .args(["agent", &server.url, "-c", "2", "-d", "1s", "--part", "1/2"])
        .args(["--control", "127.0.0.1:0"])
        .env("ARCHBENCH_CONTROL_TOKEN", "s3cret")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = crate::util::LineReader::new(child.stderr.take().unwrap());
    let child = crate::util::KillOnDrop::new(child);
    let line = err.wait_for("waiting for its start on ", PROMPTLY);
    let addr = line.rsplit(' ').next().unwrap().trim().to_string();
    assert_eq!(
        control_request(&addr, "GET", "/ready", None, ""),
        (200, "ready 1/2\n".into())
    );
    // Without the token (any pod can reach the port), or with another, nothing starts.
    let soon = archbench::timefmt::rfc3339_micros(std::time::SystemTime::now());
    assert_eq!(control_request(&addr, "POST", "/start", None, &soon).0, 403);
    assert_eq!(
        control_request(&addr, "POST", "/start", Some("guess"), &soon).0,
        403
    );
    assert_eq!(control_request(&addr, "GET", "/result", None, "").0, 503);
    let (status, text) = control_request(&addr, "POST", "/start", Some("s3cret"), &soon);
    assert_eq!(status, 200, "{text}");
    let o = child.finish_within(PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let json = out
        .lines()
        .find_map(|l| l.strip_prefix(archbench::k8s::RESULT_PREFIX))
        .unwrap_or_else(|| panic!("no result line in {out}"));
    let r: serde_json::Value = serde_json::from_str(json).unwrap();
    assert!(r["totals"]["requests"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["plan"]["part"]["index"], 1);
    assert_eq!(r["plan"]["connections"], 1);
    assert_eq!(r["started_at"], soon.as_str());
}

/// `k8s load both` with live metrics: both architectures' counters and their pods' CPU, as a
/// scraper sees them, ending at the comparison's figures.
#[test]
fn load_both_serves_live_metrics_for_both_targets_and_their_pods() {
    use crate::util::prometheus::{one, parse, parser_available, scrape, serving};
    if !parser_available() {
        return;
    }
    let Some(c) = cluster(Options::default()) else {
        return;
    };
    ok(&k8s(&c, &["up", "--wait-timeout", "60s"]));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = bin();
    cmd.args(["k8s", "--kubeconfig"])
        .arg(c.kubeconfig())
        .args(["load", "both", "-d", "2s", "-c", "2", "--out-dir"])
        .arg(dir.path());
    let (child, err, addr) = serving(cmd);
    // While both load: each pod's CPU is there, labelled by its target.
    crate::util::wait_until("both pods' CPU in the metrics", PROMPTLY, || {
        let s = parse(&scrape(&addr));
        s.get("archbench_server_cpu_cores").is_some_and(|v| {
            ["intel", "arm"].iter().all(|t| {
                v.iter().any(|(l, _)| {
                    l.get("target").map(String::as_str) == Some(*t)
                        && l.get("server").is_some_and(|p| p.starts_with("pod:nginx/"))
                })
            })
        })
    });
    err.wait_for("--linger", PROMPTLY * 2);
    let s = parse(&scrape(&addr));
    let json = the_run_dir(dir.path()).join("k8s-load.json");
    let doc = read_json(&json);
    for t in doc["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        // k8s load runs no warm-up unless asked: the counter is the measured run's.
        let requests: u64 = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["totals"]["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(
            one(&s, "archbench_requests_total", &[("target", name)]),
            requests as f64,
            "{name}"
        );
    }
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
