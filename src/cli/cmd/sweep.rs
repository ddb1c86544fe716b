//! `archbench sweep`: one comparison per load of the ladder, the targets interleaved at each;
//! a target clearly past its knee leaves the ladder. Saved after every step, so Ctrl-C keeps
//! what was measured.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use anyhow::Context as _;

use crate::cli::args::{LoadArgs, SweepArgs};
use crate::cli::output::{check_prices, write_stdout};
use crate::cli::session::Session;
use crate::cli::{live, plan, PlanError, StopSignals, EXIT_FAILURE};
use crate::compare::Schedule;
use crate::report::{Report, TextReport};
use crate::sweep::{
    past_knee, summarize, EarlyStop, LadderKind, SweepResult, SweepStep, SWEEP_KIND,
    SWEEP_SCHEMA_VERSION,
};

/// Connections of each step of a rates ladder unless `-c` says.
const RATE_CONNECTIONS: u64 = 100;

/// One step's load flags: the ladder's load as connections or as a rate.
fn load_args(a: &SweepArgs, kind: LadderKind, rate_connections: u64, load: f64) -> LoadArgs {
    LoadArgs {
        connections: match kind {
            LadderKind::Connections => load as u64,
            LadderKind::Rates => rate_connections,
        },
        threads: a.threads,
        duration: Some(a.duration),
        rate: (kind == LadderKind::Rates).then_some(load),
        pacing_slack: a.pacing_slack,
        no_keepalive: false,
        script: None,
        script_args: Vec::new(),
        request: a.request.clone(),
        perf: Vec::new(),
        slo: a.slo.clone(),
    }
}

