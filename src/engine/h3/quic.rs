//! One QUIC connection as the worker loop drives it: its own connected UDP socket (each
//! connection its own 4-tuple, as a browser's or a fleet of clients' would be, so a server's
//! reuseport spreading sees them apart), quinn-proto's sans-I/O state machine fed the
//! datagrams the socket holds, its datagrams written back, and its timer. No thread or
//! runtime of its own: the worker's poll wakes it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use mio::net::UdpSocket;
use mio::{Interest, Poll, Token};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig,
};

use crate::http::handshake_witness;
use crate::stats::QuicConnectionCounts;

/// A received datagram's room: QUIC's datagrams stay within the path MTU (quinn and
/// quic-go send at most 1,452 bytes of UDP payload without GRO); a longer one is counted and
/// dropped (QUIC sends its frames again).
const DATAGRAM_ROOM: usize = 2048;
/// Datagrams read per `recvmmsg`.
const BATCH: usize = 8;
/// The datagram pool's block.
const POOL: usize = 256 * 1024;
/// The send buffer's room: one datagram at a time.
const SEND_ROOM: usize = 64 * 1024;
/// Datagrams written per `poll_transmit` (one: each its own send, no GSO yet).
const DATAGRAMS_PER_TRANSMIT: usize = 1;

/// What reading the socket did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Read to WouldBlock: `n` datagrams and their bytes.
    Datagrams { n: u64, bytes: u64 },
    /// The socket reported the server's port closed (ICMP port unreachable).
    Refused,
    /// Another socket error.
    Failed,
}

/// A worker's buffers for all its connections' datagrams (a connection holds none: at 10,000
/// connections a buffer each would be hundreds of MiB).
pub struct DatagramBuffers {
    /// One batch of datagrams as `recvmmsg` reads them.
    batch: Box<[u8]>,
    /// Where datagrams are handed to quinn from: quinn keeps a datagram's bytes (stream data
    /// it hands out later), as a slice of one large block whose space `reserve` reclaims once
    /// they are all dropped, so the steady state allocates nothing per datagram.
    pool: BytesMut,
    send: Vec<u8>,
}

impl DatagramBuffers {
    pub fn new() -> DatagramBuffers {
        DatagramBuffers {
            batch: vec![0; DATAGRAM_ROOM * BATCH].into_boxed_slice(),
            pool: BytesMut::with_capacity(POOL),
            send: Vec::with_capacity(SEND_ROOM),
        }
    }
}

pub struct QuicConn {
    sock: UdpSocket,
    remote: SocketAddr,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    pub conn: Connection,
    /// Datagrams the socket would not take, or too long to take in.
    pub dropped: u64,
    /// The server's certificate was verified in this connection's handshake: a full one (a
    /// resumed handshake verifies none).
    pub verified: bool,
    /// TLS 1.3 session tickets the server sent on this connection.
    pub tickets: u64,
}

impl QuicConn {
    /// A new socket connected to `remote`, registered as `token`, and a connection's first
    /// flight queued (sent by the next [`QuicConn::transmit`]).
    pub fn connect(
        poll: &Poll,
        token: Token,
        remote: SocketAddr,
        config: &ClientConfig,
        server_name: &str,
        now: Instant,
    ) -> io::Result<QuicConn> {
        // Any address of the target's family: after connect the kernel picks the source by
        // the route to `remote` (loopback's for a loopback target).
        let local: SocketAddr = if remote.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let mut sock = UdpSocket::bind(local)?;
        sock.connect(remote)?;
        poll.registry()
            .register(&mut sock, token, Interest::READABLE)?;
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let (handle, conn) = endpoint
            .connect(now, config.clone(), remote, server_name)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(QuicConn {
            sock,
            remote,
            endpoint,
            handle,
            conn,
            dropped: 0,
            verified: false,
            tickets: 0,
        })
    }

