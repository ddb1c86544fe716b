//! The engine and the front ends against real nginx, checked against nginx's own access log.

use std::collections::HashSet;

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench, assert_consistent, read_json, run, stderr, stdout};

#[test]
fn exact_count_matches_the_access_log() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let r = run(&[&ng.url("/"), "-n", "1000", "-c", "10", "-t", "2"]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 1000);
    assert_eq!(log.len(), 1000, "nginx logged exactly the requests we sent");
    assert!(log
        .iter()
        .all(|l| l.status == 200 && l.request == "GET / HTTP/1.1"));
    assert_eq!(r.response.first_body_bytes, Some(615));
    assert!(r
        .response
        .server
        .as_deref()
        .unwrap_or("")
        .starts_with("nginx"));
}

#[test]
fn latency_over_time_adds_up_second_by_second_closed_and_open() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let closed = run(&[&ng.url("/"), "-d", "2500ms", "-c", "8", "-t", "2"]);
    let open = run(&[
        &ng.url("/"),
        "-d",
        "2500ms",
        "--rate",
        "3000",
        "-c",
        "8",
        "-t",
        "2",
    ]);
    let log = ng.stop_and_read_log();
    for r in [&closed, &open] {
        assert_consistent(r);
        assert_eq!(r.latency_step_s, 1);
        // Three seconds begun, each step holding the responses the series counted in it.
        let steps: Vec<(u32, u64)> = r
            .latency_series
            .iter()
            .map(|s| (s.second, s.count))
            .collect();
        let series: Vec<(u32, u64)> = r
            .series
            .iter()
            .filter(|s| s.completed > 0)
            .map(|s| (s.second, s.completed))
            .collect();
        assert_eq!(steps, series);
        assert_eq!(steps.len(), 3, "{steps:?}");
        for s in &r.latency_series {
            let h = s.decode().unwrap();
            assert_eq!(s.p99_us, h.value_at_quantile(0.99));
            assert_eq!(s.max_us, h.max());
            assert!(s.p50_us <= s.p90_us && s.p90_us <= s.p99_us && s.p99_us <= s.p99_9_us);
        }
    }
    // Every response the two runs counted is one nginx logged (at most one per connection in
    // flight at each deadline was logged but not counted).
    let counted = closed.totals.requests + open.totals.requests;
    let logged = log.len() as u64;
    assert!(
        counted <= logged && logged <= counted + 16,
        "{counted} {logged}"
    );
}

#[test]
fn keepalive_and_no_keepalive_seen_from_the_server() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let r = run(&[&ng.url("/"), "-n", "400", "-c", "4"]);
    let log = ng.stop_and_read_log();
    assert_eq!(r.totals.requests, 400);
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(
        conns.len(),
        4,
        "four keep-alive connections served everything"
    );
    assert!(log.iter().map(|l| l.connection_requests).max() > Some(50));

    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let r = run(&[&ng.url("/"), "-n", "200", "-c", "4", "--no-keepalive"]);
    let log = ng.stop_and_read_log();
    assert_eq!(r.totals.requests, 200);
    assert_eq!(log.len(), 200);
    assert!(log.iter().all(|l| l.connection_requests == 1));
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(conns.len(), 200);
}

