//! The kubelet's `/metrics/resource` (Prometheus text): cumulative CPU seconds and working-set
//! memory per container, pod and node, each with its sample time — what metrics-server
//! scrapes to serve `metrics.k8s.io` (and so `kubectl top`). Each running container's figures
//! are its own cgroup's; a pod's are its cgroup's, every container of it added up by the
//! kernel; the node's its cgroup's, which holds every pod the node ran. A figure that cannot
//! be read is left out and `resource_scrape_error` is 1, never a zero in its place.

use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use http::StatusCode;

use super::reply::{text, Resp};
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

/// One figure's owner: a container of a pod, or a pod.
struct Row {
    ns: String,
    pod: String,
    /// None: the pod's own row.
    container: Option<String>,
    cpu_s: f64,
    working_set: u64,
    /// The container's start (containers only).
    started: Option<f64>,
    ms: u128,
}

fn since_epoch(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// A running pod's rows: each running container's, read now from its cgroup, then the pod's
/// latest sample. The bool says whether a figure of a running container could not be read.
fn rows_of(rt: &super::PodRuntime) -> (Vec<Row>, bool) {
    let (mut out, mut failed) = (Vec::new(), false);
    let Some(cg) = &rt.cgroup else {
        return (out, false);
    };
    for c in rt.container_states() {
        let Some(started) = c
            .state
            .pointer("/running/startedAt")
            .and_then(serde_json::Value::as_str)
            .and_then(clock::parse)
        else {
            continue;
        };
        match cg.container(&c.name).usage() {
            Ok(u) => out.push(Row {
                ns: rt.ns.clone(),
                pod: rt.name.clone(),
                container: Some(c.name.clone()),
                cpu_s: u.usage_usec as f64 / 1e6,
                working_set: u.working_set_bytes,
                started: Some(since_epoch(started)),
                ms: epoch_ms(Instant::now()),
            }),
            Err(e) => {
                eprintln!(
                    "node agent: metrics of {}/{} {}: {e}",
                    rt.ns, rt.name, c.name
                );
                failed = true;
            }
        }
    }
    let latest = rt
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .back()
        .copied();
    if let (Some((at, u)), false) = (latest, out.is_empty()) {
        out.push(Row {
            ns: rt.ns.clone(),
            pod: rt.name.clone(),
            container: None,
            cpu_s: u.usage_usec as f64 / 1e6,
            working_set: u.working_set_bytes,
            started: None,
            ms: epoch_ms(at),
        });
    }
    (out, failed)
}

/// A family's value of a row.
type Value = fn(&Row) -> String;

/// The container and pod families: (name, kind, help, per container (else per pod), value).
const FAMILIES: [(&str, &str, &str, bool, Value); 5] = [
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
        |r| r.started.map(|s| s.to_string()).unwrap_or_default(),
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

pub fn resource(agent: &Agent) -> Resp {
    let mut failed = false;
    let mut rows = Vec::new();
    for rt in agent.all() {
        let (r, f) = rows_of(&rt);
        rows.extend(r);
        failed |= f;
    }
    let mut out = String::new();
    for (name, kind, help, per_container, value) in FAMILIES {
        family(&mut out, name, kind, help);
        for r in rows
            .iter()
            .filter(|r| r.container.is_some() == per_container)
        {
            let container = match &r.container {
                Some(c) => format!("container=\"{c}\","),
                None => String::new(),
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
    failed |= !node_rows(agent, &mut out);
    family(
        &mut out,
        "resource_scrape_error",
        "gauge",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
    );
    let _ = writeln!(out, "resource_scrape_error {}", u8::from(failed));
    text(StatusCode::OK, CONTENT_TYPE, out)
}

/// The node's families, their value when its cgroup could be read (false when not).
fn node_rows(agent: &Agent, out: &mut String) -> bool {
    let now_ms = epoch_ms(Instant::now());
    let node = match agent.cgroups.as_ref().map(|cg| cg.usage()) {
        Some(Ok(u)) => Some(u),
        Some(Err(e)) => {
            eprintln!("node agent: the node's metrics: {e}");
            None
        }
        None => None,
    };
    family(
        out,
        "node_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    );
    if let Some(n) = &node {
        let cpu = n.usage_usec as f64 / 1e6;
        let _ = writeln!(out, "node_cpu_usage_seconds_total {cpu} {now_ms}");
    }
    family(
        out,
        "node_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the node in bytes",
    );
    if let Some(n) = &node {
        let mem = n.working_set_bytes;
        let _ = writeln!(out, "node_memory_working_set_bytes {mem} {now_ms}");
    }
    node.is_some()
}
