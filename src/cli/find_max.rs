//! `sweep --find-max`: the search of `sweep::find_max` run target by target, each probe one
//! comparison step of that target alone (saved with the sweep as it goes, so Ctrl-C keeps
//! what was measured). A probe the client could not keep (it sent less than the rate, a
//! worker saturated, or sends late by more than a tenth of the latency the SLO allows) ends
//! the search with that reason: a rate the client did not send says nothing of the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::climb::{empty_sweep, finish_sweep, StepLoad, StepPlans, SweepSpec};
use super::flags::FindMax;
use super::session::{RunOne, Session};
use super::StopSignals;
use crate::slo::SloMetric;
use crate::stats::RunResult;
use crate::sweep::find_max::{Bisection, MaxRate, Next, RateHeld};
use crate::sweep::{SweepResult, SweepStep};

/// The search `--find-max` asks for, before its first probe: between the lowest and highest
/// of `--rates` (one rate: doubling from it, up to what one process sends), to `--precision`;
/// None without `--find-max`.
pub fn search_asked(flags: &FindMax, rates: &[f64]) -> Option<Bisection> {
    flags.find_max.then(|| {
        let (floor, ceiling) = crate::sweep::find_max::range_asked(rates);
        Bisection::new(floor, ceiling, super::plan::MAX_LOCAL_RATE, flags.precision)
    })
}

/// What the probes share.
struct Prober<'a> {
    spec: &'a SweepSpec<'a>,
    source: &'a dyn StepPlans,
    session: &'a Session<'a>,
    slo: &'a crate::slo::Slo,
    /// How a run is measured: here (None), or by a cluster's in-cluster workers.
    run_one: Option<RunOne<'a>>,
    signals: &'a StopSignals,
    /// What the server still held at the last run's end, worked off before the next.
    backlog: Backlog<'a>,
}

/// One probe: the rate and its held count, and why the client could not keep it, if so.
struct Probed {
    held: RateHeld,
    client_limited: Option<ClientShort>,
    interrupted: bool,
}

/// Searches each target's highest rate holding the SLO; the sweep with every probe as a step
/// and each target's answer.
pub fn find_max(
    spec: &SweepSpec<'_>,
    source: &dyn StepPlans,
    names: &[String],
    session: &Session<'_>,
    search: &Bisection,
    run_one: Option<RunOne>,
    signals: &StopSignals,
) -> anyhow::Result<SweepResult> {
    let mut sweep = empty_sweep(spec);
    let Some(slo) = spec.slo else {
        anyhow::bail!("--find-max needs --slo");
    };
    let prober = Prober {
        spec,
        source,
        session,
        slo,
        run_one,
        signals,
        backlog: Backlog {
            held: AtomicU64::new(0),
            quiet: spec.quiet,
            in_cluster: run_one.is_some(),
            signals,
        },
    };
    for name in names {
        if signals.stop.load(Ordering::Relaxed) {
            break;
        }
        let answer = prober.search(name, search, &mut sweep)?;
        sweep.find_max.push(answer);
        finish(&mut sweep, names, spec)?;
        if sweep.interrupted {
            break;
        }
    }
    finish(&mut sweep, names, spec)?;
    Ok(sweep)
}

/// The targets' summaries over the probes, as over a ladder's steps: the steps in order of
/// rate (each target's probes keep the order they ran in), so its knee is the highest rate
/// that met the SLO, and none when no rate did. Saved.
fn finish(sweep: &mut SweepResult, names: &[String], spec: &SweepSpec<'_>) -> anyhow::Result<()> {
    sweep.steps.sort_by(|a, b| a.load.total_cmp(&b.load));
    finish_sweep(sweep, names, spec);
    spec.outputs.save_json(sweep)
}

