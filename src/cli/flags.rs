//! Flags several commands take, each defined once (ripgrep's rule): a command flattens the
//! definition, so a flag's name, letter, parser and words cannot drift apart between commands.
//! Where a command's default differs on purpose, the command says so with `mut_arg` on its own
//! struct and its --help shows that default. The test below holds every command of archbench's
//! own to this (the wrk, ab and h2load front ends speak those tools' flags, not ours).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::values;

/// The per-request timeout's default, wherever a command has one of its own making (wrk's and
/// ab's keep theirs).
pub const REQUEST_TIMEOUT: &str = "10s";

/// `--threads`' words, without the default (the `k8s` loads set theirs with `mut_arg`).
pub const THREADS: &str = "Worker threads per target (with --in-cluster: per load pod)";

/// The layouts a report takes on stdout: one list for every command (each refuses those it
/// has no report in, see `output::OutputPlan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// archbench's report.
    #[default]
    Text,
    /// The document itself, as --json writes it.
    Json,
    /// The report as Markdown.
    Markdown,
    /// The report as one self-contained HTML page.
    Html,
    /// `k8s load` only: the multi-arch guide's script's own (its wrk command lines, "INTEL
    /// RESULTS:", wrk's layout, "Both tests completed").
    Wrk,
}

/// `-o`: the report's layout on stdout.
#[derive(Debug, Clone, Default, Args)]
pub struct Layout {
    /// Report layout on stdout.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// `--json FILE`.
#[derive(Debug, Clone, Default, Args)]
pub struct JsonFile {
    /// Also write the document as JSON to this file: the result, comparison or sweep whole,
    /// histograms included (compare and the sweeps rewrite it after every run, so Ctrl-C
    /// keeps what was measured).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `--html FILE`.
#[derive(Debug, Clone, Default, Args)]
pub struct HtmlFile {
    /// Also write the report as one self-contained HTML page to this file (tables, charts as
    /// inline SVG, plan and environment; nothing fetched from the network).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Where a command's document goes: stdout's layout and the files (`output::OutputPlan`
/// reads them once).
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    #[command(flatten)]
    pub layout: Layout,
    #[command(flatten)]
    pub json: JsonFile,
    /// Also write the report as Markdown to this file.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    #[command(flatten)]
    pub html: HtmlFile,
}

/// `-q`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct Quiet {
    /// No progress lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `-t`: `run`, `compare` and `sweep` default to a worker per core; the `k8s` loads set 1.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct Threads {
    #[arg(short = 't', long, value_parser = values::count, help = format!("{THREADS} [default: one per core]"))]
    pub threads: Option<u64>,
}

/// `-c` as a count (the sweeps' `-c` is a ladder: `Ladders`).
#[derive(Debug, Clone, Copy, Args)]
pub struct Connections {
    /// Concurrent connections per target.
    #[arg(short = 'c', long, default_value = "50", value_parser = values::count)]
    pub connections: u64,
}

/// `-r` and `--stages`.
#[derive(Debug, Clone, Default, Args)]
pub struct Rate {
    /// Open loop: requests per second per target, each request's latency measured from its
    /// intended send time; `FROM:TO/LENGTH` (e.g. 1k:20k/60s) ramps linearly over the run.
    #[arg(short = 'r', long, value_parser = values::rate_or_ramp)]
    pub rate: Option<values::RateArg>,
    /// Open loop whose rate changes: stages `LENGTH@RATE` (steady) or `LENGTH@FROM..TO`
    /// (linear), comma-separated, e.g. '30s@1k, 60s@1k..20k, 30s@20k'; the run lasts their
    /// sum.
    #[arg(long, value_parser = values::stages, conflicts_with = "rate")]
    pub stages: Option<crate::stages::Stages>,
}

impl Rate {
    /// A steady `--rate`.
    pub fn steady(&self) -> Option<f64> {
        match self.rate {
            Some(values::RateArg::Steady(r)) => Some(r),
            _ => None,
        }
    }

    /// The stages of `--stages` or of a ramp given to `--rate`.
    pub fn staged(&self) -> Option<crate::stages::Stages> {
        match &self.rate {
            Some(values::RateArg::Ramp(s)) => Some(s.clone()),
            _ => self.stages.clone(),
        }
    }
}

/// `-d` where every run lasts a duration (`run` and `compare` may end on `-n` instead: theirs
/// is `LoadArgs`' own, with no default).
#[derive(Debug, Clone, Copy, Args)]
pub struct RunDuration {
    /// Duration of each run.
    #[arg(short = 'd', long, default_value = "10s", value_parser = values::duration)]
    pub duration: Duration,
}

/// `--runs`: 1 unless a command sets more (`compare` and `demo`: 5).
#[derive(Debug, Clone, Copy, Args)]
pub struct Runs {
    /// Measured runs per target (in a sweep: at each step); at least 4 give a verdict at
    /// α = 0.05.
    #[arg(long, default_value = "1", value_parser = values::count)]
    pub runs: u64,
}

/// `--no-warmup`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct NoWarmup {
    /// Do not run and discard a warm-up run per target (in a sweep: before the first step).
    #[arg(long)]
    pub no_warmup: bool,
}

