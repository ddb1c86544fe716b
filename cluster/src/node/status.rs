//! What the node knows of a pod's containers, and the pod status it reports from that: phase,
//! conditions, init and regular container statuses, addresses.
//!
//! The status stays JSON rather than k8s-openapi's `PodStatus`: it is sent as a merge patch,
//! in which `"lastProbeTime": null` is part of what the API server receives, and a typed
//! struct leaves an unset field out; the container states are kept as that same JSON.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{json, Value};

use super::clock;
use super::stdio::RunIo;
use super::volumes;

/// Whether a container runs before the others (to completion) or with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    Init,
    Regular,
}

impl ContainerKind {
    /// The pod spec's containers of this kind.
    pub fn specs(self, spec: &PodSpec) -> &[Container] {
        match self {
            ContainerKind::Init => spec.init_containers.as_deref().unwrap_or_default(),
            ContainerKind::Regular => &spec.containers,
        }
    }
}

/// What the node knows of one container.
#[derive(Debug, Clone)]
pub struct CState {
    pub name: String,
    pub image: String,
    pub kind: ContainerKind,
    /// `{"waiting": …}`, `{"running": …}` or `{"terminated": …}`.
    pub state: Value,
    pub last_state: Value,
    pub restart_count: u32,
    pub ready: bool,
    /// Started at least once.
    pub started: bool,
    /// The current run's startup probe has succeeded (or it has none): the status's
    /// `started`, and what liveness and readiness wait for.
    pub startup_passed: bool,
    /// Terminated and will not restart.
    pub done: bool,
    pub container_id: Option<String>,
    /// Index of the current log file (runs started so far − 1).
    pub run: Option<u32>,
    pub middle: Option<u32>,
    pub init: Option<u32>,
    pub env: Vec<(String, String)>,
    pub workdir: String,
    /// The current run is an image of another architecture, in the emulator's user namespace
    /// (exec joins it too).
    pub emulated: bool,
    /// The pod cgroup's OOM-kill count when the current run started: a kill beyond it is
    /// this run's (an earlier run's kill must not end a restarted container).
    pub ooms_at_start: u64,
    /// The current run's streams, for attach.
    pub io: Option<Arc<RunIo>>,
}

impl CState {
    pub fn new(spec: &Container, kind: ContainerKind, state: Value) -> CState {
        CState {
            name: spec.name.clone(),
            image: spec.image.clone().unwrap_or_default(),
            kind,
            state,
            last_state: json!({}),
            restart_count: 0,
            ready: false,
            started: false,
            startup_passed: false,
            done: false,
            container_id: None,
            run: None,
            middle: None,
            init: None,
            env: Vec::new(),
            workdir: spec.working_dir.as_deref().unwrap_or("/").to_string(),
            emulated: false,
            ooms_at_start: 0,
            io: None,
        }
    }

    pub fn running(&self) -> bool {
        self.state.get("running").is_some()
    }

    fn exited_ok(&self) -> bool {
        self.state
            .pointer("/terminated/exitCode")
            .and_then(Value::as_i64)
            == Some(0)
    }
}

/// A `waiting` state with its reason (and message).
pub fn waiting(reason: &str, message: Option<&str>) -> Value {
    match message {
        Some(m) => json!({"waiting": {"reason": reason, "message": m}}),
        None => json!({"waiting": {"reason": reason}}),
    }
}

/// Each condition's status and when it last changed, kept across status writes.
pub type ConditionTimes = HashMap<String, (String, String)>;

/// What the pod status is made of, besides its containers.
pub struct PodFacts<'a> {
    pub containers: &'a [CState],
    pub host_ip: &'a str,
    pub ip: Ipv4Addr,
    pub start_time: &'a str,
}

/// A digest-shaped image id, stable per image name (there is no image: the name maps to a
/// local program or root filesystem).
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

