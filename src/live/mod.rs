//! Live views of a running load: one producer (each target's progress, four times a second,
//! into a [`Board`]), several readers (the Prometheus endpoint, the terminal dashboard).
//! Nothing here touches the hot path: the board is updated from the engine's calling thread
//! with what the workers already handed over.

pub mod prometheus;
pub mod tui;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::live::{HISTORY, TICK};
use crate::engine::Progress;
use crate::monitor::SATURATED;
use crate::stats::{step_covered, ErrorKind, LatencySummary, QuicFigures, ServerNow};

/// Latency bucket bounds of the Prometheus histogram, in microseconds (upper bounds; +Inf
/// follows): 1-2-5 per decade from 10 µs, so `histogram_quantile` lands within a bucket of
/// at most 2.5× of the run's own percentile even on loopback (from 100 µs it read 199 µs
/// where the run's p99 was 123 µs).
pub const BUCKETS_US: [u64; 22] = [
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
    500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, 60_000_000,
];

/// A watched server with a little history.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLive {
    pub now: ServerNow,
    /// Cores used, per sample, oldest first (a minute at most).
    pub cpu_history: VecDeque<f64>,
    pub memory_history: VecDeque<u64>,
}

/// One target's load as it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetLive {
    pub name: String,
    /// The load in one line (URL, connections, pacing, duration).
    pub plan: String,
    /// "run 2", "warm-up", or "" for a single run.
    pub run_label: String,
    pub planned_s: Option<f64>,
    pub elapsed_s: f64,
    /// The run has ended (its last progress is in).
    pub finished: bool,
    /// Answered and failed, from the workers' counters (the freshest figures).
    pub completed: u64,
    pub errors: u64,
    /// Requests per second of each of the latest intervals, oldest first.
    pub rps_history: Vec<f64>,
    /// Errors by kind of the complete intervals: of every run of this target so far, and of
    /// the current run.
    pub errors_by_kind: [u64; ErrorKind::COUNT],
    pub run_errors_by_kind: [u64; ErrorKind::COUNT],
    pub last_second: LatencySummary,
    pub since_start: LatencySummary,
    /// Cumulative counts of responses at or under each of [`BUCKETS_US`] (every run of
    /// this target so far).
    pub buckets: [u64; BUCKETS_US.len()],
    /// Answered requests of every run of this target so far (complete intervals): the
    /// histogram's count too.
    pub answered_total: u64,
    /// The exact sum of their latencies, in microseconds.
    pub latency_sum_us: u64,
    /// Each worker's demand now (ran + waited, as a share of a core).
    pub worker_busy: Vec<Option<f64>>,
    pub servers: Vec<ServerLive>,
    /// QUIC counters of every run of this target so far (HTTP/3 only).
    pub quic: Option<QuicFigures>,
    /// Totals of this target's earlier runs, which the counters above go on from.
    before: Totals,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Totals {
    answered: u64,
    latency_sum_us: u64,
    errors_by_kind: [u64; ErrorKind::COUNT],
    buckets: [u64; BUCKETS_US.len()],
    quic: Option<QuicFigures>,
}

impl TargetLive {
    /// A target before its first progress.
    pub fn new(name: &str, plan: &str, planned_s: Option<f64>) -> TargetLive {
        TargetLive {
            name: name.to_string(),
            plan: plan.to_string(),
            run_label: String::new(),
            planned_s,
            elapsed_s: 0.0,
            finished: false,
            completed: 0,
            errors: 0,
            rps_history: Vec::new(),
            errors_by_kind: [0; ErrorKind::COUNT],
            run_errors_by_kind: [0; ErrorKind::COUNT],
            last_second: LatencySummary::default(),
            since_start: LatencySummary::default(),
            buckets: [0; BUCKETS_US.len()],
            answered_total: 0,
            latency_sum_us: 0,
            worker_busy: Vec::new(),
            servers: Vec::new(),
            quic: None,
            before: Totals::default(),
        }
    }

