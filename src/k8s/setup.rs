//! `up`, `status` and `down`: apply the setup server-side, wait for it by watching, show where
//! everything runs, and remove only what archbench made.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::client::{api_error, not_found};
use super::manifests::{manifests, Manifest};
use super::{Arch, Cluster, K8sError, Setup, FIELD_MANAGER, MANAGED_BY, MULTIARCH_SERVICE};

/// What `apply` did to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Configured,
    Unchanged,
    /// The namespace existed and is not archbench's: left alone (and kept by `down`).
    Existing,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Configured => "configured",
            Change::Unchanged => "unchanged",
            Change::Existing => "exists (not archbench's, left as it is)",
        }
    }
}

/// What `up` did and where everything runs.
#[derive(Debug)]
pub struct UpReport {
    pub changes: Vec<(String, Change)>,
    pub rows: Vec<PodRow>,
}

impl UpReport {
    /// True when the second `up` found everything as it was.
    pub fn changed_nothing(&self) -> bool {
        self.changes
            .iter()
            .all(|(_, c)| matches!(c, Change::Unchanged | Change::Existing))
    }
}

fn managed_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

/// Server-side apply (field manager `archbench`, forced: archbench owns what it declares)
/// and what it changed, told by the resourceVersion before and after.
async fn apply<K>(api: &Api<K>, obj: &K, kind: &str) -> Result<Change, K8sError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let before = api
        .get_opt(&name)
        .await
        .map_err(|e| api_error(e, "get", kind))?
        .map(|o| o.meta().resource_version.clone().unwrap_or_default());
    apply_after(api, obj, kind, before).await
}

/// [`apply`] when what is there (its resourceVersion, or None) is already known.
async fn apply_after<K>(
    api: &Api<K>,
    obj: &K,
    kind: &str,
    before: Option<String>,
) -> Result<Change, K8sError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch(&name, &params, &Patch::Apply(obj))
        .await
        .map_err(|e| api_error(e, "patch", kind))?;
    Ok(match before {
        None => Change::Created,
        Some(rv) if Some(rv.as_str()) == after.meta().resource_version.as_deref() => {
            Change::Unchanged
        }
        Some(_) => Change::Configured,
    })
}

/// Applies every object of `setup`.
pub async fn apply_all(
    cluster: &Cluster,
    setup: &Setup,
) -> Result<Vec<(String, Change)>, K8sError> {
    let ns = setup.namespace.as_str();
    let client = &cluster.client;
    let mut changes = Vec::new();
    for m in manifests(setup) {
        let change = match &m {
            Manifest::Namespace(o) => {
                let api: Api<Namespace> = Api::all(client.clone());
                let name = o.name_any();
                match api
                    .get_opt(&name)
                    .await
                    .map_err(|e| api_error(e, "get", "namespaces"))?
                {
                    Some(existing) if !is_ours(existing.meta()) => Change::Existing,
                    existing => {
                        let rv = existing.map(|n| n.resource_version().unwrap_or_default());
                        apply_after(&api, o.as_ref(), "namespaces", rv).await?
                    }
                }
            }
            Manifest::ConfigMap(o) => {
                apply(
                    &Api::namespaced(client.clone(), ns),
                    o.as_ref(),
                    "configmaps",
                )
                .await?
            }
            Manifest::Deployment(o) => {
                apply(
                    &Api::namespaced(client.clone(), ns),
                    o.as_ref(),
                    "deployments.apps",
                )
                .await?
            }
            Manifest::Service(o) => {
                apply(&Api::namespaced(client.clone(), ns), o.as_ref(), "services").await?
            }
        };
        changes.push((m.describe(), change));
    }
    Ok(changes)
}

fn is_ours(meta: &kube::api::ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1))
}

