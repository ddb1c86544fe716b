//! The nginx pods: finding one per architecture, and running commands in them over the API
//! server's exec (WebSocket), either to completion or as a stream of lines.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{AttachParams, ListParams};
use kube::{Api, ResourceExt};
use tokio::io::AsyncReadExt;

use super::client::api_error;
use super::{variant_of, Arch, Cluster, K8sError};

/// What keeps a pod from running, when its status says so plainly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodTrouble {
    /// The scheduler found no node for it.
    Unschedulable { message: String },
    /// Its image cannot be pulled (or is no image name at all).
    ImagePull { reason: String, message: String },
    /// It starts and dies, over and over; `last` is how its last run ended, when the status
    /// says (`OOMKilled`, `Error`).
    Crashing {
        reason: String,
        last: Option<String>,
    },
}

/// How a container's last run ended, when its status says: "OOMKilled", "Error".
pub fn last_termination(c: &k8s_openapi::api::core::v1::ContainerStatus) -> Option<String> {
    c.last_state.as_ref()?.terminated.as_ref()?.reason.clone()
}

/// The first plain trouble in a pod's status: unschedulable, an image that will not pull, a
/// crash loop. One reading for `up`'s nginx pods and the load workers alike.
pub fn trouble(pod: &Pod) -> Option<PodTrouble> {
    let status = pod.status.as_ref()?;
    if let Some(c) = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    }) {
        return Some(PodTrouble::Unschedulable {
            message: c.message.clone().unwrap_or_default(),
        });
    }
    status.container_statuses.iter().flatten().find_map(|cs| {
        let waiting = cs.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.clone().unwrap_or_default();
        match reason.as_str() {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" => {
                Some(PodTrouble::ImagePull {
                    reason,
                    message: waiting.message.clone().unwrap_or_default(),
                })
            }
            "CrashLoopBackOff" => Some(PodTrouble::Crashing {
                reason,
                last: last_termination(cs),
            }),
            _ => None,
        }
    })
}

/// The container archbench's Deployments run.
pub const CONTAINER: &str = "nginx";

/// The nginx pods of one variant, or of all (ready ones first, newest first among equals).
pub async fn pods_of(cluster: &Cluster, variant: Option<&str>) -> Result<Vec<Pod>, K8sError> {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut pods = api
        .list(&ListParams::default().labels(&super::nginx_selector()))
        .await
        .map_err(|e| api_error(e, "list", "pods"))?
        .items;
    // By the variant's name, whichever label carries it (a preset's `arch=arm` or a
    // variant's `variant=arm-large`, whose `arch` is then amd64 or arm64).
    pods.retain(|p| {
        p.metadata.deletion_timestamp.is_none()
            && variant.is_none_or(|v| variant_of(p.labels()) == Some(v))
    });
    pods.sort_by_key(|p| {
        (
            !is_ready(p),
            std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
        )
    });
    Ok(pods)
}

/// Every container of the pod is ready.
pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready))
}

/// The pod to talk to for a variant: the one named, or its ready pod.
pub async fn pick(cluster: &Cluster, variant: &str, name: Option<&str>) -> Result<Pod, K8sError> {
    let pods = pods_of(cluster, Some(variant)).await?;
    match name {
        Some(n) => pods.into_iter().find(|p| p.name_any() == n).ok_or_else(|| {
            K8sError::Usage(format!(
                "no pod {n} of {variant} in namespace {}; `archbench k8s status` lists them",
                cluster.namespace
            ))
        }),
        // One whose container runs, when there is one: a restarting pod has none to exec in.
        None => {
            let running = pods.iter().position(containers_running).unwrap_or(0);
            match pods.into_iter().nth(running) {
                Some(p) => Ok(p),
                None => Err(why_no_pod(cluster, variant).await),
            }
        }
    }
}

/// Every container of the pod is running (none waiting or terminated).
fn containers_running(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        })
}

/// That a variant has no pod, and why when its Deployment says: scaled to 0 replicas (by
/// someone else: `up` declares at least one), it was "none; `up` creates it".
pub async fn why_no_pod(cluster: &Cluster, variant: &str) -> K8sError {
    use k8s_openapi::api::apps::v1::Deployment;
    let name = format!("nginx-{variant}-deployment");
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    match api.get_opt(&name).await {
        Ok(Some(d)) if d.spec.replicas == Some(0) => K8sError::Failed {
            what: format!("find a pod of {variant}"),
            message: format!(
                "its Deployment {name} is scaled to 0 replicas; `kubectl scale` it up, or `archbench k8s up` with {variant} puts back what it declares"
            ),
        },
        _ => no_pod_of(cluster, variant),
    }
}

