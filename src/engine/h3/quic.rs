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

use crate::stats::QuicConnectionCounts;

/// The receive buffer's size: a datagram is at most 64 KiB.
const DATAGRAM_MAX: usize = 64 * 1024;
/// The datagram pool's block.
const POOL: usize = 1 << 20;
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

pub struct QuicConn {
    sock: UdpSocket,
    remote: SocketAddr,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    pub conn: Connection,
    /// One datagram as read.
    datagram: Box<[u8]>,
    /// Where datagrams are handed to quinn from (see [`QuicConn::receive`]).
    pool: BytesMut,
    send: Vec<u8>,
    /// Datagrams the socket would not take.
    pub dropped: u64,
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
            datagram: vec![0; DATAGRAM_MAX].into_boxed_slice(),
            pool: BytesMut::with_capacity(POOL),
            send: Vec::with_capacity(DATAGRAM_MAX),
            dropped: 0,
        })
    }

    /// Reads every datagram the socket holds into the connection.
    pub fn receive(&mut self, now: Instant) -> Received {
        let (mut n, mut bytes) = (0, 0);
        loop {
            let len = match self.sock.recv(&mut self.datagram) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Received::Refused,
                Err(_) => return Received::Failed,
            };
            // quinn keeps the datagram's bytes (stream data it hands out later): a slice of
            // one large buffer, whose space `reserve` reclaims once they are all dropped, so
            // the steady state allocates nothing per datagram.
            if self.pool.capacity() - self.pool.len() < len {
                self.pool.reserve(POOL);
            }
            self.pool.extend_from_slice(&self.datagram[..len]);
            let datagram = self.pool.split_to(len);
            n += 1;
            bytes += len as u64;
            self.send.clear();
            match self
                .endpoint
                .handle(now, self.remote, None, None, datagram, &mut self.send)
            {
                Some(DatagramEvent::ConnectionEvent(_, event)) => self.conn.handle_event(event),
                Some(DatagramEvent::Response(t)) => {
                    let _ = self.sock.send(&self.send[..t.size]);
                }
                Some(DatagramEvent::NewConnection(_)) | None => {}
            }
        }
        self.endpoint_events();
        Received::Datagrams { n, bytes }
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
    pub fn transmit(&mut self, now: Instant) -> u64 {
        let mut written = 0;
        loop {
            self.send.clear();
            let Some(t) = self
                .conn
                .poll_transmit(now, DATAGRAMS_PER_TRANSMIT, &mut self.send)
            else {
                break;
            };
            match self.sock.send(&self.send[..t.size]) {
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
