//! `archbench-cluster` (`tools/cluster`): Kubernetes' own control plane and our node agents in
//! a network namespace of their own. Parse, dispatch, map errors to exit codes (1; 2 for
//! usage).

use std::path::PathBuf;
use std::process::ExitCode;

use archbench_cluster::{faults, lifecycle, node, supervisor, topology};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "archbench-cluster",
    version,
    about = "A Kubernetes cluster for archbench's tests: the real apiserver, controller-manager, scheduler and kube-proxy in a network namespace of its own, two nodes whose pods are local processes"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build (or find, cached by version) the Kubernetes components; print their directory.
    Build,
    /// Start a cluster whose files live in DIR; returns once it is ready.
    Up {
        dir: PathBuf,
        /// Stop the cluster when this process ends (tests pass their pid).
        #[arg(long)]
        owner: Option<u32>,
        /// Run in this existing network namespace (name or path) instead of a new one; it
        /// must have no default route.
        #[arg(long)]
        netns: Option<String>,
        /// The program pods of archbench images run (default: `archbench` beside this one).
        #[arg(long)]
        archbench: Option<PathBuf>,
        /// The program pods of nginx images run.
        #[arg(long, default_value = "/usr/sbin/nginx")]
        nginx: PathBuf,
        /// IMAGE=PROGRAM (repeatable): pods of exactly this image run PROGRAM, another nginx
        /// build (tests give two images two builds).
        #[arg(long, value_parser = nginx_build)]
        nginx_build: Vec<(String, PathBuf)>,
        /// The arm64 root filesystem arm64 nodes run nginx images from, under qemu-user
        /// (default: what tools/arm64/fetch left in this build's target directory).
        #[arg(long)]
        arm64_root: Option<PathBuf>,
        /// The nodes, as JSON (a list of NodeSpec; tests use it), instead of the guide's two.
        #[arg(long, hide = true)]
        nodes_json: Option<String>,
        /// The scheduler's back-off, in seconds, before it tries again a pod it found no room
        /// for, at every try (default: Kubernetes' 1 s doubling to 10 s).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=600))]
        scheduler_backoff: Option<u32>,
    },
    /// Stop the cluster of DIR and everything it started.
    Down { dir: PathBuf },
    /// Run COMMAND inside the cluster's network namespace (KUBECONFIG set, kubectl on PATH).
    Exec {
        dir: PathBuf,
        /// `laptop`: from the laptop's namespace instead, which reaches the cluster as a
        /// laptop reaches AKS (API server, load balancers, node external addresses).
        #[arg(long = "as", value_parser = ["cluster", "laptop"], default_value = "cluster")]
        seat: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Say whether the cluster of DIR runs, and its nodes.
    Status { dir: PathBuf },
    /// Write DIR/users/NAME.kubeconfig: a user with a client certificate (RBAC applies).
    User {
        dir: PathBuf,
        name: String,
        /// Groups (certificate organisations).
        #[arg(long = "group")]
        groups: Vec<String>,
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Turn a fault on or off: withhold-load-balancers, stop-heartbeats:NODE.
    Fault {
        dir: PathBuf,
        name: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// SIGKILL the processes of a pod's containers (its restart policy then applies).
    KillPod {
        dir: PathBuf,
        /// NAMESPACE/POD
        pod: String,
    },
    #[command(hide = true)]
    Supervise {
        dir: PathBuf,
        #[arg(long)]
        owner: Option<u32>,
    },
    #[command(hide = true)]
    Node { dir: PathBuf, name: String },
    #[command(hide = true)]
    Pause,
    /// An arm64 node's emulator: a user namespace with qemu-user registered (node agents
    /// start it).
    #[command(hide = true)]
    Emulator { dir: PathBuf, qemu: PathBuf },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return ExitCode::from(if usage { 2 } else { 0 });
        }
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("archbench-cluster: {e}");
            ExitCode::from(1)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Build => {
            println!("{}", lifecycle::kube_bin(None)?.display());
        }
        Cmd::Up {
            dir,
            owner,
            netns,
            archbench,
            nginx,
            nginx_build,
            arm64_root,
            nodes_json,
            scheduler_backoff,
        } => {
            let defaults = lifecycle::UpOptions::default();
            let nodes = match nodes_json {
                Some(j) => {
                    serde_json::from_str(&j).map_err(|e| anyhow::anyhow!("--nodes-json: {e}"))?
                }
                None => topology::default_nodes(),
            };
            lifecycle::up(
                &dir,
                &lifecycle::UpOptions {
                    owner,
                    netns,
                    nodes,
                    archbench_binary: archbench.or(defaults.archbench_binary),
                    nginx_binary: nginx,
                    nginx_builds: nginx_build,
                    arm64_root: arm64_root.or(defaults.arm64_root),
                    kube_bin: defaults.kube_bin,
                    scheduler_backoff,
                },
            )?;
        }
        Cmd::Down { dir } => runtime()?.block_on(lifecycle::down(&dir))?,
        Cmd::Exec { dir, seat, command } => {
            let seat = match seat.as_str() {
                "laptop" => lifecycle::Seat::Laptop,
                _ => lifecycle::Seat::Cluster,
            };
            lifecycle::exec(&dir, seat, &command)?
        }
        Cmd::Status { dir } => lifecycle::status(&dir)?,
        Cmd::User {
            dir,
            name,
            groups,
            namespace,
        } => {
            let path = lifecycle::user(&dir, &name, &groups, namespace.as_deref())?;
            println!("{}", path.display());
        }
        Cmd::Fault { dir, name, state } => {
            let fault = faults::Fault::parse(&name)?;
            let cdir = archbench_cluster::layout::ClusterDir::new(&dir);
            cdir.read_state()?;
            faults::set(&cdir, &fault, state == "on")?
        }
        Cmd::KillPod { dir, pod } => node::kill_pod(&dir, &pod)?,
        Cmd::Supervise { dir, owner } => supervisor::main(&dir, owner)?,
        Cmd::Node { dir, name } => node::main(&dir, &name)?,
        Cmd::Pause => node::network::pause(),
        Cmd::Emulator { dir, qemu } => node::emulation::holder_main(&dir, &qemu)?,
    }
    Ok(())
}

/// `IMAGE=PROGRAM` of --nginx-build.
fn nginx_build(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((image, program)) if !image.is_empty() && !program.is_empty() => {
            Ok((image.to_string(), PathBuf::from(program)))
        }
        _ => Err(format!("`{text}` is not IMAGE=PROGRAM")),
    }
}
