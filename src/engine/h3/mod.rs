//! The HTTP/3 worker: the same contract as the HTTP/1.1 and HTTP/2 workers (a spec in, a
//! recording out), over QUIC connections that each carry several concurrent request streams,
//! driven by the one worker loop (no runtime of QUIC's own).
//!
//! Closed loop: every connection has `--streams` slots; each slot sends its next request when
//! its response ends, on a new bidirectional stream while the server allows one more. A
//! GOAWAY stops new streams; the requests at or above its stream id go out again on a new
//! connection, opened once the old one has answered the rest. A stream the server resets with
//! H3_REQUEST_REJECTED was never processed and goes out again too; other resets are protocol
//! errors of their request.
//!
//! Open loop: every slot of every connection is one sender of the schedule
//! (`engine::slot_schedule`, shared with HTTP/2).

mod prime;
mod quic;
mod timers;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use mio::{Events, Poll, Token};
use quinn_proto::{ConnectionError, Dir, ReadError, StreamEvent, StreamId, VarInt};

pub use self::prime::{fetch_tickets, Fetch, Primed};
use self::quic::{DatagramBuffers, QuicConn, Received};
use self::timers::QuicTimers;
use super::clients::ClientSpans;
use super::slot_schedule::{self, SlotSchedule, Slots};
use super::tickets::Ticket;
use super::worker_base::{micros, WorkerOutcome, WorkerSpec};
use super::worker_loop::{self, Protocol, Readiness};
use super::{EngineError, WorkerProgress};
use crate::http::h3::{
    CriticalStreams, ErrorCode, ErrorScope, H3Error, ResponseParser, UniStreamParser,
    DEFAULT_MAX_HEADERS_FRAME,
};
use crate::stats::{ErrorKind, QuicFigures, Recorder, TlsFailure};

/// What an HTTP/3 run sends, encoded once for all its connections, and how it connects.
#[derive(Clone)]
pub struct H3Spec {
    /// The request's HEADERS (and DATA) frames: what every request stream carries, each
    /// stream a counted reference to them (no copy per request). Each worker takes its own
    /// copy, so no count is shared across workers.
    pub request: bytes::Bytes,
    /// A HEAD request: its responses have no content.
    pub head: bool,
    /// Our control stream's bytes (its type and SETTINGS).
    pub control: Arc<[u8]>,
    /// Concurrent request streams per connection.
    pub streams: u32,
    pub quic: quinn_proto::ClientConfig,
    pub server_name: String,
    /// `--0rtt`: a connection that has a session to resume sends its first requests as
    /// 0-RTT early data.
    pub zero_rtt: bool,
}

/// The QUIC transport of a run's connections: the server may open the few unidirectional
/// streams HTTP/3 has (control, QPACK's, and a reserved one or two), no bidirectional ones.
pub fn transport() -> quinn_proto::TransportConfig {
    let mut t = quinn_proto::TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(0));
    t.max_concurrent_uni_streams(VarInt::from_u32(8));
    t
}

/// One concurrent request of a connection.
struct Slot {
    stream: Option<StreamId>,
    /// A request waits for the connection (handshaking, or no stream may be opened yet).
    queued: bool,
    /// No more requests (the count is reached).
    parked: bool,
    intended: Instant,
    sent: Instant,
    first_byte: Option<Instant>,
    deadline: Instant,
    /// Handshake time, for the request that opened the connection.
    connect_us: Option<u64>,
    /// Request bytes written on its stream so far.
    written: usize,
    response: ResponseParser,
    /// Open loop: when this slot's next request is due.
    next_due: Instant,
}

impl Slot {
    fn new(now: Instant) -> Slot {
        Slot {
            stream: None,
            queued: false,
            parked: false,
            intended: now,
            sent: now,
            first_byte: None,
            deadline: now,
            connect_us: None,
            written: 0,
            response: ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME),
            next_due: now,
        }
    }

    /// Neither in flight nor waiting for a stream, nor done.
    fn idle(&self) -> bool {
        self.stream.is_none() && !self.queued && !self.parked
    }
}

