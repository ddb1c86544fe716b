//! Reaching the cluster as kubectl does (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`,
//! `--context`, in-cluster config inside a pod), and turning API errors into one sentence
//! that names what to do.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

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
}

impl Cluster {
    /// Builds a client and checks the API server answers (`/version`), so an unreachable
    /// cluster is one clear error before anything else.
    pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, K8sError> {
        let kube_opts = KubeConfigOptions {
            context: opts.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &opts.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| K8sError::Config(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &kube_opts)
                    .await
                    .map_err(|e| K8sError::Config(format!("{}: {e}", path.display())))?
            }
            None => match kube::Config::from_kubeconfig(&kube_opts).await {
                Ok(c) => c,
                // No kubeconfig: inside a pod, the service account's (as kubectl does).
                Err(kubeconfig) if opts.context.is_none() => kube::Config::incluster()
                    .map_err(|_| K8sError::Config(kubeconfig.to_string()))?,
                Err(e) => return Err(K8sError::Config(e.to_string())),
            },
        };
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(|e| K8sError::Unreachable {
            server: server.clone(),
            why: e.to_string(),
        })?;
        client
            .apiserver_version()
            .await
            .map_err(|e| match api_error(e, "get", "/version") {
                K8sError::Api { message, .. } => K8sError::Unreachable {
                    server: server.clone(),
                    why: message,
                },
                other => other,
            })?;
        Ok(Cluster {
            client,
            namespace: opts.namespace.clone(),
            server,
        })
    }
}

/// One sentence for a failed API call: RBAC refusals name the verb and the resource; a
/// transport failure names the server; anything else says what was being done.
pub fn api_error(e: kube::Error, verb: &str, resource: &str) -> K8sError {
    match e {
        kube::Error::Api(status) if status.code == 403 => K8sError::Forbidden {
            verb: verb.to_string(),
            resource: resource.to_string(),
            message: status.message.clone(),
        },
        kube::Error::Api(status) => K8sError::Api {
            what: format!("{verb} {resource}"),
            message: if status.message.is_empty() {
                format!("{} ({})", status.reason, status.code)
            } else {
                status.message.clone()
            },
        },
        other => K8sError::Api {
            what: format!("{verb} {resource}"),
            message: root_cause(&other),
        },
    }
}

/// The innermost cause's text (kube wraps hyper wraps io: "connection refused" is at the end).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Whether an API error is a 404.
pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
