//! The fault matrix: a misbehaving server per case. For each: the run ends on time, the right
//! error kind is counted, answered + failed = attempted, and the text, wrk and ab layouts show
//! the same counts as the JSON their run wrote.

use serde_json::Value;

use crate::util::faulty::{Fault, FaultyServer};
use crate::util::{archbench, read_json, stderr, stdout};

/// What a case must produce: every request failing with this kind, or every one answered.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Fails(&'static str),
    Answered,
}

const MATRIX: [(Fault, Expect); 16] = [
    (Fault::Refused, Expect::Fails("connect")),
    (Fault::CloseAfterThree, Expect::Answered),
    (Fault::AcceptThenClose, Expect::Fails("read")),
    (Fault::ResetInHead, Expect::Fails("read")),
    (Fault::ResetInBody, Expect::Fails("read")),
    (Fault::NeverAnswer, Expect::Fails("timeout")),
    (Fault::Trickle, Expect::Fails("timeout")),
    (Fault::MalformedStatus, Expect::Fails("protocol")),
    (Fault::HugeHeaders, Expect::Fails("protocol")),
    (Fault::BadChunkSize, Expect::Fails("protocol")),
    (Fault::ShortBodyThenClose, Expect::Fails("read")),
    (Fault::InterimThenOk, Expect::Answered),
    (Fault::NoContent, Expect::Answered),
    (Fault::NotModified, Expect::Answered),
    (Fault::NotTls, Expect::Fails("tls")),
    (Fault::UnusualStatus, Expect::Answered),
];

/// A status outside 100–599 is counted as the server sent it (999 was counted as 0).
#[test]
fn an_unusual_status_is_counted_as_sent() {
    let server = FaultyServer::start(Fault::UnusualStatus);
    let doc = crate::util::run_json(&server.url(), 4);
    assert_eq!(
        doc["status_codes"],
        serde_json::json!({"999": 4}),
        "{}",
        doc["status_codes"]
    );
    let o = archbench(&["run", &server.url(), "-n", "4", "-c", "1", "-t", "1"]);
    assert!(stdout(&o).contains("Status     999: 4"), "{}", stdout(&o));
}

const KINDS: [&str; 6] = ["connect", "tls", "timeout", "read", "write", "protocol"];

fn count(doc: &Value, group: &str, key: &str) -> u64 {
    doc[group][key].as_u64().unwrap()
}

/// Numbers after `label` in `text`, in order.
fn numbers_after(text: &str, label: &str) -> Vec<u64> {
    let line = text
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"));
    line[line.find(label).unwrap() + label.len()..]
        .split(|c: char| !c.is_ascii_digit() && c != ',')
        .filter(|t| !t.is_empty() && t.chars().any(|c| c.is_ascii_digit()))
        .map(|t| t.replace(',', "").parse().unwrap())
        .collect()
}

fn url_for(server: &FaultyServer, fault: Fault) -> String {
    if fault == Fault::NotTls {
        server.https_url()
    } else {
        server.url()
    }
}

#[test]
fn fault_matrix_native_run() {
    for (fault, expect) in MATRIX {
        let server = FaultyServer::start(fault);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let url = url_for(&server, fault);
        let o = archbench(&[
            "run",
            &url,
            "-n",
            "4",
            "-c",
            "2",
            "--timeout",
            "300ms",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ]);
        let doc = read_json(&json);
        let text = stdout(&o);
        let (answered, failed) = (
            count(&doc, "totals", "requests"),
            count(&doc, "totals", "errors"),
        );
        assert_eq!(answered + failed, 4, "{fault:?}: attempted exactly -n");
        assert_eq!(count(&doc, "totals", "attempted"), 4, "{fault:?}");
        if matches!(fault, Fault::NotTls | Fault::Refused) {
            // No request left: a failed handshake never sends what TLS held.
            assert_eq!(count(&doc, "totals", "bytes_written"), 0, "{fault:?}");
        }
        match expect {
            Expect::Fails(kind) => {
                assert_eq!(
                    count(&doc, "errors", kind),
                    4,
                    "{fault:?}: {}",
                    doc["errors"]
                );
                assert_eq!(
                    o.status.code(),
                    Some(1),
                    "{fault:?}: nothing answered is a failure"
                );
                assert!(stderr(&o).contains("no request was answered"), "{fault:?}");
            }
            Expect::Answered => {
                assert_eq!(answered, 4, "{fault:?}: {}", doc["errors"]);
                assert_eq!(o.status.code(), Some(0), "{fault:?}");
            }
        }
        // The text report shows the JSON's counts.
        let errors_line = numbers_after(&text, "Errors");
        assert_eq!(errors_line[0], failed, "{fault:?}: {text}");
        for kind in KINDS {
            let n = count(&doc, "errors", kind);
            if n > 0 {
                assert!(text.contains(&format!("{kind} {n}")), "{fault:?}: {text}");
            }
        }
        assert_eq!(numbers_after(&text, "Requests")[0], answered, "{fault:?}");
        // Four attempts of at most 300 ms on two connections.
        let elapsed = doc["totals"]["elapsed_s"].as_f64().unwrap();
        assert!(elapsed < 2.0, "{fault:?} took {elapsed}s");
    }
}

