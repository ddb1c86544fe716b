//! The cluster's network namespace: made by us, with loopback, one veth pair carrying the
//! control plane's and nodes' addresses and the routes of the cluster's ranges — and **no
//! default route**, so no cluster address (10.x) can leave the machine. Everything that
//! reaches a cluster address runs inside it (`enter`, or a thread that `within` moved there).
//!
//! The kernel here has no `dummy` driver (CONFIG_DUMMY is not set), so a veth pair whose both
//! ends stay in the namespace carries the addresses instead: an interface that is up, with
//! carrier, and leads nowhere.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{ClusterError, Result};
use crate::topology;

/// The interface carrying the cluster's addresses, and its (unused) peer.
pub const CLUSTER_LINK: &str = "ab-cluster";
const CLUSTER_PEER: &str = "ab-cluster-peer";

/// A network namespace, by the file that holds it (`/run/netns/NAME`, or any
/// `/proc/PID/ns/net`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    pub path: PathBuf,
    /// Set when `ip netns add` made it (then `delete` removes it).
    pub name: Option<String>,
    /// What messages call it (its name, or the path it was given as).
    label: String,
}

impl Netns {
    /// A namespace named by `ip netns` or given as a path; never deleted by us.
    pub fn existing(spec: &str) -> Netns {
        let path = if spec.contains('/') {
            PathBuf::from(spec)
        } else {
            Path::new("/run/netns").join(spec)
        };
        Netns {
            path,
            name: None,
            label: spec.to_string(),
        }
    }

    /// The namespace a cluster's state records: ours to delete when it has a name.
    pub fn recorded(path: &Path, name: Option<&str>) -> Netns {
        Netns {
            path: path.to_path_buf(),
            name: name.map(str::to_string),
            label: name.map_or_else(|| path.display().to_string(), str::to_string),
        }
    }

    /// Makes a fresh named namespace (a stale one of that name, left by a killed cluster, is
    /// removed first).
    pub fn create(name: &str) -> Result<Netns> {
        let path = Path::new("/run/netns").join(name);
        if path.exists() {
            run("ip", &["netns", "delete", name])?;
        }
        run("ip", &["netns", "add", name])?;
        Ok(Netns {
            path,
            name: Some(name.to_string()),
            label: name.to_string(),
        })
    }

    /// Removes the name (the namespace itself goes when its last process does).
    pub fn delete(&self) -> Result<()> {
        match &self.name {
            Some(name) if self.path.exists() => run("ip", &["netns", "delete", name]),
            _ => Ok(()),
        }
    }

    pub fn display(&self) -> String {
        self.label.clone()
    }

    /// Moves the calling thread into the namespace. Called before a process starts any other
    /// thread (or in a thread of its own), everything it then starts is inside too.
    pub fn enter(&self) -> Result<()> {
        let file = File::open(&self.path)
            .map_err(ClusterError::io(format!("open {}", self.path.display())))?;
        // SAFETY: setns on a descriptor we hold open; it changes only this thread's namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(ClusterError::Io {
                what: format!("enter the network namespace {}", self.display()),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Runs `f` on a thread of its own inside the namespace (this thread stays where it is).
    pub fn within<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let ns = self.clone();
        std::thread::spawn(move || {
            ns.enter()?;
            f()
        })
        .join()
        .map_err(|_| ClusterError::Invalid("a thread in the network namespace panicked".into()))?
    }

    /// Refuses a namespace that leads anywhere but itself, for a namespace someone hands the
    /// harness (`--netns`): a default route first (the message tests look for), then any
    /// interface besides loopback (it could carry 10.x somewhere by other routes or rules).
    pub fn refuse_unless_empty(&self) -> Result<()> {
        self.refuse_default_route()?;
        let display = self.display();
        self.within(move || {
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev")
                .map_err(ClusterError::io("read /proc/thread-self/net/dev"))?;
            let links: Vec<String> = dev
                .lines()
                .skip(2)
                .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
                .filter(|n| n != "lo")
                .collect();
            if links.is_empty() {
                return Ok(());
            }
            Err(ClusterError::Invalid(format!(
                "the network namespace {display} has interfaces of its own ({}); give an empty one (ip netns add NAME) or none, and the harness makes its own",
                links.join(", ")
            )))
        })
    }

    /// Refuses a namespace with a default route (IPv4 or IPv6): the one check every entry
    /// point makes before it hands out or reaches a cluster address.
    pub fn refuse_default_route(&self) -> Result<()> {
        let display = self.display();
        self.within(move || match default_route()? {
            Some(route) => Err(ClusterError::DefaultRoute {
                netns: display,
                route,
            }),
            None => Ok(()),
        })
    }

