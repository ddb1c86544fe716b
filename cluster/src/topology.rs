//! The cluster's address plan and its nodes: one place for every address, range and port, so
//! the network set-up, the certificates, the components' flags and the node agents agree.
//!
//! Every address here lives only inside the cluster's own network namespace (see `netns`),
//! which has no default route: none of them can leave the machine from there. From the
//! machine's own namespace the 10.x ones would go out of its default route, so what the
//! harness writes for people to use (every kubeconfig's server) is a loopback address,
//! refused at once there; the 10.x ones stay because Kubernetes needs ordinary addresses for
//! them (EndpointSlices reject loopback, the API server will not proxy to it, a pod's own
//! loopback is its own) and are only shown where the namespace is entered (`exec`).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// The API server's address in the cluster's network: its `--advertise-address`, so the
/// `kubernetes` Service's endpoint, which pods reach through kube-proxy (an EndpointSlice
/// cannot hold a loopback address).
pub const APISERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 240, 0, 1);
/// The API server's address in every kubeconfig: loopback, which the namespace's `lo`
/// answers (all of 127/8 is local) and the machine's own namespace refuses at once, so a
/// kubeconfig used outside the namespace by mistake sends nothing off the machine.
pub const APISERVER_LOOPBACK: Ipv4Addr = Ipv4Addr::new(127, 240, 0, 1);
pub const APISERVER_PORT: u16 = 6443;

/// The server URL every kubeconfig of the cluster names.
pub fn apiserver_url() -> String {
    format!("https://{APISERVER_LOOPBACK}:{APISERVER_PORT}")
}
/// metrics-server's address (a process of the cluster, behind an APIService).
pub const METRICS_SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 240, 0, 2);
pub const METRICS_SERVER_PORT: u16 = 4443;
/// The control plane's and nodes' subnet: nodes are .10, .11, …
pub const HOST_SUBNET: &str = "10.240.0.0/24";
const FIRST_NODE_HOST: u8 = 10;
/// Where kubelets listen on their node's address (the apiserver proxies exec, logs and metrics
/// there).
pub const KUBELET_PORT: u16 = 10250;
/// ClusterIPs (the first is the `kubernetes` Service: the API server's certificate names it).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// Pod addresses; the controller-manager gives each node a /24 of it (`spec.podCIDR`).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
pub const NODE_CIDR_MASK: u8 = 24;
/// `type: LoadBalancer` ingress addresses, handed out by our load-balancer controller.
pub const LOAD_BALANCER_CIDR: &str = "10.250.0.0/24";
pub const LOAD_BALANCER_FIRST: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 10);
pub const LOAD_BALANCER_LAST: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 250);
/// Nodes' external addresses (`ExternalIP`, as AKS nodes with public IPs have): .10, .11, …
/// The laptop reaches these (NodePorts answer on them), not the nodes' InternalIPs.
pub const NODE_EXTERNAL_SUBNET: &str = "10.241.0.0/24";
/// The laptop's link to the cluster: the cluster's end, the laptop's end, their prefix.
pub const LAPTOP_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 242, 0, 1);
pub const LAPTOP_IP: Ipv4Addr = Ipv4Addr::new(10, 242, 0, 2);
pub const LAPTOP_PREFIX: u8 = 30;
/// What the laptop reaches, as a laptop reaches an AKS cluster from the internet: the
/// load-balancer range and the nodes' external addresses (and the API server, see `laptop`).
pub const LAPTOP_ROUTES: [&str; 2] = [LOAD_BALANCER_CIDR, NODE_EXTERNAL_SUBNET];
/// Every pod's gateway: the node side of each pod's veth carries it (as Calico does), so a
/// pod routes 10.0.0.0/8 through its node and nothing else.
pub const POD_GATEWAY: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// The routes inside a pod: the cluster's ranges only, never a default route.
pub const POD_ROUTE: &str = "10.0.0.0/8";
/// Ranges routed onto the cluster's interface (the service and load-balancer ranges have no
/// interface of their own: kube-proxy's rules rewrite them on the way out).
pub const ROUTED_RANGES: [&str; 2] = [SERVICE_CIDR, LOAD_BALANCER_CIDR];
/// The cluster's DNS domain (the API server certificate's names).
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// One node of the cluster, as its agent registers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub name: String,
    /// `kubernetes.io/arch` and `status.nodeInfo.architecture`: amd64 or arm64.
    pub arch: String,
    /// `agentpool` (AKS's node pool label).
    pub pool: String,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Capacity = allocatable (no system reservation): cores and bytes.
    pub cpus: u32,
    pub memory_bytes: u64,
    /// Its InternalIP (the kubelet API listens there; NodePorts answer there).
    pub ip: Ipv4Addr,
    /// Its ExternalIP (NodePorts answer there too; the laptop reaches it).
    pub external_ip: Ipv4Addr,
}

