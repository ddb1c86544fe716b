//! One client connection: its socket (plain or TLS) and where its current request stands.

use std::io::{self, Read, Write};
use std::time::Instant;

use mio::net::TcpStream;

use crate::http::tls::TlsStream;
use crate::http::ResponseParser;

pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Transport {
    pub fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &t.sock,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }

    /// TLS records waiting for the socket; plain sockets have none.
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.flush_pending(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// TCP connect in flight.
    Connecting,
    /// Request partly written; waiting for the socket to take more.
    Writing,
    /// Request sent; reading the response.
    Reading,
    /// Closed loop: the next request goes out after the current event batch.
    Ready,
    /// Open loop: waiting for this connection's next send time.
    Waiting,
    /// No more requests for this connection (count reached).
    Parked,
}

pub struct Conn {
    pub io: Option<Transport>,
    pub phase: Phase,
    pub parser: ResponseParser,
    /// Request bytes written so far.
    pub written: usize,
    /// When the current request was due (closed loop: when it began).
    pub intended: Instant,
    /// When the current request began (connect start, or write start on a reused connection).
    pub began: Instant,
    /// When the first request byte was written.
    pub sent: Instant,
    pub first_byte: Option<Instant>,
    /// Connect time when this request opened the connection.
    pub connect_us: Option<u64>,
    /// Open loop: when this connection's next request is due.
    pub next_due: Instant,
    /// The current request times out at this instant.
    pub deadline: Instant,
}

impl Conn {
    pub fn new(now: Instant) -> Conn {
        Conn {
            io: None,
            phase: Phase::Waiting,
            parser: ResponseParser::new(),
            written: 0,
            intended: now,
            began: now,
            sent: now,
            first_byte: None,
            connect_us: None,
            next_due: now,
            deadline: now,
        }
    }

    /// In flight: subject to the request timeout.
    pub fn busy(&self) -> bool {
        matches!(
            self.phase,
            Phase::Connecting | Phase::Writing | Phase::Reading
        )
    }
}
