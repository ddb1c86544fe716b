//! The pod status the node reports: phase, conditions, container statuses, addresses.

use serde_json::{json, Value};

use super::clock;
use super::pod::PodRuntime;
use super::volumes;

/// A digest-shaped image id, stable per image name (there is no image: the name maps to a
/// local program).
fn image_id(image: &str) -> String {
    let full = volumes::normalize(image);
    let repo = full.rsplit_once(':').map_or(full.as_str(), |(r, _)| r);
    let mut digest = String::new();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    while digest.len() < 64 {
        for b in full.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        digest.push_str(&format!("{h:016x}"));
    }
    format!("{repo}@sha256:{digest}")
}

pub fn pod_status(rt: &PodRuntime) -> Value {
    let cs = rt.container_states();
    let all_done = !cs.is_empty() && cs.iter().all(|c| c.done);
    let exit_ok = |c: &super::pod::CState| {
        c.state
            .pointer("/terminated/exitCode")
            .and_then(Value::as_i64)
            == Some(0)
    };
    let phase = if all_done {
        if cs.iter().all(exit_ok) {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if !cs.is_empty() && cs.iter().all(|c| c.started) {
        "Running"
    } else {
        "Pending"
    };
    let unready: Vec<&str> = cs
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let ready = !cs.is_empty() && unready.is_empty();
    let now = clock::now();
    let mut times = rt.conditions.lock().unwrap_or_else(|e| e.into_inner());
    let mut cond = |ty: &str, ok: bool, reason: Option<&str>, message: Option<String>| {
        let status = if ok { "True" } else { "False" };
        let entry = times
            .entry(ty.to_string())
            .or_insert_with(|| (status.to_string(), now.clone()));
        if entry.0 != status {
            *entry = (status.to_string(), now.clone());
        }
        let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": entry.1});
        if !ok {
            if let Some(r) = reason {
                c["reason"] = json!(r);
            }
            if let Some(m) = message {
                c["message"] = json!(m);
            }
        }
        c
    };
    let (not_ready_reason, not_ready_msg) = if all_done {
        ("PodCompleted", None)
    } else {
        (
            "ContainersNotReady",
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let conditions = vec![
        cond("PodReadyToStartContainers", !all_done, None, None),
        cond("Initialized", true, None, None),
        cond(
            "Ready",
            ready,
            Some(not_ready_reason),
            not_ready_msg.clone(),
        ),
        cond(
            "ContainersReady",
            ready,
            Some(not_ready_reason),
            not_ready_msg,
        ),
        cond("PodScheduled", true, None, None),
    ];
    drop(times);
    let statuses: Vec<Value> = cs
        .iter()
        .map(|c| {
            let mut s = json!({
                "name": c.name,
                "image": volumes::normalize(&c.image),
                "imageID": if c.container_id.is_some() { image_id(&c.image) } else { String::new() },
                "ready": c.ready,
                "restartCount": c.restart_count,
                "started": c.state.get("running").is_some(),
                "state": c.state,
                "lastState": c.last_state,
            });
            if let Some(id) = &c.container_id {
                s["containerID"] = json!(format!("containerd://{id}"));
            }
            s
        })
        .collect();
    json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": rt.host_ip,
        "hostIPs": [{"ip": rt.host_ip}],
        "podIP": rt.ip.to_string(),
        "podIPs": [{"ip": rt.ip.to_string()}],
        "startTime": rt.start_time,
        "containerStatuses": statuses,
    })
}
