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
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::client::{api_error, not_found};
use super::manifests::{manifests, Manifest};
use super::pods::{trouble, PodTrouble};
use super::variant::NodeOffer;
use super::{
    is_ours, managed_selector, variant_of, Cluster, K8sError, Setup, FIELD_MANAGER,
    MULTIARCH_SERVICE,
};

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

/// What one apply did to one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// "Kind name".
    pub what: String,
    pub change: Change,
    /// Fields another field manager held that archbench's forced apply took over, as
    /// "FIELD (from MANAGER)": someone scaled or edited what archbench declares.
    pub took_over: Vec<String>,
}

/// What `up` did and where everything runs.
#[derive(Debug)]
pub struct UpReport {
    pub changes: Vec<Applied>,
    pub rows: Vec<PodRow>,
    /// Service addresses that did not yet accept a connection from here when `up` ended.
    pub not_answering: Vec<String>,
}

impl UpReport {
    /// True when the second `up` found everything as it was.
    pub fn changed_nothing(&self) -> bool {
        self.changes
            .iter()
            .all(|a| matches!(a.change, Change::Unchanged | Change::Existing))
    }
}

/// Server-side apply (field manager `archbench`, forced: archbench owns what it declares)
/// and what it changed, told by the resourceVersion before and after.
async fn apply<K>(api: &Api<K>, obj: &K, kind: &str) -> Result<(Change, Vec<String>), K8sError>
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

/// The fields a conflict names, as "FIELD (from MANAGER)"; the API server's cause messages
/// read `conflict with "MANAGER" using apps/v1`.
fn conflicts(status: &kube::core::Status) -> Vec<String> {
    status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .filter(|c| !c.field.is_empty())
        .map(|c| {
            let manager = c
                .message
                .split('"')
                .nth(1)
                .unwrap_or("another field manager");
            format!("{} (from {manager})", c.field)
        })
        .collect()
}

