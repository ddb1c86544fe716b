//! Deployments: pods straight from the template (ReplicaSets are not modelled: pods are owned
//! by the Deployment, named `<deployment>-<pod-template-hash>-<suffix>` as a ReplicaSet would
//! name them, and carry the `pod-template-hash` label). A changed template rolls: RollingUpdate
//! within maxSurge/maxUnavailable (new pods first, an old pod goes once enough are ready),
//! Recreate deletes the old pods first. Status and conditions are what `kubectl rollout
//! status` and `wait --for=condition=Available` read, including `Progressing=False`
//! `ProgressDeadlineExceeded` after `progressDeadlineSeconds` without progress.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::events;
use crate::clock;
use crate::ids;
use crate::ops::{self, DeleteOpts, WriteOpts};
use crate::resources;
use crate::state::Shared;
use crate::store::{self, Obj};

const MANAGER: &str = "kube-controller-manager";

/// `maxSurge`/`maxUnavailable`: an int, or a percentage of replicas rounded up (surge) or
/// down (unavailable).
fn int_or_percent(v: Option<&Value>, replicas: i64, round_up: bool, default_pct: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) if s.ends_with('%') => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(default_pct);
            if round_up {
                (replicas * pct + 99) / 100
            } else {
                replicas * pct / 100
            }
        }
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => {
            if round_up {
                (replicas * default_pct + 99) / 100
            } else {
                replicas * default_pct / 100
            }
        }
    }
}

fn condition<'a>(o: &'a Value, ty: &str) -> Option<&'a Value> {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == ty)
}

fn is_ready(p: &Value) -> bool {
    condition(p, "Ready").is_some_and(|c| c["status"] == "True")
}

fn is_available(p: &Value, min_ready: u64) -> bool {
    let Some(c) = condition(p, "Ready").filter(|c| c["status"] == "True") else {
        return false;
    };
    let since = c["lastTransitionTime"].as_str().and_then(clock::parse);
    min_ready == 0
        || since.is_some_and(|t| {
            SystemTime::now().duration_since(t).unwrap_or_default()
                >= Duration::from_secs(min_ready)
        })
}

