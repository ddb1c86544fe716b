//! Reading stored documents (`--json` files): the kind decides the type, the version must be
//! one this build reads, and any failure is one sentence naming the file. Writing lives with
//! the reports (`report::save_json_value`), which read these documents: the arrow runs from there
//! to here.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::compare::{
    ComparisonResult, COMPARISON_KIND, COMPARISON_SCHEMA_VERSION, READABLE_COMPARISON_VERSIONS,
};
use crate::stats::{RunResult, READABLE_RESULT_VERSIONS, RESULT_KIND, RESULT_SCHEMA_VERSION};
use crate::sweep::{SweepResult, READABLE_SWEEP_VERSIONS, SWEEP_KIND, SWEEP_SCHEMA_VERSION};

/// The kinds of document archbench writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// One run (`run`, `wrk`, `ab`, `merge` with `--json`).
    Result,
    /// A comparison (`compare --json`, `demo`).
    Comparison,
    /// A sweep (`sweep --json`).
    Sweep,
}

impl DocumentKind {
    fn from_name(name: &str) -> Option<DocumentKind> {
        match name {
            RESULT_KIND => Some(DocumentKind::Result),
            COMPARISON_KIND => Some(DocumentKind::Comparison),
            SWEEP_KIND => Some(DocumentKind::Sweep),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DocumentKind::Result => RESULT_KIND,
            DocumentKind::Comparison => COMPARISON_KIND,
            DocumentKind::Sweep => SWEEP_KIND,
        }
    }

    fn readable(self) -> &'static [u32] {
        match self {
            DocumentKind::Result => &READABLE_RESULT_VERSIONS,
            DocumentKind::Comparison => &READABLE_COMPARISON_VERSIONS,
            DocumentKind::Sweep => &READABLE_SWEEP_VERSIONS,
        }
    }

    fn current(self) -> u32 {
        match self {
            DocumentKind::Result => RESULT_SCHEMA_VERSION,
            DocumentKind::Comparison => COMPARISON_SCHEMA_VERSION,
            DocumentKind::Sweep => SWEEP_SCHEMA_VERSION,
        }
    }
}

/// A stored document, typed by its kind.
#[derive(Debug)]
pub enum Document {
    Result(Box<RunResult>),
    Comparison(Box<ComparisonResult>),
    Sweep(Box<SweepResult>),
}

impl Document {
    pub fn kind(&self) -> DocumentKind {
        match self {
            Document::Result(_) => DocumentKind::Result,
            Document::Comparison(_) => DocumentKind::Comparison,
            Document::Sweep(_) => DocumentKind::Sweep,
        }
    }
}

/// A document that cannot be read. Always the user's to fix (a path, a file from elsewhere).
#[derive(Debug, Error)]
pub enum DocumentError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not JSON: {source}")]
    NotJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} is not an archbench document (kind {kind:?}; expected {RESULT_KIND:?}, {COMPARISON_KIND:?} or {SWEEP_KIND:?})")]
    UnknownKind { path: PathBuf, kind: String },
    #[error("{path} is an {kind} of schema_version {version}, which this archbench does not read (it reads {readable}; it writes {current}); use the archbench that wrote it")]
    UnknownVersion {
        path: PathBuf,
        kind: &'static str,
        version: String,
        readable: String,
        current: u32,
    },
    #[error("{path} is not a valid {kind}: {source}")]
    Invalid {
        path: PathBuf,
        kind: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} is not a valid {kind}: {why}")]
    Disagrees {
        path: PathBuf,
        kind: &'static str,
        /// Which figures, and how they disagree.
        why: String,
    },
    #[error("{path} is larger than {} MiB, far more than any document archbench writes; is it one?", MAX_DOCUMENT_BYTES >> 20)]
    TooLarge { path: PathBuf },
    #[error("{path} is not a valid {kind}: {field} {why}")]
    Figure {
        path: PathBuf,
        kind: &'static str,
        /// Where in the document, as `targets[0].runs[1].totals.elapsed_s`.
        field: String,
        why: String,
    },
    #[error("{path} is an {found}; {wanted}")]
    WrongKind {
        path: PathBuf,
        found: &'static str,
        wanted: &'static str,
    },
}

/// Reads the document at `path`.
pub fn read(path: &Path) -> Result<Document, DocumentError> {
    read_checked(path, &read_text(path)?, None)
}

/// Reads a run result, refusing other kinds (before reading them further) with `wanted` as
/// the advice.
pub fn read_result(path: &Path, wanted: &'static str) -> Result<RunResult, DocumentError> {
    let text = read_text(path)?;
    read_result_text(path, &text, wanted)
}

