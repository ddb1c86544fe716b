//! `meta.k8s.io/v1` Tables, which `kubectl get` asks for and prints column by column. The
//! columns are the real server's for pods, deployments, services, nodes, namespaces, jobs and
//! configmaps; other resources get Name and Age (what a server answers for custom resources).

use std::time::SystemTime;

use serde_json::{json, Value};

use crate::clock;
use crate::resources::{self, Res};
use crate::store::Obj;

fn col(name: &str, ty: &str, priority: i64, description: &str) -> Value {
    let mut c = json!({"name": name, "type": ty, "format": "", "description": description, "priority": priority});
    if name == "Name" {
        c["format"] = json!("name");
    }
    c
}

fn columns(res: Res) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    );
    let age = col("Age", "string", 0, "CreationTimestamp is a timestamp representing the server time when this object was created.");
    if res.is(&resources::PODS) {
        vec![
            name,
            col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            col("Status", "string", 0, "The aggregate status of the containers in this pod."),
            col("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            age,
            col("IP", "string", 1, "IP address allocated to the pod."),
            col("Node", "string", 1, "Name of the node where the pod is scheduled."),
            col("Nominated Node", "string", 1, "Name of the node where the pod is nominated to."),
            col("Readiness Gates", "string", 1, "Pod readiness gates."),
        ]
    } else if res.is(&resources::DEPLOYMENTS) {
        vec![
            name,
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col("Up-to-date", "string", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            col("Available", "string", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            age,
            col("Containers", "string", 1, "Names of each container in the template."),
            col("Images", "string", 1, "Images referenced by each container in the template."),
            col("Selector", "string", 1, "Label selector for pods."),
        ]
    } else if res.is(&resources::SERVICES) {
        vec![
            name,
            col("Type", "string", 0, "type determines how the Service is exposed."),
            col("Cluster-IP", "string", 0, "clusterIP is the IP address of the service."),
            col("External-IP", "string", 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
            col("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
            age,
            col("Selector", "string", 1, "Route service traffic to pods with label keys and values matching this selector."),
        ]
    } else if res.is(&resources::NODES) {
        vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col("Internal-IP", "string", 1, "List of internal IPs."),
            col("External-IP", "string", 1, "List of external IPs."),
            col("OS-Image", "string", 1, "OS Image reported by the node."),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node.",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "Container Runtime Version reported by the node.",
            ),
        ]
    } else if res.is(&resources::NAMESPACES) {
        vec![
            name,
            col("Status", "string", 0, "The status of the namespace"),
            age,
        ]
    } else if res.is(&resources::JOBS) {
        vec![
            name,
            col("Status", "string", 0, "Status of the job."),
            col(
                "Completions",
                "string",
                0,
                "The completion status of the job.",
            ),
            col(
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            age,
            col(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            col(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            col("Selector", "string", 1, "Label selector for pods."),
        ]
    } else if res.is(&resources::CONFIGMAPS) {
        vec![
            name,
            col("Data", "integer", 0, "Number of data entries."),
            age,
        ]
    } else if res.is(&resources::ENDPOINTS) {
        vec![
            name,
            col(
                "Endpoints",
                "string",
                0,
                "Endpoints is the list of endpoints for the service.",
            ),
            age,
        ]
    } else if res.is(&resources::EVENTS) {
        vec![
            col(
                "Last Seen",
                "string",
                0,
                "Time when this Event was last observed.",
            ),
            col("Type", "string", 0, "Type of this event (Normal, Warning)."),
            col("Reason", "string", 0, "Why the action was taken."),
            col(
                "Object",
                "string",
                0,
                "The object that this event is about.",
            ),
            col(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
        ]
    } else {
        vec![name, age]
    }
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn none_if_empty(x: String) -> String {
    if x.is_empty() {
        "<none>".into()
    } else {
        x
    }
}

/// The STATUS column of `kubectl get pods` (kubectl's printPod, without init containers).
pub fn pod_status(p: &Value) -> String {
    let mut reason = s(p, "/status/phase").to_string();
    if !s(p, "/status/reason").is_empty() {
        reason = s(p, "/status/reason").to_string();
    }
    let mut has_running = false;
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in statuses.iter().rev() {
        if let Some(w) = c.pointer("/state/waiting") {
            if !s(w, "/reason").is_empty() {
                reason = s(w, "/reason").to_string();
                continue;
            }
        }
        if let Some(t) = c.pointer("/state/terminated") {
            reason = if !s(t, "/reason").is_empty() {
                s(t, "/reason").to_string()
            } else if i(t, "/signal") != 0 {
                format!("Signal:{}", i(t, "/signal"))
            } else {
                format!("ExitCode:{}", i(t, "/exitCode"))
            };
        } else if c["ready"] == true && c.pointer("/state/running").is_some() {
            has_running = true;
        }
    }
    if reason == "Completed" && has_running {
        reason = "Running".into();
    }
    if p.pointer("/metadata/deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    reason
}

fn pod_cells(p: &Value) -> Vec<Value> {
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let restarts: i64 = statuses.iter().map(|c| i(c, "/restartCount")).sum();
    let last = statuses
        .iter()
        .filter_map(|c| {
            c.pointer("/lastState/terminated/finishedAt")
                .and_then(Value::as_str)
        })
        .filter_map(clock::parse)
        .max();
    let restarts = match last {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            clock::human_duration(SystemTime::now().duration_since(t).unwrap_or_default())
        ),
        _ => restarts.to_string(),
    };
    vec![
        json!(s(p, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(pod_status(p)),
        json!(restarts),
        json!(clock::age(
            p.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
        )),
        json!(none_if_empty(s(p, "/status/podIP").to_string())),
        json!(none_if_empty(s(p, "/spec/nodeName").to_string())),
        json!("<none>"),
        json!("<none>"),
    ]
}

fn containers_images(spec: Option<&Value>) -> (String, String) {
    let cs = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn selector_text(sel: Option<&Value>) -> String {
    let Some(m) = sel
        .and_then(|s| s.get("matchLabels").or(Some(s)))
        .and_then(Value::as_object)
    else {
        return "<none>".into();
    };
    let parts: Vec<String> = m
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    none_if_empty(parts.join(","))
}

/// A selector as query text (`app=x,arch=amd64`), for Scale status.
pub fn selector_query(sel: Option<&Value>) -> String {
    let t = selector_text(sel);
    if t == "<none>" {
        String::new()
    } else {
        t
    }
}

fn service_cells(sv: &Value) -> Vec<Value> {
    let ty = s(sv, "/spec/type");
    let ingress: Vec<String> = sv
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| i.get("ip").or(i.get("hostname")).and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let external = if ty == "LoadBalancer" {
        if ingress.is_empty() {
            "<pending>".to_string()
        } else {
            ingress.join(",")
        }
    } else {
        "<none>".to_string()
    };
    let ports: Vec<String> = sv
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let proto = s(p, "/protocol");
                    match p.get("nodePort").and_then(Value::as_i64) {
                        Some(np) => format!("{}:{np}/{proto}", i(p, "/port")),
                        None => format!("{}/{proto}", i(p, "/port")),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(s(sv, "/metadata/name")),
        json!(ty),
        json!(none_if_empty(s(sv, "/spec/clusterIP").to_string())),
        json!(external),
        json!(none_if_empty(ports.join(","))),
        json!(clock::age(
            sv.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
        )),
        json!(selector_text(sv.pointer("/spec/selector"))),
    ]
}

fn cells(res: Res, o: &Value) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let age = json!(clock::age(
        o.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
    ));
    if res.is(&resources::PODS) {
        pod_cells(o)
    } else if res.is(&resources::DEPLOYMENTS) {
        let (c, im) = containers_images(o.pointer("/spec/template/spec"));
        vec![
            name,
            json!(format!(
                "{}/{}",
                i(o, "/status/readyReplicas"),
                i(o, "/spec/replicas")
            )),
            json!(i(o, "/status/updatedReplicas")),
            json!(i(o, "/status/availableReplicas")),
            age,
            json!(c),
            json!(im),
            json!(selector_text(o.pointer("/spec/selector"))),
        ]
    } else if res.is(&resources::SERVICES) {
        service_cells(o)
    } else if res.is(&resources::NODES) {
        let ready = o
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map_or("Unknown", |c| {
                if c["status"] == "True" {
                    "Ready"
                } else {
                    "NotReady"
                }
            });
        let ip = |t: &str| {
            o.pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|a| a["type"] == t))
                .map_or("<none>".to_string(), |a| s(a, "/address").to_string())
        };
        vec![
            name,
            json!(ready),
            json!("<none>"),
            age,
            json!(s(o, "/status/nodeInfo/kubeletVersion")),
            json!(ip("InternalIP")),
            json!(ip("ExternalIP")),
            json!(s(o, "/status/nodeInfo/osImage")),
            json!(s(o, "/status/nodeInfo/kernelVersion")),
            json!(s(o, "/status/nodeInfo/containerRuntimeVersion")),
        ]
    } else if res.is(&resources::NAMESPACES) {
        vec![name, json!(s(o, "/status/phase")), age]
    } else if res.is(&resources::JOBS) {
        let (c, im) = containers_images(o.pointer("/spec/template/spec"));
        let cond = |t: &str| {
            o.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
        };
        let status = if cond("Complete") {
            "Complete"
        } else if cond("Failed") {
            "Failed"
        } else if cond("FailureTarget") {
            "FailureTarget"
        } else if cond("SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let duration = match (
            o.pointer("/status/startTime")
                .and_then(Value::as_str)
                .and_then(clock::parse),
            o.pointer("/status/completionTime")
                .and_then(Value::as_str)
                .and_then(clock::parse),
        ) {
            (Some(a), Some(b)) => clock::human_duration(b.duration_since(a).unwrap_or_default()),
            (Some(a), None) => {
                clock::human_duration(SystemTime::now().duration_since(a).unwrap_or_default())
            }
            _ => String::new(),
        };
        vec![
            name,
            json!(status),
            json!(format!(
                "{}/{}",
                i(o, "/status/succeeded"),
                i(o, "/spec/completions").max(1)
            )),
            json!(duration),
            age,
            json!(c),
            json!(im),
            json!(selector_text(o.pointer("/spec/selector"))),
        ]
    } else if res.is(&resources::ENDPOINTS) {
        let mut eps = Vec::new();
        for sub in o
            .get("subsets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for a in sub
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for p in sub
                    .get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    eps.push(format!("{}:{}", s(a, "/ip"), i(p, "/port")));
                }
            }
        }
        vec![name, json!(none_if_empty(eps.join(","))), age]
    } else if res.is(&resources::EVENTS) {
        let kind = s(o, "/involvedObject/kind").to_lowercase();
        vec![
            json!(clock::age(
                o.pointer("/lastTimestamp").and_then(Value::as_str)
            )),
            json!(s(o, "/type")),
            json!(s(o, "/reason")),
            json!(format!("{kind}/{}", s(o, "/involvedObject/name"))),
            json!(s(o, "/message")),
        ]
    } else if res.is(&resources::CONFIGMAPS) {
        let n = o
            .get("data")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
            + o.get("binaryData")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
        vec![name, json!(n), age]
    } else {
        vec![name, age]
    }
}

/// One row; `object` as kubectl asks by default (PartialObjectMetadata).
pub fn row(res: Res, o: &Value) -> Value {
    json!({
        "cells": cells(res, o),
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
        },
    })
}

/// A Table of objects.
pub fn table(res: Res, objs: &[Obj], rv: u64) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": columns(res),
        "rows": objs.iter().map(|o| row(res, o)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_match_columns() {
        let objs = [
            (&resources::PODS, json!({"metadata": {"name": "p"}})),
            (&resources::DEPLOYMENTS, json!({"metadata": {"name": "d"}})),
            (&resources::SERVICES, json!({"metadata": {"name": "s"}})),
            (&resources::NODES, json!({"metadata": {"name": "n"}})),
            (&resources::NAMESPACES, json!({"metadata": {"name": "n"}})),
            (&resources::JOBS, json!({"metadata": {"name": "j"}})),
            (&resources::CONFIGMAPS, json!({"metadata": {"name": "c"}})),
            (&resources::ENDPOINTS, json!({"metadata": {"name": "e"}})),
            (&resources::EVENTS, json!({"metadata": {"name": "e"}})),
            (&resources::SECRETS, json!({"metadata": {"name": "s"}})),
        ];
        for (res, o) in objs {
            assert_eq!(columns(res).len(), cells(res, &o).len(), "{}", res.plural);
        }
    }

    #[test]
    fn pod_status_column() {
        let p = json!({"metadata": {"name": "p"}, "status": {"phase": "Running",
            "containerStatuses": [{"ready": false, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(pod_status(&p), "CrashLoopBackOff");
        let p = json!({"metadata": {"name": "p", "deletionTimestamp": "x"}, "status": {"phase": "Running"}});
        assert_eq!(pod_status(&p), "Terminating");
        let p = json!({"status": {"phase": "Pending"}});
        assert_eq!(pod_status(&p), "Pending");
    }
}
