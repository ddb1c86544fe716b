//! `archbench k8s`'s command line (parsed by the archbench-k8s executable): built only with
//! the `k8s` feature, like everything that speaks to a cluster.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::args::LiveArgs;
use super::flags::{
    Connections, Cost, FindMax, Http2, Ladders, NoWarmup, Objectives, OutDir, OutputArgs, Quiet,
    Rate, RunDuration, Runs, Threads, Timeout, THREADS,
};

/// `archbench k8s`'s own command line (parsed by the archbench-k8s executable).
#[derive(Debug, Parser)]
#[command(
    name = "archbench k8s",
    bin_name = "archbench k8s",
    version,
    about = "The multi-arch nginx workflow on a Kubernetes cluster"
)]
pub struct K8sCli {
    #[command(flatten)]
    pub args: K8sArgs,
}

#[derive(Debug, Args)]
pub struct K8sArgs {
    /// kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else the pod's service
    /// account when run in a pod].
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context to use [default: the current one].
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace of the setup.
    #[arg(short = 'n', long, global = true, default_value = "nginx", value_parser = super::values::namespace)]
    pub namespace: String,
    #[command(subcommand)]
    pub command: K8sCommand,
}

#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Deploy nginx per architecture (server-side apply), wait for the rollouts and the
    /// services' addresses, and show where everything runs. A second `up` changes nothing.
    Up(K8sSetupArgs),
    /// Print the YAML that `up` applies (and with --load-job, the Jobs of `load --in-cluster`).
    Manifests(K8sManifestsArgs),
    /// Where each pod runs, its node's architecture and instance type, its service's address.
    Status,
    /// Check a new nginx.conf in a pod (nginx -t), push it, roll the pods, and put the old one
    /// back if the new pods fail.
    Config(K8sConfigArgs),
    /// One request (or --count N) through a service: status, time, body, the pod that
    /// answered; for multiarch the split across architectures.
    Curl(K8sCurlArgs),
    /// A shell in an arch's pod, or one command (after --) with its exit code.
    Login(K8sLoginArgs),
    /// Each pod's CPU (cores) and memory from its own cgroup (through exec), or from the
    /// metrics API where exec is not allowed.
    Top(K8sTopArgs),
    /// Load each arch's service in parallel from here (the script's `wrk both`), the pods
    /// watched through their cgroups; a comparison saved as JSON and Markdown.
    Load(K8sLoadArgs),
    /// `sweep` on the cluster: the variants loaded at every step of a ladder of connections
    /// or rates, interleaved, their pods watched; knees, USL fits, SLO, cost; one sweep
    /// document (`report --html` draws it).
    Sweep(K8sSweepArgs),
    /// Per arch: the node's architecture and CPU, LSE atomics, the pod's nginx -V, and the
    /// outline-atomics warning where it applies.
    Fingerprint,
    /// Remove what archbench created (only what carries its label), and wait until it is gone.
    Down(K8sDownArgs),
}

#[derive(Debug, Args)]
pub struct K8sConfigArgs {
    /// tuned (the guide's), stock (the image's own) or a FILE.
    pub config: String,
    #[command(flatten)]
    pub wait: WaitTimeout,
}

#[derive(Debug, Args)]
pub struct K8sCurlArgs {
    /// A variant (intel, arm, amd, or a --variant's name) or multiarch.
    pub target: crate::k8s::LoadSelection,
    /// Requests to send (-n is the namespace, as in kubectl).
    #[arg(long, default_value = "1", value_parser = crate::cli::values::count)]
    pub count: u64,
    #[command(flatten)]
    pub timeout: Timeout,
}

