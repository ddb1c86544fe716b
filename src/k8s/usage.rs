//! A pod's CPU and memory from its own cgroup, read through exec — what the guide installs
//! btop in every pod for (and btop in a pod shows the node, not the pod) — or from the
//! metrics API when exec is not allowed.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::client::api_error;
use super::pods::exec;
use super::{Cluster, K8sError};

/// Prints the pod's cgroup counters, v2 names and v1 ones, each file under head's
/// `==> PATH <==` (a file the node lacks is left out): the parser takes whichever the node
/// has. One process per reading, not a shell and a `cat` per file: every process it starts
/// runs in the pod's cgroup, on the pod's CPU (a dozen per reading, four readings a second,
/// cost a 200m pod a tenth of its limit).
pub const READ_CGROUP: &str = "head -v -n 64 \
/sys/fs/cgroup/cpu.stat /sys/fs/cgroup/memory.current /sys/fs/cgroup/cpu.max \
/sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpuacct/cpuacct.stat \
/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage /sys/fs/cgroup/cpu,cpuacct/cpuacct.stat \
/sys/fs/cgroup/memory/memory.usage_in_bytes \
/sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us \
/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us \
2>/dev/null";

/// head's output of [`READ_CGROUP`] as `key value` lines: v2 names as they are, v1 ones
/// prefixed (`v1.cpuacct.usage`, `v1.cpuacct.user`, `v1.memory.usage`, `v1.cfs Q P`).
fn key_values(text: &str) -> String {
    let mut out = String::new();
    let (mut file, mut quota) = ("", None::<String>);
    for line in text.lines() {
        if let Some(path) = line
            .strip_prefix("==> ")
            .and_then(|l| l.strip_suffix(" <=="))
        {
            file = path.rsplit('/').next().unwrap_or("");
            continue;
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match file {
            "cpu.stat" => out += &format!("{line}\n"),
            "memory.current" | "cpu.max" => out += &format!("{file} {line}\n"),
            "cpuacct.usage" => out += &format!("v1.cpuacct.usage {line}\n"),
            "cpuacct.stat" => out += &format!("v1.cpuacct.{line}\n"),
            "memory.usage_in_bytes" => out += &format!("v1.memory.usage {line}\n"),
            "cpu.cfs_quota_us" => quota = Some(line.to_string()),
            "cpu.cfs_period_us" => {
                if let Some(q) = quota.take() {
                    out += &format!("v1.cfs {q} {line}\n");
                }
            }
            _ => {}
        }
    }
    out
}

/// One reading of a pod's cgroup: cumulative CPU and current memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgroupReading {
    /// CPU time used since the cgroup was made, microseconds.
    pub usage_usec: u64,
    pub user_usec: Option<u64>,
    pub system_usec: Option<u64>,
    /// Memory charged to the cgroup now (memory.current or memory.usage_in_bytes).
    pub memory_bytes: u64,
    /// The pod's CPU limit in cores (cpu.max, or v1's CFS quota over its period), if set.
    pub cpu_limit_cores: Option<f64>,
}

/// Parses [`READ_CGROUP`]'s output (or its `key value` form); None when neither a v2 nor a
/// v1 CPU counter was there.
pub fn parse_cgroup(text: &str) -> Option<CgroupReading> {
    let converted;
    let text = if text.starts_with("==> ") {
        converted = key_values(text);
        converted.as_str()
    } else {
        text
    };
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    // USER_HZ is 100 on every Linux architecture Kubernetes runs on.
    let ticks = |key: &str| field(key).map(|t| t * 10_000);
    let (usage_usec, user_usec, system_usec) = match field("usage_usec") {
        Some(u) => (u, field("user_usec"), field("system_usec")),
        None => (
            field("v1.cpuacct.usage")? / 1000,
            ticks("v1.cpuacct.user"),
            ticks("v1.cpuacct.system"),
        ),
    };
    Some(CgroupReading {
        usage_usec,
        user_usec,
        system_usec,
        memory_bytes: field("memory.current")
            .or_else(|| field("v1.memory.usage"))
            .unwrap_or(0),
        cpu_limit_cores: cpu_limit(text),
    })
}

/// "cpu.max QUOTA PERIOD" or "v1.cfs QUOTA PERIOD", read as the local cgroup sampler reads them.
fn cpu_limit(text: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (key, rest) = l.split_once(' ')?;
        matches!(key, "cpu.max" | "v1.cfs")
            .then(|| crate::monitor::cpu_max_cores(rest))
            .flatten()
    })
}

