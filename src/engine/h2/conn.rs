//! One HTTP/2 connection's state machine: its streams (a fixed number of slots, one per
//! concurrent request), both directions' flow-control windows, SETTINGS, PING and GOAWAY.
//!
//! It turns the frame decoder's events into stream endings (`ended`, read by the worker,
//! which records them and decides what each slot does next) and queues what must be sent in
//! one output buffer, written once per event batch. Nothing here allocates per request: the
//! slots, the output buffer and the ended list are sized when the connection is made.

use std::time::Instant;

use crate::http::h2::frame::{self, Event, FrameError};
use crate::http::h2::hpack::{read_response, RequestBlocks};
use crate::http::h2::{self as h2, ErrorCode};

/// Our receive windows: a stream's (SETTINGS_INITIAL_WINDOW_SIZE) and the connection's.
/// Large enough that a fast server is never held up between our WINDOW_UPDATEs, small enough
/// that a response of a few MiB needs them (so the path is exercised, not assumed).
pub const STREAM_WINDOW: u32 = 4 << 20;
pub const CONNECTION_WINDOW: u32 = 16 << 20;
/// Stream ids are odd and below 2^31; near the end a connection takes no new streams.
const LAST_STREAM_ID: u32 = 0x7fff_fff0;

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// A whole response (END_STREAM seen): its status and body bytes.
    Response { status: u16, body: u64 },
    /// The server reset the stream.
    Reset(ErrorCode),
    /// Above a GOAWAY's last stream id, or refused (RST_STREAM REFUSED_STREAM, `refused`):
    /// never processed, safe to send again.
    Unprocessed { refused: bool },
    /// The connection failed under it (closed, or a protocol error of either side).
    Broken(Broken),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Closed or reset by the peer before the response ended.
    Read,
    /// Writing failed.
    Write,
    /// TLS refused (counted by its reason by the worker), or the server did not choose h2.
    Tls,
    /// A protocol error: the connection was ended with this code.
    Protocol(ErrorCode),
}

/// One slot: a concurrent request of the closed loop, or an open-loop sender.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// The stream carrying its request; 0 when none is open.
    pub id: u32,
    /// A request waits for the connection (connecting, or no stream may be opened yet).
    pub queued: bool,
    /// No more requests (the count is reached).
    pub parked: bool,
    pub intended: Instant,
    pub sent: Instant,
    pub first_byte: Option<Instant>,
    pub deadline: Instant,
    /// Connect time, for the request that opened the connection.
    pub connect_us: Option<u64>,
    /// Open loop: when this slot's next request is due.
    pub next_due: Instant,
    status: u16,
    body: u64,
    /// Bytes received on the stream since our last WINDOW_UPDATE for it.
    unacked: u32,
    /// What we may still send on the stream (request bodies).
    send_window: i64,
    /// Request body bytes sent so far.
    body_sent: usize,
}

impl Slot {
    fn new(now: Instant) -> Slot {
        Slot {
            id: 0,
            queued: false,
            parked: false,
            intended: now,
            sent: now,
            first_byte: None,
            deadline: now,
            connect_us: None,
            next_due: now,
            status: 0,
            body: 0,
            unacked: 0,
            send_window: 0,
            body_sent: 0,
        }
    }

    pub fn in_flight(&self) -> bool {
        self.id != 0
    }

    /// Neither in flight nor waiting for a stream, nor done.
    pub fn idle(&self) -> bool {
        self.id == 0 && !self.queued && !self.parked
    }
}

