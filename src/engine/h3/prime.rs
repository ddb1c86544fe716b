//! `--0rtt`'s sessions, fetched before the run: QUIC handshakes, not counted in the run, each
//! left once its server has sent a TLS 1.3 session ticket into the run's session store — one
//! ticket for each connection of the run, so that every one of them resumes and sends its
//! first requests as 0-RTT early data. (A ticket is used once; thousands of connections that
//! open together need thousands.)

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::quic::{DatagramBuffers, QuicConn};
use super::ErrorCode;
use crate::engine::worker_loop::polled;
use crate::engine::EngineError;

/// Handshakes in flight at once while fetching.
const WAVE: usize = 64;

/// What fetching the sessions did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Primed {
    /// Tickets now in the store.
    pub tickets: u64,
    /// Handshakes it took.
    pub handshakes: u64,
}

/// Where and how to fetch.
pub struct Fetch<'a> {
    pub config: &'a quinn_proto::ClientConfig,
    pub server_name: &'a str,
    pub addr: SocketAddr,
    /// How long one handshake may take to bring its ticket.
    pub timeout: Duration,
}

/// Handshakes, [`WAVE`] at a time, until `wanted` tickets have come; it stops early when a
/// wave brings none (a server that gives no tickets, or does not answer: the run then says
/// its connections had no 0-RTT).
pub fn fetch_tickets(f: &Fetch<'_>, wanted: u64) -> Result<Primed, EngineError> {
    let mut poll = Poll::new().map_err(EngineError::Poll)?;
    let mut events = Events::with_capacity(WAVE);
    let mut bufs = DatagramBuffers::new();
    let mut primed = Primed::default();
    while primed.tickets < wanted {
        let n = (wanted - primed.tickets).min(WAVE as u64) as usize;
        let got = wave(f, &mut poll, &mut events, &mut bufs, n)?;
        primed.handshakes += n as u64;
        if got == 0 {
            break;
        }
        primed.tickets += got;
    }
    Ok(primed)
}

/// `n` handshakes at once, each closed once its ticket came, failed, or its time ran out;
/// the tickets they brought.
fn wave(
    f: &Fetch<'_>,
    poll: &mut Poll,
    events: &mut Events,
    bufs: &mut DatagramBuffers,
    n: usize,
) -> Result<u64, EngineError> {
    let started = Instant::now();
    let deadline = started + f.timeout;
    let mut conns: Vec<Option<QuicConn>> = Vec::with_capacity(n);
    for k in 0..n {
        let mut q = QuicConn::connect(poll, Token(k), f.addr, f.config, f.server_name, started)
            .map_err(EngineError::Poll)?;
        q.transmit(started, bufs);
        conns.push(Some(q));
    }
    let mut tickets = 0;
    while conns.iter().any(Option::is_some) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let wake = conns
            .iter_mut()
            .flatten()
            .filter_map(QuicConn::timeout)
            .fold(deadline, Instant::min);
        polled(poll.poll(events, Some(wake.saturating_duration_since(now))))?;
        let now = Instant::now();
        for ev in events.iter() {
            if let Some(q) = conns.get_mut(ev.token().0).and_then(Option::as_mut) {
                q.receive(now, bufs);
            }
        }
        for slot in conns.iter_mut() {
            let Some(q) = slot.as_mut() else { continue };
            if q.timeout().is_some_and(|t| t <= now) {
                q.on_timeout(now);
            }
            while q.conn.poll().is_some() {}
            if q.tickets > 0 || q.conn.is_closed() {
                tickets += q.tickets;
                close(q, now, bufs, poll);
                *slot = None;
            } else {
                q.transmit(now, bufs);
            }
        }
    }
    let now = Instant::now();
    for q in conns.iter_mut().flatten() {
        tickets += q.tickets;
        close(q, now, bufs, poll);
    }
    Ok(tickets)
}

/// HTTP/3's no-error close, sent; the socket given up.
fn close(q: &mut QuicConn, now: Instant, bufs: &mut DatagramBuffers, poll: &Poll) {
    if !q.conn.is_closed() {
        q.conn
            .close(now, super::varint(ErrorCode::NO_ERROR), bytes::Bytes::new());
        q.transmit(now, bufs);
    }
    q.deregister(poll);
}
