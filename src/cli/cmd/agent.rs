//! `archbench agent`: one worker of a distributed load (`k8s load --in-cluster`). It validates
//! its plan, then waits on a small HTTP control endpoint for the instant all workers start at
//! (given by the controller through the API server's pod proxy, so the pods need no API
//! access), runs its part, and prints its result as one line (`archbench-result: {json}`) for
//! the controller to read from the pod's log; `GET /result` serves it too. `POST /stop` ends
//! the run early (the controller's Ctrl-C) with what it measured.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use subtle::ConstantTimeEq as _;

use crate::agent_protocol::{self as protocol, RESULT_PREFIX};
use crate::cli::args::AgentArgs;
use crate::cli::argv::{command_of, spelling};
use crate::cli::flags::Format;
use crate::cli::{execute, run_plan, PlanError, StopSignals};

/// The control endpoint's view of the worker.
#[derive(Default)]
struct Shared {
    /// The start instant, once given.
    started: Option<SystemTime>,
    /// The result, compact JSON, once done.
    result: Option<String>,
}

pub fn cmd_agent(a: &AgentArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    refuse_reports(a)?;
    let mut plan = run_plan(&a.run)?;
    let addr = control_address(&a.control).ok_or_else(|| {
        control_error(
            &a.control,
            "not an ADDRESS:PORT",
            "give a free ADDRESS:PORT to listen on",
        )
    })?;
    let token = control_token(a)?;
    let (listener, bound) = listen(addr, &a.control)?;
    let shared = Arc::new(Mutex::new(Shared::default()));
    let (start_tx, start_rx) = mpsc::channel::<SystemTime>();
    let part = plan.part;
    if token.is_none() {
        crate::stderr_line!(
            "archbench agent: --control-no-auth: anyone who reaches {bound} can start and stop this load"
        );
    }
    let endpoint = Endpoint {
        shared: shared.clone(),
        start: start_tx,
        stop: signals.stop.clone(),
        part,
        token,
    };
    endpoint.serve_on(listener)?;
    crate::stderr_line!(
        "archbench agent: part {}/{} waiting for its start on {bound}",
        part.index,
        part.count
    );
    let start = match wait_for_start(a, &start_rx, signals)? {
        Start::At(at) => at,
        Start::Stopped(code) => return Ok(code),
    };
    plan.start_at = Some(start);
    let result = execute(&plan, &[], &signals.stop, |_, _| {})?;
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
    let signalled = signals.signalled();
    Ok(if result.interrupted && signalled {
        signals.exit_code()
    } else {
        0
    })
}

/// The agent shares `run`'s flags, but its result has one way out: a line on stdout and
/// `GET /result`. A report or a live view it would never write is refused before it listens,
/// rather than accepted and ignored.
fn refuse_reports(a: &AgentArgs) -> Result<(), PlanError> {
    let (o, live) = (&a.run.output, &a.run.live);
    let asked = [
        ("output", o.layout.output != Format::Text),
        ("json", o.json.json.is_some()),
        ("markdown", o.markdown.is_some()),
        ("html", o.html.html.is_some()),
        ("prometheus", live.prometheus.is_some()),
        ("tui", live.tui),
    ];
    match asked.iter().find(|(_, given)| *given) {
        Some((id, _)) => Err(PlanError::Invalid(format!(
            "{}: the agent has no report nor live view; its result goes to stdout as one line ({RESULT_PREFIX}{{json}}) and to GET {} on --control, for `k8s load --in-cluster` to read",
            spelling(&command_of("agent"), id, true),
            protocol::RESULT
        ))),
        None => Ok(()),
    }
}

/// The token POSTs must carry, or None when `--control-no-auth` opens the endpoint on
/// purpose. Neither given is a usage error, not a default: the endpoint listens on every
/// address, so without a token anyone who reaches the port could start a load from here.
fn control_token(a: &AgentArgs) -> Result<Option<String>, PlanError> {
    let token = a.control_token.as_deref().filter(|t| !t.is_empty());
    match (token, a.control_no_auth) {
        (Some(t), false) => Ok(Some(t.to_string())),
        (None, true) => Ok(None),
        (Some(_), true) => Err(PlanError::Invalid(format!(
            "both a control token ({} or --control-token) and --control-no-auth; give one",
            protocol::TOKEN_ENV
        ))),
        (None, false) => Err(PlanError::Invalid(format!(
            "no control token: set {} (or --control-token) so that only the controller can start the load, or pass --control-no-auth to leave the endpoint open on purpose",
            protocol::TOKEN_ENV
        ))),
    }
}

fn control_error(control: &str, why: &str, advice: &str) -> PlanError {
    PlanError::Invalid(format!("--control {control}: {why}; {advice}"))
}

/// The control endpoint's listener on `--control`, and the address it is bound to (port 0
/// binds a free one: say which).
fn listen(addr: SocketAddr, control: &str) -> Result<(TcpListener, String), PlanError> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        control_error(
            control,
            &e.to_string(),
            "give a free ADDRESS:PORT to listen on",
        )
    })?;
    let bound = listener
        .local_addr()
        .map_or_else(|_| control.to_string(), |l| l.to_string());
    Ok((listener, bound))
}