#[test]
fn fault_matrix_ab_layout() {
    for (fault, expect) in MATRIX {
        let server = FaultyServer::start(fault);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let url = url_for(&server, fault);
        let o = archbench(&[
            "ab",
            "-n",
            "4",
            "-c",
            "2",
            "-s",
            "0.3",
            "--json",
            json.to_str().unwrap(),
            &url,
        ]);
        let doc = read_json(&json);
        let text = stdout(&o);
        let e = |k| count(&doc, "errors", k);
        let answered = count(&doc, "totals", "requests");
        // ab's -s fails no request: a server that never stirs for 0.3 s ends the run in ab's
        // words, no report; one that trickles its answers (a byte each 100 ms) is waited for.
        match fault {
            Fault::NeverAnswer => {
                assert_eq!(o.status.code(), Some(1), "{fault:?}");
                assert!(
                    stderr(&o).contains("apr_pollset_poll: The timeout specified has expired"),
                    "{fault:?}: {}",
                    stderr(&o)
                );
                assert!(!text.contains("Complete requests:"), "{fault:?}: {text}");
                assert_eq!(answered + count(&doc, "totals", "errors"), 0, "{fault:?}");
                continue;
            }
            Fault::Trickle => {
                assert_eq!(o.status.code(), Some(0), "{fault:?}: {}", stderr(&o));
                assert_eq!(numbers_after(&text, "Complete requests:")[0], 4, "{text}");
                assert_eq!(numbers_after(&text, "Failed requests:")[0], 0, "{text}");
                continue;
            }
            _ => {}
        }
        assert_eq!(answered + count(&doc, "totals", "errors"), 4, "{fault:?}");
        assert_eq!(
            numbers_after(&text, "Complete requests:")[0],
            answered,
            "{fault:?}"
        );
        let failed = numbers_after(&text, "Failed requests:")[0];
        match expect {
            Expect::Fails(_) => {
                assert_eq!(failed, 4, "{fault:?}: {text}");
                // ab's breakdown: Connect, Receive, Length, Exceptions.
                let parts = numbers_after(&text, "(Connect:");
                assert_eq!(
                    parts,
                    vec![
                        e("connect") + e("tls"),
                        e("read") + e("timeout"),
                        0,
                        e("protocol") + e("write")
                    ],
                    "{fault:?}: {text}"
                );
            }
            Expect::Answered => assert_eq!(failed, 0, "{fault:?}: {text}"),
        }
    }
}

