//! One worker: an event loop over its own connections.
//!
//! Syscalls per request on a kept-alive connection: one write, one read, and a share of one
//! epoll_wait. Sockets are registered once for both readiness kinds, edge-triggered, so no
//! epoll_ctl toggles interest per request; a read that returned less than the buffer drained
//! the socket, so no extra read is spent to see EAGAIN.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::clients::ClientSpans;
use super::conn::{Conn, Phase, Transport};
use super::hook::Scripted;
use super::tickets::Ticket;
use super::worker_base::{
    micros, tls_failure, Cadence, SendTimer, WorkerOutcome, WorkerSpec, READ_BUFFER,
};
use super::worker_loop::{self, Protocol, Readiness};
use super::{EngineError, Pacing, WorkerProgress};
use crate::http::tls::{tls_error, TlsStream};
use crate::http::{Feed, ProtocolError};
use crate::stats::{ErrorKind, Recorder};

/// Open loop over plain TCP: when the next send is at most this far off, the worker sleeps on
/// the send timer alone, timed by the kernel's receive timestamps. One wake-up then serves a
/// send and the responses before it, where reacting to each response would cost a second one.
/// When it wakes, it reads the due connection's response itself (as the wake-up floor does)
/// and takes the other sockets' readiness at most this long after it last did: a response is
/// read at most this late, and most wake-ups cost no second poll.
const DEFER_READS_UP_TO: Duration = Duration::from_millis(5);

pub struct Worker<'a> {
    spec: WorkerSpec,
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    rec: Recorder,
    clients: ClientSpans,
    /// Connections not parked; the run ends when a counted run parks them all.
    active: usize,
    /// Open loop: connections waiting for their send time, soonest first.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Closed loop: connections whose next request is sent after the current event batch,
    /// so the server receives requests in bursts rather than one wakeup per request (and so
    /// do we). Two vectors sized up front, swapped each iteration: no allocation.
    ready: Vec<usize>,
    sending: Vec<usize>,
    /// Open loop: when each connection's requests are due (None: closed loop).
    cadence: Option<Cadence>,
    /// Open loop: a send due within this much after a wake-up goes out in it, early (and is
    /// timed from its actual send); the plan's `Pacing::Open::slack`.
    slack: Duration,
    /// Open loop: wakes the poll at the next send time, to the nanosecond.
    timer: Option<SendTimer>,
    /// Open loop over plain TCP: responses carry kernel receive timestamps, and a sleep on the
    /// timer alone lets the worker sleep through their arrival (see DEFER_READS_UP_TO).
    deferred: Option<DeferredReads>,
    /// Connections waiting for a writable edge (connecting, or a request partly written):
    /// while any does, the worker cannot sleep on the timer alone.
    awaiting_writable: usize,
    /// Connections whose response is read as it comes: partly read (the sender may be waiting
    /// for room for its next segments) or overdue (the next request waits for it). While any
    /// is, the worker does not sleep on the timer alone.
    reading_as_they_come: usize,
    first_send: Option<Instant>,
    /// A script's hooks and per-connection buffers (engine::hook); None on the plain path.
    script: Option<Scripted>,
    stop: &'a AtomicBool,
    progress: &'a WorkerProgress,
}

/// Reading responses late but timing them exactly: where the monotonic and the wall clocks
/// stood together when the last sleep or poll returned (kernel receive timestamps are
/// wall-clock times).
struct DeferredReads {
    anchor: (Instant, libc::timespec),
    /// A read has come with a timestamp: the kernel stamps segments now (it turns stamping
    /// on asynchronously after the first socket asks), so reads may be deferred.
    stamping: bool,
    /// Off for good once a response too large to sit whole in a socket buffer was seen: its
    /// last segments arrive only as it is read, so reading it late would delay them.
    large_responses: bool,
    /// When the worker last took every socket's readiness.
    all_polled_at: Instant,
}

/// A response this large (bytes of body) may not fit the socket's buffer: reads are no longer
/// deferred (see [`DeferredReads::large_responses`]).
const LARGE_RESPONSE: u64 = 16 * 1024;

fn wall_clock_now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts
}

