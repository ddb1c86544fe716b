//! Whether a node would take a pod once the pods on their way out are gone, counted as the
//! scheduler counts it: the node's labels, taints and cordon, and its allocatable CPU, memory
//! and pod count against the requests of the pods bound to it. A sized variant's rollout
//! replaces its pods in place: the new pod may be tried before the old one is even marked
//! for deletion, and is tried again only after a back-off that grows to 10 s (and comes later
//! on a loaded control plane). Its "Unschedulable" is not final while this says yes.

use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::resource_quantity::amount;

/// What a pod asks of its node: CPU in cores, memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Requests {
    cores: f64,
    bytes: f64,
}

impl Requests {
    /// A pod's requests as the scheduler sums them: its containers together, or its largest
    /// init container where that asks more. None when a quantity cannot be read.
    fn of(pod: &Pod) -> Option<Requests> {
        let Some(spec) = &pod.spec else {
            return Some(Requests::default());
        };
        let each = |c: &k8s_openapi::api::core::v1::Container| -> Option<Requests> {
            let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
            let get = |k: &str| match requests.and_then(|r| r.get(k)) {
                Some(q) => amount(&q.0),
                None => Some(0.0),
            };
            Some(Requests {
                cores: get("cpu")?,
                bytes: get("memory")?,
            })
        };
        let mut sum = Requests::default();
        for c in &spec.containers {
            let r = each(c)?;
            sum.cores += r.cores;
            sum.bytes += r.bytes;
        }
        for c in spec.init_containers.iter().flatten() {
            let r = each(c)?;
            sum.cores = sum.cores.max(r.cores);
            sum.bytes = sum.bytes.max(r.bytes);
        }
        Some(sum)
    }
}

/// Whether a toleration lets a pod onto a node with this taint (the scheduler's rule: an
/// empty key with `Exists` tolerates every taint, an empty effect every effect).
fn tolerates(t: &Toleration, key: &str, value: Option<&str>, effect: &str) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == effect);
    let key_ok = t.key.as_deref().is_none_or(str::is_empty) || t.key.as_deref() == Some(key);
    let value_ok = match t.operator.as_deref() {
        Some("Exists") => true,
        _ => t.value.as_deref().unwrap_or("") == value.unwrap_or(""),
    };
    effect_ok && key_ok && value_ok
}

/// Whether the scheduler may put `pod` on `node` at all: its node selector, the node's
/// cordon and its NoSchedule/NoExecute taints. None for a pod with required node affinity,
/// which this does not read.
fn admits(node: &Node, pod: &Pod) -> Option<bool> {
    let spec = pod.spec.as_ref()?;
    let required_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution
                .is_some()
        });
    if required_affinity {
        return None;
    }
    let selected = spec
        .node_selector
        .as_ref()
        .is_none_or(|s| super::selects(s, node.labels()));
    let node_spec = node.spec.as_ref();
    let cordoned = node_spec.and_then(|s| s.unschedulable) == Some(true);
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let tainted_out = node_spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| {
            !tolerations
                .iter()
                .any(|tol| tolerates(tol, &t.key, t.value.as_deref(), &t.effect))
        });
    Some(selected && !cordoned && !tainted_out)
}

/// Whether `node` has room for `wanted` beside the pods `bound` to it, leaving out those
/// that are being deleted, have ended, or are `leaving`. None when a quantity cannot be read.
fn has_room(
    node: &Node,
    bound: &[Pod],
    wanted: Requests,
    leaving: &dyn Fn(&Pod) -> bool,
) -> Option<bool> {
    let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
    let of = |k: &str| {
        allocatable
            .get(k)
            .map_or(Some(f64::INFINITY), |q| amount(&q.0))
    };
    let (cores, bytes, pods) = (of("cpu")?, of("memory")?, of("pods")?);
    let holding: Vec<&Pod> = bound
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !leaving(p))
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .collect();
    let mut used = Requests::default();
    for p in &holding {
        let r = Requests::of(p)?;
        used.cores += r.cores;
        used.bytes += r.bytes;
    }
    // Allocatable is whole millicores and bytes: a thousandth of a core absorbs the floats'
    // rounding, never a real shortfall.
    Some(
        used.cores + wanted.cores <= cores + 1e-6
            && used.bytes + wanted.bytes <= bytes
            && holding.len() as f64 + 1.0 <= pods,
    )
}