/// `--timeout`.
#[derive(Debug, Clone, Copy, Args)]
pub struct Timeout {
    /// Per-request timeout: a request not answered this long after its send is a timeout
    /// error.
    #[arg(long, default_value = REQUEST_TIMEOUT, value_parser = values::duration)]
    pub timeout: Duration,
}

/// `--pacing-slack`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct PacingSlack {
    /// Open loop: a send due within this long after a wake-up goes out in it, early, timed
    /// from its actual send; at most 5ms (a few ms: as bursty as wrk2, at its cost) [default:
    /// how late a wake-up comes on this machine, measured at the start, at most 50us].
    #[arg(long, value_parser = values::duration)]
    pub pacing_slack: Option<Duration>,
}

/// `--slo`.
#[derive(Debug, Clone, Default, Args)]
pub struct Objectives {
    /// Objectives to judge by, comma-separated: p50/p90/p99/p99.9/max/mean < TIME, errors < N
    /// or N%, rps >= N (e.g. 'p99<10ms,errors<0.1%'); one missed makes the exit status 1.
    /// A comparison judges each target's medians; a sweep's knee is the highest load meeting
    /// them, and it fails when a target met them at no load.
    #[arg(long, value_parser = values::slo)]
    pub slo: Option<crate::slo::Slo>,
}

/// `--cost`.
#[derive(Debug, Clone, Default, Args)]
pub struct Cost {
    /// A target's price per hour, NAME=PRICE (repeatable; for the k8s commands its node's,
    /// e.g. intel=0.192 arm=0.154): the cost of a million requests at each target's median
    /// throughput (in a sweep: at each load and at its knee).
    #[arg(long, value_name = "NAME=PRICE", value_parser = values::price)]
    pub cost: Vec<(String, f64)>,
}

/// `--out-dir`.
#[derive(Debug, Clone, Args)]
pub struct OutDir {
    /// Results go to DIR/<timestamp>/ (the command's document as JSON, and its Markdown and
    /// HTML reports).
    #[arg(long, value_name = "DIR", default_value = "archbench-results")]
    pub out_dir: PathBuf,
}

/// The sweeps' ladders: `-c` and `-r` step through loads.
#[derive(Debug, Clone, Default, Args)]
pub struct Ladders {
    /// Closed loop: the connection counts to step through (1,2,4,8 or 1:512:x2 or
    /// 10:100:+10); with --rates, one count: the connections of every step [default: 100].
    #[arg(short = 'c', long, value_parser = values::ladder)]
    pub connections: Option<values::Ladder>,
    /// Open loop: the rates per target to step through (1k:50k:x2, 1k:10k:+1k or
    /// 1000,2000,5000).
    #[arg(short = 'r', long, value_parser = values::ladder)]
    pub rates: Option<values::Ladder>,
}

/// `--find-max` and `--precision` (`sweep`, `k8s sweep`).
#[derive(Debug, Clone, Copy, Args)]
pub struct FindMax {
    /// Open loop: instead of climbing the ladder, find each target's highest rate holding
    /// --slo by bisection within --rates LO[:HI] (without HI, doubling from LO), to
    /// --precision; the rates either side of the boundary are run --runs times each.
    #[arg(long, requires = "slo", requires = "rates")]
    pub find_max: bool,
    /// --find-max: how close the rate that held and the one that failed must come, in % of
    /// the former.
    #[arg(long, default_value = "5%", value_parser = values::percent, requires = "find_max")]
    pub precision: f64,
}

/// `--http2`, `--http3` and `--streams`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct Http2 {
    /// Speak HTTP/2: prior knowledge (h2c, nginx's `listen 80 http2;`) over http://, h2 by
    /// ALPN over https.
    #[arg(long)]
    pub http2: bool,
    /// Speak HTTP/3 over QUIC (https:// only: UDP to the URL's port, h3 by ALPN).
    #[arg(long, conflicts_with = "http2")]
    pub http3: bool,
    /// HTTP/3: resume a TLS session fetched before the run (one handshake, not counted) on
    /// every connection, and send its first requests in 0-RTT early data; the result says
    /// how many the server accepted.
    #[arg(long = "0rtt", requires = "http3")]
    pub zero_rtt: bool,
    /// HTTP/2 and HTTP/3: concurrent streams per connection [default: 1]; the server's
    /// limit on concurrent streams caps it (the report says so).
    #[arg(long, value_parser = values::count)]
    pub streams: Option<u64>,
}

