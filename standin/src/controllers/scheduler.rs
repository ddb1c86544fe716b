//! The scheduler: binds pending pods to a node that passes the filters (nodeSelector, required
//! node affinity, required pod (anti-)affinity, cordoned nodes), preferring the node with the
//! fewest pods. When none fits, the pod stays Pending with `PodScheduled=False`, reason
//! `Unschedulable`, and the real scheduler's message ("0/2 nodes are available: 2 node(s)
//! didn't match Pod's node affinity/selector. preemption: …").

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::events;
use crate::clock;
use crate::resources;
use crate::selector::LabelSelector;
use crate::state::Shared;
use crate::store::{self, Obj};

const NODE_SELECTOR: &str = "node(s) didn't match Pod's node affinity/selector";
const ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
const AFFINITY: &str = "node(s) didn't match pod affinity rules";
const CORDONED: &str = "node(s) were unschedulable";

fn node_labels(n: &Value) -> Option<&Value> {
    n.pointer("/metadata/labels")
}

/// Required node affinity: any term matches (expressions on labels, fields on the name).
fn node_affinity_ok(pod: &Value, node: &Value) -> bool {
    let Some(terms) = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return true;
    };
    terms.iter().any(|t| {
        let exprs = t
            .get("matchExpressions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let fields = t
            .get("matchFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let name_labels = json!({"metadata.name": store::name_of(node)});
        LabelSelector::from_expressions(&exprs).matches(node_labels(node))
            && LabelSelector::from_expressions(&fields).matches(Some(&name_labels))
    })
}

/// Whether some pod matching `term` runs in the same topology domain as `node`.
fn term_satisfied(
    term: &Value,
    pod: &Value,
    node: &Value,
    nodes: &[Obj],
    placed: &[(Obj, String)],
) -> bool {
    let key = term["topologyKey"]
        .as_str()
        .unwrap_or("kubernetes.io/hostname");
    let domain = node_labels(node).and_then(|l| l.get(key)).cloned();
    let sel = LabelSelector::from_object(term.get("labelSelector").unwrap_or(&Value::Null));
    let namespaces: Vec<String> = term
        .get("namespaces")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .filter(|v: &Vec<String>| !v.is_empty())
        .unwrap_or_else(|| vec![store::namespace_of(pod).to_string()]);
    placed.iter().any(|(other, other_node)| {
        let other_domain = nodes
            .iter()
            .find(|n| store::name_of(n) == other_node)
            .and_then(|n| node_labels(n).and_then(|l| l.get(key)).cloned());
        domain.is_some()
            && other_domain == domain
            && namespaces.iter().any(|ns| ns == store::namespace_of(other))
            && sel.matches_object(other)
            && store::uid_of(other) != store::uid_of(pod)
    })
}

fn required_terms<'a>(pod: &'a Value, kind: &str) -> Vec<&'a Value> {
    pod.pointer(&format!(
        "/spec/affinity/{kind}/requiredDuringSchedulingIgnoredDuringExecution"
    ))
    .and_then(Value::as_array)
    .map(|a| a.iter().collect())
    .unwrap_or_default()
}

/// Why a node does not fit (None: it fits).
fn misfit(
    pod: &Value,
    node: &Value,
    nodes: &[Obj],
    placed: &[(Obj, String)],
) -> Option<&'static str> {
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        return Some(CORDONED);
    }
    let sel = LabelSelector::from_map(pod.pointer("/spec/nodeSelector").unwrap_or(&json!({})));
    if !sel.matches(node_labels(node)) || !node_affinity_ok(pod, node) {
        return Some(NODE_SELECTOR);
    }
    if required_terms(pod, "podAffinity")
        .iter()
        .any(|t| !term_satisfied(t, pod, node, nodes, placed))
    {
        return Some(AFFINITY);
    }
    if required_terms(pod, "podAntiAffinity")
        .iter()
        .any(|t| term_satisfied(t, pod, node, nodes, placed))
    {
        return Some(ANTI_AFFINITY);
    }
    None
}

/// "0/2 nodes are available: 1 node(s) …, 1 node(s) …. preemption: 0/2 nodes are available: 2
/// Preemption is not helpful for scheduling."
fn unschedulable_message(total: usize, reasons: &BTreeMap<&'static str, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!(
        "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling.",
        parts.join(", ")
    )
}

