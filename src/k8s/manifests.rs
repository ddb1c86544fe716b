//! The objects `up` applies, as the guide's script creates them: one Deployment and one
//! Service per architecture, the multi-arch Service, the nginx.conf ConfigMap, the namespace.
//! `k8s manifests` prints the same objects as YAML for kubectl and GitOps users.

use std::collections::BTreeMap;
use std::io::{self, Write};

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, HTTPGetAction, Namespace, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, Secret, SecretVolumeSource, Service, ServicePort,
    ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::caddy::{CADDYFILE_KEY, CADDYFILE_PATH};
use super::tls::{self, HTTP3_PORT, HTTPS_PORT};
use super::variant::SPEC_ANNOTATION;
use super::{Server, Setup, Variant, APP, MANAGED_BY, MULTIARCH_SERVICE};

/// The multi-arch guide's "optimized" nginx.conf, as its script pushes it.
pub const TUNED_NGINX_CONF: &str = r#"worker_processes auto;
worker_cpu_affinity auto;
worker_rlimit_nofile 1000000;

events {
    worker_connections 6144;
    use epoll;
    multi_accept on;
}

http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;

    server {
        listen 80;
        location / {
            return 200 '{"message":"nginx response","timestamp":"$time_iso8601","server":"$hostname","request_uri":"$request_uri"}';
            add_header Content-Type application/json;
        }
    }
}
"#;

/// The ConfigMap holding nginx.conf, mounted over the image's own.
pub const CONFIG_MAP: &str = "nginx-config";
/// Pod-template annotation: the SHA-256 of the nginx.conf the pods run. A new configuration
/// changes the template, so the Deployment rolls its pods (a subPath mount never sees a
/// ConfigMap update on its own).
pub const CONFIG_HASH: &str = "archbench.dev/nginx-conf-sha256";

/// One object of the setup.
#[derive(Debug, Clone)]
pub enum Manifest {
    Namespace(Box<Namespace>),
    ConfigMap(Box<ConfigMap>),
    Secret(Box<Secret>),
    Deployment(Box<Deployment>),
    Service(Box<Service>),
}

impl Manifest {
    /// "Deployment nginx-arm-deployment".
    pub fn describe(&self) -> String {
        let (kind, meta) = match self {
            Manifest::Namespace(o) => ("Namespace", &o.metadata),
            Manifest::ConfigMap(o) => ("ConfigMap", &o.metadata),
            Manifest::Secret(o) => ("Secret", &o.metadata),
            Manifest::Deployment(o) => ("Deployment", &o.metadata),
            Manifest::Service(o) => ("Service", &o.metadata),
        };
        format!("{kind} {}", meta.name.as_deref().unwrap_or("?"))
    }
}

fn labels(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    std::iter::once(MANAGED_BY)
        .chain(extra.iter().copied())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn meta(name: &str, namespace: Option<&str>, extra: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels(extra)),
        ..ObjectMeta::default()
    }
}

/// SHA-256 of a text, hex (FIPS 180-4; small enough to keep here rather than add a crate).
pub fn sha256_hex(text: &str) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut data = text.as_bytes().to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&bits.to_be_bytes());
    for block in data.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (x, y) in h.iter_mut().zip(v) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// The Deployment of one variant.
pub fn deployment(setup: &Setup, variant: &Variant) -> Deployment {
    let ns = setup.namespace.as_str();
    let mut extra = vec![APP];
    extra.extend(variant.labels());
    let (key, name) = variant.selector();
    let config = setup.config_text(variant);
    // A setup that serves https always has its certificate by now (`up` and `manifests`
    // make it or read it back); without one the pods would not start, so none is mounted.
    let tls = setup
        .tls_of(variant)
        .then_some(setup.certificate.as_ref())
        .flatten();
    let config_map = if setup.own_config(variant) {
        variant.config_map()
    } else {
        CONFIG_MAP.to_string()
    };
    let mut annotations = BTreeMap::new();
    if let Some(text) = &config {
        annotations.insert(CONFIG_HASH.to_string(), sha256_hex(text));
    }
    if let Some(cert) = tls {
        annotations.insert(tls::CERT_HASH.to_string(), sha256_hex(&cert.cert_pem));
    }
    let serves = Serves {
        server: setup.server_of(variant),
        tls: tls.is_some(),
        http3: tls.is_some() && setup.http3_of(variant),
    };
    let mut metadata = meta(&variant.deployment(), Some(ns), &extra);
    metadata.annotations = kept_annotations(variant, serves);
    Deployment {
        metadata,
        spec: DeploymentSpec {
            replicas: Some(variant.replicas),
            strategy: sized_rollout(variant),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(key.to_string(), name.to_string())])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&extra)),
                    annotations: (!annotations.is_empty()).then_some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    node_selector: (!variant.node_selector.is_empty())
                        .then(|| variant.node_selector.clone()),
                    containers: vec![container(setup, variant, config.as_deref(), serves)],
                    volumes: volumes(config.is_some().then_some(config_map), serves.tls),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

