//! Whether a setup has rolled out, and what stops it from doing so (a ReplicaSet that cannot
//! make pods, a pod that cannot start or be placed): the condition `up` and `config` wait on.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::pods::{trouble, PodTrouble};
use super::seen::{current_pods, watch_setup, Seen, SetupUpdate};
use super::status::service_address;
use super::variant::NodeOffer;
use super::wait::{Condition, Look, Wait};
use super::{variant_of, Cluster, K8sError, Setup, MULTIARCH_SERVICE};
use crate::stop::Stop;

/// A ReplicaFailure condition's message, when it holds.
fn replica_failure(
    conditions: Option<&Vec<k8s_openapi::api::apps::v1::ReplicaSetCondition>>,
) -> Option<String> {
    conditions?
        .iter()
        .find(|c| {
            c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
        })
        .map(|c| {
            c.message
                .clone()
                .unwrap_or_else(|| c.reason.clone().unwrap_or_default())
        })
}

/// Why a Deployment's current ReplicaSet cannot make its pods, in the API server's words
/// (a pod template the Deployment's validation let through, a quota, an admission webhook):
/// a rollout would wait on it forever. An older ReplicaSet's failure (the template before
/// this `up`) is not this rollout's, so only the current revision's counts.
async fn current_replica_failure(cluster: &Cluster, ns: &str, d: &Deployment) -> Option<String> {
    let flagged = d.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
        c.type_.as_deref() == Some("ReplicaFailure") && c.status.as_deref() == Some("True")
    });
    if !flagged {
        return None;
    }
    const REVISION: &str = "deployment.kubernetes.io/revision";
    let revision = d.annotations().get(REVISION)?;
    let selector = d.spec.selector.match_labels.as_ref()?;
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let sets =
        Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(cluster.client.clone(), ns)
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .ok()?;
    let current = sets
        .items
        .iter()
        .find(|rs| rs.annotations().get(REVISION) == Some(revision))?;
    replica_failure(current.status.as_ref()?.conditions.as_ref())
}

/// A Deployment has rolled out: its controller saw the latest spec and every replica is
/// updated and available (what `kubectl rollout status` waits for).
pub fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(s) = &d.status else { return false };
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.available_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
}

/// What stops a pod from ever becoming ready, as an error that names the fix.
async fn pod_problem(cluster: &Cluster, setup: &Setup, pod: &Pod) -> Option<K8sError> {
    let name = pod.name_any();
    Some(match trouble(pod)? {
        PodTrouble::Unschedulable { message } => unschedulable(cluster, setup, pod, message).await,
        PodTrouble::ImagePull { reason, message } => K8sError::ImagePull {
            pod: name,
            reason,
            message,
        },
        PodTrouble::Crashing { reason, last } => K8sError::Crashing {
            log: last_log_lines(cluster, &setup.namespace, &name, 5).await,
            pod: name,
            reason,
            last,
        },
    })
}

/// Why no node takes a pod, told from the nodes its selector picks: there are none, none of
/// them is Ready (the scheduler's taint words alone left the user to find out which), or they
/// have no room left (the scheduler's "Insufficient cpu": "no node with" read as if none
/// existed). Nodes RBAC hides leave the first.
async fn unschedulable(cluster: &Cluster, setup: &Setup, pod: &Pod, message: String) -> K8sError {
    let variant = variant_of(pod.labels()).unwrap_or_default().to_string();
    let preset = setup.variant(&variant).is_some_and(|v| v.preset.is_some());
    let wanted = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    let selector = wanted
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = Api::<Node>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let picked: Vec<&Node> = nodes
        .iter()
        .filter(|n| super::selects(&wanted, n.labels()))
        .collect();
    let with = match selector.is_empty() {
        true => String::new(),
        false => format!(" with {selector}"),
    };
    let not_ready: Vec<String> = picked
        .iter()
        .filter_map(|n| node_not_ready(n).map(|why| format!("{} ({why})", n.name_any())))
        .collect();
    let nowhere = Nowhere {
        variant,
        with,
        preset,
        picked: picked.len(),
        not_ready,
    };
    let (lead, advice) = nowhere.lead_and_advice(&message);
    K8sError::Unschedulable {
        lead,
        message,
        advice,
    }
}

/// Where a pod's selector leads: how many nodes it picks and which of them are not Ready.
struct Nowhere {
    variant: String,
    /// " with KEY=VALUE,…", or "" for a pod without a selector.
    with: String,
    preset: bool,
    picked: usize,
    /// "NAME (why)" of each picked node that is not Ready.
    not_ready: Vec<String>,
}

