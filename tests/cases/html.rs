//! The HTML report, opened the way a reader opens it: in Chromium (Debian's package), headless,
//! in a network namespace without any network — so a page that needed one would show it —
//! with its DOM read back and each chart's pixels checked.

use std::path::{Path, PathBuf};

use crate::util::{archbench_within, finish_within, read_json, stderr, ServeChild, PROMPTLY};

/// Runs archbench, expecting `code` (1: an SLO the test made fail on purpose).
fn archbench_exits(args: &[&str], code: i32) {
    let o = archbench_within(args, PROMPTLY);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
}

/// Headless Chromium without a network; its standard output.
pub(crate) fn chromium(chromium: &Path, args: &[&str]) -> String {
    let child = std::process::Command::new("unshare")
        .arg("-n")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = finish_within(child, PROMPTLY);
    assert!(o.status.success(), "chromium {args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The numbers in `data-value` attributes of the part of `dom` from `from` to `to`.
fn values(dom: &str, from: &str, to: &str) -> Vec<f64> {
    let start = dom
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not in the page"));
    let part = &dom[start..];
    let part = &part[..part.find(to).unwrap_or(part.len())];
    part.split("data-value=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Pixels of a PNG drawn in colour: the data (lines, markers, knees). Axes, grid, text and
/// legend frame are grey, so a chart without data has none.
fn coloured(png_path: &Path) -> usize {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    pixels
        .chunks(channels)
        .filter(|p| {
            let (lo, hi) = (p[..3].iter().min().unwrap(), p[..3].iter().max().unwrap());
            hi - lo > 60
        })
        .count()
}

#[test]
fn the_report_opens_offline_with_every_chart_drawn_and_the_jsons_figures() {
    let Some(chromium_bin) = crate::util::require_tool("chromium") else {
        return;
    };
    // Opened where there is no network at all.
    if !crate::util::network_namespace() {
        return;
    }
    let fast = ServeChild::start(&["--threads", "1"]);
    let slow = ServeChild::start(&["--threads", "1", "--delay", "3ms"]);
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| -> PathBuf { dir.path().join(name) };
    let (a, b) = (format!("fast={}", fast.url), format!("slow={}", slow.url));
    let cmp = path("cmp.json");
    archbench_exits(
        &[
            "compare",
            &a,
            &b,
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "2s",
            "--runs",
            "2",
            "--no-warmup",
            "-q",
            "--slo",
            "p99<2ms",
            "--cost",
            "fast=0.192",
            "--cost",
            "slow=0.096",
            "--json",
            cmp.to_str().unwrap(),
        ],
        1,
    );
    let sweep = path("sweep.json");
    archbench_exits(
        &[
            "sweep",
            &a,
            &b,
            "-c",
            "1,2,4,8",
            "-t",
            "1",
            "-d",
            "400ms",
            "--no-warmup",
            "-q",
            "--slo",
            // Spaced as people type it: the chart reads it with `--slo`'s own grammar. Far
            // above the 3 ms server's p99 (a sweep that meets it at no load exits 1), so a
            // loaded machine does not fail a test of the page.
            "p99 < 100ms",
            "--json",
            sweep.to_str().unwrap(),
        ],
        0,
    );
    let run = path("run.json");
    archbench_exits(
        &[
            "run",
            &fast.url,
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "2500ms",
            "-q",
            "--json",
            run.to_str().unwrap(),
        ],
        0,
    );
    let html = path("report.html");
    let svgs = path("charts");
    archbench_exits(
        &[
            "report",
            run.to_str().unwrap(),
            cmp.to_str().unwrap(),
            sweep.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--svg",
            svgs.to_str().unwrap(),
        ],
        0,
    );
    // Nothing in the page asks for anything: no script, link, image, font or url().
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "<script",
        "<link",
        "<img",
        "<iframe",
        " src=",
        " href=",
        "url(",
        "@import",
        "@font-face",
    ] {
        assert!(!page.contains(needle), "{needle:?} in the report");
    }
    // Chromium without a network renders it; the DOM it built holds eight charts (that each
    // is drawn, the screenshots below show).
    let dom = chromium(
        &chromium_bin,
        &["--dump-dom", &format!("file://{}", html.display())],
    );
    let figures: Vec<&str> = dom.split("<figure class=\"chart\"").skip(1).collect();
    assert_eq!(
        figures.len(),
        8,
        "runs and comparison: spectrum, throughput and p99 over time; sweep: two curves"
    );
    assert!(dom.contains("p99 latency over time"));
    // The comparison table's medians are the JSON's.
    let c = read_json(&cmp);
    for (row, metric) in ["req/s", "p99"].iter().enumerate() {
        let m = c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == *metric)
            .unwrap();
        let want: Vec<f64> = m["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["median"].as_f64().unwrap())
            .collect();
        let row_start = format!("<tr><th>{metric}");
        let got = values(&dom, &row_start, "</tr>");
        assert_eq!(got.len(), 2, "row {row}");
        for (g, w) in got.iter().zip(&want) {
            assert!(close(*g, *w), "{metric}: page {g}, JSON {w}");
        }
    }
    assert!(
        dom.contains("SLO slow: p99&lt;2ms measured"),
        "the SLO lines"
    );
    assert!(dom.contains("Cost fast at "), "the cost line");
    // The second priced target's line has its requests per dollar against the first's, as
    // the JSON's costs make it.
    let costs = c["cost"].as_array().unwrap();
    let per_million = |i: usize| costs[i]["cost_per_million"].as_f64().unwrap();
    let ratio = format!(
        "{:.2}x its requests per dollar",
        per_million(0) / per_million(1)
    );
    let slow_line = dom
        .lines()
        .find(|l| l.contains("<p>Cost slow at "))
        .expect("the second cost line");
    assert!(slow_line.contains(&ratio), "{ratio} in {slow_line}");
    // The sweep's p99 chart draws the bound with its label.
    assert!(
        dom.contains("SLO p99 &lt; 100ms"),
        "the SLO bound on the chart"
    );
    // The sweep's table for each target is its points, in order.
    let s = read_json(&sweep);
    for t in s["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let got = values(&dom, &format!("data-target=\"{name}\""), "</table>");
        let want: Vec<f64> = t["points"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| {
                [
                    "load",
                    "requests_per_sec",
                    "p50_us",
                    "p90_us",
                    "p99_us",
                    "p99_9_us",
                    "error_percent",
                ]
                .map(|k| p[k].as_f64().unwrap())
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            assert!(close(*g, *w), "{name}: page {g}, JSON {w}");
        }
    }
    // Each chart, drawn on its own: its data in colour, not a blank frame with axes.
    let mut charts: Vec<PathBuf> = std::fs::read_dir(&svgs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    charts.sort();
    assert_eq!(charts.len(), 8);
    for chart in &charts {
        let png = chart.with_extension("png");
        chromium(
            &chromium_bin,
            &[
                &format!("--screenshot={}", png.display()),
                "--window-size=860,430",
                &format!("file://{}", chart.display()),
            ],
        );
        // A frame with axes and a legend only has about 100 coloured pixels (two 24-pixel
        // legend strokes: estimated); the charts here had 1,700-4,000.
        let data = coloured(&png);
        eprintln!("{}: {data} coloured pixels", chart.display());
        assert!(
            data > 500,
            "{}: {data} pixels drawn in colour",
            chart.display()
        );
    }
}

/// The page says what the text says: an interrupted run, comparison or sweep is marked
/// INTERRUPTED (and a step cut short named); a run's Status, Transfer, Client and (open loop) Pacing lines are there; a
/// priced sweep has its Cost and Per dollar lines.
#[test]
fn the_page_says_what_the_text_says() {
    let s = ServeChild::start(&["--threads", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (a, b) = (format!("a={}", s.url), format!("b={}", s.url));
    let (run, cmp, sweep) = (path("run.json"), path("cmp.json"), path("sweep.json"));
    let quick = ["-c", "1", "-t", "1", "-d", "100ms", "-q"];
    archbench_exits(
        &[
            &["run", &s.url, "--rate", "200", "--json", &run][..],
            &quick,
        ]
        .concat(),
        0,
    );
    archbench_exits(
        &[
            &["compare", &a, &b, "--runs", "1", "--json", &cmp][..],
            &quick,
        ]
        .concat(),
        0,
    );
    archbench_exits(
        &[
            "sweep", &a, &b, "-c", "1,2", "-d", "100ms", "--runs", "1", "-q", "--cost", "a=0.1",
            "--cost", "b=0.05", "--json", &sweep,
        ],
        0,
    );
    let page = |files: &[&str]| {
        let html = path("page.html");
        archbench_exits(
            &[&["report", "-o", "json"][..], files, &["--html", &html]].concat(),
            0,
        );
        std::fs::read_to_string(&html).unwrap()
    };
    let html = page(&[&run, &sweep]);
    for line in [
        "Status     200: ",
        "Transfer   ",
        "Client     ",
        "Pacing     target 200 req/s",
    ] {
        assert!(html.contains(line), "{line}: {html}");
    }
    assert!(html.contains("<p>Cost "), "{html}");
    assert!(html.contains("<p>Per dollar b: "), "{html}");
    assert!(!html.contains("INTERRUPTED"), "{html}");
    // The same documents, stopped by a signal.
    for f in [&run, &cmp, &sweep] {
        let mut doc = read_json(f);
        doc["interrupted"] = true.into();
        std::fs::write(f, doc.to_string()).unwrap();
    }
    for f in [&run, &cmp, &sweep] {
        let html = page(&[f]);
        assert!(html.contains("INTERRUPTED</span></h2>"), "{f}: {html}");
    }
    // A step the interruption cut short is said under its table, as the text says it.
    let mut doc = read_json(&sweep);
    doc["targets"][0]["points"][1]["cut_short"] = true.into();
    std::fs::write(&sweep, doc.to_string()).unwrap();
    let html = page(&[&sweep]);
    assert!(
        html.contains("at 2 the run was cut short by the interruption"),
        "{html}"
    );
}
