//! Events the node reports about its pods (Pulled, Started, Failed, BackOff, Killing), as a
//! kubelet records them: what `kubectl describe pod` and `kubectl events` show.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use super::{clock, Agent};

/// Records one event about `pod` (errors are only logged: an event lost loses no pod).
pub async fn record(agent: &Arc<Agent>, pod: &Value, kind: &str, reason: &str, message: &str) {
    let (Some(ns), Some(name)) = (
        pod.pointer("/metadata/namespace").and_then(Value::as_str),
        pod.pointer("/metadata/name").and_then(Value::as_str),
    ) else {
        return;
    };
    let now = clock::now();
    let suffix = format!("{:x}", super::pod::random_u64());
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{suffix}"), "namespace": ns},
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
            "uid": pod.pointer("/metadata/uid"),
            "resourceVersion": pod.pointer("/metadata/resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "kubelet", "host": agent.spec.name},
        "reportingComponent": "kubelet",
        "reportingInstance": agent.spec.name,
    });
    let Ok(event) = serde_json::from_value::<Event>(event) else {
        return;
    };
    let api: Api<Event> = Api::namespaced(agent.client.clone(), ns);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        eprintln!("node agent: event {reason} for {ns}/{name}: {e}");
    }
}
