//! The kubelet's `/exec/NS/POD/CONTAINER` over WebSocket (`v5.channel.k8s.io`,
//! `v4.channel.k8s.io`): the API server passes kubectl's and kube-rs's WebSocket straight
//! through to a node that declares `ExtendWebSocketsToKubelet`. Binary messages of one
//! channel byte plus payload (0 stdin, 1 stdout, 2 stderr, 3 status JSON, 4 resize, 255
//! close-stdin in v5; see `channel`). The command runs inside the container's namespaces
//! (`nsenter -t PID -m -u -p -n`) and cgroup, with the container's environment plus HOSTNAME;
//! with `tty=true` on a pseudo-terminal (openpty, a new session, resized by channel 4). Its
//! exit status becomes the channel-3 Status (kubectl exits with it). SPDY is not spoken: a
//! non-WebSocket request gets a 400 that says so.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::Stdio;

use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use super::channel::{self, Rx, SessionResult, Tx};
use super::reply::{error, Query, Resp};
use super::upgrade::{self, Ws};
use super::Agent;

const NSENTER: &str = "/usr/bin/nsenter";

/// What exec needs to run a command inside a container.
#[derive(Debug, Clone)]
pub struct ExecTarget {
    pub init_pid: Option<u32>,
    pub env: Vec<(String, String)>,
    pub workdir: String,
    /// The container runs in a user namespace of its own (an emulated image's): joined too.
    pub user_ns: bool,
    pub cgroup_procs: Vec<PathBuf>,
}

/// What the client asked for.
struct ExecRequest {
    command: Vec<String>,
    streams: channel::Streams,
}

pub fn handle(
    agent: &Agent,
    mut req: Request<Incoming>,
    ns: &str,
    name: &str,
    container: &str,
    q: &Query,
) -> Resp {
    let ws = match upgrade::websocket(&req, &channel::PROTOCOLS) {
        Ok(ws) => ws,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    let command = q.all("command");
    if command.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 command",
        );
    }
    let Some(rt) = agent.find(ns, name) else {
        return error(StatusCode::NOT_FOUND, "pod does not exist");
    };
    rt.refresh_usage();
    let target = match rt.exec_target(container) {
        Ok(t) => t,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let streams = channel::Streams::asked(q, ws.protocol);
    let er = ExecRequest { command, streams };
    upgrade::on_upgrade(&mut req, "exec", move |io| async move {
        let ws = upgrade::server_websocket(io).await;
        // a client gone mid-session is not the server's error, but it is worth a log line
        if let Err(e) = session(ws, target, er).await {
            eprintln!("node agent: exec session: {e}");
        }
    });
    ws.response()
}

/// The program and arguments: through nsenter into the container's namespaces when it has
/// them. A terminal session's leader must live inside the pod's PID namespace (a shell sets
/// its terminal's process group, which must be visible there), so `setsid -c` starts it.
fn argv(t: &ExecTarget, command: &[String], tty: bool) -> Vec<String> {
    match t.init_pid {
        Some(pid) => {
            let mut a = vec![
                // By its path: the container's environment (its PATH) is the one the
                // command runs with.
                NSENTER.to_string(),
                "-t".into(),
                pid.to_string(),
                "-m".into(),
                "-u".into(),
                "-p".into(),
                "-n".into(),
                format!("--wd={}", t.workdir),
            ];
            if t.user_ns {
                // its binfmt_misc registration (the emulator) is that namespace's
                a.push("-U".into());
            }
            a.push("--".into());
            if tty {
                a.extend(["setsid".to_string(), "-c".into(), "--".into()]);
            }
            a.extend(command.iter().cloned());
            a
        }
        None => command.to_vec(),
    }
}