/// `archbench k8s up`: apply, then wait (watching) until every Deployment has rolled out and
/// every Service has its address, telling `progress` what it waits for.
pub async fn up(
    cluster: &Cluster,
    setup: &Setup,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<UpReport, K8sError> {
    let changes = apply_all(cluster, setup).await?;
    wait_ready(cluster, setup, &setup.archs, progress, stop).await?;
    let rows = status(cluster).await?;
    Ok(UpReport { changes, rows })
}

/// What the cluster holds now, as the wait sees it.
#[derive(Default)]
struct Seen {
    deployments: BTreeMap<String, Deployment>,
    services: BTreeMap<String, Service>,
    pods: BTreeMap<String, Pod>,
}

enum Update {
    Deployment(watcher::Event<Deployment>),
    Service(watcher::Event<Service>),
    Pod(watcher::Event<Pod>),
}

fn fold<K: ResourceExt>(map: &mut BTreeMap<String, K>, ev: watcher::Event<K>) {
    match ev {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
            map.insert(o.name_any(), o);
        }
        watcher::Event::Delete(o) => {
            map.remove(&o.name_any());
        }
        // A restarted watch lists everything again: start from that list.
        watcher::Event::Init => map.clear(),
        watcher::Event::InitDone => {}
    }
}

/// A Deployment has rolled out: its controller saw the latest spec and every replica is
/// updated and available (what `kubectl rollout status` waits for).
pub fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(s) = &d.status else { return false };
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.available_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
}

/// The address clients reach a Service at, or None while a LoadBalancer's is pending.
pub fn service_address(svc: &Service, nodes: &[Node]) -> Option<String> {
    let spec = svc.spec.as_ref()?;
    let port = spec.ports.as_ref()?.first()?;
    let with_port = |host: &str, p: i32| {
        if p == 80 {
            host.to_string()
        } else {
            format!("{host}:{p}")
        }
    };
    match spec.type_.as_deref() {
        Some("LoadBalancer") => {
            let ingress = svc
                .status
                .as_ref()?
                .load_balancer
                .as_ref()?
                .ingress
                .as_ref()?;
            let first = ingress.first()?;
            let host = first.ip.as_deref().or(first.hostname.as_deref())?;
            Some(with_port(host, port.port))
        }
        Some("NodePort") => {
            let node_port = port.node_port?;
            let ip = nodes.iter().find_map(|n| {
                n.status
                    .as_ref()?
                    .addresses
                    .as_ref()?
                    .iter()
                    .find(|a| a.type_ == "InternalIP")
                    .map(|a| a.address.clone())
            })?;
            Some(format!("{ip}:{node_port}"))
        }
        _ => spec
            .cluster_ip
            .as_deref()
            .map(|ip| with_port(ip, port.port)),
    }
}

/// What stops a pod from ever becoming ready, as an error that names the fix.
async fn pod_problem(cluster: &Cluster, setup: &Setup, pod: &Pod) -> Option<K8sError> {
    let name = pod.name_any();
    let arch = pod.labels().get("arch").cloned().unwrap_or_default();
    let status = pod.status.as_ref()?;
    if let Some(c) = status.conditions.as_ref().and_then(|cs| {
        cs.iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    }) {
        if c.reason.as_deref() == Some("Unschedulable") {
            let selector = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.as_ref())
                .and_then(|s| s.iter().next().map(|(k, v)| format!("{k}={v}")))
                .unwrap_or_else(|| "a matching label".into());
            return Some(K8sError::Unschedulable {
                arch,
                selector,
                message: c.message.clone().unwrap_or_default(),
            });
        }
    }
    for cs in status.container_statuses.iter().flatten() {
        let Some(waiting) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.clone().unwrap_or_default();
        let message = waiting.message.clone().unwrap_or_default();
        match reason.as_str() {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" => {
                return Some(K8sError::ImagePull {
                    pod: name,
                    reason,
                    message,
                })
            }
            "CrashLoopBackOff" => {
                let log = last_log_lines(cluster, &setup.namespace, &name, 5).await;
                return Some(K8sError::Crashing {
                    pod: name,
                    reason,
                    log,
                });
            }
            _ => {}
        }
    }
    None
}

