//! What a cluster directory holds, named once: `tools/cluster up DIR` writes it, `exec`,
//! `down`, the node agents and the tests read it.
//!
//! ```text
//! DIR/kubeconfig          cluster-admin (client certificate, O=system:masters)
//! DIR/cluster.json        the state: network namespace, supervisor pid, nodes, binaries
//! DIR/pki/                CAs, certificates, keys (see pki)
//! DIR/config/             one kubeconfig per component and node
//! DIR/logs/NAME.log       every component's output, the supervisor's and each node agent's
//! DIR/etcd/               etcd's data
//! DIR/nodes/NODE/pods/    each pod's files (volumes, logs, cgroup view) on that node
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ClusterError, Result};
use crate::topology::NodeSpec;

#[derive(Debug, Clone)]
pub struct ClusterDir {
    pub root: PathBuf,
}

/// What `up` recorded of a running cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The network namespace's file (`/run/netns/NAME`).
    pub netns_path: PathBuf,
    /// Set when the harness made the namespace (then `down` removes it).
    pub netns_name: Option<String>,
    /// The laptop's namespace (`laptop`): always the harness's own, `down` removes it.
    #[serde(default)]
    pub laptop_netns: Option<String>,
    /// The supervisor's pid (`down` signals it).
    pub supervisor_pid: u32,
    pub nodes: Vec<NodeSpec>,
    /// Where the Kubernetes binaries are (kubectl among them).
    pub kube_bin: PathBuf,
    /// The archbench binary Job pods run (images whose name contains "archbench").
    pub archbench_binary: Option<PathBuf>,
    /// The nginx binary nginx images run.
    pub nginx_binary: PathBuf,
    /// Images (as given in the pod spec) that run another nginx program.
    #[serde(default)]
    pub nginx_builds: Vec<(String, PathBuf)>,
    /// The arm64 root filesystem arm64 nodes run nginx images from (under qemu-user).
    #[serde(default)]
    pub arm64_root: Option<PathBuf>,
    /// The scheduler's back-off in seconds at every try, when a test set it.
    #[serde(default)]
    pub scheduler_backoff: Option<u32>,
}

impl State {
    /// Whether the supervisor recorded here still runs (that pid, and it is a supervisor).
    pub fn supervisor_running(&self) -> bool {
        let pid = self.supervisor_pid;
        pid > 0
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"supervise"))
    }
}

impl ClusterDir {
    pub fn new(root: impl Into<PathBuf>) -> ClusterDir {
        ClusterDir { root: root.into() }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    pub fn state_file(&self) -> PathBuf {
        self.root.join("cluster.json")
    }

    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    pub fn config(&self, name: &str) -> PathBuf {
        self.root.join("config").join(format!("{name}.kubeconfig"))
    }

    /// Any other configuration file (the audit policy).
    pub fn config_file(&self, name: &str) -> PathBuf {
        self.root.join("config").join(name)
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.root.join("logs").join(format!("{name}.log"))
    }

    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }

    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.root.join("nodes").join(node)
    }

    pub fn users(&self) -> PathBuf {
        self.root.join("users")
    }

    pub fn read_state(&self) -> Result<State> {
        let path = self.state_file();
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::NoCluster {
            dir: self.root.clone(),
            why: format!("{}: {e}", path.display()),
        })?;
        serde_json::from_str(&text).map_err(|e| ClusterError::NoCluster {
            dir: self.root.clone(),
            why: format!("{}: {e}", path.display()),
        })
    }

    pub fn write_state(&self, state: &State) -> Result<()> {
        let text = serde_json::to_string_pretty(state)
            .map_err(|e| ClusterError::Invalid(format!("cluster state: {e}")))?;
        crate::pki::write_file(&self.state_file(), &text, false)
    }
}

/// The name of the network namespace (and cgroups) of a cluster directory: the same for one
/// directory across builds (FNV-1a of its path), so a stale namespace left by a killed
/// cluster is found and replaced, and two clusters never share one.
pub fn netns_name(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u32 = 0x811c_9dc5;
    for b in dir.as_os_str().as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("archbench-{h:08x}")
}
