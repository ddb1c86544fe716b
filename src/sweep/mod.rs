//! `archbench sweep`: the same targets at a ladder of loads (connections, closed loop: "how much
//! can it do"; or rates, open loop: "what latency at this traffic"), one comparison per step,
//! to draw how each target scales. This module judges what the steps measured: each target's
//! figures per step, its knee (the highest load still meeting the SLO), when it is clearly past
//! it (so the ladder stops for it), and the USL fit of throughput against concurrency. The CLI
//! runs the steps through `compare`.

pub mod find_max;
pub mod usl;

use serde::{Deserialize, Serialize};

use crate::compare::ComparisonResult;

pub const SWEEP_KIND: &str = "archbench-sweep";
pub const SWEEP_SCHEMA_VERSION: u32 = 1;
pub const READABLE_SWEEP_VERSIONS: [u32; 1] = [1];

/// What the ladder varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LadderKind {
    /// Closed loop: concurrent connections.
    Connections,
    /// Open loop: requests per second.
    Rates,
}

impl LadderKind {
    pub fn unit(self) -> &'static str {
        match self {
            LadderKind::Connections => "connections",
            LadderKind::Rates => "req/s offered",
        }
    }
}

/// The whole sweep, as stored (`--json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    /// Always "archbench-sweep".
    pub kind: String,
    pub schema_version: u32,
    pub ladder: LadderKind,
    /// The loads asked for, in order.
    pub loads: Vec<f64>,
    /// Seconds per run.
    pub duration_s: f64,
    pub runs_per_step: u64,
    /// The objectives, as typed.
    pub slo: Vec<String>,
    pub interrupted: bool,
    /// One comparison per load that ran (targets past their knee left out).
    pub steps: Vec<SweepStep>,
    pub targets: Vec<TargetSweep>,
    /// Where each target ran, when a cluster said so (`k8s sweep`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<crate::placement::Placement>,
    /// Pairs of targets whose vCPUs differ (the earlier one the pair's baseline): throughput per vCPU and scaling
    /// efficiency at each one's knee.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<crate::placement::Scaling>,
    /// `--find-max`: each target's highest rate holding the SLO (its probes are the steps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub find_max: Vec<find_max::MaxRate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepStep {
    pub load: f64,
    pub comparison: ComparisonResult,
}

/// One target across the ladder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetSweep {
    pub name: String,
    /// Its figures at each load it ran.
    pub points: Vec<StepFigures>,
    /// The highest load meeting the SLO (without one: the lowest load reaching 95% of its best
    /// throughput, where it saturates), and why.
    pub knee: Option<f64>,
    pub knee_reason: String,
    /// The ladder's top still met the SLO (or throughput was still growing there): the knee
    /// lies beyond the loads tried, and `knee` is only the top.
    #[serde(default)]
    pub knee_beyond_ladder: bool,
    /// Why the ladder stopped early for it, and after which load.
    pub stopped: Option<EarlyStop>,
    /// Connections ladders: the law's fit, or why there is none.
    pub usl: Option<usl::UslFit>,
    pub usl_refused: Option<String>,
    /// With `--cost`: the price per hour given, and a million requests at the knee.
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    #[serde(default)]
    pub cost_per_million_at_knee: Option<f64>,
    /// Why no per-vCPU or per-dollar verdict may rest on its knee (the knee step's figures
    /// are not its servers' capacity); set where a cluster placed the targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlyStop {
    pub after: f64,
    pub reason: String,
}

/// A target's medians at one load (over its complete runs there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    pub load: f64,
    pub requests_per_sec: f64,
    /// Total latency percentiles; none when no complete run there got an answer.
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p99_9_us: Option<f64>,
    /// Failed requests (transport failures and answers outside 2xx/3xx), % of attempted.
    pub error_percent: f64,
    /// Watched servers' CPU, in cores, and answered requests per server CPU-second.
    pub server_cores: Option<f64>,
    pub requests_per_server_cpu_s: Option<f64>,
    /// Watched servers' peak memory together, in bytes.
    #[serde(default)]
    pub server_memory_bytes: Option<f64>,
    /// Whether the step met the SLO (None without one).
    pub slo_passed: Option<bool>,
    /// With `--cost`: a million requests at this step's throughput.
    #[serde(default)]
    pub cost_per_million: Option<f64>,
    /// No run of the target at this step ran its whole length (the sweep was interrupted in
    /// it): shown, but no knee or fit rests on it.
    #[serde(default)]
    pub cut_short: bool,
}

