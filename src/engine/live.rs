//! Latency as the run goes: each worker records every response's total latency a second
//! time, into the histogram of the current quarter second ([`TICK`]), and hands that
//! histogram over when the interval is over — one channel send per worker and interval, never
//! a lock or an allocation per request (spent histograms come back to be reused). The calling
//! thread adds the intervals of all workers up: per second into the run's latency series
//! (exact, merged like any histogram), and for live views the last interval and the whole run
//! so far.

use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::stats::{Buckets, ErrorKind, LatencySeries, HIGHEST_US, LOWEST_US, SIGNIFICANT_DIGITS};

/// A histogram with the run's precision and floor (so it adds exactly into the run's) that
/// grows with the largest value it holds: a quarter second of latencies under 2 ms takes 16 KiB
/// of counts instead of the 136 KiB of one sized for 60 s, and with several per worker that is
/// most of a run's memory. It grows at most a few dozen times; recycled ones keep their size.
fn interval_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(LOWEST_US, 2 * LOWEST_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid");
    h.auto(true);
    h
}

/// How often workers hand over their interval histograms.
pub const TICK: Duration = Duration::from_millis(250);

/// Intervals per second of the latency series.
const TICKS_PER_SECOND: u32 = 4;

/// How long after an interval's end a worker still takes responses into it: in the open loop
/// small responses are read at the next send's wake-up (up to 5 ms late) and placed by their
/// kernel arrival time, which may lie in the interval just over.
const GRACE: Duration = Duration::from_millis(20);

/// One worker's interval, handed to the collector.
pub struct Shipment {
    worker: usize,
    interval: u32,
    /// The worker will ship no interval below this one again (`u32::MAX`: it has finished).
    upto: u32,
    latency: Option<Histogram<u64>>,
    /// The exact sum of the latencies in `latency`, in microseconds.
    latency_sum_us: u64,
    errors: [u64; ErrorKind::COUNT],
}

/// A worker's side: the histograms of the interval it is in and the next one.
pub struct IntervalShipper {
    worker: usize,
    start: Instant,
    tx: Sender<Shipment>,
    spares: Receiver<Histogram<u64>>,
    /// The oldest interval not yet shipped; `slots[0]` holds it, `slots[1]` the next.
    interval: u32,
    /// When `interval` and the next one end: a response is placed by two comparisons.
    ends: (Instant, Instant),
    slots: [Slot; 2],
    /// Histograms it had to make because no spare was back (a hand-over, not a request, but
    /// the histogram then grows while responses are recorded into it).
    made: u32,
}

struct Slot {
    latency: Histogram<u64>,
    /// Histograms keep counts per bucket, not the values: the exact sum is kept beside
    /// (Prometheus' `_sum`, a mean that is not rounded to buckets).
    latency_sum_us: u64,
    errors: [u64; ErrorKind::COUNT],
}

impl Slot {
    fn new(latency: Histogram<u64>) -> Slot {
        Slot {
            latency,
            latency_sum_us: 0,
            errors: [0; ErrorKind::COUNT],
        }
    }

    fn is_empty(&self) -> bool {
        self.latency.is_empty() && self.errors.iter().all(|&e| e == 0)
    }
}

impl IntervalShipper {
    /// Records a response's total latency at `at` (when it ended).
    #[inline]
    pub fn response(&mut self, at: Instant, total_us: u64) {
        let k = self.slot_for(at);
        // As the run's histogram records it: values beyond its top count at its top.
        let v = total_us.min(HIGHEST_US);
        let slot = &mut self.slots[k];
        let _ = slot.latency.record(v);
        slot.latency_sum_us += v;
    }

    /// Counts a failed request at `at`.
    #[inline]
    pub fn error(&mut self, at: Instant, kind: ErrorKind) {
        let k = self.slot_for(at);
        self.slots[k].errors[kind as usize] += 1;
    }

