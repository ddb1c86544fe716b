//! The kubelet's `/attach/NS/POD/CONTAINER`: the running container's own stdout and stderr
//! from the moment of attach (the chunks its log pumps read, as they read them), and its
//! stdin when the container has `stdin: true` (the pipe the node keeps open for it; see
//! `stdio`). Over the same WebSocket channel protocol as exec (`channel`); the session ends
//! when the container's run does (a Success status, as the kubelet sends it) or when the
//! client goes. Containers with `tty: true` run without a terminal on this node, so attach
//! with a tty is refused, in one message.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use hyper::body::Incoming;
use tokio::sync::broadcast::error::RecvError;
use tokio_tungstenite::tungstenite::Message;

use super::channel::{self, Rx, SessionResult, Streams, Tx};
use super::reply::{error, Query, Resp};
use super::stdio::{self, Attached, RunIo, STDERR, STDOUT};
use super::upgrade::{self, Ws};
use super::Agent;

pub fn handle(
    agent: &Agent,
    mut req: Request<Incoming>,
    ns: &str,
    name: &str,
    container: &str,
    q: &Query,
) -> Resp {
    // first: kubectl retries a refused WebSocket over SPDY, and this is the message to see
    if q.flag("tty") {
        return error(
            StatusCode::BAD_REQUEST,
            "this node runs containers without a terminal: attach with a TTY is not supported (attach without -t)",
        );
    }
    let ws = match upgrade::websocket(&req, &channel::PROTOCOLS) {
        Ok(ws) => ws,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    let streams = Streams::asked(q, ws.protocol);
    let Some(rt) = agent.find(ns, name) else {
        return error(StatusCode::NOT_FOUND, "pod does not exist");
    };
    let io = match rt.attach_target(container) {
        Ok(io) => io,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    // subscribed now, before the 101: what the container writes from here on is the client's
    let attached = io.attach();
    upgrade::on_upgrade(&mut req, "attach", move |conn| async move {
        let ws = upgrade::server_websocket(conn).await;
        if streams.stdin {
            io.stdin_attached();
        }
        let result = session(ws, &io, attached, &streams).await;
        if streams.stdin {
            io.detach_stdin().await;
        }
        if let Err(e) = result {
            eprintln!("node agent: attach session: {e}");
        }
    });
    ws.response()
}

async fn session(
    ws: Ws,
    io: &Arc<RunIo>,
    mut attached: Attached,
    streams: &Streams,
) -> SessionResult {
    let (mut tx, rx) = ws.split();
    channel::announce(&mut tx, streams.stdout, streams.stderr).await?;
    // The client's messages are read by a task of their own: a write to the container's
    // stdin is never cut short by output arriving, nor output held up by a full stdin pipe.
    let mut gone = tokio::spawn(input(rx, io.clone(), streams.stdin));
    loop {
        tokio::select! {
            chunk = attached.output.recv() => match chunk {
                Ok((ch, bytes)) => send_output(&mut tx, streams, ch, &bytes).await?,
                // a client this far behind lost some output; it goes on with the newest
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            },
            _ = stdio::wait_true(&mut attached.ended) => break,
            // the client went away: nothing to tell it
            _ = &mut gone => return Ok(()),
        }
    }
    gone.abort();
    // the run is over: what its pumps sent before the end is still queued
    while let Ok((ch, bytes)) = attached.output.try_recv() {
        send_output(&mut tx, streams, ch, &bytes).await?;
    }
    channel::finish(&mut tx, channel::status(Some(0), None)).await
}

async fn send_output(tx: &mut Tx, streams: &Streams, ch: u8, bytes: &[u8]) -> SessionResult {
    let wanted = (ch == STDOUT && streams.stdout) || (ch == STDERR && streams.stderr);
    if wanted {
        let mut m = Vec::with_capacity(bytes.len() + 1);
        m.push(ch);
        m.extend_from_slice(bytes);
        tx.send(Message::binary(m)).await?;
    }
    Ok(())
}

/// The client's messages until it goes: stdin (channel 0) to the container, and in v5 the
/// end of its stdin (channel 255), which closes a `stdinOnce` container's.
async fn input(mut rx: Rx, io: Arc<RunIo>, mut stdin_open: bool) {
    while let Some(Ok(m)) = rx.next().await {
        match m {
            Message::Binary(b) => match b.first() {
                Some(0) if stdin_open => stdin_open = io.write_stdin(&b[1..]).await,
                Some(255) if b.get(1) == Some(&0) => {
                    stdin_open = false;
                    io.detach_stdin().await;
                }
                _ => {}
            },
            Message::Close(_) => return,
            _ => {}
        }
    }
}