/// [`apply`] when what is there (its resourceVersion, or None) is already known. An object
/// that exists is first applied without force as a dry run: the conflicts it reports are what
/// the forced apply takes over, and `up` says so.
async fn apply_after<K>(
    api: &Api<K>,
    obj: &K,
    kind: &str,
    before: Option<String>,
) -> Result<(Change, Vec<String>), K8sError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let mut took_over = Vec::new();
    if before.is_some() {
        let mut probe = PatchParams::apply(FIELD_MANAGER);
        probe.dry_run = true;
        match api.patch(&name, &probe, &Patch::Apply(obj)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => took_over = conflicts(&s),
            Err(e) => return Err(api_error(e, "patch", kind)),
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch(&name, &params, &Patch::Apply(obj))
        .await
        .map_err(|e| api_error(e, "patch", kind))?;
    let change = match before {
        None => Change::Created,
        Some(rv) if Some(rv.as_str()) == after.meta().resource_version.as_deref() => {
            Change::Unchanged
        }
        Some(_) => Change::Configured,
    };
    Ok((change, took_over))
}

/// Applies every object of `setup`.
pub async fn apply_all(cluster: &Cluster, setup: &Setup) -> Result<Vec<Applied>, K8sError> {
    let ns = setup.namespace.as_str();
    let client = &cluster.client;
    let mut changes = Vec::new();
    for m in manifests(setup) {
        let (change, took_over) = match &m {
            Manifest::Namespace(o) => {
                let api: Api<Namespace> = Api::all(client.clone());
                let name = o.name_any();
                match api
                    .get_opt(&name)
                    .await
                    .map_err(|e| api_error(e, "get", "namespaces"))?
                {
                    Some(existing) if !is_ours(existing.meta()) => (Change::Existing, Vec::new()),
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
            Manifest::Secret(o) => {
                apply(&Api::namespaced(client.clone(), ns), o.as_ref(), "secrets").await?
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
        changes.push(Applied {
            what: m.describe(),
            change,
            took_over,
        });
    }
    Ok(changes)
}

/// The setup with the certificate its https variants serve: the Secret's when archbench
/// made one before (a second `up` changes nothing), else a new one for the Services' names.
pub async fn with_certificate(cluster: &Cluster, setup: &Setup) -> Result<Setup, K8sError> {
    let mut setup = setup.clone();
    if setup.any_tls() && setup.certificate.is_none() {
        setup.certificate = match super::tls::existing(cluster).await? {
            Some(cert) => Some(cert),
            None => Some(super::tls::ServingCert::generate(super::tls::names(
                &setup,
            ))?),
        };
    }
    Ok(setup)
}

/// What the cluster holds now, as the wait sees it.
#[derive(Default)]
pub(super) struct Seen {
    deployments: BTreeMap<String, Deployment>,
    services: BTreeMap<String, Service>,
    pub(super) pods: BTreeMap<String, Pod>,
    pub(super) slices: BTreeMap<String, EndpointSlice>,
    /// The EndpointSlices cannot be watched (RBAC): readiness is judged without them.
    pub(super) slices_hidden: bool,
    /// The pods' and the slices' first lists are in: before them, an empty map says nothing
    /// (a wait for pods to be gone would end at once).
    pub(super) pods_listed: bool,
    pub(super) slices_listed: bool,
}

impl Seen {
    /// Ready endpoints behind a Service, as its EndpointSlices list them (what kube-proxy
    /// routes to): a Service with an address but none of these still refuses connections.
    fn ready_endpoints(&self, service: &str) -> usize {
        self.slices
            .values()
            .filter(|s| s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service))
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count()
    }

    /// Takes in what the watches sent next; a failed watch (but the slices' one that RBAC
    /// refuses) or their end is the wait's error.
    pub(super) fn update(
        &mut self,
        next: Option<Result<Update, (&'static str, watcher::Error)>>,
    ) -> Result<(), K8sError> {
        match next {
            Some(Ok(Update::Deployment(ev))) => fold(&mut self.deployments, ev),
            Some(Ok(Update::Service(ev))) => fold(&mut self.services, ev),
            Some(Ok(Update::Pod(ev))) => {
                listed(&mut self.pods_listed, &ev);
                fold(&mut self.pods, ev);
            }
            Some(Ok(Update::Slice(ev))) => {
                listed(&mut self.slices_listed, &ev);
                fold(&mut self.slices, ev);
            }
            Some(Err(("endpointslices.discovery.k8s.io", e))) if forbidden(&e) => {
                self.slices_hidden = true;
                self.slices_listed = true;
            }
            Some(Err((resource, e))) => return Err(watch_error(e, resource)),
            None => {
                return Err(K8sError::Failed {
                    what: "watch".into(),
                    message: "the watch streams ended".into(),
                })
            }
        }
        Ok(())
    }
}

/// The label the EndpointSlice controller puts on a Service's slices.
pub(super) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Notes whether a watch's (re)list is complete: false from its start, true at its end.
fn listed<K>(flag: &mut bool, ev: &watcher::Event<K>) {
    match ev {
        watcher::Event::Init => *flag = false,
        watcher::Event::InitDone => *flag = true,
        _ => {}
    }
}

pub(super) enum Update {
    Deployment(watcher::Event<Deployment>),
    Service(watcher::Event<Service>),
    Pod(watcher::Event<Pod>),
    Slice(watcher::Event<EndpointSlice>),
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
/// A ReplicaFailure condition's message, when it holds.
fn replica_failure(
    conditions: Option<&Vec<k8s_openapi::api::apps::v1::ReplicaSetCondition>>,
) -> Option<String> {
    conditions?
        .iter()
        .find(|c| {
            c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
        })
        .map(|c| {
            c.message
                .clone()
                .unwrap_or_else(|| c.reason.clone().unwrap_or_default())
        })
}

/// Why a Deployment's current ReplicaSet cannot make its pods, in the API server's words
/// (a pod template the Deployment's validation let through, a quota, an admission webhook):
/// a rollout would wait on it forever. An older ReplicaSet's failure (the template before
/// this `up`) is not this rollout's, so only the current revision's counts.
async fn current_replica_failure(cluster: &Cluster, ns: &str, d: &Deployment) -> Option<String> {
    let flagged = d.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
        c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
    });
    if !flagged {
        return None;
    }
    const REVISION: &str = "deployment.kubernetes.io/revision";
    let revision = d.annotations().get(REVISION)?;
    let selector = d.spec.selector.match_labels.as_ref()?;
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let sets =
        Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(cluster.client.clone(), ns)
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .ok()?;
    let current = sets
        .items
        .iter()
        .find(|rs| rs.annotations().get(REVISION) == Some(revision))?;
    replica_failure(current.status.as_ref()?.conditions.as_ref())
}

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
    let port = svc.spec.as_ref()?.ports.as_ref()?.first()?;
    port_address(svc, port, nodes)
}

/// The address of one port of a Service, as [`service_address`] gives its first.
pub fn port_address(
    svc: &Service,
    port: &k8s_openapi::api::core::v1::ServicePort,
    nodes: &[Node],
) -> Option<String> {
    let spec = svc.spec.as_ref()?;
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
            // A node's ExternalIP where nodes have one (AKS nodes with public IPs: what a
            // laptop reaches), else its InternalIP (from inside the cluster's network).
            let address = |kind: &str| {
                nodes.iter().find_map(|n| {
                    n.status
                        .as_ref()?
                        .addresses
                        .as_ref()?
                        .iter()
                        .find(|a| a.type_ == kind)
                        .map(|a| a.address.clone())
                })
            };
            let ip = address("ExternalIP").or_else(|| address("InternalIP"))?;
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
    Some(match trouble(pod)? {
        PodTrouble::Unschedulable { message } => {
            let variant = variant_of(pod.labels()).unwrap_or_default().to_string();
            let preset = setup.variant(&variant).is_some_and(|v| v.preset.is_some());
            K8sError::Unschedulable {
                advice: if preset {
                    format!(
                        "add a node pool of that architecture, or leave {variant} out with --arch"
                    )
                } else {
                    "change the variant's selector, cpu= or memory=, or add such nodes".into()
                },
                variant,
                selector: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_selector.as_ref())
                    .map(|s| {
                        s.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "room for it".into()),
                message,
            }
        }
        PodTrouble::ImagePull { reason, message } => K8sError::ImagePull {
            pod: name,
            reason,
            message,
        },
        PodTrouble::Crashing { reason, last } => K8sError::Crashing {
            log: last_log_lines(cluster, &setup.namespace, &name, 5).await,
            pod: name,
            reason,
            last,
        },
    })
}

/// Refuses, before anything is applied, a variant no node can run (by its selector, CPU or
/// memory). The presets are left to the scheduler, as the guide's script was. Nodes RBAC
/// hides are not checked: the scheduler will tell.
pub(super) async fn check_placement(cluster: &Cluster, setup: &Setup) -> Result<(), K8sError> {
    if setup.variants.iter().all(|v| v.preset.is_some()) {
        return Ok(());
    }
    let Ok(nodes) = Api::<Node>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
    else {
        return Ok(());
    };
    let offers: Vec<NodeOffer> = nodes
        .items
        .iter()
        .map(|n| {
            let allocatable = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let quantity = |k: &str| Some(allocatable?.get(k)?.0.as_str());
            NodeOffer::new(
                n.name_any(),
                n.labels().clone(),
                quantity("cpu"),
                quantity("memory"),
            )
        })
        .collect();
    match setup
        .variants
        .iter()
        .filter(|v| v.preset.is_none())
        .find_map(|v| v.placement_problem(&offers))
    {
        Some(problem) => Err(K8sError::Usage(problem)),
        None => Ok(()),
    }
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

/// How long after a pod of the setup was last seen releasing its CPU and memory a new pod's
/// "Unschedulable" is not yet final. The scheduler marks a pod so when it tries it before
/// the room is free (a terminating pod's, or one whose end it has not yet seen), and tries it
/// again only after its back-off (1 s, doubling to kube-scheduler's default
/// podMaxBackoffSeconds of 10 s): the condition stays False for up to that long after the
/// pod that held the room is gone.
const RESCHEDULE_WITHIN: Duration = Duration::from_secs(15);

/// When a pod of the setup was last seen releasing its room (terminating).
#[derive(Debug, Clone, Copy, Default)]
struct Releases {
    last: Option<tokio::time::Instant>,
}

impl Releases {
    /// Notes, at `now`, whether any pod `seen` is terminating.
    fn note(&mut self, seen: &Seen, now: tokio::time::Instant) {
        if seen
            .pods
            .values()
            .any(|p| p.metadata.deletion_timestamp.is_some())
        {
            self.last = Some(now);
        }
    }

    /// Whether a pod the scheduler found no room for may still get it: something is being
    /// released, or was within [`RESCHEDULE_WITHIN`].
    fn recent(&self, now: tokio::time::Instant) -> bool {
        self.last
            .is_some_and(|t| now.saturating_duration_since(t) < RESCHEDULE_WITHIN)
    }
}

/// Waits until the setup's Deployments have rolled out and the Services have addresses.
pub async fn wait_ready(
    cluster: &Cluster,
    setup: &Setup,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<(), K8sError> {
    wait_rollout(cluster, setup, None, progress, stop).await
}

/// [`wait_ready`] when pods were released (deleted) at `released`, before this wait could
/// see them terminating: a rollback, whose failed pods go as the previous ones come back.
pub(super) async fn wait_rollout(
    cluster: &Cluster,
    setup: &Setup,
    released: Option<tokio::time::Instant>,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<(), K8sError> {
    let ns = setup.namespace.as_str();
    let client = &cluster.client;
    let mut updates = watch_setup(client, ns);
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + setup.wait_timeout;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_line = String::new();
    let mut releases = Releases { last: released };
    loop {
        tokio::select! {
            next = updates.next() => seen.update(next)?,
            _ = tick.tick() => {}
        }
        if stop.load(Ordering::Relaxed) {
            return Err(K8sError::Interrupted("waiting for the rollout".into()));
        }
        let now = Readiness::of(&seen, setup, &nodes);
        if now.done() {
            return Ok(());
        }
        if let Some(failed) = replicas_failed(cluster, &seen, setup).await {
            return Err(failed);
        }
        // A pod still terminating holds its CPU and memory: a new pod the scheduler finds no
        // room for yet gets it once that one is gone (a sized variant's rollout replaces its
        // pods in place), tried again within RESCHEDULE_WITHIN. So "Unschedulable" is final
        // only when nothing is being released nor just was: the moment the last terminating
        // pod is gone, the new one is still marked Unschedulable until the scheduler's next
        // try (a variants test once failed there, in a rollback).
        let at = tokio::time::Instant::now();
        releases.note(&seen, at);
        let releasing = releases.recent(at);
        for pod in current_pods(&seen, setup) {
            match pod_problem(cluster, setup, pod).await {
                Some(K8sError::Unschedulable { .. }) if releasing => {}
                Some(problem) => return Err(problem),
                None => {}
            }
        }
        let line = now.line();
        if line != last_line {
            progress(&line);
            last_line = line;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(now.timeout(setup, last_line));
        }
    }
}

/// What the watches of a setup send, or the resource whose watch failed and why.
pub(super) type SetupUpdates = futures::stream::SelectAll<
    futures::stream::BoxStream<'static, Result<Update, (&'static str, watcher::Error)>>,
>;

/// One stream of the setup's Deployments, Services and pods (by our labels) and the
/// namespace's EndpointSlices. Nothing is asked of the API server until it is polled.
pub(super) fn watch_setup(client: &kube::Client, ns: &str) -> SetupUpdates {
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
    // The controller's slices carry its labels, not ours: every slice of the namespace.
    let slices = watcher(
        Api::<EndpointSlice>::namespaced(client.clone(), ns),
        watcher::Config::default(),
    )
    .map_ok(Update::Slice)
    .map_err(|e| ("endpointslices.discovery.k8s.io", e));
    futures::stream::select_all([
        deployments.boxed(),
        services.boxed(),
        pods.boxed(),
        slices.boxed(),
    ])
}

/// The first Deployment of the setup whose ReplicaSet cannot create its pods, as the error.
async fn replicas_failed(cluster: &Cluster, seen: &Seen, setup: &Setup) -> Option<K8sError> {
    for v in &setup.variants {
        if let Some(d) = seen.deployments.get(&v.deployment()) {
            if let Some(why) = current_replica_failure(cluster, &setup.namespace, d).await {
                return Some(K8sError::Failed {
                    what: format!("the pods of {}", v.deployment()),
                    message: why,
                });
            }
        }
    }
    None
}

/// Whether a watch failed because RBAC refuses it.
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => matches!(e, kube::Error::Api(s) if s.code == 403),
        _ => false,
    }
}

/// The pods that run what `up` waits for: not those being deleted, nor those of another
/// configuration (the old ones of a rollout, the failed ones after a rollback).
pub(super) fn current_pods<'a>(seen: &'a Seen, setup: &Setup) -> Vec<&'a Pod> {
    seen.pods
        .values()
        .filter(|pod| {
            let Some(variant) = variant_of(pod.labels()).and_then(|v| setup.variant(v)) else {
                return false;
            };
            let expected_hash = setup
                .config_text(variant)
                .map(|t| super::manifests::sha256_hex(&t));
            pod.metadata.deletion_timestamp.is_none()
                && pod.annotations().get(super::manifests::CONFIG_HASH) == expected_hash.as_ref()
        })
        .collect()
}

/// How far the rollout is: each variant's Deployment, the Services with an address, and
/// those whose endpoints are ready.
struct Readiness {
    rolled: Vec<(String, bool)>,
    wanted: usize,
    addressed: usize,
    serving: usize,
    slices_hidden: bool,
}

impl Readiness {
    fn of(seen: &Seen, setup: &Setup, nodes: &[Node]) -> Readiness {
        let rolled = setup
            .variants
            .iter()
            .map(|v| {
                (
                    v.name.clone(),
                    seen.deployments
                        .get(&v.deployment())
                        .is_some_and(rolled_out),
                )
            })
            .collect();
        // Each variant's Service wants its replicas; the multi-arch one, every variant's.
        let replicas = |v: &super::Variant| usize::try_from(v.replicas).unwrap_or(1);
        let wanted: Vec<(String, usize)> = setup
            .variants
            .iter()
            .map(|v| (v.service(), replicas(v)))
            .chain(std::iter::once((
                MULTIARCH_SERVICE.to_string(),
                setup.variants.iter().map(replicas).sum(),
            )))
            .collect();
        let addressed = wanted
            .iter()
            .filter(|(s, _)| {
                seen.services
                    .get(s)
                    .and_then(|svc| service_address(svc, nodes))
                    .is_some()
            })
            .count();
        let serving = wanted
            .iter()
            .filter(|(s, n)| seen.slices_hidden || seen.ready_endpoints(s) >= *n)
            .count();
        Readiness {
            rolled,
            wanted: wanted.len(),
            addressed,
            serving,
            slices_hidden: seen.slices_hidden,
        }
    }

    fn done(&self) -> bool {
        self.rolled.iter().all(|(_, r)| *r)
            && self.addressed == self.wanted
            && self.serving == self.wanted
    }

    fn line(&self) -> String {
        let endpoints = if self.slices_hidden {
            " (endpoints not visible to you)".to_string()
        } else {
            format!("; endpoints {}/{}", self.serving, self.wanted)
        };
        format!(
            "waiting: {}; addresses {}/{}{endpoints}",
            self.rolled
                .iter()
                .map(|(v, r)| format!("{v} {}", if *r { "ready" } else { "rolling out" }))
                .collect::<Vec<_>>()
                .join(", "),
            self.addressed,
            self.wanted,
        )
    }

    fn timeout(&self, setup: &Setup, what: String) -> K8sError {
        let rolled = self.rolled.iter().all(|(_, r)| *r);
        let pending_lb = setup.service_type == super::ServiceType::LoadBalancer
            && self.addressed < self.wanted
            && rolled;
        K8sError::Timeout {
            seconds: setup.wait_timeout.as_secs(),
            what,
            advice: if pending_lb {
                "the LoadBalancer addresses never came: try --service-type NodePort (loaded from outside through the nodes' external addresses: nodes with public IPs), or check the cloud's load balancer quota".into()
            } else {
                "see `archbench k8s status` and `kubectl describe pods -n NAMESPACE`; raise --wait-timeout for slow pulls".into()
            },
        }
    }
}

fn watch_error(e: watcher::Error, resource: &str) -> K8sError {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => api_error(e, "watch", resource),
        other => K8sError::Watch {
            what: format!("watch {resource}"),
            source: other,
        },
    }
}

