//! `down`: deletes what carries archbench's label, the namespace only when archbench created
//! it, and waits until it is gone.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::client::{api_error, not_found};
use super::{is_ours, managed_selector, Cluster, K8sError};

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