impl Prober<'_> {
    /// One target's search, then its boundary run again `--runs` times.
    fn search(
        &self,
        name: &str,
        search: &Bisection,
        sweep: &mut SweepResult,
    ) -> anyhow::Result<MaxRate> {
        let mut b = search.clone();
        let mut answer = MaxRate {
            name: name.to_string(),
            sustained: None,
            failed: None,
            precision: b.precision(),
            verdict: String::new(),
            probes: Vec::new(),
        };
        let end = loop {
            let next = b.next();
            let Next::Probe(rate) = next else {
                break next;
            };
            let warmup = answer.probes.is_empty() && !self.spec.no_warmup;
            let p = self.probe(name, rate, 1, warmup, sweep)?;
            if p.interrupted {
                // A probe cut short is no verdict on its rate: it is not listed as one.
                answer.verdict = "interrupted before the search ended".into();
                return Ok(answer);
            }
            answer.probes.push(p.held);
            if let Some(short) = p.client_limited {
                answer.verdict = format!(
                    "the client could not keep {} req/s ({}): no maximum found there; {}",
                    grouped_rate(rate),
                    short.why,
                    short.advice()
                );
                return Ok(answer);
            }
            b.record(rate, p.held.held_in_all());
        };
        self.check_boundary(name, &b, sweep, &mut answer)?;
        answer.verdict = verdict(end, &answer, &sweep.slo.join(","));
        Ok(answer)
    }

    /// The rates either side of the boundary run `--runs` times each (once already: the
    /// search's own probe stands for one run when --runs is 1).
    fn check_boundary(
        &self,
        name: &str,
        b: &Bisection,
        sweep: &mut SweepResult,
        answer: &mut MaxRate,
    ) -> anyhow::Result<()> {
        let runs = self.spec.runs;
        let (held, failed) = b.bounds();
        for (rate, slot) in [(held, &mut answer.sustained), (failed, &mut answer.failed)] {
            let Some(rate) = rate else { continue };
            *slot = Some(if runs > 1 {
                let p = self.probe(name, rate, runs as usize, false, sweep)?;
                answer.probes.push(p.held);
                p.held
            } else {
                answer
                    .probes
                    .iter()
                    .rev()
                    .find(|p| p.rate == rate)
                    .copied()
                    .unwrap_or(RateHeld {
                        rate,
                        held: 0,
                        runs: 0,
                    })
            });
        }
        Ok(())
    }

    /// `runs` runs of target `name` alone at `rate`, added to the sweep as a step.
    fn probe(
        &self,
        name: &str,
        rate: f64,
        runs: usize,
        warmup: bool,
        sweep: &mut SweepResult,
    ) -> anyhow::Result<Probed> {
        let load = StepLoad {
            connections: self.spec.rate_connections,
            rate: Some(rate),
        };
        let mut plan = self.source.plan(&[name.to_string()], load, warmup)?;
        plan.runs = runs;
        if !self.spec.quiet {
            crate::stderr_line!("sweep --find-max: {name} at {} req/s", grouped_rate(rate));
        }
        let commands = self.source.commands(&plan);
        let step = format!("{} req/s offered", grouped_rate(rate));
        // Each run (the probe's first, and the ones after it) after the server has worked
        // off what the run before it left.
        let (views, signals, backlog, run_one) = (
            &self.session.views,
            self.signals,
            &self.backlog,
            self.run_one,
        );
        let settled = move |c: &crate::compare::Contender| {
            backlog.settle(&c.name, &c.plan)?;
            let r = match run_one {
                Some(f) => f(c),
                None => views.measure(c, signals),
            }?;
            backlog
                .held
                .store(r.totals.unanswered_at_end, Ordering::Relaxed);
            Ok(r)
        };
        let mut comparison = self.session.compare(
            &plan,
            commands,
            Some(&step),
            Some(&settled),
            &mut |_| Ok(()),
        )?;
        let measured: Vec<&RunResult> = comparison
            .targets
            .iter()
            .flat_map(|t| t.runs.iter())
            .collect();
        let runs = measured.len() as u64;
        let held = measured
            .iter()
            .filter(|r| self.slo.judge_run(r).passed)
            .count() as u64;
        let client_limited = measured.iter().find_map(|r| meaningless(r, self.slo));
        // Each step judged as a ladder's is, for its row of the tables.
        comparison.slo = comparison.judge_slo(self.slo);
        let interrupted = comparison.interrupted;
        sweep.interrupted |= interrupted;
        sweep.steps.push(SweepStep {
            load: rate,
            comparison,
        });
        Ok(Probed {
            held: RateHeld { rate, held, runs },
            client_limited,
            interrupted,
        })
    }
}

/// How long a probe waits, at most, for the server to work off what the last one left.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// Requests the server still held when the last run of a search ended (`unanswered_at_end`),
/// and how the next run waits for them.
struct Backlog<'a> {
    held: AtomicU64,
    quiet: bool,
    /// The runs are measured by in-cluster workers, whose addresses are not reachable here.
    in_cluster: bool,
    signals: &'a StopSignals,
}

