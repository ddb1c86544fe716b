//! [`Cluster`]: starts the API server, controllers and kubelet on a runtime of their own, and
//! takes everything down again on drop.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::alloc::Allocators;
use crate::faults::{FaultState, Faults};
use crate::kubelet::Kubelet;
use crate::net::ServiceNet;
use crate::options::Options;
use crate::state::{RecordedRequest, Shared};
use crate::store::Store;
use crate::{controllers, server};

/// A running stand-in cluster. Dropping it stops every pod process, the forwarders and the
/// API server, and removes its cgroups and temp dir.
pub struct Cluster {
    shared: Arc<Shared>,
    faults: Faults,
    runtime: Option<tokio::runtime::Runtime>,
    url: String,
    kubeconfig: PathBuf,
}

/// The token the kubeconfig carries (kube sends it; kubectl over plain http does not).
pub const TOKEN: &str = "stand-in-token";

/// Prefix of the clusters' temp dirs and cgroups: `archbench-standin-<pid>-<n>`.
const PREFIX: &str = "archbench-standin-";

/// Whether a temp dir or cgroup name belongs to a cluster whose process is gone.
fn stale(name: &str) -> bool {
    let Some(pid) = name.strip_prefix(PREFIX).and_then(|r| r.split('-').next()) else {
        return false;
    };
    pid.parse::<u32>()
        .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes what clusters of killed processes left behind (their Drop never ran).
fn sweep_stale() {
    if let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) {
        for e in rd.flatten() {
            if stale(&e.file_name().to_string_lossy()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    crate::kubelet::cgroup::sweep(stale);
}

fn temp_dir() -> io::Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn kubeconfig_text(url: &str) -> String {
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: stand-in\n  cluster:\n    server: {url}\n\
         contexts:\n\
         - name: stand-in\n  context:\n    cluster: stand-in\n    user: stand-in\n    namespace: nginx\n\
         current-context: stand-in\n\
         users:\n\
         - name: stand-in\n  user:\n    token: {TOKEN}\n"
    )
}

impl Cluster {
    /// Starts a cluster: binds the API server on 127.0.0.1 (a free port), creates the nodes
    /// and the default namespaces, and starts the controllers and the kubelet. Synchronous:
    /// the cluster runs on its own tokio runtime, so tests may call this from anywhere.
    pub fn start(opts: Options) -> io::Result<Cluster> {
        sweep_stale();
        let dir = temp_dir()?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let url = format!("http://127.0.0.1:{port}");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(&url))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("standin")
            .enable_all()
            .build()?;
        let kubelet = Kubelet::new(&dir, &opts)?;
        let shared = Arc::new(Shared {
            store: Store::new(opts.event_ring),
            faults: FaultState::default(),
            requests: Mutex::new(VecDeque::new()),
            alloc: Allocators::default(),
            kubelet,
            net: ServiceNet::default(),
            dir,
            api_port: port,
            shutdown: watch::channel(false).0,
            opts,
        });
        controllers::bootstrap(&shared)?;
        {
            let _guard = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(listener)?;
            runtime.spawn(server::serve(shared.clone(), listener));
            runtime.spawn(controllers::run(shared.clone()));
        }
        Ok(Cluster {
            faults: Faults {
                shared: shared.clone(),
            },
            shared,
            runtime: Some(runtime),
            url,
            kubeconfig,
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A kubeconfig for this cluster (cluster, context and user `stand-in`, namespace
    /// `nginx`, a bearer token), in the cluster's temp dir.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Every request answered so far, oldest first (the newest 100 000).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        let q = self
            .shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.iter().cloned().collect()
    }

    /// What `kubectl logs POD` shows now: the current run of the pod's first container
    /// ("" when the pod or its log does not exist).
    pub fn pod_log(&self, ns: &str, pod: &str) -> String {
        self.shared
            .kubelet
            .current_log(ns, pod, None)
            .unwrap_or_default()
    }

    /// The cluster's temp dir (kubeconfig, one directory per pod).
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        self.shared.kubelet.shutdown(Duration::from_secs(5));
        self.shared.net.stop_all();
        if let Some(rt) = self.runtime.take() {
            // Dropping a runtime inside another runtime's async context panics (a
            // #[tokio::test] dropping its cluster); a plain thread is always allowed to.
            let t = std::thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(2)));
            let _ = t.join();
        }
        self.shared.kubelet.cleanup();
        let _ = std::fs::remove_dir_all(&self.shared.dir);
    }
}
