//! `archbench k8s`: the multi-arch nginx workflow of the guide's `nginx_util.sh`, natively:
//! deploy nginx once per CPU architecture, push a configuration, look into the pods, and load
//! each architecture's service, with the numbers the script never had (the pods' CPU per
//! request, verdicts).
//!
//! This module talks to the API server through kube-rs: it builds manifests, applies them,
//! watches, execs, and reads pods' cgroups as load sources and in-cluster workers' results
//! (`distributed`); the CLI runs the loads themselves through `compare` (this module imports
//! neither `measure` nor `compare`) and it never reaches into the engine's workers.
//! Everything it creates carries `app.kubernetes.io/managed-by=archbench`, so teardown deletes
//! only what it made.

mod apply;
mod caddy;
mod client;
mod curl;
pub mod distributed;
mod down;
mod error;
mod inspect;
mod load;
mod login;
mod manifests;
mod placed;
mod pod_build;
mod pods;
mod reconfigure;
mod resource_quantity;
mod rollout;
mod room;
mod routes;
mod seen;
mod status;
pub mod tls;
mod up;
mod usage;
mod variant;
mod wait;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

pub use apply::UpReport;
pub use client::{Cluster, ClusterOptions};
pub use curl::{fetch, split, Fetched};
pub use distributed::{
    AgentOrders, Distributed, InCluster, SpellAgent, WholeLoad, JOB_LABEL, MAX_WORKERS,
};
pub use down::down;
pub use error::K8sError;
pub use inspect::{fingerprint, write_fingerprints};
pub use load::{check_side_by_side, targets, LoadSelection, LoadTarget, Port, Vantage};
pub use login::login;
pub use manifests::{manifests, write_yaml, Manifest, TUNED_NGINX_CONF};
pub use placed::placements;
pub use pod_build::ArchFingerprint;
pub use pods::{exec, pods_of, ExecOutput};
pub use reconfigure::{current_setup, reconfigure, Reconfigured};
pub use status::{namespace_exists, status, write_status, PodRow};
pub use up::up;
pub use usage::{top, PodUsage};
pub use variant::{variant_of, Server, Variant, VARIANT_LABEL};

/// The label on everything archbench creates.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "archbench");
/// The field manager of archbench's server-side applies.
pub const FIELD_MANAGER: &str = "archbench";
/// The label all nginx pods share (the multi-arch service selects it).
pub const APP: (&str, &str) = ("app", "nginx-multiarch");

/// Whether a node with `labels` is one a node selector picks: every key with its value.
pub(crate) fn selects(
    selector: &std::collections::BTreeMap<String, String>,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The label selector of everything archbench manages.
pub(crate) fn managed_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

/// Whether an object carries archbench's label (archbench made it).
pub(crate) fn is_ours(meta: &kube::api::ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1))
}

/// The label selector of archbench's nginx pods (of every architecture).
pub(crate) fn nginx_selector() -> String {
    format!("{},{}={}", managed_selector(), APP.0, APP.1)
}

/// A CPU architecture as the guide names its node pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Arch {
    Intel,
    Arm,
    Amd,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Intel, Arch::Arm, Arch::Amd];

    /// "intel", "arm", "amd": the `arch` label and the names' middle.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Intel => "intel",
            Arch::Arm => "arm",
            Arch::Amd => "amd",
        }
    }

    /// The node label value `kubernetes.io/arch` takes for it.
    pub fn kube_arch(self) -> &'static str {
        match self {
            Arch::Intel | Arch::Amd => "amd64",
            Arch::Arm => "arm64",
        }
    }

    pub fn deployment(self) -> String {
        format!("nginx-{}-deployment", self.name())
    }

    pub fn service(self) -> String {
        format!("nginx-{}-svc", self.name())
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// The service that selects every nginx pod, whatever its architecture.
pub const MULTIARCH_SERVICE: &str = "nginx-multiarch-svc";

/// How pods find their node pool: by `kubernetes.io/arch` (any cluster), or by the AKS
/// `agentpool` label named after the arch (older clusters of the guide).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PoolSelector {
    Arch,
    Agentpool,
}

