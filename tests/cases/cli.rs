//! The binary's contract: JSON against the schema, exit statuses, one-line errors.

use std::os::unix::fs::FileTypeExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use archbench::serve::{ServeOptions, Server};

use crate::util::schema::{assert_valid, result_validator};
use crate::util::{
    archbench, bin, finish_within, read_json, stderr, stdout, wait_until, LineReader, PROMPTLY,
};

/// Each command line fails as a usage error: exit 2 and one line naming the problem.
fn assert_usage_errors(cases: &[(Vec<&str>, &str)]) {
    for (args, needle) in cases {
        let o = archbench(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got: {err}");
    }
}

#[test]
fn json_file_and_stdout_validate_against_the_schema() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let o = archbench(&[
        "run",
        &s.url(),
        "-n",
        "500",
        "-c",
        "5",
        "-H",
        "Authorization: Bearer s3cret",
        "--json",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let from_stdout: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let from_file = read_json(&file);
    assert_valid(&from_stdout);
    assert_valid(&from_file);
    assert_eq!(from_file["totals"]["requests"], 500);
    assert!(!stdout(&o).contains("s3cret"), "credentials are redacted");
    // The schema rejects what it should: a document missing its totals.
    let mut broken = from_file.clone();
    broken.as_object_mut().unwrap().remove("totals");
    assert!(!result_validator().is_valid(&broken));
    // Histograms survive the round trip and re-analyse to the same percentiles.
    let r: archbench::stats::RunResult = serde_json::from_value(from_file).unwrap();
    assert_eq!(r.histograms.total.0.len(), 500);
    assert_eq!(
        r.histograms.total.0.value_at_quantile(0.99),
        r.latency.total.p99_us
    );
}

#[test]
fn bad_command_lines_exit_2_with_one_line() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let url = s.url();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "ftp://127.0.0.1/"], "scheme"),
        (vec!["run", "not a url"], "invalid URL"),
        (
            vec!["run", &url, "-c", "0"],
            "connections must be at least 1",
        ),
        (vec!["run", &url, "-n", "5", "-c", "10"], "below -c"),
        (vec!["run", &url, "-d", "ten"], "invalid duration"),
        (vec!["run", &url, "--rate", "0"], "--rate 0 is below 0.001"),
        (vec!["run", &url, "--bogus"], "--bogus"),
        (
            vec!["run", &url, "--body-file", "/nonexistent/x"],
            "cannot read body file",
        ),
        (
            vec!["wrk", "-s", "/nonexistent/x.lua", &url],
            "cannot read script /nonexistent/x.lua",
        ),
        (
            vec!["wrk", "-t4", "-c2", &url],
            "connections must be >= threads",
        ),
        (
            vec!["ab", "-n", "5", "-c", "10", &url],
            "concurrency level greater",
        ),
        (
            vec!["ab", "-p", "/nonexistent/post", &url],
            "cannot read body file",
        ),
    ];
    assert_usage_errors(&cases);
    assert_eq!(s.requests(), 0, "no bad command line sent a request");
}

#[test]
fn sigint_prints_and_saves_what_was_measured() {
    interrupt_and_check_what_was_saved(1);
}

/// `timeout -s INT` signals the program and then its process group: two SIGINTs within
/// microseconds are one interruption, not a second one that exits at once.
#[test]
fn two_sigints_together_still_print_and_save() {
    interrupt_and_check_what_was_saved(2);
}

