//! HTTP/1.1 upgrades the kubelet API answers: the WebSocket handshake (exec, attach, the
//! port-forward tunnel) and SPDY/3.1's (port-forward), each a `101 Switching Protocols` whose
//! connection is then handed to a task of its own.

use std::future::Future;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use super::reply::Resp;

pub type Ws = WebSocketStream<TokioIo<Upgraded>>;

/// A WebSocket handshake this node accepts: the subprotocol chosen and the accept key.
pub struct WebSocket {
    pub protocol: &'static str,
    key: String,
}

/// The request's `Upgrade` header names `what` (any case).
pub fn upgrades_to(req: &Request<Incoming>, what: &str) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(what))
}

/// The values of a header that may repeat and list several values (`a, b`).
pub fn listed(req: &Request<Incoming>, name: impl header::AsHeaderName) -> Vec<String> {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect()
}

/// A WebSocket upgrade offering one of `supported` (the first of them the client offers
/// wins); Err is what a 400 should say.
pub fn websocket(req: &Request<Incoming>, supported: &[&'static str]) -> Result<WebSocket, String> {
    if !upgrades_to(req, "websocket") {
        return Err(format!(
            "this node serves {} over WebSocket only ({}); SPDY is not supported",
            req.uri().path().split('/').nth(1).unwrap_or("this"),
            supported.join(", ")
        ));
    }
    let offered = listed(req, header::SEC_WEBSOCKET_PROTOCOL);
    let Some(protocol) = supported
        .iter()
        .copied()
        .find(|p| offered.iter().any(|o| o == p))
    else {
        return Err(format!(
            "no supported WebSocket subprotocol among {offered:?} (this node speaks {})",
            supported.join(", ")
        ));
    };
    let Some(key) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()))
    else {
        return Err("missing Sec-WebSocket-Key".into());
    };
    Ok(WebSocket { protocol, key })
}

/// A `101 Switching Protocols` with `Connection: Upgrade` and these headers.
pub fn switching(headers: &[(header::HeaderName, &str)]) -> Resp {
    let mut r: Resp = Response::new(BodyExt::boxed(Full::new(Bytes::new())));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name.clone(), v);
        }
    }
    r
}

impl WebSocket {
    /// The 101 that completes this handshake.
    pub fn response(&self) -> Resp {
        switching(&[
            (header::UPGRADE, "websocket"),
            (header::SEC_WEBSOCKET_ACCEPT, &self.key),
            (header::SEC_WEBSOCKET_PROTOCOL, self.protocol),
        ])
    }
}

/// Runs `session` on the connection once hyper has sent the 101 and let go of it.
pub fn on_upgrade<F, Fut>(req: &mut Request<Incoming>, what: &'static str, session: F)
where
    F: FnOnce(TokioIo<Upgraded>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let upgrade = hyper::upgrade::on(req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(u) => session(TokioIo::new(u)).await,
            Err(e) => eprintln!("node agent: {what} upgrade: {e}"),
        }
    });
}

/// The upgraded connection as the server's end of a WebSocket.
pub async fn server_websocket(io: TokioIo<Upgraded>) -> Ws {
    WebSocketStream::from_raw_socket(io, Role::Server, None).await
}
