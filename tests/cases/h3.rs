//! HTTP/3 over QUIC against real Caddy (Debian's 2.6, and a newer one built from the Go module
//! proxy), counted against its access log.

use std::process::Stdio;

use crate::util::caddy::{Caddy, CaddyConfig, CaddyLine};
use crate::util::{
    archbench, assert_consistent, bin, finish_within, read_json, run, stderr, stdout, LineReader,
    PROMPTLY,
};

fn caddy() -> Option<Caddy> {
    Caddy::start(CaddyConfig::default())
}

/// Every line of the log an HTTP/3 request answered 200.
fn all_http3_ok(log: &[CaddyLine]) {
    assert!(
        log.iter().all(|l| l.proto == "HTTP/3.0" && l.status == 200),
        "every request over HTTP/3, answered: {:?}",
        log.iter()
            .find(|l| l.proto != "HTTP/3.0" || l.status != 200)
    );
}

#[test]
fn streams_carry_exactly_the_count_caddy_logs() {
    let Some(caddy) = caddy() else { return };
    streams_carry_exactly_the_count_logged(caddy);
}

/// The same against a newer Caddy (tools/caddy/build, from the Go module proxy: Caddy 2.11,
/// quic-go 0.63 where Debian's 2.6 has 0.3x): a second QUIC stack of today.
#[test]
fn streams_carry_exactly_the_count_a_newer_caddy_logs() {
    let Some(caddy) = newer_caddy() else { return };
    streams_carry_exactly_the_count_logged(caddy);
}

fn newer_caddy() -> Option<Caddy> {
    Caddy::start(CaddyConfig {
        newer: true,
        ..CaddyConfig::default()
    })
}

fn streams_carry_exactly_the_count_logged(caddy: Caddy) {
    let url = caddy.url("/");
    // 200 streams is above quic-go's default of 100 concurrent streams per connection: the
    // rest wait for the server's MAX_STREAMS, and nothing is lost or doubled.
    let mut logged = 0;
    for streams in ["1", "10", "100", "200"] {
        let r = run(&[
            &url,
            "--http3",
            "-k",
            "--streams",
            streams,
            "-n",
            "2000",
            "-c",
            "4",
            "-t",
            "2",
        ]);
        assert_consistent(&r);
        assert_eq!((r.totals.requests, r.totals.errors), (2000, 0), "{streams}");
        assert_eq!(r.status_codes.get("200"), Some(&2000));
        assert_eq!(r.totals.connections_opened, 4, "{streams}");
        assert_eq!(r.plan.http3_streams, Some(streams.parse().unwrap()));
        let q = r.quic.as_ref().expect("QUIC figures in the result");
        assert_eq!((q.handshakes, q.handshakes_failed), (4, 0), "{streams}");
        assert_eq!(q.streams_asked, streams.parse::<u32>().unwrap());
        // Each request's HEADERS frame is over 20 bytes, each response's over 10: what the
        // datagrams carried is at least that (QUIC packs many streams into one datagram).
        assert!(q.datagrams_sent > 0 && q.datagrams_received > 0, "{q:?}");
        assert!(q.udp_bytes_sent > 2000 * 20, "{q:?}");
        assert!(q.udp_bytes_received > 2000 * 10, "{q:?}");
        assert!(q.path_mtu_min.is_some_and(|m| m >= 1200), "{q:?}");
        let tls = r.tls.as_ref().expect("TLS figures");
        // A worker that starts after another's first handshake may resume its ticket: the
        // four handshakes are full or resumed, and the first is full.
        assert_eq!(
            (tls.handshakes(), tls.alpn.as_deref()),
            (4, Some("h3")),
            "{tls:?}"
        );
        assert!(tls.full_handshakes >= 1, "{tls:?}");
        // The closed loop's connections were closed with H3_NO_ERROR at the end: no error.
        assert!(q.connection_errors.is_empty(), "{q:?}");
        crate::util::schema::assert_valid(&serde_json::to_value(&r).unwrap());
        let log = caddy.log();
        assert_eq!(log.len() - logged, 2000, "{streams}: Caddy logged");
        logged = log.len();
    }
    all_http3_ok(&caddy.stop_and_read_log());
}

