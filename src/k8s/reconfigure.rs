//! `k8s config tuned|stock|FILE`: check the configuration with the pods' own nginx first,
//! apply it (the ConfigMap, and the Deployments' template whose configuration hash rolls the
//! pods, as `kubectl rollout restart` would), wait until the new pods are ready and the old
//! ones are off the Services (a load right after `config` measures the new configuration),
//! and put the previous one back when the new pods do not come up, saying why.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::apply::apply_all;
use super::client::api_error;
use super::manifests::CONFIG_MAP;
use super::pods::{exec, pods_of};
use super::rollout::wait_rollout;
use super::routes::wait_routed;
use super::status::PodRow;
use super::tls;
use super::variant::{config_map_of, SPEC_ANNOTATION};
use super::{
    Arch, Cluster, K8sError, NginxConfig, PoolSelector, Server, ServiceType, Setup, Variant,
};

/// What `config` did.
#[derive(Debug)]
pub enum Reconfigured {
    /// The new configuration runs, and only it behind the Services.
    Applied {
        rows: Vec<PodRow>,
        checked: String,
        /// Service addresses that did not accept every connection from here when `config`
        /// ended (as [`super::UpReport::not_answering`]).
        not_answering: Vec<String>,
    },
    /// It was the configuration already running.
    Unchanged,
    /// The new pods failed; the previous configuration runs again.
    RolledBack { why: String },
}

/// The setup as the cluster holds it now (what `up` applied), read back from the objects:
/// the presets from their labels and node selectors, the other variants from the keys their
/// Deployment keeps ([`super::variant::SPEC_ANNOTATION`]), a configuration file's text from
/// the variant's ConfigMap.
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
    if deployments.is_empty() {
        return Err(K8sError::Failed {
            what: "find the setup".into(),
            message: format!(
                "no Deployment of archbench's in namespace {ns}; `archbench k8s up` creates them"
            ),
        });
    }
    let maps = Api::<ConfigMap>::namespaced(cluster.client.clone(), ns);
    let shared = maps
        .get_opt(CONFIG_MAP)
        .await
        .map_err(|e| api_error(e, "get", "configmaps"))?;
    // The https listener `--tls` added is not part of the configuration the user gave.
    let shared = shared.map(|c| text_of(Some(c)));
    let shared_tls = shared.as_deref().map(tls::has_tls);
    let shared_http3 = shared.as_deref().is_some_and(tls::has_http3);
    let config = match shared.map(|t| tls::without_tls(&t)) {
        Some(text) if text == super::TUNED_NGINX_CONF => NginxConfig::Tuned,
        Some(text) => NginxConfig::File {
            path: "(the running configuration)".into(),
            text,
        },
        None => NginxConfig::Stock,
    };
    let mut variants = Vec::new();
    for d in &deployments {
        if let Some(v) = variant_from(d, &maps).await? {
            variants.push(v);
        }
    }
    variants.sort_by_key(|v| (v.preset.is_none(), v.preset, v.name.clone()));
    let image = setup_image(&deployments).unwrap_or_else(|| "nginx:latest".into());
    let service_type = match variants.first() {
        Some(v) => service_type_of(cluster, &v.service()).await?,
        None => ServiceType::LoadBalancer,
    };
    let mut setup = Setup {
        namespace: ns.to_string(),
        variants,
        image,
        config,
        service_type,
        wait_timeout,
        tls: false,
        http3: false,
        certificate: None,
    };
    // Without a shared ConfigMap, every variant says its own.
    setup.tls = shared_tls.unwrap_or_else(|| setup.variants.iter().any(|v| v.tls == Some(true)));
    // `--http3` was given when an nginx variant answers HTTP/3 (a Caddy one does without).
    setup.http3 = shared_http3 || nginx_http3(&deployments);
    if setup.any_tls() {
        setup.certificate = tls::existing(cluster).await?;
    }
    Ok(setup)
}

/// The image of the variants that name none (`--image`): a Deployment's whose variant gives
/// no image= of its own (a Caddy variant's `caddy:2` is not the setup's).
fn setup_image(deployments: &[Deployment]) -> Option<String> {
    let own_image = |d: &&Deployment| {
        d.annotations()
            .get(SPEC_ANNOTATION)
            .is_some_and(|spec| spec.split(',').any(|k| k.starts_with("image=")))
    };
    let d = deployments.iter().find(|d| !own_image(d))?;
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first()?.image.clone())
}

