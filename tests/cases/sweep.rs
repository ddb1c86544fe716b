//! `archbench sweep` against two real nginx, one throttled by `limit_req` (requests queued and
//! released at 1,000 a second, so its latency grows with every connection added).

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench_within, read_json, stderr, stdout, PROMPTLY};

fn sweep(args: &[&str]) -> std::process::Output {
    archbench_within(&[&["sweep"], args].concat(), PROMPTLY * 2)
}

#[test]
fn an_slo_met_at_no_load_exits_1_and_bad_ladders_exit_2() {
    let Some(server) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let url = format!("a={}", server.url("/"));
    let o = sweep(&[
        &url,
        "-c",
        "1,2",
        "-d",
        "200ms",
        "--no-warmup",
        "--slo",
        "p50<1us",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("SLO not met at any load by a"),
        "{}",
        stderr(&o)
    );
    // Open loop: a rates ladder at 4 connections, no SLO: exit 0, no USL fit (and why).
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rates.json");
    let o = sweep(&[
        &url,
        "--rates",
        "100,200",
        "-c",
        "4",
        "-d",
        "300ms",
        "--no-warmup",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    assert_eq!(doc["ladder"], "rates");
    let run = &doc["steps"][1]["comparison"]["targets"][0]["runs"][0];
    assert_eq!(run["plan"]["rate"], 200.0);
    assert_eq!(run["plan"]["connections"], 4);
    assert!(doc["targets"][0]["usl_refused"]
        .as_str()
        .unwrap()
        .contains("rates ladder"));
    // `report` renders the stored sweep again.
    let again = archbench_within(&["report", json.to_str().unwrap()], PROMPTLY);
    assert!(
        stdout(&again).starts_with("archbench sweep: req/s offered 100, 200"),
        "{}",
        stdout(&again)
    );
    // Every format writes every kind: Markdown fences the sweep's text, JSON is the document.
    let md = archbench_within(
        &["report", json.to_str().unwrap(), "--format", "markdown"],
        PROMPTLY,
    );
    assert_eq!(
        stdout(&md),
        format!("```\n{}```\n", stdout(&again)),
        "{}",
        stdout(&md)
    );
    let as_json = archbench_within(
        &["report", json.to_str().unwrap(), "--format", "json"],
        PROMPTLY,
    );
    let back: serde_json::Value = serde_json::from_str(&stdout(&as_json)).unwrap();
    assert_eq!(back, doc);
    // HTML too: the page --html writes for this document alone, on stdout.
    let page = dir.path().join("sweep.html");
    let html = archbench_within(
        &["report", json.to_str().unwrap(), "--format", "html"],
        PROMPTLY,
    );
    let o = archbench_within(
        &[
            "report",
            json.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
        PROMPTLY,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read_to_string(&page).unwrap();
    assert!(written.contains("<svg"), "a page with its charts");
    assert_eq!(stdout(&html), written);
    for (args, says) in [
        (&[url.as_str()][..], "give the ladder"),
        (
            &[url.as_str(), "-c", "8:1:x2"][..],
            "ends below where it starts",
        ),
        (
            &[url.as_str(), "--rates", "1k:2k:x2", "-c", "1,2"][..],
            "one connection count",
        ),
        (
            &[url.as_str(), "-c", "1:1G:x1.0001"][..],
            "more than 100 steps",
        ),
    ] {
        let o = sweep(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
}

/// A ladder whose top still meets the SLO has not found the knee: the reports say it lies
/// beyond, and to extend the ladder; with the server watched, the HTML table has its columns.
#[test]
fn a_knee_beyond_the_ladder_is_said_so() {
    let server = crate::util::ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let o = sweep(&[
        &format!("a={}", server.url),
        "-c",
        "1,2",
        "-d",
        "400ms",
        "-t",
        "1",
        "--no-warmup",
        "--slo",
        "p99<30s",
        "--watch",
        &format!("a=pid:{}", server.pid()),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Knee       beyond the ladder's top: at 2 connections, its highest load, it still met the SLO"),
        "{text}"
    );
    assert!(
        text.contains("extend the ladder past 2 connections"),
        "{text}"
    );
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    assert_eq!(doc["targets"][0]["knee"], 2.0);
    assert_eq!(doc["targets"][0]["knee_beyond_ladder"], true);
    // The exit status is 0: the SLO was met (at every load).
    let html = dir.path().join("sweep.html");
    let o = crate::util::archbench(&[
        "report",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Knee: beyond the ladder&#39;s top")
            || page.contains("Knee: beyond the ladder's top"),
        "knee line"
    );
    assert!(page.contains("<th>server cores</th><th>req/server CPU-s</th>"));
    let cores = doc["targets"][0]["points"][1]["server_cores"]
        .as_f64()
        .unwrap();
    assert!(
        page.contains(&format!("data-value=\"{cores}\"")),
        "the step's server cores in its cell"
    );
}

/// `--find-max` against an nginx that answers at most 2,000 requests a second (`limit_req`,
/// a burst of 100, for a client made late by a loaded machine; the rest 503): the search
/// brackets the rate where errors pass 1% within the precision, runs the boundary again, and
/// every request counted is in nginx's log.
#[test]
fn find_max_brackets_the_rate_a_rate_limited_nginx_sustains() {
    let Some(server) = Nginx::start(NginxConfig {
        http: "limit_req_zone $server_port zone=cap:1m rate=2000r/s; limit_req_status 503;",
        server: "limit_req zone=cap burst=100 nodelay;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("max.json");
    let url = format!("capped={}", server.url("/"));
    let o = sweep(&[
        &url,
        "--find-max",
        "--rates",
        "500:4000",
        "--slo",
        "errors<1%",
        "-c",
        "40",
        "-t",
        "1",
        "-d",
        "1s",
        "--runs",
        "2",
        "--no-warmup",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Find max   sustains"), "{text}");
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    let m = &doc["find_max"][0];
    let sustained = m["sustained"]["rate"].as_f64().unwrap();
    let failed = m["failed"]["rate"].as_f64().unwrap();
    // Errors pass 1% a little above 2,000 req/s (2,000 a second and the burst of 100
    // answered, the rest refused).
    assert!((1800.0..=2250.0).contains(&sustained), "{m}");
    assert!(
        failed > sustained && failed <= sustained * 1.05 + 1.0,
        "{m}"
    );
    assert_eq!(m["sustained"]["runs"], 2, "{m}");
    assert_eq!(m["failed"]["runs"], 2, "{m}");
    // The probes are the steps, one run each but the boundary's two.
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), m["probes"].as_array().unwrap().len());
    assert!(steps.len() <= 12, "{}", steps.len());
    // The steps in order of rate, each judged by its runs' median: the knee (the highest
    // rate whose median met the SLO) is one side of the boundary.
    let loads: Vec<f64> = steps.iter().map(|s| s["load"].as_f64().unwrap()).collect();
    assert!(loads.windows(2).all(|w| w[0] <= w[1]), "{loads:?}");
    let knee = doc["targets"][0]["knee"].as_f64().unwrap();
    assert!((sustained..=failed).contains(&knee), "knee {knee}: {m}");
    // Every request counted (answered, 200 or 503) is one nginx logged; at most one per
    // connection in flight at each run's deadline was logged and not counted.
    let runs: Vec<&serde_json::Value> = steps
        .iter()
        .flat_map(|s| s["comparison"]["targets"][0]["runs"].as_array().unwrap())
        .collect();
    let counted: u64 = runs
        .iter()
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .sum();
    let logged = server.stop_and_read_log().len() as u64;
    assert!(
        counted <= logged && logged <= counted + 40 * runs.len() as u64,
        "{counted} {logged}"
    );
}

/// nginx at 200 requests a second that queues (delays) up to 1,000 more rather than refusing
/// them: a server whose latency, not its errors, shows a rate above what it serves.
fn queueing_nginx() -> Option<Nginx> {
    Nginx::start(NginxConfig {
        http: "limit_req_zone $server_port zone=q:1m rate=200r/s;",
        server: "limit_req zone=q burst=1000;",
        ..NginxConfig::default()
    })
}

/// An nginx that queues what it cannot serve yet (`limit_req` at 200 r/s with a deep burst,
/// delayed, not refused): at 400 req/s every request still arrives on time and waits in
/// nginx's queue, so the probe fails on its p99, a verdict on the server. It said "the client
/// could not keep 400 req/s" when it counted only the answered requests as sent. (One probe:
/// the next would start on the backlog this one left in nginx's bucket.)
#[test]
fn find_max_judges_a_queueing_server_on_its_latency() {
    let Some(server) = queueing_nginx() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("max.json");
    let url = format!("queued={}", server.url("/"));
    let o = sweep(&[
        &url,
        "--find-max",
        "--rates",
        "400:800",
        "--slo",
        // The last answered waited about 500 ms; a bound this loose leaves the client 20 ms
        // of send lateness before the probe would be void (a loaded test machine's).
        "p99<200ms",
        "-c",
        "200",
        "-t",
        "1",
        "-d",
        "1s",
        "--runs",
        "1",
        "--no-warmup",
        "--json",
        json.to_str().unwrap(),
    ]);
    let doc = read_json(&json);
    let m = &doc["find_max"][0];
    let verdict = m["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("fails p99<200ms already at 400 req/s"),
        "{m}\n{}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The probe sent its rate: what nginx still held at the end counts as sent, and about
    // half of it was (200 answered in the second).
    let run = &doc["steps"][0]["comparison"]["targets"][0]["runs"][0];
    let pacing = &run["pacing"];
    assert!(
        pacing["achieved_rate"].as_f64().unwrap() >= 380.0,
        "{pacing}"
    );
    let held = run["totals"]["unanswered_at_end"].as_u64().unwrap();
    assert!((100..=300).contains(&held), "{}", run["totals"]);
    // A run says the same: p99 lies among the requests still queued (about half), so it is
    // not determined, and the report says how percentiles are judged.
    let line = format!(
        "run {} --rate 400 -c 200 -t 1 -d 1s --slo p99<200ms",
        server.url("/")
    );
    let o = archbench_within(&line.split(' ').collect::<Vec<_>>(), PROMPTLY);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("not determined: too many still unanswered")
            && out.contains("requests still unanswered at the end as the slowest"),
        "{out}"
    );
}

/// The same server over a range it holds the low end of: every run after one that left
/// requests in nginx's queue waits until a lone request is answered (the queue worked off),
/// the second run of a probe too (`--runs 2`), so no run starts on the last one's backlog (it did: its 200 connections still busy, "the
/// client could not keep 250 req/s (it sent 204 of 250)"), and the search brackets nginx's
/// 200 r/s: a probe above it leaves requests queued at its end, which its p99 counts as the
/// slowest (judged on the answered alone, 250 req/s "held": its first 200 were answered within
/// 200 ms, the other 50 still queued). Measured here: 1.0 s to work off 200 held requests,
/// 0.2 s for 50; sustains 194, fails at 213.
#[test]
fn find_max_waits_for_a_queueing_servers_backlog_between_probes() {
    let Some(server) = queueing_nginx() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("max.json");
    let url = format!("queued={}", server.url("/"));
    let o = sweep(&[
        &url,
        "--find-max",
        "--rates",
        "100:400",
        "--precision",
        "10%",
        "--slo",
        "p99<200ms",
        "-c",
        "200",
        "-t",
        "1",
        "-d",
        "1s",
        "--runs",
        "2",
        "--no-warmup",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    let doc = read_json(&json);
    let m = &doc["find_max"][0];
    // The boundary's probes run twice; one above nginx's rate leaves a backlog after its
    // first run, and its second waits for it (each run's label comes before its wait).
    assert!(
        err.contains("  queued: run 2\nsweep --find-max: queued: the server still held "),
        "{err}"
    );
    let verdict = m["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("sustains "), "{m}\n{err}");
    let sustained = m["sustained"]["rate"].as_f64().unwrap();
    let failed = m["failed"]["rate"].as_f64().unwrap();
    assert!(
        (150.0..=205.0).contains(&sustained) && failed > sustained && failed <= 250.0,
        "{m}"
    );
    assert!(
        err.contains("requests at the last run's end: waiting until it answers a lone request")
            && err.contains("answered after"),
        "{err}"
    );
}

/// One connection cannot send 50,000 requests a second: the search ends there as the
/// client's limit, not as the server's maximum.
#[test]
fn find_max_ends_where_the_client_cannot_keep_the_rate() {
    let Some(server) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("max.json");
    let url = format!("one={}", server.url("/"));
    let o = sweep(&[
        &url,
        "--find-max",
        "--rates",
        "50k:100k",
        "--slo",
        "errors<1%",
        "-c",
        "1",
        "-t",
        "1",
        "-d",
        "500ms",
        "--no-warmup",
        "--json",
        json.to_str().unwrap(),
    ]);
    // The SLO held at the one rate probed (no error): not a failure of the server's.
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    let m = &doc["find_max"][0];
    let verdict = m["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("the client could not keep 50,000 req/s (it sent"),
        "{verdict}"
    );
    // Its sends waited for the one connection's answers: more connections are the cure.
    assert!(verdict.ends_with("give it more connections (-c): its requests waited for connections still busy with earlier answers"), "{verdict}");
    assert!(m["sustained"].is_null() && m["failed"].is_null(), "{m}");
    assert_eq!(m["probes"].as_array().unwrap().len(), 1);
}

#[test]
fn find_max_needs_an_slo_and_rates() {
    for args in [
        &["a=http://127.0.0.1:9/", "--find-max", "--rates", "100:200"][..],
        &["a=http://127.0.0.1:9/", "--find-max", "--slo", "p99<1ms"],
        &[
            "a=http://127.0.0.1:9/",
            "--find-max",
            "--slo",
            "p99<1ms",
            "--rates",
            "100:200",
            "--precision",
            "0%",
        ],
    ] {
        let o = sweep(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// Ctrl-C in a sweep's second step: the step cut short is shown and marked, not judged, and a
/// target measured at one load only gets no knee there (it was given "1 connections" from that
/// one point, and the cut-short step counted as a full one).
#[test]
fn an_interrupted_step_is_shown_not_judged() {
    use crate::util::{bin, KillOnDrop, LineReader};
    use archbench::serve::{ServeOptions, Server};
    use std::process::Stdio;
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut child = bin()
        .args([
            "sweep",
            &format!("a={}", s.url()),
            &format!("b={}", s.url()),
        ])
        .args([
            "-c",
            "1,2,4",
            "-d",
            "1s",
            "--runs",
            "1",
            "--no-warmup",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = LineReader::new(child.stderr.take().unwrap());
    let child = KillOnDrop::new(child);
    err.wait_for("sweep: 2 connections", PROMPTLY);
    err.wait_for("a: run 1", PROMPTLY);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", err.rest(PROMPTLY));
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    let (a, b) = (&doc["targets"][0], &doc["targets"][1]);
    assert_eq!(a["points"].as_array().unwrap().len(), 2, "{a}");
    assert_eq!(a["points"][0]["cut_short"], false, "{a}");
    assert_eq!(a["points"][1]["cut_short"], true, "{a}");
    assert_eq!(b["points"].as_array().unwrap().len(), 1, "{b}");
    for t in [a, b] {
        assert!(t["knee"].is_null(), "{t}");
        let why = t["knee_reason"].as_str().unwrap();
        assert!(
            why.starts_with("not found: the sweep ended at 1 connections, before its ladder's top of 4 connections, and there it was the only load measured"),
            "{why}"
        );
    }
    assert!(
        stdout(&o).contains("(at 2 the run was cut short by the interruption: shown, not judged)"),
        "{}",
        stdout(&o)
    );
}
