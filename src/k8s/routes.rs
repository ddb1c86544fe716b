//! After a rollout (`config`'s, or an `up` that changed the setup): the old pods off the
//! setup's Services before it says the setup is ready.
//! The new pods being ready is not enough: the old ones are terminating then, still listed
//! in the EndpointSlices (`terminating`), and kube-proxy sends new connections by rules it
//! programs up to a second later; a load started at once went to an old pod whose nginx had
//! already stopped (every connection refused, nothing measured). This module never changes
//! anything in the cluster; it only watches and connects.

use std::time::Duration;

use kube::ResourceExt;

use super::seen::{current_pods, watch_setup, Seen, SetupUpdate, SERVICE_NAME_LABEL};
use super::wait::{Condition, Look, Wait};
use super::{variant_of, Cluster, K8sError, Setup, MULTIARCH_SERVICE};
use crate::stop::Stop;

/// What is left of the previous configuration behind the setup's Services.
#[derive(Debug, Default, PartialEq, Eq)]
struct Leftovers {
    /// Pods of the setup's variants that are not current (terminating, or another
    /// configuration's), by name.
    pods: Vec<String>,
    /// Endpoints of the setup's Services that are no current pod (by address).
    endpoints: Vec<String>,
}

impl Leftovers {
    fn of(seen: &Seen, setup: &Setup) -> Leftovers {
        let current: Vec<String> = current_pods(seen, setup)
            .iter()
            .map(|p| p.name_any())
            .collect();
        let ours = |p: &&k8s_openapi::api::core::v1::Pod| {
            variant_of(p.labels())
                .and_then(|v| setup.variant(v))
                .is_some()
        };
        // A pod that has ended (Failed, Succeeded: evicted, say) answers nothing and is no
        // endpoint, but stays in the API until it is collected: not waited for.
        let ended = |p: &&k8s_openapi::api::core::v1::Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase == "Failed" || phase == "Succeeded")
        };
        let pods = seen
            .pods
            .values()
            .filter(ours)
            .filter(|p| !ended(p))
            .map(|p| p.name_any())
            .filter(|name| !current.contains(name))
            .collect();
        // Pods of variants this setup does not name (left by an earlier `up` with more) are
        // in the multi-arch Service too; they are not this rollout's old pods.
        let others: Vec<String> = seen
            .pods
            .values()
            .filter(|p| !ours(p))
            .map(|p| p.name_any())
            .collect();
        let services: Vec<String> = setup
            .variants
            .iter()
            .map(|v| v.service())
            .chain(std::iter::once(MULTIARCH_SERVICE.to_string()))
            .collect();
        let endpoints = seen
            .slices
            .values()
            .filter(|s| {
                s.labels()
                    .get(SERVICE_NAME_LABEL)
                    .is_some_and(|n| services.contains(n))
            })
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter(|e| {
                let pod = e.target_ref.as_ref().and_then(|r| r.name.as_ref());
                !pod.is_some_and(|p| current.contains(p) || others.contains(p))
            })
            .map(|e| e.addresses.join(","))
            .collect();
        Leftovers { pods, endpoints }
    }

    fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.endpoints.is_empty()
    }

    fn line(&self) -> String {
        format!(
            "waiting for the old pods to leave the Services: {} old pods left, {} of their endpoints listed",
            self.pods.len(),
            self.endpoints.len()
        )
    }
}

/// Waits, until `deadline`, for the old pods of `setup`'s variants to be gone from the API
/// (terminated: nothing of them can answer) and from every EndpointSlice of the setup's
/// Services (what kube-proxy routes by), then for each Service address to accept every
/// connection of a few rounds from here (kube-proxy's rules caught up; the only pods left to
/// accept are the new ones). Returns the addresses that did not, as `up` does: one may well be
/// unreachable from here, and in-cluster loads do not need it.
pub async fn wait_routed(
    cluster: &Cluster,
    setup: &Setup,
    deadline: tokio::time::Instant,
    progress: &mut dyn FnMut(&str),
    stop: &Stop,
) -> Result<Vec<String>, K8sError> {
    wait_old_gone(cluster, setup, deadline, progress, stop).await?;
    let rows = super::status(cluster).await?;
    let mut addresses: Vec<String> = rows.iter().map(|r| r.address.clone()).collect();
    addresses.retain(|a| a != "pending");
    progress("waiting for each address to reach only the new pods");
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    Ok(not_answering(&addresses, left.min(ANSWER_WITHIN)).await)
}

