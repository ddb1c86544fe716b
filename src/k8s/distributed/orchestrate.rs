//! One Job's run, phase by phase: every worker ready, the nginx pods watched, one start
//! instant for all, the wait for their ends, their results from the logs, merged exactly.
//!
//! Runs on the calling thread with the runtime's `block_on` for each API step, so the pod
//! monitors (which block on the same runtime) can run beside it.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use kube::Api;

use super::arrivals::{job_pod_events, Ready, WorkersEnded, WorkersReady};
use super::job::{start_ahead, FINISH_GRACE};
use super::limiter::limiter;
use super::workers::{call, control, ended, lost_worker, worker_name, API_DEADLINE};
use super::{Distributed, InCluster, WholeLoad};
use crate::agent_protocol::{self as protocol, RESULT_PREFIX};
use crate::k8s::client::api_error;
use crate::k8s::load::LoadTarget;
use crate::k8s::wait::Wait;
use crate::k8s::{Cluster, K8sError};
use crate::monitor::Monitor;
use crate::stats::{LostSource, NamedResult, RunResult, ServerUsage};
use crate::stop::Stop;

/// How many starts go out at once.
const START_FANOUT: usize = 32;

/// A worker's result as it printed it, with when it started.
struct WorkerResult {
    index: u32,
    pod: String,
    text: String,
    started: SystemTime,
}

/// What the wait for the workers' ends saw.
struct Ends {
    /// The started pods that ended, by index.
    pods: BTreeMap<u32, Pod>,
    /// The nginx pods' figures over the run.
    usage: Vec<ServerUsage>,
    interrupted: bool,
}

/// Everything one Job's run needs, so each phase is a method with a name.
pub(super) struct JobRun<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub cluster: &'a Cluster,
    pub target: &'a LoadTarget,
    /// The Job's name and the token its workers take orders with.
    pub name: &'a str,
    pub token: &'a str,
    pub how: &'a InCluster,
    pub load: &'a WholeLoad,
    pub progress: &'a (dyn Fn(&str) + Sync),
    pub stop: &'a Stop,
}