/// Whether some node would take `pod` once the pods being deleted, and those `leaving` (a
/// rollout's old ones), are gone. None when it cannot be told: the nodes or their pods cannot
/// be listed (RBAC), or the pod asks what this does not read.
pub(super) async fn once_released(
    client: &kube::Client,
    nodes: &[Node],
    pod: &Pod,
    leaving: &dyn Fn(&Pod) -> bool,
) -> Option<bool> {
    if nodes.is_empty() {
        return None;
    }
    let wanted = Requests::of(pod)?;
    let pods: Api<Pod> = Api::all(client.clone());
    for node in nodes {
        if !admits(node, pod)? {
            continue;
        }
        let on_it = ListParams::default().fields(&format!("spec.nodeName={}", node.name_any()));
        let bound = pods.list(&on_it).await.ok()?.items;
        // The pod seen unschedulable may be bound by now (the watch is behind the list): it
        // got its room, and must not be counted as holding it.
        if bound
            .iter()
            .any(|b| b.metadata.uid.is_some() && b.metadata.uid == pod.metadata.uid)
        {
            return Some(true);
        }
        if has_room(node, &bound, wanted, leaving)? {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(cpu: &str, memory: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "big", "labels": {"size": "big"}},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}
        }))
        .unwrap()
    }

    fn pod(cpu: &str, memory: &str, extra: serde_json::Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": "p"},
            "spec": {
                "nodeSelector": {"size": "big"},
                "containers": [{"name": "nginx",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
            }
        });
        if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                match (m.get_mut(k), x) {
                    (Some(serde_json::Value::Object(have)), serde_json::Value::Object(add)) => {
                        have.extend(add.clone());
                    }
                    _ => {
                        m.insert(k.clone(), x.clone());
                    }
                }
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn has_room_now(node: &Node, bound: &[Pod], wanted: Requests) -> Option<bool> {
        has_room(node, bound, wanted, &|_| false)
    }

    #[test]
    fn a_node_filled_by_pods_being_replaced_has_room_once_they_go() {
        let n = node("8", "32Gi", json!([]));
        let new = Requests::of(&pod("4", "1Gi", json!({}))).unwrap();
        let running = pod("4", "1Gi", json!({}));
        let going = pod(
            "4",
            "1Gi",
            json!({"metadata": {"deletionTimestamp": "2026-12-05T10:00:00Z"}}),
        );
        let ended = pod("4", "1Gi", json!({"status": {"phase": "Succeeded"}}));
        // Two running pods fill it; one of them being deleted frees its four cores.
        assert_eq!(
            has_room_now(&n, &[running.clone(), running.clone()], new),
            Some(false)
        );
        assert_eq!(has_room_now(&n, &[running.clone(), going], new), Some(true));
        assert_eq!(has_room_now(&n, &[running.clone(), ended], new), Some(true));
        // A rollout's old pod, not yet marked for deletion, leaves all the same.
        let old = pod("4", "1Gi", json!({"metadata": {"name": "old"}}));
        let pair = [running.clone(), old];
        let old_ones = |p: &Pod| p.metadata.name.as_deref() == Some("old");
        assert_eq!(has_room(&n, &pair, new, &old_ones), Some(true));
        assert_eq!(has_room_now(&n, &pair, new), Some(false));
        // Memory counts as CPU does; millicores add up exactly.
        let big = Requests::of(&pod("1", "32Gi", json!({}))).unwrap();
        assert_eq!(
            has_room_now(&n, std::slice::from_ref(&running), big),
            Some(false)
        );
        let thirds = pod("1334m", "1Gi", json!({}));
        let three = [thirds.clone(), thirds.clone(), thirds];
        let over = Requests::of(&pod("4000m", "1Gi", json!({}))).unwrap();
        assert_eq!(has_room_now(&n, &three, over), Some(false));
        let fits = Requests::of(&pod("3998m", "1Gi", json!({}))).unwrap();
        assert_eq!(has_room_now(&n, &three, fits), Some(true));
        // A quantity it cannot read: it cannot tell.
        assert_eq!(
            has_room_now(&n, &[pod("lots", "1Gi", json!({}))], new),
            None
        );
    }

    #[test]
    fn selectors_cordons_and_taints_keep_a_pod_off_a_node() {
        let p = pod("1", "1Gi", json!({}));
        assert_eq!(admits(&node("8", "32Gi", json!([])), &p), Some(true));
        let other = pod(
            "1",
            "1Gi",
            json!({"spec": {"nodeSelector": {"size": "small"}}}),
        );
        assert_eq!(admits(&node("8", "32Gi", json!([])), &other), Some(false));
        let mut cordoned = node("8", "32Gi", json!([]));
        if let Some(s) = cordoned.spec.as_mut() {
            s.unschedulable = Some(true);
        }
        assert_eq!(admits(&cordoned, &p), Some(false));
        let arm = node(
            "8",
            "32Gi",
            json!([{"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}]),
        );
        assert_eq!(admits(&arm, &p), Some(false));
        let tolerant = pod(
            "1",
            "1Gi",
            json!({"spec": {"tolerations": [{"key": "kubernetes.io/arch", "operator": "Equal",
                "value": "arm64", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(admits(&arm, &tolerant), Some(true));
        let everything = pod(
            "1",
            "1Gi",
            json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
        );
        assert_eq!(admits(&arm, &everything), Some(true));
        let preferred = node(
            "8",
            "32Gi",
            json!([{"key": "spot", "effect": "PreferNoSchedule"}]),
        );
        assert_eq!(admits(&preferred, &p), Some(true));
        let affine = pod(
            "1",
            "1Gi",
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}}}),
        );
        assert_eq!(admits(&arm, &affine), None);
    }

    #[test]
    fn an_init_container_counts_where_it_asks_more_than_the_containers() {
        let p = pod(
            "500m",
            "1Gi",
            json!({"spec": {"initContainers": [{"name": "init",
                "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}]}}),
        );
        let r = Requests::of(&p).unwrap();
        assert!((r.cores - 2.0).abs() < 1e-12, "{r:?}");
        assert!((r.bytes - (1u64 << 30) as f64).abs() < 1.0, "{r:?}");
    }
}
