//! `k8s load --in-cluster --workers N`: the load from inside the cluster, as N archbench pods
//! (an Indexed Job per target) measured as one run. Each worker (`archbench agent`) takes
//! every N-th connection and its place in the open-loop schedule (`--part $(JOB_COMPLETION_
//! INDEX)/N`), waits on its control endpoint, and is given the same start instant through the
//! API server's pod proxy (no API access inside the pods); its result comes back in its log
//! and the N results are merged exactly (`stats::Merger`, the `archbench merge` path).
//!
//! `job` builds the Job, `workers` talks to them (`agent_protocol`'s controller half),
//! `orchestrate` runs one Job phase by phase, `limiter` says who set the ceiling.

mod arrivals;
mod job;
mod limiter;
mod orchestrate;
mod workers;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{DeleteParams, PostParams};
use kube::Api;

pub use job::{job, preview_jobs, write_jobs_yaml};
pub use limiter::limiter;

use super::client::api_error;
use super::load::LoadTarget;
use super::{Cluster, K8sError};
use crate::stats::RunResult;
use crate::stop::Stop;
use job::new_token;
use orchestrate::JobRun;
use workers::call;

/// The most load pods per target: the start goes to each through the API server, and
/// their result texts are held until saved (ARCHITECTURE.md has the merge's figures).
pub const MAX_WORKERS: u64 = 1_000;
/// The label naming a load Job's pods (and the Job).
pub const JOB_LABEL: &str = "archbench.dev/job";

/// How the workers run.
#[derive(Debug, Clone)]
pub struct InCluster {
    pub workers: u32,
    pub image: String,
    /// Where load pods may run; without it, pod anti-affinity keeps them off nginx's nodes.
    pub node_selector: Option<(String, String)>,
    /// How long to wait for the workers to be scheduled and ready.
    pub ready_timeout: Duration,
    /// Spells a worker's orders as the agent's command line: the command line's own layer
    /// does it, from the definitions its parser reads them with.
    pub spell: SpellAgent,
}

/// What one worker is told to do, before it is spelled as `archbench agent …`'s arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOrders {
    pub url: String,
    pub connections: u64,
    pub threads: u64,
    pub duration: Duration,
    pub timeout: Duration,
    /// `I/N`, its index from the pod's environment (`$(JOB_COMPLETION_INDEX)`).
    pub part: String,
    /// Where its control endpoint listens (`$(POD_IP):PORT`).
    pub control: String,
    pub start_timeout: Duration,
    pub rate: Option<f64>,
    /// `--stages`, as the flag takes them (each worker sends its part of them).
    pub stages: Option<String>,
    pub http2_streams: Option<u64>,
    /// HTTP/3: streams per connection.
    pub http3_streams: Option<u64>,
    /// HTTP/3's `--0rtt`.
    pub zero_rtt: bool,
    /// The Host header (the service's name, the URL being its ClusterIP).
    pub host: Option<String>,
    /// The certificate it pins (the Secret's, mounted).
    pub pinned_cert: Option<String>,
}

/// `archbench agent …`'s arguments for a worker's orders.
pub type SpellAgent = fn(&AgentOrders) -> Vec<String>;

/// The load each target gets: connections, rate and duration of all workers together;
/// threads per worker.
#[derive(Debug, Clone)]
pub struct WholeLoad {
    pub connections: u64,
    pub threads: u64,
    pub duration: Duration,
    pub rate: Option<f64>,
    pub timeout: Duration,
    /// HTTP/2 (h2c, or h2 by ALPN over https): streams per connection.
    pub http2_streams: Option<u64>,
    /// HTTP/3 (QUIC to UDP 443, `tls` with it): streams per connection.
    pub http3_streams: Option<u64>,
    /// HTTP/3's `--0rtt`: sessions fetched before the clock, first requests as early data.
    pub zero_rtt: bool,
    /// https to port 443 (`k8s load --tls`): workers mount the Secret and pin its certificate.
    pub tls: bool,
    /// Open loop whose rate changes (`--stages`): every worker follows them for its share
    /// (`duration` is their length); `rate` is then None.
    pub stages: Option<crate::stages::Stages>,
}

/// One target's distributed run.
#[derive(Debug)]
pub struct Distributed {
    /// The workers' results merged, with the nginx pods' figures; each worker's own figures
    /// are in its `sources`, the lost ones in `lost_sources`.
    pub merged: RunResult,
    /// The Job that ran the workers.
    pub job: String,
    /// Each worker's result document as it printed it (JSON, with its histograms), by
    /// index: what `archbench merge` can merge again.
    pub workers: Vec<(u32, String)>,
    /// Why the Job could not be deleted, when it could not.
    pub leftover: Option<String>,
}

/// Names each Job uniquely even when runs follow within a second.
static JOB_SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// One target's distributed run: creates its Indexed Job, starts every worker at one instant,
/// collects and merges their results, and deletes the Job (also on error or Ctrl-C).
pub fn run(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    target: &LoadTarget,
    how: &InCluster,
    load: &WholeLoad,
    progress: &(dyn Fn(&str) + Sync),
    stop: &Stop,
) -> Result<Distributed, K8sError> {
    let jobs_api: Api<Job> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let name = format!(
        "archbench-load-{}-{}-{}",
        target.name,
        crate::timefmt::compact(SystemTime::now()).to_ascii_lowercase(),
        JOB_SEQUENCE.fetch_add(1, Ordering::Relaxed)
    );
    let token = new_token();
    let job = job(target, &cluster.namespace, &name, how, load, &token);
    call(runtime, "creating the load Job", async {
        jobs_api
            .create(&PostParams::default(), &job)
            .await
            .map_err(|e| api_error(e, "create", "jobs.batch"))
    })?;
    let outcome = JobRun {
        runtime,
        cluster,
        target,
        name: &name,
        token: &token,
        how,
        load,
        progress,
        stop,
    }
    .run();
    // The Job is ours and done with: a failed worker's replacement would wait for a start
    // that never comes. Background propagation removes its pods too.
    let deleted = call(runtime, "deleting the load Job", async {
        jobs_api
            .delete(&name, &DeleteParams::background())
            .await
            .map_err(|e| api_error(e, "delete", "jobs.batch"))
    });
    let leftover = deleted
        .err()
        .map(|e| format!("could not delete Job {name} ({e}); `archbench k8s down` removes it"));
    match (outcome, leftover) {
        (Ok(mut d), leftover) => {
            d.leftover = leftover;
            Ok(d)
        }
        (Err(e), None) => Err(e),
        // Said on every path: a Job left behind may still be loading nginx.
        (Err(e), Some(leftover)) => Err(K8sError::LeftBehind {
            source: Box::new(e),
            leftover,
        }),
    }
}
