//! The kubelet's streaming channel protocol over WebSocket (`v5.channel.k8s.io`,
//! `v4.channel.k8s.io`), shared by exec and attach: binary messages of one channel byte plus
//! payload (0 stdin, 1 stdout, 2 stderr, 3 status JSON, 4 resize, 255 close-stdin in v5),
//! each open output channel announced by an empty message, a Status on channel 3 at the end
//! and then a normal Close.

use futures::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::reply::Query;
use super::upgrade::Ws;

pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

pub type Tx = futures::stream::SplitSink<Ws, Message>;
pub type Rx = futures::stream::SplitStream<Ws>;
pub type SessionResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The streams a request asks for.
pub struct Streams {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
    /// v5 knows channel 255 (the client closed its stdin).
    pub v5: bool,
}

impl Streams {
    pub fn asked(q: &Query, protocol: &str) -> Streams {
        Streams {
            // The API server asks its kubelets with `input`/`output`/`error` (core/v1's
            // ExecStdinParam and friends), not the names its own clients use.
            stdin: q.flag("input") || q.flag("stdin"),
            stdout: q.flag("output") || q.flag("stdout"),
            stderr: q.flag("error") || q.flag("stderr"),
            tty: q.flag("tty"),
            v5: protocol.starts_with("v5"),
        }
    }
}

/// Announces the output channels that will carry data (not stderr with a tty: kubectl
/// says "Unknown stream id 2").
pub async fn announce(tx: &mut Tx, stdout: bool, stderr: bool) -> SessionResult {
    if stdout {
        tx.send(Message::binary(vec![1u8])).await?;
    }
    if stderr {
        tx.send(Message::binary(vec![2u8])).await?;
    }
    Ok(())
}

/// Channel 3's Status: success, a command's non-zero exit code, or a failure to start it.
pub fn status(code: Option<i32>, spawn_error: Option<&str>) -> Vec<u8> {
    let status = match (code, spawn_error) {
        (_, Some(e)) => json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
            "message": format!("error executing command in container: {e}")}),
        (Some(0), None) => json!({"metadata": {}, "status": "Success"}),
        (c, None) => {
            let c = c.unwrap_or(137);
            json!({"metadata": {}, "status": "Failure",
                   "message": format!("command terminated with non-zero exit code: exit status {c}"),
                   "reason": "NonZeroExitCode",
                   "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]}})
        }
    };
    let mut frame = vec![3u8];
    frame.extend(serde_json::to_vec(&status).unwrap_or_default());
    frame
}

/// Sends the Status, then a normal Close (gorilla/websocket, kubectl's, reports a Close
/// without a code as error 1005).
pub async fn finish(tx: &mut Tx, status: Vec<u8>) -> SessionResult {
    tx.send(Message::binary(status)).await?;
    tx.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    })))
    .await?;
    Ok(())
}
