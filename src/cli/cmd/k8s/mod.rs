//! `archbench k8s …`: the command line of the Kubernetes workflow, mapped onto `crate::k8s`.
//! API calls run on a small tokio runtime owned here; loads run on the engine's own threads,
//! outside it, as everywhere else (the pod monitors reach the runtime through its handle).

mod config;
mod context;
mod curl;
mod down;
mod fingerprint;
mod incluster;
mod load;
mod placed;
mod status;
mod sweep;
mod tls;
mod top;
mod up;

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;

use self::context::LoadShape;
use self::incluster::{in_cluster, worker_count};
use crate::cli::k8s_args::{K8sArgs, K8sCommand, K8sSetupArgs};
use crate::cli::output::{write_stdout, OutputPlan};
use crate::cli::{plan, StopSignals};
use crate::k8s::{self, Cluster, ClusterOptions, K8sError, NginxConfig, Setup, Variant};

pub fn cmd_k8s(a: &K8sArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if let K8sCommand::Manifests(m) = &a.command {
        // No cluster needed: the YAML `up` would apply (with a certificate of its own: `up`
        // keeps the one a cluster already has).
        let mut setup = setup(&m.setup, &a.namespace)?;
        if setup.any_tls() {
            setup.certificate = Some(k8s::tls::ServingCert::generate(k8s::tls::names(&setup))?);
        }
        let jobs = if m.load_job {
            let workers = worker_count(m.workers)?;
            let how = k8s::InCluster {
                workers,
                image: m.load_image.clone(),
                node_selector: None,
                ready_timeout: Duration::from_secs(300),
                spell: crate::cli::argv::agent_args,
            };
            k8s::distributed::preview_jobs(&setup, &how)
        } else {
            Vec::new()
        };
        write_stdout(|out| {
            k8s::write_yaml(&k8s::manifests(&setup), out)?;
            k8s::distributed::write_jobs_yaml(&jobs, out)
        })?;
        return Ok(0);
    }
    // Bad input is a usage error before any cluster is asked.
    match &a.command {
        K8sCommand::Up(s) => drop(setup(s, &a.namespace)?),
        K8sCommand::Config(c) => drop(nginx_config(&c.config)?),
        K8sCommand::Load(l) => {
            k8s::check_side_by_side(&l.targets)?;
            plan::runs(l.runs.runs)?;
            OutputPlan::new(&l.output, "k8s load", load::LAYOUTS)?;
            in_cluster(&l.inside, &l.live, l.connections.connections)?;
            let shape =
                LoadShape::of(&l.http, l.threads(), l.duration.duration, l.timeout.timeout)?;
            let c = l.connections.connections;
            plan::check_service_load(&shape.whole(c, l.rate.steady(), l.rate.staged()))?;
        }
        K8sCommand::Sweep(w) => drop(sweep::checked(w)?),
        K8sCommand::Curl(c) => curl::check(c)?,
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let opts = ClusterOptions {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
    };
    let cluster = runtime.block_on(Cluster::connect(&opts))?;
    let outcome = run(&runtime, &cluster, a, signals);
    drop(cluster);
    // A login's stdin reader sits in a blocking read of the terminal: do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        // Ctrl-C while waiting: said once, and the exit status of the signal.
        Err(e)
            if e.downcast_ref::<K8sError>()
                .is_some_and(|k| matches!(k, K8sError::Interrupted { .. })) =>
        {
            crate::stderr_line!("archbench: {e}");
            Ok(signals.exit_code())
        }
        other => other,
    }
}

fn run(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    a: &K8sArgs,
    signals: &StopSignals,
) -> anyhow::Result<i32> {
    let stop = &signals.stop;
    let code = match &a.command {
        K8sCommand::Manifests(_) => 0,
        K8sCommand::Up(s) => up::up(runtime, cluster, &setup(s, &a.namespace)?, stop)?,
        K8sCommand::Status => status::status(runtime, cluster)?,
        K8sCommand::Config(c) => config::config(runtime, cluster, c, stop)?,
        K8sCommand::Curl(c) => curl::curl(runtime, cluster, c, signals)?,
        K8sCommand::Login(l) => runtime.block_on(k8s::login(
            cluster,
            &l.variant,
            l.pod.as_deref(),
            &l.command,
        ))?,
        K8sCommand::Top(t) => top::top(runtime, cluster, t.watch, stop)?,
        K8sCommand::Fingerprint => fingerprint::fingerprint(runtime, cluster)?,
        K8sCommand::Load(l) => load::load(runtime, cluster, l, signals)?,
        K8sCommand::Sweep(w) => sweep::sweep(runtime, cluster, w, signals)?,
        K8sCommand::Down(d) => down::down(runtime, cluster, d, stop)?,
    };
    Ok(if signals.stop.load(Ordering::Relaxed) && code == 0 {
        signals.exit_code()
    } else {
        code
    })
}

fn nginx_config(text: &str) -> Result<NginxConfig, K8sError> {
    read_config(text, "--config ").map_err(K8sError::Usage)
}

/// tuned, stock, or a file read now; `given` names where ("--config ", "config=").
fn read_config(text: &str, given: &str) -> Result<NginxConfig, String> {
    Ok(match text {
        "tuned" => NginxConfig::Tuned,
        "stock" => NginxConfig::Stock,
        path => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("{given}{path}: {e}; give tuned, stock or the path of an nginx.conf")
            })?;
            NginxConfig::File {
                path: path.into(),
                text,
            }
        }
    })
}

/// The variants of `up` and `manifests`: each `--variant`, else the `--arch` presets.
fn variants(s: &K8sSetupArgs) -> Result<Vec<Variant>, K8sError> {
    if s.variant.is_empty() {
        let mut archs = s.arch.clone();
        archs.sort();
        archs.dedup();
        if archs.is_empty() {
            return Err(K8sError::Usage(
                "--arch needs at least one of intel, arm, amd".into(),
            ));
        }
        return Ok(archs
            .into_iter()
            .map(|a| Variant::preset(a, s.pools_by))
            .collect());
    }
    let mut out: Vec<Variant> = Vec::new();
    for text in &s.variant {
        let v = Variant::parse(text, &|c| read_config(c, "config=")).map_err(K8sError::Usage)?;
        if out.iter().any(|o| o.name == v.name) {
            return Err(K8sError::Usage(format!(
                "--variant {}: the name is given twice; each variant needs its own",
                v.name
            )));
        }
        out.push(v);
    }
    Ok(out)
}

/// The validated setup of `up` and `manifests`.
fn setup(s: &K8sSetupArgs, namespace: &str) -> Result<Setup, K8sError> {
    let variants = variants(s)?;
    if s.image.trim().is_empty() {
        return Err(K8sError::Usage(
            "--image is empty; use e.g. nginx:latest".into(),
        ));
    }
    if s.wait.wait_timeout.is_zero() {
        return Err(K8sError::Usage(
            "--wait-timeout must be above zero; use e.g. 5m".into(),
        ));
    }
    let setup = Setup {
        namespace: namespace.to_string(),
        variants,
        image: s.image.clone(),
        config: nginx_config(&s.config)?,
        service_type: s.service_type,
        wait_timeout: s.wait.wait_timeout,
        tls: s.tls,
        http3: s.http3,
        certificate: None,
    };
    if let Some(why) = setup.caddy_problem() {
        return Err(K8sError::Usage(format!("--variant {why}")));
    }
    let flag = if s.http3 { "--http3" } else { "--tls" };
    match setup.tls_problem() {
        Some(why) => Err(K8sError::Usage(format!("{flag}: {why}"))),
        None => Ok(setup),
    }
}