impl DeferredReads {
    /// The instant a kernel receive timestamp stands for, from the anchor taken when the poll
    /// returned; `fallback` when the stamp is absent or implausible (a wall-clock step).
    fn arrival(&self, stamp: Option<libc::timespec>, fallback: Instant) -> Instant {
        let Some(ts) = stamp else { return fallback };
        let (at, wall) = self.anchor;
        let ns = |t: libc::timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
        let ahead = ns(ts) - ns(wall);
        let instant = if ahead >= 0 {
            at.checked_add(Duration::from_nanos(ahead.min(i128::from(u32::MAX)) as u64))
        } else {
            at.checked_sub(Duration::from_nanos((-ahead).min(1_000_000_000) as u64))
        };
        // A read is deferred by milliseconds; a stamp seconds old means the wall clock was
        // stepped, not a response that waited.
        match instant {
            Some(i) if i <= fallback && (-ahead) < 1_000_000_000 => i,
            _ => fallback,
        }
    }
}

/// How an open-loop request went out against its due time, in µs.
#[derive(Debug, Clone, Copy)]
enum Sent {
    /// At or after it (by this much); latency counts from the due time.
    Late(u64),
    /// Before it, within the slack; latency counts from the send.
    Early(u64),
    /// After it because the connection was busy (the server held the previous response):
    /// late by this much since the connection came free, and counted as held.
    Held(u64),
}

