//! One self-contained HTML file: inline SVG charts, an inline stylesheet, no script, no font
//! and nothing else fetched, so it opens offline and prints. Per document: runs (overlaid),
//! a comparison, or a sweep; each with its table (every figure also in a `data-value`
//! attribute holding the JSON's own number, so a reader or a test can check it), its charts
//! and what it ran against (plan, environment, server fingerprints).

use std::io::{self, Write};

use hdrhistogram::Histogram;

use super::charts::{self, Axis, Line, LineChart, Mark};
use super::Report;
use crate::compare::{ComparisonResult, TargetRuns};
use crate::stats::{step_covered, RunResult};
use crate::sweep::{LadderKind, StepFigures, SweepResult};
use crate::units::{grouped, grouped_rounded, wrk_time_us};

/// A document to report, as read.
pub enum HtmlDoc {
    /// A run, named (by its file).
    Run(String, Box<RunResult>),
    Comparison(Box<ComparisonResult>),
    Sweep(Box<SweepResult>),
}

/// One chart of the report: its id (the file name `--svg` writes), title and SVG.
pub struct Chart {
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// A section of the report before it is written: its heading, HTML body parts and charts.
struct Section {
    heading: String,
    /// A run, comparison or sweep stopped by a signal before its end: said beside the
    /// heading, as the text says "[INTERRUPTED]".
    interrupted: bool,
    table: String,
    charts: Vec<Chart>,
    about: String,
}

/// One document's HTML page, as a format of the one seam: what `report --html` writes for that
/// document alone (a run is named by its URL, there being no file name).
pub struct HtmlPage;

impl Report<RunResult> for HtmlPage {
    fn write(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let doc = HtmlDoc::Run(r.plan.url.clone(), Box::new(r.clone()));
        HtmlReport::new(&[doc])?.write(out)
    }
}

impl Report<ComparisonResult> for HtmlPage {
    fn write(&self, c: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        HtmlReport::new(&[HtmlDoc::Comparison(Box::new(c.clone()))])?.write(out)
    }
}

impl Report<SweepResult> for HtmlPage {
    fn write(&self, s: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
        HtmlReport::new(&[HtmlDoc::Sweep(Box::new(s.clone()))])?.write(out)
    }
}

/// The report of some documents, its charts drawn once for the page and `--svg` alike.
pub struct HtmlReport {
    sections: Vec<Section>,
}

impl HtmlReport {
    pub fn new(docs: &[HtmlDoc]) -> io::Result<HtmlReport> {
        Ok(HtmlReport {
            sections: sections(docs)?,
        })
    }

