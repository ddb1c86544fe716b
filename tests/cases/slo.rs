//! `--slo`: objectives judged on a run (or a comparison's medians), in the report and the
//! JSON, and the exit status CI jobs gate on (0 met, 1 not met, 2 a condition that is none).

use crate::util::{archbench_within, read_json, stderr, stdout, ServeChild, PROMPTLY};

fn run(args: &[&str]) -> std::process::Output {
    archbench_within(args, PROMPTLY)
}

#[test]
fn a_run_that_meets_its_objectives_exits_0_and_one_that_misses_exits_1() {
    let server = ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("met.json");
    let load = [
        "run",
        server.url.as_str(),
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "500ms",
    ];
    let o = run(&[
        &load[..],
        &[
            "--slo",
            "p99<10s,errors<1%,rps>=1",
            "--json",
            json.to_str().unwrap(),
        ],
    ]
    .concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("p99<10s") && text.contains("pass"), "{text}");
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    assert_eq!(doc["slo"]["passed"], true);
    // The figure judged is the run's own p99.
    assert_eq!(
        doc["slo"]["conditions"][0]["measured"].as_f64().unwrap(),
        doc["latency"]["total"]["p99_us"].as_f64().unwrap()
    );
    // No server answers in under a microsecond.
    let json = dir.path().join("missed.json");
    let o = run(&[
        &load[..],
        &[
            "--slo",
            "errors<1%,p50<1us",
            "--json",
            json.to_str().unwrap(),
        ],
    ]
    .concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("FAIL"), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("run: SLO not met: p50<1us (measured "),
        "{err}"
    );
    assert!(
        !err.contains("errors<1%"),
        "only what failed is named: {err}"
    );
    let doc = read_json(&json);
    assert_eq!(doc["slo"]["passed"], false);
    assert_eq!(doc["slo"]["conditions"][0]["passed"], true);
    assert_eq!(doc["slo"]["conditions"][1]["passed"], false);
    // A condition that is none is a usage error, before any load.
    let o = run(&["run", &server.url, "--slo", "p99<fast"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("use e.g."), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn a_comparison_judges_each_target_on_its_medians() {
    let fast = ServeChild::start(&["--threads", "1"]);
    let slow = ServeChild::start(&["--threads", "1", "--delay", "20ms"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let o = run(&[
        "compare",
        &format!("fast={}", fast.url),
        &format!("slow={}", slow.url),
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
        "--slo",
        "p50<15ms",
        "--cost",
        "fast=0.192",
        "--cost",
        "slow=$0.154",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("slow: SLO not met: p50<15ms"), "{err}");
    assert!(!err.contains("fast: SLO"), "{err}");
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    assert_eq!(doc["slo"][0]["name"], "fast");
    assert_eq!(doc["slo"][0]["outcome"]["passed"], true);
    assert_eq!(doc["slo"][1]["outcome"]["passed"], false);
    // Judged on the median of the two runs' p50.
    let p50s: Vec<f64> = doc["targets"][1]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["latency"]["total"]["p50_us"].as_f64().unwrap())
        .collect();
    let median = (p50s[0] + p50s[1]) / 2.0;
    assert_eq!(
        doc["slo"][1]["outcome"]["conditions"][0]["measured"]
            .as_f64()
            .unwrap(),
        median
    );
    assert!(stdout(&o).contains("SLO slow"), "{}", stdout(&o));
    // --cost: a million requests at each one's median throughput, from its price per hour.
    for (k, price) in [(0, 0.192), (1, 0.154)] {
        let runs = doc["targets"][k]["runs"].as_array().unwrap();
        let rps: Vec<f64> = runs
            .iter()
            .map(|r| r["totals"]["requests_per_sec"].as_f64().unwrap())
            .collect();
        let median = (rps[0] + rps[1]) / 2.0;
        let cost = &doc["cost"][k];
        assert_eq!(cost["price_per_hour"], price);
        let want = price / (median * 3600.0) * 1e6;
        let got = cost["cost_per_million"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    }
    // The slow one costs more per request (20 ms per answer against microseconds), and so
    // buys fewer requests per dollar.
    assert!(stdout(&o).contains("more than fast: "), "{}", stdout(&o));
    // The ratio is no claim under the SLO: slow missed it, and the line says so.
    assert!(
        stdout(&o).contains("x its requests per dollar, but slow misses the SLO)"),
        "{}",
        stdout(&o)
    );
    // A price for no target is a usage error before any load.
    let o = run(&[
        "compare",
        &format!("fast={}", fast.url),
        &format!("slow={}", slow.url),
        "--cost",
        "arm=1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no target named \"arm\""),
        "{}",
        stderr(&o)
    );
}