/// The sweep document before its first step.
fn empty_sweep(a: &SweepArgs, kind: LadderKind, loads: &[f64]) -> SweepResult {
    SweepResult {
        kind: SWEEP_KIND.into(),
        schema_version: SWEEP_SCHEMA_VERSION,
        ladder: kind,
        loads: loads.to_vec(),
        duration_s: a.duration.as_secs_f64(),
        runs_per_step: a.runs,
        slo: a
            .slo
            .iter()
            .flat_map(|s| s.conditions.iter().map(|c| c.text.clone()))
            .collect(),
        interrupted: false,
        steps: Vec::new(),
        targets: Vec::new(),
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

pub fn cmd_sweep(a: &SweepArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let (kind, loads, rate_connections) = ladder(a)?;
    let ladder = Ladder {
        a,
        kind,
        loads,
        rate_connections,
    };
    let first = ladder.check_every_step()?;
    let names: Vec<String> = first.contenders.iter().map(|c| c.name.clone()).collect();
    check_prices(
        &a.cost,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let mut climb = Climb {
        sweep: empty_sweep(a, kind, &ladder.loads),
        stopped: BTreeMap::new(),
        names,
    };
    let tui = live::want_tui(&a.live, a.quiet, true, Some(a.duration))?;
    let title = format!("sweep {}", climb.names.join(" vs "));
    let mut session = Session::begin(&a.live, &first.contenders, tui, title, !a.quiet, signals)?;
    let quiet = a.quiet || tui;

    for (k, &load) in ladder.loads.iter().enumerate() {
        let active = climb.active_targets(a);
        if active.is_empty() || signals.stop.load(Ordering::Relaxed) {
            break;
        }
        let interrupted = ladder.step(&session, &mut climb, &active, k, load, quiet)?;
        climb.drop_past_knee(kind, k + 1 == ladder.loads.len(), quiet);
        climb.sweep.interrupted = interrupted;
        climb.finish(a);
        save(&climb.sweep, a)?;
        if interrupted {
            break;
        }
    }
    climb.finish(a);
    let sweep = climb.sweep;
    save(&sweep, a)?;
    // The terminal is restored before the report (an error above restores it on drop).
    session.close();
    write_stdout(|out| TextReport.write(&sweep, out))?;
    let interrupted = sweep.interrupted || signals.stop.load(Ordering::Relaxed);
    let code = if interrupted {
        signals.exit_code()
    } else {
        slo_exit_code(&sweep, a)
    };
    session.linger(interrupted);
    Ok(code)
}

/// What the sweep climbs: the ladder's kind and loads, with the flags every step shares.
struct Ladder<'a> {
    a: &'a SweepArgs,
    kind: LadderKind,
    loads: Vec<f64>,
    rate_connections: u64,
}

/// What the climb has learnt so far: the steps measured and the targets that left the ladder.
struct Climb {
    sweep: SweepResult,
    stopped: BTreeMap<String, EarlyStop>,
    /// Every target's name, in the order given.
    names: Vec<String>,
}

impl Ladder<'_> {
    fn load_args(&self, load: f64) -> LoadArgs {
        load_args(self.a, self.kind, self.rate_connections, load)
    }

    /// Every step's plan is checked before any load: a bad one is a usage error now, not an
    /// hour in. The first step's plan, with every target's watch opened.
    fn check_every_step(&self) -> Result<crate::compare::ComparePlan, PlanError> {
        let a = self.a;
        for &load in &self.loads {
            plan::targets_plan(
                &a.targets,
                &self.load_args(load),
                a.runs,
                false,
                Schedule::Interleave,
            )?;
        }
        let first = plan::targets_plan(
            &a.targets,
            &self.load_args(self.loads[0]),
            a.runs,
            false,
            Schedule::Interleave,
        )?;
        for c in &first.contenders {
            for w in &c.watch {
                w.open().map_err(PlanError::Watch)?;
            }
        }
        Ok(first)
    }

    /// Step `k` at `load` of the targets still on the ladder, added to the climb; whether it
    /// was interrupted.
    fn step(
        &self,
        session: &Session<'_>,
        climb: &mut Climb,
        active: &[String],
        k: usize,
        load: f64,
        quiet: bool,
    ) -> anyhow::Result<bool> {
        let a = self.a;
        let warmup = k == 0 && !a.no_warmup;
        let plan = plan::targets_plan(
            active,
            &self.load_args(load),
            a.runs,
            warmup,
            Schedule::Interleave,
        )?;
        for c in &plan.contenders {
            session.views.board.set_plan(
                &c.name,
                &live::plan_line(&c.plan),
                c.plan.stop.duration.map(|d| d.as_secs_f64()),
            );
        }
        if !quiet {
            eprintln!(
                "sweep: {load} {} ({} of {})",
                self.kind.unit(),
                k + 1,
                self.loads.len()
            );
        }
        let commands = plan
            .contenders
            .iter()
            .map(|c| plan::reproduce(&c.plan))
            .collect();
        let step = format!("{load} {}", self.kind.unit());
        let mut comparison =
            session.compare(&plan, commands, Some(&step), None, &mut |_| Ok(()))?;
        if let Some(slo) = &a.slo {
            comparison.slo = comparison.judge_slo(slo);
        }
        let interrupted = comparison.interrupted;
        climb.sweep.steps.push(SweepStep { load, comparison });
        Ok(interrupted)
    }
}

impl Climb {
    /// The targets (as given on the command line) not stopped yet.
    fn active_targets(&self, a: &SweepArgs) -> Vec<String> {
        a.targets
            .iter()
            .zip(&self.names)
            .filter(|(_, n)| !self.stopped.contains_key(*n))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Stops the targets the steps so far put clearly past their knee, said unless quiet or
    /// after the `last` step.
    fn drop_past_knee(&mut self, kind: LadderKind, last: bool, quiet: bool) {
        for (name, stop) in past_their_knee(&self.sweep, &self.names, &self.stopped, kind) {
            if !last && !quiet {
                eprintln!(
                    "sweep: {name} is past its knee ({}); higher loads without it",
                    stop.reason
                );
            }
            self.stopped.insert(name, stop);
        }
    }

    fn finish(&mut self, a: &SweepArgs) {
        finish(&mut self.sweep, &self.names, &self.stopped, a);
    }
}

/// With an SLO: a target that met it at no load fails the sweep.
fn slo_exit_code(sweep: &SweepResult, a: &SweepArgs) -> i32 {
    let missed: Vec<&str> = sweep
        .targets
        .iter()
        .filter(|t| a.slo.is_some() && t.knee.is_none())
        .map(|t| t.name.as_str())
        .collect();
    if missed.is_empty() {
        return 0;
    }
    eprintln!(
        "archbench: SLO not met at any load by {}",
        missed.join(", ")
    );
    EXIT_FAILURE
}

/// Each target's summary over the steps so far; a stop after the last load is no early stop.
fn finish(
    sweep: &mut SweepResult,
    names: &[String],
    stopped: &BTreeMap<String, EarlyStop>,
    a: &SweepArgs,
) {
    let last = sweep.loads.last().copied();
    sweep.targets = names
        .iter()
        .map(|n| {
            let stop = stopped.get(n).filter(|s| Some(s.after) != last).cloned();
            let price = a.cost.iter().find(|(p, _)| p == n).map(|(_, v)| *v);
            summarize(n, &sweep.steps, sweep.ladder, stop, price)
        })
        .collect();
}

fn save(sweep: &SweepResult, a: &SweepArgs) -> anyhow::Result<()> {
    if let Some(p) = &a.json {
        crate::report::save_json_value(sweep, p)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// What the ladder varies, its loads, and the connections of a rates ladder.
fn ladder(a: &SweepArgs) -> Result<(LadderKind, Vec<f64>, u64), PlanError> {
    let usage = |m: &str| PlanError::Invalid(m.to_string());
    match (&a.connections, &a.rates) {
        (None, None) => Err(usage(
            "give the ladder: --connections 1,2,4,8 (closed loop) or --rates 1k:50k:x2 (open loop)",
        )),
        (Some(c), None) => {
            let mut conns: Vec<f64> = c.0.iter().map(|v| v.round().max(1.0)).collect();
            conns.dedup();
            if conns.iter().any(|&v| v > 1_000_000.0) {
                return Err(usage("--connections: at most 1,000,000 per step"));
            }
            Ok((LadderKind::Connections, conns, 0))
        }
        (c, Some(r)) => {
            let connections = match c.as_ref().map(|l| l.0.as_slice()) {
                None => RATE_CONNECTIONS,
                Some([one]) if *one >= 1.0 && *one <= 1_000_000.0 => one.round() as u64,
                Some(_) => {
                    return Err(usage(
                        "with --rates, -c is one connection count for every step (e.g. -c 200)",
                    ))
                }
            };
            Ok((LadderKind::Rates, r.0.clone(), connections))
        }
    }
}
