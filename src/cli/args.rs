//! Stage one of parsing: the values the user typed, as clap sees them. Nothing here is
//! validated beyond its syntax; [`super::plan`] turns these into a typed plan.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::flags::{
    Connections, Cost, FindMax, HtmlFile, Http2, JsonFile, Ladders, Layout, NoWarmup, Objectives,
    OutDir, OutputArgs, PacingSlack, Quiet, Rate, RunDuration, Runs, Threads, Timeout,
};

#[derive(Debug, Parser)]
#[command(
    name = "archbench",
    version,
    about = "How fast is this web server here, compared with that one there - and why?",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one URL and report throughput, latency and errors.
    Run(RunArgs),
    /// wrk-compatible front end: takes wrk's flags, prints wrk's layout.
    #[command(disable_version_flag = true)]
    Wrk(WrkArgs),
    /// ab-compatible front end: takes ApacheBench's flags, prints ab's layout.
    #[command(disable_version_flag = true)]
    Ab(AbArgs),
    /// h2load-compatible front end: takes h2load's core flags, prints h2load's layout.
    #[command(disable_version_flag = true)]
    H2load(H2loadArgs),
    /// Compare targets side by side over repeated runs, with a statistical verdict.
    Compare(CompareArgs),
    /// Render a stored result, comparison or sweep (JSON) again.
    Report(ReportArgs),
    /// Serve nginx's welcome page from a small embedded HTTP/1.1 server.
    Serve(ServeArgs),
    /// Compare two servers on loopback, nothing to set up: Debian's stock nginx configuration
    /// against the multi-arch guide's tuned one (two embedded servers without nginx).
    Demo(DemoArgs),
    /// Merge results of several processes or machines (e.g. `run --part I/N`) into one.
    Merge(MergeArgs),
    /// The targets at a ladder of loads: connections (closed loop: how much can it do) or
    /// rates (open loop: what latency at this traffic); each one's knee, when it is past it,
    /// and how it scales.
    Sweep(SweepArgs),
    /// The worker of `k8s load --in-cluster`: `run`'s flags, but it starts only when told the
    /// start instant on its control endpoint, then prints its result as one line.
    Agent(AgentArgs),
    /// The multi-arch nginx workflow on a Kubernetes cluster: up, status, config, curl, login,
    /// top, load, fingerprint, down (`archbench k8s --help`).
    #[command(disable_help_flag = true)]
    K8s {
        /// The k8s subcommand and its arguments (run by archbench-k8s).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// Live views of a load, shared by `run`, `compare`, `sweep` and `k8s load`.
#[derive(Debug, Clone, Default, Args)]
pub struct LiveArgs {
    /// Serve live OpenMetrics of the load on GET /metrics at this address (PORT alone binds
    /// 127.0.0.1:PORT; give an address, e.g. 0.0.0.0:9464, to serve beyond loopback).
    #[arg(long, value_name = "ADDR", value_parser = super::values::listen_addr)]
    pub prometheus: Option<std::net::SocketAddr>,
    /// With --prometheus: after the report, keep serving the final figures until Ctrl-C (so
    /// a scraper gets the end of the run).
    #[arg(long, requires = "prometheus")]
    pub linger: bool,
    /// The live dashboard in the terminal [default: on when stdin and stdout are terminals,
    /// the output is text and the run lasts 5 s or more].
    #[arg(long, conflicts_with = "no_tui")]
    pub tui: bool,
    /// Plain progress lines instead of the dashboard.
    #[arg(long)]
    pub no_tui: bool,
}

/// What every request of a load carries, and which servers are watched: `run`, `compare` and
/// `sweep` (one definition, one default).
#[derive(Debug, Clone, Args)]
pub struct RequestArgs {
    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_parser = super::values::header)]
    pub headers: Vec<(String, String)>,
    #[command(flatten)]
    pub timeout: Timeout,
    /// Do not verify TLS certificates.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Over https: accept exactly the certificate in this PEM file and no other, whatever
    /// names and issuer it has (a self-signed one, as `k8s up --tls` makes).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub pinned_cert: Option<PathBuf>,
    /// Over https: resume earlier TLS sessions on new connections (tickets or ids), or make
    /// every handshake a full one (what ab and wrk do); the result counts both.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub tls_resume: Switch,
    /// Over https: speak only this TLS version (1.2 or 1.3) [default: what the server prefers].
    #[arg(long, value_parser = super::values::tls_version)]
    pub tls_version: Option<crate::http::tls::TlsVersion>,
    /// Over https: offer only these cipher suites, in this order (OpenSSL's names, e.g.
    /// ECDHE-ECDSA-AES128-GCM-SHA256,TLS_AES_128_GCM_SHA256) [default: all the client speaks].
    #[arg(long, value_parser = super::values::tls_ciphers)]
    pub tls_ciphers: Option<super::values::TlsNames>,
    /// Over https: offer only these key-exchange groups, in this order (x25519, p-256, p-384).
    #[arg(long, value_parser = super::values::tls_groups)]
    pub tls_groups: Option<super::values::TlsNames>,
    /// A request mix: send the requests of FILE in turn (`METHOD PATH [weight=N]
    /// [name=NAME]`, then `Header: value` and `@BODYFILE` lines; entries separated by blank
    /// lines), each encoded once; the result keeps each entry's figures.
    #[arg(long, value_name = "FILE")]
    pub mix: Option<PathBuf>,
    /// Sample a server's CPU and memory during the run: NAME=pid:1234, NAME=name:nginx or
    /// NAME=cgroup:/sys/fs/cgroup/PATH (repeatable; for compare and sweep, NAME is a
    /// target's name).
    #[arg(long = "watch", value_parser = parse_watch)]
    pub watch: Vec<crate::monitor::WatchSpec>,
    #[command(flatten)]
    pub http2: Http2,
    /// HTTP/2 over https: the protocols offered by ALPN, `h2` (the default with --http2) or
    /// `h2,http/1.1` (the server chooses; the result's tls.alpn says what it chose).
    #[arg(long, requires = "http2", value_parser = super::values::alpn)]
    pub alpn: Option<bool>,
}