impl Backlog<'_> {
    /// Before a run, when the last one ended with requests the server still held (a server
    /// that queues: nginx's `limit_req` with a burst): one lone request at a time on one
    /// connection, until one is answered. A queue works in order, so by then what was ahead
    /// of it is done, and the run measures its own rate, not the last one's backlog (which
    /// kept its connections busy: "sent 204 of 250 req/s"). In-cluster runs start at once,
    /// and say so.
    fn settle(&self, name: &str, probe: &crate::engine::Plan) -> anyhow::Result<()> {
        let held = self.held.swap(0, Ordering::Relaxed);
        if held == 0 {
            return Ok(());
        }
        let say = |line: String| {
            if !self.quiet {
                crate::stderr_line!("sweep --find-max: {name}: {line}");
            }
        };
        if self.in_cluster {
            say(format!(
                "the server still held {held} requests at the last run's end; in-cluster \
                 runs start without waiting for them"
            ));
            return Ok(());
        }
        say(format!(
            "the server still held {held} requests at the last run's end: waiting until it \
             answers a lone request"
        ));
        let lone = crate::engine::Plan {
            connections: 1,
            threads: 1,
            stop: crate::engine::StopRule {
                duration: None,
                requests: Some(1),
                split: crate::engine::CountSplit::Pooled,
            },
            pacing: crate::engine::Pacing::Closed,
            stages: None,
            part: crate::engine::Part::WHOLE,
            start_at: None,
            ..probe.clone()
        };
        let started = Instant::now();
        while started.elapsed() < SETTLE_WITHIN {
            let out = crate::engine::run(&lone, &self.signals.stop, |_| {})?;
            if out.interrupted {
                return Ok(());
            }
            if !out.recording.total.is_empty() {
                say(format!(
                    "answered after {:.1} s",
                    started.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
        }
        say(format!(
            "no lone request was answered within {} s: the run starts on what it still holds",
            SETTLE_WITHIN.as_secs()
        ));
        Ok(())
    }
}

/// Why the client did not keep a probe's rate, and whether more connections would have: its
/// sends waited for connections busy with earlier answers (not for its CPU).
#[derive(Debug, Clone, PartialEq)]
struct ClientShort {
    why: String,
    more_connections: bool,
}

impl ClientShort {
    fn advice(&self) -> &'static str {
        if self.more_connections {
            "give it more connections (-c): its requests waited for connections still busy with earlier answers"
        } else {
            "give the client more threads or cores, or split the load with --part"
        }
    }
}

/// A share of sends held by busy connections beyond which their wait, not the client's CPU,
/// is why the schedule was not kept.
const HELD_SHARE: f64 = 0.01;

/// Why a probe's run says nothing of the server, if so: the client sent less than the rate
/// asked, one of its workers was saturated, or its sends were late by more than a tenth of the
/// latency the SLO allows (lateness a server never saw would count as its latency). Lateness
/// alone under an SLO on errors or throughput does not void a probe: the rate still arrived.
/// Sent, not answered: a server that queues what it cannot serve yet got the rate, and fails
/// on its latency.
fn meaningless(r: &RunResult, slo: &crate::slo::Slo) -> Option<ClientShort> {
    let pacing = r.pacing.as_ref()?;
    let sends = pacing.lateness.count.max(1) as f64;
    let more_connections = pacing.held_by_busy_connection as f64 > HELD_SHARE * sends;
    let short = |why: String| {
        Some(ClientShort {
            why,
            more_connections,
        })
    };
    if pacing.achieved_rate < 0.95 * pacing.target_rate {
        return short(format!(
            "it sent {:.0} of {:.0} req/s",
            pacing.achieved_rate, pacing.target_rate
        ));
    }
    if r.client.busiest_worker_percent >= crate::monitor::SATURATED * 100.0 {
        return Some(ClientShort {
            why: format!(
                "a worker was busy {:.0}% of a core",
                r.client.busiest_worker_percent
            ),
            more_connections: false,
        });
    }
    let allowed = slo
        .conditions
        .iter()
        .filter(|c| matches!(c.metric, SloMetric::Percentile(_) | SloMetric::Mean))
        .filter(|c| c.comparison.is_upper_bound())
        .map(|c| c.threshold)
        .reduce(f64::min)?;
    let late = pacing.lateness.p99_us as f64;
    if late <= allowed / 10.0 {
        return None;
    }
    short(format!(
        "p99 send lateness {late:.0} µs, over a tenth of the {allowed:.0} µs the SLO allows"
    ))
}

/// How the search ended, in one line: "sustains 1,980 req/s (p99<5ms held in 3/3 runs), fails
/// at 2,050 (0/3); bracketed within 5%".
fn verdict(end: Next, a: &MaxRate, slo: &str) -> String {
    let held = |r: &RateHeld| format!("{}/{}", r.held, r.runs);
    match (end, &a.sustained, &a.failed) {
        (Next::FailsAtFloor, _, Some(f)) => format!(
            "fails {slo} already at {} req/s, the lowest rate asked (held in {}): lower --rates",
            grouped_rate(f.rate),
            held(f)
        ),
        (Next::HoldsAtCeiling, Some(s), _) => format!(
            "holds {slo} at {} req/s (in {} runs), the top of the range: the maximum lies above; raise --rates",
            grouped_rate(s.rate),
            held(s)
        ),
        (_, Some(s), Some(f)) => {
            let noisy = if s.held_in_all() && f.held == 0 {
                String::new()
            } else {
                "; the runs at the boundary disagree: it is noisier than the precision".into()
            };
            format!(
                "sustains {} req/s ({slo} held in {} runs), fails at {} ({}); bracketed within {:.0}%{noisy}",
                grouped_rate(s.rate),
                held(s),
                grouped_rate(f.rate),
                held(f),
                a.precision * 100.0
            )
        }
        _ => "no rate was measured".into(),
    }
}

fn grouped_rate(rate: f64) -> String {
    crate::units::grouped_rounded(rate)
}
