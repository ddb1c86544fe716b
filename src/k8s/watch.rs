//! Watching nginx pods during a load: a [`WatchSource`] whose sampler reads the pod's own
//! cgroup through one long-running exec (a loop printing the counters every 250 ms), so a
//! sample costs no API round trip. It follows the variant's pod across restarts (the
//! counters of a new container start again at zero, so the old ones are carried over) and
//! says so.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::AttachParams;
use kube::{Api, ResourceExt};
use tokio::io::AsyncBufReadExt;

use super::pods::{pick, CONTAINER};
use super::usage::{parse_cgroup, CgroupReading, READ_CGROUP};
use super::Cluster;
use crate::monitor::{MonitorError, OpenedWatch, ResourceSample, ResourceSampler, WatchSource};

/// The pods of one variant, watched through the API server.
#[derive(Clone)]
pub struct PodWatch {
    pub label: String,
    /// The variant's name ("arm", "arm-large").
    pub variant: String,
    pub cluster: Cluster,
    /// The runtime the exec streams run on (the monitor's thread is not async).
    pub runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for PodWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PodWatch({}, {})", self.label, self.variant)
    }
}

/// What the streaming task shares with the sampler.
#[derive(Default)]
struct Shared {
    /// The latest reading of the current container, and CPU carried over from earlier ones.
    latest: Option<CgroupReading>,
    carried: CgroupTotals,
    /// The pod being read and its containers' restart count when the stream began.
    pod: String,
    events: Vec<String>,
    /// Why the stream ended for good.
    ended: Option<String>,
}

#[derive(Default, Clone, Copy)]
struct CgroupTotals {
    usage_usec: u64,
    user_usec: u64,
    system_usec: u64,
}

impl WatchSource for PodWatch {
    fn label(&self) -> &str {
        &self.label
    }

    fn target(&self) -> String {
        format!(
            "pod:{}/nginx-{}-deployment",
            self.cluster.namespace, self.variant
        )
    }

    fn open(&self) -> Result<OpenedWatch, MonitorError> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let first = self.runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(30),
                start_stream(self.clone(), shared.clone()),
            )
            .await
        });
        match first {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                return Err(MonitorError::Read {
                    path: self.target(),
                    source: std::io::Error::other(why),
                })
            }
            Err(_) => {
                return Err(MonitorError::Read {
                    path: self.target(),
                    source: std::io::Error::other("no cgroup reading within 30 s"),
                })
            }
        }
        // The pod's own nginx -V (and the outline-atomics warning on its node), so every
        // report says which build each variant ran; a pod that refuses the exec keeps none.
        let fingerprint = self
            .runtime
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(30),
                    super::inspect::fingerprint(&self.cluster, &self.variant),
                )
                .await
            })
            .ok()
            .and_then(Result::ok)
            .map(|f| f.nginx)
            .unwrap_or_default();
        Ok(OpenedWatch {
            sampler: Box::new(PodSampler {
                shared,
                started: Instant::now(),
            }),
            fingerprint,
            counters: None,
            counters_unavailable: Vec::new(),
        })
    }
}

