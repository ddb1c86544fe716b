//! `archbench k8s …` in the load generator: it only hands over to the executable that carries
//! the Kubernetes client.

use anyhow::Context as _;

use crate::cli::PlanError;

/// The executable that carries the Kubernetes client (kube-rs and its TLS, YAML and async
/// stacks): kept out of `archbench` itself, so the load generator's own memory stays what it
/// was (peak RSS at -c10000: 8.7 MiB, against 10.1 MiB with kube linked in; more code paged
/// in, not more data).
pub const K8S_EXECUTABLE: &str = "archbench-k8s";

/// `archbench k8s ARGS…`: becomes `archbench-k8s ARGS…` (the same directory), so exit status,
/// signals and the terminal are its own.
pub fn exec(args: &[std::ffi::OsString]) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().context("cannot find archbench's own path")?;
    let sibling = me.with_file_name(K8S_EXECUTABLE);
    let program = if sibling.exists() {
        sibling
    } else {
        std::path::PathBuf::from(K8S_EXECUTABLE)
    };
    let err = std::process::Command::new(&program).args(args).exec();
    Err(PlanError::Invalid(format!(
        "cannot run {} ({err}); it is built and installed beside archbench (cargo build --release, cargo install --path .)",
        program.display()
    ))
    .into())
}