/// The Service type of the per-arch services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceType {
    #[value(name = "LoadBalancer")]
    LoadBalancer,
    #[value(name = "NodePort")]
    NodePort,
    #[value(name = "ClusterIP")]
    ClusterIp,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::LoadBalancer => "LoadBalancer",
            ServiceType::NodePort => "NodePort",
            ServiceType::ClusterIp => "ClusterIP",
        }
    }
}

/// Which nginx.conf the pods run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NginxConfig {
    /// The guide's tuned configuration ([`TUNED_NGINX_CONF`]).
    Tuned,
    /// The image's own: no ConfigMap is mounted.
    Stock,
    /// A file of the user's.
    File { path: PathBuf, text: String },
}

impl NginxConfig {
    /// The text the ConfigMap holds, or None for the image's own.
    pub fn text(&self) -> Option<&str> {
        match self {
            NginxConfig::Tuned => Some(TUNED_NGINX_CONF),
            NginxConfig::Stock => None,
            NginxConfig::File { text, .. } => Some(text),
        }
    }

    /// "tuned", "stock" or "file".
    pub fn kind(&self) -> &'static str {
        match self {
            NginxConfig::Tuned => "tuned",
            NginxConfig::Stock => "stock",
            NginxConfig::File { .. } => "file",
        }
    }

    pub fn describe(&self) -> String {
        match self {
            NginxConfig::Tuned => "tuned (the guide's)".into(),
            NginxConfig::Stock => "stock (the image's own)".into(),
            NginxConfig::File { path, .. } => path.display().to_string(),
        }
    }
}

/// What `up` and `manifests` set up: validated from the command line.
#[derive(Debug, Clone)]
pub struct Setup {
    pub namespace: String,
    /// One Deployment and Service each, in order.
    pub variants: Vec<Variant>,
    /// The image of the variants that name none.
    pub image: String,
    /// The shared ConfigMap's configuration, of the variants that name none.
    pub config: NginxConfig,
    pub service_type: ServiceType,
    /// How long `up` waits for rollouts and addresses.
    pub wait_timeout: Duration,
    /// `--tls`: the variants that say nothing of it serve https too.
    pub tls: bool,
    /// `--http3`: the nginx variants that serve https answer HTTP/3 too (`listen 443 quic`,
    /// nginx ≥ 1.25), and the variants that say nothing of TLS serve https. Caddy variants
    /// answer HTTP/3 whenever they serve https, with or without it.
    pub http3: bool,
    /// The certificate of the variants that serve https (made by `up` once, then kept in
    /// the Secret); None when none does.
    pub certificate: Option<tls::ServingCert>,
}

#[cfg(test)]
impl Setup {
    /// The guide's setup of these presets (tuned configuration, LoadBalancer Services, a 5 s
    /// wait), for unit tests.
    pub(crate) fn of_presets(arches: &[Arch]) -> Setup {
        Setup {
            namespace: "nginx".into(),
            variants: arches
                .iter()
                .map(|&a| Variant::preset(a, PoolSelector::Arch))
                .collect(),
            image: "nginx:latest".into(),
            config: NginxConfig::Tuned,
            service_type: ServiceType::LoadBalancer,
            wait_timeout: std::time::Duration::from_secs(5),
            tls: false,
            http3: false,
            certificate: None,
        }
    }
}

impl Setup {
    /// The variant of that name.
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The image a variant runs.
    pub fn image_of<'a>(&'a self, v: &'a Variant) -> &'a str {
        v.image.as_deref().unwrap_or(&self.image)
    }

    /// The server a variant's pods run.
    pub fn server_of(&self, v: &Variant) -> Server {
        Server::of_image(self.image_of(v))
    }