#[test]
fn fault_matrix_wrk_layout() {
    for (fault, expect) in MATRIX {
        let server = FaultyServer::start(fault);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let url = url_for(&server, fault);
        let o = archbench(&[
            "wrk",
            "-t1",
            "-c2",
            "-d1s",
            "-T1",
            "--json",
            json.to_str().unwrap(),
            &url,
        ]);
        if matches!(fault, Fault::Refused) {
            // wrk connects once before its run and refuses to start when it cannot, in its
            // words, with no report (archbench ran the whole second and printed zeros).
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert_eq!(stderr(&o), crate::util::wrk_refused(&url) + "\n");
            assert_eq!(stdout(&o), "");
            continue;
        }
        // As `run`: nothing answered is a failure, said on stderr (wrk's layout prints zeros).
        let failed = matches!(expect, Expect::Fails(_));
        assert_eq!(
            o.status.code(),
            Some(if failed { 1 } else { 0 }),
            "{fault:?}: {}",
            stderr(&o)
        );
        assert_eq!(
            stderr(&o).contains("no request was answered"),
            failed,
            "{fault:?}: {}",
            stderr(&o)
        );
        let doc = read_json(&json);
        let text = stdout(&o);
        let e = |k| count(&doc, "errors", k);
        let answered = count(&doc, "totals", "requests");
        let requests_line = text.lines().find(|l| l.contains(" requests in ")).unwrap();
        let reported: u64 = requests_line
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(reported, answered, "{fault:?}");
        match expect {
            // wrk's -T abandons nothing: what is not answered is still waited for at the end,
            // no error of any kind, and wrk's layout has no Socket errors line then.
            Expect::Fails("timeout") => {
                assert_eq!(answered, 0, "{fault:?}");
                assert!(!text.contains("Socket errors"), "{fault:?}: {text}");
                // No answer, no sample: wrk's shares within one sd are 0/0, "-nan%" (a
                // silent server's wrk output, byte for byte).
                assert_eq!(text.matches("    -nan%\n").count(), 2, "{fault:?}: {text}");
                assert_eq!(count(&doc, "totals", "errors"), 0, "{fault:?}");
                assert!(count(&doc, "totals", "unanswered_at_end") > 0, "{fault:?}");
            }
            Expect::Fails(_) => {
                assert_eq!(answered, 0, "{fault:?}");
                let socket = numbers_after(&text, "Socket errors:");
                assert_eq!(
                    socket,
                    vec![
                        e("connect") + e("tls"),
                        e("read") + e("protocol"),
                        e("write"),
                        e("timeout")
                    ],
                    "{fault:?}: {text}"
                );
                assert!(socket.iter().sum::<u64>() > 0);
            }
            Expect::Answered => {
                assert!(answered > 0, "{fault:?}");
                assert!(!text.contains("Socket errors"), "{fault:?}: {text}");
            }
        }
        let elapsed = doc["totals"]["elapsed_s"].as_f64().unwrap();
        assert!(elapsed < 1.5, "{fault:?}: a 1 s run took {elapsed}s");
    }
}

/// A name that cannot be resolved, looked up where no query can leave this machine: in a
/// network namespace of the run's own, which has only a loopback that is down, so the
/// resolver's address is unreachable and the lookup fails at once (asked through the
/// machine's resolver, the query would go out the default route).
#[test]
fn unresolvable_host_is_one_clear_line() {
    if !crate::util::network_namespace() {
        return;
    }
    // A name service behind a Unix socket would answer from the machine's own namespace.
    for socket in [
        "/var/run/nscd/socket",
        "/run/systemd/resolve/io.systemd.Resolve",
    ] {
        assert!(
            !std::path::Path::new(socket).exists(),
            "{socket}: lookups would leave the test's namespace through it"
        );
    }
    for args in [
        vec!["run", "http://nonexistent.invalid/", "-n", "1", "-c", "1"],
        vec!["wrk", "-d1s", "http://nonexistent.invalid/"],
        vec!["ab", "-n", "1", "http://nonexistent.invalid/"],
    ] {
        let child = std::process::Command::new("unshare")
            .arg("-n")
            .arg(env!("CARGO_BIN_EXE_archbench"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let o = crate::util::finish_within(child, crate::util::PROMPTLY);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        // The resolver's own reason, between what failed and what to do.
        let (_, reason) = err
            .split_once("cannot resolve host \"nonexistent.invalid\": failed to lookup address information: ")
            .unwrap_or_else(|| panic!("{args:?}: {err}"));
        let (reason, advice) = reason.split_once("; ").unwrap_or((reason, ""));
        assert!(!reason.trim().is_empty(), "{err}");
        assert_eq!(
            advice.trim(),
            "check the name or use an IP address",
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