fn hash_of(p: &Value) -> &str {
    p.pointer("/metadata/labels/pod-template-hash")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn sync(sh: &Shared) {
    let (deps, _) = sh.store.list(&resources::DEPLOYMENTS, None);
    for d in deps {
        if d.pointer("/metadata/deletionTimestamp").is_none() {
            reconcile(sh, &d);
        }
    }
}

fn new_pod(d: &Value, hash: &str) -> Value {
    let name = store::name_of(d);
    let t = &d["spec"]["template"];
    let mut labels = t.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
    labels["pod-template-hash"] = json!(hash);
    let mut meta = json!({
        "name": format!("{name}-{hash}-{}", ids::suffix()),
        "generateName": format!("{name}-{hash}-"),
        "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                              "uid": store::uid_of(d), "controller": true, "blockOwnerDeletion": true}],
    });
    if let Some(a) = t.pointer("/metadata/annotations") {
        meta["annotations"] = a.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"].clone()})
}

fn reconcile(sh: &Shared, d: &Obj) {
    let (ns, name) = (store::namespace_of(d), store::name_of(d));
    let spec = &d["spec"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1).max(0);
    let hash = ids::template_hash(&spec["template"]);
    let rs_name = format!("{name}-{hash}");
    let min_ready = spec["minReadySeconds"].as_u64().unwrap_or(0);
    let pods = ops::owned_by(sh, &resources::PODS, ns, store::uid_of(d));
    for p in pods
        .iter()
        .filter(|p| p.pointer("/status/phase").and_then(Value::as_str) == Some("Failed"))
    {
        let _ = ops::delete(
            sh,
            &resources::PODS,
            ns,
            store::name_of(p),
            &DeleteOpts::default(),
        );
    }
    let active: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Failed" | "Succeeded")
                )
        })
        .collect();
    let terminating = pods
        .iter()
        .any(|p| p.pointer("/metadata/deletionTimestamp").is_some());
    let (mut new, mut old): (Vec<&Obj>, Vec<&Obj>) =
        active.iter().partition(|p| hash_of(p) == hash);
    let recreate = spec.pointer("/strategy/type").and_then(Value::as_str) == Some("Recreate");
    let ru = spec.pointer("/strategy/rollingUpdate");
    let mut max_surge = int_or_percent(ru.and_then(|r| r.get("maxSurge")), replicas, true, 25);
    let mut max_unavailable = int_or_percent(
        ru.and_then(|r| r.get("maxUnavailable")),
        replicas,
        false,
        25,
    );
    if recreate {
        (max_surge, max_unavailable) = (0, replicas);
    } else if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    let paused = spec["paused"].as_bool().unwrap_or(false);
    if !paused {
        let delete = |p: &Obj| {
            let _ = ops::delete(
                sh,
                &resources::PODS,
                ns,
                store::name_of(p),
                &DeleteOpts::default(),
            );
        };
        // extra new pods go first when scaling down: unscheduled, unready, newest
        if new.len() as i64 > replicas {
            new.sort_by_key(|p| {
                (
                    is_ready(p),
                    p.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                )
            });
            let extra = new.len() - replicas as usize;
            for p in new.drain(..extra) {
                delete(p);
            }
            events::record(
                sh,
                d,
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled down replica set {rs_name} to {replicas}"),
                "deployment-controller",
            );
        }
        if recreate {
            if !old.is_empty() {
                for p in old.drain(..) {
                    delete(p);
                }
            }
        } else {
            // old pods: unready ones go at once, ready ones while enough stay available
            let min_available = replicas - max_unavailable;
            let mut ready_total = active.iter().filter(|p| is_ready(p)).count() as i64;
            old.sort_by_key(|p| is_ready(p));
            let mut kept = Vec::new();
            for p in old.drain(..) {
                if !is_ready(p) {
                    delete(p);
                } else if ready_total > min_available {
                    delete(p);
                    ready_total -= 1;
                    events::record(
                        sh,
                        d,
                        "Normal",
                        "ScalingReplicaSet",
                        &format!("Scaled down replica set {name}-{} from 1 to 0", hash_of(p)),
                        "deployment-controller",
                    );
                } else {
                    kept.push(p);
                }
            }
            old = kept;
        }
        let room = if recreate && (terminating || !old.is_empty()) {
            0
        } else {
            (replicas + max_surge - (new.len() + old.len()) as i64).min(replicas - new.len() as i64)
        };
        if room > 0 {
            let from = new.len();
            let mut created = 0;
            for _ in 0..room {
                if ops::create(
                    sh,
                    &resources::PODS,
                    ns,
                    new_pod(d, &hash),
                    WriteOpts::by(MANAGER),
                )
                .is_ok()
                {
                    created += 1;
                }
            }
            if created > 0 {
                events::record(
                    sh,
                    d,
                    "Normal",
                    "ScalingReplicaSet",
                    &format!(
                        "Scaled up replica set {rs_name} from {from} to {}",
                        from + created
                    ),
                    "deployment-controller",
                );
            }
        }
    }
    // status, from what exists now
    let pods = ops::owned_by(sh, &resources::PODS, ns, store::uid_of(d));
    let active: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && !matches!(
                    p.pointer("/status/phase").and_then(Value::as_str),
                    Some("Failed" | "Succeeded")
                )
        })
        .collect();
    let updated = active.iter().filter(|p| hash_of(p) == hash).count() as i64;
    let ready = active.iter().filter(|p| is_ready(p)).count() as i64;
    let available = active.iter().filter(|p| is_available(p, min_ready)).count() as i64;
    let total = active.len() as i64;
    write_status(
        sh,
        d,
        &rs_name,
        [total, updated, ready, available],
        replicas - max_unavailable,
        replicas,
    );
}

