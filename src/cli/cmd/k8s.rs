//! `archbench k8s …`: the command line of the Kubernetes workflow, mapped onto `crate::k8s`.
//! API calls run on a small tokio runtime owned here; loads run on the engine's own threads,
//! outside it, as everywhere else (the pod monitors reach the runtime through its handle).

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use super::k8s_incluster::{in_cluster, worker_count, InClusterRun};
use super::k8s_placed::{pairs, placed_and_priced, with_basis};
use crate::cli::k8s_args::{K8sArgs, K8sCommand, K8sLayout, K8sLoadArgs, K8sSetupArgs};
use crate::cli::output::{check_prices, slo_failed, write_html, write_markdown, write_stdout};
use crate::cli::progress::ProgressLine;
use crate::cli::session::{RunOne, Session};
use crate::cli::{live, plan, StopSignals, EXIT_FAILURE};
use crate::compare::{ComparePlan, ComparisonResult, Contender, Schedule};
use crate::k8s::{
    self, Cluster, ClusterOptions, K8sError, NginxConfig, Reconfigured, Setup, Variant,
};
use crate::report::{HtmlDoc, JsonReport, MarkdownReport, Report, TextReport, WrkReport};
use crate::stats::LimiterSide;
use crate::timefmt;

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
            plan::runs(l.runs)?;
            in_cluster(&l.inside, &l.live, l.connections)?;
        }
        K8sCommand::Sweep(w) => drop(super::k8s_sweep::checked(w)?),
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
                .is_some_and(|k| matches!(k, K8sError::Interrupted(_))) =>
        {
            eprintln!("archbench: {e}");
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
    let stop = &*signals.stop;
    let code = match &a.command {
        K8sCommand::Manifests(_) => 0,
        K8sCommand::Up(s) => up(runtime, cluster, &setup(s, &a.namespace)?, stop)?,
        K8sCommand::Status => {
            let rows = runtime.block_on(k8s::status(cluster))?;
            let builds = builds(runtime, cluster, &rows);
            write_stdout(|out| {
                k8s::write_status(&rows, out)?;
                write_builds(&builds, out)
            })?;
            0
        }
        K8sCommand::Config(c) => config(runtime, cluster, c, stop)?,
        K8sCommand::Curl(c) => curl(runtime, cluster, c)?,
        K8sCommand::Login(l) => runtime.block_on(k8s::login(
            cluster,
            &l.variant,
            l.pod.as_deref(),
            &l.command,
        ))?,
        K8sCommand::Top(t) => top(runtime, cluster, t.watch, stop)?,
        K8sCommand::Fingerprint => fingerprint(runtime, cluster)?,
        K8sCommand::Load(l) => load(runtime, cluster, l, signals)?,
        K8sCommand::Sweep(w) => super::k8s_sweep::sweep(runtime, cluster, w, signals)?,
        K8sCommand::Down(d) => down(runtime, cluster, d, stop)?,
    };
    Ok(if signals.stop.load(Ordering::Relaxed) && code == 0 {
        signals.exit_code()
    } else {
        code
    })
}

