//! Reaching the cluster as kubectl does (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`,
//! `--context`, in-cluster config inside a pod), and turning API errors into one sentence
//! that names what to do.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::ConfigSource;
use super::K8sError;

/// How to reach the cluster: kubectl's flags.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: String,
}

/// A client and the namespace archbench works in.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    pub namespace: String,
    /// The API server's URL, for messages.
    pub server: String,
    /// What `inspect::fingerprint` read of each pod (by UID), so one process execs
    /// `nginx -V` and reads /proc/cpuinfo once per pod, however many runs, watches and
    /// placements ask (each exec is a round trip through the API server to the kubelet).
    pub(super) inspected: super::pod_build::Inspected,
}

/// `--context NAME` names one of the kubeconfig's contexts; "cannot read a kubeconfig:
/// failed to load current context" said the file was the trouble, and not which names it has.
fn known_context(kc: &Kubeconfig, context: &str) -> Result<(), K8sError> {
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    if names.contains(&context) {
        return Ok(());
    }
    Err(K8sError::Usage(format!(
        "--context {context:?}: the kubeconfig has no such context (it has: {})",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )))
}

impl Cluster {
    /// Builds a client and checks the API server answers (`/version`), so an unreachable
    /// cluster is one clear error before anything else.
    pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, K8sError> {
        let kube_opts = KubeConfigOptions {
            context: opts.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config_error = |file: Option<&PathBuf>, e: ConfigSource| K8sError::Config {
            file: file.cloned(),
            source: e,
        };
        if let Some(context) = &opts.context {
            let read = match &opts.kubeconfig {
                Some(path) => Kubeconfig::read_from(path),
                None => Kubeconfig::read(),
            };
            // Unreadable: the reading below says why.
            if let Ok(kc) = read {
                known_context(&kc, context)?;
            }
        }
        let config = match &opts.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| config_error(Some(path), Box::new(e)))?;
                kube::Config::from_custom_kubeconfig(kc, &kube_opts)
                    .await
                    .map_err(|e| config_error(Some(path), Box::new(e)))?
            }
            None => match kube::Config::from_kubeconfig(&kube_opts).await {
                Ok(c) => c,
                // No kubeconfig: inside a pod, the service account's (as kubectl does). The
                // error said is the kubeconfig's: outside a pod that is the one to fix.
                Err(kubeconfig) if opts.context.is_none() => kube::Config::incluster()
                    .map_err(|_| config_error(None, Box::new(kubeconfig)))?,
                Err(e) => return Err(config_error(None, Box::new(e))),
            },
        };
        let server = config.cluster_url.to_string();
        let unreachable = |e: kube::Error| K8sError::Unreachable {
            server: server.clone(),
            source: e,
        };
        let client = kube::Client::try_from(config).map_err(unreachable)?;
        client.apiserver_version().await.map_err(|e| match e {
            kube::Error::Api(ref s) if s.code == 403 => api_error(e, "get", "/version"),
            other => unreachable(other),
        })?;
        Ok(Cluster {
            client,
            namespace: opts.namespace.clone(),
            server,
            inspected: Default::default(),
        })
    }
}

/// One sentence for a failed API call, keeping the error: RBAC refusals name the verb and the
/// resource; anything else says what was being done.
pub fn api_error(e: kube::Error, verb: &str, resource: &str) -> K8sError {
    match e {
        kube::Error::Api(ref status) if status.code == 403 => K8sError::Forbidden {
            verb: verb.to_string(),
            resource: resource.to_string(),
            source: e,
        },
        other => K8sError::Api {
            what: format!("{verb} {resource}"),
            source: other,
        },
    }
}

/// Whether an API error is a 404.
pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