/// How a request stream ended.
enum Ended {
    Response {
        status: u16,
        body: u64,
    },
    /// Never processed (above a GOAWAY, or H3_REQUEST_REJECTED): sent again.
    Unprocessed,
    /// The server reset it with this HTTP/3 code.
    Reset(u64),
    /// Its bytes broke HTTP/3 (the stream, or the connection, is ended with the code).
    Malformed(ErrorCode),
    /// The connection ended under it.
    Lost,
}

struct H3Conn {
    quic: Option<QuicConn>,
    /// The handshake completed.
    established: bool,
    /// Requests went out in 0-RTT early data, before the handshake completed.
    early: bool,
    slots: Vec<Slot>,
    /// The server's unidirectional streams (control, QPACK's) and what each says.
    uni: Vec<(StreamId, UniStreamParser)>,
    /// Which of the server's critical streams came (each at most once).
    critical: CriticalStreams,
    /// Our control stream and how much of it is written.
    control: Option<(StreamId, usize)>,
    /// The server's GOAWAY: no streams at or above this id are processed.
    goaway: Option<u64>,
    /// When the connection's handshake began.
    opened: Instant,
    first_byte_noted: bool,
}

pub struct H3Worker<'a> {
    spec: WorkerSpec,
    h3: H3Spec,
    poll: Poll,
    conns: Vec<H3Conn>,
    rec: Recorder,
    clients: ClientSpans,
    /// Slots not parked.
    active: usize,
    first_send: Option<Instant>,
    stop: &'a AtomicBool,
    progress: &'a WorkerProgress,
    /// Request streams that ended in this event batch: (connection, slot, how).
    ended: Vec<(usize, usize, Ended)>,
    /// Open loop: each slot's schedule.
    open: Option<SlotSchedule>,
    /// Every connection's datagrams pass through these.
    bufs: DatagramBuffers,
    /// Each connection's QUIC timer, earliest first.
    timers: QuicTimers,
    /// Scratch for the connections whose timer is due at a wake-up (kept so that taking
    /// them allocates nothing).
    due: Vec<usize>,
}

