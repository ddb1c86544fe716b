//! Live views: `--prometheus` scraped during a run against real nginx and parsed by the
//! Prometheus project's own OpenMetrics parser (Python's prometheus_client, Debian's
//! python3-prometheus-client).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{bin, finish_within, read_json, stderr, wait_until, LineReader, PROMPTLY};

const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.setdefault(s.name, []).append([s.labels, s.value])
print(json.dumps(out))
"#;

/// Debian's Python with prometheus_client, or None (a failure where tools are required).
pub(crate) fn parser_available() -> bool {
    let ok = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("ARCHBENCH_REQUIRE_NGINX").is_none(),
            "python3-prometheus-client is required here but not installed"
        );
        eprintln!("SKIPPED: apt-get install python3-prometheus-client to run this test");
    }
    ok
}

/// GET /metrics, as a scraper does; the body.
pub(crate) fn scrape(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: application/openmetrics-text\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    body.to_string()
}

pub(crate) type Samples = BTreeMap<String, Vec<(BTreeMap<String, String>, f64)>>;

/// The scraped text through the strict OpenMetrics parser.
pub(crate) fn parse(text: &str) -> Samples {
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = finish_within(child, PROMPTLY);
    assert!(o.status.success(), "parser: {}\n{text}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

pub(crate) fn one(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .iter()
        .find(|(l, _)| {
            labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {name} with {labels:?}"))
        .1
}

/// The command with `--prometheus 127.0.0.1:0 --linger`, started: the child (killed if the
/// test fails), its stderr lines, and the address it said it serves on.
pub(crate) fn serving(
    mut cmd: std::process::Command,
) -> (crate::util::KillOnDrop, LineReader, String) {
    let mut child = cmd
        .args(["--prometheus", "127.0.0.1:0", "--linger"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = LineReader::new(child.stderr.take().unwrap());
    let line = err.wait_for("live metrics on http://", PROMPTLY);
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap()
        .to_string();
    (crate::util::KillOnDrop::new(child), err, addr)
}

#[test]
fn prometheus_counters_grow_during_the_run_and_end_at_the_results_figures() {
    if !parser_available() {
        return;
    }
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let url = ng.url("/");
    let mut cmd = bin();
    cmd.args([
        "run",
        &url,
        "-d",
        "3s",
        "-c",
        "4",
        "-t",
        "2",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (child, err, addr) = serving(cmd);
    let target = [("target", url.as_str())];
    // During the run: the counter grows from one scrape to a later one.
    let mut first = None;
    let mut grew = false;
    wait_until("the request counter to grow", PROMPTLY, || {
        let s = parse(&scrape(&addr));
        let n = one(&s, "archbench_requests_total", &target);
        assert!(one(&s, "archbench_running", &target) == 1.0 || grew);
        match first {
            None if n > 0.0 => first = Some(n),
            Some(f) if n > f => grew = true,
            _ => {}
        }
        grew
    });
    // After it: --linger keeps the final figures up.
    err.wait_for("--linger", PROMPTLY);
    let s = parse(&scrape(&addr));
    let r = read_json(&json);
    let requests = r["totals"]["requests"].as_f64().unwrap();
    assert!(requests > 0.0);
    assert_eq!(one(&s, "archbench_requests_total", &target), requests);
    // The histogram's +Inf bucket: every interval the workers handed over, added up.
    assert_eq!(
        one(
            &s,
            "archbench_latency_seconds_bucket",
            &[("target", url.as_str()), ("le", "+Inf")]
        ),
        requests
    );
    assert_eq!(
        one(&s, "archbench_latency_seconds_count", &target),
        requests
    );
    // The sum is exact; the JSON's mean comes from the histogram's buckets (3 digits).
    let mean_us = one(&s, "archbench_latency_seconds_sum", &target) * 1e6 / requests;
    let json_mean_us = r["latency"]["total"]["mean_us"].as_f64().unwrap();
    assert!(
        (mean_us - json_mean_us).abs() <= 1e-3 * json_mean_us + 1.0,
        "{mean_us} {json_mean_us}"
    );
    // Buckets are cumulative and end at the count; under 10 ms on loopback, nearly all.
    let buckets: Vec<f64> = s["archbench_latency_seconds_bucket"]
        .iter()
        .map(|(_, v)| *v)
        .collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    let p99_us = r["latency"]["total"]["p99_us"].as_f64().unwrap();
    if p99_us < 10_000.0 {
        assert!(one(&s, "archbench_latency_seconds_bucket", &[("le", "0.01")]) >= 0.99 * requests);
    }
    for kind in ["connect", "tls", "timeout", "read", "write", "protocol"] {
        assert_eq!(
            one(&s, "archbench_errors_total", &[("kind", kind)]),
            r["errors"][kind].as_f64().unwrap(),
            "{kind}"
        );
    }
    assert_eq!(one(&s, "archbench_running", &target), 0.0);
    // Ctrl-C ends the lingering; the run itself was complete, so the exit status is 0.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.pid() as i32, libc::SIGINT) };
    let o = child.finish_within(PROMPTLY);
    assert_eq!(o.status.code(), Some(0));
    // Every response counted is one nginx logged (at most one per connection in flight at
    // the deadline was logged but not counted).
    let logged = ng.stop_and_read_log().len() as f64;
    assert!(
        requests <= logged && logged <= requests + 4.0,
        "{requests} {logged}"
    );
}

#[test]
fn a_prometheus_address_that_is_none_or_taken_is_a_usage_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for (addr, says) in [
        ("localhost", "invalid address"),
        ("99999", "invalid address"),
        (port.as_str(), "cannot listen there"),
    ] {
        let o = bin()
            .args([
                "run",
                "http://127.0.0.1:1/",
                "-n",
                "1",
                "-c",
                "1",
                "--prometheus",
                addr,
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{addr}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says), "{addr}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    let o = bin()
        .args(["run", "http://127.0.0.1:1/", "-n", "1", "--linger"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// How the test ends a run under the dashboard.
#[derive(Clone, Copy, PartialEq)]
enum StopWith {
    KeyQ,
    Sigterm,
}

/// `archbench run --tui` in a tmux pane of 100×30 against nginx: live figures that change,
/// then stopped; the report on the restored screen, the exit status, the terminal's modes.
fn dashboard_run(stop: StopWith) {
    if crate::util::require_tool("tmux").is_none() {
        return;
    }
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let session = format!("archbench-tui-{}-{}", std::process::id(), stop as u8);
    // Bounded by its own duration should the stop never arrive.
    let script = format!(
        "{} run {} --tui -d 60s -c 2 -t 1 --json {}; echo EXIT=$?; {}",
        env!("CARGO_BIN_EXE_archbench"),
        ng.url("/"),
        json.display(),
        crate::util::PRINT_TERMINAL_MODES
    );
    let _pane = crate::util::tmux_pane(&session, &script);
    let capture = || crate::util::tmux_capture(&session);
    let answered = |screen: &str| {
        screen
            .lines()
            .find(|l| l.contains("answered)"))
            .map(str::to_string)
    };
    // Live figures, changing from one capture to a later one.
    let mut first = None;
    wait_until("the dashboard's figures to change", PROMPTLY, || {
        let screen = capture();
        match (answered(&screen), &first) {
            (Some(now), None) => {
                assert!(
                    screen.contains("latency") && screen.contains("p99"),
                    "{screen}"
                );
                assert!(screen.contains("limiter:"), "{screen}");
                first = Some(now);
                false
            }
            (Some(now), Some(then)) => now != *then,
            (None, _) => false,
        }
    });
    let code = match stop {
        StopWith::KeyQ => {
            crate::util::tmux(&["send-keys", "-t", &session, "q"]);
            "EXIT=130"
        }
        StopWith::Sigterm => {
            // The archbench process of this pane: the one writing our JSON.
            let marker = json.display().to_string();
            let pid = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .find(|e| {
                    std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                        let c = String::from_utf8_lossy(&c);
                        c.contains(&marker) && c.starts_with(env!("CARGO_BIN_EXE_archbench"))
                    })
                })
                .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .expect("the pane's archbench process");
            // SAFETY: signalling a process this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            "EXIT=143"
        }
    };
    // The report follows on the restored screen, the exit status is an interrupted run's,
    // and the terminal is cooked again.
    wait_until("the report and the terminal modes", PROMPTLY, || {
        let screen = capture();
        screen.contains(code)
            && screen.lines().any(|l| l.trim() == "MODE icanon")
            && screen.lines().any(|l| l.trim() == "MODE echo")
    });
    let screen = capture();
    assert!(screen.contains("Requests"), "{screen}");
    assert!(
        !screen.contains("limiter:"),
        "the dashboard is gone: {screen}"
    );
    let r = read_json(&json);
    assert_eq!(r["interrupted"], true);
    let requests = r["totals"]["requests"].as_u64().unwrap();
    let logged = ng.stop_and_read_log().len() as u64;
    assert!(
        requests > 0 && requests <= logged && logged <= requests + 2,
        "{requests} {logged}"
    );
}

#[test]
fn the_dashboard_shows_live_figures_stops_on_q_and_restores_the_terminal() {
    dashboard_run(StopWith::KeyQ);
}

#[test]
fn sigterm_under_the_dashboard_keeps_the_results_and_restores_the_terminal() {
    dashboard_run(StopWith::Sigterm);
}

#[test]
fn a_sweeps_counters_go_on_across_its_runs() {
    if !parser_available() {
        return;
    }
    let a = crate::util::ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let mut cmd = bin();
    cmd.args([
        "sweep",
        &format!("a={}", a.url),
        "-c",
        "1,2",
        "-t",
        "1",
        "-d",
        "300ms",
        "--runs",
        "2",
        "--no-warmup",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (child, err, addr) = serving(cmd);
    err.wait_for("--linger", PROMPTLY);
    let s = parse(&scrape(&addr));
    // Four runs (two loads, two runs each): the counter holds all of them.
    let doc = read_json(&json);
    let total: u64 = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| {
            st["comparison"]["targets"][0]["runs"]
                .as_array()
                .unwrap()
                .clone()
        })
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .sum();
    assert!(total > 0);
    assert_eq!(
        one(&s, "archbench_requests_total", &[("target", "a")]),
        total as f64
    );
    assert_eq!(
        one(&s, "archbench_latency_seconds_bucket", &[("le", "+Inf")]),
        total as f64
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.pid() as i32, libc::SIGTERM) };
    let o = child.finish_within(PROMPTLY);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn tui_without_a_terminal_is_a_usage_error() {
    let o = bin()
        .args(["run", "http://127.0.0.1:1/", "-n", "1", "-c", "1", "--tui"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--tui needs a terminal"),
        "{}",
        stderr(&o)
    );
}

/// The fixture `a_panic_under_the_dashboard_gives_the_terminal_back` runs from this test
/// binary in tmux: the dashboard on the terminal, then a panic. Ignored in a normal run (it
/// needs a terminal and fails by design); a separate example binary was not built runnable by
/// `cargo test --all-targets`, which compiles examples as test harnesses.
#[test]
#[ignore = "fixture: run in tmux by a_panic_under_the_dashboard_gives_the_terminal_back"]
fn fixture_panics_under_the_dashboard() {
    let board = archbench::live::Board::new();
    board.add_target(
        "fixture",
        "GET http://127.0.0.1:1/ · 1 connection",
        Some(60.0),
    );
    let _dashboard =
        archbench::live::tui::Dashboard::start(board, "panic fixture".into(), Box::new(|| {}))
            .unwrap();
    // Drawn at least once (four frames a second).
    std::thread::sleep(std::time::Duration::from_millis(600));
    panic!("the fixture panics under the dashboard");
}

#[test]
fn a_panic_under_the_dashboard_gives_the_terminal_back() {
    if crate::util::require_tool("tmux").is_none() {
        return;
    }
    let this_binary = std::env::current_exe().unwrap();
    let session = format!("archbench-tui-panic-{}", std::process::id());
    // libtest reports a failed test with exit 101, as a panicking program exits.
    let script = format!(
        "RUST_BACKTRACE=0 {} --exact cases::live::fixture_panics_under_the_dashboard \
         --ignored --nocapture; \
         echo EXIT=$?; {}",
        this_binary.display(),
        crate::util::PRINT_TERMINAL_MODES
    );
    let _pane = crate::util::tmux_pane(&session, &script);
    wait_until(
        "the panic, its status and the terminal modes",
        PROMPTLY,
        || {
            let screen = crate::util::tmux_capture(&session);
            screen.contains("EXIT=101")
                && screen.lines().any(|l| l.trim() == "MODE icanon")
                && screen.lines().any(|l| l.trim() == "MODE echo")
        },
    );
    let screen = crate::util::tmux_capture(&session);
    // The message printed on the main screen, not lost with the alternate one.
    assert!(
        screen.contains("the fixture panics under the dashboard"),
        "{screen}"
    );
}

/// The issue's "done when", locally: `compare --parallel` of two nginx, each watched, under
/// the dashboard — both servers' throughput, latency and CPU live in one terminal.
#[test]
fn compare_parallel_shows_both_servers_live_side_by_side() {
    if crate::util::require_tool("tmux").is_none() {
        return;
    }
    let (Some(a), Some(b)) = (
        Nginx::start(NginxConfig::default()),
        Nginx::start(NginxConfig::default()),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let session = format!("archbench-tui-compare-{}", std::process::id());
    // Bounded by its own duration should the stop never arrive.
    let script = format!(
        "{} compare intel={} arm={} --parallel --watch intel=pid:{} --watch arm=pid:{} \
         --tui -d 60s -c 2 -t 1 --runs 1 --no-warmup --json {}; echo EXIT=$?",
        env!("CARGO_BIN_EXE_archbench"),
        a.url("/"),
        b.url("/"),
        a.pid(),
        b.pid(),
        json.display(),
    );
    let _pane = crate::util::tmux_pane(&session, &script);
    let capture = || crate::util::tmux_capture(&session);
    let (pid_a, pid_b) = (format!("pid:{} ", a.pid()), format!("pid:{} ", b.pid()));
    // One row of the screen holds both columns' figure of one kind.
    let row = |screen: &str, what: &str| {
        screen
            .lines()
            .find(|l| l.matches(what).count() == 2)
            .map(str::to_string)
    };
    // Side by side, once each watched server has its first sample: names, throughput,
    // latency, the servers' CPU and memory, the client's workers and the limiter.
    let complete = |screen: &str| {
        let servers = screen.lines().find(|l| l.contains(&pid_a))?;
        let all = screen.contains(" intel · run 1 ")
            && screen.contains(" arm · run 1 ")
            && ["req/s ", "p99 ", "client workers", "limiter:"]
                .iter()
                .all(|what| row(screen, what).is_some())
            && servers.matches(" cores · ").count() == 2
            && servers.find(&pid_a) < servers.find(&pid_b);
        all.then(|| row(screen, "answered)")).flatten()
    };
    // ... and live: the figures change from one such screen to a later one.
    let mut first = None;
    wait_until(
        "both columns, complete, their figures changing",
        PROMPTLY,
        || {
            let Some(now) = complete(&capture()) else {
                return false;
            };
            match &first {
                None => {
                    first = Some(now);
                    false
                }
                Some(then) => now != *then,
            }
        },
    );
    crate::util::tmux(&["send-keys", "-t", &session, "q"]);
    wait_until("the comparison's report", PROMPTLY, || {
        capture().contains("EXIT=130")
    });
    let screen = capture();
    assert!(
        !screen.contains("limiter:"),
        "the dashboard is gone: {screen}"
    );
    let doc = read_json(&json);
    // Each target's interrupted run holds the requests its own nginx answered.
    for (t, ng) in doc["targets"].as_array().unwrap().iter().zip([a, b]) {
        let requests = t["runs"][0]["totals"]["requests"].as_u64().unwrap();
        let logged = ng.stop_and_read_log().len() as u64;
        assert!(
            requests > 0 && requests <= logged && logged <= requests + 2,
            "{}: {requests} {logged}",
            t["name"]
        );
    }
}
