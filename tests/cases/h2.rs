//! HTTP/2 (h2c with prior knowledge) against real nginx, counted against its access log.

use std::collections::{HashMap, HashSet};

use crate::util::nginx::{LogLine, Nginx, NginxConfig};
use crate::util::{archbench, assert_consistent, run, stderr};

fn h2c(server: &str) -> Option<Nginx> {
    Nginx::start(NginxConfig {
        http2: true,
        server,
        ..NginxConfig::default()
    })
}

fn all_http2(log: &[LogLine]) {
    assert!(
        log.iter().all(|l| l.protocol == "HTTP/2.0"),
        "every request over HTTP/2: {:?}",
        log.iter().find(|l| l.protocol != "HTTP/2.0")
    );
}

#[test]
fn streams_carry_exactly_the_count_nginx_logs() {
    let Some(ng) = h2c("") else { return };
    let r = run(&[
        &ng.url("/"),
        "--http2",
        "--streams",
        "10",
        "-n",
        "2000",
        "-c",
        "4",
        "-t",
        "2",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!((r.totals.requests, r.totals.errors), (2000, 0));
    assert_eq!(log.len(), 2000);
    all_http2(&log);
    assert_eq!(r.status_codes.get("200"), Some(&2000));
    // Four connections, each carrying its 500 requests (nginx's default keepalive_requests is
    // 1000): streams, not new connections.
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len(), 4);
    assert_eq!(r.totals.connections_opened, 4);
    let h2 = r.http2.as_ref().expect("HTTP/2 figures in the result");
    assert_eq!((h2.streams_asked, h2.goaways, h2.retried), (10, 0, 0));
    assert_eq!(r.plan.http2_streams, Some(10));
    // Several requests in flight per connection: nginx logs a request when it ends, and with
    // ten streams, requests that end within the same millisecond on one connection are many.
    let mut per_ms: HashMap<(u64, u64), u32> = HashMap::new();
    for l in &log {
        *per_ms
            .entry((l.connection, (l.msec * 1000.0) as u64))
            .or_default() += 1;
    }
    assert!(
        per_ms.values().any(|&n| n >= 5),
        "at most {:?} requests of a connection within one millisecond",
        per_ms.values().max()
    );
}

#[test]
fn goaway_after_keepalive_requests_loses_and_doubles_nothing() {
    // nginx ends an HTTP/2 connection with GOAWAY after keepalive_requests streams; with ten
    // streams in flight, the ones above its last stream id are sent again elsewhere.
    let Some(ng) = h2c("keepalive_requests 100;") else {
        return;
    };
    let r = run(&[
        &ng.url("/"),
        "--http2",
        "--streams",
        "10",
        "-n",
        "1000",
        "-c",
        "2",
        "-t",
        "1",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(
        (r.totals.requests, r.totals.errors),
        (1000, 0),
        "{:?}",
        r.errors
    );
    assert_eq!(log.len(), 1000);
    all_http2(&log);
    assert!(log.iter().all(|l| l.connection_requests <= 100));
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert!(
        conns.len() >= 10,
        "{} connections for 1,000 requests",
        conns.len()
    );
    assert_eq!(r.totals.connections_opened, conns.len() as u64);
    let h2 = r.http2.as_ref().unwrap();
    assert!(h2.goaways >= 9, "{h2:?}");
    crate::util::schema::assert_valid(&serde_json::to_value(&r).unwrap());
    // Ten streams in flight when the GOAWAY comes: some were above its last stream id.
    assert!(h2.retried > 0, "{h2:?}");
}

#[test]
fn a_ten_mebibyte_body_flows_through_window_updates() {
    let Some(ng) = h2c("") else { return };
    let big = vec![b'x'; 10 << 20];
    std::fs::write(format!("{}/big.bin", ng.root()), &big).unwrap();
    let r = run(&[
        &ng.url("/big.bin"),
        "--http2",
        "--streams",
        "2",
        "-n",
        "6",
        "-c",
        "1",
        "--timeout",
        "20s",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(
        (r.totals.requests, r.totals.errors),
        (6, 0),
        "{:?}",
        r.errors
    );
    assert_eq!(r.totals.body_bytes, 6 * (10 << 20));
    assert_eq!(log.len(), 6);
    all_http2(&log);
}

#[test]
fn fewer_streams_allowed_than_asked_is_said() {
    let Some(ng) = h2c("http2_max_concurrent_streams 3;") else {
        return;
    };
    let r = run(&[
        &ng.url("/"),
        "--http2",
        "--streams",
        "8",
        "-n",
        "300",
        "-c",
        "2",
        "-t",
        "1",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(
        (r.totals.requests, r.totals.errors),
        (300, 0),
        "{:?}",
        r.errors
    );
    assert_eq!(log.len(), 300);
    let h2 = r.http2.as_ref().unwrap();
    assert_eq!(h2.server_max_streams, Some(3));
    assert_eq!(h2.streams_used(), 3);
    let doc = serde_json::to_value(&r).unwrap();
    crate::util::schema::assert_valid(&doc);
    assert_eq!(doc["http2"]["server_max_streams"], 3);
    // The report says so.
    let mut text = Vec::new();
    archbench::report::Report::write(&archbench::report::TextReport, &r, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(
            "3 streams per connection (asked 8; the server's MAX_CONCURRENT_STREAMS is 3)"
        ),
        "{text}"
    );
    // No stream was refused: the client never opened more than nginx allows.
    assert!(h2.resets.is_empty(), "{h2:?}");
}

#[test]
fn http2_flags_that_do_not_combine_are_usage_errors() {
    for (args, says) in [
        (&["--streams", "4"][..], "--http2"),
        (&["--http2", "--streams", "0"], "--streams"),
        (&["--http2", "--no-keepalive"], "--no-keepalive"),
        (&["--http2", "--http1.0"], "contradict"),
        (&["--http2", "--alpn", "h2,http/1.1"], "https://"),
        (&["--http2", "--alpn", "h3"], "ALPN"),
    ] {
        let mut argv = vec!["run", "http://127.0.0.1:9/", "-n", "1", "-c", "1"];
        argv.extend_from_slice(args);
        let out = archbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        assert!(stderr(&out).contains(says), "{argv:?}: {}", stderr(&out));
    }
}

/// The HTTP/2 fault matrix: each misbehaviour ends as the kind of error it is, in bounded
/// time, with the right figures.
mod faults {
    use crate::util::faulty_h2::{FaultyH2Server, H2Fault};
    use crate::util::{assert_consistent, run};
    use archbench::stats::RunResult;
    use std::sync::atomic::Ordering;

    /// A run of `-n n -c conns --streams streams` against a new server playing `fault`.
    fn load(fault: H2Fault, streams: u32, n: u32, conns: u32) -> (FaultyH2Server, RunResult) {
        let server = FaultyH2Server::start(fault);
        let (streams, n, conns) = (streams.to_string(), n.to_string(), conns.to_string());
        let r = run(&[
            &server.url(),
            "--http2",
            "--streams",
            &streams,
            "-n",
            &n,
            "-c",
            &conns,
        ]);
        (server, r)
    }

    fn codes(counts: &[archbench::stats::H2CodeCount]) -> Vec<(String, u64)> {
        counts.iter().map(|c| (c.code.clone(), c.count)).collect()
    }

    #[test]
    fn streams_reset_by_the_server_are_protocol_errors_by_code() {
        let (_server, r) = load(H2Fault::ResetEveryStream, 2, 20, 1);
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.errors.protocol), (0, 20));
        let h2 = r.http2.as_ref().unwrap();
        assert_eq!(codes(&h2.resets), [("internal_error".to_string(), 20)]);
    }

    /// REFUSED_STREAM: the server did not process the request, so it is sent again and
    /// counted once, when answered; the refusals are counted by their code, not as errors.
    #[test]
    fn refused_streams_are_sent_again_and_counted_by_their_code() {
        let (server, r) = load(H2Fault::RefuseEveryThird, 3, 60, 2);
        assert_consistent(&r);
        assert_eq!(
            (r.totals.requests, r.totals.errors),
            (60, 0),
            "{:?}",
            r.errors
        );
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 60);
        // Every third stream of a connection refused: one for every two answered, short by
        // at most one per connection (it stopped after an answer).
        let refused = server.counts.refused.load(Ordering::Relaxed);
        assert!((28..=30).contains(&refused), "{refused}");
        let h2 = r.http2.as_ref().unwrap();
        assert_eq!(codes(&h2.resets), [("refused_stream".to_string(), refused)]);
        assert_eq!((h2.retried, h2.goaways), (refused, 0));
    }

    #[test]
    fn a_ping_is_answered() {
        let (server, r) = load(H2Fault::PingFirst, 3, 9, 1);
        assert_eq!((r.totals.requests, r.totals.errors), (9, 0));
        assert_eq!(server.counts.ping_acks.load(Ordering::Relaxed), 1);
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 9);
    }

    #[test]
    fn goaway_mid_run_retries_what_was_not_processed_exactly_once() {
        let (server, r) = load(H2Fault::GoAwayAfterTwo, 4, 30, 1);
        assert_consistent(&r);
        assert_eq!(
            (r.totals.requests, r.totals.errors),
            (30, 0),
            "{:?}",
            r.errors
        );
        // Every request answered once by the server: none lost, none doubled.
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 30);
        let h2 = r.http2.as_ref().unwrap();
        assert_eq!(h2.goaways, 15);
        // Four streams out, two processed per connection: two sent again each time (the last
        // connection's extra streams are not even opened once the count is reached).
        assert!(h2.retried >= 14 * 2, "{h2:?}");
        assert_eq!(r.totals.connections_opened, 15);
    }

    #[test]
    fn a_malformed_frame_ends_the_connection_with_frame_size_error() {
        let (_server, r) = load(H2Fault::MalformedFrame, 1, 5, 1);
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.errors.protocol), (0, 5));
        let h2 = r.http2.as_ref().unwrap();
        assert_eq!(
            codes(&h2.connection_errors),
            [("frame_size_error".to_string(), 5)]
        );
    }

    #[test]
    fn an_oversized_header_block_is_refused() {
        let (_server, r) = load(H2Fault::OversizedBlock, 1, 3, 1);
        assert_eq!((r.totals.requests, r.errors.protocol), (0, 3));
        let h2 = r.http2.as_ref().unwrap();
        assert_eq!(
            codes(&h2.connection_errors),
            [("enhance_your_calm".to_string(), 3)]
        );
    }

    #[test]
    fn a_window_never_opened_times_out_rather_than_hangs() {
        let server = FaultyH2Server::start(H2Fault::WindowNeverOpened);
        let started = std::time::Instant::now();
        let r = run(&[
            &server.url(),
            "--http2",
            "-m",
            "POST",
            "--body",
            "a body that never gets a window",
            "-n",
            "2",
            "-c",
            "1",
            "--timeout",
            "300ms",
        ]);
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.errors.timeout), (0, 2));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}

