//! What every part of the running cluster shares.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::alloc::Allocators;
use crate::faults::FaultState;
use crate::kubelet::Kubelet;
use crate::net::ServiceNet;
use crate::options::Options;
use crate::store::Store;

/// One request the API server answered, for request-level assertions in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    /// Path with the query string, as sent (`/api/v1/namespaces/nginx/pods?&limit=500`).
    pub path: String,
    pub accept: Option<String>,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub user_agent: Option<String>,
    /// HTTP status of the answer (101 for exec upgrades, 200 for watches that then stream).
    pub status: u16,
}

/// Requests kept for [`crate::Cluster::requests`]; older ones are dropped beyond this.
pub const REQUESTS_KEPT: usize = 100_000;

/// The user every request is authenticated as (RBAC messages name it).
pub const USER: &str = "stand-in";

pub(crate) struct Shared {
    pub opts: Options,
    pub store: Store,
    pub faults: FaultState,
    pub requests: Mutex<VecDeque<RecordedRequest>>,
    pub alloc: Allocators,
    pub kubelet: Kubelet,
    pub net: ServiceNet,
    /// The cluster's temp dir (kubeconfig, pod directories).
    pub dir: PathBuf,
    pub api_port: u16,
    /// Set to true when the cluster stops; long-running tasks end.
    pub shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Wake watches and controllers.
    pub fn poke(&self) {
        self.store.poke();
    }

    pub fn record(&self, r: RecordedRequest) {
        let mut q = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= REQUESTS_KEPT {
            q.pop_front();
        }
        q.push_back(r);
    }

    pub fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }
}