/// That a variant has no pod, and what makes one.
pub fn no_pod_of(cluster: &Cluster, variant: &str) -> K8sError {
    K8sError::Failed {
        what: format!("find a pod of {variant}"),
        message: format!(
            "none in namespace {}; `archbench k8s up {}` creates it",
            cluster.namespace,
            match Arch::from_name(variant) {
                Some(_) => format!("--arch {variant}"),
                None => format!("--variant {variant}:…"),
            }
        ),
    }
}

/// What a command printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

impl ExecOutput {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// The status an exec ends with (the kubelet's `Status` on channel 3).
pub type ExecStatus = k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

/// The exit code in an exec's closing Status: 0 on Success; the `ExitCode` cause otherwise.
pub fn exit_code(status: Option<&ExecStatus>) -> Result<i32, String> {
    let Some(s) = status else {
        return Err("the exec ended without a status".into());
    };
    if s.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    s.details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
        .and_then(|c| c.message.as_deref()?.parse().ok())
        .ok_or_else(|| match (&s.message, &s.reason) {
            (Some(m), _) if !m.is_empty() => m.clone(),
            (_, Some(r)) => format!("{r} ({})", s.code.unwrap_or(0)),
            _ => "the exec failed without a reason".into(),
        })
}

/// Runs `command` in the pod's nginx container to completion, with `stdin` fed to it.
pub async fn exec(
    cluster: &Cluster,
    pod: &str,
    command: &[&str],
    stdin: Option<&[u8]>,
) -> Result<ExecOutput, K8sError> {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = AttachParams::default()
        .container(CONTAINER)
        .stdin(stdin.is_some())
        .stdout(true)
        .stderr(true);
    let mut process = api
        .exec(pod, command.iter().map(|s| s.to_string()), &params)
        .await
        .map_err(|e| api_error(e, "create", "pods/exec"))?;
    if let (Some(data), Some(mut w)) = (stdin, process.stdin()) {
        use tokio::io::AsyncWriteExt;
        let _ = w.write_all(data).await;
        let _ = w.shutdown().await;
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (stdout, stderr, status) = (process.stdout(), process.stderr(), process.take_status());
    let o = async {
        if let Some(mut r) = stdout {
            let _ = r.read_to_end(&mut out).await;
        }
    };
    let e = async {
        if let Some(mut r) = stderr {
            let _ = r.read_to_end(&mut err).await;
        }
    };
    futures::join!(o, e);
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    let exit_code = exit_code(status.as_ref()).map_err(|message| K8sError::Failed {
        what: format!("exec in {pod}"),
        message,
    })?;
    let _ = process.join().await;
    Ok(ExecOutput {
        stdout: out,
        stderr: err,
        exit_code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> ExecStatus {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn exit_codes_from_the_kubelets_status() {
        assert_eq!(exit_code(Some(&status(r#"{"status":"Success"}"#))), Ok(0));
        assert_eq!(
            exit_code(Some(&status(
                r#"{"status":"Failure","reason":"NonZeroExitCode","message":"command terminated with non-zero exit code: exit status 3","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
            ))),
            Ok(3)
        );
        assert!(exit_code(Some(&status(
            r#"{"status":"Failure","reason":"InternalError","message":"container not found","code":500}"#
        )))
        .unwrap_err()
        .contains("container not found"));
        assert!(exit_code(None).is_err());
    }

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": status}))
            .unwrap()
    }

    #[test]
    fn troubles_read_from_the_pods_status() {
        let unschedulable = pod(serde_json::json!({"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available"}]}));
        assert_eq!(
            trouble(&unschedulable),
            Some(PodTrouble::Unschedulable {
                message: "0/2 nodes are available".into()
            })
        );
        let waiting = |reason: &str| {
            pod(serde_json::json!({"containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": reason, "message": "m"}}}]}))
        };
        assert_eq!(
            trouble(&waiting("ImagePullBackOff")),
            Some(PodTrouble::ImagePull {
                reason: "ImagePullBackOff".into(),
                message: "m".into()
            })
        );
        assert_eq!(
            trouble(&waiting("CrashLoopBackOff")),
            Some(PodTrouble::Crashing {
                reason: "CrashLoopBackOff".into(),
                last: None
            })
        );
        let oom = pod(serde_json::json!({"containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}));
        assert_eq!(
            trouble(&oom),
            Some(PodTrouble::Crashing {
                reason: "CrashLoopBackOff".into(),
                last: Some("OOMKilled".into())
            })
        );
        // Still creating, or scheduled: nothing to say yet.
        assert_eq!(trouble(&waiting("ContainerCreating")), None);
        let scheduled = pod(serde_json::json!({"conditions": [{
            "type": "PodScheduled", "status": "True"}]}));
        assert_eq!(trouble(&scheduled), None);
    }
}
