//! `archbench k8s load`: the variants' services loaded side by side, from here or from an
//! Indexed Job of in-cluster workers, each variant's pods watched; the comparison saved in a
//! run directory of its own, with cost and scaling verdicts where they may rest on it.

use super::context::{Asked, LoadContext, LoadShape};
use super::incluster::in_cluster;
use super::placed::{pairs, with_basis};
use crate::cli::argv::Argv;
use crate::cli::flags::Format;
use crate::cli::k8s_args::K8sLoadArgs;
use crate::cli::output::{write_stdout, Ending, OutputPlan};
use crate::cli::session::{RunOne, Session};
use crate::cli::{live, plan, StopSignals};
use crate::compare::{ComparePlan, ComparisonResult, Contender, Schedule};
use crate::k8s::{self, Cluster};
use crate::report::k8s_load::{write_workers, ScriptReport};
use crate::report::{Report, TextReport};

/// `k8s load`: the set-up (`LoadContext`), the plan, the session, the comparison, then its
/// verdicts (SLO, cost, scaling), files and report.
pub fn load(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    l: &K8sLoadArgs,
    signals: &StopSignals,
) -> anyhow::Result<i32> {
    let runs = plan::runs(l.runs.runs)?;
    let outputs = OutputPlan::new(&l.output, "k8s load", LAYOUTS)?;
    let how = in_cluster(&l.inside, &l.live, l.connections.connections)?;
    let asked = Asked {
        targets: &l.targets,
        prices: l.prices.prices.as_deref(),
        cost: &l.prices.cost.cost,
        out_dir: &l.out_dir.out_dir,
        shape: LoadShape::of(&l.http, l.threads(), l.duration.duration, l.timeout.timeout)?,
        command: "k8s load",
    };
    let ctx = LoadContext::new(runtime, cluster, how, &asked)?;
    let outputs = outputs.with_run_directory(
        ctx.dir.join("k8s-load.json"),
        Some(ctx.dir.join("k8s-load.md")),
    );
    let whole = ctx
        .shape
        .whole(l.connections.connections, l.rate.steady(), l.rate.staged());
    let (plan, commands) = load_plan(&ctx, &whole, l, runs)?;
    if outputs.layout == Format::Wrk {
        announce_wrk(&ctx.targets, &commands);
    }
    let say = |line: &str| {
        if outputs.text() {
            crate::stderr_line!("  {line}");
        }
    };
    let in_cluster = ctx.how.is_some();
    let mut session = load_session(l, outputs.text(), &plan, in_cluster, &ctx.names(), signals)?;
    let workers = |c: &Contender| ctx.in_cluster(&c.name, &whole, &say, &signals.stop);
    let mut save = |c: &ComparisonResult| outputs.save_json(c);
    let run_one: Option<RunOne> = in_cluster.then_some(&workers as RunOne);
    let result = session.compare(&plan, commands, None, run_one, &mut save);
    session.close();
    let mut result = result?;
    verdicts(&mut result, &ctx, l);
    outputs.write_files(&result)?;
    write_load_report(&result, &plan, &outputs, l.inside.per_worker, in_cluster)?;
    say_written(&outputs, &ctx.dir, in_cluster);
    let ending = Ending::of_comparison(&result);
    session.linger(ending.interrupted());
    Ok(ending.status(signals))
}

/// The layouts `k8s load` has besides text: the script's own among them.
pub(super) const LAYOUTS: &[Format] = &[Format::Json, Format::Markdown, Format::Html, Format::Wrk];

/// Where the results went, on stderr.
fn say_written(outputs: &OutputPlan, dir: &std::path::Path, in_cluster: bool) {
    let files: Vec<String> = outputs.files().map(|p| p.display().to_string()).collect();
    crate::stderr_line!("archbench k8s load: wrote {}", files.join(", "));
    if in_cluster {
        crate::stderr_line!(
            "archbench k8s load: each worker's own result is in {}",
            dir.join("workers").display()
        );
    }
}

/// What the comparison adds to its figures: the SLO judged, each target's cost, and the
/// scaling verdicts where the figures are the servers' capacity.
fn verdicts(result: &mut ComparisonResult, ctx: &LoadContext<'_>, l: &K8sLoadArgs) {
    if let Some(slo) = &l.slo.slo {
        result.slo = result.judge_slo(slo);
    }
    result.cost = result.costs(&pairs(&ctx.charged));
    with_basis(&mut result.cost, &ctx.charged);
    let placements = &ctx.placements;
    let reasons: Vec<Option<String>> = result
        .cost
        .iter()
        .map(|c| result.not_the_servers_capacity(&c.name, placements))
        .collect();
    for (c, why) in result.cost.iter_mut().zip(reasons) {
        c.withheld = why;
    }
    result.scaling = crate::placement::scaling(
        placements,
        &crate::placement::Judged {
            rps: &|name: &str| result.median_rps(name),
            withheld: &|name: &str| result.not_the_servers_capacity(name, placements),
        },
    );
    result.placements = placements.clone();
}

