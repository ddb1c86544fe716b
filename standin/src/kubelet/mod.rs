//! The kubelet: pods bound to a node become real local processes.
//!
//! Each pod gets an address 127.1.x.y and, per container, a process in its own mount, UTS and
//! PID namespaces (see `sandbox`), with the pod's volumes, hostname, /etc/hosts, cgroup view
//! and (on a node of another architecture) /proc/cpuinfo mounted in. Images map to local
//! programs (`volumes::resolve`): nginx images run the host's nginx from a rewritten copy of
//! the pod's configuration (see `nginx`); archbench images run the binary the options name;
//! anything else fails to pull, as on a cluster without that image. Output goes to CRI-format
//! log files (see `logfile`); exits restart with back-off by the pod's restartPolicy.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::options::Options;
use crate::resources;
use crate::state::Shared;
use crate::store;

pub mod cgroup;
pub mod logfile;
mod nginx;
mod pod;
mod sandbox;
mod status;
pub mod volumes;

pub use pod::{ExecTarget, PodRuntime, Stop};

pub struct Kubelet {
    pods: Mutex<HashMap<String, Arc<PodRuntime>>>,
    cgroups: Option<cgroup::CgroupRoot>,
    isolate: bool,
}

impl Kubelet {
    pub fn new(dir: &Path, _opts: &Options) -> io::Result<Kubelet> {
        let isolate = sandbox::can_isolate();
        let tag = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "archbench-standin".into());
        let cgroups = if isolate {
            cgroup::CgroupRoot::create(&tag)
        } else {
            None
        };
        Ok(Kubelet {
            pods: Mutex::new(HashMap::new()),
            cgroups,
            isolate,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PodRuntime>>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts pods newly bound to a node; removes the objects of terminated, deleted pods it
    /// never ran.
    pub fn sync(&self, sh: &Arc<Shared>) {
        if sh.stopping() {
            return;
        }
        let (pods, _) = sh.store.list(&resources::PODS, None);
        for p in pods {
            let node = p
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if node.is_empty() {
                continue;
            }
            let uid = store::uid_of(&p).to_string();
            if self.lock().contains_key(&uid) {
                continue;
            }
            let deleting = p.pointer("/metadata/deletionTimestamp").is_some();
            let phase = p
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            if deleting {
                sh.store.remove(
                    &resources::PODS,
                    store::namespace_of(&p),
                    store::name_of(&p),
                );
                continue;
            }
            if phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            match PodRuntime::new(sh, &p, self.cgroups.as_ref(), self.isolate) {
                Ok(rt) => {
                    self.lock().insert(uid, rt.clone());
                    tokio::spawn(pod::run(sh.clone(), rt, p));
                }
                Err(e) => {
                    crate::controllers::events::record(
                        sh,
                        &p,
                        "Warning",
                        "FailedCreatePodSandBox",
                        &format!("Failed to create pod sandbox: {e}"),
                        "kubelet",
                    );
                }
            }
        }
    }

    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub(crate) fn find(&self, ns: &str, pod: &str) -> Option<Arc<PodRuntime>> {
        self.lock()
            .values()
            .find(|rt| rt.ns == ns && rt.name == pod)
            .cloned()
    }

    /// SIGKILL every container's main process of a pod.
    pub fn kill(&self, ns: &str, pod: &str) -> io::Result<()> {
        let rt = self.find(ns, pod).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("pod {ns}/{pod} has no processes"),
            )
        })?;
        rt.kill_all(libc::SIGKILL);
        Ok(())
    }

    /// The current run's log of a container (first when None), as `logs` shows it.
    pub fn current_log(&self, ns: &str, pod: &str, container: Option<&str>) -> Option<String> {
        let rt = self.find(ns, pod)?;
        let (path, _) = rt.log_path(container, false).ok()?;
        let data = std::fs::read(path).ok()?;
        Some(
            String::from_utf8_lossy(&logfile::render(&data, &logfile::Read::default()))
                .into_owned(),
        )
    }

    /// Kills every pod process (the cluster is going away) and waits up to `wait` for them to
    /// be gone.
    pub fn shutdown(&self, wait: Duration) {
        let pods: Vec<Arc<PodRuntime>> = self.lock().values().cloned().collect();
        for rt in &pods {
            rt.request_stop(Stop::Now);
            rt.kill_all(libc::SIGKILL);
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && pods.iter().any(|rt| rt.has_processes()) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Removes the cgroups (after `shutdown`).
    pub fn cleanup(&self) {
        let pods: Vec<Arc<PodRuntime>> = self.lock().drain().map(|(_, rt)| rt).collect();
        for rt in pods {
            rt.cleanup();
        }
        if let Some(cg) = &self.cgroups {
            cg.remove();
        }
    }

    /// Pod runtimes on a node (metrics).
    pub(crate) fn pods(&self) -> Vec<Arc<PodRuntime>> {
        self.lock().values().cloned().collect()
    }
}

/// Where a pod keeps its files.
pub fn pod_dir(cluster_dir: &Path, ns: &str, name: &str, uid: &str) -> PathBuf {
    cluster_dir
        .join("pods")
        .join(format!("{ns}_{name}_{}", &uid[..uid.len().min(8)]))
}