/// Sends `sigints` SIGINTs back to back to a running load; it must exit 130 with what it
/// measured printed and saved.
fn interrupt_and_check_what_was_saved(sigints: usize) {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut child = bin()
        .args(["run", &s.url(), "-c", "4", "-d", "60s", "--json"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first progress line proves the load is running.
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("requests", PROMPTLY);
    for _ in 0..sigints {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    let text = stdout(&o);
    assert!(text.contains("[INTERRUPTED]"), "{text}");
    let doc = read_json(&file);
    assert_eq!(doc["interrupted"], true);
    let counted = doc["totals"]["requests"].as_u64().unwrap();
    assert!(counted > 0 && counted <= s.requests());
    // The signal came right after the first progress line (one second in).
    assert!(doc["totals"]["elapsed_s"].as_f64().unwrap() < 3.0);
}

/// ab's Ctrl-C goes straight to its report, as ab's does: the report of what was done, and no
/// "Finished N requests" line (archbench printed one, as at a run's normal end).
#[test]
fn ab_interrupted_prints_its_report_without_finished() {
    let s = Server::start(ServeOptions::default()).unwrap();
    // Bounded by -t should the signal never come; killed if the test fails first.
    let child = crate::util::KillOnDrop::new(
        bin()
            .args(["ab", "-t", "60", "-n", "100000000", "-c", "2", &s.url()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    crate::util::wait_until("the load to be answered", PROMPTLY, || s.requests() > 100);
    let o = child.signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Complete requests:"), "{text}");
    assert!(!stderr(&o).contains("Finished"), "{}", stderr(&o));
}

/// Ctrl-C while a part waits for its --start-at: nothing was measured, so there is no
/// report of zeros (0 req/s, "busiest worker 0%", a limiter verdict) and no file, only a line
/// that says so, and 130.
#[test]
fn interrupted_before_the_start_reports_nothing_measured() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let at = std::time::SystemTime::now() + Duration::from_secs(60);
    let at = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut child = bin()
        .args(["run", &s.url(), "-c", "1", "-d", "1s", "--start-at"])
        .arg(format!("@{at}"))
        .arg("--json")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = LineReader::new(child.stderr.take().unwrap());
    err.wait_for("for --start-at", PROMPTLY);
    let o = crate::util::KillOnDrop::new(child).signal_and_finish(libc::SIGINT, PROMPTLY);
    assert_eq!(o.status.code(), Some(130));
    assert_eq!(stdout(&o), "", "no report");
    assert!(!file.exists(), "no file");
    assert_eq!(s.requests(), 0);
}

/// A short run's busiest worker is busy for at most all of the run: what its thread did
/// before the start (waiting for it) is not the run's (it made 3 of 8 runs of 5 requests
/// 101–132% busy). A 1% margin for the edge where the thread's figures are read after the
/// run's clock stopped.
#[test]
fn a_short_runs_worker_is_busy_at_most_all_of_the_time() {
    let s = Server::start(ServeOptions::default()).unwrap();
    for _ in 0..10 {
        let doc = crate::util::run_json(&s.url(), 5);
        let busy = doc["client"]["busiest_worker_percent"].as_f64().unwrap();
        assert!((0.0..=101.0).contains(&busy), "{busy}%");
    }
}

/// ab's and h2load's layouts print zeros when nothing was answered: the status (1, as real
/// ab's on a refused connection) and a line on stderr say nothing was measured. wrk does not
/// start when its check connect is refused, in its words.
#[test]
fn front_ends_that_got_no_answer_say_so_and_exit_1() {
    let url = nothing_listens();
    let u = url.as_str();
    let refused = crate::util::wrk_refused(u);
    for (args, says) in [
        (vec!["ab", "-n", "10", u], "no request was answered"),
        (
            vec!["wrk", "-d", "1", "-c", "2", "-t", "1", u],
            refused.as_str(),
        ),
        (
            vec!["h2load", "--h1", "-n", "10", "-c", "1", u],
            "no request was answered",
        ),
    ] {
        let o = archbench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A server that takes requests and answers none before the run ends (its timeout longer than
/// the run): the requests it holds are counted as such, and run, compare and sweep fail with
/// the line that says nothing was answered (they exited 0 with an empty report).
#[test]
fn a_server_that_answers_nothing_before_the_end_fails_the_run() {
    use crate::util::faulty::{Fault, FaultyServer};
    let server = FaultyServer::start(Fault::NeverAnswer);
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = archbench(&[
        "run",
        &url,
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "300ms",
        "--timeout",
        "30s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no request was answered (2 still unanswered when it ended)"),
        "{err}"
    );
    assert!(
        stdout(&o).contains(
            "Requests   0 answered in 0.30s  0.00 req/s; 2 sent and still unanswered when it ended"
        ),
        "{}",
        stdout(&o)
    );
    let doc = read_json(&json);
    assert_valid(&doc);
    assert_eq!(doc["totals"]["unanswered_at_end"], 2);
    assert_eq!(doc["totals"]["errors"], 0);

    // One short run a step, no warm-up, and a timeout the run ends well before.
    const BRIEF: [&str; 7] = [
        "-d",
        "200ms",
        "--runs",
        "1",
        "--no-warmup",
        "--timeout",
        "30s",
    ];
    let other = FaultyServer::start(Fault::NeverAnswer);
    let (a, b) = (format!("a={url}"), format!("b={}", other.url()));
    let o = archbench(&[&["compare", &a, &b, "-c", "1"][..], &BRIEF].concat());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("a: no request was answered (1 still unanswered"),
        "{err}"
    );
    assert!(
        err.contains("b: no request was answered (1 still unanswered"),
        "{err}"
    );

    let o = archbench(&[&["sweep", &a, "-c", "1,2"][..], &BRIEF].concat());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("a: no request was answered (3 still unanswered when it ended)"),
        "{err}"
    );
}

/// A loopback URL nothing listens on: a port bound for a free one, then let go.
fn nothing_listens() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://127.0.0.1:{}/", l.local_addr().unwrap().port())
}

/// A run or sweep step that got no answer has no latency: its documents say so (null, "–"),
/// never an invented 0 µs, and stay valid against their schemas.
#[test]
fn latency_without_answers_is_absent_not_zero() {
    let url = nothing_listens();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "--json",
        &path("r.json"),
        "--markdown",
        &path("r.md"),
        "--html",
        &path("r.html"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc = read_json(dir.path().join("r.json"));
    assert_valid(&doc);
    let total = &doc["latency"]["total"];
    assert_eq!(total["count"], 0);
    for k in ["min_us", "mean_us", "p50_us", "p99_us", "max_us"] {
        assert!(total[k].is_null(), "{k}: {total}");
    }
    // The Markdown and HTML reports show no figure either.
    let md = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| 0 |"))
        .unwrap_or_default();
    assert_eq!(row.matches("| – ").count(), 4, "{md}");
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    // p50, p90, p99, p99.9 and max: no cell, no data-value.
    assert_eq!(
        html.matches("<td class=\"num\">–</td>").count(),
        5,
        "{html}"
    );

    let o = archbench(&[
        "sweep",
        &format!("a={url}"),
        "-c",
        "1,2",
        "-d",
        "200ms",
        "--runs",
        "1",
        "--no-warmup",
        "--json",
        &path("s.json"),
    ]);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let doc = read_json(dir.path().join("s.json"));
    assert_valid(&doc);
    let point = &doc["targets"][0]["points"][0];
    assert_eq!(point["error_percent"], 100.0, "{point}");
    for k in ["p50_us", "p90_us", "p99_us", "p99_9_us"] {
        assert!(point[k].is_null(), "{k}: {point}");
    }
    assert!(
        stdout(&o).contains("      -         -         -         -"),
        "{}",
        stdout(&o)
    );
}

/// A file that cannot be written fails before any load (exit 2, one line), not after a long
/// run that then cannot save what it measured; no directory is made for a mistyped path.
#[test]
fn unwritable_output_files_fail_before_any_load() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let url = s.url();
    let u = url.as_str();
    let (a, b) = (format!("a={u}"), format!("b={u}"));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo").join("r.json");
    let m = missing.to_str().unwrap();
    let a_file = dir.path().join("plain");
    std::fs::write(&a_file, "x").unwrap();
    let under_file = a_file.join("r.md");
    let d = dir.path().to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", u, "--json", m], "no directory"),
        (vec!["run", u, "--json", d], "it is a directory"),
        (
            vec!["run", u, "--markdown", under_file.to_str().unwrap()],
            "is not a directory",
        ),
        (
            vec!["run", u, "--html", "/proc/r.html"],
            "cannot write there",
        ),
        (vec!["compare", &a, &b, "--json", m], "no directory"),
        (vec!["sweep", &a, "-c", "1,2", "--json", m], "no directory"),
        (vec!["wrk", "-d", "1s", u, "--json", m], "no directory"),
        (vec!["ab", "-n", "10", u, "--json", m], "no directory"),
        (
            vec!["h2load", "--h1", "-n", "10", u, "--json", m],
            "no directory",
        ),
    ];
    assert_usage_errors(&cases);
    assert!(!missing.parent().unwrap().exists(), "no directory is made");
    assert_eq!(s.requests(), 0, "nothing was sent");
}

/// A report file goes where the path points, and nothing of the user's is replaced: a link is
/// written through (the link kept), a pipe is written to (not replaced by a file of its
/// name), `/dev/stdout` is stdout, a `FILE.tmp` of the user's is left alone; two reports into
/// one file are refused before any load.
#[test]
fn report_files_go_where_their_paths_point() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let url = s.url();
    let u = url.as_str();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.json");
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("target.json", &link).unwrap();
    let users = dir.path().join("target.json.tmp");
    std::fs::write(&users, "the user's").unwrap();
    let l = link.to_str().unwrap();
    // Five requests, a report file given by `flag`.
    let run_into = |flag: &str, path: &str| {
        let o = archbench(&["run", u, "-n", "5", "-c", "1", "-t", "1", "-q", flag, path]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    run_into("--json", l);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(read_json(&target)["totals"]["requests"], 5);
    assert_eq!(std::fs::read_to_string(&users).unwrap(), "the user's");
    // A pipe with its reader, as `--json >(jq …)` hands one.
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let f = fifo.to_str().unwrap();
    run_into("--markdown", f);
    assert!(reader.join().unwrap().contains("### archbench run"));
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let o = run_into("--json", "/dev/stdout");
    assert!(
        stdout(&o).contains("\"kind\": \"archbench-result\""),
        "{}",
        stdout(&o)
    );
    let served = s.requests();
    let t = target.to_str().unwrap();
    let nowhere = dir.path().join("typo").join("deep");
    let n = nowhere.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", u, "--json", t, "--markdown", t],
            "name the same file",
        ),
        (
            vec!["run", u, "--json", l, "--html", t],
            "name the same file",
        ),
        // `report`'s page and charts, as every file flag: checked before anything is read.
        (vec!["report", t, "--html", n], "no directory"),
        (vec!["report", t, "--svg", n], "no directory"),
        (vec!["report", t, "--svg", t], "it is a file"),
    ];
    assert_usage_errors(&cases);
    assert!(!nowhere.parent().unwrap().exists(), "no directory is made");
    assert_eq!(s.requests(), served, "nothing was sent");
}

/// `report --html` and `merge --json/--markdown/--html` never write over a document they
/// read: the same file by another spelling (`./x`) or through a link is refused too, exit 2,
/// one line naming the flag, and the document is left as it was.
#[test]
fn a_report_never_replaces_the_documents_it_reads() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    let doc = crate::util::run_json(&s.url(), 5);
    std::fs::write(&run, doc.to_string()).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("run.json", &link).unwrap();
    let (r, l) = (run.to_str().unwrap(), link.to_str().unwrap());
    let dotted = format!("{}/./run.json", dir.path().display());
    let before = std::fs::read(&run).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["report", r, "--html", r], "--html"),
        (vec!["report", r, "--html", l], "--html"),
        (vec!["merge", r, r, "--json", &dotted], "--json"),
        (vec!["merge", l, r, "--markdown", r], "--markdown"),
        (vec!["merge", r, r, "--html", l], "--html"),
    ];
    for (args, flag) in &cases {
        let o = archbench(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("archbench: {flag} ")) && err.contains("input file"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(
            std::fs::read(&run).unwrap(),
            before,
            "{args:?} wrote over its input"
        );
    }
    // Another file beside them is written as before.
    let page = dir.path().join("page.html");
    let o = archbench(&["report", r, "--html", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(page.exists());
}

#[test]
fn broken_pipe_is_a_quiet_exit() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let mut child = bin()
        .args(["run", &s.url(), "-n", "200", "-c", "2", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // like `| head -0`
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn demo_compares_two_servers_and_writes_json_and_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let o = archbench(&[
        "demo",
        "-d",
        "400ms",
        "--runs",
        "2",
        "-c",
        "8",
        "--out-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("Mann-Whitney U"), "{}", stdout(&o));
    let runs: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(runs.len(), 1, "one timestamped directory");
    let out = runs[0].as_ref().unwrap().path();
    let doc = read_json(out.join("comparison.json"));
    assert_eq!(doc["kind"], "archbench-comparison");
    assert_valid(&doc);
    for t in doc["targets"].as_array().unwrap() {
        let runs = t["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for r in runs {
            assert_valid(r);
            assert!(r["totals"]["requests"].as_u64().unwrap() > 0);
        }
    }
    let markdown = std::fs::read_to_string(out.join("comparison.md")).unwrap();
    // The stored comparison renders to the same Markdown later.
    let again = archbench(&[
        "report",
        out.join("comparison.json").to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(stdout(&again), markdown);
    let text = archbench(&["report", out.join("comparison.json").to_str().unwrap()]);
    assert!(stdout(&text).contains("Mann-Whitney U"));
    // The HTML report beside them, named on stderr, with both targets' spectra drawn.
    let html = out.join("comparison.html");
    assert!(
        stderr(&o).contains(&html.display().to_string()),
        "{}",
        stderr(&o)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.starts_with("<!doctype html>"),
        "{}",
        &page[..page.len().min(200)]
    );
    for t in doc["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(page.contains(name), "{name} not in the page");
    }
    assert!(
        page.matches("<svg").count() >= 2,
        "spectrum and throughput charts"
    );
    if crate::util::require_tool("nginx").is_some() {
        // Both nginx instances were watched.
        for t in doc["targets"].as_array().unwrap() {
            assert!(t["runs"][0]["servers"][0]["cpu_s"].as_f64().unwrap() > 0.0);
        }
        // The layout, apart from the figures.
        let mut masked = String::new();
        let mut in_number = false;
        for c in markdown.chars() {
            let numeric = c.is_ascii_digit() || (in_number && (c == ',' || c == '.'));
            if !numeric {
                masked.push(c);
            } else if !in_number {
                masked.push('#');
            }
            in_number = numeric;
        }
        // Without a verdict the difference's sign is noise: mask it too.
        let masked = masked.replace("+#%", "±#%").replace("-#%", "±#%");
        insta::assert_snapshot!(masked);
    }
}

/// `archbench agent` with these flags besides, one that would give up waiting after a second.
fn agent<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["agent", "http://127.0.0.1:1/", "-n", "1", "--control"];
    args.extend(["127.0.0.1:0", "--control-no-auth", "--start-timeout", "1s"]);
    args.extend_from_slice(extra);
    args
}

#[test]
fn more_bad_command_lines_exit_2() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let a_file = file.path().to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["serve", "--addr", "nowhere"], "invalid --addr"),
        (vec!["demo", "-d", "soon"], "invalid duration"),
        // The demo checks its flags before it starts a server or prints its banner.
        (
            vec!["demo", "--embedded", "-d", "0"],
            "duration must be above zero",
        ),
        (
            vec!["demo", "--embedded", "-c", "0"],
            "connections must be at least 1",
        ),
        (
            vec!["demo", "--embedded", "-d", "100ms", "--out-dir", a_file],
            "cannot create",
        ),
        (vec!["wrk", "-c", "0", "http://127.0.0.1:1/"], "at least 1"),
        (
            vec!["wrk", "--frobnicate", "http://127.0.0.1:1/"],
            "--frobnicate",
        ),
        (
            vec!["wrk", "-d", "10x", "http://127.0.0.1:1/"],
            "invalid duration",
        ),
        // wrk's own grammar: whole numbers (it prints its usage for these).
        (
            vec!["wrk", "-d", "1.5s", "http://127.0.0.1:1/"],
            "wrk takes whole seconds",
        ),
        (
            vec!["wrk", "-T", "500ms", "http://127.0.0.1:1/"],
            "wrk takes whole seconds",
        ),
        (
            vec!["wrk", "-c", "1.5k", "http://127.0.0.1:1/"],
            "wrk takes a whole number",
        ),
        (vec!["wrk"], "missing URL"),
        (
            vec!["ab", "-c", "0", "-n", "1", "http://127.0.0.1:1/"],
            "at least 1",
        ),
        (
            vec!["ab", "-t", "later", "http://127.0.0.1:1/"],
            "invalid duration",
        ),
        (vec!["ab"], "missing URL"),
        (vec!["ab", "-n", "1", "gopher://127.0.0.1/"], "scheme"),
        (
            vec!["run", "http://127.0.0.1:1/", "-t", "0"],
            "threads must be at least 1",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--timeout", "0s"],
            "timeout must be above zero",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "-H", "NoColon"],
            "invalid header",
        ),
        // A header name is an RFC 9110 token in every front end (these were sent as typed).
        (
            vec!["run", "http://127.0.0.1:1/", "-H", "\u{dc}n\u{ef}: v"],
            "invalid header name \"\u{dc}n\u{ef}\"",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "-H", "X(y): v"],
            "invalid header name \"X(y)\"",
        ),
        (
            vec!["wrk", "http://127.0.0.1:1/", "-H", "X(y): v"],
            "invalid header name",
        ),
        (
            vec!["ab", "-n", "1", "-H", "X(y): v", "http://127.0.0.1:1/"],
            "invalid header name",
        ),
        (
            vec!["h2load", "-n", "1", "-H", "X(y): v", "http://127.0.0.1:1/"],
            "invalid header name",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "-H", "X-A: b\rc"],
            "contains a control character",
        ),
        (
            vec!["wrk", "http://127.0.0.1:1/", "-H", "X-A: \u{1b}[31mred"],
            "header \"X-A\" contains a control character",
        ),
        // A value with a line break or a carriage return is quoted escaped, so the one line
        // reaches the reason.
        (
            vec!["run", "http://127.0.0.1:1/", "-H", "X-A: b\nc"],
            "invalid value 'X-A: b\\nc' for '--header <HEADERS>': header \"X-A\" contains a control character",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--fr\rob"],
            "unexpected argument '--fr\\rob'",
        ),
        // The agent's result goes to stdout and GET /result only: report and live flags of
        // `run` are refused before it listens (they were accepted and ignored).
        (agent(&["--json", a_file]), "--json: the agent has no report"),
        (agent(&["--markdown", a_file]), "--markdown: the agent has no"),
        (agent(&["--html", a_file]), "--html: the agent has no"),
        (agent(&["-o", "json"]), "-o: the agent has no"),
        (agent(&["--prometheus", "0"]), "--prometheus: the agent has no"),
        (vec!["bogus-subcommand"], "unrecognized subcommand"),
        // TLS flags where no target speaks TLS would be ignored without a word.
        (
            vec!["run", "http://127.0.0.1:1/", "-k"],
            "--insecure applies to https:// targets only",
        ),
        (
            vec![
                "compare",
                "a=http://127.0.0.1:1/",
                "b=http://127.0.0.1:2/",
                "--tls-version",
                "1.3",
            ],
            "--tls-version applies to https:// targets only",
        ),
        (
            vec![
                "sweep",
                "a=http://127.0.0.1:1/",
                "-c",
                "1,2",
                "--tls-resume",
                "off",
            ],
            "--tls-resume off applies to https:// targets only",
        ),
    ];
    assert_usage_errors(&cases);
}

/// `report` with a page or charts to write still prints its -o layout on stdout (it printed
/// nothing: the layout was dropped without a word).
#[test]
fn report_prints_its_layout_beside_the_page_and_the_charts() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let f = file.to_str().unwrap();
    let o = archbench(&[
        "run",
        &s.url(),
        "-n",
        "20",
        "-c",
        "1",
        "-t",
        "1",
        "-q",
        "--json",
        f,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let markdown = stdout(&archbench(&["report", f, "-o", "markdown"]));
    assert!(markdown.starts_with('#'), "{markdown}");
    let page = dir.path().join("r.html");
    let o = archbench(&[
        "report",
        f,
        "-o",
        "markdown",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), markdown);
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .starts_with("<!doctype html>"));
    let charts = dir.path().join("charts");
    let o = archbench(&["report", f, "-o", "json", "--svg", charts.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["totals"]["requests"], 20);
    assert!(
        std::fs::read_dir(&charts).unwrap().count() >= 2,
        "the charts"
    );
}

/// Help that cannot be written (`--help >/dev/full`) is a failure said on stderr, as
/// coreutils' are; a reader that went away (`| head -1`) is not.
#[test]
fn help_that_cannot_be_written_fails() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = bin()
        .arg("--help")
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot write the help"),
        "{}",
        stderr(&o)
    );
    let mut child = bin()
        .arg("--help")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = finish_within(child, PROMPTLY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A stderr that cannot be written (`2>/dev/full`) costs the message, never the exit status:
/// `eprintln!` panicked there (101); a closed one (`2>&-`) keeps the status too.
#[test]
fn an_unwritable_stderr_keeps_the_exit_status() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let u = s.url();
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["run", &u, "-n", "0"], 2),
        (vec!["report", "/nonexistent"], 2),
        (vec!["run", &u, "--frobnicate"], 2),
        (vec!["run", "http://127.0.0.1:1/", "-n", "1", "-c", "1"], 1),
        (vec!["run", &u, "-n", "1", "-c", "1", "-t", "1"], 0),
    ];
    for (args, code) in &cases {
        for closed in [false, true] {
            let err = if closed {
                Stdio::null()
            } else {
                Stdio::from(std::fs::File::create("/dev/full").unwrap())
            };
            let mut cmd = bin();
            cmd.args(args).stdout(Stdio::null()).stderr(err);
            if closed {
                // SAFETY: only closes a descriptor in the child before it executes.
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                        libc::close(2);
                        Ok(())
                    });
                }
            }
            let o = cmd.output().unwrap();
            assert_eq!(o.status.code(), Some(*code), "{args:?}, closed: {closed}");
        }
    }
}

