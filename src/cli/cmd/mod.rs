//! One file per command (as mini-redis's `cmd/`); the shared pieces live beside `cmd` in
//! `cli`, and `cli/mod.rs` only dispatches.

pub mod ab;
pub mod agent;
pub mod compare;
pub mod demo;
pub mod h2load;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod k8s_executable;
pub mod merge;
pub mod report;
pub mod run;
pub mod serve;
pub mod sweep;
pub mod wrk;
