//! `archbench compare`: verdicts on a known difference and on none, and the schedules seen
//! from the servers' own access logs.

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{
    archbench, finish_within, read_json, stderr, stdout, LineReader, ServeChild, PROMPTLY,
};

#[test]
fn a_server_2ms_slower_is_significantly_worse() {
    let fast = ServeChild::start(&["--threads", "1"]);
    let slow = ServeChild::start(&["--threads", "1", "--delay", "2ms"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let (a, b) = (format!("fast={}", fast.url), format!("slow={}", slow.url));
    let o = archbench(&[
        "compare",
        &a,
        &b,
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "400ms",
        "--runs",
        "5",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_eq!(doc["targets"][0]["runs"].as_array().unwrap().len(), 5);
    assert_eq!(doc["targets"][1]["runs"].as_array().unwrap().len(), 5);
    for name in ["req/s", "p50", "p90"] {
        let d = &crate::util::metric(&doc, name)["targets"][1]["versus_baseline"];
        assert!(d["p_value"].as_f64().unwrap() < 0.05, "{name}: {d}");
        assert_eq!(d["better"], false, "{name}: {d}");
        assert_ne!(d["verdict"], "~");
    }
    let text = stdout(&o);
    assert!(text.contains("Mann-Whitney U"), "{text}");
    assert!(
        text.contains(&format!("slow: archbench run {}", slow.url)),
        "{text}"
    );
}

/// Start and end (ms) of each burst of requests in an access log (bursts split by gaps of
/// 150 ms: a run's own pauses on a loaded machine reach 40 ms and more, while the gap between
/// two runs of one target interleaved is the other target's 300 ms run).
fn bursts(ng: Nginx) -> Vec<(f64, f64)> {
    let mut times: Vec<f64> = ng
        .stop_and_read_log()
        .iter()
        .map(|l| l.msec * 1000.0)
        .collect();
    times.sort_by(f64::total_cmp);
    let mut out: Vec<(f64, f64)> = Vec::new();
    for t in times {
        match out.last_mut() {
            Some(last) if t - last.1 < 150.0 => last.1 = t,
            _ => out.push((t, t)),
        }
    }
    out
}

#[test]
fn interleave_alternates_and_parallel_overlaps_in_the_servers_logs() {
    for (mode, expect_overlap) in [("--interleave", false), ("--parallel", true)] {
        let Some(a) = Nginx::start(NginxConfig::default()) else {
            return;
        };
        let Some(b) = Nginx::start(NginxConfig::default()) else {
            return;
        };
        let (ta, tb) = (format!("a={}", a.url("/")), format!("b={}", b.url("/")));
        let o = archbench(&[
            "compare",
            &ta,
            &tb,
            mode,
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "300ms",
            "--runs",
            "2",
            "--no-warmup",
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let (ra, rb) = (bursts(a), bursts(b));
        if expect_overlap {
            // Each round runs both at once: every burst of a overlaps a burst of b.
            for x in &ra {
                assert!(
                    rb.iter().any(|y| x.0 < y.1 && y.0 < x.1),
                    "{mode}: {ra:?} {rb:?}"
                );
            }
        } else {
            assert_eq!((ra.len(), rb.len()), (2, 2), "{mode}: {ra:?} {rb:?}");
            // a1 < b1 < a2 < b2, without overlap.
            assert!(
                ra[0].1 < rb[0].0 && rb[0].1 < ra[1].0 && ra[1].1 < rb[1].0,
                "{ra:?} {rb:?}"
            );
        }
    }
}

#[test]
fn bad_compare_command_lines_exit_2() {
    let a = ServeChild::start(&["--threads", "1"]);
    for (args, needle) in [
        (vec!["compare", "only=http://127.0.0.1:1/"], "2 values"),
        (
            vec!["compare", "http://127.0.0.1:1/", "b=http://127.0.0.1:1/"],
            "is not NAME=URL",
        ),
        (
            vec!["compare", "a=http://127.0.0.1:1/", "a=http://127.0.0.1:2/"],
            "given twice",
        ),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--runs",
                "0",
            ],
            "--runs",
        ),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--watch",
                "c=pid:1",
            ],
            "no target named",
        ),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--parallel",
                "--sequential",
            ],
            "cannot be used with",
        ),
    ] {
        let o = archbench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    drop(a);
}

#[test]
fn an_interrupted_comparison_keeps_the_runs_that_finished() {
    let a = ServeChild::start(&["--threads", "1"]);
    let b = ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let mut child = crate::util::bin()
        .args(["compare", &format!("a={}", a.url), &format!("b={}", b.url)])
        .args([
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "300ms",
            "--runs",
            "50",
            "--no-warmup",
            "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // "a: run 2" starts only after a's first run was measured and saved.
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("a: run 2", PROMPTLY);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    assert!(stdout(&o).contains("[INTERRUPTED]"), "{}", stdout(&o));
    let doc = read_json(&json);
    assert_eq!(doc["interrupted"], true);
    let runs_a = doc["targets"][0]["runs"].as_array().unwrap().len();
    assert!((1..50).contains(&runs_a), "{runs_a} runs of a kept");
}

#[test]
fn an_interrupted_demo_stops_the_nginx_it_started() {
    if crate::util::require_tool("nginx").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = crate::util::bin()
        .args([
            "demo",
            "-d",
            "2s",
            "-c",
            "4",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("stock: warm-up", PROMPTLY);
    let marker = format!("archbench-nginx-{pid}-");
    let ours = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
            })
            .count()
    };
    assert!(ours() >= 2, "both nginx instances are running");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    assert_eq!(ours(), 0, "no nginx of the demo is left");
}

#[test]
fn too_few_runs_say_no_verdict_before_and_after() {
    let a = archbench::serve::Server::start(archbench::serve::ServeOptions::default()).unwrap();
    let b = archbench::serve::Server::start(archbench::serve::ServeOptions::default()).unwrap();
    for (runs, why) in [
        ("1", "one run: no verdict"),
        ("3", "3 runs cannot reach alpha=0.05 (the smallest possible p is 0.100): use --runs 4 or more"),
    ] {
        let o = archbench(&[
            "compare",
            &format!("a={}", a.url()),
            &format!("b={}", b.url()),
            "--runs",
            runs,
            "-d",
            "150ms",
            "-c",
            "2",
            "-t",
            "1",
            "--no-warmup",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        // Said before the first run starts…
        let err = stderr(&o);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(why), "{first}");
        // …and in the table, with no interval and no p-value pretending otherwise.
        let table = stdout(&o);
        assert!(table.contains(&format!("No verdict: {why}.")), "{table}");
        let req = table.lines().find(|l| l.trim_start().starts_with("req/s")).unwrap();
        assert!(req.contains("no verdict") && !req.contains("p="), "{req}");
        // The limiter is in the report once per target, never repeated per run on stderr.
        assert!(!err.contains("limiter"), "{err}");
        assert_eq!(table.matches("Limiter a (first run)").count(), 1, "{table}");
        assert_eq!(table.matches("Limiter b (first run)").count(), 1, "{table}");
    }
}

/// A target that answered nothing though every attempt was made is a measurement of nothing:
/// one line naming it, exit 1, the report and the JSON still written (the other target's
/// figures are real).
#[test]
fn a_target_that_answered_nothing_fails_the_comparison() {
    let live = ServeChild::start(&["--threads", "1"]);
    // A loopback port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let md = dir.path().join("c.md");
    let o = archbench(&[
        "compare",
        &format!("dead=http://127.0.0.1:{port}/"),
        &format!("live={}", live.url),
        "-c",
        "1",
        "-t",
        "1",
        "-d",
        "200ms",
        "--runs",
        "1",
        "--no-warmup",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no request was answered"))
        .collect();
    assert_eq!(said.len(), 1, "{}", stderr(&o));
    assert!(
        said[0].starts_with("archbench: dead: no request was answered ("),
        "{}",
        said[0]
    );
    assert!(stdout(&o).contains("req/s"), "{}", stdout(&o));
    // How it failed, in the text and the Markdown: the table counts the errors only, and
    // the closing line sends the reader to "the errors in the report".
    let text = stdout(&o);
    assert!(text.contains("  Errors dead: connect "), "{text}");
    assert!(text.contains("(its runs together)"), "{text}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("- **Errors dead** connect "), "{md}");
    let doc = read_json(&json);
    assert_eq!(doc["targets"][0]["runs"][0]["totals"]["requests"], 0);
    assert!(
        doc["targets"][1]["runs"][0]["totals"]["requests"]
            .as_u64()
            .unwrap()
            > 0
    );
}