/// One pod of the setup, where it runs and how it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRow {
    /// Its variant ("intel", "arm-large").
    pub variant: String,
    pub pod: String,
    pub node: String,
    /// The node's own `status.nodeInfo.architecture`.
    pub node_arch: String,
    /// The node's `node.kubernetes.io/instance-type` label.
    pub instance_type: String,
    /// The node's allocatable CPU and memory ("2 cpu, 7.8Gi").
    pub allocatable: String,
    /// The container's CPU and memory limits ("1 cpu, 512Mi"; "-" without).
    pub limits: String,
    /// Its variant's Service address (or "pending").
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
    // One selector, not two: ListParams::labels replaces, it does not add.
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&super::nginx_selector()))
        .await
        .map_err(|e| api_error(e, "list", "pods"))?
        .items;
    let services = Api::<Service>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| api_error(e, "list", "services"))?
        .items;
    // A user whose Role covers only the namespace may not list nodes: the rows lack the
    // nodes' details then (marked, and said under the table), not the pods.
    let (nodes, nodes_hidden) = match Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => (l.items, false),
        Err(kube::Error::Api(s)) if s.code == 403 => (Vec::new(), true),
        Err(e) => return Err(api_error(e, "list", "nodes")),
    };
    let mut rows: Vec<PodRow> = pods
        .iter()
        .map(|p| pod_row(p, &nodes, nodes_hidden, &services))
        .collect();
    rows.sort_by(|a, b| (&a.variant, &a.pod).cmp(&(&b.variant, &b.pod)));
    Ok(rows)
}

