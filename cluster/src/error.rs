//! The errors of the harness and the node agent: each says what failed and what to do next.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the network namespace {netns} has a default route ({route}): cluster addresses would \
         leave this machine; the cluster runs only in a namespace without one"
    )]
    DefaultRoute { netns: String, route: String },
    #[error("{what} failed ({status}): {stderr}")]
    Command {
        what: String,
        status: String,
        stderr: String,
    },
    #[error("the cluster needs root (network namespaces, cgroups, nftables); run it as root")]
    NotRoot,
    #[error("{name} exited ({status}) before it was ready; its log: {log}")]
    ComponentExited {
        name: String,
        status: String,
        log: PathBuf,
    },
    #[error("{what} was not ready within {seconds} s; see {log}")]
    NotReady {
        what: String,
        seconds: u64,
        log: PathBuf,
    },
    #[error("no cluster in {dir}: {why} (start one with `tools/cluster up {dir}`)")]
    NoCluster { dir: PathBuf, why: String },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("{0}")]
    Invalid(String),
    /// A pod bound to a node whose object the node agent cannot read as a Pod.
    #[error(
        "pod {pod} does not read as a Kubernetes Pod ({source}); this node agent does not run \
         it: its object has a field of another type than Kubernetes' Pod schema gives (see \
         kubectl get pod -o yaml)"
    )]
    UnreadablePod {
        pod: String,
        #[source]
        source: serde_json::Error,
    },
    /// A SPDY/3.1 peer (kubectl port-forward) sent what the protocol does not allow.
    #[error("SPDY: {0}")]
    Spdy(String),
}

impl ClusterError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
        let what = what.into();
        move |source| ClusterError::Io { what, source }
    }

    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
        let what = what.into();
        move |source| ClusterError::Kube { what, source }
    }
}

pub type Result<T, E = ClusterError> = std::result::Result<T, E>;