/// Whether an nginx variant's Deployment says it answers HTTP/3.
fn nginx_http3(deployments: &[Deployment]) -> bool {
    deployments.iter().any(|d| {
        let image = d
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|p| p.containers.first()?.image.clone())
            .unwrap_or_default();
        Server::of_image(&image) == Server::Nginx
            && d.annotations()
                .get(tls::HTTP3_ANNOTATION)
                .map(String::as_str)
                == Some("on")
    })
}

/// The nginx.conf a ConfigMap holds ("" without).
fn text_of(cm: Option<ConfigMap>) -> String {
    cm.and_then(|c| c.data?.get("nginx.conf").cloned())
        .unwrap_or_default()
}

/// The variant a Deployment of archbench's runs: a preset by its labels and node selector,
/// another by the keys it keeps and its ConfigMap's text (None: not one of ours).
async fn variant_from(d: &Deployment, maps: &Api<ConfigMap>) -> Result<Option<Variant>, K8sError> {
    let Some(name) = super::variant_of(d.labels()) else {
        return Ok(None);
    };
    let Some(spec) = d.annotations().get(SPEC_ANNOTATION) else {
        return Ok(Arch::from_name(name).map(|arch| Variant::preset(arch, pools_of(d))));
    };
    let own_text = tls::without_tls(&text_of(
        maps.get_opt(&config_map_of(name))
            .await
            .map_err(|e| api_error(e, "get", "configmaps"))?,
    ));
    let config = |kind: &str| match kind {
        "tuned" => Ok(NginxConfig::Tuned),
        "stock" => Ok(NginxConfig::Stock),
        _ => Ok(NginxConfig::File {
            path: format!("(the running configuration of {name})").into(),
            text: own_text.clone(),
        }),
    };
    let serves_tls = d.annotations().get(tls::TLS_ANNOTATION).map(String::as_str) == Some("on");
    Variant::parse(&format!("{name}:{spec}"), &config)
        .map(|v| {
            Some(Variant {
                tls: Some(serves_tls),
                ..v
            })
        })
        .map_err(|e| K8sError::Failed {
            what: format!("read the setup of {}", d.name_any()),
            message: format!("its {SPEC_ANNOTATION} annotation does not parse: {e}"),
        })
}

/// The type of a Service of the setup (LoadBalancer when it is gone).
async fn service_type_of(cluster: &Cluster, service: &str) -> Result<ServiceType, K8sError> {
    Ok(
        Api::<Service>::namespaced(cluster.client.clone(), &cluster.namespace)
            .get_opt(service)
            .await
            .map_err(|e| api_error(e, "get", "services"))?
            .and_then(|s| s.spec?.type_)
            .map_or(ServiceType::LoadBalancer, |t| match t.as_str() {
                "NodePort" => ServiceType::NodePort,
                "ClusterIP" => ServiceType::ClusterIp,
                _ => ServiceType::LoadBalancer,
            }),
    )
}

/// How a preset's Deployment finds its node pool.
fn pools_of(d: &Deployment) -> PoolSelector {
    let selector = d
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.node_selector.as_ref());
    match selector {
        Some(sel) if sel.contains_key("agentpool") => PoolSelector::Agentpool,
        _ => PoolSelector::Arch,
    }
}

