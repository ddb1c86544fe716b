//! `archbench k8s sweep`: `sweep` over the cluster's variants — the same climb (steps
//! interleaved across the variants, knee, early stop, USL, SLO, cost), the services loaded
//! from here or from an Indexed Job per run, each variant's pods watched at every step.

use std::sync::Mutex;

use super::context::{Asked, LoadContext, LoadShape};
use super::incluster::in_cluster;
use super::placed::pairs;
use crate::cli::climb::{
    check_every_step, climb, exit_status, ladder, StepLoad, StepPlans, SweepSpec,
};
use crate::cli::find_max::{find_max, search_asked};
use crate::cli::flags::Format;
use crate::cli::k8s_args::K8sSweepArgs;
use crate::cli::output::OutputPlan;
use crate::cli::session::{RunOne, Session};
use crate::cli::{live, plan, PlanError, StopSignals};
use crate::compare::{ComparePlan, Contender, Schedule};
use crate::k8s::{self, Cluster};
use crate::sweep::LadderKind;

/// The variants' services, planned with `k8s sweep`'s flags at each step's load.
struct ServiceTargets<'a> {
    ctx: &'a LoadContext<'a>,
    w: &'a K8sSweepArgs,
    /// The load of the step planned last: the one the climb runs next (its in-cluster
    /// workers take it).
    step: Mutex<StepLoad>,
}

impl StepPlans for ServiceTargets<'_> {
    fn plan(
        &self,
        active: &[String],
        load: StepLoad,
        warmup: bool,
    ) -> Result<ComparePlan, PlanError> {
        *self.step.lock().unwrap_or_else(|e| e.into_inner()) = load;
        let whole = self.ctx.shape.whole(load.connections, load.rate, None);
        let contenders = self
            .ctx
            .targets
            .iter()
            .filter(|t| active.contains(&t.name))
            .map(|t| self.ctx.contender(t, &whole))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ComparePlan {
            contenders,
            runs: plan::runs(self.w.runs.runs)?,
            warmup,
            schedule: Schedule::Interleave,
        })
    }
}

/// The ladder, the load's shape (every step's load planned) and the in-cluster settings,
/// checked before any cluster is asked.
pub struct Checked {
    outputs: OutputPlan,
    shape: LoadShape,
    kind: LadderKind,
    loads: Vec<f64>,
    rate_connections: u64,
    how: Option<k8s::InCluster>,
}

pub fn checked(w: &K8sSweepArgs) -> Result<Checked, PlanError> {
    plan::runs(w.runs.runs)?;
    let (kind, loads, rate_connections) =
        ladder(w.ladders.connections.as_ref(), w.ladders.rates.as_ref())?;
    let fewest = match kind {
        LadderKind::Connections => loads.iter().copied().fold(f64::MAX, f64::min) as u64,
        LadderKind::Rates => rate_connections,
    };
    let how = in_cluster(&w.inside, &w.live, fewest)?;
    let shape = LoadShape::of(&w.http, w.threads(), w.duration.duration, w.timeout.timeout)?;
    for &load in &loads {
        let step = StepLoad::of(kind, rate_connections, load);
        plan::check_service_load(&shape.whole(step.connections, step.rate, None))?;
    }
    let outputs = OutputPlan::new(
        &w.output,
        "k8s sweep",
        &[Format::Json, Format::Markdown, Format::Html],
    )?;
    Ok(Checked {
        outputs,
        shape,
        kind,
        loads,
        rate_connections,
        how,
    })
}

/// `k8s sweep`: the set-up (`LoadContext`), then the climb over the variants' services.
pub fn sweep(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    w: &K8sSweepArgs,
    signals: &StopSignals,
) -> anyhow::Result<i32> {
    let Checked {
        outputs,
        shape,
        kind,
        loads,
        rate_connections,
        how,
    } = checked(w)?;
    let asked = Asked {
        targets: &w.targets,
        prices: w.prices.prices.as_deref(),
        cost: &w.prices.cost.cost,
        out_dir: &w.out_dir.out_dir,
        shape,
        command: "k8s sweep",
    };
    let ctx = LoadContext::new(runtime, cluster, how, &asked)?;
    let names = ctx.names();
    let cost = pairs(&ctx.charged);
    let outputs = outputs.with_run_directory(ctx.dir.join("k8s-sweep.json"), None);
    let quiet = w.quiet.quiet || !outputs.text();
    let spec = SweepSpec {
        kind,
        loads,
        rate_connections,
        duration: w.duration.duration,
        runs: w.runs.runs,
        no_warmup: w.no_warmup.no_warmup,
        slo: w.slo.slo.as_ref(),
        cost: &cost,
        outputs: &outputs,
        quiet,
        placements: ctx.placements.clone(),
    };
    let source = ServiceTargets {
        ctx: &ctx,
        w,
        step: Mutex::new(StepLoad {
            connections: 0,
            rate: None,
        }),
    };
    let first = check_every_step(&spec, &source, &names)?;
    let in_cluster = ctx.how.is_some();
    let tui = !in_cluster && live::want_tui(&w.live, quiet, true, Some(w.duration.duration))?;
    let title = format!("k8s sweep {}", names.join(" vs "));
    let mut session = Session::begin(&w.live, &first.contenders, tui, title, !quiet, signals)?;
    let say = |line: &str| {
        if !quiet {
            crate::stderr_line!("  {line}");
        }
    };
    let workers = |c: &Contender| {
        let step = *source.step.lock().unwrap_or_else(|e| e.into_inner());
        let whole = ctx.shape.whole(step.connections, step.rate, None);
        ctx.in_cluster(&c.name, &whole, &say, &signals.stop)
    };
    let run_one: Option<RunOne> = in_cluster.then_some(&workers as RunOne);
    let result = match search_asked(&w.find_max, &spec.loads) {
        Some(search) => find_max(&spec, &source, &names, &session, &search, run_one, signals),
        None => climb(&spec, &source, &names, &session, run_one, tui, signals),
    };
    session.close();
    let sweep = result?;
    outputs.write(&sweep)?;
    let files: Vec<String> = outputs.files().map(|p| p.display().to_string()).collect();
    crate::stderr_line!("archbench k8s sweep: wrote {}", files.join(", "));
    Ok(exit_status(&sweep, &spec, &session, signals))
}
