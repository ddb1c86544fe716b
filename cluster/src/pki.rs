//! The cluster's certificates and kubeconfigs, as kubeadm lays them out: one CA for the API
//! server, its clients and the kubelets; a front-proxy CA for the aggregation layer
//! (metrics-server); a service-account signing key. Users are client certificates (CN = user,
//! O = groups), so RBAC sees them exactly as on a cluster that authenticates by certificate.
//!
//! rcgen cannot read a certificate back without its x509 parser, so the CAs are rebuilt from
//! their fixed subject and stored key when a certificate is issued later (a user, a node's
//! serving certificate): same subject, same key — the same issuer to every verifier.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::{ClusterError, Result};
use crate::topology;

const CA: &str = "ca";
const CA_SUBJECT: &str = "archbench-cluster-ca";
const FRONT_PROXY_CA: &str = "front-proxy-ca";
const FRONT_PROXY_CA_SUBJECT: &str = "archbench-cluster-front-proxy-ca";
/// The user the aggregation layer proxies as (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";
/// The cluster's name in every kubeconfig.
pub const CLUSTER_NAME: &str = "archbench";

/// The PKI directory of a cluster.
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
}

/// A certificate to issue: subject, names and what it is for.
pub struct Issue<'a> {
    /// File stem: `<name>.crt`, `<name>.key`.
    pub name: &'a str,
    pub common_name: &'a str,
    pub groups: &'a [&'a str],
    /// DNS names and IP addresses (server certificates).
    pub sans: &'a [String],
    pub server: bool,
    pub client: bool,
}

impl Pki {
    pub fn new(dir: impl Into<PathBuf>) -> Pki {
        Pki { dir: dir.into() }
    }

    pub fn cert(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.crt"))
    }

    pub fn key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.cert(CA)
    }

    pub fn front_proxy_ca_cert(&self) -> PathBuf {
        self.cert(FRONT_PROXY_CA)
    }

    /// The service-account token signing key (PKCS#8) and its public half.
    pub fn service_account_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    pub fn service_account_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    /// Writes the CAs, the API server's certificates and the signing key.
    pub fn create(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(ClusterError::io(format!("create {}", self.dir.display())))?;
        for (name, subject) in [(CA, CA_SUBJECT), (FRONT_PROXY_CA, FRONT_PROXY_CA_SUBJECT)] {
            let key = KeyPair::generate()?;
            let cert = ca_params(subject)?.self_signed(&key)?;
            self.write(name, &cert, &key)?;
        }
        let sa = KeyPair::generate()?;
        write_file(&self.service_account_key(), &sa.serialize_pem(), true)?;
        write_file(&self.service_account_pub(), &sa.public_key_pem(), false)?;
        let mut names: Vec<String> = ["kubernetes", "kubernetes.default", "kubernetes.default.svc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        names.push(format!(
            "kubernetes.default.svc.{}",
            topology::CLUSTER_DOMAIN
        ));
        names.push(topology::APISERVER_IP.to_string());
        names.push(topology::APISERVER_LOOPBACK.to_string());
        names.push(topology::KUBERNETES_SERVICE_IP.to_string());
        names.push("127.0.0.1".into());
        self.issue(&Issue {
            name: "apiserver",
            common_name: "kube-apiserver",
            groups: &[],
            sans: &names,
            server: true,
            client: false,
        })?;
        // What the API server shows the kubelets (exec, logs, metrics it proxies).
        self.issue(&Issue {
            name: "apiserver-kubelet-client",
            common_name: "kube-apiserver-kubelet-client",
            groups: &["system:masters"],
            sans: &[],
            server: false,
            client: true,
        })?;
        self.issue_front_proxy_client()?;
        Ok(())
    }

    /// Issues a certificate signed by the cluster CA.
    pub fn issue(&self, what: &Issue) -> Result<()> {
        let (ca, ca_key) = self.load_ca(CA, CA_SUBJECT)?;
        let key = KeyPair::generate()?;
        let cert = leaf_params(what)?.signed_by(&key, &ca, &ca_key)?;
        self.write(what.name, &cert, &key)
    }

    fn issue_front_proxy_client(&self) -> Result<()> {
        let (ca, ca_key) = self.load_ca(FRONT_PROXY_CA, FRONT_PROXY_CA_SUBJECT)?;
        let key = KeyPair::generate()?;
        let cert = leaf_params(&Issue {
            name: FRONT_PROXY_CLIENT,
            common_name: FRONT_PROXY_CLIENT,
            groups: &[],
            sans: &[],
            server: false,
            client: true,
        })?
        .signed_by(&key, &ca, &ca_key)?;
        self.write(FRONT_PROXY_CLIENT, &cert, &key)
    }

    fn load_ca(&self, name: &str, subject: &str) -> Result<(Certificate, KeyPair)> {
        let pem = std::fs::read_to_string(self.key(name)).map_err(ClusterError::io(format!(
            "read {}",
            self.key(name).display()
        )))?;
        let key = KeyPair::from_pem(&pem)?;
        let cert = ca_params(subject)?.self_signed(&key)?;
        Ok((cert, key))
    }

    fn write(&self, name: &str, cert: &Certificate, key: &KeyPair) -> Result<()> {
        write_file(&self.cert(name), &cert.pem(), false)?;
        write_file(&self.key(name), &key.serialize_pem(), true)
    }

    /// A kubeconfig for a user with a client certificate (issued here), file `path`.
    pub fn kubeconfig_for(
        &self,
        path: &Path,
        user: &str,
        groups: &[&str],
        namespace: Option<&str>,
    ) -> Result<()> {
        let stem = format!("user-{}", user.replace([':', '/'], "-"));
        self.issue(&Issue {
            name: &stem,
            common_name: user,
            groups,
            sans: &[],
            server: false,
            client: true,
        })?;
        let read = |p: PathBuf| {
            std::fs::read(&p).map_err(ClusterError::io(format!("read {}", p.display())))
        };
        let config = Kubeconfig {
            server: topology::apiserver_url(),
            ca_pem: read(self.ca_cert())?,
            user: user.to_string(),
            credentials: Credentials::ClientCertificate {
                cert_pem: read(self.cert(&stem))?,
                key_pem: read(self.key(&stem))?,
            },
            namespace: namespace.map(str::to_string),
        };
        write_file(path, &config.render(), true)
    }
}

