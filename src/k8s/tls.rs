//! `k8s up --tls`: nginx serving https beside http, as production nginx does. A self-signed
//! certificate (ECDSA P-256, made here once and kept in the Secret [`SECRET`] so a second
//! `up` changes nothing), mounted at [`MOUNT`]; the pods' nginx.conf gets a `listen 443 ssl
//! http2` in its first `server` block (lines marked [`MARK`], so reading the setup back strips
//! them); the Services expose 443 beside 80. `k8s load --tls` accepts exactly that certificate
//! and no other (`--pinned-cert`), from here and from in-cluster workers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::Api;

use super::client::api_error;
use super::{is_ours, Cluster, K8sError, Setup, MULTIARCH_SERVICE};

/// The Secret holding the certificate and key (type kubernetes.io/tls).
pub const SECRET: &str = "nginx-tls";
/// Where the nginx pods see the Secret (tls.crt, tls.key): under /run/secrets, beside the
/// service account's token, a directory every image has (and the test cluster's node agent,
/// whose pods share the host's files, can mount on).
pub const MOUNT: &str = "/run/secrets/nginx-tls";
/// Where in-cluster load workers see it (to pin the certificate).
pub const WORKER_MOUNT: &str = MOUNT;
/// The end of every line `--tls` adds to an nginx.conf.
pub const MARK: &str = "# archbench k8s --tls";
/// Pod-template annotation: the certificate's SHA-256, so a new certificate rolls the pods.
pub const CERT_HASH: &str = "archbench.dev/tls-cert-sha256";
/// Deployment annotation of a variant that serves TLS ("on"; absent: it does not).
pub const TLS_ANNOTATION: &str = "archbench.dev/tls";
/// The Services' and containers' port name and number of https.
pub const HTTPS_PORT: (&str, i32) = ("https", 443);

/// The certificate and key nginx serves with, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl ServingCert {
    /// A new self-signed certificate for these names (the Services' names).
    pub fn generate(names: Vec<String>) -> Result<ServingCert, K8sError> {
        let made = rcgen::generate_simple_self_signed(names).map_err(|e| K8sError::Failed {
            what: "make a TLS certificate".into(),
            message: e.to_string(),
        })?;
        Ok(ServingCert {
            cert_pem: made.cert.pem(),
            key_pem: made.key_pair.serialize_pem(),
        })
    }

    /// The Secret's data.
    pub fn data(&self) -> BTreeMap<String, ByteString> {
        BTreeMap::from([
            (
                "tls.crt".to_string(),
                ByteString(self.cert_pem.clone().into_bytes()),
            ),
            (
                "tls.key".to_string(),
                ByteString(self.key_pem.clone().into_bytes()),
            ),
        ])
    }

    fn from_secret(s: &Secret) -> Option<ServingCert> {
        let data = s.data.as_ref()?;
        let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
        Some(ServingCert {
            cert_pem: text("tls.crt")?,
            key_pem: text("tls.key")?,
        })
    }
}

/// The names the certificate is for: each https Service's, short and in full, and
/// localhost (`k8s load` pins the certificate itself, so these only help other clients).
pub fn names(setup: &Setup) -> Vec<String> {
    let services = setup
        .variants
        .iter()
        .filter(|v| setup.tls_of(v))
        .map(|v| v.service())
        .chain(std::iter::once(MULTIARCH_SERVICE.to_string()));
    let ns = &setup.namespace;
    services
        .flat_map(|s| {
            [
                format!("{s}.{ns}.svc.cluster.local"),
                format!("{s}.{ns}.svc"),
                format!("{s}.{ns}"),
                s,
            ]
        })
        .chain(std::iter::once("localhost".to_string()))
        .collect()
}

/// The certificate of the setup's Secret, when there is one.
pub async fn existing(cluster: &Cluster) -> Result<Option<ServingCert>, K8sError> {
    let secret = Api::<Secret>::namespaced(cluster.client.clone(), &cluster.namespace)
        .get_opt(SECRET)
        .await
        .map_err(|e| api_error(e, "get", "secrets"))?;
    Ok(secret
        .as_ref()
        .filter(|s| is_ours(&s.metadata))
        .and_then(ServingCert::from_secret))
}

