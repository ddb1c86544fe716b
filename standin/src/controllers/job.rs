//! Jobs, NonIndexed and Indexed (issue 10's workers): up to `parallelism` pods at a time until
//! `completions` succeed; an Indexed Job gives each pod its index (annotation and label
//! `batch.kubernetes.io/job-completion-index`, env `JOB_COMPLETION_INDEX`, hostname
//! `<job>-<index>`) and runs each index until one pod of it succeeds. Failed pods count against
//! `backoffLimit` and are replaced after a back-off; past the limit the Job fails
//! (BackoffLimitExceeded) and its running pods are deleted.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::{json, Value};

use super::events;
use crate::clock;
use crate::ids;
use crate::ops::{self, DeleteOpts, WriteOpts};
use crate::resources;
use crate::state::Shared;
use crate::store::{self, Obj};

const INDEX: &str = "batch.kubernetes.io/job-completion-index";
const MANAGER: &str = "kube-controller-manager";

pub fn sync(sh: &Shared) {
    let (jobs, _) = sh.store.list(&resources::JOBS, None);
    for j in jobs {
        if j.pointer("/metadata/deletionTimestamp").is_none() {
            reconcile(sh, &j);
        }
    }
}

fn phase(p: &Value) -> &str {
    p.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn index_of(p: &Value) -> Option<u64> {
    p.pointer("/metadata/annotations")?
        .get(INDEX)?
        .as_str()?
        .parse()
        .ok()
}

fn has_condition(j: &Value, ty: &str) -> bool {
    j.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == ty && c["status"] == "True"))
}

/// `0-2,4,6-7`, as `status.completedIndexes` writes a set.
fn ranges(set: &BTreeSet<u64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().unwrap_or(end);
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

fn new_pod(j: &Value, index: Option<u64>) -> Value {
    let name = store::name_of(j);
    let t = &j["spec"]["template"];
    let mut labels = t.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
    let mut annotations = t
        .pointer("/metadata/annotations")
        .cloned()
        .unwrap_or(json!({}));
    let mut spec = t["spec"].clone();
    let pod_name = match index {
        Some(i) => {
            labels[INDEX] = json!(i.to_string());
            annotations[INDEX] = json!(i.to_string());
            if spec.get("hostname").is_none() {
                spec["hostname"] = json!(format!("{name}-{i}"));
            }
            if let Some(cs) = spec.get_mut("containers").and_then(Value::as_array_mut) {
                for c in cs {
                    let env = c["env"].as_array().cloned().unwrap_or_default();
                    let mut env: Vec<Value> = env
                        .into_iter()
                        .filter(|e| e["name"] != "JOB_COMPLETION_INDEX")
                        .collect();
                    env.push(json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                        "apiVersion": "v1", "fieldPath": format!("metadata.annotations['{INDEX}']")}}}));
                    c["env"] = json!(env);
                }
            }
            format!("{name}-{i}-{}", ids::suffix())
        }
        None => format!("{name}-{}", ids::suffix()),
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "generateName": format!("{name}-"), "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": store::uid_of(j),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec})
}

/// When the newest failed pod of this Job finished (for the replacement back-off).
fn last_failure(pods: &[Obj]) -> Option<SystemTime> {
    pods.iter()
        .filter(|p| phase(p) == "Failed")
        .filter_map(|p| {
            p.pointer("/status/containerStatuses/0/state/terminated/finishedAt")
                .and_then(Value::as_str)
                .and_then(clock::parse)
        })
        .max()
}