impl<'a> H3Worker<'a> {
    pub fn new(
        spec: WorkerSpec,
        h3: H3Spec,
        stop: &'a AtomicBool,
        progress: &'a WorkerProgress,
    ) -> Result<H3Worker<'a>, EngineError> {
        let now = spec.start;
        let mut h3 = h3;
        h3.request = bytes::Bytes::copy_from_slice(&h3.request);
        let streams = h3.streams.max(1) as usize;
        let mut rec = Recorder::new(spec.expected);
        rec.quic().streams_asked = h3.streams;
        let poll = Poll::new().map_err(EngineError::Poll)?;
        let open = SlotSchedule::new(&spec, streams, &poll)?;
        Ok(H3Worker {
            open,
            bufs: DatagramBuffers::new(),
            timers: QuicTimers::new(spec.connections),
            due: Vec::with_capacity(spec.connections),
            poll,
            conns: (0..spec.connections)
                .map(|_| H3Conn {
                    quic: None,
                    established: false,
                    early: false,
                    slots: (0..streams).map(|_| Slot::new(now)).collect(),
                    uni: Vec::with_capacity(4),
                    critical: CriticalStreams::default(),
                    control: None,
                    goaway: None,
                    opened: now,
                    first_byte_noted: false,
                })
                .collect(),
            rec,
            clients: ClientSpans::new(spec.connections),
            active: spec.connections * streams,
            first_send: None,
            stop,
            progress,
            ended: Vec::with_capacity(streams * 2),
            h3,
            spec,
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

    /// Slot `s` of connection `i` sends nothing more (its tickets are spent).
    fn park_slot(&mut self, i: usize, s: usize) {
        let slot = &mut self.conns[i].slots[s];
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
        let slot = &mut self.conns[i].slots[s];
        slot.queued = true;
        slot.intended = now;
        slot.deadline = now + self.spec.timeout;
        slot.connect_us = None;
        true
    }

    /// Slot `s` of connection `i` begins its next request (a ticket permitting).
    fn request(&mut self, i: usize, s: usize, now: Instant) {
        self.request_at(i, s, now, now);
    }

    /// [`H3Worker::request`], timed from `intended` (open loop: its due time). False when
    /// no request was begun (no ticket left, or the run is over).
    fn request_at(&mut self, i: usize, s: usize, intended: Instant, now: Instant) -> bool {
        if !self.queue(i, s, now) {
            return false;
        }
        self.conns[i].slots[s].intended = intended;
        if self.conns[i].quic.is_none() {
            self.open(i, now);
        } else {
            self.open_streams(i, now);
        }
        true
    }

    fn open(&mut self, i: usize, now: Instant) {
        self.clients.connecting(i, now);
        let c = &mut self.conns[i];
        c.opened = now;
        c.established = false;
        c.first_byte_noted = false;
        c.goaway = None;
        c.control = None;
        c.uni.clear();
        c.critical = CriticalStreams::default();
        match QuicConn::connect(
            &self.poll,
            Token(i),
            self.spec.addr,
            &self.h3.quic,
            &self.h3.server_name,
            now,
        ) {
            Ok(q) => self.conns[i].quic = Some(q),
            Err(_) => return self.connect_failed(i, ErrorKind::Connect, now),
        }
        if self.h3.zero_rtt {
            self.early_requests(i, now);
        }
    }

    /// `--0rtt`: with a session to resume, the connection's control stream and its queued
    /// requests go out at once, in 0-RTT early data.
    fn early_requests(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut() else { return };
        if !q.conn.has_0rtt() {
            self.rec.quic().zero_rtt_unavailable += 1;
            return;
        }
        c.early = true;
        self.open_control(i);
        self.open_streams(i, now);
    }

    /// Opens our control stream, if it is not open, and writes it.
    fn open_control(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut().filter(|_| c.control.is_none()) else {
            return;
        };
        if let Some(id) = q.conn.streams().open(Dir::Uni) {
            c.control = Some((id, 0));
            self.write(i, id);
        }
    }

    /// The connection could not be made, or its handshake failed: each queued request is an
    /// error of that `kind` (connect, or TLS), tried again at the next timeout scan (a refused
    /// connect would otherwise spin).
    fn connect_failed(&mut self, i: usize, kind: ErrorKind, now: Instant) {
        self.drop_connection(i);
        let second = self.second(now);
        for s in 0..self.conns[i].slots.len() {
            if self.conns[i].slots[s].queued {
                self.conns[i].slots[s].queued = false;
                self.error(kind, now, second);
                slot_schedule::retry_later(self, i, s, now);
            }
        }
    }

    /// Forgets the connection, its QUIC counters added to the run's.
    fn drop_connection(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if let Some(mut q) = c.quic.take() {
            q.deregister(&self.poll);
            let figures = self.rec.quic();
            figures.connection_ended(&q.counts());
            figures.datagrams_dropped_by_socket += q.dropped;
        }
        c.established = false;
        c.early = false;
        self.timers.set(i, None);
    }

    /// The connection's socket is readable: its datagrams in, then what they caused.
    fn on_readable(&mut self, i: usize) {
        let now = Instant::now();
        let Some(q) = self.conns[i].quic.as_mut() else {
            return;
        };
        match q.receive(now, &mut self.bufs) {
            Received::Datagrams { bytes, .. } => {
                let second = self.second(now);
                self.rec.bytes_in(second, bytes);
            }
            failed @ (Received::Refused | Received::Failed) => {
                let what = match failed {
                    Received::Refused => "port_unreachable",
                    _ => "socket_error",
                };
                self.rec.quic().connection_error(what);
                let established = self.conns[i].established;
                self.lost(i);
                if !established {
                    self.rec.quic().handshakes_failed += 1;
                    self.connect_failed(i, ErrorKind::Connect, now);
                }
                return;
            }
        }
        self.settle(i, now);
    }

    /// Acts on what the connection says (handshake done, streams readable, lost), records
    /// the requests that ended, starts the next ones and writes its datagrams.
    fn settle(&mut self, i: usize, now: Instant) {
        self.events(i, now);
        let second = self.second(now);
        let mut ended = std::mem::take(&mut self.ended);
        for (c, s, how) in ended.drain(..) {
            self.record(c, s, how, now, second);
        }
        self.ended = ended;
        let c = &self.conns[i];
        let in_flight = c.slots.iter().filter(|s| s.stream.is_some()).count();
        let queued = c.slots.iter().any(|s| s.queued);
        // A connection that takes no more streams and answered the rest is closed; the
        // queued requests go out on a new one.
        if c.quic.is_some() && c.goaway.is_some() && in_flight == 0 {
            self.close(i, now);
        }
        if self.conns[i].quic.is_none() && queued {
            self.open(i, now);
        }
        self.open_streams(i, now);
        self.transmit(i, now);
    }

    fn transmit(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        if let Some(q) = c.quic.as_mut() {
            self.rec.bytes_written += q.transmit(now, &mut self.bufs);
            self.timers.set(i, q.timeout());
            if q.conn.is_drained() {
                self.drop_connection(i);
            }
        }
    }

    /// The connection's events: handshake, streams, loss.
    fn events(&mut self, i: usize, now: Instant) {
        loop {
            let Some(q) = self.conns[i].quic.as_mut() else {
                return;
            };
            let Some(ev) = q.conn.poll() else { return };
            match ev {
                quinn_proto::Event::Connected => self.established(i, now),
                quinn_proto::Event::ConnectionLost { reason } => {
                    self.connection_lost(i, &reason, now)
                }
                quinn_proto::Event::Stream(StreamEvent::Readable { id }) => self.read(i, id, now),
                quinn_proto::Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    self.accept_uni(i, now)
                }
                quinn_proto::Event::Stream(StreamEvent::Writable { id }) => self.write(i, id),
                // Available streams are taken in `open_streams`; a stopped request stream's
                // response still comes (or its reset).
                _ => {}
            }
        }
    }

    /// The handshake is done: timed, ALPN checked, our control stream opened.
    fn established(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut() else { return };
        let took = micros(now.saturating_duration_since(c.opened));
        let alpn = q
            .conn
            .crypto_session()
            .handshake_data()
            .and_then(|d| {
                d.downcast::<quinn_proto::crypto::rustls::HandshakeData>()
                    .ok()
            })
            .and_then(|d| d.protocol);
        if alpn.as_deref() != Some(b"h3".as_slice()) {
            let chose = alpn.map(|p| String::from_utf8_lossy(&p).into_owned());
            self.rec
                .tls()
                .failed(TlsFailure::AlpnRefused, || match chose {
                    Some(p) => format!("the server chose {p} by ALPN"),
                    None => "the server chose no protocol by ALPN".into(),
                });
            self.rec.quic().handshakes_failed += 1;
            return self.connect_failed(i, ErrorKind::Tls, now);
        }
        c.established = true;
        // A full handshake verified the server's certificate; a resumed one has none.
        let resumed = !q.verified;
        self.rec.connections_opened += 1;
        self.rec.quic().handshakes += 1;
        self.rec.tls_handshake(resumed, took);
        if std::mem::take(&mut self.conns[i].early) {
            self.early_answered(i);
        }
        let figures = self.rec.tls();
        if figures.wants_negotiated(true) {
            figures.version = Some("TLSv1_3".into());
            figures.alpn = Some("h3".into());
        }
        let c = &mut self.conns[i];
        if let Some(s) = c.slots.iter_mut().find(|s| s.queued) {
            s.connect_us = Some(took);
        }
        self.open_control(i);
    }

    /// The handshake of a connection that sent 0-RTT early data is done: the server accepted
    /// the early data, or refused it, and then QUIC forgot the streams it carried (their
    /// requests go out again, never processed, and are counted once) and our control stream.
    fn early_answered(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_ref() else { return };
        if q.conn.accepted_0rtt() {
            self.rec.quic().zero_rtt_accepted += 1;
            return;
        }
        let mut again = 0;
        for slot in c.slots.iter_mut() {
            if slot.stream.take().is_some() {
                slot.queued = true;
                again += 1;
            }
        }
        c.control = None;
        let q = self.rec.quic();
        q.zero_rtt_rejected += 1;
        q.retried += again;
    }

    /// Writes what is left of our control stream or of a request on stream `id`.
    fn write(&mut self, i: usize, id: StreamId) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut() else { return };
        if let Some((control, written)) = c.control.as_mut().filter(|(s, _)| *s == id) {
            let bytes = &self.h3.control[*written..];
            if let Ok(n) = q.conn.send_stream(*control).write(bytes) {
                *written += n;
            }
            return;
        }
        let Some(slot) = c.slots.iter_mut().find(|s| s.stream == Some(id)) else {
            return;
        };
        let request = &self.h3.request;
        let mut send = q.conn.send_stream(id);
        if slot.written < request.len() {
            let mut rest = [request.slice(slot.written..)];
            if let Ok(w) = send.write_chunks(&mut rest) {
                slot.written += w.bytes;
            }
        }
        if slot.written == request.len() {
            // The request is whole: the stream's send side ends with it.
            let _ = send.finish();
        }
    }

