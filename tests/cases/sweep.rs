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
