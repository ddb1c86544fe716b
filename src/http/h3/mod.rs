//! The client side of HTTP/3 (RFC 9114) and QPACK (RFC 9204) as pure functions of bytes: no
//! sockets, no QUIC, no clock. The worker drives QUIC (quinn-proto) and hands this codec the
//! bytes of each stream, in whatever slices they arrive; the codec hands back what they
//! mean, or the error code to close the connection or reset the stream with.
//!
//! How a worker uses it, per connection:
//! 1. Open a unidirectional stream and write [`ClientSettings::control_stream_prefix`] on it
//!    (never FIN it). No QPACK streams are needed: we allow no dynamic table either way.
//! 2. For each unidirectional stream the server opens, keep a [`UniStreamParser`]; feed it
//!    what arrives; hand `news.kind` to the connection's [`CriticalStreams`]; act on
//!    `news.settings` and `news.goaway`; call `finish` at FIN.
//! 3. For each request: open a bidirectional stream, write [`RequestBytes::as_bytes`] (built
//!    once per run by [`RequestBytes::encode`]), FIN. Feed its received bytes to a
//!    [`ResponseParser`] readied by `start`, and at FIN, `finish` gives the
//!    `ResponseSummary`.
//! 4. On an [`H3Error`], close the connection with its code, or for
//!    [`ErrorScope::Stream`] reset only that request stream (the response counts as failed).
//!
//! Nothing here allocates per request or response once the buffers have grown: the request
//! bytes are prebuilt, DATA is counted and not copied, a field section is read in place or
//! gathered in the parser's reused buffer, and QPACK keeps no table.

mod error;
mod fields;
mod frame;
mod huffman;
mod qpack;
mod request;
mod response;
mod settings;
mod static_table;
mod uni;
mod varint;

#[cfg(test)]
mod tests;

pub(crate) use error::{ErrorCode, ErrorScope, H3Error};
pub(crate) use request::{RequestBytes, RequestTemplate};
pub(crate) use response::{ResponseParser, DEFAULT_MAX_HEADERS_FRAME};
pub(crate) use settings::ClientSettings;
pub(crate) use uni::{CriticalStreams, UniStreamParser};

/// The bytes of every request stream of a run: `fields` as `request_fields` lists them
/// (pseudo-header fields first) and the body, framed once.
pub(crate) fn encode_request(
    fields: &[(Vec<u8>, Vec<u8>)],
    body: &[u8],
) -> Result<RequestBytes, H3Error> {
    let pseudo = |name: &[u8]| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| std::str::from_utf8(v).unwrap_or(""))
    };
    let headers: Vec<(&[u8], &[u8])> = fields
        .iter()
        .filter(|(n, _)| !n.starts_with(b":"))
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    let template = RequestTemplate {
        method: pseudo(b":method"),
        authority: pseudo(b":authority"),
        path: pseudo(b":path"),
        headers: &headers,
        body,
    };
    RequestBytes::encode(&template)
}

/// Our control stream's bytes: its type and SETTINGS (no dynamic QPACK table either way).
pub(crate) fn control_stream() -> Vec<u8> {
    ClientSettings::default().control_stream_prefix()
}
