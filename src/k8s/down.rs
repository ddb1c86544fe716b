//! `down`: deletes what carries archbench's label, the namespace only when archbench created
//! it, and waits until it is gone.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::client::{api_error, not_found};
use super::seen::{fold, listed};
use super::wait::{Condition, Look, Wait};
use super::{is_ours, managed_selector, Cluster, K8sError};
use crate::stop::Stop;

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

/// Objects in `ns` that are not archbench's (a namespace holding any is not deleted): of
/// every kind the cluster serves that lives in a namespace (its discovery, so a Secret, a
/// RoleBinding or a custom resource of the user's counts as much as a Deployment; a fixed
/// list of kinds let a namespace holding a user's Secrets be deleted). A kind that cannot be
/// listed keeps the namespace too: what it holds is unknown.
async fn foreign_objects(
    client: &kube::Client,
    ns: &str,
    services_deleted: &[String],
) -> Result<Vec<String>, K8sError> {
    use kube::api::DynamicObject;
    use kube::discovery::{verbs, Discovery, Scope};
    // Events and metrics are records of objects, not objects anyone keeps.
    let discovery = match Discovery::new(client.clone())
        .exclude(&["events.k8s.io", "metrics.k8s.io"])
        .run()
        .await
    {
        Ok(d) => d,
        Err(e) => {
            return Ok(vec![format!(
                "what the cluster serves could not be read ({e})"
            )])
        }
    };
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            let listable = caps.scope == Scope::Namespaced && caps.supports_operation(verbs::LIST);
            if !listable || (ar.group.is_empty() && ar.plural == "events") {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let items = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                Err(e) => {
                    out.push(format!(
                        "{} (cannot be listed: {})",
                        ar.kind,
                        short_error(&e)
                    ));
                    continue;
                }
            };
            let foreign = items
                .iter()
                .filter(|o| !is_ours(o.meta()) && o.meta().owner_references.is_none())
                .map(|o| o.name_any())
                .filter(|name| !made_by_kubernetes(&ar, name, services_deleted))
                .map(|name| format!("{} {name}", ar.kind));
            out.extend(foreign);
        }
    }
    // Discovery's groups come in no fixed order.
    out.sort();
    Ok(out)
}

/// What Kubernetes itself puts in every namespace, or keeps for a Service of ours until it
/// is gone: the cluster's CA bundle, the default service account, a Service's Endpoints.
fn made_by_kubernetes(
    ar: &kube::api::ApiResource,
    name: &str,
    services_deleted: &[String],
) -> bool {
    if !ar.group.is_empty() {
        return false;
    }
    match ar.plural.as_str() {
        "configmaps" => name == "kube-root-ca.crt",
        "serviceaccounts" => name == "default",
        "endpoints" => services_deleted
            .iter()
            .any(|s| s.strip_prefix("Service ") == Some(name)),
        _ => false,
    }
}

/// An API error in a few words (its message, not its debug form).
fn short_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

pub async fn down(
    cluster: &Cluster,
    keep_namespace: bool,
    timeout: Duration,
    stop: &Stop,
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
            foreign_objects(client, ns, &deleted).await?
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
/// the namespace itself is gone), watching both.
async fn wait_gone(
    client: &kube::Client,
    ns: &str,
    namespace: bool,
    timeout: Duration,
    stop: &Stop,
) -> Result<(), K8sError> {
    let pods = watcher(
        Api::<Pod>::namespaced(client.clone(), ns),
        watcher::Config::default().labels(&managed_selector()),
    )
    .default_backoff()
    .map_ok(|e| Removal::Pod(Box::new(e)));
    let named = watcher::Config::default().fields(&format!("metadata.name={ns}"));
    let namespaces = watcher(Api::<Namespace>::all(client.clone()), named)
        .default_backoff()
        .map_ok(|e| Removal::Namespace(Box::new(e)));
    let events = if namespace {
        futures::stream::select(pods.boxed(), namespaces.boxed()).boxed()
    } else {
        pods.boxed()
    };
    let mut gone = Gone {
        namespace_watched: namespace,
        timeout,
        ..Gone::default()
    };
    let mut quiet = |_: &str| {};
    let wait = Wait {
        waiting_for: "the deletion",
        deadline: tokio::time::Instant::now() + timeout,
        stop,
        progress: &mut quiet,
    };
    wait.until(events, &mut gone).await
}

/// What `down`'s watches send.
enum Removal {
    // Boxed: an event carries a whole object.
    Pod(Box<watcher::Event<Pod>>),
    Namespace(Box<watcher::Event<Namespace>>),
}

/// `down`'s condition: none of our pods left and, when it is deleted, no namespace.
#[derive(Default)]
struct Gone {
    pods: BTreeMap<String, Pod>,
    pods_listed: bool,
    namespace_watched: bool,
    namespaces: BTreeMap<String, Namespace>,
    namespaces_listed: bool,
    timeout: Duration,
}

impl Condition for Gone {
    type Event = Result<Removal, watcher::Error>;
    type Met = ();

    fn seen(&mut self, event: Option<Self::Event>) -> Result<(), K8sError> {
        match event {
            Some(Ok(Removal::Pod(ev))) => {
                listed(&mut self.pods_listed, &ev);
                fold(&mut self.pods, *ev);
            }
            Some(Ok(Removal::Namespace(ev))) => {
                listed(&mut self.namespaces_listed, &ev);
                fold(&mut self.namespaces, *ev);
            }
            // The watcher tries again (backing off); what it saw last stands meanwhile.
            Some(Err(_)) => {}
            None => {
                return Err(K8sError::Failed {
                    what: "watch".into(),
                    message: "the watches of the deletion ended".into(),
                })
            }
        }
        Ok(())
    }

    async fn look(&mut self, _at: tokio::time::Instant) -> Result<Look<()>, K8sError> {
        let namespace_gone =
            !self.namespace_watched || (self.namespaces_listed && self.namespaces.is_empty());
        Ok(
            if self.pods_listed && self.pods.is_empty() && namespace_gone {
                Look::Met(())
            } else {
                Look::Pending(String::new())
            },
        )
    }

    fn timed_out(&self, _last_line: &str) -> K8sError {
        let terminating = self.namespace_watched && !self.namespaces.is_empty();
        K8sError::Timeout {
            seconds: self.timeout.as_secs(),
            what: format!(
                "the deletion ({} pods left{})",
                self.pods.len(),
                if terminating {
                    ", namespace terminating"
                } else {
                    ""
                }
            ),
            advice: "see `kubectl get all -n NAMESPACE`; a finalizer may hold it".into(),
        }
    }
}
