//! The ladder climb both sweeps share (`sweep`'s NAME=URL targets, `k8s sweep`'s variants):
//! one comparison per load of the targets still on the ladder, a target clearly past its knee
//! leaving it, every step saved, the SLO and cost judged, the exit status. What a step plans
//! comes from its `StepPlans` source.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::session::{RunOne, Session};
use super::values::Ladder;
use super::{live, plan, PlanError, StopSignals};
use crate::sweep::{
    past_knee, summarize, EarlyStop, LadderKind, SweepResult, SweepStep, SWEEP_KIND,
    SWEEP_SCHEMA_VERSION,
};

/// Connections of each step of a rates ladder unless `-c` says.
const RATE_CONNECTIONS: u64 = 100;

/// One step's load: connections (closed loop), or a rate over `connections` (open loop).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLoad {
    pub connections: u64,
    pub rate: Option<f64>,
}

/// Where a sweep's steps come from: `sweep`'s NAME=URL targets, or `k8s sweep`'s variants.
pub trait StepPlans {
    /// The plan of one step: the targets still on the ladder (by name), at `load`.
    fn plan(
        &self,
        active: &[String],
        load: StepLoad,
        warmup: bool,
    ) -> Result<crate::compare::ComparePlan, PlanError>;

    /// The command line reproducing each contender's run.
    fn commands(&self, plan: &crate::compare::ComparePlan) -> Vec<String> {
        plan.contenders
            .iter()
            .map(|c| plan::reproduce(&c.plan))
            .collect()
    }
}

/// What a sweep climbs and how it judges and saves, whichever command asked for it.
pub struct SweepSpec<'a> {
    pub kind: LadderKind,
    pub loads: Vec<f64>,
    /// Connections of every step of a rates ladder.
    pub rate_connections: u64,
    pub duration: std::time::Duration,
    pub runs: u64,
    pub no_warmup: bool,
    pub slo: Option<&'a crate::slo::Slo>,
    pub cost: &'a [(String, f64)],
    /// Where the sweep is saved after every step (its JSON files).
    pub outputs: &'a super::output::OutputPlan,
    pub quiet: bool,
    /// Where the targets run, when a cluster says (the scaling lines come from them).
    pub placements: Vec<crate::placement::Placement>,
}

impl SweepSpec<'_> {
    fn step_load(&self, load: f64) -> StepLoad {
        StepLoad::of(self.kind, self.rate_connections, load)
    }
}

impl StepLoad {
    /// The step at `load` of a ladder of `kind` (a rates ladder's steps all have
    /// `rate_connections`).
    pub fn of(kind: LadderKind, rate_connections: u64, load: f64) -> StepLoad {
        match kind {
            LadderKind::Connections => StepLoad {
                connections: load as u64,
                rate: None,
            },
            LadderKind::Rates => StepLoad {
                connections: rate_connections,
                rate: Some(load),
            },
        }
    }
}

/// The sweep document before its first step.
pub(super) fn empty_sweep(spec: &SweepSpec<'_>) -> SweepResult {
    SweepResult {
        kind: SWEEP_KIND.into(),
        schema_version: SWEEP_SCHEMA_VERSION,
        ladder: spec.kind,
        loads: spec.loads.clone(),
        duration_s: spec.duration.as_secs_f64(),
        runs_per_step: spec.runs,
        slo: spec
            .slo
            .iter()
            .flat_map(|s| s.conditions.iter().map(|c| c.text.clone()))
            .collect(),
        interrupted: false,
        steps: Vec::new(),
        targets: Vec::new(),
        placements: spec.placements.clone(),
        scaling: Vec::new(),
        find_max: Vec::new(),
    }
}

/// The targets not stopped yet that the steps so far put clearly past their knee, with why
/// (the ladder goes on without them).
fn past_their_knee(
    sweep: &SweepResult,
    names: &[String],
    stopped: &BTreeMap<String, EarlyStop>,
    kind: LadderKind,
) -> Vec<(String, EarlyStop)> {
    let Some(after) = sweep.steps.last().map(|s| s.load) else {
        return Vec::new();
    };
    names
        .iter()
        .filter(|n| !stopped.contains_key(*n))
        .filter_map(|name| {
            let points: Vec<_> = sweep
                .steps
                .iter()
                .filter_map(|s| crate::sweep::figures(s, name))
                .collect();
            let reason = past_knee(&points, kind)?;
            Some((name.clone(), EarlyStop { after, reason }))
        })
        .collect()
}

/// How a finished sweep exits, once its report is out: a signal's status when one stopped
/// it, else 1 when a target met the SLO at no load; the live views linger first if asked.
pub fn exit_status(
    sweep: &SweepResult,
    spec: &SweepSpec<'_>,
    session: &Session<'_>,
    signals: &StopSignals,
) -> i32 {
    let ending = super::output::Ending::of_sweep(
        sweep,
        spec.slo.is_some(),
        signals.stop.load(Ordering::Relaxed),
    );
    session.linger(ending.interrupted());
    ending.status(signals)
}

