//! What the watches of a setup saw: its Deployments, Services, pods and the namespace's
//! EndpointSlices, folded into maps the waits' conditions read.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::{managed_selector, variant_of, K8sError, Setup};

/// What the cluster holds now, as the wait sees it.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) deployments: BTreeMap<String, Deployment>,
    pub(super) services: BTreeMap<String, Service>,
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
    pub(super) fn ready_endpoints(&self, service: &str) -> usize {
        self.slices
            .values()
            .filter(|s| s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service))
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count()
    }

    /// Takes in what the watches sent next; a failed watch (but the slices' one that RBAC
    /// refuses) or their end is the wait's error.
    pub(super) fn update(&mut self, next: Option<SetupUpdate>) -> Result<(), K8sError> {
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
pub(super) fn listed<K>(flag: &mut bool, ev: &watcher::Event<K>) {
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

pub(super) fn fold<K: ResourceExt>(map: &mut BTreeMap<String, K>, ev: watcher::Event<K>) {
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

/// The setup's watches as one stream.
pub(super) type SetupUpdates =
    futures::stream::SelectAll<futures::stream::BoxStream<'static, SetupUpdate>>;

/// One thing the setup's watches send: an update, or the resource whose watch failed and why.
pub(super) type SetupUpdate = Result<Update, (&'static str, watcher::Error)>;

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
