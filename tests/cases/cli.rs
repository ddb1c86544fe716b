//! The binary's contract: JSON against the schema, exit statuses, one-line errors.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use archbench::serve::{ServeOptions, Server};

use crate::util::{archbench, bin, stderr, stdout};

fn schema_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/result.schema.json"
    ))
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft202012::new(&schema).expect("the schema itself is valid")
}

fn assert_valid(doc: &serde_json::Value) {
    let v = schema_validator();
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema violations: {errors:#?}");
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
    let from_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_valid(&from_stdout);
    assert_valid(&from_file);
    assert_eq!(from_file["totals"]["requests"], 500);
    assert!(!stdout(&o).contains("s3cret"), "credentials are redacted");
    // The schema rejects what it should: a document missing its totals.
    let mut broken = from_file.clone();
    broken.as_object_mut().unwrap().remove("totals");
    assert!(!schema_validator().is_valid(&broken));
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
        (
            vec!["run", &url, "--rate", "0"],
            "--rate must be above zero",
        ),
        (vec!["run", &url, "--bogus"], "--bogus"),
        (
            vec!["run", &url, "--body-file", "/nonexistent/x"],
            "cannot read body file",
        ),
        (
            vec!["wrk", "-s", "x.lua", &url],
            "Lua scripts are not supported",
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
    for (args, needle) in cases {
        let o = archbench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert_eq!(s.requests(), 0, "no bad command line sent a request");
}

#[test]
fn sigint_prints_and_saves_what_was_measured() {
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
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("requests"), "{line}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let text = stdout(&o);
    assert!(text.contains("[INTERRUPTED]"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    let counted = doc["totals"]["requests"].as_u64().unwrap();
    assert!(counted > 0 && counted <= s.requests());
    assert!(doc["totals"]["elapsed_s"].as_f64().unwrap() < 30.0);
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
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn demo_runs_and_writes_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let o = archbench(&[
        "demo",
        "-d",
        "1s",
        "--out-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("answered"));
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    let path = files[0].as_ref().unwrap().path();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_valid(&doc);
    assert!(doc["totals"]["requests"].as_u64().unwrap() > 0);
}
