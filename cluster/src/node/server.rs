//! The kubelet API on the node's address (port 10250, TLS with the node's serving
//! certificate, clients must present a certificate of the cluster CA — the API server's
//! kubelet-client certificate, metrics-server's): what the API server proxies `pods/exec`,
//! `pods/attach`, `pods/portforward` and `pods/log` to, and what metrics-server scrapes.
//!
//! Routes: `/healthz`, `/exec/NS/POD/CONTAINER` and `/attach/NS/POD/CONTAINER` (WebSocket,
//! the channel protocol), `/portForward/NS/POD` (SPDY/3.1, plain or tunnelled in a
//! WebSocket), `/containerLogs/NS/POD/CONTAINER`, `/metrics/resource`. Any CA-signed client may call them: the real kubelet also asks the
//! API server (SubjectAccessReview) whether that client may; this agent does not.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::reply::{error, text, Query, Resp};
use super::{attach, exec, logs, metrics, portforward, Agent};
use crate::error::{ClusterError, Result};
use crate::pki::Pki;
use crate::topology::KUBELET_PORT;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

fn tls_config(agent: &Agent) -> Result<rustls::ServerConfig> {
    let pki = Pki::new(agent.dir.pki());
    let name = format!("kubelet-{}", agent.spec.name);
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        ClusterError::Invalid(format!("the node's {what}: {e}"))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(pki.cert(&name))
        .map_err(|e| bad("certificate", &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("certificate", &e))?;
    let key = PrivateKeyDer::from_pem_file(pki.key(&name)).map_err(|e| bad("key", &e))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(pki.ca_cert()).map_err(|e| bad("CA", &e))? {
        roots
            .add(ca.map_err(|e| bad("CA", &e))?)
            .map_err(|e| bad("CA", &e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| bad("client verifier", &e))?;
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS versions", &e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| bad("TLS set-up", &e))
}

pub async fn bind(agent: &Agent) -> Result<(tokio::net::TcpListener, tokio_rustls::TlsAcceptor)> {
    let config = tls_config(agent)?;
    let addr = (agent.spec.ip, KUBELET_PORT);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(ClusterError::io(format!(
            "listen on {}:{KUBELET_PORT}",
            agent.spec.ip
        )))?;
    Ok((listener, tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}

pub async fn serve(
    agent: Arc<Agent>,
    (listener, acceptor): (tokio::net::TcpListener, tokio_rustls::TlsAcceptor),
) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, say: not a reason to spin.
                eprintln!("node agent: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (agent, acceptor) = (agent.clone(), acceptor.clone());
        tokio::spawn(async move {
            let handshake = acceptor.accept(tcp);
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_WITHIN, handshake).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| {
                let agent = agent.clone();
                async move { Ok::<_, Infallible>(route(agent, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .with_upgrades()
                .await;
        });
    }
}

async fn route(agent: Arc<Agent>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    let q = Query::parse(req.uri().query());
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["healthz"] => text(StatusCode::OK, "text/plain", "ok"),
        ["metrics", "resource"] => metrics::resource(&agent),
        ["exec", ns, pod, container] => {
            let (ns, pod, container) = (ns.to_string(), pod.to_string(), container.to_string());
            exec::handle(&agent, req, &ns, &pod, &container, &q)
        }
        ["attach", ns, pod, container] => {
            let (ns, pod, container) = (ns.to_string(), pod.to_string(), container.to_string());
            attach::handle(&agent, req, &ns, &pod, &container, &q)
        }
        ["portForward", ns, pod] => {
            let (ns, pod) = (ns.to_string(), pod.to_string());
            portforward::handle(&agent, req, &ns, &pod)
        }
        ["containerLogs", ns, pod, container] => logs::handle(&agent, ns, pod, container, &q),
        _ => error(StatusCode::NOT_FOUND, format!("404 page not found: {path}")),
    }
}