/// The first half of [`wait_routed`]: watches until no old pod nor endpoint of one is left.
async fn wait_old_gone(
    cluster: &Cluster,
    setup: &Setup,
    deadline: tokio::time::Instant,
    progress: &mut dyn FnMut(&str),
    stop: &Stop,
) -> Result<(), K8sError> {
    let updates = watch_setup(&cluster.client, &setup.namespace);
    let mut gone = OldGone {
        setup,
        seen: Seen::default(),
    };
    let wait = Wait {
        waiting_for: "the old pods to go",
        deadline,
        stop,
        progress,
    };
    wait.until(updates, &mut gone).await
}

/// [`wait_old_gone`]'s condition: no old pod of the setup left, nor an endpoint of one.
struct OldGone<'a> {
    setup: &'a Setup,
    seen: Seen,
}

impl OldGone<'_> {
    /// What is left, once the first lists are in (before, an empty map says nothing).
    fn left(&self) -> Option<Leftovers> {
        let seen = &self.seen;
        (seen.pods_listed && seen.slices_listed).then(|| {
            let mut left = Leftovers::of(seen, self.setup);
            if seen.slices_hidden {
                // RBAC hides the slices: the pods being gone is what can be known.
                left.endpoints.clear();
            }
            left
        })
    }
}

impl Condition for OldGone<'_> {
    type Event = SetupUpdate;
    type Met = ();

    fn seen(&mut self, event: Option<SetupUpdate>) -> Result<(), K8sError> {
        self.seen.update(event)
    }

    async fn look(&mut self, _at: tokio::time::Instant) -> Result<Look<()>, K8sError> {
        Ok(match self.left() {
            Some(left) if left.is_empty() => Look::Met(()),
            Some(left) => Look::Pending(left.line()),
            None => Look::Pending(String::new()),
        })
    }

    fn timed_out(&self, _last_line: &str) -> K8sError {
        still_left(self.setup, self.left().as_ref())
    }
}

/// The timeout of [`wait_old_gone`]: what was still left, or that the lists never came.
fn still_left(setup: &Setup, left: Option<&Leftovers>) -> K8sError {
    let (what, advice) = match left {
        Some(left) => (
            format!(
                "the old pods to leave the Services (left: pods {}; endpoints {})",
                or_none(&left.pods),
                or_none(&left.endpoints)
            ),
            "what was applied runs, but a load now may reach an old pod; see `kubectl describe pods -n NAMESPACE` (a finalizer, or a node that is gone, holds it)",
        ),
        None => (
            "the API server to list the setup's pods and EndpointSlices".to_string(),
            "the API server answered the rollout but not these lists; try again, or see its logs",
        ),
    };
    K8sError::Timeout {
        seconds: setup.wait_timeout.as_secs(),
        what,
        advice: advice.into(),
    }
}

/// How long `up` and `config` try a ready Service's address before saying it does not answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Connections per round of [`not_answering`], and the clean rounds in a row it wants.
/// kube-proxy programs its rules a moment (up to its 1 s minimum sync period) after the
/// EndpointSlices change, and until then it may still send a connection to a pod that is
/// gone: refused, or unanswered. One accepted connection can be the luck of its random pick,
/// so an address counts as answering when every connection of 3 rounds 100 ms apart was
/// accepted: with one stale endpoint among k good ones, a chance of (k/(k+1))^24 to pass
/// (6e-8 for one good one, 6e-5 for two; with none, never). Connecting sends no request:
/// nginx logs none of these.
const CONNECTS_PER_ROUND: usize = 8;
const CLEAN_ROUNDS: usize = 3;

