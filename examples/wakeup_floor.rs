//! The wake-up floor of an exact open loop (`bench/open-loop.sh` runs it beside archbench and
//! wrk2): the least client CPU any client that sends each request at its time pays on this
//! machine. No engine, no histogram, no poll: one thread sleeps on a timerfd until each due
//! time (absolute, CLOCK_MONOTONIC), reads the response its connection got since that
//! connection's last send (it came long ago; the read waits only if not), and sends the next
//! request on it. One wake-up per request, the fewest syscalls a request can cost.
//!
//! With `next` after the seconds, it reads as a client must that times its responses within
//! a bound (archbench reads each by its next wake-up, within 5 ms, for the live per-second
//! intervals): at each wake-up, before its send, every response that has arrived since, in
//! the order sent, without waiting (a non-blocking read each, and one that finds nothing).
//! Reading a response before the kernel's delayed-ACK timer (40 ms at least) has acknowledged
//! it makes the read send that ACK, on the client's CPU; read 50 ms late, as above, the timer
//! has sent it from the server's CPU. The two floors differ by that ACK and the extra read.
//!
//!   cargo run --release --example wakeup_floor -- 127.0.0.1:8080 10000 50 5 [next]
//!   (address, rate, connections, seconds) -> "N requests in Ss", as wrk2 says it
//!
//! HTTP/1.1 GET / with keep-alive; responses framed by Content-Length (nginx's welcome page).

use std::collections::VecDeque;
use std::error::Error;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// One connection: its socket, what it has read of its pending response, and whether one is
/// pending.
struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    pending: bool,
}

impl Conn {
    /// Reads until the pending response is whole (framed by Content-Length).
    fn finish_response(&mut self) -> Result<(), Box<dyn Error>> {
        let mut chunk = [0u8; 16 * 1024];
        while !self.took_response()? {
            let n = self.sock.read(&mut chunk)?;
            if n == 0 {
                return Err("the server closed a connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    }

    /// Reads what has arrived without waiting; whether the pending response is whole.
    fn try_finish_response(&mut self) -> Result<bool, Box<dyn Error>> {
        let mut chunk = [0u8; 16 * 1024];
        while !self.took_response()? {
            // SAFETY: reads at most `chunk.len()` bytes into `chunk`.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    chunk.as_mut_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match n {
                0 => return Err("the server closed a connection".into()),
                n if n > 0 => self.buf.extend_from_slice(&chunk[..n as usize]),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::WouldBlock {
                        return Ok(false);
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(true)
    }

    /// Takes the pending response off the buffer when it is whole; true when none is pending.
    fn took_response(&mut self) -> Result<bool, Box<dyn Error>> {
        if !self.pending {
            return Ok(true);
        }
        if let Some(total) = response_length(&self.buf)? {
            if self.buf.len() >= total {
                self.buf.drain(..total);
                self.pending = false;
            }
        }
        Ok(!self.pending)
    }
}

/// The whole response's length once its head is in, from Content-Length.
fn response_length(buf: &[u8]) -> Result<Option<usize>, Box<dyn Error>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end])?.to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .ok_or("a response without Content-Length")?
        .trim()
        .parse::<usize>()?;
    Ok(Some(end + 4 + length))
}

/// A timerfd that fires at absolute CLOCK_MONOTONIC times.
struct Timer(i32);

impl Timer {
    fn new() -> Result<Timer, Box<dyn Error>> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(Timer(fd))
    }

    /// Sleeps until `at` nanoseconds of CLOCK_MONOTONIC (at once when it has passed).
    fn sleep_until(&self, at: u128) -> Result<(), Box<dyn Error>> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` outlives the call; a null old value is allowed.
        let rc = unsafe {
            libc::timerfd_settime(self.0, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer.
        let n = unsafe { libc::read(self.0, expirations.as_mut_ptr().cast(), 8) };
        if n != 8 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(())
    }
}

fn monotonic_ns() -> u128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into `t`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (read_next, args) = match args.split_last() {
        Some((last, rest)) if last == "next" => (true, rest),
        _ => (false, &args[..]),
    };
    let [addr, rate, conns, secs] = args else {
        eprintln!("usage: wakeup_floor ADDRESS RATE CONNECTIONS SECONDS [next]");
        std::process::exit(2);
    };
    let parsed = (
        rate.parse::<f64>(),
        conns.parse::<usize>(),
        secs.parse::<f64>(),
    );
    let (Ok(rate), Ok(conns), Ok(secs)) = parsed else {
        eprintln!("wakeup_floor: RATE, CONNECTIONS and SECONDS are numbers");
        std::process::exit(2);
    };
    if !(rate > 0.0 && conns > 0 && secs > 0.0 && rate * secs < 1e9) {
        eprintln!("wakeup_floor: RATE, CONNECTIONS and SECONDS must be above 0");
        std::process::exit(2);
    }
    match run(addr, rate, conns, secs, read_next) {
        Ok(sent) => println!("{sent} requests in {secs}s"),
        Err(e) => {
            eprintln!("wakeup_floor: {e}");
            std::process::exit(1);
        }
    }
}

fn run(
    addr: &str,
    rate: f64,
    conns: usize,
    secs: f64,
    read_next: bool,
) -> Result<u64, Box<dyn Error>> {
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes();
    let mut all = Vec::with_capacity(conns);
    for _ in 0..conns {
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_secs(10)))?;
        all.push(Conn {
            sock,
            buf: Vec::with_capacity(16 * 1024),
            pending: false,
        });
    }
    let timer = Timer::new()?;
    let start = monotonic_ns() + 10_000_000;
    let total = (rate * secs) as u64;
    let spacing = 1e9 / rate;
    // With `read_next`: the connections with a response pending, in the order sent.
    let mut pending: VecDeque<usize> = VecDeque::with_capacity(conns);
    for k in 0..total {
        timer.sleep_until(start + (k as f64 * spacing) as u128)?;
        while let Some(&first) = pending.front().filter(|_| read_next) {
            if !all[first].try_finish_response()? {
                break;
            }
            pending.pop_front();
        }
        let i = k as usize % conns;
        let c = &mut all[i];
        if c.pending {
            c.finish_response()?;
            pending.retain(|&p| p != i);
        }
        c.sock.write_all(&request)?;
        c.pending = true;
        if read_next {
            pending.push_back(i);
        }
    }
    for c in &mut all {
        c.finish_response()?;
    }
    Ok(total)
}
