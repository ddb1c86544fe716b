//! What `k8s load` and `k8s sweep` set up alike before they load, in the order it must
//! happen: where the load comes from (here, or in-cluster workers), the targets (the
//! variants' services and their pod watches), their placements and prices, the run's
//! directory, and with `--tls` the certificate the loads pin. It is the only maker of a
//! target's `WholeLoad`, from the flags both commands share and each run's connections and
//! rate, and the one runner of in-cluster workers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::incluster::InClusterRun;
use super::placed::placed_and_priced;
use crate::cli::k8s_args::K8sHttpArgs;
use crate::cli::output::{check_prices, results_directory};
use crate::cli::{plan, PlanError};
use crate::compare::Contender;
use crate::http::tls::PinnedCert;
use crate::k8s::{self, Cluster, LoadSelection, LoadTarget, WholeLoad};
use crate::placement::{Placement, PriceBasis};
use crate::stop::Stop;

/// What every run of a load has, whatever its step.
#[derive(Debug, Clone, Copy)]
pub struct LoadShape {
    pub threads: u64,
    pub duration: Duration,
    pub timeout: Duration,
    pub http2_streams: Option<u64>,
    /// HTTP/3 (over QUIC to the Services' UDP 443): streams per connection.
    pub http3_streams: Option<u64>,
    /// HTTP/3's `--0rtt`: each connection resumes a session fetched before the clock and
    /// sends its first requests as early data.
    pub zero_rtt: bool,
    /// https, the Secret's certificate pinned (`--tls`, and always with `--http3`).
    pub tls: bool,
}

impl LoadShape {
    /// The shape asked for; `--streams` without `--http2` or `--http3` is refused. HTTP/3 is
    /// always TLS: `--http3` pins the Secret's certificate as `--tls` does.
    pub fn of(
        http: &K8sHttpArgs,
        threads: u64,
        duration: Duration,
        timeout: Duration,
    ) -> Result<Self, PlanError> {
        if let Some(why) = http.http2.stray_streams() {
            return Err(PlanError::Invalid(why.into()));
        }
        let http3 = http.http2.http3_streams();
        Ok(LoadShape {
            threads,
            duration,
            timeout,
            http2_streams: http.streams(),
            http3_streams: http3.map(|(streams, _)| streams),
            zero_rtt: http3.is_some_and(|(_, zero_rtt)| zero_rtt),
            tls: http.tls || http.http2.http3,
        })
    }

    /// A target's whole load at `connections` (and `rate`, or `stages`, open loop), before
    /// in-cluster workers split it. Stages set its length.
    pub fn whole(
        &self,
        connections: u64,
        rate: Option<f64>,
        stages: Option<crate::stages::Stages>,
    ) -> WholeLoad {
        WholeLoad {
            http2_streams: self.http2_streams,
            http3_streams: self.http3_streams,
            zero_rtt: self.zero_rtt,
            tls: self.tls,
            connections,
            threads: self.threads,
            duration: stages
                .as_ref()
                .map_or(self.duration, |st| Duration::from_secs_f64(st.length_s())),
            rate,
            timeout: self.timeout,
            stages,
        }
    }
}

/// The flags of `k8s load` and `k8s sweep` the set-up reads.
pub struct Asked<'a> {
    pub targets: &'a [LoadSelection],
    pub prices: Option<&'a Path>,
    pub cost: &'a [(String, f64)],
    pub out_dir: &'a Path,
    pub shape: LoadShape,
    /// "k8s load", "k8s sweep": who says what went wrong.
    pub command: &'static str,
}

/// A load's set-up, made once.
pub struct LoadContext<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub cluster: &'a Cluster,
    /// None: loaded from here.
    pub how: Option<k8s::InCluster>,
    pub targets: Vec<LoadTarget>,
    pub placements: Vec<Placement>,
    /// Each target's price per hour and how it was reckoned.
    pub charged: Vec<PriceBasis>,
    /// The run's own directory under `--out-dir`, named by the time.
    pub dir: PathBuf,
    /// `--tls`: the Secret's certificate, saved in `dir`.
    pub pinned: Option<PinnedCert>,
    /// The load's shape: each step's whole load is [`LoadShape::whole`] of it.
    pub shape: LoadShape,
    command: &'static str,
}

impl<'a> LoadContext<'a> {
    pub fn new(
        runtime: &'a tokio::runtime::Runtime,
        cluster: &'a Cluster,
        how: Option<k8s::InCluster>,
        asked: &Asked<'_>,
    ) -> anyhow::Result<LoadContext<'a>> {
        let vantage = match how {
            Some(_) => k8s::Vantage::InCluster,
            None => k8s::Vantage::Outside,
        };
        let port = match (asked.shape.http3_streams, asked.shape.tls) {
            (Some(_), _) => k8s::Port::Http3,
            (None, true) => k8s::Port::Https,
            (None, false) => k8s::Port::Http,
        };
        let targets = runtime.block_on(k8s::targets(
            cluster,
            asked.targets,
            (vantage, port),
            runtime.handle(),
        ))?;
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        check_prices(asked.cost, &names)?;
        let (placements, charged) =
            placed_and_priced(runtime, cluster, &targets, asked.prices, asked.cost)?;
        let dir = results_directory(asked.out_dir)?;
        let pinned = super::tls::pinned(runtime, cluster, asked.shape.tls, &dir)?;
        Ok(LoadContext {
            runtime,
            cluster,
            how,
            targets,
            placements,
            charged,
            dir,
            pinned,
            shape: asked.shape,
            command: asked.command,
        })
    }

    /// The targets' names, in the order given.
    pub fn names(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.name.clone()).collect()
    }

    /// `target`'s contender at this whole load: its plan and its pods' watches.
    pub fn contender(
        &self,
        target: &LoadTarget,
        whole: &WholeLoad,
    ) -> Result<Contender, PlanError> {
        let plan = plan::service_plan(
            &target.url,
            target.cluster_address,
            whole,
            self.pinned.as_ref(),
        )?;
        Ok(Contender {
            name: target.name.clone(),
            plan,
            watch: target.watch.clone(),
        })
    }

    /// One run of the contender named `name` by its in-cluster workers at `whole`.
    pub fn in_cluster(
        &self,
        name: &str,
        whole: &WholeLoad,
        say: &(dyn Fn(&str) + Sync),
        stop: &Stop,
    ) -> anyhow::Result<crate::stats::RunResult> {
        let (Some(how), Some(target)) = (&self.how, self.targets.iter().find(|t| t.name == name))
        else {
            anyhow::bail!("internal error: no in-cluster target {name}");
        };
        let run = InClusterRun {
            runtime: self.runtime,
            cluster: self.cluster,
            how,
            whole,
            dir: &self.dir,
            command: self.command,
        };
        run.measure(target, say, stop)
    }
}
