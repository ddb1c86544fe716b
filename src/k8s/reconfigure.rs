//! `k8s config tuned|stock|FILE`: check the configuration with the pods' own nginx first,
//! apply it (the ConfigMap, and the Deployments' template whose configuration hash rolls the
//! pods, as `kubectl rollout restart` would), wait, and put the previous one back when the
//! new pods do not come up, saying why.

use std::sync::atomic::AtomicBool;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::manifests::CONFIG_MAP;
use super::pods::{exec, pods_of};
use super::setup::{apply_all, wait_ready, PodRow};
use super::{Arch, Cluster, K8sError, NginxConfig, PoolSelector, ServiceType, Setup};

/// What `config` did.
#[derive(Debug)]
pub enum Reconfigured {
    /// The new configuration runs.
    Applied { rows: Vec<PodRow>, checked: String },
    /// It was the configuration already running.
    Unchanged,
    /// The new pods failed; the previous configuration runs again.
    RolledBack { why: String },
}

/// The setup as the cluster holds it now (what `up` applied), read back from the objects.
pub async fn current_setup(
    cluster: &Cluster,
    wait_timeout: std::time::Duration,
) -> Result<Setup, K8sError> {
    let ns = cluster.namespace.as_str();
    let lp = ListParams::default().labels(&super::managed_selector());
    let deployments = Api::<Deployment>::namespaced(cluster.client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| api_error(e, "list", "deployments.apps"))?
        .items;
    let mut archs: Vec<Arch> = deployments
        .iter()
        .filter_map(|d| Arch::from_name(d.labels().get("arch")?))
        .collect();
    archs.sort();
    let Some(first) = deployments.first() else {
        return Err(K8sError::Failed {
            what: "find the setup".into(),
            message: format!(
                "no Deployment of archbench's in namespace {ns}; `archbench k8s up` creates them"
            ),
        });
    };
    let pod = first.spec.template.spec.as_ref();
    let image = pod
        .and_then(|p| p.containers.first()?.image.clone())
        .unwrap_or_else(|| "nginx:latest".into());
    let pools = match pod.and_then(|p| p.node_selector.as_ref()) {
        Some(sel) if sel.contains_key("agentpool") => PoolSelector::Agentpool,
        _ => PoolSelector::Arch,
    };
    let mounted = pod.is_some_and(|p| p.volumes.as_ref().is_some_and(|v| !v.is_empty()));
    let config = if mounted {
        let cm = Api::<ConfigMap>::namespaced(cluster.client.clone(), ns)
            .get_opt(CONFIG_MAP)
            .await
            .map_err(|e| api_error(e, "get", "configmaps"))?;
        let text = cm
            .and_then(|c| c.data?.get("nginx.conf").cloned())
            .unwrap_or_default();
        if text == super::TUNED_NGINX_CONF {
            NginxConfig::Tuned
        } else {
            NginxConfig::File {
                path: "(the running configuration)".into(),
                text,
            }
        }
    } else {
        NginxConfig::Stock
    };
    let service_type = match archs.first() {
        Some(a) => Api::<Service>::namespaced(cluster.client.clone(), ns)
            .get_opt(&a.service())
            .await
            .map_err(|e| api_error(e, "get", "services"))?
            .and_then(|s| s.spec?.type_)
            .map_or(ServiceType::LoadBalancer, |t| match t.as_str() {
                "NodePort" => ServiceType::NodePort,
                "ClusterIP" => ServiceType::ClusterIp,
                _ => ServiceType::LoadBalancer,
            }),
        None => ServiceType::LoadBalancer,
    };
    Ok(Setup {
        namespace: ns.to_string(),
        archs,
        image,
        config,
        service_type,
        pools,
        wait_timeout,
    })
}

/// Runs `nginx -t` on `text` inside one of the pods (their nginx binary and modules, their
/// include paths); returns nginx's words. Err(message) when nginx rejects it.
pub async fn check_in_pod(
    cluster: &Cluster,
    text: &str,
) -> Result<Result<String, String>, K8sError> {
    let pods = pods_of(cluster, None).await?;
    let Some(pod) = pods.first() else {
        return Ok(Ok("not checked: no pod to run nginx -t in".into()));
    };
    let name = pod.name_any();
    // Beside the real nginx.conf, so relative includes resolve as they will; named by the
    // pod and the shell, so two checks at once (two users, or pods sharing a filesystem) never
    // read or remove each other's file.
    let script = "f=/etc/nginx/archbench-check-$(hostname)-$$.conf; cat > $f 2>/dev/null || { f=/tmp/archbench-check-$(hostname)-$$.conf; cat > $f; }; nginx -t -c $f 2>&1; s=$?; rm -f $f; exit $s";
    match exec(cluster, &name, &["sh", "-c", script], Some(text.as_bytes())).await {
        Ok(out) if out.exit_code == 0 => Ok(Ok(format!("nginx -t in {name}: ok"))),
        Ok(out) => Ok(Err(out.stdout_text().trim().replace('\n', " | "))),
        Err(K8sError::Forbidden { .. }) => Ok(Ok(
            "not checked: exec is not allowed here; the rollout will tell".into(),
        )),
        Err(e) => Err(e),
    }
}

/// Applies `config`, waits for the new pods, and rolls back when they fail.
pub async fn reconfigure(
    cluster: &Cluster,
    config: NginxConfig,
    wait_timeout: std::time::Duration,
    progress: &mut dyn FnMut(&str),
    stop: &AtomicBool,
) -> Result<Reconfigured, K8sError> {
    let old = current_setup(cluster, wait_timeout).await?;
    if old.config.text() == config.text() {
        return Ok(Reconfigured::Unchanged);
    }
    let checked = match config.text() {
        Some(text) => match check_in_pod(cluster, text).await? {
            Ok(words) => words,
            Err(nginx_says) => {
                return Err(K8sError::Rejected {
                    message: nginx_says,
                })
            }
        },
        None => "stock: the image's own configuration".into(),
    };
    let new = Setup {
        config,
        ..old.clone()
    };
    apply_all(cluster, &new).await?;
    if new.config.text().is_none() {
        // Back to the image's own: the ConfigMap is no longer mounted.
        let _ = Api::<ConfigMap>::namespaced(cluster.client.clone(), &cluster.namespace)
            .delete(CONFIG_MAP, &Default::default())
            .await;
    }
    match wait_ready(cluster, &new, &new.archs, progress, stop).await {
        Ok(()) => Ok(Reconfigured::Applied {
            rows: super::status(cluster).await?,
            checked,
        }),
        Err(e @ K8sError::Interrupted(_)) => Err(e),
        Err(why) => {
            // Why, in the new pods' own words, before they are gone.
            let hash = new.config.text().map(super::manifests::sha256_hex);
            let mut logs = Vec::new();
            for p in pods_of(cluster, None).await.unwrap_or_default() {
                if p.annotations().get(super::manifests::CONFIG_HASH) == hash.as_ref() {
                    let name = p.name_any();
                    let lines =
                        super::setup::last_log_lines(cluster, &cluster.namespace, &name, 5).await;
                    logs.push(format!("{name}: {lines}"));
                }
            }
            progress("the new pods failed: putting the previous configuration back");
            apply_all(cluster, &old).await?;
            wait_ready(cluster, &old, &old.archs, progress, stop).await?;
            let why = match why {
                // A crash already quotes its log.
                K8sError::Crashing { .. } => why.to_string(),
                _ if logs.is_empty() => why.to_string(),
                _ => format!("{why}; the new pods' last log lines: {}", logs.join("; ")),
            };
            Ok(Reconfigured::RolledBack { why })
        }
    }
}
