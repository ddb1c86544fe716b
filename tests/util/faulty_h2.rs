//! A misbehaving HTTP/2 server (h2c, prior knowledge) for the fault matrix: every connection
//! plays one scripted behaviour, on plain threads, counting what it answered.
//!
//! Frames are written with archbench's own encoders (nine header bytes and a payload: there is
//! nothing to get wrong there) and read by the small blocking reader below, not by the
//! decoder under test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use archbench::http::h2::frame::{self, put_data, put_goaway, put_head, put_rst_stream};
use archbench::http::h2::{ErrorCode, PREFACE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Fault {
    /// Every stream reset with INTERNAL_ERROR.
    ResetEveryStream,
    /// Every third stream of a connection refused (RST_STREAM REFUSED_STREAM), the others
    /// answered.
    RefuseEveryThird,
    /// A PING first; requests are answered only once its ACK has come back.
    PingFirst,
    /// After a connection's second request, GOAWAY with that stream as the last: the two are
    /// answered, later streams are not, and the connection closes.
    GoAwayAfterTwo,
    /// A PING seven bytes long in answer to a request.
    MalformedFrame,
    /// A header block of 80 KiB (HEADERS and CONTINUATIONs).
    OversizedBlock,
    /// SETTINGS_INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE: a request body cannot go.
    WindowNeverOpened,
}

pub struct FaultyH2Server {
    pub addr: SocketAddr,
    /// What the connections' scripts counted.
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What every connection's script counts, shared with the server's owner.
#[derive(Default)]
pub struct Counts {
    /// Requests answered with a whole response.
    pub answered: AtomicU64,
    /// PING ACKs received carrying our PING's data.
    pub ping_acks: AtomicU64,
    /// Streams refused with REFUSED_STREAM.
    pub refused: AtomicU64,
}

impl FaultyH2Server {
    pub fn start(fault: H2Fault) -> FaultyH2Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let counts = c.clone();
                std::thread::spawn(move || {
                    let _ = play(conn, fault, &counts);
                });
            }
        });
        FaultyH2Server {
            addr,
            counts,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for FaultyH2Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = TcpStream::connect(self.addr); // wakes the accept loop
            let _ = t.join();
        }
    }
}

/// One frame as read: type, flags, stream, payload.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn read_frame(conn: &mut TcpStream) -> std::io::Result<Frame> {
    let mut h = [0u8; 9];
    conn.read_exact(&mut h)?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    let mut payload = vec![0u8; len];
    conn.read_exact(&mut payload)?;
    Ok(Frame {
        kind: h[3],
        flags: h[4],
        stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        payload,
    })
}

const PING_DATA: [u8; 8] = *b"faultyh2";

/// `:status 200` (static index 8) and a five-byte body.
fn answer(out: &mut Vec<u8>, stream: u32) {
    put_head(out, 1, frame::HEADERS, frame::END_HEADERS, stream);
    out.push(0x88);
    put_data(out, stream, b"hello", true);
}

// Long: one script per fault, side by side, is the point of this fixture.
fn play(mut conn: TcpStream, fault: H2Fault, counts: &Counts) -> std::io::Result<()> {
    let (answered, ping_acks) = (&counts.answered, &counts.ping_acks);
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut preface = [0u8; 24];
    conn.read_exact(&mut preface)?;
    assert_eq!(preface, PREFACE, "the client's preface");
    let mut out = Vec::new();
    let settings: &[(u16, u32)] = match fault {
        H2Fault::WindowNeverOpened => &[(archbench::http::h2::SETTINGS_INITIAL_WINDOW_SIZE, 0)],
        _ => &[],
    };
    frame::put_settings(&mut out, settings);
    if fault == H2Fault::PingFirst {
        put_head(&mut out, 8, frame::PING, 0, 0);
        out.extend_from_slice(&PING_DATA);
    }
    conn.write_all(&out)?;
    let mut pinged = fault != H2Fault::PingFirst;
    let mut waiting: Vec<u32> = Vec::new();
    let mut requests = 0;
    loop {
        let f = read_frame(&mut conn)?;
        let mut out = Vec::new();
        match f.kind {
            frame::SETTINGS if f.flags & frame::ACK == 0 => frame::put_settings_ack(&mut out),
            frame::PING if f.flags & frame::ACK != 0 && f.payload == PING_DATA => {
                ping_acks.fetch_add(1, Ordering::Relaxed);
                pinged = true;
                for s in waiting.drain(..) {
                    answer(&mut out, s);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
            frame::GOAWAY => return Ok(()),
            frame::HEADERS => {
                requests += 1;
                let s = f.stream;
                match fault {
                    H2Fault::ResetEveryStream => put_rst_stream(&mut out, s, ErrorCode::Internal),
                    H2Fault::RefuseEveryThird if requests % 3 == 0 => {
                        put_rst_stream(&mut out, s, ErrorCode::RefusedStream);
                        counts.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    H2Fault::RefuseEveryThird => {
                        answer(&mut out, s);
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    H2Fault::PingFirst if !pinged => waiting.push(s),
                    H2Fault::PingFirst => {
                        answer(&mut out, s);
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    H2Fault::GoAwayAfterTwo if requests <= 2 => {
                        if requests == 2 {
                            put_goaway(&mut out, s, ErrorCode::NoError);
                        }
                        answer(&mut out, s);
                        answered.fetch_add(1, Ordering::Relaxed);
                        if requests == 2 {
                            conn.write_all(&out)?;
                            // Later streams are ignored. Closed gracefully: our FIN after the
                            // answers, and what the client still sends read to its end, so no
                            // RST can overtake them.
                            conn.shutdown(std::net::Shutdown::Write)?;
                            let mut sink = [0u8; 4096];
                            while conn.read(&mut sink).is_ok_and(|n| n > 0) {}
                            return Ok(());
                        }
                    }
                    H2Fault::GoAwayAfterTwo => {}
                    H2Fault::MalformedFrame => {
                        put_head(&mut out, 7, frame::PING, 0, 0);
                        out.extend_from_slice(&[0; 7]);
                    }
                    H2Fault::OversizedBlock => {
                        put_head(&mut out, 1, frame::HEADERS, 0, s);
                        out.push(0x88);
                        for k in 0..5 {
                            let last = if k == 4 { frame::END_HEADERS } else { 0 };
                            put_head(&mut out, 16_000, frame::CONTINUATION, last, s);
                            // Literal fields without indexing, a name index and a long value:
                            // a valid block, only too large.
                            out.extend(std::iter::repeat_n(0u8, 16_000));
                        }
                    }
                    // The body never comes: the client has no window.
                    H2Fault::WindowNeverOpened => {}
                }
            }
            _ => {}
        }
        if !out.is_empty() {
            conn.write_all(&out)?;
        }
    }
}