/// One pod's row: its node's details (marked when RBAC hides the nodes), its limits, its
/// variant's Service address.
fn pod_row(p: &Pod, nodes: &[Node], nodes_hidden: bool, services: &[Service]) -> PodRow {
    let unknown = || if nodes_hidden { HIDDEN } else { "-" }.to_string();
    let variant = variant_of(p.labels()).unwrap_or_default().to_string();
    let node_name = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let node = nodes.iter().find(|n| n.name_any() == node_name);
    let status = p.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    // A waiting reason with how the last run ended: "CrashLoopBackOff(OOMKilled)", one word
    // for scripts that split on whitespace.
    let waiting = containers.into_iter().flatten().find_map(|c| {
        let reason = c.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
        Some(match super::pods::last_termination(c) {
            Some(last) if reason == "CrashLoopBackOff" => format!("{reason}({last})"),
            _ => reason,
        })
    });
    let service = services
        .iter()
        .find(|s| s.name_any() == format!("nginx-{variant}-svc"));
    PodRow {
        pod: p.name_any(),
        node: if node_name.is_empty() {
            "-".into()
        } else {
            node_name.clone()
        },
        node_arch: node
            .and_then(|n| Some(n.status.as_ref()?.node_info.as_ref()?.architecture.clone()))
            .unwrap_or_else(unknown),
        instance_type: node
            .and_then(|n| n.labels().get("node.kubernetes.io/instance-type").cloned())
            .unwrap_or_else(unknown),
        allocatable: node
            .and_then(|n| n.status.as_ref()?.allocatable.as_ref())
            .map(sizes)
            .unwrap_or_else(unknown),
        limits: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first()?.resources.as_ref()?.limits.as_ref())
            .map(sizes)
            .unwrap_or_else(|| "-".into()),
        address: service
            .and_then(|s| service_address(s, nodes))
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
        variant,
    }
}

