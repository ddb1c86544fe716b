//! The worker loop every protocol runs, written once: the wait for the common start, the first
//! requests, then poll → readiness → sends → chores (timeouts, the rate sample) → progress,
//! until the stop rule (deadline, nothing left to send) or the stop flag. A protocol plugs
//! in through [`Protocol`]: how it waits (its send timer armed), what a ready socket does,
//! what it sends after an event batch, what expires. HTTP/1.1 (`worker`) and HTTP/2 (`h2`)
//! are its two; a third fits without touching the loop.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::Events;

use super::clients::ClientSpans;
use super::worker_base::{
    wait_for_start, WorkerOutcome, WorkerSpec, MAX_POLL_WAIT, RATE_SAMPLE, TIMER,
};
use super::{EngineError, WorkerProgress};
use crate::stats::{QuicFigures, Recorder};

/// What a readiness event says of one connection's socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Readiness {
    /// Bytes (or an end, or an error) to read.
    pub readable: bool,
    pub writable: bool,
    /// The peer closed or the socket failed: edge-triggered, no further edge comes, so the
    /// socket is read to its end now.
    pub closed: bool,
}

/// One protocol's part of a worker.
pub(super) trait Protocol {
    /// The worker's spec (start, deadline, timeout, the live interval shipper).
    fn spec(&mut self) -> &mut WorkerSpec;
    /// The worker's recording.
    fn recorder(&mut self) -> &mut Recorder;
    /// Its clients' spans (one per connection slot).
    fn clients(&mut self) -> &mut ClientSpans;
    /// When its first request went out.
    fn first_send(&self) -> Option<Instant>;
    /// The first requests: closed loop at once, open loop each at its place in the schedule.
    fn begin(&mut self);
    /// Nothing is left to send (every connection parked, a script stopped the load).
    fn finished(&self) -> bool;
    /// One poll into `events`, waking by `wake` at the latest; the protocol arms its send
    /// timer for a due send before that and does not wait when one is due now.
    fn wait(&mut self, events: &mut Events, wake: Instant, now: Instant)
        -> Result<(), EngineError>;
    /// Connection `conn`'s socket is ready.
    fn on_event(&mut self, conn: usize, ready: Readiness);
    /// After an event batch: the requests that became ready, and those due by `now`.
    fn send(&mut self, now: Instant);
    /// Fails what ran past its timeout.
    fn expire(&mut self, now: Instant);
    /// Requests sent (some of their bytes written) that are neither answered nor failed: at
    /// the run's end, the ones the server still held.
    fn unanswered(&self) -> u64;
    /// The run's end, before its recording is taken (a protocol that counts per connection
    /// adds the connections still open).
    fn finish(&mut self) {}
    /// Its QUIC figures as they stand, the open connections' counters included, for live
    /// views (a protocol over QUIC).
    fn quic_now(&mut self) -> Option<QuicFigures> {
        None
    }
}

/// Runs `p` until the stop rule or `stop`; its recording and whether `stop` ended it.
pub(super) fn run<P: Protocol>(
    mut p: P,
    stop: &AtomicBool,
    progress: &WorkerProgress,
) -> Result<WorkerOutcome, EngineError> {
    progress
        .tid
        .store(crate::os::this_thread_id(), Ordering::Relaxed);
    let mut events = Events::with_capacity(1024);
    let start = p.spec().start;
    let waited = wait_for_start(start, stop);
    // The thread's CPU and demand from here on: what it spent before the start (its script
    // compiled, its buffers made) is not the run's, and made a 5 ms run's worker "135% busy".
    let before = Usage::now();
    if !waited {
        return Ok(outcome(&mut p, true, Instant::now(), before));
    }
    p.begin();
    let mut chores = Chores::new(start, p.spec().timeout);
    let deadline = p.spec().deadline;
    let mut interrupted = false;
    let stopped_at = loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break now;
        }
        if deadline.is_some_and(|d| now >= d) || p.finished() {
            break now;
        }
        let mut wake = chores.next().min(now + MAX_POLL_WAIT);
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        p.wait(&mut events, wake, now)?;
        for ev in events.iter() {
            if ev.token() == TIMER {
                // It only wakes the loop; the due sends go out below.
                continue;
            }
            let closed = ev.is_read_closed() || ev.is_error();
            let ready = Readiness {
                readable: ev.is_readable() || closed,
                writable: ev.is_writable(),
                closed,
            };
            p.on_event(ev.token().0, ready);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            // Nothing goes out once the run is over: a request sent now would be answered
            // after it, logged by the server and counted by nobody.
            break now;
        }
        p.send(now);
        chores.run(&mut p, now, progress);
        let rec = p.recorder();
        let (completed, errors) = (rec.completed, rec.error_total());
        progress.completed.store(completed, Ordering::Relaxed);
        progress.errors.store(errors, Ordering::Relaxed);
        progress.bytes_read.store(rec.bytes_read, Ordering::Relaxed);
        p.spec().live.tick(now);
    };
    // Closing thousands of sockets takes time that is not part of the measurement.
    Ok(outcome(&mut p, interrupted, stopped_at, before))
}