impl Http2 {
    /// With --http2, its streams per connection.
    pub fn streams(&self) -> Option<u64> {
        self.http2.then(|| self.streams.unwrap_or(1))
    }

    /// With --http3, its streams per connection and whether it asks for 0-RTT.
    pub fn http3_streams(&self) -> Option<(u64, bool)> {
        self.http3
            .then(|| (self.streams.unwrap_or(1), self.zero_rtt))
    }

    /// `--streams` given without a protocol that has streams: the one-line refusal.
    pub fn stray_streams(&self) -> Option<&'static str> {
        (self.streams.is_some() && !self.http2 && !self.http3)
            .then_some("--streams needs --http2 or --http3 (HTTP/1.1 has no streams)")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clap::CommandFactory as _;

    /// Flags that share a name but not a meaning, each on purpose, and why.
    const NAMESAKES: &[(&str, &str)] = &[
        (
            "duration",
            "run's and compare's -d may be left out for -n; the others' runs last a duration",
        ),
        ("connections", "a sweep's -c is a ladder of counts"),
        ("threads", "serve's are the embedded server's threads"),
        (
            "watch",
            "top --watch refreshes; a load's --watch samples a server",
        ),
        ("tls", "up --tls serves https; load --tls loads it"),
        (
            "http3",
            "up --http3 serves HTTP/3; a load's --http3 speaks it",
        ),
        (
            "image",
            "up's is nginx's image; --in-cluster's the load pods'",
        ),
        (
            "workers",
            "serve's are nginx's processes; the k8s ones load pods",
        ),
    ];

    /// What `archbench` and `archbench k8s` define, command by command, but the front ends.
    fn our_commands() -> Vec<(String, clap::Command)> {
        let mut all = Vec::new();
        let mut cli = super::super::args::Cli::command();
        cli.build();
        let front_ends = ["wrk", "ab", "h2load", "k8s", "help"];
        for c in cli.get_subcommands() {
            if !front_ends.contains(&c.get_name()) {
                all.push((c.get_name().to_string(), c.clone()));
            }
        }
        #[cfg(feature = "k8s")]
        {
            let mut k8s = super::super::k8s_args::K8sCli::command();
            k8s.build();
            for c in k8s.get_subcommands() {
                if c.get_name() != "help" {
                    all.push((format!("k8s {}", c.get_name()), c.clone()));
                }
            }
        }
        all
    }

    /// A flag's help without the default clap appends or a command's own `[default: …]`.
    fn words(a: &clap::Arg) -> String {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        match help.rfind(" [default:") {
            Some(i) if help.ends_with(']') => help[..i].to_string(),
            _ => help,
        }
    }

    #[test]
    fn every_flag_means_the_same_in_every_command() {
        let mut seen: BTreeMap<String, Vec<(String, Option<char>, String)>> = BTreeMap::new();
        for (name, cmd) in our_commands() {
            for a in cmd.get_arguments() {
                let Some(long) = a.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                seen.entry(long.to_string()).or_default().push((
                    name.clone(),
                    a.get_short(),
                    words(a),
                ));
            }
        }
        assert!(seen.len() > 40, "{seen:?}");
        let mut drifted = Vec::new();
        for (long, defs) in &seen {
            if NAMESAKES.iter().any(|(n, _)| n == long) {
                continue;
            }
            let (first_cmd, short, help) = &defs[0];
            for (cmd, s, h) in &defs[1..] {
                if (s, h) != (short, help) {
                    drifted.push(format!(
                        "--{long}: {first_cmd} says {short:?} {help:?}, {cmd} says {s:?} {h:?}"
                    ));
                }
            }
        }
        assert!(drifted.is_empty(), "defined twice:\n{}", drifted.join("\n"));
    }

    #[test]
    fn a_namesake_is_listed_only_while_it_is_one() {
        // A namesake left in the list after its commands agree again would hide a future copy.
        let commands = our_commands();
        for (long, why) in NAMESAKES {
            let helps: std::collections::BTreeSet<String> = commands
                .iter()
                .flat_map(|(_, c)| c.get_arguments().cloned().collect::<Vec<_>>())
                .filter(|a| a.get_long() == Some(*long))
                .map(|a| words(&a))
                .collect();
            assert!(
                helps.len() > 1,
                "--{long} ({why}) means one thing now: drop it from NAMESAKES"
            );
        }
    }
}
