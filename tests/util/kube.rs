//! `archbench k8s` against a test cluster: the commands and checks the `tests` and `timing`
//! binaries share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use archbench_cluster::topology::NodeSpec;
use archbench_cluster::{TestCluster, TestOptions};

use super::{finish_within, stderr, stdout, PROMPTLY};

/// Root, Go (or the cluster's components built) and nginx; else a failure, or a listed skip.
pub fn can_run() -> bool {
    if crate::util::require_tool("nginx").is_none() {
        return false;
    }
    if let Some(why) = archbench_cluster::testing::unavailable() {
        crate::util::cannot_run(&why);
        return false;
    }
    true
}

pub fn options(nodes: Option<Vec<NodeSpec>>) -> TestOptions {
    TestOptions {
        nodes,
        archbench_binary: Some(env!("CARGO_BIN_EXE_archbench").into()),
        nginx_builds: Vec::new(),
        scheduler_backoff: None,
    }
}

/// `archbench k8s -n NS ARGS…` from the laptop's namespace (the cluster as a laptop reaches
/// AKS: the API server, load balancers and node external addresses), not yet started.
pub fn k8s_command(c: &TestCluster, ns: &str, args: &[&str]) -> Command {
    let mut cmd = c.laptop_command(env!("CARGO_BIN_EXE_archbench"));
    cmd.arg("k8s")
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["-n", ns])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `archbench k8s -n NS ARGS…`, bounded in time.
pub fn k8s(c: &TestCluster, ns: &str, args: &[&str]) -> Output {
    let child = k8s_command(c, ns, args).spawn().expect("archbench runs");
    finish_within(child, PROMPTLY * 2)
}

pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// The one run directory a load wrote under `out`.
pub fn the_run_dir(out: &Path) -> PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}