/// The connection's state beside its socket and frame decoder.
pub struct ConnState {
    pub slots: Vec<Slot>,
    /// Slots whose stream ended since the worker last looked, with how.
    pub ended: Vec<(usize, Ended)>,
    out: Vec<u8>,
    written: usize,
    next_id: u32,
    /// Streams open now.
    pub open_streams: u32,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS once its SETTINGS came (unbounded if they
    /// do not set it; one stream before they come: `peer_settings_seen`).
    pub peer_max_streams: u32,
    /// The server's first SETTINGS has come. Until then one stream only: its limit is not
    /// known yet, and streams above it would be refused (nginx with
    /// `http2_max_concurrent_streams 3` refused 4 of 8 streams opened at once); the others
    /// open when it comes, one round trip later.
    peer_settings_seen: bool,
    /// Set when the server's SETTINGS lowered it below the slots: noted once.
    pub peer_max_seen: Option<u32>,
    peer_initial_window: i64,
    peer_max_frame: usize,
    send_window: i64,
    /// The server's table is smaller than HPACK's default: the block without indexing.
    plain_blocks: bool,
    first_block_sent: bool,
    /// Bytes received on the connection since our last connection WINDOW_UPDATE.
    unacked: u32,
    /// The server's GOAWAY: its last stream id; no new streams go out.
    pub goaway: Option<u32>,
    /// A GOAWAY came (with this code) since the worker last looked.
    pub goaway_received: Option<ErrorCode>,
    /// Every DATA/HEADERS for a stream we no longer track is ignored (we reset it, or it
    /// timed out); ids above this were never opened.
    highest_opened: u32,
    /// When the connection's first final response head came (h2load's "time to 1st byte"
    /// ends there).
    pub first_response: Option<Instant>,
}

impl ConnState {
    pub fn new(streams: usize, now: Instant) -> ConnState {
        ConnState {
            slots: vec![Slot::new(now); streams],
            ended: Vec::with_capacity(streams),
            out: Vec::with_capacity(4096),
            written: 0,
            next_id: 1,
            open_streams: 0,
            peer_max_streams: u32::MAX,
            peer_settings_seen: false,
            peer_max_seen: None,
            peer_initial_window: i64::from(h2::DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME as usize,
            send_window: i64::from(h2::DEFAULT_WINDOW),
            plain_blocks: false,
            first_block_sent: false,
            unacked: 0,
            goaway: None,
            goaway_received: None,
            highest_opened: 0,
            first_response: None,
        }
    }

    /// A new connection on the same slots: everything but the slots' requests starts over.
    pub fn reset(&mut self) {
        self.out.clear();
        self.written = 0;
        self.next_id = 1;
        self.open_streams = 0;
        self.peer_max_streams = u32::MAX;
        self.peer_settings_seen = false;
        self.peer_initial_window = i64::from(h2::DEFAULT_WINDOW);
        self.peer_max_frame = frame::DEFAULT_MAX_FRAME as usize;
        self.send_window = i64::from(h2::DEFAULT_WINDOW);
        self.plain_blocks = false;
        self.first_block_sent = false;
        self.unacked = 0;
        self.goaway = None;
        self.goaway_received = None;
        self.highest_opened = 0;
        self.first_response = None;
    }

    /// The preface, our SETTINGS (no push, a zero HPACK table for responses, our stream
    /// window) and the connection window raised to ours.
    pub fn start(&mut self) {
        self.out.extend_from_slice(h2::PREFACE);
        frame::put_settings(
            &mut self.out,
            &[
                (h2::SETTINGS_ENABLE_PUSH, 0),
                (h2::SETTINGS_HEADER_TABLE_SIZE, 0),
                (h2::SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
            ],
        );
        frame::put_window_update(&mut self.out, 0, CONNECTION_WINDOW - h2::DEFAULT_WINDOW);
    }

    /// Whether another stream may be opened now.
    pub fn can_open(&self) -> bool {
        let max = if self.peer_settings_seen {
            self.peer_max_streams
        } else {
            1
        };
        self.goaway.is_none() && self.open_streams < max && self.next_id < LAST_STREAM_ID
    }

    /// No stream will be opened on this connection again (GOAWAY, or ids used up).
    pub fn closing(&self) -> bool {
        self.goaway.is_some() || self.next_id >= LAST_STREAM_ID
    }

    /// Opens a stream for slot `s`'s request: its HEADERS (and body, as the windows allow)
    /// queued for sending.
    pub fn open(&mut self, s: usize, blocks: &RequestBlocks, body: &[u8], now: Instant) {
        let id = self.next_id;
        self.next_id += 2;
        self.highest_opened = id;
        self.open_streams += 1;
        let block = if self.plain_blocks {
            &blocks.plain
        } else if self.first_block_sent {
            &blocks.later
        } else {
            &blocks.first
        };
        self.first_block_sent = true;
        frame::put_headers(
            &mut self.out,
            id,
            block,
            body.is_empty(),
            self.peer_max_frame,
        );
        let slot = &mut self.slots[s];
        slot.id = id;
        slot.queued = false;
        slot.sent = now;
        slot.first_byte = None;
        slot.status = 0;
        slot.body = 0;
        slot.unacked = 0;
        slot.send_window = self.peer_initial_window;
        slot.body_sent = 0;
        if !body.is_empty() {
            self.send_body(s, body);
        }
    }

    /// Sends as much of slot `s`'s request body as the windows allow.
    fn send_body(&mut self, s: usize, body: &[u8]) {
        let max_frame = self.peer_max_frame;
        let slot = &mut self.slots[s];
        while slot.body_sent < body.len() {
            let room = slot.send_window.min(self.send_window);
            if room <= 0 {
                return;
            }
            let n = (body.len() - slot.body_sent)
                .min(room as usize)
                .min(max_frame);
            let end = slot.body_sent + n == body.len();
            frame::put_data(
                &mut self.out,
                slot.id,
                &body[slot.body_sent..slot.body_sent + n],
                end,
            );
            slot.body_sent += n;
            slot.send_window -= n as i64;
            self.send_window -= n as i64;
        }
    }

    /// Bodies held up by the windows continue.
    fn pump_bodies(&mut self, body: &[u8]) {
        if body.is_empty() {
            return;
        }
        for s in 0..self.slots.len() {
            if self.slots[s].in_flight() && self.slots[s].body_sent < body.len() {
                self.send_body(s, body);
            }
        }
    }

    /// Whether bytes wait to be written.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// `n` bytes of [`ConnState::pending`] were written.
    pub fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
    }

    /// The stream of slot `s` ends, as `how`.
    fn end(&mut self, s: usize, how: Ended) {
        let slot = &mut self.slots[s];
        if slot.id == 0 {
            return;
        }
        slot.id = 0;
        self.open_streams -= 1;
        self.ended.push((s, how));
    }

    /// We give up on slot `s`'s stream (its timeout): RST_STREAM CANCEL, and the worker
    /// counts it itself.
    pub fn cancel(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        if slot.id == 0 {
            return;
        }
        frame::put_rst_stream(&mut self.out, slot.id, ErrorCode::Cancel);
        slot.id = 0;
        self.open_streams -= 1;
    }

    /// Every open stream ends as `how` (the connection is gone); streams above a GOAWAY's
    /// last id were never processed.
    pub fn end_all(&mut self, how: Broken) {
        for s in 0..self.slots.len() {
            let id = self.slots[s].id;
            if id == 0 {
                continue;
            }
            let unprocessed = self.goaway.is_some_and(|last| id > last);
            let ended = if unprocessed {
                Ended::Unprocessed { refused: false }
            } else {
                Ended::Broken(how)
            };
            self.end(s, ended);
        }
    }

    /// Ends the connection for a protocol error of ours: GOAWAY with its code queued (the
    /// worker writes it and closes), every open stream broken.
    pub fn fail(&mut self, code: ErrorCode) {
        frame::put_goaway(&mut self.out, self.highest_opened, code);
        self.end_all(Broken::Protocol(code));
    }

    fn slot_of(&self, id: u32) -> Option<usize> {
        self.slots.iter().position(|s| s.id == id)
    }

    /// One event of the frame decoder, at `now`. `want_server`: read the `server` field into
    /// `server` (once per run). `body`: the request body (for windows that open).
    pub fn on_event(
        &mut self,
        ev: Event,
        now: Instant,
        body: &[u8],
        server: &mut Option<String>,
    ) -> Result<(), FrameError> {
        match ev {
            Event::Data {
                stream,
                flow,
                data,
                end_stream,
            } => self.on_data(stream, flow, data, end_stream)?,
            Event::Headers {
                stream,
                block,
                end_stream,
            } => self.on_headers(stream, block, end_stream, now, server)?,
            Event::Setting { id, value } => self.setting(id, value)?,
            Event::SettingsEnd { ack: false } => {
                self.peer_settings_seen = true;
                frame::put_settings_ack(&mut self.out);
                self.pump_bodies(body);
            }
            Event::SettingsEnd { ack: true } => {}
            Event::Ping { ack: false, data } => frame::put_ping_ack(&mut self.out, data),
            Event::Ping { ack: true, .. } => {}
            Event::RstStream { stream, code } => match self.slot_of(stream) {
                // REFUSED_STREAM: the server did not process it (RFC 9113 §8.7).
                Some(s) if code == ErrorCode::RefusedStream => {
                    self.end(s, Ended::Unprocessed { refused: true })
                }
                Some(s) => self.end(s, Ended::Reset(code)),
                None => self.unknown_stream(stream)?,
            },
            Event::GoAway { last_stream, code } => {
                self.goaway_received = Some(code);
                let last = self.goaway.map_or(last_stream, |l| l.min(last_stream));
                self.goaway = Some(last);
                for s in 0..self.slots.len() {
                    if self.slots[s].id > last {
                        self.end(s, Ended::Unprocessed { refused: false });
                    }
                }
            }
            Event::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment)?;
                self.pump_bodies(body);
            }
        }
        Ok(())
    }