/// CPU and memory of a resource list, as "2 cpu, 7.8Gi" (what is missing left out).
fn sizes(
    list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> String {
    let cpu = list.get("cpu").map(|q| format!("{} cpu", q.0));
    let memory = list.get("memory").map(|q| q.0.clone());
    let text: Vec<String> = cpu.into_iter().chain(memory).collect();
    if text.is_empty() {
        "-".into()
    } else {
        text.join(", ")
    }
}

/// The status table, one line per pod.
pub fn write_status(rows: &[PodRow], out: &mut dyn Write) -> io::Result<()> {
    // Each column as wide as its longest cell and two spaces (at least as before): a long
    // variant's pod name once ran into its node's, and scripts split on whitespace.
    let longest = |f: &dyn Fn(&PodRow) -> usize, least: usize| {
        rows.iter().map(|r| f(r) + 2).max().unwrap_or(0).max(least)
    };
    let widths = [
        longest(&|r| r.variant.len(), 9),
        longest(&|r| r.pod.len(), 40),
        longest(&|r| r.node.len(), 22),
        longest(&|r| r.node_arch.len(), 10),
        longest(&|r| r.instance_type.len(), 22),
        longest(&|r| r.allocatable.len(), 20),
        longest(&|r| r.limits.len(), 18),
        longest(&|r| r.address.len(), 22),
        7,
        10,
        0,
    ];
    let line = |out: &mut dyn Write, cells: [&str; 11]| {
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
            "VARIANT",
            "POD",
            "NODE",
            "NODE ARCH",
            "INSTANCE TYPE",
            "ALLOCATABLE",
            "LIMITS",
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
                &r.variant,
                &r.pod,
                &r.node,
                &r.node_arch,
                &r.instance_type,
                &r.allocatable,
                &r.limits,
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
    if rows.iter().any(|r| r.node_arch == HIDDEN) {
        writeln!(
            out,
            "({HIDDEN}: nodes are not visible to you; RBAC would have to allow list nodes)"
        )?;
    }
    Ok(())
}

/// What a node's column says when RBAC hides the nodes.
const HIDDEN: &str = "?";

/// `archbench k8s down`: deletes what carries archbench's label, the namespace only when
/// archbench created it (and not with `keep_namespace`), and waits until it is gone.
/// What `down` did.
#[derive(Debug, Default)]
pub struct DownReport {
    /// "Kind name" of everything deleted.
    pub deleted: Vec<String>,
    /// The namespace archbench created but kept, and what in it is not archbench's.
    pub kept_namespace: Option<(String, Vec<String>)>,
}

/// Objects in `ns` that are not archbench's (a namespace holding any is not deleted).
async fn foreign_objects(client: &kube::Client, ns: &str) -> Result<Vec<String>, K8sError> {
    async fn foreign<K>(
        client: &kube::Client,
        ns: &str,
        resource: &str,
        kind: &str,
    ) -> Result<Vec<String>, K8sError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        <K as Resource>::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(client.clone(), ns);
        let items = api
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error(e, "list", resource))?
            .items;
        Ok(items
            .iter()
            .filter(|o| !is_ours(o.meta()) && o.meta().owner_references.is_none())
            // Every namespace gets the cluster's CA bundle from the controller-manager.
            .filter(|o| o.meta().name.as_deref() != Some("kube-root-ca.crt"))
            .map(|o| format!("{kind} {}", o.meta().name.clone().unwrap_or_default()))
            .collect())
    }
    let mut out = foreign::<Deployment>(client, ns, "deployments.apps", "Deployment").await?;
    out.extend(foreign::<Job>(client, ns, "jobs.batch", "Job").await?);
    out.extend(foreign::<Service>(client, ns, "services", "Service").await?);
    out.extend(foreign::<ConfigMap>(client, ns, "configmaps", "ConfigMap").await?);
    out.extend(foreign::<Pod>(client, ns, "pods", "Pod").await?);
    Ok(out)
}