/// A pseudo-terminal pair (master, slave).
fn openpty() -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut m, mut s): (RawFd, RawFd) = (-1, -1);
    // SAFETY: openpty writes two descriptors we then own; null name/termios/winsize are allowed.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned by openpty and are owned by nobody else.
    let (m, s) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(m.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(m.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    Ok((m, s))
}

fn resize(master: RawFd, msg: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(msg) else {
        return;
    };
    let ws = libc::winsize {
        ws_row: v["Height"].as_u64().unwrap_or(24) as u16,
        ws_col: v["Width"].as_u64().unwrap_or(80) as u16,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize struct that lives for the call.
    unsafe {
        libc::ioctl(master, libc::TIOCSWINSZ, &ws);
    }
}

fn spawn(
    t: &ExecTarget,
    er: &ExecRequest,
    slave: Option<&OwnedFd>,
) -> io::Result<tokio::process::Child> {
    let a = argv(t, &er.command, er.streams.tty);
    let session_here = er.streams.tty && t.init_pid.is_none();
    let mut cmd = tokio::process::Command::new(&a[0]);
    cmd.args(&a[1..])
        .env_clear()
        .envs(t.env.iter().map(|(k, v)| (k, v)));
    if er.streams.tty {
        cmd.env("TERM", "xterm");
    }
    match slave {
        Some(s) => {
            cmd.stdin(Stdio::from(s.try_clone()?))
                .stdout(Stdio::from(s.try_clone()?))
                .stderr(Stdio::from(s.try_clone()?));
        }
        None => {
            cmd.stdin(if er.streams.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        }
    }
    let files: Vec<std::fs::File> = t
        .cgroup_procs
        .iter()
        .filter_map(|p: &PathBuf| std::fs::OpenOptions::new().write(true).open(p).ok())
        .collect();
    let fds: Vec<RawFd> = files.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: only async-signal-safe calls (prctl, write, setsid/setpgid, ioctl).
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            for fd in &fds {
                libc::write(*fd, b"0".as_ptr().cast(), 1);
            }
            if session_here {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else {
                libc::setpgid(0, 0);
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(files);
    child
}

/// Runs `command` in the container with no input, its stdout and stderr read together (a
/// probe's output), within `limit`: Ok((None, _)) when the limit ended it (its process group
/// is killed).
pub async fn run_captured(
    t: &ExecTarget,
    command: &[String],
    limit: std::time::Duration,
) -> io::Result<(Option<i32>, Vec<u8>)> {
    let er = ExecRequest {
        command: command.to_vec(),
        streams: channel::Streams {
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
            v5: false,
        },
    };
    let mut child = spawn(t, &er, None)?;
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let read_all = async {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (ra, rb) = tokio::join!(
            async {
                match out.as_mut() {
                    Some(o) => o.read_to_end(&mut a).await.map(|_| ()),
                    None => Ok(()),
                }
            },
            async {
                match err.as_mut() {
                    Some(e) => e.read_to_end(&mut b).await.map(|_| ()),
                    None => Ok(()),
                }
            }
        );
        ra?;
        rb?;
        a.extend_from_slice(&b);
        let code = exit_code(child.wait().await);
        Ok::<_, io::Error>((code, a))
    };
    match tokio::time::timeout(limit, read_all).await {
        Ok(r) => r,
        Err(_) => {
            if let Some(p) = pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: kill(2) on our own child's process group (spawn made it a leader).
                unsafe {
                    libc::kill(-p, libc::SIGKILL);
                }
            }
            Ok((None, Vec::new()))
        }
    }
}

fn exit_code(st: io::Result<std::process::ExitStatus>) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    let s = st.ok()?;
    Some(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)))
}

async fn session(ws: Ws, t: ExecTarget, er: ExecRequest) -> SessionResult {
    let (mut tx, mut rx) = ws.split();
    // each open output channel is announced with a one-byte message; not stderr with a tty
    // (kubectl: "Unknown stream id 2")
    channel::announce(
        &mut tx,
        er.streams.stdout,
        er.streams.stderr && !er.streams.tty,
    )
    .await?;
    let pty = if er.streams.tty {
        Some(openpty()?)
    } else {
        None
    };
    let mut child = match spawn(&t, &er, pty.as_ref().map(|(_, s)| s)) {
        Ok(c) => c,
        Err(e) => {
            let status = channel::status(None, Some(&e.to_string()));
            return channel::finish(&mut tx, status).await;
        }
    };
    let pid = child.id();
    let kill = || {
        if let Some(p) = pid {
            // SAFETY: kill(2) on our own child's process group.
            unsafe {
                libc::kill(-(p as i32), libc::SIGKILL);
            }
        }
    };
    let result = match pty {
        Some((master, slave)) => {
            drop(slave);
            pump_tty(&mut tx, &mut rx, master, &er).await
        }
        None => pump_pipes(&mut tx, &mut rx, &mut child, &er).await,
    };
    if result.is_err() {
        kill();
    }
    let code = exit_code(child.wait().await);
    result?;
    channel::finish(&mut tx, channel::status(code, None)).await
}

async fn pump_pipes(
    tx: &mut Tx,
    rx: &mut Rx,
    child: &mut tokio::process::Child,
    er: &ExecRequest,
) -> SessionResult {
    // Stdin is fed by a task of its own: a command that reads slowly (or not at all) must not
    // stop its output from being drained, or both sides wait on full pipes.
    let mut cin = child.stdin.take().map(|mut pipe| {
        let (feed, mut input) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = input.recv().await {
                if pipe.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        feed
    });
    let mut cout = child.stdout.take();
    let mut cerr = child.stderr.take();
    let (mut ob, mut eb) = (vec![0u8; 32 * 1024], vec![0u8; 32 * 1024]);
    let mut ws_open = true;
    while cout.is_some() || cerr.is_some() {
        tokio::select! {
            n = async { cout.as_mut().expect("guarded").read(&mut ob[1..]).await }, if cout.is_some() => {
                match n {
                    Ok(0) | Err(_) => cout = None,
                    Ok(n) => if er.streams.stdout { ob[0] = 1; tx.send(Message::binary(ob[..=n].to_vec())).await? },
                }
            }
            n = async { cerr.as_mut().expect("guarded").read(&mut eb[1..]).await }, if cerr.is_some() => {
                match n {
                    Ok(0) | Err(_) => cerr = None,
                    Ok(n) => if er.streams.stderr { eb[0] = 2; tx.send(Message::binary(eb[..=n].to_vec())).await? },
                }
            }
            m = rx.next(), if ws_open => match m {
                Some(Ok(Message::Binary(b))) if !b.is_empty() => match b[0] {
                    0 => if let Some(c) = cin.as_ref() {
                        if c.send(b[1..].to_vec()).is_err() { cin = None; }
                    },
                    255 if er.streams.v5 && b.get(1) == Some(&0) => cin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => { ws_open = false; cin = None; }
                Some(Ok(_)) => {}
            },
        }
    }
    Ok(())
}

async fn pump_tty(tx: &mut Tx, rx: &mut Rx, master: OwnedFd, er: &ExecRequest) -> SessionResult {
    // SAFETY: `master` is an open pty master owned by the AsyncFd for its whole life.
    let fd = unsafe { AsyncFd::register(master) }.map_err(|e| io::Error::other(e.to_string()))?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut pending_in: Vec<u8> = Vec::new();
    loop {
        tokio::select! {
            r = fd.readable() => {
                let mut guard = r?;
                // SAFETY: read into our buffer from the pty master we own.
                let n = unsafe { libc::read(fd.get_ref().as_raw_fd(), buf[1..].as_mut_ptr().cast(), buf.len() - 1) };
                if n > 0 {
                    buf[0] = 1;
                    tx.send(Message::binary(buf[..=n as usize].to_vec())).await?;
                } else if n == 0 {
                    break;
                } else {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::WouldBlock {
                        guard.clear_ready();
                    } else {
                        break; // EIO: every slave is closed, the session is over
                    }
                }
            }
            w = fd.writable(), if !pending_in.is_empty() => {
                let mut guard = w?;
                // SAFETY: write from our buffer to the pty master we own.
                let n = unsafe { libc::write(fd.get_ref().as_raw_fd(), pending_in.as_ptr().cast(), pending_in.len()) };
                if n > 0 {
                    pending_in.drain(..n as usize);
                } else if io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                } else {
                    pending_in.clear();
                }
            }
            m = rx.next() => match m {
                Some(Ok(Message::Binary(b))) if !b.is_empty() => match b[0] {
                    0 if er.streams.stdin => pending_in.extend_from_slice(&b[1..]),
                    4 => resize(fd.get_ref().as_raw_fd(), &b[1..]),
                    // end of input on a terminal: ^D, as a real terminal would send it
                    255 if er.streams.v5 && b.get(1) == Some(&0) => pending_in.push(4),
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    // the terminal hangs up: SIGHUP to the session, as closing an ssh does
                    return Err("client closed the terminal".into());
                }
                Some(Ok(_)) => {}
            },
        }
    }
    Ok(())
}
