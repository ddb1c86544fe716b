//! A pod's `resources` as the kubelet turns them into its pod cgroup: CPU limits become a CFS
//! quota, CPU requests shares (or a v2 weight), memory limits the memory limit. The kubelet
//! sets a pod-level limit only when every container has one (else any container may use the
//! whole node), and the pod's requests are the sum of its containers'.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The CFS period the kubelet uses (100 ms).
pub const CFS_PERIOD_US: u64 = 100_000;
/// The least quota the kubelet writes (its MinQuotaPeriod, 1 ms).
const MIN_QUOTA_US: u64 = 1_000;
/// The shares of a pod without CPU requests (a BestEffort pod: cgroup v1's minimum).
const MIN_SHARES: u64 = 2;

/// The pod cgroup's settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodLimits {
    /// The CFS quota per [`CFS_PERIOD_US`], when every container has a CPU limit.
    pub cpu_quota_us: Option<u64>,
    /// cgroup v1 cpu.shares (1024 per requested core).
    pub cpu_shares: u64,
    /// When every container has a memory limit: their sum, in bytes.
    pub memory_bytes: Option<u64>,
}

impl PodLimits {
    /// From the pod object (`spec.containers[].resources`); an unreadable quantity is an
    /// error naming it (the API server validates them, so it means a quantity we misread).
    pub fn of(pod: &Pod) -> Result<PodLimits, String> {
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        // `path` names the quantity in the error as the object's JSON does.
        let quantity = |list: Option<&BTreeMap<String, Quantity>>,
                        key: &str,
                        path: &str,
                        parse: fn(&str) -> Option<u64>| {
            list.and_then(|l| l.get(key))
                .map(|Quantity(q)| parse(q).ok_or_else(|| format!("cannot read {path} {q:?}")))
                .transpose()
        };
        let (mut cpu_limit, mut memory_limit, mut cpu_request) = (Some(0), Some(0), 0);
        for c in containers {
            let resources = c.resources.as_ref();
            let limits = resources.and_then(|r| r.limits.as_ref());
            let requests = resources.and_then(|r| r.requests.as_ref());
            let limit = quantity(limits, "cpu", "/resources/limits/cpu", millicores)?;
            cpu_limit = cpu_limit.zip(limit).map(|(a, b)| a + b);
            let memory = quantity(limits, "memory", "/resources/limits/memory", bytes)?;
            memory_limit = memory_limit.zip(memory).map(|(a, b)| a + b);
            // No request but a limit: the API server defaults the request to the limit.
            cpu_request += quantity(requests, "cpu", "/resources/requests/cpu", millicores)?
                .or(limit)
                .unwrap_or(0);
        }
        let any = !containers.is_empty();
        Ok(PodLimits {
            cpu_quota_us: cpu_limit
                .filter(|_| any)
                .map(|m| (m * CFS_PERIOD_US / 1000).max(MIN_QUOTA_US)),
            cpu_shares: (cpu_request * 1024 / 1000).max(MIN_SHARES),
            memory_bytes: memory_limit.filter(|_| any),
        })
    }

    /// cgroup v2's cpu.weight for these shares, as the kubelet converts them.
    pub fn cpu_weight(&self) -> u64 {
        1 + (self.cpu_shares.saturating_sub(2) * 9999) / 262_142
    }

    /// cgroup v2's cpu.max text ("20000 100000", or "max 100000").
    pub fn cpu_max(&self) -> String {
        match self.cpu_quota_us {
            Some(q) => format!("{q} {CFS_PERIOD_US}"),
            None => format!("max {CFS_PERIOD_US}"),
        }
    }

    /// cgroup v2's memory.max text (bytes, or "max").
    pub fn memory_max(&self) -> String {
        self.memory_bytes
            .map_or_else(|| "max".into(), |b| b.to_string())
    }
}

/// A CPU quantity in millicores: "250m", "2", "0.5".
fn millicores(q: &str) -> Option<u64> {
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().ok();
    }
    let cores: f64 = q
        .parse()
        .ok()
        .filter(|c: &f64| c.is_finite() && *c >= 0.0)?;
    // Kubernetes rounds a finer CPU quantity up to the millicore.
    Some((cores * 1000.0).ceil() as u64)
}

/// A memory quantity in bytes: "64Mi", "1G", "134217728", "1.5Gi".
fn bytes(q: &str) -> Option<u64> {
    const SUFFIXES: [(&str, f64); 12] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(s, f)| q.strip_suffix(s).map(|n| (n, *f)))
        .unwrap_or((q, 1.0));
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    Some((n * scale).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(containers: Value) -> Pod {
        serde_json::from_value(json!({"spec": {"containers": containers}})).unwrap()
    }

    #[test]
    fn quantities_as_kubernetes_writes_them() {
        assert_eq!(millicores("250m"), Some(250));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.5"), Some(500));
        assert_eq!(millicores("0.0001"), Some(1));
        assert_eq!(millicores("x"), None);
        assert_eq!(bytes("64Mi"), Some(64 << 20));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("134217728"), Some(134_217_728));
        assert_eq!(bytes("-1Mi"), None);
    }

    #[test]
    fn limits_as_the_kubelet_sets_the_pod_cgroup() {
        let two = pod(json!([
            {"resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}},
            {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}}}
        ]));
        let l = PodLimits::of(&two).unwrap();
        assert_eq!(l.cpu_quota_us, Some(120_000));
        assert_eq!(l.cpu_max(), "120000 100000");
        assert_eq!(l.memory_bytes, Some((64 << 20) + (1 << 30)));
        // requests: 200m defaulted from the limit, plus 100m.
        assert_eq!(l.cpu_shares, 307);
        // One container without limits: the pod has none.
        let open = pod(json!([
            {"resources": {"limits": {"cpu": "200m"}}},
            {"name": "free"}
        ]));
        let l = PodLimits::of(&open).unwrap();
        assert_eq!((l.cpu_quota_us, l.memory_bytes), (None, None));
        assert_eq!(l.cpu_max(), "max 100000");
        assert_eq!(l.memory_max(), "max");
        // BestEffort: the least shares; v2 weight as the kubelet converts (1024 -> 39).
        assert_eq!(PodLimits::of(&pod(json!([{}]))).unwrap().cpu_shares, 2);
        let core = PodLimits {
            cpu_shares: 1024,
            ..PodLimits::default()
        };
        assert_eq!(core.cpu_weight(), 39);
        // A tiny limit gets the kubelet's minimum quota.
        let tiny = pod(json!([{"resources": {"limits": {"cpu": "1m"}}}]));
        assert_eq!(PodLimits::of(&tiny).unwrap().cpu_quota_us, Some(1_000));
        assert_eq!(
            PodLimits::of(&pod(json!([{"resources": {"limits": {"cpu": "lots"}}}]))),
            Err("cannot read /resources/limits/cpu \"lots\"".to_string())
        );
    }
}