pub async fn down(
    cluster: &Cluster,
    keep_namespace: bool,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<DownReport, K8sError> {
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();
    let mut deleted = delete_managed::<Job>(client, ns, "jobs.batch", "Job").await?;
    deleted
        .extend(delete_managed::<Deployment>(client, ns, "deployments.apps", "Deployment").await?);
    deleted.extend(delete_managed::<Service>(client, ns, "services", "Service").await?);
    deleted.extend(delete_managed::<ConfigMap>(client, ns, "configmaps", "ConfigMap").await?);
    deleted.extend(delete_managed::<Secret>(client, ns, "secrets", "Secret").await?);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ours = namespaces
        .get_opt(ns)
        .await
        .map_err(|e| api_error(e, "get", "namespaces"))?
        .is_some_and(|n| is_ours(n.meta()));
    // A namespace archbench made but someone has since used too: deleting it would take
    // their objects with it.
    let mut kept_namespace = None;
    let keep_namespace = keep_namespace || {
        let others = if ours {
            foreign_objects(client, ns).await?
        } else {
            Vec::new()
        };
        let keep = !others.is_empty();
        if keep {
            kept_namespace = Some((ns.to_string(), others));
        }
        keep
    };
    let delete_namespace = ours && !keep_namespace;
    if delete_namespace {
        match namespaces.delete(ns, &DeleteParams::background()).await {
            Ok(_) => deleted.push(format!("Namespace {ns}")),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(api_error(e, "delete", "namespaces")),
        }
    }
    wait_gone(client, ns, delete_namespace, timeout, stop).await?;
    Ok(DownReport {
        deleted,
        kept_namespace,
    })
}

/// Deletes (in the background) every object of kind `K` in `ns` with our labels; what it
/// deleted, as "LABEL NAME". One already gone is no error.
async fn delete_managed<K>(
    client: &kube::Client,
    ns: &str,
    resource: &str,
    label: &str,
) -> Result<Vec<String>, K8sError>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    <K as Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let items = api
        .list(&ListParams::default().labels(&managed_selector()))
        .await
        .map_err(|e| api_error(e, "list", resource))?
        .items;
    let mut deleted = Vec::new();
    for o in items {
        let name = o.name_any();
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => deleted.push(format!("{label} {name}")),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(api_error(e, "delete", resource)),
        }
    }
    Ok(deleted)
}