/// Starts the stream for the arch's current pod and returns once its first reading is in;
/// the stream then runs on, and re-attaches to the arch's pod when its container or pod is
/// replaced, until the sampler is dropped (it holds the only other reference to `shared`).
async fn start_stream(w: PodWatch, shared: Arc<Mutex<Shared>>) -> Result<(), String> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    let mut ready_tx = Some(ready_tx);
    let started = Instant::now();
    tokio::spawn(async move {
        let mut attempts = 0u32;
        loop {
            if Arc::strong_count(&shared) == 1 {
                return; // the sampler is gone
            }
            let outcome = stream_once(&w, &shared, &mut ready_tx).await;
            let finished = {
                let Ok(mut s) = shared.lock() else { return };
                // Carry the old container's counters over to the next one.
                if let Some(last) = s.latest.take() {
                    s.carried.usage_usec += last.usage_usec;
                    s.carried.user_usec += last.user_usec.unwrap_or(0);
                    s.carried.system_usec += last.system_usec.unwrap_or(0);
                }
                let gave_up = match outcome {
                    Err(why) => {
                        attempts += 1;
                        (attempts >= 20).then_some(why)
                    }
                    Ok(()) => {
                        attempts = 0;
                        None
                    }
                };
                match gave_up {
                    Some(why) => {
                        s.ended = Some(why.clone());
                        Some(why)
                    }
                    None => {
                        let note = format!(
                            "the cgroup stream of {} ended {:.1} s in; following the {} pod",
                            s.pod,
                            started.elapsed().as_secs_f64(),
                            w.variant
                        );
                        s.events.push(note);
                        None
                    }
                }
            };
            if let Some(why) = finished {
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(Err(why));
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    ready_rx
        .await
        .unwrap_or_else(|_| Err("the cgroup stream stopped".into()))
}

/// One exec of the reading loop in the arch's pod, until it ends.
async fn stream_once(
    w: &PodWatch,
    shared: &Arc<Mutex<Shared>>,
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
) -> Result<(), String> {
    let pod = pick(&w.cluster, &w.variant, None)
        .await
        .map_err(|e| e.to_string())?;
    let name = pod.name_any();
    {
        let mut s = shared.lock().map_err(|_| "poisoned".to_string())?;
        if !s.pod.is_empty() && s.pod != name {
            let note = format!("pod {} was replaced by {name}", s.pod);
            s.events.push(note);
        }
        s.pod = name.clone();
    }
    let api: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(w.cluster.client.clone(), &w.cluster.namespace);
    let script = format!("while :; do {READ_CGROUP}; echo ---; sleep 0.25; done");
    let params = AttachParams::default()
        .container(CONTAINER)
        .stdout(true)
        .stderr(false);
    let mut process = api
        .exec(&name, ["sh".to_string(), "-c".into(), script], &params)
        .await
        .map_err(|e| format!("exec in {name}: {e}"))?;
    let stdout = process
        .stdout()
        .ok_or_else(|| "the exec has no stdout".to_string())?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut block = String::new();
    loop {
        if Arc::strong_count(shared) == 1 {
            process.abort();
            return Ok(());
        }
        match lines.next_line().await {
            Ok(Some(line)) if line == "---" => {
                if let Some(reading) = parse_cgroup(&block) {
                    if let Ok(mut s) = shared.lock() {
                        s.latest = Some(reading);
                    }
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(Ok(()));
                    }
                } else if let Some(tx) = ready.take() {
                    let _ = tx.send(Err(format!(
                        "no cgroup counters readable in {name} (neither cpu.stat nor cpuacct.usage)"
                    )));
                    return Err("no cgroup counters".into());
                }
                block.clear();
            }
            Ok(Some(line)) => {
                block.push_str(&line);
                block.push('\n');
            }
            Ok(None) | Err(_) => return Ok(()),
        }
    }
}

struct PodSampler {
    shared: Arc<Mutex<Shared>>,
    started: Instant,
}

impl ResourceSampler for PodSampler {
    fn sample(&mut self) -> Result<ResourceSample, MonitorError> {
        let s = self.shared.lock().map_err(|_| MonitorError::Read {
            path: "pod stream".into(),
            source: std::io::Error::other("poisoned"),
        })?;
        if let Some(why) = &s.ended {
            return Err(MonitorError::Read {
                path: format!("the cgroup of {}", s.pod),
                source: std::io::Error::other(format!(
                    "{why} ({:.1} s in)",
                    self.started.elapsed().as_secs_f64()
                )),
            });
        }
        let latest = s.latest.unwrap_or(CgroupReading {
            usage_usec: 0,
            user_usec: None,
            system_usec: None,
            memory_bytes: 0,
            cpu_limit_cores: None,
        });
        let usage = s.carried.usage_usec + latest.usage_usec;
        let (user, system) = match (latest.user_usec, latest.system_usec) {
            (Some(u), Some(sy)) => (s.carried.user_usec + u, s.carried.system_usec + sy),
            // Without the split, count it all as user time.
            _ => (usage, 0),
        };
        Ok(ResourceSample {
            cpu_user_s: user as f64 / 1e6,
            cpu_system_s: system as f64 / 1e6,
            memory_bytes: latest.memory_bytes,
            context_switches: 0,
            processes: 1,
            busiest_thread_demand_s: None,
            cpu_limit_cores: latest.cpu_limit_cores,
        })
    }

    fn events(&mut self) -> Vec<String> {
        self.shared
            .lock()
            .map(|mut s| std::mem::take(&mut s.events))
            .unwrap_or_default()
    }
}
