//! Services: LoadBalancer ingress addresses (127.3.x.y, unless a fault withholds them), the
//! Endpoints objects (Ready pods matching the selector), and the forwarders of `net` on
//! every service address.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use serde_json::{json, Value};

use super::events;
use crate::ops::{self, WriteOpts};
use crate::resources;
use crate::selector::LabelSelector;
use crate::state::Shared;
use crate::store::{self, Obj};

fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A Service port's target on a pod: a number, or a container port's name.
fn target_port(port: &Value, pod: &Value) -> Option<u16> {
    match port.get("targetPort") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Some(Value::String(name)) => name.parse().ok().or_else(|| {
            pod.pointer("/spec/containers")?
                .as_array()?
                .iter()
                .flat_map(|c| {
                    c.get("ports")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|p| p["name"] == name.as_str())?
                .get("containerPort")?
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
        }),
        _ => port
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok()),
    }
}

pub fn sync(sh: &Shared) {
    let (services, _) = sh.store.list(&resources::SERVICES, None);
    let (pods, _) = sh.store.list(&resources::PODS, None);
    let node_ips: Vec<Ipv4Addr> = (0..sh.opts.nodes.len())
        .map(|i| sh.alloc.node_ip(i))
        .collect();
    let mut wanted: HashMap<SocketAddrV4, Vec<SocketAddr>> = HashMap::new();
    let mut owners: HashMap<SocketAddrV4, Obj> = HashMap::new();
    for svc in &services {
        if svc.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let svc = load_balancer(sh, svc);
        let ns = store::namespace_of(&svc);
        let ty = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        let Some(selector) = svc
            .pointer("/spec/selector")
            .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
        else {
            continue;
        };
        let sel = LabelSelector::from_map(selector);
        let members: Vec<&Obj> = pods
            .iter()
            .filter(|p| store::namespace_of(p) == ns && sel.matches_object(p))
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .filter(|p| p.pointer("/status/podIP").and_then(Value::as_str).is_some())
            .collect();
        endpoints_object(sh, &svc, &members);
        let cluster_ip = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Ipv4Addr>().ok());
        let lb_ip = svc
            .pointer("/status/loadBalancer/ingress/0/ip")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Ipv4Addr>().ok())
            .filter(|_| ty == "LoadBalancer");
        for port in svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if port
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                != "TCP"
            {
                continue;
            }
            let eps: Vec<SocketAddr> = members
                .iter()
                .filter(|p| is_ready(p))
                .filter_map(|p| {
                    let ip: Ipv4Addr = p.pointer("/status/podIP")?.as_str()?.parse().ok()?;
                    Some(SocketAddr::from((ip, target_port(port, p)?)))
                })
                .collect();
            let Some(sp) = port
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
            else {
                continue;
            };
            let mut addrs: Vec<SocketAddrV4> = Vec::new();
            if let Some(ip) = cluster_ip {
                addrs.push(SocketAddrV4::new(ip, sp));
            }
            if let Some(ip) = lb_ip {
                addrs.push(SocketAddrV4::new(ip, sp));
            }
            if let Some(np) = port
                .get("nodePort")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
            {
                addrs.extend(node_ips.iter().map(|ip| SocketAddrV4::new(*ip, np)));
            }
            for a in addrs {
                wanted.insert(a, eps.clone());
                owners.insert(a, svc.clone());
            }
        }
    }
    for (addr, err) in sh.net.reconcile(wanted) {
        if let Some(svc) = owners.get(&addr) {
            events::record(
                sh,
                svc,
                "Warning",
                "FailedToBind",
                &format!("the stand-in cannot listen on {addr}: {err}"),
                "kube-proxy",
            );
        }
    }
    // Endpoints of Services that are gone
    let (eps, _) = sh.store.list(&resources::ENDPOINTS, None);
    for e in eps {
        let (ns, name) = (store::namespace_of(&e), store::name_of(&e));
        if sh.store.get(&resources::SERVICES, ns, name).is_none()
            && e.pointer("/metadata/labels/endpoints.kubernetes.io/managed-by")
                .is_some()
        {
            sh.store.remove(&resources::ENDPOINTS, ns, name);
        }
    }
}

/// Gives a LoadBalancer Service its ingress address (once, unless withheld); returns the
/// Service as it is now.
fn load_balancer(sh: &Shared, svc: &Obj) -> Obj {
    let ty = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let has = svc
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|i| !i.is_empty());
    let (ns, name) = (store::namespace_of(svc), store::name_of(svc));
    let status = if ty == "LoadBalancer" && !has && !sh.faults.withhold_lb() {
        let ip = sh.alloc.lb_ip();
        json!({"loadBalancer": {"ingress": [{"ip": ip.to_string(), "ipMode": "VIP"}]}})
    } else if ty != "LoadBalancer" && has {
        json!({"loadBalancer": {}})
    } else {
        return svc.clone();
    };
    match ops::update_status(sh, &resources::SERVICES, ns, name, status) {
        Ok(w) => {
            if ty == "LoadBalancer" {
                events::record(
                    sh,
                    w.object(),
                    "Normal",
                    "EnsuredLoadBalancer",
                    "Ensured load balancer",
                    "service-controller",
                );
            }
            w.into_object()
        }
        Err(_) => svc.clone(),
    }
}

/// The v1 Endpoints object of a Service (what `kubectl get endpoints` shows).
fn endpoints_object(sh: &Shared, svc: &Obj, members: &[&Obj]) {
    let (ns, name) = (store::namespace_of(svc), store::name_of(svc));
    let address = |p: &Obj| {
        json!({"ip": p.pointer("/status/podIP"), "nodeName": p.pointer("/spec/nodeName"),
               "targetRef": {"kind": "Pod", "namespace": ns, "name": store::name_of(p), "uid": store::uid_of(p)}})
    };
    let ready: Vec<Value> = members
        .iter()
        .filter(|p| is_ready(p))
        .map(|p| address(p))
        .collect();
    let not_ready: Vec<Value> = members
        .iter()
        .filter(|p| !is_ready(p))
        .map(|p| address(p))
        .collect();
    let ports: Vec<Value> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let port = members.first().and_then(|m| target_port(p, m)).map_or(json!(p["targetPort"]), |n| json!(n));
            let mut e = json!({"port": port, "protocol": p.get("protocol").cloned().unwrap_or(json!("TCP"))});
            if let Some(n) = p.get("name") {
                e["name"] = n.clone();
            }
            e
        })
        .collect();
    let mut subset = json!({"ports": ports});
    if !ready.is_empty() {
        subset["addresses"] = json!(ready);
    }
    if !not_ready.is_empty() {
        subset["notReadyAddresses"] = json!(not_ready);
    }
    let subsets = if members.is_empty() {
        json!([])
    } else {
        json!([subset])
    };
    match sh.store.get(&resources::ENDPOINTS, ns, name) {
        Some(e) if e.get("subsets") == Some(&subsets) => {}
        Some(_) => {
            let _ = sh.store.update(&resources::ENDPOINTS, ns, name, |e| {
                e["subsets"] = subsets;
                Ok(())
            });
        }
        None => {
            let e = json!({"apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": name, "namespace": ns,
                             "labels": {"endpoints.kubernetes.io/managed-by": "endpoint-controller"}},
                "subsets": subsets});
            let _ = ops::create(
                sh,
                &resources::ENDPOINTS,
                ns,
                e,
                WriteOpts::by("kube-controller-manager"),
            );
        }
    }
}