impl Nowhere {
    /// The error's lead and advice, given the scheduler's `message`.
    fn lead_and_advice(&self, message: &str) -> (String, String) {
        let Nowhere {
            variant,
            with,
            preset,
            picked,
            not_ready,
        } = self;
        let nodes = |n: usize| if n == 1 { "" } else { "s" };
        if *picked == 0 {
            let advice = match preset {
                true => format!(
                    "add a node pool of that architecture, or leave {variant} out with --arch"
                ),
                false => "change the variant's selector, cpu= or memory=, or add such nodes".into(),
            };
            return (format!("no node{with} for {variant}"), advice);
        }
        if not_ready.len() == *picked {
            let verb = if *picked == 1 { "is" } else { "are" };
            return (
                format!(
                    "the node{with} for {variant} {verb} not Ready: {}",
                    not_ready.join(", ")
                ),
                "bring its kubelet back (`kubectl describe node` says since when), or add a node"
                    .into(),
            );
        }
        let also = match not_ready.is_empty() {
            true => String::new(),
            false => format!("; not Ready: {}", not_ready.join(", ")),
        };
        let such = format!("{picked} such node{}{also}", nodes(*picked));
        if message.contains("Insufficient") || message.contains("Too many pods") {
            (
                format!("no node{with} has room for {variant}'s pod ({such})"),
                "other pods hold their CPU, memory or pod slots: free some (`archbench k8s \
                 status` and `kubectl describe node` show who), lower the variant's cpu= or \
                 memory=, or add nodes"
                    .into(),
            )
        } else {
            (
                format!("no node{with} takes {variant}'s pod ({such})"),
                "the scheduler's words say why (taints, affinity, ports); `kubectl describe node` \
                 shows the nodes' side"
                    .into(),
            )
        }
    }
}

/// Why a node is not Ready (its Ready condition's reason and message), None when it is.
fn node_not_ready(node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(
            [c.reason.as_deref(), c.message.as_deref()]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": "),
        )
        .filter(|s| !s.is_empty())
        .or_else(|| Some(format!("Ready is {}", c.status))),
        None => Some("no Ready condition yet".into()),
    }
}

/// Refuses, before anything is applied, a variant no node can run (by its selector, CPU or
/// memory). The presets are left to the scheduler, as the guide's script was. Nodes RBAC
/// hides are not checked: the scheduler will tell.
pub(super) async fn check_placement(cluster: &Cluster, setup: &Setup) -> Result<(), K8sError> {
    if setup.variants.iter().all(|v| v.preset.is_some()) {
        return Ok(());
    }
    let Ok(nodes) = Api::<Node>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
    else {
        return Ok(());
    };
    let offers: Vec<NodeOffer> = nodes
        .items
        .iter()
        .map(|n| {
            let allocatable = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let quantity = |k: &str| Some(allocatable?.get(k)?.0.as_str());
            NodeOffer::new(
                n.name_any(),
                n.labels().clone(),
                quantity("cpu"),
                quantity("memory"),
            )
        })
        .collect();
    match setup
        .variants
        .iter()
        .filter(|v| v.preset.is_none())
        .find_map(|v| v.placement_problem(&offers))
    {
        Some(problem) => Err(K8sError::Usage(problem)),
        None => Ok(()),
    }
}

/// The last lines the container wrote before it last stopped (else now), on one line.
pub async fn last_log_lines(cluster: &Cluster, ns: &str, pod: &str, lines: i64) -> String {
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), ns);
    for previous in [true, false] {
        let params = kube::api::LogParams {
            previous,
            tail_lines: Some(lines),
            ..kube::api::LogParams::default()
        };
        if let Ok(text) = api.logs(pod, &params).await {
            let text = text.trim();
            if !text.is_empty() {
                return text.lines().collect::<Vec<_>>().join(" | ");
            }
        }
    }
    "(no log)".into()
}

/// How long after a pod of the setup was last seen releasing its CPU and memory a new pod's
/// "Unschedulable" is not yet final, whatever the room counted (see `room`) says: the
/// watches and the list the room is counted from may be behind the scheduler. The scheduler
/// marks a pod so when it tries it before the room is free (a terminating pod's, or one whose
/// end it has not yet seen), and tries it again only after its back-off (1 s, doubling to
/// kube-scheduler's default podMaxBackoffSeconds of 10 s): the condition stays False for up
/// to that long after the pod that held the room is gone, and longer on a busy scheduler.
const RESCHEDULE_WITHIN: Duration = Duration::from_secs(15);

/// When a pod of the setup was last seen releasing its room (terminating).
#[derive(Debug, Clone, Copy, Default)]
struct Releases {
    last: Option<tokio::time::Instant>,
}

impl Releases {
    /// Notes, at `now`, whether any pod `seen` is terminating.
    fn note(&mut self, seen: &Seen, now: tokio::time::Instant) {
        if seen
            .pods
            .values()
            .any(|p| p.metadata.deletion_timestamp.is_some())
        {
            self.last = Some(now);
        }
    }

