//! Live views: `--prometheus` scraped during a run against real nginx and parsed by the
//! Prometheus project's own OpenMetrics parser (Python's prometheus_client, Debian's
//! python3-prometheus-client).

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::prometheus::{one, parse, parser_available, scrape, serving};
use crate::util::{bin, read_json, stderr, wait_until, PROMPTLY};

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
    // (A counter: changing is growing.)
    crate::util::wait_for_change("the request counter to grow", PROMPTLY, || {
        let s = parse(&scrape(&addr));
        assert_eq!(one(&s, "archbench_running", &target), 1.0);
        let n = one(&s, "archbench_requests_total", &target);
        (n > 0.0).then_some(n)
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
    // What Prometheus's histogram_quantile(0.99, …) would read from these buckets (linear
    // within the bucket the rank falls in) lies in the run's p99's bucket or a neighbour.
    let mut bounds: Vec<(f64, f64)> = s["archbench_latency_seconds_bucket"]
        .iter()
        .filter(|(l, _)| l.get("target").map(String::as_str) == Some(url.as_str()))
        .filter_map(|(l, v)| Some((l.get("le")?.parse::<f64>().ok()?, *v)))
        .filter(|(le, _)| le.is_finite())
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let rank = 0.99 * requests;
    let k = bounds.iter().position(|(_, n)| *n >= rank).unwrap();
    let (lo, below) = if k == 0 { (0.0, 0.0) } else { bounds[k - 1] };
    let (hi, upto) = bounds[k];
    let quantile_us = (lo + (hi - lo) * (rank - below) / (upto - below)) * 1e6;
    let bucket_of = |us: f64| {
        bounds
            .iter()
            .position(|(le, _)| us <= le * 1e6 + 1e-6)
            .unwrap()
    };
    assert!(
        bucket_of(quantile_us).abs_diff(bucket_of(p99_us)) <= 1,
        "histogram_quantile {quantile_us:.0} µs, run's p99 {p99_us} µs, buckets {bounds:?}"
    );
    for kind in ["connect", "tls", "timeout", "read", "write", "protocol"] {
        assert_eq!(
            one(&s, "archbench_errors_total", &[("kind", kind)]),
            r["errors"][kind].as_f64().unwrap(),
            "{kind}"
        );
    }
    assert_eq!(one(&s, "archbench_running", &target), 0.0);
    // No QUIC families for a load without QUIC (HTTP/3 runs have them: tests/cases/h3.rs).
    assert!(!s.keys().any(|k| k.starts_with("archbench_quic")), "{s:?}");
    // Ctrl-C ends the lingering; the run itself was complete, so the exit status is 0.
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
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
    // Bounded: accepted, --linger would wait for Ctrl-C.
    let o = crate::util::archbench_within(
        &["run", "http://127.0.0.1:1/", "-n", "1", "--linger"],
        PROMPTLY,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The dashboard's title line, which only the dashboard draws ("limiter:" would not do: the
/// report's own warning says "limiter: client: …" when a run was too short to settle).
const DASHBOARD_KEYS: &str = "q stop · p percentiles";

/// After the run: the report on the restored screen, no dashboard left on it.
fn assert_dashboard_gone(screen: &str) {
    assert!(
        !screen.contains(DASHBOARD_KEYS),
        "the dashboard is gone: {screen}"
    );
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
    let pid_file = dir.path().join("pid");
    // Bounded by its own duration should the stop never arrive. A shell that notes its pid
    // and becomes archbench (exec), so the test knows whom to signal.
    let script = format!(
        "sh -c 'echo $$ > {}; exec \"$0\" \"$@\"' {} run {} --tui -d 60s -c 2 -t 1 --json {}; \
         echo EXIT=$?; {}",
        pid_file.display(),
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
    crate::util::wait_for_change("the dashboard's figures to change", PROMPTLY, || {
        let screen = capture();
        let now = answered(&screen)?;
        assert!(
            screen.contains("latency") && screen.contains("p99"),
            "{screen}"
        );
        assert!(
            screen.contains("limiter:") && screen.contains(DASHBOARD_KEYS),
            "{screen}"
        );
        Some(now)
    });
    let code = match stop {
        StopWith::KeyQ => {
            crate::util::tmux(&["send-keys", "-t", &session, "q"]);
            "EXIT=130"
        }
        StopWith::Sigterm => {
            // Written before the exec, so before the dashboard showed any figure.
            let pid: i32 = std::fs::read_to_string(&pid_file)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            // SAFETY: signalling a process this test started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            "EXIT=143"
        }
    };
    // The report follows on the restored screen, the exit status is an interrupted run's,
    // and the terminal is cooked again.
    wait_until("the report and the terminal modes", PROMPTLY, || {
        let screen = capture();
        screen.contains(code) && crate::util::terminal_restored(&screen)
    });
    let screen = capture();
    assert!(screen.contains("Requests"), "{screen}");
    assert_dashboard_gone(&screen);
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
        .flat_map(|st| st["comparison"]["targets"][0]["runs"].as_array().unwrap())
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
    let o = child.signal_and_finish(libc::SIGTERM, PROMPTLY);
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

/// Set in the pane where the panic fixture is to panic.
const PANIC_FIXTURE: &str = "ARCHBENCH_TUI_PANIC_FIXTURE";

/// The fixture `a_panic_under_the_dashboard_gives_the_terminal_back` runs from this test
/// binary in tmux: the dashboard on the terminal, then a panic. Ignored in a normal run, and
/// without its variable a no-op (`--include-ignored` stays green); a separate example binary
/// was not built runnable by `cargo test --all-targets`, which compiles examples as test
/// harnesses.
#[test]
#[ignore = "fixture: run in tmux by a_panic_under_the_dashboard_gives_the_terminal_back"]
fn fixture_panics_under_the_dashboard() {
    if std::env::var_os(PANIC_FIXTURE).is_none() {
        return;
    }
    let board = archbench::live::Board::new();
    board.add_target(
        "fixture",
        "GET http://127.0.0.1:1/ · 1 connection",
        Some(60.0),
    );
    let _dashboard =
        archbench::live::tui::Dashboard::start(board, "panic fixture".into(), Box::new(|| {}))
            .unwrap();
    // Not a synchronisation (the terminal is taken before start returns, and the assertions
    // hold either way): time for frames to be drawn, so the panic comes mid-drawing as a real
    // one would.
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
        "{PANIC_FIXTURE}=1 RUST_BACKTRACE=0 {} --exact cases::live::fixture_panics_under_the_dashboard \
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
            screen.contains("EXIT=101") && crate::util::terminal_restored(&screen)
        },
    );
    let screen = crate::util::tmux_capture(&session);
    // The message printed on the main screen, not lost with the alternate one.
    assert!(
        screen.contains("the fixture panics under the dashboard"),
        "{screen}"
    );
}

/// The "done when", locally: `compare --parallel` of two nginx, each watched, under
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
        // intel's server in intel's (left) column.
        let (at_a, at_b) = (servers.find(&pid_a)?, servers.find(&pid_b)?);
        let all = screen.contains(" intel · run 1 ")
            && screen.contains(" arm · run 1 ")
            && screen.contains(DASHBOARD_KEYS)
            && ["req/s ", "p99 ", "client workers", "limiter:"]
                .iter()
                .all(|what| row(screen, what).is_some())
            && servers.matches(" cores · ").count() == 2
            && at_a < at_b;
        all.then(|| row(screen, "answered)")).flatten()
    };
    // ... and live: the figures change from one such screen to a later one.
    crate::util::wait_for_change(
        "both columns, complete, their figures changing",
        PROMPTLY,
        || complete(&capture()),
    );
    crate::util::tmux(&["send-keys", "-t", &session, "q"]);
    wait_until("the comparison's report", PROMPTLY, || {
        capture().contains("EXIT=130")
    });
    let screen = capture();
    assert_dashboard_gone(&screen);
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
