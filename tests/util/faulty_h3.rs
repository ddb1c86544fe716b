//! A misbehaving HTTP/3 server for the fault matrix: quinn-proto's server side on a loopback
//! UDP socket, driven by one plain thread, every connection playing one scripted behaviour,
//! counting what it answered. (No real server produces these on demand.)
//!
//! Its frames are written here byte by byte (a frame type, a length, a payload: nothing to get
//! wrong there), not by the codec under test; requests are read to their end and not parsed.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, ServerConfig,
    StreamEvent, StreamId, VarInt,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H3Fault {
    /// After a connection's second request, GOAWAY naming its third request stream: the two
    /// are answered, later streams are reset with H3_REQUEST_REJECTED (never processed).
    GoAwayAfterTwo,
    /// Every third request stream of a connection reset with H3_REQUEST_REJECTED.
    RejectEveryThird,
    /// Every response: its HEADERS and 10 bytes of a DATA frame that promises 100, then the
    /// stream reset with H3_INTERNAL_ERROR.
    ResetMidBody,
    /// Every response begins with a DATA frame: HTTP/3 forbids it before HEADERS.
    DataBeforeHeaders,
    /// A connection's first five requests answered, later ones not; once the five are
    /// acknowledged, the connection closed with H3_INTERNAL_ERROR.
    CloseAfterFive,
    /// QUIC draft-29 only: a client's QUIC v1 Initial is answered with a Version Negotiation
    /// packet that lists no version it speaks.
    OtherVersionOnly,
    /// The handshake completes (idle timeout 300 ms), then the connection's first request
    /// stream silences it: nothing answered, not even acknowledged, until its idle timeout.
    SilentAfterHandshake,
    /// Answers every request, and sends session tickets that allow 0-RTT, but finds none of
    /// its sessions again: every resumption (and its early data) is refused, as after a
    /// restart.
    ForgetsSessions,
}

/// The idle timeout [`H3Fault::SilentAfterHandshake`] offers.
pub const SILENT_IDLE_TIMEOUT: Duration = Duration::from_millis(300);
/// QUIC draft-29's version: the one [`H3Fault::OtherVersionOnly`] speaks.
const DRAFT_29: u32 = 0xff00_001d;

/// What the server counted, shared with its owner.
#[derive(Default)]
pub struct Counts {
    /// Requests answered with a whole response (written and finished; a close discards what
    /// is not delivered, so the script closes only once what it wrote is acknowledged).
    pub answered: AtomicU64,
    /// Request streams reset with H3_REQUEST_REJECTED (never processed).
    pub rejected: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
}