/// What a variant's pods serve, as its Deployment's containers and Service expose it.
#[derive(Debug, Clone, Copy)]
struct Serves {
    server: Server,
    /// https on TCP 443 (its certificate mounted).
    tls: bool,
    /// HTTP/3 on UDP 443.
    http3: bool,
}

/// The Deployment's annotations that `config` reads the setup back from: a variant's keys
/// (not a preset's), and whether it serves https and HTTP/3.
fn kept_annotations(variant: &Variant, serves: Serves) -> Option<BTreeMap<String, String>> {
    let mut kept = BTreeMap::new();
    if variant.preset.is_none() {
        kept.insert(SPEC_ANNOTATION.to_string(), variant.spec.clone());
    }
    if serves.tls {
        kept.insert(tls::TLS_ANNOTATION.to_string(), "on".to_string());
    }
    if serves.http3 {
        kept.insert(tls::HTTP3_ANNOTATION.to_string(), "on".to_string());
    }
    (!kept.is_empty()).then_some(kept)
}

/// The pod's volumes: the nginx.conf ConfigMap, the TLS Secret.
fn volumes(config_map: Option<String>, tls: bool) -> Option<Vec<Volume>> {
    let mut out = Vec::new();
    if let Some(name) = config_map {
        out.push(Volume {
            name: CONFIG_MAP.into(),
            config_map: Some(ConfigMapVolumeSource {
                name,
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    if tls {
        out.push(Volume {
            name: tls::SECRET.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(tls::SECRET.into()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    (!out.is_empty()).then_some(out)
}

/// How a sized variant rolls: one pod replaced at a time, no extra pod first. Its pods may
/// fill their nodes (cpu=4 twice on an 8-core node), and the default surge pod would then
/// stay Pending for good: a benchmark setup can do without its zero downtime.
fn sized_rollout(variant: &Variant) -> Option<DeploymentStrategy> {
    (variant.cpu.is_some() || variant.memory.is_some()).then(|| DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(0)),
            max_unavailable: Some(IntOrString::Int(1)),
        }),
    })
}

/// The server container of a variant (named `nginx` whatever it runs: exec and the pod
/// watches find it by that name): its image, nginx.conf (or a Caddy variant's Caddyfile)
/// mounted when it has one, and its CPU and memory as requests = limits (a Guaranteed pod:
/// sizes compare fairly); with https, port 443 and the certificate; with HTTP/3, UDP 443.
fn container(setup: &Setup, variant: &Variant, config: Option<&str>, serves: Serves) -> Container {
    let sizes: BTreeMap<String, Quantity> = [("cpu", &variant.cpu), ("memory", &variant.memory)]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), Quantity(v.as_ref()?.0.clone()))))
        .collect();
    Container {
        name: "nginx".into(),
        image: Some(setup.image_of(variant).to_string()),
        ports: Some(
            ports(serves)
                .map(|(name, port, protocol)| ContainerPort {
                    container_port: port,
                    name: Some(name.into()),
                    // TCP is the default, left unsaid as the setup always wrote it.
                    protocol: (protocol != "TCP").then(|| protocol.into()),
                    ..ContainerPort::default()
                })
                .collect(),
        ),
        resources: (!sizes.is_empty()).then(|| ResourceRequirements {
            limits: Some(sizes.clone()),
            requests: Some(sizes),
            ..ResourceRequirements::default()
        }),
        volume_mounts: mounts(config.is_some().then_some(serves.server), serves.tls),
        readiness_probe: Some(readiness(config)),
        ..Container::default()
    }
}

/// Ready once nginx answers a GET on its http port, as nginx deployments declare it, so `up`'s
/// and `config`'s waits mean the same on AKS as here: nginx serving, not a process started.
/// Every second, so a new pod is Ready about a second after it listens (the kubelet's default
/// period is 10 s). The probes' requests are nginx's like any other: a configuration that
/// counts requests in its access log can leave out `User-Agent: kube-probe/…`. A configuration
/// that speaks only HTTP/2 on that port (h2c) cannot answer the kubelet's HTTP/1.1 GET: its
/// pods are ready once the port accepts connections.
fn readiness(config: Option<&str>) -> Probe {
    let port = IntOrString::String("http".into());
    let (http_get, tcp_socket) = if config.is_some_and(speaks_h2c_on_port_80) {
        (None, Some(TCPSocketAction { port, host: None }))
    } else {
        let get = HTTPGetAction {
            path: Some("/".into()),
            port,
            ..HTTPGetAction::default()
        };
        (Some(get), None)
    };
    Probe {
        http_get,
        tcp_socket,
        period_seconds: Some(1),
        ..Probe::default()
    }
}

/// Whether an nginx.conf's plain-text listener on port 80 is HTTP/2 only: `listen 80 … http2`
/// without `ssl`, or `listen 80` beside `http2 on;` (nginx 1.25's spelling).
fn speaks_h2c_on_port_80(config: &str) -> bool {
    let directives: Vec<Vec<&str>> = config
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.split([';', '{', '}']))
        .map(|d| d.split_whitespace().collect())
        .collect();
    let plain_80: Vec<&Vec<&str>> = directives
        .iter()
        .filter(|d| d.first() == Some(&"listen"))
        .filter(|d| d.get(1).is_some_and(|a| *a == "80" || a.ends_with(":80")))
        .filter(|d| !d.contains(&"ssl"))
        .collect();
    let http2_on = directives.iter().any(|d| d.as_slice() == ["http2", "on"]);
    plain_80.iter().any(|d| d.contains(&"http2")) || (http2_on && !plain_80.is_empty())
}