fn write_status(
    sh: &Shared,
    d: &Obj,
    rs_name: &str,
    counts: [i64; 4],
    min_available: i64,
    replicas: i64,
) {
    let [total, updated, ready, available] = counts;
    let now = clock::now();
    let old_status = d.get("status").cloned().unwrap_or(json!({}));
    let generation = d
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let count = |k: &str| old_status.get(k).and_then(Value::as_i64).unwrap_or(0);
    let progressed = old_status.get("observedGeneration") != Some(&generation)
        || count("replicas") != total
        || count("updatedReplicas") != updated
        || count("readyReplicas") != ready
        || count("availableReplicas") != available;
    let complete = updated == replicas && total == replicas && available == replicas;
    let prev = |ty: &str| condition(d, ty).cloned();
    let make = |ty: &str,
                status: &str,
                reason: &str,
                message: String,
                update_time: Option<&str>| {
        let p = prev(ty);
        let same_status = p.as_ref().is_some_and(|c| c["status"] == status);
        let transition = if same_status {
            p.as_ref()
                .map(|c| c["lastTransitionTime"].clone())
                .unwrap_or(json!(now))
        } else {
            json!(now)
        };
        let same = p
            .as_ref()
            .is_some_and(|c| c["status"] == status && c["reason"] == reason);
        let update = match update_time {
            Some(t) => json!(t),
            None if same => p
                .as_ref()
                .map(|c| c["lastUpdateTime"].clone())
                .unwrap_or(json!(now)),
            None => json!(now),
        };
        json!({"type": ty, "status": status, "lastUpdateTime": update, "lastTransitionTime": transition,
               "reason": reason, "message": message})
    };
    let available_cond = if available >= min_available {
        make(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            None,
        )
    } else {
        make(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            None,
        )
    };
    let deadline = d
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(600);
    let prev_progress = prev("Progressing");
    let progressing = if complete {
        make(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
            None,
        )
    } else if progressed || prev_progress.is_none() {
        let reason = if prev_progress.is_none() {
            "NewReplicaSetCreated"
        } else {
            "ReplicaSetUpdated"
        };
        let msg = if prev_progress.is_none() {
            format!("Created new replica set \"{rs_name}\"")
        } else {
            format!("ReplicaSet \"{rs_name}\" is progressing.")
        };
        make("Progressing", "True", reason, msg, Some(&now))
    } else {
        let p = prev_progress.unwrap_or(json!({}));
        let since = p["lastUpdateTime"].as_str().and_then(clock::parse);
        let overdue = since.is_some_and(|t| {
            SystemTime::now().duration_since(t).unwrap_or_default() > Duration::from_secs(deadline)
        });
        if p["reason"] == "ProgressDeadlineExceeded" || overdue {
            make(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                None,
            )
        } else {
            p
        }
    };
    let mut status = json!({
        "observedGeneration": generation,
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": [available_cond, progressing],
    });
    let unavailable = (replicas.max(total) - available).max(0);
    if unavailable > 0 {
        status["unavailableReplicas"] = json!(unavailable);
    }
    // the real controller leaves zero counts out
    for k in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        if status[k] == 0 {
            if let Some(m) = status.as_object_mut() {
                m.remove(k);
            }
        }
    }
    if status != old_status {
        let _ = ops::update_status(
            sh,
            &resources::DEPLOYMENTS,
            store::namespace_of(d),
            store::name_of(d),
            status,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surge_and_unavailable() {
        assert_eq!(int_or_percent(Some(&json!("25%")), 1, true, 25), 1);
        assert_eq!(int_or_percent(Some(&json!("25%")), 1, false, 25), 0);
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true, 25), 3);
        assert_eq!(int_or_percent(Some(&json!(2)), 10, false, 25), 2);
        assert_eq!(int_or_percent(None, 4, false, 25), 1);
    }
}
