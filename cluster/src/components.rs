//! Kubernetes' own components and how this cluster starts them: one function per component
//! returns its command line, so what runs is readable in one place. Flags worth a reason say
//! it beside them.

use std::path::{Path, PathBuf};

use crate::layout::ClusterDir;
use crate::pki::{Pki, FRONT_PROXY_CLIENT};
use crate::topology::{self, NodeSpec};

/// etcd's client and metrics addresses (loopback of the cluster's namespace).
pub const ETCD_CLIENT: &str = "http://127.0.0.1:2379";
const ETCD_PEER: &str = "http://127.0.0.1:2380";
/// kube-proxy's health endpoint: 200 once its first sync has programmed the rules.
pub const KUBE_PROXY_HEALTHZ: &str = "127.0.0.1:10256";
/// The controller-manager's and scheduler's own HTTPS servers (`/healthz` on each).
pub const CONTROLLER_MANAGER_URL: &str = "https://127.0.0.1:10257";
pub const SCHEDULER_URL: &str = "https://127.0.0.1:10259";

/// A process to start: its name (for logs and messages), program and arguments.
#[derive(Debug, Clone)]
pub struct Component {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
}

fn args(list: &[(&str, String)]) -> Vec<String> {
    list.iter().map(|(k, v)| format!("--{k}={v}")).collect()
}

fn path(p: PathBuf) -> String {
    p.display().to_string()
}

pub fn etcd(bin: &Path, dir: &ClusterDir) -> Component {
    Component {
        name: "etcd".into(),
        program: bin.join("etcd"),
        args: args(&[
            ("name", "archbench".into()),
            ("data-dir", path(dir.etcd_data())),
            ("listen-client-urls", ETCD_CLIENT.into()),
            ("advertise-client-urls", ETCD_CLIENT.into()),
            ("listen-peer-urls", ETCD_PEER.into()),
            ("initial-advertise-peer-urls", ETCD_PEER.into()),
            ("initial-cluster", format!("archbench={ETCD_PEER}")),
            ("log-level", "warn".into()),
            // A test cluster that dies with its tests: no fsync per write (a VM's disk makes
            // every apply wait for it otherwise).
            ("unsafe-no-fsync", "true".into()),
        ]),
    }
}

pub fn apiserver(bin: &Path, dir: &ClusterDir) -> Component {
    let pki = Pki::new(dir.pki());
    Component {
        name: "kube-apiserver".into(),
        program: bin.join("kube-apiserver"),
        args: args(&[
            ("etcd-servers", ETCD_CLIENT.into()),
            // Without a default route the apiserver cannot pick an address by itself; this
            // one is also the `kubernetes` Service's endpoint.
            ("advertise-address", topology::APISERVER_IP.to_string()),
            // Every address of the namespace (all the cluster's own): the advertised one for
            // pods, the loopback one the kubeconfigs name (APISERVER_LOOPBACK).
            ("bind-address", "0.0.0.0".into()),
            ("secure-port", topology::APISERVER_PORT.to_string()),
            ("client-ca-file", path(pki.ca_cert())),
            ("tls-cert-file", path(pki.cert("apiserver"))),
            ("tls-private-key-file", path(pki.key("apiserver"))),
            ("service-account-key-file", path(pki.service_account_pub())),
            (
                "service-account-signing-key-file",
                path(pki.service_account_key()),
            ),
            (
                "service-account-issuer",
                format!(
                    "https://kubernetes.default.svc.{}",
                    topology::CLUSTER_DOMAIN
                ),
            ),
            ("service-cluster-ip-range", topology::SERVICE_CIDR.into()),
            ("authorization-mode", "Node,RBAC".into()),
            // The defaults plus NodeRestriction: a node may change only itself and its pods.
            ("enable-admission-plugins", "NodeRestriction".into()),
            ("allow-privileged", "true".into()),
            (
                "kubelet-client-certificate",
                path(pki.cert("apiserver-kubelet-client")),
            ),
            (
                "kubelet-client-key",
                path(pki.key("apiserver-kubelet-client")),
            ),
            // Kubelets' serving certificates are ours: verify them.
            ("kubelet-certificate-authority", path(pki.ca_cert())),
            ("kubelet-preferred-address-types", "InternalIP".into()),
            // The aggregation layer (metrics.k8s.io from metrics-server).
            (
                "requestheader-client-ca-file",
                path(pki.front_proxy_ca_cert()),
            ),
            ("requestheader-allowed-names", FRONT_PROXY_CLIENT.into()),
            ("requestheader-username-headers", "X-Remote-User".into()),
            ("requestheader-group-headers", "X-Remote-Group".into()),
            (
                "requestheader-extra-headers-prefix",
                "X-Remote-Extra-".into(),
            ),
            ("proxy-client-cert-file", path(pki.cert(FRONT_PROXY_CLIENT))),
            ("proxy-client-key-file", path(pki.key(FRONT_PROXY_CLIENT))),
            ("enable-aggregator-routing", "true".into()),
            // Every request but heartbeats, as the API server saw it: what tests read to know
            // a client has reached a step (an exec opened, a Job created).
            ("audit-policy-file", path(dir.config_file(AUDIT_POLICY))),
            ("audit-log-path", path(dir.log("audit"))),
            ("audit-log-maxsize", "200".into()),
            ("profiling", "false".into()),
        ]),
    }
}

