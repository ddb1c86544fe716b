//! `status`: where each pod of the setup runs, its node, its Service's address.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{self, Write};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::{managed_selector, variant_of, Cluster, K8sError};

/// One pod of the setup, where it runs and how it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRow {
    /// Its variant ("intel", "arm-large").
    pub variant: String,
    pub pod: String,
    pub node: String,
    /// The node's own `status.nodeInfo.architecture`.
    pub node_arch: String,
    /// The node's `node.kubernetes.io/instance-type` label.
    pub instance_type: String,
    /// The node's allocatable CPU and memory ("2 cpu, 7.8Gi").
    pub allocatable: String,
    /// The container's CPU and memory limits ("1 cpu, 512Mi"; "-" without).
    pub limits: String,
    /// Its variant's Service address (or "pending").
    pub address: String,
    pub ready: bool,
    pub restarts: i32,
    /// Running, Pending, CrashLoopBackOff, …
    pub state: String,
}

/// Every nginx pod archbench manages, with its node and its service's address.
pub async fn status(cluster: &Cluster) -> Result<Vec<PodRow>, K8sError> {
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();
    let lp = ListParams::default().labels(&managed_selector());
    // One selector, not two: ListParams::labels replaces, it does not add.
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&super::nginx_selector()))
        .await
        .map_err(|e| api_error(e, "list", "pods"))?
        .items;
    let services = Api::<Service>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| api_error(e, "list", "services"))?
        .items;
    // A user whose Role covers only the namespace may not list nodes: the rows lack the
    // nodes' details then (marked, and said under the table), not the pods.
    let (nodes, nodes_hidden) = match Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => (l.items, false),
        Err(kube::Error::Api(s)) if s.code == 403 => (Vec::new(), true),
        Err(e) => return Err(api_error(e, "list", "nodes")),
    };
    if pods.is_empty() {
        namespace_exists(client, ns).await?;
    }
    let mut rows: Vec<PodRow> = pods
        .iter()
        .map(|p| pod_row(p, &nodes, nodes_hidden, &services))
        .collect();
    rows.sort_by(|a, b| (&a.variant, &a.pod).cmp(&(&b.variant, &b.pod)));
    Ok(rows)
}

/// No pods, because the namespace is not there (a mistyped `-n` read as "no pods"). A user
/// who may not read namespaces is told nothing more than the pods say.
pub async fn namespace_exists(client: &kube::Client, ns: &str) -> Result<(), K8sError> {
    use k8s_openapi::api::core::v1::Namespace;
    match Api::<Namespace>::all(client.clone()).get_opt(ns).await {
        Ok(None) => Err(K8sError::Failed {
            what: format!("namespace {ns}"),
            message: "it does not exist; check -n (`archbench k8s up` creates it)".into(),
        }),
        Ok(Some(_)) | Err(_) => Ok(()),
    }
}

/// One pod's row: its node's details (marked when RBAC hides the nodes), its limits, its
/// variant's Service address.
fn pod_row(p: &Pod, nodes: &[Node], nodes_hidden: bool, services: &[Service]) -> PodRow {
    let unknown = || if nodes_hidden { HIDDEN } else { "-" }.to_string();
    let variant = variant_of(p.labels()).unwrap_or_default().to_string();
    let node_name = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let node = nodes.iter().find(|n| n.name_any() == node_name);
    let status = p.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    // A waiting reason with how the last run ended: "CrashLoopBackOff(OOMKilled)", one word
    // for scripts that split on whitespace.
    let waiting = containers.into_iter().flatten().find_map(|c| {
        let reason = c.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
        Some(match super::pods::last_termination(c) {
            Some(last) if reason == "CrashLoopBackOff" => format!("{reason}({last})"),
            _ => reason,
        })
    });
    let service = services
        .iter()
        .find(|s| s.name_any() == format!("nginx-{variant}-svc"));
    PodRow {
        pod: p.name_any(),
        node: if node_name.is_empty() {
            "-".into()
        } else {
            node_name.clone()
        },
        node_arch: node
            .and_then(|n| Some(n.status.as_ref()?.node_info.as_ref()?.architecture.clone()))
            .unwrap_or_else(unknown),
        instance_type: node
            .and_then(|n| n.labels().get("node.kubernetes.io/instance-type").cloned())
            .unwrap_or_else(unknown),
        allocatable: node
            .and_then(|n| n.status.as_ref()?.allocatable.as_ref())
            .map(sizes)
            .unwrap_or_else(unknown),
        limits: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first()?.resources.as_ref()?.limits.as_ref())
            .map(sizes)
            .unwrap_or_else(|| "-".into()),
        address: service
            .and_then(|s| service_address(s, nodes))
            .unwrap_or_else(|| "pending".into()),
        // The pod's Ready condition, as the control plane judges it (a NotReady node's pods
        // lose it while their containers still say ready): what Services route by.
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True"),
        restarts: containers
            .into_iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum(),
        state: waiting
            .or_else(|| status.and_then(|s| s.phase.clone()))
            .unwrap_or_else(|| "Unknown".into()),
        variant,
    }
}

