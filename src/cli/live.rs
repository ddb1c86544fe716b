//! The live views a command asked for (`--prometheus`, `--linger`), fed from its runs'
//! progress.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::args::LiveArgs;
use super::{PlanError, StopSignals};
use crate::compare::Contender;
use crate::engine::{Pacing, Plan, Progress};
use crate::live::prometheus::Endpoint;
use crate::live::tui::Dashboard;
use crate::live::Board;
use crate::stats::{RunResult, ServerNow};

pub struct LiveViews {
    pub board: Arc<Board>,
    endpoint: Option<Endpoint>,
    linger: bool,
    /// The dashboard reads the board (with the endpoint, the only reader).
    dashboard_on: bool,
}

impl LiveViews {
    /// Starts what `a` asks for, showing `targets` from the first scrape or frame on; a port
    /// that cannot be bound is a usage error.
    pub fn start(a: &LiveArgs, targets: &[(&str, &Plan)]) -> Result<LiveViews, PlanError> {
        let board = Board::new();
        for (name, plan) in targets {
            board.add_target(
                name,
                &plan_line(plan),
                plan.stop.duration.map(|d| d.as_secs_f64()),
            );
        }
        let endpoint = match a.prometheus {
            Some(addr) => {
                let ep = Endpoint::start(addr, board.clone())
                    .map_err(|e| PlanError::Invalid(e.to_string()))?;
                crate::stderr_line!("archbench: live metrics on http://{}/metrics", ep.addr());
                Some(ep)
            }
            None => None,
        };
        Ok(LiveViews {
            board,
            endpoint,
            linger: a.linger,
            dashboard_on: false,
        })
    }

    /// [`LiveViews::start`] for the targets of a comparison or sweep.
    pub fn for_contenders(a: &LiveArgs, contenders: &[Contender]) -> Result<LiveViews, PlanError> {
        let targets: Vec<(&str, &Plan)> = contenders
            .iter()
            .map(|c| (c.name.as_str(), &c.plan))
            .collect();
        LiveViews::start(a, &targets)
    }

    /// One run of a contender from this machine, shown live as it goes.
    pub fn measure(&self, c: &Contender, signals: &StopSignals) -> anyhow::Result<RunResult> {
        let r = super::execute::measure_sources(&c.plan, &c.watch, &signals.stop, |p, servers| {
            self.update(&c.name, p, servers)
        });
        self.board.finish_run(&c.name);
        r
    }

    pub fn update(&self, name: &str, p: &Progress, servers: &[ServerNow]) {
        // Four times a second a since-start histogram is made and read: not for nobody.
        if self.endpoint.is_some() || self.dashboard_on {
            self.board.update(name, p, servers);
        }
    }

    /// With `--linger`, after a run that was not interrupted: serves the final figures until
    /// SIGINT or SIGTERM.
    pub fn linger(&self, signals: &StopSignals, interrupted: bool) {
        let Some(ep) = &self.endpoint else { return };
        if !self.linger || interrupted {
            return;
        }
        crate::stderr_line!(
            "archbench: --linger: the final figures stay on http://{}/metrics until Ctrl-C",
            ep.addr()
        );
        // Waiting for the user, as asked: the signal handler sets the flag.
        while !signals.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // That signal ended the lingering, not the run: the run's own status stands.
        signals.stop.store(false, Ordering::Relaxed);
    }
}

/// Runs shorter than this get progress lines, not the dashboard, unless --tui asks.
const TUI_FROM: Duration = Duration::from_secs(5);

/// Whether to show the dashboard: as asked, else on an interactive terminal for a text report
/// of a run long enough to watch. `--tui` without a terminal on stdout is a usage error.
pub fn want_tui(
    a: &LiveArgs,
    quiet: bool,
    text_output: bool,
    planned: Option<Duration>,
) -> Result<bool, PlanError> {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if a.tui {
        return if terminal {
            Ok(true)
        } else {
            Err(PlanError::Invalid(
                "--tui needs a terminal on stdin and stdout; drop it for progress lines".into(),
            ))
        };
    }
    Ok(!a.no_tui && terminal && !quiet && text_output && planned.is_some_and(|d| d >= TUI_FROM))
}

impl LiveViews {
    /// The dashboard over these views when `show` (see [`want_tui`]); `q` or Ctrl-C in it
    /// stops the load as SIGINT would.
    pub fn dashboard(
        &mut self,
        show: bool,
        title: String,
        signals: &StopSignals,
    ) -> anyhow::Result<Option<Dashboard>> {
        if !show {
            return Ok(None);
        }
        self.dashboard_on = true;
        Ok(Some(Dashboard::start(
            self.board.clone(),
            title,
            signals.as_if_interrupted(),
        )?))
    }
}

/// How a comparison's run is called on the dashboard and in progress lines.
pub fn run_label(n: usize, measured: bool) -> String {
    if measured {
        format!("run {n}")
    } else {
        "warm-up".to_string()
    }
}

/// Ends the dashboard, restoring the terminal. Its own failure (a thread that panicked) is
/// said on stderr and costs nothing else: the run's results are still saved and reported.
pub fn close(dashboard: Option<Dashboard>) {
    if let Some(Err(e)) = dashboard.map(Dashboard::finish) {
        crate::stderr_line!("archbench: the dashboard failed: {e}; the results follow");
    }
}

/// "GET http://host/ · 50 connections · closed loop · 10s".
pub fn plan_line<A>(plan: &Plan<A>) -> String {
    let pacing = match plan.pacing {
        Pacing::Closed => "closed loop".to_string(),
        Pacing::Open { rate, .. } => format!("{rate} req/s"),
    };
    let mut line = format!(
        "{} {} · {} connections · {pacing}",
        plan.request.method, plan.target.redacted_url, plan.connections
    );
    if let Some(d) = plan.stop.duration {
        line.push_str(&format!(" · {}", super::plan::duration_arg(d)));
    }
    if let Some(n) = plan.stop.requests {
        line.push_str(&format!(" · {n} requests"));
    }
    line
}
