//! wrk's Lua scripts under `archbench wrk -s`: the scripts in tests/scripts (each one using a
//! part of wrk's API) run by the real wrk and by archbench against the same nginx, which logs
//! what it received; the requests it saw and what done() printed must be the same.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench_within, read_json, require_tool, stderr, stdout};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts");
/// What the test's nginx logs of each request: method, path, the request's whole length
/// (line, headers and body), and the headers the scripts set.
const LOG: &str = r#"log_format script '$request_method $uri $request_length "$http_content_type" "$http_x_thread" "$http_authorization"';
  access_log {dir}/script.log script;"#;
const LOCATIONS: &str = r#"location /s/ { add_header X-Token t0k3n; return 200 "ok\n"; }"#;
const RUN_LIMIT: Duration = Duration::from_secs(30);

fn nginx() -> Option<Nginx> {
    Nginx::start(NginxConfig {
        http: LOG,
        server: LOCATIONS,
        ..NginxConfig::default()
    })
}

/// One run of `tool` (the real wrk, or None: archbench wrk) with `script` against a fresh
/// nginx: its output, and the lines nginx logged.
struct Ran {
    out: Output,
    log: Vec<String>,
}

impl Ran {
    fn stdout(&self) -> String {
        stdout(&self.out)
    }

    /// The log's distinct lines, digits masked.
    fn kinds(&self) -> BTreeSet<String> {
        self.log.iter().map(|l| mask(l)).collect()
    }

    fn count(&self, needle: &str) -> usize {
        self.log.iter().filter(|l| l.contains(needle)).count()
    }
}

fn mask(line: &str) -> String {
    let mut out = String::new();
    let mut digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('#');
            }
            digits = true;
        } else {
            out.push(c);
            digits = false;
        }
    }
    out
}

fn run(wrk: Option<&std::path::Path>, script: &str, extra: &[&str]) -> Option<Ran> {
    let ng = nginx()?;
    let url = ng.url("/s/");
    let path = format!("{SCRIPTS}/{script}.lua");
    let mut args = vec!["-t2", "-c4", "-d1s", "-s", &path];
    args.extend_from_slice(extra);
    args.push(&url);
    let out = match wrk {
        Some(w) => {
            let child = std::process::Command::new(w)
                .args(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("wrk runs");
            crate::util::finish_within(child, RUN_LIMIT)
        }
        None => archbench_within(&[&["wrk"][..], &args].concat(), RUN_LIMIT),
    };
    let log = ng
        .stop_and_read("script.log")
        .lines()
        .map(str::to_string)
        .collect();
    Some(Ran { out, log })
}

/// What a script printed: before wrk's first line (setup, init) and after its last.
fn script_output(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let before = lines.iter().take_while(|l| !l.starts_with("Running "));
    let after = lines
        .iter()
        .skip_while(|l| !l.starts_with("Transfer/sec:"))
        .skip(1);
    before.chain(after).map(|l| mask(l)).collect()
}

/// Both tools on one script: the same kinds of request reach nginx and the script prints
/// the same lines. Returns (wrk's run, ours).
fn both(script: &str) -> Option<(Ran, Ran)> {
    let wrk = require_tool("wrk")?;
    let theirs = run(Some(&wrk), script, &[])?;
    let ours = run(None, script, &[])?;
    assert!(theirs.out.status.success(), "wrk: {}", stderr(&theirs.out));
    assert!(ours.out.status.success(), "{script}: {}", stderr(&ours.out));
    assert!(!ours.log.is_empty() && !theirs.log.is_empty(), "{script}");
    assert_eq!(ours.kinds(), theirs.kinds(), "{script}: requests nginx saw");
    assert_eq!(
        script_output(&ours.stdout()),
        script_output(&theirs.stdout()),
        "{script}: what the script printed"
    );
    Some((theirs, ours))
}

#[test]
fn a_static_script_sends_wrks_request() {
    let Some((_, ours)) = both("post") else {
        return;
    };
    assert!(ours.log[0].starts_with("POST /s/ "), "{:?}", ours.log[0]);
}

#[test]
fn request_is_called_for_every_request() {
    let Some((theirs, ours)) = both("counter") else {
        return;
    };
    // Each thread counts in its own state; the first thread's first request() call is
    // spent, as wrk spends it, on checking what the script returns.
    for ran in [&theirs, &ours] {
        assert_eq!(ran.count("/s/n1 "), 1, "{:?}", &ran.log[..4]);
        assert_eq!(ran.count("/s/n2 "), 2);
        assert_eq!(ran.count("/s/n3 "), 2);
    }
}

#[test]
fn response_sees_headers_and_request_uses_them() {
    let Some((_, ours)) = both("auth") else {
        return;
    };
    let private = ours.count("/s/private ");
    assert!(private > 10, "{private}");
    assert!(ours
        .log
        .iter()
        .filter(|l| l.contains("/s/private "))
        .all(|l| l.ends_with("\"Bearer t0k3n\"")));
    // Until a connection's first answer comes back, its thread logs in (4 connections).
    assert!(ours.count("/s/login ") <= 4, "{}", ours.count("/s/login "));
}

#[test]
fn pipelined_requests_each_get_their_response() {
    let Some((_, ours)) = both("pipeline") else {
        return;
    };
    let (one, two, three) = (
        ours.count("/s/one "),
        ours.count("/s/two "),
        ours.count("/s/three "),
    );
    assert!(one > 100, "{one}");
    // A batch is cut off by the end of the run (one per connection), and where nginx closes
    // a connection after its 1,000th request (keepalive_requests): the rest of that batch
    // is not answered, and the connection reconnects without an error.
    let cut = 4 + ours.log.len() / 1000 + 4;
    assert!(
        one >= two && two >= three && one - three <= cut,
        "{one} {two} {three}"
    );
    assert!(
        !ours.stdout().contains("Socket errors"),
        "{}",
        ours.stdout()
    );
    let r = ours.stdout();
    let reported: u64 = r
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .map(|(n, _)| n.to_string())
        })
        .and_then(|n| n.parse().ok())
        .expect("a requests line");
    // Every response counts (wrk counts them all as requests).
    assert!(
        reported.abs_diff(ours.log.len() as u64) <= 12,
        "{reported} {}",
        ours.log.len()
    );
}