    /// Every chart the report holds.
    pub fn charts(&self) -> impl Iterator<Item = &Chart> {
        self.sections.iter().flat_map(|s| &s.charts)
    }

    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let sections = &self.sections;
        let title = sections
            .iter()
            .map(|s| s.heading.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        write!(
            out,
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>archbench: {}</title><style>{STYLE}</style></head><body>\n",
            esc(&title)
        )?;
        writeln!(
            out,
            "<header><h1>archbench report</h1><p>archbench {} — every figure below is in the JSON the report was made from.</p></header>",
            env!("CARGO_PKG_VERSION")
        )?;
        for (k, s) in sections.iter().enumerate() {
            writeln!(
                out,
                "<section id=\"section-{k}\"><h2>{}{}</h2>",
                esc(&s.heading),
                if s.interrupted { INTERRUPTED } else { "" }
            )?;
            out.write_all(s.table.as_bytes())?;
            for c in &s.charts {
                writeln!(
                    out,
                    "<figure class=\"chart\" id=\"{}\">{}<figcaption>{}</figcaption></figure>",
                    c.id,
                    strip_xml_declaration(&c.svg),
                    esc(&c.title)
                )?;
            }
            out.write_all(s.about.as_bytes())?;
            writeln!(out, "</section>")?;
        }
        writeln!(out, "</body></html>")
    }
}

/// The mark of a document cut short by a signal, beside its heading or a run's name.
const INTERRUPTED: &str = " <span class=\"fail interrupted\">INTERRUPTED</span>";

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:960px;color:#111}\
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .5em}\
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}\
figure.chart{margin:1.5em 0;page-break-inside:avoid}figure.chart svg{width:100%;height:auto}\
figcaption{font-size:.85em;color:#444}dl{font-size:.85em}dt{font-weight:bold;margin-top:.4em}\
code{font-size:.9em;word-break:break-all}pre.lines{font-size:.8em;white-space:pre-wrap}.pass{color:#060}.fail{color:#a00;font-weight:bold}\
@media print{body{max-width:none}}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn strip_xml_declaration(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// A numeric cell: the figure as read, with the JSON's number beside it.
fn num(text: &str, value: f64) -> String {
    format!(
        "<td class=\"num\" data-value=\"{value}\">{}</td>",
        esc(text)
    )
}

/// The cell of a figure that does not exist (a latency with no answer behind it).
const NO_FIGURE: &str = "<td class=\"num\">–</td>";

/// A cell of one latency figure; with nothing recorded there is no figure, and no value.
fn latency(l: &crate::stats::LatencySummary, us: u64) -> String {
    match l.recorded() {
        Some(_) => num(&wrk_time_us(us as f64), us as f64),
        None => NO_FIGURE.into(),
    }
}

/// A cell of a sweep step's latency figure, none when no run there got an answer.
fn step_latency(us: Option<f64>) -> String {
    us.map_or(NO_FIGURE.into(), |v| num(&wrk_time_us(v), v))
}

fn sections(docs: &[HtmlDoc]) -> io::Result<Vec<Section>> {
    let runs: Vec<(&str, &RunResult)> = docs
        .iter()
        .filter_map(|d| match d {
            HtmlDoc::Run(name, r) => Some((name.as_str(), r.as_ref())),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    if !runs.is_empty() {
        out.push(runs_section(&runs, out.len())?);
    }
    for d in docs {
        match d {
            HtmlDoc::Comparison(c) => out.push(comparison_section(c, out.len())?),
            HtmlDoc::Sweep(s) => out.push(sweep_section(s, out.len())?),
            HtmlDoc::Run(..) => {}
        }
    }
    Ok(out)
}

/// The spectrum of one or more runs' total latency merged (a target's runs of a comparison).
fn spectrum(runs: &[&RunResult]) -> Vec<(f64, f64)> {
    let mut all: Option<Histogram<u64>> = None;
    for r in runs {
        let h = &r.histograms.total.0;
        match &mut all {
            None => {
                // Growing as needed, so that a document with a wider range (another build or
                // tool) adds in instead of dropping out unsaid.
                let mut a = h.clone();
                a.auto(true);
                all = Some(a);
            }
            // Cannot fail on a histogram that grows.
            Some(a) => {
                let _ = a.add(h);
            }
        }
    }
    let Some(h) = all.filter(|h| !h.is_empty()) else {
        return Vec::new();
    };
    // Up to the nines the count supports (99.99% of 1,000 samples is noise).
    let max_nines = (h.len() as f64).log10().clamp(1.0, 6.0);
    let steps = 240;
    (0..=steps)
        .map(|i| {
            let nines = max_nines * f64::from(i) / f64::from(steps);
            let q = 1.0 - 10f64.powf(-nines);
            (nines, h.value_at_quantile(q) as f64)
        })
        .collect()
}

fn rate_axis(v: f64) -> String {
    grouped_rounded(v.max(0.0))
}

fn seconds_axis(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{v:.0}s")
    } else {
        format!("{v:.1}s")
    }
}

/// Answered requests per second over the run (a partial last step at its own length).
fn throughput_series(r: &RunResult) -> Vec<(f64, f64)> {
    per_step(r, |s, len| Some(s.completed as f64 / len))
}

/// A staged run's asked rate per step (`--stages`), where the throughput is drawn; empty for
/// a steady one.
fn target_series(r: &RunResult) -> Vec<(f64, f64)> {
    per_step(r, |s, _| s.target_rate)
}

/// A figure of each step of the run's series (given the step and the seconds of it the run
/// covered), at the middle of the time it covers.
fn per_step(
    r: &RunResult,
    figure: impl Fn(&crate::stats::SecondSample, f64) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let step = f64::from(r.series_step_s.max(1));
    r.series
        .iter()
        .filter_map(|s| {
            let len = step_covered(f64::from(s.second), step, r.totals.elapsed_s)?;
            Some((f64::from(s.second) + len / 2.0, figure(s, len)?))
        })
        .collect()
}

/// p99 of total latency per step of the run (from its latency series; empty for documents
/// of builds before it).
fn p99_series(r: &RunResult) -> Vec<(f64, f64)> {
    let step = f64::from(r.latency_step_s.max(1));
    r.latency_series
        .iter()
        .filter_map(|s| {
            // At the middle of the time the step covers (the last one ends with the run).
            let len = step_covered(f64::from(s.second), step, r.totals.elapsed_s)?;
            Some((f64::from(s.second) + len / 2.0, s.p99_us as f64))
        })
        .collect()
}

/// The charts of runs, one line per run or target: the percentile spectrum, throughput over
/// time and, when a line has points, p99 over time.
fn run_charts(
    k: usize,
    spectra: &[Line],
    throughput: &[Line],
    p99: &[Line],
) -> io::Result<Vec<Chart>> {
    let chart = |id: &str, caption: &str, c: LineChart| -> io::Result<Chart> {
        Ok(Chart {
            svg: charts::svg(&c)?,
            id: format!("chart-{k}-{id}"),
            title: caption.into(),
        })
    };
    let over_time = ("seconds into the run", Axis::Linear(seconds_axis));
    let mut out = vec![
        chart(
            "spectrum",
            "Latency by percentile (total latency; x: percentile on a log 'nines' axis)",
            LineChart::plain(
                "Latency percentile spectrum",
                ("percentile", Axis::Nines),
                ("latency", Axis::Log(wrk_time_us)),
                spectra,
            ),
        )?,
        chart(
            "throughput",
            "Answered requests per second, per second of the run (the first measured run of each; a last second the run covered less than a quarter of is left out; a run in stages also draws the rate it asked for, as NAME (asked))",
            LineChart::plain(
                "Throughput over time",
                over_time,
                ("req/s", Axis::Linear(rate_axis)),
                throughput,
            ),
        )?,
    ];
    if p99.iter().any(|l| !l.points.is_empty()) {
        out.push(chart(
            "p99",
            "99th percentile of total latency, per second of the run (the first measured run of each; each second's histogram is in the JSON's latency_series)",
            LineChart::plain(
                "p99 latency over time",
                over_time,
                ("p99 latency", Axis::Log(wrk_time_us)),
                p99,
            ),
        )?);
    }
    Ok(out)
}

fn runs_section(runs: &[(&str, &RunResult)], k: usize) -> io::Result<Section> {
    let mut table = String::from(
        "<table class=\"figures\"><tr><th>run</th><th>URL</th><th>req/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>errors</th><th>limiter</th></tr>\n",
    );
    for (name, r) in runs {
        let t = &r.latency.total;
        table.push_str(&format!(
            "<tr><td>{}{}</td><td><code>{}</code></td>{}{}{}{}{}{}{}<td>{}</td></tr>\n",
            esc(name),
            if r.interrupted { INTERRUPTED } else { "" },
            esc(&r.plan.url),
            num(
                &grouped_rounded(r.totals.requests_per_sec),
                r.totals.requests_per_sec
            ),
            latency(t, t.p50_us),
            latency(t, t.p90_us),
            latency(t, t.p99_us),
            latency(t, t.p99_9_us),
            latency(t, t.max_us),
            num(&grouped(r.totals.errors), r.totals.errors as f64),
            esc(&r.limiter.reason)
        ));
    }
    table.push_str("</table>\n");
    for (name, r) in runs {
        // Status codes, transfer, client CPU and pacing: the text report's own lines.
        table.push_str(&format!(
            "<pre class=\"lines\" data-run=\"{}\">{}\n{}</pre>\n",
            esc(name),
            esc(name),
            esc(&super::text::run_lines(r)?)
        ));
        table.push_str(&entries_table(name, r));
    }
    let named = |f: &dyn Fn(&RunResult) -> Vec<(f64, f64)>| -> Vec<Line> {
        runs.iter()
            .map(|(n, r)| Line {
                name: n.to_string(),
                points: f(r),
            })
            .collect()
    };
    // A staged run's asked rate beside what it achieved.
    let mut throughput = named(&throughput_series);
    throughput.extend(runs.iter().filter_map(|(n, r)| {
        let points = target_series(r);
        (!points.is_empty()).then(|| Line {
            name: format!("{n} (asked)"),
            points,
        })
    }));
    let charts = run_charts(
        k,
        &named(&|r| spectrum(&[r])),
        &throughput,
        &named(&p99_series),
    )?;
    let about = runs
        .iter()
        .map(|(n, r)| about_run(n, r))
        .collect::<Vec<_>>()
        .join("");
    Ok(Section {
        heading: format!(
            "Runs: {}",
            runs.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ),
        interrupted: runs.iter().any(|(_, r)| r.interrupted),
        table,
        charts,
        about,
    })
}

/// A request mix's entries of one run (none without a mix): requests, errors, latency,
/// status codes by entry.
fn entries_table(name: &str, r: &RunResult) -> String {
    if r.entries.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "<table class=\"figures\"><caption>{}: request mix</caption><tr><th>entry</th><th>request</th><th>weight</th><th>answered</th><th>errors</th><th>p50</th><th>p99</th><th>max</th><th>status codes</th></tr>\n",
        esc(name)
    );
    for e in &r.entries {
        let l = &e.latency;
        let codes: Vec<String> = e
            .status_codes
            .iter()
            .map(|(c, n)| format!("{c}: {}", grouped(*n)))
            .collect();
        t.push_str(&format!(
            "<tr><td>{}</td><td><code>{} {}</code></td>{}{}{}{}{}{}<td>{}</td></tr>\n",
            esc(&e.name),
            esc(&e.method),
            esc(&e.path),
            num(&e.weight.to_string(), e.weight as f64),
            num(&grouped(e.requests), e.requests as f64),
            num(&grouped(e.errors), e.errors as f64),
            latency(l, l.p50_us),
            latency(l, l.p99_us),
            latency(l, l.max_us),
            esc(&codes.join(", "))
        ));
    }
    t.push_str("</table>\n");
    t
}

/// Each target's command line, then the plan, environment and fingerprints of its first run.
fn about_comparison(heading: &str, c: &ComparisonResult) -> String {
    let mut about = format!("<dl class=\"about\"><dt>{}</dt>", esc(heading));
    for t in &c.targets {
        about.push_str(&format!(
            "<dd>{}: <code>{}</code></dd>",
            esc(&t.name),
            esc(&t.command)
        ));
    }
    about.push_str("</dl>\n");
    for t in &c.targets {
        if let Some(r) = t.runs.first() {
            about.push_str(&about_run(&t.name, r));
        }
    }
    about
}

/// Plan, environment, server fingerprints, pods and unmeasured ratios of one run.
fn about_run(name: &str, r: &RunResult) -> String {
    let p = &r.plan;
    let e = &r.environment;
    let mut s = format!(
        "<dl class=\"about\"><dt>{}</dt><dd><code>{} {}</code>, {} connections, {} threads, {}, {}</dd>\
         <dd>client: {} {}, {} cores, kernel {}, archbench {}</dd>",
        esc(name),
        esc(&p.method),
        esc(&p.url),
        p.connections,
        p.threads,
        match p.rate {
            Some(rate) => format!("open loop at {} req/s", grouped_rounded(rate)),
            None => "closed loop".into(),
        },
        match (p.duration_s, p.requests) {
            (Some(d), _) => format!("{d} s"),
            (None, Some(n)) => format!("{n} requests"),
            _ => String::new(),
        },
        esc(&e.arch),
        esc(&e.cpu_model),
        e.cores,
        esc(&e.kernel),
        esc(&e.archbench_version),
    );
    if let Some(q) = &r.quic {
        s.push_str(&format!(
            "<dd>QUIC: {}</dd>",
            esc(&super::text::quic_summary(q))
        ));
    }
    for srv in &r.servers {
        for line in srv.fingerprint.lines() {
            s.push_str(&format!(
                "<dd>server {}: {}</dd>",
                esc(&srv.label),
                esc(&line)
            ));
        }
        for w in &srv.fingerprint.warnings {
            s.push_str(&format!("<dd class=\"fail\">{}</dd>", esc(w)));
        }
        for p in &srv.pods {
            s.push_str(&format!(
                "<dd>server {}: {}</dd>",
                esc(&srv.label),
                esc(&super::pod_line(p))
            ));
        }
        if let Some(why) = srv.why_unmeasured(crate::stats::Figure::RequestsPerCpuS) {
            s.push_str(&format!(
                "<dd>server {}: no req per CPU-s: {}</dd>",
                esc(&srv.label),
                esc(why)
            ));
        }
    }
    s.push_str("</dl>\n");
    s
}

fn comparison_section(c: &ComparisonResult, k: usize) -> io::Result<Section> {
    let mut table = comparison_table(c);
    table.push_str(&comparison_slo_and_cost(c));
    Ok(Section {
        heading: format!(
            "Comparison: {}",
            c.targets
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(" vs ")
        ),
        interrupted: c.interrupted,
        table,
        charts: comparison_charts(c, k)?,
        about: about_comparison("Reproduce", c),
    })
}

/// The metrics table of a comparison: a row per metric, a column per target (median
/// [min..max]), then the differences against the baseline.
fn comparison_table(c: &ComparisonResult) -> String {
    let mut table = String::from("<table class=\"figures comparison\"><tr><th>metric</th>");
    for (i, t) in c.targets.iter().enumerate() {
        let base = if i == 0 { " (baseline)" } else { "" };
        table.push_str(&format!("<th>{}{base}</th>", esc(&t.name)));
    }
    table.push_str("<th>vs baseline</th></tr>\n");
    for m in &c.metrics {
        // The figures carry MiB and MiB/s themselves: "(B/s)" over them misled.
        table.push_str(&format!(
            "<tr><th>{}</th>",
            esc(&super::compare::metric_label(m))
        ));
        for t in &m.targets {
            match (t.median, t.min, t.max) {
                (Some(med), Some(lo), Some(hi)) => table.push_str(&num(
                    &format!(
                        "{} [{}..{}]",
                        crate::units::metric_figure(med, &m.unit),
                        crate::units::metric_figure(lo, &m.unit),
                        crate::units::metric_figure(hi, &m.unit)
                    ),
                    med,
                )),
                _ => table.push_str("<td>–</td>"),
            }
        }
        let deltas: Vec<String> = m
            .targets
            .iter()
            .skip(1)
            .filter_map(|t| Some(format!("{}: {}", t.name, super::compare::delta_text(t)?)))
            .collect();
        table.push_str(&format!("<td>{}</td></tr>\n", esc(&deltas.join("; "))));
    }
    table.push_str("</table>\n");
    table
}

/// A paragraph per SLO condition of each target (measured, pass or FAIL) and per priced
/// target (a million requests at its median throughput, against the first priced one's).
fn comparison_slo_and_cost(c: &ComparisonResult) -> String {
    let mut html = String::new();
    for t in &c.slo {
        for cond in &t.outcome.conditions {
            let (class, verdict) = if cond.passed {
                ("pass", "pass")
            } else {
                ("fail", "FAIL")
            };
            html.push_str(&format!(
                "<p>SLO {}: {} measured {} — <span class=\"{class}\">{verdict}</span></p>\n",
                esc(&t.name),
                esc(&cond.condition),
                esc(&super::condition_figure(cond))
            ));
        }
    }
    html.push_str(&placement_paragraphs(
        &c.placements,
        &c.scaling,
        "at the median",
    ));
    for cost in &c.cost {
        html.push_str(&format!(
            "<p>Cost {}</p>\n",
            esc(&super::compare::cost_sentence(c, cost))
        ));
    }
    html
}

/// "Ran on" and "Scaling" paragraphs, the efficiency's exact figure in `data-value`.
fn placement_paragraphs(
    placements: &[crate::placement::Placement],
    scaling: &[crate::placement::Scaling],
    at: &str,
) -> String {
    let mut html = String::new();
    for (label, line) in super::placement_lines(placements, &[], at) {
        html.push_str(&format!("<p>{label} {}</p>\n", esc(&line)));
    }
    for s in scaling {
        html.push_str(&format!(
            "<p class=\"scaling\" data-value=\"{}\">Scaling {}</p>\n",
            s.efficiency.map_or("null".into(), |e| e.to_string()),
            esc(&s.describe(at))
        ));
    }
    html
}

/// A comparison's charts: each target's spectrum over its judged runs, and its first
/// measured run's throughput and p99 over time.
fn comparison_charts(c: &ComparisonResult, k: usize) -> io::Result<Vec<Chart>> {
    let per_target = |f: &dyn Fn(&TargetRuns) -> Vec<(f64, f64)>| -> Vec<Line> {
        c.targets
            .iter()
            .map(|t| Line {
                name: t.name.clone(),
                points: f(t),
            })
            .collect()
    };
    let spectra = per_target(&|t| spectrum(&t.judged().collect::<Vec<_>>()));
    // Over time: each target's first measured run.
    let over_time = per_target(&|t| t.runs.first().map(throughput_series).unwrap_or_default());
    let p99_over_time = per_target(&|t| t.runs.first().map(p99_series).unwrap_or_default());
    run_charts(k, &spectra, &over_time, &p99_over_time)
}

/// One target's table of a sweep: a row per load (with the watched servers' columns when
/// any step has them), then its knee, early stop and USL fit.
fn sweep_target_table(t: &crate::sweep::TargetSweep, load_title: &str) -> String {
    let mut table = String::new();
    // The watched servers' columns, as the text report has them, when any step has them.
    let watched = t.points.iter().any(|p| p.server_cores.is_some());
    table.push_str(&format!(
        "<h3>{}</h3><table class=\"figures sweep\" data-target=\"{}\"><tr><th>{load_title}</th><th>req/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>errors %</th>{}<th>SLO</th></tr>\n",
        esc(&t.name),
        esc(&t.name),
        if watched {
            "<th>server cores</th><th>req/server CPU-s</th><th>server memory</th>"
        } else {
            ""
        }
    ));
    for p in &t.points {
        let servers = if watched {
            let cores = p
                .server_cores
                .map_or("<td>–</td>".into(), |c| num(&format!("{c:.2}"), c));
            let per_cpu = p
                .requests_per_server_cpu_s
                .map_or("<td>not measurable</td>".into(), |r| {
                    num(&grouped_rounded(r), r)
                });
            let memory = p.server_memory_bytes.map_or("<td>–</td>".into(), |b| {
                num(&crate::units::bytes_iec(b), b)
            });
            format!("{cores}{per_cpu}{memory}")
        } else {
            String::new()
        };
        table.push_str(&format!(
            "<tr>{}{}{}{}{}{}{}{servers}<td>{}</td></tr>\n",
            num(&grouped_rounded(p.load), p.load),
            num(&grouped_rounded(p.requests_per_sec), p.requests_per_sec),
            step_latency(p.p50_us),
            step_latency(p.p90_us),
            step_latency(p.p99_us),
            step_latency(p.p99_9_us),
            num(&format!("{:.2}", p.error_percent), p.error_percent),
            match p.slo_passed {
                Some(true) => "<span class=\"pass\">pass</span>",
                Some(false) => "<span class=\"fail\">FAIL</span>",
                None => "–",
            }
        ));
    }
    table.push_str("</table>\n");
    if let Some(note) = super::sweep::cut_short_note(t) {
        table.push_str(&format!("<p class=\"fail\">{}</p>\n", esc(&note)));
    }
    table.push_str(&format!("<p>Knee: {}</p>\n", esc(&t.knee_reason)));
    if let Some(cost) = super::sweep::cost_line(t) {
        table.push_str(&format!("<p>Cost {}</p>\n", esc(&cost)));
    }
    if let Some(stop) = &t.stopped {
        table.push_str(&format!(
            "<p>Stopped after {} {load_title}: {}</p>\n",
            super::sweep::load_text(stop.after),
            esc(&stop.reason)
        ));
    }
    match (&t.usl, &t.usl_refused) {
        (Some(f), _) => table.push_str(&format!(
            "<p>USL: σ = {:.4}, κ = {:.6}, λ = {} req/s per connection{}, R² = {:.3}</p>\n",
            f.sigma,
            f.kappa,
            grouped_rounded(f.lambda),
            f.peak_concurrency
                .map(|n| format!(", throughput peaks at {n:.0} connections"))
                .unwrap_or_default(),
            f.r_squared
        )),
        (None, Some(why)) => table.push_str(&format!("<p>USL: {}</p>\n", esc(why))),
        (None, None) => {}
    }
    table
}

fn sweep_section(s: &SweepResult, k: usize) -> io::Result<Section> {
    let load_title = s.ladder.unit();
    let mut table = String::new();
    for t in &s.targets {
        table.push_str(&sweep_target_table(t, load_title));
        // `--find-max`: the search's answer, under the table of its probes.
        if let Some(m) = s.find_max.iter().find(|m| m.name == t.name) {
            table.push_str(&format!("<p>Find max: {}</p>\n", esc(&m.verdict)));
        }
    }
    table.push_str(&placement_paragraphs(
        &s.placements,
        &s.scaling,
        "at the knee",
    ));
    for line in super::sweep::per_dollar(s) {
        table.push_str(&format!("<p>Per dollar {}</p>\n", esc(&line)));
    }
    let about = s
        .steps
        .first()
        .map(|step| about_comparison("Reproduce one step", &step.comparison))
        .unwrap_or_default();
    Ok(Section {
        heading: format!(
            "Sweep of {}: {} {}",
            s.targets
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            load_title,
            s.loads
                .iter()
                .map(|&l| grouped_rounded(l))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        interrupted: s.interrupted,
        table,
        charts: sweep_charts(s, k)?,
        about,
    })
}

/// Where a step lies on a sweep's chart (nowhere without the figure, e.g. no p99).
type StepPoint = fn(&StepFigures) -> Option<(f64, f64)>;

/// A sweep's two charts: throughput against load (knees marked, USL fits dotted) and p99
/// against throughput (knees marked, the SLO's p99 dashed).
fn sweep_charts(s: &SweepResult, k: usize) -> io::Result<Vec<Chart>> {
    let by_load: StepPoint = |p| Some((p.load, p.requests_per_sec));
    // A step with no answer has no p99 to place.
    let by_rps: StepPoint = |p| Some((p.requests_per_sec, p.p99_us?));
    let load_axis = match s.ladder {
        LadderKind::Connections => Axis::Log2(|v| format!("{v:.0}")),
        LadderKind::Rates => Axis::Linear(rate_axis),
    };
    let mut charts = vec![
        Chart {
            svg: charts::svg(&LineChart {
                title: "Throughput against load",
                x_title: s.ladder.unit(),
                y_title: "req/s answered",
                x: load_axis,
                y: Axis::Linear(rate_axis),
                lines: &sweep_curves(s, by_load),
                fits: &usl_fits(s),
                marks: &sweep_knees(s, by_load),
                threshold: None,
            })?,
            id: format!("chart-{k}-throughput-vs-load"),
            title: "Answered req/s at each load (medians), knees marked, USL fits dotted".into(),
        },
        Chart {
            svg: charts::svg(&LineChart {
                title: "p99 latency against throughput",
                x_title: "req/s answered",
                y_title: "p99 latency",
                x: Axis::Linear(rate_axis),
                y: Axis::Log(wrk_time_us),
                lines: &sweep_curves(s, by_rps),
                fits: &[],
                marks: &sweep_knees(s, by_rps),
                threshold: slo_p99(s),
            })?,
            id: format!("chart-{k}-p99-vs-throughput"),
            title: "p99 at each step's throughput (medians), knees marked, the SLO's p99 dashed"
                .into(),
        },
    ];
    // Where the servers (pods) were watched: what a request costs them, against load.
    let per_cpu: Vec<Line> = s
        .targets
        .iter()
        .map(|t| Line {
            name: t.name.clone(),
            points: t
                .points
                .iter()
                .filter_map(|p| Some((p.load, p.requests_per_server_cpu_s?)))
                .collect(),
        })
        .filter(|l| !l.points.is_empty())
        .collect();
    if !per_cpu.is_empty() {
        charts.push(Chart {
            svg: charts::svg(&LineChart {
                title: "Requests per server CPU-second against load",
                x_title: s.ladder.unit(),
                y_title: "req per server CPU-s",
                x: load_axis,
                y: Axis::Linear(rate_axis),
                lines: &per_cpu,
                fits: &[],
                marks: &[],
                threshold: None,
            })?,
            id: format!("chart-{k}-per-server-cpu-vs-load"),
            title: "Answered requests per CPU-second of the watched servers (pods) at each load"
                .into(),
        });
    }
    Ok(charts)
}

/// Each target's steps as a line, placed by `at`.
fn sweep_curves(s: &SweepResult, at: StepPoint) -> Vec<Line> {
    s.targets
        .iter()
        .map(|t| Line {
            name: t.name.clone(),
            points: t.points.iter().filter_map(at).collect(),
        })
        .collect()
}

/// Each target's knee as a mark on its line, placed by `at` (said to lie beyond it when the
/// ladder's top still met the SLO).
fn sweep_knees(s: &SweepResult, at: StepPoint) -> Vec<Mark> {
    s.targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let p = t.points.iter().find(|p| Some(p.load) == t.knee)?;
            Some(Mark {
                line: i,
                at: at(p)?,
                label: if t.knee_beyond_ladder {
                    format!("knee of {} beyond here", t.name)
                } else {
                    format!("knee {}", t.name)
                },
            })
        })
        .collect()
}

/// Each target's USL fit as a curve over its loads (none without a fit).
fn usl_fits(s: &SweepResult) -> Vec<Option<Line>> {
    s.targets
        .iter()
        .map(|t| {
            let f = t.usl.as_ref()?;
            let (lo, hi) = (t.points.first()?.load, t.points.last()?.load);
            Some(Line {
                name: t.name.clone(),
                points: (0..=60)
                    .map(|i| {
                        let n = lo * (hi / lo).powf(f64::from(i) / 60.0);
                        (n, f.throughput(n))
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The first p99 bound among the stored conditions, read by the grammar `--slo` used, with
/// its label.
fn slo_p99(s: &SweepResult) -> Option<(f64, String)> {
    s.slo.iter().find_map(|text| {
        let c = crate::slo::parse(text)
            .ok()?
            .conditions
            .into_iter()
            .next()?;
        (c.metric == crate::slo::SloMetric::Percentile(99.0) && c.comparison.is_upper_bound())
            .then(|| (c.threshold, format!("SLO {}", c.text)))
    })
}