    /// Ships the intervals over by more than the grace, as the loop passes `now`.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        if now >= self.ends.0 + GRACE {
            let t = now
                .saturating_duration_since(self.start)
                .saturating_sub(GRACE);
            self.ship_until(Self::index_of(t));
        }
    }

    /// Ships what is left: the worker has finished.
    pub fn finish(&mut self) {
        self.ship_until(u32::MAX);
    }

    fn index(&self, at: Instant) -> u32 {
        Self::index_of(at.saturating_duration_since(self.start))
    }

    /// The interval `t` after the start lies in (capped below `u32::MAX`, which means "done").
    fn index_of(t: Duration) -> u32 {
        u32::try_from(t.as_nanos() / TICK.as_nanos()).unwrap_or(u32::MAX - 1)
    }

    fn interval_end(&self, interval: u32) -> Instant {
        super::after(self.start, TICK.as_secs_f64() * (f64::from(interval) + 1.0))
    }

    /// The slot a record at `at` goes to, shipping older intervals when `at` lies beyond
    /// the next one. A record from before the oldest unshipped interval (later than the
    /// grace) counts in that interval.
    #[inline]
    fn slot_for(&mut self, at: Instant) -> usize {
        if at < self.ends.0 {
            0
        } else if at < self.ends.1 {
            1
        } else {
            let k = self.index(at);
            // Intervals before k - 1 ended over a tick ago (longer than the grace).
            self.ship_until(k - 1);
            1
        }
    }

    /// Ships every interval below `until`; a stretch with nothing recorded is skipped with
    /// one message saying so.
    fn ship_until(&mut self, until: u32) {
        while self.interval < until {
            if self.slots[0].is_empty() && self.slots[1].is_empty() {
                self.set_interval(until);
                self.send(until, until, None, 0, [0; ErrorKind::COUNT]);
                return;
            }
            let shipped = self.interval;
            if self.slots[0].is_empty() {
                self.send(shipped, shipped + 1, None, 0, [0; ErrorKind::COUNT]);
            } else {
                let spare = self.spares.try_recv().unwrap_or_else(|_| {
                    self.made += 1;
                    interval_histogram()
                });
                let slot = std::mem::replace(&mut self.slots[0], Slot::new(spare));
                self.send(
                    shipped,
                    shipped + 1,
                    Some(slot.latency),
                    slot.latency_sum_us,
                    slot.errors,
                );
            }
            // The next interval's slot becomes the oldest; the emptied one takes the next.
            self.slots.swap(0, 1);
            self.set_interval(shipped + 1);
        }
    }

    fn set_interval(&mut self, k: u32) {
        self.interval = k;
        self.ends = (self.interval_end(k), self.interval_end(k.saturating_add(1)));
    }

    fn send(
        &self,
        interval: u32,
        upto: u32,
        latency: Option<Histogram<u64>>,
        latency_sum_us: u64,
        errors: [u64; ErrorKind::COUNT],
    ) {
        // The collector outlives the workers; should it be gone, the figures have no reader.
        let _ = self.tx.send(Shipment {
            worker: self.worker,
            interval,
            upto,
            latency,
            latency_sum_us,
            errors,
        });
    }
}

/// Intervals of history kept for live views: a minute.
pub const HISTORY: usize = 240;

/// One interval's counts, for sparklines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalCounts {
    /// Its index from the start ([`TICK`] each).
    pub interval: u32,
    pub completed: u64,
    pub errors: u64,
}

impl Drop for IntervalShipper {
    /// A worker that ends without finishing (an error out of its loop) must not hold back
    /// the other workers' intervals.
    fn drop(&mut self) {
        self.finish();
    }
}

/// What the intervals of all workers added up to so far: complete intervals only, so every
/// figure here is exact for the time it covers.
#[derive(Debug, Clone)]
pub struct LiveLatency {
    /// Every response since the start, as buckets ([`LiveLatency::since_start`] gives the
    /// histogram).
    since_start: Buckets,
    /// The exact sum of every latency in `since_start`, in microseconds.
    pub latency_sum_us: u64,
    pub errors_since_start: [u64; ErrorKind::COUNT],
    /// The latest complete intervals, oldest first (at most [`HISTORY`]; intervals in which
    /// nothing ended are there with zeros).
    pub history: std::collections::VecDeque<IntervalCounts>,
    /// The recent intervals that make up `last_second`, as buckets (a full histogram each
    /// would cost a run at -c10000 more memory than its connections).
    recent: std::collections::VecDeque<(u32, Buckets)>,
}

impl LiveLatency {
    fn new() -> LiveLatency {
        LiveLatency {
            since_start: Buckets::default(),
            latency_sum_us: 0,
            errors_since_start: [0; ErrorKind::COUNT],
            history: std::collections::VecDeque::with_capacity(HISTORY + 1),
            recent: std::collections::VecDeque::with_capacity(TICKS_PER_SECOND as usize + 1),
        }
    }

    /// The last second: the latest four complete intervals (a histogram made on request, so
    /// that a run nobody watches keeps no full histogram for it).
    pub fn last_second(&self) -> Histogram<u64> {
        let mut h = interval_histogram();
        for (_, b) in &self.recent {
            b.record_into(&mut h);
        }
        h
    }

    /// Every response since the start, as a histogram made on request.
    pub fn since_start(&self) -> Histogram<u64> {
        let mut h = interval_histogram();
        self.since_start.record_into(&mut h);
        h
    }