/// The audit policy's file name under DIR/config.
pub const AUDIT_POLICY: &str = "audit-policy.yaml";

/// Metadata of every request except the node agents' lease renewals and health probes.
pub const AUDIT_POLICY_TEXT: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  nonResourceURLs: [\"/healthz*\", \"/readyz*\", \"/livez*\"]
- level: Metadata
";

/// metrics-server, behind the `v1beta1.metrics.k8s.io` APIService: it scrapes each node
/// agent's `/metrics/resource` every 10 s (its shortest resolution).
pub fn metrics_server(bin: &Path, dir: &ClusterDir) -> Component {
    let pki = Pki::new(dir.pki());
    let kc = path(dir.config("metrics-server"));
    Component {
        name: "metrics-server".into(),
        program: bin.join("metrics-server"),
        args: args(&[
            ("kubeconfig", kc.clone()),
            ("authentication-kubeconfig", kc.clone()),
            ("authorization-kubeconfig", kc),
            ("bind-address", topology::METRICS_SERVER_IP.to_string()),
            ("secure-port", topology::METRICS_SERVER_PORT.to_string()),
            ("tls-cert-file", path(pki.cert("metrics-server"))),
            ("tls-private-key-file", path(pki.key("metrics-server"))),
            ("kubelet-preferred-address-types", "InternalIP".into()),
            ("kubelet-use-node-status-port", "true".into()),
            ("kubelet-certificate-authority", path(pki.ca_cert())),
            (
                "kubelet-client-certificate",
                path(pki.cert("apiserver-kubelet-client")),
            ),
            (
                "kubelet-client-key",
                path(pki.key("apiserver-kubelet-client")),
            ),
            ("metric-resolution", "10s".into()),
            // It must be shorter than the resolution.
            ("kubelet-request-timeout", "5s".into()),
        ]),
    }
}

pub fn controller_manager(bin: &Path, dir: &ClusterDir) -> Component {
    let pki = Pki::new(dir.pki());
    let kc = path(dir.config("kube-controller-manager"));
    Component {
        name: "kube-controller-manager".into(),
        program: bin.join("kube-controller-manager"),
        args: args(&[
            ("kubeconfig", kc.clone()),
            ("authentication-kubeconfig", kc.clone()),
            ("authorization-kubeconfig", kc),
            ("bind-address", "127.0.0.1".into()),
            ("secure-port", "10257".into()),
            // One instance: no leader election to wait for.
            ("leader-elect", "false".into()),
            (
                "service-account-private-key-file",
                path(pki.service_account_key()),
            ),
            ("root-ca-file", path(pki.ca_cert())),
            // Each controller acts as its own service account, as kubeadm sets it up (RBAC
            // then applies to the Job controller as to any other client).
            ("use-service-account-credentials", "true".into()),
            ("cluster-cidr", topology::CLUSTER_CIDR.into()),
            ("allocate-node-cidrs", "true".into()),
            ("node-cidr-mask-size", topology::NODE_CIDR_MASK.to_string()),
            ("service-cluster-ip-range", topology::SERVICE_CIDR.into()),
            // A node whose agent stops is NotReady after 20 s rather than 50.
            ("node-monitor-grace-period", "20s".into()),
            ("profiling", "false".into()),
        ]),
    }
}

/// The scheduler, with [`scheduler_config`]. With a test's `backoff` it also keeps a pod in
/// its back-off when it has nothing else to do (SchedulerPopFromBackoffQ, on by default since
/// Kubernetes 1.33, would try it at once), as a busy scheduler or an older one does.
pub fn scheduler(bin: &Path, dir: &ClusterDir, backoff: Option<u32>) -> Component {
    let kc = path(dir.config("kube-scheduler"));
    let mut flags = vec![
        ("config", path(dir.config_file(SCHEDULER_CONFIG))),
        ("authentication-kubeconfig", kc.clone()),
        ("authorization-kubeconfig", kc),
        ("bind-address", "127.0.0.1".into()),
        ("secure-port", "10259".into()),
    ];
    if backoff.is_some() {
        flags.push(("feature-gates", "SchedulerPopFromBackoffQ=false".into()));
    }
    Component {
        name: "kube-scheduler".into(),
        program: bin.join("kube-scheduler"),
        args: args(&flags),
    }
}

/// The scheduler's configuration file's name under DIR/config.
pub const SCHEDULER_CONFIG: &str = "kube-scheduler.yaml";

/// The scheduler's configuration: its kubeconfig, one instance (no leader election), and the
/// back-off before a pod it found no room for is tried again: Kubernetes' own (1 s doubling
/// to 10 s) unless a test asks for `backoff` seconds throughout, to stand for a loaded
/// control plane whose next try comes late.
pub fn scheduler_config(kubeconfig: &Path, backoff: Option<u32>) -> String {
    let (initial, max) = backoff.map_or((1, 10), |s| (s, s));
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {}
leaderElection:
  leaderElect: false
enableProfiling: false
podInitialBackoffSeconds: {initial}
podMaxBackoffSeconds: {max}
",
        kubeconfig.display()
    )
}

