//! The HTTP/2 worker: the same contract as the HTTP/1.1 worker (a spec in, a
//! recording out), over connections that each carry several concurrent streams.
//!
//! Closed loop: every connection has `--streams` slots; each slot sends its next request when
//! its response ends (on the same connection while it takes new streams, else on the next
//! one). A GOAWAY stops new streams; the requests above its last stream id go out again on a
//! new connection, opened once the old one has answered the rest. What is sent in one event
//! batch for a connection goes out in one write.
//!
//! Open loop: every slot of every connection is one sender of the schedule, as a connection
//! is for HTTP/1.1 (sender k of N at k / rate, then every N / rate); a due request whose slot
//! is still busy goes out the moment it frees, timed from its due time and counted as held
//! by a busy connection. A send timer (timerfd) wakes the worker at each due time.

mod conn;

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use self::conn::{Broken, ConnState, Ended};
use super::clients::ClientSpans;
use super::conn::Transport;
use super::slot_schedule::{self, SlotSchedule, Slots};
use super::tickets::Ticket;
use super::worker_base::{micros, tls_failure, WorkerOutcome, WorkerSpec, READ_BUFFER};
use super::worker_loop::{self, Protocol, Readiness};
use super::{EngineError, WorkerProgress};
use crate::http::h2::frame::{FrameDecoder, FrameError};
use crate::http::h2::hpack::RequestBlocks;
use crate::http::h2::ErrorCode;
use crate::http::tls::{tls_error, TlsStream};
use crate::stats::TlsFailure;
use crate::stats::{ErrorKind, Recorder};

/// What an HTTP/2 run sends, encoded once for all its connections.
#[derive(Debug, Clone)]
pub struct H2Spec {
    pub blocks: Arc<RequestBlocks>,
    pub body: Arc<[u8]>,
    /// Concurrent streams per connection.
    pub streams: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// No socket.
    Closed,
    /// TCP connect in flight.
    Connecting,
    /// Preface sent; streams may be opened.
    Open,
}

struct H2Conn {
    io: Option<Transport>,
    link: Link,
    decoder: FrameDecoder,
    state: ConnState,
    began: Instant,
    /// When the connection's connect began.
    opened: Instant,
    /// Its first response's time since `opened` is recorded.
    first_byte_noted: bool,
}

pub struct H2Worker<'a> {
    spec: WorkerSpec,
    h2: H2Spec,
    poll: Poll,
    conns: Vec<H2Conn>,
    buf: Box<[u8]>,
    rec: Recorder,
    clients: ClientSpans,
    /// Slots not parked.
    active: usize,
    first_send: Option<Instant>,
    stop: &'a AtomicBool,
    progress: &'a WorkerProgress,
    /// Open loop: each slot's schedule.
    open: Option<SlotSchedule>,
    /// Connections whose connect failed with requests queued: connected again on the loop's
    /// next turn (not from the failure, which a refused connect would make recurse; not at
    /// the next timeout scan, which made each request of `-n` against a closed port wait
    /// 100 ms, where HTTP/1.1 fails them at once).
    reconnect: Vec<usize>,
}