    /// Reads every datagram the socket holds into the connection, a batch per call: a batch
    /// that comes back short has emptied the socket (a later datagram is a new edge), so no
    /// call is spent on learning it is empty.
    pub fn receive(&mut self, now: Instant, bufs: &mut DatagramBuffers) -> Received {
        let (mut n, mut bytes) = (0, 0);
        let DatagramBuffers { batch, pool, send } = bufs;
        let verified_before = handshake_witness::certificates_verified_here();
        let tickets_before = handshake_witness::tickets_received_here();
        loop {
            let mut lens = [0usize; BATCH];
            let got = match recv_batch(&self.sock, batch, &mut lens) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Received::Refused,
                Err(_) => return Received::Failed,
            };
            for (k, &len) in lens.iter().enumerate().take(got) {
                if len > DATAGRAM_ROOM {
                    self.dropped += 1;
                    continue;
                }
                let data = &batch[k * DATAGRAM_ROOM..k * DATAGRAM_ROOM + len];
                n += 1;
                bytes += len as u64;
                self.take_in(now, data, pool, send);
            }
            if got < BATCH {
                break;
            }
        }
        self.endpoint_events();
        self.verified |= handshake_witness::certificates_verified_here() != verified_before;
        self.tickets += handshake_witness::tickets_received_here() - tickets_before;
        Received::Datagrams { n, bytes }
    }

    /// One datagram into the connection.
    fn take_in(&mut self, now: Instant, data: &[u8], pool: &mut BytesMut, send: &mut Vec<u8>) {
        if pool.capacity() - pool.len() < data.len() {
            pool.reserve(POOL);
        }
        pool.extend_from_slice(data);
        let datagram = pool.split_to(data.len());
        send.clear();
        match self
            .endpoint
            .handle(now, self.remote, None, None, datagram, send)
        {
            Some(DatagramEvent::ConnectionEvent(_, event)) => self.conn.handle_event(event),
            Some(DatagramEvent::Response(t)) => {
                let _ = self.sock.send(&send[..t.size]);
            }
            Some(DatagramEvent::NewConnection(_)) | None => {}
        }
    }

    /// What the connection tells its endpoint (retired connection ids, its drain), and back.
    fn endpoint_events(&mut self) {
        while let Some(ev) = self.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, ev) {
                self.conn.handle_event(back);
            }
        }
    }

    /// The connection's timer, if it has one set.
    pub fn timeout(&mut self) -> Option<Instant> {
        self.conn.poll_timeout()
    }

    /// Lets the connection act on its timer (loss detection, idle timeout, acks).
    pub fn on_timeout(&mut self, now: Instant) {
        self.conn.handle_timeout(now);
        self.endpoint_events();
    }

    /// Writes every datagram the connection has to send; the bytes written.
    pub fn transmit(&mut self, now: Instant, bufs: &mut DatagramBuffers) -> u64 {
        let mut written = 0;
        loop {
            bufs.send.clear();
            let Some(t) = self
                .conn
                .poll_transmit(now, DATAGRAMS_PER_TRANSMIT, &mut bufs.send)
            else {
                break;
            };
            match self.sock.send(&bufs.send[..t.size]) {
                Ok(n) => written += n as u64,
                // UDP: a datagram the socket does not take is lost; QUIC sends its frames
                // again. Counted, so a run says it happened.
                Err(_) => self.dropped += 1,
            }
        }
        self.endpoint_events();
        written
    }

    /// What QUIC's own counters say of this connection.
    pub fn counts(&self) -> QuicConnectionCounts {
        let s = self.conn.stats();
        QuicConnectionCounts {
            datagrams_sent: s.udp_tx.datagrams,
            datagrams_received: s.udp_rx.datagrams,
            udp_bytes_sent: s.udp_tx.bytes,
            udp_bytes_received: s.udp_rx.bytes,
            packets_lost: s.path.lost_packets,
            bytes_lost: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            path_mtu: s.path.current_mtu,
        }
    }

    pub fn deregister(&mut self, poll: &Poll) {
        let _ = poll.registry().deregister(&mut self.sock);
    }
}

/// `recvmmsg` of up to [`BATCH`] datagrams into `batch` (each in its [`DATAGRAM_ROOM`]),
/// without waiting; their lengths in `lens` (a truncated one longer than its room), and how
/// many came.
fn recv_batch(sock: &UdpSocket, batch: &mut [u8], lens: &mut [usize; BATCH]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid value of these plain C structs.
    let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for (k, chunk) in batch
        .chunks_exact_mut(DATAGRAM_ROOM)
        .take(BATCH)
        .enumerate()
    {
        iovs[k].iov_base = chunk.as_mut_ptr().cast();
        iovs[k].iov_len = DATAGRAM_ROOM;
        msgs[k].msg_hdr.msg_iov = &mut iovs[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: every header points at one iovec over its own DATAGRAM_ROOM bytes of `batch`,
    // all of which outlive the call; the kernel writes at most that much into each.
    let got = unsafe {
        libc::recvmmsg(
            sock.as_raw_fd(),
            msgs.as_mut_ptr(),
            BATCH as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = got as usize;
    for k in 0..got {
        let truncated = msgs[k].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        lens[k] = if truncated {
            DATAGRAM_ROOM + 1
        } else {
            msgs[k].msg_len as usize
        };
    }
    Ok(got)
}
