//! The open loop over stream slots, written once for the protocols that multiplex (HTTP/2 and
//! HTTP/3): every slot of every connection is one sender of the schedule, as a connection is
//! for HTTP/1.1 (sender k of N at k / rate, then every N / rate). A due request whose slot is
//! still busy goes out the moment it frees, timed from its due time and counted as held by a
//! busy connection. A send timer (timerfd) wakes the worker at each due time; sends due within
//! the pacing slack go out in the same wake-up, early, each timed from its actual send.
//!
//! A worker plugs in through [`Slots`]: where a slot keeps its next due time, whether it is
//! idle, and how it begins (or queues) a request.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use mio::Poll;

use super::worker_base::{micros, Cadence, SendTimer, WorkerSpec};
use super::{EngineError, Pacing};
use crate::stats::Recorder;

/// The schedule: each slot's next due time, soonest first, and the timer.
pub(super) struct SlotSchedule {
    /// When each sender's requests are due (all senders of the load share it).
    cadence: Cadence,
    slack: Duration,
    /// Slots waiting for their due time: (due, connection, slot).
    due: BinaryHeap<Reverse<(Instant, usize, usize)>>,
    timer: SendTimer,
}

impl SlotSchedule {
    /// The open loop's schedule for `slots` per connection; None for the closed loop.
    pub fn new(
        spec: &WorkerSpec,
        slots: usize,
        poll: &Poll,
    ) -> Result<Option<SlotSchedule>, EngineError> {
        let (Pacing::Open { slack, .. }, Some(cadence)) = (
            spec.pacing,
            Cadence::of(spec, spec.total_connections * slots),
        ) else {
            return Ok(None);
        };
        Ok(Some(SlotSchedule {
            cadence,
            slack,
            // One entry per slot, and room for as many again: it never grows.
            due: BinaryHeap::with_capacity(spec.connections * slots * 2),
            timer: SendTimer::new(poll).map_err(EngineError::Poll)?,
        }))
    }

    /// How long the poll may wait (until `wake` at the latest), the send timer armed for the
    /// next due time; zero when a send is due within the slack now.
    pub fn arm(&mut self, wake: Instant, now: Instant) -> Result<Duration, EngineError> {
        let wait = wake.saturating_duration_since(now);
        let Some(&Reverse((due, _, _))) = self.due.peek() else {
            return Ok(wait);
        };
        if due <= now + self.slack {
            return Ok(Duration::ZERO);
        }
        self.timer.arm(due, now).map_err(EngineError::Poll)?;
        Ok(wait)
    }
}

/// A worker's slots, as the open loop needs them.
pub(super) trait Slots {
    fn schedule(&mut self) -> Option<&mut SlotSchedule>;
    fn spec(&self) -> &WorkerSpec;
    fn recorder(&mut self) -> &mut Recorder;
    /// Where slot `s` of connection `i` keeps its next due time.
    fn next_due(&mut self, i: usize, s: usize) -> &mut Instant;
    /// Neither in flight nor waiting for a stream, nor done.
    fn idle(&self, i: usize, s: usize) -> bool;
    /// Begins the slot's next request, timed from `intended`; false when none was begun (no
    /// ticket left, or the run is over).
    fn request_at(&mut self, i: usize, s: usize, intended: Instant, now: Instant) -> bool;
    /// Takes a ticket and queues the slot's next request without sending it (the next
    /// settle or timeout scan does); false when none was queued.
    fn queue(&mut self, i: usize, s: usize, now: Instant) -> bool;
    /// Times the slot's queued request from `intended` rather than from its queueing.
    fn set_intended(&mut self, i: usize, s: usize, intended: Instant);
    /// Writes what connection `i` has queued (once per connection per batch of sends).
    fn flush(&mut self, i: usize);
    /// A count-bounded run's tickets are all taken.
    fn tickets_spent(&self) -> bool;
    /// Slot `s` of connection `i` will send nothing more.
    fn park(&mut self, i: usize, s: usize);
}