#[test]
fn setup_threads_and_done_see_each_threads_state() {
    let Some((_, ours)) = both("setup") else {
        return;
    };
    let text = ours.stdout();
    let mut answered = 0;
    for id in [1, 2] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("thread {id}: ")))
            .expect("done() printed the thread's line");
        let n: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        // Unanswered at the end: one in flight per connection (two), and the first
        // thread's first request() call, which checks the request and is not sent.
        assert!(n[1] >= n[2] && n[1] - n[2] <= 3, "{line}");
        answered += n[2];
        assert!(ours.count(&format!("\"t{id}\"")) > 10);
    }
    assert!(answered.abs_diff(ours.log.len() as u64) <= 4, "{answered}");
}

#[test]
fn delay_spaces_the_requests() {
    let Some((_, ours)) = both("delay") else {
        return;
    };
    // 4 connections, 20 ms before each request, one second: at most 50 each.
    let n = ours.log.len();
    assert!((100..=4 * 51).contains(&n), "{n}");
}

#[test]
fn done_gets_the_summary_and_statistics() {
    let Some((_, ours)) = both("report") else {
        return;
    };
    let text = ours.stdout();
    let requests: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("requests "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("done() printed the summary");
    // Counted against nginx: requests sent at the end may be logged yet unanswered.
    assert!(
        requests <= ours.log.len() && ours.log.len() - requests <= 4,
        "{requests} {}",
        ours.log.len()
    );
    assert!(text.contains("errors 0 0 0 0 0"), "{text}");
}

#[test]
fn a_thread_stops_itself() {
    let Some((theirs, ours)) = both("stop") else {
        return;
    };
    for ran in [&theirs, &ours] {
        // Two threads of two connections, each stopping after its 40th answer.
        let n = ran.log.len();
        assert!((80..=84).contains(&n), "{n}");
    }
}

#[test]
fn setup_chooses_each_threads_address() {
    let Some((_, ours)) = both("addr") else {
        return;
    };
    let text = ours.stdout();
    assert_eq!(text.matches("thread to 127.0.0.1:").count(), 2, "{text}");
}

/// A script that does not load or fails before the load: one line with file:line, exit 2,
/// nothing sent; one that fails during the load: the load stops, what was measured is
/// reported and saved, exit 1.
#[test]
fn script_errors_are_one_line_with_their_place() {
    let Some(ng) = nginx() else { return };
    let url = ng.url("/s/");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let syntax = write("syntax.lua", "wrk.method = \"POST\"\nlocal x = = 1\n");
    let init = write(
        "init.lua",
        "function init(args)\n  error(\"no config in \" .. args[1])\nend\n",
    );
    for (script, expected) in [
        (&syntax, format!("{syntax}:2: unexpected symbol near '='")),
        (&init, format!("{init}:2: no config in prod")),
    ] {
        let o = archbench_within(
            &[
                "wrk", "-t1", "-c1", "-d1s", "-s", script, &url, "--", "prod",
            ],
            RUN_LIMIT,
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim(), format!("archbench: {expected}"));
        assert_eq!(stdout(&o), "", "nothing printed before the load");
    }
    let failing = write(
        "late.lua",
        "local n = 0\nfunction request()\n  n = n + 1\n  if n > 50 then\n    return wrk.nope(n)\n  end\n  return wrk.request()\nend\n",
    );
    let unknown = write(
        "unknown.lua",
        "function response(status, headers, body)\n  wrk.thread:explode()\nend\n",
    );
    for (script, expected) in [
        (
            &failing,
            format!("{failing}:5: attempt to call field 'nope'"),
        ),
        (
            &unknown,
            format!("{unknown}:2: thread has no field 'explode'"),
        ),
    ] {
        let json = dir.path().join("r.json");
        let o = archbench_within(
            &[
                "wrk",
                "-t1",
                "-c2",
                "-d10s",
                "-s",
                script,
                "--json",
                json.to_str().unwrap(),
                &url,
            ],
            RUN_LIMIT,
        );
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(&expected), "{}", stderr(&o));
        // Stopped at once, not after the 10 s; the report and the file keep what was done.
        assert!(stdout(&o).contains("Requests/sec:"));
        let r = read_json(&json);
        crate::util::schema::assert_valid(&r);
        assert_eq!(r["plan"]["script"], script.as_str());
        assert!(r["totals"]["requests"].as_u64().unwrap() >= 1);
        assert!(r["totals"]["elapsed_s"].as_f64().unwrap() < 5.0);
    }
    let log = ng.stop_and_read("script.log");
    // Only the two failing-late scripts sent anything: 50 answered in the first, then the
    // failure; some from the second.
    assert!(log.lines().count() >= 51, "{}", log.lines().count());
}

