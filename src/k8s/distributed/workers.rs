//! Talking to a Job's workers and reading their pods: the controller's half of the control
//! protocol (through the API server's pod proxy, so the pods need no API access), bounded API
//! calls, and what a worker pod's state says.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::{InCluster, WholeLoad};
use crate::agent_protocol::{CONTROL_PORT, TOKEN_HEADER};
use crate::engine::Part;
use crate::k8s::client::api_error;
use crate::k8s::pods::{trouble, PodTrouble};
use crate::k8s::{Cluster, K8sError};
use crate::stats::LostSource;

/// How long one API call may take.
pub(super) const API_DEADLINE: Duration = Duration::from_secs(30);

/// GET or POST through the API server's proxy to a worker's control endpoint.
pub(super) async fn control(
    cluster: &Cluster,
    pod: &str,
    post: Option<(&str, &str)>,
    path: &str,
) -> Result<String, K8sError> {
    let uri = format!(
        "/api/v1/namespaces/{}/pods/{pod}:{CONTROL_PORT}/proxy{path}",
        cluster.namespace
    );
    let (verb, req) = match post {
        Some((token, body)) => (
            "create",
            ::http::Request::post(&uri)
                .header(TOKEN_HEADER, token)
                .body(body.as_bytes().to_vec()),
        ),
        None => ("get", ::http::Request::get(&uri).body(Vec::new())),
    };
    let req = req.map_err(|e| K8sError::Request {
        what: format!("request to {pod}"),
        source: e,
    })?;
    cluster
        .client
        .request_text(req)
        .await
        .map_err(|e| api_error(e, verb, "pods/proxy"))
}

/// One API call on the runtime, bounded: a client without a read timeout would otherwise
/// wait on a silent API server for ever.
pub(super) fn call<T>(
    runtime: &tokio::runtime::Runtime,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, K8sError>>,
) -> Result<T, K8sError> {
    runtime
        .block_on(async { tokio::time::timeout(API_DEADLINE, fut).await })
        .unwrap_or_else(|_| {
            Err(K8sError::Timeout {
                seconds: API_DEADLINE.as_secs(),
                what: what.to_string(),
                advice: "the API server did not answer; check `kubectl get --raw /readyz`".into(),
            })
        })
}

/// A pod's phase as the API says it (Pending until it says anything).
pub(super) fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// What keeps a worker pod from running, if anything clear does.
pub(super) fn blocked(p: &Pod) -> Option<String> {
    Some(match trouble(p)? {
        PodTrouble::Unschedulable { message } => format!(
            "unschedulable ({message}); give --node-selector, or a node without nginx"
        ),
        PodTrouble::ImagePull { message, .. } => format!(
            "its image cannot be pulled ({message}); build and push one (see the README) and pass --image"
        ),
        PodTrouble::Crashing { reason, last } => match last {
            Some(last) => format!("it keeps crashing ({reason}, last {last})"),
            None => format!("it keeps crashing ({reason})"),
        },
    })
}

/// A worker whose result never came, with its share of the load.
pub(super) fn lost_worker(
    index: u32,
    pod: &str,
    reason: String,
    how: &InCluster,
    load: &WholeLoad,
) -> LostSource {
    let share = Part {
        index,
        count: how.workers,
    }
    .share(load.connections);
    LostSource {
        name: worker_name(index, pod),
        reason,
        connections: share,
        rate: load
            .rate
            .map(|r| r * share as f64 / load.connections.max(1) as f64),
    }
}

pub(super) fn worker_name(index: u32, pod: &str) -> String {
    format!("worker {index} (pod {pod})")
}

/// How a worker pod ended, in a few words.
pub(super) fn ended(p: &Pod) -> String {
    let terminated = p.status.as_ref().and_then(|s| {
        s.container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .terminated
            .clone()
    });
    match terminated {
        Some(t) => format!(
            "its pod {} (exit {}{})",
            if t.exit_code == 0 { "ended" } else { "failed" },
            t.exit_code,
            t.reason.map(|r| format!(", {r}")).unwrap_or_default()
        ),
        None => format!("its pod is {}", phase(p)),
    }
}