/// Every step's plan is checked before any load: a bad one is a usage error now, not an hour
/// in. The first step's plan, with every target's watch opened.
pub fn check_every_step(
    spec: &SweepSpec<'_>,
    source: &dyn StepPlans,
    names: &[String],
) -> Result<crate::compare::ComparePlan, PlanError> {
    for &load in &spec.loads {
        source.plan(names, spec.step_load(load), false)?;
    }
    let first = source.plan(names, spec.step_load(spec.loads[0]), false)?;
    for c in &first.contenders {
        for w in &c.watch {
            w.open().map_err(PlanError::Watch)?;
        }
    }
    Ok(first)
}

/// Climbs the ladder: one comparison per load of the targets still on it, each measured by
/// `run_one` (None: here), saved after every step (`spec.json`), so Ctrl-C keeps what was
/// measured. Progress on stderr unless quiet or under the dashboard (`tui`).
pub fn climb(
    spec: &SweepSpec<'_>,
    source: &dyn StepPlans,
    names: &[String],
    session: &Session<'_>,
    run_one: Option<RunOne>,
    tui: bool,
    signals: &StopSignals,
) -> anyhow::Result<SweepResult> {
    let mut climb = Climb {
        sweep: empty_sweep(spec),
        stopped: BTreeMap::new(),
        names: names.to_vec(),
    };
    let quiet = spec.quiet || tui;
    for (k, &load) in spec.loads.iter().enumerate() {
        let active = climb.active_targets();
        if active.is_empty() || signals.stop.load(Ordering::Relaxed) {
            break;
        }
        let step = Step {
            spec,
            source,
            k,
            load,
            quiet,
        };
        let interrupted = step.run(session, &mut climb, &active, run_one)?;
        climb.drop_past_knee(spec.kind, k + 1 == spec.loads.len(), quiet);
        climb.sweep.interrupted = interrupted;
        climb.finish(spec);
        save(&climb.sweep, spec)?;
        if interrupted {
            break;
        }
    }
    climb.finish(spec);
    save(&climb.sweep, spec)?;
    Ok(climb.sweep)
}

/// What the climb has learnt so far: the steps measured and the targets that left the ladder.
struct Climb {
    sweep: SweepResult,
    stopped: BTreeMap<String, EarlyStop>,
    /// Every target's name, in the order given.
    names: Vec<String>,
}

/// One step of the ladder: the `k`-th load.
struct Step<'a> {
    spec: &'a SweepSpec<'a>,
    source: &'a dyn StepPlans,
    k: usize,
    load: f64,
    quiet: bool,
}

impl Step<'_> {
    /// The step's comparison of the targets still on the ladder, added to the climb; whether
    /// it was interrupted.
    fn run(
        &self,
        session: &Session<'_>,
        climb: &mut Climb,
        active: &[String],
        run_one: Option<RunOne>,
    ) -> anyhow::Result<bool> {
        let (spec, load) = (self.spec, self.load);
        let warmup = self.k == 0 && !spec.no_warmup;
        let plan = self.source.plan(active, spec.step_load(load), warmup)?;
        for c in &plan.contenders {
            session.views.board.set_plan(
                &c.name,
                &live::plan_line(&c.plan),
                c.plan.stop.duration.map(|d| d.as_secs_f64()),
            );
        }
        if !self.quiet {
            crate::stderr_line!(
                "sweep: {load} {} ({} of {})",
                spec.kind.unit(),
                self.k + 1,
                spec.loads.len()
            );
        }
        let commands = self.source.commands(&plan);
        let step = format!("{load} {}", spec.kind.unit());
        let mut comparison =
            session.compare(&plan, commands, Some(&step), run_one, &mut |_| Ok(()))?;
        if let Some(slo) = spec.slo {
            comparison.slo = comparison.judge_slo(slo);
        }
        let interrupted = comparison.interrupted;
        climb.sweep.steps.push(SweepStep { load, comparison });
        Ok(interrupted)
    }
}

impl Climb {
    /// The targets not stopped yet, in the order given.
    fn active_targets(&self) -> Vec<String> {
        self.names
            .iter()
            .filter(|n| !self.stopped.contains_key(*n))
            .cloned()
            .collect()
    }

    /// Stops the targets the steps so far put clearly past their knee, said unless quiet or
    /// after the `last` step.
    fn drop_past_knee(&mut self, kind: LadderKind, last: bool, quiet: bool) {
        for (name, stop) in past_their_knee(&self.sweep, &self.names, &self.stopped, kind) {
            if !last && !quiet {
                crate::stderr_line!(
                    "sweep: {name} is past its knee ({}); higher loads without it",
                    stop.reason
                );
            }
            self.stopped.insert(name, stop);
        }
    }

