//! A variant: one nginx Deployment of the setup, with its own placement, image, configuration
//! and size. `--arch intel,arm` makes the guide's presets (today's names, labels and
//! selectors, exactly); `--variant NAME:KEY=VALUE,…` makes any other (two instance types, two
//! builds, two configurations).

use std::collections::BTreeMap;

use super::{Arch, NginxConfig, PoolSelector};

/// The label every variant's pods carry with its name (the presets use `arch` instead, as
/// the guide's script did).
pub const VARIANT_LABEL: &str = "variant";
/// Deployment annotation: the variant's keys as the user gave them (a configuration file by
/// its kind, `config=file`: its text is in the variant's ConfigMap), so `k8s config` can
/// rebuild the setup from the cluster.
pub const SPEC_ANNOTATION: &str = "archbench.dev/variant";

/// Names a selection means something else by.
const RESERVED: [&str; 3] = ["multiarch", "both", "all"];
/// The keys `--variant` takes.
pub const KEYS: [&str; 11] = [
    "arch",
    "pool",
    "instance-type",
    "node-selector",
    "image",
    "config",
    "replicas",
    "cpu",
    "memory",
    "workers",
    "tls",
];

/// At most this many replicas per variant: a benchmark setup, not a fleet.
const MAX_REPLICAS: i32 = 100;
/// nginx refuses more worker processes than this is sensible for any node here.
const MAX_WORKERS: u32 = 1024;

/// One Deployment of the setup.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// "intel", "arm-small": the names' middle (`nginx-<name>-deployment`).
    pub name: String,
    /// Set for the guide's presets: their labels and selectors are today's, byte for byte.
    pub preset: Option<Arch>,
    /// The pods' nodeSelector.
    pub node_selector: BTreeMap<String, String>,
    /// None: the setup's `--image`.
    pub image: Option<String>,
    /// None: the setup's `--config` (the shared ConfigMap).
    pub config: Option<NginxConfig>,
    pub replicas: i32,
    /// The container's CPU (requests = limits), as given ("2", "500m") and in millicores.
    pub cpu: Option<(String, u64)>,
    /// The container's memory (requests = limits), as given ("1Gi") and in bytes.
    pub memory: Option<(String, u64)>,
    /// nginx's `worker_processes` (None: the configuration's own).
    pub workers: Option<u32>,
    /// https beside http (`tls=on|off`; None: as the setup's `--tls`).
    pub tls: Option<bool>,
    /// The keys as given, canonical order, `config` by its kind: tuned, stock or file
    /// ([`SPEC_ANNOTATION`]).
    pub spec: String,
}

impl Variant {
    /// The guide's Deployment of one architecture.
    pub fn preset(arch: Arch, pools: PoolSelector) -> Variant {
        let (key, value) = match pools {
            PoolSelector::Arch => ("kubernetes.io/arch", arch.kube_arch()),
            PoolSelector::Agentpool => ("agentpool", arch.name()),
        };
        Variant {
            preset: Some(arch),
            node_selector: BTreeMap::from([(key.to_string(), value.to_string())]),
            ..Variant::named(arch.name())
        }
    }

    /// A variant of that name with every key at its default.
    fn named(name: &str) -> Variant {
        Variant {
            name: name.to_string(),
            preset: None,
            node_selector: BTreeMap::new(),
            image: None,
            config: None,
            replicas: 1,
            cpu: None,
            memory: None,
            workers: None,
            tls: None,
            spec: String::new(),
        }
    }

