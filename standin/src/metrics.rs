//! `metrics.k8s.io/v1beta1` PodMetrics and NodeMetrics (what `kubectl top` reads), from the
//! pods' own cgroups: CPU as nanocores over the last ~10 s of samples (one a second), memory
//! as the working set. A pod's usage is reported on its first container (the stand-in keeps
//! one cgroup per pod); a node's is the sum of its pods'. Pods younger than two samples have
//! no metrics yet, as with metrics-server.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::kubelet::PodRuntime;
use crate::reply::{self, Query, Resp};
use crate::resources;
use crate::route::Target;
use crate::selector::LabelSelector;
use crate::state::Shared;

/// How far back the CPU rate looks.
const WINDOW: Duration = Duration::from_secs(10);

/// (nanocores, working set bytes, window) of a pod; None before two samples exist.
fn pod_usage(rt: &PodRuntime) -> Option<(u64, u64, Duration)> {
    let s = rt.samples.lock().unwrap_or_else(|e| e.into_inner());
    let (t1, u1) = s.back()?;
    let (t0, u0) = s
        .iter()
        .find(|(t, _)| t1.duration_since(*t) <= WINDOW + Duration::from_millis(500))
        .filter(|(t, _)| t < t1)?;
    let dt = t1.duration_since(*t0);
    let cpu_ns = u1.usage_usec.saturating_sub(u0.usage_usec) * 1000;
    let nanocores = (cpu_ns as f64 / dt.as_secs_f64()) as u64;
    Some((nanocores, u1.working_set_bytes, dt))
}

/// `10.003s`, as metrics-server writes a window.
fn window(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
}

fn pod_metrics(sh: &Shared, rt: &PodRuntime) -> Option<Value> {
    let (cpu, mem, dt) = pod_usage(rt)?;
    let pod = sh.store.get(&resources::PODS, &rt.ns, &rt.name)?;
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let (cpu, mem) = if i == 0 { (cpu, mem) } else { (0, 0) };
            json!({"name": c["name"], "usage": {"cpu": format!("{cpu}n"), "memory": format!("{}Ki", mem / 1024)}})
        })
        .collect();
    Some(json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": rt.name, "namespace": rt.ns, "creationTimestamp": clock::now(),
                     "labels": pod.pointer("/metadata/labels").cloned().unwrap_or(json!({}))},
        "timestamp": clock::now(),
        "window": window(dt),
        "containers": containers,
    }))
}

pub fn handle(sh: &Shared, t: &Target, q: &Query) -> ApiResult<Resp> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
    let pods = sh.kubelet.pods();
    if t.res.is(&resources::POD_METRICS) {
        let mut items: Vec<Value> = pods
            .iter()
            .filter(|rt| t.ns.as_deref().is_none_or(|ns| rt.ns == ns))
            .filter(|rt| t.name.as_deref().is_none_or(|n| rt.name == n))
            .filter_map(|rt| pod_metrics(sh, rt))
            .filter(|m| labels.matches_object(m))
            .collect();
        items.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        if let Some(name) = &t.name {
            return match items.pop() {
                Some(m) => Ok(reply::json(200, &m)),
                None => Err(ApiError::new(
                    404,
                    "NotFound",
                    format!("podmetrics.metrics.k8s.io \"{name}\" not found"),
                )),
            };
        }
        return Ok(reply::json(
            200,
            &json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {}, "items": items}),
        ));
    }
    let mut per_node: BTreeMap<String, (u64, u64, Duration)> = BTreeMap::new();
    for n in sh.store.list(&resources::NODES, None).0 {
        per_node.insert(crate::store::name_of(&n).to_string(), (0, 0, WINDOW));
    }
    for rt in &pods {
        if let (Some(e), Some((c, m, w))) = (per_node.get_mut(&rt.node), pod_usage(rt)) {
            e.0 += c;
            e.1 += m;
            e.2 = w;
        }
    }
    let mut items: Vec<Value> = per_node
        .into_iter()
        .filter(|(n, _)| t.name.as_deref().is_none_or(|x| x == n))
        .map(|(n, (c, m, w))| {
            json!({"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                   "metadata": {"name": n, "creationTimestamp": clock::now()},
                   "timestamp": clock::now(), "window": window(w),
                   "usage": {"cpu": format!("{c}n"), "memory": format!("{}Ki", m / 1024)}})
        })
        .collect();
    if let Some(name) = &t.name {
        return match items.pop() {
            Some(m) => Ok(reply::json(200, &m)),
            None => Err(ApiError::new(
                404,
                "NotFound",
                format!("nodemetrics.metrics.k8s.io \"{name}\" not found"),
            )),
        };
    }
    Ok(reply::json(
        200,
        &json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {}, "items": items}),
    ))
}