impl RequestArgs {
    /// The first TLS flag given, as typed; none when TLS is left as it comes.
    pub fn tls_flag_given(&self) -> Option<&'static str> {
        [
            (self.insecure, "--insecure"),
            (self.pinned_cert.is_some(), "--pinned-cert"),
            (self.tls_resume == Switch::Off, "--tls-resume off"),
            (self.tls_version.is_some(), "--tls-version"),
            (self.tls_ciphers.is_some(), "--tls-ciphers"),
            (self.tls_groups.is_some(), "--tls-groups"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The `--tls-*` flags as the engine takes them.
    pub fn tls_options(&self) -> crate::http::tls::TlsOptions {
        crate::http::tls::TlsOptions {
            resume: self.tls_resume == Switch::On,
            version: self.tls_version,
            ciphers: self.tls_ciphers.clone().map(|n| n.0).unwrap_or_default(),
            groups: self.tls_groups.clone().map(|n| n.0).unwrap_or_default(),
            pinned: None,
        }
    }
}

/// The flags that shape a load, shared by `run` and `compare` (one definition, one default).
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub connections: Connections,
    #[command(flatten)]
    pub threads: Threads,
    /// How long to load (e.g. 10s, 1m) [default: 10s for `run` (unless its -n is given), 3s
    /// per run for `compare`].
    #[arg(short = 'd', long, value_parser = super::values::duration)]
    pub duration: Option<std::time::Duration>,
    #[command(flatten)]
    pub rate: Rate,
    #[command(flatten)]
    pub pacing_slack: PacingSlack,
    /// Open a new connection for every request (over https: a handshake per request).
    #[arg(long)]
    pub no_keepalive: bool,
    /// Run a wrk Lua script (wrk's API: setup, init, request, response, delay, done); it
    /// builds the requests, so -m, --body and -H only fill in its wrk table's defaults.
    /// Scripts are trusted code.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// An argument for the script's init(args) (repeatable; args[0] is the URL, as in wrk).
    #[arg(long = "script-arg", value_name = "ARG", requires = "script")]
    pub script_args: Vec<String>,
    #[command(flatten)]
    pub request: RequestArgs,
    /// Count these events on the watched servers with perf_event_open (comma-separated:
    /// instructions, cycles, branches, branch-misses, cache-misses, task-clock,
    /// context-switches, page-faults, cpu-migrations, rHEX).
    #[arg(long, value_delimiter = ',')]
    pub perf: Vec<crate::monitor::perf::PerfEvent>,
    #[command(flatten)]
    pub slo: Objectives,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Target URL (http:// or https://).
    pub url: String,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Send exactly this many requests.
    #[arg(short = 'n', long, value_parser = super::values::count)]
    pub requests: Option<u64>,
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Speak HTTP/1.0 instead of HTTP/1.1.
    #[arg(long = "http1.0")]
    pub http10: bool,
    /// Run part I of N of a load shared by N processes (e.g. 0/3): -c, -n and --rate are the
    /// whole load's; this process takes every N-th connection and its place in the open-loop
    /// schedule, so the parts together send one smooth rate. Merge the results with
    /// `archbench merge`.
    #[arg(long, value_parser = super::values::part)]
    pub part: Option<crate::engine::Part>,
    /// Start at this wall-clock time rather than at once (RFC 3339, e.g.
    /// 2026-12-01T12:00:00.5Z, or @UNIX_SECONDS), so several processes start together.
    #[arg(long, value_parser = super::values::wall_clock)]
    pub start_at: Option<std::time::SystemTime>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub live: LiveArgs,
}

fn parse_watch(s: &str) -> Result<crate::monitor::WatchSpec, String> {
    s.parse()
        .map_err(|e: crate::monitor::MonitorError| e.to_string())
}

#[derive(Debug, Args)]
pub struct WrkArgs {
    /// Connections to keep open.
    #[arg(short = 'c', long, default_value = "10", value_parser = super::values::wrk_count)]
    pub connections: u64,
    /// Duration of the test.
    #[arg(short = 'd', long, default_value = "10s", value_parser = super::values::wrk_duration)]
    pub duration: std::time::Duration,
    /// Number of threads to use.
    #[arg(short = 't', long, default_value = "2", value_parser = super::values::wrk_count)]
    pub threads: u64,
    /// Load Lua script file (wrk's scripting API; scripts are trusted code).
    #[arg(short = 's', long)]
    pub script: Option<PathBuf>,
    /// Add header to request.
    #[arg(short = 'H', long = "header", value_parser = super::values::header)]
    pub headers: Vec<(String, String)>,
    /// Print latency statistics.
    #[arg(short = 'L', long)]
    pub latency: bool,
    /// Socket/request timeout.
    #[arg(short = 'T', long, default_value = "2s", value_parser = super::values::wrk_duration)]
    pub timeout: std::time::Duration,
    /// Print version details.
    #[arg(short = 'v', long = "version")]
    pub version: bool,
    // archbench extension.
    #[command(flatten)]
    pub json: JsonFile,
    /// Target URL.
    pub url: Option<String>,
    /// Arguments for the Lua script's init(args), after `--`.
    #[arg(trailing_var_arg = true, hide = true)]
    pub script_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct H2loadArgs {
    /// Number of requests across all clients (-D overrides it).
    #[arg(short = 'n', long = "requests", default_value = "1", value_parser = super::values::h2load_count)]
    pub requests: u64,
    /// Number of concurrent clients (connections).
    #[arg(short = 'c', long = "clients", default_value = "1", value_parser = super::values::h2load_count)]
    pub clients: u64,
    /// Max concurrent streams per client (HTTP/2).
    #[arg(short = 'm', long = "max-concurrent-streams", default_value = "1", value_parser = super::values::h2load_count)]
    pub streams: u64,
    /// Number of native threads.
    #[arg(short = 't', long = "threads", default_value = "1", value_parser = super::values::h2load_count)]
    pub threads: u64,
    /// Main duration of a timing-based test (seconds, or with a unit: 10s, 1m).
    #[arg(short = 'D', long = "duration", value_parser = super::values::seconds_or_duration)]
    pub duration: Option<std::time::Duration>,
    /// Warm-up before the main duration of a timing-based test (not measured).
    #[arg(long = "warm-up-time", value_parser = super::values::seconds_or_duration)]
    pub warm_up: Option<std::time::Duration>,
    /// Add/override a header to the requests (`:authority` and `:method` override those).
    #[arg(short = 'H', long = "header", value_parser = super::values::h2load_header)]
    pub headers: Vec<super::values::H2loadHeader>,
    /// Post FILE to the server (the method becomes POST).
    #[arg(short = 'd', long = "data")]
    pub data: Option<PathBuf>,
    /// Protocol used when no ALPN negotiation is done: h2c or http/1.1.
    #[arg(short = 'p', long = "no-tls-proto", default_value = "h2c")]
    pub proto: String,
    /// HTTP/1.1 only (as -p http/1.1).
    #[arg(long = "h1")]
    pub h1: bool,
    /// The application protocols offered by ALPN over https, comma-separated, in order of
    /// preference (h2load's; `--npn-list` is its older name): h3 first speaks HTTP/3 over
    /// QUIC, as h2load built with ngtcp2 does.
    #[arg(long = "alpn-list", alias = "npn-list")]
    pub alpn_list: Option<String>,
    /// Requests per second for each client (open loop).
    #[arg(long = "rps", value_parser = super::values::rate)]
    pub rps: Option<f64>,
    // archbench extension; h2load has none.
    #[command(flatten)]
    pub timeout: Timeout,
    /// h2load's -T: refused, with the nearest archbench flag (see `h2load_draft`).
    #[arg(short = 'T', long = "connection-active-timeout", hide = true)]
    pub active_timeout: Option<String>,
    /// h2load's -N: refused, with the nearest archbench flag (see `h2load_draft`).
    #[arg(short = 'N', long = "connection-inactivity-timeout", hide = true)]
    pub inactivity_timeout: Option<String>,
    /// Also print latency percentiles (archbench extension).
    #[arg(long)]
    pub latency: bool,
    /// Display version information and exit.
    #[arg(long)]
    pub version: bool,
    // archbench extension.
    #[command(flatten)]
    pub json: JsonFile,
    /// Target URL.
    pub url: Option<String>,
}

#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct AbArgs {
    /// Number of requests to perform.
    #[arg(short = 'n', value_parser = super::values::ab_count)]
    pub requests: Option<u64>,
    /// Number of multiple requests to make at a time.
    #[arg(short = 'c', default_value = "1", value_parser = super::values::ab_count)]
    pub concurrency: u64,
    /// Seconds to max. to spend on benchmarking (implies -n 50000).
    #[arg(short = 't', value_parser = super::values::duration)]
    pub timelimit: Option<std::time::Duration>,
    /// Use HTTP KeepAlive feature.
    #[arg(short = 'k')]
    pub keepalive: bool,
    /// Add arbitrary header line, eg. 'Accept-Encoding: gzip'.
    #[arg(short = 'H', value_parser = super::values::header)]
    pub headers: Vec<(String, String)>,
    /// File containing data to POST (remember to also set -T).
    #[arg(short = 'p')]
    pub postfile: Option<PathBuf>,
    /// Content-type header to use for POST/PUT data.
    #[arg(short = 'T')]
    pub content_type: Option<String>,
    /// Method name.
    #[arg(short = 'm')]
    pub method: Option<String>,
    /// Seconds to wait without any answer or failure before the run is given up (default
    /// 30), as ab's socket timeout ends it.
    #[arg(short = 's', default_value = "30", value_parser = super::values::duration)]
    pub timeout: std::time::Duration,
    /// Accept variable document length (no Length failures).
    #[arg(short = 'l')]
    pub variable_length: bool,
    /// Don't exit on socket receive errors (archbench never does: accepted, changes
    /// nothing).
    #[arg(short = 'r')]
    pub keep_going: bool,
    /// Use HEAD instead of GET.
    #[arg(short = 'i')]
    pub head: bool,
    /// Add cookie, eg. 'Apache=1234': a `Cookie:` line (given again, the last one, as ab).
    #[arg(short = 'C')]
    pub cookies: Vec<String>,
    /// Do not show progress when doing more than 150 requests.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// How much to print: 0 and 1 (ab's default) print the report; from 2 ab prints each
    /// request's and response's headers, which archbench ab does not (refused).
    #[arg(short = 'v', value_parser = super::values::ab_count)]
    pub verbosity: Option<u64>,
    /// Print version number and exit.
    #[arg(short = 'V')]
    pub version: bool,
    /// Display usage information.
    #[arg(short = 'h', action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    // archbench extension.
    #[command(flatten)]
    pub json: JsonFile,
    /// [http[s]://]hostname[:port]/path
    pub url: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("schedule").args(["interleave", "sequential", "parallel"])))]
