//! `v1` Events about objects (Scheduled, Pulled, Started, BackOff, FailedScheduling …), so
//! `kubectl describe` and `get events` tell a story like a real cluster's. Repeats of the same
//! reason and message bump `count` instead of adding objects.

use serde_json::{json, Value};

use crate::clock;
use crate::ids;
use crate::ops;
use crate::resources;
use crate::state::Shared;
use crate::store;

/// Records an event about `about` (Normal or Warning), from `component`.
pub fn record(sh: &Shared, about: &Value, ty: &str, reason: &str, message: &str, component: &str) {
    let ns = match store::namespace_of(about) {
        "" => "default",
        ns => ns,
    };
    let uid = store::uid_of(about);
    let now = clock::now();
    let (events, _) = sh.store.list(&resources::EVENTS, Some(ns));
    let same = events.iter().find(|e| {
        e.pointer("/involvedObject/uid").and_then(Value::as_str) == Some(uid)
            && e["reason"] == reason
            && e["message"] == message
    });
    if let Some(e) = same {
        let _ = sh
            .store
            .update(&resources::EVENTS, ns, store::name_of(e), |e| {
                e["count"] = json!(e["count"].as_i64().unwrap_or(1) + 1);
                e["lastTimestamp"] = json!(now);
                Ok(())
            });
        return;
    }
    let ev = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{}.{:016x}", store::name_of(about), ids::random_u64()), "namespace": ns},
        "involvedObject": {
            "kind": about["kind"], "apiVersion": about["apiVersion"], "namespace": store::namespace_of(about),
            "name": store::name_of(about), "uid": uid, "resourceVersion": about["metadata"]["resourceVersion"],
        },
        "reason": reason,
        "message": message,
        "type": ty,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": "",
    });
    if sh.store.get(&resources::NAMESPACES, "", ns).is_some() {
        let _ = ops::create(
            sh,
            &resources::EVENTS,
            ns,
            ev,
            ops::WriteOpts::by(component),
        );
    }
}