    /// Parses `NAME:KEY=VALUE[,KEY=VALUE…]`; `config` values go through `config` (the CLI
    /// reads files).
    pub fn parse(
        text: &str,
        config: &dyn Fn(&str) -> Result<NginxConfig, String>,
    ) -> Result<Variant, String> {
        let (name, keys) = text.split_once(':').unwrap_or((text, ""));
        let name = check_name(name.trim())?;
        let mut v = Variant::named(&name);
        let mut seen: Vec<(&str, String)> = Vec::new();
        for pair in keys.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "--variant {name}: `{pair}` is not KEY=VALUE (keys: {})",
                    KEYS.join(", ")
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(&key) = KEYS.iter().find(|k| **k == key) else {
                return Err(format!(
                    "--variant {name}: unknown key `{key}` (keys: {})",
                    KEYS.join(", ")
                ));
            };
            if value.is_empty() {
                return Err(format!("--variant {name}: {key}= needs a value"));
            }
            if key != "node-selector"
                && (key == "config" && v.config.is_some() || seen.iter().any(|(k, _)| *k == key))
            {
                return Err(format!("--variant {name}: {key} is given twice"));
            }
            v.set(key, value, config)
                .map_err(|e| format!("--variant {name}: {e}"))?;
            // A configuration is kept by its kind: a file's text is in the variant's ConfigMap.
            seen.push(match (key, &v.config) {
                ("config", Some(c)) => (key, c.kind().to_string()),
                _ => (key, value.to_string()),
            });
        }
        if v.workers.is_some() && v.config.as_ref().is_some_and(|c| c.text().is_none()) {
            return Err(format!(
                "--variant {name}: workers= needs a configuration to set it in; config=stock is the image's own"
            ));
        }
        seen.sort_by_key(|(k, _)| KEYS.iter().position(|known| known == k));
        v.spec = seen
            .iter()
            .map(|(k, value)| format!("{k}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        Ok(v)
    }

    fn set(
        &mut self,
        key: &str,
        value: &str,
        config: &dyn Fn(&str) -> Result<NginxConfig, String>,
    ) -> Result<(), String> {
        let label = |k: &str, v: &str| -> Result<(String, String), String> {
            check_label_value(v).map(|v| (k.to_string(), v))
        };
        let (k, v) = match key {
            "arch" => match value {
                "amd64" | "arm64" => label("kubernetes.io/arch", value)?,
                _ => return Err(format!("arch={value}: give amd64 or arm64")),
            },
            "pool" => label("agentpool", value)?,
            "instance-type" => label("node.kubernetes.io/instance-type", value)?,
            "node-selector" => {
                let (k, v) = value.split_once('=').ok_or_else(|| {
                    format!("node-selector={value}: give a node label as node-selector=KEY=VALUE")
                })?;
                check_label_key(k)?;
                label(k, v)?
            }
            _ => return self.set_pod(key, value, config),
        };
        if self.node_selector.insert(k.clone(), v).is_some() {
            return Err(format!("the node label {k} is selected twice"));
        }
        Ok(())
    }

    /// The keys that shape the pod rather than where it runs.
    fn set_pod(
        &mut self,
        key: &str,
        value: &str,
        config: &dyn Fn(&str) -> Result<NginxConfig, String>,
    ) -> Result<(), String> {
        match key {
            "image" => self.image = Some(value.to_string()),
            "config" => self.config = Some(config(value)?),
            "replicas" => {
                self.replicas = value
                    .parse::<i32>()
                    .ok()
                    .filter(|n| (1..=MAX_REPLICAS).contains(n))
                    .ok_or_else(|| format!("replicas={value}: give 1 to {MAX_REPLICAS}"))?
            }
            "cpu" => self.cpu = Some((value.to_string(), millicores(value)?)),
            "memory" => self.memory = Some((value.to_string(), bytes(value)?)),
            "workers" if value == "auto" => self.workers = None,
            "workers" => {
                self.workers = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_WORKERS).contains(n))
                        .ok_or_else(|| {
                            format!("workers={value}: give auto or 1 to {MAX_WORKERS}")
                        })?,
                )
            }
            "tls" => {
                self.tls = Some(match value {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("tls={value}: give on or off")),
                })
            }
            _ => unreachable!("every key of KEYS is handled"),
        }
        Ok(())
    }

    pub fn deployment(&self) -> String {
        format!("nginx-{}-deployment", self.name)
    }

    pub fn service(&self) -> String {
        format!("nginx-{}-svc", self.name)
    }

    /// The ConfigMap of a variant whose configuration differs from the setup's.
    pub fn config_map(&self) -> String {
        config_map_of(&self.name)
    }

    /// The label that selects its pods: `arch=NAME` for the presets, else `variant=NAME`.
    pub fn selector(&self) -> (&'static str, &str) {
        match self.preset {
            Some(_) => ("arch", &self.name),
            None => (VARIANT_LABEL, &self.name),
        }
    }

    /// Labels of the Deployment and its pods beside the app's: the selector's, and for a
    /// variant with an architecture also `arch` (amd64, arm64), as the presets have theirs.
    pub fn labels(&self) -> Vec<(&str, &str)> {
        let mut out = vec![self.selector()];
        if self.preset.is_none() {
            if let Some(arch) = self.node_selector.get("kubernetes.io/arch") {
                out.push(("arch", arch));
            }
        }
        out
    }

    /// The text nginx runs: its own configuration or the setup's, with `workers` set in it.
    /// None: the image's own.
    pub fn config_text(&self, shared: &NginxConfig) -> Option<String> {
        let text = self.config.as_ref().unwrap_or(shared).text()?;
        Some(match self.workers {
            Some(n) => with_workers(text, n),
            None => text.to_string(),
        })
    }
}

