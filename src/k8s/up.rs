//! `archbench k8s up`: the setup applied, its pods rolled out, the old ones off the
//! Services, and each address tried, before it says the setup is ready.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::apply::{apply_all, with_certificate, Applied, Change, UpReport};
use super::client::api_error;
use super::manifests::{config_file, CONFIG_MAP};
use super::rollout::{check_placement, wait_ready};
use super::routes::wait_routed;
use super::status::status;
use super::{managed_selector, variant_of, Cluster, K8sError, Server, Setup};

/// `archbench k8s up`: apply, then wait (watching) until every Deployment has rolled out and
/// every Service has its address, telling `progress` what it waits for.
pub async fn up(
    cluster: &Cluster,
    setup: &Setup,
    progress: &mut dyn FnMut(&str),
    stop: &crate::stop::Stop,
) -> Result<UpReport, K8sError> {
    check_placement(cluster, setup).await?;
    check_shared_config(cluster, setup).await?;
    let setup = &with_certificate(cluster, setup).await?;
    let changes = apply_all(cluster, setup).await?;
    let left = || applied_before(&changes);
    wait_ready(cluster, setup, progress, stop)
        .await
        .map_err(|e| e.leaving(left))?;
    // Ready endpoints are in the API; the proxies' rules follow them a moment later, and an
    // `up` that changed the setup rolled its pods as `config` does. Ready means a load can
    // start now, so the old pods must be off the Services and each address is tried
    // (bounded: it may well be unreachable from here, and in-cluster loads do not need it).
    // Its own --wait-timeout, as the rollout had: a rollout that took most of its budget
    // must not leave none for the old pods to go.
    let deadline = tokio::time::Instant::now() + setup.wait_timeout;
    let not_answering = wait_routed(cluster, setup, deadline, progress, stop)
        .await
        .map_err(|e| e.leaving(left))?;
    let rows = status(cluster).await?;
    Ok(UpReport {
        changes,
        rows,
        not_answering,
    })
}

/// What an interrupted `up` leaves: each object it created or changed (the wait was cut
/// short, not the apply), and what shows and removes them.
fn applied_before(changes: &[Applied]) -> String {
    let changed: Vec<String> = changes
        .iter()
        .filter(|a| matches!(a.change, Change::Created | Change::Configured))
        .map(|a| format!("{} {}", a.what, a.change.as_str()))
        .collect();
    if changed.is_empty() {
        return "nothing was changed: the cluster already had this setup".into();
    }
    format!(
        "applied before it, and left as it is: {} (archbench k8s status shows where it runs, \
         archbench k8s down removes it)",
        changed.join(", ")
    )
}

/// The shared `nginx-config` would change under Deployments this `up` does not declare:
/// their pods keep the old configuration until one is replaced, which then runs this one (a
/// TLS listener or the user's configuration gone, and nothing rolls to say so). Refused,
/// naming them, before anything is applied.
async fn check_shared_config(cluster: &Cluster, setup: &Setup) -> Result<(), K8sError> {
    let Some(text) = setup.shared_text().filter(|_| setup.shares_config()) else {
        return Ok(());
    };
    let ns = setup.namespace.as_str();
    let current = Api::<ConfigMap>::namespaced(cluster.client.clone(), ns)
        .get_opt(CONFIG_MAP)
        .await
        .map_err(|e| api_error(e, "get", "configmaps"))?;
    let unchanged = current
        .as_ref()
        .and_then(|c| c.data.as_ref()?.get(config_file(Server::Nginx).0))
        .is_none_or(|now| *now == text);
    if unchanged {
        return Ok(());
    }
    let deployments = Api::<Deployment>::namespaced(cluster.client.clone(), ns)
        .list(&ListParams::default().labels(&managed_selector()))
        .await
        .map_err(|e| api_error(e, "list", "deployments.apps"))?
        .items;
    let declared = |name: &str| setup.variants.iter().any(|v| v.name == name);
    let others: Vec<String> = deployments
        .iter()
        .filter(|d| mounts_shared_config(d))
        .filter_map(|d| variant_of(d.labels()).map(str::to_string))
        .filter(|name| !declared(name))
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    Err(K8sError::Failed {
        what: format!("ConfigMap {CONFIG_MAP}"),
        message: format!(
            "{} run with another configuration in it, and this `up` does not declare them: give the \
             configuration they were deployed with (the same --config and --tls), declare them too \
             to change all of them, or give the new variants their own (config=FILE)",
            others.join(", ")
        ),
    })
}

/// Whether a Deployment's pods mount the shared configuration.
fn mounts_shared_config(d: &Deployment) -> bool {
    let volumes = d
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == CONFIG_MAP))
}