    /// Whether a pod the scheduler found no room for may still get it: something is being
    /// released, or was within [`RESCHEDULE_WITHIN`].
    fn recent(&self, now: tokio::time::Instant) -> bool {
        self.last
            .is_some_and(|t| now.saturating_duration_since(t) < RESCHEDULE_WITHIN)
    }
}

/// Waits until the setup's Deployments have rolled out and the Services have addresses.
pub async fn wait_ready(
    cluster: &Cluster,
    setup: &Setup,
    progress: &mut dyn FnMut(&str),
    stop: &Stop,
) -> Result<(), K8sError> {
    wait_rollout(cluster, setup, None, progress, stop).await
}

/// [`wait_ready`] when pods were released (deleted) at `released`, before this wait could
/// see them terminating: a rollback, whose failed pods go as the previous ones come back.
pub(super) async fn wait_rollout(
    cluster: &Cluster,
    setup: &Setup,
    released: Option<tokio::time::Instant>,
    progress: &mut dyn FnMut(&str),
    stop: &Stop,
) -> Result<(), K8sError> {
    let client = &cluster.client;
    let updates = watch_setup(client, &setup.namespace);
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut rollout = RolledOut {
        cluster,
        setup,
        nodes,
        seen: Seen::default(),
        releases: Releases { last: released },
    };
    let wait = Wait {
        waiting_for: "the rollout",
        deadline: tokio::time::Instant::now() + setup.wait_timeout,
        stop,
        progress,
    };
    wait.until(updates, &mut rollout).await
}

/// The rollout's condition: every Deployment rolled out, every Service addressed and
/// serving; failed when a ReplicaSet cannot make its pods or a pod cannot start or be placed.
struct RolledOut<'a> {
    cluster: &'a Cluster,
    setup: &'a Setup,
    nodes: Vec<Node>,
    seen: Seen,
    releases: Releases,
}

impl Condition for RolledOut<'_> {
    type Event = SetupUpdate;
    type Met = ();

    fn seen(&mut self, event: Option<SetupUpdate>) -> Result<(), K8sError> {
        self.seen.update(event)
    }

    async fn look(&mut self, at: tokio::time::Instant) -> Result<Look<()>, K8sError> {
        let (cluster, setup) = (self.cluster, self.setup);
        let now = Readiness::of(&self.seen, setup, &self.nodes);
        if now.done() {
            return Ok(Look::Met(()));
        }
        if let Some(failed) = replicas_failed(cluster, &self.seen, setup).await {
            return Err(failed);
        }
        // A pod still terminating holds its CPU and memory: a new pod the scheduler finds no
        // room for yet gets it once that one is gone (a sized variant's rollout replaces its
        // pods in place), at the scheduler's next try after a back-off. So "Unschedulable" is
        // final only when no node would take the pod with the terminating pods gone: the
        // moment they are, the new one is still marked Unschedulable until that try, which a
        // loaded control plane makes later than its 10 s back-off (a variants test failed
        // there twice, once in a rollback, while this waited a fixed time instead).
        self.releases.note(&self.seen, at);
        for pod in current_pods(&self.seen, setup) {
            match pod_problem(cluster, setup, pod).await {
                Some(K8sError::Unschedulable { .. }) if self.may_get_room(pod, at).await => {}
                Some(problem) => return Err(problem),
                None => {}
            }
        }
        Ok(Look::Pending(now.line()))
    }

    fn timed_out(&self, last_line: &str) -> K8sError {
        // "waited 20 s for intel rolling out, …", not "for waiting: intel …".
        let what = last_line.strip_prefix("waiting: ").unwrap_or(last_line);
        Readiness::of(&self.seen, self.setup, &self.nodes).timeout(self.setup, what.to_string())
    }
}

impl RolledOut<'_> {
    /// Whether a pod the scheduler found no room for may still get it: something is being
    /// released or just was, or a node would take it once the pods on their way out are gone
    /// (its verdict came before the room was free, and its next try, after a back-off, will
    /// place it).
    async fn may_get_room(&self, pod: &Pod, at: tokio::time::Instant) -> bool {
        // The setup's pods of another configuration go as the rollout (or the rollback)
        // proceeds, even those not yet marked for deletion.
        let current: Vec<&Pod> = current_pods(&self.seen, self.setup);
        let ns = &self.setup.namespace;
        let leaving = |p: &Pod| {
            p.metadata.namespace.as_ref() == Some(ns)
                && variant_of(p.labels()).is_some_and(|v| self.setup.variant(v).is_some())
                && !current.iter().any(|c| c.metadata.uid == p.metadata.uid)
        };
        // Within the window after a release, as before; after it, while a node would take it.
        self.releases.recent(at)
            || super::room::once_released(&self.cluster.client, &self.nodes, pod, &leaving).await
                == Some(true)
    }
}