impl JobRun<'_> {
    pub fn run(&self) -> Result<Distributed, K8sError> {
        let mut ready = self.wait_ready()?;
        let ahead = start_ahead(self.how.workers);
        let (start_wall, start) = (SystemTime::now() + ahead, Instant::now() + ahead);
        let monitors = self.watch_servers(start)?;
        let mut lost = self.start_all(&mut ready, start_wall, start)?;
        let ends = self.wait_ends(&ready, start, monitors);
        let results = self.collect(&ready, &ends, &mut lost)?;
        let merged = self.merge(&results, ends, lost)?;
        Ok(Distributed {
            merged,
            job: self.name.to_string(),
            workers: results.into_iter().map(|r| (r.index, r.text)).collect(),
            leftover: None,
        })
    }

    fn label(&self) -> &str {
        &self.target.name
    }

    /// Every worker running and answering on its control endpoint: no one sends before all
    /// are ready. The watch of the Job's pods resumes on its own when it fails.
    fn wait_ready(&self) -> Result<Ready, K8sError> {
        let n = self.how.workers as usize;
        let timeout = self.how.ready_timeout;
        let mut ready = WorkersReady::new(self.cluster, self.label(), self.name, n, timeout);
        let mut say = |line: &str| (self.progress)(line);
        let wait = Wait {
            waiting_for: "the load workers (their Job is deleted)",
            deadline: tokio::time::Instant::now() + timeout,
            stop: self.stop,
            progress: &mut say,
        };
        let events = job_pod_events(self.cluster, self.name);
        let all = self.runtime.block_on(wait.until(events, &mut ready))?;
        (self.progress)(&format!("{}: {n}/{n} load workers ready", self.label()));
        Ok(all)
    }

    /// The pods behind the target, watched from the start instant on.
    fn watch_servers(&self, start: Instant) -> Result<Vec<Monitor>, K8sError> {
        self.target
            .watch
            .iter()
            .map(|w| Monitor::start(w.as_ref(), start))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| K8sError::Monitor {
                what: format!("watch the nginx pods of {}", self.label()),
                source: e,
            })
    }

    /// One start instant for all, sent to many workers at once (one at a time, a thousand
    /// would take longer than the lead). A worker the start does not reach is lost; none
    /// reached is an error.
    fn start_all(
        &self,
        ready: &mut Ready,
        start_wall: SystemTime,
        start: Instant,
    ) -> Result<Vec<LostSource>, K8sError> {
        let at = crate::timefmt::rfc3339_micros(start_wall);
        let answers = self.send_start(ready, &at);
        let mut lost = Vec::new();
        for (i, answer) in answers {
            if let (Err(e), Some(pod)) = (answer, ready.get(&i).cloned()) {
                ready.remove(&i);
                let why = format!("the start did not reach it: {e}");
                lost.push(lost_worker(i, &pod, why, self.how, self.load));
            }
        }
        let label = self.label();
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
            (self.progress)(&format!(
                "{label}: the start reached the last workers after it had passed; they started out of phase"
            ));
        }
        (self.progress)(&format!(
            "{label}: {} load workers start at {at}",
            ready.len()
        ));
        Ok(lost)
    }

    fn send_start(&self, ready: &Ready, at: &str) -> Vec<(u32, Result<String, K8sError>)> {
        use futures::StreamExt as _;
        self.runtime.block_on(
            futures::stream::iter(ready.iter())
                .map(|(&i, pod)| self.start_one(i, pod, at))
                .buffer_unordered(START_FANOUT)
                .collect(),
        )
    }

    async fn start_one(&self, i: u32, pod: &str, at: &str) -> (u32, Result<String, K8sError>) {
        let post = control(self.cluster, pod, Some((self.token, at)), protocol::START);
        let sent = tokio::time::timeout(API_DEADLINE, post)
            .await
            .unwrap_or_else(|_| {
                Err(K8sError::Failed {
                    what: "the start".into(),
                    message: "no answer".into(),
                })
            });
        (i, sent)
    }

    /// Until every started worker has ended, bounded; Ctrl-C stops them, and what they
    /// measured is still collected. The nginx pods' figures cover the run, not the wait for
    /// stragglers.
    fn wait_ends(&self, ready: &Ready, start: Instant, monitors: Vec<Monitor>) -> Ends {
        let load_end = start.max(Instant::now()) + self.load.duration;
        let mut end = load_end + self.load.timeout + FINISH_GRACE;
        let mut monitors = Some(monitors);
        let mut usage = Vec::new();
        let mut events = job_pod_events(self.cluster, self.name);
        let mut ends = WorkersEnded::new(ready, tokio::time::Instant::now());
        // After the stop the workers are told to stop; the wait for what they measured goes
        // on, no longer stoppable.
        let (calm, mut interrupted) = (Stop::new(), false);
        loop {
            // While the load runs, until its end (the nginx pods' figures end there); then
            // until every worker ended.
            let until = if monitors.is_some() { load_end } else { end };
            ends.until = tokio::time::Instant::from_std(until.min(end));
            let mut quiet = |_: &str| {};
            let wait = Wait {
                waiting_for: "the load workers' ends",
                deadline: ends.until,
                stop: if interrupted { &calm } else { self.stop },
                progress: &mut quiet,
            };
            let waited = self.runtime.block_on(wait.until(&mut events, &mut ends));
            let mut failed = false;
            match waited {
                Err(K8sError::Interrupted { .. }) => {
                    interrupted = true;
                    self.stop_workers(ready);
                    end = end.min(Instant::now() + self.load.timeout + FINISH_GRACE);
                }
                Err(e) => {
                    (self.progress)(&format!(
                        "{}: {e}; collecting what the workers printed",
                        self.label()
                    ));
                    failed = true;
                }
                Ok(()) => {}
            }
            let now = Instant::now();
            let done = ends.all() || now >= end || failed;
            if done || interrupted || now >= load_end {
                if let Some(ms) = monitors.take() {
                    usage = ms.into_iter().map(Monitor::finish).collect();
                }
            }
            if done {
                return Ends {
                    pods: ends.pods,
                    usage,
                    interrupted,
                };
            }
        }
    }

    fn stop_workers(&self, ready: &Ready) {
        use futures::StreamExt as _;
        // Best effort, all at once as the start went: a worker the stop misses ends at its
        // duration anyway.
        self.runtime.block_on(
            futures::stream::iter(ready.values())
                .map(|pod| self.stop_one(pod))
                .buffer_unordered(START_FANOUT)
                .collect::<Vec<()>>(),
        );
    }

    async fn stop_one(&self, pod: &str) {
        let post = control(self.cluster, pod, Some((self.token, "")), protocol::STOP);
        let _ = tokio::time::timeout(API_DEADLINE, post).await;
    }

    /// Each worker's result from its log, checked and its start noted now (merged later from
    /// the text again, one worker's histograms in memory at a time); the missing ones named
    /// with their share in `lost`.
    fn collect(
        &self,
        ready: &Ready,
        ends: &Ends,
        lost: &mut Vec<LostSource>,
    ) -> Result<Vec<WorkerResult>, K8sError> {
        let pods_api: Api<Pod> =
            Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace);
        let mut results = Vec::new();
        for (&i, pod) in ready {
            let log = call(self.runtime, "reading a worker's log", async {
                pods_api
                    .logs(pod, &LogParams::default())
                    .await
                    .map_err(|e| api_error(e, "get", "pods/log"))
            });
            let reason = match (result_of(pod, &log), ends.pods.get(&i)) {
                (Some(Ok((text, started))), _) => {
                    results.push(WorkerResult {
                        index: i,
                        pod: pod.clone(),
                        text,
                        started,
                    });
                    continue;
                }
                (Some(Err(e)), _) => format!("its result does not parse: {e}"),
                (None, Some(p)) => ended(p),
                (None, None) => match &log {
                    Err(e) => format!("its log cannot be read: {e}"),
                    Ok(_) => "it did not end in time".into(),
                },
            };
            lost.push(lost_worker(i, pod, reason, self.how, self.load));
        }
        if results.is_empty() {
            return Err(K8sError::Failed {
                what: format!("the distributed load of {}", self.label()),
                message: format!(
                    "no worker returned a result: {}",
                    lost.iter()
                        .map(|l| format!("{}: {}", l.name, l.reason))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            });
        }
        Ok(results)
    }

    /// The workers' results merged exactly (the `archbench merge` path), with the nginx pods'
    /// figures and the run's own verdict.
    fn merge(
        &self,
        results: &[WorkerResult],
        ends: Ends,
        lost: Vec<LostSource>,
    ) -> Result<RunResult, K8sError> {
        let merge_error = |message: String| K8sError::Failed {
            what: format!("merge the load workers of {}", self.label()),
            message,
        };
        let earliest = results
            .iter()
            .map(|r| r.started)
            .min()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut merger = crate::stats::Merger::new(earliest);
        for r in results {
            let result = serde_json::from_str::<RunResult>(&r.text)
                .map_err(|e| merge_error(e.to_string()))?;
            merger
                .add(NamedResult {
                    file: worker_name(r.index, &r.pod),
                    result,
                })
                .map_err(|e| merge_error(e.to_string()))?;
        }
        let mut merged = merger.finish().map_err(|e| merge_error(e.to_string()))?;
        merged.servers = ends.usage;
        let answered = merged.totals.requests;
        for s in &mut merged.servers {
            s.rate_answers(answered);
        }
        merged.interrupted |= ends.interrupted;
        merged.lost_sources = lost;
        merged.limiter = limiter(&merged);
        Ok(merged)
    }
}

/// A worker's result line from its log, parsed far enough to know its start; None when the
/// log has none.
fn result_of(
    pod: &str,
    log: &Result<String, K8sError>,
) -> Option<Result<(String, SystemTime), String>> {
    let line = log
        .as_ref()
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))?
        .to_string();
    Some(
        serde_json::from_str::<RunResult>(&line)
            .map_err(|e| e.to_string())
            .and_then(|r| crate::stats::started_at(pod, &r.started_at).map_err(|e| e.to_string()))
            .map(|at| (line, at)),
    )
}
