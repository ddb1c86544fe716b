//! A server that stalls: every response to a request that arrives in the first 200 ms of a
//! second (counted from the server's start) waits until that 200 ms ends. Under an open loop
//! its latency distribution is known in closed form (see the test using it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const STALL: Duration = Duration::from_millis(200);
pub const PERIOD: Duration = Duration::from_secs(1);

pub struct StallingServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StallingServer {
    pub fn start() -> StallingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let t0 = Instant::now();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                std::thread::spawn(move || serve(conn, t0));
            }
        });
        StallingServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

fn serve(mut conn: TcpStream, t0: Instant) {
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
        let into_period =
            Duration::from_nanos((t0.elapsed().as_nanos() % PERIOD.as_nanos()) as u64);
        if into_period < STALL {
            std::thread::sleep(STALL - into_period);
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