/// Reads the pod's cgroup once through exec.
pub async fn read_cgroup(cluster: &Cluster, pod: &str) -> Result<CgroupReading, K8sError> {
    let out = exec(
        cluster,
        pod,
        &["sh", "-c", &format!("exec {READ_CGROUP}")],
        None,
    )
    .await?;
    parse_cgroup(&out.stdout_text()).ok_or_else(|| K8sError::Failed {
        what: format!("read the cgroup of {pod}"),
        message: "neither /sys/fs/cgroup/cpu.stat (v2) nor cpuacct.usage (v1) is readable in the container".into(),
    })
}

/// Parses a Kubernetes CPU quantity ("250m", "123456n", "2") into cores.
pub fn cpu_cores(q: &str) -> Option<f64> {
    let (num, scale) = match q.as_bytes().last()? {
        b'n' => (&q[..q.len() - 1], 1e-9),
        b'u' => (&q[..q.len() - 1], 1e-6),
        b'm' => (&q[..q.len() - 1], 1e-3),
        _ => (q, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// Parses a Kubernetes memory quantity ("4560Ki", "12Mi", "1G", "1234") into bytes.
pub fn memory_bytes(q: &str) -> Option<u64> {
    let units: [(&str, f64); 8] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, scale) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().ok().map(|v| (v * scale) as u64);
        }
    }
    q.parse().ok()
}

/// A pod's usage now: cores over the last interval and current memory.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub pod: String,
    /// Its variant's name.
    pub variant: String,
    /// None when the pod could not be read (its container not running, say).
    pub cores: Option<f64>,
    pub memory_bytes: Option<u64>,
    /// "cgroup (exec)", "metrics API (…s window)", or why the pod was not read.
    pub source: String,
}

/// A pod's first look: a cgroup reading, the metrics API's turn (exec forbidden), or why it
/// could not be read.
enum FirstLook {
    Cgroup(CgroupReading, Instant),
    Metrics,
    Unread(String),
}

