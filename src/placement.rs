//! Where a target ran, as a cluster says it (node, instance type, allocatable CPU and memory,
//! the pod's limits), and what follows from it: a price from the user's price list, and how
//! throughput scales with the vCPUs a variant had. Plain data: `k8s` fills it in, comparisons
//! and sweeps carry it, the reports print it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where one target's pods ran (its first pod's node stands for its replicas).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The target's name.
    pub name: String,
    pub node: String,
    /// The node's `node.kubernetes.io/instance-type`.
    pub instance_type: Option<String>,
    /// The node's `status.nodeInfo.architecture`.
    pub node_arch: Option<String>,
    /// The CPU model the pod's /proc/cpuinfo names (None when exec is not allowed).
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// The node's allocatable cores and memory.
    pub node_cpu: Option<f64>,
    pub node_memory_bytes: Option<u64>,
    /// The container's limits (requests = limits for archbench's sized variants).
    pub cpu_limit: Option<f64>,
    pub memory_limit_bytes: Option<u64>,
    pub replicas: u32,
}

impl Placement {
    /// The vCPUs the target had: its pods' CPU limits, else their nodes' allocatable.
    pub fn vcpus(&self) -> Option<f64> {
        let per_pod = self.cpu_limit.or(self.node_cpu)?;
        Some(per_pod * f64::from(self.replicas.max(1)))
    }

    /// "aks-arm-0 (Standard_D2ps_v6, arm64; 2 cpu, 8.0 GiB allocatable); limits 1 cpu, 256.0 MiB; 1 replica".
    pub fn describe(&self) -> String {
        let cores = |c: f64| format!("{} cpu", trim(c));
        let bytes = |b: u64| crate::units::bytes_iec(b as f64);
        let mut node: Vec<String> = Vec::new();
        node.extend(self.instance_type.clone());
        node.extend(self.node_arch.clone());
        node.extend(self.cpu_model.clone());
        let allocatable: Vec<String> = self
            .node_cpu
            .map(cores)
            .into_iter()
            .chain(self.node_memory_bytes.map(bytes))
            .collect();
        let mut text = self.node.clone();
        if !node.is_empty() || !allocatable.is_empty() {
            text.push_str(&format!(" ({}", node.join(", ")));
            if !allocatable.is_empty() {
                if !node.is_empty() {
                    text.push_str("; ");
                }
                text.push_str(&format!("{} allocatable", allocatable.join(", ")));
            }
            text.push(')');
        }
        let limits: Vec<String> = self
            .cpu_limit
            .map(cores)
            .into_iter()
            .chain(self.memory_limit_bytes.map(bytes))
            .collect();
        text.push_str(&match limits.is_empty() {
            true => "; no limits".to_string(),
            false => format!("; limits {}", limits.join(", ")),
        });
        let s = if self.replicas == 1 { "" } else { "s" };
        text.push_str(&format!("; {} replica{s}", self.replicas));
        text
    }
}

fn trim(v: f64) -> String {
    let t = format!("{v:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A price list: instance type → price per hour (the user's currency).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices(pub Vec<(String, f64)>);

#[derive(Debug, Error, PartialEq)]
pub enum PriceError {
    #[error(
        "{file}:{line}: `{text}` is not INSTANCE_TYPE,PRICE_PER_HOUR (e.g. Standard_D2ps_v6,0.077)"
    )]
    Line {
        file: String,
        line: usize,
        text: String,
    },
    #[error("{file} has no price for {instance_type}, the instance type {name} runs on; add a line {instance_type},PRICE")]
    Missing {
        file: String,
        instance_type: String,
        name: String,
    },
    #[error("{name} runs on a node without a node.kubernetes.io/instance-type label: give its price with --cost {name}=PRICE")]
    Unlabelled { name: String },
}

/// What a target is charged per hour, and how that was reckoned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceBasis {
    pub name: String,
    pub price_per_hour: f64,
    /// "Standard_D8s_v6 at 0.384/h x 4 of 8 cpu x 2 replicas"; None: given with --cost.
    pub basis: Option<String>,
}

