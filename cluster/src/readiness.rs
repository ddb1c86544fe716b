//! When the cluster is ready to use, read through the API: every node Ready, and the
//! controller-manager's controllers visibly at work (the default ServiceAccount and the
//! kube-root-ca.crt ConfigMap exist, which every pod's token volume needs).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use kube::Api;

use crate::error::{ClusterError, Result};
use crate::topology::NodeSpec;

const RETRY: Duration = Duration::from_millis(200);

pub fn node_is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Every node registered and Ready; `exited` names a node agent that died meanwhile (name,
/// status, log).
pub async fn nodes_ready(
    client: &kube::Client,
    nodes: &[NodeSpec],
    deadline: Duration,
    mut exited: impl FnMut() -> Option<(String, String, PathBuf)>,
) -> Result<Duration> {
    let api: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let mut all = true;
        for n in nodes {
            match api.get_opt(&n.name).await {
                Ok(Some(node)) if node_is_ready(&node) => {}
                _ => all = false,
            }
        }
        if all {
            return Ok(start.elapsed());
        }
        if let Some((name, status, log)) = exited() {
            return Err(ClusterError::ComponentExited { name, status, log });
        }
        if start.elapsed() >= deadline {
            return Err(ClusterError::NotReady {
                what: "the nodes".into(),
                seconds: deadline.as_secs(),
                log: PathBuf::from("the node-*.log files"),
            });
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The default ServiceAccount and the root CA ConfigMap exist in `default`.
pub async fn controllers_working(client: &kube::Client, deadline: Duration) -> Result<Duration> {
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let cm: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    loop {
        let have_sa = matches!(sa.get_opt("default").await, Ok(Some(_)));
        let have_ca = matches!(cm.get_opt("kube-root-ca.crt").await, Ok(Some(_)));
        if have_sa && have_ca {
            return Ok(start.elapsed());
        }
        if start.elapsed() >= deadline {
            return Err(ClusterError::NotReady {
                what: "the controller-manager's service accounts and root CA".into(),
                seconds: deadline.as_secs(),
                log: PathBuf::from("kube-controller-manager.log"),
            });
        }
        tokio::time::sleep(RETRY).await;
    }
}
