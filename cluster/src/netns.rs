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

    /// Refuses a namespace with a default route (IPv4 or IPv6, in any table): the one check
    /// every entry point makes before it hands out or reaches a cluster address (from
    /// outside; one already inside calls [`refuse_default_route_here`]).
    pub fn refuse_default_route(&self) -> Result<()> {
        let display = self.display();
        self.within(move || refuse_default_route_here(&display))
    }

    /// Loopback up, the cluster's interface with the control plane's and nodes' addresses,
    /// routes for the service and load-balancer ranges, forwarding on (pods route through
    /// their node), and nothing leading out.
    pub fn configure(&self, nodes: &[topology::NodeSpec]) -> Result<()> {
        let node_ips: Vec<std::net::Ipv4Addr> =
            nodes.iter().flat_map(|n| [n.ip, n.external_ip]).collect();
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
            refuse_default_route_here("the cluster's")
        })
    }
}

/// Writes a sysctl of the calling thread's network namespace.
pub fn sysctl(key: &str, value: &str) -> Result<()> {
    let path = Path::new("/proc/sys").join(key);
    std::fs::write(&path, value).map_err(ClusterError::io(format!("write {}", path.display())))
}

/// Refuses the calling thread's namespace (called `netns` in the message) if it has a
/// default route: what an entry point that is already inside makes (the supervisor once it
/// entered, a node agent it started, a pod's network once set up).
pub fn refuse_default_route_here(netns: &str) -> Result<()> {
    match default_route()? {
        Some(route) => Err(ClusterError::DefaultRoute {
            netns: netns.to_string(),
            route,
        }),
        None => Ok(()),
    }
}

/// The first default route of the calling thread's namespace, in any routing table, IPv4 or
/// IPv6, as a line of text. Every table, not only `main` (what /proc/net/route shows): a
/// rule can send any traffic to a table of its own (`ip rule add … lookup 100`).
pub fn default_route() -> Result<Option<String>> {
    // Without IPv6 in the kernel the file is absent, and `ip -6` has nothing to say.
    let v6 = Path::new("/proc/thread-self/net/ipv6_route").exists();
    for (flag, family) in [("-4", Family::V4), ("-6", Family::V6)] {
        if family == Family::V6 && !v6 {
            continue;
        }
        let routes = ip_json(&[flag, "route", "show", "table", "all"])?;
        let rules = ip_json(&[flag, "rule", "show"])?;
        if let Some(route) = default_in(&routes, &rules, family) {
            return Ok(Some(route));
        }
    }
    Ok(None)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

/// `ip -j ARGS` in the calling thread's namespace, parsed (nothing printed: an empty list).
fn ip_json(args: &[&str]) -> Result<serde_json::Value> {
    let mut all = vec!["-j"];
    all.extend_from_slice(args);
    let what = format!("ip {}", all.join(" "));
    let out = Command::new("ip")
        .args(&all)
        .output()
        .map_err(ClusterError::io("run ip"))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            what,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Array(Vec::new()));
    }
    serde_json::from_str(&text).map_err(|e| ClusterError::Invalid(format!("{what}: {e}")))
}

/// Route types that send nothing anywhere (refused, dropped, handed to the next rule, or
/// delivered to this namespace); any other type at a default destination leads out.
const GOES_NOWHERE: [&str; 5] = ["unreachable", "blackhole", "prohibit", "throw", "local"];