/// One kube-proxy for the whole namespace: every node's address shares it, so one set of
/// rules serves them all (`--nodeport-addresses` the nodes' internal and external subnets).
pub fn kube_proxy(bin: &Path, dir: &ClusterDir, first_node: &NodeSpec) -> Component {
    Component {
        name: "kube-proxy".into(),
        program: bin.join("kube-proxy"),
        args: args(&[
            ("kubeconfig", path(dir.config("kube-proxy"))),
            ("proxy-mode", "nftables".into()),
            ("hostname-override", first_node.name.clone()),
            ("cluster-cidr", topology::CLUSTER_CIDR.into()),
            (
                "nodeport-addresses",
                format!(
                    "{},{}",
                    topology::HOST_SUBNET,
                    topology::NODE_EXTERNAL_SUBNET
                ),
            ),
            ("metrics-bind-address", "127.0.0.1:10249".into()),
            ("healthz-bind-address", KUBE_PROXY_HEALTHZ.into()),
            // nf_conntrack_max belongs to the machine, not to our namespace: leave it.
            ("conntrack-max-per-core", "0".into()),
        ]),
    }
}

/// The node agent of one node (this binary).
pub fn node_agent(this: &Path, dir: &ClusterDir, node: &NodeSpec) -> Component {
    Component {
        name: format!("node-{}", node.name),
        program: this.to_path_buf(),
        args: vec![
            "node".into(),
            dir.root.display().to_string(),
            node.name.clone(),
        ],
    }
}