/// h2 over TLS: ALPN chooses the protocol.
mod tls {
    use super::all_http2;
    use crate::util::nginx::{Nginx, NginxConfig};
    use crate::util::{assert_consistent, run};

    fn tls_nginx(http2: bool) -> Option<Nginx> {
        Nginx::start(NginxConfig {
            tls: true,
            http2,
            ..NginxConfig::default()
        })
    }

    #[test]
    fn https_with_http2_negotiates_h2_by_alpn() {
        let Some(ng) = tls_nginx(true) else { return };
        let r = run(&[
            &ng.https_url("/"),
            "--http2",
            "-k",
            "--streams",
            "4",
            "-n",
            "400",
            "-c",
            "2",
            "-t",
            "1",
        ]);
        let log = ng.stop_and_read_log();
        assert_consistent(&r);
        assert_eq!(
            (r.totals.requests, r.totals.errors),
            (400, 0),
            "{:?}",
            r.tls
        );
        assert_eq!(log.len(), 400);
        all_http2(&log);
        let t = r.tls.as_ref().unwrap();
        assert_eq!(t.alpn.as_deref(), Some("h2"));
        assert_eq!(t.handshakes(), 2, "one per connection");
        assert_eq!(r.plan.alpn.as_deref(), Some(&["h2".to_string()][..]));
    }

