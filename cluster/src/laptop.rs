//! The laptop: a network namespace of the harness's own from which the cluster is reached as
//! a laptop reaches an AKS cluster over the internet — the API server's endpoint, the
//! load-balancer addresses and the nodes' external addresses, nothing else. Node InternalIPs,
//! ClusterIPs and pod IPs have no route there (a connection fails at once with "network
//! unreachable"), so a tool that needs them to load "from here" fails here as it would there.
//!
//! One veth pair links it to the cluster's namespace (10.242.0.2 ↔ 10.242.0.1), with routes
//! for the load-balancer range and the nodes' external subnet only, and no default route.
//! The kubeconfigs' API server address (127.240.0.1, loopback everywhere: refused from the
//! machine's own namespace) is carried to the cluster's end of the link by an nftables DNAT
//! in the laptop's namespace, so one kubeconfig serves the cluster's namespace and the
//! laptop's alike, and the API server's certificate still names the address the client
//! asked for.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::error::{ClusterError, Result};
use crate::netns::{refuse_default_route_here, run, sysctl, Netns};
use crate::topology;

/// The laptop's interface, and its peer in the cluster's namespace.
const LAPTOP_LINK: &str = "ab-laptop";
const GATEWAY_LINK: &str = "ab-laptop-gw";

/// The laptop namespace's name for a cluster namespace of that name.
pub fn name_for(cluster_netns: &str) -> String {
    format!("{cluster_netns}-laptop")
}

/// The nftables rules of the laptop's namespace: the API server's loopback address to the
/// cluster's end of the link (and the source made the laptop's, so replies come back).
fn api_server_rules() -> String {
    format!(
        "table ip archbench_laptop {{
  chain output {{
    type nat hook output priority -100; policy accept;
    ip daddr {api} tcp dport {port} dnat to {gw}:{port}
  }}
  chain postrouting {{
    type nat hook postrouting priority 100; policy accept;
    oifname \"{LAPTOP_LINK}\" ip saddr 127.0.0.0/8 masquerade
  }}
}}
",
        api = topology::APISERVER_LOOPBACK,
        port = topology::APISERVER_PORT,
        gw = topology::LAPTOP_GATEWAY,
    )
}

fn nft(rules: &str) -> Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ClusterError::io("run nft (apt-get install nftables)"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(rules.as_bytes())
            .map_err(ClusterError::io("write nft's rules"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(ClusterError::io("wait for nft"))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            what: "nft -f - (the laptop's rules)".into(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// Makes the laptop's namespace `name` and links it to the cluster's (already configured).
pub fn create(name: &str, cluster: &Netns) -> Result<Netns> {
    let laptop = Netns::create(name)?;
    let path = laptop.path.display().to_string();
    let linked = cluster.within(move || {
        run(
            "ip",
            &[
                "link",
                "add",
                GATEWAY_LINK,
                "type",
                "veth",
                "peer",
                "name",
                LAPTOP_LINK,
                "netns",
                &path,
            ],
        )?;
        let gw = format!("{}/{}", topology::LAPTOP_GATEWAY, topology::LAPTOP_PREFIX);
        run("ip", &["addr", "add", &gw, "dev", GATEWAY_LINK])?;
        run("ip", &["link", "set", GATEWAY_LINK, "up"])
    });
    let configured = linked.and_then(|()| {
        laptop.within(|| {
            run("ip", &["link", "set", "lo", "up"])?;
            let me = format!("{}/{}", topology::LAPTOP_IP, topology::LAPTOP_PREFIX);
            run("ip", &["addr", "add", &me, "dev", LAPTOP_LINK])?;
            run("ip", &["link", "set", LAPTOP_LINK, "up"])?;
            let gw = topology::LAPTOP_GATEWAY.to_string();
            for range in topology::LAPTOP_ROUTES {
                run("ip", &["route", "add", range, "via", &gw])?;
            }
            // The DNAT'd API server connections leave with a loopback source until the
            // masquerade rewrites it: allowed on this namespace's links only.
            sysctl("net/ipv4/conf/all/route_localnet", "1")?;
            nft(&api_server_rules())?;
            refuse_default_route_here("the laptop's")
        })
    });
    if let Err(e) = configured {
        let _ = laptop.delete();
        return Err(e);
    }
    Ok(laptop)
}
