//! Comparing targets: repeated runs (interleaved, sequential or parallel), each metric's median
//! and spread, the relative difference of every target against the baseline with a 95%
//! bootstrap interval, and a Mann-Whitney U verdict ("~" when not significant), as Go's
//! benchstat reports them.
//!
//! This module orchestrates: it is handed the function that executes one run, and never
//! reaches into the engine's workers.

pub mod stats;

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::engine::Plan;
use crate::monitor::WatchSource;
use crate::stats::{answered_nothing_in, RunResult, Unanswered};

/// Significance level of the verdicts.
pub const ALPHA: f64 = 0.05;

/// Always "archbench-comparison".
pub const COMPARISON_KIND: &str = "archbench-comparison";
/// Bumped when a field changes meaning or disappears; `schema/comparison.schema.json` follows
/// it. Version 2: intervals and p-values absent when the run counts allow no verdict.
pub const COMPARISON_SCHEMA_VERSION: u32 = 2;
/// The comparison versions this build reads.
pub const READABLE_COMPARISON_VERSIONS: [u32; 2] = [1, 2];

/// One named target: the first is the baseline.
#[derive(Debug, Clone)]
pub struct Contender {
    pub name: String,
    pub plan: Plan,
    pub watch: Vec<std::sync::Arc<dyn WatchSource>>,
}

/// The order runs happen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// A B A B …: drift over time (thermal, neighbours) hits every target alike.
    Interleave,
    /// All runs of A, then all of B.
    Sequential,
    /// A and B at the same time, like `wrk both`.
    Parallel,
}

impl Schedule {
    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            Schedule::Interleave => "interleaved",
            Schedule::Sequential => "sequential",
            Schedule::Parallel => "in parallel",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ComparePlan {
    pub contenders: Vec<Contender>,
    pub runs: usize,
    /// One discarded run of each target first.
    pub warmup: bool,
    pub schedule: Schedule,
}

/// The comparison as stored: every run kept, histograms included.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComparisonResult {
    /// Always "archbench-comparison".
    pub kind: String,
    pub schema_version: u32,
    pub schedule: Schedule,
    pub runs_per_target: u64,
    pub warmup: bool,
    /// True when a signal stopped the comparison early.
    pub interrupted: bool,
    pub targets: Vec<TargetRuns>,
    /// Per metric: medians, spreads and verdicts against the baseline (the first target).
    pub metrics: Vec<MetricComparison>,
    /// Per target, how its medians fared against `--slo`, when one was given.
    #[serde(default)]
    pub slo: Vec<TargetSlo>,
    /// Per target given a price (`--cost`), what a million requests cost at its median
    /// throughput.
    #[serde(default)]
    pub cost: Vec<TargetCost>,
    /// Where each target ran, when a cluster said so (`k8s load`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<crate::placement::Placement>,
    /// Pairs of targets whose vCPUs differ (the earlier one the pair's baseline): throughput per vCPU and scaling
    /// efficiency at their median throughputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<crate::placement::Scaling>,
}

/// What a million requests cost on a target, from the hourly price the user gave.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetCost {
    pub name: String,
    pub price_per_hour: f64,
    /// The median throughput the cost is taken at.
    pub requests_per_sec: f64,
    /// None when nothing was answered.
    pub cost_per_million: Option<f64>,
    /// How the price was reckoned, when it came from a price list (`--prices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// Why no per-dollar verdict may rest on this cost (its figures are not its servers'
    /// capacity: `ComparisonResult::not_the_servers_capacity`); the cost itself is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// The cost of a million requests at `requests_per_sec` on something priced per hour.
pub fn cost_per_million(price_per_hour: f64, requests_per_sec: f64) -> Option<f64> {
    (requests_per_sec > 0.0).then(|| price_per_hour / (requests_per_sec * 3600.0) * 1e6)
}