/// How much worse than its first step a target's p99 must be, with throughput no longer
/// growing, for it to be clearly past its knee.
pub const EXPLODED_P99: f64 = 10.0;
/// Error share past which a target is clearly past its knee.
pub const EXPLODED_ERRORS_PERCENT: f64 = 10.0;
/// Growth of throughput over the best so far below which it counts as flat.
const STILL_GROWING: f64 = 1.05;
/// Without an SLO, the knee is where throughput first reaches this share of its best.
const SATURATED: f64 = 0.95;

impl SweepResult {
    /// The targets that answered nothing at any load though they sent requests, with what
    /// became of those: a measurement of nothing, which a command must not end with success.
    pub fn answered_nothing(&self) -> Vec<(&str, crate::stats::Unanswered)> {
        self.targets
            .iter()
            .filter_map(|t| {
                let runs = self
                    .steps
                    .iter()
                    .flat_map(|s| &s.comparison.targets)
                    .filter(|c| c.name == t.name)
                    .flat_map(|c| &c.runs);
                Some((t.name.as_str(), crate::stats::answered_nothing_in(runs)?))
            })
            .collect()
    }

    /// Whether the sweep's figures agree, as every sweep archbench writes does: each step's
    /// comparison ([`ComparisonResult::check_figures`]), each target's figures at a load the
    /// medians its runs there give, error shares at most 100%, a knee at one of the loads
    /// the target ran (the top of them when it lies beyond the ladder). Where they
    /// disagree, which figure and why.
    pub fn check_figures(&self) -> Result<(), String> {
        let unit = self.ladder.unit();
        for (i, step) in self.steps.iter().enumerate() {
            step.comparison
                .check_figures()
                .map_err(|why| format!("steps[{i}] (at {} {unit}): {why}", step.load))?;
        }
        for t in &self.targets {
            for p in &t.points {
                self.check_point(&t.name, p)?;
            }
            if let Some(k) = t.knee.filter(|k| !t.points.iter().any(|p| p.load == *k)) {
                let mut ran: Vec<String> = t.points.iter().map(|p| p.load.to_string()).collect();
                if ran.is_empty() {
                    ran.push("none".into());
                }
                return Err(format!(
                    "{}: its knee {k} {unit} is none of the loads it ran ({})",
                    t.name,
                    ran.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// A target's figures at one load against the medians of its runs there.
    fn check_point(&self, name: &str, p: &StepFigures) -> Result<(), String> {
        let at = format!("{name} at {} {}", p.load, self.ladder.unit());
        if p.error_percent > 100.0 {
            return Err(format!("{at}: {}% of requests failed", p.error_percent));
        }
        let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
        // Earlier builds wrote a latency of 0 where no run was answered; now none.
        let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => same(a, b),
            (Some(z), None) | (None, Some(z)) => z == 0.0,
            (None, None) => true,
        };
        let agrees = |f: &StepFigures| {
            same(f.requests_per_sec, p.requests_per_sec)
                && same(f.error_percent, p.error_percent)
                && pair(f.p50_us, p.p50_us)
                && pair(f.p90_us, p.p90_us)
                && pair(f.p99_us, p.p99_us)
                && pair(f.p99_9_us, p.p99_9_us)
        };
        let from_runs: Vec<StepFigures> = self
            .steps
            .iter()
            .filter(|s| s.load == p.load)
            .filter_map(|s| figures(s, name))
            .collect();
        match from_runs.first() {
            None => Err(format!("{at}: no step of the sweep ran it there")),
            Some(f) if !from_runs.iter().any(agrees) => {
                let p99 = |v: Option<f64>| v.map_or_else(|| "none".into(), |v| format!("{v} µs"));
                Err(format!(
                    "{at}: its figures are not the medians of its runs there ({} req/s, p99 {}; the runs give {} req/s, p99 {})",
                    p.requests_per_sec,
                    p99(p.p99_us),
                    f.requests_per_sec,
                    p99(f.p99_us)
                ))
            }
            Some(_) => Ok(()),
        }
    }
}

/// Target `name`'s figures in one step's comparison, or None when it did not run there.
pub fn figures(step: &SweepStep, name: &str) -> Option<StepFigures> {
    let c = &step.comparison;
    let t = c.targets.iter().find(|t| t.name == name)?;
    let runs: Vec<&crate::stats::RunResult> = t.judged().collect();
    if runs.is_empty() {
        return None;
    }
    let cut_short = runs.iter().all(|r| r.interrupted);
    let median = |f: &dyn Fn(&crate::stats::RunResult) -> Option<f64>| {
        let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| crate::compare::stats::median(&v))
    };
    // Runs that answered nothing have no latency: they take no part in its median.
    let total = |r: &crate::stats::RunResult| r.latency.total.recorded().cloned();
    let error_percent = median(&|r| {
        (r.totals.attempted > 0).then(|| {
            (r.totals.errors + r.totals.non_2xx_3xx) as f64 * 100.0 / r.totals.attempted as f64
        })
    })
    .unwrap_or(0.0);
    Some(StepFigures {
        load: step.load,
        requests_per_sec: median(&|r| Some(r.totals.requests_per_sec)).unwrap_or(0.0),
        p50_us: median(&|r| Some(total(r)?.p50_us as f64)),
        p90_us: median(&|r| Some(total(r)?.p90_us as f64)),
        p99_us: median(&|r| Some(total(r)?.p99_us as f64)),
        p99_9_us: median(&|r| Some(total(r)?.p99_9_us as f64)),
        error_percent,
        // Sums over every watched server, none where one misses part of its target.
        server_cores: median(&|r| crate::stats::servers_sum(&r.servers, |s| s.cores)),
        requests_per_server_cpu_s: median(&|r| {
            let cpu = crate::stats::servers_run_cpu_s(&r.servers)?;
            crate::stats::requests_per_cpu_s(r.totals.requests, cpu)
        }),
        server_memory_bytes: median(&|r| {
            crate::stats::servers_sum(&r.servers, |s| s.peak_memory_bytes as f64)
        }),
        slo_passed: c
            .slo
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.outcome.passed),
        cost_per_million: None,
        cut_short,
    })
}

/// Whether a target is clearly past its knee after its latest step, and why: errors above
/// 10%; with an SLO, two steps in a row failing it (a target still meeting it is not past
/// its knee, however its latency grew); without, p99 ten times the first step's while
/// throughput stopped growing.
pub fn past_knee(points: &[StepFigures], kind: LadderKind) -> Option<String> {
    let whole = whole_steps(points);
    let points = whole.as_slice();
    let last = points.last()?;
    let unit = kind.unit();
    if last.error_percent >= EXPLODED_ERRORS_PERCENT {
        return Some(format!(
            "{:.1}% of requests failed at {} {unit}",
            last.error_percent, last.load
        ));
    }
    if let [.., before, last] = points {
        if before.slo_passed == Some(false) && last.slo_passed == Some(false) {
            return Some(format!(
                "the SLO failed at {} and {} {unit}",
                before.load, last.load
            ));
        }
    }
    if points.iter().any(|p| p.slo_passed.is_some()) {
        return None;
    }
    let first = points.first()?;
    let best_before = points[..points.len() - 1]
        .iter()
        .map(|p| p.requests_per_sec)
        .fold(0.0, f64::max);
    let (first_p99, last_p99) = (first.p99_us?, last.p99_us?);
    let exploded = first_p99 > 0.0 && last_p99 >= EXPLODED_P99 * first_p99;
    if points.len() > 1 && exploded && last.requests_per_sec < STILL_GROWING * best_before {
        return Some(format!(
            "p99 {last_p99:.0} µs at {} {unit} is {:.0}× the first step's and throughput stopped growing",
            last.load,
            last_p99 / first_p99
        ));
    }
    None
}

/// The steps a verdict rests on: a step cut short by an interruption is shown, not judged
/// (its figures cover part of a run), for the knee, the early stop and the fit alike.
fn whole_steps(points: &[StepFigures]) -> Vec<StepFigures> {
    points.iter().filter(|p| !p.cut_short).cloned().collect()
}

/// Where a target's knee is, from its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Knee {
    pub load: Option<f64>,
    pub reason: String,
    /// The ladder's top is no knee: the SLO still held there, or throughput still grew.
    pub beyond_ladder: bool,
}

/// The knee: with an SLO, the highest load meeting it; without, the lowest load reaching 95%
/// of the best throughput. When that is the ladder's top (the SLO still held there, or
/// throughput grew up to it), the knee lies beyond the ladder, and the reason says to extend
/// it. A sweep that ended before `ladder_top` (interrupted) found no knee there: it says
/// where it ended. Steps cut short are left out ([`whole_steps`]).
pub fn knee(points: &[StepFigures], kind: LadderKind, ladder_top: Option<f64>) -> Knee {
    let whole = whole_steps(points);
    if let Some(k) = no_whole_step(&whole, points, ladder_top) {
        return k;
    }
    let points = whole.as_slice();
    let unit = kind.unit();
    let top = points.last().map(|p| p.load);
    let beyond = |p: &StepFigures, what: &str| {
        match ladder_top.filter(|t| p.load < *t) {
        Some(t) => Knee {
            load: None,
            reason: format!(
                "not found: the sweep ended at {} {unit}, before its ladder's top of {t} {unit}, and there {what} ({:.0} req/s)",
                p.load, p.requests_per_sec
            ),
            beyond_ladder: false,
        },
        None => Knee {
            load: Some(p.load),
            reason: format!(
                "beyond the ladder's top: at {} {unit}, its highest load, {what} ({:.0} req/s); extend the ladder past {} {unit} to find it",
                p.load, p.requests_per_sec, p.load
            ),
            beyond_ladder: true,
        },
    }
    };
    if points.iter().any(|p| p.slo_passed.is_some()) {
        return match points.iter().rev().find(|p| p.slo_passed == Some(true)) {
            Some(p) if Some(p.load) == top => beyond(p, "it still met the SLO"),
            Some(p) => Knee {
                load: Some(p.load),
                reason: format!(
                    "{} {unit}: the highest load meeting the SLO ({:.0} req/s)",
                    p.load, p.requests_per_sec
                ),
                beyond_ladder: false,
            },
            None => Knee {
                load: None,
                reason: "no load met the SLO".into(),
                beyond_ladder: false,
            },
        };
    }
    let best = points
        .iter()
        .map(|p| p.requests_per_sec)
        .fold(0.0, f64::max);
    match points
        .iter()
        .find(|p| best > 0.0 && p.requests_per_sec >= SATURATED * best)
    {
        // Only the top reached 95% of the best, which is the top's own: still growing.
        Some(p) if Some(p.load) == top && points.len() > 1 => {
            beyond(p, "throughput was still growing")
        }
        // One load measured of a ladder cut short: nothing says where throughput flattens.
        Some(p) if points.len() == 1 && ladder_top.is_some_and(|t| p.load < t) => {
            beyond(p, "it was the only load measured")
        }
        Some(p) => Knee {
            load: Some(p.load),
            reason: format!(
                "{} {unit}: throughput reaches 95% of its best ({:.0} of {best:.0} req/s)",
                p.load, p.requests_per_sec
            ),
            beyond_ladder: false,
        },
        None => Knee {
            load: None,
            reason: "nothing was answered".into(),
            beyond_ladder: false,
        },
    }
}

/// No knee, when an interruption left no whole step: it came in the target's first load, or
/// before the target ran at all (it answered nothing because it was asked nothing).
fn no_whole_step(
    whole: &[StepFigures],
    points: &[StepFigures],
    ladder_top: Option<f64>,
) -> Option<Knee> {
    let reason = match (whole.is_empty(), points.is_empty()) {
        (true, false) => "not found: the sweep was interrupted at its first load",
        (true, true) if ladder_top.is_some() => {
            "not measured: the sweep was interrupted before it ran"
        }
        _ => return None,
    };
    Some(Knee {
        load: None,
        reason: reason.into(),
        beyond_ladder: false,
    })
}

/// A target's summary over the steps that ran (with its price per hour, when given), of a
/// ladder up to `ladder_top`.
pub fn summarize(
    name: &str,
    steps: &[SweepStep],
    (kind, ladder_top): (LadderKind, Option<f64>),
    stopped: Option<EarlyStop>,
    price_per_hour: Option<f64>,
) -> TargetSweep {
    let mut points: Vec<StepFigures> = steps.iter().filter_map(|s| figures(s, name)).collect();
    if let Some(price) = price_per_hour {
        for p in &mut points {
            p.cost_per_million = crate::compare::cost_per_million(price, p.requests_per_sec);
        }
    }
    let Knee {
        load: knee,
        reason: knee_reason,
        beyond_ladder: knee_beyond_ladder,
    } = knee(&points, kind, ladder_top);
    let cost_per_million_at_knee = knee
        .and_then(|k| points.iter().find(|p| p.load == k))
        .and_then(|p| p.cost_per_million);
    let (usl, usl_refused) = match kind {
        LadderKind::Connections => {
            let xy: Vec<(f64, f64)> = whole_steps(&points)
                .iter()
                .map(|p| (p.load, p.requests_per_sec))
                .collect();
            match usl::fit(&xy) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e.to_string())),
            }
        }
        LadderKind::Rates => (
            None,
            Some("a rates ladder fixes the load, not the concurrency: no USL fit".into()),
        ),
    };
    TargetSweep {
        name: name.to_string(),
        points,
        knee,
        knee_reason,
        knee_beyond_ladder,
        stopped,
        usl,
        usl_refused,
        price_per_hour,
        cost_per_million_at_knee,
        withheld: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(load: f64, rps: f64, p99: f64, errors: f64, slo: Option<bool>) -> StepFigures {
        StepFigures {
            load,
            requests_per_sec: rps,
            p50_us: Some(p99 / 2.0),
            p90_us: Some(p99 / 1.5),
            p99_us: Some(p99),
            p99_9_us: Some(p99 * 1.5),
            error_percent: errors,
            server_cores: None,
            requests_per_server_cpu_s: None,
            server_memory_bytes: None,
            slo_passed: slo,
            cost_per_million: None,
            cut_short: false,
        }
    }

    /// A ladder cut short keeps a knee its whole steps show (throughput flattened below the
    /// last of them); one load alone shows none.
    #[test]
    fn a_ladder_cut_short_keeps_the_knee_its_steps_show() {
        let pts = [
            point(10.0, 1000.0, 200.0, 0.0, None),
            point(20.0, 1900.0, 250.0, 0.0, None),
            point(40.0, 2000.0, 900.0, 0.0, None),
        ];
        let k = knee(&pts, LadderKind::Connections, Some(80.0));
        assert_eq!(k.load, Some(20.0), "{}", k.reason);
        let k = knee(&pts[..1], LadderKind::Connections, Some(80.0));
        assert_eq!(k.load, None);
        assert!(
            k.reason.contains("it was the only load measured"),
            "{}",
            k.reason
        );
    }

    /// A step cut short stops no target: only whole steps say a target is past its knee.
    #[test]
    fn a_step_cut_short_is_no_second_failure() {
        let mut cut = point(2.0, 150.0, 9_000.0, 0.0, Some(false));
        cut.cut_short = true;
        let pts = [point(1.0, 100.0, 9_000.0, 0.0, Some(false)), cut];
        assert_eq!(past_knee(&pts, LadderKind::Connections), None);
        let mut whole = pts.clone();
        whole[1].cut_short = false;
        assert!(past_knee(&whole, LadderKind::Connections).is_some());
    }

    #[test]
    fn the_knee_is_the_highest_load_meeting_the_slo() {
        let pts = [
            point(1.0, 100.0, 200.0, 0.0, Some(true)),
            point(2.0, 190.0, 250.0, 0.0, Some(true)),
            point(4.0, 300.0, 9_000.0, 0.0, Some(false)),
            point(8.0, 310.0, 30_000.0, 0.0, Some(true)),
        ];
        // The top met it again after a step that did not: still no knee within the ladder.
        assert_eq!(knee(&pts, LadderKind::Connections, None).load, Some(8.0));
        assert!(knee(&pts, LadderKind::Connections, None).beyond_ladder);
        assert_eq!(
            knee(&pts[..3], LadderKind::Connections, None).load,
            Some(2.0)
        );
        assert!(!knee(&pts[..3], LadderKind::Connections, None).beyond_ladder);
        let none = [point(1.0, 100.0, 200.0, 0.0, Some(false))];
        let k = knee(&none, LadderKind::Connections, None);
        assert_eq!((k.load, k.reason.as_str()), (None, "no load met the SLO"));
        // Every step met it: the top is no knee, and the reason says to look further.
        let k = knee(&pts[..2], LadderKind::Connections, None);
        assert_eq!(k.load, Some(2.0));
        assert!(k.beyond_ladder);
        assert!(
            k.reason.starts_with("beyond the ladder's top: at 2 connections, its highest load, it still met the SLO (190 req/s); extend the ladder past 2 connections"),
            "{}",
            k.reason
        );
        // Interrupted at 2 of a ladder up to 8: no knee, and no advice to extend the ladder.
        let k = knee(&pts[..2], LadderKind::Connections, Some(8.0));
        assert_eq!((k.load, k.beyond_ladder), (None, false));
        assert_eq!(
            k.reason,
            "not found: the sweep ended at 2 connections, before its ladder's top of 8 connections, and there it still met the SLO (190 req/s)"
        );
    }

    #[test]
    fn without_an_slo_the_knee_is_where_throughput_saturates() {
        let pts = [
            point(1.0, 100.0, 200.0, 0.0, None),
            point(2.0, 180.0, 220.0, 0.0, None),
            point(4.0, 290.0, 300.0, 0.0, None),
            point(8.0, 300.0, 600.0, 0.0, None),
            point(16.0, 295.0, 1_200.0, 0.0, None),
        ];
        // 290 ≥ 95% of 300.
        assert_eq!(knee(&pts, LadderKind::Connections, None).load, Some(4.0));
        assert!(!knee(&pts, LadderKind::Connections, None).beyond_ladder);
        // Still growing at the top: beyond the ladder.
        let k = knee(&pts[..2], LadderKind::Connections, None);
        assert!(
            k.beyond_ladder && k.reason.contains("throughput was still growing"),
            "{k:?}"
        );
    }

    #[test]
    fn clearly_past_the_knee_stops_the_ladder() {
        let growing = [
            point(1.0, 100.0, 200.0, 0.0, None),
            point(2.0, 200.0, 2_500.0, 0.0, None),
        ];
        // p99 12.5× the first, but throughput still doubled: keep going.
        assert_eq!(past_knee(&growing, LadderKind::Connections), None);
        let flat = [
            point(1.0, 100.0, 200.0, 0.0, None),
            point(2.0, 200.0, 300.0, 0.0, None),
            point(4.0, 201.0, 2_000.0, 0.0, None),
        ];
        let why = past_knee(&flat, LadderKind::Connections).unwrap();
        assert!(
            why.starts_with("p99 2000 µs at 4 connections is 10×"),
            "{why}"
        );
        let failing = [
            point(1.0, 100.0, 200.0, 0.0, Some(true)),
            point(2.0, 190.0, 250.0, 0.0, Some(false)),
        ];
        assert_eq!(past_knee(&failing, LadderKind::Rates), None);
        // Still meeting its SLO: not past the knee, however p99 grew.
        let meeting = [
            point(1.0, 100.0, 200.0, 0.0, Some(true)),
            point(2.0, 100.0, 5_000.0, 0.0, Some(true)),
        ];
        assert_eq!(past_knee(&meeting, LadderKind::Connections), None);
        let twice = [&failing[..], &[point(4.0, 300.0, 300.0, 0.0, Some(false))]].concat();
        assert_eq!(
            past_knee(&twice, LadderKind::Rates).unwrap(),
            "the SLO failed at 2 and 4 req/s offered"
        );
        let erring = [point(1000.0, 500.0, 200.0, 12.5, None)];
        assert!(past_knee(&erring, LadderKind::Rates)
            .unwrap()
            .starts_with("12.5% of requests failed"));
    }
}
