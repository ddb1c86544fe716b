//! A pod's life on the node: its network, its init containers one after another to
//! completion, then its containers (one task each, see `container`), the cgroup view and
//! status written while they run, and on deletion the containers stopped and the object
//! removed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{json, Value};

use super::container::{self, Ended};
use super::network::PodNetwork;
use super::pod::{sleep_or_stop, PodRuntime, Stop};
use super::status::ContainerKind;
use super::{events, Agent};

/// A pod that was deleted before this node ran it (of metadata `pod`): its object goes at
/// once.
pub async fn finalize_unstarted(agent: Arc<Agent>, pod: ObjectMeta) {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    let (ns, name, uid) = (text(&pod.namespace), text(&pod.name), text(&pod.uid));
    delete_object(&agent, &ns, &name, &uid).await;
}

async fn delete_object(agent: &Agent, ns: &str, name: &str, uid: &str) {
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => eprintln!("node agent: delete pod {ns}/{name}: {e}"),
    }
}

/// The pod's network, made (tried again each second, with an event, until the pod stops).
async fn network(agent: &Arc<Agent>, rt: &PodRuntime, pod: &Pod) -> Option<PodNetwork> {
    let mut stop = rt.stop.subscribe();
    loop {
        match PodNetwork::create(&rt.uid, rt.ip, agent.spec.ip).await {
            Ok(n) => return Some(n),
            Err(e) => {
                let msg = format!("Failed to create pod sandbox: {e}");
                events::record(
                    agent,
                    &pod.metadata,
                    "Warning",
                    "FailedCreatePodSandBox",
                    &msg,
                )
                .await;
                write_status(agent, rt, &mut None).await;
                if sleep_or_stop(Duration::from_secs(1), &mut stop).await {
                    return None;
                }
            }
        }
    }
}

/// The init containers in order, each to completion, then the containers together; an init
/// container that fails for good (restart policy Never) leaves the pod Failed and the
/// containers unstarted.
async fn containers(agent: Arc<Agent>, rt: Arc<PodRuntime>, pod: Arc<Pod>) {
    let kinds: Vec<ContainerKind> = rt.container_states().iter().map(|c| c.kind).collect();
    for (idx, _) in kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == ContainerKind::Init)
    {
        match container::run(agent.clone(), rt.clone(), pod.clone(), idx).await {
            Ended::Completed => {}
            Ended::Failed | Ended::Stopped => return,
        }
    }
    let tasks: Vec<_> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == ContainerKind::Regular)
        .map(|(idx, _)| tokio::spawn(container::run(agent.clone(), rt.clone(), pod.clone(), idx)))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// The pod loop: makes the network, runs the containers, refreshes the cgroup view, writes
/// status; on deletion stops the containers and removes the object.
pub async fn run(agent: Arc<Agent>, rt: Arc<PodRuntime>, pod: Arc<Pod>) {
    let mut stop = rt.stop.subscribe();
    let network = network(&agent, &rt, &pod).await;
    if let Some(n) = &network {
        rt.set_network(n.netns.path.clone());
    }
    let work = network
        .as_ref()
        .map(|_| tokio::spawn(containers(agent.clone(), rt.clone(), pod.clone())));
    let mut last_sample = Instant::now() - Duration::from_secs(5);
    let mut written: Option<Value> = None;
    loop {
        if rt.stopping() || agent.stopping() {
            break;
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            rt.refresh_usage();
            rt.refresh_hosts(&agent);
            last_sample = Instant::now();
        } else {
            // A kernel's cgroup counts continuously; a v1 host's view is rewritten every pass
            // (200 ms), so a watcher reading every 250 ms sees a 1 s run's CPU, not one tick.
            rt.refresh_view();
        }
        rt.end_on_oom();
        write_status(&agent, &rt, &mut written).await;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = stop.changed() => {}
        }
    }
    if let Some(w) = work {
        let _ = w.await;
    }
    if agent.stopping() {
        return;
    }
    write_status(&agent, &rt, &mut written).await;
    if let Some(n) = network {
        n.remove().await;
    }
    if rt.deleting() || *rt.stop.borrow() == Some(Stop::Now) {
        delete_object(&agent, &rt.ns, &rt.name, &rt.uid).await;
    }
    agent.forget(&rt.uid);
    agent.events.forget(&rt.uid);
    agent
        .ips
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .give_back(rt.ip);
    let rt2 = rt.clone();
    let _ = tokio::task::spawn_blocking(move || rt2.cleanup()).await;
}

/// Writes the pod's status when it differs from what was last written.
async fn write_status(agent: &Agent, rt: &PodRuntime, written: &mut Option<Value>) {
    let status = rt.status();
    if written.as_ref() == Some(&status) {
        return;
    }
    let api: Api<Pod> = Api::namespaced(agent.client.clone(), &rt.ns);
    let patch = json!({"metadata": {"uid": rt.uid}, "status": status});
    match api
        .patch_status(&rt.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => *written = Some(status),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
            // the object is gone (or another pod of that name): stop
            rt.request_stop(Stop::Now);
        }
        Err(e) => eprintln!("node agent: status of {}/{}: {e}", rt.ns, rt.name),
    }
}