/// `k8s up`: what it applied (and took over), what stays unreachable from here, the status.
fn up(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    setup: &Setup,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<i32> {
    let mut line = ProgressLine::new(true);
    let report = runtime.block_on(k8s::up(cluster, setup, &mut |l| line.message(l), stop));
    line.finish();
    let report = report?;
    note_not_answering(&report.not_answering);
    write_stdout(|out| {
        for a in &report.changes {
            write!(out, "{}: {}", a.what, a.change.as_str())?;
            if !a.took_over.is_empty() {
                write!(out, ", taking over {}", a.took_over.join(", "))?;
            }
            writeln!(out)?;
        }
        if report.changed_nothing() {
            writeln!(out, "nothing changed: the cluster already runs this setup")?;
        }
        writeln!(out)?;
        k8s::write_status(&report.rows, out)
    })?;
    Ok(0)
}

/// On stderr, each Service address that did not accept connections from here when `up` or
/// `config` ended.
fn note_not_answering(addresses: &[String]) {
    for a in addresses {
        eprintln!(
            "archbench: note: {a} does not accept every connection from here yet (its pods are \
             ready; a load from this machine would fail until it does)"
        );
    }
}

/// `k8s config FILE`: checked in a pod, rolled, rolled back when the new pods fail.
fn config(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    c: &crate::cli::k8s_args::K8sConfigArgs,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<i32> {
    let config = nginx_config(&c.config)?;
    let mut line = ProgressLine::new(true);
    let done = runtime.block_on(k8s::reconfigure(
        cluster,
        config,
        c.wait_timeout,
        &mut |l| line.message(l),
        stop,
    ));
    line.finish();
    Ok(match done? {
        Reconfigured::Unchanged => {
            write_stdout(|out| {
                writeln!(
                    out,
                    "nothing changed: the pods already run this configuration"
                )
            })?;
            0
        }
        Reconfigured::Applied {
            rows,
            checked,
            not_answering,
        } => {
            note_not_answering(&not_answering);
            write_stdout(|out| {
                writeln!(out, "{checked}")?;
                writeln!(out, "applied; the new pods:")?;
                k8s::write_status(&rows, out)
            })?;
            0
        }
        Reconfigured::RolledBack { why } => {
            eprintln!("archbench: the new configuration failed, the previous one is back: {why}");
            EXIT_FAILURE
        }
    })
}

/// What each variant runs: its pod's CPU model and nginx build (None where exec is refused:
/// a reader may list pods without exec).
fn builds(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    rows: &[k8s::PodRow],
) -> Vec<(String, Option<k8s::ArchFingerprint>)> {
    let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    variants.dedup();
    variants
        .into_iter()
        .map(|v| {
            let print = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(20), k8s::fingerprint(cluster, v)).await
            });
            (v.to_string(), print.ok().and_then(Result::ok))
        })
        .collect()
}

/// Under the status table: per variant, the CPU it runs on and its nginx build.
fn write_builds(
    builds: &[(String, Option<k8s::ArchFingerprint>)],
    out: &mut dyn Write,
) -> io::Result<()> {
    if builds.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    for (variant, print) in builds {
        match print {
            Some(f) => {
                let nginx = f.nginx.describe().unwrap_or_else(|| "nginx -V printed no version".into());
                writeln!(out, "{variant}: {} ({}); {nginx}", f.cpu_model, f.node_arch)?;
                for w in &f.nginx.warnings {
                    writeln!(out, "  WARNING: {w}")?;
                }
            }
            None => writeln!(
                out,
                "{variant}: CPU and nginx build not read (exec into its pod is not allowed, or it is not running)"
            )?,
        }
    }
    Ok(())
}

/// `k8s fingerprint`: one per variant that runs.
fn fingerprint(runtime: &tokio::runtime::Runtime, cluster: &Cluster) -> anyhow::Result<i32> {
    let rows = runtime.block_on(k8s::status(cluster))?;
    let mut variants: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    variants.dedup();
    let mut prints = Vec::new();
    for variant in variants {
        prints.push(runtime.block_on(k8s::fingerprint(cluster, variant))?);
    }
    write_stdout(|out| k8s::write_fingerprints(&prints, out))?;
    Ok(0)
}