pub fn sync(sh: &Shared) {
    let (pods, _) = sh.store.list(&resources::PODS, None);
    let pending: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
                && p.pointer("/metadata/deletionTimestamp").is_none()
                && p.pointer("/spec/schedulerName")
                    .and_then(Value::as_str)
                    .unwrap_or("default-scheduler")
                    == "default-scheduler"
        })
        .collect();
    if pending.is_empty() {
        return;
    }
    let (nodes, _) = sh.store.list(&resources::NODES, None);
    let mut placed: Vec<(Obj, String)> = pods
        .iter()
        .filter(|p| {
            !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| {
            let n = p.pointer("/spec/nodeName").and_then(Value::as_str)?;
            (!n.is_empty()).then(|| (p.clone(), n.to_string()))
        })
        .collect();
    for pod in pending {
        let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut fits: Vec<&Obj> = Vec::new();
        for n in &nodes {
            match misfit(pod, n, &nodes, &placed) {
                Some(r) => *reasons.entry(r).or_default() += 1,
                None => fits.push(n),
            }
        }
        let (ns, name) = (store::namespace_of(pod), store::name_of(pod));
        let best = fits.iter().min_by_key(|n| {
            placed
                .iter()
                .filter(|(_, pn)| pn == store::name_of(n))
                .count()
        });
        match best {
            Some(node) => {
                let node_name = store::name_of(node).to_string();
                let now = clock::now();
                let bound = sh.store.update(&resources::PODS, ns, name, |o| {
                    o["spec"]["nodeName"] = json!(node_name);
                    o["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True",
                        "lastProbeTime": null, "lastTransitionTime": now}]);
                    Ok(())
                });
                if let Ok(w) = bound {
                    placed.push((w.object().clone(), node_name.clone()));
                    events::record(
                        sh,
                        w.object(),
                        "Normal",
                        "Scheduled",
                        &format!("Successfully assigned {ns}/{name} to {node_name}"),
                        "default-scheduler",
                    );
                }
            }
            None => {
                let message = unschedulable_message(nodes.len(), &reasons);
                let already = pod
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
                    .is_some_and(|c| c["message"] == message.as_str());
                if already {
                    continue;
                }
                let now = clock::now();
                if let Ok(w) = sh.store.update(&resources::PODS, ns, name, |o| {
                    o["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                        "lastProbeTime": null, "lastTransitionTime": now,
                        "reason": "Unschedulable", "message": message}]);
                    Ok(())
                }) {
                    events::record(
                        sh,
                        w.object(),
                        "Warning",
                        "FailedScheduling",
                        &message,
                        "default-scheduler",
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_like_the_scheduler() {
        let r = BTreeMap::from([(NODE_SELECTOR, 2)]);
        assert_eq!(
            unschedulable_message(2, &r),
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn selectors_and_anti_affinity() {
        let node = |name: &str, arch: &str| -> Obj {
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/arch": arch, "kubernetes.io/hostname": name}}}).into()
        };
        let nodes = vec![node("a", "amd64"), node("b", "arm64")];
        let pod = json!({"metadata": {"namespace": "n", "uid": "1"},
            "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}});
        assert_eq!(misfit(&pod, &nodes[0], &nodes, &[]), Some(NODE_SELECTOR));
        assert_eq!(misfit(&pod, &nodes[1], &nodes, &[]), None);
        let nginx: Obj = json!({"metadata": {"namespace": "n", "uid": "2", "labels": {"app": "nginx-multiarch"}}}).into();
        let placed = vec![(nginx, "a".to_string())];
        let load = json!({"metadata": {"namespace": "n", "uid": "3"}, "spec": {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": "nginx-multiarch"}}}]}}}});
        assert_eq!(
            misfit(&load, &nodes[0], &nodes, &placed),
            Some(ANTI_AFFINITY)
        );
        assert_eq!(misfit(&load, &nodes[1], &nodes, &placed), None);
        let affinity = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}}});
        assert!(node_affinity_ok(&affinity, &nodes[0]));
        assert!(!node_affinity_ok(&affinity, &nodes[1]));
    }
}
