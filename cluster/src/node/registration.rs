//! The node's own objects: its Node (labels, capacity, addresses, node info, conditions,
//! declared features) and its Lease in `kube-node-lease`, renewed every 10 s as a kubelet
//! does — the node-lifecycle controller marks the node NotReady when renewals stop.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{clock, Agent};
use crate::error::{ClusterError, Result};
use crate::faults::{self, Fault};
use crate::topology::{NodeSpec, KUBELET_PORT};

const LEASE_DURATION_S: i32 = 40;
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Status is rewritten this often even when nothing changed (the kubelet's report frequency,
/// shortened).
const STATUS_EVERY: Duration = Duration::from_secs(60);
/// The API server proxies exec/attach/port-forward WebSockets straight to a node that lists
/// this (else it translates them to SPDY, which this agent does not speak).
const DECLARED_FEATURES: [&str; 1] = ["ExtendWebSocketsToKubelet"];
/// The container runtime a node reports: this agent.
pub const RUNTIME_VERSION: &str = concat!("archbench-node://", env!("CARGO_PKG_VERSION"));

fn node_object(spec: &NodeSpec) -> serde_json::Value {
    let labels: serde_json::Map<String, serde_json::Value> = spec
        .labels()
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
    })
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

/// The status a node reports: capacity = allocatable, Ready, addresses, node info.
pub fn node_status(spec: &NodeSpec, kubelet_version: &str, ready_since: &str) -> serde_json::Value {
    let now = clock::now();
    let resources = json!({
        "cpu": spec.cpus.to_string(),
        "memory": format!("{}Ki", spec.memory_bytes / 1024),
        "pods": "110",
        "ephemeral-storage": "129886128Ki",
    });
    let condition = |ty: &str, status: &str, reason: &str, message: &str, since: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": since})
    };
    json!({
        "capacity": resources,
        "allocatable": resources,
        "addresses": [
            {"type": "InternalIP", "address": spec.ip.to_string()},
            {"type": "ExternalIP", "address": spec.external_ip.to_string()},
            {"type": "Hostname", "address": spec.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "nodeInfo": {
            "architecture": spec.arch,
            "operatingSystem": "linux",
            "osImage": os_image(),
            "kernelVersion": kernel_release(),
            "kubeletVersion": kubelet_version,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": RUNTIME_VERSION,
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", ready_since),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", ready_since),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", ready_since),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", ready_since),
        ],
        "declaredFeatures": DECLARED_FEATURES,
    })
}

/// Creates (or takes over) the Node, reports its status, and returns its pod range once the
/// controller-manager has assigned one.
pub async fn register(client: &kube::Client, spec: &NodeSpec) -> Result<String> {
    let api: Api<Node> = Api::all(client.clone());
    let obj: Node = serde_json::from_value(node_object(spec))
        .map_err(|e| ClusterError::Invalid(format!("node object: {e}")))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let labels = json!({"metadata": node_object(spec)["metadata"]});
            api.patch(&spec.name, &PatchParams::default(), &Patch::Merge(&labels))
                .await
                .map_err(ClusterError::kube(format!("update node {}", spec.name)))?;
        }
        Err(e) => {
            return Err(ClusterError::kube(format!("register node {}", spec.name))(
                e,
            ))
        }
    }
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_default();
    let status = json!({"status": node_status(spec, &version, &clock::now())});
    api.patch_status(&spec.name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(ClusterError::kube(format!(
            "report the status of node {}",
            spec.name
        )))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let node = api
            .get(&spec.name)
            .await
            .map_err(ClusterError::kube(format!("read node {}", spec.name)))?;
        if let Some(cidr) = node.spec.and_then(|s| s.pod_cidr) {
            return Ok(cidr);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClusterError::Invalid(format!(
                "node {} got no spec.podCIDR from the controller-manager within 60 s",
                spec.name
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Renews the Lease every 10 s and rewrites the status every minute, until shutdown.
pub async fn heartbeat(agent: Arc<Agent>) {
    let leases: Api<Lease> = Api::namespaced(agent.client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(agent.client.clone());
    let version = agent
        .client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_default();
    let ready_since = clock::now();
    let mut last_status = SystemTime::now();
    let mut stop = agent.shutdown.subscribe();
    let silenced = Fault::StopHeartbeats(agent.spec.name.clone());
    let mut was_silent = false;
    loop {
        let silent = faults::is_on(&agent.dir, &silenced);
        if !silent {
            if let Err(e) = renew(&leases, &nodes, &agent.spec.name).await {
                eprintln!("node agent: lease: {e}");
            }
        }
        // Back from silence, Ready is reported at once (the controller has set it Unknown).
        let due = last_status.elapsed().unwrap_or_default() >= STATUS_EVERY || was_silent;
        was_silent = silent;
        if !silent && due {
            let status = json!({"status": node_status(&agent.spec, &version, &ready_since)});
            if let Err(e) = nodes
                .patch_status(
                    &agent.spec.name,
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
            {
                eprintln!("node agent: status: {e}");
            }
            last_status = SystemTime::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(RENEW_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn renew(leases: &Api<Lease>, nodes: &Api<Node>, name: &str) -> Result<(), kube::Error> {
    let now = clock::rfc3339_micros(SystemTime::now());
    let patch = json!({"spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_S, "renewTime": now}});
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let node = nodes.get(name).await?;
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                        "uid": node.metadata.uid.unwrap_or_default()}]},
                "spec": patch["spec"],
            });
            let lease: Lease = serde_json::from_value(lease).map_err(kube::Error::SerdeError)?;
            leases
                .create(&PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}
