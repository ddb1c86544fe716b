//! Values a user can type, however absurd: a usage error (exit 2, one line) or a run that
//! works in bounded memory — never a panic, an abort or a silent zero.

use archbench::serve::{ServeOptions, Server};

use crate::util::{
    archbench, bin, finish_within, stderr, stdout, wait_until, LineReader, PROMPTLY,
};

#[test]
fn absurd_values_are_usage_errors_with_one_line() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let url = s.url();
    let u = url.as_str();
    let a_target = format!("a={u}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", u, "--rate", "1e-18"], "below 0.001"),
        (vec!["run", u, "--rate", "0.0000001"], "below 0.001"),
        // Quoted back as typed, not as 301 digits.
        (vec!["run", u, "--rate", "1e300"], "--rate 1e300: more than"),
        (
            vec!["run", u, "--stages", "1s@1e300"],
            "--stages (at their peak, 1e300): more than",
        ),
        (
            vec!["run", u, "--rate", "1e-300"],
            "--rate 1e-300 is below 0.001",
        ),
        (vec!["run", u, "--rate", "inf"], "invalid rate"),
        (vec!["run", u, "--rate", "NaN"], "invalid rate"),
        (vec!["run", u, "--rate=-5"], "invalid rate"),
        (
            vec!["run", u, "--rate", "100", "--pacing-slack", "5001us"],
            "--pacing-slack 5001us: at most 5ms",
        ),
        (
            vec!["run", u, "--rate", "100", "--pacing-slack", "1h"],
            "at most 5ms",
        ),
        (
            vec!["run", u, "--tls-ciphers", "RC4-MD5"],
            "unknown cipher suite \"RC4-MD5\"; this client speaks TLS_AES_256_GCM_SHA384",
        ),
        (
            vec!["run", u, "--tls-groups", "ffdhe2048"],
            "unknown key-exchange group \"ffdhe2048\"; this client speaks x25519, p-256, p-384",
        ),
        (
            vec!["run", u, "--tls-version", "1.1"],
            "invalid TLS version \"1.1\"; use 1.2 or 1.3",
        ),
        (
            vec!["run", u, "--pacing-slack", "10us"],
            "--pacing-slack applies to an open loop only",
        ),
        (
            vec!["run", u, "--rate", "100", "--pacing-slack=-1us"],
            "invalid duration",
        ),
        (vec!["run", u, "-d", "99999999999h"], "out of range"),
        (vec!["run", u, "-d", "1e9"], "invalid duration"),
        (
            vec!["run", u, "--timeout", "0"],
            "timeout must be above zero",
        ),
        (vec!["run", u, "--timeout", "1e400"], "invalid duration"),
        // Answers slower than it were once counted as successes.
        (vec!["run", u, "--timeout", "1us"], "at least 1ms"),
        (vec!["run", u, "-t", "100000"], "at most 256 threads"),
        (
            vec!["run", u, "-c", "10000000"],
            "more than 1000000 connections",
        ),
        (
            vec!["run", u, "-n", "99999999999999999999999"],
            "out of range",
        ),
        (vec!["run", u, "--part", "3/3"], "invalid part"),
        (vec!["run", u, "--part", "0/0"], "invalid part"),
        (
            vec!["run", u, "-c", "2", "--part", "0/5"],
            "every part needs at least one connection",
        ),
        (
            vec!["run", u, "--start-at", "2999-01-01T00:00:00Z"],
            "more than a day ahead",
        ),
        (vec!["run", u, "--start-at", "soon"], "invalid time"),
        (vec!["run", u, "--start-at", "@1e300"], "invalid time"),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--runs",
                "0",
            ],
            "--runs must be at least 1",
        ),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--runs",
                "1G",
            ],
            "at most 10000 runs",
        ),
        (vec!["demo", "--runs", "99999"], "at most 10000 runs"),
        (
            vec!["run", u, "--start-at", "2026-12-01T12:00:00+0é00"],
            "invalid time",
        ),
        (
            vec![
                "run",
                u,
                "-n",
                "100",
                "-c",
                "1",
                "--http2",
                "--mix",
                "/dev/null",
            ],
            "--script and --mix speak HTTP/1.1 only so far",
        ),
        (vec!["wrk", "-t", "0", u], "threads must be at least 1"),
        (vec!["wrk", "-d", "0", u], "duration must be above zero"),
        (vec!["ab", "-c", "0", u], "connections must be at least 1"),
        (vec!["ab", "-n", "0", u], "Invalid number of requests"),
        // Each front end's words name its own flags, not run's.
        (vec!["ab", "-t", "0", "-n", "10", u], "-t 0: the time limit"),
        (vec!["h2load", "-m", "0", "-n", "10", u], "-m 0: give 1 to"),
        // h2load's own refusal (archbench ran it, each thread sharing one client).
        (
            vec!["h2load", "-t", "2", "-c", "1", "-n", "4", u],
            "the number of clients must be greater than or equal to the number of threads",
        ),
        (
            vec!["ab", "-i", "-p", "/dev/null", u],
            "Cannot mix POST and HEAD",
        ),
        // Counts as each tool reads them: h2load refuses 1k, ab would take it for 1 (it ran
        // 1,000 requests for both).
        (vec!["h2load", "-n", "1k", u], "bad option value: 1k"),
        (
            vec!["h2load", "-c", "1k", "-n", "2000", u],
            "bad option value: 1k",
        ),
        (vec!["ab", "-n", "1k", u], "1k: ab takes a plain number"),
        (
            vec!["ab", "-c", "2k", "-n", "4000", u],
            "2k: ab takes a plain number",
        ),
        (vec!["h2load"], "no URI or input file given"),
        (
            vec!["h2load", "-n", "1", "-H", ":path: /x", u],
            "-H :path: archbench h2load overrides :authority",
        ),
        (
            vec!["h2load", "-n", "1", "-H", ":method:", u],
            "-H: invalid header - value missing",
        ),
        // ab's verbose levels print headers it does not; 0 and 1 are its report.
        (
            vec!["ab", "-v", "2", "-n", "1", u],
            "-v 2: from 2 ab prints",
        ),
        (
            vec!["ab", "-m", "ünï", "-n", "1", u],
            "invalid HTTP method \"ünï\"",
        ),
        (
            vec!["h2load", "--rps", "1e300", "-n", "10", u],
            "--rps 1e300: give a rate above 0",
        ),
        (
            vec!["serve", "--nginx", "bench", "--workers", "0"],
            "--workers",
        ),
        // Once an abort (a 800 GB allocation) and a panic (100,000 thread stacks).
        (
            vec!["serve", "--threads", "99999999999"],
            "is not in 1..=1024",
        ),
        (vec!["serve", "--threads", "100000"], "is not in 1..=1024"),
        (
            vec!["serve", "--workers", "4", "--addr", "127.0.0.1:0"],
            "--workers applies to --nginx only",
        ),
        (
            vec![
                "sweep",
                &a_target,
                "--find-max",
                "--slo",
                "p99<10ms",
                "--rates",
                "100:100",
            ],
            "it ends where it starts",
        ),
        (
            vec!["sweep", &a_target, "-c", "2,1"],
            "1 after 2: give the loads in increasing order",
        ),
        // A connection count written as a fraction was rounded, and `2.5,3` ran one step.
        (
            vec!["sweep", &a_target, "-c", "2.5,3"],
            "--connections: 2.5 is not a whole number of connections",
        ),
        (
            vec!["sweep", &a_target, "-c", "0.4"],
            "--connections: 0.4 is not a whole number of connections",
        ),
        (
            vec!["sweep", &a_target, "-c", "1.5", "--rates", "100,200"],
            "--connections: 1.5 is not a whole number of connections",
        ),
        (
            vec![
                "sweep", &a_target, "-c", "1", "--cost", "a=1", "--cost", "a=2",
            ],
            "--cost a=…: \"a\" is given a price twice",
        ),
        (
            vec!["run", "http://127.0.0.1:0/", "-n", "10", "-c", "1"],
            "port 0 is no server's port",
        ),
        (
            vec![
                "run",
                "https://127.0.0.1:9/",
                "--tls-version",
                "1.3",
                "--tls-ciphers",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "-n",
                "10",
                "-c",
                "1",
            ],
            "these TLS settings leave nothing to offer",
        ),
        // ApacheBench's help is -h; it has no --help.
        (vec!["ab", "--help"], "see `archbench ab -h`"),
        (
            vec!["merge", "/nonexistent/a.json"],
            "cannot read /nonexistent/a.json",
        ),
        (vec!["k8s"], "a k8s command is missing"),
        (
            vec!["k8s", "manifests", "-n", "Bad_NS!"],
            "a namespace is 1 to 63 lowercase letters",
        ),
        (vec!["k8s", "bogus"], "unrecognized subcommand 'bogus'"),
        // Refused before any cluster is asked (there is none here): `--count 0` sent nothing
        // and exited 0, a zero timeout was none.
        (
            vec!["k8s", "curl", "intel", "--count", "0"],
            "--count must be at least 1",
        ),
        (
            vec!["k8s", "curl", "intel", "--timeout", "0s"],
            "timeout must be above zero",
        ),
        (
            vec!["k8s", "manifests", "--arch", "sparc"],
            "invalid value 'sparc'",
        ),
        (
            vec!["k8s", "manifests", "--config", "/nonexistent.conf"],
            "--config /nonexistent.conf",
        ),
        (
            vec!["k8s", "manifests", "--variant", "all:arch=arm64"],
            "--variant all: the name is taken",
        ),
        (
            vec!["k8s", "manifests", "--variant", "a:colour=red"],
            "unknown key `colour`",
        ),
        (
            vec!["k8s", "manifests", "--variant", "a:cpu=-2"],
            "cpu=-2: give cores",
        ),
        (
            vec![
                "k8s",
                "manifests",
                "--variant",
                "a",
                "--variant",
                "a:replicas=2",
            ],
            "--variant a: the name is given twice",
        ),
        (
            vec![
                "k8s",
                "manifests",
                "--variant",
                "a:config=/nonexistent.conf",
            ],
            "--variant a: config=/nonexistent.conf: No such file",
        ),
        (
            vec!["k8s", "manifests", "--variant", "a", "--arch", "arm"],
            "cannot be used with",
        ),
        // Checked before any cluster is asked (none is reachable here).
        (
            vec!["k8s", "up", "--wait-timeout", "0"],
            "--wait-timeout must be above zero",
        ),
        (
            vec!["k8s", "load", "both", "--runs", "0"],
            "--runs must be at least 1",
        ),
        // The load itself, planned with a stand-in URL before any cluster is asked.
        (
            vec!["k8s", "load", "both", "-c", "0"],
            "connections must be at least 1",
        ),
        (
            vec!["k8s", "load", "both", "--rate", "0"],
            "--rate 0 is below 0.001",
        ),
        (
            vec!["k8s", "load", "both", "--timeout", "0s"],
            "timeout must be above zero",
        ),
        (
            vec!["k8s", "sweep", "both", "-r", "100,200", "--timeout", "1us"],
            "at least 1ms",
        ),
        (
            vec!["k8s", "load", "both", "--json", "/nonexistent/k.json"],
            "no directory /nonexistent",
        ),
        (
            vec!["k8s", "config", "/nonexistent.conf"],
            "--config /nonexistent.conf",
        ),
    ];
    for (args, needle) in &cases {
        let o = archbench(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got: {err}");
    }
    assert_eq!(s.requests(), 0, "no bad command line sent a request");
}