#[test]
fn a_timed_run_counts_only_answers_and_ends_on_time() {
    let Some(caddy) = caddy() else { return };
    let started = std::time::Instant::now();
    let r = run(&[
        &caddy.url("/"),
        "--http3",
        "-k",
        "--streams",
        "10",
        "-d",
        "1s",
        "-c",
        "8",
    ]);
    let took = started.elapsed();
    assert_consistent(&r);
    let log = caddy.stop_and_read_log();
    all_http3_ok(&log);
    let counted = r.totals.requests;
    assert!(counted > 0 && r.totals.errors == 0);
    // Requests in flight at the deadline were answered too late to count: at most one per
    // stream slot more in the log than counted.
    let logged = log.len() as u64;
    assert!(
        counted <= logged && logged <= counted + 8 * 10,
        "counted {counted}, Caddy logged {logged}"
    );
    assert!(took.as_secs_f64() < 5.0, "a 1 s run took {took:?}");
}

#[test]
fn a_ten_mebibyte_body_flows_through_quic_flow_control() {
    let Some(caddy) = Caddy::start(CaddyConfig {
        files: &[("big", 10 << 20)],
        ..CaddyConfig::default()
    }) else {
        return;
    };
    let r = run(&[
        &caddy.url("/big"),
        "--http3",
        "-k",
        "--streams",
        "2",
        "-n",
        "12",
        "-c",
        "2",
    ]);
    assert_consistent(&r);
    assert_eq!((r.totals.requests, r.totals.errors), (12, 0));
    assert_eq!(r.totals.body_bytes, 12 * (10 << 20));
    let log = caddy.stop_and_read_log();
    all_http3_ok(&log);
    assert_eq!(log.len(), 12);
    assert!(log.iter().all(|l| l.uri == "/big" && l.size == 10 << 20));
}

