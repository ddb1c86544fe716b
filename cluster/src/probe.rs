//! Readiness checks of the components: plain HTTP health endpoints (etcd, kube-proxy) and the
//! API server's and controllers' HTTPS ones, each tried until it answers 200 or a deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{ClusterError, Result};

/// How often a not-yet-ready component is asked again.
const RETRY: Duration = Duration::from_millis(200);

/// `GET path` over plain HTTP/1.0 answers 200.
pub async fn http_ok(addr: &str, path: &str) -> bool {
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let head = String::from_utf8_lossy(&buf);
        Some(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(true))
    )
}

/// A client of the cluster from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| ClusterError::Invalid(format!("{}: {e}", kubeconfig.display())))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| ClusterError::Invalid(format!("{}: {e}", kubeconfig.display())))?;
    kube::Client::try_from(config).map_err(ClusterError::kube("build a client"))
}

/// A client for a component's own HTTPS endpoint (self-signed: not verified; it serves only
/// health checks inside our namespace).
pub async fn health_client(kubeconfig: &Path, url: &str) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| ClusterError::Invalid(format!("{}: {e}", kubeconfig.display())))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| ClusterError::Invalid(format!("{}: {e}", kubeconfig.display())))?;
    config.cluster_url = url
        .parse()
        .map_err(|e| ClusterError::Invalid(format!("{url}: {e}")))?;
    config.accept_invalid_certs = true;
    config.root_cert = None;
    kube::Client::try_from(config).map_err(ClusterError::kube("build a client"))
}

/// `GET path` through a client answers 200 with "ok".
pub async fn get_ok(client: &kube::Client, path: &str) -> bool {
    let Ok(req) = http::Request::get(path).body(Vec::new()) else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), client.request_text(req)).await,
        Ok(Ok(body)) if body.trim() == "ok"
    )
}

/// Tries `check` until it holds, the deadline passes (Err names `what` and its log), or
/// `exited` says the process it waits for is gone.
pub async fn until<F, Fut>(
    what: &str,
    log: &Path,
    deadline: Duration,
    mut exited: impl FnMut() -> Option<String>,
    mut check: F,
) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return Ok(start.elapsed());
        }
        if let Some(status) = exited() {
            return Err(ClusterError::ComponentExited {
                name: what.to_string(),
                status,
                log: log.to_path_buf(),
            });
        }
        if start.elapsed() >= deadline {
            return Err(ClusterError::NotReady {
                what: what.to_string(),
                seconds: deadline.as_secs(),
                log: log.to_path_buf(),
            });
        }
        tokio::time::sleep(RETRY).await;
    }
}
