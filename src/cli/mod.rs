//! The edge: parse the command line, build a plan, run it, report. Maps every failure to a
//! one-line message and an exit status (0 ok, 1 failure, 2 usage, 130/143 interrupted).

mod args;
pub(crate) mod argv;
mod climb;
mod cmd;
mod execute;
mod exit;
mod find_max;
mod flags;
#[cfg(feature = "k8s")]
mod k8s_args;
mod live;
mod output;
mod plan;
mod progress;
mod session;
mod signals;
mod values;

use std::ffi::OsString;
use std::path::Path;

use clap::CommandFactory as _;

pub use args::{
    AbArgs, Cli, Command, CompareArgs, DemoArgs, H2loadArgs, LoadArgs, MergeArgs, RunArgs,
    ServeArgs, WrkArgs,
};
pub use execute::execute;
pub use exit::{EXIT_FAILURE, EXIT_USAGE};
pub use plan::{
    ab_draft, ab_plan, compare_plan, h2load_draft, h2load_plan, reproduce, run_draft, run_plan,
    wrk_draft, wrk_plan, PlanError,
};
pub use signals::StopSignals;

use exit::run_main;

/// Invoked as `wrk` or `ab` (a symlink or copy of the binary), archbench is that front end,
/// so a script keeps working when only the binary behind the name changes.
fn with_front_end(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let invoked_as = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .map(str::to_string);
    if let Some(name @ ("wrk" | "ab" | "h2load")) = invoked_as.as_deref() {
        args.insert(1, OsString::from(name));
    }
    args
}

/// Runs archbench with these arguments and returns the process exit status.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = with_front_end(args);
    // A usage error inside a subcommand points at that subcommand's help.
    let subcommand = args
        .get(1)
        .and_then(|a| a.to_str())
        .filter(|a| Cli::command().find_subcommand(a).is_some())
        .map(str::to_string);
    run_main(
        args,
        subcommand.as_deref(),
        None,
        |cli: Cli, signals| match cli.command {
            Command::Run(a) => cmd::run::cmd_run(&a, signals),
            Command::Wrk(a) => cmd::wrk::cmd_wrk(&a, signals),
            Command::Ab(a) => cmd::ab::cmd_ab(&a, signals),
            Command::H2load(a) => cmd::h2load::cmd_h2load(&a, signals),
            Command::Compare(a) => cmd::compare::cmd_compare(&a, signals),
            Command::Report(a) => cmd::report::cmd_report(&a),
            Command::Serve(a) => cmd::serve::cmd_serve(&a, signals),
            Command::Demo(a) => cmd::demo::cmd_demo(&a, signals),
            Command::Merge(a) => cmd::merge::cmd_merge(&a),
            Command::K8s { args } => cmd::k8s_executable::exec(&args),
            Command::Agent(a) => cmd::agent::cmd_agent(&a, signals),
            Command::Sweep(a) => cmd::sweep::cmd_sweep(&a, signals),
        },
    )
}

#[cfg(feature = "k8s")]
/// `archbench-k8s`'s entry point: `archbench k8s`'s command line, run.
pub fn k8s_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    const MISSING: &str = "a k8s command is missing (up, manifests, status, config, curl, login, top, load, fingerprint, down); see `archbench k8s --help`";
    run_main(
        args,
        Some("k8s"),
        Some(MISSING),
        |cli: k8s_args::K8sCli, signals| cmd::k8s::cmd_k8s(&cli.args, signals),
    )
}