/// Largest document read, in bytes: far beyond what archbench writes (a run's document is
/// about a MiB per hour of latency series; a 1,000-run comparison of such runs stays below),
/// and a bound on what a file, or `/dev/zero`, can make a reader hold.
pub const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// The text of the document at `path`, refused past [`MAX_DOCUMENT_BYTES`] (read up to one
/// byte more, so a device or a pipe that never ends is refused too).
pub fn read_text(path: &Path) -> Result<String, DocumentError> {
    use std::io::Read as _;
    let io = |source| DocumentError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let too_large = || DocumentError::TooLarge {
        path: path.to_path_buf(),
    };
    // A regular file says its size: refused without reading it.
    if file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() > MAX_DOCUMENT_BYTES)
    {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text ({e})"),
        ))
    })
}

/// A run result from its text (read from `path`), as [`read_result`].
pub fn read_result_text(
    path: &Path,
    text: &str,
    wanted: &'static str,
) -> Result<RunResult, DocumentError> {
    match read_checked(path, text, Some((DocumentKind::Result, wanted)))? {
        Document::Result(r) => Ok(*r),
        other => Err(DocumentError::WrongKind {
            path: path.to_path_buf(),
            found: other.kind().name(),
            wanted,
        }),
    }
}

/// Reads a document: its kind first, then its version, then (only if both are right, and
/// the kind is the one `expected`) the whole of it.
fn read_checked(
    path: &Path,
    text: &str,
    expected: Option<(DocumentKind, &'static str)>,
) -> Result<Document, DocumentError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|source| DocumentError::NotJson {
            path: path.to_path_buf(),
            source,
        })?;
    let name = value["kind"].as_str().unwrap_or_default();
    let kind = DocumentKind::from_name(name).ok_or_else(|| DocumentError::UnknownKind {
        path: path.to_path_buf(),
        kind: name.to_string(),
    })?;
    if let Some((_, wanted)) = expected.filter(|(want, _)| *want != kind) {
        return Err(DocumentError::WrongKind {
            path: path.to_path_buf(),
            found: kind.name(),
            wanted,
        });
    }
    let version = &value["schema_version"];
    if !version
        .as_u64()
        .is_some_and(|v| kind.readable().iter().any(|&r| u64::from(r) == v))
    {
        return Err(DocumentError::UnknownVersion {
            path: path.to_path_buf(),
            kind: kind.name(),
            version: version.to_string(),
            readable: kind
                .readable()
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            current: kind.current(),
        });
    }
    if let Err((field, why)) = check_figures(&value, &mut String::new()) {
        return Err(DocumentError::Figure {
            path: path.to_path_buf(),
            kind: kind.name(),
            field,
            why,
        });
    }
    let invalid = |source| DocumentError::Invalid {
        path: path.to_path_buf(),
        kind: kind.name(),
        source,
    };
    let doc = match kind {
        DocumentKind::Result => Document::Result(serde_json::from_value(value).map_err(invalid)?),
        DocumentKind::Comparison => {
            Document::Comparison(serde_json::from_value(value).map_err(invalid)?)
        }
        DocumentKind::Sweep => Document::Sweep(serde_json::from_value(value).map_err(invalid)?),
    };
    // Figures in range may still contradict each other (status codes that do not add up
    // to the requests): a report of them would say both.
    let agreed = match &doc {
        Document::Result(r) => r.check_figures(),
        Document::Comparison(c) => c.check_figures(),
        Document::Sweep(s) => s.check_figures(),
    };
    agreed.map_err(|why| DocumentError::Disagrees {
        path: path.to_path_buf(),
        kind: kind.name(),
        why,
    })?;
    Ok(doc)
}

/// Largest figure a document may hold, in any unit: far beyond what a run measures (10^18
/// bytes is an exabyte), and within what every report prints exactly. The schemas say so
/// as each number's `maximum` (and `minimum` where it may be negative).
pub const MAX_FIGURE: f64 = 1e18;

/// The figures the schemas let go below zero (a relative difference, a fitted curve's
/// figures, an objective's measure), as the end of their path without indices. Every other
/// number in a document is a count, a duration, a rate, a size or a share: never negative.
const SIGNED_FIGURES: [&str; 15] = [
    "lost_sources.rate",
    "conditions.measured",
    "metrics.targets.median",
    "metrics.targets.min",
    "metrics.targets.max",
    "versus_baseline.relative",
    "versus_baseline.ci_low",
    "versus_baseline.ci_high",
    "points.server_cores",
    "points.requests_per_server_cpu_s",
    "targets.knee",
    "stopped.after",
    "usl.r_squared",
    "usl.peak_concurrency",
    "usl.peak_throughput",
];