    /// h2load's lines for what its handshakes settled: the version, cipher and key exchange
    /// in OpenSSL's names before the protocol, from a full handshake per client as h2load
    /// makes (they were missing); and none of them when no handshake completed (it said
    /// "Application protocol: h2c" for an https URL).
    #[test]
    fn h2load_over_https_says_what_its_handshakes_settled() {
        let Some(h2load) = crate::util::require_tool("h2load") else {
            return;
        };
        let Some(ng) = tls_nginx(true) else { return };
        let url = ng.https_url("/");
        let args = ["-n", "20", "-c", "2", url.as_str()];
        let (real, ours) = crate::util::real_and_ours(&h2load, "h2load", &args);
        let settled = |o: &std::process::Output| -> Vec<String> {
            crate::util::stdout(o)
                .lines()
                .filter(|l| {
                    [
                        "TLS Protocol:",
                        "Cipher:",
                        "Server Temp Key:",
                        "Application protocol:",
                    ]
                    .iter()
                    .any(|p| l.starts_with(p))
                })
                .map(str::to_string)
                .collect()
        };
        assert!(real.status.success() && ours.status.success());
        let (ours, theirs) = (settled(&ours), settled(&real));
        assert_eq!((ours.len(), theirs.len()), (4, 4), "{ours:?} vs {theirs:?}");
        // The cipher is each client's preference among the server's; the rest is the server's.
        for k in [0, 2, 3] {
            assert_eq!(ours[k], theirs[k], "{ours:?} vs {theirs:?}");
        }
        assert!(ours[1].starts_with("Cipher: ") && theirs[1].starts_with("Cipher: "));
        let (_held, port) = crate::util::nginx::refusing_port();
        let refused = format!("https://127.0.0.1:{port}/");
        let o = crate::util::archbench(&["h2load", "-n", "2", "-c", "1", refused.as_str()]);
        // A run that tried and reached nothing (not a usage error, not a crash).
        assert_eq!(o.status.code(), Some(1), "{}", crate::util::stderr(&o));
        assert!(
            crate::util::stderr(&o).contains("no connection opened"),
            "{}",
            crate::util::stderr(&o)
        );
        assert!(settled(&o).is_empty(), "{}", crate::util::stdout(&o));
    }