/// Two cgroup readings a second apart per pod, or the metrics API where exec is forbidden. A
/// pod that cannot be read (restarting, crash-looping) is a row saying why, not the end of
/// every row: one such pod made `top` and `top --watch` fail.
pub async fn top(cluster: &Cluster, pods: &[Pod]) -> Result<Vec<PodUsage>, K8sError> {
    let mut first = Vec::with_capacity(pods.len());
    for p in pods {
        first.push(match read_cgroup(cluster, &p.name_any()).await {
            Ok(r) => FirstLook::Cgroup(r, Instant::now()),
            Err(K8sError::Forbidden { .. }) => FirstLook::Metrics,
            Err(e) => FirstLook::Unread(format!("not read: {e}")),
        });
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut out = Vec::with_capacity(pods.len());
    for (p, before) in pods.iter().zip(first) {
        let name = p.name_any();
        let variant = super::variant_of(p.labels())
            .unwrap_or_default()
            .to_string();
        let unread = |why: String| PodUsage {
            pod: name.clone(),
            variant: variant.clone(),
            cores: None,
            memory_bytes: None,
            source: why,
        };
        out.push(match before {
            FirstLook::Cgroup(a, at) => match read_cgroup(cluster, &name).await {
                Ok(b) => PodUsage {
                    cores: Some(
                        b.usage_usec.saturating_sub(a.usage_usec) as f64
                            / 1e6
                            / at.elapsed().as_secs_f64(),
                    ),
                    memory_bytes: Some(b.memory_bytes),
                    source: "cgroup (exec)".into(),
                    ..unread(String::new())
                },
                Err(e) => unread(format!("not read: {e}")),
            },
            // Metrics nobody may read are the user's to fix, said once; a pod the metrics
            // API does not hold (restarting) is a row like any unread one.
            FirstLook::Metrics => match metrics_api(cluster, &name, variant.clone()).await {
                Ok(u) => u,
                Err(e @ K8sError::Forbidden { .. }) => return Err(e),
                Err(e) => unread(format!("not in the metrics API: {e}")),
            },
            FirstLook::Unread(why) => unread(why),
        });
    }
    Ok(out)
}

/// The metrics API's view of a pod (metrics-server: a window of tens of seconds).
async fn metrics_api(cluster: &Cluster, pod: &str, variant: String) -> Result<PodUsage, K8sError> {
    let path = format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{}/pods/{pod}",
        cluster.namespace
    );
    let req = ::http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| K8sError::Request {
            what: "metrics request".into(),
            source: e,
        })?;
    let text = cluster
        .client
        .request_text(req)
        .await
        .map_err(|e| api_error(e, "get", "pods.metrics.k8s.io"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| K8sError::Decode {
        what: format!("metrics of {pod}"),
        source: e,
    })?;
    let containers = v["containers"].as_array().cloned().unwrap_or_default();
    let cores = containers
        .iter()
        .filter_map(|c| cpu_cores(c["usage"]["cpu"].as_str()?))
        .sum();
    let memory = containers
        .iter()
        .filter_map(|c| memory_bytes(c["usage"]["memory"].as_str()?))
        .sum();
    // No container listed: nothing measured, not zero.
    let listed = !containers.is_empty();
    Ok(PodUsage {
        pod: pod.to_string(),
        variant,
        cores: listed.then_some(cores),
        memory_bytes: listed.then_some(memory),
        source: format!(
            "metrics API ({} window)",
            v["window"].as_str().unwrap_or("?")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_v2_and_v1_cgroups() {
        let v2 = "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\nmemory.current 4669440\nv1.cpuacct.usage\nv1.memory.usage\ncpu.max 150000 100000\nv1.cfs\n";
        assert_eq!(
            parse_cgroup(v2),
            Some(CgroupReading {
                usage_usec: 2_500_000,
                user_usec: Some(2_000_000),
                system_usec: Some(500_000),
                memory_bytes: 4_669_440,
                cpu_limit_cores: Some(1.5),
            })
        );
        let v1 = "memory.current\nv1.cpuacct.usage 3000000000\nv1.cpuacct.user 250\nv1.cpuacct.system 50\nv1.memory.usage 8192\ncpu.max\nv1.cfs -1 100000\n";
        assert_eq!(
            parse_cgroup(v1),
            Some(CgroupReading {
                usage_usec: 3_000_000,
                user_usec: Some(2_500_000),
                system_usec: Some(500_000),
                memory_bytes: 8192,
                cpu_limit_cores: None,
            })
        );
        let v1_limited = v1.replace("v1.cfs -1 100000", "v1.cfs 50000 100000");
        assert_eq!(
            parse_cgroup(&v1_limited).unwrap().cpu_limit_cores,
            Some(0.5)
        );
        let unlimited = v2.replace("cpu.max 150000 100000", "cpu.max max 100000");
        assert_eq!(parse_cgroup(&unlimited).unwrap().cpu_limit_cores, None);
        assert_eq!(parse_cgroup("memory.current\nv1.cpuacct.usage\n"), None);
    }

    #[test]
    fn reads_heads_output_of_either_layout() {
        // What head prints on a v2 node (and in the test cluster's v1 view).
        let v2 = "==> /sys/fs/cgroup/cpu.stat <==\nusage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n\n==> /sys/fs/cgroup/memory.current <==\n4669440\n\n==> /sys/fs/cgroup/cpu.max <==\n20000 100000\n";
        assert_eq!(
            parse_cgroup(v2),
            Some(CgroupReading {
                usage_usec: 2_500_000,
                user_usec: Some(2_000_000),
                system_usec: Some(500_000),
                memory_bytes: 4_669_440,
                cpu_limit_cores: Some(0.2),
            })
        );
        // A v1 node's own files.
        let v1 = "==> /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage <==\n3000000000\n\n==> /sys/fs/cgroup/cpu,cpuacct/cpuacct.stat <==\nuser 250\nsystem 50\n\n==> /sys/fs/cgroup/memory/memory.usage_in_bytes <==\n8192\n\n==> /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us <==\n50000\n\n==> /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us <==\n100000\n";
        assert_eq!(
            parse_cgroup(v1),
            Some(CgroupReading {
                usage_usec: 3_000_000,
                user_usec: Some(2_500_000),
                system_usec: Some(500_000),
                memory_bytes: 8192,
                cpu_limit_cores: Some(0.5),
            })
        );
    }

    #[test]
    fn kubernetes_quantities() {
        assert_eq!(cpu_cores("250m"), Some(0.25));
        assert_eq!(cpu_cores("12345678n"), Some(0.012345678));
        assert_eq!(cpu_cores("2"), Some(2.0));
        assert_eq!(memory_bytes("4560Ki"), Some(4_669_440));
        assert_eq!(memory_bytes("12Mi"), Some(12 * 1024 * 1024));
        assert_eq!(memory_bytes("1234"), Some(1234));
        assert_eq!(cpu_cores("x"), None);
    }
}
