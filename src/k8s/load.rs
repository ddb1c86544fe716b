//! What `k8s load` and `k8s curl` aim at: each variant's service address (and the
//! multi-arch one), with the pods behind it to watch.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use kube::api::ListParams;
use kube::Api;

use super::client::api_error;
use super::status::port_address;
use super::watch::PodWatch;
use kube::ResourceExt;

use super::{Arch, Cluster, K8sError, MANAGED_BY, MULTIARCH_SERVICE};
use crate::monitor::WatchSource;

/// What the script's `wrk <target>` names, and any variant by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadSelection {
    /// One variant's service ("intel", "arm", "arm-large").
    Variant(String),
    /// The service over every variant's pods.
    Multiarch,
    /// intel and arm, as the script's `wrk both`.
    Both,
    /// Every deployed variant's service (not the multi-arch one: its pods are theirs).
    All,
}

impl std::str::FromStr for LoadSelection {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "multiarch" => LoadSelection::Multiarch,
            "both" => LoadSelection::Both,
            "all" => LoadSelection::All,
            "" => return Err(
                "give a variant (intel, arm, amd, or a --variant's name), multiarch, both or all"
                    .into(),
            ),
            name => LoadSelection::Variant(name.to_string()),
        })
    }
}

/// Targets loaded at the same time must not share pods: the multi-arch Service's pods are
/// every variant's, so beside a variant each of its pods would serve two loads, and neither
/// target's requests per pod CPU-second (nor its latency) would be its own. Refused as usage,
/// before any cluster is asked.
pub fn check_side_by_side(selections: &[LoadSelection]) -> Result<(), K8sError> {
    let multiarch = selections.contains(&LoadSelection::Multiarch);
    let variants: Vec<String> = selections
        .iter()
        .filter_map(|s| match s {
            LoadSelection::Variant(v) => Some(v.clone()),
            LoadSelection::Both => Some("both".into()),
            LoadSelection::All => Some("all".into()),
            LoadSelection::Multiarch => None,
        })
        .collect();
    if !multiarch || variants.is_empty() {
        return Ok(());
    }
    Err(K8sError::Usage(format!(
        "multiarch is served by the same pods as {}: loaded side by side, each pod would serve \
         both loads and neither result would be its own; load multiarch on its own, or the \
         variants without it",
        variants.join(", ")
    )))
}

/// One service to load.
#[derive(Debug, Clone)]
pub struct LoadTarget {
    /// "intel", "arm", "multiarch".
    pub name: String,
    /// The variant behind it (None for multi-arch).
    pub variant: Option<String>,
    pub service: String,
    /// `http://ADDRESS/`; in-cluster, the service's DNS name.
    pub url: String,
    /// In-cluster: the ClusterIP and port the name stands for (no DNS outside the cluster).
    pub cluster_address: Option<std::net::SocketAddr>,
    /// The pods to watch while loading.
    pub watch: Vec<Arc<dyn WatchSource>>,
}

/// Where the load comes from, which decides the address a target is loaded at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// This machine: the service's external address (LoadBalancer or NodePort).
    Outside,
    /// Pods in the cluster: the service's DNS name, so nothing leaves the cluster.
    InCluster,
}

/// Which of a Service's ports a load speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// 80, `http://`.
    Http,
    /// 443, `https://` (`k8s up --tls`).
    Https,
    /// UDP 443, `https://` over QUIC (a Caddy variant, or `k8s up --http3`).
    Http3,
}

impl Port {
    /// The Service port's name.
    fn name(self) -> &'static str {
        match self {
            Port::Http => "http",
            Port::Https => super::tls::HTTPS_PORT.0,
            Port::Http3 => super::tls::HTTP3_PORT.0,
        }
    }

    /// The URL's scheme.
    fn scheme(self) -> &'static str {
        match self {
            Port::Http => "http",
            Port::Https | Port::Http3 => "https",
        }
    }
}

