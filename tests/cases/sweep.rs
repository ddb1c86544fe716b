//! `archbench sweep` against two real nginx, one throttled by `limit_req` (requests queued and
//! released at 1,000 a second, so its latency grows with every connection added).

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench_within, read_json, stderr, stdout, PROMPTLY};

fn sweep(args: &[&str]) -> std::process::Output {
    archbench_within(&[&["sweep"], args].concat(), PROMPTLY * 2)
}

#[test]
fn the_throttled_server_has_the_lower_knee_and_leaves_the_ladder_early() {
    let Some(fast) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let Some(slow) = Nginx::start(NginxConfig {
        http: "limit_req_zone $binary_remote_addr zone=one:1m rate=1000r/s;",
        server: "limit_req zone=one burst=100000;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    let o = sweep(&[
        &format!("fast={}", fast.url("/")),
        &format!("slow={}", slow.url("/")),
        "-c",
        "1:64:x2",
        "-d",
        "700ms",
        "-t",
        "1",
        "--no-warmup",
        "--slo",
        "p99<10ms",
        "--cost",
        "slow=0.5",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    let target = |name: &str| {
        doc["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    let (f, s) = (target("fast"), target("slow"));
    // 1,000 req/s shared by N connections: p99 ≈ N ms, so 16 connections miss 10 ms.
    let slow_knee = s["knee"].as_f64().unwrap();
    assert!((2.0..=8.0).contains(&slow_knee), "slow knee {slow_knee}");
    assert!(f["knee"].as_f64().unwrap() > slow_knee, "{f}");
    // Failing twice in a row (at 16 and 32, or already at 8 and 16 when a step's p99 lands
    // above 10 ms at 8), the slow one leaves the ladder and is not run at 64.
    let points = s["points"].as_array().unwrap();
    let failed: Vec<f64> = points[points.len() - 2..]
        .iter()
        .filter(|p| p["slo_passed"] == false)
        .map(|p| p["load"].as_f64().unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "its last two steps failed: {s}");
    assert!(failed[1] <= 32.0, "{s}");
    assert_eq!(s["stopped"]["after"].as_f64(), Some(failed[1]), "{s}");
    let said = format!(
        "slow is past its knee (the SLO failed at {} and {}",
        failed[0], failed[1]
    );
    assert!(stderr(&o).contains(&said), "{said}: {}", stderr(&o));
    let last = doc["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(last["load"], 64.0);
    let names: Vec<&str> = last["comparison"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fast"]);
    // Its throughput stays near the limit (a step's run is short: allow its burst).
    let top = s["points"].as_array().unwrap().last().unwrap()["requests_per_sec"]
        .as_f64()
        .unwrap();
    assert!((700.0..1_300.0).contains(&top), "{top}");
    // --cost: a million requests at the knee's throughput, from the price per hour.
    let at_knee = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["load"].as_f64() == Some(slow_knee))
        .unwrap();
    let want = 0.5 / (at_knee["requests_per_sec"].as_f64().unwrap() * 3600.0) * 1e6;
    let got = s["cost_per_million_at_knee"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert!(f["cost_per_million_at_knee"].is_null(), "no price for fast");
    // Either a USL fit or the reason there is none, for each.
    for t in [&f, &s] {
        assert!(t["usl"].is_object() != t["usl_refused"].is_string(), "{t}");
    }
    let text = stdout(&o);
    // The text says where it stopped as the JSON does (at 32, or at 16 on a slow machine).
    let stopped = format!("Stopped    after {}", failed[1]);
    assert!(
        text.contains("Knee       ") && text.contains(&stopped),
        "{stopped}: {text}"
    );
    // Every request counted was answered: the fast nginx logged at most one more per
    // connection of each run (in flight at the deadline).
    let counted: u64 = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["comparison"]["targets"].as_array().unwrap().clone())
        .filter(|t| t["name"] == "fast")
        .flat_map(|t| t["runs"].as_array().unwrap().clone())
        .map(|r| r["totals"]["requests"].as_u64().unwrap())
        .sum();
    let logged = fast.stop_and_read_log().len() as u64;
    let in_flight: u64 = [1, 2, 4, 8, 16, 32, 64].iter().sum();
    assert!(
        logged >= counted && logged <= counted + in_flight,
        "nginx logged {logged}, archbench counted {counted}"
    );
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