#[test]
fn keepalive_requests_limit_reconnects_without_errors() {
    // nginx closes a connection after 10 requests (Connection: close on the 10th response).
    let Some(ng) = Nginx::start(NginxConfig {
        server: "keepalive_requests 10;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let r = run(&[&ng.url("/"), "-n", "300", "-c", "3"]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(log.len(), 300);
    assert!(log.iter().all(|l| l.connection_requests <= 10));
    let conns: HashSet<u64> = log.iter().map(|l| l.connection).collect();
    assert_eq!(r.totals.connections_opened, conns.len() as u64);
    assert!(conns.len() >= 30, "at most 10 requests per connection");
}

#[test]
fn chunked_responses_from_nginx() {
    // gzip makes nginx drop Content-Length and chunk the body for HTTP/1.1 clients.
    let Some(ng) = Nginx::start(NginxConfig {
        http: "gzip on; gzip_types text/html; gzip_min_length 0;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let r = run(&[
        &ng.url("/"),
        "-n",
        "300",
        "-c",
        "3",
        "-H",
        "Accept-Encoding: gzip",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(log.len(), 300);
    let body = r.response.first_body_bytes.unwrap();
    assert!(body > 0 && body < 615, "gzipped body of {body} bytes");
    assert_eq!(r.response.body_length_mismatches, 0);
    assert_eq!(
        r.totals.connections_opened, 3,
        "chunked keeps connections open"
    );
}

#[test]
fn close_delimited_responses_from_nginx() {
    // HTTP/1.0 + gzip: no Content-Length, no chunking, the body ends when nginx closes.
    let Some(ng) = Nginx::start(NginxConfig {
        http: "gzip on; gzip_types text/html; gzip_min_length 0; gzip_http_version 1.0;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let r = run(&[
        &ng.url("/"),
        "-n",
        "200",
        "-c",
        "2",
        "--http1.0",
        "-H",
        "Accept-Encoding: gzip",
    ]);
    let log = ng.stop_and_read_log();
    assert_consistent(&r);
    assert_eq!(r.totals.errors, 0);
    assert_eq!(log.len(), 200);
    assert!(log.iter().all(|l| l.request == "GET / HTTP/1.0"));
    assert_eq!(r.totals.connections_opened, 200);
    assert_eq!(r.response.body_length_mismatches, 0);
}

#[test]
fn tls_verified_by_default_and_skipped_with_insecure() {
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let r = run(&[&url, "-n", "100", "-c", "2", "--insecure"]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 100);
    assert!(r.plan.insecure);

    let o = archbench(&["run", &url, "-n", "10", "-c", "2", "-q", "-o", "json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an untrusted certificate fails the run"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["errors"]["tls"], 10);
    assert_eq!(doc["totals"]["requests"], 0);
    // Why, and what to do: counted by reason, said once on stderr.
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "untrusted_certificate",
        "{}",
        doc["tls"]
    );
    assert_eq!(doc["tls"]["failures"][0]["count"], 10);
    let said = stderr(&o);
    assert!(
        said.contains("TLS errors 10: the server's certificate is not signed by a trusted root")
            && said.contains("-k/--insecure skips verification"),
        "{said}"
    );

    let log = ng.stop_and_read_log();
    assert_eq!(log.len(), 100, "only the --insecure run reached nginx");
}

/// A self-signed CA certificate (what `openssl req -x509` makes by default) as the server's
/// own: named as such with what works (it was "was refused … CaUsedAsEndEntity"), and the
/// handshakes under way at the end are neither requests sent nor bytes written (it said
/// "2 sent and still unanswered", 166 B written, and nginx saw none).
#[test]
fn a_ca_certificate_served_as_the_servers_own_is_named_with_what_works() {
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        ca_certificate: true,
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let o = archbench(&["run", &url, "-d", "1s", "-c", "2", "-q", "-o", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "ca_as_server_certificate",
        "{}",
        doc["tls"]
    );
    assert_eq!(doc["totals"]["unanswered_at_end"], 0, "{}", doc["totals"]);
    assert_eq!(doc["totals"]["bytes_written"], 0, "{}", doc["totals"]);
    let said = stderr(&o);
    assert!(
        said.contains("the server's certificate is a CA certificate")
            && said.contains("--pinned-cert FILE accepts it"),
        "{said}"
    );
    let cert = ng.file("cert.pem");
    let r = run(&[
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "--pinned-cert",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(r.totals.requests, 20);
    let log = ng.stop_and_read_log();
    assert_eq!(log.len(), 20, "only the pinned run reached nginx");
}

#[test]
fn a_pinned_certificate_is_the_one_accepted_and_any_other_refused() {
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let cert = ng.file("cert.pem");
    let cert = cert.to_str().unwrap();
    // Self-signed, and named 127.0.0.1: verified by being exactly the pinned certificate.
    let r = run(&[&url, "-n", "60", "-c", "2", "--pinned-cert", cert]);
    assert_consistent(&r);
    assert_eq!(r.totals.requests, 60);
    assert_eq!(r.plan.pinned_cert.as_deref(), Some(cert));
    assert!(!r.plan.insecure);
    let o = archbench(&["run", &url, "-n", "5", "-c", "1", "--pinned-cert", cert]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!("TLS pinned to the certificate of {cert}")),
        "{text}"
    );

    // Another certificate, of the same name: refused, by its own reason.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.pem");
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    std::fs::write(&other, ck.cert.pem()).unwrap();
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "8",
        "-c",
        "2",
        "-q",
        "-o",
        "json",
        "--pinned-cert",
        other.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["errors"]["tls"], 8, "{}", doc["errors"]);
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "not_pinned",
        "{}",
        doc["tls"]
    );
    assert!(
        stderr(&o).contains("another certificate than the one --pinned-cert names"),
        "{}",
        stderr(&o)
    );

    // Not a certificate, no file, or beside --insecure: one line, exit 2, nothing sent.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    for (args, says) in [
        (
            vec!["--pinned-cert", junk.to_str().unwrap()],
            "no PEM certificate",
        ),
        (
            vec!["--pinned-cert", "/nonexistent/cert.pem"],
            "/nonexistent/cert.pem",
        ),
        (vec!["--pinned-cert", cert, "-k"], "cannot be used with"),
    ] {
        let mut all = vec!["run", url.as_str(), "-n", "1", "-c", "1"];
        all.extend(args);
        let o = archbench(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{all:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    let log = ng.stop_and_read_log();
    assert_eq!(log.len(), 65, "only the pinned runs reached nginx");
}

#[test]
fn tls_sessions_resumed_are_counted_and_off_or_under_ab_none_is() {
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        http: "ssl_session_cache shared:SSL:1m; ssl_session_tickets on;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let doc = |args: &[&str]| -> serde_json::Value {
        let o = archbench(args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    // A new connection per request: 100 handshakes, resumed by default (and said so).
    let on = doc(&[
        "run",
        &url,
        "-n",
        "100",
        "-c",
        "2",
        "-k",
        "--no-keepalive",
        "-q",
        "-o",
        "json",
    ]);
    let off = doc(&[
        "run",
        &url,
        "-n",
        "100",
        "-c",
        "2",
        "-k",
        "--no-keepalive",
        "--tls-resume",
        "off",
        "-q",
        "-o",
        "json",
    ]);
    let o = archbench(&["ab", "-n", "100", "-c", "2", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = ng.stop_and_read_log();
    assert_eq!(log.len(), 300);
    let reused = |part: &[crate::util::nginx::LogLine]| {
        part.iter().filter(|l| l.session_reused).count() as u64
    };
    let (log_on, rest) = log.split_at(100);
    let (log_off, log_ab) = rest.split_at(100);
    let t = &on["tls"];
    assert_eq!(
        t["full_handshakes"].as_u64().unwrap() + t["resumed_handshakes"].as_u64().unwrap(),
        100,
        "{t}"
    );
    assert!(t["resumed_handshakes"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(
        t["resumed_handshakes"].as_u64().unwrap(),
        reused(log_on),
        "nginx agrees"
    );
    assert!(t["version"].as_str().unwrap().starts_with("TLSv1."), "{t}");
    // Every handshake timed (TCP connected to TLS established), merged exactly, and its rate.
    assert_eq!(t["handshake"]["count"], 100, "{t}");
    assert!(t["handshake"]["p50_us"].as_u64().unwrap() > 0, "{t}");
    assert!(t["handshakes_per_s"].as_f64().unwrap() > 0.0, "{t}");
    assert!(on["histograms"]["tls_handshake"].is_string());
    crate::util::schema::assert_valid(&on);
    crate::util::schema::assert_valid(&off);
    // The text report says it beside the errors.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("on.json");
    std::fs::write(&file, on.to_string()).unwrap();
    let text = stdout(&archbench(&["report", file.to_str().unwrap()]));
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("TLS "))
        .unwrap_or_else(|| panic!("no TLS line in:\n{text}"));
    assert!(
        line.contains(&format!(
            "{} resumed (--tls-resume off",
            t["resumed_handshakes"]
        )),
        "{line}"
    );
    assert_eq!(on["plan"]["tls_resume"], true);
    // Off, and ab's front end: a full handshake every time, as nginx saw.
    assert_eq!(off["tls"]["resumed_handshakes"], 0, "{}", off["tls"]);
    assert_eq!(off["tls"]["full_handshakes"], 100);
    assert_eq!(off["plan"]["tls_resume"], false);
    assert_eq!(reused(log_off), 0);
    assert_eq!(reused(log_ab), 0);
}

#[test]
fn a_tls_version_is_held_to_and_one_the_server_lacks_says_why() {
    let Some(ng) = Nginx::start(NginxConfig {
        tls: true,
        server: "ssl_protocols TLSv1.2;",
        ..NginxConfig::default()
    }) else {
        return;
    };
    let url = ng.https_url("/");
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "-k",
        "--tls-version",
        "1.2",
        "-q",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["tls"]["version"], "TLSv1.2", "{}", doc["tls"]);
    assert_eq!(doc["plan"]["tls_version"], "1.2");
    // A cipher and a group asked for are the ones negotiated.
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "-k",
        "--tls-ciphers",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "--tls-groups",
        "p-256",
        "-q",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        doc["tls"]["cipher"], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "{}",
        doc["tls"]
    );
    assert_eq!(doc["tls"]["group"], "secp256r1", "{}", doc["tls"]);
    assert_eq!(doc["plan"]["tls_groups"][0], "secp256r1");
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "-k",
        "--tls-version",
        "1.3",
        "-q",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["errors"]["tls"], 20);
    // nginx answers a version it does not speak with a protocol_version alert.
    assert_eq!(
        doc["tls"]["failures"][0]["reason"], "nothing_in_common",
        "{}",
        doc["tls"]
    );
    assert!(stderr(&o).contains("TLS errors 20: "), "{}", stderr(&o));
    assert_eq!(
        ng.stop_and_read_log().len(),
        40,
        "only the two 1.2 runs were answered"
    );
}

#[test]
fn a_handshake_bound_comparison_reports_handshakes_per_second_and_per_server_cpu_second() {
    let start = || {
        Nginx::start(NginxConfig {
            tls: true,
            ..NginxConfig::default()
        })
    };
    let (Some(a), Some(b)) = (start(), start()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cmp.json");
    let (ta, tb) = (
        format!("a={}", a.https_url("/")),
        format!("b={}", b.https_url("/")),
    );
    let (wa, wb) = (format!("a=pid:{}", a.pid()), format!("b=pid:{}", b.pid()));
    let o = archbench(&[
        "compare",
        &ta,
        &tb,
        "-k",
        "--no-keepalive",
        "--tls-resume",
        "off",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "500ms",
        "--runs",
        "2",
        "--no-warmup",
        "-q",
        "--watch",
        &wa,
        "--watch",
        &wb,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    crate::util::schema::assert_valid(&doc);
    let metric = |name: &str| {
        doc["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == name)
            .unwrap_or_else(|| panic!("no {name} in {}", doc["metrics"]))
            .clone()
    };
    for name in [
        "TLS handshakes/s",
        "TLS handshake p50",
        "handshakes/server CPU-s",
    ] {
        let m = metric(name);
        for t in m["targets"].as_array().unwrap() {
            assert!(t["median"].as_f64().unwrap() > 0.0, "{name}: {t}");
        }
    }
    // One full handshake per request: the rate is the request rate (a connection or two may
    // have shaken hands for a response the deadline cut off).
    let run = &doc["targets"][0]["runs"][0];
    assert_eq!(run["tls"]["resumed_handshakes"], 0);
    let full = run["tls"]["full_handshakes"].as_u64().unwrap();
    let answered = run["totals"]["requests"].as_u64().unwrap();
    assert!(
        (answered..=answered + 2).contains(&full),
        "{full} handshakes, {answered} answered"
    );
    let table = stdout(&o);
    assert!(table.contains("TLS handshakes/s"), "{table}");
}

#[test]
fn ab_front_end_speaks_http10_without_keepalive_unless_k() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let url = ng.url("/");
    let o = archbench(&["ab", "-n", "200", "-c", "4", &url]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains("Complete requests:      200\n"), "{text}");
    assert!(text.contains("Failed requests:        0\n"));
    assert!(text.contains("Document Length:        615 bytes\n"));
    let o = archbench(&["ab", "-k", "-n", "200", "-c", "4", &url]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("Keep-Alive requests:    200\n"),
        "{}",
        stdout(&o)
    );
    let log = ng.stop_and_read_log();
    assert_eq!(log.len(), 400);
    assert!(log.iter().all(|l| l.request == "GET / HTTP/1.0"));
    let (plain, kept) = log.split_at(200);
    assert!(plain.iter().all(|l| l.connection_requests == 1));
    assert!(kept.iter().any(|l| l.connection_requests > 1));
}

#[test]
fn wrk_front_end_counts_what_nginx_logged() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let o = archbench(&["wrk", "-t2", "-c4", "-d1s", &ng.url("/")]);
    assert!(o.status.success());
    let text = stdout(&o);
    let log = ng.stop_and_read_log();
    let line = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .expect("a requests line");
    let reported: usize = line.split_whitespace().next().unwrap().parse().unwrap();
    // In-flight requests at the deadline were answered by nginx but not counted by us.
    assert!(
        log.len() >= reported && log.len() <= reported + 4,
        "reported {reported}, nginx logged {}",
        log.len()
    );
}

#[test]
fn invoked_as_wrk_or_ab_through_a_symlink() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for name in ["wrk", "ab"] {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_archbench"), dir.path().join(name)).unwrap();
    }
    let url = ng.url("/");
    let wrk = std::process::Command::new(dir.path().join("wrk"))
        .args(["-t1", "-c2", "-d1s", &url])
        .output()
        .unwrap();
    assert!(wrk.status.success());
    assert!(
        stdout(&wrk).starts_with("Running 1s test @ "),
        "{}",
        stdout(&wrk)
    );
    assert!(stdout(&wrk).contains("Requests/sec:"));
    let ab = std::process::Command::new(dir.path().join("ab"))
        .args(["-n", "50", "-c", "2", &url])
        .output()
        .unwrap();
    assert!(ab.status.success());
    assert!(
        stdout(&ab).contains("Complete requests:      50\n"),
        "{}",
        stdout(&ab)
    );
}

/// Each front end answers its tool's version flag with a line that begins as the tool's does
/// (what a script reads), then says what answers; ab's `-v 1` (its default level) runs.
#[test]
fn each_front_end_answers_its_version_flag_as_its_tool_begins() {
    for (tool, flag, words) in [
        ("wrk", "--version", 1),
        ("ab", "-V", 5),
        ("h2load", "--version", 1),
    ] {
        let Some(real) = crate::util::require_tool(tool) else {
            continue;
        };
        let (real, ours) = crate::util::real_and_ours(&real, tool, &[flag]);
        assert_eq!(
            ours.status.code(),
            Some(0),
            "{tool} {flag}: {}",
            stderr(&ours)
        );
        let first = |text: String| -> String {
            let line = text.lines().next().unwrap_or_default().to_string();
            line.split_whitespace()
                .take(words)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(first(stdout(&ours)), first(stdout(&real)), "{tool} {flag}");
        assert!(stdout(&ours).contains("archbench"), "{}", stdout(&ours));
    }
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let ab = archbench(&["ab", "-v", "1", "-n", "3", &ng.url("/")]);
    assert!(
        stdout(&ab).contains("Complete requests:      3\n"),
        "{}",
        stdout(&ab)
    );
    assert_eq!(ng.stop_and_read_log().len(), 3);
}

#[test]
fn watch_reports_the_servers_cpu_and_requests_per_cpu_second() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let watch = format!("web=pid:{}", ng.pid());
    let o = archbench(&[
        "run",
        &ng.url("/"),
        // Enough that nginx's CPU is above what /proc's 10 ms ticks resolve for a ratio
        // (MEASURABLE_CPU_S, 20 ms): 3,000 requests once took a single tick.
        "-n",
        "30000",
        "-c",
        "4",
        "-q",
        "--watch",
        &watch,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", crate::util::stderr(&o));
    let doc = read_json(&json);
    let server = &doc["servers"][0];
    assert_eq!(server["label"], "web");
    let cpu = server["cpu_s"].as_f64().unwrap();
    assert!(
        cpu > 0.0,
        "nginx used CPU to answer 30000 requests: {server}"
    );
    let per_cpu = server["requests_per_cpu_s"].as_f64().unwrap();
    assert!((per_cpu - 30000.0 / cpu).abs() < 1e-6 * per_cpu);
    assert!(server["peak_memory_bytes"].as_u64().unwrap() > 1 << 20);
    assert!(doc["client"]["cpu_s"].as_f64().unwrap() > 0.0);
    assert!(
        stdout(&o).contains("Server     web (pid:"),
        "{}",
        stdout(&o)
    );
    ng.stop_and_read_log();
}

/// Answers outside 2xx/3xx are answers (counted as requests, as nginx logged them) but not
/// the page: every report says when they are more than 1%, and the comparison has a row.
#[test]
fn error_answers_are_said_in_every_report() {
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("missing.json");
    let o = archbench(&[
        "run",
        &ng.url("/missing"),
        "-n",
        "200",
        "-c",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", crate::util::stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("WARNING    200 of 200 answers (100.0%) were not 2xx/3xx (404: 200): the figures describe error responses"),
        "{text}"
    );
    assert!(
        crate::util::stderr(&o)
            .contains("archbench: warning: 200 of 200 answers (100.0%) were not 2xx/3xx"),
        "{}",
        crate::util::stderr(&o)
    );
    let r = read_json(&json);
    assert_eq!(r["totals"]["requests"], 200);
    assert_eq!(r["totals"]["non_2xx_3xx"], 200);
    assert!(
        r["limiter"]["reason"]
            .as_str()
            .unwrap()
            .ends_with("the figures describe error responses"),
        "{}",
        r["limiter"]
    );
    // Side by side with the page itself.
    let cmp = dir.path().join("compare.json");
    let o = archbench(&[
        "compare",
        &format!("good={}", ng.url("/")),
        &format!("bad={}", ng.url("/missing")),
        "--runs",
        "1",
        "--no-warmup",
        "-d",
        "500ms",
        "-c",
        "1",
        "--json",
        cmp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", crate::util::stderr(&o));
    let doc = read_json(&cmp);
    let requests = |i: usize| {
        doc["targets"][i]["runs"][0]["totals"]["requests"]
            .as_u64()
            .unwrap()
    };
    let (good, bad) = (requests(0), requests(1));
    assert!(good > 0 && bad > 0);
    let text = stdout(&o);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("non-2xx/3xx answers"))
        .unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // As the table groups thousands: 12,345.
    let digits = bad.to_string();
    let grouped: String = digits
        .chars()
        .enumerate()
        .flat_map(|(i, ch)| {
            let comma = i > 0 && (digits.len() - i) % 3 == 0;
            comma.then_some(',').into_iter().chain(std::iter::once(ch))
        })
        .collect();
    assert!(
        cells.contains(&"0") && cells.contains(&grouped.as_str()),
        "{row}"
    );
    assert!(
        text.contains(&format!(
            "WARNING (bad): {bad} of {bad} answers (100.0%) were not 2xx/3xx (404: {bad})"
        )),
        "{text}"
    );
    assert!(!text.contains("WARNING (good)"), "{text}");
    assert!(
        crate::util::stderr(&o)
            .contains(&format!("archbench: warning (bad): {bad} of {bad} answers")),
        "{}",
        crate::util::stderr(&o)
    );
    // nginx answered every one (and at most one more per connection in flight at the end).
    let log = ng.stop_and_read_log();
    let missing = log.iter().filter(|l| l.status == 404).count() as u64;
    assert!(
        (200 + bad..=200 + bad + 1).contains(&missing),
        "{missing} vs {bad}"
    );
    let pages = log.iter().filter(|l| l.status == 200).count() as u64;
    assert!((good..=good + 1).contains(&pages), "{pages} vs {good}");
}
