//! Events the node reports about its pods (Pulled, Started, Failed, BackOff, Killing,
//! Unhealthy, OOMKilled), as a kubelet records them: what `kubectl describe pod` and
//! `kubectl events` show. The same event again (object, type, reason and message) raises the
//! first one's `count` and `lastTimestamp`, as the kubelet's event correlator does, so a probe
//! failing every second is one Event, not one per second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{clock, ids, Agent};

/// What makes two events the same: (pod uid, type, reason, message).
type EventKey = (String, String, String, String);

/// The events recorded so far: each one's name and count.
#[derive(Debug, Default)]
pub struct Recorded(Mutex<HashMap<EventKey, (String, u64)>>);

impl Recorded {
    /// The name and new count when this is a repeat, after counting it.
    fn repeat(&self, key: &EventKey) -> Option<(String, u64)> {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = seen.get_mut(key)?;
        entry.1 += 1;
        Some(entry.clone())
    }

    fn first(&self, key: EventKey, name: String) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(key, (name, 1));
    }

    /// Forgets a pod's events (it is gone).
    pub fn forget(&self, uid: &str) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|k, _| k.0 != uid);
    }
}

/// Records one event about the pod of metadata `pod` (errors are only logged: an event lost
/// loses no pod).
pub async fn record(agent: &Arc<Agent>, pod: &ObjectMeta, kind: &str, reason: &str, message: &str) {
    let (Some(ns), Some(name)) = (pod.namespace.as_deref(), pod.name.as_deref()) else {
        return;
    };
    let uid = pod.uid.as_deref().unwrap_or("");
    let key = (uid.to_string(), kind.into(), reason.into(), message.into());
    let api: Api<Event> = Api::namespaced(agent.client.clone(), ns);
    let now = clock::now();
    if let Some((event, count)) = agent.events.repeat(&key) {
        let patch = json!({"count": count, "lastTimestamp": now});
        match api
            .patch(&event, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            // gone (an Event's time to live is an hour): record it afresh
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                eprintln!("node agent: event {reason} for {ns}/{name}: {e}");
                return;
            }
        }
    }
    let event_name = format!("{name}.{:x}", ids::random_u64());
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name, "namespace": ns},
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
            "uid": uid,
            "resourceVersion": pod.resource_version,
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
    match api.create(&PostParams::default(), &event).await {
        Ok(_) => agent.events.first(key, event_name),
        Err(e) => eprintln!("node agent: event {reason} for {ns}/{name}: {e}"),
    }
}
