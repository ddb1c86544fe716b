//! A pod's network, as a CNI plugin makes it: a network namespace of the pod's own (held by a
//! pause process, as a container runtime's sandbox holds it), a veth pair from the node into
//! it, the pod's address on the pod's end, a /32 route to it on the node's end, and inside the
//! pod a route for the cluster's ranges through the node (never a default route). Containers
//! join that namespace, so nginx's `listen 80;` binds the pod's own port 80, as on a cluster.
//!
//! The namespace dies with the pause process (and the veth pair with it): a node agent killed
//! outright leaves no namespace or interface behind (its pod directories and cgroups stay
//! until the cluster directory goes).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Stdio;

use crate::error::{ClusterError, Result};
use crate::netns::{self, Netns};
use crate::topology;

/// Pod addresses of the node's `spec.podCIDR`: .1 is left out (a gateway by convention), .2
/// upward are handed out and returned.
#[derive(Debug)]
pub struct IpPool {
    base: u32,
    size: u32,
    used: BTreeSet<u32>,
}

impl IpPool {
    pub fn new(cidr: &str) -> Result<IpPool> {
        let bad = || ClusterError::Invalid(format!("not an IPv4 CIDR: {cidr:?}"));
        let (addr, len) = cidr.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let len: u32 = len.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&len) {
            return Err(bad());
        }
        Ok(IpPool {
            base: u32::from(addr) & (u32::MAX << (32 - len)),
            size: 1 << (32 - len),
            used: BTreeSet::new(),
        })
    }

    pub fn take(&mut self) -> Option<Ipv4Addr> {
        let n = (2..self.size - 1).find(|n| !self.used.contains(n))?;
        self.used.insert(n);
        Some(Ipv4Addr::from(self.base + n))
    }

    pub fn give_back(&mut self, ip: Ipv4Addr) {
        self.used.remove(&(u32::from(ip).wrapping_sub(self.base)));
    }
}

/// `archbench-cluster pause`: holds a pod's network namespace until killed.
pub fn pause() -> ! {
    loop {
        // SAFETY: pause(2) just waits for a signal.
        unsafe {
            libc::pause();
        }
    }
}

/// A pod's network: the pause process holding its namespace, and the node's end of its veth.
pub struct PodNetwork {
    pause: tokio::process::Child,
    pub netns: Netns,
    pub ip: Ipv4Addr,
}

/// The node-side interface name of a pod (at most 15 characters, unique per pod uid).
fn host_link(uid: &str) -> String {
    let hex: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    format!("vp{hex}")
}

impl PodNetwork {
    pub async fn create(uid: &str, ip: Ipv4Addr, node_ip: Ipv4Addr) -> Result<PodNetwork> {
        let this = std::env::current_exe().map_err(ClusterError::io("find this program"))?;
        let mut cmd = tokio::process::Command::new(this);
        cmd.arg("pause")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // SAFETY: prctl and unshare are async-signal-safe; nothing of the parent is touched.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let pause = cmd
            .spawn()
            .map_err(ClusterError::io("start the pod's pause process"))?;
        let pid = pause
            .id()
            .ok_or_else(|| ClusterError::Invalid("the pause process ended at once".into()))?;
        let netns = Netns::recorded(Path::new(&format!("/proc/{pid}/ns/net")), None);
        let net = PodNetwork { pause, netns, ip };
        let link = host_link(uid);
        let (ip_s, gw) = (ip.to_string(), topology::POD_GATEWAY.to_string());
        let pid_s = pid.to_string();
        let node_s = node_ip.to_string();
        let l = link.clone();
        tokio::task::spawn_blocking(move || -> Result<()> {
            netns::run(
                "ip",
                &[
                    "link", "add", &l, "type", "veth", "peer", "name", "eth0", "netns", &pid_s,
                ],
            )?;
            netns::run("ip", &["link", "set", &l, "up"])?;
            netns::run("ip", &["addr", "add", &format!("{gw}/32"), "dev", &l])?;
            netns::run(
                "ip",
                &[
                    "route",
                    "add",
                    &format!("{ip_s}/32"),
                    "dev",
                    &l,
                    "src",
                    &node_s,
                ],
            )?;
            Ok(())
        })
        .await
        .map_err(|e| ClusterError::Invalid(format!("pod network set-up: {e}")))??;
        let (ip_s, gw) = (ip.to_string(), topology::POD_GATEWAY.to_string());
        net.netns.within(move || {
            netns::run("ip", &["link", "set", "lo", "up"])?;
            netns::run("ip", &["addr", "add", &format!("{ip_s}/32"), "dev", "eth0"])?;
            netns::run("ip", &["link", "set", "eth0", "up"])?;
            netns::run("ip", &["route", "add", &gw, "dev", "eth0", "scope", "link"])?;
            netns::run(
                "ip",
                &[
                    "route",
                    "add",
                    topology::POD_ROUTE,
                    "via",
                    &gw,
                    "dev",
                    "eth0",
                ],
            )?;
            netns::refuse_default_route_here("a pod's")
        })?;
        Ok(net)
    }

    pub fn pause_pid(&self) -> Option<u32> {
        self.pause.id()
    }

    /// Ends the namespace (and the veth pair with it).
    pub async fn remove(mut self) {
        let _ = self.pause.kill().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_addresses_come_from_the_node_range_and_go_back() {
        let mut pool = IpPool::new("10.244.1.0/24").unwrap();
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 244, 1, 2));
        assert_eq!(b, Ipv4Addr::new(10, 244, 1, 3));
        pool.give_back(a);
        assert_eq!(pool.take(), Some(a));
        let mut tiny = IpPool::new("10.244.2.0/30").unwrap();
        assert_eq!(tiny.take(), Some(Ipv4Addr::new(10, 244, 2, 2)));
        assert_eq!(tiny.take(), None);
        assert!(IpPool::new("10.244.0.0").is_err());
        assert!(IpPool::new("nonsense/24").is_err());
        assert_eq!(host_link("0f1e2d3c-4b5a-4968-8776-655443322110").len(), 14);
    }
}