/// `k8s down`: what it deleted, and a namespace it kept and why.
fn down(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    d: &crate::cli::k8s_args::K8sDownArgs,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<i32> {
    let report = runtime.block_on(k8s::down(cluster, d.keep_namespace, d.wait_timeout, stop))?;
    write_stdout(|out| {
        for what in &report.deleted {
            writeln!(out, "{what}: deleted")?;
        }
        if let Some((ns, others)) = &report.kept_namespace {
            writeln!(
                out,
                "Namespace {ns}: kept, it holds what is not archbench's: {}",
                others.join(", ")
            )?;
        }
        if report.deleted.is_empty() {
            writeln!(
                out,
                "nothing of archbench's in namespace {}",
                cluster.namespace
            )?;
        }
        Ok(())
    })?;
    Ok(0)
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
    if s.wait_timeout.is_zero() {
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
        wait_timeout: s.wait_timeout,
        tls: s.tls,
        certificate: None,
    };
    match setup.tls_problem() {
        Some(why) => Err(K8sError::Usage(format!("--tls: {why}"))),
        None => Ok(setup),
    }
}

fn curl(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    c: &crate::cli::k8s_args::K8sCurlArgs,
) -> anyhow::Result<i32> {
    let targets = runtime.block_on(k8s::targets(
        cluster,
        std::slice::from_ref(&c.target),
        (k8s::Vantage::Outside, k8s::Port::Http),
        runtime.handle(),
    ))?;
    let rows = runtime.block_on(k8s::status(cluster))?;
    let variant_of = rows
        .iter()
        .map(|r| (r.pod.clone(), r.variant.clone()))
        .collect();
    let mut answers = Vec::new();
    for t in &targets {
        let addr = t
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let addr = if addr.contains(':') {
            addr
        } else {
            format!("{addr}:80")
        };
        for n in 0..c.count {
            let f = runtime.block_on(k8s::fetch(&addr, "/", c.timeout))?;
            write_stdout(|out| {
                writeln!(
                    out,
                    "{} {}: {} in {:.2} ms, answered by {}",
                    t.name,
                    n + 1,
                    f.status,
                    f.elapsed.as_secs_f64() * 1000.0,
                    f.answered_by
                        .as_deref()
                        .unwrap_or("(the body does not name its pod)")
                )?;
                if n == 0 {
                    writeln!(out, "{}", f.body_text())?;
                }
                Ok(())
            })?;
            answers.push(f);
        }
    }
    if c.target == k8s::LoadSelection::Multiarch || targets.len() > 1 {
        let by = k8s::split(&answers, &variant_of);
        write_stdout(|out| {
            let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
            writeln!(out, "answers by variant: {}", parts.join(", "))
        })?;
    }
    Ok(0)
}

fn top(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    watch: bool,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<i32> {
    loop {
        // Listed afresh each time: a restarted pod is followed by its new name.
        let pods = runtime.block_on(k8s::pods_of(cluster, None))?;
        let usage = runtime.block_on(k8s::top(cluster, &pods))?;
        let w = usage
            .iter()
            .map(|u| u.variant.len() + 2)
            .max()
            .unwrap_or(0)
            .max(9);
        write_stdout(|out| {
            writeln!(
                out,
                "{:<w$}{:<40}{:>12}{:>14}  SOURCE",
                "VARIANT", "POD", "CPU (cores)", "MEMORY"
            )?;
            for u in &usage {
                writeln!(
                    out,
                    "{:<w$}{:<40}{:>12.3}{:>14}  {}",
                    u.variant,
                    u.pod,
                    u.cores,
                    crate::units::bytes_iec(u.memory_bytes as f64),
                    u.source
                )?;
            }
            if usage.is_empty() {
                writeln!(
                    out,
                    "(no pods of archbench's; `archbench k8s up` creates them)"
                )?;
            }
            Ok(())
        })?;
        if !watch || stop.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        write_stdout(|out| writeln!(out))?;
    }
}

// Long: a load's steps in the order they must happen (targets, prices, files and the pinned
// certificate, the plan, the session, the in-cluster runner, the result's verdicts), a line
// or two each.
fn load(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    l: &K8sLoadArgs,
    signals: &StopSignals,
) -> anyhow::Result<i32> {
    let runs = plan::runs(l.runs)?;
    let how = in_cluster(&l.inside, &l.live, l.connections)?;
    let vantage = match how {
        Some(_) => k8s::Vantage::InCluster,
        None => k8s::Vantage::Outside,
    };
    let port = super::k8s_sweep::port_of(l.http.tls);
    let targets = runtime.block_on(k8s::targets(
        cluster,
        &l.targets,
        (vantage, port),
        runtime.handle(),
    ))?;
    let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    check_prices(&l.cost, &names)?;
    let (placements, charged) =
        placed_and_priced(runtime, cluster, &targets, l.prices.as_deref(), &l.cost)?;
    let files = LoadFiles::create(l)?;
    let pinned = super::k8s_tls::pinned(runtime, cluster, l.http.tls, &files.dir)?;
    let (plan, commands) = load_plan(
        &targets,
        l,
        &Planned {
            runs,
            in_cluster: how.is_some(),
            namespace: &cluster.namespace,
            pinned: pinned.as_ref(),
        },
    )?;
    if l.layout == K8sLayout::Wrk {
        announce_wrk(&targets, &commands);
    }
    let whole = whole_load(l);
    let say = |line: &str| {
        if l.layout == K8sLayout::Text {
            eprintln!("  {line}");
        }
    };
    let mut session = load_session(l, &plan, how.is_some(), &names, signals)?;
    let workers = |c: &Contender| -> anyhow::Result<crate::stats::RunResult> {
        let Some(how) = &how else {
            anyhow::bail!("internal error: in-cluster workers for a load from outside");
        };
        let target = targets
            .iter()
            .find(|t| t.name == c.name)
            .context("a target went missing; this is a bug in archbench")?;
        let run = InClusterRun {
            runtime,
            cluster,
            how,
            whole: &whole,
            dir: &files.dir,
            command: "k8s load",
        };
        run.measure(target, &say, &signals.stop)
    };
    let mut save = |c: &ComparisonResult| files.save_json(c);
    let run_one: Option<RunOne> = match how {
        Some(_) => Some(&workers),
        None => None,
    };
    let result = session.compare(&plan, commands, None, run_one, &mut save);
    session.close();
    let mut result = result?;
    if let Some(slo) = &l.slo {
        result.slo = result.judge_slo(slo);
    }
    result.cost = result.costs(&pairs(&charged));
    with_basis(&mut result.cost, &charged);
    result.scaling = crate::placement::scaling(&placements, &|name: &str| result.median_rps(name));
    result.placements = placements;
    save(&result)?;
    files.write_reports(&result, l)?;
    write_load_report(&result, &plan, l, how.is_some())?;
    files.say_written(how.is_some());
    session.linger(result.interrupted);
    Ok(load_exit(&result, signals))
}

/// A load's exit status: the signal's when interrupted, 1 when a target answered nothing or
/// missed the SLO.
fn load_exit(result: &ComparisonResult, signals: &StopSignals) -> i32 {
    let outcomes: Vec<(&str, Option<&crate::stats::SloOutcome>)> = result
        .slo
        .iter()
        .map(|t| (t.name.as_str(), Some(&t.outcome)))
        .collect();
    if result.interrupted {
        signals.exit_code()
    } else {
        // Both said, whichever fails.
        let nothing = crate::cli::output::say_answered_nothing(result);
        if slo_failed(&outcomes) || nothing {
            EXIT_FAILURE
        } else {
            0
        }
    }
}

/// The files of one `k8s load`: a fresh directory under `--out-dir`, named by the time.
struct LoadFiles {
    dir: std::path::PathBuf,
    json: std::path::PathBuf,
    md: std::path::PathBuf,
    /// `--json FILE`: the comparison there too.
    also: Option<std::path::PathBuf>,
}

impl LoadFiles {
    fn create(l: &K8sLoadArgs) -> anyhow::Result<LoadFiles> {
        let dir = l.out_dir.join(timefmt::compact(SystemTime::now()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let (json, md) = (dir.join("k8s-load.json"), dir.join("k8s-load.md"));
        Ok(LoadFiles {
            dir,
            json,
            md,
            also: l.json.clone(),
        })
    }

    fn save_json(&self, c: &ComparisonResult) -> anyhow::Result<()> {
        for path in std::iter::once(&self.json).chain(&self.also) {
            crate::cli::output::save(c, Some(path))?;
        }
        Ok(())
    }

    /// The Markdown of the run directory, and the files `--markdown` and `--html` name.
    fn write_reports(&self, result: &ComparisonResult, l: &K8sLoadArgs) -> anyhow::Result<()> {
        write_markdown(result, &self.md)?;
        if let Some(md) = &l.markdown {
            write_markdown(result, md)?;
        }
        if l.html.is_some() {
            write_html(
                &[HtmlDoc::Comparison(Box::new(result.clone()))],
                l.html.as_deref(),
                None,
            )?;
        }
        Ok(())
    }

    /// Where the results went, on stderr.
    fn say_written(&self, in_cluster: bool) {
        eprintln!(
            "archbench k8s load: wrote {} and {}",
            self.json.display(),
            self.md.display()
        );
        if let Some(also) = &self.also {
            eprintln!("archbench k8s load: and {}", also.display());
        }
        if in_cluster {
            eprintln!(
                "archbench k8s load: each worker's own result is in {}",
                self.dir.join("workers").display()
            );
        }
    }
}

/// `--layout wrk`: each target's run announced as the guide's script does, before any load.
fn announce_wrk(targets: &[k8s::LoadTarget], commands: &[String]) {
    for (t, cmd) in targets.iter().zip(commands) {
        eprintln!(
            "Running wrk test for {} on {}...",
            t.name.to_uppercase(),
            t.url
        );
        eprintln!("{cmd}");
    }
}

/// The load of every target as given, before it is split among in-cluster workers.
fn whole_load(l: &K8sLoadArgs) -> k8s::WholeLoad {
    k8s::WholeLoad {
        http2_streams: l.http.streams(),
        tls: l.http.tls,
        connections: l.connections,
        threads: l.threads,
        duration: l.duration,
        rate: l.rate,
        timeout: l.timeout,
    }
}

/// The live session of a `k8s load`. Load from outside the cluster is measured here, live;
/// in-cluster workers report only when they end, so they get no dashboard.
fn load_session<'s>(
    l: &K8sLoadArgs,
    plan: &ComparePlan,
    in_cluster: bool,
    names: &[&str],
    signals: &'s StopSignals,
) -> anyhow::Result<Session<'s>> {
    let tui = !in_cluster
        && live::want_tui(&l.live, l.layout != K8sLayout::Text, true, Some(l.duration))?;
    let title = format!("k8s load {}", names.join(" vs "));
    let say_runs = l.layout == K8sLayout::Text;
    Session::begin(&l.live, &plan.contenders, tui, title, say_runs, signals)
}

/// The result on stdout in the chosen layout, with the workers' part of in-cluster runs.
fn write_load_report(
    result: &ComparisonResult,
    plan: &ComparePlan,
    l: &K8sLoadArgs,
    in_cluster: bool,
) -> anyhow::Result<()> {
    write_stdout(|out| match l.layout {
        K8sLayout::Text => {
            TextReport.write(result, out)?;
            if in_cluster {
                write_workers(result, l.inside.per_worker, out)?;
            }
            Ok(())
        }
        K8sLayout::Wrk => {
            ScriptReport { plan }.write(result, out)?;
            if in_cluster {
                write_workers(result, l.inside.per_worker, out)?;
            }
            ScriptReport::done(result, out)
        }
        K8sLayout::Json => JsonReport.write(result, out),
        K8sLayout::Markdown => MarkdownReport.write(result, out),
    })
}

/// What shapes `k8s load`'s plan beside its flags.
struct Planned<'a> {
    runs: usize,
    in_cluster: bool,
    namespace: &'a str,
    /// `--tls`: the Secret's certificate.
    pinned: Option<&'a crate::http::tls::PinnedCert>,
}

/// The comparison `k8s load` runs, and how to reproduce each target's run.
fn load_plan(
    targets: &[k8s::LoadTarget],
    l: &K8sLoadArgs,
    p: &Planned<'_>,
) -> anyhow::Result<(ComparePlan, Vec<String>)> {
    let (runs, in_cluster, namespace) = (p.runs, p.in_cluster, p.namespace);
    let mut contenders = Vec::new();
    for t in targets {
        let plan = plan::service_plan(&t.url, t.cluster_address, &whole_load(l), p.pinned)?;
        contenders.push(Contender {
            name: t.name.clone(),
            plan,
            watch: t.watch.clone(),
        });
    }
    let commands: Vec<String> = contenders
        .iter()
        .map(|c| match l.layout {
            _ if in_cluster => in_cluster_command(l, namespace, &c.name),
            K8sLayout::Wrk => format!(
                "wrk -t{} -c{} -d{} {}",
                c.plan.threads,
                c.plan.connections,
                l.duration.as_secs(),
                c.plan.target.redacted_url
            ),
            _ => plan::reproduce(&c.plan),
        })
        .collect();
    let plan = ComparePlan {
        contenders,
        runs,
        warmup: l.warmup,
        schedule: Schedule::Parallel,
    };
    Ok((plan, commands))
}

/// The guide's script's own layout (`--layout wrk`): each target's result as wrk prints it,
/// under "NAME RESULTS:", then the script's closing line.
struct ScriptReport<'a> {
    plan: &'a ComparePlan,
}

