//! A misbehaving HTTP server for the fault matrix: every connection plays one scripted
//! behaviour. Runs on plain threads so its faults are exactly what the script says.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Accept, read the request, close without a byte.
    AcceptThenClose,
    /// Send part of the head, then reset (RST).
    ResetInHead,
    /// Send the head and part of the body, then reset.
    ResetInBody,
    /// Read the request and never answer.
    NeverAnswer,
    /// Send a valid response one byte every 100 ms.
    Trickle,
    /// A status line that is not HTTP.
    MalformedStatus,
    /// 70 KiB of headers.
    HugeHeaders,
    /// Chunked body with a non-hex chunk size.
    BadChunkSize,
    /// Content-Length: 100 but 10 bytes, then close.
    ShortBodyThenClose,
    /// `100 Continue`, then a normal response (keep-alive).
    InterimThenOk,
    /// 204 No Content (keep-alive).
    NoContent,
    /// `200 OK` with an empty body, then close (what an HTTP/1.0 client such as ab waits for).
    OkThenClose,
    /// 304 Not Modified with a Content-Length but no body (keep-alive).
    NotModified,
    /// Plain HTTP where the client expects TLS: the handshake fails.
    NotTls,
    /// Nothing listens on the port.
    Refused,
    /// Keep-alive, but the third response says `Connection: close` and the server closes
    /// (nginx's keepalive_requests).
    CloseAfterThree,
    /// A status no RFC names, three digits all the same: `999 Weird` (keep-alive).
    UnusualStatus,
}

pub struct FaultyServer {
    pub addr: SocketAddr,
    /// The first request head received, byte for byte.
    pub first_head: Arc<OnceLock<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

impl FaultyServer {
    pub fn start(fault: Fault) -> FaultyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let first_head = Arc::new(OnceLock::new());
        let stop = Arc::new(AtomicBool::new(false));
        if fault == Fault::Refused {
            drop(listener);
            return FaultyServer {
                addr,
                first_head,
                stop,
                thread: None,
            };
        }
        let (h, s) = (first_head.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (h, s) = (h.clone(), s.clone());
                std::thread::spawn(move || play(conn, fault, &h, &s));
            }
        });
        FaultyServer {
            addr,
            first_head,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn https_url(&self) -> String {
        format!("https://{}/", self.addr)
    }
}

impl Drop for FaultyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = TcpStream::connect(self.addr); // wakes the accept loop
            let _ = t.join();
        }
    }
}

/// Reads one request head, keeping it if it is the server's first; false when the client
/// went away.
fn read_head(conn: &mut TcpStream, first_head: &OnceLock<Vec<u8>>) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    let _ = first_head.set(buf);
    true
}

fn reset(conn: TcpStream) {
    // SO_LINGER 0 turns close into a reset.
    let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
    drop(conn);
}

fn play(mut conn: TcpStream, fault: Fault, first_head: &OnceLock<Vec<u8>>, stop: &AtomicBool) {
    let _ = conn.set_nodelay(true);
    if fault == Fault::NotTls {
        // Answer the ClientHello with plain text.
        let mut b = [0u8; 512];
        let _ = conn.read(&mut b);
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        return;
    }
    let mut served = 0;
    while read_head(&mut conn, first_head) {
        served += 1;
        let w = &mut conn;
        match fault {
            Fault::AcceptThenClose => return,
            Fault::ResetInHead => {
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Le");
                return reset(conn);
            }
            Fault::ResetInBody => {
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf");
                return reset(conn);
            }
            Fault::NeverAnswer => {
                // Hold the connection until the client gives up or the test ends.
                let mut b = [0u8; 64];
                let _ = w.set_read_timeout(Some(Duration::from_millis(50)));
                while !stop.load(Ordering::Relaxed) {
                    match w.read(&mut b) {
                        Ok(0) => return,
                        _ => continue,
                    }
                }
                return;
            }
            Fault::Trickle => {
                for b in OK {
                    if w.write_all(std::slice::from_ref(b)).is_err() || stop.load(Ordering::Relaxed)
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Fault::MalformedStatus => {
                let _ = w.write_all(b"HTTX/9 ok\r\n\r\n");
                return;
            }
            Fault::HugeHeaders => {
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\n");
                let line = format!("X-Filler: {}\r\n", "a".repeat(1000));
                for _ in 0..70 {
                    if w.write_all(line.as_bytes()).is_err() {
                        return;
                    }
                }
                let _ = w.write_all(b"Content-Length: 0\r\n\r\n");
                return;
            }
            Fault::BadChunkSize => {
                let _ = w.write_all(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                );
                return;
            }
            Fault::ShortBodyThenClose => {
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
                return;
            }
            Fault::InterimThenOk => {
                let _ = w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                let _ = w.write_all(OK);
            }
            Fault::NoContent => {
                let _ = w.write_all(b"HTTP/1.1 204 No Content\r\n\r\n");
            }
            Fault::OkThenClose => {
                let _ = w.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
                return;
            }
            Fault::NotModified => {
                let _ = w.write_all(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 615\r\n\r\n");
            }
            Fault::CloseAfterThree if served == 3 => {
                let _ = w.write_all(
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
                );
                return;
            }
            Fault::CloseAfterThree => {
                let _ = w.write_all(OK);
            }
            Fault::UnusualStatus => {
                let _ = w.write_all(b"HTTP/1.1 999 Weird\r\nContent-Length: 5\r\n\r\nhello");
            }
            Fault::NotTls | Fault::Refused => unreachable!("handled above"),
        }
    }
}
