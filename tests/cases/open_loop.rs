//! Open loop: the schedule kept and reported (send lateness, requests held by busy
//! connections), counts checked against nginx, and a watched server that goes away.

use std::time::Duration;

use archbench::serve::{ServeOptions, Server};

use crate::util::nginx::{LogLine, Nginx, NginxConfig};
use crate::util::schema::assert_valid;
use crate::util::{
    archbench, bin, finish_within, read_json, stderr, stdout, LineReader, ServeChild, PROMPTLY,
};

/// `run URL ARGS --json FILE` against a fresh nginx: the result, the text report and nginx's
/// access log (None where nginx cannot run; `Nginx::start` says why).
fn run_against_nginx(args: &[&str]) -> Option<(serde_json::Value, String, Vec<LogLine>)> {
    let ng = Nginx::start(NginxConfig::default())?;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let url = ng.url("/");
    let mut all = vec!["run", url.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let o = archbench(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_valid(&doc);
    Some((doc, stdout(&o), ng.stop_and_read_log()))
}

#[test]
fn open_loop_reports_its_pacing_and_counts_match_nginx() {
    let args = ["--rate", "2000", "-c", "20", "-t", "1", "-n", "2000"];
    let Some((doc, text, log)) = run_against_nginx(&args) else {
        return;
    };
    assert_eq!(doc["totals"]["requests"], 2000);
    assert_eq!(log.len(), 2000);
    let pacing = &doc["pacing"];
    assert_eq!(pacing["target_rate"], 2000.0);
    // Every request sent had its lateness recorded.
    assert_eq!(pacing["lateness"]["count"], 2000);
    let achieved = pacing["achieved_rate"].as_f64().unwrap();
    assert!(
        (achieved - 2000.0).abs() < 200.0,
        "achieved {achieved} req/s"
    );
    let p99 = pacing["lateness"]["p99_us"].as_u64().unwrap();
    let max = pacing["lateness"]["max_us"].as_u64().unwrap();
    assert!(p99 <= max);
    // The text report shows the figures of the JSON.
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Pacing"))
        .unwrap_or_else(|| panic!("no Pacing line in:\n{text}"));
    assert!(line.contains(&format!("p99 {p99} µs")), "{line}");
    assert!(line.contains(&format!("max {max} µs")), "{line}");
}

/// A timed open loop sends the schedule of its duration and no more: at 500 req/s for 1 s,
/// 500 requests, the one due at the end not sent (it was, then logged by nginx and counted by
/// nobody). Every request that went out (its bytes written) is one nginx logged; those
/// answered after the end, on a loaded machine, are the only ones not counted.
#[test]
fn a_timed_open_loop_sends_no_request_at_or_after_its_end() {
    let args = ["--rate", "500", "-c", "4", "-t", "1", "-d", "1s"];
    let Some((doc, _, log)) = run_against_nginx(&args) else {
        return;
    };
    let totals = &doc["totals"];
    let requests = totals["requests"].as_u64().unwrap();
    let written = totals["bytes_written"].as_u64().unwrap();
    // Every request is the same GET: as many went out as nginx logged.
    let sent = log.len() as u64;
    assert!(
        sent > 0 && written % sent == 0,
        "{written} bytes for {sent} requests"
    );
    assert!(sent <= 500, "{sent} requests sent at 500 req/s for 1 s");
    assert!(requests <= sent, "{requests} counted, {sent} logged");
}

/// A count-bounded open loop ends with its last response: connections with nothing left to
/// send stop then, not at their next turn. With as many connections as requests that turn
/// came a whole period later, and the run reported half the rate it kept.
#[test]
fn a_counted_open_loop_ends_with_its_last_request() {
    let args = ["--rate", "200", "-c", "40", "-t", "2", "-n", "40"];
    let Some((doc, _, log)) = run_against_nginx(&args) else {
        return;
    };
    assert_eq!(
        (doc["totals"]["requests"].as_u64(), log.len()),
        (Some(40), 40)
    );
    // The last of 40 requests at 200/s is due 195 ms in; its next turn would be at 395 ms.
    let elapsed = doc["totals"]["elapsed_s"].as_f64().unwrap();
    assert!(elapsed < 0.3, "elapsed {elapsed} s");
    let achieved = doc["pacing"]["achieved_rate"].as_f64().unwrap();
    assert!((achieved - 200.0).abs() < 20.0, "achieved {achieved} req/s");
}

#[test]
fn too_few_connections_for_the_rate_are_named() {
    // 50 ms per response: two connections carry at most 40 req/s of the 200 asked for.
    let s = Server::start(ServeOptions {
        delay: Duration::from_millis(50),
        ..ServeOptions::default()
    })
    .unwrap();
    let o = archbench(&[
        "run",
        &s.url(),
        "--rate",
        "200",
        "-c",
        "2",
        "-t",
        "1",
        "-n",
        "40",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let held = doc["pacing"]["held_by_busy_connection"].as_u64().unwrap();
    assert!(held >= 30, "{held} of 40 held");
    let reason = doc["limiter"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("too few connections for this rate"),
        "{reason}"
    );
    // Latency counts from the intended send time, so the wait shows in it (coordinated
    // omission corrected): the last requests waited far longer than one response takes.
    assert!(doc["latency"]["total"]["max_us"].as_u64().unwrap() > 300_000);
    assert!(doc["latency"]["service"]["max_us"].as_u64().unwrap() < 300_000);
}

#[test]
fn a_watched_server_that_goes_away_is_named_and_the_run_kept() {
    let server = ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = bin()
        .args(["run", &server.url, "-c", "4", "-t", "1", "-d", "3s"])
        .args(["--watch", &format!("web=pid:{}", server.pid())])
        .args(["--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first progress line (after a second) proves the load runs; then the server dies.
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("requests", PROMPTLY);
    drop(server);
    let o = finish_within(child, PROMPTLY);
    assert!(o.status.success(), "{}", err.rest(PROMPTLY));
    let doc = read_json(&json);
    assert_valid(&doc);
    assert!(doc["totals"]["requests"].as_u64().unwrap() > 0);
    assert!(doc["errors"]["connect"].as_u64().unwrap() > 0);
    let stopped = &doc["servers"][0]["sampling_stopped"];
    assert_eq!(stopped["server_gone"], true, "{stopped}");
    assert_eq!(doc["limiter"]["side"], "server_gone");
    let reason = doc["limiter"]["reason"].as_str().unwrap();
    assert!(reason.contains("server web went away"), "{reason}");
    assert!(stdout(&o).contains("went away"), "{}", stdout(&o));
}

#[test]
fn the_open_loop_sleeps_instead_of_spinning() {
    // 400 requests over 2 s with a send due every 5 ms: a client polling without sleeping
    // through the last millisecond of each wait burns about a core (~2 CPU-s); sleeping on
    // the timer costs a few hundredths.
    let s = Server::start(ServeOptions::default()).unwrap();
    let o = archbench(&[
        "run",
        &s.url(),
        "--rate",
        "200",
        "-c",
        "50",
        "-t",
        "1",
        "-d",
        "2s",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cpu = doc["client"]["cpu_s"].as_f64().unwrap();
    assert!(cpu < 0.3, "{cpu} CPU-s for 400 requests");
    assert!(doc["totals"]["requests"].as_u64().unwrap() >= 390);
}

/// `--stages`: the schedule follows the stages second by second (each second's sends within
/// 2% of what the stages ask after the first), through a ramp, on the same connections, and
/// every request counted is one nginx logged.
#[test]
fn staged_rates_are_followed_second_by_second_and_counted_as_nginx_logs() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--stages",
        "1s@500, 2s@500..1500, 1s@1500",
        "-c",
        "20",
        "-t",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("open loop in stages 1s@500, 2s@500..1500, 1s@1500"),
        "{text}"
    );
    assert!(
        text.contains("Stages     1s@500: asked 500.0 req/s"),
        "{text}"
    );
    let r = read_json(&json);
    assert_valid(&r);
    assert_eq!(r["plan"]["stages"].as_array().unwrap().len(), 3);
    // The mean of 4,000 requests over 4 s.
    assert_eq!(r["plan"]["rate"], 1000.0);
    assert_eq!(r["plan"]["duration_s"], 4.0);
    let series = r["series"].as_array().unwrap();
    assert_eq!(series.len(), 4, "{series:?}");
    let asked: Vec<f64> = series
        .iter()
        .map(|s| s["target_rate"].as_f64().unwrap())
        .collect();
    // The ramp's seconds ask for its mean over each: 750 and 1,250.
    for (a, b) in asked.iter().zip([500.0, 750.0, 1250.0, 1500.0]) {
        assert!((a - b).abs() < 1e-6, "{asked:?}");
    }
    crate::util::assert_series_follows_its_targets(series, &r["pacing"]);
    assert_eq!(r["totals"]["errors"], 0);
    assert_eq!(r["totals"]["connections_opened"], 20);
    // The HTML report draws the asked rate beside the achieved one.
    let html = dir.path().join("r.html");
    let o = archbench(&[
        "report",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("(asked)"), "no asked-rate line in the report");
    let requests = r["totals"]["requests"].as_u64().unwrap();
    assert!((3980..=4000).contains(&requests), "{requests}");
    // At most one request per connection was in flight at the end.
    let logged = ng.stop_and_read_log().len() as u64;
    assert!(
        requests <= logged && logged <= requests + 20,
        "{requests} {logged}"
    );
}

#[test]
fn bad_stages_are_a_usage_error_in_one_line() {
    for args in [
        &["--stages", "1s@"][..],
        &["--stages", "fast"],
        &["--stages", "0s@100"],
        &["--stages", "1s@100..x"],
        &["--stages", "5s@0"],
        &["--stages", "1s@100", "--rate", "10"],
        &["--stages", "1s@100", "-d", "5s"],
        &["--rate", "1k:2k"],
        &["--rate", "1k:2k/0s"],
    ] {
        let o = archbench(&[&["run", "http://127.0.0.1:9/", "-c", "1"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o).trim().lines().count(),
            1,
            "{args:?}: {}",
            stderr(&o)
        );
    }
}