    fn update(&mut self, p: &Progress, servers: &[ServerNow]) {
        let l = p.latency;
        let b = &self.before;
        self.elapsed_s = p.elapsed.as_secs_f64();
        self.completed = p.completed;
        self.errors = p.errors;
        let tick = TICK.as_secs_f64();
        let elapsed = self.elapsed_s;
        self.rps_history = l
            .history
            .iter()
            .filter_map(|c| {
                // The interval a run was stopped in (q, a signal) is rated over the part of
                // it the run lasted.
                let covered = step_covered(f64::from(c.interval) * tick, tick, elapsed)?;
                Some(c.completed as f64 / covered)
            })
            .collect();
        self.run_errors_by_kind = l.errors_since_start;
        for (k, e) in self.errors_by_kind.iter_mut().enumerate() {
            *e = b.errors_by_kind[k] + l.errors_since_start[k];
        }
        self.last_second = LatencySummary::of(&l.last_second());
        let since_start = l.since_start();
        self.since_start = LatencySummary::of(&since_start);
        let h = &since_start;
        for (k, bound) in BUCKETS_US.iter().enumerate() {
            // HdrHistogram counts a value by its bucket: at 3 digits a bound may take in
            // values up to 0.1% above it.
            let at_or_under = if h.is_empty() {
                0
            } else {
                h.count_between(0, *bound)
            };
            self.buckets[k] = b.buckets[k] + at_or_under;
        }
        self.answered_total = b.answered + h.len();
        self.latency_sum_us = b.latency_sum_us + l.latency_sum_us;
        self.worker_busy = p.worker_busy.to_vec();
        self.quic = match (&b.quic, &p.quic) {
            (Some(before), Some(now)) => {
                let mut all = before.clone();
                all.add(now);
                Some(all)
            }
            (before, now) => now.clone().or_else(|| before.clone()),
        };
        for now in servers {
            match self.servers.iter_mut().find(|s| s.now.label == now.label) {
                Some(s) => {
                    // One history point per new sample.
                    if s.now.at_s != now.at_s {
                        push_capped(&mut s.cpu_history, now.cores);
                        push_capped(&mut s.memory_history, now.memory_bytes);
                    }
                    s.now = now.clone();
                }
                None => self.servers.push(ServerLive {
                    now: now.clone(),
                    cpu_history: VecDeque::from([now.cores]),
                    memory_history: VecDeque::from([now.memory_bytes]),
                }),
            }
        }
    }

    /// Requests per second of the latest complete interval.
    pub fn rps_now(&self) -> f64 {
        self.rps_history.last().copied().unwrap_or(0.0)
    }

    /// Who limits the load right now, in a few words.
    pub fn limiter(&self) -> String {
        limiter_now(&self.worker_busy, &self.servers)
    }

    /// A new run of this target begins: what the last one counted stays in the totals.
    fn begin_run(&mut self, label: &str) {
        self.before = Totals {
            answered: self.answered_total,
            latency_sum_us: self.latency_sum_us,
            errors_by_kind: self.errors_by_kind,
            buckets: self.buckets,
            quic: self.quic.clone(),
        };
        self.run_label = label.to_string();
        self.finished = false;
        self.elapsed_s = 0.0;
        self.completed = 0;
        self.errors = 0;
        self.rps_history.clear();
        self.run_errors_by_kind = [0; ErrorKind::COUNT];
        self.last_second = LatencySummary::default();
        self.since_start = LatencySummary::default();
    }
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == HISTORY {
        q.pop_front();
    }
    q.push_back(v);
}

/// Who limits the load right now: a busy worker, a server at its CPU limit, or neither.
pub fn limiter_now(worker_busy: &[Option<f64>], servers: &[ServerLive]) -> String {
    let busiest = worker_busy
        .iter()
        .flatten()
        .copied()
        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))));
    let client = busiest.is_some_and(|b| b >= SATURATED);
    let limited: Vec<String> = servers
        .iter()
        .filter_map(|s| {
            let limit = s.now.limit_cores?;
            (s.now.cores >= SATURATED * limit).then(|| {
                format!(
                    "{} at its CPU limit ({:.2} of {:.2} cores)",
                    s.now.label, s.now.cores, limit
                )
            })
        })
        .collect();
    match (client, limited.is_empty()) {
        (true, true) => format!(
            "client: a worker is busy {:.0}% of a core",
            busiest.unwrap_or(0.0) * 100.0
        ),
        (true, false) => format!("client and server: {}", limited.join("; ")),
        (false, false) => format!("server: {}", limited.join("; ")),
        // No server watched: nothing says it is not saturated.
        (false, true) if servers.is_empty() => match busiest {
            Some(b) => format!(
                "client not saturated (busiest worker {:.0}%); server not watched",
                b * 100.0
            ),
            None => "server not watched".to_string(),
        },
        (false, true) => match busiest {
            Some(b) => format!("neither saturated (busiest worker {:.0}%)", b * 100.0),
            None => "neither saturated".to_string(),
        },
    }
}

/// Every target's live figures, shared between the runs that produce them and the views that
/// read them.
#[derive(Debug, Default)]
pub struct Board {
    targets: Mutex<Vec<TargetLive>>,
}

