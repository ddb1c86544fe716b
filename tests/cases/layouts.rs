//! wrk, ab and text layouts: snapshots of a fixed result, and line-by-line shape against the
//! real wrk and ab run on the same nginx.

use archbench::report::{AbReport, Report, TextReport, WrkReport};
use archbench::stats::{Environment, PlanSummary, Recorder, ResponseTimes, RunResult, RunTimes};

use crate::util::faulty::{Fault, FaultyServer};
use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench, require_tool, stderr, stdout};

/// A result with known contents: 10,000 responses with latencies spread from 100 µs to 25 ms.
fn fixed_result(keepalive: bool) -> RunResult {
    let mut rec = Recorder::new(None);
    for i in 0..10_000u64 {
        let total = 100 + (i * i) % 25_000;
        rec.response(
            (i / 1000) as u32,
            if i % 500 == 0 { 404 } else { 200 },
            615,
            ResponseTimes {
                total_us: total,
                service_us: total - 20,
                first_byte_us: total / 2,
                connect_us: (i < 10 || !keepalive).then_some(40 + i % 7),
            },
        );
        rec.bytes_in((i / 1000) as u32, 853);
        rec.bytes_written += 80;
        rec.body_bytes += 0;
    }
    for v in [3_900u64, 4_100, 4_000, 3_950, 4_050] {
        rec.worker_rate.record(v).unwrap();
    }
    rec.keepalive_responses = if keepalive { 10_000 } else { 0 };
    rec.connections_opened = if keepalive { 10 } else { 10_000 };
    rec.errors[archbench::stats::ErrorKind::Timeout as usize] = 3;
    rec.server_header = Some("nginx/1.22.1".into());
    RunResult::from_recording(
        rec,
        PlanSummary {
            url: "http://127.0.0.1:8080/".into(),
            method: "GET".into(),
            headers: vec![],
            body_bytes: 0,
            http_version: "HTTP/1.1".into(),
            connections: 10,
            threads: 2,
            duration_s: Some(10.0),
            requests: None,
            rate: None,
            stages: None,
            keepalive,
            timeout_s: 2.0,
            insecure: false,
            part: None,
            start_at: None,
            tls_resume: None,
            tls_version: None,
            tls_ciphers: None,
            tls_groups: None,
            pinned_cert: None,
            http2_streams: None,
            http3_streams: None,
            http3_0rtt: false,
            alpn: None,
            pacing_slack_us: None,
            script: None,
            mix: None,
        },
        Environment {
            archbench_version: "0.1.0".into(),
            arch: "x86_64".into(),
            cpu_model: "test".into(),
            cores: 2,
            kernel: "6.1".into(),
            os: "linux".into(),
            hostname: "test".into(),
            lse_atomics: None,
        },
        RunTimes {
            started_at: archbench::timefmt::parse_rfc3339("2026-12-01T00:00:00Z").unwrap(),
            first_send_at: None,
            elapsed_s: 10.0,
            interrupted: false,
        },
    )
}

