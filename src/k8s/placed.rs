//! Where each loaded variant runs, read from the cluster: the node of its first pod (its
//! instance type, architecture, allocatable CPU and memory) and the pod's limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::load::LoadTarget;
use super::pods::pods_of;
use super::usage::{cpu_cores, memory_bytes};
use super::{Cluster, K8sError};
use crate::placement::Placement;

/// The placement of every variant target (the multi-arch service has none of its own).
pub async fn placements(
    cluster: &Cluster,
    targets: &[LoadTarget],
) -> Result<Vec<Placement>, K8sError> {
    let nodes = Api::<Node>::all(cluster.client.clone());
    let mut out = Vec::new();
    for t in targets {
        let Some(variant) = &t.variant else { continue };
        let pods = pods_of(cluster, Some(variant)).await?;
        let Some(pod) = pods.first() else { continue };
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        // Nodes RBAC hides leave the node's figures out, not the pod's.
        let node = match &node_name {
            Some(n) => match nodes.get_opt(n).await {
                Ok(node) => node,
                Err(kube::Error::Api(s)) if s.code == 403 => None,
                Err(e) => return Err(api_error(e, "get", "nodes")),
            },
            None => None,
        };
        let mut placed = placement(&t.name, pod, node.as_ref(), pods.len());
        // The CPU as the pod sees it; a pod that refuses exec keeps its other figures.
        placed.cpu_model = super::inspect::fingerprint(cluster, variant)
            .await
            .ok()
            .map(|f| f.cpu_model)
            .filter(|m| !m.is_empty());
        out.push(placed);
    }
    Ok(out)
}

fn placement(name: &str, pod: &Pod, node: Option<&Node>, replicas: usize) -> Placement {
    let allocatable = node.and_then(|n| n.status.as_ref()?.allocatable.as_ref());
    let limits = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first()?.resources.as_ref()?.limits.as_ref());
    Placement {
        name: name.to_string(),
        node: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| "-".into()),
        instance_type: node
            .and_then(|n| n.labels().get("node.kubernetes.io/instance-type").cloned()),
        node_arch: node
            .and_then(|n| Some(n.status.as_ref()?.node_info.as_ref()?.architecture.clone())),
        cpu_model: None,
        node_cpu: quantity(allocatable, "cpu").and_then(cpu_cores),
        node_memory_bytes: quantity(allocatable, "memory").and_then(memory_bytes),
        cpu_limit: quantity(limits, "cpu").and_then(cpu_cores),
        memory_limit_bytes: quantity(limits, "memory").and_then(memory_bytes),
        replicas: u32::try_from(replicas).unwrap_or(u32::MAX),
    }
}

/// One quantity of a resource list, as written ("2", "7901312Ki").
fn quantity<'a>(list: Option<&'a BTreeMap<String, Quantity>>, key: &str) -> Option<&'a str> {
    list?.get(key).map(|q| q.0.as_str())
}