impl<'a> H2Worker<'a> {
    pub fn new(
        spec: WorkerSpec,
        h2: H2Spec,
        stop: &'a AtomicBool,
        progress: &'a WorkerProgress,
    ) -> Result<H2Worker<'a>, EngineError> {
        let now = spec.start;
        let streams = h2.streams.max(1) as usize;
        let mut rec = Recorder::new(spec.expected);
        rec.h2().streams_asked = h2.streams;
        let poll = Poll::new().map_err(EngineError::Poll)?;
        let open = SlotSchedule::new(&spec, streams, &poll)?;
        Ok(H2Worker {
            open,
            poll,
            conns: (0..spec.connections)
                .map(|_| H2Conn {
                    io: None,
                    link: Link::Closed,
                    decoder: FrameDecoder::new(),
                    state: ConnState::new(streams, now),
                    began: now,
                    opened: now,
                    first_byte_noted: false,
                })
                .collect(),
            buf: vec![0u8; READ_BUFFER].into_boxed_slice(),
            rec,
            clients: ClientSpans::new(spec.connections),
            active: spec.connections * streams,
            first_send: None,
            stop,
            progress,
            h2,
            spec,
            reconnect: Vec::new(),
        })
    }

    /// Runs until the stop rule or the stop flag, in the one worker loop.
    pub fn run(self) -> Result<WorkerOutcome, EngineError> {
        let (stop, progress) = (self.stop, self.progress);
        worker_loop::run(self, stop, progress)
    }

    fn second(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.spec.start).as_secs() as u32
    }

    /// Slot `s` of connection `i` begins its next request (a ticket permitting): on a stream
    /// now if the connection takes one, else queued until it does (connecting, or every
    /// stream the server allows in use, or a GOAWAY: the next connection).
    fn request(&mut self, i: usize, s: usize, now: Instant) {
        self.request_at(i, s, now, now);
    }

    /// [`H2Worker::request`], timed from `intended` (open loop: its due time). False when
    /// no request was begun (no ticket left, or the run is over).
    fn request_at(&mut self, i: usize, s: usize, intended: Instant, now: Instant) -> bool {
        if !self.queue(i, s, now) {
            return false;
        }
        self.conns[i].state.slots[s].intended = intended;
        match self.conns[i].link {
            Link::Closed => self.open(i, now),
            Link::Connecting => {}
            Link::Open => self.open_queued(i, now),
        }
        true
    }

    /// Slot `s` of connection `i` sends nothing more (its tickets are spent).
    fn park_slot(&mut self, i: usize, s: usize) {
        let slot = &mut self.conns[i].state.slots[s];
        if !slot.parked {
            slot.parked = true;
            self.active -= 1;
        }
    }

    /// Takes a ticket for slot `s`'s next request and queues it; false when there is none
    /// (the slot is parked) or the run is over.
    fn queue(&mut self, i: usize, s: usize, now: Instant) -> bool {
        match self.spec.tickets.take(i, self.spec.deadline, now) {
            Ticket::Granted => {}
            Ticket::RunOver => return false,
            Ticket::NoneLeft => {
                self.park_slot(i, s);
                return false;
            }
        }
        self.first_send.get_or_insert(now);
        let slot = &mut self.conns[i].state.slots[s];
        slot.queued = true;
        slot.intended = now;
        slot.deadline = now + self.spec.timeout;
        slot.connect_us = None;
        true
    }

    /// Opens streams for queued slots while the connection takes them.
    fn open_queued(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        for s in 0..c.state.slots.len() {
            if !c.state.can_open() {
                break;
            }
            if c.state.slots[s].queued {
                // Closed loop: a request waiting for a stream the server allows begins when
                // it goes out, as a connection's next request does in HTTP/1.1.
                let slot = &mut c.state.slots[s];
                if slot.connect_us.is_none() && self.open.is_none() {
                    slot.intended = now;
                }
                slot.deadline = now + self.spec.timeout;
                c.state.open(s, &self.h2.blocks, &self.h2.body, now);
            }
        }
    }

    fn open(&mut self, i: usize, now: Instant) {
        self.clients.connecting(i, now);
        let c = &mut self.conns[i];
        c.began = now;
        c.opened = now;
        c.first_byte_noted = false;
        let stream = match TcpStream::connect(self.spec.addr) {
            Ok(s) => s,
            Err(e) => {
                if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
                    self.rec.ports_exhausted += 1;
                }
                return self.connect_failed(i, now);
            }
        };
        let _ = stream.set_nodelay(true);
        let mut stream = stream;
        if self
            .poll
            .registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            return self.connect_failed(i, now);
        }
        let c = &mut self.conns[i];
        c.io = Some(Transport::Plain(stream));
        c.link = Link::Connecting;
        c.decoder.reset();
        c.state.reset();
    }

    /// The connect failed: each queued request is a connect error, and the slot's next one
    /// waits for the loop's next turn to connect again ([`H2Worker::reconnect`]).
    fn connect_failed(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        c.io = None;
        c.link = Link::Closed;
        let second = self.second(now);
        for s in 0..self.conns[i].state.slots.len() {
            if self.conns[i].state.slots[s].queued {
                self.conns[i].state.slots[s].queued = false;
                self.error(ErrorKind::Connect, now, second);
                slot_schedule::retry_later(self, i, s, now);
            }
        }
        if !self.reconnect.contains(&i) {
            self.reconnect.push(i);
        }
    }

    /// Connects again each connection whose connect failed with requests still queued.
    fn reconnect_failed(&mut self, now: Instant) {
        for i in std::mem::take(&mut self.reconnect) {
            let c = &self.conns[i];
            if c.link == Link::Closed && c.state.slots.iter().any(|s| s.queued) {
                self.open(i, now);
            }
        }
    }

    fn finish_connect(&mut self, i: usize) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        let Some(io) = c.io.as_ref() else { return };
        let sock = io.socket();
        match sock.take_error() {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => return self.connect_failed(i, now),
        }
        match sock.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(_) => return self.connect_failed(i, now),
        }
        self.rec.connections_opened += 1;
        let connect_us = now.duration_since(c.began).as_micros() as u64;
        // Over https the preface and first requests wait in rustls until the handshake is
        // done; `began` marks TCP connected for the handshake's time.
        c.began = now;
        if let Some(tls) = &self.spec.tls {
            let Some(Transport::Plain(sock)) = c.io.take() else {
                return;
            };
            match TlsStream::new(sock, tls.config.clone(), tls.name.clone()) {
                Ok(t) => c.io = Some(Transport::Tls(Box::new(t))),
                Err(_) => {
                    self.rec
                        .tls()
                        .failed(TlsFailure::Other, || "TLS setup failed".into());
                    return self.connect_failed(i, now);
                }
            }
        }
        c.link = Link::Open;
        c.state.start();
        if let Some(s) = c.state.slots.iter_mut().find(|s| s.queued) {
            s.connect_us = Some(connect_us);
        }
        self.open_queued(i, now);
        self.flush(i);
    }

    fn on_event(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(c) = self.conns.get(i) else { return };
        match c.link {
            Link::Connecting if readable || writable => self.finish_connect(i),
            Link::Open => {
                if writable {
                    if let Some(Err(e)) = self.conns[i].io.as_mut().map(|io| io.flush_pending()) {
                        return self.failed_io(i, &e, Broken::Write);
                    }
                    self.flush(i);
                }
                if readable {
                    self.read(i);
                }
            }
            _ => {}
        }
    }

    /// Writes what the connection has queued, as far as the socket takes it.
    fn flush(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            let Some(io) = c.io.as_mut() else { return };
            let pending = c.state.pending();
            if pending.is_empty() {
                return;
            }
            match io.write(pending) {
                Ok(0) => return self.broken(i, Broken::Write),
                Ok(n) => {
                    c.state.wrote(n);
                    self.rec.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.failed_io(i, &e, Broken::Write),
            }
        }
    }

    /// A read or write failed: over TLS, counted by its reason.
    fn failed_io(&mut self, i: usize, e: &io::Error, doing: Broken) {
        let how = match tls_error(e) {
            Some(t) => {
                let reason = tls_failure(t);
                self.rec.tls().failed(reason, || t.to_string());
                Broken::Tls
            }
            None => doing,
        };
        self.broken(i, how);
    }

    /// Over TLS, once the handshake is done: timed and counted, what it negotiated noted,
    /// and h2 required of ALPN. False when the connection was failed for it.
    fn note_handshake(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        let Some(Transport::Tls(t)) = c.io.as_mut() else {
            return true;
        };
        let Some((resumed, established)) = t.handshake_done() else {
            return true;
        };
        let took = micros(established.saturating_duration_since(c.began));
        let h2 = t.alpn() == Some(b"h2");
        self.rec.tls_handshake(resumed, took);
        let figures = self.rec.tls();
        if figures.wants_negotiated(!resumed) {
            let n = t.negotiated();
            (figures.version, figures.cipher, figures.group) = (n.version, n.cipher, n.group);
            figures.alpn = n.alpn;
        }
        if !h2 {
            let chose = t.alpn().map(|p| String::from_utf8_lossy(p).into_owned());
            self.rec
                .tls()
                .failed(TlsFailure::AlpnRefused, || match chose {
                    Some(p) => format!("the server chose {p} by ALPN"),
                    None => "the server chose no protocol by ALPN".into(),
                });
            self.broken(i, Broken::Tls);
            return false;
        }
        true
    }

    /// Reads and decodes what the socket holds, then acts on the streams that ended.
    fn read(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            let Some(io) = c.io.as_mut() else { return };
            let tls = io.is_tls();
            let result = io.read(&mut self.buf);
            let now = Instant::now();
            if tls && !self.note_handshake(i) {
                break;
            }
            match result {
                Ok(0) => {
                    self.broken(i, Broken::Read);
                    break;
                }
                Ok(n) => {
                    let second = self.second(now);
                    self.rec.bytes_in(second, n as u64);
                    let c = &mut self.conns[i];
                    let body = &self.h2.body;
                    let server = &mut self.rec.server_header;
                    let state = &mut c.state;
                    let fed = c.decoder.feed(&self.buf[..n], &mut |ev| {
                        state.on_event(ev, now, body, server)
                    });
                    if let Err(e) = fed {
                        self.protocol_error(i, e);
                        break;
                    }
                    // TLS reads one record's plaintext at a time: read on to WouldBlock.
                    if !tls && n < self.buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.failed_io(i, &e, Broken::Read);
                    break;
                }
            }
        }
        self.settle(i, Instant::now());
    }

    /// A frame broke the protocol: GOAWAY with its code, the connection closed.
    fn protocol_error(&mut self, i: usize, e: FrameError) {
        self.rec.h2().connection_error(e.code.name());
        self.conns[i].state.fail(e.code);
        self.flush(i);
        self.close(i);
    }

    /// The connection failed under its streams.
    fn broken(&mut self, i: usize, how: Broken) {
        self.conns[i].state.end_all(how);
        self.close(i);
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.io = None;
        c.link = Link::Closed;
    }

    /// Records the streams that ended on connection `i`, sends each slot's next request,
    /// reconnects when the connection takes no more streams and has answered the rest, and
    /// writes what was queued.
    fn settle(&mut self, i: usize, now: Instant) {
        let second = self.second(now);
        if let Some(max) = self.conns[i].state.peer_max_seen.take() {
            self.rec.h2().server_max(max);
        }
        if let Some(code) = self.conns[i].state.goaway_received.take() {
            let h2 = self.rec.h2();
            h2.goaways += 1;
            if code != ErrorCode::NoError {
                h2.connection_error(code.name());
            }
        }
        let mut k = 0;
        while k < self.conns[i].state.ended.len() {
            let (s, how) = self.conns[i].state.ended[k];
            k += 1;
            self.record(i, s, how, now, second);
        }
        self.conns[i].state.ended.clear();
        let c = &mut self.conns[i];
        if c.link == Link::Open && c.state.closing() && c.state.open_streams == 0 {
            self.flush(i);
            self.close(i);
        }
        let c = &self.conns[i];
        if c.link == Link::Closed && c.state.slots.iter().any(|s| s.queued) {
            self.open(i, now);
        } else if c.link == Link::Open {
            self.open_queued(i, now);
        }
        self.flush(i);
    }

    /// One stream's end, recorded; its slot's next request begun (queued).
    fn record(&mut self, i: usize, s: usize, how: Ended, now: Instant, second: u32) {
        let slot = self.conns[i].state.slots[s];
        match how {
            Ended::Response { status, body } => {
                let times = crate::stats::ResponseTimes::ended(
                    now,
                    slot.intended,
                    slot.sent,
                    slot.first_byte,
                    slot.connect_us,
                );
                self.spec.live.response(now, times.total_us);
                self.rec.response(second, status, body, times);
                self.clients.answered(i, now);
                self.rec.keepalive_responses += 1;
                let c = &mut self.conns[i];
                if let (false, Some(first)) = (c.first_byte_noted, c.state.first_response) {
                    c.first_byte_noted = true;
                    let us = micros(first.saturating_duration_since(c.opened));
                    self.rec.connection_first_byte(us);
                }
            }
            Ended::Unprocessed { refused } => {
                // Never processed: the request goes out again and counts once, when answered
                // (open loop: still timed from when it was due). A refusal is a reset by its
                // code too, so the figures tell it from a GOAWAY's leftovers.
                if refused {
                    self.rec.h2().reset(ErrorCode::RefusedStream.name());
                }
                self.rec.h2().retried += 1;
                self.spec.tickets.give_back(i);
                self.request_at(i, s, slot.intended, now);
                return;
            }
            Ended::Reset(code) => {
                self.rec.h2().reset(code.name());
                self.error(ErrorKind::Protocol, now, second);
            }
            Ended::Broken(Broken::Read) => self.error(ErrorKind::Read, now, second),
            Ended::Broken(Broken::Write) => self.error(ErrorKind::Write, now, second),
            Ended::Broken(Broken::Tls) => self.error(ErrorKind::Tls, now, second),
            Ended::Broken(Broken::Protocol(_)) => self.error(ErrorKind::Protocol, now, second),
        }
        slot_schedule::after_response(self, i, s, now);
    }

    /// The first requests: closed loop, every slot at once; open loop, each slot at its place
    /// in the schedule.
    fn begin(&mut self) {
        let now = Instant::now();
        let streams = self.h2.streams.max(1) as usize;
        if self.open.is_some() {
            return slot_schedule::begin(self, self.conns.len(), streams);
        }
        for i in 0..self.conns.len() {
            for s in 0..streams {
                self.request(i, s, now);
            }
            self.flush(i);
        }
    }

    /// Open loop: how long the poll may wait, the send timer armed for the next due time.
    fn arm_timer(&mut self, wake: Instant, now: Instant) -> Result<Duration, EngineError> {
        // A connect to try again does not wait.
        let wake = if self.reconnect.is_empty() { wake } else { now };
        match self.open.as_mut() {
            Some(open) => open.arm(wake, now),
            None => Ok(wake.saturating_duration_since(now)),
        }
    }

    fn error(&mut self, kind: ErrorKind, now: Instant, second: u32) {
        self.rec.error(second, kind);
        self.spec.live.error(now, kind);
    }

    /// Streams past their deadline are reset (CANCEL) and count as timeouts, as do connects
    /// that take longer; a connection whose connect failed is tried again.
    fn expire(&mut self, now: Instant) {
        let second = self.second(now);
        for i in 0..self.conns.len() {
            let connecting = self.conns[i].link == Link::Connecting;
            let mut late = false;
            for s in 0..self.conns[i].state.slots.len() {
                let slot = &self.conns[i].state.slots[s];
                let waiting = slot.in_flight() || (slot.queued && connecting);
                if !waiting || now < slot.deadline {
                    continue;
                }
                late = true;
                if slot.in_flight() {
                    self.conns[i].state.cancel(s);
                }
                self.conns[i].state.slots[s].queued = false;
                self.error(ErrorKind::Timeout, now, second);
                slot_schedule::retry_later(self, i, s, now);
            }
            let c = &self.conns[i];
            let idle_closed = c.link == Link::Closed && c.state.slots.iter().any(|s| s.queued);
            if late || idle_closed {
                self.settle(i, now);
            }
        }
    }
}

