//! `archbench k8s sweep`: `sweep` over the cluster's variants — the same climb (steps
//! interleaved across the variants, knee, early stop, USL, SLO, cost), the services loaded
//! from here or from an Indexed Job per run, each variant's pods watched at every step.

use std::time::SystemTime;

use anyhow::Context as _;

use super::k8s_incluster::{in_cluster, InClusterRun};
use super::k8s_placed::{pairs, placed_and_priced};
use super::sweep::{check_every_step, climb, exit_status, ladder, StepLoad, StepPlans, SweepSpec};
use crate::cli::k8s_args::K8sSweepArgs;
use crate::cli::output::{check_prices, write_as, write_html, write_markdown, write_stdout};
use crate::cli::session::{RunOne, Session};
use crate::cli::{live, plan, PlanError, StopSignals};
use crate::compare::{ComparePlan, Contender, Schedule};
use crate::engine::Pacing;
use crate::http::tls::PinnedCert;
use crate::k8s::{self, Cluster};
use crate::report::HtmlDoc;
use crate::sweep::LadderKind;
use crate::timefmt;

/// The variants' services, planned with `k8s sweep`'s flags at each step's load.
struct ServiceTargets<'a> {
    targets: &'a [k8s::LoadTarget],
    w: &'a K8sSweepArgs,
    /// `--tls`: the Secret's certificate.
    pinned: Option<PinnedCert>,
}

impl StepPlans for ServiceTargets<'_> {
    fn plan(
        &self,
        active: &[String],
        load: StepLoad,
        warmup: bool,
    ) -> Result<ComparePlan, PlanError> {
        let w = self.w;
        let mut contenders = Vec::new();
        for t in self.targets.iter().filter(|t| active.contains(&t.name)) {
            let whole = k8s::WholeLoad {
                connections: load.connections,
                threads: w.threads,
                duration: w.duration,
                rate: load.rate,
                timeout: w.timeout,
                http2_streams: w.http.streams(),
                tls: w.http.tls,
            };
            let plan = plan::service_plan(&t.url, t.cluster_address, &whole, self.pinned.as_ref())?;
            contenders.push(Contender {
                name: t.name.clone(),
                plan,
                watch: t.watch.clone(),
            });
        }
        Ok(ComparePlan {
            contenders,
            runs: plan::runs(w.runs)?,
            warmup,
            schedule: Schedule::Interleave,
        })
    }
}

/// The Services' port `--tls` loads.
pub fn port_of(tls: bool) -> k8s::Port {
    match tls {
        true => k8s::Port::Https,
        false => k8s::Port::Http,
    }
}

/// One run's whole load, as its plan says (the step's connections or rate).
fn whole_of(c: &Contender, timeout: std::time::Duration) -> k8s::WholeLoad {
    k8s::WholeLoad {
        connections: c.plan.connections as u64,
        threads: c.plan.threads as u64,
        duration: c.plan.stop.duration.unwrap_or_default(),
        rate: match c.plan.pacing {
            Pacing::Open { rate, .. } => Some(rate),
            Pacing::Closed => None,
        },
        timeout,
        http2_streams: c.plan.http2.map(|h| u64::from(h.streams)),
        tls: c.plan.target.scheme == crate::http::Scheme::Https,
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

// Long: the sweep's set-up in the order it must happen (checks, targets, prices, files, the
// first step's plan, the session, the in-cluster runner), each step a line or two.
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
    let vantage = match how {
        Some(_) => k8s::Vantage::InCluster,
        None => k8s::Vantage::Outside,
    };
    let targets = runtime.block_on(k8s::targets(
        cluster,
        &w.targets,
        (vantage, port_of(w.http.tls)),
        runtime.handle(),
    ))?;
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    check_prices(
        &w.cost,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let (placements, charged) =
        placed_and_priced(runtime, cluster, &targets, w.prices.as_deref(), &w.cost)?;
    let cost = pairs(&charged);
    let dir = w.out_dir.join(timefmt::compact(SystemTime::now()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join("k8s-sweep.json");
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
        placements,
    };
    let source = ServiceTargets {
        targets: &targets,
        w,
        pinned: super::k8s_tls::pinned(runtime, cluster, w.http.tls, &dir)?,
    };
    let first = check_every_step(&spec, &source, &names)?;
    let tui = how.is_none() && live::want_tui(&w.live, w.quiet, true, Some(w.duration))?;
    let title = format!("k8s sweep {}", names.join(" vs "));
    let mut session = Session::begin(&w.live, &first.contenders, tui, title, !w.quiet, signals)?;
    let say = |line: &str| {
        if !w.quiet {
            eprintln!("  {line}");
        }
    };
    let workers = |c: &Contender| -> anyhow::Result<crate::stats::RunResult> {
        let (Some(how), Some(target)) = (&how, targets.iter().find(|t| t.name == c.name)) else {
            anyhow::bail!("internal error: no in-cluster target {}", c.name);
        };
        let run = InClusterRun {
            runtime,
            cluster,
            how,
            whole: &whole_of(c, w.timeout),
            dir: &dir,
            command: "k8s sweep",
        };
        run.measure(target, &say, &signals.stop)
    };
    let run_one: Option<RunOne> = how.as_ref().map(|_| &workers as RunOne);
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