    #[test]
    fn offered_both_the_server_chooses_and_the_result_says_which() {
        let Some(ng) = tls_nginx(false) else { return };
        let r = run(&[
            &ng.https_url("/"),
            "--http2",
            "--alpn",
            "h2,http/1.1",
            "-k",
            "-n",
            "100",
            "-c",
            "2",
        ]);
        let log = ng.stop_and_read_log();
        assert_eq!((r.totals.requests, r.totals.errors), (100, 0));
        assert_eq!(log.len(), 100);
        assert!(log.iter().all(|l| l.protocol == "HTTP/1.1"));
        assert_eq!(r.tls.as_ref().unwrap().alpn.as_deref(), Some("http/1.1"));
        assert!(r.http2.is_none(), "spoke HTTP/1.1: no HTTP/2 figures");
        crate::util::schema::assert_valid(&serde_json::to_value(&r).unwrap());

        let Some(ng) = tls_nginx(true) else { return };
        let r = run(&[
            &ng.https_url("/"),
            "--http2",
            "--alpn",
            "h2,http/1.1",
            "-k",
            "-n",
            "100",
            "-c",
            "2",
        ]);
        let log = ng.stop_and_read_log();
        assert_eq!((r.totals.requests, r.totals.errors), (100, 0));
        all_http2(&log);
        assert_eq!(r.tls.as_ref().unwrap().alpn.as_deref(), Some("h2"));
    }

    #[test]
    fn h2_alone_offered_to_a_server_without_it_fails_by_alpn_with_advice() {
        let Some(ng) = tls_nginx(false) else { return };
        let r = run(&[&ng.https_url("/"), "--http2", "-k", "-n", "5", "-c", "1"]);
        let log = ng.stop_and_read_log();
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.errors.tls), (0, 5));
        assert!(log.is_empty());
        let t = r.tls.as_ref().unwrap();
        assert_eq!(
            t.main_failure().map(|f| f.reason),
            Some(archbench::stats::TlsFailure::AlpnRefused),
            "{t:?}"
        );
        let note = archbench::report::tls_failure_note(t).unwrap();
        assert!(note.contains("--alpn h2,http/1.1"), "{note}");
    }
}

/// The open loop over HTTP/2: each stream slot is a sender of the schedule.
mod open_loop {
    use super::{all_http2, h2c};
    use crate::util::{assert_consistent, run};