/// The open loop over HTTP/2's stream slots.
impl Slots for H2Worker<'_> {
    fn schedule(&mut self) -> Option<&mut SlotSchedule> {
        self.open.as_mut()
    }

    fn spec(&self) -> &WorkerSpec {
        &self.spec
    }

    fn recorder(&mut self) -> &mut Recorder {
        &mut self.rec
    }

    fn next_due(&mut self, i: usize, s: usize) -> &mut Instant {
        &mut self.conns[i].state.slots[s].next_due
    }

    fn idle(&self, i: usize, s: usize) -> bool {
        self.conns[i].state.slots[s].idle()
    }

    fn request_at(&mut self, i: usize, s: usize, intended: Instant, now: Instant) -> bool {
        H2Worker::request_at(self, i, s, intended, now)
    }

    fn queue(&mut self, i: usize, s: usize, now: Instant) -> bool {
        H2Worker::queue(self, i, s, now)
    }

    fn set_intended(&mut self, i: usize, s: usize, intended: Instant) {
        self.conns[i].state.slots[s].intended = intended;
    }

    fn flush(&mut self, i: usize) {
        H2Worker::flush(self, i)
    }
    fn tickets_spent(&self) -> bool {
        self.spec.tickets.all_spent()
    }

    fn park(&mut self, i: usize, s: usize) {
        self.park_slot(i, s)
    }
}

/// HTTP/2 in the one worker loop.
impl Protocol for H2Worker<'_> {
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
        H2Worker::begin(self)
    }

    fn finished(&self) -> bool {
        self.active == 0
    }

    fn unanswered(&self) -> u64 {
        let streams = self.conns.iter().flat_map(|c| c.state.slots.iter());
        streams.filter(|s| s.in_flight()).count() as u64
    }

    fn wait(
        &mut self,
        events: &mut Events,
        wake: Instant,
        now: Instant,
    ) -> Result<(), EngineError> {
        let wait = self.arm_timer(wake, now)?;
        worker_loop::polled(self.poll.poll(events, Some(wait)))
    }

    fn on_event(&mut self, conn: usize, ready: Readiness) {
        H2Worker::on_event(self, conn, ready.readable, ready.writable)
    }

    fn send(&mut self, now: Instant) {
        self.reconnect_failed(now);
        slot_schedule::send_due(self, now);
    }

    fn expire(&mut self, now: Instant) {
        H2Worker::expire(self, now)
    }
}
