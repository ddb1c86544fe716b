//! Servers whose delays are known: one that stalls (every response to a request that arrives
//! in the first 200 ms of a second, counted from the server's start, waits until that 200 ms
//! ends; under an open loop its latency distribution is known in closed form), and one whose
//! delays jitter between 0 and 4 ms by a fixed sequence.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const STALL: Duration = Duration::from_millis(200);
pub const PERIOD: Duration = Duration::from_secs(1);

pub struct StallingServer {
    pub addr: SocketAddr,
    /// The most any hold overran its delay by, in µs: the server's share of the noise in a
    /// latency the test predicts (a held response can only come later than planned).
    overslept_us: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long to hold request `n` (from 0), arriving `since_start` after the server started.
pub type DelayFn = fn(u64, Duration) -> Duration;

/// The stall of [`STALL`] at the start of every [`PERIOD`].
pub fn stall(_: u64, since_start: Duration) -> Duration {
    let into_period = Duration::from_nanos((since_start.as_nanos() % PERIOD.as_nanos()) as u64);
    STALL.saturating_sub(into_period)
}

/// 0 to 4 ms, by a fixed pseudo-random sequence of the request number.
pub fn jitter(n: u64, _: Duration) -> Duration {
    let x = n
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    Duration::from_micros((x >> 33) % 4_000)
}

impl StallingServer {
    pub fn start() -> StallingServer {
        StallingServer::start_with(stall)
    }

    pub fn start_with(delay: DelayFn) -> StallingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let t0 = Instant::now();
        let count = Arc::new(AtomicU64::new(0));
        let overslept_us = Arc::new(AtomicU64::new(0));
        let overslept = overslept_us.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (count, overslept) = (count.clone(), overslept.clone());
                std::thread::spawn(move || serve(conn, t0, delay, &count, &overslept));
            }
        });
        StallingServer {
            addr,
            overslept_us,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The most any hold so far overran its planned delay.
    pub fn overslept(&self) -> Duration {
        Duration::from_micros(self.overslept_us.load(Ordering::Relaxed))
    }
}

fn serve(
    mut conn: TcpStream,
    t0: Instant,
    delay: DelayFn,
    count: &AtomicU64,
    overslept: &AtomicU64,
) {
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.clear();
        let wait = delay(count.fetch_add(1, Ordering::Relaxed), t0.elapsed());
        if !wait.is_zero() {
            let slept = Instant::now();
            std::thread::sleep(wait);
            let over = slept.elapsed().saturating_sub(wait);
            overslept.fetch_max(
                u64::try_from(over.as_micros()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
        }
        let body = b"ok";
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        if conn.write_all(head.as_bytes()).is_err() || conn.write_all(body).is_err() {
            return;
        }
    }
}

impl Drop for StallingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = TcpStream::connect(self.addr); // wakes the accept loop
            let _ = t.join();
        }
    }
}
