//! `k8s load --in-cluster --workers N`: the load from inside the cluster, as N archbench pods
//! (an Indexed Job per target) measured as one run. Each worker (`archbench agent`) takes
//! every N-th connection and its place in the open-loop schedule (`--part $(JOB_COMPLETION_
//! INDEX)/N`), waits on its control endpoint, and is given the same start instant through the
//! API server's pod proxy (no API access inside the pods); its result comes back in its log
//! and the N results are merged exactly (`stats::Merger`, the `archbench merge` path).
//!
//! Runs on the calling thread with the runtime's `block_on` for each API step, so the pod
//! monitors (which block on the same runtime) can run beside it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, Pod,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::{Api, ResourceExt};

use super::client::api_error;
use super::load::LoadTarget;
use super::{Cluster, K8sError, APP, MANAGED_BY};
use crate::engine::Part;
use crate::monitor::Monitor;
use crate::stats::{LostSource, NamedResult, RunResult, ServerUsage};

/// The prefix of a worker's result line in its log (`archbench agent` prints it).
pub const RESULT_PREFIX: &str = "archbench-result: ";
/// The port of the workers' control endpoint (on the pod's own address).
pub const CONTROL_PORT: u16 = 9090;
/// The most load pods per target: the start goes to each through the API server, and
/// their result texts are held until saved (ARCHITECTURE.md has the merge's figures).
pub const MAX_WORKERS: u64 = 1_000;
/// The label naming a load Job's pods (and the Job).
pub const JOB_LABEL: &str = "archbench.dev/job";
/// How often the workers' pods are looked at.
const POLL: Duration = Duration::from_millis(250);
/// How many starts go out at once.
const START_FANOUT: usize = 32;
/// Time for a worker to print its result and end after its run's last timeout.
const FINISH_GRACE: Duration = Duration::from_secs(30);

/// The environment variable (and header) carrying a Job's control token.
pub const TOKEN_ENV: &str = "ARCHBENCH_CONTROL_TOKEN";
/// The header the controller sends the token in.
pub const TOKEN_HEADER: &str = "x-archbench-token";
/// How long one API call may take.
const API_DEADLINE: Duration = Duration::from_secs(30);

/// How long a load Job may live at most: the wait for its workers, the start, the run and
/// the finish, with a minute to spare.
fn job_deadline(how: &InCluster, load: &WholeLoad) -> Duration {
    how.ready_timeout
        .saturating_add(start_ahead(how.workers))
        .saturating_add(load.duration)
        .saturating_add(load.timeout)
        .saturating_add(FINISH_GRACE)
        .saturating_add(Duration::from_secs(60))
}

/// How far ahead of "all ready" the common start instant is set: room for the start to reach
/// every worker through the API server, one request each.
fn start_ahead(workers: u32) -> Duration {
    (Duration::from_secs(2) + Duration::from_millis(20) * workers).min(Duration::from_secs(60))
}

/// How the workers run.
#[derive(Debug, Clone)]
pub struct InCluster {
    pub workers: u32,
    pub image: String,
    /// Where load pods may run; without it, pod anti-affinity keeps them off nginx's nodes.
    pub node_selector: Option<(String, String)>,
    /// How long to wait for the workers to be scheduled and ready.
    pub ready_timeout: Duration,
}

/// The load each target gets: connections, rate and duration of all workers together;
/// threads per worker.
#[derive(Debug, Clone)]
pub struct WholeLoad {
    pub connections: u64,
    pub threads: u64,
    pub duration: Duration,
    pub rate: Option<f64>,
    pub timeout: Duration,
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

fn labels(job: &str, target: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (
            "app.kubernetes.io/name".to_string(),
            "archbench-load".to_string(),
        ),
        (JOB_LABEL.to_string(), job.to_string()),
        ("archbench.dev/target".to_string(), target.to_string()),
    ])
}