    /// Complete intervals up to `last` in which nothing ended: zeros in the history, and the
    /// last second slides on without them (a stalled server shows as one).
    fn advance_to(&mut self, last: u32) {
        let mut next = self.history.back().map_or(0, |c| c.interval + 1);
        if last >= next.saturating_add(HISTORY as u32) {
            // A long silence: only its last minute is kept.
            self.history.clear();
            next = last + 1 - HISTORY as u32;
        }
        while next <= last {
            self.push_counts(IntervalCounts {
                interval: next,
                completed: 0,
                errors: 0,
            });
            next += 1;
        }
        self.slide(last);
    }

    /// Drops from the last second the intervals older than a second before `newest`.
    fn slide(&mut self, newest: u32) {
        while self
            .recent
            .front()
            .is_some_and(|(k, _)| k + TICKS_PER_SECOND <= newest)
        {
            self.recent.pop_front();
        }
    }

    fn add(
        &mut self,
        interval: u32,
        buckets: Buckets,
        completed: u64,
        latency_sum_us: u64,
        errors: [u64; ErrorKind::COUNT],
    ) {
        // Intervals in between in which nothing ended count as zeros.
        if interval > 0 {
            self.advance_to(interval - 1);
        }
        self.push_counts(IntervalCounts {
            interval,
            completed,
            errors: errors.iter().sum(),
        });
        self.since_start.add(&buckets);
        self.latency_sum_us += latency_sum_us;
        for (a, b) in self.errors_since_start.iter_mut().zip(errors) {
            *a += b;
        }
        // The last second slides: the new interval in, those now older out.
        self.recent.push_back((interval, buckets));
        self.slide(interval);
    }

    fn push_counts(&mut self, c: IntervalCounts) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(c);
    }
}

/// An interval some worker has not shipped yet.
struct Pending {
    interval: u32,
    /// The workers' latencies added up, in a histogram of the collector's own.
    latency: Option<Histogram<u64>>,
    latency_sum_us: u64,
    errors: [u64; ErrorKind::COUNT],
}

/// The calling thread's side: adds up the workers' intervals.
pub struct Collector {
    rx: Receiver<Shipment>,
    spares: Vec<Sender<Histogram<u64>>>,
    /// Per worker: the interval it will ship next at the earliest.
    upto: Vec<u32>,
    /// Intervals not every worker has shipped yet.
    pending: Vec<Pending>,
    /// Emptied histograms for the pending intervals' sums.
    free: Vec<Histogram<u64>>,
    series: LatencySeries,
    live: LiveLatency,
}

/// The collector and one shipper per worker.
pub fn channels(workers: usize, start: Instant) -> (Collector, Vec<IntervalShipper>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut spares = Vec::with_capacity(workers);
    let mut shippers = Vec::with_capacity(workers);
    for worker in 0..workers {
        let (spare_tx, spare_rx) = std::sync::mpsc::channel();
        // Two spares each from the start: a worker ships an interval a tick after the one
        // before, while its histogram of that one may not be back yet (it comes back at the
        // collector's next drain).
        for _ in 0..2 {
            let _ = spare_tx.send(interval_histogram());
        }
        spares.push(spare_tx);
        shippers.push(IntervalShipper {
            worker,
            start,
            tx: tx.clone(),
            spares: spare_rx,
            interval: 0,
            ends: (
                super::after(start, TICK.as_secs_f64()),
                super::after(start, 2.0 * TICK.as_secs_f64()),
            ),
            slots: [
                Slot::new(interval_histogram()),
                Slot::new(interval_histogram()),
            ],
            made: 0,
        });
    }
    let collector = Collector {
        rx,
        spares,
        upto: vec![0; workers],
        pending: Vec::new(),
        free: Vec::new(),
        series: LatencySeries::default(),
        live: LiveLatency::new(),
    };
    (collector, shippers)
}

impl Collector {
    /// Takes what the workers have shipped; returns whether an interval was completed.
    pub fn drain(&mut self) -> bool {
        let mut completed = false;
        while let Ok(s) = self.rx.try_recv() {
            self.take(s);
            completed |= self.complete_intervals();
        }
        completed
    }

