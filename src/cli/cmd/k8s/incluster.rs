//! Loads from inside the cluster, for `k8s load` and `k8s sweep`: the settings checked
//! before any cluster is asked, and one run of a target by its workers (an Indexed Job),
//! their own results saved beside the merge.

use crate::cli::args::LiveArgs;
use crate::cli::k8s_args::K8sInClusterArgs;
use crate::cli::PlanError;
use crate::k8s::{self, Cluster};

/// The in-cluster settings of `k8s load` and `k8s sweep`, checked before any cluster is
/// asked; `fewest` is the fewest connections of any run (every worker needs one).
pub fn in_cluster(
    l: &K8sInClusterArgs,
    live: &LiveArgs,
    fewest: u64,
) -> Result<Option<k8s::InCluster>, PlanError> {
    if l.in_cluster && (live.prometheus.is_some() || live.tui) {
        return Err(PlanError::Invalid(
            "--prometheus and --tui show load measured by this process; --in-cluster workers report only when they end".into(),
        ));
    }
    if !l.in_cluster {
        return Ok(None);
    }
    let workers = worker_count(l.workers.unwrap_or(1))?;
    if u64::from(workers) > fewest {
        return Err(PlanError::Invalid(format!(
            "--workers {workers} is more than -c {fewest}: every worker needs a connection"
        )));
    }
    Ok(Some(k8s::InCluster {
        workers,
        image: l.image.clone(),
        node_selector: l.node_selector.clone(),
        ready_timeout: l.wait.wait_timeout,
        spell: crate::cli::argv::agent_args,
    }))
}

/// `--workers N`: 1 to [`k8s::MAX_WORKERS`] load pods per target.
pub fn worker_count(n: u64) -> Result<u32, PlanError> {
    u32::try_from(n)
        .ok()
        .filter(|w| (1..=k8s::MAX_WORKERS).contains(&u64::from(*w)))
        .ok_or_else(|| {
            PlanError::Invalid(format!(
                "--workers {n}: give 1 to {} load pods per target",
                k8s::MAX_WORKERS
            ))
        })
}

/// One run of a target by its in-cluster workers, their own results kept beside the merge.
pub struct InClusterRun<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub cluster: &'a Cluster,
    pub how: &'a k8s::InCluster,
    pub whole: &'a k8s::WholeLoad,
    /// The run's results directory (workers' files under `workers/<job>/`).
    pub dir: &'a std::path::Path,
    /// "k8s load", "k8s sweep": who says what went wrong.
    pub command: &'static str,
}

impl InClusterRun<'_> {
    pub fn measure(
        &self,
        target: &k8s::LoadTarget,
        say: &(dyn Fn(&str) + Sync),
        stop: &crate::stop::Stop,
    ) -> anyhow::Result<crate::stats::RunResult> {
        let d = k8s::distributed::run(
            self.runtime,
            self.cluster,
            target,
            self.how,
            self.whole,
            say,
            stop,
        )?;
        if let Some(why) = &d.leftover {
            crate::stderr_line!("archbench {}: {why}", self.command);
        }
        // Each worker's own result, histograms included: `archbench merge` merges them again.
        // A file that cannot be written costs that file, not the merged run.
        let workers_dir = self.dir.join("workers").join(&d.job);
        let saved = std::fs::create_dir_all(&workers_dir).and_then(|()| {
            d.workers.iter().try_for_each(|(i, text)| {
                std::fs::write(workers_dir.join(format!("worker-{i}.json")), text)
            })
        });
        if let Err(e) = saved {
            crate::stderr_line!(
                "archbench {}: cannot save the workers' results under {}: {e}",
                self.command,
                workers_dir.display()
            );
        }
        for lost in &d.merged.lost_sources {
            crate::stderr_line!(
                "archbench {}: {}: {} lost ({}); the figures lack its {} connections",
                self.command,
                target.name,
                lost.name,
                lost.reason,
                lost.connections
            );
        }
        Ok(d.merged)
    }
}
