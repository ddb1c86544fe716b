//! HTTP/1.x on the wire: the target a run aims at, the one request it repeats (encoded once),
//! and incremental response framing as bytes arrive.
//!
//! Must never allocate per response once warm: the engine calls [`ResponseParser::feed`] on its
//! hot path with slices of a buffer it owns.

pub mod h2;
pub mod h3;
pub mod handshake_witness;
mod request;
mod response;
mod target;
pub mod tls;

pub use request::{is_header_name, is_header_value, DefaultHeaders, HttpVersion, RequestSpec};
pub use response::{Feed, ProtocolError, ResponseParser, MAX_HEAD_BYTES};
pub use target::{Addresses, Scheme, Target, TargetError, Unresolved};
