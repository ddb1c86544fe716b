//! `archbench k8s up`: the setup applied, its pods rolled out, the old ones off the
//! Services, and each address tried, before it says the setup is ready.

use super::apply::{apply_all, with_certificate, UpReport};
use super::rollout::{check_placement, wait_ready};
use super::routes::wait_routed;
use super::status::status;
use super::{Cluster, K8sError, Setup};

/// `archbench k8s up`: apply, then wait (watching) until every Deployment has rolled out and
/// every Service has its address, telling `progress` what it waits for.
pub async fn up(
    cluster: &Cluster,
    setup: &Setup,
    progress: &mut dyn FnMut(&str),
    stop: &crate::stop::Stop,
) -> Result<UpReport, K8sError> {
    check_placement(cluster, setup).await?;
    let setup = &with_certificate(cluster, setup).await?;
    let changes = apply_all(cluster, setup).await?;
    wait_ready(cluster, setup, progress, stop).await?;
    // Ready endpoints are in the API; the proxies' rules follow them a moment later, and an
    // `up` that changed the setup rolled its pods as `config` does. Ready means a load can
    // start now, so the old pods must be off the Services and each address is tried
    // (bounded: it may well be unreachable from here, and in-cluster loads do not need it).
    // Its own --wait-timeout, as the rollout had: a rollout that took most of its budget
    // must not leave none for the old pods to go.
    let deadline = tokio::time::Instant::now() + setup.wait_timeout;
    let not_answering = wait_routed(cluster, setup, deadline, progress, stop).await?;
    let rows = status(cluster).await?;
    Ok(UpReport {
        changes,
        rows,
        not_answering,
    })
}