/// The last lines the container wrote before it last stopped (else now), on one line.
pub async fn last_log_lines(cluster: &Cluster, ns: &str, pod: &str, lines: i64) -> String {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), ns);
    for previous in [true, false] {
        let params = kube::api::LogParams {
            previous,
            tail_lines: Some(lines),
            ..kube::api::LogParams::default()
        };
        if let Ok(text) = api.logs(pod, &params).await {
            let text = text.trim();
            if !text.is_empty() {
                return text.lines().collect::<Vec<_>>().join(" | ");
            }
        }
    }
    "(no log)".into()
}

/// Waits until the Deployments of `archs` have rolled out and the Services have addresses.
pub async fn wait_ready(
    cluster: &Cluster,
    setup: &Setup,
    archs: &[Arch],
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<(), K8sError> {
    let ns = setup.namespace.as_str();
    let client = &cluster.client;
    let config = watcher::Config::default().labels(&managed_selector());
    let deployments = watcher(
        Api::<Deployment>::namespaced(client.clone(), ns),
        config.clone(),
    )
    .map_ok(Update::Deployment)
    .map_err(|e| ("deployments.apps", e));
    let services = watcher(
        Api::<Service>::namespaced(client.clone(), ns),
        config.clone(),
    )
    .map_ok(Update::Service)
    .map_err(|e| ("services", e));
    let pods = watcher(Api::<Pod>::namespaced(client.clone(), ns), config)
        .map_ok(Update::Pod)
        .map_err(|e| ("pods", e));
    let mut updates =
        futures::stream::select_all([deployments.boxed(), services.boxed(), pods.boxed()]);
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + setup.wait_timeout;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_line = String::new();
    loop {
        tokio::select! {
            next = updates.next() => match next {
                Some(Ok(Update::Deployment(ev))) => fold(&mut seen.deployments, ev),
                Some(Ok(Update::Service(ev))) => fold(&mut seen.services, ev),
                Some(Ok(Update::Pod(ev))) => fold(&mut seen.pods, ev),
                Some(Err((resource, e))) => return Err(watch_error(e, resource)),
                None => return Err(K8sError::Api {
                    what: "watch".into(),
                    message: "the watch streams ended".into(),
                }),
            },
            _ = tick.tick() => {}
        }
        if stop.load(Ordering::Relaxed) {
            return Err(K8sError::Interrupted("waiting for the rollout".into()));
        }
        let rolled: Vec<(Arch, bool)> = archs
            .iter()
            .map(|&a| {
                (
                    a,
                    seen.deployments
                        .get(&a.deployment())
                        .is_some_and(rolled_out),
                )
            })
            .collect();
        let wanted: Vec<String> = archs
            .iter()
            .map(|a| a.service())
            .chain(std::iter::once(MULTIARCH_SERVICE.to_string()))
            .collect();
        let addressed = wanted
            .iter()
            .filter(|s| {
                seen.services
                    .get(*s)
                    .and_then(|svc| service_address(svc, &nodes))
                    .is_some()
            })
            .count();
        if rolled.iter().all(|(_, r)| *r) && addressed == wanted.len() {
            return Ok(());
        }
        // Judge only the pods that run what we wait for: not those being deleted, nor those
        // of another configuration (the old ones of a rollout, the failed ones after a
        // rollback).
        let expected_hash = setup.config.text().map(super::manifests::sha256_hex);
        for pod in seen.pods.values() {
            let arch = pod.labels().get("arch").and_then(|a| Arch::from_name(a));
            let current = pod.metadata.deletion_timestamp.is_none()
                && pod.annotations().get(super::manifests::CONFIG_HASH) == expected_hash.as_ref();
            if current && arch.is_some_and(|a| archs.contains(&a)) {
                if let Some(problem) = pod_problem(cluster, setup, pod).await {
                    return Err(problem);
                }
            }
        }
        let line = format!(
            "waiting: {}; addresses {addressed}/{}",
            rolled
                .iter()
                .map(|(a, r)| format!("{} {}", a.name(), if *r { "ready" } else { "rolling out" }))
                .collect::<Vec<_>>()
                .join(", "),
            wanted.len()
        );
        if line != last_line {
            progress(&line);
            last_line = line;
        }
        if tokio::time::Instant::now() >= deadline {
            let pending_lb = setup.service_type == super::ServiceType::LoadBalancer
                && addressed < wanted.len()
                && rolled.iter().all(|(_, r)| *r);
            return Err(K8sError::Timeout {
                seconds: setup.wait_timeout.as_secs(),
                what: last_line,
                advice: if pending_lb {
                    "the LoadBalancer addresses never came: try --service-type NodePort, or check the cloud's load balancer quota".into()
                } else {
                    "see `archbench k8s status` and `kubectl describe pods -n NAMESPACE`; raise --wait-timeout for slow pulls".into()
                },
            });
        }
    }
}

fn watch_error(e: watcher::Error, resource: &str) -> K8sError {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => api_error(e, "watch", resource),
        other => K8sError::Api {
            what: format!("watch {resource}"),
            message: other.to_string(),
        },
    }
}