/// The server a variant's pods run, told by its image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// Any image but Caddy's: nginx.conf from the setup, `--tls` and `--http3` added into it.
    Nginx,
    /// `caddy`, `caddy:2`, `docker.io/library/caddy@sha256:…`: the Caddyfile of
    /// [`super::caddy`], https and HTTP/3 unless `tls=off`.
    Caddy,
}

impl Server {
    /// The server of an image: Caddy when the repository's last name is `caddy`.
    pub fn of_image(image: &str) -> Server {
        let repo = image.split('@').next().unwrap_or(image);
        let last = repo.rsplit('/').next().unwrap_or(repo);
        let name = last.split(':').next().unwrap_or(last);
        match name {
            "caddy" => Server::Caddy,
            _ => Server::Nginx,
        }
    }

    /// "nginx", "caddy": the server's program, as messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Server::Nginx => "nginx",
            Server::Caddy => "caddy",
        }
    }
}

/// What a node offers a variant's pods: its labels and allocatable CPU and memory.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOffer {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub millicores: Option<u64>,
    pub bytes: Option<u64>,
}

impl NodeOffer {
    /// From a node's allocatable quantities as the API server writes them.
    pub fn new(
        name: String,
        labels: BTreeMap<String, String>,
        cpu: Option<&str>,
        memory: Option<&str>,
    ) -> NodeOffer {
        NodeOffer {
            name,
            labels,
            millicores: cpu.and_then(|c| millicores(c).ok()),
            bytes: memory.and_then(|m| bytes(m).ok()),
        }
    }
}

impl Variant {
    /// Why no node can run this variant's pods, said before anything is applied: a selector
    /// no node matches (with the values the nodes have), or CPU or memory above every matching
    /// node's allocatable (with the largest).
    pub fn placement_problem(&self, nodes: &[NodeOffer]) -> Option<String> {
        let name = &self.name;
        for (key, value) in &self.node_selector {
            if nodes.iter().any(|n| n.labels.get(key) == Some(value)) {
                continue;
            }
            let mut have: Vec<&str> = nodes
                .iter()
                .filter_map(|n| n.labels.get(key).map(String::as_str))
                .collect();
            have.sort_unstable();
            have.dedup();
            let have = if have.is_empty() {
                format!("no node has the label {key}")
            } else {
                format!("the nodes have {key}={}", have.join(", "))
            };
            return Some(format!(
                "no node has {key}={value} for {name}: {have}; change the variant's selector or add such a node pool"
            ));
        }
        let fits: Vec<&NodeOffer> = nodes
            .iter()
            .filter(|n| super::selects(&self.node_selector, &n.labels))
            .collect();
        if let Some((given, wanted)) = &self.cpu {
            let largest = fits.iter().filter_map(|n| n.millicores).max();
            if largest.is_some_and(|l| l < *wanted) {
                return Some(format!(
                    "no node can fit cpu={given} for {name} (Insufficient cpu): the largest allocatable of its nodes is {} cpu; lower cpu= or choose larger nodes",
                    cores(largest.unwrap_or_default())
                ));
            }
        }
        if let Some((given, wanted)) = &self.memory {
            let largest = fits.iter().filter_map(|n| n.bytes).max();
            if largest.is_some_and(|l| l < *wanted) {
                return Some(format!(
                    "no node can fit memory={given} for {name} (Insufficient memory): the largest allocatable of its nodes is {}Mi; lower memory= or choose larger nodes",
                    largest.unwrap_or_default() >> 20
                ));
            }
        }
        None
    }
}