    fn finish(&mut self, spec: &SweepSpec<'_>) {
        finish(&mut self.sweep, &self.names, &self.stopped, spec.cost);
    }
}

/// Each target's summary over the steps so far; a stop after the last load is no early stop.
fn finish(
    sweep: &mut SweepResult,
    names: &[String],
    stopped: &BTreeMap<String, EarlyStop>,
    cost: &[(String, f64)],
) {
    let last = sweep.loads.last().copied();
    // An interrupted sweep's last step is no top of its ladder (a knee search's steps are
    // its own, not the ladder's: it ends where it ends).
    let top = last.filter(|_| sweep.interrupted);
    sweep.targets = names
        .iter()
        .map(|n| {
            let stop = stopped.get(n).filter(|s| Some(s.after) != last).cloned();
            let price = cost.iter().find(|(p, _)| p == n).map(|(_, v)| *v);
            summarize(n, &sweep.steps, (sweep.ladder, top), stop, price)
        })
        .collect();
    // Where a cluster placed the targets, a verdict per vCPU or per dollar rests on a knee
    // only when its step's figures are the servers' capacity.
    if !sweep.placements.is_empty() {
        let reasons: Vec<Option<String>> = sweep
            .targets
            .iter()
            .map(|t| {
                let step = sweep.steps.iter().find(|s| Some(s.load) == t.knee)?;
                step.comparison
                    .not_the_servers_capacity(&t.name, &sweep.placements)
            })
            .collect();
        for (t, why) in sweep.targets.iter_mut().zip(reasons) {
            t.withheld = why;
        }
    }
    let at_knee = |name: &str| {
        let t = sweep.targets.iter().find(|t| t.name == name)?;
        let knee = t.knee?;
        t.points
            .iter()
            .find(|p| p.load == knee)
            .map(|p| p.requests_per_sec)
    };
    let withheld = |name: &str| {
        let t = sweep.targets.iter().find(|t| t.name == name)?;
        t.withheld.clone()
    };
    sweep.scaling = crate::placement::scaling(
        &sweep.placements,
        &crate::placement::Judged {
            rps: &at_knee,
            withheld: &withheld,
        },
    );
}

/// Each target's summary over the steps so far, none stopped early (a search, not a ladder).
pub(super) fn finish_sweep(sweep: &mut SweepResult, names: &[String], spec: &SweepSpec<'_>) {
    finish(sweep, names, &BTreeMap::new(), spec.cost);
}

fn save(sweep: &SweepResult, spec: &SweepSpec<'_>) -> anyhow::Result<()> {
    spec.outputs.save_json(sweep)
}

/// Connection counts a user wrote are whole: `-c 2.5,3` ran one step of 3, `-c 0.4` one of 1.
fn whole_connections(loads: &[f64]) -> Result<(), PlanError> {
    match loads.iter().find(|v| v.fract() != 0.0) {
        Some(v) => Err(PlanError::Invalid(format!(
            "--connections: {v} is not a whole number of connections"
        ))),
        None => Ok(()),
    }
}

/// What the ladder varies, its loads, and the connections of a rates ladder (from `-c` and
/// `--rates`).
pub fn ladder(
    connections: Option<&Ladder>,
    rates: Option<&Ladder>,
) -> Result<(LadderKind, Vec<f64>, u64), PlanError> {
    let usage = |m: &str| PlanError::Invalid(m.to_string());
    match (connections, rates) {
        (None, None) => Err(usage(
            "give the ladder: --connections 1,2,4,8 (closed loop) or --rates 1k:50k:x2 (open loop)",
        )),
        (Some(c), None) => {
            if c.written {
                whole_connections(&c.loads)?;
            }
            // A stepped ladder (1:100:x1.5) rounds to whole connections; steps that round to
            // the same count run once.
            let mut conns: Vec<f64> = c.loads.iter().map(|v| v.round().max(1.0)).collect();
            conns.dedup();
            if conns.iter().any(|&v| v > 1_000_000.0) {
                return Err(usage("--connections: at most 1,000,000 per step"));
            }
            Ok((LadderKind::Connections, conns, 0))
        }
        (c, Some(r)) => {
            if let Some(c) = c {
                whole_connections(&c.loads)?;
            }
            let connections = match c.map(|l| l.loads.as_slice()) {
                None => RATE_CONNECTIONS,
                Some([one]) if *one >= 1.0 && *one <= 1_000_000.0 => one.round() as u64,
                Some(_) => {
                    return Err(usage(
                        "with --rates, -c is one connection count for every step (e.g. -c 200)",
                    ))
                }
            };
            Ok((LadderKind::Rates, r.loads.clone(), connections))
        }
    }
}