    /// Whether a variant serves https: `tls=` of its own, else `--tls` or `--http3` (always
    /// over TLS); a Caddy variant unless `tls=off`.
    pub fn tls_of(&self, v: &Variant) -> bool {
        let caddy = self.server_of(v) == Server::Caddy;
        v.tls.unwrap_or(self.tls || self.http3 || caddy)
    }

    /// Whether a variant answers HTTP/3 on UDP 443: a Caddy variant that serves https, or an
    /// nginx one under `--http3`.
    pub fn http3_of(&self, v: &Variant) -> bool {
        self.tls_of(v) && (self.http3 || self.server_of(v) == Server::Caddy)
    }

    /// Whether any variant serves https.
    pub fn any_tls(&self) -> bool {
        self.variants.iter().any(|v| self.tls_of(v))
    }

    /// The text a variant's server runs (None: the image's own): a Caddy variant's
    /// Caddyfile; an nginx variant's configuration or the setup's, with `workers`, the https
    /// listener and the QUIC one set in it.
    pub fn config_text(&self, v: &Variant) -> Option<String> {
        if self.server_of(v) == Server::Caddy {
            return Some(caddy::caddyfile(self.tls_of(v)));
        }
        let text = v.config_text(&self.config)?;
        Some(self.with_listeners(self.tls_of(v), self.http3_of(v), text))
    }

    /// The shared ConfigMap's text (nginx's): the setup's configuration, with the https
    /// listener under `--tls` and the QUIC one under `--http3`.
    pub fn shared_text(&self) -> Option<String> {
        let text = self.config.text()?;
        let tls = self.tls || self.http3;
        Some(self.with_listeners(tls, self.http3, text.to_string()))
    }

    /// Checked by [`Setup::tls_problem`] before anything is built, so it holds here.
    fn with_listeners(&self, tls: bool, http3: bool, text: String) -> String {
        let text = match tls {
            true => tls::with_tls(&text).unwrap_or(text),
            false => text,
        };
        match http3 {
            true => tls::with_http3(&text),
            false => text,
        }
    }

    /// Why a variant cannot serve https: the image's own configuration (nowhere to add the
    /// listener), or one without a `server` block.
    pub fn tls_problem(&self) -> Option<String> {
        let nginx_tls = |v: &&Variant| self.tls_of(v) && self.server_of(v) == Server::Nginx;
        self.variants.iter().filter(nginx_tls).find_map(|v| {
            match v.config_text(&self.config) {
                None => Some(format!(
                    "{}: https needs a configuration to listen on 443 in; the stock one is the image's own (use tuned or a FILE)",
                    v.name
                )),
                Some(text) => tls::with_tls(&text)
                    .err()
                    .map(|why| format!("{}: its nginx.conf {why}", v.name)),
            }
        })
    }

    /// Why a Caddy variant cannot be as asked: `config=` and `workers=` are nginx's (a Caddy
    /// variant runs the Caddyfile archbench writes).
    pub fn caddy_problem(&self) -> Option<String> {
        self.variants
            .iter()
            .filter(|v| self.server_of(v) == Server::Caddy)
            .find(|v| v.config.is_some() || v.workers.is_some())
            .map(|v| {
                format!(
                    "{}: config= and workers= set nginx's configuration; a Caddy variant ({}) runs the Caddyfile archbench writes (leave them out)",
                    v.name,
                    self.image_of(v)
                )
            })
    }

    /// Whether a variant runs a configuration of its own (its own ConfigMap), not the shared one.
    pub fn own_config(&self, v: &Variant) -> bool {
        self.config_text(v) != self.shared_text()
    }

    /// Whether any variant mounts the shared ConfigMap.
    pub fn shares_config(&self) -> bool {
        self.config.text().is_some() && self.variants.iter().any(|v| !self.own_config(v))
    }

    /// Whether any variant answers HTTP/3.
    pub fn any_http3(&self) -> bool {
        self.variants.iter().any(|v| self.http3_of(v))
    }
}