impl Prices {
    /// Reads `INSTANCE_TYPE,PRICE` lines (a header line, blank lines and `#` comments
    /// allowed); `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Prices, PriceError> {
        let mut out = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || PriceError::Line {
                file: file.to_string(),
                line: i + 1,
                text: line.to_string(),
            };
            let (kind, price) = line.split_once(',').ok_or_else(bad)?;
            let (kind, price) = (kind.trim(), price.trim());
            match price.parse::<f64>() {
                Ok(p) if p.is_finite() && p > 0.0 && !kind.is_empty() => {
                    out.push((kind.to_string(), p))
                }
                // The header ("instance_type,price_per_hour") is the only other line taken.
                _ if i == 0 && price.parse::<f64>().is_err() => {}
                _ => return Err(bad()),
            }
        }
        Ok(Prices(out))
    }

    /// Each placed target's price: its node's hourly price, times its share of the node
    /// (its pods' CPU limit over the node's allocatable CPU) when it has a limit, else the
    /// whole node, per replica. `--cost` given for a target wins.
    pub fn charge(
        &self,
        file: &str,
        placements: &[Placement],
        overrides: &[(String, f64)],
    ) -> Result<Vec<PriceBasis>, PriceError> {
        let mut out = Vec::new();
        for p in placements {
            if let Some((_, price)) = overrides.iter().find(|(n, _)| *n == p.name) {
                out.push(PriceBasis {
                    name: p.name.clone(),
                    price_per_hour: *price,
                    basis: None,
                });
                continue;
            }
            let kind = p
                .instance_type
                .as_ref()
                .ok_or_else(|| PriceError::Unlabelled {
                    name: p.name.clone(),
                })?;
            let node_price = self
                .0
                .iter()
                .find(|(k, _)| k == kind)
                .map(|(_, v)| *v)
                .ok_or_else(|| PriceError::Missing {
                    file: file.to_string(),
                    instance_type: kind.clone(),
                    name: p.name.clone(),
                })?;
            let replicas = f64::from(p.replicas.max(1));
            let (share, of) = match (p.cpu_limit, p.node_cpu) {
                (Some(limit), Some(node)) if node > 0.0 => (
                    limit / node,
                    format!(" x {} of {} cpu", trim(limit), trim(node)),
                ),
                _ => (1.0, " (the whole node)".to_string()),
            };
            let times = if p.replicas > 1 {
                format!(" x {} replicas", p.replicas)
            } else {
                String::new()
            };
            out.push(PriceBasis {
                name: p.name.clone(),
                price_per_hour: node_price * share * replicas,
                basis: Some(format!("{kind} at {node_price}/h{of}{times}")),
            });
        }
        for (name, price) in overrides {
            if !out.iter().any(|b| b.name == *name) {
                out.push(PriceBasis {
                    name: name.clone(),
                    price_per_hour: *price,
                    basis: None,
                });
            }
        }
        Ok(out)
    }
}

/// How one target's throughput scaled against the baseline's, for the vCPUs each had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub baseline: String,
    pub name: String,
    pub baseline_vcpus: f64,
    pub vcpus: f64,
    /// Throughput where each was judged (a sweep's knee, a load's median).
    pub baseline_requests_per_sec: f64,
    pub requests_per_sec: f64,
    pub baseline_per_vcpu: f64,
    pub per_vcpu: f64,
    /// Throughput ratio over vCPU ratio: 1.0 is linear scaling; null when withheld.
    pub efficiency: Option<f64>,
    /// Why no scaling verdict is given: a side's figures do not describe its servers (the
    /// client or nothing limited it, or its pods ran above their CPU limit).
    #[serde(default)]
    pub withheld: Option<String>,
}