/// http, https with TLS, http3 with HTTP/3: (name, port, protocol) of the containers and
/// the Services alike.
fn ports(serves: Serves) -> impl Iterator<Item = (&'static str, i32, &'static str)> {
    let tcp = |(name, port): (&'static str, i32)| (name, port, "TCP");
    std::iter::once(("http", 80, "TCP"))
        .chain(serves.tls.then_some(tcp(HTTPS_PORT)))
        .chain(serves.http3.then_some((HTTP3_PORT.0, HTTP3_PORT.1, "UDP")))
}

/// The ConfigMap key of a server's configuration, and where the server reads it.
pub(super) fn config_file(server: Server) -> (&'static str, &'static str) {
    match server {
        Server::Nginx => ("nginx.conf", "/etc/nginx/nginx.conf"),
        Server::Caddy => (CADDYFILE_KEY, CADDYFILE_PATH),
    }
}

/// The configuration's mount (`config`: the server whose file the pod gets), the
/// certificate's with `tls`.
fn mounts(config: Option<Server>, tls: bool) -> Option<Vec<VolumeMount>> {
    let mut out = Vec::new();
    if let Some(server) = config {
        let (key, path) = config_file(server);
        out.push(VolumeMount {
            name: CONFIG_MAP.into(),
            mount_path: path.into(),
            sub_path: Some(key.into()),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    if tls {
        out.push(VolumeMount {
            name: tls::SECRET.into(),
            mount_path: tls::MOUNT.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    (!out.is_empty()).then_some(out)
}

/// A Service over the pods `selector` picks; with https, TCP 443 beside 80; with HTTP/3,
/// UDP 443 too.
fn service(
    setup: &Setup,
    name: &str,
    selector: (&str, &str),
    labels: &[(&str, &str)],
    serves: Serves,
) -> Service {
    let kind = setup.service_type.as_str();
    Service {
        metadata: meta(name, Some(&setup.namespace), labels),
        spec: Some(ServiceSpec {
            type_: Some(kind.to_string()),
            selector: Some(BTreeMap::from([(
                selector.0.to_string(),
                selector.1.to_string(),
            )])),
            ports: Some(
                ports(serves)
                    .map(|(port_name, port, protocol)| ServicePort {
                        name: Some(port_name.into()),
                        port,
                        target_port: Some(IntOrString::String(port_name.into())),
                        protocol: Some(protocol.into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Every object of `setup`, in the order they are applied (namespace first).
pub fn manifests(setup: &Setup) -> Vec<Manifest> {
    let mut out = vec![Manifest::Namespace(Box::new(Namespace {
        metadata: meta(&setup.namespace, None, &[]),
        ..Namespace::default()
    }))];
    let config_map = |name: &str, server: Server, text: &str, extra: &[(&str, &str)]| {
        Manifest::ConfigMap(Box::new(ConfigMap {
            metadata: meta(name, Some(&setup.namespace), extra),
            data: Some(BTreeMap::from([(
                config_file(server).0.to_string(),
                text.to_string(),
            )])),
            ..ConfigMap::default()
        }))
    };
    if let Some(text) = setup.shared_text().filter(|_| setup.shares_config()) {
        out.push(config_map(CONFIG_MAP, Server::Nginx, &text, &[APP]));
    }
    for v in setup.variants.iter().filter(|v| setup.own_config(v)) {
        if let Some(text) = setup.config_text(v) {
            let server = setup.server_of(v);
            out.push(config_map(
                &v.config_map(),
                server,
                &text,
                &[APP, v.selector()],
            ));
        }
    }
    if let Some(cert) = setup.certificate.as_ref().filter(|_| setup.any_tls()) {
        out.push(Manifest::Secret(Box::new(Secret {
            metadata: meta(tls::SECRET, Some(&setup.namespace), &[APP]),
            type_: Some("kubernetes.io/tls".into()),
            data: Some(cert.data()),
            ..Secret::default()
        })));
    }
    for v in &setup.variants {
        out.push(Manifest::Deployment(Box::new(deployment(setup, v))));
    }
    for v in &setup.variants {
        let labels: &[(&str, &str)] = match v.preset {
            Some(_) => &[APP],
            None => &[APP, v.selector()],
        };
        let serves = Serves {
            server: setup.server_of(v),
            tls: setup.tls_of(v),
            http3: setup.http3_of(v),
        };
        out.push(Manifest::Service(Box::new(service(
            setup,
            &v.service(),
            v.selector(),
            labels,
            serves,
        ))));
    }
    // https (and HTTP/3) over every variant's pods only when every one serves it.
    let every = Serves {
        server: Server::Nginx,
        tls: setup.variants.iter().all(|v| setup.tls_of(v)),
        http3: setup.variants.iter().all(|v| setup.http3_of(v)),
    };
    out.push(Manifest::Service(Box::new(service(
        setup,
        MULTIARCH_SERVICE,
        APP,
        &[APP],
        every,
    ))));
    out
}

/// Writes the manifests as one YAML stream (documents separated by `---`).
pub fn write_yaml(manifests: &[Manifest], out: &mut dyn Write) -> io::Result<()> {
    for m in manifests {
        let what = m.describe();
        match m {
            Manifest::Namespace(o) => write_doc(&what, o.as_ref(), out)?,
            Manifest::ConfigMap(o) => write_doc(&what, o.as_ref(), out)?,
            Manifest::Secret(o) => write_doc(&what, o.as_ref(), out)?,
            Manifest::Deployment(o) => write_doc(&what, o.as_ref(), out)?,
            Manifest::Service(o) => write_doc(&what, o.as_ref(), out)?,
        }
    }
    Ok(())
}

/// One YAML document, `---` first.
pub(super) fn write_doc(
    what: &str,
    object: &impl serde::Serialize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let doc = serde_saphyr::to_string(object)
        .map_err(|e| io::Error::other(format!("YAML of {what}: {e}")))?;
    writeln!(out, "---")?;
    out.write_all(doc.as_bytes())?;
    if !doc.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::{Arch, NginxConfig, PoolSelector};

    fn setup() -> Setup {
        Setup::of_presets(&[Arch::Intel, Arch::Arm])
    }

    #[test]
    fn sha256_matches_known_digests() {
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = "a".repeat(1000);
        assert_eq!(
            sha256_hex(&long),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn the_scripts_setup_by_default() {
        let all = manifests(&setup());
        let names: Vec<String> = all.iter().map(Manifest::describe).collect();
        assert_eq!(
            names,
            [
                "Namespace nginx",
                "ConfigMap nginx-config",
                "Deployment nginx-intel-deployment",
                "Deployment nginx-arm-deployment",
                "Service nginx-intel-svc",
                "Service nginx-arm-svc",
                "Service nginx-multiarch-svc",
            ]
        );
        let Manifest::Deployment(d) = &all[3] else {
            panic!("a deployment")
        };
        let spec = &d.spec;
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["kubernetes.io/arch"],
            "arm64"
        );
        let labels = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(labels["app"], "nginx-multiarch");
        assert_eq!(labels["arch"], "arm");
        assert_eq!(labels[MANAGED_BY.0], MANAGED_BY.1);
        let mount = &pod.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, "/etc/nginx/nginx.conf");
        assert_eq!(mount.sub_path.as_deref(), Some("nginx.conf"));
        // Everything carries our label.
        let mut yaml = Vec::new();
        write_yaml(&all, &mut yaml).unwrap();
        let yaml = String::from_utf8(yaml).unwrap();
        assert_eq!(
            yaml.matches("app.kubernetes.io/managed-by: archbench")
                .count(),
            7 + 2
        );
    }

    #[test]
    fn stock_mounts_nothing_and_agentpool_selects_by_pool() {
        let mut s = setup();
        s.config = NginxConfig::Stock;
        s.variants = [Arch::Intel, Arch::Arm]
            .map(|a| Variant::preset(a, PoolSelector::Agentpool))
            .into();
        let all = manifests(&s);
        assert!(!all.iter().any(|m| matches!(m, Manifest::ConfigMap(_))));
        let Manifest::Deployment(d) = &all[1] else {
            panic!("a deployment")
        };
        let pod = d.spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector.as_ref().unwrap()["agentpool"], "intel");
        assert!(pod.volumes.is_none() && pod.containers[0].volume_mounts.is_none());
    }

    fn variant(text: &str) -> Variant {
        Variant::parse(text, &|c| match c {
            "stock" => Ok(NginxConfig::Stock),
            _ => Ok(NginxConfig::Tuned),
        })
        .unwrap()
    }

    fn deployment_of<'a>(all: &'a [Manifest], name: &str) -> &'a Deployment {
        all.iter()
            .find_map(|m| match m {
                Manifest::Deployment(d) if d.metadata.name.as_deref() == Some(name) => {
                    Some(d.as_ref())
                }
                _ => None,
            })
            .unwrap()
    }

    fn service_ports(all: &[Manifest], name: &str) -> Vec<(String, i32)> {
        service_protocols(all, name)
            .into_iter()
            .map(|(port_name, port, _)| (port_name, port))
            .collect()
    }

    #[test]
    fn tls_adds_the_secret_the_listener_the_mount_and_port_443() {
        let mut s = setup();
        s.tls = true;
        s.variants.push(variant("plain:arch=amd64,tls=off"));
        s.certificate = Some(tls::ServingCert::generate(tls::names(&s)).unwrap());
        assert_eq!(s.tls_problem(), None);
        let all = manifests(&s);
        let names: Vec<String> = all.iter().map(Manifest::describe).collect();
        assert_eq!(
            &names[..4],
            [
                "Namespace nginx",
                "ConfigMap nginx-config",
                "ConfigMap nginx-plain-config",
                "Secret nginx-tls",
            ]
        );
        let Manifest::ConfigMap(shared) = &all[1] else {
            panic!("a config map")
        };
        let text = &shared.data.as_ref().unwrap()["nginx.conf"];
        assert!(
            text.contains("listen 443 ssl http2; # archbench k8s --tls"),
            "{text}"
        );
        let Manifest::ConfigMap(plain) = &all[2] else {
            panic!("a config map")
        };
        assert_eq!(plain.data.as_ref().unwrap()["nginx.conf"], TUNED_NGINX_CONF);
        let Manifest::Secret(secret) = &all[3] else {
            panic!("a secret")
        };
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let data = secret.data.as_ref().unwrap();
        assert!(data.contains_key("tls.crt") && data.contains_key("tls.key"));
        let d = deployment_of(&all, "nginx-arm-deployment");
        assert_eq!(
            d.metadata.annotations.as_ref().unwrap()[tls::TLS_ANNOTATION],
            "on"
        );
        let template = &d.spec.template;
        let hash = &template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[tls::CERT_HASH];
        assert_eq!(*hash, sha256_hex(&s.certificate.as_ref().unwrap().cert_pem));
        let pod = template.spec.as_ref().unwrap();
        let volume = &pod.volumes.as_ref().unwrap()[1];
        assert_eq!(
            volume.secret.as_ref().unwrap().secret_name.as_deref(),
            Some(tls::SECRET)
        );
        let c = &pod.containers[0];
        assert_eq!(c.volume_mounts.as_ref().unwrap()[1].mount_path, tls::MOUNT);
        let ports: Vec<i32> = c
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.container_port)
            .collect();
        assert_eq!(ports, [80, 443]);
        let plain_pod = deployment_of(&all, "nginx-plain-deployment")
            .spec
            .template
            .spec
            .clone();
        assert_eq!(
            plain_pod.unwrap().volumes.unwrap().len(),
            1,
            "no certificate mounted"
        );
        let both = vec![("http".to_string(), 80), ("https".to_string(), 443)];
        assert_eq!(service_ports(&all, "nginx-intel-svc"), both);
        assert_eq!(
            service_ports(&all, "nginx-plain-svc"),
            [("http".to_string(), 80)]
        );
        // Not every pod behind it serves https: the multi-arch Service does not offer it.
        assert_eq!(
            service_ports(&all, MULTIARCH_SERVICE),
            [("http".to_string(), 80)]
        );
        s.variants.pop();
        assert_eq!(service_ports(&manifests(&s), MULTIARCH_SERVICE), both);

        // Nowhere to add the listener: said before anything is built.
        s.config = NginxConfig::Stock;
        assert!(s
            .tls_problem()
            .unwrap()
            .contains("the stock one is the image's own"));
        s.config = NginxConfig::File {
            path: "x.conf".into(),
            text: "events {}\nhttp {}\n".into(),
        };
        assert!(s.tls_problem().unwrap().contains("no `server {` block"));
        s.tls = false;
        assert_eq!(s.tls_problem(), None);
    }

    #[test]
    fn variants_get_their_own_names_labels_sizes_and_configuration() {
        let mut s = setup();
        s.variants = vec![
            variant("small:arch=arm64,instance-type=Standard_D2ps_v6,cpu=1,memory=512Mi"),
            variant("large:arch=arm64,instance-type=Standard_D4ps_v6,cpu=2,memory=1Gi,replicas=2,workers=2"),
            variant("distro:image=nginx:1.22,config=stock"),
        ];
        let all = manifests(&s);
        let names: Vec<String> = all.iter().map(Manifest::describe).collect();
        assert_eq!(
            names,
            [
                "Namespace nginx",
                "ConfigMap nginx-config",
                "ConfigMap nginx-large-config",
                "Deployment nginx-small-deployment",
                "Deployment nginx-large-deployment",
                "Deployment nginx-distro-deployment",
                "Service nginx-small-svc",
                "Service nginx-large-svc",
                "Service nginx-distro-svc",
                "Service nginx-multiarch-svc",
            ]
        );
        let large = deployment_of(&all, "nginx-large-deployment");
        assert_eq!(large.spec.replicas, Some(2));
        let rolling = large
            .spec
            .strategy
            .as_ref()
            .unwrap()
            .rolling_update
            .as_ref();
        assert_eq!(rolling.unwrap().max_surge, Some(IntOrString::Int(0)));
        let selector = &large.spec.selector;
        assert_eq!(selector.match_labels.as_ref().unwrap()["variant"], "large");
        let template = &large.spec.template;
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["variant"], "large");
        assert_eq!(labels["arch"], "arm64");
        assert_eq!(labels["app"], "nginx-multiarch");
        let pod = template.spec.as_ref().unwrap();
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["node.kubernetes.io/instance-type"],
            "Standard_D4ps_v6"
        );
        let resources = pod.containers[0].resources.as_ref().unwrap();
        assert_eq!(resources.limits, resources.requests);
        assert_eq!(resources.limits.as_ref().unwrap()["cpu"].0, "2");
        assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, "1Gi");
        let volume = &pod.volumes.as_ref().unwrap()[0];
        assert_eq!(
            volume.config_map.as_ref().unwrap().name,
            "nginx-large-config"
        );
        assert_eq!(
            large.metadata.annotations.as_ref().unwrap()[SPEC_ANNOTATION],
            large_spec()
        );
        let Some(Manifest::ConfigMap(own)) = all.get(2) else {
            panic!("the large variant's ConfigMap")
        };
        assert!(own.data.as_ref().unwrap()["nginx.conf"].starts_with("worker_processes 2;"));
        let small = deployment_of(&all, "nginx-small-deployment");
        let pod = small.spec.template.spec.as_ref().unwrap();
        assert_eq!(
            pod.volumes.as_ref().unwrap()[0]
                .config_map
                .as_ref()
                .unwrap()
                .name,
            CONFIG_MAP
        );
        let distro = deployment_of(&all, "nginx-distro-deployment");
        let pod = distro.spec.template.spec.as_ref().unwrap();
        assert!(pod.volumes.is_none() && pod.node_selector.is_none());
        assert_eq!(pod.containers[0].image.as_deref(), Some("nginx:1.22"));
        assert!(pod.containers[0].resources.is_none());
    }

    fn large_spec() -> &'static str {
        "arch=arm64,instance-type=Standard_D4ps_v6,replicas=2,cpu=2,memory=1Gi,workers=2"
    }

    #[test]
    fn no_shared_config_map_when_every_variant_has_its_own() {
        let mut s = setup();
        s.variants = vec![variant("a:config=stock"), variant("b:workers=4")];
        let names: Vec<String> = manifests(&s).iter().map(Manifest::describe).collect();
        assert!(names.contains(&"ConfigMap nginx-b-config".to_string()));
        assert!(!names.contains(&"ConfigMap nginx-config".to_string()));
    }

    fn service_protocols(all: &[Manifest], name: &str) -> Vec<(String, i32, String)> {
        all.iter()
            .find_map(|m| match m {
                Manifest::Service(s) if s.metadata.name.as_deref() == Some(name) => Some(s),
                _ => None,
            })
            .unwrap()
            .spec
            .as_ref()
            .unwrap()
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap(), p.port, p.protocol.clone().unwrap()))
            .collect()
    }

    fn config_map_of<'a>(all: &'a [Manifest], name: &str) -> &'a BTreeMap<String, String> {
        all.iter()
            .find_map(|m| match m {
                Manifest::ConfigMap(c) if c.metadata.name.as_deref() == Some(name) => {
                    c.data.as_ref()
                }
                _ => None,
            })
            .unwrap()
    }

    fn with_udp() -> Vec<(String, i32, String)> {
        [
            ("http", 80, "TCP"),
            ("https", 443, "TCP"),
            ("http3", 443, "UDP"),
        ]
        .map(|(n, p, proto)| (n.to_string(), p, proto.to_string()))
        .into()
    }

    #[test]
    fn a_caddy_variant_runs_its_caddyfile_and_exposes_udp_443() {
        let mut s = setup();
        s.variants = vec![
            variant("quic:arch=amd64,image=caddy:2"),
            variant("plain:arch=amd64"),
        ];
        s.certificate = Some(tls::ServingCert::generate(tls::names(&s)).unwrap());
        assert!(s.tls_of(&s.variants[0]) && s.http3_of(&s.variants[0]));
        assert!(!s.tls_of(&s.variants[1]) && !s.http3_of(&s.variants[1]));
        let all = manifests(&s);
        let caddyfile = &config_map_of(&all, "nginx-quic-config")[CADDYFILE_KEY];
        assert_eq!(*caddyfile, super::super::caddy::caddyfile(true));
        assert!(!config_map_of(&all, CONFIG_MAP).contains_key(CADDYFILE_KEY));
        let d = deployment_of(&all, "nginx-quic-deployment");
        let kept = d.metadata.annotations.as_ref().unwrap();
        assert_eq!(kept[tls::HTTP3_ANNOTATION], "on");
        assert_eq!(kept[tls::TLS_ANNOTATION], "on");
        let pod = d.spec.template.spec.as_ref().unwrap();
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("caddy:2"));
        let mounts = c.volume_mounts.as_ref().unwrap();
        assert_eq!(mounts[0].mount_path, CADDYFILE_PATH);
        assert_eq!(mounts[0].sub_path.as_deref(), Some(CADDYFILE_KEY));
        assert_eq!(mounts[1].mount_path, tls::MOUNT);
        let ports: Vec<(i32, String)> = c
            .ports
            .iter()
            .flatten()
            .map(|p| {
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                (p.container_port, protocol)
            })
            .collect();
        assert_eq!(
            ports,
            [(80, "TCP".into()), (443, "TCP".into()), (443, "UDP".into())]
        );
        assert_eq!(service_protocols(&all, "nginx-quic-svc"), with_udp());
        let http = &with_udp()[..1];
        assert_eq!(service_protocols(&all, "nginx-plain-svc"), http);
        // Not every pod behind it answers HTTP/3 (nor https).
        assert_eq!(service_protocols(&all, MULTIARCH_SERVICE), http);
        let plain = deployment_of(&all, "nginx-plain-deployment");
        assert!(plain
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(tls::HTTP3_ANNOTATION)
            .is_none());

        // tls=off: Caddy on 80 alone, no UDP port.
        s.variants[0] = variant("quic:arch=amd64,image=caddy:2,tls=off");
        let all = manifests(&s);
        assert_eq!(service_protocols(&all, "nginx-quic-svc"), http);
        let caddyfile = &config_map_of(&all, "nginx-quic-config")[CADDYFILE_KEY];
        assert!(!caddyfile.contains("https://"), "{caddyfile}");

        // nginx's configuration keys are refused for it, by name.
        s.variants[0] = variant("quic:image=caddy:2,workers=2");
        assert!(s
            .caddy_problem()
            .unwrap()
            .starts_with("quic: config= and workers="));
        s.variants[0] = variant("quic:image=caddy:2");
        assert_eq!(s.caddy_problem(), None);
    }

    #[test]
    fn http3_writes_nginxs_quic_listener_and_exposes_udp_443() {
        let mut s = setup();
        s.http3 = true;
        s.variants.push(variant("plain:arch=amd64,tls=off"));
        s.certificate = Some(tls::ServingCert::generate(tls::names(&s)).unwrap());
        assert_eq!(s.tls_problem(), None);
        let all = manifests(&s);
        // --http3 is over TLS: the https listener and the QUIC one, with Alt-Svc.
        let text = &config_map_of(&all, CONFIG_MAP)["nginx.conf"];
        assert!(
            text.contains("listen 443 ssl http2; # archbench k8s --tls"),
            "{text}"
        );
        assert!(
            text.contains("listen 443 quic reuseport; # archbench k8s --http3"),
            "{text}"
        );
        assert!(
            text.contains(r#"add_header Alt-Svc 'h3=":443"; ma=86400'; # archbench k8s --http3"#),
            "{text}"
        );
        assert_eq!(service_protocols(&all, "nginx-intel-svc"), with_udp());
        assert_eq!(service_protocols(&all, "nginx-arm-svc"), with_udp());
        assert_eq!(service_protocols(&all, "nginx-plain-svc"), &with_udp()[..1]);
        let d = deployment_of(&all, "nginx-arm-deployment");
        assert_eq!(
            d.metadata.annotations.as_ref().unwrap()[tls::HTTP3_ANNOTATION],
            "on"
        );
        // The variant without TLS keeps the configuration as given.
        let own = &config_map_of(&all, "nginx-plain-config")["nginx.conf"];
        assert_eq!(own, TUNED_NGINX_CONF);
        s.variants.pop();
        assert_eq!(
            service_protocols(&manifests(&s), MULTIARCH_SERVICE),
            with_udp()
        );
    }

    #[test]
    fn an_h2c_only_listener_is_probed_by_its_port() {
        assert!(!speaks_h2c_on_port_80(crate::k8s::TUNED_NGINX_CONF));
        assert!(speaks_h2c_on_port_80("server { listen 80 http2; }"));
        assert!(speaks_h2c_on_port_80(
            "server { listen [::]:80 reuseport http2; }"
        ));
        assert!(speaks_h2c_on_port_80("server { listen 80; http2 on; }"));
        assert!(!speaks_h2c_on_port_80(
            "server { listen 443 ssl http2; listen 80; }"
        ));
        assert!(!speaks_h2c_on_port_80(
            "# listen 80 http2;\nserver { listen 80; }"
        ));
        let probe = readiness(Some("server { listen 80 http2; }"));
        assert!(probe.http_get.is_none() && probe.tcp_socket.is_some());
        assert!(readiness(None).http_get.is_some());
    }
}