/// `--layout wrk`: each target's run announced as the guide's script does, before any load.
fn announce_wrk(targets: &[k8s::LoadTarget], commands: &[String]) {
    for (t, cmd) in targets.iter().zip(commands) {
        crate::stderr_line!(
            "Running wrk test for {} on {}...",
            t.name.to_uppercase(),
            t.url
        );
        crate::stderr_line!("{cmd}");
    }
}

/// The live session of a `k8s load`. Load from outside the cluster is measured here, live;
/// in-cluster workers report only when they end, so they get no dashboard.
fn load_session<'s>(
    l: &K8sLoadArgs,
    text: bool,
    plan: &ComparePlan,
    in_cluster: bool,
    names: &[String],
    signals: &'s StopSignals,
) -> anyhow::Result<Session<'s>> {
    let tui = !in_cluster && live::want_tui(&l.live, !text, true, Some(l.duration.duration))?;
    let title = format!("k8s load {}", names.join(" vs "));
    Session::begin(&l.live, &plan.contenders, tui, title, text, signals)
}

/// The result on stdout in the chosen layout, with the workers' part of in-cluster runs.
fn write_load_report(
    result: &ComparisonResult,
    plan: &ComparePlan,
    outputs: &OutputPlan,
    per_worker: bool,
    in_cluster: bool,
) -> anyhow::Result<()> {
    match outputs.layout {
        Format::Text | Format::Wrk => write_stdout(|out| {
            if outputs.layout == Format::Wrk {
                ScriptReport { plan }.write(result, out)?;
            } else {
                TextReport.write(result, out)?;
            }
            if in_cluster {
                write_workers(result, per_worker, out)?;
            }
            if outputs.layout == Format::Wrk {
                ScriptReport::done(result, out)?;
            }
            Ok(())
        }),
        _ => outputs.write_stdout(result),
    }
}

