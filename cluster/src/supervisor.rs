//! The supervisor: the one long-lived process of a cluster. Inside the cluster's network
//! namespace it starts etcd, the API server, controller-manager, scheduler, the node agents
//! and kube-proxy, in that order, each once the one before is ready; runs the load-balancer
//! controller; and stops everything — node agents first, so pods end before the API does —
//! on SIGTERM/SIGINT, when its owner process ends (tests), or when a control-plane component
//! dies (then the cluster is not what the tests think it is).
//!
//! It reports to `up` on its stdout, one line each: `step: …` as components become ready,
//! then `ready` or `error: …`; after that its stdout goes to its log.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::components::{self, Component};
use crate::error::{ClusterError, Result};
use crate::layout::{ClusterDir, State};
use crate::netns::Netns;
use crate::process::{self, Handle, ProcessEnd};
use crate::{aggregation, lb, probe, readiness};

/// How long each component may take to become ready (a cold start on 2 busy cores).
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a node agent gets to stop its pods.
const NODE_STOP_GRACE: Duration = Duration::from_secs(20);
const COMPONENT_STOP_GRACE: Duration = Duration::from_secs(10);

/// `archbench-cluster supervise DIR`: enters the namespace (before any thread exists, so
/// every thread and child is inside) and runs the cluster until told to stop.
pub fn main(dir: &Path, owner: Option<u32>) -> Result<()> {
    let cdir = ClusterDir::new(dir);
    let state = cdir.read_state()?;
    let ns = Netns::recorded(&state.netns_path, state.netns_name.as_deref());
    ns.enter()?;
    // Checked again from inside: the namespace may have changed since `up` made it, and
    // everything started from here reaches cluster addresses. `up` reads the verdict.
    if let Err(e) = crate::netns::refuse_default_route_here(&ns.display()) {
        Report.line(&format!("error: {e}"));
        return Err(e);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClusterError::io("start the supervisor's runtime"))?;
    let result = rt.block_on(run(&cdir, &state, owner));
    // The name goes with the supervisor; the namespace itself with its last process.
    let _ = ns.delete();
    result
}

/// What `up` reads: progress lines, then the verdict.
struct Report;

impl Report {
    fn line(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// After the verdict nobody reads our stdout: send it to the log (a write to a closed
    /// pipe would fail).
    fn detach(&self, log: &Path) {
        if let Ok(f) = std::fs::OpenOptions::new().append(true).open(log) {
            // SAFETY: dup2 onto stdout of a descriptor we hold open.
            unsafe {
                libc::dup2(f.as_raw_fd(), 1);
            }
        }
    }
}

struct Cluster<'a> {
    dir: &'a ClusterDir,
    state: &'a State,
    /// Control-plane components, in start order.
    control: Vec<Handle>,
    nodes: Vec<Handle>,
    ended_tx: mpsc::UnboundedSender<(String, String)>,
}

impl Cluster<'_> {
    fn start(&mut self, c: &Component) -> Result<usize> {
        let h = process::spawn(c, &self.dir.log(&c.name), self.ended_tx.clone())?;
        self.control.push(h);
        Ok(self.control.len() - 1)
    }

    async fn ready<F, Fut>(&self, index: usize, report: &Report, check: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let h = &self.control[index];
        let took = probe::until(&h.name, &h.log, READY_WITHIN, || h.exited(), check).await?;
        report.line(&format!(
            "step: {} ready in {:.1} s",
            h.name,
            took.as_secs_f64()
        ));
        Ok(())
    }

    async fn bring_up(&mut self, report: &Report) -> Result<()> {
        let bin = self.state.kube_bin.clone();
        let dir = self.dir.clone();
        let i = self.start(&components::etcd(&bin, &dir))?;
        self.ready(i, report, || probe::http_ok("127.0.0.1:2379", "/health"))
            .await?;

        let i = self.start(&components::apiserver(&bin, &dir))?;
        let admin = probe::client(&dir.kubeconfig()).await?;
        self.ready(i, report, || probe::get_ok(&admin, "/readyz"))
            .await?;

        let cm = self.start(&components::controller_manager(&bin, &dir))?;
        let sched = self.start(&components::scheduler(
            &bin,
            &dir,
            self.state.scheduler_backoff,
        ))?;
        let cm_health =
            probe::health_client(&dir.kubeconfig(), components::CONTROLLER_MANAGER_URL).await?;
        self.ready(cm, report, || probe::get_ok(&cm_health, "/healthz"))
            .await?;
        let sched_health =
            probe::health_client(&dir.kubeconfig(), components::SCHEDULER_URL).await?;
        self.ready(sched, report, || probe::get_ok(&sched_health, "/healthz"))
            .await?;

        let this = std::env::current_exe().map_err(ClusterError::io("find this program"))?;
        for node in &self.state.nodes {
            let c = components::node_agent(&this, &dir, node);
            let h = process::spawn(&c, &dir.log(&c.name), self.ended_tx.clone())?;
            self.nodes.push(h);
        }
        let took = readiness::nodes_ready(&admin, &self.state.nodes, READY_WITHIN, || {
            self.nodes
                .iter()
                .find_map(|h| h.exited().map(|s| (h.name.clone(), s, h.log.clone())))
        })
        .await?;
        report.line(&format!(
            "step: {} nodes Ready in {:.1} s",
            self.state.nodes.len(),
            took.as_secs_f64()
        ));

        if let Some(first) = self.state.nodes.first() {
            let i = self.start(&components::kube_proxy(&bin, &dir, first))?;
            self.ready(i, report, || {
                probe::http_ok(components::KUBE_PROXY_HEALTHZ, "/healthz")
            })
            .await?;
        }
        let took = readiness::controllers_working(&admin, READY_WITHIN).await?;
        report.line(&format!(
            "step: service accounts and root CA published in {:.1} s",
            took.as_secs_f64()
        ));

        let i = self.start(&components::metrics_server(&bin, &dir))?;
        aggregation::register(&admin, &crate::pki::Pki::new(dir.pki())).await?;
        let log = self.control[i].log.clone();
        let took = tokio::select! {
            took = aggregation::available(&admin, READY_WITHIN, &log) => took?,
            _ = wait_exit(&self.control[i]) => {
                return Err(ClusterError::ComponentExited {
                    name: "metrics-server".into(),
                    status: self.control[i].exited().unwrap_or_default(),
                    log,
                })
            }
        };
        report.line(&format!(
            "step: metrics-server ready (metrics.k8s.io available) in {:.1} s",
            took.as_secs_f64()
        ));
        Ok(())
    }

    /// Node agents first (their pods end while the API still answers), then the control
    /// plane in reverse start order.
    async fn stop_all(&mut self) {
        let stops = self.nodes.iter_mut().map(|h| h.stop(NODE_STOP_GRACE));
        futures::future::join_all(stops).await;
        for h in self.control.iter_mut().rev() {
            h.stop(COMPONENT_STOP_GRACE).await;
        }
    }
}

