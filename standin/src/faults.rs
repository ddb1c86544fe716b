//! Switches a test flips to make the stand-in misbehave the way real clusters do.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::state::Shared;

/// The state behind [`Faults`], read by the API server and controllers.
#[derive(Default)]
pub(crate) struct FaultState {
    forbidden: Mutex<Vec<(String, String)>>,
    withhold_lb: AtomicBool,
    /// Bumped by `expire_watches`; open watches compare it with what they started with.
    pub(crate) watch_epoch: AtomicU64,
}

impl FaultState {
    /// Whether `verb` on `resource` (`deployments`, `deployments.apps`, `pods/exec`) is denied.
    pub(crate) fn is_forbidden(
        &self,
        verb: &str,
        plural: &str,
        group: &str,
        sub: Option<&str>,
    ) -> bool {
        let names = {
            let base = match sub {
                Some(s) => vec![format!("{plural}/{s}")],
                None => vec![plural.to_string()],
            };
            let mut all = base.clone();
            if !group.is_empty() {
                all.extend(base.iter().map(|b| match sub {
                    Some(s) => format!("{plural}.{group}/{s}"),
                    None => format!("{b}.{group}"),
                }));
            }
            all
        };
        let f = self.forbidden.lock().unwrap_or_else(|e| e.into_inner());
        f.iter()
            .any(|(v, r)| (v == verb || v == "*") && (r == "*" || names.contains(r)))
    }

    pub(crate) fn withhold_lb(&self) -> bool {
        self.withhold_lb.load(Ordering::Relaxed)
    }
}

/// Fault switches of a running [`crate::Cluster`].
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl Faults {
    /// Deny `verb` (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or `*`) on `resource` (`deployments`, `deployments.apps`,
    /// `pods/exec`, `pods/log`, or `*`) with the real RBAC 403 message. Exec is checked as
    /// `create` on `pods/exec`, logs as `get` on `pods/log`.
    pub fn forbid(&self, verb: &str, resource: &str) {
        let mut f = self
            .shared
            .faults
            .forbidden
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        f.push((verb.to_string(), resource.to_string()));
    }

    /// Lift every `forbid`.
    pub fn allow_all(&self) {
        self.shared
            .faults
            .forbidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// While on, LoadBalancer Services get no ingress address (as when a cloud's load balancer
    /// never comes); addresses already given stay. Turning it off lets them come.
    pub fn withhold_loadbalancer_addresses(&self, on: bool) {
        self.shared.faults.withhold_lb.store(on, Ordering::Relaxed);
        self.shared.poke();
    }

    /// SIGKILL the main process of every container of a pod (as an OOM kill or a crash would);
    /// the kubelet then restarts it by the pod's restartPolicy.
    pub fn kill_pod_process(&self, namespace: &str, pod: &str) -> std::io::Result<()> {
        self.shared.kubelet.kill(namespace, pod)
    }

    /// End every open watch with 410 Expired, as an API server restart or etcd compaction
    /// does; clients must re-list.
    pub fn expire_watches(&self) {
        self.shared
            .faults
            .watch_epoch
            .fetch_add(1, Ordering::Relaxed);
        self.shared.poke();
    }
}