/// `run --script` and `--script-arg`: the same API under archbench's own front end, with an
/// exact request count counted against nginx's log.
#[test]
fn run_takes_a_script_and_its_arguments() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("args.lua");
    std::fs::write(
        &script,
        "function init(args)\n  wrk.method = \"POST\"\n  wrk.path = args[1]\n  wrk.body = args[2]\nend\n",
    )
    .unwrap();
    let o = archbench_within(
        &[
            "run",
            &ng.url("/"),
            "-n",
            "300",
            "-c",
            "3",
            "-t",
            "1",
            "-q",
            "--script",
            script.to_str().unwrap(),
            "--script-arg",
            "/s/from-args",
            "--script-arg",
            "twelve bytes",
        ],
        RUN_LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let log = ng.stop_and_read("script.log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 300);
    // Every request the same: POST to the path given, with the 12-byte body.
    let first = lines[0];
    assert!(first.starts_with("POST /s/from-args "), "{first}");
    assert!(lines.iter().all(|l| *l == first));
}

/// With --rate (wrk2's scripts use the same API) request() is called when each request is
/// due: every request it built was sent once, on the schedule, each timed from its due time.
#[test]
fn in_the_open_loop_request_builds_each_request_when_it_is_due() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("open.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/counter.lua");
    let o = archbench_within(
        &[
            "run",
            &ng.url("/s/"),
            "-n",
            "200",
            "--rate",
            "400",
            "-c",
            "2",
            "-t",
            "1",
            "-q",
            "--script",
            script,
            "--json",
            json.to_str().unwrap(),
        ],
        RUN_LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_eq!(doc["totals"]["requests"], 200);
    // One thread, one Lua state: its counter numbered every request once, 2 to 201 (call 1
    // is the check of the script's request before the load, as wrk makes it: the closed-loop
    // counter test finds real wrk's log the same).
    let log = ng.stop_and_read("script.log");
    let paths: BTreeSet<String> = log
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect();
    assert_eq!(log.lines().count(), 200, "{log}");
    let want: BTreeSet<String> = (2..=201).map(|n| format!("/s/n{n}")).collect();
    assert_eq!(paths, want);
    // The schedule held: 200 sends at 400/s cannot end before the last one is due, and each
    // request's lateness (from its due time) was recorded.
    let secs = doc["totals"]["elapsed_s"].as_f64().unwrap();
    assert!(secs >= 199.0 / 400.0, "ran {secs} s");
    assert_eq!(doc["pacing"]["lateness"]["count"], 200, "{}", doc["pacing"]);
}

/// `compare --script`: each target's done() reports each of its measured runs after the
/// comparison, headed by whose run it is, with that run's own figures (those of the JSON,
/// and with -n those nginx logged).
#[test]
fn compare_reports_each_run_through_done() {
    let Some(ng) = nginx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let (a, b) = (
        format!("a={}", ng.url("/s/a")),
        format!("b={}", ng.url("/s/b")),
    );
    let script = format!("{SCRIPTS}/report.lua");
    let o = archbench_within(
        &[
            "compare",
            &a,
            &b,
            "--script",
            &script,
            "-d",
            "300ms",
            "-c",
            "2",
            "-t",
            "1",
            "--runs",
            "2",
            "--no-warmup",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
        RUN_LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let heads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("done() of "))
        .collect();
    assert_eq!(
        heads,
        [
            "done() of a, run 1 of 2:",
            "done() of a, run 2 of 2:",
            "done() of b, run 1 of 2:",
            "done() of b, run 2 of 2:"
        ],
        "{text}"
    );
    // Each report follows its head, after the comparison's own report.
    let first = text.find("done() of a, run 1").unwrap();
    assert!(text[..first].contains("Reproduce one run"), "{text}");
    let doc = read_json(&json);
    let mut reported = text.split("done() of ").skip(1);
    let log = ng.stop_and_read("script.log");
    for (t, path) in doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["/s/a ", "/s/b "])
    {
        let mut counted = 0;
        for run in t["runs"].as_array().unwrap() {
            let block = reported.next().unwrap();
            let line = format!(
                "requests {} in {} us",
                run["totals"]["requests"],
                (run["totals"]["elapsed_s"].as_f64().unwrap() * 1e6).round()
            );
            assert!(block.contains(&line), "{line} in {block}");
            counted += run["totals"]["requests"].as_u64().unwrap();
        }
        let logged = log.lines().filter(|l| l.contains(path)).count() as u64;
        // Two connections per run, two runs: at most 4 logged but not answered in time.
        assert!(
            counted > 0 && counted <= logged && logged - counted <= 4,
            "{path}: {counted} {logged}"
        );
    }
}

/// A script function that never returns (LuaJIT's compiled loops cannot be interrupted) does
/// not hold the process for ever: in the workers, the run ends 2 s after its duration with a
/// line saying so (exit 1); before the load (here the script's chunk), a Ctrl-C ends it
/// within 2 s, saying nothing was measured (exit 130).
#[test]
fn a_script_that_never_returns_ends_with_a_line_that_says_so() {
    let Some(ng) = nginx() else { return };
    let url = ng.url("/s/");
    let dir = tempfile::tempdir().unwrap();
    let looping = dir.path().join("response-loops.lua");
    std::fs::write(
        &looping,
        "local n = 0\nfunction response(status, headers, body)\n  n = n + 1\n  if n > 50 then\n    while true do end\n  end\nend\n",
    )
    .unwrap();
    let l = looping.to_str().unwrap();
    let o = archbench_within(&["wrk", "-t2", "-c2", "-d1s", "-s", l, &url], RUN_LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("2 worker threads are still running") && err.contains("never returns"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let before = dir.path().join("chunk-loops.lua");
    std::fs::write(
        &before,
        "io.stderr:write(\"looping\\n\")\nio.stderr:flush()\nwhile true do end\n",
    )
    .unwrap();
    let mut child = crate::util::bin()
        .args([
            "wrk",
            "-t1",
            "-c1",
            "-d1s",
            "-s",
            before.to_str().unwrap(),
            &url,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = crate::util::LineReader::new(child.stderr.take().unwrap());
    err.wait_for("looping", RUN_LIMIT);
    let child = crate::util::KillOnDrop::new(child);
    let o = child.signal_and_finish(libc::SIGINT, RUN_LIMIT);
    assert_eq!(o.status.code(), Some(130), "{}", err.rest(RUN_LIMIT));
    let rest = err.rest(RUN_LIMIT);
    assert!(rest.contains("nothing was measured"), "{rest}");
}
