//! The load-balancer controller (a cloud provider's part, so ours): each `type: LoadBalancer`
//! Service gets an ingress address from the cluster's load-balancer range, written to its
//! status as a cloud's controller writes it; kube-proxy then routes that address for real.
//!
//! A fault switch (`Fault::WithholdLoadBalancers`) holds addresses back, as a cloud that
//! is out of public IPs does: services stay `<pending>`.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};

use crate::faults::{self, Fault};
use crate::layout::ClusterDir;
use crate::topology;

/// How often the fault switch is looked at when no Service changes.
const RECHECK: Duration = Duration::from_secs(1);

pub async fn run(client: kube::Client, dir: ClusterDir) {
    let api: Api<Service> = Api::all(client.clone());
    let mut events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut tick = tokio::time::interval(RECHECK);
    loop {
        tokio::select! {
            ev = events.next() => {
                if ev.is_none() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
        if faults::is_on(&dir, &Fault::WithholdLoadBalancers) {
            continue;
        }
        if let Err(e) = reconcile(&client, &api).await {
            eprintln!("load-balancer controller: {e}");
        }
    }
}

fn is_load_balancer(s: &Service) -> bool {
    s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

fn ingress_ips(s: &Service) -> Vec<Ipv4Addr> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ing| {
            ing.iter()
                .filter_map(|i| i.ip.as_deref()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

async fn reconcile(client: &kube::Client, api: &Api<Service>) -> Result<(), kube::Error> {
    let services = api.list(&ListParams::default()).await?;
    let mut used: BTreeSet<Ipv4Addr> = services
        .items
        .iter()
        .filter(|s| is_load_balancer(s))
        .flat_map(ingress_ips)
        .collect();
    for s in services.items.iter().filter(|s| is_load_balancer(s)) {
        if !ingress_ips(s).is_empty() {
            continue;
        }
        let Some(ip) = (0..)
            .map_while(topology::load_balancer_ip)
            .find(|ip| !used.contains(ip))
        else {
            eprintln!("load-balancer controller: the range is used up");
            return Ok(());
        };
        let (Some(ns), Some(name)) = (s.metadata.namespace.as_deref(), s.metadata.name.as_deref())
        else {
            continue;
        };
        let patch = serde_json::json!({
            "status": {"loadBalancer": {"ingress": [{"ip": ip.to_string(), "ipMode": "VIP"}]}}
        });
        let nsapi: Api<Service> = Api::namespaced(client.clone(), ns);
        nsapi
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        used.insert(ip);
    }
    Ok(())
}
