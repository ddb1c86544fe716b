//! `archbench merge`: runs of several machines (or parts) as one, exactly.

use std::time::SystemTime;

use anyhow::Context as _;

use crate::cli::args::MergeArgs;
use crate::cli::flags::Format;
use crate::cli::output::OutputPlan;

pub fn cmd_merge(a: &MergeArgs) -> anyhow::Result<i32> {
    use crate::stats::{Merger, NamedResult};
    const WANTED: &str = "merge takes run results (the --json of run, wrk, ab or merge)";
    let outputs = OutputPlan::new(
        &a.output,
        "merge",
        &[Format::Json, Format::Markdown, Format::Html],
    )?
    .not_replacing(&a.files)?;
    // Two passes, so memory holds one source's histograms at a time: every file is read and
    // checked first (a refusal comes before any merging) and its start noted; then each is
    // read again and merged. What cannot be read twice (a pipe, `<(ssh … cat r.json)`) is
    // kept as text from the first pass.
    let mut earliest = None;
    let mut kept: Vec<Option<String>> = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let text = crate::document::read_text(f)?;
        let r = crate::document::read_result_text(f, &text, WANTED)?;
        let at = crate::stats::started_at(&f.display().to_string(), &r.started_at)?;
        earliest = Some(earliest.map_or(at, |e: SystemTime| e.min(at)));
        let regular = std::fs::metadata(f).is_ok_and(|m| m.is_file());
        kept.push((!regular).then_some(text));
    }
    let mut merger = Merger::new(earliest.context("no file to merge")?);
    for (f, text) in a.files.iter().zip(kept) {
        let text = match text {
            Some(t) => t,
            None => crate::document::read_text(f)?,
        };
        merger.add(NamedResult {
            file: f.display().to_string(),
            result: crate::document::read_result_text(f, &text, WANTED)?,
        })?;
    }
    let mut merged = merger.finish()?;
    for note in merge_notes(&merged.sources) {
        // The notes quote the documents' URLs: escaped, as the report does.
        crate::stderr_line!(
            "archbench: note: {}",
            crate::printable::escape_controls(&note)
        );
    }
    merged.limiter = crate::monitor::limiter(&merged);
    outputs.write(&merged)?;
    Ok(0)
}

/// What looks wrong about a merge's sources: another URL than the first's, the same run
/// twice, sources that never ran at the same time. A few lines, however many sources.
fn merge_notes(sources: &[crate::stats::SourceRun]) -> Vec<String> {
    const SHOWN: usize = 3;
    let mut notes = Vec::new();
    let Some(first) = sources.first() else {
        return notes;
    };
    if let Some(other) = sources
        .iter()
        .find(|s| !crate::stats::same_load(&s.plan, &first.plan))
    {
        // The protocol is named only when it is what differs (else the two loads would read
        // alike).
        let by_version = other.plan.http_version != first.plan.http_version;
        let load = |p: &crate::stats::PlanSummary| match by_version {
            true => format!("{} {} over {}", p.method, p.url, p.http_version),
            false => format!("{} {}", p.method, p.url),
        };
        notes.push(format!(
            "{} loaded {}, not {} as {} did; merged anyway",
            other.file,
            load(&other.plan),
            load(&first.plan),
            first.file
        ));
    }
    // Different parts of one load are never the same run, however alike their counts (an
    // open loop split evenly gives each part the same).
    type Run<'a> = (&'a str, &'a str, u64, Option<u32>);
    let mut same: std::collections::BTreeMap<Run, Vec<&str>> = std::collections::BTreeMap::new();
    for s in sources {
        let part = s.plan.part.as_ref().map(|p| p.index);
        same.entry((
            &s.environment.hostname,
            &s.started_at,
            s.totals.requests,
            part,
        ))
        .or_default()
        .push(&s.file);
    }
    let twice: Vec<&Vec<&str>> = same.values().filter(|files| files.len() > 1).collect();
    for files in twice.iter().take(SHOWN) {
        let more = match files.len() {
            2 => String::new(),
            n => format!(" (and {} more)", n - 2),
        };
        notes.push(format!(
            "{} and {}{more} look like the same run (same host, start and count): merged twice?",
            files[0], files[1]
        ));
    }
    if twice.len() > SHOWN {
        notes.push(format!(
            "{} more groups of sources look like the same run",
            twice.len() - SHOWN
        ));
    }
    notes.extend(part_notes(sources));
    // Sources that never ran at the same time do not make one load.
    let latest_start = sources.iter().map(|s| s.start_offset_s).fold(0.0, f64::max);
    let earliest_end = sources
        .iter()
        .map(|s| s.start_offset_s + s.totals.elapsed_s)
        .fold(f64::INFINITY, f64::min);
    if latest_start > earliest_end {
        notes.push(format!(
            "the sources did not all run at the same time (one started {latest_start:.1} s after the first, after another had ended); the merged rate and series mix different times"
        ));
    }
    notes
}