#[test]
fn an_untrusted_or_unpinned_certificate_fails_with_its_reason() {
    let Some(caddy) = caddy() else { return };
    let url = caddy.url("/");
    let o = archbench(&[
        "run", &url, "--http3", "-n", "10", "-c", "2", "-q", "-o", "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["totals"]["requests"], 0);
    assert_eq!(doc["errors"]["tls"], 10, "{}", doc["errors"]);
    assert_eq!(
        doc["totals"]["connections_opened"], 0,
        "no handshake completed"
    );
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "untrusted_certificate",
        "{}",
        doc["tls"]
    );
    assert!(doc["quic"]["handshakes_failed"].as_u64().unwrap() >= 2);
    let said = stderr(&o);
    assert!(said.contains("-k/--insecure skips verification"), "{said}");
    crate::util::schema::assert_valid(&doc);

    // The one certificate pinned is accepted; another (the file of a different server's)
    // is refused as not the pinned one.
    let cert = caddy.cert();
    let r = run(&[
        &url,
        "--http3",
        "--pinned-cert",
        cert.to_str().unwrap(),
        "-n",
        "20",
        "-c",
        "2",
    ]);
    assert_eq!((r.totals.requests, r.totals.errors), (20, 0));
    let Some(other) = caddy_other() else { return };
    let o = archbench(&[
        "run",
        &url,
        "--http3",
        "--pinned-cert",
        other.cert().to_str().unwrap(),
        "-n",
        "4",
        "-c",
        "1",
        "-q",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "not_pinned",
        "{}",
        doc["tls"]
    );
    drop(other);
    let log = caddy.stop_and_read_log();
    assert_eq!(
        log.len(),
        20,
        "only the pinned run's requests reached Caddy"
    );
}

/// A second Caddy, for its certificate.
fn caddy_other() -> Option<Caddy> {
    caddy()
}

#[test]
fn a_server_without_http3_is_said_in_one_line() {
    let Some(caddy) = Caddy::start(CaddyConfig {
        protocols: "h1 h2",
        ..CaddyConfig::default()
    }) else {
        return;
    };
    let o = archbench(&[
        "run",
        &caddy.url("/"),
        "--http3",
        "-k",
        "-n",
        "4",
        "-c",
        "1",
        "--timeout",
        "2s",
        "-q",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["totals"]["requests"], 0);
    assert_eq!(doc["errors"]["connect"], 4, "{}", doc["errors"]);
    let said = stderr(&o);
    assert!(
        said.contains("no HTTP/3") && said.contains("UDP"),
        "one line says so: {said}"
    );
    assert!(caddy.stop_and_read_log().is_empty());
}

#[test]
fn ctrl_c_mid_run_keeps_what_was_measured() {
    let Some(caddy) = caddy() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut child = bin()
        .args([
            "run",
            &caddy.url("/"),
            "--http3",
            "-k",
            "-c",
            "4",
            "-d",
            "60s",
            "--json",
        ])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("requests", PROMPTLY);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    let doc = read_json(&file);
    assert_eq!(doc["interrupted"], true);
    let counted = doc["totals"]["requests"].as_u64().unwrap();
    let log = caddy.stop_and_read_log();
    assert!(
        counted > 0 && counted <= log.len() as u64,
        "{counted} vs {}",
        log.len()
    );
    assert!(doc["quic"]["handshakes"].as_u64().unwrap() == 4);
}

#[test]
fn http3_flags_that_do_not_combine_are_usage_errors() {
    for (args, says) in [
        (
            &["https://127.0.0.1:9/", "--http3", "--http2"][..],
            "--http2",
        ),
        (&["http://127.0.0.1:9/", "--http3"], "https://"),
        (
            &["https://127.0.0.1:9/", "--http3", "--streams", "0"],
            "--streams",
        ),
        (
            &["https://127.0.0.1:9/", "--http3", "--no-keepalive"],
            "--no-keepalive",
        ),
        (
            &["https://127.0.0.1:9/", "--http3", "--tls-version", "1.2"],
            "TLS 1.3",
        ),
    ] {
        let mut argv = vec!["run", "-n", "1", "-c", "1"];
        argv.extend_from_slice(args);
        let out = archbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(says), "{argv:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn h2load_command_lines_for_h3_run_unchanged() {
    let Some(caddy) = caddy() else { return };
    let url = caddy.url("/");
    for alpn in ["--alpn-list=h3", "--npn-list=h3,h2"] {
        let o = archbench(&["h2load", "-n", "200", "-c", "2", "-m", "10", alpn, &url]);
        assert_eq!(o.status.code(), Some(0), "{alpn}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("Application protocol: h3"), "{alpn}: {text}");
        assert!(text.contains("200 succeeded"), "{alpn}: {text}");
    }
    let o = archbench(&["h2load", "-n", "2", "--alpn-list=h4", &url]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("none of h3, h2, http/1.1"),
        "{}",
        stderr(&o)
    );
    let log = caddy.stop_and_read_log();
    assert_eq!(log.len(), 400);
    all_http3_ok(&log);
}

/// The open loop over HTTP/3: each stream slot is a sender of the schedule.
#[test]
fn a_rate_over_quic_streams_is_kept_and_counted_as_caddy_logs() {
    let Some(caddy) = caddy() else { return };
    let started = std::time::Instant::now();
    let r = run(&[
        &caddy.url("/"),
        "--http3",
        "-k",
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
    assert_consistent(&r);
    assert_eq!((r.totals.requests, r.totals.errors), (1000, 0));
    // 1,000 at 2,000/s: half a second, not as fast as Caddy answers.
    assert!(took.as_millis() >= 450, "{took:?}");
    let p = r.pacing.as_ref().expect("open loop: pacing figures");
    assert!((p.achieved_rate - 2000.0).abs() < 100.0, "{p:?}");
    // One lateness per request sent (a retried one is sent twice).
    let retried = r.quic.as_ref().unwrap().retried;
    assert_eq!(p.lateness.count, 1000 + retried, "{p:?} {:?}", r.quic);
    let log = caddy.stop_and_read_log();
    assert_eq!(log.len(), 1000);
    all_http3_ok(&log);
}

/// A count-bounded open loop over QUIC streams ends with its last response: slots with
/// nothing left to send stop then, not at their next turn (a whole period of the schedule
/// later, when there are as many slots as requests).
#[test]
fn a_counted_rate_over_quic_streams_ends_with_its_last_request() {
    let Some(caddy) = caddy() else { return };
    let r = run(&[
        &caddy.url("/"),
        "--http3",
        "-k",
        "--streams",
        "8",
        "-c",
        "5",
        "-t",
        "1",
        "--rate",
        "200",
        "-n",
        "40",
    ]);
    assert_consistent(&r);
    assert_eq!((r.totals.requests, r.totals.errors), (40, 0));
    // The last of 40 at 200/s is due 195 ms in; its slot's next turn would be at 395 ms.
    assert!(r.totals.elapsed_s < 0.3, "{:?}", r.totals);
    let p = r.pacing.as_ref().expect("open loop: pacing figures");
    assert!((p.achieved_rate - 200.0).abs() < 20.0, "{p:?}");
    let log = caddy.stop_and_read_log();
    assert_eq!(log.len(), 40);
    all_http3_ok(&log);
}

#[test]
fn too_few_quic_slots_for_the_rate_are_reported_as_held_sends() {
    let Some(caddy) = caddy() else { return };
    // One stream cannot carry 100,000 requests a second: due sends wait for it.
    let r = run(&[
        &caddy.url("/"),
        "--http3",
        "-k",
        "-c",
        "1",
        "-t",
        "1",
        "--rate",
        "100000",
        "-n",
        "2000",
    ]);
    assert_consistent(&r);
    let log = caddy.stop_and_read_log();
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

/// The HTTP/3 fault matrix: each misbehaviour of a server of the tests' own (quinn-proto's
/// server side) ends as the kind of error it is, in bounded time, with the right figures.
mod faults {
    use std::sync::atomic::Ordering;

    use crate::util::faulty_h3::{FaultyH3Server, H3Fault};
    use crate::util::{assert_consistent, run};
    use archbench::stats::RunResult;

    /// A run of `-n n -c 1 --streams streams` against a new server playing `fault`.
    fn load(fault: H3Fault, streams: u32, n: u32) -> (FaultyH3Server, RunResult) {
        let server = FaultyH3Server::start(fault);
        let (streams, n) = (streams.to_string(), n.to_string());
        let r = run(&[
            &server.url(),
            "--http3",
            "-k",
            "--streams",
            &streams,
            "-n",
            &n,
            "-c",
            "1",
            "--timeout",
            "2s",
        ]);
        assert_consistent(&r);
        (server, r)
    }

    fn count(codes: &[archbench::stats::H2CodeCount], code: &str) -> u64 {
        codes.iter().find(|c| c.code == code).map_or(0, |c| c.count)
    }

    /// [`load`] with more arguments.
    fn load_with(fault: H3Fault, args: &[&str]) -> (FaultyH3Server, RunResult) {
        let server = FaultyH3Server::start(fault);
        let url = server.url();
        let r = run(&[
            &[url.as_str(), "--http3", "-k", "--timeout", "2s"][..],
            args,
        ]
        .concat());
        assert_consistent(&r);
        (server, r)
    }

    #[test]
    fn reconnections_resume_the_session_and_are_counted_as_resumed() {
        // Two requests per connection: ten connections one after another, the first with a
        // full handshake, the next nine resuming a ticket the one before brought.
        let (server, r) = load_with(H3Fault::GoAwayAfterTwo, &["-c", "1", "-n", "20"]);
        let tls = r.tls.as_ref().unwrap();
        let connections = server.counts.connections.load(Ordering::Relaxed);
        assert_eq!(r.quic.as_ref().unwrap().handshakes, connections);
        assert_eq!(
            (tls.full_handshakes, tls.resumed_handshakes),
            (1, connections - 1),
            "{tls:?}"
        );
        // Without resumption, every one is full.
        let (server, r) = load_with(
            H3Fault::GoAwayAfterTwo,
            &["-c", "1", "-n", "20", "--tls-resume", "off"],
        );
        let tls = r.tls.as_ref().unwrap();
        let connections = server.counts.connections.load(Ordering::Relaxed);
        assert_eq!(
            (tls.full_handshakes, tls.resumed_handshakes),
            (connections, 0)
        );
    }

    #[test]
    fn refused_early_data_is_sent_again_and_counted_once() {
        let (server, r) = load_with(
            H3Fault::ForgetsSessions,
            &["--0rtt", "-c", "2", "--streams", "3", "-n", "30"],
        );
        let q = r.quic.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.totals.errors), (30, 0), "{q:?}");
        // The server processed each request once: the early ones it refused it never saw.
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 30);
        // rustls's server sends two tickets per handshake.
        assert_eq!(q.fetch_handshakes, 2, "{q:?}");
        assert!(q.sessions_fetched >= 2, "{q:?}");
        assert_eq!((q.zero_rtt_rejected, q.zero_rtt_accepted), (2, 0), "{q:?}");
        // Three early requests per connection, each sent again after the handshake.
        assert_eq!(q.retried, 6, "{q:?}");
        let tls = r.tls.as_ref().unwrap();
        assert_eq!((tls.full_handshakes, tls.resumed_handshakes), (2, 0));
        assert!(r.plan.http3_0rtt);
    }

    #[test]
    fn a_goaway_loses_and_doubles_nothing() {
        let (server, r) = load(H3Fault::GoAwayAfterTwo, 4, 20);
        let q = r.quic.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.totals.errors), (20, 0), "{q:?}");
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 20);
        // Two answered per connection: ten connections, each ended by a GOAWAY.
        assert!(q.goaways >= 9, "{q:?}");
        assert!(server.counts.connections.load(Ordering::Relaxed) >= 10);
        assert!(
            q.retried >= server.counts.rejected.load(Ordering::Relaxed),
            "{q:?}"
        );
        assert!(q.retried > 0, "{q:?}");
    }

    #[test]
    fn rejected_requests_are_sent_again_and_counted_once() {
        let (server, r) = load(H3Fault::RejectEveryThird, 1, 30);
        let q = r.quic.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.totals.errors), (30, 0), "{q:?}");
        assert_eq!(server.counts.answered.load(Ordering::Relaxed), 30);
        let rejected = server.counts.rejected.load(Ordering::Relaxed);
        assert!(rejected >= 14, "{rejected}");
        assert_eq!(q.retried, rejected, "{q:?}");
    }

    #[test]
    fn a_stream_reset_mid_body_is_a_protocol_error_by_its_code() {
        let (_server, r) = load(H3Fault::ResetMidBody, 2, 10);
        let q = r.quic.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.errors.protocol), (0, 10), "{q:?}");
        assert_eq!(count(&q.resets, "h3_internal_error"), 10, "{q:?}");
        assert_eq!(r.totals.body_bytes, 0);
    }

    #[test]
    fn data_before_headers_closes_the_connection_with_frame_unexpected() {
        let (_server, r) = load(H3Fault::DataBeforeHeaders, 1, 6);
        let q = r.quic.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.errors.protocol), (0, 6), "{q:?}");
        assert_eq!(
            count(&q.connection_errors, "ours:h3_frame_unexpected"),
            6,
            "{q:?}"
        );
    }

    #[test]
    fn a_connection_closed_mid_run_fails_only_what_was_in_flight() {
        let (server, r) = load(H3Fault::CloseAfterFive, 2, 40);
        let q = r.quic.as_ref().unwrap();
        let answered = server.counts.answered.load(Ordering::Relaxed);
        assert_eq!(r.totals.requests, answered, "{q:?}");
        assert_eq!(
            r.totals.requests + r.totals.errors,
            40,
            "{:?} {:?} {q:?}",
            r.totals,
            r.errors
        );
        assert!(answered >= 30, "{answered}");
        assert!(
            count(&q.connection_errors, "application:h3_internal_error") >= 5,
            "{q:?}"
        );
    }
}

