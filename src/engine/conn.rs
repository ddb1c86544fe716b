//! One client connection: its socket (plain or TLS) and where its current request stands.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
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

    /// Whether what was written has yet to leave: TLS holds a request's bytes until its
    /// handshake is done, and a handshake that fails never sends them.
    pub fn holds_what_was_written(&self) -> bool {
        matches!(self, Transport::Tls(t) if t.is_handshaking())
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

    /// Reads like [`Transport::read`], and returns the kernel's receive time of the last
    /// segment read (SO_TIMESTAMPNS, CLOCK_REALTIME) when the socket asked for it. TLS reads
    /// through rustls and has none.
    pub fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<libc::timespec>)> {
        let Transport::Plain(s) = self else {
            return self.read(buf).map(|n| (n, None));
        };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for one timestamp message; u64s keep it aligned for cmsghdr.
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: a valid socket descriptor and a msghdr describing buffers we own.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: walking the control messages the kernel wrote into `control`, as CMSG_*
        // prescribe; the timestamp is read unaligned from inside the message.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    stamp = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(cmsg).cast::<libc::timespec>(),
                    ));
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Ok((n as usize, stamp))
    }

    /// TLS records waiting for the socket; plain sockets have none.
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.flush_pending(),
        }
    }
}

/// Asks the kernel to stamp each received segment with its arrival time (SO_TIMESTAMPNS),
/// which [`Transport::read_stamped`] returns.
pub fn enable_rx_timestamps(fd: std::os::fd::RawFd) {
    let on: libc::c_int = 1;
    // SAFETY: setting an int socket option on a descriptor the caller owns.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
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
    /// When the latest data of the current response arrived.
    pub last_data: Option<Instant>,
    /// Its response is read as it comes, not left for a later wake-up: some of it has been
    /// read, not all, or its next request is due and waits for it.
    pub read_as_it_comes: bool,
    /// Connect time when this request opened the connection.
    pub connect_us: Option<u64>,
    /// Open loop: when this connection's next request is due.
    pub next_due: Instant,
    /// The current request times out at this instant.
    pub deadline: Instant,
}

impl Conn {
    /// Request bytes written that TLS still holds for a handshake under way: they never
    /// left, so they are neither sent nor counted as written.
    pub fn written_but_held(&self) -> usize {
        let held = self
            .io
            .as_ref()
            .is_some_and(Transport::holds_what_was_written);
        if held {
            self.written
        } else {
            0
        }
    }

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
            last_data: None,
            read_as_it_comes: false,
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