pub struct FaultyH3Server {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const H3_INTERNAL_ERROR: u32 = 0x102;
const H3_REQUEST_REJECTED: u32 = 0x10b;
/// The control stream: its type, then an empty SETTINGS frame.
const CONTROL: [u8; 3] = [0x00, 0x04, 0x00];
/// HEADERS with `:status 200` (QPACK: no table, static index 25).
const HEAD_200: [u8; 5] = [0x01, 0x03, 0x00, 0x00, 0xd9];

impl FaultyH3Server {
    pub fn start(fault: H3Fault) -> FaultyH3Server {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        // Short enough for the connections' timers and the stop flag.
        sock.set_read_timeout(Some(Duration::from_millis(2)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server {
            sock,
            endpoint: Endpoint::new(
                Arc::new(endpoint_config(fault)),
                Some(Arc::new(server_config(fault))),
                true,
                None,
            ),
            conns: HashMap::new(),
            fault,
            counts: counts.clone(),
            out: Vec::new(),
        };
        let flag = stop.clone();
        let thread = std::thread::spawn(move || server.run(&flag));
        FaultyH3Server {
            addr,
            counts,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.addr.port())
    }
}

impl Drop for FaultyH3Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn endpoint_config(fault: H3Fault) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    if fault == H3Fault::OtherVersionOnly {
        config.supported_versions(vec![DRAFT_29]);
    }
    config
}

/// TLS 1.3 with ALPN h3 and a self-signed certificate for 127.0.0.1 (the client runs -k).
fn server_config(fault: H3Fault) -> ServerConfig {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = ck.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::try_from(ck.key_pair.serialize_der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // Tickets that allow 0-RTT (QUIC's only size for it): early data is accepted.
    tls.max_early_data_size = u32::MAX;
    if fault == H3Fault::ForgetsSessions {
        tls.session_storage = Arc::new(Forgetful);
    }
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    if fault == H3Fault::SilentAfterHandshake {
        let mut transport = quinn_proto::TransportConfig::default();
        transport.max_idle_timeout(Some(SILENT_IDLE_TIMEOUT.try_into().unwrap()));
        config.transport_config(Arc::new(transport));
    }
    config
}

/// A session store that takes every session and gives none back.
#[derive(Debug)]
struct Forgetful;

impl rustls::server::StoresServerSessions for Forgetful {
    fn put(&self, _key: Vec<u8>, _value: Vec<u8>) -> bool {
        true
    }

    fn get(&self, _key: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn take(&self, _key: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// One connection and its script's state.
struct Conn {
    conn: quinn_proto::Connection,
    control: Option<StreamId>,
    /// Request streams accepted, in order.
    accepted: u64,
    /// Each open request stream's place in that order.
    order: HashMap<StreamId, u64>,
    /// Responses written, and those of them acknowledged.
    answered: u64,
    acked: u64,
    /// Streams whose whole response was written, not yet acknowledged.
    unacked: std::collections::HashSet<StreamId>,
    /// GOAWAY sent naming this stream id: later streams are rejected.
    goaway: Option<u64>,
    /// Silenced ([`H3Fault::SilentAfterHandshake`]): its datagrams are dropped unread.
    silent: bool,
}

struct Server {
    sock: UdpSocket,
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, Conn>,
    fault: H3Fault,
    counts: Arc<Counts>,
    out: Vec<u8>,
}

impl Server {
    fn run(mut self, stop: &AtomicBool) {
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if let Ok((n, from)) = self.sock.recv_from(&mut buf) {
                self.datagram(now, from, BytesMut::from(&buf[..n]));
            }
            let now = Instant::now();
            let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
            for ch in handles {
                self.drive(ch, now);
            }
            self.conns.retain(|_, c| !c.conn.is_drained());
        }
    }

    fn datagram(&mut self, now: Instant, from: SocketAddr, data: BytesMut) {
        self.out.clear();
        match self
            .endpoint
            .handle(now, from, None, None, data, &mut self.out)
        {
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.out.clear();
                match self.endpoint.accept(incoming, now, &mut self.out, None) {
                    Ok((ch, conn)) => {
                        self.counts.connections.fetch_add(1, Ordering::Relaxed);
                        self.conns.insert(
                            ch,
                            Conn {
                                conn,
                                control: None,
                                accepted: 0,
                                order: HashMap::new(),
                                answered: 0,
                                acked: 0,
                                unacked: std::collections::HashSet::new(),
                                goaway: None,
                                silent: false,
                            },
                        );
                    }
                    Err(e) => {
                        if let Some(t) = e.response {
                            let _ = self.sock.send_to(&self.out[..t.size], t.destination);
                        }
                    }
                }
            }
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some(c) = self.conns.get_mut(&ch).filter(|c| !c.silent) {
                    c.conn.handle_event(ev);
                }
            }
            Some(DatagramEvent::Response(t)) => {
                let _ = self.sock.send_to(&self.out[..t.size], t.destination);
            }
            None => {}
        }
    }

    /// A connection's timer, events, script and datagrams.
    fn drive(&mut self, ch: ConnectionHandle, now: Instant) {
        let Some(c) = self.conns.get_mut(&ch).filter(|c| !c.silent) else {
            return;
        };
        if c.conn.poll_timeout().is_some_and(|t| t <= now) {
            c.conn.handle_timeout(now);
        }
        while let Some(ev) = c.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(ch, ev) {
                c.conn.handle_event(back);
            }
        }
        while let Some(ev) = c.conn.poll() {
            match ev {
                Event::Connected => {
                    if let Some(id) = c.conn.streams().open(Dir::Uni) {
                        let _ = c.conn.send_stream(id).write(&CONTROL);
                        c.control = Some(id);
                    }
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Bi })
                    if self.fault == H3Fault::SilentAfterHandshake =>
                {
                    // Not even the request's acknowledgement goes out.
                    c.silent = true;
                    return;
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                    while let Some(id) = c.conn.streams().accept(Dir::Bi) {
                        c.order.insert(id, c.accepted);
                        c.accepted += 1;
                        // What came with the stream's opening is read now: no later event
                        // says it is readable.
                        if read_to_end(&mut c.conn, id) {
                            respond(c, id, self.fault, &self.counts);
                        }
                    }
                }
                Event::Stream(StreamEvent::Finished { id }) if c.unacked.remove(&id) => {
                    c.acked += 1;
                    if self.fault == H3Fault::CloseAfterFive && c.acked == 5 {
                        c.conn.close(
                            now,
                            VarInt::from_u32(H3_INTERNAL_ERROR),
                            Bytes::from_static(b"closing mid-run"),
                        );
                    }
                }
                Event::Stream(StreamEvent::Readable { id })
                    if id.dir() == Dir::Bi && read_to_end(&mut c.conn, id) =>
                {
                    respond(c, id, self.fault, &self.counts);
                }
                _ => {}
            }
        }
        loop {
            self.out.clear();
            let Some(t) = c.conn.poll_transmit(now, 1, &mut self.out) else {
                break;
            };
            let _ = self.sock.send_to(&self.out[..t.size], t.destination);
        }
    }
}

/// Reads what the request stream holds; true once its end has come.
fn read_to_end(conn: &mut quinn_proto::Connection, id: StreamId) -> bool {
    let mut recv = conn.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return false;
    };
    let ended = loop {
        match chunks.next(usize::MAX) {
            Ok(Some(_)) => {}
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    let _ = chunks.finalize();
    ended
}

/// Answers (or not) request stream `id` as the fault says.
fn respond(c: &mut Conn, id: StreamId, fault: H3Fault, counts: &Counts) {
    let k = c.order.remove(&id).unwrap_or(0);
    let rejected = match fault {
        H3Fault::GoAwayAfterTwo => c.goaway.is_some_and(|g| u64::from(id) >= g),
        H3Fault::RejectEveryThird => k % 3 == 2,
        _ => false,
    };
    if rejected {
        let code = VarInt::from_u32(H3_REQUEST_REJECTED);
        let _ = c.conn.send_stream(id).reset(code);
        let _ = c.conn.recv_stream(id).stop(code);
        counts.rejected.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut send = c.conn.send_stream(id);
    match fault {
        H3Fault::ResetMidBody => {
            let mut bytes = HEAD_200.to_vec();
            bytes.extend_from_slice(&[0x00, 100]);
            bytes.extend_from_slice(&[b'x'; 10]);
            let _ = send.write(&bytes);
            let _ = send.reset(VarInt::from_u32(H3_INTERNAL_ERROR));
            return;
        }
        H3Fault::DataBeforeHeaders => {
            let mut bytes = vec![0x00, 0x05];
            bytes.extend_from_slice(b"early");
            bytes.extend_from_slice(&HEAD_200);
            let _ = send.write(&bytes);
            let _ = send.finish();
            return;
        }
        // Past the fifth, nothing: the connection closes under them.
        H3Fault::CloseAfterFive if c.answered >= 5 => return,
        _ => {}
    }
    let mut bytes = HEAD_200.to_vec();
    bytes.extend_from_slice(&[0x00, 0x05]);
    bytes.extend_from_slice(b"hello");
    let _ = send.write(&bytes);
    let _ = send.finish();
    c.answered += 1;
    c.unacked.insert(id);
    counts.answered.fetch_add(1, Ordering::Relaxed);
    match fault {
        H3Fault::GoAwayAfterTwo if c.answered == 2 && c.goaway.is_none() => {
            // The third request stream's id: client bidirectional streams are 0, 4, 8, ...
            let last = 8u64;
            c.goaway = Some(last);
            if let Some(control) = c.control {
                let _ = c.conn.send_stream(control).write(&[0x07, 0x01, last as u8]);
            }
        }
        _ => {}
    }
}