/// `--0rtt` against Caddy (quic-go accepts early data): a session fetched for each connection
/// before the run, every connection resumed with its first requests in 0-RTT, each request
/// counted once, as Caddy logged it.
#[test]
fn zero_rtt_resumes_every_connection_and_caddy_answers_the_early_requests() {
    let Some(caddy) = caddy() else { return };
    zero_rtt_resumes_every_connection(caddy);
}

#[test]
fn zero_rtt_resumes_every_connection_and_a_newer_caddy_answers_the_early_requests() {
    let Some(caddy) = newer_caddy() else { return };
    zero_rtt_resumes_every_connection(caddy);
}

fn zero_rtt_resumes_every_connection(caddy: Caddy) {
    let r = run(&[
        &caddy.url("/"),
        "--http3",
        "--0rtt",
        "-k",
        "-c",
        "4",
        "-t",
        "2",
        "--streams",
        "2",
        "-n",
        "400",
    ]);
    assert_consistent(&r);
    assert_eq!((r.totals.requests, r.totals.errors), (400, 0));
    let q = r.quic.as_ref().unwrap();
    assert_eq!((q.sessions_fetched, q.fetch_handshakes), (4, 4), "{q:?}");
    assert_eq!(
        (
            q.zero_rtt_accepted,
            q.zero_rtt_rejected,
            q.zero_rtt_unavailable
        ),
        (4, 0, 0),
        "{q:?}"
    );
    assert_eq!((q.handshakes, q.retried), (4, 0), "{q:?}");
    let tls = r.tls.as_ref().unwrap();
    assert_eq!(
        (tls.full_handshakes, tls.resumed_handshakes),
        (0, 4),
        "{tls:?}"
    );
    crate::util::schema::assert_valid(&serde_json::to_value(&r).unwrap());
    // The fetching handshakes sent no request: Caddy logged the run's and no more.
    let log = caddy.stop_and_read_log();
    assert_eq!(log.len(), 400);
    all_http3_ok(&log);
}