#[test]
fn secrets_never_reach_reports_or_results() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let url = format!("http://alice:hunter2@{}/", s.addr());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let o = archbench(&[
        "run",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "-q",
        "-H",
        "Cookie: session=c00kie",
        "-H",
        "Proxy-Authorization: Basic cHJveHk=",
        "-H",
        "authorization: Bearer t0ken",
        "-H",
        "X-Visible: shown",
        "--json",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stored = std::fs::read_to_string(&file).unwrap();
    for secret in ["hunter2", "alice", "c00kie", "cHJveHk=", "t0ken"] {
        assert!(!stored.contains(secret), "{secret} leaked into the JSON");
        assert!(
            !stdout(&o).contains(secret),
            "{secret} leaked into the report"
        );
    }
    assert!(stored.contains("shown"), "ordinary headers are kept");
    assert_eq!(stored.matches("REDACTED").count(), 4);
    assert_eq!(s.requests(), 20);
}

#[test]
fn sigterm_exits_143_with_the_report() {
    let s = Server::start(ServeOptions::default()).unwrap();
    let mut child = bin()
        .args(["run", &s.url(), "-c", "2", "-d", "60s", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // -o json has no progress line; wait for the server to see traffic instead.
    let err = LineReader::new(child.stderr.take().unwrap());
    wait_until("the server to see a request", PROMPTLY, || s.requests() > 0);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = finish_within(child, PROMPTLY);
    let rest = err.rest(PROMPTLY);
    assert_eq!(o.status.code(), Some(143), "{rest}");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert!(doc["totals"]["elapsed_s"].as_f64().unwrap() < 10.0);
}

#[test]
fn too_many_connections_for_the_file_limit_fail_before_starting() {
    let Some(prlimit) = crate::util::require_tool("prlimit") else {
        return;
    };
    let s = Server::start(ServeOptions::default()).unwrap();
    let o = std::process::Command::new(prlimit)
        .args(["--nofile=128:128", env!("CARGO_BIN_EXE_archbench")])
        .args(["run", &s.url(), "-c", "500", "-n", "500", "-t", "2", "-q"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // One per connection, three per worker, 64 spare.
    assert!(
        err.contains("500 connections need 570 open files but the hard limit is 128"),
        "{err}"
    );
    assert_eq!(s.requests(), 0, "nothing was sent");
    // Within the hard limit, archbench raises its own soft limit.
    let o = std::process::Command::new(crate::util::require_tool("prlimit").unwrap())
        .args(["--nofile=64:1024", env!("CARGO_BIN_EXE_archbench")])
        .args(["run", &s.url(), "-c", "500", "-n", "500", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.requests(), 500);
}

#[test]
fn ephemeral_port_exhaustion_is_reported_as_such() {
    // In a network namespace of our own, with eight local ports: -c 20 keep-alive
    // connections cannot all get one.
    if !crate::util::network_namespace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_archbench");
    let json = dir.path().join("r.json");
    let serve_out = dir.path().join("serve.out");
    let script = format!(
        r#"set -e
ip link set lo up
sysctl -q -w net.ipv4.ip_local_port_range="40000 40007"
{bin} serve --addr 127.0.0.1:8080 --threads 1 > {out} 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null' EXIT
until grep -q listening {out}; do :; done
{bin} run http://127.0.0.1:8080/ -n 200 -c 20 -t 1 -q --json {json}
"#,
        out = serve_out.display(),
        json = json.display()
    );
    let o = std::process::Command::new("unshare")
        .args(["-n", "timeout", "60", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let doc = read_json(&json);
    let no_port = doc["errors"]["connect_no_local_port"].as_u64().unwrap();
    assert!(no_port > 0, "{}", doc["errors"]);
    assert_eq!(doc["errors"]["connect"].as_u64().unwrap(), no_port);
    assert_eq!(
        doc["totals"]["requests"].as_u64().unwrap() + doc["totals"]["errors"].as_u64().unwrap(),
        200
    );
    assert!(err.contains("ephemeral ports are exhausted"), "{err}");
}

#[test]
fn watching_a_missing_process_fails_before_any_load() {
    let s = Server::start(ServeOptions::default()).unwrap();
    for (watch, needle) in [
        ("x=pid:999999999", "not running"),
        (
            "x=name:no-such-process-archbench",
            "no running process named",
        ),
        ("x=cgroup:/nonexistent", "not a cgroup"),
        ("pid:1", "invalid --watch"),
    ] {
        let o = archbench(&["run", &s.url(), "-n", "10", "-c", "1", "--watch", watch]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{watch}: {err}");
        assert!(err.contains(needle), "{watch}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    for (args, needle) in [
        (
            vec!["--perf", "instructions"],
            "--perf counts events of watched servers",
        ),
        (
            vec!["--perf", "bogus", "--watch", "x=pid:1"],
            "unknown perf event",
        ),
    ] {
        let mut argv = vec!["run", s.url().leak(), "-n", "10", "-c", "1"];
        argv.extend(args);
        let o = archbench(&argv);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
    }
    let o = archbench(&[
        "run",
        &s.url(),
        "-n",
        "10",
        "-c",
        "1",
        "--watch",
        "x=pid:999999998",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not running"));
    assert_eq!(s.requests(), 0);
}

#[test]
fn watching_a_live_cgroup_measures_what_runs_in_it() {
    // A cgroup of our own (v1 cpuacct here, v2 where that is mounted), holding a process that
    // burns one CPU-second.
    let Some(mut burner) = crate::util::Burner::spawn() else {
        return;
    };
    let (root, memory_root) = if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        (std::path::PathBuf::from("/sys/fs/cgroup"), None)
    } else {
        (
            std::path::PathBuf::from("/sys/fs/cgroup/cpuacct"),
            Some(std::path::PathBuf::from("/sys/fs/cgroup/memory")),
        )
    };
    let name = format!("archbench-test-{}", std::process::id());
    let dir = root.join(&name);
    if std::fs::create_dir(&dir).is_err() {
        crate::util::cannot_run(&format!(
            "cannot create a cgroup under {}: run as root",
            root.display()
        ));
        return;
    }
    let mem_dir = memory_root.map(|m| m.join(&name));
    if let Some(m) = &mem_dir {
        let _ = std::fs::create_dir(m);
        // v1 leaves pages charged to the old cgroup unless told to move them along.
        let _ = std::fs::write(m.join("memory.move_charge_at_immigrate"), "1");
    }
    std::fs::write(dir.join("cgroup.procs"), burner.pid().to_string()).unwrap();
    if let Some(m) = &mem_dir {
        let _ = std::fs::write(m.join("cgroup.procs"), burner.pid().to_string());
    }
    let has_memory_counter = dir.join("memory.current").exists()
        || mem_dir
            .as_ref()
            .is_some_and(|m| m.join("memory.usage_in_bytes").exists());
    let spec: archbench::monitor::WatchSpec =
        format!("box=cgroup:{}", dir.display()).parse().unwrap();
    let monitor = archbench::monitor::Monitor::start(&spec, std::time::Instant::now()).unwrap();
    burner.burn_one_second();
    let usage = monitor.finish();
    assert_eq!(usage.sampling_stopped, None);
    // A cgroup that disappears while watched (a container stopped, a pod restarted) ends the
    // sampling, never the measurement: what was read before stays, and why it stopped is said.
    let monitor = archbench::monitor::Monitor::start(&spec, std::time::Instant::now()).unwrap();
    burner.burn_one_second();
    let parent = root.join("cgroup.procs");
    std::fs::write(&parent, burner.pid().to_string()).unwrap();
    std::fs::remove_dir(&dir).unwrap();
    let lost = monitor.finish();
    let stopped = lost.sampling_stopped.as_ref().expect("sampling stopped");
    // The process lives on (elsewhere): sampling was lost, the server did not go away.
    assert!(!stopped.server_gone, "{stopped:?}");
    assert!(stopped.reason.contains("cannot read"), "{stopped:?}");
    assert!(
        lost.cpu_s > 0.5 && lost.cpu_s <= 1.1,
        "{:.3} CPU s kept",
        lost.cpu_s
    );
    drop(burner);
    if let Some(m) = &mem_dir {
        let _ = std::fs::remove_dir(m);
    }
    eprintln!(
        "cgroup {}: {:.3} CPU s, {} bytes",
        dir.display(),
        usage.cpu_s,
        usage.peak_memory_bytes
    );
    assert!(
        (usage.cpu_s - 1.0).abs() <= 0.1,
        "cgroup CPU {:.3} s for a 1.000 s burn",
        usage.cpu_s
    );
    // Counted from cgroup.procs, and the process's switches read from /proc: measured
    // figures for a cgroup, not a zero standing for "not read".
    assert_eq!(usage.processes, Some(1));
    assert!(usage.context_switches.is_some(), "{usage:?}");
    assert!(usage.unmeasured.is_empty(), "{:?}", usage.unmeasured);
    // The cgroup's own memory counter was read where there is one (v1 charges pages to the
    // cgroup they were first touched in, so a moved process brings little of its memory
    // along; v2 has memory.current only when the memory controller is delegated).
    if has_memory_counter {
        assert!(
            usage.peak_memory_bytes > 0,
            "{} bytes",
            usage.peak_memory_bytes
        );
    }
}

#[test]
fn a_later_start_does_not_dilute_the_watched_servers_figures() {
    // Monitors open (and check their target) at once, but their figures run from the start
    // instant: a wait before it is not averaged into the server's CPU.
    let server = crate::util::ServeChild::start(&["--threads", "1"]);
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(3);
    let at = format!(
        "@{:.6}",
        at.duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    );
    let o = archbench(&[
        "run",
        &server.url,
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "1s",
        "--start-at",
        &at,
        "--watch",
        &format!("web=pid:{}", server.pid()),
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let elapsed = doc["totals"]["elapsed_s"].as_f64().unwrap();
    let sampled = doc["servers"][0]["sampled_s"].as_f64().unwrap();
    assert!(
        (sampled - elapsed).abs() < 0.4,
        "sampled {sampled} s of a {elapsed} s run that waited 3 s to start"
    );
}

/// The demo without nginx (or with --embedded): two embedded servers, each a process of its
/// own and watched, so the table has the server rows the nginx demo has.
#[test]
fn the_embedded_demo_watches_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let o = archbench(&[
        "demo",
        "--embedded",
        "-d",
        "400ms",
        "--runs",
        "1",
        "-c",
        "4",
        "--out-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("two embedded servers on loopback (1 vs 2 threads), as asked"),
        "{}",
        stderr(&o)
    );
    let out = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc = read_json(out.join("comparison.json"));
    let names: Vec<&str> = doc["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["embedded-1-thread", "embedded-2-threads"]);
    for t in doc["targets"].as_array().unwrap() {
        let run = &t["runs"][0];
        let server = &run["servers"][0];
        assert_eq!(server["label"], t["name"], "{server}");
        assert!(server["cpu_s"].as_f64().unwrap() > 0.0, "{server}");
        assert_ne!(run["limiter"]["side"], "unknown", "{}", run["limiter"]);
    }
    let text = stdout(&o);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("server CPU (cores)"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!row.contains('–'), "both servers have a figure: {row}");
}

/// Without --variant, `k8s manifests` (and so `k8s up`) is the guide's setup byte for byte as
/// it was before variants existed: the files are that build's output, with one change made
/// on purpose since (each nginx container's httpGet readiness probe).
#[cfg(feature = "k8s")]
#[test]
fn the_arch_presets_manifests_are_byte_identical_to_before_variants() {
    for (args, golden) in [
        (vec![], "k8s-manifests-default.yaml"),
        (
            vec![
                "--arch",
                "arm,amd",
                "--config",
                "stock",
                "--service-type",
                "NodePort",
                "--pools-by",
                "agentpool",
            ],
            "k8s-manifests-arm-amd-stock-nodeport-agentpool.yaml",
        ),
        (
            vec!["--load-job", "--workers", "4"],
            "k8s-manifests-load-job.yaml",
        ),
    ] {
        let o = crate::util::bin()
            .args(["k8s", "manifests"])
            .args(&args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", crate::util::stderr(&o));
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(golden);
        let want = std::fs::read_to_string(&path).unwrap();
        let (got, tokens) = tokens_replaced(&crate::util::stdout(&o));
        assert!(got == want, "{args:?} differs from {}", path.display());
        // Each printing has a control token of its own (the golden file says where): a Job
        // applied from it answers no token anyone else knows.
        if !tokens.is_empty() {
            let again = crate::util::bin()
                .args(["k8s", "manifests"])
                .args(&args)
                .output()
                .unwrap();
            let (_, other) = tokens_replaced(&crate::util::stdout(&again));
            assert!(
                tokens.iter().all(|t| !other.contains(t)),
                "{tokens:?} {other:?}"
            );
        }
    }
}

/// The manifests with each Job's control token (32 hex digits) replaced by the golden files'
/// `generated-per-run`, and the tokens.
#[cfg(feature = "k8s")]
fn tokens_replaced(yaml: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(yaml.len());
    let mut tokens = Vec::new();
    let mut after_name = false;
    for line in yaml.split_inclusive('\n') {
        let value = line.trim_end().strip_prefix("          value: ");
        match value {
            Some(token) if after_name => {
                assert!(
                    token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
                    "a control token of 128 random bits: {token}"
                );
                tokens.push(token.to_string());
                out.push_str("          value: generated-per-run\n");
            }
            _ => out.push_str(line),
        }
        after_name = line.trim() == "- name: ARCHBENCH_CONTROL_TOKEN";
    }
    (out, tokens)
}

/// `k8s --context NAME` that the kubeconfig lacks: named, with the contexts it has, before
/// any cluster is asked (it said "cannot read a kubeconfig: failed to load current context").
#[test]
fn a_context_the_kubeconfig_lacks_is_named_with_the_ones_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {}}]\n\
         contexts: [{name: here, context: {cluster: c, user: u}}]\n\
         current-context: here\n",
    )
    .unwrap();
    let o = archbench(&[
        "k8s",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--context",
        "nope",
        "status",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--context \"nope\": the kubeconfig has no such context (it has: here)"),
        "{err}"
    );
}