/// How the wait for the start ended.
enum Start {
    /// The instant all workers start at.
    At(SystemTime),
    /// Stopped before it (a signal or `POST /stop`): exit with this code, nothing sent.
    Stopped(i32),
}

/// Waits for the start instant, or a signal, or the deadline (`--start-timeout`).
fn wait_for_start(
    a: &AgentArgs,
    start_rx: &mpsc::Receiver<SystemTime>,
    signals: &StopSignals,
) -> anyhow::Result<Start> {
    let deadline = Instant::now() + a.start_timeout;
    loop {
        if signals.stop.load(Ordering::Relaxed) {
            if signals.signalled() {
                return Ok(Start::Stopped(signals.exit_code()));
            }
            crate::stderr_line!(
                "archbench agent: stopped before its start (POST /stop); nothing was sent"
            );
            return Ok(Start::Stopped(0));
        }
        match start_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(at) => return Ok(Start::At(at)),
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => anyhow::bail!(
                "no start instant within {} s (POST /start on {})",
                a.start_timeout.as_secs(),
                a.control
            ),
        }
    }
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

/// The control endpoint's side of the worker.
struct Endpoint {
    shared: Arc<Mutex<Shared>>,
    start: mpsc::Sender<SystemTime>,
    stop: crate::stop::Stop,
    part: crate::engine::Part,
    /// POSTs must carry it (`x-archbench-token`): any pod can reach the port. None only with
    /// `--control-no-auth`.
    token: Option<String>,
}

/// The most a control request's head may take, and how long the whole request may take: a
/// client that trickles cannot hold the (one-at-a-time) endpoint.
const MAX_HEAD: u64 = 8 * 1024;
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

impl Endpoint {
    /// Serves the control endpoint on its own thread, one request at a time.
    fn serve_on(self, listener: TcpListener) -> anyhow::Result<()> {
        std::thread::Builder::new()
            .name("archbench-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(conn) => {
                            let _ = self.serve(conn);
                        }
                        // Out of descriptors, say: let it pass rather than spin on it.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
            .context("cannot start the control endpoint")?;
        Ok(())
    }
    /// One request on the control endpoint.
    fn serve(&self, mut conn: TcpStream) -> std::io::Result<()> {
        let deadline = Instant::now() + REQUEST_DEADLINE;
        conn.set_read_timeout(Some(REQUEST_DEADLINE))?;
        let mut reader = BufReader::new(conn.try_clone()?.take(MAX_HEAD + 4096));
        let line = |reader: &mut BufReader<std::io::Take<TcpStream>>| {
            let mut l = String::new();
            if Instant::now() >= deadline {
                return Err(std::io::Error::from(std::io::ErrorKind::TimedOut));
            }
            reader.read_line(&mut l).map(|_| l)
        };
        let request_line = line(&mut reader)?;
        let (mut length, mut token) = (0usize, None);
        loop {
            let h = line(&mut reader)?;
            if h.is_empty() || h == "\r\n" || h == "\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0).min(4096);
                } else if k.eq_ignore_ascii_case(protocol::TOKEN_HEADER) {
                    token = Some(v.trim().to_string());
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let (status, text) = self.answer(&request_line, token.as_deref(), &body)?;
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            403 => "Forbidden",
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

    /// Whether a request's token opens the endpoint: the one we hold, compared in constant
    /// time (the time of a wrong guess must not say how much of it was right), or any when
    /// the endpoint is open on purpose.
    fn authorized(&self, token: Option<&str>) -> bool {
        match (&self.token, token) {
            (None, _) => true,
            (Some(ours), Some(theirs)) => bool::from(ours.as_bytes().ct_eq(theirs.as_bytes())),
            (Some(_), None) => false,
        }
    }

    fn answer(
        &self,
        request_line: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> std::io::Result<(u16, String)> {
        let mut words = request_line.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        if method == "POST" && !self.authorized(token) {
            return Ok((
                403,
                format!("wrong or missing {}\n", protocol::TOKEN_HEADER),
            ));
        }
        let part = self.part;
        Ok(match (method, path) {
            ("GET", protocol::READY) => (200, protocol::ready_answer(part.index, part.count)),
            ("POST", protocol::START) => {
                let text = String::from_utf8_lossy(body).trim().to_string();
                match crate::timefmt::parse_rfc3339(&text) {
                    Some(at) => {
                        let mut s = self
                            .shared
                            .lock()
                            .map_err(|_| std::io::Error::other("poisoned"))?;
                        // The first start counts; a second is answered with it.
                        if s.started.is_none() {
                            s.started = Some(at);
                            let _ = self.start.send(at);
                        }
                        let at = s.started.unwrap_or(at);
                        (
                            200,
                            format!("starting at {}\n", crate::timefmt::rfc3339_micros(at)),
                        )
                    }
                    None => (400, format!("not an RFC 3339 time: {text:?}\n")),
                }
            }
            ("POST", protocol::STOP) => {
                self.stop.request();
                (200, "stopping\n".into())
            }
            ("GET", protocol::RESULT) => {
                let s = self
                    .shared
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
        })
    }
}