impl Board {
    pub fn new() -> Arc<Board> {
        Arc::new(Board::default())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<TargetLive>> {
        // A view that panicked while holding the lock leaves figures that are still whole.
        self.targets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a target (in the order its views show them).
    pub fn add_target(&self, name: &str, plan: &str, planned_s: Option<f64>) {
        let mut t = self.lock();
        if !t.iter().any(|x| x.name == name) {
            t.push(TargetLive::new(name, plan, planned_s));
        }
    }

    /// `name`'s load changed (a sweep's next step).
    pub fn set_plan(&self, name: &str, plan: &str, planned_s: Option<f64>) {
        if let Some(t) = self.lock().iter_mut().find(|t| t.name == name) {
            t.plan = plan.to_string();
            t.planned_s = planned_s;
        }
    }

    /// A run of `name` begins ("run 2", "warm-up").
    pub fn begin_run(&self, name: &str, label: &str) {
        if let Some(t) = self.lock().iter_mut().find(|t| t.name == name) {
            t.begin_run(label);
        }
    }

    /// The latest progress of `name`'s run.
    pub fn update(&self, name: &str, p: &Progress, servers: &[ServerNow]) {
        if let Some(t) = self.lock().iter_mut().find(|t| t.name == name) {
            t.update(p, servers);
        }
    }

    /// `name`'s run has ended.
    pub fn finish_run(&self, name: &str) {
        if let Some(t) = self.lock().iter_mut().find(|t| t.name == name) {
            t.finished = true;
        }
    }

    /// How many targets there are.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A copy of every target's figures now.
    pub fn snapshot(&self) -> Vec<TargetLive> {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(label: &str, cores: f64, limit: Option<f64>) -> ServerLive {
        ServerLive {
            now: ServerNow {
                label: label.into(),
                target: "pid:1".into(),
                cores,
                limit_cores: limit,
                memory_bytes: 1 << 20,
                at_s: 1.0,
            },
            cpu_history: VecDeque::new(),
            memory_history: VecDeque::new(),
        }
    }

    #[test]
    fn the_live_limiter_names_who_is_saturated() {
        assert_eq!(
            limiter_now(&[Some(0.97), Some(0.5)], &[]),
            "client: a worker is busy 97% of a core"
        );
        assert_eq!(
            limiter_now(&[Some(0.4)], &[server("web", 1.95, Some(2.0))]),
            "server: web at its CPU limit (1.95 of 2.00 cores)"
        );
        assert_eq!(
            limiter_now(&[Some(0.4)], &[server("web", 1.95, None)]),
            "neither saturated (busiest worker 40%)"
        );
        assert_eq!(
            limiter_now(&[Some(0.4)], &[]),
            "client not saturated (busiest worker 40%); server not watched"
        );
        assert_eq!(limiter_now(&[None], &[]), "server not watched");
        assert_eq!(
            limiter_now(&[None], &[server("web", 0.5, None)]),
            "neither saturated"
        );
    }
    /// A target's throughput figures after a run of one worker that answered `at_ms` and was
    /// stopped at `stopped_ms`.
    fn rates_after(at_ms: &[u64], stopped_ms: u64) -> Vec<f64> {
        use std::time::{Duration, Instant};
        let start = Instant::now();
        let (mut collector, mut shippers) = crate::engine::live::channels(1, start);
        for ms in at_ms {
            shippers[0].response(start + Duration::from_millis(*ms), 100);
        }
        shippers[0].finish();
        collector.finish();
        let mut t = TargetLive::new("t", "", None);
        t.update(
            &Progress {
                elapsed: Duration::from_millis(stopped_ms),
                completed: at_ms.len() as u64,
                errors: 0,
                bytes_read: 0,
                latency: collector.live(),
                worker_busy: &[],
                quic: None,
                stuck: None,
            },
            &[],
        );
        // To a millionth: the rate of a tenth of a second is not exact in binary.
        t.rps_history
            .iter()
            .map(|r| (r * 1e6).round() / 1e6)
            .collect()
    }

    #[test]
    fn the_interval_a_run_stopped_in_is_rated_over_what_it_lasted() {
        let quarter = |n: usize, from: u64| (0..n as u64).map(move |k| from + k);
        let mut at: Vec<u64> = quarter(10, 10).chain(quarter(10, 260)).collect();
        // Stopped at 0.6 s: 5 responses in the tenth of a second of the third quarter.
        at.extend(quarter(5, 510));
        assert_eq!(rates_after(&at, 600), vec![40.0, 40.0, 50.0]);
        // Stopped 20 ms into it: a sliver, left out.
        at.truncate(20);
        at.push(505);
        assert_eq!(rates_after(&at, 520), vec![40.0, 40.0]);
    }
}