/// Resolves selections into services with addresses, and the pods behind each (in the order
/// named, each once).
pub async fn targets(
    cluster: &Cluster,
    selections: &[LoadSelection],
    (vantage, port): (Vantage, Port),
    runtime: &tokio::runtime::Handle,
) -> Result<Vec<LoadTarget>, K8sError> {
    let services: Vec<Service> =
        Api::<Service>::namespaced(cluster.client.clone(), &cluster.namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error(e, "list", "services"))?
            .items;
    let nodes: Vec<Node> = Api::<Node>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let deployed = deployed_variants(&services);
    let found = FoundServices {
        cluster,
        runtime,
        services,
        nodes,
        deployed,
    };
    let mut wanted_all: Vec<Option<String>> = Vec::new();
    for w in selections.iter().flat_map(|s| wanted(s, &found.deployed)) {
        if !wanted_all.contains(&w) {
            wanted_all.push(w);
        }
    }
    wanted_all
        .into_iter()
        .map(|variant| found.target(variant, vantage, port))
        .collect()
}

/// The variants whose Service archbench made: the presets in the guide's order (intel, arm,
/// amd), then the others by name.
fn deployed_variants(services: &[Service]) -> Vec<String> {
    let mut names: Vec<String> = services
        .iter()
        .filter(|s| s.labels().get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1))
        .filter_map(|s| {
            let name = s.metadata.name.as_deref()?;
            let variant = name.strip_prefix("nginx-")?.strip_suffix("-svc")?;
            (name != MULTIARCH_SERVICE).then(|| variant.to_string())
        })
        .collect();
    names.sort_by_key(|n| {
        (
            Arch::ALL
                .iter()
                .position(|a| a.name() == n)
                .unwrap_or(Arch::ALL.len()),
            n.clone(),
        )
    });
    names
}

fn find_service<'a>(services: &'a [Service], name: &str) -> Option<&'a Service> {
    services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
}

/// The variants a selection names (None for the multi-arch service), in order.
fn wanted(selection: &LoadSelection, deployed: &[String]) -> Vec<Option<String>> {
    match selection {
        LoadSelection::Variant(v) => vec![Some(v.clone())],
        LoadSelection::Multiarch => vec![None],
        LoadSelection::Both => vec![Some("intel".into()), Some("arm".into())],
        LoadSelection::All => deployed.iter().cloned().map(Some).collect(),
    }
}

/// The namespace's services and the cluster's nodes, as listed once for every target.
struct FoundServices<'a> {
    cluster: &'a Cluster,
    runtime: &'a tokio::runtime::Handle,
    services: Vec<Service>,
    nodes: Vec<Node>,
    /// The variants whose service exists.
    deployed: Vec<String>,
}

impl FoundServices<'_> {
    /// The target of one variant's service (None: the multi-arch one).
    fn target(
        &self,
        variant: Option<String>,
        vantage: Vantage,
        port: Port,
    ) -> Result<LoadTarget, K8sError> {
        let cluster = self.cluster;
        let (name, service) = match &variant {
            Some(v) => (v.clone(), format!("nginx-{v}-svc")),
            None => ("multiarch".to_string(), MULTIARCH_SERVICE.to_string()),
        };
        let svc = find_service(&self.services, &service).ok_or_else(|| K8sError::Failed {
            what: format!("find service {service}"),
            message: format!(
                "not in namespace {}; `archbench k8s up{}` creates it",
                cluster.namespace,
                match variant.as_deref() {
                    Some(v) if Arch::from_name(v).is_some() => format!(" --arch {v}"),
                    Some(v) => format!(" --variant {v}:…"),
                    None => String::new(),
                }
            ),
        })?;
        let service_port = service_port(svc, &service, port)?;
        let scheme = port.scheme();
        let (url, cluster_address) = match vantage {
            Vantage::Outside => {
                let address = port_address(svc, service_port, &self.nodes).ok_or_else(|| {
                    K8sError::Failed {
                        what: format!("address of {service}"),
                        message: "its LoadBalancer address is still pending; wait, load --in-cluster, or use --service-type NodePort with `archbench k8s up` (reached from outside through the nodes' external addresses: nodes with public IPs)".into(),
                    }
                })?;
                (format!("{scheme}://{address}/"), None)
            }
            Vantage::InCluster => {
                in_cluster_address(svc, &service, &cluster.namespace, (scheme, service_port))?
            }
        };
        let watch = self.pod_watches(variant.as_deref(), &name);
        Ok(LoadTarget {
            name,
            variant,
            service,
            url,
            cluster_address,
            watch,
        })
    }

    /// The pods behind a target, one watch per variant (named NAME/VARIANT for the
    /// multi-arch target).
    fn pod_watches(&self, variant: Option<&str>, name: &str) -> Vec<Arc<dyn WatchSource>> {
        let variants: Vec<String> = match variant {
            Some(v) => vec![v.to_string()],
            None => self.deployed.clone(),
        };
        variants
            .into_iter()
            .map(|v| {
                Arc::new(PodWatch {
                    label: if variant.is_some() {
                        name.to_string()
                    } else {
                        format!("{name}/{v}")
                    },
                    variant: v,
                    cluster: self.cluster.clone(),
                    runtime: self.runtime.clone(),
                }) as Arc<dyn WatchSource>
            })
            .collect()
    }
}

