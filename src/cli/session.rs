//! One comparison session, as `compare`, `sweep` and `k8s load` hold it: the live views they
//! asked for (board, Prometheus endpoint, dashboard), a comparison run through
//! `compare::run` with each run labelled on the board and on stderr, then the dashboard
//! closed before the report and the endpoint lingering after it. Written once here; the
//! commands only say what differs (which comparisons, how a run is measured, where results go).

use super::args::LiveArgs;
use super::live::{self, LiveViews};
use super::StopSignals;
use crate::compare::{ComparePlan, ComparisonResult, Contender};
use crate::live::tui::Dashboard;
use crate::stats::RunResult;

/// How a command measures one run of a contender, when not on this machine (the in-cluster
/// workers of `k8s load`).
pub type RunOne<'r> = &'r (dyn Fn(&Contender) -> anyhow::Result<RunResult> + Sync);

pub struct Session<'s> {
    pub views: LiveViews,
    dashboard: Option<Dashboard>,
    /// Each run said on stderr (not when quiet, nor under the dashboard).
    say_runs: bool,
    signals: &'s StopSignals,
}

impl<'s> Session<'s> {
    /// The views `live` asks for over `contenders`, with the dashboard when `tui` (see
    /// [`live::want_tui`]), titled `title`.
    pub fn begin(
        live: &LiveArgs,
        contenders: &[Contender],
        tui: bool,
        title: String,
        say_runs: bool,
        signals: &'s StopSignals,
    ) -> anyhow::Result<Session<'s>> {
        let mut views = LiveViews::for_contenders(live, contenders)?;
        let dashboard = views.dashboard(tui, title, signals)?;
        Ok(Session {
            views,
            dashboard,
            say_runs: say_runs && !tui,
            signals,
        })
    }

    /// One comparison: each run measured by `run_one` (None: here, shown live), labelled
    /// "run N" (or "warm-up"), after `step` when given (a sweep's load); `save` after every
    /// run, so an interrupted session keeps what finished.
    pub fn compare(
        &self,
        plan: &ComparePlan,
        commands: Vec<String>,
        step: Option<&str>,
        run_one: Option<RunOne>,
        save: &mut dyn FnMut(&ComparisonResult) -> anyhow::Result<()>,
    ) -> anyhow::Result<ComparisonResult> {
        let (views, signals) = (&self.views, self.signals);
        let here = move |c: &Contender| views.measure(c, signals);
        let run_one: RunOne = match run_one {
            Some(f) => f,
            None => &here,
        };
        let mut on_run = |name: &str, n: usize, measured: bool| {
            let run = live::run_label(n, measured);
            let label = match step {
                Some(s) => format!("{s} · {run}"),
                None => run.clone(),
            };
            views.board.begin_run(name, &label);
            if self.say_runs {
                crate::stderr_line!("  {name}: {run}");
            }
        };
        crate::compare::run(plan, commands, &signals.stop, run_one, &mut on_run, save)
    }

    /// Ends the dashboard (the terminal is restored before any report prints).
    pub fn close(&mut self) {
        live::close(self.dashboard.take());
    }

    /// With `--linger`, keeps the final figures up until SIGINT or SIGTERM.
    pub fn linger(&self, interrupted: bool) {
        self.views.linger(self.signals, interrupted);
    }
}
