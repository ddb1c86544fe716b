//! SPDY/3.1, the server side, as far as `kubectl port-forward` uses it: the frames (`frame`)
//! and a session over any byte stream (`session`) — an upgraded HTTP/1.1 connection, or the
//! bytes a WebSocket tunnel carries (`tunnel`).

mod dictionary;
pub mod frame;
pub mod session;
pub mod tunnel;