/// What a kubeconfig user presents.
pub enum Credentials {
    ClientCertificate {
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
    },
    /// An `exec:` credential plugin (as AKS's kubelogin): command and arguments.
    Exec {
        command: String,
        args: Vec<String>,
    },
}

/// One cluster, one user, one context: the kubeconfig kubectl and kube-rs read.
pub struct Kubeconfig {
    pub server: String,
    pub ca_pem: Vec<u8>,
    pub user: String,
    pub credentials: Credentials,
    pub namespace: Option<String>,
}

impl Kubeconfig {
    /// As JSON (a kubeconfig is YAML, and JSON is YAML).
    pub fn render(&self) -> String {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let user = match &self.credentials {
            Credentials::ClientCertificate { cert_pem, key_pem } => serde_json::json!({
                "client-certificate-data": b64(cert_pem),
                "client-key-data": b64(key_pem),
            }),
            Credentials::Exec { command, args } => serde_json::json!({
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": command,
                    "args": args,
                    "interactiveMode": "Never",
                }
            }),
        };
        let mut context = serde_json::json!({"cluster": CLUSTER_NAME, "user": self.user});
        if let Some(ns) = &self.namespace {
            context["namespace"] = serde_json::json!(ns);
        }
        let doc = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CLUSTER_NAME, "cluster": {
                "server": self.server,
                "certificate-authority-data": b64(&self.ca_pem),
            }}],
            "users": [{"name": self.user, "user": user}],
            "contexts": [{"name": CLUSTER_NAME, "context": context}],
            "current-context": CLUSTER_NAME,
            "preferences": {},
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }
}

fn ca_params(subject: &str) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, subject);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(p)
}

fn leaf_params(what: &Issue) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    for san in what.sans {
        p.subject_alt_names.push(match san.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(san.clone().try_into()?),
        });
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, what.common_name);
    for g in what.groups {
        dn.push(DnType::OrganizationName, *g);
    }
    p.distinguished_name = dn;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    if what.server {
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    if what.client {
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    p.use_authority_key_identifier_extension = true;
    Ok(p)
}

/// Writes a file whole (private keys readable by their owner only).
pub fn write_file(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(ClusterError::io(format!("create {}", parent.display())))?;
    }
    let tmp = path.with_extension("partial");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    if private {
        opts.mode(0o600);
    }
    let write = || -> std::io::Result<()> {
        use std::io::Write as _;
        let mut f = opts.open(&tmp)?;
        f.write_all(text.as_bytes())?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(ClusterError::io(format!("write {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_embeds_the_ca_and_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path().join("pki"));
        pki.create().unwrap();
        let path = dir.path().join("viewer.kubeconfig");
        pki.kubeconfig_for(&path, "viewer", &["readers"], Some("nginx"))
            .unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["users"][0]["name"], "viewer");
        assert_eq!(doc["contexts"][0]["context"]["namespace"], "nginx");
        // Loopback: used outside the cluster's namespace by mistake, it reaches nothing.
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"],
            "https://127.240.0.1:6443"
        );
        let pem = std::fs::read_to_string(pki.cert("user-viewer")).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