    /// Loopback up, the cluster's interface with the control plane's and nodes' addresses,
    /// routes for the service and load-balancer ranges, forwarding on (pods route through
    /// their node), and nothing leading out.
    pub fn configure(&self, node_ips: Vec<std::net::Ipv4Addr>) -> Result<()> {
        self.within(move || {
            run("ip", &["link", "set", "lo", "up"])?;
            run(
                "ip",
                &[
                    "link",
                    "add",
                    CLUSTER_LINK,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    CLUSTER_PEER,
                ],
            )?;
            run("ip", &["link", "set", CLUSTER_LINK, "up"])?;
            run("ip", &["link", "set", CLUSTER_PEER, "up"])?;
            let prefix = topology::HOST_SUBNET
                .split_once('/')
                .map_or("24", |(_, p)| p);
            let mut addresses = vec![
                format!("{}/{prefix}", topology::APISERVER_IP),
                format!("{}/32", topology::METRICS_SERVER_IP),
            ];
            addresses.extend(node_ips.iter().map(|ip| format!("{ip}/32")));
            for a in &addresses {
                run("ip", &["addr", "add", a, "dev", CLUSTER_LINK])?;
            }
            for range in topology::ROUTED_RANGES {
                run("ip", &["route", "add", range, "dev", CLUSTER_LINK])?;
            }
            // Any other 10.x address (a pod that is gone, a typo) fails at once instead of
            // being looked for on the link: the more specific routes above still win.
            run("ip", &["route", "add", "unreachable", topology::POD_ROUTE])?;
            sysctl("net/ipv4/ip_forward", "1")?;
            // kube-proxy's NodePorts on the node addresses of this namespace; conntrack
            // accounting as a node has it.
            sysctl("net/ipv4/conf/all/route_localnet", "1")?;
            match default_route()? {
                Some(route) => Err(ClusterError::DefaultRoute {
                    netns: "the cluster's".into(),
                    route,
                }),
                None => Ok(()),
            }
        })
    }
}

/// Writes a sysctl of the calling thread's network namespace.
pub fn sysctl(key: &str, value: &str) -> Result<()> {
    let path = Path::new("/proc/sys").join(key);
    std::fs::write(&path, value).map_err(ClusterError::io(format!("write {}", path.display())))
}

/// The default route of the calling thread's namespace, as a line of text, if it has one.
pub fn default_route() -> Result<Option<String>> {
    let v4 = std::fs::read_to_string("/proc/thread-self/net/route")
        .map_err(ClusterError::io("read /proc/thread-self/net/route"))?;
    if let Some(route) = default_v4(&v4) {
        return Ok(Some(route));
    }
    // Without IPv6 in the kernel the file is absent: then there is no IPv6 route either.
    let v6 = std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default();
    Ok(default_v6(&v6))
}

/// `/proc/net/route`: Iface Destination Gateway Flags … Mask …, hex, little-endian.
fn default_v4(table: &str) -> Option<String> {
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| {
            let gw = u32::from_str_radix(f[2], 16).unwrap_or(0);
            format!(
                "default via {} dev {}",
                std::net::Ipv4Addr::from(gw.swap_bytes()),
                f[0]
            )
        })
    })
}

/// `/proc/net/ipv6_route`: dest prefix-len src src-len next-hop metric refs use flags iface;
/// a route to ::/0 that is not the kernel's unreachable placeholder (flag 0x200 RTF_REJECT)
/// on `lo`.
fn default_v6(table: &str) -> Option<String> {
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 10 || f[0] != "0".repeat(32) || f[1] != "00" {
            return None;
        }
        let flags = u32::from_str_radix(f[8], 16).unwrap_or(0);
        (flags & 0x200 == 0).then(|| format!("default (IPv6) dev {}", f[9]))
    })
}

/// Runs a command to completion; its stderr is the error.
pub fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(ClusterError::io(format!("run {program}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(ClusterError::Command {
        what: format!("{program} {}", args.join(" ")),
        status: out.status.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_routes_are_found_in_both_tables() {
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth0\t00000000\t0102000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                  eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(
            default_v4(v4).as_deref(),
            Some("default via 10.0.2.1 dev eth0")
        );
        let no_default = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                          ab-cluster\t000060A0\t00000000\t0001\t0\t0\t0\t0000FFFF\n";
        assert_eq!(default_v4(no_default), None);
        let unreachable = format!(
            "{} 00 {} 00 {} ffffffff 00000001 00000000 00200200       lo\n",
            "0".repeat(32),
            "0".repeat(32),
            "0".repeat(32)
        );
        assert_eq!(default_v6(&unreachable), None);
        let real = format!(
            "{} 00 {} 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0\n",
            "0".repeat(32),
            "0".repeat(32)
        );
        assert_eq!(
            default_v6(&real).as_deref(),
            Some("default (IPv6) dev eth0")
        );
    }
}