/// Millicores as cores ("1.93", "2").
fn cores(millicores: u64) -> String {
    let text = format!("{:.3}", millicores as f64 / 1000.0);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The ConfigMap of the variant of that name, when it has one.
pub fn config_map_of(name: &str) -> String {
    format!("nginx-{name}-config")
}

/// The name a pod's labels give its variant (`variant`, else a preset's `arch`).
pub fn variant_of(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels
        .get(VARIANT_LABEL)
        .or_else(|| labels.get("arch"))
        .map(String::as_str)
}

/// `text` with its `worker_processes` set to `n` (added at the top when it has none).
pub fn with_workers(text: &str, n: u32) -> String {
    let line = format!("worker_processes {n};");
    let mut replaced = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|l| {
            let directive = l.trim_start();
            if !replaced && directive.starts_with("worker_processes") {
                replaced = true;
                let indent = &l[..l.len() - directive.len()];
                format!("{indent}{line}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !replaced {
        out.insert(0, line);
    }
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

/// A name Kubernetes takes in `nginx-<name>-svc` (an RFC 1035 label of at most 63) and no
/// selection word.
fn check_name(name: &str) -> Result<String, String> {
    const LONGEST: usize = 63 - "nginx--deployment".len();
    let ok = !name.is_empty()
        && name.len() <= LONGEST
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        return Err(format!(
            "--variant `{name}`: a name is 1 to {LONGEST} lowercase letters, digits and '-', starting with a letter (e.g. arm-small)"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "--variant {name}: the name is taken ({} are selections of `k8s load`); choose another",
            RESERVED.join(", ")
        ));
    }
    Ok(name.to_string())
}

/// A label value Kubernetes accepts (at most 63 of alphanumerics, '-', '_', '.', alphanumeric
/// at both ends).
fn check_label_value(v: &str) -> Result<String, String> {
    let ok = v.len() <= 63
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.ends_with(|c: char| c.is_ascii_alphanumeric())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "`{v}` is no label value (at most 63 letters, digits, '-', '_', '.', a letter or digit at both ends)"
        ))
    }
}

/// A label key: an optional DNS prefix and '/', then a name as a value is.
fn check_label_key(k: &str) -> Result<(), String> {
    let name = k.rsplit_once('/').map_or(k, |(_, n)| n);
    check_label_value(name)
        .map(|_| ())
        .map_err(|_| format!("`{k}` is no label key"))
}

/// CPU as Kubernetes writes it ("2", "1.5", "500m") in millicores.
fn millicores(value: &str) -> Result<u64, String> {
    super::resource_quantity::amount(value)
        .map(|cores| (cores * 1000.0).round())
        .filter(|m| (1.0..=1e9).contains(m))
        .map(|m| m as u64)
        .ok_or_else(|| format!("cpu={value}: give cores (2, 1.5) or millicores (500m)"))
}

