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

/// A bounded open-loop run against nginx with this slack: the document and nginx's log.
fn open_loop_with_slack(slack: &str) -> (serde_json::Value, usize) {
    let ng = Nginx::start(NginxConfig::default()).expect("nginx is installed");
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--rate",
        "20000",
        "-c",
        "20",
        "-t",
        "1",
        "-n",
        "6000",
        "--pacing-slack",
        slack,
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_valid(&doc);
    (doc, ng.stop_and_read_log().len())
}

#[test]
fn sends_due_within_the_slack_share_a_wake_up_early_and_are_reported() {
    if Nginx::start(NginxConfig::default()).is_none() {
        return;
    }
    // 20k req/s: a send every 50 µs, so with a 50 µs slack the one after each due send is
    // always within it and goes out in the same wake-up, early.
    let (doc, logged) = open_loop_with_slack("50us");
    assert_eq!(doc["totals"]["requests"], 6000);
    assert_eq!(logged, 6000);
    assert_eq!(doc["plan"]["pacing_slack_us"], 50);
    let pacing = &doc["pacing"];
    let early = pacing["early_sends"].as_u64().unwrap();
    assert!(early > 0 && early < 6000, "{pacing}");
    assert_eq!(pacing["earliness"]["count"], early);
    assert!(
        pacing["earliness"]["max_us"].as_u64().unwrap() <= 50,
        "{pacing}"
    );
    // Every send has a lateness (0 for the early ones).
    assert_eq!(pacing["lateness"]["count"], 6000);
    assert!(doc["histograms"]["send_earliness"].is_string());
    // The text report of the same document says it beside the lateness.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = archbench(&["report", file.to_str().unwrap()]);
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Early"))
        .unwrap_or_else(|| panic!("no Early line in:\n{text}"));
    let max = pacing["earliness"]["max_us"].as_u64().unwrap();
    assert!(
        line.contains("the slack is 50 µs") && line.contains(&format!("max {max} µs")),
        "{line}"
    );

    let (doc, logged) = open_loop_with_slack("0");
    assert_eq!(logged, 6000);
    assert_eq!(doc["plan"]["pacing_slack_us"], 0);
    assert_eq!(doc["pacing"]["early_sends"], 0, "{}", doc["pacing"]);
    assert!(doc["histograms"].get("send_earliness").is_none());
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
fn coordinated_omission_is_corrected_to_the_analytic_percentiles() {
    // Requests intended at t into a 1 s period wait until 200 ms when t < 200 ms, else not
    // at all: latency exceeds x for a share (0.2 - x/1 s) of requests, so p90 = 100 ms and
    // p99 = 190 ms. A tool that times from the actual send (or stops sending while the server
    // stalls) reports far less.
    let server = crate::util::stalling::StallingServer::start();
    let o = archbench(&[
        "run",
        &server.url(),
        "--rate",
        "1000",
        "-c",
        "50",
        "-t",
        "1",
        "-d",
        "5s",
        // The largest slack: sends that go out early are timed from their send, so the
        // correction holds with it.
        "--pacing-slack",
        "50us",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ms = |field: &str| doc["latency"]["total"][field].as_u64().unwrap() as f64 / 1000.0;
    eprintln!(
        "stalling server: p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
        ms("p50_us"),
        ms("p90_us"),
        ms("p99_us"),
        ms("max_us")
    );
    assert!(
        (ms("p90_us") - 100.0).abs() <= 10.0,
        "p90 {} ms",
        ms("p90_us")
    );
    assert!(
        (ms("p99_us") - 190.0).abs() <= 10.0,
        "p99 {} ms",
        ms("p99_us")
    );
    assert!(ms("max_us") <= 215.0, "max {} ms", ms("max_us"));
    // The uncorrected service time hides the stall for the requests that waited in line.
    let service_p90 = doc["latency"]["service"]["p90_us"].as_u64().unwrap() as f64 / 1000.0;
    assert!(service_p90 < ms("p90_us"), "service p90 {service_p90} ms");
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

#[test]
fn responses_read_late_are_timed_as_they_arrived_and_sends_stay_on_time() {
    // Each response takes 0 to 4 ms, so a connection's next send often falls while the worker
    // sleeps toward another connection's send: it must wake for it, not send late.
    let server = crate::util::stalling::StallingServer::start_with(crate::util::stalling::jitter);
    let o = archbench(&[
        "run",
        &server.url(),
        "--rate",
        "600",
        "-c",
        "3",
        "-t",
        "1",
        "-d",
        "3s",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let late = &doc["pacing"]["lateness"];
    // The bug this guards against (a due send waiting for the timer of a later connection's
    // send) made p90 49 ms. Alone, p90 stays under 0.9 ms; with the whole suite on both cores
    // (TLS handshakes, sweeps and clusters beside it) p50 reached 1.5 ms and p90 4.2 ms, which
    // is the machine, not the schedule: bounds between the two.
    let p50 = late["p50_us"].as_u64().unwrap();
    let p90 = late["p90_us"].as_u64().unwrap();
    assert!(p50 < 3_000, "send lateness p50 {p50} µs: {late}");
    assert!(p90 < 12_000, "send lateness p90 {p90} µs: {late}");
    // Service times are the server's own 0-4 ms, not stretched by when they were read.
    let service = &doc["latency"]["service"];
    let p50 = service["p50_us"].as_u64().unwrap();
    assert!(
        (1_000..3_500).contains(&p50),
        "service p50 {p50} µs: {service}"
    );
}

#[test]
fn large_responses_are_not_read_late() {
    // An 8 MiB body does not fit a socket's buffer: its last segments come only as the client
    // reads. Timed in the open loop (sends 6.7 ms apart) it must cost what it costs in a
    // closed loop, not wait for the next send's wake-up.
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let big = ng.url("/big.bin");
    let www = std::path::PathBuf::from(ng.root());
    std::fs::write(www.join("big.bin"), vec![b'x'; 8 << 20]).unwrap();
    let service_p50 = |args: &[&str]| {
        let mut argv = vec!["run", big.as_str(), "-t", "1", "-o", "json"];
        argv.extend_from_slice(args);
        let o = archbench(&argv);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(doc["errors"]["read"], 0);
        doc["latency"]["service"]["p50_us"].as_u64().unwrap()
    };
    let closed = service_p50(&["-c", "1", "-n", "60"]);
    // 150/s: sends 6.7 ms apart, so the worker spends most of its time within the 5 ms in
    // which it would defer reads, while 1.2 GB/s stays under what a loaded 2-core machine
    // moves (220/s was at its limit: queueing, not deferral, then set the figure).
    let open = service_p50(&["--rate", "150", "-c", "15", "-n", "90"]);
    assert!(
        open <= 2 * closed + 1_000,
        "8 MiB: open loop service p50 {open} µs, closed loop {closed} µs"
    );
}
