//! The kubelet's `/metrics/resource` (Prometheus text): cumulative CPU seconds and working-set
//! memory per container, pod and node, each with its sample time — what metrics-server
//! scrapes to serve `metrics.k8s.io` (and so `kubectl top`). A pod keeps one cgroup, so its
//! usage is reported on its first container; the node's is its cgroup's, which holds every
//! pod the node ran.

use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use http::StatusCode;

use super::server::{text, Resp};
use super::{clock, Agent};

const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Milliseconds since the epoch of a sample taken at `at` (an Instant of this process).
fn epoch_ms(at: Instant) -> u128 {
    let age = at.elapsed();
    SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::now())
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One running pod's latest sample, as the families report it.
struct Row {
    ns: String,
    pod: String,
    container: String,
    cpu_s: f64,
    working_set: u64,
    started: f64,
    ms: u128,
}

/// The row of a pod whose first container runs and has been sampled.
fn row(rt: &super::PodRuntime) -> Option<Row> {
    let (at, usage) = rt
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .back()
        .copied()?;
    let states = rt.container_states();
    let first = states.first()?;
    let started = first
        .state
        .pointer("/running/startedAt")
        .and_then(serde_json::Value::as_str)
        .and_then(clock::parse)?;
    Some(Row {
        ns: rt.ns.clone(),
        pod: rt.name.clone(),
        container: first.name.clone(),
        cpu_s: usage.usage_usec as f64 / 1e6,
        working_set: usage.working_set_bytes,
        started: started
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64(),
        ms: epoch_ms(at),
    })
}

pub fn resource(agent: &Agent) -> Resp {
    let rows: Vec<Row> = agent.all().iter().filter_map(|rt| row(rt)).collect();
    let now_ms = epoch_ms(Instant::now());
    let mut out = String::new();
    type Value = fn(&Row) -> String;
    // (family, kind, help, per container (else per pod), value)
    let families: [(&str, &str, &str, bool, Value); 5] = [
        (
            "container_cpu_usage_seconds_total",
            "counter",
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
            true,
            |r| r.cpu_s.to_string(),
        ),
        (
            "container_memory_working_set_bytes",
            "gauge",
            "[STABLE] Current working set of the container in bytes",
            true,
            |r| r.working_set.to_string(),
        ),
        (
            "container_start_time_seconds",
            "gauge",
            "[STABLE] Start time of the container since unix epoch in seconds",
            true,
            |r| r.started.to_string(),
        ),
        (
            "pod_cpu_usage_seconds_total",
            "counter",
            "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
            false,
            |r| r.cpu_s.to_string(),
        ),
        (
            "pod_memory_working_set_bytes",
            "gauge",
            "[STABLE] Current working set of the pod in bytes",
            false,
            |r| r.working_set.to_string(),
        ),
    ];
    for (name, kind, help, per_container, value) in families {
        family(&mut out, name, kind, help);
        for r in &rows {
            let container = if per_container {
                format!("container=\"{}\",", r.container)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{name}{{{container}namespace=\"{}\",pod=\"{}\"}} {} {}",
                r.ns,
                r.pod,
                value(r),
                r.ms
            );
        }
    }
    let node = agent
        .cgroups
        .as_ref()
        .map(|cg| cg.usage())
        .unwrap_or_default();
    let node_cpu = node.usage_usec as f64 / 1e6;
    let node_mem = node.working_set_bytes;
    family(
        &mut out,
        "node_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    );
    let _ = writeln!(out, "node_cpu_usage_seconds_total {node_cpu} {now_ms}");
    family(
        &mut out,
        "node_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the node in bytes",
    );
    let _ = writeln!(out, "node_memory_working_set_bytes {node_mem} {now_ms}");
    family(
        &mut out,
        "resource_scrape_error",
        "gauge",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
    );
    let _ = writeln!(out, "resource_scrape_error 0");
    text(StatusCode::OK, CONTENT_TYPE, out)
}