    /// Opens streams for queued slots while the connection takes them.
    fn open_streams(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        if !(c.established || c.early) || c.goaway.is_some() {
            return;
        }
        for s in 0..c.slots.len() {
            let c = &mut self.conns[i];
            if !c.slots[s].queued {
                continue;
            }
            let Some(q) = c.quic.as_mut() else { return };
            let Some(id) = q.conn.streams().open(Dir::Bi) else {
                // The server's stream limit: the rest wait for its next MAX_STREAMS.
                return;
            };
            let slot = &mut c.slots[s];
            // Closed loop: a request waiting for a stream begins when it goes out, as a
            // connection's next request does in HTTP/1.1.
            if slot.connect_us.is_none() && self.open.is_none() {
                slot.intended = now;
            }
            slot.queued = false;
            slot.stream = Some(id);
            slot.sent = now;
            slot.first_byte = None;
            slot.deadline = now + self.spec.timeout;
            slot.written = 0;
            slot.response.start(self.h3.head);
            self.write(i, id);
        }
    }

    /// Reads what stream `id` holds: a response's bytes, or a server stream's.
    fn read(&mut self, i: usize, id: StreamId, now: Instant) {
        if id.dir() == Dir::Uni {
            return self.read_uni(i, id);
        }
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut() else { return };
        let Some(s) = c.slots.iter().position(|s| s.stream == Some(id)) else {
            return;
        };
        let slot = &mut c.slots[s];
        let mut recv = q.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let mut broke = None;
        let end = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    slot.first_byte.get_or_insert(now);
                    if let Err(e) = slot.response.feed(&chunk.bytes) {
                        broke = Some(e);
                        break Some(Ended::Malformed(e.code));
                    }
                }
                Ok(None) => match slot.response.finish() {
                    Ok(r) => {
                        break Some(Ended::Response {
                            status: r.status,
                            body: r.body_bytes,
                        })
                    }
                    Err(e) => {
                        broke = Some(e);
                        break Some(Ended::Malformed(e.code));
                    }
                },
                Err(ReadError::Blocked) => break None,
                Err(ReadError::Reset(code))
                    if code.into_inner() == ErrorCode::REQUEST_REJECTED.0 =>
                {
                    break Some(Ended::Unprocessed)
                }
                Err(ReadError::Reset(code)) => break Some(Ended::Reset(code.into_inner())),
            }
        };
        let _ = chunks.finalize();
        let Some(how) = end else { return };
        c.slots[s].stream = None;
        self.ended.push((i, s, how));
        match broke {
            Some(e) if e.scope == ErrorScope::Connection => self.protocol_error(i, e),
            Some(e) => {
                let code = varint(e.code);
                let _ = q.conn.recv_stream(id).stop(code);
                let _ = q.conn.send_stream(id).reset(code);
            }
            None => {}
        }
    }

    /// The server opened unidirectional streams (its control stream, QPACK's).
    fn accept_uni(&mut self, i: usize, now: Instant) {
        loop {
            let c = &mut self.conns[i];
            let Some(q) = c.quic.as_mut() else { return };
            let Some(id) = q.conn.streams().accept(Dir::Uni) else {
                return;
            };
            c.uni.push((id, UniStreamParser::default()));
            self.read(i, id, now);
        }
    }

    /// Reads a server stream: a GOAWAY is noted; an error of HTTP/3 ends the connection.
    fn read_uni(&mut self, i: usize, id: StreamId) {
        let c = &mut self.conns[i];
        let Some(q) = c.quic.as_mut() else { return };
        let Some((_, uni)) = c.uni.iter_mut().find(|(s, _)| *s == id) else {
            return;
        };
        let mut recv = q.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let mut failed = None;
        loop {
            let news = match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => uni.feed(&chunk.bytes),
                // A critical stream's end is an error of its own.
                Ok(None) => uni.finish().map(|()| Default::default()),
                Err(_) => break,
            };
            let news = news.and_then(|n| match n.kind {
                Some(kind) => c.critical.claim(kind).map(|()| n),
                None => Ok(n),
            });
            match news {
                Ok(n) => {
                    if let Some(goaway) = n.goaway {
                        c.goaway = Some(c.goaway.map_or(goaway, |g| g.min(goaway)));
                        self.rec.quic().goaways += 1;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        if let Some(e) = failed {
            return self.protocol_error(i, e);
        }
        if self.conns[i].goaway.is_some() {
            self.goaway_leftovers(i);
        }
    }

    /// The server broke HTTP/3: the connection is closed with the error's code; its requests
    /// in flight fail.
    fn protocol_error(&mut self, i: usize, e: H3Error) {
        self.rec
            .quic()
            .connection_error(&format!("ours:{}", code_name(e.code.0)));
        if let Some(q) = self.conns[i].quic.as_mut() {
            q.conn
                .close(Instant::now(), varint(e.code), bytes::Bytes::new());
        }
    }

    /// After a GOAWAY: requests on streams at or above its id were not processed and go out
    /// again (on the next connection).
    fn goaway_leftovers(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(last) = c.goaway else { return };
        for s in 0..c.slots.len() {
            let Some(id) = c.slots[s].stream else {
                continue;
            };
            if u64::from(id) >= last {
                c.slots[s].stream = None;
                self.ended.push((i, s, Ended::Unprocessed));
            }
        }
    }

    /// The connection ended: why, counted; its streams' requests ended with it.
    fn connection_lost(&mut self, i: usize, reason: &ConnectionError, now: Instant) {
        let established = self.conns[i].established;
        let mut kind = ErrorKind::Connect;
        if !established {
            if let Some((failure, what)) = handshake_failure(reason) {
                self.rec.tls().failed(failure, || what);
                kind = ErrorKind::Tls;
            }
            self.rec.quic().handshakes_failed += 1;
        }
        if let Some(code) = error_name(reason) {
            self.rec.quic().connection_error(&code);
        }
        self.lost(i);
        if !established {
            self.connect_failed(i, kind, now);
        }
    }

    /// Every request in flight on connection `i` ended with it; the connection is forgotten.
    fn lost(&mut self, i: usize) {
        let c = &mut self.conns[i];
        for s in 0..c.slots.len() {
            if c.slots[s].stream.take().is_some() {
                self.ended.push((i, s, Ended::Lost));
            }
        }
        self.drop_connection(i);
    }

    /// Closes connection `i` (its requests answered): HTTP/3's no-error close.
    fn close(&mut self, i: usize, now: Instant) {
        if let Some(q) = self.conns[i].quic.as_mut() {
            q.conn
                .close(now, varint(ErrorCode::NO_ERROR), bytes::Bytes::new());
            self.rec.bytes_written += q.transmit(now, &mut self.bufs);
        }
        self.drop_connection(i);
    }

    /// One stream's end, recorded; its slot's next request begun (queued).
    fn record(&mut self, i: usize, s: usize, how: Ended, now: Instant, second: u32) {
        let slot = &self.conns[i].slots[s];
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
                if !c.first_byte_noted {
                    c.first_byte_noted = true;
                    let us = micros(now.saturating_duration_since(c.opened));
                    self.rec.connection_first_byte(us);
                }
            }
            Ended::Unprocessed => {
                // Never processed: the request goes out again and counts once, when answered
                // (open loop: still timed from when it was due).
                self.rec.quic().retried += 1;
                self.spec.tickets.give_back(i);
                let intended = slot.intended;
                self.request_at(i, s, intended, now);
                return;
            }
            Ended::Reset(code) => {
                self.rec.quic().reset(&code_name(code));
                self.error(ErrorKind::Protocol, now, second);
            }
            Ended::Malformed(code) => {
                self.rec
                    .quic()
                    .reset(&format!("ours:{}", code_name(code.0)));
                self.error(ErrorKind::Protocol, now, second);
            }
            Ended::Lost => self.error(ErrorKind::Read, now, second),
        }
        slot_schedule::after_response(self, i, s, now);
    }

    fn error(&mut self, kind: ErrorKind, now: Instant, second: u32) {
        self.rec.error(second, kind);
        self.spec.live.error(now, kind);
    }

    /// Streams past their deadline are cancelled and count as timeouts, as do handshakes that
    /// take longer; a connection whose handshake failed is tried again.
    fn expire(&mut self, now: Instant) {
        let second = self.second(now);
        for i in 0..self.conns.len() {
            let handshaking = self.conns[i].quic.is_some() && !self.conns[i].established;
            let mut late = false;
            for s in 0..self.conns[i].slots.len() {
                let c = &mut self.conns[i];
                let slot = &mut c.slots[s];
                let waiting = slot.stream.is_some() || (slot.queued && handshaking);
                if !waiting || now < slot.deadline {
                    continue;
                }
                late = true;
                if let (Some(id), Some(q)) = (slot.stream.take(), c.quic.as_mut()) {
                    let code = varint(ErrorCode::REQUEST_CANCELLED);
                    let _ = q.conn.recv_stream(id).stop(code);
                    let _ = q.conn.send_stream(id).reset(code);
                }
                slot.queued = false;
                self.error(ErrorKind::Timeout, now, second);
                slot_schedule::retry_later(self, i, s, now);
            }
            if late && handshaking {
                // The handshake took longer than a request may: a new connection next.
                self.rec.quic().handshakes_failed += 1;
                self.rec.quic().connection_error("handshake_timeout");
                self.drop_connection(i);
            }
            let c = &self.conns[i];
            let idle_closed = c.quic.is_none() && c.slots.iter().any(|s| s.queued);
            if late || idle_closed {
                self.settle(i, now);
            }
        }
    }

    /// Connections whose timer is due act on it.
    fn timers(&mut self, now: Instant) {
        let mut due = std::mem::take(&mut self.due);
        self.timers.take_due(now, &mut due);
        for &i in &due {
            if let Some(q) = self.conns[i].quic.as_mut() {
                q.on_timeout(now);
            }
            self.settle(i, now);
        }
        self.due = due;
    }

    /// The run's end: each connection closed with HTTP/3's no-error code (so the server
    /// forgets it now, not at its idle timeout) and its counters added.
    fn finish(&mut self) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            self.close(i, now);
        }
    }
}