    #[test]
    fn a_rate_over_streams_is_kept_and_counted_as_nginx_logs() {
        let Some(ng) = h2c("") else { return };
        let started = std::time::Instant::now();
        let r = run(&[
            &ng.url("/"),
            "--http2",
            "--streams",
            "4",
            "-c",
            "2",
            "-t",
            "1",
            "--rate",
            "2000",
            "-n",
            "1000",
        ]);
        let took = started.elapsed();
        let log = ng.stop_and_read_log();
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.totals.errors), (1000, 0));
        assert_eq!(log.len(), 1000);
        all_http2(&log);
        // 1,000 at 2,000/s: half a second, not as fast as nginx answers.
        assert!(took.as_millis() >= 450, "{took:?}");
        let p = r.pacing.as_ref().expect("open loop: pacing figures");
        // The rate kept (a slot comes free 4 ms after its send at most times: a loaded
        // machine may hold a few sends, which the held count says).
        assert!((p.achieved_rate - 2000.0).abs() < 100.0, "{p:?}");
        // One lateness per request sent (a retried one is sent twice).
        let retried = r.http2.as_ref().unwrap().retried;
        assert_eq!(p.lateness.count, 1000 + retried, "{p:?} {:?}", r.http2);
        let conns: std::collections::HashSet<u64> = log.iter().map(|l| l.connection).collect();
        assert_eq!(conns.len(), 2);
    }

    #[test]
    fn too_few_slots_for_the_rate_are_reported_as_held_sends() {
        let Some(ng) = h2c("") else { return };
        // One stream cannot carry 100,000 requests a second: due sends wait for it.
        let r = run(&[
            &ng.url("/"),
            "--http2",
            "-c",
            "1",
            "-t",
            "1",
            "--rate",
            "100000",
            "-n",
            "2000",
        ]);
        let log = ng.stop_and_read_log();
        assert_consistent(&r);
        assert_eq!((r.totals.requests, log.len()), (2000, 2000));
        let p = r.pacing.as_ref().unwrap();
        assert!(p.held_by_busy_connection > 0, "{p:?}");
        // Latency from the due time: it grows with the backlog, well beyond the service time.
        assert!(
            r.latency.total.p99_us > 2 * r.latency.service.p99_us,
            "{:?}",
            r.latency
        );
    }
}

/// `archbench h2load` against real h2load on the same nginx.
mod h2load {
    use super::{all_http2, h2c};
    use crate::util::nginx::{Nginx, NginxConfig};
    use crate::util::{archbench, require_tool, stderr, stdout};

