//! The Services' data plane (kube-proxy's job): one TCP forwarder per service address
//! (ClusterIP:port, load-balancer ingress IP:port, every node's IP:nodePort), each
//! round-robin over the Ready endpoints of its Service. With no endpoint a connection is reset,
//! as kube-proxy rejects it. Debian's nginx here has no stream module, so the stand-in forwards
//! itself (tokio `copy_bidirectional`); measure pods directly for throughput figures.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The Ready endpoints behind one service address.
#[derive(Default)]
struct Endpoints {
    addrs: RwLock<Vec<SocketAddr>>,
    next: AtomicUsize,
}

impl Endpoints {
    fn pick(&self) -> Vec<SocketAddr> {
        let a = self.addrs.read().unwrap_or_else(|e| e.into_inner());
        if a.is_empty() {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % a.len();
        a.iter()
            .cycle()
            .skip(start)
            .take(a.len())
            .copied()
            .collect()
    }
}

struct Forwarder {
    endpoints: Arc<Endpoints>,
    task: JoinHandle<()>,
}

#[derive(Default)]
pub struct ServiceNet {
    forwarders: Mutex<HashMap<SocketAddrV4, Forwarder>>,
    /// Addresses that failed to bind, and when: retried every few seconds, not every pass.
    failed: Mutex<HashMap<SocketAddrV4, (Instant, String)>>,
}

const BIND_RETRY: Duration = Duration::from_secs(5);

impl ServiceNet {
    /// Makes the forwarders exactly `wanted` (address → endpoints). Returns bind failures
    /// that are new, for events.
    pub fn reconcile(
        &self,
        wanted: HashMap<SocketAddrV4, Vec<SocketAddr>>,
    ) -> Vec<(SocketAddrV4, String)> {
        let mut fw = self.forwarders.lock().unwrap_or_else(|e| e.into_inner());
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        fw.retain(|addr, f| {
            let keep = wanted.contains_key(addr);
            if !keep {
                f.task.abort();
            }
            keep
        });
        failed.retain(|addr, _| wanted.contains_key(addr));
        let mut new_failures = Vec::new();
        for (addr, eps) in wanted {
            if let Some(f) = fw.get(&addr) {
                *f.endpoints.addrs.write().unwrap_or_else(|e| e.into_inner()) = eps;
                continue;
            }
            if failed
                .get(&addr)
                .is_some_and(|(t, _)| t.elapsed() < BIND_RETRY)
            {
                continue;
            }
            let std_listener = match std::net::TcpListener::bind(addr).and_then(|l| {
                l.set_nonblocking(true)?;
                Ok(l)
            }) {
                Ok(l) => l,
                Err(e) => {
                    let first = !failed.contains_key(&addr);
                    failed.insert(addr, (Instant::now(), e.to_string()));
                    if first {
                        new_failures.push((addr, e.to_string()));
                    }
                    continue;
                }
            };
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                continue;
            };
            failed.remove(&addr);
            let endpoints = Arc::new(Endpoints::default());
            *endpoints.addrs.write().unwrap_or_else(|e| e.into_inner()) = eps;
            let task = tokio::spawn(serve(listener, endpoints.clone()));
            fw.insert(addr, Forwarder { endpoints, task });
        }
        new_failures
    }

    pub fn stop_all(&self) {
        for (_, f) in self
            .forwarders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
        {
            f.task.abort();
        }
    }
}

async fn serve(listener: TcpListener, endpoints: Arc<Endpoints>) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = client.set_nodelay(true);
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            for ep in endpoints.pick() {
                let Ok(Ok(mut upstream)) =
                    tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(ep)).await
                else {
                    continue;
                };
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                return;
            }
            // no endpoint: reset, as kube-proxy's REJECT does
            let _ = client.set_zero_linger();
        });
    }
}