/// CPU and memory of a resource list, as "2 cpu, 7.8Gi" (what is missing left out).
fn sizes(
    list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> String {
    let cpu = list.get("cpu").map(|q| format!("{} cpu", q.0));
    let memory = list.get("memory").map(|q| q.0.clone());
    let text: Vec<String> = cpu.into_iter().chain(memory).collect();
    if text.is_empty() {
        "-".into()
    } else {
        text.join(", ")
    }
}

/// The status table, one line per pod.
pub fn write_status(rows: &[PodRow], out: &mut dyn Write) -> io::Result<()> {
    // Each column as wide as its longest cell and two spaces (at least as before): a long
    // variant's pod name once ran into its node's, and scripts split on whitespace.
    let longest = |f: &dyn Fn(&PodRow) -> usize, least: usize| {
        rows.iter().map(|r| f(r) + 2).max().unwrap_or(0).max(least)
    };
    let widths = [
        longest(&|r| r.variant.len(), 9),
        longest(&|r| r.pod.len(), 40),
        longest(&|r| r.node.len(), 22),
        longest(&|r| r.node_arch.len(), 10),
        longest(&|r| r.instance_type.len(), 22),
        longest(&|r| r.allocatable.len(), 20),
        longest(&|r| r.limits.len(), 18),
        longest(&|r| r.address.len(), 22),
        7,
        10,
        0,
    ];
    let line = |out: &mut dyn Write, cells: [&str; 11]| {
        let text: String = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", text.trim_end())
    };
    line(
        out,
        [
            "VARIANT",
            "POD",
            "NODE",
            "NODE ARCH",
            "INSTANCE TYPE",
            "ALLOCATABLE",
            "LIMITS",
            "ADDRESS",
            "READY",
            "RESTARTS",
            "STATE",
        ],
    )?;
    for r in rows {
        line(
            out,
            [
                &r.variant,
                &r.pod,
                &r.node,
                &r.node_arch,
                &r.instance_type,
                &r.allocatable,
                &r.limits,
                &r.address,
                if r.ready { "yes" } else { "no" },
                &r.restarts.to_string(),
                &r.state,
            ],
        )?;
    }
    if rows.is_empty() {
        writeln!(
            out,
            "(no pods of archbench's here; `archbench k8s up` creates them)"
        )?;
    }
    if rows.iter().any(|r| r.node_arch == HIDDEN) {
        writeln!(
            out,
            "({HIDDEN}: nodes are not visible to you; RBAC would have to allow list nodes)"
        )?;
    }
    Ok(())
}

/// What a node's column says when RBAC hides the nodes.
const HIDDEN: &str = "?";

/// The address clients reach a Service at, or None while a LoadBalancer's is pending.
pub fn service_address(svc: &Service, nodes: &[Node]) -> Option<String> {
    let port = svc.spec.as_ref()?.ports.as_ref()?.first()?;
    port_address(svc, port, nodes)
}

/// The address of one port of a Service, as [`service_address`] gives its first.
pub fn port_address(
    svc: &Service,
    port: &k8s_openapi::api::core::v1::ServicePort,
    nodes: &[Node],
) -> Option<String> {
    let spec = svc.spec.as_ref()?;
    let with_port = |host: &str, p: i32| {
        if p == 80 {
            host.to_string()
        } else {
            format!("{host}:{p}")
        }
    };
    match spec.type_.as_deref() {
        Some("LoadBalancer") => {
            let ingress = svc
                .status
                .as_ref()?
                .load_balancer
                .as_ref()?
                .ingress
                .as_ref()?;
            let first = ingress.first()?;
            let host = first.ip.as_deref().or(first.hostname.as_deref())?;
            Some(with_port(host, port.port))
        }
        Some("NodePort") => {
            let node_port = port.node_port?;
            // A node's ExternalIP where nodes have one (AKS nodes with public IPs: what a
            // laptop reaches), else its InternalIP (from inside the cluster's network).
            let address = |kind: &str| {
                nodes.iter().find_map(|n| {
                    n.status
                        .as_ref()?
                        .addresses
                        .as_ref()?
                        .iter()
                        .find(|a| a.type_ == kind)
                        .map(|a| a.address.clone())
                })
            };
            let ip = address("ExternalIP").or_else(|| address("InternalIP"))?;
            Some(format!("{ip}:{node_port}"))
        }
        _ => spec
            .cluster_ip
            .as_deref()
            .map(|ip| with_port(ip, port.port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// READY is the pod's Ready condition: a pod on a node gone NotReady keeps containers
    /// that say ready, but the control plane has taken its Ready away (and Services route
    /// nothing to it); it showed "yes".
    #[test]
    fn ready_is_the_pods_condition_not_its_containers() {
        let pod = |condition: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "labels": {"variant": "arm"}},
                "spec": {"nodeName": "n", "containers": [{"name": "nginx"}]},
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": condition}],
                    "containerStatuses": [{
                        "name": "nginx", "ready": true, "restartCount": 0, "image": "i",
                        "imageID": "", "state": {"running": {}}
                    }]
                }
            }))
            .unwrap()
        };
        assert!(pod_row(&pod("True"), &[], false, &[]).ready);
        assert!(!pod_row(&pod("False"), &[], false, &[]).ready);
    }
}
