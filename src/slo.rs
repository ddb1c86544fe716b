//! Service-level objectives (`--slo 'p99<10ms,errors<0.1%'`, k6's thresholds): conditions on
//! latency percentiles, the error rate and throughput, judged on a run's figures (or, in a
//! comparison, on each target's medians), so a CI job can gate on them: any condition failed
//! makes the exit status 1.

use crate::quantity;
use crate::stats::{ConditionOutcome, RunResult, SloOutcome};

/// What a condition is on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SloMetric {
    /// A percentile of the total latency (µs): 50, 90, 99, 99.9, 99.99, or 100 for the max.
    Percentile(f64),
    /// The mean latency (µs).
    Mean,
    /// Failed requests (transport failures plus answers outside 2xx/3xx), in % of attempted.
    ErrorRate,
    /// Failed requests, counted.
    Errors,
    /// Answered requests per second.
    Throughput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Below,
    AtMost,
    Above,
    AtLeast,
}

impl Comparison {
    /// `<` or `<=`: the threshold is a ceiling.
    pub fn is_upper_bound(self) -> bool {
        matches!(self, Comparison::Below | Comparison::AtMost)
    }

    pub fn holds(self, measured: f64, threshold: f64) -> bool {
        match self {
            Comparison::Below => measured < threshold,
            Comparison::AtMost => measured <= threshold,
            Comparison::Above => measured > threshold,
            Comparison::AtLeast => measured >= threshold,
        }
    }
}

/// One condition as typed, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// As the user wrote it (`p99<10ms`).
    pub text: String,
    pub metric: SloMetric,
    pub comparison: Comparison,
    /// In the metric's own unit: µs, %, a count, or requests per second.
    pub threshold: f64,
}

/// Every condition of one `--slo`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slo {
    pub conditions: Vec<Condition>,
}

impl SloMetric {
    /// This metric's figure in `r`, in the metric's unit.
    pub fn measure(self, r: &RunResult) -> Option<f64> {
        let t = &r.latency.total;
        let answered = r.totals.requests > 0;
        let failed = r.totals.errors + r.totals.non_2xx_3xx;
        Some(match self {
            SloMetric::Percentile(p) if answered => {
                (match p {
                    p if p >= 100.0 => t.max_us,
                    p if p >= 99.99 => t.p99_99_us,
                    p if p >= 99.9 => t.p99_9_us,
                    p if p >= 99.0 => t.p99_us,
                    p if p >= 90.0 => t.p90_us,
                    p if p >= 75.0 => t.p75_us,
                    _ => t.p50_us,
                }) as f64
            }
            SloMetric::Mean if answered => t.mean_us,
            SloMetric::Percentile(_) | SloMetric::Mean => return None,
            SloMetric::ErrorRate if r.totals.attempted == 0 => return None,
            SloMetric::ErrorRate => failed as f64 * 100.0 / r.totals.attempted as f64,
            SloMetric::Errors => failed as f64,
            SloMetric::Throughput => r.totals.requests_per_sec,
        })
    }

    /// The figure an objective is judged on: [`SloMetric::measure`], except that in the open
    /// loop a latency percentile counts the requests still unanswered at the run's end as
    /// the slowest of all (each has waited at least until then, and its latency is not
    /// known): the percentile's rank among every request sent, found among the answered
    /// ones. When more were unanswered than the percentile leaves above it, it lies among
    /// them: infinite, "not determined". (A short probe of a server that queues answered its
    /// first requests in time and held the rest: judged on the answered alone, it held p99.)
    /// A closed loop holds at most one request per connection, which waited one latency at
    /// most: its percentiles stay the answered requests'.
    pub fn judged(self, r: &RunResult) -> Option<f64> {
        let unanswered = r.totals.unanswered_at_end;
        let SloMetric::Percentile(p) = self else {
            return self.measure(r);
        };
        if unanswered == 0 || r.pacing.is_none() {
            return self.measure(r);
        }
        let h = &r.histograms.total.0;
        let answered = h.len();
        let rank = p / 100.0 * (answered + unanswered) as f64;
        if p >= 100.0 || rank > answered as f64 {
            return Some(f64::INFINITY);
        }
        Some(h.value_at_quantile(rank / answered as f64) as f64)
    }

    pub fn unit(self) -> &'static str {
        match self {
            SloMetric::Percentile(_) | SloMetric::Mean => "µs",
            SloMetric::ErrorRate => "%",
            SloMetric::Errors => "errors",
            SloMetric::Throughput => "req/s",
        }
    }
}

/// The percentiles a condition may name (those every result stores), and their names.
pub const PERCENTILES: [(&str, f64); 7] = [
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("p99.99", 99.99),
    ("max", 100.0),
];

