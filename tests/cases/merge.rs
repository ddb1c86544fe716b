//! Results that merge across processes: three `run --part I/3` processes started at one
//! instant against nginx, merged, checked against nginx's access log and against one
//! histogram of all three recordings; and documents that must be refused.

use std::time::{Duration, SystemTime};

use archbench::serve::{ServeOptions, Server};
use archbench::stats::SerializedHistogram;

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::schema::assert_valid;
use crate::util::{archbench, bin, finish_within, read_json, stderr, PROMPTLY};

fn histogram(doc: &serde_json::Value, which: &str) -> hdrhistogram::Histogram<u64> {
    let h: SerializedHistogram = serde_json::from_value(doc["histograms"][which].clone()).unwrap();
    h.0
}

/// `n` processes of `archbench run ARGS --part I/n`, started together 1.5 s from now
/// (`--start-at`), each to completion; their result files.
fn run_parts(dir: &std::path::Path, n: usize, args: &[&str]) -> Vec<std::path::PathBuf> {
    let start = SystemTime::now() + Duration::from_millis(1500);
    let at = format!(
        "@{:.6}",
        start
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    );
    let files: Vec<_> = (0..n).map(|i| dir.join(format!("p{i}.json"))).collect();
    let children: Vec<_> = (0..n)
        .map(|i| {
            bin()
                .arg("run")
                .args(args)
                .args(["--part", &format!("{i}/{n}"), "--start-at", &at])
                .args(["-q", "--json"])
                .arg(&files[i])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = finish_within(c, PROMPTLY);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    files
}

#[test]
fn three_parts_started_together_merge_exactly() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Seven connections at 700 req/s, 2,100 requests in all, over three parts: 3, 2 and 2
    // connections, so 300, 200 and 200 req/s and 900, 600 and 600 requests (a count, so no
    // request is in flight when a part stops). Each part takes 3 s: they end together.
    let files = run_parts(
        dir.path(),
        3,
        &[
            &ng.url("/"),
            "-c",
            "7",
            "-t",
            "1",
            "--rate",
            "700",
            "-n",
            "2100",
        ],
    );
    let parts: Vec<serde_json::Value> = files.iter().map(read_json).collect();
    for (i, p) in parts.iter().enumerate() {
        assert_valid(p);
        let conns = [3, 2, 2][i];
        assert_eq!(p["plan"]["connections"], conns);
        assert_eq!(p["plan"]["rate"], 100.0 * conns as f64);
        assert_eq!(p["plan"]["requests"], 300 * conns);
        assert_eq!(p["plan"]["part"]["index"], i);
        assert_eq!(p["plan"]["part"]["connections"], 7);
        let elapsed = p["totals"]["elapsed_s"].as_f64().unwrap();
        assert!((elapsed - 3.0).abs() < 0.3, "part {i} took {elapsed} s");
    }
    let merged_file = dir.path().join("merged.json");
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--json".into(), merged_file.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = archbench(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = read_json(&merged_file);
    assert_valid(&m);
    let log = ng.stop_and_read_log();
    // A request counted is a request the server answered.
    let requests = m["totals"]["requests"].as_u64().unwrap();
    assert_eq!(requests, 2100);
    assert_eq!(requests, log.len() as u64);
    assert_eq!(m["plan"]["requests"], 2100);
    assert_eq!(
        requests,
        parts
            .iter()
            .map(|p| p["totals"]["requests"].as_u64().unwrap())
            .sum::<u64>()
    );
    assert_eq!(m["plan"]["connections"], 7);
    assert_eq!(m["plan"]["rate"], 700.0);
    // The start skew is reported: the parts' first sends lie g/R apart by the schedule.
    let text = crate::util::stdout(&o);
    assert!(text.contains("Sources    3 merged, first sends"), "{text}");
    assert_eq!(m["sources"].as_array().unwrap().len(), 3);
    // Percentiles equal those of one histogram holding every recording of the three.
    let mut all = archbench::stats::latency_histogram();
    for p in &parts {
        for v in histogram(p, "total").iter_recorded() {
            all.record_n(v.value_iterated_to(), v.count_at_value())
                .unwrap();
        }
    }
    let merged = histogram(&m, "total");
    assert_eq!(merged.len(), requests);
    for (q, field) in [
        (0.5, "p50_us"),
        (0.9, "p90_us"),
        (0.99, "p99_us"),
        (1.0, "max_us"),
    ] {
        assert_eq!(all.value_at_quantile(q), merged.value_at_quantile(q), "{q}");
        assert_eq!(
            m["latency"]["total"][field],
            all.value_at_quantile(q),
            "{field}"
        );
    }
    // The series, aligned on the wall clock, adds up to the total.
    let series: u64 = m["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(series, requests);
    // They started together: every part began at the instant given.
    for p in &parts {
        assert_eq!(p["plan"]["start_at"], parts[0]["plan"]["start_at"]);
        assert_eq!(p["started_at"], parts[0]["started_at"]);
    }
    for s in m["sources"].as_array().unwrap() {
        assert_eq!(s["start_offset_s"], 0.0);
    }
    // One smooth rate, not three bursts in lockstep: in lockstep two of every three
    // arrivals would share their millisecond with another part's.
    let mut msec: Vec<f64> = log.iter().map(|l| l.msec).collect();
    msec.sort_by(f64::total_cmp);
    let same_ms = msec.windows(2).filter(|w| w[1] - w[0] < 0.0005).count();
    assert!(
        (same_ms as f64) < 0.4 * msec.len() as f64,
        "{same_ms} of {} arrivals share a millisecond with the one before",
        msec.len()
    );
}

#[test]
fn merge_refuses_what_it_cannot_merge_exactly() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    let o = archbench(&[
        "run",
        &s.url(),
        "-n",
        "200",
        "-c",
        "2",
        "-q",
        "--json",
        good.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&good);
    let write = |name: &str, v: &serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
        p.display().to_string()
    };
    let mut future = doc.clone();
    future["schema_version"] = 99.into();
    let mut other = doc.clone();
    other["kind"] = "something-else".into();
    let mut inconsistent = doc.clone();
    inconsistent["totals"]["requests"] = 9999.into();
    let mut wide = doc.clone();
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    h.record(3_000_000_000).unwrap();
    wide["histograms"]["service"] = serde_json::to_value(SerializedHistogram(h)).unwrap();
    let compare_doc = serde_json::json!({"kind": "archbench-comparison", "schema_version": 2});
    let good = good.display().to_string();
    for (file, needle) in [
        (
            write("future.json", &future),
            "schema_version 99, which this archbench does not read",
        ),
        (write("other.json", &other), "is not an archbench document"),
        (
            write("inconsistent.json", &inconsistent),
            "its figures disagree",
        ),
        (write("wide.json", &wide), "incompatible bounds"),
        (write("cmp.json", &compare_doc), "merge takes run results"),
        (
            write("text.json", &serde_json::json!("not a document")),
            "not an archbench document",
        ),
    ] {
        let o = archbench(&["merge", &good, &file]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(needle), "{file}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // `report` reads through the same typed path and refuses the same way.
    let o = archbench(&["report", &write("future2.json", &future)]);
    assert_eq!(o.status.code(), Some(2));
    // A good document merged with itself doubles every count and keeps every percentile.
    let out = dir.path().join("twice.json");
    let o = archbench(&["merge", &good, &good, "--json", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("look like the same run"),
        "{}",
        stderr(&o)
    );
    assert!(
        crate::util::stdout(&o).contains("Sources    2 merged"),
        "{}",
        crate::util::stdout(&o)
    );
    let twice = read_json(&out);
    assert_eq!(twice["totals"]["requests"], 400);
    assert_eq!(
        twice["latency"]["total"]["p99_us"],
        doc["latency"]["total"]["p99_us"]
    );
}

/// What a 1,000-pod distributed run hands `merge`: the merged run is exact (counts, the
/// percentiles of one histogram of every latency recorded, the start skew) and names every
/// source. Time and memory at this scale are measured by bench/merge-scale.sh.
#[test]
fn a_thousand_worker_results_merge_exactly() {
    use crate::util::synthetic::{latencies, latency_second, worker_result};
    const WORKERS: u32 = 1_000;
    const REQUESTS: u64 = 100;
    const SECONDS: u32 = 10;
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..WORKERS {
        // Worker i sent first i µs after the earliest.
        let r = worker_result(i, WORKERS, REQUESTS, SECONDS, u64::from(i));
        let f = dir.path().join(format!("worker-{i}.json"));
        std::fs::write(&f, serde_json::to_vec(&r).unwrap()).unwrap();
        files.push(f);
    }
    let merged = dir.path().join("merged.json");
    let o = crate::util::bin()
        .arg("merge")
        .args(&files)
        .arg("--json")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", crate::util::stderr(&o));
    let m = read_json(&merged);
    assert_eq!(m["totals"]["requests"], u64::from(WORKERS) * REQUESTS);
    assert_eq!(m["plan"]["connections"], 4 * u64::from(WORKERS));
    assert_eq!(m["sources"].as_array().unwrap().len(), WORKERS as usize);
    let skew = m["start_skew_s"].as_f64().unwrap();
    assert!((skew - 999e-6).abs() < 1e-9, "skew {skew}");
    // One histogram of every latency the workers recorded, built here from the raw values.
    let mut all = archbench::stats::latency_histogram();
    let mut per_second: Vec<_> = (0..SECONDS)
        .map(|_| archbench::stats::latency_histogram())
        .collect();
    for i in 0..WORKERS {
        for (k, us) in latencies(i, REQUESTS).enumerate() {
            all.record(us).unwrap();
            per_second[latency_second(k as u64, REQUESTS, SECONDS) as usize]
                .record(us)
                .unwrap();
        }
    }
    // Latency over time too: each merged second is one histogram of that second's latencies
    // of every worker (their starts lie within a millisecond: no second shifts).
    let steps = m["latency_series"].as_array().unwrap();
    assert_eq!(steps.len(), SECONDS as usize);
    for (s, h) in steps.iter().zip(&per_second) {
        assert_eq!(s["count"].as_u64(), Some(h.len()));
        assert_eq!(s["p99_us"].as_u64(), Some(h.value_at_quantile(0.99)));
        assert_eq!(s["max_us"].as_u64(), Some(h.max()));
    }
    for (q, field) in [
        (0.5, "p50_us"),
        (0.99, "p99_us"),
        (0.999, "p99_9_us"),
        (1.0, "max_us"),
    ] {
        assert_eq!(
            m["latency"]["total"][field],
            all.value_at_quantile(q),
            "{field}"
        );
    }
    assert_eq!(histogram(&m, "total").len(), all.len());
}

/// `merge` reads its sources twice (to hold one source's histograms at a time); what cannot
/// be read twice — a pipe, as `<(ssh host cat r.json)` gives — is kept from the first read.
#[test]
fn results_from_pipes_merge_like_files() {
    use crate::util::synthetic::worker_result;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        let r = worker_result(i, 2, 50, 5, 0);
        std::fs::write(
            dir.path().join(format!("w{i}.json")),
            serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
    }
    let o = std::process::Command::new("bash")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!(
            "{} merge <(cat w0.json) <(cat w1.json) -o json",
            env!("CARGO_BIN_EXE_archbench")
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", crate::util::stderr(&o));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(m["totals"]["requests"], 100);
    assert_eq!(m["sources"].as_array().unwrap().len(), 2);
}

/// `--stages` over `--part`: each part sends its connections' share of the staged schedule,
/// and the merged load follows the stages second by second (within 2% after the first), with
/// each step's asked rate the sum of the parts' shares.
#[test]
fn parts_of_a_staged_load_merge_into_the_stages() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let files = run_parts(
        dir.path(),
        2,
        &[
            &ng.url("/"),
            "-c",
            "10",
            "-t",
            "1",
            "--stages",
            "1s@400, 2s@400..1200",
        ],
    );
    let merged_file = dir.path().join("merged.json");
    let o = archbench(&[
        "merge",
        files[0].to_str().unwrap(),
        files[1].to_str().unwrap(),
        "--json",
        merged_file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = read_json(&merged_file);
    assert_valid(&m);
    let series = m["series"].as_array().unwrap();
    assert_eq!(series.len(), 3, "{series:?}");
    // 400, then the ramp's seconds at their means: 600 and 1,000.
    for (s, want) in series.iter().zip([400.0, 600.0, 1000.0]) {
        let asked = s["target_rate"].as_f64().unwrap();
        assert!((asked - want).abs() < 1e-6, "{series:?}");
    }
    crate::util::assert_series_follows_its_targets(series, &m["pacing"]);
    let requests = m["totals"]["requests"].as_u64().unwrap();
    let logged = ng.stop_and_read_log().len() as u64;
    assert!(
        requests <= logged && logged <= requests + 10,
        "{requests} {logged}"
    );
}

/// The parts of one open loop split evenly have the same host, start and count: they merge
/// without a "merged twice?" note (different parts are never the same run). What does not
/// make one load is said or refused: a closed loop with an open one is refused (their
/// latencies are measured differently), another protocol is named in its note, parts of
/// different whole loads are noted.
#[test]
fn even_parts_merge_quietly_and_mixed_loads_are_said() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // 400 requests at 400 req/s over 4 connections: 200 each for two parts, 1 s.
    let files = run_parts(
        dir.path(),
        2,
        &[&s.url(), "-c", "4", "-t", "1", "--rate", "400", "-n", "400"],
    );
    let parts: Vec<serde_json::Value> = files.iter().map(read_json).collect();
    assert_eq!(
        parts[0]["totals"]["requests"],
        parts[1]["totals"]["requests"]
    );
    assert_eq!(parts[0]["started_at"], parts[1]["started_at"]);
    let (p0, p1) = (files[0].to_str().unwrap(), files[1].to_str().unwrap());
    let o = archbench(&["merge", p0, p1, "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "no note for the two parts of one load");
    let write = |name: &str, v: &serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let closed = write("closed.json", &crate::util::run_json(&s.url(), 50));
    let o = archbench(&["merge", p0, &closed]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{closed}: it ran a closed loop, {p0} an open loop"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let mut h2 = parts[1].clone();
    h2["plan"]["http_version"] = "HTTP/2".into();
    let h2 = write("h2.json", &h2);
    let o = archbench(&["merge", p0, &h2, "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let url = parts[0]["plan"]["url"].as_str().unwrap();
    assert!(
        stderr(&o).contains(&format!(
            "loaded GET {url} over HTTP/2, not GET {url} over HTTP/1.1"
        )),
        "{}",
        stderr(&o)
    );
    let mut other = parts[1].clone();
    other["plan"]["part"]["rate"] = 800.0.into();
    let other = write("other.json", &other);
    let o = archbench(&["merge", p0, &other, "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the parts come from different loads (part 0/2 of 4 connections at 400 req/s, 400 requests, part 1/2 of 4 connections at 800 req/s, 400 requests)"),
        "{}",
        stderr(&o)
    );
}

/// Two runs 0.6 s apart merge into a document that reads back: a merge shifts each source's
/// series by its start rounded to the second, which put the later run's last step one past
/// the merged run's elapsed time, where it was cut off, and the merged series no longer added
/// up to its requests (report refused the merge's own output).
#[test]
fn runs_started_apart_merge_into_a_document_that_reads_back() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.json");
    let o = archbench(&[
        "run",
        &s.url(),
        "-n",
        "2000",
        "-c",
        "2",
        "-q",
        "--json",
        first.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut doc = read_json(&first);
    let later = |field: &str| {
        let at: jiff::Timestamp = doc[field].as_str().unwrap().parse().unwrap();
        serde_json::Value::from(format!(
            "{:.6}",
            at + jiff::SignedDuration::from_millis(600)
        ))
    };
    let (started, first_send) = (later("started_at"), later("first_send_at"));
    doc["started_at"] = started;
    doc["first_send_at"] = first_send;
    let second = dir.path().join("b.json");
    std::fs::write(&second, doc.to_string()).unwrap();
    let merged = dir.path().join("m.json");
    let o = archbench(&[
        "merge",
        first.to_str().unwrap(),
        second.to_str().unwrap(),
        "--json",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = read_json(&merged);
    let in_series: u64 = m["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(in_series, 4000, "{}", m["series"]);
    let o = archbench(&["report", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}