fn phase(init: &[&CState], regular: &[&CState]) -> &'static str {
    if init.iter().any(|c| c.done && !c.exited_ok()) {
        return "Failed";
    }
    if !regular.is_empty() && regular.iter().all(|c| c.done) {
        return if regular.iter().all(|c| c.exited_ok()) {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    if !regular.is_empty() && regular.iter().all(|c| c.started) {
        "Running"
    } else {
        "Pending"
    }
}

/// The pod's conditions, each with the time it last changed.
fn conditions(init: &[&CState], regular: &[&CState], times: &mut ConditionTimes) -> Vec<Value> {
    let all_done = !regular.is_empty() && regular.iter().all(|c| c.done);
    let names = |cs: &[&CState], keep: &dyn Fn(&CState) -> bool| {
        cs.iter()
            .filter(|c| keep(c))
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let uninitialized = names(init, &|c| !(c.done && c.exited_ok()));
    let unready = names(regular, &|c| !c.ready);
    let ready = !regular.is_empty() && unready.is_empty();
    let now = clock::now();
    let mut cond = |ty: &str, ok: bool, reason: &str, message: Option<String>| {
        let status = if ok { "True" } else { "False" };
        let entry = times
            .entry(ty.to_string())
            .or_insert_with(|| (status.to_string(), now.clone()));
        if entry.0 != status {
            *entry = (status.to_string(), now.clone());
        }
        let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": entry.1});
        if !ok {
            c["reason"] = json!(reason);
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
            Some(format!("containers with unready status: [{unready}]")),
        )
    };
    vec![
        cond("PodReadyToStartContainers", !all_done, "", None),
        cond(
            "Initialized",
            uninitialized.is_empty(),
            "ContainersNotInitialized",
            Some(format!(
                "containers with incomplete status: [{uninitialized}]"
            )),
        ),
        cond("Ready", ready, not_ready_reason, not_ready_msg.clone()),
        cond("ContainersReady", ready, not_ready_reason, not_ready_msg),
        cond("PodScheduled", true, "", None),
    ]
}

fn container_status(c: &CState) -> Value {
    let mut s = json!({
        "name": c.name,
        "image": volumes::normalize(&c.image),
        "imageID": if c.container_id.is_some() { image_id(&c.image) } else { String::new() },
        "ready": c.ready,
        "restartCount": c.restart_count,
        "started": c.running() && c.startup_passed,
        "state": c.state,
        "lastState": c.last_state,
    });
    if let Some(id) = &c.container_id {
        s["containerID"] = json!(format!("containerd://{id}"));
    }
    s
}

pub fn pod_status(facts: &PodFacts, times: &mut ConditionTimes) -> Value {
    let of =
        |kind| -> Vec<&CState> { facts.containers.iter().filter(|c| c.kind == kind).collect() };
    let (init, regular) = (of(ContainerKind::Init), of(ContainerKind::Regular));
    let mut status = json!({
        "phase": phase(&init, &regular),
        "conditions": conditions(&init, &regular, times),
        "hostIP": facts.host_ip,
        "hostIPs": [{"ip": facts.host_ip}],
        "podIP": facts.ip.to_string(),
        "podIPs": [{"ip": facts.ip.to_string()}],
        "startTime": facts.start_time,
        "containerStatuses": regular.iter().map(|c| container_status(c)).collect::<Vec<_>>(),
    });
    if !init.is_empty() {
        status["initContainerStatuses"] = init.iter().map(|c| container_status(c)).collect();
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, kind: ContainerKind, state: Value) -> CState {
        let spec = Container {
            name: name.into(),
            image: Some("nginx".into()),
            ..Container::default()
        };
        CState::new(&spec, kind, state)
    }

    #[test]
    fn a_pod_initializes_before_its_containers_and_fails_with_its_init_container() {
        let mut init = container("setup", ContainerKind::Init, json!({"running": {}}));
        let app = container(
            "app",
            ContainerKind::Regular,
            waiting("PodInitializing", None),
        );
        let facts = |cs: &[CState]| {
            let mut t = ConditionTimes::new();
            pod_status(
                &PodFacts {
                    containers: cs,
                    host_ip: "10.240.0.10",
                    ip: Ipv4Addr::new(10, 244, 0, 2),
                    start_time: "2026-12-04T00:00:00Z",
                },
                &mut t,
            )
        };
        let s = facts(&[init.clone(), app.clone()]);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][1]["status"], "False");
        assert_eq!(
            s["conditions"][1]["message"],
            "containers with incomplete status: [setup]"
        );
        assert_eq!(s["initContainerStatuses"][0]["name"], "setup");
        assert_eq!(s["containerStatuses"][0]["name"], "app");
        init.state = json!({"terminated": {"exitCode": 1}});
        init.done = true;
        assert_eq!(facts(&[init.clone(), app.clone()])["phase"], "Failed");
        init.state = json!({"terminated": {"exitCode": 0}});
        let s = facts(&[init, app]);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][1]["status"], "True");
    }
}