/// One pod of the setup, where it runs and how it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRow {
    pub arch: String,
    pub pod: String,
    pub node: String,
    /// The node's own `status.nodeInfo.architecture`.
    pub node_arch: String,
    /// The node's `node.kubernetes.io/instance-type` label.
    pub instance_type: String,
    /// Its arch's Service address (or "pending").
    pub address: String,
    pub ready: bool,
    pub restarts: i32,
    /// Running, Pending, CrashLoopBackOff, …
    pub state: String,
}

/// Every nginx pod archbench manages, with its node and its service's address.
pub async fn status(cluster: &Cluster) -> Result<Vec<PodRow>, K8sError> {
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();
    let lp = ListParams::default().labels(&managed_selector());
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(
            &lp.clone()
                .labels(&format!("{}={}", super::APP.0, super::APP.1)),
        )
        .await
        .map_err(|e| api_error(e, "list", "pods"))?
        .items;
    let services = Api::<Service>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| api_error(e, "list", "services"))?
        .items;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error(e, "list", "nodes"))?
        .items;
    let mut rows: Vec<PodRow> = pods
        .iter()
        .map(|p| {
            let arch = p.labels().get("arch").cloned().unwrap_or_default();
            let node_name = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let node = nodes.iter().find(|n| n.name_any() == node_name);
            let status = p.status.as_ref();
            let containers = status.and_then(|s| s.container_statuses.as_ref());
            let waiting = containers
                .into_iter()
                .flatten()
                .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
            let service = services
                .iter()
                .find(|s| s.name_any() == format!("nginx-{arch}-svc"));
            PodRow {
                pod: p.name_any(),
                node: if node_name.is_empty() {
                    "-".into()
                } else {
                    node_name.clone()
                },
                node_arch: node
                    .and_then(|n| Some(n.status.as_ref()?.node_info.as_ref()?.architecture.clone()))
                    .unwrap_or_else(|| "-".into()),
                instance_type: node
                    .and_then(|n| n.labels().get("node.kubernetes.io/instance-type").cloned())
                    .unwrap_or_else(|| "-".into()),
                address: service
                    .and_then(|s| service_address(s, &nodes))
                    .unwrap_or_else(|| "pending".into()),
                ready: containers.is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready)),
                restarts: containers
                    .into_iter()
                    .flatten()
                    .map(|c| c.restart_count)
                    .sum(),
                state: waiting
                    .or_else(|| status.and_then(|s| s.phase.clone()))
                    .unwrap_or_else(|| "Unknown".into()),
                arch,
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.arch, &a.pod).cmp(&(&b.arch, &b.pod)));
    Ok(rows)
}

/// The status table, one line per pod.
pub fn write_status(rows: &[PodRow], out: &mut dyn Write) -> io::Result<()> {
    let line = |out: &mut dyn Write, cells: [&str; 9]| {
        let widths = [8, 40, 22, 10, 22, 22, 7, 10, 0];
        let text: String = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", text.trim_end())
    };
    line(
        out,
        [
            "ARCH",
            "POD",
            "NODE",
            "NODE ARCH",
            "INSTANCE TYPE",
            "ADDRESS",
            "READY",
            "RESTARTS",
            "STATE",
        ],
    )?;
    for r in rows {
        line(
            out,
            [
                &r.arch,
                &r.pod,
                &r.node,
                &r.node_arch,
                &r.instance_type,
                &r.address,
                if r.ready { "yes" } else { "no" },
                &r.restarts.to_string(),
                &r.state,
            ],
        )?;
    }
    if rows.is_empty() {
        writeln!(
            out,
            "(no pods of archbench's here; `archbench k8s up` creates them)"
        )?;
    }
    Ok(())
}