fn render(report: &dyn Report<RunResult>, r: &RunResult) -> String {
    let mut out = Vec::new();
    report.write(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn wrk_layout_snapshot() {
    insta::assert_snapshot!(render(&WrkReport { latency: true }, &fixed_result(true)));
}

#[test]
fn ab_layout_snapshot() {
    insta::assert_snapshot!(render(
        &AbReport {
            variable_length: false
        },
        &fixed_result(false)
    ));
}

#[test]
fn ab_layout_warns_like_ab_when_mean_and_median_disagree() {
    // 60 requests at 1 ms, 40 at 3 ms: mean 1.8 ms (ab rounds to 2), median 1 ms, sd 0.98 ms:
    // mean and median are more than one sd apart but less than two -> WARNING.
    let mut r = fixed_result(false);
    let mut h = archbench::stats::latency_histogram();
    h.record_n(1000, 60).unwrap();
    h.record_n(3000, 40).unwrap();
    r.histograms.total.0 = h;
    let text = render(
        &AbReport {
            variable_length: false,
        },
        &r,
    );
    assert!(
        text.contains("WARNING: The median and mean for the total time are not within a normal deviation\n        These results are probably not that reliable.\n"),
        "{text}"
    );
    assert!(!text.contains("for the initial connection time"), "{text}");
}

#[test]
fn text_layout_snapshot() {
    insta::assert_snapshot!(render(&TextReport, &fixed_result(true)));
}

/// A line's shape: its words, with every token that starts with a digit replaced by `#`.
/// ab's timing-sanity warnings depend on each run's figures, so they are left out.
fn shape(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            !(l.starts_with("WARNING: The median")
                || l.starts_with("ERROR: The median")
                || l.starts_with("        These results")
                || l.starts_with("       deviation apart"))
        })
        .map(|l| {
            l.split_whitespace()
                .map(|t| {
                    if t.starts_with(|c: char| c.is_ascii_digit()) {
                        "#"
                    } else {
                        t
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn wrk_output_has_real_wrks_shape() {
    let Some(wrk) = require_tool("wrk") else {
        return;
    };
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let url = ng.url("/");
    // The URL as typed: without a path wrk says none (archbench added a '/').
    for url in [url.as_str(), url.trim_end_matches('/')] {
        let args = ["-t1", "-c4", "-d1s", "--latency", url];
        let (real, ours) = crate::util::real_and_ours(&wrk, "wrk", &args);
        assert!(ours.status.success());
        assert_eq!(shape(&stdout(&ours)), shape(&stdout(&real)));
        let first = |o: &std::process::Output| stdout(o).lines().next().map(str::to_string);
        assert_eq!(first(&ours), first(&real));
    }
}

/// wrk's -T sorts answers, it abandons none: one slower than it is still waited for, counted
/// in "N requests" and as a timeout, and its latency left out, as wrk 4 does. (archbench
/// closed the connection at -T and asked again: nginx logged 14 requests where wrk sends 11.)
#[test]
fn wrk_timeout_counts_late_answers_and_sends_nothing_more() {
    let Some(ng) = Nginx::start(NginxConfig {
        http: "limit_req_zone $server_port zone=s:1m rate=1r/s;",
        server: "limit_req zone=s burst=1000;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.url("/");
    // wrk's -T is whole seconds.
    let o = archbench(&["wrk", "-t1", "-c2", "-d3s", "-T", "1s", url.as_str()]);
    let out = stdout(&o);
    let figure = |prefix: &str, after: &str| -> u64 {
        let line = out.lines().find(|l| l.contains(prefix)).unwrap_or("");
        let tail = line.split(after).nth(1).unwrap_or("");
        tail.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix:?} figure: {out}"))
    };
    let requests = figure("requests in", "  ");
    let timeouts = figure("Socket errors", "timeout ");
    // Queued at 1 a second behind two connections: from the third on, answers come after 1 s.
    assert!(
        requests >= 3 && timeouts >= 1 && timeouts <= requests,
        "{out}"
    );
    // Every request nginx saw was one counted, or one still waited for at the end.
    let logged = ng.stop_and_read_log().len() as u64;
    assert!(logged <= requests + 2, "nginx logged {logged}: {out}");
    // The latency row holds the answers within -T only.
    let max = out
        .lines()
        .find(|l| l.trim_start().starts_with("Latency"))
        .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        .unwrap_or_default();
    let max_us = [("us", 1.0), ("ms", 1e3), ("s", 1e6)]
        .iter()
        .find_map(|(unit, scale)| Some(max.strip_suffix(unit)?.parse::<f64>().ok()? * scale))
        .unwrap_or_else(|| panic!("no latency max in {out}"));
    assert!(max_us <= 1_000_000.0, "{max_us} µs: {out}");
}

/// ab's -s fails no request: answers slower than it are waited for (two a second behind
/// three connections, each waits up to 1.5 s: all 6 complete; archbench failed those past 1 s
/// as "Receive"), and only a run with nothing finishing for that long is given up, in ab's
/// words, with no report (one answer, then nginx holds the rest for a minute).
#[test]
fn ab_socket_timeout_waits_for_slow_answers_and_ends_a_silent_run() {
    let start = |rate: &'static str| {
        Nginx::start(NginxConfig {
            http: rate,
            server: "limit_req zone=s burst=1000;",
            ..NginxConfig::default()
        })
    };
    let Some(slow) = start("limit_req_zone $server_port zone=s:1m rate=2r/s;") else {
        return;
    };
    let o = crate::util::archbench_within(
        &["ab", "-n", "6", "-c", "3", "-s", "1", &slow.url("/")],
        crate::util::PROMPTLY,
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("Complete requests:      6") && out.contains("Failed requests:        0"),
        "{out}"
    );
    let Some(silent) = start("limit_req_zone $server_port zone=s:1m rate=1r/m;") else {
        return;
    };
    let o = crate::util::archbench_within(
        &["ab", "-n", "3", "-c", "3", "-s", "1", &silent.url("/")],
        crate::util::PROMPTLY,
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    assert!(
        stderr(&o).contains("apr_pollset_poll: The timeout specified has expired (70007)"),
        "{}",
        stderr(&o)
    );
    assert!(out.ends_with("Total of 1 requests completed\n"), "{out}");
    assert!(!out.contains("Complete requests:"), "{out}");
}

#[test]
fn ab_output_has_real_abs_shape() {
    let Some(ab) = require_tool("ab") else { return };
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let url = ng.url("/");
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("post.txt");
    std::fs::write(&body, "a=1&b=twentytwo").unwrap();
    let body = body.to_str().unwrap();
    for args in [
        vec!["-n", "200", "-c", "4", url.as_str()],
        // One request: ab prints no percentages (it printed them, all one value).
        vec!["-n", "1", url.as_str()],
        vec!["-k", "-n", "100", "-c", "2", url.as_str()],
        vec!["-k", "-n", "1000", "-c", "10", url.as_str()],
        vec![
            "-n",
            "10",
            "-c",
            "2",
            "-p",
            body,
            "-T",
            "text/plain",
            url.as_str(),
        ],
    ] {
        let (real, ours) = crate::util::real_and_ours(&ab, "ab", &args);
        assert!(ours.status.success());
        // ab's heartbeat on stderr, line for line: every tenth (at least 100) above 150.
        let heartbeat = |o: &std::process::Output| -> Vec<String> {
            stderr(o)
                .lines()
                .filter(|l| l.starts_with("Completed ") || l.starts_with("Finished "))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(heartbeat(&ours), heartbeat(&real), "{args:?}");
        // What was sent, byte for byte: ab's User-Agent (it said "ApacheBench/2.3
        // (archbench)", 12 bytes a request more than ab's "Total body sent").
        let sent = |o: &std::process::Output| {
            stdout(o)
                .lines()
                .find(|l| l.starts_with("Total body sent:"))
                .map(str::to_string)
        };
        // ab says it only for a body (-p): there the two must be there and equal.
        assert_eq!(sent(&real).is_some(), args.contains(&"-p"), "{args:?}");
        assert_eq!(sent(&ours), sent(&real), "{args:?}");
        // Line 1 names the program and its version; everything after must match in shape.
        let (ours, real) = (shape(&stdout(&ours)), shape(&stdout(&real)));
        assert_eq!(ours[1..], real[1..]);
    }
}

#[test]
fn ab_output_over_https_has_real_abs_shape() {
    let Some(ab) = require_tool("ab") else { return };
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let args = ["-n", "50", "-c", "2", url.as_str()];
    let (real, ours) = crate::util::real_and_ours(&ab, "ab", &args);
    assert!(ours.status.success(), "{}", stderr(&ours));
    // The SSL/TLS Protocol line (version, OpenSSL's cipher name, bits) word for word, the
    // Server Temp Key line with its bits masked, and the rest in shape.
    let (ours, real) = (shape(&stdout(&ours)), shape(&stdout(&real)));
    assert!(
        real.iter()
            .any(|l| l.starts_with("SSL/TLS Protocol: TLSv1.")),
        "{real:?}"
    );
    assert_eq!(ours[1..], real[1..]);
}

/// ab's -i (HEAD), -C (a Cookie line: the last one given, as ab) and -r (accepted: archbench never exits on a
/// receive error) reach the wire as ab sends them, header order aside (they were refused).
#[test]
fn ab_head_and_cookie_flags_send_what_ab_sends() {
    let Some(ab) = require_tool("ab") else { return };
    let head = |real: Option<&std::path::Path>| -> Vec<String> {
        let server = FaultyServer::start(Fault::OkThenClose);
        let url = server.url();
        let args = [
            "-r",
            "-i",
            "-C",
            "a=1",
            "-C",
            "b=2",
            "-n",
            "1",
            url.as_str(),
        ];
        let out = match real {
            Some(ab) => std::process::Command::new(ab).args(args).output().unwrap(),
            None => archbench(&[&["ab"][..], &args[..]].concat()),
        };
        assert!(out.status.success(), "{}", stderr(&out));
        let head = first_head_of(&server);
        let mut lines: Vec<String> = head
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let theirs = head(Some(&ab));
    assert!(theirs.iter().any(|l| l == "HEAD / HTTP/1.0"), "{theirs:?}");
    assert!(theirs.iter().any(|l| l == "Cookie: b=2"), "{theirs:?}");
    assert_eq!(head(None), theirs);
}

/// The first request head `server` received, its port written PORT (the real tool and ours
/// each load a server of their own).
fn first_head_of(server: &FaultyServer) -> String {
    let head = server.first_head.get().expect("a request arrived").clone();
    String::from_utf8(head)
        .unwrap()
        .replace(&server.addr.port().to_string(), "PORT")
}

/// The drop-in promise reaches the wire: a server sees from `archbench wrk` the request it sees
/// from wrk (Host alone, no User-Agent), so both cost it the same work.
#[test]
fn wrk_front_end_sends_the_bytes_wrk_sends() {
    let Some(wrk) = require_tool("wrk") else {
        return;
    };
    let first_head = |real: Option<&std::path::Path>| {
        let server = FaultyServer::start(Fault::NoContent);
        let url = server.url();
        let args = ["-t1", "-c1", "-d1s", url.as_str()];
        let out = match real {
            Some(wrk) => std::process::Command::new(wrk).args(args).output().unwrap(),
            None => archbench(&[&["wrk"][..], &args[..]].concat()),
        };
        assert!(out.status.success());
        first_head_of(&server)
    };
    let theirs = first_head(Some(&wrk));
    assert_eq!(theirs, "GET / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n");
    assert_eq!(first_head(None), theirs);
}