impl<'a> Worker<'a> {
    pub fn new(
        mut spec: WorkerSpec,
        stop: &'a AtomicBool,
        progress: &'a WorkerProgress,
    ) -> Result<Worker<'a>, EngineError> {
        let script = spec
            .script
            .take()
            .map(|s| Scripted::new(s, spec.connections));
        let poll = Poll::new().map_err(EngineError::Poll)?;
        let now = spec.start;
        let (timer, deferred) = match spec.pacing {
            Pacing::Closed => (None, None),
            Pacing::Open { .. } => {
                // TLS reads through rustls, without the kernel's timestamps: no deferring.
                let deferred = match spec.tls {
                    Some(_) => None,
                    None => Some(DeferredReads {
                        anchor: (Instant::now(), wall_clock_now()),
                        stamping: false,
                        large_responses: false,
                        all_polled_at: now,
                    }),
                };
                let timer = SendTimer::new(&poll).map_err(EngineError::Poll)?;
                (Some(timer), deferred)
            }
        };
        Ok(Worker {
            conns: (0..spec.connections).map(|_| Conn::new(now)).collect(),
            poll,
            buf: vec![0u8; READ_BUFFER].into_boxed_slice(),
            rec: Recorder::new(spec.expected),
            clients: ClientSpans::new(spec.connections),
            active: spec.connections,
            // Each connection has at most its due time and the one pushed ahead, and a stale
            // entry or two: room for all, so the heap never grows during the run.
            timers: BinaryHeap::with_capacity(spec.connections * 4),
            ready: Vec::with_capacity(spec.connections),
            sending: Vec::with_capacity(spec.connections),
            cadence: Cadence::of(&spec, spec.total_connections),
            slack: match spec.pacing {
                Pacing::Closed => Duration::ZERO,
                Pacing::Open { slack, .. } => slack,
            },
            timer,
            deferred,
            awaiting_writable: 0,
            reading_as_they_come: 0,
            first_send: None,
            script,
            stop,
            progress,
            spec,
        })
    }

    /// Open loop: a connection's next due time after the one at `prev`.
    #[inline]
    fn next_due_after(&self, prev: Instant) -> Instant {
        self.cadence.as_ref().map_or(prev, |c| c.next(prev))
    }

    /// Runs until the stop rule or the stop flag; returns the recording and whether the flag
    /// (a signal) ended it.
    pub fn run(self) -> Result<WorkerOutcome, EngineError> {
        let (stop, progress) = (self.stop, self.progress);
        worker_loop::run(self, stop, progress)
    }

    /// The first requests: closed loop, every connection at once; open loop, each at its place
    /// in the schedule (global connection g at g / rate).
    fn begin(&mut self) {
        let start = self.spec.start;
        for i in 0..self.conns.len() {
            match self.spec.pacing {
                // When the send really begins (the wake-up from the start's sleep is late by
                // a little): first sends and the start skew of parts are measured, not assumed.
                Pacing::Closed => {
                    let now = Instant::now();
                    if !self.delayed(i, now) {
                        self.start_request(i, now, now, None)
                    }
                }
                Pacing::Open { .. } => {
                    let g = self.spec.schedule.first + self.spec.schedule.stride * i;
                    let due = self.cadence.as_ref().map_or(start, |c| c.first(g));
                    self.conns[i].next_due = due;
                    self.set_phase(i, Phase::Waiting);
                    self.timers.push(Reverse((due, i)));
                }
            }
        }
    }

    /// One poll: until an event, the next send time (through the timer, to the nanosecond),
    /// or `chore` (a housekeeping wake-up, which may be late by a millisecond), whichever is
    /// first; not at all when requests are queued.
    fn wait(
        &mut self,
        events: &mut Events,
        wake: Instant,
        now: Instant,
    ) -> Result<(), EngineError> {
        let mut wake = wake;
        if let (Pacing::Closed, Some(Reverse((due, _)))) = (self.spec.pacing, self.timers.peek()) {
            // A script's delay(): only its sends are on the heap in a closed loop.
            wake = wake.min(*due);
        }
        let mut wait = wake.saturating_duration_since(now);
        let next_due = self.timers.peek().map(|Reverse((due, _))| *due);
        // A send within the slack goes out now rather than after another wake-up.
        if next_due.is_some_and(|d| d <= now + self.slack) || !self.ready.is_empty() {
            wait = Duration::ZERO;
        }
        let sleep_alone = self.awaiting_writable == 0
            && self.reading_as_they_come == 0
            && !wait.is_zero()
            && next_due.is_some_and(|d| d.saturating_duration_since(now) <= DEFER_READS_UP_TO)
            && self
                .deferred
                .as_ref()
                .is_some_and(|d| d.stamping && !d.large_responses);
        if let (Some(due), Some(timer)) = (next_due, &mut self.timer) {
            // The next send time wakes the poll through the timer even when a housekeeping
            // wake comes first: epoll's own timeout is rounded up to a whole millisecond,
            // which would make sends just after it late. A poll that does not wait needs no
            // timer. Sleeping on the timer alone, it wakes for whichever comes first.
            if !wait.is_zero() {
                let at = if sleep_alone { due.min(wake) } else { due };
                timer.arm(at, now).map_err(EngineError::Poll)?;
            }
        }
        // Nothing to watch but the clock: sleep on the timer alone, a read of it (cheaper than
        // an epoll_wait; a plain nanosleep to the send time instead made sends late by
        // milliseconds while the test suite loaded the machine, which the timer does not).
        // Woken, the due connection's response is read by send_due; the other sockets'
        // readiness is taken once DEFER_READS_UP_TO has passed since it last was, or at the
        // loop's own wake-up (housekeeping, the end of the run).
        let polled = match (self.deferred.as_mut(), self.timer.as_mut()) {
            (Some(d), Some(timer)) if sleep_alone => {
                let slept = timer.sleep();
                let woke = Instant::now();
                if woke >= wake || woke.duration_since(d.all_polled_at) >= DEFER_READS_UP_TO {
                    d.all_polled_at = woke;
                    slept.and_then(|()| self.poll.poll(events, Some(Duration::ZERO)))
                } else {
                    events.clear();
                    slept
                }
            }
            (Some(d), _) => {
                let polled = self.poll.poll(events, Some(wait));
                d.all_polled_at = Instant::now();
                polled
            }
            (None, _) => self.poll.poll(events, Some(wait)),
        };
        worker_loop::polled(polled)?;
        if let Some(d) = self.deferred.as_mut() {
            d.anchor = (Instant::now(), wall_clock_now());
        }
        Ok(())
    }

    /// Open loop: sends every request due by `now` (timed from its due time) and those due
    /// within the slack after it (early, timed from now: never a latency from before the send).
    fn send_due(&mut self, now: Instant) {
        let horizon = now + self.slack;
        while let Some(&Reverse((due, i))) = self.timers.peek() {
            if due > horizon {
                break;
            }
            self.timers.pop();
            if self.deferred.is_some() {
                self.read_left_response(i, due);
            }
            // Entries are pushed ahead (see start_request) and again when a response ends:
            // only the one for the connection's current due time sends.
            let c = &self.conns[i];
            if c.phase == Phase::Waiting && c.next_due == due {
                if self.spec.pacing == Pacing::Closed {
                    // Its script's delay() is over; timed from now, as wrk times it.
                    self.start_request(i, now, now, None);
                    continue;
                }
                let sent = if due <= now {
                    Sent::Late(micros(now.duration_since(due)))
                } else {
                    Sent::Early(micros(due.duration_since(now)))
                };
                self.start_request(i, due.min(now), now, Some(sent));
            }
        }
    }

    /// Open loop, reads deferred: connection `i` is due at `due` and its last response may
    /// have come without being read (the worker slept on the timer alone). It is read now; one
    /// that has not come is overdue, and is read as it comes.
    fn read_left_response(&mut self, i: usize, due: Instant) {
        let c = &self.conns[i];
        // `next_due` is the due time of the request in flight: an entry for a later one is
        // this connection's turn; an entry for the same one is stale.
        if c.phase != Phase::Reading || c.next_due >= due {
            return;
        }
        self.read(i, false);
        if self.conns[i].phase == Phase::Reading {
            self.read_as_it_comes(i);
        }
    }

    /// Sends the requests queued during the last event batch. Requests queued while sending
    /// (a failed connect, say) wait for the next iteration, so this always ends.
    fn send_ready(&mut self, now: Instant) {
        std::mem::swap(&mut self.ready, &mut self.sending);
        for k in 0..self.sending.len() {
            let i = self.sending[k];
            if self.conns[i].phase == Phase::Ready {
                self.start_request(i, now, now, None);
            }
        }
        self.sending.clear();
    }

    /// The kind of a failed read or write (`doing`), unless TLS refused: then a TLS error,
    /// counted by its reason.
    fn classify(&mut self, e: &io::Error, doing: ErrorKind) -> ErrorKind {
        let Some(tls) = tls_error(e) else {
            return doing;
        };
        self.rec.tls().failed(tls_failure(tls), || tls.to_string());
        ErrorKind::Tls
    }

    /// Over TLS, once the handshake of connection `i` is done: whether it was resumed, how
    /// long it took, and what the worker's first full handshake negotiated.
    fn note_handshake(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(Transport::Tls(t)) = conn.io.as_mut() else {
            return;
        };
        let Some((resumed, established)) = t.handshake_done() else {
            return;
        };
        // `sent` still holds when the TCP connection was made: the first request's write
        // starts there.
        self.rec.tls_handshake(
            resumed,
            micros(established.saturating_duration_since(conn.sent)),
        );
        // Three strings, made only when wanted: not per handshake.
        let figures = self.rec.tls();
        if figures.wants_negotiated(!resumed) {
            let n = t.negotiated();
            (figures.version, figures.cipher, figures.group) = (n.version, n.cipher, n.group);
            figures.alpn = n.alpn;
        }
    }

    /// Moves connection `i` to `phase`, keeping count of those that wait for a writable edge.
    fn set_phase(&mut self, i: usize, phase: Phase) {
        let needs_writable = |p: Phase| matches!(p, Phase::Connecting | Phase::Writing);
        let old = std::mem::replace(&mut self.conns[i].phase, phase);
        match (needs_writable(old), needs_writable(phase)) {
            (false, true) => self.awaiting_writable += 1,
            (true, false) => self.awaiting_writable -= 1,
            _ => {}
        }
    }

    fn second(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.spec.start).as_secs() as u32
    }

    fn on_event(&mut self, i: usize, readable: bool, writable: bool, drain: bool) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if writable {
            if let Some(io) = conn.io.as_mut() {
                if let Err(e) = io.flush_pending() {
                    let kind = self.classify(&e, ErrorKind::Write);
                    return self.fail(i, kind, Instant::now());
                }
            }
        }
        match conn.phase {
            Phase::Connecting if readable || writable => self.finish_connect(i),
            Phase::Writing if writable || readable => {
                self.write(i);
                // A fast response can arrive in the same event as the writable edge.
                if readable && self.conns[i].phase == Phase::Reading {
                    self.read(i, drain);
                }
            }
            Phase::Reading if readable => self.read(i, drain),
            Phase::Ready | Phase::Waiting | Phase::Parked if readable => self.idle_readable(i),
            _ => {}
        }
    }

    /// Begins connection `i`'s next request, timed from `intended`. Open loop: `sent` is how
    /// it went out against its schedule.
    fn start_request(&mut self, i: usize, intended: Instant, now: Instant, sent: Option<Sent>) {
        // The deadline was checked when the request was scheduled (`next`).
        if self.spec.tickets.take(i, None, intended) != Ticket::Granted {
            self.park(i);
            return;
        }
        if self.spec.tickets.all_spent() {
            self.park_waiting_except(i);
        }
        if self.script.as_mut().is_some_and(|s| !s.begin(i)) {
            // request() failed: the run is stopping.
            self.park(i);
            return;
        }
        if let Some(sent) = sent {
            match sent {
                Sent::Late(us) => self.rec.sent_late(us),
                Sent::Early(us) => self.rec.sent_early(us),
                Sent::Held(us) => {
                    self.rec.sends_held_by_busy_connection += 1;
                    self.rec.sent_late(us)
                }
            }
            if self.deferred.is_some() {
                // The connection's next send time, known now: the timer is never armed past
                // it, so a response read late never makes its own next request late.
                let next = self.next_due_after(self.conns[i].next_due);
                self.timers.push(Reverse((next, i)));
            }
        }
        self.first_send.get_or_insert(now);
        let capture_server = self.rec.server_header.is_none();
        let conn = &mut self.conns[i];
        conn.intended = intended;
        conn.began = now;
        conn.deadline = now + self.spec.timeout;
        conn.first_byte = None;
        conn.last_data = None;
        conn.connect_us = None;
        conn.written = 0;
        conn.parser.reset(self.spec.head_request, capture_server);
        if conn.io.is_some() {
            conn.sent = now;
            self.set_phase(i, Phase::Writing);
            self.write(i);
        } else {
            self.open(i, now);
        }
    }

    /// The last ticket of a count-bounded run is taken: the connections waiting for their
    /// next turn will send nothing more, and park now rather than at that turn (in the open
    /// loop a whole period of the schedule later, which stretched the run and understated
    /// the rate it achieved).
    fn park_waiting_except(&mut self, taker: usize) {
        for j in 0..self.conns.len() {
            if j != taker && self.conns[j].phase == Phase::Waiting {
                self.park(j);
            }
        }
    }

    fn park(&mut self, i: usize) {
        if self.conns[i].phase != Phase::Parked {
            self.set_phase(i, Phase::Parked);
            self.conns[i].io = None;
            self.active -= 1;
        }
    }

    fn open(&mut self, i: usize, now: Instant) {
        self.clients.connecting(i, now);
        let stream = match TcpStream::connect(self.spec.addr) {
            Ok(s) => s,
            Err(e) => {
                if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
                    self.rec.ports_exhausted += 1;
                }
                return self.fail(i, ErrorKind::Connect, now);
            }
        };
        let _ = stream.set_nodelay(true);
        if self.deferred.is_some() {
            // Receive timestamps let responses be read late and timed exactly.
            super::conn::enable_rx_timestamps(std::os::fd::AsRawFd::as_raw_fd(&stream));
        }
        let mut io = Transport::Plain(stream);
        let registered = match &mut io {
            Transport::Plain(s) => {
                self.poll
                    .registry()
                    .register(s, Token(i), Interest::READABLE | Interest::WRITABLE)
            }
            Transport::Tls(_) => Ok(()),
        };
        if registered.is_err() {
            return self.fail(i, ErrorKind::Connect, now);
        }
        self.conns[i].io = Some(io);
        self.set_phase(i, Phase::Connecting);
    }

    fn finish_connect(&mut self, i: usize) {
        let now = Instant::now();
        let conn = &mut self.conns[i];
        let Some(io) = conn.io.as_ref() else { return };
        let sock = io.socket();
        match sock.take_error() {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => return self.fail(i, ErrorKind::Connect, now),
        }
        match sock.peer_addr() {
            Ok(_) => {}
            // Not connected yet: a later event finishes it.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(_) => return self.fail(i, ErrorKind::Connect, now),
        }
        conn.connect_us = Some(micros(now.duration_since(conn.began)));
        self.rec.connections_opened += 1;
        if let Some(tls) = &self.spec.tls {
            let Some(Transport::Plain(sock)) = conn.io.take() else {
                return;
            };
            match TlsStream::new(sock, tls.config.clone(), tls.name.clone()) {
                Ok(t) => conn.io = Some(Transport::Tls(Box::new(t))),
                Err(_) => return self.fail(i, ErrorKind::Tls, now),
            }
        }
        conn.sent = now;
        self.set_phase(i, Phase::Writing);
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let request = match &self.script {
            Some(s) => s.request(i, &self.spec.request),
            None => &self.spec.request,
        };
        let conn = &mut self.conns[i];
        let Some(io) = conn.io.as_mut() else { return };
        while conn.written < request.len() {
            match io.write(&request[conn.written..]) {
                Ok(0) => return self.fail(i, ErrorKind::Write, Instant::now()),
                Ok(n) => {
                    conn.written += n;
                    self.rec.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = self.classify(&e, ErrorKind::Write);
                    return self.fail(i, kind, Instant::now());
                }
            }
        }
        self.set_phase(i, Phase::Reading);
    }

    /// Reads what the socket holds. `drain`: the peer has closed, so keep reading to EOF
    /// even after a short read.
    fn read(&mut self, i: usize, drain: bool) {
        loop {
            let conn = &mut self.conns[i];
            let Some(io) = conn.io.as_mut() else { return };
            let tls = io.is_tls();
            // With receive timestamps, the response is timed from its arrival, however late
            // it is read.
            let (result, now) = match &mut self.deferred {
                Some(d) => {
                    let r = io.read_stamped(&mut self.buf);
                    let stamp = r.as_ref().ok().and_then(|(_, s)| *s);
                    d.stamping |= stamp.is_some();
                    (r.map(|(n, _)| n), d.arrival(stamp, Instant::now()))
                }
                None => (io.read(&mut self.buf), Instant::now()),
            };
            match result {
                Ok(0) => {
                    // The FIN carries no stamp: a body that ends with the connection ended
                    // when its last data arrived.
                    let ended = conn.last_data.unwrap_or(now);
                    return match conn.parser.on_eof() {
                        Ok(()) => {
                            conn.io = None;
                            self.complete(i, ended)
                        }
                        Err(_) => self.fail(i, ErrorKind::Read, now),
                    };
                }
                Ok(n) => {
                    if tls {
                        self.note_handshake(i);
                    }
                    let second = self.second(now);
                    self.rec.bytes_in(second, n as u64);
                    let conn = &mut self.conns[i];
                    if conn.first_byte.is_none() {
                        conn.first_byte = Some(now);
                    }
                    conn.last_data = Some(now);
                    let mut fed = conn.parser.feed(&self.buf[..n]);
                    if self.script.is_some() {
                        fed = self.scripted_feed(i, n, now, fed);
                    }
                    match fed {
                        Ok(Feed::Done { .. }) => return self.complete(i, now),
                        Ok(Feed::NeedMore) => {
                            self.read_as_it_comes(i);
                            if !tls && !drain && n < self.buf.len() {
                                return;
                            }
                        }
                        Err(_) => return self.fail(i, ErrorKind::Protocol, now),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = self.classify(&e, ErrorKind::Read);
                    return self.fail(i, kind, now);
                }
            }
        }
    }

    /// Data or EOF on a connection with nothing in flight: the server closed an idle
    /// keep-alive connection. Not an error; the next request reconnects.
    fn idle_readable(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(io) = conn.io.as_mut() else { return };
        match io.read(&mut self.buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            _ => conn.io = None,
        }
    }

    /// The response of connection `i` is read as it comes (partly read, or overdue), and the
    /// worker stays off the timer-only sleep until it is whole.
    fn read_as_it_comes(&mut self, i: usize) {
        if !std::mem::replace(&mut self.conns[i].read_as_it_comes, true) {
            self.reading_as_they_come += 1;
        }
    }

    /// The response of connection `i` is no longer read as it comes.
    fn read_done(&mut self, i: usize) {
        if std::mem::replace(&mut self.conns[i].read_as_it_comes, false) {
            self.reading_as_they_come -= 1;
        }
    }

    fn complete(&mut self, i: usize, now: Instant) {
        self.read_done(i);
        self.record(i, now);
        if let Some(s) = self.script.as_mut() {
            s.response_done(i);
        }
        let conn = &mut self.conns[i];
        if conn.parser.keep_alive && self.spec.keepalive {
            self.rec.keepalive_responses += 1;
        } else {
            conn.io = None;
        }
        self.next(i, now);
    }

    /// With a script: what was framed goes to it, and the responses of a pipelined write
    /// before its last are recorded here, the rest of the read fed on. Returns the last feed.
    fn scripted_feed(
        &mut self,
        i: usize,
        n: usize,
        now: Instant,
        mut fed: Result<Feed, ProtocolError>,
    ) -> Result<Feed, ProtocolError> {
        let mut off = 0;
        loop {
            let Some(s) = self.script.as_mut() else {
                return fed;
            };
            match fed {
                Ok(Feed::Done { consumed }) => {
                    let end = off + consumed;
                    s.received(i, &self.buf[off..end]);
                    // A server closing after this response (nginx at keepalive_requests)
                    // answers no more of the batch: it ends here, as in wrk.
                    if s.pending[i] <= 1 || !self.conns[i].parser.keep_alive {
                        return Ok(Feed::Done { consumed: end });
                    }
                    s.response_done(i);
                    self.record(i, now);
                    let conn = &mut self.conns[i];
                    conn.parser.reset(self.spec.head_request, false);
                    off = end;
                    if off == n {
                        return Ok(Feed::NeedMore);
                    }
                    fed = conn.parser.feed(&self.buf[off..n]);
                }
                Ok(Feed::NeedMore) => {
                    s.received(i, &self.buf[off..n]);
                    return fed;
                }
                Err(_) => return fed,
            }
        }
    }

    /// A script's delay() before connection `i`'s next request (closed loop): the request
    /// waits on the timer heap. False when there is no delay.
    fn delayed(&mut self, i: usize, now: Instant) -> bool {
        let Some(d) = self.script.as_mut().and_then(Scripted::delay) else {
            return false;
        };
        let due = now + d;
        self.conns[i].next_due = due;
        self.set_phase(i, Phase::Waiting);
        self.timers.push(Reverse((due, i)));
        true
    }

    /// Records connection `i`'s response as ended at `now`.
    fn record(&mut self, i: usize, now: Instant) {
        if let Some(d) = self.deferred.as_mut() {
            d.large_responses |= self.conns[i].parser.body_bytes > LARGE_RESPONSE;
        }
        let second = self.second(now);
        let conn = &mut self.conns[i];
        let times = crate::stats::ResponseTimes::ended(
            now,
            conn.intended,
            conn.sent,
            conn.first_byte,
            conn.connect_us,
        );
        self.spec.live.response(now, times.total_us);
        if conn.connect_us.is_some() {
            // This request opened the connection: `began` is its connect start.
            let first = conn.first_byte.unwrap_or(now);
            self.rec
                .connection_first_byte(micros(first.saturating_duration_since(conn.began)));
        }
        if let Some(s) = self.script.as_mut() {
            s.outcome(i, Some((conn.parser.status, times.total_us)));
        }
        self.rec
            .response(second, conn.parser.status, conn.parser.body_bytes, times);
        self.clients.answered(i, now);
        if let Some(server) = conn.parser.server.take() {
            self.rec.server_header.get_or_insert(server);
        }
    }

    fn fail(&mut self, i: usize, kind: ErrorKind, now: Instant) {
        // Never sent: a request's bytes wait in TLS for a handshake that failed.
        let held = self.conns[i].written_but_held() as u64;
        self.rec.bytes_written = self.rec.bytes_written.saturating_sub(held);
        self.read_done(i);
        let second = self.second(now);
        self.rec.error(second, kind);
        self.spec.live.error(now, kind);
        if let Some(s) = self.script.as_mut() {
            s.outcome(i, None);
        }
        self.conns[i].io = None;
        self.next(i, now);
    }

    /// Schedules connection `i`'s next request according to the pacing; `now` is when its
    /// last request ended (a response's arrival, which may lie before the present).
    fn next(&mut self, i: usize, now: Instant) {
        if self.spec.deadline.is_some_and(|d| now >= d) {
            self.set_phase(i, Phase::Waiting);
            return;
        }
        if self.spec.tickets.spent_for(i) {
            // Nothing left to send: parked now, not at its next turn.
            self.park(i);
            return;
        }
        match self.spec.pacing {
            Pacing::Closed => {
                if !self.delayed(i, now) {
                    self.set_phase(i, Phase::Ready);
                    self.ready.push(i);
                }
            }
            Pacing::Open { .. } => {
                let due = self.next_due_after(self.conns[i].next_due);
                self.conns[i].next_due = due;
                if self.spec.deadline.is_some_and(|d| due >= d) {
                    // Past the schedule's end: not sent, even early within the slack.
                    self.set_phase(i, Phase::Waiting);
                } else if due <= now {
                    // The response came after this request was due: the server held it up,
                    // and it goes out at once (its latency still counts from `due`; it is
                    // late only by the time since its connection came free).
                    let sent = Instant::now();
                    let late = micros(sent.saturating_duration_since(now));
                    self.start_request(i, due, sent, Some(Sent::Held(late)));
                } else {
                    self.set_phase(i, Phase::Waiting);
                    self.timers.push(Reverse((due, i)));
                }
            }
        }
    }

    /// Fails requests that have run past their timeout.
    fn expire(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if self.deferred.is_some() && c.phase == Phase::Reading && now >= c.deadline {
                // A response left for a later wake-up may have come in time.
                self.read(i, false);
            }
            let c = &self.conns[i];
            if c.busy() && now >= c.deadline {
                self.fail(i, ErrorKind::Timeout, now);
            }
        }
    }
}