impl ScriptReport<'_> {
    fn write(&self, result: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        for (t, c) in result.targets.iter().zip(&self.plan.contenders) {
            writeln!(out, "{} RESULTS:", t.name.to_uppercase())?;
            if let Some(run) = t.runs.first() {
                WrkReport::preamble(&c.plan.summary(), out)?;
                WrkReport { latency: false }.write_body(run, out)?;
            }
        }
        Ok(())
    }

    fn done(result: &ComparisonResult, out: &mut dyn Write) -> io::Result<()> {
        let done = match result.targets.len() {
            1 => "Test completed",
            2 => "Both tests completed",
            _ => "All tests completed",
        };
        writeln!(out, "{done}")
    }
}

/// The command line that repeats an in-cluster load of one target.
fn in_cluster_command(l: &K8sLoadArgs, namespace: &str, target: &str) -> String {
    let mut words = vec![
        format!("archbench k8s -n {namespace} load"),
        target.to_string(),
        "--in-cluster".into(),
        format!("--workers {}", l.inside.workers.unwrap_or(1)),
        format!("-c {}", l.connections),
        format!("-t {}", l.threads),
        format!("-d {}ms", l.duration.as_millis()),
        format!("--timeout {}ms", l.timeout.as_millis()),
        format!("--image {}", l.inside.image),
    ];
    if let Some(streams) = l.http.streams() {
        words.push(format!("--http2 --streams {streams}"));
    }
    if l.http.tls {
        words.push("--tls".into());
    }
    if let Some(r) = l.rate {
        words.push(format!("--rate {r}"));
    }
    if let Some((k, v)) = &l.inside.node_selector {
        words.push(format!("--node-selector {k}={v}"));
    }
    if l.runs > 1 {
        words.push(format!("--runs {}", l.runs));
    }
    if l.warmup {
        words.push("--warmup".into());
    }
    words.join(" ")
}