/// The Indexed Job of `target`'s workers.
pub fn job(
    target: &LoadTarget,
    namespace: &str,
    name: &str,
    how: &InCluster,
    load: &WholeLoad,
    token: &str,
) -> Job {
    // The ClusterIP itself, with the service's name as Host: the static image has no
    // resolver libraries, and nothing depends on the cluster's DNS mid-run.
    let (url, host) = match target.cluster_address {
        Some(addr) => (
            format!("http://{addr}/"),
            crate::http::Target::parse(&target.url)
                .ok()
                .map(|t| t.host_header),
        ),
        None => (target.url.clone(), None),
    };
    let mut args: Vec<String> = vec![
        "agent".into(),
        url,
        "-c".into(),
        load.connections.to_string(),
        "-t".into(),
        load.threads.to_string(),
        "-d".into(),
        format!("{}ms", load.duration.as_millis()),
        "--timeout".into(),
        format!("{}ms", load.timeout.as_millis()),
        // Kubernetes expands $(VAR) in args from the container's environment.
        "--part".into(),
        format!("$(JOB_COMPLETION_INDEX)/{}", how.workers),
        // The pod's own address: pods that share a network (hostNetwork)
        // cannot all bind 0.0.0.0 at one port.
        "--control".into(),
        format!("$(POD_IP):{CONTROL_PORT}"),
        // Outlives the wait for every worker, so an early one is still there at the start.
        "--start-timeout".into(),
        format!(
            "{}s",
            (how.ready_timeout + start_ahead(how.workers)).as_secs() + 60
        ),
    ];
    if let Some(r) = load.rate {
        args.extend(["--rate".into(), r.to_string()]);
    }
    if let Some(h) = host {
        args.extend(["-H".into(), format!("Host: {h}")]);
    }
    let (node_selector, affinity) = match &how.node_selector {
        Some((k, v)) => (Some(BTreeMap::from([(k.clone(), v.clone())])), None),
        None => (
            None,
            Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(LabelSelector {
                                match_labels: Some(BTreeMap::from([(
                                    APP.0.to_string(),
                                    APP.1.to_string(),
                                )])),
                                ..LabelSelector::default()
                            }),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..PodAffinityTerm::default()
                        },
                    ]),
                    ..PodAntiAffinity::default()
                }),
                ..Affinity::default()
            }),
        ),
    };
    let labels = labels(name, &target.name);
    Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(how.workers as i32),
            parallelism: Some(how.workers as i32),
            // A failed worker's share is reported lost, not retried (a replacement would never
            // get the start instant), and its failure leaves the other indexes running.
            backoff_limit_per_index: Some(0),
            max_failed_indexes: Some(how.workers as i32),
            // Bounded even if archbench is killed before it deletes the Job.
            active_deadline_seconds: Some(
                i64::try_from(job_deadline(how, load).as_secs()).unwrap_or(i64::MAX),
            ),
            ttl_seconds_after_finished: Some(600),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    node_selector,
                    affinity,
                    containers: vec![Container {
                        name: "archbench".into(),
                        image: Some(how.image.clone()),
                        args: Some(args),
                        env: Some(vec![
                            EnvVar {
                                name: "POD_IP".into(),
                                value_from: Some(EnvVarSource {
                                    field_ref: Some(ObjectFieldSelector {
                                        field_path: "status.podIP".into(),
                                        ..ObjectFieldSelector::default()
                                    }),
                                    ..EnvVarSource::default()
                                }),
                                ..EnvVar::default()
                            },
                            // Only who knows it (through the API server) starts or stops a
                            // worker; other pods of the cluster can reach its port too.
                            EnvVar {
                                name: TOKEN_ENV.into(),
                                value: Some(token.to_string()),
                                ..EnvVar::default()
                            },
                        ]),
                        // Requested, so the scheduler spreads the workers by the CPU they
                        // use rather than packing them onto one node.
                        resources: Some(ResourceRequirements {
                            requests: Some(BTreeMap::from([
                                ("cpu".to_string(), Quantity(load.threads.to_string())),
                                ("memory".to_string(), Quantity("64Mi".into())),
                            ])),
                            ..ResourceRequirements::default()
                        }),
                        ports: Some(vec![ContainerPort {
                            container_port: i32::from(CONTROL_PORT),
                            name: Some("control".into()),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

fn index_of(p: &Pod) -> Option<u32> {
    p.annotations()
        .get("batch.kubernetes.io/job-completion-index")
        .and_then(|i| i.parse().ok())
}

/// The Jobs `load --in-cluster` would create for each architecture's service of `setup`
/// (`k8s manifests --load-job`), with the whole load's defaults of `k8s load`, addressed by
/// the services' DNS names (their ClusterIPs exist only once applied).
pub fn preview_jobs(setup: &super::Setup, how: &InCluster) -> Vec<Job> {
    let load = WholeLoad {
        connections: 50.max(u64::from(how.workers)),
        threads: 1,
        duration: Duration::from_secs(30),
        rate: None,
        timeout: Duration::from_secs(10),
    };
    setup
        .archs
        .iter()
        .map(|a| {
            let target = LoadTarget {
                name: a.name().to_string(),
                arch: Some(*a),
                service: a.service(),
                url: format!(
                    "http://{}.{}.svc.cluster.local/",
                    a.service(),
                    setup.namespace
                ),
                cluster_address: None,
                watch: Vec::new(),
            };
            let name = format!("archbench-load-{}", a.name());
            job(
                &target,
                &setup.namespace,
                &name,
                how,
                &load,
                "generated-per-run",
            )
        })
        .collect()
}

/// Jobs as YAML documents, as `k8s manifests` prints.
pub fn write_jobs_yaml(jobs: &[Job], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for j in jobs {
        super::manifests::write_doc(&format!("Job {}", j.name_any()), j, out)?;
    }
    Ok(())
}

/// GET or POST through the API server's proxy to a worker's control endpoint.
async fn control(
    cluster: &Cluster,
    pod: &str,
    post: Option<(&str, &str)>,
    path: &str,
) -> Result<String, K8sError> {
    let uri = format!(
        "/api/v1/namespaces/{}/pods/{pod}:{CONTROL_PORT}/proxy{path}",
        cluster.namespace
    );
    let (verb, req) = match post {
        Some((token, body)) => (
            "create",
            ::http::Request::post(&uri)
                .header(TOKEN_HEADER, token)
                .body(body.as_bytes().to_vec()),
        ),
        None => ("get", ::http::Request::get(&uri).body(Vec::new())),
    };
    let req = req.map_err(|e| K8sError::Request {
        what: format!("request to {pod}"),
        source: e,
    })?;
    cluster
        .client
        .request_text(req)
        .await
        .map_err(|e| api_error(e, verb, "pods/proxy"))
}

/// One API call on the runtime, bounded: a client without a read timeout would otherwise
/// wait on a silent API server for ever.
fn call<T>(
    runtime: &tokio::runtime::Runtime,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, K8sError>>,
) -> Result<T, K8sError> {
    runtime
        .block_on(async { tokio::time::timeout(API_DEADLINE, fut).await })
        .unwrap_or_else(|_| {
            Err(K8sError::Timeout {
                seconds: API_DEADLINE.as_secs(),
                what: what.to_string(),
                advice: "the API server did not answer; check `kubectl get --raw /readyz`".into(),
            })
        })
}

/// A control token nobody can guess: 128 bits from the kernel.
fn new_token() -> String {
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if random.is_err() {
        // No /dev/urandom: the time and the process, which at least differ per run.
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every pod of a job with its completion index (a failed worker's replacement too).
async fn job_pods(cluster: &Cluster, job: &str) -> Result<Vec<(u32, Pod)>, K8sError> {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), &cluster.namespace)
        .list(&ListParams::default().labels(&format!("{JOB_LABEL}={job}")))
        .await
        .map_err(|e| api_error(e, "list", "pods"))?
        .items;
    Ok(pods
        .into_iter()
        .filter_map(|p| Some((index_of(&p)?, p)))
        .collect())
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// What keeps a worker pod from running, if anything clear does.
fn blocked(p: &Pod) -> Option<String> {
    let status = p.status.as_ref()?;
    if let Some(c) = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    }) {
        return Some(format!(
            "unschedulable ({}); give --node-selector, or a node without nginx",
            c.message.clone().unwrap_or_default()
        ));
    }
    status.container_statuses.iter().flatten().find_map(|cs| {
        let w = cs.state.as_ref()?.waiting.as_ref()?;
        matches!(
            w.reason.as_deref(),
            Some("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName")
        )
        .then(|| {
            format!(
                "its image cannot be pulled ({}); build and push one (see the README) and pass --image",
                w.message.clone().unwrap_or_default()
            )
        })
    })
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
    stop: &AtomicBool,
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
    let job = RunningJob {
        name: &name,
        token: &token,
    };
    let outcome = run_job(runtime, cluster, target, &job, how, load, progress, stop);
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

/// The Job of a run: its name and the token its workers take orders with.
struct RunningJob<'a> {
    name: &'a str,
    token: &'a str,
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    runtime: &tokio::runtime::Runtime,
    cluster: &Cluster,
    target: &LoadTarget,
    job: &RunningJob,
    how: &InCluster,
    load: &WholeLoad,
    progress: &(dyn Fn(&str) + Sync),
    stop: &AtomicBool,
) -> Result<Distributed, K8sError> {
    let (name, token) = (job.name, job.token);
    let n = how.workers as usize;
    let label = &target.name;
    // 1. Every worker running and answering on its control endpoint: no one sends before all
    //    are ready. A list that fails is tried again until the deadline.
    let deadline = Instant::now() + how.ready_timeout;
    let mut ready: BTreeMap<u32, String> = BTreeMap::new();
    let mut told = 0;
    let mut last_error = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(K8sError::Interrupted(format!(
                "waiting for the load workers of {label} (their Job is deleted)"
            )));
        }
        let pods = match call(runtime, "listing the load pods", job_pods(cluster, name)) {
            Ok(pods) => pods,
            Err(e) => {
                last_error = Some(e.to_string());
                Vec::new()
            }
        };
        for (i, p) in pods {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let Some(why) = blocked(&p) {
                return Err(K8sError::Failed {
                    what: format!("load worker {i} of {label} (pod {})", p.name_any()),
                    message: why,
                });
            }
            if matches!(phase(&p), "Failed" | "Succeeded") {
                return Err(K8sError::Failed {
                    what: format!("load worker {i} of {label} (pod {})", p.name_any()),
                    message: format!("it ended before the start: {}", ended(&p)),
                });
            }
            let pod = p.name_any();
            if phase(&p) == "Running" && ready.get(&i) != Some(&pod) {
                let answer = call(
                    runtime,
                    "asking a worker",
                    control(cluster, &pod, None, "/ready"),
                );
                if answer.is_ok_and(|text| text.starts_with("ready")) {
                    ready.insert(i, pod);
                }
            }
        }
        if ready.len() != told {
            told = ready.len();
            progress(&format!("{label}: {told}/{n} load workers ready"));
        }
        if ready.len() == n {
            break;
        }
        if Instant::now() >= deadline {
            return Err(K8sError::Timeout {
                seconds: how.ready_timeout.as_secs(),
                what: format!("the load workers of {label} ({} of {n} ready)", ready.len()),
                advice: format!(
                    "see `kubectl get pods -n {} -l {JOB_LABEL}={name}`{}; fewer --workers or a --node-selector may help",
                    cluster.namespace,
                    last_error.map(|e| format!(" (last API error: {e})")).unwrap_or_default()
                ),
            });
        }
        std::thread::sleep(POLL);
    }
    // 2. The pods behind the target, watched from the start instant on.
    let ahead = start_ahead(how.workers);
    let start_wall = SystemTime::now() + ahead;
    let start = Instant::now() + ahead;
    let monitors = target
        .watch
        .iter()
        .map(|w| Monitor::start(w.as_ref(), start))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| K8sError::Monitor {
            what: format!("watch the nginx pods of {label}"),
            source: e,
        })?;
    let mut monitors = Some(monitors);
    // 3. One start instant for all, sent to many workers at once (one at a time, a thousand
    //    would take longer than the lead). A worker the start does not reach is lost.
    let at = crate::timefmt::rfc3339_micros(start_wall);
    let answers: Vec<(u32, Result<String, K8sError>)> = runtime.block_on(async {
        use futures::StreamExt as _;
        futures::stream::iter(ready.iter())
            .map(|(&i, pod)| {
                let at = at.as_str();
                async move {
                    let sent = tokio::time::timeout(
                        API_DEADLINE,
                        control(cluster, pod, Some((token, at)), "/start"),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(K8sError::Failed {
                            what: "the start".into(),
                            message: "no answer".into(),
                        })
                    });
                    (i, sent)
                }
            })
            .buffer_unordered(START_FANOUT)
            .collect()
            .await
    });
    let mut lost = Vec::new();
    for (i, answer) in answers {
        if let Err(e) = answer {
            if let Some(pod) = ready.remove(&i) {
                lost.push(lost_worker(
                    i,
                    &pod,
                    format!("the start did not reach it: {e}"),
                    how,
                    load,
                ));
            }
        }
    }
    if ready.is_empty() {
        return Err(K8sError::Failed {
            what: format!("starting the load workers of {label}"),
            message: lost
                .iter()
                .map(|l| l.reason.clone())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    if Instant::now() > start + crate::engine::START_GRACE {
        progress(&format!(
            "{label}: the start reached the last workers after it had passed; they started out of phase"
        ));
    }
    progress(&format!(
        "{label}: {} load workers start at {at}",
        ready.len()
    ));
    // 4. Until every started worker has ended, bounded; Ctrl-C stops them, and what they
    //    measured is still collected. The nginx pods' figures cover the run, not the wait
    //    for stragglers.
    let load_end = start.max(Instant::now()) + load.duration;
    let mut end = load_end + load.timeout + FINISH_GRACE;
    let mut interrupted = false;
    let mut finals: BTreeMap<u32, Pod> = BTreeMap::new();
    let mut usage: Vec<ServerUsage> = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            for pod in ready.values() {
                let _ = call(
                    runtime,
                    "stopping a worker",
                    control(cluster, pod, Some((token, "")), "/stop"),
                );
            }
            end = end.min(Instant::now() + load.timeout + FINISH_GRACE);
        }
        if let Ok(pods) = call(runtime, "listing the load pods", job_pods(cluster, name)) {
            for (i, p) in pods {
                // Only the pod that was started counts: a replacement never got the start.
                if ready.get(&i) == Some(&p.name_any())
                    && matches!(phase(&p), "Succeeded" | "Failed")
                {
                    finals.insert(i, p);
                }
            }
        }
        let done = finals.len() == ready.len() || Instant::now() >= end;
        if done || interrupted || Instant::now() >= load_end {
            if let Some(ms) = monitors.take() {
                usage = ms.into_iter().map(Monitor::finish).collect();
            }
        }
        if done {
            break;
        }
        std::thread::sleep(POLL);
    }
    // 5. Each worker's result from its log; the missing ones named with their share.
    let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut results = Vec::new();
    for (&i, pod) in &ready {
        let log = call(runtime, "reading a worker's log", async {
            pods_api
                .logs(pod, &LogParams::default())
                .await
                .map_err(|e| api_error(e, "get", "pods/log"))
        });
        // Checked and its start noted now; merged below from the text again, one worker's
        // histograms in memory at a time.
        let line = log.as_ref().ok().and_then(|log| {
            log.lines()
                .find_map(|l| l.strip_prefix(RESULT_PREFIX))
                .map(str::to_string)
        });
        let parsed = line.map(|l| {
            serde_json::from_str::<RunResult>(&l)
                .map_err(|e| e.to_string())
                .and_then(|r| {
                    crate::stats::started_at(pod, &r.started_at).map_err(|e| e.to_string())
                })
                .map(|at| (l, at))
        });
        let reason = match (parsed, finals.get(&i)) {
            (Some(Ok((text, at))), _) => {
                results.push((i, pod.clone(), text, at));
                continue;
            }
            (Some(Err(e)), _) => format!("its result does not parse: {e}"),
            (None, Some(p)) => ended(p),
            (None, None) => match &log {
                Err(e) => format!("its log cannot be read: {e}"),
                Ok(_) => "it did not end in time".into(),
            },
        };
        lost.push(lost_worker(i, pod, reason, how, load));
    }
    if results.is_empty() {
        return Err(K8sError::Failed {
            what: format!("the distributed load of {label}"),
            message: format!(
                "no worker returned a result: {}",
                lost.iter()
                    .map(|l| format!("{}: {}", l.name, l.reason))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    let merge_error = |message: String| K8sError::Failed {
        what: format!("merge the load workers of {label}"),
        message,
    };
    let earliest = results
        .iter()
        .map(|r| r.3)
        .min()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut merger = crate::stats::Merger::new(earliest);
    for (i, pod, text, _) in &results {
        let result =
            serde_json::from_str::<RunResult>(text).map_err(|e| merge_error(e.to_string()))?;
        merger
            .add(NamedResult {
                file: worker_name(*i, pod),
                result,
            })
            .map_err(|e| merge_error(e.to_string()))?;
    }
    let mut merged = merger.finish().map_err(|e| merge_error(e.to_string()))?;
    merged.servers = usage;
    let answered = merged.totals.requests;
    for s in &mut merged.servers {
        // Over a shorter sampled time the run's answered count would overstate it.
        if s.sampling_stopped.is_none() {
            s.requests_per_cpu_s = crate::stats::requests_per_cpu_s(answered, s.cpu_s);
        }
    }
    merged.interrupted |= interrupted;
    merged.lost_sources = lost;
    merged.limiter = limiter(&merged);
    Ok(Distributed {
        merged,
        job: name.to_string(),
        workers: results
            .into_iter()
            .map(|(i, _, text, _)| (i, text))
            .collect(),
        leftover: None,
    })
}

/// A worker whose result never came, with its share of the load.
fn lost_worker(
    index: u32,
    pod: &str,
    reason: String,
    how: &InCluster,
    load: &WholeLoad,
) -> LostSource {
    let share = Part {
        index,
        count: how.workers,
    }
    .share(load.connections);
    LostSource {
        name: worker_name(index, pod),
        reason,
        connections: share,
        rate: load
            .rate
            .map(|r| r * share as f64 / load.connections.max(1) as f64),
    }
}

fn worker_name(index: u32, pod: &str) -> String {
    format!("worker {index} (pod {pod})")
}

/// How a worker pod ended, in a few words.
fn ended(p: &Pod) -> String {
    let terminated = p.status.as_ref().and_then(|s| {
        s.container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .terminated
            .clone()
    });
    match terminated {
        Some(t) => format!(
            "its pod {} (exit {}{})",
            if t.exit_code == 0 { "ended" } else { "failed" },
            t.exit_code,
            t.reason.map(|r| format!(", {r}")).unwrap_or_default()
        ),
        None => format!("its pod is {}", phase(p)),
    }
}

/// The verdict of a distributed run: when any worker was client-bound, the load generators
/// set the ceiling, not nginx — the guide's own pitfall. The first such worker's own reason
/// says why (its CPU, or too few connections for the rate).
pub fn limiter(m: &RunResult) -> crate::stats::Limiter {
    use crate::stats::LimiterSide;
    let bound: Vec<&crate::stats::SourceRun> = m
        .sources
        .iter()
        .filter(|s| matches!(s.limiter.side, LimiterSide::Client | LimiterSide::Both))
        .collect();
    let mut verdict = crate::monitor::limiter(m);
    if let Some(first) = bound.first() {
        verdict.side = LimiterSide::Client;
        verdict.reason = format!(
            "the load generators set the ceiling, not nginx: {} of {} workers were client-bound ({}); {}: {}",
            bound.len(),
            m.sources.len(),
            bound
                .iter()
                .map(|s| format!("{} {:.0}% busy", s.file, s.client.busiest_worker_percent))
                .collect::<Vec<_>>()
                .join(", "),
            first.file,
            first.limiter.reason
        );
    }
    if !m.lost_sources.is_empty() {
        verdict.reason.push_str(&format!(
            "; {} worker(s) lost, their share missing: {}",
            m.lost_sources.len(),
            m.lost_sources
                .iter()
                .map(|l| format!("{}: {}", l.name, l.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Limiter, LimiterSide, SourceRun};

    fn target() -> LoadTarget {
        LoadTarget {
            name: "arm".into(),
            arch: Some(super::super::Arch::Arm),
            service: "nginx-arm-svc".into(),
            url: "http://nginx-arm-svc.nginx.svc.cluster.local/".into(),
            cluster_address: Some("10.0.4.7:80".parse().unwrap()),
            watch: Vec::new(),
        }
    }

    fn how(node_selector: Option<(String, String)>) -> InCluster {
        InCluster {
            workers: 4,
            image: "registry.example/archbench:1".into(),
            node_selector,
            ready_timeout: Duration::from_secs(60),
        }
    }

    const LOAD: WholeLoad = WholeLoad {
        connections: 10,
        threads: 2,
        duration: Duration::from_secs(30),
        rate: Some(1000.0),
        timeout: Duration::from_secs(2),
    };

    #[test]
    fn the_job_is_indexed_each_worker_takes_its_part_and_stays_off_nginx_nodes() {
        let job =
            serde_json::to_value(job(&target(), "nginx", "j", &how(None), &LOAD, "t0k")).unwrap();
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        // A failed worker is not replaced, and the Job ends by itself even if archbench dies.
        assert_eq!(spec["backoffLimitPerIndex"], 0);
        assert_eq!(spec["maxFailedIndexes"], 4);
        let deadline = spec["activeDeadlineSeconds"].as_u64().unwrap();
        assert!(
            (60 + 30 + 2..60 + 30 + 2 + 200).contains(&deadline),
            "{deadline}"
        );
        assert_eq!(spec["completions"], 4);
        assert_eq!(spec["parallelism"], 4);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "registry.example/archbench:1");
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let joined = args.join(" ");
        assert!(
            joined.starts_with("agent http://10.0.4.7:80/ -c 10 -t 2 -d 30000ms"),
            "{joined}"
        );
        assert!(
            joined.ends_with("-H Host: nginx-arm-svc.nginx.svc.cluster.local"),
            "{joined}"
        );
        assert!(
            joined.contains("--part $(JOB_COMPLETION_INDEX)/4"),
            "{joined}"
        );
        assert!(joined.contains("--control $(POD_IP):9090"), "{joined}");
        assert!(joined.contains("--rate 1000"), "{joined}");
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "status.podIP"
        );
        assert_eq!(c["env"][1]["name"], TOKEN_ENV);
        assert_eq!(c["env"][1]["value"], "t0k");
        assert_eq!(c["resources"]["requests"]["cpu"], "2");
        let term = &pod["affinity"]["podAntiAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            term["labelSelector"]["matchLabels"]["app"],
            "nginx-multiarch"
        );
        assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
        assert!(pod.get("nodeSelector").is_none());
        assert_eq!(job["metadata"]["labels"][JOB_LABEL], "j");
        assert_eq!(
            job["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "archbench"
        );
    }

    #[test]
    fn a_node_selector_replaces_the_anti_affinity() {
        let sel = Some(("agentpool".to_string(), "load".to_string()));
        let job =
            serde_json::to_value(job(&target(), "nginx", "j", &how(sel), &LOAD, "t0k")).unwrap();
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["agentpool"], "load");
        assert!(pod.get("affinity").is_none());
    }

    fn empty() -> RunResult {
        RunResult::from_recording(
            crate::stats::Recorder::new(None),
            crate::stats::PlanSummary::default(),
            crate::stats::Environment::default(),
            crate::stats::RunTimes {
                started_at: SystemTime::UNIX_EPOCH,
                first_send_at: None,
                elapsed_s: 1.0,
                interrupted: false,
            },
        )
    }

    fn source(file: &str, side: LimiterSide, reason: &str) -> SourceRun {
        let r = empty();
        SourceRun {
            file: file.into(),
            started_at: r.started_at.clone(),
            first_send_at: None,
            start_offset_s: 0.0,
            plan: r.plan.clone(),
            environment: r.environment.clone(),
            totals: r.totals.clone(),
            interrupted: false,
            client: r.client.clone(),
            limiter: Limiter {
                side,
                reason: reason.into(),
            },
            pacing: None,
        }
    }

    #[test]
    fn one_client_bound_worker_makes_the_load_generators_the_limit() {
        let mut m = empty();
        m.sources = vec![
            source("worker 0", LimiterSide::Neither, "fine"),
            source(
                "worker 1",
                LimiterSide::Client,
                "too few connections for this rate",
            ),
        ];
        let v = limiter(&m);
        assert_eq!(v.side, LimiterSide::Client);
        assert!(
            v.reason
                .starts_with("the load generators set the ceiling, not nginx: 1 of 2 workers"),
            "{}",
            v.reason
        );
        assert!(
            v.reason.contains("worker 1: too few connections"),
            "{}",
            v.reason
        );
        m.sources.pop();
        m.lost_sources = vec![LostSource {
            name: "worker 1".into(),
            reason: "its pod failed (exit 137)".into(),
            connections: 5,
            rate: Some(500.0),
        }];
        let v = limiter(&m);
        assert_ne!(v.side, LimiterSide::Client);
        assert!(
            v.reason.ends_with(
                "1 worker(s) lost, their share missing: worker 1: its pod failed (exit 137)"
            ),
            "{}",
            v.reason
        );
    }

    #[test]
    fn the_start_is_set_further_ahead_for_more_workers_within_a_minute() {
        assert_eq!(start_ahead(1), Duration::from_millis(2_020));
        assert_eq!(start_ahead(100), Duration::from_secs(4));
        assert_eq!(start_ahead(1_000), Duration::from_secs(22));
        assert_eq!(start_ahead(u32::MAX), Duration::from_secs(60));
    }
}