#[derive(Debug, Args)]
pub struct K8sLoginArgs {
    /// A variant: intel, arm, amd, or a --variant's name.
    pub variant: String,
    /// This pod rather than the arch's ready one.
    #[arg(long)]
    pub pod: Option<String>,
    /// A command to run instead of a shell (after --).
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct K8sTopArgs {
    /// Refresh every 2 s until Ctrl-C, following pods across restarts.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
#[command(mut_arg("duration", |a| a.default_value("30s")))]
#[command(mut_arg("threads", |a| a.default_value("1").help(THREADS)))]
#[command(mut_arg("output", |a| a.visible_alias("layout")))]
pub struct K8sLoadArgs {
    /// Variants (intel, arm, amd, or a --variant's name), both (intel and arm), all (every
    /// variant) or multiarch (on its own: its pods are the variants'); several are loaded
    /// side by side, the first the baseline.
    #[arg(required = true, num_args = 1..)]
    pub targets: Vec<crate::k8s::LoadSelection>,
    #[command(flatten)]
    pub duration: RunDuration,
    #[command(flatten)]
    pub connections: Connections,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub rate: Rate,
    #[command(flatten)]
    pub runs: Runs,
    /// Run and discard one warm-up run first (the script has none, so neither has `k8s load`
    /// unless asked; the other commands' is --no-warmup).
    #[arg(long)]
    pub warmup: bool,
    #[command(flatten)]
    pub timeout: Timeout,
    #[command(flatten)]
    pub slo: Objectives,
    // The run directory has k8s-load.json and k8s-load.md whatever these say.
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub out_dir: OutDir,
    #[command(flatten)]
    pub http: K8sHttpArgs,
    #[command(flatten)]
    pub inside: K8sInClusterArgs,
    #[command(flatten)]
    pub prices: Prices,
    #[command(flatten)]
    pub live: LiveArgs,
}

#[derive(Debug, Args)]
#[command(mut_arg("threads", |a| a.default_value("1").help(THREADS)))]
pub struct K8sSweepArgs {
    /// Variants (intel, arm, amd, a --variant's name), multiarch, both or all; the first is
    /// the baseline.
    #[arg(required = true, num_args = 1..)]
    pub targets: Vec<crate::k8s::LoadSelection>,
    #[command(flatten)]
    pub ladders: Ladders,
    #[command(flatten)]
    pub find_max: FindMax,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub duration: RunDuration,
    #[command(flatten)]
    pub runs: Runs,
    #[command(flatten)]
    pub no_warmup: NoWarmup,
    #[command(flatten)]
    pub timeout: Timeout,
    #[command(flatten)]
    pub slo: Objectives,
    #[command(flatten)]
    pub prices: Prices,
    // The run directory has k8s-sweep.json (saved after every step) whatever these say.
    #[command(flatten)]
    pub out_dir: OutDir,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub http: K8sHttpArgs,
    #[command(flatten)]
    pub inside: K8sInClusterArgs,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// What the k8s loads charge each variant: `--cost`, and the price list by instance type.
#[derive(Debug, Clone, Default, Args)]
pub struct Prices {
    #[command(flatten)]
    pub cost: Cost,
    /// A price list, INSTANCE_TYPE,PRICE_PER_HOUR per line: each variant is charged its node's
    /// price (its share of the node's allocatable CPU when it has a cpu limit, else the whole
    /// node) by the node's node.kubernetes.io/instance-type; --cost NAME=PRICE overrides.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

/// `--wait-timeout`.
#[derive(Debug, Clone, Copy, Args)]
pub struct WaitTimeout {
    /// How long each wait may take (rollouts, addresses, load pods, removal) before it gives
    /// up and names what it waited for.
    #[arg(long, default_value = "5m", value_parser = crate::cli::values::duration)]
    pub wait_timeout: std::time::Duration,
}

/// The protocol `k8s load` and `k8s sweep` speak to the services.
#[derive(Debug, Args)]
pub struct K8sHttpArgs {
    // From here and from the in-cluster workers alike.
    #[command(flatten)]
    pub http2: Http2,
    /// https to the Services' port 443 (`k8s up --tls`), accepting exactly the certificate
    /// of the Secret nginx-tls; with --http2, h2 by ALPN. --http3 implies it (UDP 443: a
    /// Caddy variant, or nginx set up with `k8s up --http3`).
    #[arg(long)]
    pub tls: bool,
}

/// The k8s loads' threads per target when -t is not given.
const K8S_THREADS: u64 = 1;

impl K8sLoadArgs {
    /// -t, or its default.
    pub fn threads(&self) -> u64 {
        self.threads.threads.unwrap_or(K8S_THREADS)
    }
}

impl K8sSweepArgs {
    /// -t, or its default.
    pub fn threads(&self) -> u64 {
        self.threads.threads.unwrap_or(K8S_THREADS)
    }
}

impl K8sHttpArgs {
    /// With --http2, its streams per connection.
    pub fn streams(&self) -> Option<u64> {
        self.http2.streams()
    }
}

/// Where `k8s load` and `k8s sweep` load from: here, or an Indexed Job of archbench pods.
#[derive(Debug, Args)]
pub struct K8sInClusterArgs {
    /// Load from inside the cluster: an Indexed Job of archbench pods per target, started
    /// together and merged into one run (the services' in-cluster names; nothing crosses
    /// the internet).
    #[arg(long)]
    pub in_cluster: bool,
    /// In-cluster: load pods per target; each takes its share of -c and --rate, and -t
    /// threads of its own.
    #[arg(long, requires = "in_cluster", value_parser = crate::cli::values::count)]
    pub workers: Option<u64>,
    /// In-cluster: the load pods' image (see the README's Dockerfile).
    #[arg(long, requires = "in_cluster", default_value = DEFAULT_LOAD_IMAGE)]
    pub image: String,
    /// In-cluster: run load pods only on nodes with this label (KEY=VALUE); without it, pod
    /// anti-affinity keeps them off nginx's nodes.
    #[arg(long, requires = "in_cluster", value_parser = crate::cli::values::label)]
    pub node_selector: Option<(String, String)>,
    /// In-cluster: print each worker's figures, so a slow worker is visible.
    #[arg(long, requires = "in_cluster")]
    pub per_worker: bool,
    #[command(flatten)]
    pub wait: WaitTimeout,
}

/// The image `k8s load --in-cluster` runs unless told otherwise: this version's.
pub const DEFAULT_LOAD_IMAGE: &str = concat!("archbench:", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Args)]
pub struct K8sSetupArgs {
    /// Architectures to deploy, comma-separated: intel, arm, amd (intel and amd are amd64).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "intel,arm")]
    pub arch: Vec<crate::k8s::Arch>,
    /// A deployment of your own, NAME:KEY=VALUE[,KEY=VALUE…] (repeatable; replaces --arch).
    /// Keys: arch (amd64|arm64), pool (agentpool), instance-type, node-selector (KEY=VALUE),
    /// image, config (tuned|stock|FILE), replicas, cpu and memory (requests = limits),
    /// workers (nginx worker_processes), tls (on|off: as --tls, for this variant). An image
    /// named caddy (image=caddy:2) runs Caddy with archbench's Caddyfile: https and HTTP/3 on
    /// 443 unless tls=off (config and workers are nginx's).
    #[arg(long, conflicts_with_all = ["arch", "pools_by"])]
    pub variant: Vec<String>,
    /// The nginx image.
    #[arg(long, default_value = "nginx:latest")]
    pub image: String,
    /// nginx.conf: tuned (the guide's), stock (the image's own) or a FILE.
    #[arg(long, default_value = "tuned")]
    pub config: String,
    /// Type of the per-arch services.
    #[arg(long, value_enum, default_value = "LoadBalancer")]
    pub service_type: crate::k8s::ServiceType,
    /// Select node pools by kubernetes.io/arch, or by the AKS agentpool label named after
    /// the arch (intel, arm, amd).
    #[arg(long, value_enum, default_value = "arch")]
    pub pools_by: crate::k8s::PoolSelector,
    #[command(flatten)]
    pub wait: WaitTimeout,
    /// Serve https too: a self-signed certificate (made once, kept in the Secret nginx-tls),
    /// nginx listening `443 ssl http2` beside 80, the Services exposing 443 (`k8s load
    /// --tls` loads it, the certificate pinned).
    #[arg(long)]
    pub tls: bool,
    /// Serve HTTP/3 too (implies --tls): nginx listening `443 quic reuseport` with an Alt-Svc
    /// header (needs nginx 1.25 or later in the image), the Services exposing UDP 443 beside
    /// TCP 443 (`k8s load --http3` loads it). Caddy variants serve HTTP/3 without it.
    #[arg(long)]
    pub http3: bool,
}

#[derive(Debug, Args)]
pub struct K8sManifestsArgs {
    #[command(flatten)]
    pub setup: K8sSetupArgs,
    /// Also print the Job `load --in-cluster` creates for each architecture's service.
    #[arg(long)]
    pub load_job: bool,
    /// With --load-job: its load pods.
    #[arg(long, default_value = "3", requires = "load_job", value_parser = crate::cli::values::count)]
    pub workers: u64,
    /// With --load-job: its image.
    #[arg(long, default_value = DEFAULT_LOAD_IMAGE, requires = "load_job")]
    pub load_image: String,
}

#[derive(Debug, Args)]
pub struct K8sDownArgs {
    /// Keep the namespace even when archbench created it.
    #[arg(long)]
    pub keep_namespace: bool,
    #[command(flatten)]
    pub wait: WaitTimeout,
}
