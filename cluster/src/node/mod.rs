//! The node agent: the one part of the cluster that is ours, standing in for a kubelet and a
//! container runtime on a machine without containers. One process per node, a client of the
//! real API server with the node's own credentials (`system:node:NAME`, so the Node
//! authorizer and NodeRestriction apply to it as to a kubelet). It:
//! - registers its Node (labels, capacity, addresses, `declaredFeatures`) and renews its Lease;
//! - runs each pod bound to it (`spec.nodeName`) as real processes: a network namespace of
//!   the pod's own with a veth to the node (see `network`), each container in its own mount,
//!   UTS and PID namespaces and the pod's cgroup (see `sandbox`, `cgroup`), with its volumes,
//!   service-account token, environment and /etc/hosts (see `volumes`); reports pod status,
//!   restarts by restart policy with back-off, honours graceful deletion;
//! - serves the kubelet API the API server proxies to: exec and attach (WebSocket),
//!   port-forward (SPDY/3.1, plain or in a WebSocket tunnel), container logs, resource
//!   metrics (for metrics-server), health.
//!
//! Images map to local programs (nginx images run the host's nginx; archbench images the
//! archbench binary the cluster was given); anything else fails to pull.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::watch;

use crate::error::{ClusterError, Result};
use crate::layout::{ClusterDir, State};
use crate::topology::NodeSpec;

mod attach;
pub mod cgroup;
mod channel;
pub mod clock;
mod container;
pub mod emulation;
mod events;
mod exec;
mod ids;
pub mod logfile;
mod logs;
mod metrics;
pub mod network;
mod pod;
mod pod_lifecycle;
mod portforward;
mod probes;
mod registration;
mod reply;
mod resources;
mod sandbox;
mod server;
pub mod spdy;
mod status;
mod stdio;
mod unmodelled;
mod upgrade;
mod volumes;

pub use pod::PodRuntime;