/// Memory as Kubernetes writes it ("512Mi", "1Gi", "1G", bytes) in bytes.
fn bytes(value: &str) -> Result<u64, String> {
    super::resource_quantity::amount(value)
        .map(f64::round)
        // u64::MAX as f64 rounds up to 2^64: below it, every value converts.
        .filter(|b| *b >= (1u64 << 20) as f64 && *b < u64::MAX as f64)
        .map(|b| b as u64)
        .ok_or_else(|| format!("memory={value}: give e.g. 512Mi or 2Gi (at least 1Mi)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(v: &str) -> Result<NginxConfig, String> {
        match v {
            "tuned" => Ok(NginxConfig::Tuned),
            "stock" => Ok(NginxConfig::Stock),
            other => Err(format!("config={other}: no such file")),
        }
    }

    fn parse(text: &str) -> Result<Variant, String> {
        Variant::parse(text, &no_files)
    }

    #[test]
    fn every_key_lands_where_it_belongs() {
        let v = parse("arm-large:arch=arm64,instance-type=Standard_D4ps_v6,pool=armpool,node-selector=disk=ssd,image=nginx:1.27,config=stock,replicas=2,cpu=1500m,memory=1Gi").unwrap();
        assert_eq!(v.name, "arm-large");
        assert_eq!(
            v.node_selector,
            BTreeMap::from([
                ("kubernetes.io/arch".to_string(), "arm64".to_string()),
                (
                    "node.kubernetes.io/instance-type".into(),
                    "Standard_D4ps_v6".into()
                ),
                ("agentpool".into(), "armpool".into()),
                ("disk".into(), "ssd".into()),
            ])
        );
        assert_eq!(v.image.as_deref(), Some("nginx:1.27"));
        assert_eq!(v.config, Some(NginxConfig::Stock));
        assert_eq!(v.replicas, 2);
        assert_eq!(v.cpu, Some(("1500m".into(), 1500)));
        assert_eq!(v.memory, Some(("1Gi".into(), 1 << 30)));
        assert_eq!(v.selector(), ("variant", "arm-large"));
        assert_eq!(
            v.labels(),
            vec![("variant", "arm-large"), ("arch", "arm64")]
        );
        assert_eq!(v.spec, "arch=arm64,pool=armpool,instance-type=Standard_D4ps_v6,node-selector=disk=ssd,image=nginx:1.27,config=stock,replicas=2,cpu=1500m,memory=1Gi");
    }

    #[test]
    fn the_spec_annotation_parses_back_to_the_same_variant() {
        let v = parse(
            "big:instance-type=D4,cpu=2,memory=512Mi,workers=4,node-selector=a=b,node-selector=c=d",
        )
        .unwrap();
        let again = parse(&format!("big:{}", v.spec)).unwrap();
        assert_eq!(again, v);
    }

    #[test]
    fn bad_variants_are_one_line_that_names_the_fault() {
        for (text, says) in [
            ("multiarch:arch=arm64", "the name is taken"),
            ("all", "the name is taken"),
            ("Arm:arch=arm64", "lowercase"),
            ("9arm", "starting with a letter"),
            ("a:colour=red", "unknown key `colour` (keys: arch, pool"),
            ("a:arch=riscv64", "give amd64 or arm64"),
            ("a:arch", "is not KEY=VALUE"),
            ("a:replicas=0", "give 1 to 100"),
            ("a:replicas=1e9", "give 1 to 100"),
            ("a:cpu=lots", "give cores"),
            ("a:cpu=0", "give cores"),
            ("a:cpu=-1", "give cores"),
            ("a:memory=12", "at least 1Mi"),
            ("a:memory=99999999999999Ti", "give e.g. 512Mi"),
            ("a:workers=0", "give auto or 1 to 1024"),
            (
                "a:config=stock,workers=2",
                "config=stock is the image's own",
            ),
            ("a:config=/nope", "no such file"),
            ("a:image=", "needs a value"),
            ("a:image=x,image=y", "given twice"),
            ("a:instance-type=bad value", "no label value"),
            ("a:node-selector=ssd", "node-selector=KEY=VALUE"),
            (
                "a:arch=arm64,node-selector=kubernetes.io/arch=amd64",
                "selected twice",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'), "{text}: {e}");
        }
    }

    #[test]
    fn a_preset_is_the_guides_deployment() {
        let v = Variant::preset(Arch::Arm, PoolSelector::Arch);
        assert_eq!(v.deployment(), "nginx-arm-deployment");
        assert_eq!(v.service(), "nginx-arm-svc");
        assert_eq!(v.labels(), vec![("arch", "arm")]);
        let pool = Variant::preset(Arch::Intel, PoolSelector::Agentpool);
        assert_eq!(
            pool.node_selector.get("agentpool").map(String::as_str),
            Some("intel")
        );
    }

    #[test]
    fn workers_are_set_in_the_configuration() {
        let tuned = with_workers(crate::k8s::TUNED_NGINX_CONF, 3);
        assert!(tuned.starts_with("worker_processes 3;\nworker_cpu_affinity auto;"));
        assert_eq!(tuned.matches("worker_processes").count(), 1);
        assert_eq!(
            with_workers("events {}\n", 2),
            "worker_processes 2;\nevents {}\n"
        );
        let v = parse("w:workers=2").unwrap();
        assert_eq!(v.config_text(&NginxConfig::Stock), None);
        assert!(v
            .config_text(&NginxConfig::Tuned)
            .unwrap()
            .starts_with("worker_processes 2;"));
    }

    #[test]
    fn a_caddy_image_is_told_by_its_repositorys_last_name() {
        for image in [
            "caddy",
            "caddy:2",
            "docker.io/library/caddy:2.8-alpine",
            "caddy@sha256:0123",
            "registry.local:5000/caddy",
        ] {
            assert_eq!(Server::of_image(image), Server::Caddy, "{image}");
        }
        for image in [
            "nginx:1.27",
            "caddy-like/nginx",
            "me/caddyserver:2",
            "localhost:5000/x",
        ] {
            assert_eq!(Server::of_image(image), Server::Nginx, "{image}");
        }
    }

    #[test]
    fn a_pods_variant_is_its_variant_label_else_its_arch() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(variant_of(&labels(&[("arch", "arm")])), Some("arm"));
        assert_eq!(
            variant_of(&labels(&[("arch", "arm64"), ("variant", "big")])),
            Some("big")
        );
        assert_eq!(variant_of(&labels(&[])), None);
    }

    fn node(name: &str, labels: &[(&str, &str)], cpu: &str, memory: &str) -> NodeOffer {
        NodeOffer::new(
            name.into(),
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Some(cpu),
            Some(memory),
        )
    }

    #[test]
    fn a_variant_no_node_can_run_is_refused_with_what_the_nodes_have() {
        let nodes = [
            node("a", &[("kubernetes.io/arch", "amd64")], "2", "8045616Ki"),
            node("b", &[("kubernetes.io/arch", "arm64")], "1930m", "4Gi"),
        ];
        let riscv = parse("r:node-selector=kubernetes.io/arch=riscv64").unwrap();
        assert_eq!(
            riscv.placement_problem(&nodes).unwrap(),
            "no node has kubernetes.io/arch=riscv64 for r: the nodes have kubernetes.io/arch=amd64, arm64; change the variant's selector or add such a node pool"
        );
        let pool = parse("p:pool=gpu").unwrap();
        assert!(pool
            .placement_problem(&nodes)
            .unwrap()
            .contains("no node has the label agentpool"));
        let big = parse("big:arch=arm64,cpu=2").unwrap();
        assert_eq!(
            big.placement_problem(&nodes).unwrap(),
            "no node can fit cpu=2 for big (Insufficient cpu): the largest allocatable of its nodes is 1.93 cpu; lower cpu= or choose larger nodes"
        );
        assert!(parse("ok:arch=amd64,cpu=2")
            .unwrap()
            .placement_problem(&nodes)
            .is_none());
        let mem = parse("m:memory=9Gi").unwrap();
        assert!(mem
            .placement_problem(&nodes)
            .unwrap()
            .contains("the largest allocatable of its nodes is 7857Mi"));
        assert!(parse("any").unwrap().placement_problem(&nodes).is_none());
    }
}