impl Scaling {
    /// "large vs small: 4.00x the vCPUs (8 vs 2), 3.10x the throughput at the knee (41,000
    /// vs 13,226 req/s; 5,125 vs 6,613 req/s per vCPU): scaling efficiency 0.78".
    pub fn describe(&self, at: &str) -> String {
        let verdict = match (&self.withheld, self.efficiency) {
            (Some(why), _) => format!("no scaling verdict: {why}"),
            (None, Some(e)) => format!("scaling efficiency {e:.2}"),
            (None, None) => "no scaling verdict".into(),
        };
        format!(
            "{} vs {}: {:.2}x the vCPUs ({} vs {}), {:.2}x the throughput {at} ({} vs {} req/s; {} vs {} req/s per vCPU): {verdict}",
            self.name,
            self.baseline,
            self.vcpus / self.baseline_vcpus,
            trim(self.vcpus),
            trim(self.baseline_vcpus),
            self.requests_per_sec / self.baseline_requests_per_sec,
            crate::units::grouped_rounded(self.requests_per_sec),
            crate::units::grouped_rounded(self.baseline_requests_per_sec),
            crate::units::grouped_rounded(self.per_vcpu),
            crate::units::grouped_rounded(self.baseline_per_vcpu),
        )
    }
}

/// Each target's throughput, and why its figures cannot carry a scaling verdict (None: they
/// can), by name.
pub struct Judged<'a> {
    pub rps: &'a dyn Fn(&str) -> Option<f64>,
    pub withheld: &'a dyn Fn(&str) -> Option<String>,
}

/// One line per pair of targets whose vCPUs differ, the earlier one (as given) the baseline
/// of the pair, from each one's throughput (`rps`: None leaves the target out).
pub fn scaling(placements: &[Placement], judged: &Judged) -> Vec<Scaling> {
    placements
        .iter()
        .enumerate()
        .flat_map(|(i, base)| {
            placements[i + 1..]
                .iter()
                .filter_map(|p| pair(base, p, judged))
        })
        .collect()
}

