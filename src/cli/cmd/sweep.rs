//! `archbench sweep`: one comparison per load of the ladder, the targets interleaved at each;
//! a target clearly past its knee leaves the ladder. Saved after every step, so Ctrl-C keeps
//! what was measured. The climb is `cli::climb`, which `k8s sweep` climbs too.

use crate::cli::args::{LoadArgs, SweepArgs};
use crate::cli::climb::{
    check_every_step, climb, exit_status, ladder, StepLoad, StepPlans, SweepSpec,
};
use crate::cli::find_max::{find_max, search_asked};
use crate::cli::flags::{Connections, Format, Rate};
use crate::cli::output::{check_prices, OutputPlan};
use crate::cli::session::Session;
use crate::cli::{live, plan, PlanError, StopSignals};
use crate::compare::Schedule;

/// `sweep`'s targets: NAME=URL, planned with the run flags.
struct UrlTargets<'a> {
    a: &'a SweepArgs,
}

impl StepPlans for UrlTargets<'_> {
    fn plan(
        &self,
        active: &[String],
        load: StepLoad,
        warmup: bool,
    ) -> Result<crate::compare::ComparePlan, PlanError> {
        let a = self.a;
        let targets: Vec<String> = a
            .targets
            .iter()
            .filter(|t| {
                let name = t.split_once('=').map_or(t.as_str(), |(n, _)| n);
                active.iter().any(|n| n == name)
            })
            .cloned()
            .collect();
        let args = LoadArgs {
            connections: Connections {
                connections: load.connections,
            },
            threads: a.threads,
            duration: Some(a.duration.duration),
            rate: Rate {
                rate: load.rate.map(crate::cli::values::RateArg::Steady),
                stages: None,
            },
            pacing_slack: a.pacing_slack,
            no_keepalive: false,
            script: None,
            script_args: Vec::new(),
            request: a.request.clone(),
            perf: Vec::new(),
            slo: a.slo.clone(),
        };
        plan::targets_plan(&targets, &args, a.runs.runs, warmup, Schedule::Interleave)
    }
}

pub fn cmd_sweep(a: &SweepArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let (kind, loads, rate_connections) =
        ladder(a.ladders.connections.as_ref(), a.ladders.rates.as_ref())?;
    let search = search_asked(&a.find_max, &loads);
    let outputs = OutputPlan::new(
        &a.output,
        "sweep",
        &[Format::Json, Format::Markdown, Format::Html],
    )?;
    let quiet = a.quiet.quiet || !outputs.text();
    let spec = SweepSpec {
        kind,
        loads,
        rate_connections,
        duration: a.duration.duration,
        runs: a.runs.runs,
        no_warmup: a.no_warmup.no_warmup,
        slo: a.slo.slo.as_ref(),
        cost: &a.cost.cost,
        outputs: &outputs,
        quiet,
        placements: Vec::new(),
    };
    let source = UrlTargets { a };
    let first = check_every_step(&spec, &source, &all_names(a))?;
    let names: Vec<String> = first.contenders.iter().map(|c| c.name.clone()).collect();
    check_prices(
        &a.cost.cost,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let tui = live::want_tui(&a.live, quiet, true, Some(a.duration.duration))?;
    let title = format!("sweep {}", names.join(" vs "));
    let mut session = Session::begin(&a.live, &first.contenders, tui, title, !quiet, signals)?;
    let sweep = match &search {
        Some(search) => find_max(&spec, &source, &names, &session, search, None, signals)?,
        None => climb(&spec, &source, &names, &session, None, tui, signals)?,
    };
    // The terminal is restored before the report (an error above restores it on drop).
    session.close();
    outputs.write(&sweep)?;
    Ok(exit_status(&sweep, &spec, &session, signals))
}

/// The names of `sweep`'s NAME=URL targets, in order (a malformed one is kept whole, for
/// its plan to refuse).
fn all_names(a: &SweepArgs) -> Vec<String> {
    a.targets
        .iter()
        .map(|t| t.split_once('=').map_or(t.as_str(), |(n, _)| n).to_string())
        .collect()
}
