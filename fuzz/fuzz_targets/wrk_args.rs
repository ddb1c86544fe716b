//! `archbench wrk` argument handling on arbitrary argv: a plan or a usage error, never a
//! panic. Host names are not looked up.
#![no_main]

use archbench::cli::{wrk_draft, Cli, Command};
use clap::Parser as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut argv = vec!["archbench".to_string(), "wrk".to_string()];
    argv.extend(text.split('\0').map(str::to_string));
    if let Ok(cli) = Cli::try_parse_from(argv) {
        if let Command::Wrk(a) = cli.command {
            if let Ok(plan) = wrk_draft(&a) {
                assert!(plan.connections >= 1 && plan.threads >= 1);
                assert!(plan.threads <= plan.connections);
            }
        }
    }
});
