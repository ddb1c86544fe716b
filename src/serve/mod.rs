//! The embedded target: a small multi-threaded HTTP/1.1 server answering like nginx's stock
//! welcome page (same 615-byte body, similar headers). It is the demo's default target and the
//! tests' fixture, so it also offers the framings and delays tests need.
//!
//! It must stay cheap: requests are parsed in place, responses are written from a buffer that
//! is reused per connection, and the `Date` header is formatted once per second.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::timefmt::http_date;

/// nginx's stock welcome page, byte for byte (615 bytes).
pub const WELCOME_PAGE: &[u8] = include_bytes!("welcome.html");
const LAST_MODIFIED: &str = "Tue, 01 Dec 2026 00:00:00 GMT";

/// How responses are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// Content-Length, keep-alive when the client allows it (nginx's behaviour).
    #[default]
    ContentLength,
    /// `Transfer-Encoding: chunked`, the body in three chunks.
    Chunked,
    /// HTTP/1.0 without Content-Length: the body ends when the server closes.
    CloseDelimited,
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub addr: SocketAddr,
    pub threads: usize,
    pub framing: Framing,
    /// Added before every response (to make a deliberately slower server).
    pub delay: Duration,
    /// CPU spent spinning before every response (to make a deliberately expensive server).
    pub burn: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            framing: Framing::ContentLength,
            delay: Duration::ZERO,
            burn: Duration::ZERO,
        }
    }
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}; choose another --addr")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the server runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// What the server counted, readable while it runs.
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
}

/// A running server; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    counters: Arc<ServerCounters>,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds synchronously (so a bad address fails here) and serves on its own runtime.
    pub fn start(opts: ServeOptions) -> Result<Server, ServeError> {
        let std_listener =
            std::net::TcpListener::bind(opts.addr).map_err(|source| ServeError::Bind {
                addr: opts.addr,
                source,
            })?;
        std_listener
            .set_nonblocking(true)
            .map_err(ServeError::Runtime)?;
        let addr = std_listener.local_addr().map_err(ServeError::Runtime)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.threads.max(1))
            .thread_name("archbench-serve")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let counters = Arc::new(ServerCounters::default());
        let (shutdown, rx) = watch::channel(false);
        let c = counters.clone();
        let thread = std::thread::Builder::new()
            .name("archbench-serve-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(std_listener) {
                        Ok(listener) => accept_loop(listener, opts, c, rx).await,
                        Err(e) => crate::stderr_line!("archbench serve: {e}"),
                    }
                });
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .map_err(ServeError::Runtime)?;
        Ok(Server {
            addr,
            counters,
            shutdown,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn counters(&self) -> &ServerCounters {
        &self.counters
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// Stops accepting and closes every connection.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

async fn accept_loop(
    listener: TcpListener,
    opts: ServeOptions,
    counters: Arc<ServerCounters>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                counters.connections.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                let c = counters.clone();
                let o = opts.clone();
                let mut stop = shutdown.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stop.changed() => {}
                        _ = serve_connection(stream, o, c) => {}
                    }
                });
            }
        }
    }
}

/// The parts of a request that decide the response.
struct RequestHead {
    len: usize,
    body_len: usize,
    keep_alive: bool,
    head_only: bool,
}

fn parse_request(buf: &[u8]) -> Result<Option<RequestHead>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    let http11 = req.version == Some(1);
    let mut keep_alive = http11;
    let mut body_len = 0;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            let v = h.value.to_ascii_lowercase();
            if v.windows(5).any(|w| w == b"close") {
                keep_alive = false;
            } else if v.windows(10).any(|w| w == b"keep-alive") {
                keep_alive = true;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            body_len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or(())?;
        }
    }
    Ok(Some(RequestHead {
        len,
        body_len,
        keep_alive,
        head_only: req.method == Some("HEAD"),
    }))
}

/// Caches the `Date` header value for the current second.
struct DateCache {
    second: u64,
    value: String,
}

impl DateCache {
    fn get(&mut self) -> &str {
        let now = SystemTime::now();
        let s = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if s != self.second || self.value.is_empty() {
            self.second = s;
            self.value = http_date(now);
        }
        &self.value
    }
}

fn write_response(out: &mut Vec<u8>, date: &str, framing: Framing, req: &RequestHead) {
    use std::io::Write as _;
    let body = WELCOME_PAGE;
    match framing {
        Framing::ContentLength => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nServer: archbench\r\nDate: {date}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nLast-Modified: {LAST_MODIFIED}\r\nConnection: {}\r\nETag: \"archbench-267\"\r\nAccept-Ranges: bytes\r\n\r\n",
                body.len(),
                if req.keep_alive { "keep-alive" } else { "close" }
            );
            if !req.head_only {
                out.extend_from_slice(body);
            }
        }
        Framing::Chunked => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nServer: archbench\r\nDate: {date}\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
                if req.keep_alive { "keep-alive" } else { "close" }
            );
            if !req.head_only {
                for part in [&body[..100], &body[100..400], &body[400..]] {
                    let _ = write!(out, "{:x}\r\n", part.len());
                    out.extend_from_slice(part);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
        }
        Framing::CloseDelimited => {
            let _ = write!(
                out,
                "HTTP/1.0 200 OK\r\nServer: archbench\r\nDate: {date}\r\nContent-Type: text/html\r\n\r\n"
            );
            if !req.head_only {
                out.extend_from_slice(body);
            }
        }
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    opts: ServeOptions,
    counters: Arc<ServerCounters>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    let mut date = DateCache {
        second: 0,
        value: String::new(),
    };
    loop {
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        // Answer every complete request in the buffer (pipelining allowed).
        let mut start = 0;
        let mut close = false;
        while let Some(req) = parse_request(&buf[start..filled]).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "malformed request")
        })? {
            if filled - start < req.len + req.body_len {
                break;
            }
            start += req.len + req.body_len;
            if !opts.delay.is_zero() {
                tokio::time::sleep(opts.delay).await;
            }
            if !opts.burn.is_zero() {
                // Deliberately busy: this server is meant to cost CPU.
                let until = std::time::Instant::now() + opts.burn;
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            write_response(&mut out, date.get(), opts.framing, &req);
            counters.requests.fetch_add(1, Ordering::Relaxed);
            if !req.keep_alive || opts.framing == Framing::CloseDelimited {
                close = true;
                break;
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        if close {
            return stream.shutdown().await;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            return Ok(()); // a head larger than our buffer: not a client we serve
        }
    }
}