/// `archbench k8s down`: deletes what carries archbench's label, the namespace only when
/// archbench created it (and not with `keep_namespace`), and waits until it is gone.
pub async fn down(
    cluster: &Cluster,
    keep_namespace: bool,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<Vec<String>, K8sError> {
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();
    let lp = ListParams::default().labels(&managed_selector());
    let dp = DeleteParams::background();
    let mut deleted = Vec::new();
    macro_rules! delete_all {
        ($kind:ty, $resource:expr, $label:expr) => {{
            let api: Api<$kind> = Api::namespaced(client.clone(), ns);
            let items = api
                .list(&lp)
                .await
                .map_err(|e| api_error(e, "list", $resource))?
                .items;
            for o in items {
                let name = o.name_any();
                match api.delete(&name, &dp).await {
                    Ok(_) => deleted.push(format!("{} {name}", $label)),
                    Err(e) if not_found(&e) => {}
                    Err(e) => return Err(api_error(e, "delete", $resource)),
                }
            }
        }};
    }
    delete_all!(Job, "jobs.batch", "Job");
    delete_all!(Deployment, "deployments.apps", "Deployment");
    delete_all!(Service, "services", "Service");
    delete_all!(ConfigMap, "configmaps", "ConfigMap");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ours = namespaces
        .get_opt(ns)
        .await
        .map_err(|e| api_error(e, "get", "namespaces"))?
        .is_some_and(|n| is_ours(n.meta()));
    if ours && !keep_namespace {
        match namespaces.delete(ns, &dp).await {
            Ok(_) => deleted.push(format!("Namespace {ns}")),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(api_error(e, "delete", "namespaces")),
        }
    }
    // Gone means: no pod of ours left (and the namespace itself, when deleted).
    let deadline = tokio::time::Instant::now() + timeout;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(K8sError::Interrupted("waiting for the deletion".into()));
        }
        let pods_left = pods.list(&lp).await.map(|l| l.items.len()).unwrap_or(0);
        let ns_left =
            ours && !keep_namespace && namespaces.get_opt(ns).await.ok().flatten().is_some();
        if pods_left == 0 && !ns_left {
            return Ok(deleted);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(K8sError::Timeout {
                seconds: timeout.as_secs(),
                what: format!(
                    "the deletion ({pods_left} pods left{})",
                    if ns_left {
                        ", namespace terminating"
                    } else {
                        ""
                    }
                ),
                advice: "see `kubectl get all -n NAMESPACE`; a finalizer may hold it".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use ::http::{Request, Response};
    use kube::client::Body;

    use super::*;
    use crate::k8s::{NginxConfig, PoolSelector, ServiceType};

    fn setup() -> Setup {
        Setup {
            namespace: "nginx".into(),
            archs: vec![Arch::Intel, Arch::Arm],
            image: "nginx:latest".into(),
            config: NginxConfig::Tuned,
            service_type: ServiceType::LoadBalancer,
            pools: PoolSelector::Arch,
            wait_timeout: Duration::from_secs(5),
        }
    }

    /// A minimal API server for exact request sequences: GETs answer what was applied (404
    /// before), server-side applies store the object and bump its resourceVersion only when
    /// it changed. Every request is recorded as "METHOD path?query content-type".
    async fn serve(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        let mut store: HashMap<String, serde_json::Value> = HashMap::new();
        let mut rv = 0u64;
        while let Some((req, send)) = handle.next_request().await {
            let path = req.uri().path().to_string();
            let line = format!(
                "{} {} {}",
                req.method(),
                req.uri(),
                req.headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
            );
            requests.lock().unwrap().push(line);
            let response = if req.method() == ::http::Method::PATCH {
                let body = req.into_body().collect_bytes().await.unwrap();
                let mut obj: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let same = store.get(&path).is_some_and(|old| {
                    let mut old = old.clone();
                    old["metadata"]
                        .as_object_mut()
                        .unwrap()
                        .remove("resourceVersion");
                    old == obj
                });
                if !same {
                    rv += 1;
                    let mut stored = obj.clone();
                    stored["metadata"]["resourceVersion"] = rv.to_string().into();
                    store.insert(path.clone(), stored);
                }
                obj = store[&path].clone();
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&obj).unwrap()))
                    .unwrap()
            } else {
                match store.get(&path) {
                    Some(obj) => Response::builder()
                        .body(Body::from(serde_json::to_vec(obj).unwrap()))
                        .unwrap(),
                    None => Response::builder()
                        .status(404)
                        .body(Body::from(
                            serde_json::to_vec(&serde_json::json!({
                                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404, "message": "not found"
                            }))
                            .unwrap(),
                        ))
                        .unwrap(),
                }
            };
            send.send_response(response);
        }
    }

    #[tokio::test]
    async fn applies_server_side_as_archbench_and_a_second_time_changes_nothing() {
        let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let server = tokio::spawn(serve(handle, requests.clone()));
        let cluster = Cluster {
            client: kube::Client::new(svc, "nginx"),
            namespace: "nginx".into(),
            server: "mock".into(),
        };
        let first = apply_all(&cluster, &setup()).await.unwrap();
        assert!(
            first.iter().all(|(_, c)| *c == Change::Created),
            "{first:?}"
        );
        let sent = std::mem::take(&mut *requests.lock().unwrap());
        // One GET (what is there) and one forced server-side apply per object, in order.
        assert_eq!(sent.len(), 14, "{sent:#?}");
        assert_eq!(sent[0], "GET /api/v1/namespaces/nginx -");
        assert_eq!(
            sent[1],
            "PATCH /api/v1/namespaces/nginx?&force=true&fieldManager=archbench application/apply-patch+yaml"
        );
        assert_eq!(
            sent[5],
            "PATCH /apis/apps/v1/namespaces/nginx/deployments/nginx-intel-deployment?&force=true&fieldManager=archbench application/apply-patch+yaml"
        );
        let second = apply_all(&cluster, &setup()).await.unwrap();
        assert!(
            second.iter().all(|(_, c)| *c == Change::Unchanged),
            "{second:?}"
        );
        // A new configuration changes the ConfigMap and both Deployments (their template
        // carries the configuration's hash, so the pods roll), nothing else.
        let mut changed = setup();
        changed.config = NginxConfig::File {
            path: "x.conf".into(),
            text: "events {}\\nhttp {}\\n".into(),
        };
        let third = apply_all(&cluster, &changed).await.unwrap();
        let configured: Vec<&str> = third
            .iter()
            .filter(|(_, c)| *c == Change::Configured)
            .map(|(w, _)| w.as_str())
            .collect();
        assert_eq!(
            configured,
            [
                "ConfigMap nginx-config",
                "Deployment nginx-intel-deployment",
                "Deployment nginx-arm-deployment"
            ]
        );
        drop(cluster);
        server.abort();
    }

    #[tokio::test]
    async fn a_namespace_that_is_not_ours_is_left_alone() {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let cluster = Cluster {
            client: kube::Client::new(svc, "nginx"),
            namespace: "nginx".into(),
            server: "mock".into(),
        };
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!(req.uri().to_string(), "/api/v1/namespaces/nginx");
            // Someone else's namespace: no archbench label.
            send.send_response(
                Response::builder()
                    .body(Body::from(
                        br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"nginx","resourceVersion":"7"}}"#
                            .to_vec(),
                    ))
                    .unwrap(),
            );
            // The next request is the ConfigMap's: the namespace was not patched.
            let (req, _send) = handle.next_request().await.unwrap();
            req.uri().to_string()
        });
        let _ =
            tokio::time::timeout(Duration::from_millis(300), apply_all(&cluster, &setup())).await;
        let next = server.await.unwrap();
        assert_eq!(next, "/api/v1/namespaces/nginx/configmaps/nginx-config");
    }
}
