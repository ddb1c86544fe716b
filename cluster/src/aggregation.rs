//! `metrics.k8s.io` through the API server's aggregation layer, as a cluster's metrics-server
//! add-on sets it up: a Service in kube-system whose endpoint is metrics-server's address (it
//! runs as a process of the cluster, not as a pod), and the APIService pointing at it with our
//! CA as its bundle. Ready once the API server reports the APIService Available.

use std::time::{Duration, Instant};

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::error::{ClusterError, Result};
use crate::pki::Pki;
use crate::topology;

const NAME: &str = "metrics-server";
const API_SERVICE: &str = "v1beta1.metrics.k8s.io";

fn apply_params() -> PatchParams {
    PatchParams::apply("archbench-cluster").force()
}

async fn apply(
    client: &kube::Client,
    ar: &ApiResource,
    ns: Option<&str>,
    obj: serde_json::Value,
) -> Result<()> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    api.patch(&name, &apply_params(), &Patch::Apply(&obj))
        .await
        .map_err(ClusterError::kube(format!("apply {} {name}", ar.kind)))?;
    Ok(())
}

/// Creates the Service, its EndpointSlice and the APIService.
pub async fn register(client: &kube::Client, pki: &Pki) -> Result<()> {
    use base64::Engine as _;
    let ca = std::fs::read(pki.ca_cert()).map_err(ClusterError::io(format!(
        "read {}",
        pki.ca_cert().display()
    )))?;
    let labels = json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "archbench-cluster"});
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": "kube-system", "labels": labels},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": topology::METRICS_SERVER_PORT, "protocol": "TCP"}]},
    });
    let mut slice_labels = labels.clone();
    slice_labels["kubernetes.io/service-name"] = json!(NAME);
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": "kube-system", "labels": slice_labels},
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": topology::METRICS_SERVER_PORT, "protocol": "TCP"}],
        "endpoints": [{"addresses": [topology::METRICS_SERVER_IP.to_string()], "conditions": {"ready": true}}],
    });
    let api_service = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": API_SERVICE, "labels": labels},
        "spec": {
            "service": {"name": NAME, "namespace": "kube-system", "port": 443},
            "group": "metrics.k8s.io", "version": "v1beta1",
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            "groupPriorityMinimum": 100, "versionPriority": 100,
        },
    });
    let svc = ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&());
    let eps = ApiResource::erase::<k8s_openapi::api::discovery::v1::EndpointSlice>(&());
    let aps = ApiResource::erase::<APIService>(&());
    apply(client, &svc, Some("kube-system"), service).await?;
    apply(client, &eps, Some("kube-system"), slice).await?;
    apply(client, &aps, None, api_service).await
}

/// Waits until the API server reaches metrics-server (APIService Available).
pub async fn available(
    client: &kube::Client,
    deadline: Duration,
    log: &std::path::Path,
) -> Result<Duration> {
    let api: Api<APIService> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let ok = api
            .get_opt(API_SERVICE)
            .await
            .ok()
            .flatten()
            .is_some_and(|a| {
                a.status.and_then(|s| s.conditions).is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Available" && c.status == "True")
                })
            });
        if ok {
            return Ok(start.elapsed());
        }
        if start.elapsed() >= deadline {
            return Err(ClusterError::NotReady {
                what: format!("the APIService {API_SERVICE}"),
                seconds: deadline.as_secs(),
                log: log.to_path_buf(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
