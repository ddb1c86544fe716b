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
use tokio::sync::watch;

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

/// Serves the kubelet API until the agent's shutdown: then stops accepting, tells each open
/// connection to close once its request is answered, and waits for the handlers (at most
/// [`HANDLERS_WITHIN`]; what is left then is dropped).
pub async fn serve(
    agent: Arc<Agent>,
    (listener, acceptor): (tokio::net::TcpListener, tokio_rustls::TlsAcceptor),
) {
    let shutdown = agent.shutdown.subscribe();
    let handle = move |tcp: tokio::net::TcpStream, stop: watch::Receiver<bool>| {
        connection(agent.clone(), acceptor.clone(), tcp, stop)
    };
    serve_until(listener, shutdown, handle).await;
}

/// Resolves once the shutdown is said (the receiver's guard is not held across an await).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

/// How long the server waits for its handlers once the agent shuts down.
const HANDLERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The accept loop: each connection handled by a task of its own (told of the shutdown
/// too), until `shutdown` turns true; then the listener is closed and the handlers waited
/// for, within [`HANDLERS_WITHIN`].
async fn serve_until<F, H>(
    listener: tokio::net::TcpListener,
    mut shutdown: watch::Receiver<bool>,
    handle: H,
) where
    H: Fn(tokio::net::TcpStream, watch::Receiver<bool>) -> F,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut handlers = tokio::task::JoinSet::new();
    let told = shutdown.clone();
    loop {
        tokio::select! {
            () = stopped(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    handlers.spawn(handle(tcp, told.clone()));
                }
                Err(e) => {
                    // Out of descriptors, say: not a reason to spin.
                    eprintln!("node agent: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            // Finished handlers are reaped as they end, so the set holds only open ones.
            Some(_) = handlers.join_next(), if !handlers.is_empty() => {}
        }
    }
    drop(listener);
    let drained = async { while handlers.join_next().await.is_some() {} };
    if tokio::time::timeout(HANDLERS_WITHIN, drained)
        .await
        .is_err()
    {
        eprintln!(
            "node agent: {} kubelet API handlers still open after {} s; dropped",
            handlers.len(),
            HANDLERS_WITHIN.as_secs()
        );
        handlers.shutdown().await;
    }
}

/// One client connection: TLS, then HTTP/1.1 with upgrades (exec, attach, port-forward),
/// closed gracefully when the agent shuts down.
async fn connection(
    agent: Arc<Agent>,
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    mut shutdown: watch::Receiver<bool>,
) {
    let handshake = acceptor.accept(tcp);
    let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_WITHIN, handshake).await else {
        return;
    };
    let service = hyper::service::service_fn(move |req| {
        let agent = agent.clone();
        async move { Ok::<_, Infallible>(route(agent, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = stopped(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn the_server_stops_accepting_on_shutdown_and_waits_for_its_handlers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = watch::channel(false);
        // A handler that echoes one byte, then holds its connection until the shutdown and
        // a little beyond, as an exec stream whose process is still ending would.
        let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = move |mut tcp: tokio::net::TcpStream, mut stop: watch::Receiver<bool>| {
            let ended = ended_tx.clone();
            async move {
                let mut b = [0u8; 1];
                if tcp.read_exact(&mut b).await.is_ok() {
                    let _ = tcp.write_all(&b).await;
                }
                stopped(&mut stop).await;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                let _ = ended.send(());
            }
        };
        let server = tokio::spawn(serve_until(listener, rx, handle));
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client.write_all(b"x").await.unwrap();
        let mut b = [0u8; 1];
        client.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"x");
        tx.send_replace(true);
        tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .expect("the server returns within its deadline")
            .unwrap();
        // It returned only after the open handler had ended.
        assert!(
            ended_rx.try_recv().is_ok(),
            "returned before its handler ended"
        );
        // And it no longer accepts.
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