fn reconcile(sh: &Shared, j: &Obj) {
    let (ns, name) = (store::namespace_of(j), store::name_of(j));
    let pods = ops::owned_by(sh, &resources::PODS, ns, store::uid_of(j));
    let terminal = has_condition(j, "Complete") || has_condition(j, "Failed");
    let active: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .collect();
    let delete_active = || {
        for p in &active {
            let _ = ops::delete(
                sh,
                &resources::PODS,
                ns,
                store::name_of(p),
                &DeleteOpts::default(),
            );
        }
    };
    if terminal {
        if has_condition(j, "Failed") {
            delete_active();
        }
        return;
    }
    let spec = &j["spec"];
    let indexed = spec["completionMode"] == "Indexed";
    let parallelism = spec["parallelism"].as_u64().unwrap_or(1);
    let completions = spec["completions"].as_u64();
    let backoff_limit = spec["backoffLimit"].as_u64().unwrap_or(6);
    let suspended = spec["suspend"].as_bool().unwrap_or(false);
    let failed = pods.iter().filter(|p| phase(p) == "Failed").count() as u64;
    let succeeded_pods: Vec<&Obj> = pods.iter().filter(|p| phase(p) == "Succeeded").collect();
    let done_indexes: BTreeSet<u64> = succeeded_pods.iter().filter_map(|p| index_of(p)).collect();
    let succeeded = if indexed {
        done_indexes.len() as u64
    } else {
        succeeded_pods.len() as u64
    };
    let now = clock::now();

    let failed_out = failed > backoff_limit;
    let complete = !failed_out
        && match (indexed, completions) {
            (true, Some(c)) => succeeded >= c,
            (false, Some(c)) => succeeded >= c,
            (false, None) => succeeded >= 1 && active.is_empty(),
            (true, None) => false,
        };
    if failed_out {
        delete_active();
        events::record(
            sh,
            j,
            "Warning",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            "job-controller",
        );
    } else if !complete && !suspended {
        let base = sh.opts.restart_backoff;
        let wait = match failed {
            0 => std::time::Duration::ZERO,
            n => (base * (1u32 << (n - 1).min(10) as u32)).min(base * 36),
        };
        let backed_off = last_failure(&pods)
            .is_none_or(|t| SystemTime::now().duration_since(t).unwrap_or_default() >= wait);
        if backed_off {
            let mut running = active.len() as u64;
            let wanted: Vec<Option<u64>> = if indexed {
                let busy: BTreeSet<u64> = active.iter().filter_map(|p| index_of(p)).collect();
                (0..completions.unwrap_or(0))
                    .filter(|i| !done_indexes.contains(i) && !busy.contains(i))
                    .map(Some)
                    .collect()
            } else {
                let left = completions.map_or(if succeeded == 0 { parallelism } else { 0 }, |c| {
                    c.saturating_sub(succeeded)
                });
                (0..left.saturating_sub(running)).map(|_| None).collect()
            };
            for index in wanted {
                if running >= parallelism {
                    break;
                }
                match ops::create(
                    sh,
                    &resources::PODS,
                    ns,
                    new_pod(j, index),
                    WriteOpts::by(MANAGER),
                ) {
                    Ok(p) => {
                        running += 1;
                        events::record(
                            sh,
                            j,
                            "Normal",
                            "SuccessfulCreate",
                            &format!("Created pod: {}", store::name_of(&p)),
                            "job-controller",
                        );
                    }
                    Err(_) => break,
                }
            }
        }
    }
    // status
    let pods = ops::owned_by(sh, &resources::PODS, ns, store::uid_of(j));
    let active: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .collect();
    let ready = active
        .iter()
        .filter(|p| {
            p.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .count();
    let terminating = pods
        .iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
        .count();
    let old = j.get("status").cloned().unwrap_or(json!({}));
    let mut status = json!({
        "startTime": old.get("startTime").cloned().unwrap_or(json!(now)),
        "active": active.len(),
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "terminating": terminating,
        "uncountedTerminatedPods": {},
    });
    if indexed && !done_indexes.is_empty() {
        status["completedIndexes"] = json!(ranges(&done_indexes));
    }
    let cond = |ty: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": "True", "reason": reason, "message": message,
               "lastProbeTime": now, "lastTransitionTime": now})
    };
    if complete {
        status["completionTime"] = json!(now);
        let msg = "Reached expected number of succeeded pods";
        status["conditions"] = json!([
            cond("SuccessCriteriaMet", "CompletionsReached", msg),
            cond("Complete", "CompletionsReached", msg)
        ]);
        events::record(
            sh,
            j,
            "Normal",
            "Completed",
            "Job completed",
            "job-controller",
        );
    } else if failed_out {
        let msg = "Job has reached the specified backoff limit";
        status["conditions"] = json!([
            cond("FailureTarget", "BackoffLimitExceeded", msg),
            cond("Failed", "BackoffLimitExceeded", msg)
        ]);
    } else if let Some(c) = old.get("conditions") {
        status["conditions"] = c.clone();
    }
    if status != old {
        let _ = ops::update_status(sh, &resources::JOBS, ns, name, status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes() {
        let s: BTreeSet<u64> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(ranges(&s), "0-2,4,6-7");
        assert_eq!(ranges(&BTreeSet::new()), "");
    }
}