    fn take(&mut self, s: Shipment) {
        if let Some(u) = self.upto.get_mut(s.worker) {
            *u = (*u).max(s.upto);
        }
        let has_errors = s.errors.iter().any(|&e| e > 0);
        if s.latency.is_none() && !has_errors {
            return;
        }
        let i = match self.pending.iter().position(|p| p.interval == s.interval) {
            Some(i) => i,
            None => {
                let at = self
                    .pending
                    .iter()
                    .position(|p| p.interval > s.interval)
                    .unwrap_or(self.pending.len());
                self.pending.insert(
                    at,
                    Pending {
                        interval: s.interval,
                        latency: None,
                        latency_sum_us: 0,
                        errors: [0; ErrorKind::COUNT],
                    },
                );
                at
            }
        };
        let entry = &mut self.pending[i];
        entry.latency_sum_us += s.latency_sum_us;
        for (a, b) in entry.errors.iter_mut().zip(s.errors) {
            *a += b;
        }
        if let Some(h) = s.latency {
            let sum = entry
                .latency
                .get_or_insert_with(|| self.free.pop().unwrap_or_else(interval_histogram));
            // Same floor and precision everywhere, so adding is exact; the worker's histogram
            // goes straight back to it.
            let _ = sum.add(&h);
            self.recycle(s.worker, h);
        }
    }

    fn recycle(&self, worker: usize, mut h: Histogram<u64>) {
        h.reset();
        if let Some(tx) = self.spares.get(worker) {
            let _ = tx.send(h);
        }
    }

    /// Adds up the intervals every worker has passed.
    fn complete_intervals(&mut self) -> bool {
        let done_below = self.upto.iter().copied().min().unwrap_or(u32::MAX);
        let mut completed = false;
        while self
            .pending
            .first()
            .is_some_and(|p| p.interval < done_below)
        {
            let p = self.pending.remove(0);
            self.add_interval(p.interval, p.latency.as_ref(), p.latency_sum_us, p.errors);
            if let Some(mut h) = p.latency {
                h.reset();
                self.free.push(h);
            }
            completed = true;
        }
        // Intervals every worker passed without a response or error in them.
        if done_below > 0 && done_below != u32::MAX {
            let newest = self.live.history.back().map(|c| c.interval);
            if newest.is_none_or(|n| n + 1 < done_below) {
                self.live.advance_to(done_below - 1);
                completed = true;
            }
        }
        completed
    }

    fn add_interval(
        &mut self,
        interval: u32,
        h: Option<&Histogram<u64>>,
        latency_sum_us: u64,
        errors: [u64; ErrorKind::COUNT],
    ) {
        // Into its second of the series (steps add buckets exactly) and the live view.
        let (buckets, count) = match h {
            Some(h) => (Buckets::of(h), h.len()),
            None => (Buckets::default(), 0),
        };
        if count > 0 {
            self.series
                .add_buckets(interval / TICKS_PER_SECOND, &buckets);
        }
        self.live
            .add(interval, buckets, count, latency_sum_us, errors);
    }

    /// What the intervals completed so far add up to.
    pub fn live(&self) -> &LiveLatency {
        &self.live
    }

    /// The series of the whole run, once every worker has finished (their last shipments
    /// sent before they ended).
    pub fn finish(&mut self) -> LatencySeries {
        self.drain();
        // Workers that never shipped (a failed start) hold nothing back.
        for u in &mut self.upto {
            *u = u32::MAX;
        }
        self.complete_intervals();
        std::mem::take(&mut self.series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency_histogram;

    #[test]
    fn intervals_add_up_per_second_and_keep_every_count() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(2, start);
        let at = |ms: u64| start + Duration::from_millis(ms);
        let (a, rest) = shippers.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut rest[0]);
        // Worker a answers in the first three quarters and in second 2; b only in second 0
        // and again at 2.9 s, after a silence.
        for ms in [10, 260, 510, 2_100] {
            a.response(at(ms), ms);
        }
        b.response(at(20), 5);
        b.error(at(30), ErrorKind::Timeout);
        // a is past its first interval by more than the grace: shipped; b has not moved on, so
        // nothing is complete yet.
        a.tick(at(300));
        assert!(!c.drain());
        b.tick(at(300));
        assert!(c.drain());
        let live = c.live();
        assert_eq!(
            live.history.back(),
            Some(&IntervalCounts {
                interval: 0,
                completed: 2,
                errors: 1
            })
        );
        assert_eq!(live.since_start().len(), 2);
        assert_eq!(live.last_second().len(), 2);
        assert_eq!(live.errors_since_start[ErrorKind::Timeout as usize], 1);
        // The exact sum of the complete intervals' latencies, not bucket midpoints.
        assert_eq!(live.latency_sum_us, 10 + 5);
        b.response(at(2_900), 7);
        a.finish();
        b.finish();
        let series = c.finish().to_steps().unwrap();
        assert_eq!(c.live().latency_sum_us, 10 + 260 + 510 + 2_100 + 5 + 7);
        assert_eq!(
            series
                .iter()
                .map(|s| (s.second, s.count))
                .collect::<Vec<_>>(),
            vec![(0, 4), (2, 2)]
        );
        assert_eq!(series[0].max_us, 510);
    }