    fn on_data(&mut self, stream: u32, flow: u32, data: u32, end: bool) -> Result<(), FrameError> {
        // The connection's window counts every DATA byte, on streams we still track or not.
        self.unacked += flow;
        if self.unacked >= CONNECTION_WINDOW / 2 {
            frame::put_window_update(&mut self.out, 0, self.unacked);
            self.unacked = 0;
        }
        let Some(s) = self.slot_of(stream) else {
            return self.unknown_stream(stream);
        };
        let slot = &mut self.slots[s];
        if slot.status == 0 {
            return Err(protocol("DATA before the response's HEADERS"));
        }
        slot.body += u64::from(data);
        slot.unacked += flow;
        if end {
            let how = Ended::Response {
                status: slot.status,
                body: slot.body,
            };
            self.end(s, how);
        } else if slot.unacked >= STREAM_WINDOW / 2 {
            frame::put_window_update(&mut self.out, stream, slot.unacked);
            slot.unacked = 0;
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        stream: u32,
        block: &[u8],
        end: bool,
        now: Instant,
        server: &mut Option<String>,
    ) -> Result<(), FrameError> {
        // Every block is read, even a stream's we gave up on: HPACK's rules hold for all.
        let head = read_response(block, server.is_none()).map_err(|e| FrameError {
            code: e.code(),
            what: e.0,
        })?;
        if head.server.is_some() {
            *server = head.server;
        }
        let Some(s) = self.slot_of(stream) else {
            return self.unknown_stream(stream);
        };
        let slot = &mut self.slots[s];
        match (slot.status, head.status) {
            // Interim responses (100 Continue, 103 Early Hints) come before the final.
            (0, 100..=199) if !end => {}
            (0, status) if status >= 200 => {
                slot.status = status;
                slot.first_byte = Some(now);
                self.first_response.get_or_insert(now);
            }
            // Trailers: a block without :status that ends the stream.
            (status, 0) if status != 0 && end => {}
            _ => return Err(protocol("unexpected header block")),
        }
        if end {
            let how = Ended::Response {
                status: slot.status,
                body: slot.body,
            };
            self.end(s, how);
        }
        Ok(())
    }

    fn on_window_update(&mut self, stream: u32, increment: u32) -> Result<(), FrameError> {
        if increment == 0 {
            return Err(protocol("WINDOW_UPDATE of 0"));
        }
        let window = if stream == 0 {
            &mut self.send_window
        } else if let Some(s) = self.slot_of(stream) {
            &mut self.slots[s].send_window
        } else {
            return self.unknown_stream(stream);
        };
        *window += i64::from(increment);
        if *window > i64::from(h2::MAX_WINDOW) {
            return Err(FrameError {
                code: ErrorCode::FlowControl,
                what: "window grown beyond 2^31-1",
            });
        }
        Ok(())
    }

    fn setting(&mut self, id: u16, value: u32) -> Result<(), FrameError> {
        match id {
            h2::SETTINGS_MAX_CONCURRENT_STREAMS => {
                self.peer_max_streams = value;
                if (value as usize) < self.slots.len() {
                    self.peer_max_seen = Some(value);
                }
            }
            h2::SETTINGS_INITIAL_WINDOW_SIZE => {
                if value > h2::MAX_WINDOW {
                    return Err(FrameError {
                        code: ErrorCode::FlowControl,
                        what: "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                    });
                }
                let delta = i64::from(value) - self.peer_initial_window;
                self.peer_initial_window = i64::from(value);
                for slot in self.slots.iter_mut().filter(|s| s.in_flight()) {
                    slot.send_window += delta;
                }
            }
            h2::SETTINGS_MAX_FRAME_SIZE => {
                if !(frame::DEFAULT_MAX_FRAME..=0xff_ffff).contains(&value) {
                    return Err(protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                }
                self.peer_max_frame = value as usize;
            }
            h2::SETTINGS_HEADER_TABLE_SIZE => self.plain_blocks = value < 4096,
            h2::SETTINGS_ENABLE_PUSH if value > 1 => {
                return Err(protocol("SETTINGS_ENABLE_PUSH above 1"))
            }
            // MAX_HEADER_LIST_SIZE is advisory; unknown settings are ignored (§6.5.2).
            _ => {}
        }
        Ok(())
    }

    /// A frame for a stream we do not track: one we ended (reset, timed out) is fine; one
    /// never opened is a protocol error.
    fn unknown_stream(&self, stream: u32) -> Result<(), FrameError> {
        if stream > self.highest_opened {
            return Err(protocol("frame on a stream never opened"));
        }
        Ok(())
    }
}

fn protocol(what: &'static str) -> FrameError {
    FrameError {
        code: ErrorCode::Protocol,
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_until_the_servers_settings_then_as_many_as_it_allows() {
        let now = Instant::now();
        let blocks = RequestBlocks {
            first: vec![0x82],
            later: vec![0x82],
            plain: vec![0x82],
        };
        let mut server = None;
        let mut c = ConnState::new(4, now);
        c.start();
        assert!(c.can_open());
        c.open(0, &blocks, b"", now);
        assert!(
            !c.can_open(),
            "a second stream before the server's SETTINGS"
        );
        // The server's ACK of ours is not its SETTINGS.
        c.on_event(Event::SettingsEnd { ack: true }, now, b"", &mut server)
            .unwrap();
        assert!(!c.can_open());
        c.on_event(
            Event::Setting {
                id: h2::SETTINGS_MAX_CONCURRENT_STREAMS,
                value: 3,
            },
            now,
            b"",
            &mut server,
        )
        .unwrap();
        c.on_event(Event::SettingsEnd { ack: false }, now, b"", &mut server)
            .unwrap();
        for s in 1..3 {
            assert!(c.can_open(), "stream {s} of the 3 allowed");
            c.open(s, &blocks, b"", now);
        }
        assert!(!c.can_open(), "a fourth above the server's 3");
        // A new connection knows nothing of the old one's server.
        c.reset();
        assert!(c.can_open());
        c.open(0, &blocks, b"", now);
        assert!(!c.can_open());
    }
}