/// A thread's CPU time (user, system) and demand (ran or waited to run) so far.
struct Usage {
    cpu_s: (f64, f64),
    demand_s: Option<f64>,
}

impl Usage {
    fn now() -> Usage {
        Usage {
            cpu_s: crate::os::thread_cpu(),
            demand_s: crate::os::this_thread_demand_s(),
        }
    }

    /// What the thread used since `before`.
    fn since(before: &Usage) -> Usage {
        let now = Usage::now();
        Usage {
            cpu_s: (
                (now.cpu_s.0 - before.cpu_s.0).max(0.0),
                (now.cpu_s.1 - before.cpu_s.1).max(0.0),
            ),
            demand_s: now
                .demand_s
                .zip(before.demand_s)
                .map(|(n, b)| (n - b).max(0.0)),
        }
    }
}

/// A poll that an interrupted system call ended early is no failure.
pub(super) fn polled(result: io::Result<()>) -> Result<(), EngineError> {
    match result {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(EngineError::Poll(e)),
        _ => Ok(()),
    }
}

fn outcome<P: Protocol>(
    p: &mut P,
    interrupted: bool,
    stopped_at: Instant,
    before: Usage,
) -> WorkerOutcome {
    // Taken before the sockets close, as `stopped_at` is.
    let used = Usage::since(&before);
    let unanswered = p.unanswered();
    p.recorder().unanswered_at_end += unanswered;
    p.finish();
    let clients = std::mem::replace(p.clients(), ClientSpans::new(0));
    let bounded_by_count = p.spec().tickets.bounded();
    clients.record(p.recorder(), bounded_by_count, stopped_at);
    p.spec().live.finish();
    WorkerOutcome {
        recording: std::mem::replace(p.recorder(), Recorder::new(None)),
        first_send: p.first_send(),
        interrupted,
        stopped_at,
        cpu_s: used.cpu_s,
        demand_s: used.demand_s,
    }
}

/// The shortest period of the timeout scan: a request timeout below it could not be kept
/// (answers slower than it would pass as successes), so plans refuse one.
pub const TIMEOUT_SCAN_MIN: Duration = Duration::from_millis(1);

/// The worker's housekeeping beside the requests: the timeout scan, the rate sample and the
/// QUIC counters for live views, each with its next time.
struct Chores {
    scan_every: Duration,
    next_scan: Instant,
    next_rate: Instant,
    next_publish: Instant,
    /// When the last rate sample was taken, and the completed count then.
    rate_mark: (Instant, u64),
}

impl Chores {
    fn new(start: Instant, timeout: Duration) -> Chores {
        let scan_every = (timeout / 10).clamp(TIMEOUT_SCAN_MIN, RATE_SAMPLE);
        Chores {
            scan_every,
            next_scan: start + scan_every,
            next_rate: start + RATE_SAMPLE,
            next_publish: start + super::live::TICK,
            rate_mark: (start, 0),
        }
    }

    /// The next chore's time.
    fn next(&self) -> Instant {
        self.next_scan.min(self.next_rate).min(self.next_publish)
    }

    /// Does the chores that are due by `now`.
    fn run<P: Protocol>(&mut self, p: &mut P, now: Instant, progress: &WorkerProgress) {
        if now >= self.next_scan {
            p.expire(now);
            self.next_scan = now + self.scan_every;
        }
        if now >= self.next_rate {
            let ms = now.duration_since(self.rate_mark.0).as_secs_f64() * 1000.0;
            let rec = p.recorder();
            let done = rec.completed - self.rate_mark.1;
            // As wrk: a sample with nothing done is not taken, and its time counts in the
            // next sample's (a run that answered nothing has no rate at all).
            if done > 0 {
                rec.worker_rate
                    .saturating_record((done as f64 * 1000.0 / ms) as u64);
                self.rate_mark = (now, rec.completed);
            }
            self.next_rate += RATE_SAMPLE;
        }
        if now >= self.next_publish {
            // A summing scan of the open connections: once a tick, not per request.
            if let Some(q) = p.quic_now() {
                progress.publish_quic(q);
            }
            self.next_publish += super::live::TICK;
        }
    }
}