#[test]
fn zero_rtt_without_http3_or_resumption_is_a_usage_error() {
    let o = archbench(&["run", "https://127.0.0.1:9/", "--0rtt", "-n", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--http3"), "{}", stderr(&o));
    let o = archbench(&[
        "run",
        "https://127.0.0.1:9/",
        "--http3",
        "--0rtt",
        "--tls-resume",
        "off",
        "-c",
        "1",
        "-n",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("--tls-resume off"), "{}", stderr(&o));
}

mod quic_failures {
    use std::time::{Duration, Instant};

    use crate::util::faulty_h3::{FaultyH3Server, H3Fault, SILENT_IDLE_TIMEOUT};
    use crate::util::{archbench, stdout};

    fn count(doc: &serde_json::Value, code: &str) -> u64 {
        doc["quic"]["connection_errors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["code"] == code)
            .map_or(0, |c| c["count"].as_u64().unwrap())
    }

    #[test]
    fn a_server_of_another_quic_version_is_named_in_one_line() {
        let server = FaultyH3Server::start(H3Fault::OtherVersionOnly);
        let url = server.url();
        let args = [
            "run",
            &url,
            "--http3",
            "-k",
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "2s",
        ];
        let o = archbench(&args);
        assert_eq!(o.status.code(), Some(1), "{}", crate::util::stderr(&o));
        let text = stdout(&o);
        assert!(
            text.contains("answered with a QUIC Version Negotiation")
                && text.contains("none of them QUIC v1"),
            "{text}"
        );
        let o = archbench(&[&args[..], &["-q", "-o", "json"]].concat());
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(doc["totals"]["requests"], 0);
        assert_eq!(doc["errors"]["connect"], 3, "{}", doc["errors"]);
        assert_eq!(count(&doc, "version_mismatch"), 3, "{}", doc["quic"]);
        assert_eq!(doc["quic"]["handshakes"], 0);
        assert_eq!(doc["quic"]["handshakes_failed"], 3);
        assert_eq!(
            server
                .counts
                .connections
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn a_server_gone_silent_ends_by_the_idle_timeout_it_offered() {
        let server = FaultyH3Server::start(H3Fault::SilentAfterHandshake);
        let started = Instant::now();
        let o = archbench(&[
            "run",
            &server.url(),
            "--http3",
            "-k",
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "10s",
            "-q",
            "-o",
            "json",
        ]);
        let took = started.elapsed();
        let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        // Each of the three connections was ended by QUIC's idle timeout (the server's 300
        // ms, the lower of the two offered), not by the 10 s request timeout.
        assert_eq!(count(&doc, "idle_timeout"), 3, "{}", doc["quic"]);
        assert_eq!(doc["quic"]["handshakes"], 3, "{}", doc["quic"]);
        assert_eq!(doc["totals"]["requests"], 0);
        assert_eq!(doc["errors"]["read"], 3, "{}", doc["errors"]);
        assert_eq!(doc["errors"]["timeout"], 0, "{}", doc["errors"]);
        assert!(took >= 3 * SILENT_IDLE_TIMEOUT, "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(
            server
                .counts
                .answered
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }
}

/// A certificate from a trusted authority (the test's own, trusted through SSL_CERT_FILE as
/// the system's roots are read) for another name than the URL's: refused as a name mismatch.
#[test]
fn a_certificate_for_another_name_is_a_name_mismatch() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["elsewhere.test".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let Some(caddy) = Caddy::start(CaddyConfig {
        cert: Some((leaf.pem(), leaf_key.serialize_pem())),
        default_sni: Some("elsewhere.test"),
        ..CaddyConfig::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("roots.pem");
    std::fs::write(&roots, ca.pem()).unwrap();
    let o = bin()
        .args([
            "run",
            &caddy.url("/"),
            "--http3",
            "-n",
            "4",
            "-c",
            "1",
            "-q",
            "-o",
            "json",
        ])
        .env("SSL_CERT_FILE", &roots)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["errors"]["tls"], 4, "{}", doc["errors"]);
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "name_mismatch",
        "{}",
        doc["tls"]
    );
    assert!(caddy.stop_and_read_log().is_empty());
}

#[test]
fn prometheus_shows_the_quic_counters_grow_and_end_at_the_results_figures() {
    use crate::util::prometheus::{one, parse, parser_available, scrape, serving};
    if !parser_available() {
        return;
    }
    let Some(caddy) = caddy() else { return };
    let url = caddy.url("/");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = bin();
    cmd.args([
        "run",
        &url,
        "--http3",
        "-k",
        "--streams",
        "4",
        "-c",
        "3",
        "-t",
        "1",
        "-d",
        "3s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let (child, err, addr) = serving(cmd);
    let target = [("target", url.as_str())];
    // During the run: the datagram counters grow from one scrape to a later one (the open
    // connections' counters, not only those of ended ones: none ends before the deadline).
    crate::util::wait_for_change("the QUIC datagram counter to grow", PROMPTLY, || {
        let s = parse(&scrape(&addr));
        if one(&s, "archbench_running", &target) != 1.0 {
            return None;
        }
        let n = s
            .get("archbench_quic_datagrams_sent_total")
            .map(|_| one(&s, "archbench_quic_datagrams_sent_total", &target))?;
        (n > 0.0).then_some(n)
    });
    err.wait_for("--linger", PROMPTLY);
    let s = parse(&scrape(&addr));
    let r = read_json(&json);
    let q = &r["quic"];
    for (metric, field) in [
        ("archbench_quic_handshakes_total", "handshakes"),
        (
            "archbench_quic_handshakes_failed_total",
            "handshakes_failed",
        ),
        ("archbench_quic_datagrams_sent_total", "datagrams_sent"),
        (
            "archbench_quic_datagrams_received_total",
            "datagrams_received",
        ),
        ("archbench_quic_sent_bytes_total", "udp_bytes_sent"),
        ("archbench_quic_received_bytes_total", "udp_bytes_received"),
        ("archbench_quic_packets_lost_total", "packets_lost"),
        (
            "archbench_quic_congestion_events_total",
            "congestion_events",
        ),
    ] {
        assert_eq!(
            one(&s, metric, &target),
            q[field].as_f64().unwrap(),
            "{metric}"
        );
    }
    assert_eq!(one(&s, "archbench_quic_handshakes_total", &target), 3.0);
    assert!(one(&s, "archbench_quic_datagrams_received_total", &target) > 0.0);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(0));
    let requests = r["totals"]["requests"].as_u64().unwrap();
    // A request in flight at the deadline may be logged and not counted: at most one per
    // stream.
    let logged = caddy.stop_and_read_log().len() as u64;
    assert!(
        requests <= logged && logged <= requests + 12,
        "{requests} {logged}"
    );
}
