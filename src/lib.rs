//! archbench: how fast is this web server here, compared with that one there — and why?
//!
//! The binary's `main` only parses, runs and maps errors to exit codes; everything else lives
//! here so it can be tested in-process. See ARCHITECTURE.md for the data flow.

// eprintln! panics when stderr cannot be written: messages go through `stderr_line!`.
#![deny(clippy::print_stderr)]

pub mod agent_protocol;
pub mod cli;
pub mod compare;
pub mod document;
pub mod engine;
pub mod http;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod live;
pub mod measure;
pub mod mix;
pub mod monitor;
pub mod nginx;
pub mod os;
pub mod placement;
pub mod printable;
pub mod quantity;
pub mod report;
pub mod script;
pub mod serve;
pub mod slo;
pub mod stages;
pub mod stats;
pub mod stderr;
pub mod stop;
pub mod sweep;
pub mod timefmt;
pub mod units;
