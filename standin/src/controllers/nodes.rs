//! The simulated nodes (from `Options::nodes`), created once at start.

use serde_json::{json, Map, Value};

use crate::clock;
use crate::options::NodeSpec;
use crate::resources;
use crate::state::Shared;

/// vCPUs from an Azure size name (`Standard_D4s_v5` → 4), else 4.
fn vcpus(instance_type: &str) -> u32 {
    instance_type
        .split('_')
        .nth(1)
        .and_then(|size| {
            let digits: String = size
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .filter(|n| *n > 0)
        .unwrap_or(4)
}

fn node(sh: &Shared, i: usize, spec: &NodeSpec, kernel: &str) -> Value {
    let git_version = sh.opts.git_version();
    let mut labels = Map::new();
    for (k, v) in [
        ("kubernetes.io/arch", spec.arch.as_str()),
        ("beta.kubernetes.io/arch", spec.arch.as_str()),
        ("kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/hostname", spec.name.as_str()),
        ("topology.kubernetes.io/region", "standin"),
        ("topology.kubernetes.io/zone", "standin-1"),
    ] {
        labels.insert(k.into(), json!(v));
    }
    for (k, v) in &spec.labels {
        labels.insert(k.clone(), json!(v));
    }
    let itype = spec
        .labels
        .get("node.kubernetes.io/instance-type")
        .map_or("", String::as_str);
    let cpus = vcpus(itype);
    let mem_ki = u64::from(cpus) * 4 * 1024 * 1024;
    let now = clock::now();
    let cond = |t: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": msg,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"providerID": format!("standin:///{}", spec.name),
                 "podCIDR": format!("127.1.{i}.0/24")},
        "status": {
            "capacity": {"cpu": cpus.to_string(), "memory": format!("{mem_ki}Ki"), "pods": "110",
                         "ephemeral-storage": "129886128Ki"},
            "allocatable": {"cpu": format!("{}m", cpus * 1000 - 140),
                            "memory": format!("{}Ki", mem_ki * 85 / 100), "pods": "110",
                            "ephemeral-storage": "119703055367"},
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": sh.alloc.node_ip(i).to_string()},
                          {"type": "Hostname", "address": spec.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": spec.arch, "operatingSystem": "linux",
                "kubeletVersion": git_version, "kubeProxyVersion": git_version,
                "containerRuntimeVersion": "containerd://1.7.27-1",
                "kernelVersion": kernel, "osImage": "Ubuntu 22.04.5 LTS",
                "machineID": format!("{:032x}", i + 1), "systemUUID": crate::ids::uid(),
                "bootID": crate::ids::uid(),
            },
        },
    })
}

pub fn create(sh: &Shared) -> std::io::Result<()> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    for (i, spec) in sh.opts.nodes.iter().enumerate() {
        let n = node(sh, i, spec, &kernel);
        sh.store
            .create(&resources::NODES, n)
            .map_err(|e| std::io::Error::other(format!("node {}: {e}", spec.name)))?;
    }
    Ok(())
}

/// `status.nodeInfo.architecture` of a node ("" when unknown).
pub fn node_arch(sh: &Shared, node: &str) -> String {
    sh.store
        .get(&resources::NODES, "", node)
        .and_then(|n| {
            n.pointer("/status/nodeInfo/architecture")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn azure_sizes() {
        assert_eq!(super::vcpus("Standard_D4s_v5"), 4);
        assert_eq!(super::vcpus("Standard_D16ps_v5"), 16);
        assert_eq!(super::vcpus(""), 4);
    }
}