/// How each target's workers did: how many merged, how far apart they started, which were
/// lost; with `--per-worker`, each one's own figures, so a slow one stands out.
fn write_workers(
    result: &ComparisonResult,
    per_worker: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    for t in &result.targets {
        for (n, run) in t.runs.iter().enumerate() {
            let skew = run
                .start_skew_s
                .map(|d| format!(", first sends {:.3} ms apart", d * 1e3))
                .unwrap_or_default();
            writeln!(
                out,
                "{} run {}: {} workers merged{skew}{}",
                t.name,
                n + 1,
                run.sources.len(),
                match run.lost_sources.len() {
                    0 => String::new(),
                    k => format!(", {k} lost"),
                }
            )?;
            if per_worker {
                // First sends less their place in the open-loop schedule: how late each
                // worker began, not when it was due.
                let first = run
                    .sources
                    .iter()
                    .filter_map(crate::stats::first_send_vs_schedule)
                    .min();
                let w = run.sources.iter().map(|s| s.file.len()).max().unwrap_or(6);
                writeln!(
                    out,
                    "  {:<w$} {:>10} {:>11} {:>7} {:>11} {:>8}  client-bound",
                    "worker", "requests", "req/s", "errors", "first send", "busiest"
                )?;
                for s in &run.sources {
                    let offset = crate::stats::first_send_vs_schedule(s)
                        .zip(first)
                        .and_then(|(f, lo)| f.duration_since(lo).ok())
                        .map_or("-".to_string(), |d| {
                            format!("+{:.3}ms", d.as_secs_f64() * 1e3)
                        });
                    let bound = matches!(s.limiter.side, LimiterSide::Client | LimiterSide::Both);
                    writeln!(
                        out,
                        "  {:<w$} {:>10} {:>11.1} {:>7} {:>11} {:>7.0}%  {}",
                        s.file,
                        s.totals.requests,
                        s.totals.requests_per_sec,
                        s.totals.errors,
                        offset,
                        s.client.busiest_worker_percent,
                        if bound { "yes" } else { "no" }
                    )?;
                }
            }
            for l in &run.lost_sources {
                writeln!(
                    out,
                    "  lost {}: {} (its {} connections are missing)",
                    l.name, l.reason, l.connections
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use crate::k8s::{self, InCluster, LoadTarget, WholeLoad};

    /// The worker container's command line parsed as archbench parses it, its variables
    /// expanded as the kubelet would for worker 3 at 10.0.0.7.
    fn agent_of(container: &k8s_openapi::api::core::v1::Container) -> crate::cli::args::AgentArgs {
        let words = std::iter::once("archbench".to_string()).chain(
            container.args.iter().flatten().map(|a| {
                a.replace("$(JOB_COMPLETION_INDEX)", "3")
                    .replace("$(POD_IP)", "10.0.0.7")
            }),
        );
        let cli = crate::cli::Cli::try_parse_from(words).unwrap();
        let crate::cli::Command::Agent(agent) = cli.command else {
            panic!("not the agent: {cli:?}");
        };
        agent
    }

    #[test]
    fn a_load_jobs_arguments_are_the_agents_own_command_line() {
        let target = LoadTarget {
            name: "arm".into(),
            variant: Some("arm".into()),
            service: "nginx-arm-svc".into(),
            url: "http://nginx-arm-svc.nginx.svc.cluster.local/".into(),
            cluster_address: Some("10.0.4.7:80".parse().unwrap()),
            watch: Vec::new(),
        };
        let how = InCluster {
            workers: 4,
            image: "archbench:1".into(),
            node_selector: None,
            ready_timeout: Duration::from_secs(300),
        };
        let load = WholeLoad {
            connections: 10,
            threads: 2,
            duration: Duration::from_secs(30),
            rate: Some(1000.0),
            timeout: Duration::from_secs(2),
            http2_streams: None,
            tls: false,
        };
        let job = k8s::distributed::job(&target, "nginx", "j", &how, &load, "t0k");
        let container = &job.spec.unwrap().template.spec.unwrap().containers[0];
        let agent = agent_of(container);
        assert_eq!(agent.control, "10.0.0.7:9090");
        assert_eq!(agent.run.part.map(|p| (p.index, p.count)), Some((3, 4)));
        assert_eq!(agent.run.url, "http://10.0.4.7:80/");
        assert_eq!(agent.run.load.connections, 10);
        assert_eq!(agent.run.load.rate, Some(1000.0));
        // It waits for its start longer than archbench waits for all workers to be ready.
        assert!(
            agent.start_timeout > how.ready_timeout,
            "{:?}",
            agent.start_timeout
        );
        // Over https: the same address, the Secret mounted and its certificate pinned.
        let tls = WholeLoad { tls: true, ..load };
        let job = k8s::distributed::job(&target, "nginx", "j", &how, &tls, "t0k");
        let pod = job.spec.unwrap().template.spec.unwrap();
        let secret = pod.volumes.as_ref().unwrap()[0].secret.as_ref().unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some(k8s::tls::SECRET));
        let container = &pod.containers[0];
        let mount = &container.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, k8s::tls::WORKER_MOUNT);
        let agent = agent_of(container);
        assert_eq!(agent.run.url, "https://10.0.4.7:80/");
        assert_eq!(
            agent.run.load.request.pinned_cert,
            Some(format!("{}/tls.crt", k8s::tls::WORKER_MOUNT).into())
        );
    }
}
