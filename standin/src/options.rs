//! What a test can choose about the stand-in cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Options for [`crate::Cluster::start`]; `Options::default()` is the two-node AKS-like cluster
/// of archbench's guide, answering as Kubernetes 1.32.
#[derive(Debug, Clone)]
pub struct Options {
    /// Server minor version at `/version`. kubectl on these machines is a dispatcher that runs
    /// the kubectl matching it ("32" → kubectl 1.32.4; 27..33 are installed).
    pub minor: String,
    /// The nodes; pods are scheduled onto them by `nodeSelector` and node affinity.
    pub nodes: Vec<NodeSpec>,
    /// Answer `/api` and `/apis` with aggregated discovery (`apidiscovery.k8s.io/v2`) when the
    /// client asks for it; otherwise only the legacy documents.
    pub aggregated_discovery: bool,
    /// The program an image containing `archbench` runs (issue 10's worker pods); None makes
    /// such images fail to pull.
    pub archbench_binary: Option<PathBuf>,
    /// Base of the container restart back-off (`base · 2^restarts`, capped at 30 · base).
    /// Kubernetes uses 10 s; tests compress it to ~100 ms.
    pub restart_backoff: Duration,
    /// Watch events kept; a watch from an older resourceVersion gets 410 Expired.
    pub event_ring: usize,
    /// Upper bound on a pod's termination grace period (None: honour
    /// `terminationGracePeriodSeconds`, 30 s by default, as Kubernetes does).
    pub termination_grace_cap: Option<Duration>,
    /// The nginx binary that nginx images run.
    pub nginx_binary: PathBuf,
    /// What a pod sees at `/sys/fs/cgroup` on a cgroup v1 host: v2-named files (as on AKS
    /// nodes, the default) or the v1 layout (`cpuacct/`, `memory/`).
    pub pod_cgroup_view: CgroupView,
}

/// The cgroup files shown inside pods (see the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupView {
    /// `cpu.stat` (usage_usec, user_usec, system_usec), `memory.current`, `memory.max`,
    /// `cpu.max`.
    V2,
    /// `cpuacct/cpuacct.usage`, `cpuacct/cpuacct.stat`, `memory/memory.usage_in_bytes`.
    V1,
}

/// A simulated node.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    /// `amd64` or `arm64`: `kubernetes.io/arch` and `status.nodeInfo.architecture`.
    pub arch: String,
    /// Extra labels (`agentpool`, `node.kubernetes.io/instance-type` …); the well-known
    /// `kubernetes.io/{arch,os,hostname}` labels are added.
    pub labels: BTreeMap<String, String>,
}

impl NodeSpec {
    /// A node with an AKS-like pool label and instance type.
    pub fn new(name: &str, arch: &str, pool: &str, instance_type: &str) -> NodeSpec {
        let labels = BTreeMap::from([
            ("agentpool".to_string(), pool.to_string()),
            (
                "node.kubernetes.io/instance-type".to_string(),
                instance_type.to_string(),
            ),
        ]);
        NodeSpec {
            name: name.to_string(),
            arch: arch.to_string(),
            labels,
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            minor: "32".into(),
            nodes: vec![
                NodeSpec::new("aks-intel-0", "amd64", "intel", "Standard_D4s_v5"),
                NodeSpec::new("aks-arm-0", "arm64", "arm", "Standard_D4ps_v5"),
            ],
            aggregated_discovery: true,
            archbench_binary: None,
            restart_backoff: Duration::from_secs(10),
            event_ring: 10_000,
            termination_grace_cap: None,
            nginx_binary: PathBuf::from("/usr/sbin/nginx"),
            pod_cgroup_view: CgroupView::V2,
        }
    }
}

impl Options {
    /// `v1.32.4` for minor 32: the versions of the kubectl binaries installed here, so the
    /// server and the dispatched client agree.
    pub fn git_version(&self) -> String {
        let patch = match self.minor.as_str() {
            "27" => "16",
            "28" => "15",
            "29" => "14",
            "30" => "13",
            "31" => "9",
            "32" => "4",
            "33" => "1",
            _ => "0",
        };
        format!("v1.{}.{patch}", self.minor)
    }
}