/// What ends a running cluster: a signal, the owner's end, a control-plane component's.
struct Stops {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    owner: Option<(u32, Option<ProcessEnd>)>,
}

impl Stops {
    fn new(owner: Option<u32>) -> Result<Stops> {
        let owner = match owner {
            Some(pid) => Some((pid, ProcessEnd::watch(pid)?)),
            None => None,
        };
        Ok(Stops {
            term: signal(tokio::signal::unix::SignalKind::terminate())?,
            int: signal(tokio::signal::unix::SignalKind::interrupt())?,
            owner,
        })
    }

    /// Resolves with the reason when a signal comes or the owner ends (at once if the owner
    /// was already gone when we looked).
    async fn next(&mut self) -> String {
        let owner = async {
            match &self.owner {
                Some((pid, Some(end))) => {
                    end.ended().await;
                    format!("its owner (pid {pid}) ended")
                }
                Some((pid, None)) => format!("its owner (pid {pid}) was gone"),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.term.recv() => "SIGTERM".to_string(),
            _ = self.int.recv() => "SIGINT".to_string(),
            why = owner => why,
        }
    }
}

async fn run(dir: &ClusterDir, state: &State, owner: Option<u32>) -> Result<()> {
    let report = Report;
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let mut cluster = Cluster {
        dir,
        state,
        control: Vec::new(),
        nodes: Vec::new(),
        ended_tx,
    };
    // Listening before anything starts: a SIGTERM while it comes up stops what has started.
    let mut stops = Stops::new(owner)?;
    let started = tokio::select! {
        r = cluster.bring_up(&report) => r,
        why = stops.next() => Err(ClusterError::Invalid(format!("stopped while starting: {why}"))),
    };
    let balancer = match started {
        Ok(()) => probe::client(&dir.kubeconfig())
            .await
            .map(|admin| tokio::spawn(lb::run(admin, dir.clone()))),
        Err(e) => Err(e),
    };
    let balancer = match balancer {
        Ok(b) => b,
        Err(e) => {
            report.line(&format!("error: {e}"));
            cluster.stop_all().await;
            return Err(e);
        }
    };
    report.line("ready");
    report.detach(&dir.log("supervisor"));

    let control: Vec<String> = cluster.control.iter().map(|h| h.name.clone()).collect();
    let why = loop {
        tokio::select! {
            why = stops.next() => break why,
            Some((name, status)) = ended.recv() => {
                eprintln!("supervisor: {name} exited ({status})");
                if control.contains(&name) {
                    break format!("{name} exited ({status})");
                }
            }
        }
    };
    eprintln!("supervisor: stopping the cluster: {why}");
    balancer.abort();
    cluster.stop_all().await;
    eprintln!("supervisor: stopped");
    Ok(())
}

/// Resolves when a component has ended.
async fn wait_exit(h: &Handle) {
    let mut exit = h.exit_watch();
    let _ = exit.wait_for(Option::is_some).await;
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).map_err(ClusterError::io("listen for signals"))
}