/// The comparison `k8s load` runs, and how to reproduce each target's run.
fn load_plan(
    ctx: &LoadContext<'_>,
    whole: &k8s::WholeLoad,
    l: &K8sLoadArgs,
    runs: usize,
) -> anyhow::Result<(ComparePlan, Vec<String>)> {
    let contenders = ctx
        .targets
        .iter()
        .map(|t| ctx.contender(t, whole))
        .collect::<Result<Vec<_>, _>>()?;
    let commands: Vec<String> = contenders
        .iter()
        .map(|c| match l.output.layout.output {
            _ if ctx.how.is_some() => in_cluster_command(l, &ctx.cluster.namespace, &c.name),
            Format::Wrk => format!(
                "wrk -t{} -c{} -d{} {}",
                c.plan.threads,
                c.plan.connections,
                l.duration.duration.as_secs(),
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

/// The command line that repeats an in-cluster load of one target, spelled as the
/// Kubernetes commands' parser defines each flag.
fn in_cluster_command(l: &K8sLoadArgs, namespace: &str, target: &str) -> String {
    let lead = ["archbench", "k8s", "-n", namespace, "load", target];
    let mut w = Argv::of(k8s_command_of("load"), &lead);
    w.switch("in_cluster")
        .value("workers", l.inside.workers.unwrap_or(1).to_string())
        .short("connections", l.connections.connections.to_string())
        .short("threads", l.threads().to_string())
        .short("duration", format!("{}ms", l.duration.duration.as_millis()))
        .value("timeout", format!("{}ms", l.timeout.timeout.as_millis()))
        .value("image", l.inside.image.clone());
    if let Some(streams) = l.http.streams() {
        w.switch("http2").value("streams", streams.to_string());
    }
    if l.http.tls {
        w.switch("tls");
    }
    if let Some((streams, zero_rtt)) = l.http.http2.http3_streams() {
        w.switch("http3").value("streams", streams.to_string());
        if zero_rtt {
            w.switch("zero_rtt");
        }
    }
    if let Some(r) = l.rate.steady() {
        w.value("rate", r.to_string());
    }
    if let Some(stages) = l.rate.staged() {
        // One word for the shell: the parser takes the stages without spaces too.
        w.value("stages", stages.to_string().replace(", ", ","));
    }
    if let Some((k, v)) = &l.inside.node_selector {
        w.value("node_selector", format!("{k}={v}"));
    }
    if l.runs.runs > 1 {
        w.value("runs", l.runs.runs.to_string());
    }
    if l.warmup {
        w.switch("warmup");
    }
    w.into_words().join(" ")
}

/// The Kubernetes commands' parser's definition of `archbench k8s SUB`.
fn k8s_command_of(sub: &str) -> clap::Command {
    use clap::CommandFactory;
    let mut k8s = crate::cli::k8s_args::K8sCli::command();
    k8s.build();
    k8s.find_subcommand(sub).cloned().unwrap_or(k8s)
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
            spell: crate::cli::argv::agent_args,
        };
        let load = WholeLoad {
            connections: 10,
            threads: 2,
            duration: Duration::from_secs(30),
            rate: Some(1000.0),
            timeout: Duration::from_secs(2),
            http2_streams: None,
            http3_streams: None,
            zero_rtt: false,
            tls: false,
            stages: None,
        };
        let job = k8s::distributed::job(&target, "nginx", "j", &how, &load, "t0k");
        let container = &job.spec.unwrap().template.spec.unwrap().containers[0];
        let agent = agent_of(container);
        assert_eq!(agent.control, "10.0.0.7:9090");
        assert_eq!(agent.run.part.map(|p| (p.index, p.count)), Some((3, 4)));
        assert_eq!(agent.run.url, "http://10.0.4.7:80/");
        assert_eq!(agent.run.load.connections.connections, 10);
        assert_eq!(agent.run.load.rate.steady(), Some(1000.0));
        // It waits for its start longer than archbench waits for all workers to be ready.
        assert!(
            agent.start_timeout > how.ready_timeout,
            "{:?}",
            agent.start_timeout
        );
        // Over https: the same address, the Secret mounted and its certificate pinned.
        let tls = WholeLoad {
            tls: true,
            ..load.clone()
        };
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

    /// `archbench k8s ARGS…` parsed as the Kubernetes commands' parser does: its `load`.
    fn parsed_load(words: &[String]) -> crate::cli::k8s_args::K8sLoadArgs {
        let cli = crate::cli::k8s_args::K8sCli::try_parse_from(words)
            .unwrap_or_else(|e| panic!("{words:?}: {e}"));
        let crate::cli::k8s_args::K8sCommand::Load(l) = cli.args.command else {
            panic!("not load: {words:?}");
        };
        l
    }

    #[test]
    fn an_in_cluster_loads_repeat_line_parses_back_into_the_same_load() {
        let given = [
            "archbench-k8s",
            "-n",
            "bench",
            "load",
            "arm",
            "--in-cluster",
            "--workers",
            "3",
            "-c",
            "30",
            "-t",
            "2",
            "-d",
            "1500ms",
            "--timeout",
            "750ms",
            "--image",
            "registry.example/archbench:1",
            "--http2",
            "--streams",
            "8",
            "--tls",
            "--rate",
            "2000",
            "--node-selector",
            "agentpool=load",
            "--runs",
            "4",
            "--warmup",
        ];
        let l = parsed_load(&given.map(String::from));
        let line = super::in_cluster_command(&l, "bench", "arm");
        let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
        // "archbench k8s …" is what a person types; the parser sees archbench-k8s's argv.
        assert_eq!(words.drain(..2).collect::<Vec<_>>(), ["archbench", "k8s"]);
        words.insert(0, "archbench-k8s".into());
        let again = parsed_load(&words);
        assert_eq!(again.targets, l.targets, "{line}");
        assert_eq!(
            (
                again.connections.connections,
                again.threads(),
                again.duration.duration,
                again.timeout.timeout,
                again.rate.steady()
            ),
            (
                l.connections.connections,
                l.threads(),
                l.duration.duration,
                l.timeout.timeout,
                l.rate.steady()
            ),
            "{line}"
        );
        assert_eq!(again.http.streams(), l.http.streams(), "{line}");
        assert_eq!(again.http.tls, l.http.tls, "{line}");
        assert_eq!(
            (
                again.inside.in_cluster,
                again.inside.workers,
                &again.inside.image
            ),
            (l.inside.in_cluster, l.inside.workers, &l.inside.image),
            "{line}"
        );
        assert_eq!(again.inside.node_selector, l.inside.node_selector, "{line}");
        assert_eq!(
            (again.runs.runs, again.warmup),
            (l.runs.runs, l.warmup),
            "{line}"
        );
    }
}
