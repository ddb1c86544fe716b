//! The Prometheus side of the live-view tests: scraping `GET /metrics` and reading it with the
//! Prometheus project's own strict OpenMetrics parser (Python's prometheus_client).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use super::{finish_within, stderr, LineReader, PROMPTLY};

const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.setdefault(s.name, []).append([s.labels, s.value])
print(json.dumps(out))
"#;

/// Whether Debian's Python with prometheus_client is here (else a failure, or a listed skip). Its path is Debian's own: a `python3` earlier on PATH
/// (pyenv, a venv) lacks the package that `.ci/run` installs.
pub fn parser_available() -> bool {
    let ok = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        super::cannot_run(
            "Debian's python3 lacks prometheus_client (apt-get install python3-prometheus-client)",
        );
    }
    ok
}

/// GET /metrics, as a scraper does; the body.
pub fn scrape(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: application/openmetrics-text\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    body.to_string()
}

pub type Samples = BTreeMap<String, Vec<(BTreeMap<String, String>, f64)>>;

/// The scraped text through the strict OpenMetrics parser.
pub fn parse(text: &str) -> Samples {
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = finish_within(child, PROMPTLY);
    assert!(o.status.success(), "parser: {}\n{text}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

pub fn one(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .iter()
        .find(|(l, _)| {
            labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {name} with {labels:?}"))
        .1
}

/// The command with `--prometheus 127.0.0.1:0 --linger`, started: the child (killed if the
/// test fails), its stderr lines, and the address it said it serves on.
pub fn serving(mut cmd: std::process::Command) -> (crate::util::KillOnDrop, LineReader, String) {
    let mut child = cmd
        .args(["--prometheus", "127.0.0.1:0", "--linger"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = LineReader::new(child.stderr.take().unwrap());
    let line = err.wait_for("live metrics on http://", PROMPTLY);
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap()
        .to_string();
    (crate::util::KillOnDrop::new(child), err, addr)
}