fn pair(base: &Placement, p: &Placement, judged: &Judged) -> Option<Scaling> {
    let (base_vcpus, base_rps) = (base.vcpus()?, (judged.rps)(&base.name)?);
    let (vcpus, r) = (p.vcpus()?, (judged.rps)(&p.name)?);
    let withheld: Vec<String> = [base, p]
        .iter()
        .filter_map(|t| Some(format!("{}: {}", t.name, (judged.withheld)(&t.name)?)))
        .collect();
    let withheld = (!withheld.is_empty()).then(|| withheld.join("; "));
    (base_rps > 0.0 && (vcpus - base_vcpus).abs() > 1e-9).then(|| Scaling {
        baseline: base.name.clone(),
        name: p.name.clone(),
        baseline_vcpus: base_vcpus,
        vcpus,
        baseline_requests_per_sec: base_rps,
        requests_per_sec: r,
        baseline_per_vcpu: base_rps / base_vcpus,
        per_vcpu: r / vcpus,
        efficiency: withheld
            .is_none()
            .then(|| (r / base_rps) / (vcpus / base_vcpus)),
        withheld,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(
        name: &str,
        kind: &str,
        node_cpu: f64,
        limit: Option<f64>,
        replicas: u32,
    ) -> Placement {
        Placement {
            name: name.into(),
            node: "n".into(),
            instance_type: Some(kind.into()),
            node_arch: Some("arm64".into()),
            cpu_model: None,
            node_cpu: Some(node_cpu),
            node_memory_bytes: Some(8 << 30),
            cpu_limit: limit,
            memory_limit_bytes: None,
            replicas,
        }
    }

    #[test]
    fn a_price_list_is_read_with_its_header_and_comments() {
        let p = Prices::parse(
            "instance_type,price_per_hour\n# Azure, westeurope\nStandard_D2ps_v6, 0.077\n\nStandard_D8ps_v6,0.308\n",
            "prices.csv",
        )
        .unwrap();
        assert_eq!(
            p.0,
            vec![
                ("Standard_D2ps_v6".to_string(), 0.077),
                ("Standard_D8ps_v6".to_string(), 0.308)
            ]
        );
        for bad in ["a;1", "a,-1", "a,nan", "a,0", ",1"] {
            let e = Prices::parse(&format!("x,1\n{bad}\n"), "p.csv").unwrap_err();
            assert!(e.to_string().starts_with("p.csv:2: "), "{e}");
        }
    }

    #[test]
    fn a_variant_pays_its_share_of_its_node_or_the_whole_node() {
        let prices = Prices(vec![("D8".into(), 0.4), ("D2".into(), 0.1)]);
        let placements = [
            placed("large", "D8", 8.0, Some(4.0), 2),
            placed("small", "D2", 2.0, None, 1),
            placed("manual", "D2", 2.0, None, 1),
        ];
        let charged = prices
            .charge("p.csv", &placements, &[("manual".into(), 0.5)])
            .unwrap();
        assert!((charged[0].price_per_hour - 0.4 * 0.5 * 2.0).abs() < 1e-12);
        assert_eq!(
            charged[0].basis.as_deref(),
            Some("D8 at 0.4/h x 4 of 8 cpu x 2 replicas")
        );
        assert!((charged[1].price_per_hour - 0.1).abs() < 1e-12);
        assert_eq!(
            charged[1].basis.as_deref(),
            Some("D2 at 0.1/h (the whole node)")
        );
        assert_eq!(
            (charged[2].price_per_hour, charged[2].basis.as_deref()),
            (0.5, None)
        );
        let e = prices
            .charge("p.csv", &[placed("x", "E64", 64.0, None, 1)], &[])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.csv has no price for E64, the instance type x runs on; add a line E64,PRICE"
        );
    }

    #[test]
    fn scaling_is_the_throughput_ratio_over_the_vcpu_ratio() {
        let placements = [
            placed("small", "D2", 2.0, Some(2.0), 1),
            placed("large", "D8", 8.0, Some(8.0), 1),
            placed("same", "D2", 2.0, Some(2.0), 1),
        ];
        let rps = |n: &str| match n {
            "small" => Some(10_000.0),
            "large" => Some(30_000.0),
            _ => Some(9_000.0),
        };
        let judged = Judged {
            rps: &rps,
            withheld: &|_| None,
        };
        let lines = scaling(&placements, &judged);
        assert_eq!(
            lines.len(),
            2,
            "a line per pair whose vCPUs differ: {lines:?}"
        );
        assert_eq!(
            (lines[1].baseline.as_str(), lines[1].name.as_str()),
            ("large", "same")
        );
        let l = &lines[0];
        assert!((l.efficiency.unwrap() - 0.75).abs() < 1e-12);
        assert!((l.per_vcpu - 3_750.0).abs() < 1e-9);
        assert_eq!(
            l.describe("at the knee"),
            "large vs small: 4.00x the vCPUs (8 vs 2), 3.00x the throughput at the knee (30,000 vs 10,000 req/s; 3,750 vs 5,000 req/s per vCPU): scaling efficiency 0.75"
        );
        // One side not limited by its servers: the figures stay, the verdict goes.
        let client_bound = |n: &str| (n == "large").then(|| "the client limited it".to_string());
        let judged = Judged {
            rps: &rps,
            withheld: &client_bound,
        };
        let l = &scaling(&placements, &judged)[0];
        assert_eq!(l.efficiency, None);
        assert!(
            l.describe("at the knee").ends_with(
                "3,750 vs 5,000 req/s per vCPU): no scaling verdict: large: the client limited it"
            ),
            "{}",
            l.describe("at the knee")
        );
        let describe = placed("a", "D2", 2.0, Some(1.0), 3).describe();
        assert_eq!(
            describe,
            "n (D2, arm64; 2 cpu, 8.00 GiB allocatable); limits 1 cpu; 3 replicas"
        );
    }
}
