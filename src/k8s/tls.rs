//! `k8s up --tls`: nginx serving https beside http, as production nginx does. A self-signed
//! certificate (ECDSA P-256, made here once and kept in the Secret [`SECRET`] so a second
//! `up` changes nothing), mounted at [`MOUNT`]; the pods' nginx.conf gets a `listen 443 ssl
//! http2` in its first `server` block (lines marked [`MARK`], so reading the setup back strips
//! them); the Services expose 443 beside 80. `k8s load --tls` accepts exactly that certificate
//! and no other (`--pinned-cert`), from here and from in-cluster workers.
//!
//! `k8s up --http3` adds nginx's QUIC listener to the same block (`listen 443 quic
//! reuseport`, nginx ≥ 1.25) and an `Alt-Svc` header announcing it, in lines marked
//! [`HTTP3_MARK`]; the Services expose UDP 443 beside TCP 443.

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
/// The end of every line `--http3` adds to an nginx.conf.
pub const HTTP3_MARK: &str = "# archbench k8s --http3";
/// Deployment annotation of a variant that answers HTTP/3 ("on"; absent: it does not).
pub const HTTP3_ANNOTATION: &str = "archbench.dev/http3";
/// The Services' and containers' port name and number of HTTP/3 (UDP).
pub const HTTP3_PORT: (&str, i32) = ("http3", 443);
/// What nginx answers beside each response: HTTP/3 on the same port, for a day (a browser
/// learns it from a TCP response; archbench's `--http3` needs no announcement).
const ALT_SVC: &str = r#"add_header Alt-Svc 'h3=":443"; ma=86400';"#;

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

/// `text` without the lines `--tls` and `--http3` added.
pub fn without_tls(text: &str) -> String {
    let mut joined = text
        .lines()
        .filter(|l| {
            let l = l.trim_end();
            !l.ends_with(MARK) && !l.ends_with(HTTP3_MARK)
        })
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

/// Whether `--http3` added its listener to `text`.
pub fn has_http3(text: &str) -> bool {
    text.lines().any(|l| l.trim_end().ends_with(HTTP3_MARK))
}

/// `text` (with the https listener already in its first `server` block, [`with_tls`]) with
/// the QUIC listener and `Alt-Svc` after it, once. nginx inherits `add_header` into a block
/// only when the block has none of its own, so `Alt-Svc` also goes before the first
/// `add_header` of every block inside that server that has one (the tuned configuration's
/// `location /` sets Content-Type). Without the https listener, `text` unchanged.
pub fn with_http3(text: &str) -> String {
    let plain: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_end().ends_with(HTTP3_MARK))
        .collect();
    let ours = |l: &str| l.trim_end().ends_with(MARK);
    let Some(first) = plain.iter().position(|l| ours(l)) else {
        return text.to_string();
    };
    // After the https listener's last line.
    let server_at = first + plain[first..].iter().take_while(|l| ours(l)).count() - 1;
    let marked = |indent: &str, d: &str| format!("{indent}{d} {HTTP3_MARK}");
    let mut out: Vec<String> = Vec::new();
    // Depth of braces inside the server block (1 = the server's own level); each nested
    // block's "Alt-Svc added" flag.
    let mut depth = 1usize;
    let mut added: Vec<bool> = vec![true, true];
    for (i, line) in plain.iter().enumerate() {
        let directive = line.trim_start();
        let indent = &line[..line.len() - directive.len()];
        let inside = i > server_at && depth >= 1;
        if inside && depth > 1 && directive.starts_with("add_header") && !added[depth] {
            out.push(marked(indent, ALT_SVC));
            added[depth] = true;
        }
        out.push(line.to_string());
        if i == server_at {
            out.push(marked(
                indent,
                &format!("listen {} quic reuseport;", HTTP3_PORT.1),
            ));
            out.push(marked(indent, ALT_SVC));
        }
        if inside {
            for b in braces(line) {
                if b == '{' {
                    depth += 1;
                    added.truncate(depth);
                    added.push(false);
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
        }
    }
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

/// The braces of an nginx.conf line that open or close blocks: not those in quotes (a
/// `return 200 '{…}'`) nor after a `#`.
fn braces(line: &str) -> impl Iterator<Item = char> + '_ {
    let mut quote: Option<char> = None;
    let mut comment = false;
    line.chars().filter(move |&c| {
        match (quote, c) {
            _ if comment => {}
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') => comment = true,
            (None, '{' | '}') => return true,
            _ => {}
        }
        false
    })
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
    fn http3_adds_the_quic_listener_and_alt_svc_where_nginx_inherits_it() {
        let tuned = crate::k8s::TUNED_NGINX_CONF;
        let tls = with_tls(tuned).unwrap();
        let h3 = with_http3(&tls);
        assert!(h3.contains(
            "        ssl_certificate_key /run/secrets/nginx-tls/tls.key; # archbench k8s --tls\n        listen 443 quic reuseport; # archbench k8s --http3\n        add_header Alt-Svc 'h3=\":443\"; ma=86400'; # archbench k8s --http3\n        listen 80;"
        ), "{h3}");
        // `location /` has an add_header of its own, so it gets Alt-Svc too (nginx would not
        // inherit the server's), once, before its first one; the quoted braces of its
        // `return` open no block.
        assert!(h3.contains(
            "            add_header Alt-Svc 'h3=\":443\"; ma=86400'; # archbench k8s --http3\n            add_header Content-Type application/json;"
        ), "{h3}");
        assert_eq!(h3.matches("Alt-Svc").count(), 2, "{h3}");
        assert_eq!(h3.matches("quic reuseport").count(), 1, "{h3}");
        assert!(has_http3(&h3) && has_tls(&h3) && !has_http3(&tls));
        assert_eq!(with_http3(&h3), h3, "added once");
        assert_eq!(without_tls(&h3), tuned);
        // Only the first server block, and no block after it.
        let two = "http {\n server {\n  listen 80;\n  location / { return 200 '}'; }\n  location /a {\n   add_header A 1;\n   add_header B 2;\n  }\n }\n server {\n  location / {\n   add_header C 3;\n  }\n }\n}\n";
        let h3 = with_http3(&with_tls(two).unwrap());
        assert_eq!(h3.matches("Alt-Svc").count(), 2, "{h3}");
        assert!(h3.contains("location /a {\n   add_header Alt-Svc"), "{h3}");
        assert!(h3.contains("location / {\n   add_header C 3;"), "{h3}");
        // Without the https listener there is nothing to add it beside.
        assert_eq!(with_http3(tuned), tuned);
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