/// One target's objectives, judged on the medians of its complete runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetSlo {
    pub name: String,
    pub outcome: crate::stats::SloOutcome,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetRuns {
    pub name: String,
    pub url: String,
    /// `archbench run` command line reproducing one run of this target.
    pub command: String,
    /// Measured runs (warm-ups excluded), in the order they ran.
    pub runs: Vec<RunResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub targets: Vec<MetricSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricSummary {
    pub name: String,
    /// Absent when this target has no value for the metric (not watched, say).
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub n: u64,
    /// Against the baseline; None for the baseline itself.
    pub versus_baseline: Option<Delta>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delta {
    /// median / baseline median - 1.
    pub relative: f64,
    /// 95% bootstrap interval of `relative` (absent when no verdict is possible).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Two-sided Mann-Whitney U p-value (absent when no verdict is possible).
    pub p_value: Option<f64>,
    /// "~" when not significant at ALPHA, the signed percentage when significant, "no
    /// verdict" when these run counts cannot tell (see `no_verdict`).
    pub verdict: String,
    /// Significant and in the good direction for this metric.
    pub better: Option<bool>,
    /// Why there is no verdict: one run, or too few runs to ever reach ALPHA.
    #[serde(default)]
    pub no_verdict: Option<String>,
    /// The baseline's median is 0 and this target's is not: no relative difference exists
    /// (`relative` is 0 and there is no interval); a significant difference says "up from 0".
    #[serde(default)]
    pub from_zero: bool,
}

impl TargetRuns {
    /// The runs medians and verdicts are taken over: complete ones (not cut short, no worker
    /// lost), unless none completed: then what was measured is all there is, and the report
    /// says why it is short.
    pub fn judged(&self) -> impl Iterator<Item = &RunResult> {
        let whole = |r: &RunResult| !r.interrupted && r.lost_sources.is_empty();
        let any_whole = self.runs.iter().any(&whole);
        self.runs.iter().filter(move |r| !any_whole || whole(r))
    }
}

impl ComparisonResult {
    /// The cost per million requests of each target given a price, at its median throughput.
    pub fn costs(&self, prices: &[(String, f64)]) -> Vec<TargetCost> {
        prices
            .iter()
            .filter_map(|(name, price)| {
                let median = self.median_rps(name)?;
                Some(TargetCost {
                    name: name.clone(),
                    price_per_hour: *price,
                    requests_per_sec: median,
                    cost_per_million: cost_per_million(*price, median),
                    basis: None,
                    withheld: None,
                })
            })
            .collect()
    }

    /// The targets none of whose runs answered a request though they tried, with how many
    /// attempts failed: a measurement of nothing, which a command must not end with success.
    pub fn answered_nothing(&self) -> Vec<(&str, Unanswered)> {
        self.targets
            .iter()
            .filter_map(|t| Some((t.name.as_str(), answered_nothing_in(&t.runs)?)))
            .collect()
    }

    /// Each target's median throughput over its judged runs (0 when none answered).
    pub fn median_rps(&self, name: &str) -> Option<f64> {
        let t = self.targets.iter().find(|t| t.name == name)?;
        let rps: Vec<f64> = t.judged().map(|r| r.totals.requests_per_sec).collect();
        Some(if rps.is_empty() {
            0.0
        } else {
            stats::median(&rps)
        })
    }

    /// Why `name`'s figures describe something other than its servers' capacity, so that no
    /// verdict per vCPU may rest on them: servers run under emulation, a judged run its
    /// servers did not limit (the client, or nothing, did), or pods that used more CPU than
    /// their limit gives.
    pub fn not_the_servers_capacity(
        &self,
        name: &str,
        placements: &[crate::placement::Placement],
    ) -> Option<String> {
        let t = self.targets.iter().find(|t| t.name == name)?;
        if let Some(e) = t
            .judged()
            .flat_map(|r| &r.servers)
            .find_map(|s| s.fingerprint.emulator.as_deref())
        {
            return Some(format!(
                "its pods run under emulation ({e}), not on the CPU"
            ));
        }
        if let Some(r) = t
            .judged()
            .find(|r| r.limiter.side != crate::stats::LimiterSide::Server)
        {
            return Some(format!(
                "its servers did not limit it ({})",
                r.limiter.reason
            ));
        }
        let p = placements.iter().find(|p| p.name == name)?;
        let limit = p.cpu_limit? * f64::from(p.replicas.max(1));
        let cores = t
            .judged()
            .map(|r| r.servers.iter().map(|s| s.cores).sum::<f64>())
            .fold(0.0, f64::max);
        // 5%: what one 250 ms sample's rounding and the CFS period's edges allow.
        (cores > limit * 1.05).then(|| {
            format!("its pods used {cores:.2} cores, above their CPU limit of {limit} (+5%)")
        })
    }

    /// Each target's objectives, judged on the medians of its judged runs.
    pub fn judge_slo(&self, slo: &crate::slo::Slo) -> Vec<TargetSlo> {
        self.targets
            .iter()
            .map(|t| TargetSlo {
                name: t.name.clone(),
                outcome: slo.judge(|metric| {
                    let values: Vec<f64> = t.judged().filter_map(|r| metric.judged(r)).collect();
                    (!values.is_empty()).then(|| stats::median(&values))
                }),
            })
            .collect()
    }
}

/// Runs needed on each side for Mann-Whitney U to be able to reach ALPHA.
pub fn runs_for_a_verdict() -> usize {
    (2..)
        .find(|&n| stats::smallest_two_sided_p(n, n) < ALPHA)
        .unwrap_or(4)
}

/// Why `n_base` runs against `n_other` can give no verdict at ALPHA, or None when they can.
pub fn no_verdict_reason(n_base: usize, n_other: usize) -> Option<String> {
    if n_base.min(n_other) <= 1 {
        return Some("one run: no verdict".into());
    }
    let smallest = stats::smallest_two_sided_p(n_base, n_other);
    let runs = if n_base == n_other {
        n_base.to_string()
    } else {
        format!("{n_base} and {n_other}")
    };
    (smallest >= ALPHA).then(|| {
        format!(
            "{runs} runs cannot reach alpha={ALPHA} (the smallest possible p is {smallest:.3}): use --runs {} or more",
            runs_for_a_verdict()
        )
    })
}

/// A metric read from one run.
struct Metric {
    name: &'static str,
    unit: &'static str,
    higher_is_better: bool,
    read: fn(&RunResult) -> Option<f64>,
}

/// A latency percentile as the SLO reads it: none for a run without answers (its histogram's
/// zeros are not latencies).
fn percentile(r: &RunResult, p: f64) -> Option<f64> {
    crate::slo::SloMetric::Percentile(p).measure(r)
}

/// The watched servers' figure summed (None when one misses part of its target).
fn server_sum(r: &RunResult, f: fn(&crate::stats::ServerUsage) -> f64) -> Option<f64> {
    crate::stats::servers_sum(&r.servers, f)
}

const METRICS: [Metric; 14] = [
    Metric {
        name: "req/s",
        unit: "req/s",
        higher_is_better: true,
        read: |r| Some(r.totals.requests_per_sec),
    },
    Metric {
        name: "p50",
        unit: "µs",
        higher_is_better: false,
        read: |r| percentile(r, 50.0),
    },
    Metric {
        name: "p90",
        unit: "µs",
        higher_is_better: false,
        read: |r| percentile(r, 90.0),
    },
    Metric {
        name: "p99",
        unit: "µs",
        higher_is_better: false,
        read: |r| percentile(r, 99.0),
    },
    Metric {
        name: "p99.9",
        unit: "µs",
        higher_is_better: false,
        read: |r| percentile(r, 99.9),
    },
    Metric {
        name: "errors",
        unit: "",
        higher_is_better: false,
        read: |r| Some(r.totals.errors as f64),
    },
    Metric {
        // Answered, so counted as requests, but not the page asked for.
        name: "non-2xx/3xx answers",
        unit: "",
        higher_is_better: false,
        read: |r| Some(r.totals.non_2xx_3xx as f64),
    },
    Metric {
        name: "transfer",
        unit: "B/s",
        higher_is_better: true,
        read: |r| Some(r.totals.bytes_read_per_sec),
    },
    Metric {
        name: "server CPU",
        unit: "cores",
        higher_is_better: false,
        read: |r| server_sum(r, |s| s.cores),
    },
    Metric {
        name: "req/server CPU-s",
        unit: "req/CPU-s",
        higher_is_better: true,
        read: |r| {
            let cpu = crate::stats::servers_run_cpu_s(&r.servers)?;
            crate::stats::requests_per_cpu_s(r.totals.requests, cpu)
        },
    },
    Metric {
        name: "server peak memory",
        unit: "B",
        higher_is_better: false,
        read: |r| server_sum(r, |s| s.peak_memory_bytes as f64),
    },
    // Over https: what a handshake-bound load (--no-keepalive) measures.
    Metric {
        name: "TLS handshakes/s",
        unit: "req/s",
        higher_is_better: true,
        read: |r| r.tls.as_ref()?.handshakes_per_s,
    },
    Metric {
        name: "TLS handshake p50",
        unit: "µs",
        higher_is_better: false,
        read: |r| Some(r.tls.as_ref()?.handshake.as_ref()?.p50_us as f64),
    },
    Metric {
        name: "handshakes/server CPU-s",
        unit: "req/CPU-s",
        higher_is_better: true,
        read: |r| {
            let t = r.tls.as_ref()?;
            let cpu = crate::stats::servers_run_cpu_s(&r.servers)?;
            crate::stats::requests_per_cpu_s(t.handshakes(), cpu)
        },
    },
];

impl ComparisonResult {
    fn new(plan: &ComparePlan, commands: Vec<String>) -> ComparisonResult {
        ComparisonResult {
            kind: COMPARISON_KIND.into(),
            schema_version: COMPARISON_SCHEMA_VERSION,
            schedule: plan.schedule,
            runs_per_target: plan.runs as u64,
            warmup: plan.warmup,
            interrupted: false,
            targets: plan
                .contenders
                .iter()
                .zip(commands)
                .map(|(c, command)| TargetRuns {
                    name: c.name.clone(),
                    url: c.plan.target.redacted_url.clone(),
                    command,
                    runs: Vec::new(),
                })
                .collect(),
            metrics: Vec::new(),
            slo: Vec::new(),
            cost: Vec::new(),
            placements: Vec::new(),
            scaling: Vec::new(),
        }
    }

    /// Whether the comparison's figures agree, as every comparison archbench writes does:
    /// each run's own ([`RunResult::check_figures`]), each median inside its own range and
    /// of a target that has runs, differences the medians', p-values probabilities. Where
    /// they disagree, which figure and why.
    pub fn check_figures(&self) -> Result<(), String> {
        if self.targets.is_empty() {
            return Err("it compares no target".into());
        }
        // A target may have no runs yet: a comparison is saved after every run, and the
        // process may end (a failed run, a kill) before the target's turn.
        for (i, t) in self.targets.iter().enumerate() {
            for (k, r) in t.runs.iter().enumerate() {
                r.check_figures()
                    .map_err(|why| format!("targets[{i}].runs[{k}]: {why}"))?;
            }
        }
        for m in &self.metrics {
            for s in &m.targets {
                self.check_summary(m, s)
                    .map_err(|why| format!("{} of {}: {why}", m.metric, s.name))?;
            }
        }
        Ok(())
    }

    /// One target's summary of one metric against its own range and its runs.
    fn check_summary(&self, m: &MetricComparison, s: &MetricSummary) -> Result<(), String> {
        let d = s.versus_baseline.as_ref();
        if let Some(p) = d
            .and_then(|d| d.p_value)
            .filter(|p| !(0.0..=1.0).contains(p))
        {
            return Err(format!("p-value {p} is not a probability (0 to 1)"));
        }
        let Some(median) = s.median else {
            return Ok(());
        };
        // The difference is the medians' (but from a zero baseline, where it is 0).
        let base = m
            .targets
            .first()
            .and_then(|b| b.median)
            .filter(|b| *b != 0.0);
        if let Some((d, base)) = d.zip(base) {
            let relative = median / base - 1.0;
            if (d.relative - relative).abs() > 1e-9 * relative.abs().max(1.0) {
                return Err(format!(
                    "the difference to the baseline is {}, its medians give {relative}",
                    d.relative
                ));
            }
        }
        let within = |lo: f64, hi: f64| {
            // Stored as written; a margin for a reader's own rounding only.
            let slack = 1e-9 * median.abs().max(1.0);
            lo - slack <= median && median <= hi + slack
        };
        if let (Some(lo), Some(hi)) = (s.min, s.max) {
            if !within(lo, hi) {
                return Err(format!(
                    "median {median} lies outside its range [{lo}..{hi}]"
                ));
            }
        }
        // Not recomputed from the runs: earlier builds of this schema took medians by other
        // rules (a latency of 0 for a run without answers, every run where now the whole
        // ones), and their documents must still read.
        match self.targets.iter().find(|t| t.name == s.name) {
            None => Err("no target of that name".into()),
            Some(t) if t.runs.is_empty() => Err(format!("median {median}, yet it has no runs")),
            Some(_) => Ok(()),
        }
    }

    /// Why some differences carry no verdict, each reason once.
    pub fn no_verdict_reasons(&self) -> Vec<String> {
        let mut reasons: Vec<String> = Vec::new();
        for d in self
            .metrics
            .iter()
            .flat_map(|m| &m.targets)
            .filter_map(|t| t.versus_baseline.as_ref()?.no_verdict.clone())
        {
            if !reasons.contains(&d) {
                reasons.push(d);
            }
        }
        reasons
    }

    /// Recomputes every metric's summary from the runs so far.
    pub fn summarize(&mut self) {
        self.metrics = METRICS
            .iter()
            .filter_map(|m| {
                let values: Vec<Vec<f64>> = self
                    .targets
                    .iter()
                    .map(|t| t.judged().filter_map(|r| (m.read)(r)).collect())
                    .collect();
                if values.iter().all(Vec::is_empty) {
                    return None;
                }
                let base = &values[0];
                let targets = self
                    .targets
                    .iter()
                    .zip(&values)
                    .enumerate()
                    .map(|(i, (t, v))| MetricSummary {
                        name: t.name.clone(),
                        // A target without values (not watched, no run finished) has none:
                        // never NaN (JSON null) nor a silent zero.
                        median: (!v.is_empty()).then(|| stats::median(v)),
                        min: v.iter().copied().reduce(f64::min),
                        max: v.iter().copied().reduce(f64::max),
                        n: v.len() as u64,
                        versus_baseline: (i > 0)
                            .then(|| delta(base, v, m.higher_is_better))
                            .flatten(),
                    })
                    .collect();
                Some(MetricComparison {
                    metric: m.name.into(),
                    unit: m.unit.into(),
                    higher_is_better: m.higher_is_better,
                    targets,
                })
            })
            .collect();
    }
}

fn delta(base: &[f64], other: &[f64], higher_is_better: bool) -> Option<Delta> {
    let (mb, mo) = (stats::median(base), stats::median(other));
    if base.is_empty() || other.is_empty() {
        return None;
    }
    let from_zero = mb == 0.0 && mo != 0.0;
    let relative = if mb != 0.0 { mo / mb - 1.0 } else { 0.0 };
    if let Some(why) = no_verdict_reason(base.len(), other.len()) {
        return Some(Delta {
            relative,
            ci_low: None,
            ci_high: None,
            p_value: None,
            verdict: "no verdict".into(),
            better: None,
            no_verdict: Some(why),
            from_zero,
        });
    }
    // A ratio to a zero baseline has no interval.
    let ci = if from_zero {
        None
    } else {
        Some(stats::relative_difference_ci(base, other).unwrap_or((relative, relative)))
    };
    let p_value = stats::mann_whitney_p(base, other);
    let significant = p_value < ALPHA && mo != mb;
    Some(Delta {
        relative,
        ci_low: ci.map(|c| c.0),
        ci_high: ci.map(|c| c.1),
        p_value: Some(p_value),
        verdict: match (significant, from_zero) {
            (true, true) => "up from 0".into(),
            (true, false) => format!("{:+.2}%", relative * 100.0),
            (false, _) => "~".into(),
        },
        better: significant.then_some((mo > mb) == higher_is_better),
        no_verdict: None,
        from_zero,
    })
}

/// A run of a parallel round panicked (a bug in archbench): the comparison ends with this
/// error instead of taking the process down.
#[derive(Debug, thiserror::Error)]
#[error("a run of the comparison panicked; this is a bug in archbench")]
pub struct RunPanicked;

/// Runs the comparison. `run_one` executes a single run; `after_run` sees the result so far
/// after every measured run (to save it), and `on_run` is told which run is starting.
pub fn run<E>(
    plan: &ComparePlan,
    commands: Vec<String>,
    stop: &AtomicBool,
    run_one: &(dyn Fn(&Contender) -> Result<RunResult, E> + Sync),
    on_run: &mut dyn FnMut(&str, usize, bool),
    after_run: &mut dyn FnMut(&ComparisonResult) -> Result<(), E>,
) -> Result<ComparisonResult, E>
where
    E: Send + From<RunPanicked>,
{
    let mut result = ComparisonResult::new(plan, commands);
    let mut measured_so_far = vec![0usize; plan.contenders.len()];
    for (who, measured) in steps(plan) {
        if stop.load(Ordering::Relaxed) {
            result.interrupted = true;
            break;
        }
        for &i in &who {
            on_run(&plan.contenders[i].name, measured_so_far[i] + 1, measured);
        }
        let outcomes = run_together(plan, &who, run_one);
        let mut failure = None;
        for (&i, outcome) in who.iter().zip(outcomes) {
            let run = match outcome {
                Ok(run) => run,
                // A run that failed because it was told to stop (Ctrl-C while a cluster was
                // still getting ready, say) ends the comparison; what the others measured stays.
                Err(_) if stop.load(Ordering::Relaxed) => {
                    result.interrupted = true;
                    continue;
                }
                Err(e) => {
                    failure.get_or_insert(e);
                    continue;
                }
            };
            if run.interrupted {
                result.interrupted = true;
            }
            // A run cut short is kept (marked) for what it measured; medians and verdicts
            // use complete runs.
            if measured {
                measured_so_far[i] += 1;
                result.targets[i].runs.push(run);
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if measured {
            result.summarize();
            after_run(&result)?;
        }
        if result.interrupted {
            break;
        }
    }
    result.summarize();
    Ok(result)
}

/// The schedule as steps: the contenders (indices) run together, and whether the step is
/// measured (not a warm-up).
fn steps(plan: &ComparePlan) -> Vec<(Vec<usize>, bool)> {
    let n = plan.contenders.len();
    let mut steps: Vec<(Vec<usize>, bool)> = Vec::new();
    match plan.schedule {
        Schedule::Interleave | Schedule::Parallel => {
            let together = plan.schedule == Schedule::Parallel;
            let rounds = (0..plan.runs).map(|_| true);
            for measured in std::iter::once(false).filter(|_| plan.warmup).chain(rounds) {
                if together {
                    steps.push(((0..n).collect(), measured));
                } else {
                    steps.extend((0..n).map(|i| (vec![i], measured)));
                }
            }
        }
        Schedule::Sequential => {
            for i in 0..n {
                if plan.warmup {
                    steps.push((vec![i], false));
                }
                steps.extend((0..plan.runs).map(|_| (vec![i], true)));
            }
        }
    }
    steps
}

/// One run of each contender in `who`, on threads of their own when more than one; a run
/// that panicked is a [`RunPanicked`] error.
fn run_together<E>(
    plan: &ComparePlan,
    who: &[usize],
    run_one: &(dyn Fn(&Contender) -> Result<RunResult, E> + Sync),
) -> Vec<Result<RunResult, E>>
where
    E: Send + From<RunPanicked>,
{
    if who.len() == 1 {
        return vec![run_one(&plan.contenders[who[0]])];
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = who
            .iter()
            .map(|&i| s.spawn(move || run_one(&plan.contenders[i])))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(E::from(RunPanicked))))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_runs_are_no_significant_difference_and_separated_ones_are() {
        // Interleaved values: p = 0.69, "~".
        let d = delta(
            &[100.0, 102.0, 98.0, 101.0, 99.0],
            &[101.5, 99.5, 100.5, 98.5, 102.5],
            true,
        )
        .unwrap();
        assert_eq!(d.verdict, "~");
        assert_eq!(d.better, None);
        assert!(d.p_value.unwrap() > 0.5, "{:?}", d.p_value);
        assert!(d.ci_low.unwrap() < 0.0 && d.ci_high.unwrap() > 0.0);
        // Every run of the other target 10% slower: p = 0.008, worse for throughput.
        let d = delta(
            &[100.0, 102.0, 98.0, 101.0, 99.0],
            &[90.0, 91.8, 88.2, 90.9, 89.1],
            true,
        )
        .unwrap();
        assert_eq!(d.verdict, "-10.00%");
        assert_eq!(d.better, Some(false));
        // The same numbers as latency (lower is better) are an improvement.
        let d = delta(
            &[100.0, 102.0, 98.0, 101.0, 99.0],
            &[90.0, 91.8, 88.2, 90.9, 89.1],
            false,
        )
        .unwrap();
        assert_eq!(d.better, Some(true));
    }

    /// Errors going from none to some have no ratio to a zero baseline: "up from 0", with
    /// no interval, not "+0.00%".
    #[test]
    fn a_rise_from_a_zero_baseline_is_up_from_0() {
        let d = delta(
            &[0.0; 5],
            &[86_971.0, 80_000.0, 90_000.0, 85_000.0, 88_000.0],
            false,
        )
        .unwrap();
        assert!(d.from_zero);
        assert_eq!(d.verdict, "up from 0");
        assert_eq!((d.ci_low, d.ci_high), (None, None));
        assert_eq!(d.better, Some(false));
        // Both at zero: no difference, nothing from zero.
        let d = delta(&[0.0; 5], &[0.0; 5], false).unwrap();
        assert!(!d.from_zero);
        assert_eq!(d.verdict, "~");
    }

    #[test]
    fn too_few_runs_give_no_verdict_instead_of_a_false_one() {
        // One run each: no interval, no p.
        let d = delta(&[100.0], &[104.1], true).unwrap();
        assert_eq!(d.verdict, "no verdict");
        assert_eq!((d.ci_low, d.p_value), (None, None));
        assert_eq!(d.no_verdict.as_deref(), Some("one run: no verdict"));
        // Three runs each, completely separated: still cannot reach 0.05.
        let d = delta(&[100.0, 101.0, 99.0], &[90.0, 91.0, 89.0], true).unwrap();
        assert_eq!(d.verdict, "no verdict");
        assert!(d
            .no_verdict
            .unwrap()
            .starts_with("3 runs cannot reach alpha=0.05"));
        // Four each can.
        let d = delta(
            &[100.0, 101.0, 99.0, 100.0],
            &[90.0, 91.0, 89.0, 90.0],
            true,
        )
        .unwrap();
        assert_eq!(d.verdict, "-10.00%");
        assert_eq!(runs_for_a_verdict(), 4);
    }
}