/// HTTP/1.1 in the one worker loop.
impl Protocol for Worker<'_> {
    fn spec(&mut self) -> &mut WorkerSpec {
        &mut self.spec
    }

    fn recorder(&mut self) -> &mut Recorder {
        &mut self.rec
    }

    fn clients(&mut self) -> &mut ClientSpans {
        &mut self.clients
    }

    fn first_send(&self) -> Option<Instant> {
        self.first_send
    }

    fn begin(&mut self) {
        Worker::begin(self)
    }

    fn finished(&self) -> bool {
        self.active == 0 || self.script.as_ref().is_some_and(Scripted::stopped)
    }

    fn unanswered(&self) -> u64 {
        // A request's bytes that TLS holds for a handshake still under way never left: it
        // was not sent (a refused certificate's connections read "2 sent and still
        // unanswered", and nginx saw nothing).
        let sent = |c: &Conn| {
            c.written_but_held() == 0
                && match c.phase {
                    Phase::Reading => true,
                    Phase::Writing => c.written > 0,
                    _ => false,
                }
        };
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| sent(c))
            // A pipelined write waits for each of its responses.
            .map(|(i, _)| self.script.as_ref().map_or(1, |s| s.pending[i].max(1)) as u64)
            .sum()
    }

    fn wait(
        &mut self,
        events: &mut Events,
        wake: Instant,
        now: Instant,
    ) -> Result<(), EngineError> {
        Worker::wait(self, events, wake, now)
    }

    fn finish(&mut self) {
        // What TLS still holds for a handshake under way was never written to the network,
        // as for a handshake that failed (see `fail`).
        let held: usize = self.conns.iter().map(Conn::written_but_held).sum();
        self.rec.bytes_written = self.rec.bytes_written.saturating_sub(held as u64);
    }

    fn on_event(&mut self, conn: usize, ready: Readiness) {
        // A FIN that arrived with the data raises no further edge: read to EOF.
        Worker::on_event(self, conn, ready.readable, ready.writable, ready.closed)
    }

    fn send(&mut self, now: Instant) {
        self.send_ready(now);
        self.send_due(now);
    }

    fn expire(&mut self, now: Instant) {
        Worker::expire(self, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64, nsec: i64) -> libc::timespec {
        libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        }
    }

    #[test]
    fn a_receive_timestamp_becomes_the_instant_it_stands_for() {
        let at = Instant::now();
        let d = DeferredReads {
            anchor: (at, ts(1_000, 500_000_000)),
            stamping: true,
            large_responses: false,
            all_polled_at: at,
        };
        let later = at + Duration::from_millis(10);
        // Arrived 3.25 ms before the poll returned: 3.25 ms before the anchor's instant.
        assert_eq!(
            d.arrival(Some(ts(1_000, 496_750_000)), later),
            at - Duration::from_micros(3_250)
        );
        // Arrived after the poll returned (read a little later): still its own instant.
        assert_eq!(
            d.arrival(Some(ts(1_000, 502_000_000)), later),
            at + Duration::from_millis(2)
        );
        // No stamp, a stamp after the present, or a wall clock stepped by minutes: the read
        // time stands.
        assert_eq!(d.arrival(None, later), later);
        assert_eq!(d.arrival(Some(ts(1_000, 520_000_000)), later), later);
        assert_eq!(d.arrival(Some(ts(800, 0)), later), later);
        assert_eq!(d.arrival(Some(ts(998, 0)), later), later);
    }

    #[test]
    fn a_loopback_response_carries_its_arrival_time() {
        use std::io::Write as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        super::super::conn::enable_rx_timestamps(std::os::fd::AsRawFd::as_raw_fd(&client));
        client.set_nonblocking(true).unwrap();
        let mut t = Transport::Plain(TcpStream::from_std(client));
        let mut buf = [0u8; 64];
        let ns = |t: libc::timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
        // The kernel turns timestamping on asynchronously after the first socket asks, so
        // the first segments may come unstamped (the worker defers reads only once stamps
        // arrive).
        let mut stamped = 0;
        for _ in 0..2_000 {
            let sent = wall_clock_now();
            server.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
            let (n, stamp) = loop {
                match t.read_stamped(&mut buf) {
                    Ok(r) => break r,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(n, 17);
            if let Some(stamp) = stamp {
                let (sent, read) = (ns(sent), ns(wall_clock_now()));
                assert!(
                    sent <= ns(stamp) && ns(stamp) <= read,
                    "{sent} <= {} <= {read}",
                    ns(stamp)
                );
                stamped += 1;
                if stamped == 3 {
                    break;
                }
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(stamped, 3, "the kernel never stamped a received segment");
        drop(server);
    }
}