    /// A line's shape: its words, every token with a digit in it replaced by `#` (h2load puts
    /// byte counts in parentheses).
    fn shape(text: &str) -> Vec<String> {
        text.lines()
            .map(|l| {
                l.split_whitespace()
                    .map(|t| {
                        if t.contains(|c: char| c.is_ascii_digit()) {
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
    fn output_has_real_h2loads_shape_and_nginx_logs_the_count() {
        let Some(h2load) = require_tool("h2load") else {
            return;
        };
        let Some(ng) = h2c("") else { return };
        let url = ng.url("/");
        for args in [
            vec!["-n", "2000", "-c", "4", "-m", "10", url.as_str()],
            vec!["-n", "100", "-c", "1", url.as_str()],
            vec![
                "-D",
                "1",
                "--warm-up-time",
                "1",
                "-c",
                "2",
                "-m",
                "2",
                url.as_str(),
            ],
            vec!["--rps", "200", "-n", "100", "-c", "2", url.as_str()],
        ] {
            let (real, ours) = crate::util::real_and_ours(&h2load, "h2load", &args);
            assert!(ours.status.success(), "{args:?}");
            if args[0] == "-n" {
                // Its rate is over the time it prints, as h2load's (it was over a shorter
                // one: "2.33ms, 11176.26 req/s" for 10 requests).
                let n: f64 = args[1].parse().unwrap();
                let (took_s, rate) = finished(&stdout(&ours));
                assert!(
                    (rate * took_s - n).abs() <= 0.01 * n,
                    "{args:?}: {}",
                    stdout(&ours)
                );
            }
            assert_eq!(
                shape(&stdout(&ours)),
                shape(&stdout(&real)),
                "{args:?}\n{}",
                stdout(&ours)
            );
        }
        let log = ng.stop_and_read_log();
        all_http2(&log);
        // Each count-based command line twice (real h2load's and ours), and the timing-based.
        assert!(log.len() > 2 * (2000 + 100 + 100), "{}", log.len());
    }

    /// h2load's `finished in D, R req/s, …`: D in seconds, and R.
    fn finished(text: &str) -> (f64, f64) {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("finished in "))
            .unwrap_or_else(|| panic!("no finished line: {text}"));
        let mut parts = line.split(", ");
        let took = parts.next().unwrap();
        let (value, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
            .iter()
            .find_map(|(unit, scale)| Some((took.strip_suffix(unit)?, *scale)))
            .unwrap();
        let rate = parts.next().unwrap().strip_suffix(" req/s").unwrap();
        (
            value.parse::<f64>().unwrap() * scale,
            rate.parse::<f64>().unwrap(),
        )
    }

    /// Against a port that refuses, each request of `-n` fails at once, as over HTTP/1.1
    /// (each waited for the next 100 ms timeout scan: 2,000 took 100 s), and none of them
    /// counts as started or done (it said "0 started, 2000 done").
    #[test]
    fn requests_to_a_refusing_port_fail_at_once_and_none_started() {
        let (_held, port) = crate::util::nginx::refusing_port();
        let url = format!("http://127.0.0.1:{port}/");
        let o = crate::util::archbench_within(
            &["h2load", "-c", "2", "-n", "2000", &url],
            crate::util::PROMPTLY,
        );
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
        assert!(
            out.contains("requests: 2000 total, 0 started, 0 done, 0 succeeded, 2000 failed, 2000 errored, 0 timeout"),
            "{out}"
        );
        // h2load says what it speaks at a client's connect: with none, nothing (it printed
        // "Application protocol: h2c" before the load).
        assert!(!out.contains("Application protocol"), "{out}");
        assert!(
            stderr(&o).contains("no connection opened (refused or unreachable)"),
            "{}",
            stderr(&o)
        );
    }

    /// A time row of h2load's table (`time to 1st byte:` …): min, max, mean, sd in µs and
    /// the share within one sd, in %.
    fn time_row(text: &str, name: &str) -> [f64; 5] {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} row in\n{text}"));
        let cells: Vec<f64> = line[name.len()..]
            .split_whitespace()
            .map(|t| {
                let (digits, scale) = if let Some(v) = t.strip_suffix("us") {
                    (v, 1.0)
                } else if let Some(v) = t.strip_suffix("ms") {
                    (v, 1e3)
                } else if let Some(v) = t.strip_suffix('s') {
                    (v, 1e6)
                } else {
                    (t.trim_end_matches('%'), 1.0)
                };
                digits
                    .parse::<f64>()
                    .unwrap_or_else(|_| panic!("{t:?} in {line:?}"))
                    * scale
            })
            .collect();
        cells
            .try_into()
            .unwrap_or_else(|_| panic!("five cells in {line:?}"))
    }

    /// Real h2load with `args`, then ours with the same and `--json`: both outputs (each
    /// asserted successful) and our result.
    fn real_then_ours(
        h2load: &std::path::Path,
        args: &[&str],
    ) -> (
        std::process::Output,
        std::process::Output,
        archbench::stats::RunResult,
    ) {
        let real = std::process::Command::new(h2load)
            .args(args)
            .output()
            .unwrap();
        assert!(real.status.success(), "{}", stdout(&real));
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let mut ours_args = vec!["h2load", "--json", json.to_str().unwrap()];
        ours_args.extend_from_slice(args);
        let ours = archbench(&ours_args);
        assert!(ours.status.success(), "{}", stdout(&ours));
        let r = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (real, ours, r)
    }

    /// h2load's `time to 1st byte` is per client (one connection each): from the start of its
    /// connect to the first response byte. Ours is the same: one value per connection, never
    /// below that connection's connect plus a request's first byte, with real h2load's shape
    /// (over 4 clients, the share within one sd is a multiple of 25%).
    #[test]
    fn time_to_first_byte_is_per_connection_as_h2loads() {
        let Some(h2load) = require_tool("h2load") else {
            return;
        };
        let Some(ng) = h2c("") else { return };
        let url = ng.url("/");
        let args = ["-n", "2000", "-c", "4", "-m", "4", url.as_str()];
        let (real, ours, r) = real_then_ours(&h2load, &args);
        for (who, text) in [("h2load", stdout(&real)), ("archbench", stdout(&ours))] {
            let ttfb = time_row(&text, "time to 1st byte:");
            let connect = time_row(&text, "time for connect:");
            // Per client: each one's first byte comes after its own connect.
            assert!(
                ttfb[0] >= connect[0],
                "{who}: {ttfb:?} vs connect {connect:?}\n{text}"
            );
            assert!(
                [0.0, 25.0, 50.0, 75.0, 100.0].contains(&ttfb[4]),
                "{who}: four values, so a multiple of 25% within one sd: {ttfb:?}\n{text}"
            );
        }
        assert_eq!(r.totals.connections_opened, 4);
        let per_connection = &r.histograms.connection_first_byte.as_ref().unwrap().0;
        assert_eq!(per_connection.len(), 4, "one value per connection");
        // A connection's first byte follows its connect and its first request's first byte
        // (histogram buckets: 3 significant digits).
        let h = &r.histograms;
        let floor = h.connect.0.min() + h.first_byte.0.min();
        assert!(
            per_connection.min() as f64 >= floor as f64 * 0.999,
            "{} vs connect + first byte {floor}",
            per_connection.min()
        );
        // The rows are these histograms (printed as h2load prints: µs, or two decimals of ms).
        let shows = |row: &str, us: u64| {
            let shown = time_row(&stdout(&ours), row)[0];
            assert!(
                (shown - us as f64).abs() <= us as f64 * 0.005 + 1.0,
                "{row} min {shown} µs, histogram {us} µs"
            );
        };
        shows("time to 1st byte:", per_connection.min());
        // h2load's request time runs from its submission, after the connect: our service time.
        shows("time for request:", h.service.0.min());
        shows("time for connect:", h.connect.0.min());
    }

    /// h2load splits -n among its clients, n/c each (one more for the first n%c), however fast
    /// each goes, and its `req/s` row is per client: each one's answers over its own span.
    /// Ours: each connection's requests in nginx's log are its share (over h2c with -m 10,
    /// where the fastest streams took more: 27/27/27/19 of 100), and the row is measured
    /// (it printed the run's rate per client as min = max = mean, sd 0).
    #[test]
    fn each_client_makes_its_share_and_its_own_rate() {
        let Some(h2load) = require_tool("h2load") else {
            return;
        };
        let Some(h2) = h2c("") else { return };
        let Some(plain) = Nginx::start(NginxConfig::default()) else {
            return;
        };
        for (ng, proto) in [(h2, &["-m", "10"][..]), (plain, &["--h1"])] {
            let url = ng.url("/");
            let mut args = vec!["-n", "102", "-c", "4", url.as_str()];
            args.extend_from_slice(proto);
            let (real, ours, r) = real_then_ours(&h2load, &args);
            // Real h2load's row has ours's five cells (`time_row` panics on another shape).
            time_row(&stdout(&real), "req/s           :");
            let log = ng.stop_and_read_log();
            // The first 102 lines are real h2load's: its own split, the reference.
            let shares = |lines: &[crate::util::nginx::LogLine]| {
                let mut by_conn: std::collections::HashMap<u64, u64> = Default::default();
                for l in lines {
                    *by_conn.entry(l.connection).or_default() += 1;
                }
                let mut v: Vec<u64> = by_conn.into_values().collect();
                v.sort_unstable();
                v
            };
            assert_eq!(log.len(), 204, "{proto:?}");
            assert_eq!(shares(&log[..102]), [25, 25, 26, 26], "h2load {proto:?}");
            assert_eq!(shares(&log[102..]), [25, 25, 26, 26], "archbench {proto:?}");
            let rates = r.histograms.client_rates.as_ref().unwrap();
            assert_eq!(rates.len(), 4, "one rate per client");
            // Each client's span lies within the run: its rate is at least its share over
            // the run's time.
            let floor = 25.0 / r.totals.elapsed_s;
            assert!(rates.iter().all(|v| *v >= floor), "{rates:?} vs {floor}");
            let row = time_row(&stdout(&ours), "req/s           :");
            let n = rates.len() as f64;
            let mean = rates.iter().sum::<f64>() / n;
            let sd = (rates.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
            let close = |shown: f64, exact: f64| (shown - exact).abs() <= 0.005 + 1e-9;
            let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let max = rates.iter().copied().fold(0.0, f64::max);
            // Each client's own span and count: not the run's rate shared out (which printed
            // min = max = mean, sd 0).
            assert!(max > min, "{rates:?}");
            assert!(
                close(row[0], min) && close(row[1], max),
                "{row:?} {rates:?}"
            );
            assert!(
                close(row[2], mean) && close(row[3], sd),
                "{row:?} {rates:?}"
            );
            assert!([0.0, 25.0, 50.0, 75.0, 100.0].contains(&row[4]), "{row:?}");
        }
    }

    /// h2load's `-H ':authority: …'` and `-H ':method: …'` override the request's authority
    /// and method, over h2c and over HTTP/1.1 (the Host line) alike, as real h2load's do
    /// (they were refused: "invalid header name"). nginx answers 202 to that name only.
    #[test]
    fn pseudo_headers_override_the_authority_and_the_method_as_h2loads() {
        let Some(h2load) = require_tool("h2load") else {
            return;
        };
        let vhost = r#"if ($host = "example.test") { return 202; }"#;
        let Some(h2) = h2c(vhost) else { return };
        let Some(plain) = Nginx::start(NginxConfig {
            server: vhost,
            ..NginxConfig::default()
        }) else {
            return;
        };
        for (ng, proto) in [(h2, "-m1"), (plain, "--h1")] {
            let url = ng.url("/");
            let args = [
                "-n",
                "4",
                proto,
                "-H",
                ":authority: example.test",
                "-H",
                ":method: HEAD",
                url.as_str(),
            ];
            real_then_ours(&h2load, &args);
            let log = ng.stop_and_read_log();
            assert_eq!(log.len(), 8, "{proto}");
            for (who, lines) in [("h2load", &log[..4]), ("archbench", &log[4..])] {
                for l in lines {
                    assert_eq!(l.status, 202, "{who} {proto}: {l:?}");
                    assert!(l.request.starts_with("HEAD / "), "{who} {proto}: {l:?}");
                }
            }
        }
    }

    /// h2load's -T and -N are connection timeouts, not ours per request: refused with the
    /// flag that comes nearest, before anything is sent.
    #[test]
    fn connection_timeouts_are_refused_with_the_nearest_flag() {
        for args in [
            &["-T", "5"][..],
            &["--connection-active-timeout", "5"],
            &["-N", "5"],
            &["--connection-inactivity-timeout=5"],
        ] {
            let mut argv = vec!["h2load", "-n", "1", "http://127.0.0.1:9/"];
            argv.extend_from_slice(args);
            let out = archbench(&argv);
            assert_eq!(out.status.code(), Some(2), "{argv:?}");
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{argv:?}: {err}");
            let flag = if args[0].contains('T') || args[0].contains("active-") {
                "--connection-active-timeout"
            } else {
                "--connection-inactivity-timeout"
            };
            assert!(err.contains(flag), "{argv:?}: {err}");
            assert!(err.contains("--timeout D"), "{argv:?}: {err}");
            assert!(stdout(&out).is_empty(), "nothing started: {}", stdout(&out));
        }
    }

    #[test]
    fn h1_and_the_name_h2load_through_a_symlink() {
        let Some(ng) = Nginx::start(NginxConfig::default()) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let h2load = dir.path().join("h2load");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_archbench"), &h2load).unwrap();
        let json = dir.path().join("r.json");
        let out = std::process::Command::new(&h2load)
            .args(["--h1", "-n", "300", "-c", "3", &ng.url("/")])
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success());
        let r: archbench::stats::RunResult =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let per_connection = &r.histograms.connection_first_byte.as_ref().unwrap().0;
        assert_eq!(
            per_connection.len(),
            3,
            "time to 1st byte: one value per connection"
        );
        let text = stdout(&out);
        assert!(text.contains("Application protocol: http/1.1\n"), "{text}");
        assert!(
            text.contains("requests: 300 total, 300 started, 300 done, 300 succeeded, 0 failed, 0 errored, 0 timeout\n"),
            "{text}"
        );
        let log = ng.stop_and_read_log();
        assert_eq!(log.len(), 300);
        assert!(log.iter().all(|l| l.protocol == "HTTP/1.1"));
    }
}