/// The Service's port of that kind (by name; a Service of another's with one unnamed port
/// serves http on it), or why it has none.
fn service_port<'s>(
    svc: &'s Service,
    service: &str,
    port: Port,
) -> Result<&'s ServicePort, K8sError> {
    let ports: &[ServicePort] = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    let named = ports
        .iter()
        .find(|p| p.name.as_deref() == Some(port.name()));
    let unnamed = (port == Port::Http).then(|| ports.first()).flatten();
    if let (None, Port::Http3) = (named, port) {
        // Not what this cluster lacks but what the variant's server does: a usage error.
        return Err(K8sError::Usage(format!(
            "--http3: {service} answers no HTTP/3 (it has no UDP port {}); a Caddy variant (`k8s up --variant NAME:image=caddy:2`) answers it, or nginx 1.25 or later set up with `k8s up --http3`",
            super::tls::HTTP3_PORT.1
        )));
    }
    named.or(unnamed).ok_or_else(|| K8sError::Failed {
        what: format!("find the {} port of {service}", port.name()),
        message: match port {
            Port::Https | Port::Http3 => {
                "it serves no https; `archbench k8s up --tls` (or the variant's tls=on) sets it up"
                    .into()
            }
            Port::Http => "it has no port".into(),
        },
    })
}

/// A service's in-cluster URL (its DNS name) and the ClusterIP:port behind the name.
fn in_cluster_address(
    svc: &Service,
    service: &str,
    namespace: &str,
    (scheme, port): (&str, &ServicePort),
) -> Result<(String, Option<std::net::SocketAddr>), K8sError> {
    let spec = svc.spec.as_ref();
    let ip = spec
        .and_then(|s| s.cluster_ip.as_deref())
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
        .ok_or_else(|| K8sError::Failed {
            what: format!("ClusterIP of {service}"),
            message:
                "it has none (a headless service?); load it from outside, without --in-cluster"
                    .into(),
        })?;
    let port = u16::try_from(port.port).unwrap_or(80);
    let host = format!("{service}.{namespace}.svc.cluster.local");
    let default = if scheme == "https" { 443 } else { 80 };
    let url = if port == default {
        format!("{scheme}://{host}/")
    } else {
        format!("{scheme}://{host}:{port}/")
    };
    Ok((url, Some(std::net::SocketAddr::new(ip, port))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selections(words: &[&str]) -> Vec<LoadSelection> {
        words.iter().filter_map(|w| w.parse().ok()).collect()
    }

    #[test]
    fn multiarch_is_loaded_beside_no_variant_whose_pods_it_shares() {
        for refused in [
            &["all", "multiarch"][..],
            &["multiarch", "intel"],
            &["both", "multiarch"],
        ] {
            let e = check_side_by_side(&selections(refused)).unwrap_err();
            assert!(e.is_usage(), "{refused:?}: {e}");
            assert!(e.to_string().contains("same pods"), "{e}");
        }
        for fine in [
            &["all"][..],
            &["multiarch"],
            &["intel", "arm-large"],
            &["both"],
        ] {
            assert!(check_side_by_side(&selections(fine)).is_ok(), "{fine:?}");
        }
    }

    #[test]
    fn all_is_every_deployed_variant_without_the_multiarch_service() {
        let deployed = vec!["intel".to_string(), "arm".to_string(), "big".to_string()];
        assert_eq!(
            wanted(&LoadSelection::All, &deployed),
            vec![Some("intel".into()), Some("arm".into()), Some("big".into())]
        );
    }
}