/// The first Deployment of the setup whose ReplicaSet cannot create its pods, as the error.
async fn replicas_failed(cluster: &Cluster, seen: &Seen, setup: &Setup) -> Option<K8sError> {
    for v in &setup.variants {
        if let Some(d) = seen.deployments.get(&v.deployment()) {
            if let Some(why) = current_replica_failure(cluster, &setup.namespace, d).await {
                return Some(K8sError::Failed {
                    what: format!("the pods of {}", v.deployment()),
                    message: why,
                });
            }
        }
    }
    None
}

/// How far the rollout is: each variant's Deployment, the Services with an address, and
/// those whose endpoints are ready.
struct Readiness {
    rolled: Vec<(String, bool)>,
    wanted: usize,
    addressed: usize,
    serving: usize,
    slices_hidden: bool,
}

impl Readiness {
    fn of(seen: &Seen, setup: &Setup, nodes: &[Node]) -> Readiness {
        let rolled = setup
            .variants
            .iter()
            .map(|v| {
                (
                    v.name.clone(),
                    seen.deployments
                        .get(&v.deployment())
                        .is_some_and(rolled_out),
                )
            })
            .collect();
        // Each variant's Service wants its replicas; the multi-arch one, every variant's.
        let replicas = |v: &super::Variant| usize::try_from(v.replicas).unwrap_or(1);
        let wanted: Vec<(String, usize)> = setup
            .variants
            .iter()
            .map(|v| (v.service(), replicas(v)))
            .chain(std::iter::once((
                MULTIARCH_SERVICE.to_string(),
                setup.variants.iter().map(replicas).sum(),
            )))
            .collect();
        let addressed = wanted
            .iter()
            .filter(|(s, _)| {
                seen.services
                    .get(s)
                    .and_then(|svc| service_address(svc, nodes))
                    .is_some()
            })
            .count();
        let serving = wanted
            .iter()
            .filter(|(s, n)| seen.slices_hidden || seen.ready_endpoints(s) >= *n)
            .count();
        Readiness {
            rolled,
            wanted: wanted.len(),
            addressed,
            serving,
            slices_hidden: seen.slices_hidden,
        }
    }

    fn done(&self) -> bool {
        self.rolled.iter().all(|(_, r)| *r)
            && self.addressed == self.wanted
            && self.serving == self.wanted
    }

    fn line(&self) -> String {
        let endpoints = if self.slices_hidden {
            " (endpoints not visible to you)".to_string()
        } else {
            format!("; endpoints {}/{}", self.serving, self.wanted)
        };
        format!(
            "waiting: {}; addresses {}/{}{endpoints}",
            self.rolled
                .iter()
                .map(|(v, r)| format!("{v} {}", if *r { "ready" } else { "rolling out" }))
                .collect::<Vec<_>>()
                .join(", "),
            self.addressed,
            self.wanted,
        )
    }

    fn timeout(&self, setup: &Setup, what: String) -> K8sError {
        let rolled = self.rolled.iter().all(|(_, r)| *r);
        let pending_lb = setup.service_type == super::ServiceType::LoadBalancer
            && self.addressed < self.wanted
            && rolled;
        K8sError::Timeout {
            seconds: setup.wait_timeout.as_secs(),
            what,
            advice: if pending_lb {
                "the LoadBalancer addresses never came: try --service-type NodePort (loaded from outside through the nodes' external addresses: nodes with public IPs), or check the cloud's load balancer quota".into()
            } else {
                "see `archbench k8s status` and `kubectl describe pods -n NAMESPACE`; raise --wait-timeout for slow pulls".into()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unschedulable_waits_for_the_schedulers_next_try_after_a_release() {
        let start = tokio::time::Instant::now();
        let mut seen = Seen::default();
        let mut releases = Releases::default();
        // Nothing released: an Unschedulable pod is final at once (no node fits it).
        releases.note(&seen, start);
        assert!(!releases.recent(start));
        let terminating: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "old", "deletionTimestamp": "2026-12-02T13:17:51Z"}}))
        .unwrap();
        seen.pods.insert("old".into(), terminating);
        releases.note(&seen, start);
        // Gone a second later; the scheduler tries again within its back-off.
        seen.pods.clear();
        let gone = start + Duration::from_secs(1);
        releases.note(&seen, gone);
        assert!(releases.recent(gone));
        assert!(releases.recent(start + RESCHEDULE_WITHIN - Duration::from_millis(1)));
        assert!(!releases.recent(start + RESCHEDULE_WITHIN));
        // A rollback starts as a release: its failed pods may be gone before it looks.
        let rollback = Releases { last: Some(gone) };
        assert!(rollback.recent(gone + Duration::from_secs(10)));
    }
}
