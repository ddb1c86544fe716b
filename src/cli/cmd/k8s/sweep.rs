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
use crate::cli::k8s_args::K8sSweepArgs;
use crate::cli::output::{write_as, write_html, write_markdown, write_stdout};
use crate::cli::session::{RunOne, Session};
use crate::cli::{live, plan, PlanError, StopSignals};
use crate::compare::{ComparePlan, Contender, Schedule};
use crate::k8s::{self, Cluster};
use crate::report::HtmlDoc;
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
        let whole = self.ctx.whole(load.connections, load.rate);
        let contenders = self
            .ctx
            .targets
            .iter()
            .filter(|t| active.contains(&t.name))
            .map(|t| self.ctx.contender(t, &whole))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ComparePlan {
            contenders,
            runs: plan::runs(self.w.runs)?,
            warmup,
            schedule: Schedule::Interleave,
        })
    }
}

/// The ladder and the in-cluster settings, checked before any cluster is asked.
pub struct Checked {
    kind: LadderKind,
    loads: Vec<f64>,
    rate_connections: u64,
    how: Option<k8s::InCluster>,
}

pub fn checked(w: &K8sSweepArgs) -> Result<Checked, PlanError> {
    plan::runs(w.runs)?;
    let (kind, loads, rate_connections) = ladder(w.connections.as_ref(), w.rates.as_ref())?;
    let fewest = match kind {
        LadderKind::Connections => loads.iter().copied().fold(f64::MAX, f64::min) as u64,
        LadderKind::Rates => rate_connections,
    };
    let how = in_cluster(&w.inside, &w.live, fewest)?;
    Ok(Checked {
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
        kind,
        loads,
        rate_connections,
        how,
    } = checked(w)?;
    let asked = Asked {
        targets: &w.targets,
        prices: w.prices.as_deref(),
        cost: &w.cost,
        out_dir: &w.out_dir,
        shape: LoadShape::of(&w.http, w.threads, w.duration, w.timeout),
        command: "k8s sweep",
    };
    let ctx = LoadContext::new(runtime, cluster, how, &asked)?;
    let names = ctx.names();
    let cost = pairs(&ctx.charged);
    let json = ctx.dir.join("k8s-sweep.json");
    let spec = SweepSpec {
        kind,
        loads,
        rate_connections,
        duration: w.duration,
        runs: w.runs,
        no_warmup: w.no_warmup,
        slo: w.slo.as_ref(),
        cost: &cost,
        json: Some(&json),
        quiet: w.quiet,
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
    let tui = !in_cluster && live::want_tui(&w.live, w.quiet, true, Some(w.duration))?;
    let title = format!("k8s sweep {}", names.join(" vs "));
    let mut session = Session::begin(&w.live, &first.contenders, tui, title, !w.quiet, signals)?;
    let say = |line: &str| {
        if !w.quiet {
            eprintln!("  {line}");
        }
    };
    let workers = |c: &Contender| {
        let step = *source.step.lock().unwrap_or_else(|e| e.into_inner());
        let whole = ctx.whole(step.connections, step.rate);
        ctx.in_cluster(&c.name, &whole, &say, &signals.stop)
    };
    let run_one: Option<RunOne> = in_cluster.then_some(&workers as RunOne);
    let result = climb(&spec, &source, &names, &session, run_one, tui, signals);
    session.close();
    let sweep = result?;
    write_outputs(&sweep, w, &json)?;
    Ok(exit_status(&sweep, &spec, &session, signals))
}

/// The sweep where `--json` and `--html` name, and its report on stdout.
fn write_outputs(
    sweep: &crate::sweep::SweepResult,
    w: &K8sSweepArgs,
    json: &std::path::Path,
) -> anyhow::Result<()> {
    crate::cli::output::save(sweep, w.json.as_deref())?;
    if w.html.is_some() {
        write_html(
            &[HtmlDoc::Sweep(Box::new(sweep.clone()))],
            w.html.as_deref(),
            None,
        )?;
    }
    if let Some(md) = &w.markdown {
        write_markdown(sweep, md)?;
    }
    write_stdout(|out| write_as(sweep, w.output, out))?;
    eprintln!("archbench k8s sweep: wrote {}", json.display());
    Ok(())
}