/// In `ip -j route show table all` (`routes`) and `ip -j rule show` (`rules`): the first
/// route to everything that is not one of GOES_NOWHERE, said as `ip route` says it, with the
/// rule that looks its table up when that is not `main`.
fn default_in(
    routes: &serde_json::Value,
    rules: &serde_json::Value,
    family: Family,
) -> Option<String> {
    let text =
        |v: &serde_json::Value, key: &str| v.get(key).and_then(|x| x.as_str()).map(str::to_string);
    let route = routes.as_array()?.iter().find(|r| {
        let everything = matches!(
            r.get("dst").and_then(|d| d.as_str()),
            Some("default" | "0.0.0.0/0" | "::/0")
        );
        let kind = text(r, "type").unwrap_or_else(|| "unicast".into());
        everything && !GOES_NOWHERE.contains(&kind.as_str())
    })?;
    let mut line = match text(route, "type") {
        Some(kind) => format!("{kind} default"),
        None => "default".to_string(),
    };
    // A multipath route names its gateways per hop.
    let hops: Vec<&serde_json::Value> = match route.get("nexthops").and_then(|n| n.as_array()) {
        Some(hops) => hops.iter().collect(),
        None => vec![route],
    };
    for hop in hops {
        if let Some(gw) = text(hop, "gateway") {
            line.push_str(&format!(" via {gw}"));
        }
        if let Some(dev) = text(hop, "dev") {
            line.push_str(&format!(" dev {dev}"));
        }
    }
    let table = text(route, "table").unwrap_or_else(|| "main".into());
    if table != "main" {
        line.push_str(&format!(" table {table}"));
        let rule = rules.as_array().and_then(|rs| {
            rs.iter()
                .find(|r| text(r, "table").as_deref() == Some(table.as_str()))
        });
        match rule {
            Some(rule) => line.push_str(&format!(", looked up by rule {}", describe_rule(rule))),
            None => line.push_str(", which no rule looks up yet"),
        }
    }
    if family == Family::V6 {
        line.push_str(" (IPv6)");
    }
    Some(line)
}

