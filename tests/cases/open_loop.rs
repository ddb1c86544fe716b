//! Open loop: the schedule kept and reported (send lateness, requests held by busy
//! connections), counts checked against nginx, and a watched server that goes away.

use std::time::Duration;

use archbench::serve::{ServeOptions, Server};

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::schema::assert_valid;
use crate::util::{
    archbench, bin, finish_within, read_json, stderr, stdout, LineReader, ServeChild, PROMPTLY,
};

#[test]
fn open_loop_reports_its_pacing_and_counts_match_nginx() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--rate",
        "2000",
        "-c",
        "20",
        "-t",
        "1",
        "-n",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let doc = read_json(&json);
    assert_valid(&doc);
    let log = ng.stop_and_read_log();
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
