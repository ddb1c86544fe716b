//! wrk 4.x's layout, line for line, so scripts that parse wrk keep working.

use std::io::{self, Write};

use hdrhistogram::Histogram;

use super::Report;
use crate::stats::{histogram_within_stdev, PlanSummary, RunResult};
use crate::units::{wrk_binary, wrk_metric, wrk_time_s, wrk_time_us};

pub struct WrkReport {
    /// `--latency`: print the percentile distribution.
    pub latency: bool,
}

/// wrk's print_units: right-align in `width`, padding unit-less numbers so columns line up.
fn units(out: &mut dyn Write, text: &str, width: usize) -> io::Result<()> {
    let b = text.as_bytes();
    let mut pad = 2usize;
    if b.last().is_some_and(|c| c.is_ascii_alphabetic()) {
        pad -= 1;
    }
    if b.len() >= 2 && b[b.len() - 2].is_ascii_alphabetic() {
        pad -= 1;
    }
    let width = width - pad;
    write!(out, "{text:>width$}{}", &"  "[..pad])
}

fn stats_row(
    out: &mut dyn Write,
    name: &str,
    h: &Histogram<u64>,
    fmt: fn(f64) -> String,
) -> io::Result<()> {
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean(), h.stdev(), h.max() as f64)
    };
    write!(out, "    {name:<10}")?;
    units(out, &fmt(mean), 8)?;
    units(out, &fmt(stdev), 10)?;
    units(out, &fmt(max), 9)?;
    if h.is_empty() {
        // wrk's share of no samples is 0/0, which its printf says as -nan.
        return writeln!(out, "{:>8}%", "-nan");
    }
    writeln!(out, "{:8.2}%", histogram_within_stdev(h))
}

/// wrk's view of the latencies: those within its timeout (`-T`), which its histogram holds,
/// and how many answers came later, which it counts as timeouts instead.
fn within_timeout(r: &RunResult) -> (Histogram<u64>, u64) {
    let all = &r.histograms.total.0;
    let limit = (r.plan.timeout_s * 1e6) as u64;
    let mut within = all.clone();
    within.reset();
    let mut late = 0;
    for v in all.iter_recorded() {
        let value = v.value_iterated_to();
        if value <= limit {
            within.saturating_record_n(value, v.count_at_value());
        } else {
            late += v.count_at_value();
        }
    }
    (within, late)
}

impl Report<RunResult> for WrkReport {
    fn write(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        WrkReport::preamble(&r.plan, out)?;
        self.write_body(r, out)
    }
}

impl WrkReport {
    /// The two lines wrk prints before the run starts.
    pub fn preamble(plan: &PlanSummary, out: &mut dyn Write) -> io::Result<()> {
        let duration = plan.duration_s.unwrap_or(0.0);
        // wrk takes whole seconds (minutes, hours) only; a duration of ours that is not one
        // is said as the run's own time, not rounded to a test it does not run ("1.5s" read
        // "Running 2s test").
        let said = match duration.fract() {
            0.0 => wrk_time_s(duration),
            _ => wrk_time_us(duration * 1e6),
        };
        writeln!(out, "Running {said} test @ {}", plan.url)?;
        writeln!(
            out,
            "  {} threads and {} connections",
            plan.threads, plan.connections
        )?;
        out.flush()
    }

    /// Everything wrk prints after the run.
    pub fn write_body(&self, r: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "  Thread Stats{:>6}{:>11}{:>8}{:>12}",
            "Avg", "Stdev", "Max", "+/- Stdev"
        )?;
        let (latency, late) = within_timeout(r);
        stats_row(out, "Latency", &latency, wrk_time_us)?;
        stats_row(out, "Req/Sec", &r.histograms.worker_rate.0, wrk_metric)?;
        if self.latency {
            writeln!(out, "  Latency Distribution")?;
            for p in [50.0, 75.0, 90.0, 99.0] {
                let v = if latency.is_empty() {
                    0
                } else {
                    latency.value_at_percentile(p)
                };
                write!(out, "{p:7.0}%")?;
                units(out, &wrk_time_us(v as f64), 10)?;
                writeln!(out)?;
            }
        }
        writeln!(
            out,
            "  {} requests in {}, {}B read",
            r.totals.requests,
            wrk_time_us(r.totals.elapsed_s * 1e6),
            wrk_binary(r.totals.bytes_read as f64)
        )?;
        // wrk has four socket error kinds: TLS failures are connect errors there, framing
        // failures read errors.
        // An answer later than -T is a request and a timeout both, as wrk counts it.
        let e = &r.errors;
        let (connect, read) = (e.connect + e.tls, e.read + e.protocol);
        let timeout = e.timeout + late;
        if connect + read + e.write + timeout > 0 {
            writeln!(
                out,
                "  Socket errors: connect {connect}, read {read}, write {}, timeout {timeout}",
                e.write
            )?;
        }
        if r.totals.non_2xx_3xx > 0 {
            writeln!(out, "  Non-2xx or 3xx responses: {}", r.totals.non_2xx_3xx)?;
        }
        writeln!(out, "Requests/sec: {:9.2}", r.totals.requests_per_sec)?;
        writeln!(
            out,
            "Transfer/sec: {:>10}B",
            wrk_binary(r.totals.bytes_read_per_sec)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(duration_s: f64) -> String {
        let plan = PlanSummary {
            duration_s: Some(duration_s),
            url: "http://127.0.0.1:1/".into(),
            ..PlanSummary::default()
        };
        let mut out = Vec::new();
        WrkReport::preamble(&plan, &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn the_test_announced_is_the_one_run() {
        assert_eq!(running(10.0), "Running 10s test @ http://127.0.0.1:1/");
        assert_eq!(running(120.0), "Running 2m test @ http://127.0.0.1:1/");
        // A duration wrk cannot take is said as it runs, not rounded ("Running 2s test").
        assert_eq!(running(1.5), "Running 1.50s test @ http://127.0.0.1:1/");
    }
}