/// A rule of `ip -j rule show` as `ip rule` prints it (the selectors that matter).
fn describe_rule(rule: &serde_json::Value) -> String {
    let field = |key: &str| {
        rule.get(key)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
    };
    let mut text = format!(
        "{}: from {}",
        field("priority").unwrap_or_default(),
        field("src").unwrap_or_else(|| "all".into())
    );
    if let Some(len) = field("srclen") {
        text.push_str(&format!("/{len}"));
    }
    for (key, word) in [
        ("dst", "to"),
        ("fwmark", "fwmark"),
        ("iif", "iif"),
        ("oif", "oif"),
    ] {
        if let Some(v) = field(key) {
            text.push_str(&format!(" {word} {v}"));
        }
    }
    if let Some(table) = field("table") {
        text.push_str(&format!(" lookup {table}"));
    }
    text
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

    fn json(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    /// `ip -j -4 rule show` of a namespace no one gave rules.
    const RULES_V4: &str = r#"[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]"#;

    #[test]
    fn a_default_route_of_the_main_table_is_found() {
        // This machine's own namespace (`ip -j -4 route show table all`, abridged).
        let routes = r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]},{"dst":"192.0.2.0/24","dev":"eth0","protocol":"kernel","scope":"link","prefsrc":"192.0.2.2","flags":[]},{"type":"local","dst":"127.0.0.0/8","dev":"lo","table":"local","protocol":"kernel","scope":"host","prefsrc":"127.0.0.1","flags":[]}]"#;
        assert_eq!(
            default_in(&json(routes), &json(RULES_V4), Family::V4).as_deref(),
            Some("default via 192.0.2.1 dev eth0")
        );
        let v6 = r#"[{"dst":"fd00::/64","dev":"eth0","protocol":"kernel","metric":256,"flags":[],"pref":"medium"},{"dst":"default","gateway":"fd00::1","dev":"eth0","metric":1024,"flags":[],"pref":"medium"},{"type":"multicast","dst":"ff00::/8","dev":"eth0","table":"local","protocol":"kernel","metric":256,"flags":[],"pref":"medium"}]"#;
        let rules_v6 = r#"[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"}]"#;
        assert_eq!(
            default_in(&json(v6), &json(rules_v6), Family::V6).as_deref(),
            Some("default via fd00::1 dev eth0 (IPv6)")
        );
    }

    #[test]
    fn a_default_route_of_another_table_is_found_with_its_rule() {
        // `ip route add default via 192.0.2.254 table 100; ip rule add lookup 100 pref 1000`
        // beside a blackhole for half of everything (which leads nowhere).
        let routes = r#"[{"dst":"default","gateway":"192.0.2.254","dev":"r0","table":"100","flags":["linkdown"]},{"type":"blackhole","dst":"0.0.0.0/1","flags":[]},{"dst":"192.0.2.0/24","dev":"r0","protocol":"kernel","scope":"link","prefsrc":"192.0.2.1","flags":["linkdown"]},{"type":"local","dst":"192.0.2.1","dev":"r0","table":"local","protocol":"kernel","scope":"host","prefsrc":"192.0.2.1","flags":[]}]"#;
        let rules = r#"[{"priority":0,"src":"all","table":"local"},{"priority":1000,"src":"all","table":"100"},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]"#;
        assert_eq!(
            default_in(&json(routes), &json(rules), Family::V4).as_deref(),
            Some("default via 192.0.2.254 dev r0 table 100, looked up by rule 1000: from all lookup 100")
        );
        // No rule reaches it yet: still refused (one `ip rule` away from use).
        assert_eq!(
            default_in(&json(routes), &json(RULES_V4), Family::V4).as_deref(),
            Some("default via 192.0.2.254 dev r0 table 100, which no rule looks up yet")
        );
        // Multipath, in a table a rule reaches for marked packets only.
        let multipath = r#"[{"dst":"default","table":"300","flags":[],"nexthops":[{"gateway":"10.240.0.5","dev":"ab-cluster","weight":1,"flags":[]},{"gateway":"10.240.0.6","dev":"ab-cluster","weight":1,"flags":[]}]}]"#;
        let marked =
            r#"[{"priority":10,"src":"10.244.0.0","srclen":16,"fwmark":"0x1","table":"300"}]"#;
        assert_eq!(
            default_in(&json(multipath), &json(marked), Family::V4).as_deref(),
            Some("default via 10.240.0.5 dev ab-cluster via 10.240.0.6 dev ab-cluster table 300, looked up by rule 10: from 10.244.0.0/16 fwmark 0x1 lookup 300")
        );
        let v6 = r#"[{"dst":"default","dev":"ab-cluster","table":"200","metric":1024,"flags":[],"pref":"medium"},{"dst":"fe80::/64","dev":"ab-cluster","protocol":"kernel","metric":256,"flags":[],"pref":"medium"}]"#;
        let rules_v6 = r#"[{"priority":0,"src":"all","table":"local"},{"priority":2000,"src":"all","table":"200"},{"priority":32766,"src":"all","table":"main"}]"#;
        assert_eq!(
            default_in(&json(v6), &json(rules_v6), Family::V6).as_deref(),
            Some("default dev ab-cluster table 200, looked up by rule 2000: from all lookup 200 (IPv6)")
        );
    }

    #[test]
    fn routes_that_lead_nowhere_or_not_everywhere_pass() {
        // The cluster's own namespace, as `configure` leaves it, and an empty one.
        let cluster = r#"[{"type":"unreachable","dst":"10.0.0.0/8","flags":[]},{"dst":"10.96.0.0/16","dev":"ab-cluster","scope":"link","flags":[]},{"dst":"10.240.0.0/24","dev":"ab-cluster","protocol":"kernel","scope":"link","prefsrc":"10.240.0.1","flags":[]},{"type":"local","dst":"10.240.0.1","dev":"ab-cluster","table":"local","protocol":"kernel","scope":"host","prefsrc":"10.240.0.1","flags":[]},{"type":"broadcast","dst":"10.240.0.255","dev":"ab-cluster","table":"local","protocol":"kernel","scope":"link","prefsrc":"10.240.0.1","flags":[]},{"type":"local","dst":"127.0.0.0/8","dev":"lo","table":"local","protocol":"kernel","scope":"host","prefsrc":"127.0.0.1","flags":[]}]"#;
        assert_eq!(
            default_in(&json(cluster), &json(RULES_V4), Family::V4),
            None
        );
        assert_eq!(default_in(&json("[]"), &json(RULES_V4), Family::V4), None);
        // Defaults that refuse, drop or hand on: `ip -6 route add unreachable default table
        // 200` and the like.
        let nowhere = r#"[{"type":"unreachable","dst":"default","dev":"lo","table":"200","metric":1024,"flags":[],"pref":"medium"},{"type":"blackhole","dst":"default","table":"201","flags":[]},{"type":"prohibit","dst":"default","table":"202","flags":[]},{"type":"throw","dst":"default","table":"203","flags":[]}]"#;
        assert_eq!(
            default_in(&json(nowhere), &json(RULES_V4), Family::V6),
            None
        );
        // …but a type we do not know of is not assumed harmless.
        let odd = r#"[{"type":"broadcast","dst":"0.0.0.0/0","dev":"x0","table":"7","flags":[]}]"#;
        assert_eq!(
            default_in(&json(odd), &json(RULES_V4), Family::V4).as_deref(),
            Some("broadcast default dev x0 table 7, which no rule looks up yet")
        );
    }
}