impl NodeSpec {
    /// The i-th node (0-based) of the given shape, addressed in order.
    pub fn new(index: u8, name: &str, arch: &str, pool: &str, instance_type: &str) -> NodeSpec {
        NodeSpec {
            name: name.to_string(),
            arch: arch.to_string(),
            pool: pool.to_string(),
            instance_type: instance_type.to_string(),
            zone: "westeurope-1".to_string(),
            cpus: 2,
            memory_bytes: 8 << 30,
            ip: Ipv4Addr::new(10, 240, 0, FIRST_NODE_HOST + index),
            external_ip: Ipv4Addr::new(10, 241, 0, FIRST_NODE_HOST + index),
        }
    }

    /// The same node with another size (cores, GiB).
    pub fn sized(mut self, cpus: u32, memory_gib: u64) -> NodeSpec {
        self.cpus = cpus;
        self.memory_bytes = memory_gib << 30;
        self
    }

    /// The labels its agent registers (those a kubelet may set on its own Node).
    pub fn labels(&self) -> Vec<(String, String)> {
        let region = self.zone.rsplit_once('-').map_or("", |(r, _)| r);
        [
            ("kubernetes.io/hostname", self.name.as_str()),
            ("kubernetes.io/arch", self.arch.as_str()),
            ("kubernetes.io/os", "linux"),
            (
                "node.kubernetes.io/instance-type",
                self.instance_type.as_str(),
            ),
            ("topology.kubernetes.io/zone", self.zone.as_str()),
            ("topology.kubernetes.io/region", region),
            ("agentpool", self.pool.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// The multi-arch guide's cluster: one amd64 node in pool `intel` and one arm64 node in pool
/// `arm`, of Azure's 2-vCPU general-purpose sizes.
pub fn default_nodes() -> Vec<NodeSpec> {
    vec![
        NodeSpec::new(0, "aks-intel-0", "amd64", "intel", "Standard_D2s_v6"),
        NodeSpec::new(1, "aks-arm-0", "arm64", "arm", "Standard_D2ps_v6"),
    ]
}

/// The `n`-th address of a load balancer's range, if there is one.
pub fn load_balancer_ip(n: u32) -> Option<Ipv4Addr> {
    let first = u32::from(LOAD_BALANCER_FIRST);
    let ip = first.checked_add(n)?;
    (ip <= u32::from(LOAD_BALANCER_LAST)).then(|| Ipv4Addr::from(ip))
}

/// Whether an address is one of the cluster's own (host subnet, pods, services, load
/// balancers): what a harness may hand out, and only inside its namespace.
pub fn is_cluster_address(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    o[0] == 10 && matches!(o[1], 240 | 241 | 242 | 244 | 96 | 250)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_have_their_own_addresses_and_the_labels_a_kubelet_may_set() {
        let nodes = default_nodes();
        assert_eq!(nodes[0].ip, Ipv4Addr::new(10, 240, 0, 10));
        assert_eq!(nodes[1].ip, Ipv4Addr::new(10, 240, 0, 11));
        let labels = nodes[1].labels();
        assert!(labels.contains(&("kubernetes.io/arch".into(), "arm64".into())));
        assert!(labels.contains(&("topology.kubernetes.io/region".into(), "westeurope".into())));
        assert!(nodes.iter().all(|n| is_cluster_address(n.ip)));
    }

    #[test]
    fn load_balancer_addresses_stay_in_their_range() {
        assert_eq!(load_balancer_ip(0), Some(LOAD_BALANCER_FIRST));
        assert_eq!(load_balancer_ip(240), Some(LOAD_BALANCER_LAST));
        assert_eq!(load_balancer_ip(241), None);
        assert!(!is_cluster_address(Ipv4Addr::new(10, 1, 2, 3)));
        assert!(!is_cluster_address(Ipv4Addr::new(127, 0, 0, 1)));
    }
}