/// Waits, within `timeout`, until no pod of ours is left in `ns` (and, when `namespace`,
/// the namespace itself is gone).
async fn wait_gone(
    client: &kube::Client,
    ns: &str,
    namespace: bool,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(), K8sError> {
    let lp = ListParams::default().labels(&managed_selector());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + timeout;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(K8sError::Interrupted("waiting for the deletion".into()));
        }
        let pods_left = pods.list(&lp).await.map(|l| l.items.len()).unwrap_or(0);
        let ns_left = namespace && namespaces.get_opt(ns).await.ok().flatten().is_some();
        if pods_left == 0 && !ns_left {
            return Ok(());
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
    use crate::k8s::{Arch, NginxConfig};

    fn setup() -> Setup {
        Setup::of_presets(&[Arch::Intel, Arch::Arm])
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
            let dry_run = req.uri().query().is_some_and(|q| q.contains("dryRun=All"));
            let response = if req.method() == ::http::Method::PATCH && dry_run {
                // A dry run changes nothing: it answers the object as it would be.
                let body = req.into_body().collect_bytes().await.unwrap();
                Response::builder().body(Body::from(body.to_vec())).unwrap()
            } else if req.method() == ::http::Method::PATCH {
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
            inspected: Default::default(),
        };
        let first = apply_all(&cluster, &setup()).await.unwrap();
        assert!(
            first.iter().all(|a| a.change == Change::Created),
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
            second
                .iter()
                .all(|a| a.change == Change::Unchanged && a.took_over.is_empty()),
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
            .filter(|a| a.change == Change::Configured)
            .map(|a| a.what.as_str())
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

    #[test]
    fn unschedulable_waits_for_the_schedulers_next_try_after_a_release() {
        let start = tokio::time::Instant::now();
        let mut seen = Seen::default();
        let mut releases = Releases::default();
        // Nothing released: an Unschedulable pod is final at once (no node fits it).
        releases.note(&seen, start);
        assert!(!releases.recent(start));
        let terminating: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "old", "deletionTimestamp": "2026-12-02T13:17:51Z"}}))
        .unwrap();
        seen.pods.insert("old".into(), terminating);
        releases.note(&seen, start);
        // Gone a second later; the scheduler tries again within its back-off.
        seen.pods.clear();
        let gone = start + Duration::from_secs(1);
        releases.note(&seen, gone);
        assert!(releases.recent(gone));
        assert!(releases.recent(start + RESCHEDULE_WITHIN - Duration::from_millis(1)));
        assert!(!releases.recent(start + RESCHEDULE_WITHIN));
        // A rollback starts as a release: its failed pods may be gone before it looks.
        let rollback = Releases { last: Some(gone) };
        assert!(rollback.recent(gone + Duration::from_secs(10)));
    }

    #[test]
    fn a_conflict_names_each_field_and_its_manager() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 409, "reason": "Conflict",
            "message": "Apply failed with 1 conflict: conflict with \"kubectl\" using apps/v1: .spec.replicas",
            "details": {"causes": [{"reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl\" using apps/v1", "field": ".spec.replicas"}]}
        }))
        .unwrap();
        assert_eq!(conflicts(&status), [".spec.replicas (from kubectl)"]);
    }

    #[tokio::test]
    async fn a_namespace_that_is_not_ours_is_left_alone() {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let cluster = Cluster {
            client: kube::Client::new(svc, "nginx"),
            namespace: "nginx".into(),
            server: "mock".into(),
            inspected: Default::default(),
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