/// Runs `nginx -t` on `text` inside one of the pods (their nginx binary and modules, their
/// include paths); returns nginx's words. Err(message) when nginx rejects it.
pub async fn check_in_pod(
    cluster: &Cluster,
    text: &str,
) -> Result<Result<String, String>, K8sError> {
    let pods = pods_of(cluster, None).await?;
    // A Caddy variant's pod has no nginx to ask.
    let runs_nginx = |p: &&k8s_openapi::api::core::v1::Pod| {
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first()?.image.as_deref());
        Server::of_image(image.unwrap_or_default()) == Server::Nginx
    };
    let Some(pod) = pods.iter().find(runs_nginx) else {
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

/// Applies `config`, waits for the new pods and then for the old ones to leave the Services
/// (each wait within `wait_timeout`), and rolls back when the new pods fail.
pub async fn reconfigure(
    cluster: &Cluster,
    config: NginxConfig,
    wait_timeout: std::time::Duration,
    progress: &mut dyn FnMut(&str),
    stop: &crate::stop::Stop,
) -> Result<Reconfigured, K8sError> {
    let old = current_setup(cluster, wait_timeout).await?;
    if old.config.text() == config.text() {
        return Ok(Reconfigured::Unchanged);
    }
    let new = Setup {
        config,
        ..old.clone()
    };
    // The https listener goes into the new text as into the old: a text it cannot go into
    // is refused here, not applied without it.
    if let Some(why) = new.tls_problem() {
        return Err(K8sError::Usage(format!("the setup serves https: {why}")));
    }
    let checked = match new.config.text() {
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
    // The rollout the apply starts releases the old pods' room, maybe before the wait below
    // sees one terminating: a new pod the scheduler tried before it was free is not yet
    // refused for good.
    let released = tokio::time::Instant::now();
    apply_all(cluster, &new).await?;
    if new.config.text().is_none() {
        // Back to the image's own: the ConfigMap is no longer mounted.
        let _ = Api::<ConfigMap>::namespaced(cluster.client.clone(), &cluster.namespace)
            .delete(CONFIG_MAP, &Default::default())
            .await;
    }
    let left = |how: &'static str| {
        let back = match &old.config {
            NginxConfig::Tuned => "`archbench k8s config tuned`".to_string(),
            NginxConfig::Stock => "`archbench k8s config stock`".to_string(),
            NginxConfig::File { .. } => "`archbench k8s config FILE` with its file".to_string(),
        };
        move || {
            format!(
                "the new configuration is applied and stays, {how} (archbench k8s status shows \
                 them); {back} puts the previous one back"
            )
        }
    };
    match wait_rollout(cluster, &new, Some(released), progress, stop).await {
        Ok(()) => {
            // Its own --wait-timeout, as the rollout had (see `up`).
            let deadline = tokio::time::Instant::now() + wait_timeout;
            let not_answering = wait_routed(cluster, &new, deadline, progress, stop)
                .await
                .map_err(|e| e.leaving(left("its pods ready, the old ones leaving")))?;
            Ok(Reconfigured::Applied {
                rows: super::status(cluster).await?,
                checked,
                not_answering,
            })
        }
        Err(e @ K8sError::Interrupted { .. }) => {
            Err(e.leaving(left("its pods rolling on without archbench")))
        }
        Err(why) => rollback(cluster, &old, &new, why, progress, stop).await,
    }
}

/// Puts `old` back after `new`'s pods failed (`why`), quoting the new pods' last log lines.
async fn rollback(
    cluster: &Cluster,
    old: &Setup,
    new: &Setup,
    why: K8sError,
    progress: &mut dyn FnMut(&str),
    stop: &crate::stop::Stop,
) -> Result<Reconfigured, K8sError> {
    // Why, in the new pods' own words, before they are gone.
    // Only the variants the change reached: one with its own `config=` kept its pods.
    let hashes: Vec<String> = new
        .variants
        .iter()
        .filter(|v| !new.own_config(v))
        .filter_map(|v| new.config_text(v))
        .map(|t| super::manifests::sha256_hex(&t))
        .collect();
    let mut logs = Vec::new();
    for p in pods_of(cluster, None).await.unwrap_or_default() {
        let hash = p.annotations().get(super::manifests::CONFIG_HASH);
        if hash.is_some_and(|h| hashes.contains(h)) {
            let name = p.name_any();
            let lines = super::rollout::last_log_lines(cluster, &cluster.namespace, &name, 5).await;
            logs.push(format!("{name}: {lines}"));
        }
    }
    let why = match why {
        // A crash already quotes its log.
        K8sError::Crashing { .. } => why.to_string(),
        _ if logs.is_empty() => why.to_string(),
        _ => format!("{why}; the new pods' last log lines: {}", logs.join("; ")),
    };
    progress("the new pods failed: putting the previous configuration back");
    // Should the way back fail too, its error says why the new pods failed as well.
    let back = |e: K8sError| {
        match e {
        K8sError::Interrupted { .. } => e.leaving(|| format!(
            "the previous configuration is applied again and stays, its pods rolling on \
             without archbench (archbench k8s status shows them); the new one had failed: {why}"
        )),
        e => K8sError::Failed {
            what: format!("the new configuration's pods failed ({why}); putting the previous one back failed too"),
            message: e.to_string(),
        },
    }
    };
    apply_all(cluster, old).await.map_err(back)?;
    // The failed pods go as the previous ones come back: the room they free may
    // be freed before this wait sees them terminating.
    let released = Some(tokio::time::Instant::now());
    wait_rollout(cluster, old, released, progress, stop)
        .await
        .map_err(back)?;
    // "The previous one is back" once it serves, as the way forward waits: a load started
    // then reached a restored pod whose Service still refused it.
    let deadline = tokio::time::Instant::now() + old.wait_timeout;
    let not_answering = wait_routed(cluster, old, deadline, progress, stop)
        .await
        .map_err(back)?;
    let why = match not_answering.is_empty() {
        true => why,
        false => format!(
            "{why}; not answering from here yet: {}",
            not_answering.join(", ")
        ),
    };
    Ok(Reconfigured::RolledBack { why })
}
