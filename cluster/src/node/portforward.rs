//! The kubelet's `/portForward/NS/POD`: SPDY/3.1 (`portforward.k8s.io`), reached two ways —
//! the WebSocket tunnel kubectl 1.37 uses by default (subprotocol
//! `SPDY/3.1+portforward.k8s.io`, SPDY's bytes in binary messages), and a plain
//! `Upgrade: SPDY/3.1` (kubectl with `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`). Both end in
//! the same session (`spdy::session`).
//!
//! Each forwarded connection is a pair of streams with one `requestID`: `error` and `data`,
//! both naming the `port`. The node connects to 127.0.0.1:PORT inside the pod's network
//! namespace (as a runtime's port-forward does, so a server bound to the pod's loopback is
//! reachable), copies both ways, and on failure writes the error's text on the error stream
//! (kubectl prints it and, since client-go 1.31, gives up the whole forward: "lost connection
//! to pod"). A pair left incomplete for 30 s is told so and dropped, as the kubelet does.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use http::{header, HeaderName, Request, StatusCode};
use hyper::body::Incoming;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::reply::{error, Resp};
use super::spdy::frame::Headers;
use super::spdy::session::{self, Acceptor, Stream, StreamReader, StreamWriter, MAX_DATA};
use super::spdy::tunnel;
use super::upgrade;
use super::Agent;
use crate::netns::Netns;

const PROTOCOL: &str = "portforward.k8s.io";
const TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";
const PROTOCOL_HEADER: &str = "x-stream-protocol-version";
/// How long a request may take to open its second stream (the kubelet's default).
const PAIR_WITHIN: Duration = Duration::from_secs(30);
/// How long a connect inside the pod may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// Where a session's connections go.
#[derive(Clone)]
struct Target {
    netns: PathBuf,
    pod: String,
    uid: String,
}

pub fn handle(agent: &Agent, mut req: Request<Incoming>, ns: &str, name: &str) -> Resp {
    let Some(rt) = agent.find(ns, name) else {
        return error(StatusCode::NOT_FOUND, "pod does not exist");
    };
    let Some(netns) = rt.netns() else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("pod {name} has no network yet"),
        );
    };
    let target = Target {
        netns,
        pod: rt.name.clone(),
        uid: rt.uid.clone(),
    };
    if upgrade::upgrades_to(&req, "websocket") {
        let ws = match upgrade::websocket(&req, &[TUNNEL]) {
            Ok(ws) => ws,
            Err(m) => return error(StatusCode::BAD_REQUEST, m),
        };
        // a line per session: which way a client came is worth knowing (the tests read it)
        eprintln!("node agent: port-forward to {ns}/{name}: SPDY/3.1 in a WebSocket");
        upgrade::on_upgrade(&mut req, "port-forward", move |io| async move {
            let ws = upgrade::server_websocket(io).await;
            run(tunnel::bridge(ws), target).await;
        });
        return ws.response();
    }
    let offered = upgrade::listed(&req, PROTOCOL_HEADER);
    if !upgrade::upgrades_to(&req, "SPDY/3.1") || !offered.iter().any(|p| p == PROTOCOL) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("unable to upgrade: port-forward is served over SPDY/3.1 ({PROTOCOL}), directly or tunnelled in a WebSocket ({TUNNEL}); offered: {offered:?}"),
        );
    }
    eprintln!("node agent: port-forward to {ns}/{name}: SPDY/3.1");
    upgrade::on_upgrade(&mut req, "port-forward", move |io| run(io, target));
    upgrade::switching(&[
        (header::UPGRADE, "SPDY/3.1"),
        (HeaderName::from_static(PROTOCOL_HEADER), PROTOCOL),
    ])
}

async fn run<T>(io: T, target: Target)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (streams, incoming) = mpsc::unbounded_channel();
    tokio::spawn(pair_up(incoming, target));
    if let Err(e) = session::serve(io, Pairs { streams }).await {
        eprintln!("node agent: port-forward session: {e}");
    }
}

/// Checks each stream's headers (as the kubelet's `httpStreamReceived`) and passes it on.
struct Pairs {
    streams: mpsc::UnboundedSender<Stream>,
}

fn header<'a>(h: &'a Headers, name: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

impl Acceptor for Pairs {
    fn check(&mut self, h: &Headers) -> Result<(), String> {
        let port = header(h, "port").ok_or("\"port\" header is required")?;
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            Ok(_) => return Err(format!("port {port:?} must be > 0")),
            Err(e) => return Err(format!("unable to parse {port:?} as a port: {e}")),
        }
        match header(h, "streamtype") {
            Some("error" | "data") => Ok(()),
            Some(t) => Err(format!("invalid stream type {t:?}")),
            None => Err("\"streamType\" header is required".into()),
        }
    }

    fn accept(&mut self, stream: Stream) {
        let _ = self.streams.send(stream);
    }
}

/// Half a pair, waiting for its other stream.
#[derive(Default)]
struct Pair {
    error: Option<Stream>,
    data: Option<Stream>,
}