/// Once a count-bounded run's last ticket is taken, the slots waiting for their due time will
/// send nothing more: they park now, not at that time (up to a whole period of the schedule
/// later, which stretched the run and understated the rate it achieved).
fn park_waiting_if_spent<W: Slots>(w: &mut W) {
    if !w.tickets_spent() {
        return;
    }
    while let Some(Reverse((due, i, s))) = w.schedule().and_then(|o| o.due.pop()) {
        if w.idle(i, s) && *w.next_due(i, s) == due {
            w.park(i, s);
        }
    }
}

/// The first requests of the open loop: each slot at its place in the schedule (slot s of
/// global connection g is sender g + s * all connections).
pub(super) fn begin<W: Slots>(w: &mut W, conns: usize, slots: usize) {
    let Some(cadence) = w.schedule().map(|o| o.cadence.clone()) else {
        return;
    };
    for i in 0..conns {
        for s in 0..slots {
            let spec = w.spec();
            let g = spec.schedule.first + spec.schedule.stride * i;
            let k = g + s * spec.total_connections;
            let due = cadence.first(k);
            *w.next_due(i, s) = due;
            if let Some(o) = w.schedule() {
                o.due.push(Reverse((due, i, s)));
            }
        }
    }
}

/// Slot `s`'s next request after one ended at `now`: closed loop at once; open loop at its
/// next due time, or at once (late, timed from the due time) when that has passed.
pub(super) fn after_response<W: Slots>(w: &mut W, i: usize, s: usize, now: Instant) {
    if w.schedule().is_none() {
        w.request_at(i, s, now, now);
        return;
    }
    let due = advance(w, i, s);
    if due <= now {
        let sent = Instant::now();
        // Counted only when a request went out: the last response of a run whose tickets
        // are spent frees a slot that sends nothing.
        if w.request_at(i, s, due, sent) {
            let rec = w.recorder();
            rec.sends_held_by_busy_connection += 1;
            rec.sent_late(micros(sent.saturating_duration_since(now)));
        }
    } else if let Some(o) = w.schedule() {
        o.due.push(Reverse((due, i, s)));
    }
    park_waiting_if_spent(w);
}

/// Moves slot `s`'s next due time on by its cadence; the new one.
fn advance<W: Slots>(w: &mut W, i: usize, s: usize) -> Instant {
    let prev = *w.next_due(i, s);
    let due = w.schedule().map_or(prev, |o| o.cadence.next(prev));
    *w.next_due(i, s) = due;
    due
}

/// After a failure the worker handles itself (a connect, a timeout): slot `s`'s next request
/// queued, not sent, so a failing connect cannot recurse (the next settle or timeout scan
/// connects); open loop: at its next due time, queued at once if that has passed.
pub(super) fn retry_later<W: Slots>(w: &mut W, i: usize, s: usize, now: Instant) {
    if w.schedule().is_none() {
        w.queue(i, s, now);
        return;
    }
    let due = advance(w, i, s);
    if due > now {
        if let Some(o) = w.schedule() {
            o.due.push(Reverse((due, i, s)));
        }
    } else if w.queue(i, s, now) {
        w.set_intended(i, s, due);
        w.recorder().sends_held_by_busy_connection += 1;
    }
    park_waiting_if_spent(w);
}

/// Sends what is due by `now` (timed from its due time) and within the slack after it (early,
/// timed from now), each connection's in one write.
pub(super) fn send_due<W: Slots>(w: &mut W, now: Instant) {
    let Some(slack) = w.schedule().map(|o| o.slack) else {
        return;
    };
    let horizon = now + slack;
    let mut touched = usize::MAX;
    loop {
        let Some(o) = w.schedule() else { return };
        let Some(&Reverse((due, i, s))) = o.due.peek() else {
            break;
        };
        if due > horizon {
            break;
        }
        o.due.pop();
        if !w.idle(i, s) || *w.next_due(i, s) != due {
            continue;
        }
        if touched != i && touched != usize::MAX {
            w.flush(touched);
        }
        touched = i;
        if w.request_at(i, s, due.min(now), now) {
            let rec = w.recorder();
            if due <= now {
                rec.sent_late(micros(now.duration_since(due)));
            } else {
                rec.sent_early(micros(due.duration_since(now)));
            }
        }
    }
    if touched != usize::MAX {
        w.flush(touched);
    }
    park_waiting_if_spent(w);
}