/// What every part of one node agent shares.
pub struct Agent {
    pub spec: NodeSpec,
    pub state: State,
    pub dir: ClusterDir,
    pub client: kube::Client,
    /// Services of every namespace (environment variables, /etc/hosts).
    pub services: reflector::Store<k8s_openapi::api::core::v1::Service>,
    pub cgroups: Option<cgroup::CgroupRoot>,
    pub ips: Mutex<network::IpPool>,
    pods: Mutex<HashMap<String, Arc<PodRuntime>>>,
    pub shutdown: watch::Sender<bool>,
    /// Events recorded, so a repeat raises a count.
    pub events: events::Recorded,
    /// An arm64 node's emulator (None on an amd64 node; Err: why it could not start, which
    /// its arm64 containers then say).
    pub emulator: std::result::Result<Option<emulation::Emulator>, String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Agent {
    pub fn pods_dir(&self) -> PathBuf {
        self.dir.node_dir(&self.spec.name).join("pods")
    }

    pub fn find(&self, ns: &str, name: &str) -> Option<Arc<PodRuntime>> {
        lock(&self.pods)
            .values()
            .find(|rt| rt.ns == ns && rt.name == name)
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<PodRuntime>> {
        lock(&self.pods).values().cloned().collect()
    }

    pub fn forget(&self, uid: &str) {
        lock(&self.pods).remove(uid);
    }

    pub fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }
}

/// `archbench-cluster node DIR NAME`: runs one node until SIGTERM/SIGINT, then stops its
/// pods.
pub fn main(dir: &Path, name: &str) -> Result<()> {
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    // The supervisor started it inside the cluster's namespace; it makes the check itself,
    // as every entry point does, before it reaches a cluster address.
    let ns = crate::netns::Netns::recorded(&state.netns_path, state.netns_name.as_deref());
    crate::netns::refuse_default_route_here(&format!("{} (the node agent's)", ns.display()))?;
    let Some(spec) = state.nodes.iter().find(|n| n.name == name).cloned() else {
        return Err(ClusterError::Invalid(format!(
            "no node {name} in {}",
            cdir.state_file().display()
        )));
    };
    let emulator = emulator(&cdir, &spec);
    if let Err(why) = &emulator {
        eprintln!("node agent {name}: {why}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ClusterError::io("start the node agent's runtime"))?;
    rt.block_on(run(cdir, state, spec, emulator))
}

/// An arm64 node's emulator, started before the agent has threads of its own.
fn emulator(
    dir: &ClusterDir,
    spec: &NodeSpec,
) -> std::result::Result<Option<emulation::Emulator>, String> {
    if spec.arch != "arm64" {
        return Ok(None);
    }
    let program = std::env::current_exe().map_err(|e| format!("the agent's own program: {e}"))?;
    let binfmt = dir.node_dir(&spec.name).join("binfmt");
    emulation::Emulator::start(&program, &binfmt, Path::new(emulation::QEMU_AARCH64_BINFMT))
        .map(Some)
        .map_err(|e| e.to_string())
}

async fn run(
    dir: ClusterDir,
    state: State,
    spec: NodeSpec,
    emulator: std::result::Result<Option<emulation::Emulator>, String>,
) -> Result<()> {
    let client = crate::probe::client(&dir.config(&format!("node-{}", spec.name))).await?;
    let pod_cidr = registration::register(&client, &spec).await?;
    // Per cluster and node: clusters started side by side (tests) have nodes of one name.
    let tag = format!("{}-{}", crate::layout::netns_name(&dir.root), spec.name);
    let cgroups = cgroup::CgroupRoot::create(&tag);
    let svc_api: Api<k8s_openapi::api::core::v1::Service> = Api::all(client.clone());
    let (services, writer) = reflector::store();
    let svc_stream = watcher(svc_api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(|_| futures::future::ready(()));
    tokio::spawn(svc_stream);
    let agent = Arc::new(Agent {
        ips: Mutex::new(network::IpPool::new(&pod_cidr)?),
        spec,
        state,
        dir,
        client,
        services,
        cgroups,
        pods: Mutex::new(HashMap::new()),
        shutdown: watch::channel(false).0,
        events: events::Recorded::default(),
        emulator,
    });
    tokio::spawn(registration::heartbeat(agent.clone()));
    let listener = server::bind(&agent).await?;
    let server = tokio::spawn(server::serve(agent.clone(), listener));
    let pods = tokio::spawn(sync_pods(agent.clone()));

    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    agent.shutdown.send_replace(true);
    pods.abort();
    shutdown(&agent).await;
    // Its handlers end with the pods' processes (exec, attach, port-forward streams).
    let _ = server.await;
    Ok(())
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).map_err(ClusterError::io("listen for signals"))
}

/// Kills every pod process (the node goes away with the cluster), waits for them, removes
/// the cgroups. The pods' objects stay, as a dead node's do.
async fn shutdown(agent: &Agent) {
    let pods = agent.all();
    for rt in &pods {
        rt.request_stop(pod::Stop::Now);
        rt.kill_all(libc::SIGKILL);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline && pods.iter().any(|rt| rt.has_processes()) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for rt in pods {
        rt.cleanup();
    }
    if let Some(cg) = &agent.cgroups {
        cg.remove();
    }
}

/// Watches the pods bound to this node: starts new ones, hands every later version to its
/// runtime (deletion is how the API asks a pod to stop), stops pods whose object is gone.
/// The watch types only each object's metadata (the rest stays the API's JSON); a new pod is
/// read as a `Pod` once, in `observe`, so one that does not read is refused by itself instead
/// of failing the watch's list, and with it every pod of the node.
async fn sync_pods(agent: Arc<Agent>) {
    let api: Api<DynamicObject> =
        Api::all_with(agent.client.clone(), &ApiResource::erase::<Pod>(&()));
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", agent.spec.name));
    let mut events = watcher(api, cfg).default_backoff().boxed();
    while let Some(ev) = events.next().await {
        let Ok(ev) = ev else { continue };
        match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => observe(&agent, p),
            watcher::Event::Delete(p) => {
                if let Some(rt) = p
                    .metadata
                    .uid
                    .as_deref()
                    .and_then(|u| lock(&agent.pods).get(u).cloned())
                {
                    rt.request_stop(pod::Stop::Now);
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// The typed pod of a watched object; Err names the pod and the field that does not read.
fn read_pod(object: DynamicObject) -> Result<Pod> {
    let meta = &object.metadata;
    let pod = format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    );
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|source| ClusterError::UnreadablePod { pod, source })
}

fn observe(agent: &Arc<Agent>, object: DynamicObject) {
    let Some(uid) = object.metadata.uid.clone() else {
        return;
    };
    if let Some(rt) = lock(&agent.pods).get(&uid).cloned() {
        rt.observe(object.metadata);
        return;
    }
    let meta = object.metadata.clone();
    let p = match read_pod(object) {
        Ok(p) => p,
        Err(e) => return unreadable(agent, meta, &e),
    };
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return;
    }
    if p.metadata.deletion_timestamp.is_some() {
        // Never started here: nothing to stop; the object can go.
        tokio::spawn(pod_lifecycle::finalize_unstarted(agent.clone(), p.metadata));
        return;
    }
    match PodRuntime::new(agent, &p) {
        Ok(rt) => {
            lock(&agent.pods).insert(uid, rt.clone());
            tokio::spawn(pod_lifecycle::run(agent.clone(), rt, Arc::new(p)));
        }
        Err(e) => eprintln!("node agent: cannot start pod {uid}: {e}"),
    }
}

/// A new pod whose object does not read as a Pod is not run: the agent's log and an Event
/// on the pod say why, as for a pod it refuses; one being deleted goes at once (nothing of
/// it ran here).
fn unreadable(agent: &Arc<Agent>, meta: ObjectMeta, e: &ClusterError) {
    eprintln!("node agent: {e}");
    if meta.deletion_timestamp.is_some() {
        tokio::spawn(pod_lifecycle::finalize_unstarted(agent.clone(), meta));
        return;
    }
    let (agent, text) = (agent.clone(), format!("Error: {e}"));
    tokio::spawn(async move {
        events::record(&agent, &meta, "Warning", "Failed", &text).await;
    });
}

/// `archbench-cluster kill-pod DIR NS/POD`: SIGKILL each container's PID 1 of that pod, found
/// by the pid files its node agent keeps.
pub fn kill_pod(dir: &Path, pod: &str) -> Result<()> {
    let Some((ns, name)) = pod.split_once('/') else {
        return Err(ClusterError::Invalid(format!(
            "expected NAMESPACE/POD, got {pod:?}"
        )));
    };
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    if !state.supervisor_running() {
        return Err(ClusterError::NoCluster {
            dir: dir.to_path_buf(),
            why: "its supervisor is not running".into(),
        });
    }
    let prefix = format!("{ns}_{name}_");
    let mut killed = 0;
    for n in &state.nodes {
        let Ok(rd) = std::fs::read_dir(cdir.node_dir(&n.name).join("pods")) else {
            continue;
        };
        for e in rd.flatten() {
            let dir_name = e.file_name().to_string_lossy().into_owned();
            let Some(uid8) = dir_name.strip_prefix(&prefix) else {
                continue;
            };
            // Only a process still in that pod's cgroup (a pid file a crashed agent left
            // could name any process by now).
            let cgroup = format!("/pod{uid8}");
            for pid in pod::container_pids(&e.path()) {
                let ours = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|c| c.contains(&cgroup));
                if ours {
                    crate::process::signal(pid, libc::SIGKILL);
                    killed += 1;
                }
            }
        }
    }
    if killed == 0 {
        return Err(ClusterError::Invalid(format!(
            "pod {ns}/{name} has no running containers on this cluster's nodes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_is_read_once_and_one_that_does_not_read_is_named() {
        let object = |spec| {
            serde_json::from_value::<DynamicObject>(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web", "namespace": "nginx", "uid": "u1"},
                "spec": spec}))
            .unwrap()
        };
        let pod = read_pod(object(
            json!({"containers": [{"name": "nginx", "image": "nginx"}],
            "hostNetwork": false}),
        ))
        .unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers[0].image.as_deref(), Some("nginx"));
        assert_eq!(spec.host_network, Some(false));
        let err = read_pod(object(json!({"containers": [], "hostNetwork": "yes"}))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pod nginx/web does not read as a Kubernetes Pod (invalid type: string \"yes\", \
             expected a boolean); this node agent does not run it: its object has a field of \
             another type than Kubernetes' Pod schema gives (see kubectl get pod -o yaml)"
        );
    }
}
