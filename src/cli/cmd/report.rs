//! `archbench report`: any stored document again, as text, Markdown, JSON, HTML or SVG: the
//! -o layout on stdout, the page (`--html`) and the charts (`--svg`) to files besides.

use crate::cli::args::ReportArgs;
use crate::cli::flags::Format;
use crate::cli::output::{check_html_outputs, checked_layout, write_as, write_html, write_stdout};

pub fn cmd_report(a: &ReportArgs) -> anyhow::Result<i32> {
    use crate::document::Document;
    use crate::report::HtmlDoc;
    check_html_outputs(a.html.html.as_deref(), a.svg.as_deref(), &a.files)?;
    let mut docs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        docs.push((f, crate::document::read(f)?));
    }
    let layout = checked_layout(
        a.layout.output,
        "report",
        &[Format::Json, Format::Markdown, Format::Html],
    )?;
    // The report in the -o layout reaches stdout, and the page and charts are written
    // besides (as every command's file flags add to its stdout), even when stdout is gone.
    let shown = docs
        .iter()
        .try_for_each(|(_, doc)| write_stdout(|out| write_as(doc, layout, out)));
    if a.html.html.is_some() || a.svg.is_some() {
        let html_docs: Vec<HtmlDoc> = docs
            .into_iter()
            .map(|(f, d)| match d {
                Document::Result(r) => {
                    let name = f.file_stem().map_or_else(
                        || f.display().to_string(),
                        |s| s.to_string_lossy().into_owned(),
                    );
                    HtmlDoc::Run(name, r)
                }
                Document::Comparison(c) => HtmlDoc::Comparison(c),
                Document::Sweep(s) => HtmlDoc::Sweep(s),
            })
            .collect();
        write_html(&html_docs, a.html.html.as_deref(), a.svg.as_deref())?;
    }
    shown?;
    Ok(0)
}
