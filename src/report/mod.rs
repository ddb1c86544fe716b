//! Reports: one [`Report`] trait, one implementation per layout. Reporters read a
//! [`RunResult`] and write to any `Write`; they never print on their own and never reach into
//! the engine.

mod ab;
mod charts;
mod compare;
mod html;
mod markdown;
mod sweep;
mod text;
mod units;
mod wrk;

use std::io::{self, Write};

pub use ab::AbReport;
pub use compare::ComparisonReport;
pub use html::{Chart, HtmlDoc, HtmlReport};
pub use markdown::MarkdownReport;
pub use sweep::SweepReport;
pub use text::{ports_note, TextReport};
pub use units::{bytes_iec, grouped, slo_figure, wrk_time_us};
pub use wrk::WrkReport;

use crate::stats::RunResult;

pub trait Report {
    fn write(&self, result: &RunResult, out: &mut dyn Write) -> io::Result<()>;
}

/// The result document itself, pretty-printed.
pub struct JsonReport;

impl Report for JsonReport {
    fn write(&self, result: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, result)?;
        writeln!(out)
    }
}

/// Writes `result` as JSON to `path` atomically (temporary file, then rename), so a reader
/// never sees half a document and an interrupted write never destroys an older one.
pub fn save_json(result: &RunResult, path: &std::path::Path) -> io::Result<()> {
    save_json_value(result, path)
}

/// [`save_json`] for any serializable document (comparisons too).
pub fn save_json_value<T: serde::Serialize>(doc: &T, path: &std::path::Path) -> io::Result<()> {
    save_atomic(path, |f| {
        serde_json::to_writer_pretty(&mut *f, doc)?;
        writeln!(f)
    })
}

/// Writes a file atomically (temporary file, then rename; its directory made if need be).
pub fn save_atomic(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut f)?;
        f.flush()?;
        f.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// One line per objective: the condition, the figure measured, pass or FAIL.
pub fn write_slo(
    label: &str,
    o: &crate::stats::SloOutcome,
    out: &mut dyn io::Write,
) -> io::Result<()> {
    for c in &o.conditions {
        let measured = c
            .measured
            .map_or("nothing to measure".to_string(), |v| slo_figure(v, &c.unit));
        let verdict = if c.passed { "pass" } else { "FAIL" };
        writeln!(
            out,
            "  {label:<10} {:<16} {measured:>14}  {verdict}",
            c.condition
        )?;
    }
    Ok(())
}
