//! The two waits of a Job's run, as conditions of the one wait driver (`k8s::wait`) over a
//! watch of the Job's pods: every worker ready to take the start, then every started worker
//! ended (or the time for it up).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, ResourceExt};
use tokio::time::Instant;

use super::job::index_of;
use super::workers::{blocked, control, ended, phase, API_DEADLINE};
use super::JOB_LABEL;
use crate::agent_protocol as protocol;
use crate::k8s::seen::fold;
use crate::k8s::wait::{Condition, Look};
use crate::k8s::{Cluster, K8sError};

/// Ready workers: completion index → the pod that was found ready (a replacement pod with the
/// same index never gets the start, so it never counts).
pub(super) type Ready = BTreeMap<u32, String>;

/// What the watch of a Job's pods sends.
pub(super) type PodEvent = Result<watcher::Event<Pod>, watcher::Error>;

/// The watch of a Job's pods (it lists, then follows; a failed watch backs off and resumes).
pub(super) fn job_pod_events(cluster: &Cluster, job: &str) -> BoxStream<'static, PodEvent> {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), &cluster.namespace);
    let selector = watcher::Config::default().labels(&format!("{JOB_LABEL}={job}"));
    watcher(pods, selector).default_backoff().boxed()
}

/// How often a running worker that did not say it is ready yet is asked again.
const ASK_AGAIN: Duration = Duration::from_millis(250);

fn watch_ended() -> K8sError {
    K8sError::Failed {
        what: "watch".into(),
        message: "the watch of the load pods ended".into(),
    }
}

/// Every worker running and answering on its control endpoint: no one sends before all are.
pub(super) struct WorkersReady<'a> {
    pub cluster: &'a Cluster,
    /// The target's name, for the progress line and the errors.
    pub label: &'a str,
    pub job: &'a str,
    pub workers: usize,
    pub ready_timeout: Duration,
    pub pods: BTreeMap<String, Pod>,
    pub ready: Ready,
    /// The watch's last failure, for the timeout's advice.
    pub last_error: Option<String>,
    /// When the running workers may be asked again.
    pub next_ask: Option<Instant>,
}

impl<'a> WorkersReady<'a> {
    pub fn new(
        cluster: &'a Cluster,
        label: &'a str,
        job: &'a str,
        workers: usize,
        ready_timeout: Duration,
    ) -> Self {
        WorkersReady {
            cluster,
            label,
            job,
            workers,
            ready_timeout,
            pods: BTreeMap::new(),
            ready: Ready::new(),
            last_error: None,
            next_ask: None,
        }
    }

    /// Adds worker `i` to the ready once its pod runs and its endpoint says so; a pod that
    /// cannot run, or ended already, is an error.
    async fn note_if_ready(&mut self, i: u32, p: &Pod) -> Result<(), K8sError> {
        let what = || format!("load worker {i} of {} (pod {})", self.label, p.name_any());
        if let Some(why) = blocked(p) {
            return Err(K8sError::Failed {
                what: what(),
                message: why,
            });
        }
        if matches!(phase(p), "Failed" | "Succeeded") {
            return Err(K8sError::Failed {
                what: what(),
                message: format!("it ended before the start: {}", ended(p)),
            });
        }
        let pod = p.name_any();
        if phase(p) == "Running" && self.ready.get(&i) != Some(&pod) {
            let ask = control(self.cluster, &pod, None, protocol::READY);
            let answer = tokio::time::timeout(API_DEADLINE, ask).await;
            if matches!(answer, Ok(Ok(text)) if protocol::is_ready(&text)) {
                self.ready.insert(i, pod);
            }
        }
        Ok(())
    }
}

impl Condition for WorkersReady<'_> {
    type Event = PodEvent;
    type Met = Ready;

    fn seen(&mut self, event: Option<PodEvent>) -> Result<(), K8sError> {
        match event {
            Some(Ok(ev)) => fold(&mut self.pods, ev),
            Some(Err(e)) => self.last_error = Some(e.to_string()),
            None => return Err(watch_ended()),
        }
        Ok(())
    }

    async fn look(&mut self, now: Instant) -> Result<Look<Ready>, K8sError> {
        // The watch sends a burst of events as the pods come: the workers are asked at most
        // once per interval, not once per event.
        if self.next_ask.is_none_or(|t| now >= t) {
            self.next_ask = Some(now + ASK_AGAIN);
            let pods: Vec<(u32, Pod)> = self
                .pods
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| Some((index_of(p)?, p.clone())))
                .collect();
            for (i, p) in pods {
                self.note_if_ready(i, &p).await?;
            }
        }
        let (k, n) = (self.ready.len(), self.workers);
        Ok(if k == n {
            Look::Met(std::mem::take(&mut self.ready))
        } else {
            Look::Pending(format!("{}: {k}/{n} load workers ready", self.label))
        })
    }

    fn timed_out(&self, _last_line: &str) -> K8sError {
        let (k, n) = (self.ready.len(), self.workers);
        K8sError::Timeout {
            seconds: self.ready_timeout.as_secs(),
            what: format!("the load workers of {} ({k} of {n} ready)", self.label),
            advice: format!(
                "see `kubectl get pods -n {} -l {JOB_LABEL}={}`{}; fewer --workers or a --node-selector may help",
                self.cluster.namespace,
                self.job,
                self.last_error
                    .as_ref()
                    .map(|e| format!(" (last API error: {e})"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// Every started worker ended, or `until` passed (the load's end while the nginx pods are
/// watched, the last moment for stragglers after it).
pub(super) struct WorkersEnded<'a> {
    started: &'a Ready,
    /// The started pods that ended, by index; kept when the pod goes away afterwards.
    pub pods: BTreeMap<u32, Pod>,
    pub until: Instant,
}

impl<'a> WorkersEnded<'a> {
    pub fn new(started: &'a Ready, until: Instant) -> Self {
        WorkersEnded {
            started,
            pods: BTreeMap::new(),
            until,
        }
    }

    pub fn all(&self) -> bool {
        self.pods.len() == self.started.len()
    }
}

impl Condition for WorkersEnded<'_> {
    type Event = PodEvent;
    type Met = ();

    fn seen(&mut self, event: Option<PodEvent>) -> Result<(), K8sError> {
        let p = match event {
            Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => p,
            // A deleted pod's end was seen before it went, or it never ended for us.
            Some(Ok(_) | Err(_)) => return Ok(()),
            None => return Err(watch_ended()),
        };
        let Some(i) = index_of(&p) else {
            return Ok(());
        };
        // Only the pod that was started counts: a replacement never got the start.
        if self.started.get(&i) == Some(&p.name_any())
            && matches!(phase(&p), "Succeeded" | "Failed")
        {
            self.pods.insert(i, p);
        }
        Ok(())
    }

    async fn look(&mut self, now: Instant) -> Result<Look<()>, K8sError> {
        Ok(if self.all() || now >= self.until {
            Look::Met(())
        } else {
            Look::Pending(String::new())
        })
    }

    fn timed_out(&self, _last_line: &str) -> K8sError {
        // Not reached: the condition is met at its own `until`, which is the wait's deadline.
        K8sError::Failed {
            what: "the load workers' ends".into(),
            message: "the wait passed its deadline".into(),
        }
    }
}
