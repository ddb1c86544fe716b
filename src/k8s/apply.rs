//! `up`'s first half: the setup applied server-side as archbench (a second `up` changes
//! nothing), its certificate made once.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::client::api_error;
use super::manifests::{manifests, Manifest};
use super::status::PodRow;
use super::{is_ours, Cluster, K8sError, Setup, FIELD_MANAGER};

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
    let before = live(api, &name, kind)
        .await?
        .map(|o| o.meta().resource_version.clone().unwrap_or_default());
    apply_after(api, obj, kind, before).await
}

/// The object as the API server has it now, if it exists.
async fn live<K>(api: &Api<K>, name: &str, kind: &str) -> Result<Option<K>, K8sError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.get_opt(name)
        .await
        .map_err(|e| api_error(e, "get", kind))
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

/// [`apply`] for a Deployment, and its replicas said taken over when someone else changed
/// them without a field manager to show for it: `kubectl scale --replicas=0` goes through
/// the scale subresource, whose zero is left out of the fields it records, so nobody owns
/// `.spec.replicas` and the dry run finds no conflict while the apply raises them again.
async fn apply_deployment(
    api: &Api<Deployment>,
    d: &Deployment,
) -> Result<(Change, Vec<String>), K8sError> {
    let live = live(api, &d.name_any(), "deployments.apps").await?;
    let before = live
        .as_ref()
        .map(|l| l.resource_version().unwrap_or_default());
    let (change, mut took_over) = apply_after(api, d, "deployments.apps", before).await?;
    let declared = d.spec.replicas;
    if let (Some(live), Some(declared)) = (live, declared) {
        let was = live.spec.replicas;
        let named = took_over.iter().any(|t| t.starts_with(".spec.replicas"));
        if was != Some(declared) && !named && !owns_replicas(&live) {
            took_over.push(format!(
                ".spec.replicas (it was {}, set outside archbench)",
                was.unwrap_or(1)
            ));
        }
    }
    Ok((change, took_over))
}

/// Whether archbench's own apply holds a Deployment's `.spec.replicas` (then a change of
/// them is its own: a variant's replicas= changed).
fn owns_replicas(d: &Deployment) -> bool {
    d.managed_fields().iter().any(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER)
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0["f:spec"].get("f:replicas").is_some())
    })
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
                match live(&api, &name, "namespaces").await? {
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
                apply_deployment(&Api::namespaced(client.clone(), ns), o).await?
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
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            apply_all(&cluster, &setup()),
        )
        .await;
        let next = server.await.unwrap();
        assert_eq!(next, "/api/v1/namespaces/nginx/configmaps/nginx-config");
    }
}
