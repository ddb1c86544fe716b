//! Addresses on 127.0.0.0/8, which Linux answers without configuration: pods 127.1.x.y,
//! ClusterIPs 127.2.x.y, load-balancer ingress 127.3.x.y, nodes 127.4.C.n; and NodePorts.
//!
//! Several clusters may run at once (tests in parallel, in one process or several), and all
//! share the host's network: pod, cluster and load-balancer addresses come from process-wide
//! counters that start at an offset derived from the process id, and an address whose port 80
//! is taken is skipped. Each cluster of a process gets its own node block C (0 for the first).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// Addresses per block (127.B.0.1 … 127.B.255.254, skipping .0 and .255).
const BLOCK: u32 = 256 * 254;

/// The n-th address (0-based, wrapping) of block 127.B.0.0/16.
fn nth(block: u8, n: u32) -> Ipv4Addr {
    let n = n % BLOCK;
    Ipv4Addr::new(127, block, (n / 254) as u8, (n % 254 + 1) as u8)
}

struct Counters {
    pods: AtomicU32,
    cluster: AtomicU32,
    lb: AtomicU32,
    clusters: AtomicU32,
}

fn counters() -> &'static Counters {
    static C: OnceLock<Counters> = OnceLock::new();
    C.get_or_init(|| {
        // far apart for different processes, so parallel test binaries rarely meet
        let base = std::process::id().wrapping_mul(7919) % BLOCK;
        Counters {
            pods: AtomicU32::new(base),
            cluster: AtomicU32::new(base),
            lb: AtomicU32::new(base),
            clusters: AtomicU32::new(0),
        }
    })
}

/// The next address of a block whose port 80 is free right now.
fn next_free(block: u8, counter: &AtomicU32) -> Ipv4Addr {
    let mut ip = nth(block, counter.fetch_add(1, Ordering::Relaxed));
    for _ in 0..1000 {
        if TcpListener::bind((ip, 80)).is_ok() {
            break;
        }
        ip = nth(block, counter.fetch_add(1, Ordering::Relaxed));
    }
    ip
}

pub struct Allocators {
    node_block: u8,
    node_ports: Mutex<BTreeSet<u16>>,
}

impl Default for Allocators {
    fn default() -> Allocators {
        Allocators {
            node_block: (counters().clusters.fetch_add(1, Ordering::Relaxed) % 254) as u8,
            node_ports: Mutex::new(BTreeSet::new()),
        }
    }
}

impl Allocators {
    /// A fresh pod IP (never reused while the process runs: a terminating pod may still hold
    /// its address).
    pub fn pod_ip(&self) -> Ipv4Addr {
        next_free(1, &counters().pods)
    }

    pub fn cluster_ip(&self) -> Ipv4Addr {
        next_free(2, &counters().cluster)
    }

    pub fn lb_ip(&self) -> Ipv4Addr {
        next_free(3, &counters().lb)
    }

    /// The address of this cluster's i-th node (0-based): 127.4.C.(i+1).
    pub fn node_ip(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, 4, self.node_block, (i % 254 + 1) as u8)
    }

    /// A free port in 30000–32767, or the requested one when free. None when taken or out
    /// of range.
    pub fn node_port(&self, wanted: Option<u16>) -> Option<u16> {
        let mut used = self.node_ports.lock().unwrap_or_else(|e| e.into_inner());
        match wanted {
            Some(p) if (30000..=32767).contains(&p) && !used.contains(&p) => {
                used.insert(p);
                Some(p)
            }
            Some(_) => None,
            None => {
                // spread like the real allocator rather than 30000, 30001 …
                let start = 30000 + (crate::ids::random_u64() % 2768) as u16;
                let p = (start..=32767)
                    .chain(30000..start)
                    .find(|p| !used.contains(p))?;
                used.insert(p);
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
        assert_eq!(nth(1, 0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(nth(1, 254), Ipv4Addr::new(127, 1, 1, 1));
        assert_eq!(nth(1, BLOCK), Ipv4Addr::new(127, 1, 0, 1));
        let a = Allocators::default();
        let (p1, p2) = (a.pod_ip(), a.pod_ip());
        assert_ne!(p1, p2);
        assert_eq!(p1.octets()[..2], [127, 1]);
        assert_eq!(a.cluster_ip().octets()[..2], [127, 2]);
        assert_eq!(a.node_ip(1).octets()[3], 2);
        assert_eq!(a.node_port(Some(30080)), Some(30080));
        assert_eq!(a.node_port(Some(30080)), None);
        assert!(a.node_port(None).is_some_and(|p| p != 30080));
    }
}