/// Resident memory of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[test]
fn a_run_of_decades_starts_in_bounded_memory_and_stops_on_sigint() {
    let s = Server::start(ServeOptions::default()).unwrap();
    for duration in ["1000000000", "100000h"] {
        let mut child = bin()
            .args(["run", &s.url(), "-c", "2", "-t", "1", "-d", duration])
            .args(["--timeout", "1000000000", "-o", "json", "-q"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let before = s.requests();
        wait_until("the decades-long run to send requests", PROMPTLY, || {
            s.requests() > before + 100
        });
        // The per-second series is not sized by the duration typed (once 32 GB).
        let rss = rss_bytes(child.id());
        assert!(
            rss > 0 && rss < 64 << 20,
            "-d {duration}: resident {rss} bytes"
        );
        let err = LineReader::new(child.stderr.take().unwrap());
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let o = finish_within(child, PROMPTLY);
        assert_eq!(o.status.code(), Some(130), "{}", err.rest(PROMPTLY));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(doc["interrupted"], true);
        assert!(doc["totals"]["requests"].as_u64().unwrap() > 100);
        assert_eq!(doc["series_step_s"], 1);
    }
}

#[test]
fn the_slowest_rate_allowed_runs_without_panicking() {
    let s = Server::start(ServeOptions::default()).unwrap();
    // One request per 1,000 s: connection 0 sends at once, connection 1 would wait 1,000 s.
    let o = archbench(&[
        "run",
        &s.url(),
        "--rate",
        "0.001",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "300ms",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["totals"]["requests"], 1);
    assert_eq!(doc["pacing"]["lateness"]["count"], 1);
    // The text report says the rate asked, not "0.0".
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    std::fs::write(&file, stdout(&o)).unwrap();
    let text = stdout(&archbench(&["report", file.to_str().unwrap()]));
    assert!(text.contains("Pacing     target 0.001 req/s"), "{text}");
}

/// `doc` with `edit` made, written to `dir`/`name`: its path.
fn edited_doc(
    doc: &serde_json::Value,
    dir: &std::path::Path,
    name: &str,
    edit: &dyn Fn(&mut serde_json::Value),
) -> String {
    let mut doc = doc.clone();
    edit(&mut doc);
    let file = dir.join(name);
    std::fs::write(&file, doc.to_string()).unwrap();
    file.to_str().unwrap().to_string()
}

/// A stored document with figures no run measures (hand-edited, or from elsewhere) is a usage
/// error naming the field, not a report of "answered in -1.00s", "Status abc" or
/// 18,446,744,073,709,551,615 req/s.
#[test]
fn absurd_figures_in_a_document_are_refused_naming_the_field() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let good = crate::util::run_json(&s.url(), 20);
    let dir = tempfile::tempdir().unwrap();
    let edited = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        edited_doc(&good, dir.path(), name, edit)
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edited("elapsed.json", &|d| {
                d["totals"]["elapsed_s"] = (-1.0).into()
            }),
            "totals.elapsed_s is -1: below zero",
        ),
        (
            edited("requests.json", &|d| d["totals"]["requests"] = (-5).into()),
            "totals.requests is -5: below zero",
        ),
        (
            edited("p99.json", &|d| {
                d["latency"]["total"]["p99_us"] = (-5).into()
            }),
            "latency.total.p99_us is -5",
        ),
        (
            edited("abc.json", &|d| {
                d["status_codes"] = serde_json::json!({"abc": 5})
            }),
            "status_codes has \"abc\": a status code is three digits from 100 to 999",
        ),
        (
            edited("code.json", &|d| {
                d["status_codes"] = serde_json::json!({"1000": 5})
            }),
            "status_codes has \"1000\"",
        ),
        (
            edited("rate.json", &|d| {
                d["totals"]["requests_per_sec"] = 1e308.into()
            }),
            "totals.requests_per_sec is 1e308: larger than any figure",
        ),
    ];
    for (file, needle) in &cases {
        for layout in ["text", "markdown"] {
            let o = archbench(&["report", file, "-o", layout]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{file}: {err}");
            assert!(err.contains(needle), "{file}: {err}");
            assert_eq!(err.lines().count(), 1, "{file}: {err}");
            assert!(stdout(&o).is_empty(), "{file}: {}", stdout(&o));
        }
    }
    // A large figure within bounds is printed as it is, not saturated at u64::MAX (one no
    // other figure must agree with: a rate of requests must be theirs over the time).
    let large = edited("large.json", &|d| {
        d["client"]["requests_per_cpu_s"] = 1e17.into()
    });
    let o = archbench(&["report", &large]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("100,000,000,000,000,000 req per CPU-s"),
        "{}",
        stdout(&o)
    );
}

/// Figures in range that contradict each other (edited, or made elsewhere): `report` refuses
/// the document in one line naming what disagrees, exit 2, as `merge` does, for runs,
/// comparisons and sweeps alike; the documents archbench wrote read as they are.
#[test]
fn documents_whose_figures_disagree_are_refused_naming_what() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (a, b) = (format!("a={}", s.url()), format!("b={}", s.url()));
    let (cmp, sweep) = (path("cmp.json"), path("sweep.json"));
    for args in [
        vec![
            "compare", &a, &b, "-c", "1", "-t", "1", "-d", "100ms", "--runs", "4", "-q", "--json",
            &cmp,
        ],
        vec![
            "sweep", &a, "-c", "1,2", "-d", "100ms", "--runs", "1", "-q", "--json", &sweep,
        ],
    ] {
        let o = archbench(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let docs = [
        ("run", crate::util::run_json(&s.url(), 20)),
        ("cmp", crate::util::read_json(&cmp)),
        ("sweep", crate::util::read_json(&sweep)),
    ];
    for (name, doc) in &docs {
        let file = path(&format!("{name}-as-written.json"));
        std::fs::write(&file, doc.to_string()).unwrap();
        let o = archbench(&["report", &file]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
    let edited = |from: usize, name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        edited_doc(&docs[from].1, dir.path(), name, edit)
    };
    let requests = docs[0].1["totals"]["requests"].as_u64().unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            edited(0, "status.json", &|d| {
                d["status_codes"] = serde_json::json!({"200": 5})
            }),
            "status codes do not add up to requests",
        ),
        // 18 codes of 10^18 and one more sum to 2^64 + requests: a u64 sum wraps into
        // agreement (and panics in a debug build).
        (
            edited(0, "wrap.json", &|d| {
                let mut codes = serde_json::Map::new();
                for c in 100..118 {
                    codes.insert(c.to_string(), 1_000_000_000_000_000_000u64.into());
                }
                let rest = (u64::MAX - 18 * 1_000_000_000_000_000_000) + 1 + requests;
                codes.insert("200".into(), rest.into());
                d["status_codes"] = codes.into();
            }),
            "status codes do not add up to requests",
        ),
        (
            edited(0, "errors.json", &|d| d["errors"]["timeout"] = 7.into()),
            "errors by kind do not add up to errors",
        ),
        (
            edited(0, "rate.json", &|d| {
                d["totals"]["requests_per_sec"] = 1e15.into()
            }),
            "requests_per_sec is 1000000000000000, not requests / elapsed_s",
        ),
        (
            edited(0, "elapsed.json", &|d| {
                d["totals"]["elapsed_s"] = 0.into();
                d["totals"]["requests_per_sec"] = 0.into();
            }),
            "elapsed_s is 0",
        ),
        (
            edited(0, "count.json", &|d| {
                d["latency"]["total"]["count"] = 5.into()
            }),
            "total-latency histogram and summary do not hold one value per request",
        ),
        (
            edited(0, "series.json", &|d| {
                let n = d["series"][0]["completed"].as_u64().unwrap();
                d["series"][0]["completed"] = (n + 1_000_000).into();
            }),
            "the series does not add up to requests and errors",
        ),
        (
            edited(1, "median.json", &|d| {
                d["metrics"][0]["targets"][0]["median"] = 123456789.into()
            }),
            "req/s of a: median 123456789 lies outside its range",
        ),
        (
            edited(1, "p.json", &|d| {
                d["metrics"][0]["targets"][1]["versus_baseline"]["p_value"] = 5.0.into()
            }),
            "req/s of b: p-value 5 is not a probability",
        ),
        (
            edited(1, "noruns.json", &|d| {
                d["targets"][1]["runs"] = serde_json::json!([])
            }),
            "yet it has no runs",
        ),
        (
            edited(1, "cmprun.json", &|d| {
                d["targets"][0]["runs"][1]["status_codes"] = serde_json::json!({"200": 1})
            }),
            "targets[0].runs[1]: its figures disagree: status codes",
        ),
        (
            edited(2, "percent.json", &|d| {
                d["targets"][0]["points"][0]["error_percent"] = 500.into()
            }),
            "a at 1 connections: 500% of requests failed",
        ),
        (
            edited(2, "knee.json", &|d| d["targets"][0]["knee"] = 12345.into()),
            "a: its knee 12345 connections is none of the loads it ran (1, 2)",
        ),
        (
            edited(2, "point.json", &|d| {
                d["targets"][0]["points"][1]["requests_per_sec"] = 1e17.into()
            }),
            "a at 2 connections: its figures are not the medians of its runs there",
        ),
    ];
    for (file, needle) in &cases {
        let o = archbench(&["report", file]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains(file.as_str()) && err.contains(needle),
            "{file}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{file}: {err}");
        assert!(stdout(&o).is_empty(), "{file}: {}", stdout(&o));
    }
}

/// What a document holds is said in words and printed safely: a histogram that cannot be
/// decoded, a kind unknown, a time beyond the calendar's reach each get a sentence; bounds
/// no archbench histogram has, and a file no document is as large as (`/dev/zero`), are
/// refused before anything is allocated for them; a document's text reaches the terminal
/// with its control characters escaped.
#[test]
fn what_a_document_holds_is_said_in_words_and_printed_safely() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let good = crate::util::run_json(&s.url(), 20);
    let dir = tempfile::tempdir().unwrap();
    let edited = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        edited_doc(&good, dir.path(), name, edit)
    };
    let plain = edited("good.json", &|_| {});
    // Values up to 2^62 at 5 digits: 47 MB of counts for each histogram, from 5 KB of text.
    let mut wide = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
    wide.record(100).unwrap();
    let wide = serde_json::to_value(archbench::stats::SerializedHistogram(wide)).unwrap();
    // 300 MiB of nothing (a sparse file): refused by its size, unread.
    let sparse = dir.path().join("sparse.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let sparse = sparse.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "report".into(),
                edited("empty.json", &|d| d["histograms"]["total"] = "".into()),
            ],
            "a histogram cannot be decoded: it ends early (empty or cut short)",
        ),
        (
            vec![
                "report".into(),
                edited("wide.json", &|d| d["histograms"]["total"] = wide.clone()),
            ],
            "a histogram claims values up to 4611686018427387904 at 5 significant digits",
        ),
        (
            vec![
                "report".into(),
                edited("kind.json", &|d| d["kind"] = "archbench-foo".into()),
            ],
            "expected \"archbench-result\", \"archbench-comparison\" or \"archbench-sweep\"",
        ),
        (
            vec![
                "report".into(),
                edited("v99.json", &|d| d["schema_version"] = 99.into()),
            ],
            "is an archbench-result of schema_version 99",
        ),
        (
            vec![
                "merge".into(),
                plain.clone(),
                edited("late.json", &|d| {
                    d["started_at"] = "9999-12-31T23:59:59Z".into()
                }),
            ],
            "started_at \"9999-12-31T23:59:59Z\" lies beyond the times archbench represents",
        ),
        (
            vec!["report".into(), "/dev/zero".into()],
            "/dev/zero is larger than 256 MiB",
        ),
        (
            vec!["report".into(), sparse],
            "sparse.json is larger than 256 MiB",
        ),
    ];
    for (args, needle) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = archbench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let red = edited("red.json", &|d| {
        d["plan"]["url"] = "http://x/\u{1b}[31mred\u{1b}[0m\r".into()
    });
    for layout in ["text", "markdown", "html"] {
        let o = archbench(&["report", &red, "-o", layout]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(!out.contains(['\u{1b}', '\r']), "{layout}: {out:?}");
        assert!(out.contains("\\u{1b}[31mred"), "{layout}: {out}");
    }
    let help = stdout(&archbench(&["report", "--help"]));
    assert!(help.contains("comparison or sweep"), "{help}");
    // merge's note quotes both URLs: escaped too.
    let o = archbench(&["merge", &plain, &red, "-o", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let note = stderr(&o);
    assert!(
        note.contains("\\u{1b}[31mred\\u{1b}[0m\\r, not GET"),
        "{note}"
    );
    assert!(!note.contains('\u{1b}'), "{note:?}");
}
