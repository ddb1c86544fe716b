//! What went wrong in `archbench k8s`, in a sentence that says what to do next — and the
//! error underneath, kept as the source (kube-client's own errors are the model), so a caller
//! can still ask whether it was a 404 or a refused connection.

use std::path::PathBuf;

use thiserror::Error;

use crate::monitor::MonitorError;

/// A kubeconfig or in-cluster configuration that could not be read.
pub type ConfigSource = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Error)]
pub enum K8sError {
    #[error("{0}")]
    Usage(String),
    #[error(
        "cannot read a kubeconfig: {}{source}; pass --kubeconfig FILE, set KUBECONFIG, or run in a pod",
        .file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default()
    )]
    Config {
        file: Option<PathBuf>,
        #[source]
        source: ConfigSource,
    },
    #[error("no cluster reachable at {server}: {}; check the address, the VPN or `kubectl cluster-info`", api_message(.source))]
    Unreachable {
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("forbidden: {} (RBAC: archbench needs to {verb} {resource}); ask for that permission", api_message(.source))]
    Forbidden {
        verb: String,
        resource: String,
        #[source]
        source: kube::Error,
    },
    /// An API call that failed for another reason than RBAC.
    #[error("{what}: {}", api_message(.source))]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: {source}")]
    Watch {
        what: String,
        #[source]
        source: kube::runtime::watcher::Error,
    },
    /// A request archbench could not even build (a pod name no URI takes).
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: http::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what}: {source}")]
    Monitor {
        what: String,
        #[source]
        source: MonitorError,
    },
    /// What archbench itself found wrong (no pod, a worker lost, an exit status): no error
    /// underneath to keep.
    #[error("{what}: {message}")]
    Failed { what: String, message: String },
    /// A failure that also left something behind in the cluster, said on every path (the
    /// source downcasts to `Box<K8sError>`).
    #[error("{source}: {leftover}")]
    LeftBehind {
        #[source]
        source: Box<K8sError>,
        leftover: String,
    },
    /// A pod the scheduler places nowhere: `lead` says why in the nodes' terms (none has the
    /// labels, they are not ready, or they have no room), `message` in the scheduler's.
    #[error("{lead}: its pod stays Pending ({message}); {advice}")]
    Unschedulable {
        lead: String,
        message: String,
        advice: String,
    },
    #[error("the image of {pod} cannot be pulled ({reason}: {message}); check --image and the registry's credentials")]
    ImagePull {
        pod: String,
        reason: String,
        message: String,
    },
    #[error("nginx in {pod} keeps crashing ({reason}{}); its last log lines: {log}", crash_advice(.last.as_deref()))]
    Crashing {
        pod: String,
        reason: String,
        /// How its last run ended (`OOMKilled`, `Error`).
        last: Option<String>,
        log: String,
    },
    #[error("waited {seconds} s for {what}; {advice}")]
    Timeout {
        seconds: u64,
        what: String,
        advice: String,
    },
    #[error("nginx rejects the configuration, so nothing was changed: {message}")]
    Rejected { message: String },
    /// Ctrl-C: while what, and what it leaves on the cluster.
    #[error("interrupted while {during}; {left}")]
    Interrupted { during: String, left: String },
}

impl K8sError {
    /// Interrupted while `during`, before the command knows what it leaves.
    pub fn interrupted(during: impl Into<String>) -> K8sError {
        K8sError::Interrupted {
            during: during.into(),
            left: "what was applied stays (archbench k8s status shows it, archbench k8s down \
                   removes it)"
                .into(),
        }
    }

    /// An interruption said with what the command leaves on the cluster (`left`); any other
    /// error as it is.
    pub fn leaving(self, left: impl FnOnce() -> String) -> K8sError {
        match self {
            K8sError::Interrupted { during, .. } => K8sError::Interrupted {
                during,
                left: left(),
            },
            other => other,
        }
    }

    /// Usage errors exit 2, like every bad command line.
    pub fn is_usage(&self) -> bool {
        matches!(self, K8sError::Usage(_))
    }
}

/// The API's own message for a refused call ("pods \"x\" not found"), or the innermost cause
/// of a transport failure (kube wraps hyper wraps io: "Connection refused" is at the end).
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if status.message.is_empty() => {
            format!("{} ({})", status.reason, status.code)
        }
        kube::Error::Api(status) => status.message.clone(),
        other => root_cause(other),
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// What `Crashing` adds of the last run: the kernel's OOM kill is the pod's memory limit.
fn crash_advice(last: Option<&str>) -> String {
    match last {
        Some("OOMKilled") => ", last killed as OOMKilled: its memory limit is below what nginx needs; raise the variant's memory= (or make its configuration need less: worker_connections, shared zones)".into(),
        Some(r) => format!(", last ended: {r}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use kube::core::Status;

    use super::super::client::api_error;
    use super::*;

    fn refused(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            message: message.into(),
            reason: "Refused".into(),
            ..Status::default()
        }))
    }

    fn kept_code(e: &K8sError) -> Option<u16> {
        match e.source()?.downcast_ref::<kube::Error>()? {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    #[test]
    fn api_errors_keep_the_status_under_the_same_sentence() {
        let e = api_error(refused(404, "pods \"x\" not found"), "get", "pods");
        assert_eq!(e.to_string(), "get pods: pods \"x\" not found");
        assert_eq!(kept_code(&e), Some(404));

        let e = api_error(refused(403, "pods is forbidden"), "list", "pods");
        assert_eq!(
            e.to_string(),
            "forbidden: pods is forbidden (RBAC: archbench needs to list pods); ask for that permission"
        );
        assert_eq!(kept_code(&e), Some(403));

        let e = api_error(refused(500, ""), "create", "jobs.batch");
        assert_eq!(e.to_string(), "create jobs.batch: Refused (500)");
    }

    #[test]
    fn a_failure_that_left_a_job_says_both_and_keeps_the_first() {
        let first = api_error(refused(409, "already exists"), "create", "jobs.batch");
        let e = K8sError::LeftBehind {
            source: Box::new(first),
            leftover: "could not delete Job j; `archbench k8s down` removes it".into(),
        };
        assert_eq!(
            e.to_string(),
            "create jobs.batch: already exists: could not delete Job j; `archbench k8s down` removes it"
        );
        let inner = e.source().and_then(|s| s.downcast_ref::<Box<K8sError>>());
        assert!(inner.is_some_and(|k| kept_code(k) == Some(409)));
    }
}
