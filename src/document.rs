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
    #[error("{path} is not an archbench document (kind {kind:?}; expected {RESULT_KIND:?} or {COMPARISON_KIND:?})")]
    UnknownKind { path: PathBuf, kind: String },
    #[error("{path} is a {kind} of schema_version {version}, which this archbench does not read (it reads {readable}; it writes {current}); use the archbench that wrote it")]
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
    #[error("{path} is a {found}; {wanted}")]
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

/// The text of the document at `path`.
pub fn read_text(path: &Path) -> Result<String, DocumentError> {
    std::fs::read_to_string(path).map_err(|source| DocumentError::Io {
        path: path.to_path_buf(),
        source,
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
    let invalid = |source| DocumentError::Invalid {
        path: path.to_path_buf(),
        kind: kind.name(),
        source,
    };
    Ok(match kind {
        DocumentKind::Result => Document::Result(serde_json::from_value(value).map_err(invalid)?),
        DocumentKind::Comparison => {
            Document::Comparison(serde_json::from_value(value).map_err(invalid)?)
        }
        DocumentKind::Sweep => Document::Sweep(serde_json::from_value(value).map_err(invalid)?),
    })
}
