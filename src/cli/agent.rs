//! `archbench agent`: one worker of a distributed load (`k8s load --in-cluster`). It validates
//! its plan, then waits on a small HTTP control endpoint for the instant all workers start at
//! (given by the controller through the API server's pod proxy, so the pods need no API
//! access), runs its part, and prints its result as one line (`archbench-result: {json}`) for
//! the controller to read from the pod's log; `GET /result` serves it too. `POST /stop` ends
//! the run early (the controller's Ctrl-C) with what it measured.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;

use super::args::AgentArgs;
use super::{execute, run_plan, PlanError, StopSignals};
use crate::k8s::RESULT_PREFIX;

/// The control endpoint's view of the worker.
#[derive(Default)]
struct Shared {
    /// The start instant, once given.
    started: Option<SystemTime>,
    /// The result, compact JSON, once done.
    result: Option<String>,
}

pub fn cmd_agent(a: &AgentArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    let mut plan = run_plan(&a.run)?;
    let bad = |why: String| {
        PlanError::Invalid(format!(
            "--control {}: {why}; give a free ADDRESS:PORT to listen on",
            a.control
        ))
    };
    let addr = control_address(&a.control).ok_or_else(|| bad("not an ADDRESS:PORT".into()))?;
    let listener = TcpListener::bind(addr).map_err(|e| bad(e.to_string()))?;
    let shared = Arc::new(Mutex::new(Shared::default()));
    let (start_tx, start_rx) = mpsc::channel::<SystemTime>();
    let part = plan.part;
    let for_server = shared.clone();
    let stop = signals.stop.clone();
    std::thread::Builder::new()
        .name("archbench-control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = serve(conn, &for_server, &start_tx, &stop, part);
            }
        })
        .context("cannot start the control endpoint")?;
    eprintln!(
        "archbench agent: part {}/{} waiting for its start on {}",
        part.index, part.count, a.control
    );
    // Wait for the start instant, or a signal, or the deadline.
    let deadline = Instant::now() + a.start_timeout;
    let start = loop {
        if signals.stop.load(Ordering::Relaxed) {
            return Ok(signals.exit_code());
        }
        match start_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(at) => break at,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => anyhow::bail!(
                "no start instant within {} s (POST /start on {})",
                a.start_timeout.as_secs(),
                a.control
            ),
        }
    };
    plan.start_at = Some(start);
    let result = execute(&plan, &[], &signals.stop, |_| {})?;
    let line = serde_json::to_string(&result).context("cannot encode the result")?;
    if let Ok(mut s) = shared.lock() {
        s.result = Some(line.clone());
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{RESULT_PREFIX}{line}")?;
    out.flush()?;
    // Stopped by a signal: the shell's code; stopped through the control endpoint, the
    // worker did what it was told.
    let signalled = signals.which.load(Ordering::Relaxed) != 0;
    Ok(if result.interrupted && signalled {
        signals.exit_code()
    } else {
        0
    })
}

/// `ADDRESS:PORT`, also with a bare IPv6 address (`fd00::5:9090`), as `$(POD_IP):PORT`
/// expands to on an IPv6 cluster.
fn control_address(text: &str) -> Option<SocketAddr> {
    text.parse().ok().or_else(|| {
        let (host, port) = text.rsplit_once(':')?;
        let ip: std::net::IpAddr = host.parse().ok()?;
        Some(SocketAddr::new(ip, port.parse().ok()?))
    })
}

/// One request on the control endpoint.
fn serve(
    mut conn: TcpStream,
    shared: &Mutex<Shared>,
    start: &mpsc::Sender<SystemTime>,
    stop: &AtomicBool,
    part: crate::engine::Part,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0).min(4096);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let mut words = request_line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, text) = match (method, path) {
        ("GET", "/ready") => (200, format!("ready {}/{}\n", part.index, part.count)),
        ("POST", "/start") => {
            let text = String::from_utf8_lossy(&body).trim().to_string();
            match crate::timefmt::parse_rfc3339(&text) {
                Some(at) => {
                    let mut s = shared
                        .lock()
                        .map_err(|_| std::io::Error::other("poisoned"))?;
                    if s.started.is_none() {
                        s.started = Some(at);
                        let _ = start.send(at);
                    }
                    (
                        200,
                        format!("starting at {}\n", crate::timefmt::rfc3339_micros(at)),
                    )
                }
                None => (400, format!("not an RFC 3339 time: {text:?}\n")),
            }
        }
        ("POST", "/stop") => {
            stop.store(true, Ordering::Relaxed);
            (200, "stopping\n".into())
        }
        ("GET", "/result") => {
            let s = shared
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            match &s.result {
                Some(r) => (200, format!("{r}\n")),
                None => (503, "running\n".into()),
            }
        }
        _ => (
            404,
            "GET /ready, POST /start, POST /stop, GET /result\n".into(),
        ),
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        503 => "Service Unavailable",
        _ => "Not Found",
    };
    write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )?;
    conn.flush()
}