/// The certificate `k8s load --tls` pins: the Secret's, or why there is none.
pub async fn pinned(cluster: &Cluster) -> Result<String, K8sError> {
    existing(cluster)
        .await?
        .map(|c| c.cert_pem)
        .ok_or_else(|| K8sError::Failed {
            what: format!("read the certificate of Secret {SECRET}"),
            message: format!(
                "no such Secret in namespace {}; `archbench k8s up --tls` makes it",
                cluster.namespace
            ),
        })
}

/// `text` with the https listener in its first `server` block (once: lines added before
/// are replaced). Err: no `server {` to add it to.
pub fn with_tls(text: &str) -> Result<String, String> {
    let plain = without_tls(text);
    let mut out: Vec<String> = Vec::new();
    let mut added = false;
    for line in plain.lines() {
        out.push(line.to_string());
        let directive = line.trim_start();
        let opens_server = directive
            .strip_prefix("server")
            .is_some_and(|rest| rest.trim_start().starts_with('{'));
        if !added && opens_server {
            let indent = format!("{}    ", &line[..line.len() - directive.len()]);
            let port = HTTPS_PORT.1;
            for d in [
                format!("listen {port} ssl http2;"),
                format!("ssl_certificate {MOUNT}/tls.crt;"),
                format!("ssl_certificate_key {MOUNT}/tls.key;"),
            ] {
                out.push(format!("{indent}{d} {MARK}"));
            }
            added = true;
        }
    }
    if !added {
        return Err(
            "it has no `server {` block to add `listen 443 ssl http2` to; give a configuration with one"
                .into(),
        );
    }
    let mut joined = out.join("\n");
    if plain.ends_with('\n') {
        joined.push('\n');
    }
    Ok(joined)
}

/// `text` without the lines `--tls` added.
pub fn without_tls(text: &str) -> String {
    let mut joined = text
        .lines()
        .filter(|l| !l.trim_end().ends_with(MARK))
        .collect::<Vec<_>>()
        .join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

/// Whether `--tls` added its listener to `text`.
pub fn has_tls(text: &str) -> bool {
    text.lines().any(|l| l.trim_end().ends_with(MARK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_goes_into_the_first_server_block_once() {
        let tuned = crate::k8s::TUNED_NGINX_CONF;
        let once = with_tls(tuned).unwrap();
        assert!(once.contains(
            "    server {\n        listen 443 ssl http2; # archbench k8s --tls\n        ssl_certificate /run/secrets/nginx-tls/tls.crt; # archbench k8s --tls\n        ssl_certificate_key /run/secrets/nginx-tls/tls.key; # archbench k8s --tls\n        listen 80;"
        ), "{once}");
        assert!(has_tls(&once) && !has_tls(tuned));
        assert_eq!(with_tls(&once).unwrap(), once, "added once");
        assert_eq!(without_tls(&once), tuned);
        let two = "http {\n server{ listen 80; }\n server {\n listen 81; }\n}";
        let with = with_tls(two).unwrap();
        assert_eq!(with.matches("listen 443").count(), 1, "{with}");
        assert!(
            with.starts_with("http {\n server{ listen 80; }\n     listen 443"),
            "{with}"
        );
        assert!(with_tls("events {}\nhttp { }\n").is_err());
        assert!(with_tls("http { serverless {} }").is_err());
    }

    #[test]
    fn a_generated_certificate_round_trips_through_its_secret() {
        let c = ServingCert::generate(vec!["nginx-intel-svc".into()]).unwrap();
        assert!(c.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.key_pem.contains("PRIVATE KEY"));
        let s = Secret {
            data: Some(c.data()),
            ..Secret::default()
        };
        assert_eq!(ServingCert::from_secret(&s), Some(c));
        assert_eq!(ServingCert::from_secret(&Secret::default()), None);
    }
}
