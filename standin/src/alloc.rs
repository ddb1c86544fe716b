//! Addresses on 127.0.0.0/8, which Linux answers without configuration: pods 127.1.x.y,
//! ClusterIPs 127.2.x.y, load-balancer ingress 127.3.x.y, nodes 127.4.0.n; and NodePorts.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

#[derive(Default)]
struct Inner {
    pods: u32,
    cluster: u32,
    lb: u32,
    node_ports: BTreeSet<u16>,
}

#[derive(Default)]
pub struct Allocators {
    inner: Mutex<Inner>,
}

/// The n-th address (n ≥ 1) of a 127.A.0.0/16 block, skipping .0 and .255 host bytes.
fn nth(block: u8, n: u32) -> Ipv4Addr {
    let n = n - 1;
    Ipv4Addr::new(127, block, (n / 254) as u8, (n % 254 + 1) as u8)
}

pub const NODE_BLOCK: u8 = 4;

/// The address of the i-th node (0-based).
pub fn node_ip(i: usize) -> Ipv4Addr {
    nth(NODE_BLOCK, i as u32 + 1)
}

impl Allocators {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh pod IP (never reused while the cluster runs: a terminating pod may still hold
    /// its address).
    pub fn pod_ip(&self) -> Ipv4Addr {
        let mut i = self.lock();
        i.pods += 1;
        nth(1, i.pods)
    }

    pub fn cluster_ip(&self) -> Ipv4Addr {
        let mut i = self.lock();
        i.cluster += 1;
        nth(2, i.cluster)
    }

    pub fn lb_ip(&self) -> Ipv4Addr {
        let mut i = self.lock();
        i.lb += 1;
        nth(3, i.lb)
    }

    /// A free port in 30000–32767, or the requested one when free. None when taken or out
    /// of range.
    pub fn node_port(&self, wanted: Option<u16>) -> Option<u16> {
        let mut i = self.lock();
        match wanted {
            Some(p) if (30000..=32767).contains(&p) && !i.node_ports.contains(&p) => {
                i.node_ports.insert(p);
                Some(p)
            }
            Some(_) => None,
            None => {
                // spread like the real allocator rather than 30000, 30001 …
                let start = 30000 + (crate::ids::random_u64() % 2768) as u16;
                let p = (start..=32767)
                    .chain(30000..start)
                    .find(|p| !i.node_ports.contains(p))?;
                i.node_ports.insert(p);
                Some(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_ports() {
        let a = Allocators::default();
        assert_eq!(a.pod_ip(), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(a.pod_ip(), Ipv4Addr::new(127, 1, 0, 2));
        assert_eq!(nth(1, 255), Ipv4Addr::new(127, 1, 1, 1));
        assert_eq!(a.cluster_ip(), Ipv4Addr::new(127, 2, 0, 1));
        assert_eq!(node_ip(1), Ipv4Addr::new(127, 4, 0, 2));
        assert_eq!(a.node_port(Some(30080)), Some(30080));
        assert_eq!(a.node_port(Some(30080)), None);
        assert!(a.node_port(None).is_some_and(|p| p != 30080));
    }
}