/// Why a handshake failed, by what the user can do about it, from the TLS alert QUIC
/// carries (ours, when we refused the server's certificate; the server's otherwise).
fn handshake_failure(reason: &ConnectionError) -> Option<(TlsFailure, String)> {
    let (code, ours, what) = match reason {
        ConnectionError::TransportError(e) => (u64::from(e.code), true, e.reason.clone()),
        ConnectionError::ConnectionClosed(c) => (
            u64::from(c.error_code),
            false,
            String::from_utf8_lossy(&c.reason).into_owned(),
        ),
        _ => return None,
    };
    // QUIC carries a TLS alert as the crypto error 0x100 + its code (RFC 9001 §4.8).
    let alert = code.checked_sub(0x100).filter(|a| *a < 0x100)?;
    let failure = match (alert, ours) {
        (48, true) => TlsFailure::UntrustedCertificate,
        (45, true) => TlsFailure::CertificateDates,
        (49, true) => TlsFailure::NotPinned,
        (42, true) if what.contains("NotValidForName") || what.contains("not valid for name") => {
            TlsFailure::NameMismatch
        }
        (42 | 44 | 46 | 51, true) => TlsFailure::BadCertificate,
        (120, _) => TlsFailure::AlpnRefused,
        (40 | 70 | 71, _) => TlsFailure::NothingInCommon,
        (_, false) => TlsFailure::ServerAlert,
        (_, true) => TlsFailure::Other,
    };
    let what = if what.is_empty() {
        format!("TLS alert {alert}")
    } else {
        what
    };
    Some((failure, what))
}