    #[test]
    fn a_late_arrival_within_the_grace_lands_in_its_own_interval() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(1, start);
        let w = &mut shippers[0];
        let at = |ms: u64| start + Duration::from_millis(ms);
        w.response(at(999), 1);
        // The loop is already past the second, but within the grace…
        w.tick(at(1_010));
        // …and a response read now that arrived before it ends still counts in second 0.
        w.response(at(998), 2);
        w.response(at(1_005), 3);
        w.finish();
        let s = c.finish().to_steps().unwrap();
        assert_eq!(
            s.iter().map(|s| (s.second, s.count)).collect::<Vec<_>>(),
            vec![(0, 2), (1, 1)]
        );
    }

    #[test]
    fn the_last_second_slides_and_the_history_has_every_interval() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(1, start);
        let w = &mut shippers[0];
        for k in 0..10u32 {
            if k != 3 {
                w.response(
                    start + TICK * k + Duration::from_millis(1),
                    u64::from(k + 1) * 10,
                );
            }
        }
        w.finish();
        c.finish();
        let live = c.live();
        // Intervals 6 to 9: values 70, 80, 90, 100.
        assert_eq!(live.last_second().len(), 4);
        assert_eq!(live.last_second().min(), 70);
        assert_eq!(live.since_start().len(), 9);
        let counts: Vec<u64> = live.history.iter().map(|c| c.completed).collect();
        assert_eq!(counts, [1, 1, 1, 0, 1, 1, 1, 1, 1, 1]);
        assert_eq!(live.history.back().map(|c| c.interval), Some(9));
    }

    #[test]
    fn a_stall_shows_as_zeros_and_an_emptying_last_second() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(1, start);
        let w = &mut shippers[0];
        w.response(start + Duration::from_millis(10), 100);
        w.response(start + Duration::from_millis(20), 200);
        // Then nothing ends for 5 s; the worker's loop goes on ticking.
        for k in 1..=20u32 {
            w.tick(start + TICK * k + GRACE);
            c.drain();
        }
        let live = c.live();
        assert_eq!(
            live.last_second().len(),
            0,
            "the stalled second holds nothing"
        );
        assert_eq!(live.since_start().len(), 2);
        assert_eq!(live.history.len(), 20);
        assert!(live.history.iter().skip(1).all(|c| c.completed == 0));
        assert_eq!(live.history.back().map(|c| c.interval), Some(19));
    }

    #[test]
    fn a_worker_dropped_without_finishing_holds_nothing_back() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(2, start);
        shippers[1].response(start + Duration::from_millis(5), 7);
        shippers[1].tick(start + TICK + GRACE);
        // Worker 0 failed before its loop: its shipper is dropped, not finished.
        drop(shippers.remove(0));
        c.drain();
        assert_eq!(c.live().since_start().len(), 1);
    }

    #[test]
    fn values_land_in_the_buckets_of_the_runs_histogram_even_beyond_its_top() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(1, start);
        let mut run = latency_histogram();
        for v in [0, 1, 999, 1_234_567, 59_999_999, 120_000_000] {
            shippers[0].response(start + Duration::from_millis(1), v);
            run.saturating_record(v);
        }
        shippers[0].finish();
        let steps = c.finish().to_steps().unwrap();
        assert_eq!(steps[0].decode().unwrap(), run);
        // The sum counts a value beyond the top as the histogram does: at the top.
        assert_eq!(
            c.live().latency_sum_us,
            1 + 999 + 1_234_567 + 59_999_999 + HIGHEST_US
        );
    }

    #[test]
    fn spent_histograms_come_back_to_their_worker() {
        let start = Instant::now();
        let (mut c, mut shippers) = channels(2, start);
        let (a, rest) = shippers.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut rest[0]);
        for k in 0..20u32 {
            let end = start + TICK * (k + 1) + GRACE;
            a.response(
                start + TICK * k + Duration::from_millis(1),
                u64::from(k) + 1,
            );
            a.tick(end);
            // b lags: it passes intervals two at a time, so they complete a tick late.
            b.response(start + TICK * k + Duration::from_millis(2), 1);
            if k % 2 == 1 {
                b.tick(end);
            }
            c.drain();
        }
        // Each histogram came back at the next drain, whether its interval was complete
        // or not: neither worker had to make one.
        assert_eq!((a.made, b.made), (0, 0));
        a.finish();
        b.finish();
        assert_eq!(c.finish().count(), 40);
    }
}
