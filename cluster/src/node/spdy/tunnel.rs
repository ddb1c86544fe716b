//! The WebSocket tunnel kubectl 1.37 port-forwards through (subprotocol
//! `SPDY/3.1+portforward.k8s.io`): the payloads of the binary messages, in order, are the
//! bytes of a SPDY connection; whatever we write goes back as binary messages. `bridge`
//! turns such a WebSocket into a plain byte stream, so one SPDY session serves both it and an
//! upgraded HTTP connection.

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Bytes buffered between the WebSocket and the session, each way.
const BUFFER: usize = 256 * 1024;

/// The WebSocket's binary payloads as one byte stream (and back). The WebSocket closes
/// normally (code 1000, which the client reads as EOF) when the returned stream's writer
/// shuts down; a Close or an error from the client is the stream's EOF.
pub fn bridge<S>(ws: WebSocketStream<S>) -> DuplexStream
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(BUFFER);
    let (mut from_session, mut to_session) = tokio::io::split(theirs);
    let (mut tx, mut rx) = ws.split();
    tokio::spawn(async move {
        while let Some(m) = rx.next().await {
            match m {
                Ok(Message::Binary(b)) => {
                    if to_session.write_all(&b).await.is_err() {
                        break;
                    }
                }
                Ok(Message::Close(_)) | Err(_) => break,
                // pings are answered by the WebSocket layer; text is not part of the tunnel
                Ok(_) => {}
            }
        }
        let _ = to_session.shutdown().await;
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from_session.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if tx.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                return;
            }
        }
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = tx.send(Message::Close(Some(close))).await;
    });
    ours
}