/// A lost connection's error as the figures name it; None for our own close.
fn error_name(reason: &ConnectionError) -> Option<String> {
    Some(match reason {
        ConnectionError::VersionMismatch => "version_mismatch".into(),
        ConnectionError::TransportError(e) => format!("ours:transport:{:#x}", u64::from(e.code)),
        ConnectionError::ConnectionClosed(c) => {
            format!("transport:{:#x}", u64::from(c.error_code))
        }
        ConnectionError::ApplicationClosed(c) => {
            let code = c.error_code.into_inner();
            if code == ErrorCode::NO_ERROR.0 {
                "application:h3_no_error".into()
            } else {
                format!("application:{}", code_name(code))
            }
        }
        ConnectionError::Reset => "stateless_reset".into(),
        ConnectionError::TimedOut => "idle_timeout".into(),
        ConnectionError::CidsExhausted => "cids_exhausted".into(),
        ConnectionError::LocallyClosed => return None,
    })
}

/// An HTTP/3 error code as the figures name it: the RFC's name in lower case, else its
/// number.
fn code_name(code: u64) -> String {
    match ErrorCode(code).name() {
        Some(name) => name.to_ascii_lowercase(),
        None => format!("{code:#x}"),
    }
}

fn varint(code: ErrorCode) -> VarInt {
    VarInt::from_u64(code.0).unwrap_or(VarInt::from_u32(ErrorCode::GENERAL_PROTOCOL_ERROR.0 as u32))
}

