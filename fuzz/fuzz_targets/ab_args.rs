//! `archbench ab` argument handling on arbitrary argv: a plan or a usage error, never a
//! panic. Host names are not looked up; -p files are whatever the fuzzer names (mostly absent).
#![no_main]

use archbench::cli::{ab_draft, Cli, Command};
use clap::Parser as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut argv = vec!["archbench".to_string(), "ab".to_string()];
    argv.extend(text.split('\0').map(str::to_string));
    if let Ok(cli) = Cli::try_parse_from(argv) {
        if let Command::Ab(a) = cli.command {
            if let Ok(plan) = ab_draft(&a) {
                let n = plan.stop.requests.expect("ab always counts requests");
                assert!(n >= plan.connections as u64, "ab's rule: -n >= -c");
            }
        }
    }
});