/// Parts of one load (`run --part I/N`) merge into it only when every part is there and
/// nothing else is: what is missing or mixed in, in a line each (a part given twice is the
/// "same run" note's).
fn part_notes(sources: &[crate::stats::SourceRun]) -> Vec<String> {
    const SHOWN: usize = 3;
    let parts: Vec<&crate::stats::PartSummary> = sources
        .iter()
        .filter_map(|s| s.plan.part.as_ref())
        .collect();
    let Some(first) = parts.first() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    let whole = sources.len() - parts.len();
    if whole > 0 {
        notes.push(format!(
            "{} of the {} sources are parts of a load (--part), {whole} not; merged anyway",
            parts.len(),
            sources.len()
        ));
    }
    let count = first.count;
    if parts.iter().any(|p| p.count != count) {
        notes.push("the parts come from loads split differently (--part I/N with different N); merged anyway".to_string());
        return notes;
    }
    let whole_load = |p: &crate::stats::PartSummary| (p.connections, p.rate, p.requests);
    if let Some(other) = parts.iter().find(|p| whole_load(p) != whole_load(first)) {
        let describe = |p: &crate::stats::PartSummary| {
            let rate = p.rate.map(|r| format!(" at {r} req/s")).unwrap_or_default();
            let count = p
                .requests
                .map(|n| format!(", {n} requests"))
                .unwrap_or_default();
            format!("{} connections{rate}{count}", p.connections)
        };
        notes.push(format!(
            "the parts come from different loads (part {}/{count} of {}, part {}/{count} of {}); merged anyway",
            first.index,
            describe(first),
            other.index,
            describe(other)
        ));
    }
    let missing: Vec<u32> = (0..count)
        .filter(|i| !parts.iter().any(|p| p.index == *i))
        .collect();
    if !missing.is_empty() {
        let shown: Vec<String> = missing[..missing.len().min(SHOWN)]
            .iter()
            .map(|i| format!("{i}/{count}"))
            .collect();
        let shown = shown.join(", ");
        let more = match missing.len() {
            n if n > SHOWN => format!(" and {} more", n - SHOWN),
            _ => String::new(),
        };
        notes.push(format!(
            "part {shown}{more} missing: the merge holds {} of the {count} parts of the load; merged anyway",
            count as usize - missing.len()
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(file: String, host: &str) -> crate::stats::SourceRun {
        crate::stats::SourceRun {
            file,
            started_at: "2026-12-01T00:00:00.000000Z".into(),
            first_send_at: None,
            start_offset_s: 0.0,
            plan: crate::stats::PlanSummary::default(),
            environment: crate::stats::Environment {
                hostname: host.into(),
                ..Default::default()
            },
            totals: crate::stats::Totals::default(),
            interrupted: false,
            client: crate::stats::ClientUsage::default(),
            limiter: crate::stats::Limiter {
                side: crate::stats::LimiterSide::Unknown,
                reason: String::new(),
            },
            pacing: None,
        }
    }

    /// Part `index` of `count`, run on a host of its own.
    fn part(index: u32, count: u32) -> crate::stats::SourceRun {
        let mut s = source(format!("p{index}"), &format!("pod-{index}"));
        s.plan.part = Some(crate::stats::PartSummary {
            index,
            count,
            connections: 2,
            requests: None,
            rate: None,
        });
        s
    }

    #[test]
    fn a_missing_or_mixed_part_is_said() {
        assert!(merge_notes(&[part(0, 2), part(1, 2)]).is_empty());
        assert_eq!(
            merge_notes(&[part(0, 2)]),
            ["part 1/2 missing: the merge holds 1 of the 2 parts of the load; merged anyway"]
        );
        let mixed = merge_notes(&[part(0, 1), source("whole".into(), "laptop")]);
        assert_eq!(
            mixed,
            ["1 of the 2 sources are parts of a load (--part), 1 not; merged anyway"]
        );
        let many = merge_notes(&[part(0, 10)]);
        assert_eq!(
            many,
            ["part 1/10, 2/10, 3/10 and 6 more missing: the merge holds 1 of the 10 parts of the load; merged anyway"]
        );
    }

    #[test]
    fn merge_notes_stay_a_few_lines_however_many_sources() {
        // 1,000 distinct workers: nothing to say.
        let distinct: Vec<_> = (0..1000)
            .map(|i| source(format!("w{i}"), &format!("pod-{i}")))
            .collect();
        assert!(merge_notes(&distinct).is_empty());
        // 1,000 copies of one run from 10 hosts: 3 groups named, the rest counted.
        let copies: Vec<_> = (0..1000)
            .map(|i| source(format!("w{i}"), &format!("pod-{}", i % 10)))
            .collect();
        let notes = merge_notes(&copies);
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert_eq!(
            notes[0],
            "w0 and w10 (and 98 more) look like the same run (same host, start and count): merged twice?"
        );
        assert_eq!(notes[3], "7 more groups of sources look like the same run");
    }
}