/// Checks every figure of a document before it is read into its types (which would take a
/// negative duration, a status "abc" or 1e308 req/s and print them): numbers within
/// [`MAX_FIGURE`], negative only where [`SIGNED_FIGURES`] says, status codes three digits
/// from 100 to 999. `at` is the path so far; the error is the field's and why.
fn check_figures(value: &serde_json::Value, at: &mut String) -> Result<(), (String, String)> {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            let v = n.as_f64().unwrap_or(f64::INFINITY);
            let shown = crate::units::typed_number(v);
            if !v.is_finite() || v.abs() > MAX_FIGURE {
                return Err((
                    at.clone(),
                    format!("is {shown}: larger than any figure archbench stores ({MAX_FIGURE:e})"),
                ));
            }
            if v < 0.0 && !signed(at) {
                return Err((
                    at.clone(),
                    format!("is {shown}: below zero, which it never is"),
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                check_figures(item, at)?;
                at.truncate(len);
            }
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(name);
                if name == "status_codes" {
                    check_status_codes(field, at)?;
                }
                check_figures(field, at)?;
                at.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
    Ok(())
}

/// Whether the field at `at` may be negative: its path, indices left out, ends with one of
/// [`SIGNED_FIGURES`].
fn signed(at: &str) -> bool {
    let mut bare = String::with_capacity(at.len());
    let mut in_index = false;
    for c in at.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => bare.push(c),
            _ => {}
        }
    }
    SIGNED_FIGURES
        .iter()
        .any(|s| bare == *s || bare.ends_with(&format!(".{s}")))
}

/// A `status_codes` object's keys: HTTP status codes, three digits from 100 to 999.
fn check_status_codes(codes: &serde_json::Value, at: &str) -> Result<(), (String, String)> {
    let Some(codes) = codes.as_object() else {
        return Ok(());
    };
    for code in codes.keys() {
        let valid = code.len() == 3
            && code.bytes().all(|b| b.is_ascii_digit())
            && code.parse::<u16>().is_ok_and(|c| (100..=999).contains(&c));
        if !valid {
            return Err((
                at.to_string(),
                format!("has {code:?}: a status code is three digits from 100 to 999"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every property a schema lets go below zero, as the names leading to it.
    fn signed_in_schema(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        let Some(obj) = v.as_object() else {
            if let Some(items) = v.as_array() {
                for i in items {
                    signed_in_schema(i, path, out);
                }
            }
            return;
        };
        if obj
            .get("minimum")
            .and_then(serde_json::Value::as_f64)
            .is_some_and(|m| m < 0.0)
        {
            out.push(path.join("."));
        }
        for (k, child) in obj {
            if k == "properties" {
                for (name, prop) in child.as_object().into_iter().flatten() {
                    path.push(name.clone());
                    signed_in_schema(prop, path, out);
                    path.pop();
                }
            } else {
                signed_in_schema(child, path, out);
            }
        }
    }

    #[test]
    fn the_signed_figures_are_the_ones_the_schemas_let_go_below_zero() {
        let mut in_schemas = Vec::new();
        for name in ["result", "comparison", "sweep"] {
            let file = format!("{}/schema/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
            let schema: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            signed_in_schema(&schema, &mut Vec::new(), &mut in_schemas);
        }
        for path in &in_schemas {
            assert!(
                signed(path),
                "{path} may be negative in a schema, not in SIGNED_FIGURES"
            );
        }
        for s in SIGNED_FIGURES {
            assert!(
                in_schemas
                    .iter()
                    .any(|p| p == s || p.ends_with(&format!(".{s}"))),
                "{s} is in SIGNED_FIGURES, negative in no schema: {in_schemas:?}"
            );
        }
    }

    fn figures(doc: serde_json::Value) -> Result<(), (String, String)> {
        check_figures(&doc, &mut String::new())
    }

    #[test]
    fn figures_out_of_range_are_named_by_their_path() {
        let bad = |doc, field: &str, says: &str| {
            let (at, why) = figures(doc).unwrap_err();
            assert_eq!(at, field);
            assert!(why.contains(says), "{why}");
        };
        bad(
            serde_json::json!({"totals": {"elapsed_s": -1.0}}),
            "totals.elapsed_s",
            "below zero",
        );
        bad(
            serde_json::json!({"targets": [{"runs": [{}, {"totals": {"requests_per_sec": 1e308}}]}]}),
            "targets[0].runs[1].totals.requests_per_sec",
            "is 1e308: larger than any figure",
        );
        for code in ["abc", "99", "1000", "0", "+20", "2 0"] {
            bad(
                serde_json::json!({"entries": [{"status_codes": {code: 1}}]}),
                "entries[0].status_codes",
                "three digits from 100 to 999",
            );
        }
        // What the schemas let be negative reads, wherever it is nested.
        let signed = serde_json::json!({
            "steps": [{"metrics": [{"targets": [{"median": -1.0, "min": -2.0, "max": -0.5,
                "versus_baseline": {"relative": -0.3, "ci_low": -0.4, "ci_high": -0.2}}]}]}],
            "targets": [{"knee": -1.0, "usl": {"r_squared": -3.0}}],
            "status_codes": {"200": 5, "999": 1, "100": 0},
            "lost_sources": [{"rate": -1.0}]
        });
        assert_eq!(figures(signed), Ok(()));
        // ... and only there: a "median" that is not a comparison metric's is not signed.
        bad(
            serde_json::json!({"latency": {"median": -1}}),
            "latency.median",
            "below zero",
        );
    }
}