/// The open loop over HTTP/3's stream slots.
impl Slots for H3Worker<'_> {
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
        &mut self.conns[i].slots[s].next_due
    }

    fn idle(&self, i: usize, s: usize) -> bool {
        self.conns[i].slots[s].idle()
    }

    fn request_at(&mut self, i: usize, s: usize, intended: Instant, now: Instant) -> bool {
        H3Worker::request_at(self, i, s, intended, now)
    }

    fn queue(&mut self, i: usize, s: usize, now: Instant) -> bool {
        H3Worker::queue(self, i, s, now)
    }

    fn set_intended(&mut self, i: usize, s: usize, intended: Instant) {
        self.conns[i].slots[s].intended = intended;
    }

    fn flush(&mut self, i: usize) {
        self.transmit(i, Instant::now());
    }

    fn tickets_spent(&self) -> bool {
        self.spec.tickets.all_spent()
    }

    fn park(&mut self, i: usize, s: usize) {
        self.park_slot(i, s)
    }
}

/// HTTP/3 in the one worker loop.
impl Protocol for H3Worker<'_> {
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
        let now = Instant::now();
        let streams = self.h3.streams.max(1) as usize;
        if self.open.is_some() {
            return slot_schedule::begin(self, self.conns.len(), streams);
        }
        for i in 0..self.conns.len() {
            for s in 0..self.conns[i].slots.len() {
                self.request(i, s, now);
            }
            self.transmit(i, now);
        }
    }

    fn finished(&self) -> bool {
        self.active == 0
    }

    fn unanswered(&self) -> u64 {
        let streams = self.conns.iter().flat_map(|c| c.slots.iter());
        streams.filter(|s| s.stream.is_some()).count() as u64
    }

    fn wait(
        &mut self,
        events: &mut Events,
        wake: Instant,
        now: Instant,
    ) -> Result<(), EngineError> {
        let wake = self.timers.next().map_or(wake, |t| t.min(wake));
        let wait = match self.open.as_mut() {
            Some(open) => open.arm(wake, now)?,
            None => wake.saturating_duration_since(now),
        };
        worker_loop::polled(self.poll.poll(events, Some(wait)))
    }

    fn on_event(&mut self, conn: usize, ready: Readiness) {
        if ready.readable && conn < self.conns.len() {
            self.on_readable(conn);
        }
    }

    fn send(&mut self, now: Instant) {
        self.timers(now);
        slot_schedule::send_due(self, now);
    }

    fn expire(&mut self, now: Instant) {
        H3Worker::expire(self, now)
    }

    fn finish(&mut self) {
        H3Worker::finish(self)
    }

    fn quic_now(&mut self) -> Option<QuicFigures> {
        let mut now = self.rec.quic().clone();
        for q in self.conns.iter().filter_map(|c| c.quic.as_ref()) {
            now.connection_ended(&q.counts());
        }
        Some(now)
    }
}