#[command(mut_arg("runs", |a| a.default_value("5")))]
pub struct CompareArgs {
    /// Targets as NAME=URL; the first is the baseline.
    #[arg(required = true, num_args = 2..)]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub runs: Runs,
    /// A B A B … (the default).
    #[arg(long)]
    pub interleave: bool,
    /// All runs of one target, then the next.
    #[arg(long)]
    pub sequential: bool,
    /// All targets at once, like `wrk both`.
    #[arg(long)]
    pub parallel: bool,
    #[command(flatten)]
    pub no_warmup: NoWarmup,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub cost: Cost,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// A setting that is on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

#[derive(Debug, Args)]
#[command(mut_arg("output", |a| a.visible_alias("format")))]
pub struct ReportArgs {
    /// Results, comparisons or sweeps written by --json (results given together are drawn
    /// together).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub layout: Layout,
    // several documents given together share one page.
    #[command(flatten)]
    pub html: HtmlFile,
    /// Write each chart as an SVG file into this directory.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Server threads [default: one per core].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Run a local nginx with one of archbench's configurations instead (on a free loopback
    /// port, printed), until Ctrl-C.
    #[arg(long, value_enum, conflicts_with_all = ["addr", "threads", "delay", "burn"])]
    pub nginx: Option<crate::nginx::NginxProfile>,
    /// With --nginx: this many worker processes instead of the configuration's own.
    #[arg(long, requires = "nginx", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: Option<u32>,
    /// Wait this long before each response (a slow server, for tests).
    #[arg(long, hide = true, default_value = "0s", value_parser = super::values::duration)]
    pub delay: std::time::Duration,
    /// Spin the CPU this long before each response (an expensive server, for tests).
    #[arg(long, hide = true, default_value = "0s", value_parser = super::values::duration)]
    pub burn: std::time::Duration,
}

#[derive(Debug, Args)]
#[command(mut_arg("duration", |a| a.default_value("3s")))]
#[command(mut_arg("runs", |a| a.default_value("5")))]
pub struct DemoArgs {
    // plus one warm-up run per server.
    #[command(flatten)]
    pub duration: RunDuration,
    #[command(flatten)]
    pub runs: Runs,
    #[command(flatten)]
    pub connections: Connections,
    // comparison.json, comparison.md, comparison.html.
    #[command(flatten)]
    pub out_dir: OutDir,
    /// Compare two embedded servers (1 vs 2 threads) even where nginx is installed.
    #[arg(long)]
    pub embedded: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Result files (`--json` of run, wrk or ab) to merge.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Targets as NAME=URL; the first is the baseline.
    #[arg(required = true, num_args = 1..)]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub ladders: Ladders,
    #[command(flatten)]
    pub find_max: FindMax,
    #[command(flatten)]
    pub pacing_slack: PacingSlack,
    #[command(flatten)]
    pub threads: Threads,
    #[command(flatten)]
    pub duration: RunDuration,
    #[command(flatten)]
    pub runs: Runs,
    #[command(flatten)]
    pub no_warmup: NoWarmup,
    #[command(flatten)]
    pub request: RequestArgs,
    #[command(flatten)]
    pub slo: Objectives,
    #[command(flatten)]
    pub cost: Cost,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub quiet: Quiet,
    #[command(flatten)]
    pub live: LiveArgs,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Where the control endpoint listens: GET /ready, POST /start (body: the start instant,
    /// RFC 3339), GET /result.
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub control: String,
    /// How long to wait for the start instant before giving up.
    #[arg(long, default_value = "10m", value_parser = super::values::duration)]
    pub start_timeout: std::time::Duration,
    /// POST /start and /stop must carry this in `x-archbench-token` (other pods can reach
    /// the port too). Required, unless --control-no-auth says the endpoint is open on
    /// purpose.
    #[arg(long, env = crate::agent_protocol::TOKEN_ENV, hide_env_values = true)]
    pub control_token: Option<String>,
    /// Take POST /start and /stop from anyone who reaches the control endpoint, without a
    /// token (a network of your own only: anyone there can start the load).
    #[arg(long)]
    pub control_no_auth: bool,
}
