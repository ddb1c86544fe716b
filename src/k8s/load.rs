//! What `k8s load` and `k8s curl` aim at: each architecture's service address (and the
//! multi-arch one), with the pods behind it to watch.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::ListParams;
use kube::Api;

use super::client::api_error;
use super::setup::service_address;
use super::watch::PodWatch;
use super::{Arch, Cluster, K8sError, MULTIARCH_SERVICE};
use crate::monitor::WatchSource;

/// What the script's `wrk <target>` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadSelection {
    Intel,
    Arm,
    Amd,
    /// The service over every architecture's pods.
    Multiarch,
    /// intel and arm, as the script's `wrk both`.
    Both,
    /// Every deployed architecture's service, and the multi-arch one.
    All,
}

/// One service to load.
#[derive(Debug, Clone)]
pub struct LoadTarget {
    /// "intel", "arm", "multiarch".
    pub name: String,
    /// The architecture behind it (None for multi-arch).
    pub arch: Option<Arch>,
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

/// Resolves a selection into services with addresses, and the pods behind each.
pub async fn targets(
    cluster: &Cluster,
    selection: LoadSelection,
    vantage: Vantage,
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
    let deployed: Vec<Arch> = Arch::ALL
        .into_iter()
        .filter(|a| find_service(&services, &a.service()).is_some())
        .collect();
    let found = FoundServices {
        cluster,
        runtime,
        services,
        nodes,
        deployed,
    };
    wanted(selection, &found.deployed)
        .into_iter()
        .map(|arch| found.target(arch, vantage))
        .collect()
}

fn find_service<'a>(services: &'a [Service], name: &str) -> Option<&'a Service> {
    services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
}

/// The architectures a selection names (None for the multi-arch service), in order.
fn wanted(selection: LoadSelection, deployed: &[Arch]) -> Vec<Option<Arch>> {
    match selection {
        LoadSelection::Intel => vec![Some(Arch::Intel)],
        LoadSelection::Arm => vec![Some(Arch::Arm)],
        LoadSelection::Amd => vec![Some(Arch::Amd)],
        LoadSelection::Multiarch => vec![None],
        LoadSelection::Both => vec![Some(Arch::Intel), Some(Arch::Arm)],
        LoadSelection::All => deployed.iter().copied().map(Some).chain([None]).collect(),
    }
}

/// The namespace's services and the cluster's nodes, as listed once for every target.
struct FoundServices<'a> {
    cluster: &'a Cluster,
    runtime: &'a tokio::runtime::Handle,
    services: Vec<Service>,
    nodes: Vec<Node>,
    /// The architectures whose service exists.
    deployed: Vec<Arch>,
}

impl FoundServices<'_> {
    /// The target of one architecture's service (None: the multi-arch one).
    fn target(&self, arch: Option<Arch>, vantage: Vantage) -> Result<LoadTarget, K8sError> {
        let cluster = self.cluster;
        let (name, service) = match arch {
            Some(a) => (a.name().to_string(), a.service()),
            None => ("multiarch".to_string(), MULTIARCH_SERVICE.to_string()),
        };
        let svc = find_service(&self.services, &service).ok_or_else(|| K8sError::Failed {
            what: format!("find service {service}"),
            message: format!(
                "not in namespace {}; `archbench k8s up{}` creates it",
                cluster.namespace,
                arch.map(|a| format!(" --arch {}", a.name()))
                    .unwrap_or_default()
            ),
        })?;
        let (url, cluster_address) = match vantage {
            Vantage::Outside => {
                let address =
                    service_address(svc, &self.nodes).ok_or_else(|| K8sError::Failed {
                        what: format!("address of {service}"),
                        message: "its LoadBalancer address is still pending; wait, or use --service-type NodePort with `archbench k8s up`".into(),
                    })?;
                (format!("http://{address}/"), None)
            }
            Vantage::InCluster => in_cluster_address(svc, &service, &cluster.namespace)?,
        };
        let watch = self.pod_watches(arch, &name);
        Ok(LoadTarget {
            name,
            arch,
            service,
            url,
            cluster_address,
            watch,
        })
    }

    /// The pods behind a target, one watch per architecture (named NAME/ARCH for the
    /// multi-arch target).
    fn pod_watches(&self, arch: Option<Arch>, name: &str) -> Vec<Arc<dyn WatchSource>> {
        let archs: Vec<Arch> = match arch {
            Some(a) => vec![a],
            None => self.deployed.clone(),
        };
        archs
            .into_iter()
            .map(|a| {
                Arc::new(PodWatch {
                    label: if arch.is_some() {
                        name.to_string()
                    } else {
                        format!("{name}/{}", a.name())
                    },
                    arch: a,
                    cluster: self.cluster.clone(),
                    runtime: self.runtime.clone(),
                }) as Arc<dyn WatchSource>
            })
            .collect()
    }
}

/// A service's in-cluster URL (its DNS name) and the ClusterIP:port behind the name.
fn in_cluster_address(
    svc: &Service,
    service: &str,
    namespace: &str,
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
    let port = spec
        .and_then(|s| s.ports.as_ref()?.first())
        .map_or(80, |p| p.port);
    let port = u16::try_from(port).unwrap_or(80);
    let host = format!("{service}.{namespace}.svc.cluster.local");
    let url = if port == 80 {
        format!("http://{host}/")
    } else {
        format!("http://{host}:{port}/")
    };
    Ok((url, Some(std::net::SocketAddr::new(ip, port))))
}