/// The addresses (`host` or `host:port`) that do not accept every TCP connection of
/// [`CLEAN_ROUNDS`] rounds in a row within `within`.
async fn not_answering(addresses: &[String], within: Duration) -> Vec<String> {
    let mut left: Vec<(String, usize)> = addresses.iter().map(|a| (a.clone(), 0)).collect();
    left.sort();
    left.dedup();
    let deadline = tokio::time::Instant::now() + within;
    let mut rounds = 0;
    loop {
        for (a, clean) in &mut left {
            *clean = if accepts_all(a).await { *clean + 1 } else { 0 };
        }
        rounds += 1;
        left.retain(|(_, clean)| *clean < CLEAN_ROUNDS);
        // However little time is left, the rounds an answer needs are always tried.
        if left.is_empty() || (rounds >= CLEAN_ROUNDS && tokio::time::Instant::now() >= deadline) {
            return left.into_iter().map(|(a, _)| a).collect();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `address` accepted each of [`CONNECTS_PER_ROUND`] connections (within 500 ms).
async fn accepts_all(address: &str) -> bool {
    let target = if address.contains(':') {
        address.to_string()
    } else {
        format!("{address}:80")
    };
    for _ in 0..CONNECTS_PER_ROUND {
        let connect = tokio::net::TcpStream::connect(target.as_str());
        if !matches!(
            tokio::time::timeout(Duration::from_millis(500), connect).await,
            Ok(Ok(_))
        ) {
            return false;
        }
    }
    true
}

fn or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;

    use super::*;
    use crate::k8s::manifests::{sha256_hex, CONFIG_HASH};
    use crate::k8s::Arch;

    fn setup() -> Setup {
        Setup::of_presets(&[Arch::Intel])
    }

    /// The setup's one variant with its new pod `new` (the current configuration's) seen.
    fn seen_with_new(setup: &Setup) -> Seen {
        let current = sha256_hex(&setup.config_text(&setup.variants[0]).unwrap());
        let mut seen = Seen::default();
        seen.pods.insert("new".into(), pod("new", &current, false));
        seen
    }

    fn pod(name: &str, hash: &str, terminating: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"arch": "intel", "app": "nginx-intel"},
                "annotations": {CONFIG_HASH: hash},
                "deletionTimestamp": terminating.then_some("2026-12-02T13:05:32Z")},
        }))
        .unwrap()
    }

    fn slice(service: &str, pods: &[&str]) -> EndpointSlice {
        let endpoints: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                serde_json::json!({"addresses": [format!("10.244.0.{i}")],
                "targetRef": {"kind": "Pod", "name": p}})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{service}-x"),
                "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4", "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn the_old_pods_are_left_until_gone_from_the_api_and_every_slice() {
        let setup = setup();
        let mut seen = seen_with_new(&setup);
        seen.pods.insert("old".into(), pod("old", "before", true));
        let service = setup.variants[0].service();
        seen.slices
            .insert("a".into(), slice(&service, &["old", "new"]));
        let left = Leftovers::of(&seen, &setup);
        assert_eq!(left.pods, ["old"]);
        assert_eq!(left.endpoints, ["10.244.0.0"]);
        // Deleted, but the slice still lists it: kube-proxy may still route to it.
        seen.pods.remove("old");
        let left = Leftovers::of(&seen, &setup);
        assert!(
            left.pods.is_empty() && left.endpoints.len() == 1,
            "{left:?}"
        );
        seen.slices.insert("a".into(), slice(&service, &["new"]));
        // Another Service's slices (a user's own) are not ours to wait for.
        seen.slices
            .insert("b".into(), slice("theirs", &["elsewhere"]));
        assert!(Leftovers::of(&seen, &setup).is_empty());
    }

    #[test]
    fn ended_pods_and_other_variants_pods_are_not_waited_for() {
        let setup = setup();
        let mut seen = seen_with_new(&setup);
        // Evicted under the old configuration: Failed, never deleted, no endpoint.
        let mut evicted = pod("evicted", "before", false);
        evicted.status = serde_json::from_value(serde_json::json!({"phase": "Failed"})).unwrap();
        seen.pods.insert("evicted".into(), evicted);
        // A variant an earlier `up` made and this setup does not name, in the multi-arch
        // Service beside ours.
        let arm: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "arm-1", "labels": {"arch": "arm", "app": "nginx-arm"}}}))
        .unwrap();
        seen.pods.insert("arm-1".into(), arm);
        seen.slices
            .insert("m".into(), slice(MULTIARCH_SERVICE, &["new", "arm-1"]));
        let left = Leftovers::of(&seen, &setup);
        assert!(left.is_empty(), "{left:?}");
    }
}
