//! The engine against the embedded server: counts, keep-alive, framings, pacing, timeouts.

use std::time::Duration;

use archbench::serve::{Framing, ServeOptions, Server};

use crate::util::{assert_consistent, embedded_server, run};

#[test]
fn exact_count_keepalive_reuses_connections() {
    let s = embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "1000", "-c", "8", "-t", "2"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 1000);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(
        s.requests(),
        1000,
        "the server answered exactly what we counted"
    );
    assert_eq!(s.connections(), 8, "keep-alive: one connection per -c");
    assert_eq!(r.totals.connections_opened, 8);
    assert_eq!(r.totals.body_bytes, 1000 * 615);
    assert_eq!(r.status_codes.get("200"), Some(&1000));
    assert_eq!(r.response.server.as_deref(), Some("archbench"));
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let s = embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "300", "-c", "3", "--no-keepalive"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 300);
    assert_eq!(s.connections(), 300);
    assert_eq!(r.totals.connections_opened, 300);
    assert_eq!(r.latency.connect.count, 300);
}

#[test]
fn chunked_bodies_are_framed() {
    let s = embedded_server(Framing::Chunked, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "500", "-c", "4"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 500);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(r.totals.body_bytes, 500 * 615, "de-chunked body length");
    assert_eq!(s.connections(), 4, "chunked responses keep the connection");
}

#[test]
fn close_delimited_bodies_end_at_eof() {
    let s = embedded_server(Framing::CloseDelimited, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "200", "-c", "4"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 200);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(r.totals.body_bytes, 200 * 615);
    assert_eq!(s.connections(), 200, "the server closes after each body");
}

#[test]
fn head_requests_expect_no_body() {
    let s = embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "100", "-c", "2", "-m", "HEAD"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 100);
    assert_eq!(r.totals.body_bytes, 0);
    assert_eq!(
        s.connections(),
        2,
        "HEAD responses keep the connection usable"
    );
}

#[test]
fn open_loop_latency_counts_from_intended_send_time() {
    // 2 connections asked for 200 req/s from a server that takes 20 ms per response: each
    // connection can do 50/s, so requests fall ever further behind their schedule. The
    // corrected latency must show the backlog; the service time must not.
    let s = embedded_server(Framing::ContentLength, Duration::from_millis(20));
    let url = s.url();
    let r = run(&[&url, "--rate", "200", "-c", "2", "-d", "2s"]);
    assert_consistent(&r);
    let (total, service) = (&r.latency.total, &r.latency.service);
    assert!(service.max_us < 200_000, "service max {}", service.max_us);
    assert!(service.p50_us >= 20_000, "service p50 {}", service.p50_us);
    assert!(
        total.max_us > 5 * service.max_us,
        "corrected max {} vs service max {}",
        total.max_us,
        service.max_us
    );
    assert_eq!(r.plan.rate, Some(200.0));
}

#[test]
fn timeouts_are_counted_and_end_the_requests() {
    let s = embedded_server(Framing::ContentLength, Duration::from_secs(3));
    let url = s.url();
    let r = run(&[&url, "-n", "4", "-c", "2", "--timeout", "200ms"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 0);
    assert_eq!(r.errors.timeout, 4);
    assert!(
        r.totals.elapsed_s < 2.0,
        "four 200 ms timeouts on two connections end long before the server answers"
    );
}

#[test]
fn workers_merge_exactly() {
    let s = embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let r = run(&[&url, "-n", "3001", "-c", "7", "-t", "3"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 3001);
    assert_eq!(r.plan.threads, 3);
    for h in [
        &r.histograms.total.0,
        &r.histograms.service.0,
        &r.histograms.first_byte.0,
    ] {
        assert_eq!(h.len(), 3001);
    }
    assert_eq!(r.histograms.connect.0.len(), 7);
    assert_eq!(s.requests(), 3001);
}

#[test]
fn connection_refused_is_counted_as_connect_errors() {
    let (_held, port) = crate::util::nginx::refusing_port();
    let url = format!("http://127.0.0.1:{port}/");
    let r = run(&[&url, "-n", "20", "-c", "2"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 0);
    assert_eq!(r.errors.connect, 20);
}

#[test]
fn ipv6_loopback() {
    let s = Server::start(ServeOptions {
        addr: "[::1]:0".parse().unwrap(),
        threads: 1,
        ..ServeOptions::default()
    });
    let Ok(s) = s else {
        crate::util::cannot_run("no IPv6 loopback on this machine");
        return;
    };
    let url = format!("http://[::1]:{}/", s.addr().port());
    let r = run(&[&url, "-n", "50", "-c", "2"]);
    assert_eq!(r.totals.requests, 50);
    assert_eq!(s.requests(), 50);
    // ab says an IPv6 literal without its URL brackets, as ab does ("Benchmarking ::1").
    let o = crate::util::archbench(&["ab", "-n", "5", &url]);
    let out = crate::util::stdout(&o);
    assert!(
        out.contains("Benchmarking ::1 (be patient)")
            && out.contains("Server Hostname:        ::1\n"),
        "{out}"
    );
    assert_eq!(s.requests(), 55);
}

#[test]
fn request_bodies_are_sent_with_their_length() {
    let s = embedded_server(Framing::ContentLength, Duration::ZERO);
    let url = s.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, vec![b'x'; 3000]).unwrap();
    let r = run(&[
        &url,
        "-n",
        "200",
        "-c",
        "2",
        "-m",
        "post",
        "--body-file",
        file.to_str().unwrap(),
        "-H",
        "Content-Type: application/json",
    ]);
    assert_consistent(&r);
    // The server frames requests by Content-Length: a wrong length would desynchronise the
    // keep-alive connection and fail later requests.
    assert_eq!(r.totals.requests, 200);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(s.requests(), 200);
    assert_eq!(s.connections(), 2);
    assert_eq!(r.plan.method, "POST");
    assert_eq!(r.plan.body_bytes, 3000);
    assert!(r.totals.bytes_written >= 200 * 3000);
}