impl Slo {
    /// Judges every condition on the figure `measure` gives for it.
    pub fn judge(&self, measure: impl Fn(SloMetric) -> Option<f64>) -> SloOutcome {
        let conditions: Vec<ConditionOutcome> = self
            .conditions
            .iter()
            .map(|c| {
                let figure = measure(c.metric);
                let measured = figure.filter(|v| v.is_finite());
                ConditionOutcome {
                    condition: c.text.clone(),
                    measured,
                    unit: c.metric.unit().to_string(),
                    // Nothing to judge (no request answered) fails: an SLO is a promise.
                    passed: measured.is_some_and(|v| c.comparison.holds(v, c.threshold)),
                    not_determined: figure == Some(f64::INFINITY),
                }
            })
            .collect();
        SloOutcome {
            passed: conditions.iter().all(|c| c.passed),
            conditions,
        }
    }

    /// Judges one run.
    pub fn judge_run(&self, r: &RunResult) -> SloOutcome {
        self.judge(|m| m.judged(r))
    }
}

/// Parses `--slo 'p99<10ms,errors<0.1%,rps>=5000'`.
pub fn parse(text: &str) -> Result<Slo, String> {
    let conditions = text
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(condition)
        .collect::<Result<Vec<_>, _>>()?;
    if conditions.is_empty() {
        return Err(format!(
            "--slo {text:?} has no condition; use e.g. 'p99<10ms,errors<0.1%'"
        ));
    }
    Ok(Slo { conditions })
}