/// Matches error and data streams by requestID and starts each complete pair's forward.
async fn pair_up(mut incoming: mpsc::UnboundedReceiver<Stream>, target: Target) {
    let mut waiting: HashMap<String, (Pair, tokio::time::Instant)> = HashMap::new();
    loop {
        let next_expiry = waiting.values().map(|(_, t)| *t).min();
        let expired = async {
            match next_expiry {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            s = incoming.recv() => {
                let Some(s) = s else { return };
                // kubectl names each pair; an older client's pairs are told apart by stream id
                let id = s.header("requestid").map(str::to_string).unwrap_or_else(|| {
                    let base = if s.header("streamtype") == Some("data") { s.id.saturating_sub(2) } else { s.id };
                    base.to_string()
                });
                let (pair, _) = waiting
                    .entry(id.clone())
                    .or_insert_with(|| (Pair::default(), tokio::time::Instant::now() + PAIR_WITHIN));
                let slot = if s.header("streamtype") == Some("data") { &mut pair.data } else { &mut pair.error };
                if slot.is_some() {
                    let msg = format!("error processing stream for request {id}: {} stream already assigned",
                        s.header("streamtype").unwrap_or(""));
                    tell(&s.writer, &msg).await;
                    continue;
                }
                *slot = Some(s);
                if pair.error.is_some() && pair.data.is_some() {
                    if let Some((Pair { error: Some(e), data: Some(d) }, _)) = waiting.remove(&id) {
                        tokio::spawn(forward(e, d, target.clone()));
                    }
                }
            }
            _ = expired => {
                let now = tokio::time::Instant::now();
                let late: Vec<String> = waiting.iter().filter(|(_, (_, t))| *t <= now).map(|(k, _)| k.clone()).collect();
                for id in late {
                    if let Some((pair, _)) = waiting.remove(&id) {
                        let msg = format!("(request={id}) timed out waiting for streams");
                        for s in [pair.error, pair.data].into_iter().flatten() {
                            tell(&s.writer, &msg).await;
                        }
                    }
                }
            }
        }
    }
}

/// Writes `msg` on a stream and ends it.
async fn tell(w: &StreamWriter, msg: &str) {
    let _ = w.send(msg.as_bytes()).await;
    let _ = w.finish().await;
    w.close();
}

/// One forwarded connection: the pod's port ↔ the data stream.
async fn forward(error_stream: Stream, data: Stream, target: Target) {
    // the client writes nothing on its error stream: a reader left unread there would hold
    // up the session's reading were it to
    let Stream {
        writer: error_writer,
        ..
    } = error_stream;
    let port: u16 = data
        .header("port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    match connect(&target.netns, port).await {
        Ok(conn) => {
            copy_both_ways(conn, data.reader, &data.writer).await;
            let _ = error_writer.finish().await;
        }
        Err(e) => {
            let msg = format!(
                "error forwarding port {port} to pod {}, uid {}: failed to connect to localhost:{port} inside namespace {:?}: dial tcp4 127.0.0.1:{port}: connect: {}",
                target.pod,
                target.uid,
                target.netns.display().to_string(),
                describe(&e)
            );
            eprintln!("node agent: port-forward: {msg}");
            tell(&error_writer, &msg).await;
            let _ = data.writer.finish().await;
        }
    }
    data.writer.close();
    error_writer.close();
}

/// An error the way Go's net package words it (kubectl users know "connection refused").
fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string(),
    }
}

/// A TCP connection to 127.0.0.1:PORT made inside the pod's network namespace (a thread
/// that enters it connects; the socket stays in that namespace wherever it is used).
async fn connect(netns: &std::path::Path, port: u16) -> io::Result<tokio::net::TcpStream> {
    let ns = Netns::recorded(netns, None);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let made = tokio::task::spawn_blocking(move || {
        ns.within(move || {
            let s = std::net::TcpStream::connect_timeout(&addr, CONNECT_WITHIN);
            Ok(s)
        })
    })
    .await
    .map_err(|e| io::Error::other(e.to_string()))?
    .map_err(|e| io::Error::other(e.to_string()))?;
    let s = made?;
    s.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(s)
}

/// Copies until both directions are done: the client's FIN shuts the pod connection's
/// writing side, the pod's EOF sends our FIN; a reset of the stream ends both.
async fn copy_both_ways(
    conn: tokio::net::TcpStream,
    mut from_client: StreamReader,
    to_client: &StreamWriter,
) {
    let (mut rd, mut wr) = conn.into_split();
    let up = async {
        while let Some(b) = from_client.recv().await {
            if wr.write_all(&b).await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; MAX_DATA];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_client.send(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = to_client.finish().await;
    };
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = to_client.reset() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn streams_need_a_port_and_a_known_type() {
        let mut p = Pairs {
            streams: mpsc::unbounded_channel().0,
        };
        assert!(p
            .check(&h(&[("port", "80"), ("streamtype", "data")]))
            .is_ok());
        assert!(p
            .check(&h(&[("port", "65535"), ("streamtype", "error")]))
            .is_ok());
        for (headers, says) in [
            (h(&[("streamtype", "data")]), "\"port\" header is required"),
            (h(&[("port", "0"), ("streamtype", "data")]), "must be > 0"),
            (
                h(&[("port", "http"), ("streamtype", "data")]),
                "unable to parse",
            ),
            (
                h(&[("port", "65536"), ("streamtype", "data")]),
                "unable to parse",
            ),
            (h(&[("port", "80")]), "\"streamType\" header is required"),
            (
                h(&[("port", "80"), ("streamtype", "x")]),
                "invalid stream type",
            ),
        ] {
            let e = p.check(&headers).unwrap_err();
            assert!(e.contains(says), "{headers:?}: {e}");
        }
    }
}
