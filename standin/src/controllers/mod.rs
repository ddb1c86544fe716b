//! The control plane's loops: scheduler, Deployment, Job, Service, namespace and garbage
//! collection, plus the kubelet's sync. One task runs them all whenever the store changes (and
//! at least four times a second), each reconciling everything it owns: the cluster is small,
//! so level-triggered full passes are simpler than informers and just as correct.

use std::sync::Arc;
use std::time::Duration;

use crate::state::Shared;

mod deployment;
pub mod events;
mod gc;
mod job;
mod namespace;
pub mod nodes;
mod scheduler;
mod service;

/// What exists before the first request: nodes and the usual namespaces.
pub fn bootstrap(sh: &Shared) -> std::io::Result<()> {
    nodes::create(sh)?;
    namespace::create_defaults(sh)?;
    Ok(())
}

/// How often every controller runs even when nothing changed (readiness, back-offs, deadlines
/// depend on time, not only on writes).
const TICK: Duration = Duration::from_millis(250);

pub async fn run(sh: Arc<Shared>) {
    let mut changed = sh.store.subscribe();
    let mut stop = sh.shutdown.subscribe();
    loop {
        scheduler::sync(&sh);
        deployment::sync(&sh);
        job::sync(&sh);
        service::sync(&sh);
        namespace::sync(&sh);
        gc::sync(&sh);
        sh.kubelet.sync(&sh);
        tokio::select! {
            _ = changed.changed() => {
                // let a burst of writes settle into one pass
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.changed() => return,
        }
        if sh.stopping() {
            return;
        }
    }
}