/// One condition of `--slo`.
fn condition(text: &str) -> Result<Condition, String> {
    let bad = |why: &str| {
        format!("--slo condition {text:?}: {why}; use e.g. p99<10ms, p99.9<=50ms, mean<2ms, errors<0.1%, errors<10, rps>=5000")
    };
    let at = text
        .find(['<', '>'])
        .ok_or_else(|| bad("no comparison (<, <=, > or >=)"))?;
    let (name, rest) = text.split_at(at);
    let (comparison, value) = match rest.as_bytes() {
        [b'<', b'=', ..] => (Comparison::AtMost, &rest[2..]),
        [b'>', b'=', ..] => (Comparison::AtLeast, &rest[2..]),
        [b'<', ..] => (Comparison::Below, &rest[1..]),
        _ => (Comparison::Above, &rest[1..]),
    };
    let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
    let (metric, threshold) = match name.as_str() {
        "errors" | "error" | "error_rate" => match value.strip_suffix('%') {
            Some(pct) => (
                SloMetric::ErrorRate,
                quantity::number(pct).map_err(|w| bad(&w))?,
            ),
            None => (
                SloMetric::Errors,
                quantity::number(value).map_err(|w| bad(&w))?,
            ),
        },
        "rps" | "req/s" | "throughput" => {
            let v = value
                .strip_suffix("req/s")
                .or_else(|| value.strip_suffix("rps"))
                .unwrap_or(value);
            (
                SloMetric::Throughput,
                quantity::rate(v.trim()).map_err(|w| bad(&w))?,
            )
        }
        "mean" | "avg" => (
            SloMetric::Mean,
            quantity::micros(value).map_err(|w| bad(&w))?,
        ),
        p => {
            let pct = PERCENTILES
                .iter()
                .find(|(n, _)| *n == p)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    bad(&format!(
                        "unknown figure {p:?} (p50, p75, p90, p99, p99.9, p99.99, max, mean, errors, rps)"
                    ))
                })?;
            (
                SloMetric::Percentile(pct),
                quantity::micros(value).map_err(|w| bad(&w))?,
            )
        }
    };
    if matches!(metric, SloMetric::ErrorRate) && threshold > 100.0 {
        return Err(bad("an error rate above 100%"));
    }
    Ok(Condition {
        text: text.trim().to_string(),
        metric,
        comparison,
        threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_conditions_parse_with_their_units() {
        let slo = parse("p99<10ms, p99.9<=0.05s,mean<800us,errors<0.1%,errors<=3,rps>=5k").unwrap();
        let got: Vec<(SloMetric, Comparison, f64)> = slo
            .conditions
            .iter()
            .map(|c| (c.metric, c.comparison, c.threshold))
            .collect();
        assert_eq!(
            got,
            [
                (SloMetric::Percentile(99.0), Comparison::Below, 10_000.0),
                (SloMetric::Percentile(99.9), Comparison::AtMost, 50_000.0),
                (SloMetric::Mean, Comparison::Below, 800.0),
                (SloMetric::ErrorRate, Comparison::Below, 0.1),
                (SloMetric::Errors, Comparison::AtMost, 3.0),
                (SloMetric::Throughput, Comparison::AtLeast, 5_000.0),
            ]
        );
        assert_eq!(slo.conditions[0].text, "p99<10ms");
    }

    #[test]
    fn slo_nonsense_is_refused_with_what_to_write() {
        for bad in [
            "",
            "p99",
            "p99<",
            "p99<10",
            "p98<10ms",
            "p99<-1ms",
            "p99<1e300s",
            "errors<101%",
            "rps>fast",
            "p99=10ms",
            "p99<NaNms",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("use e.g."), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    fn run(p99_us: u64, requests: u64, errors: u64, non_2xx: u64, rps: f64) -> RunResult {
        let mut r = RunResult::from_recording(
            crate::stats::Recorder::new(None),
            crate::stats::PlanSummary::default(),
            crate::stats::Environment::default(),
            crate::stats::RunTimes {
                started_at: std::time::SystemTime::UNIX_EPOCH,
                first_send_at: None,
                elapsed_s: 1.0,
                interrupted: false,
            },
        );
        r.latency.total.p99_us = p99_us;
        r.totals.requests = requests;
        r.totals.errors = errors;
        r.totals.non_2xx_3xx = non_2xx;
        r.totals.attempted = requests + errors;
        r.totals.requests_per_sec = rps;
        r
    }

    #[test]
    fn a_run_passes_only_when_every_condition_holds() {
        let c = |text: &str, metric, comparison, threshold| Condition {
            text: text.into(),
            metric,
            comparison,
            threshold,
        };
        let slo = Slo {
            conditions: vec![
                c(
                    "p99<10ms",
                    SloMetric::Percentile(99.0),
                    Comparison::Below,
                    10_000.0,
                ),
                c("errors<1%", SloMetric::ErrorRate, Comparison::Below, 1.0),
                c(
                    "rps>=900",
                    SloMetric::Throughput,
                    Comparison::AtLeast,
                    900.0,
                ),
            ],
        };
        let good = slo.judge_run(&run(9_999, 1000, 0, 5, 1000.0));
        assert!(good.passed, "{good:?}");
        assert_eq!(good.conditions[1].measured, Some(0.5));
        // 10 ms is not below 10 ms.
        let slow = slo.judge_run(&run(10_000, 1000, 0, 0, 1000.0));
        assert!(!slow.passed);
        assert_eq!(
            slow.conditions.iter().map(|c| c.passed).collect::<Vec<_>>(),
            [false, true, true]
        );
        // 5 transport failures and 6 answers of 500 of 1,005 attempted: 1.09%.
        let failing = slo.judge_run(&run(100, 1000, 5, 6, 1000.0));
        assert!(!failing.conditions[1].passed, "{failing:?}");
        // Nothing answered: no latency to judge, which fails.
        let none = slo.judge_run(&run(0, 0, 10, 0, 0.0));
        assert_eq!(none.conditions[0].measured, None);
        assert!(!none.passed);
    }

    /// A run whose answered latencies are 1..=`answered` ms, with `unanswered` still in
    /// flight at its end.
    fn queued(answered: u64, unanswered: u64) -> RunResult {
        let mut r = run(0, answered, 0, 0, answered as f64);
        for ms in 1..=answered {
            r.histograms.total.0.record(ms * 1000).unwrap();
        }
        r.latency.total = crate::stats::LatencySummary::of(&r.histograms.total.0);
        r.totals.unanswered_at_end = unanswered;
        r.pacing = Some(crate::stats::PacingSummary {
            target_rate: 1050.0,
            achieved_rate: 1050.0,
            lateness: Default::default(),
            early_sends: 0,
            earliness: Default::default(),
            held_by_busy_connection: 0,
        });
        r
    }

    #[test]
    fn a_percentile_counts_the_requests_unanswered_at_the_end_as_the_slowest() {
        let slo = parse("p90<=950ms").unwrap();
        // None unanswered: the answered alone (p90 of 1..=1000 ms is 900 ms).
        let all = slo.judge_run(&queued(1000, 0));
        let m = all.conditions[0].measured.unwrap();
        assert!((899_000.0..=901_000.0).contains(&m), "{all:?}");
        // 50 more sent, unanswered: the 90th percentile of 1,050 is the 945th, 945 ms.
        let some = slo.judge_run(&queued(1000, 50));
        let m = some.conditions[0].measured.unwrap();
        assert!((944_000.0..=946_000.0).contains(&m), "{some:?}");
        assert!(some.passed);
        // 200 unanswered of 1,200 (16.7%): p90 lies among them, not determined, which fails
        // (a short probe's answered ones all came in time).
        let most = slo.judge_run(&queued(1000, 200));
        let c = &most.conditions[0];
        assert_eq!(
            (c.measured, c.not_determined, c.passed),
            (None, true, false)
        );
        // The mean and the error rate stay the answered requests' own, as does a closed
        // loop's percentile.
        let mean = parse("mean<600ms").unwrap().judge_run(&queued(1000, 200));
        assert!(mean.passed, "{mean:?}");
        let mut closed = queued(1000, 200);
        closed.pacing = None;
        assert!(slo.judge_run(&closed).passed);
    }
}
