//! Request mixes (`--mix FILE`): the entries nginx logs, in the proportions of their weights,
//! and each entry's figures in the result (text, JSON, HTML), on run, compare and sweep.

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::schema::assert_valid;
use crate::util::{archbench, read_json, stderr, stdout};

const LOCATIONS: &str = r#"location /s/ { return 200 "ok\n"; }"#;

fn nginx() -> Option<Nginx> {
    Nginx::start(NginxConfig {
        server: LOCATIONS,
        ..NginxConfig::default()
    })
}

/// A mix of three weighted entries (one a POST with a body file) and one the server does
/// not have; returns the file's path.
fn write_mix(dir: &std::path::Path) -> String {
    std::fs::write(dir.join("item.json"), b"{\"item\":1}").unwrap();
    let mix = dir.join("mix.txt");
    std::fs::write(
        &mix,
        "# a home page mostly, some searches, a create now and then\n\
         GET /s/home name=home weight=6\n\
         \n\
         GET /s/search?q=a name=search weight=3\n\
         Accept: application/json\n\
         \n\
         POST /s/items name=create weight=2\n\
         Content-Type: application/json\n\
         @item.json\n\
         \n\
         GET /missing name=missing\n",
    )
    .unwrap();
    mix.display().to_string()
}

#[test]
fn a_mix_sends_each_entry_by_its_weight_and_reports_it() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mix = write_mix(dir.path());
    let json = dir.path().join("r.json");
    let n = 12_000u64;
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--mix",
        &mix,
        "-c",
        "6",
        "-t",
        "2",
        "-n",
        &n.to_string(),
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = ng.stop_and_read_log();
    assert_eq!(log.len() as u64, n);
    // Each entry is its weight's share of the requests: within four standard deviations of
    // a binomial draw of n at that share (the cycle is in fact exact, give or take one per
    // connection).
    for (path, weight) in [
        ("GET /s/home ", 6.0),
        ("GET /s/search?q=a ", 3.0),
        ("POST /s/items ", 2.0),
        ("GET /missing ", 1.0),
    ] {
        let p = weight / 12.0;
        let expected = n as f64 * p;
        let bound = 4.0 * (n as f64 * p * (1.0 - p)).sqrt() + 6.0;
        let seen = log.iter().filter(|l| l.request.starts_with(path)).count() as f64;
        assert!(
            (seen - expected).abs() <= bound,
            "{path}: {seen} logged, {expected} ± {bound:.0} expected"
        );
    }
    let doc = read_json(&json);
    assert_valid(&doc);
    assert_eq!(doc["plan"]["mix"], mix.as_str());
    let entries = doc["entries"].as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["home", "search", "create", "missing"]);
    let answered: u64 = entries
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(answered, n);
    assert_eq!(entries[3]["status_codes"]["404"], entries[3]["requests"]);
    assert_eq!(entries[2]["method"], "POST");
    assert_eq!(
        entries[0]["latency"]["count"], entries[0]["requests"],
        "each entry's latencies are its own"
    );
    let text = stdout(&o);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("missing") && l.contains("404:")),
        "{text}"
    );
    let html = archbench(&["report", json.to_str().unwrap(), "--format", "html"]);
    let page = stdout(&html);
    assert!(page.contains("request mix") && page.contains("<code>POST /s/items</code>"));
}

#[test]
fn compare_and_sweep_keep_each_entrys_figures() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mix = write_mix(dir.path());
    let url = ng.url("/");
    let (a, b) = (format!("a={url}"), format!("b={url}"));
    let json = dir.path().join("c.json");
    let o = archbench(&[
        "compare",
        &a,
        &b,
        "--mix",
        &mix,
        "--runs",
        "1",
        "--no-warmup",
        "-d",
        "300ms",
        "-c",
        "2",
        "-t",
        "1",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_valid(&doc);
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        let sum: u64 = run["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["requests"].as_u64().unwrap() + e["errors"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, run["totals"]["attempted"].as_u64().unwrap());
    }
    let json = dir.path().join("s.json");
    let o = archbench(&[
        "sweep",
        &a,
        "--mix",
        &mix,
        "-c",
        "1,2",
        "--no-warmup",
        "-d",
        "300ms",
        "-t",
        "1",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_valid(&doc);
    assert!(doc.to_string().contains("\"name\":\"create\""));
}

#[test]
fn a_broken_mix_is_one_line_with_its_place() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mix = dir.path().join("bad.txt");
    std::fs::write(&mix, "GET /\nnot a header line\n").unwrap();
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--mix",
        mix.to_str().unwrap(),
        "-n",
        "5",
        "-c",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains(&format!("{}:2:", mix.display())), "{e}");
    std::fs::write(&mix, "GET http://example.com/ name=elsewhere\n").unwrap();
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "--mix",
        mix.to_str().unwrap(),
        "-n",
        "5",
        "-c",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not on the run's server"),
        "{}",
        stderr(&o)
    );
    assert!(ng.stop_and_read_log().is_empty(), "nothing was sent");
}
