//! HPACK (RFC 7541) for a load generator: the request's header block encoded once per run,
//! through `loona-hpack` (the maintained fork of `hpack` that the loona server uses), and the
//! response's `:status` read from its block without allocating.
//!
//! Requests: the first request on a connection inserts its fields into the server's dynamic
//! table, every later one refers to them by index, so a connection needs exactly two blocks
//! (`first`, `later`); both are the same on every connection, so they are encoded once, when
//! the plan's request is. A server that advertises a table smaller than the default gets the
//! `plain` block instead: a table size update to 0 and literals only (valid on any table).
//!
//! Responses: we advertise SETTINGS_HEADER_TABLE_SIZE 0, so the server's encoder has no
//! dynamic table to refer to and our decoder keeps none: every field is either a static
//! index or a literal whose strings we skip by their lengths (nginx asks for each `server`,
//! `date`, `content-type` to be indexed; with a zero-size table that inserts nothing). Only a
//! Huffman-coded `:status` value (no server seen sends one) is decoded, by the crate.

use loona_hpack::huffman::HuffmanDecoder;
use loona_hpack::Encoder;

use super::ErrorCode;
use crate::http::{RequestSpec, Target};

/// The request's header blocks, see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBlocks {
    /// The first request on a connection: fields inserted into the server's table.
    pub first: Vec<u8>,
    /// Every later request: the same fields by index.
    pub later: Vec<u8>,
    /// For a server whose table is smaller than the default: no indexing at all.
    pub plain: Vec<u8>,
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or carries as a pseudo-header (Host).
const NOT_IN_HTTP2: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The request's fields in HTTP/2's form: pseudo-headers first, names in lower case.
pub fn request_fields(
    spec: &RequestSpec,
    target: &Target,
    https: bool,
    basic_auth: Option<(String, String)>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let given = |name: &str| {
        spec.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let authority = given("host").unwrap_or_else(|| target.host_header.clone());
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b":method".to_vec(), spec.method.clone().into_bytes()),
        (
            b":scheme".to_vec(),
            if https {
                b"https".to_vec()
            } else {
                b"http".to_vec()
            },
        ),
        (b":authority".to_vec(), authority.into_bytes()),
        (b":path".to_vec(), target.path.clone().into_bytes()),
    ];
    let mut add = |name: &str, value: String| {
        fields.push((name.to_ascii_lowercase().into_bytes(), value.into_bytes()))
    };
    if let Some(agent) = spec.defaults.agent() {
        if given("user-agent").is_none() {
            add("user-agent", agent.to_string());
        }
    }
    if spec.defaults.accept() && given("accept").is_none() {
        add("accept", "*/*".into());
    }
    if let Some((user, pass)) = basic_auth {
        if given("authorization").is_none() {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            add("authorization", format!("Basic {token}"));
        }
    }
    let sends_body = !spec.body.is_empty()
        || ["POST", "PUT", "PATCH"]
            .iter()
            .any(|m| spec.method.eq_ignore_ascii_case(m));
    if sends_body && given("content-length").is_none() {
        add("content-length", spec.body.len().to_string());
    }
    for (name, value) in &spec.headers {
        if !NOT_IN_HTTP2.iter().any(|n| name.eq_ignore_ascii_case(n)) {
            add(name, value.clone());
        }
    }
    fields
}

impl RequestBlocks {
    pub fn encode(fields: &[(Vec<u8>, Vec<u8>)]) -> RequestBlocks {
        let pairs = || fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice()));
        let mut encoder = Encoder::new();
        let first = encoder.encode(pairs());
        let later = encoder.encode(pairs());
        let mut none = Encoder::new();
        none.set_max_table_size(0);
        // A dynamic table size update to 0 (RFC 7541 §6.3), then fields the zero-size table
        // cannot keep.
        let mut plain = vec![0x20];
        plain.extend(none.encode(pairs()));
        RequestBlocks {
            first,
            later,
            plain,
        }
    }
}

/// A response block that breaks HPACK's rules: a COMPRESSION_ERROR on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed response header block: {0}")]
pub struct BlockError(pub &'static str);

impl BlockError {
    pub fn code(self) -> ErrorCode {
        ErrorCode::Compression
    }
}

/// The static table's `:status` entries (RFC 7541 Appendix A, indices 8-14).
const STATUS_INDEXED: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
/// The static table's size: any higher index refers to the dynamic table, which we keep at 0.
const STATIC_ENTRIES: u64 = 61;
/// Static-table names the response reader cares about.
const STATUS_NAME: u64 = 8;
const SERVER_NAME: u64 = 54;

/// What a response's header block says, read without allocating (the server's name only when
/// asked for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// 0 when the block had no `:status` (a trailer block has none).
    pub status: u16,
    pub server: Option<String>,
}

/// Reads a response block encoded against a zero-size dynamic table (see the module docs).
/// `want_server`: also return the `server` field's value (allocates).
pub fn read_response(block: &[u8], want_server: bool) -> Result<ResponseHead, BlockError> {
    let mut head = ResponseHead::default();
    let mut at = 0;
    while at < block.len() {
        let b = block[at];
        if b & 0x80 != 0 {
            // Indexed field.
            let (index, used) = integer(&block[at..], 7)?;
            at += used;
            match index {
                0 => return Err(BlockError("index 0")),
                8..=14 => head.status = STATUS_INDEXED[(index - 8) as usize],
                i if i > STATIC_ENTRIES => {
                    return Err(BlockError("dynamic index with table size 0"))
                }
                _ => {}
            }
            continue;
        }
        if b & 0xe0 == 0x20 {
            // Dynamic table size update: ours is 0, no larger size may be announced.
            let (size, used) = integer(&block[at..], 5)?;
            if size != 0 {
                return Err(BlockError(
                    "table size update above SETTINGS_HEADER_TABLE_SIZE 0",
                ));
            }
            at += used;
            continue;
        }
        // A literal: with incremental indexing (01), without (0000) or never indexed (0001).
        let prefix = if b & 0x40 != 0 { 6 } else { 4 };
        let (name_index, used) = integer(&block[at..], prefix)?;
        at += used;
        let name = if name_index == 0 {
            let (name, used) = string(&block[at..])?;
            at += used;
            Some(name)
        } else if name_index > STATIC_ENTRIES {
            return Err(BlockError("dynamic name index with table size 0"));
        } else {
            None
        };
        let (value, used) = string(&block[at..])?;
        at += used;
        let is = |index: u64, literal: &[u8]| {
            name_index == index || name.is_some_and(|n| !n.1 && n.0 == literal)
        };
        if is(STATUS_NAME, b":status") {
            head.status = status_value(value)?;
        } else if want_server && is(SERVER_NAME, b"server") {
            head.server = Some(String::from_utf8_lossy(&text(value)?).into_owned());
        }
    }
    Ok(head)
}

/// A string literal's bytes and whether they are Huffman-coded.
type Literal<'a> = (&'a [u8], bool);

fn string(buf: &[u8]) -> Result<(Literal<'_>, usize), BlockError> {
    let huffman = buf.first().is_some_and(|b| b & 0x80 != 0);
    let (len, used) = integer(buf, 7)?;
    let end = (used as u64)
        .checked_add(len)
        .filter(|&e| e <= buf.len() as u64)
        .ok_or(BlockError("string runs past the block"))? as usize;
    Ok(((&buf[used..end], huffman), end))
}

fn text(literal: Literal) -> Result<std::borrow::Cow<[u8]>, BlockError> {
    match literal {
        (raw, false) => Ok(raw.into()),
        (coded, true) => HuffmanDecoder::new()
            .decode(coded)
            .map(Into::into)
            .map_err(|_| BlockError("bad Huffman code")),
    }
}

fn status_value(literal: Literal) -> Result<u16, BlockError> {
    let digits = text(literal)?;
    match *digits {
        [a, b, c] if [a, b, c].iter().all(u8::is_ascii_digit) && a != b'0' => {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(BlockError(":status is not three digits")),
    }
}

/// An HPACK integer with an N-bit prefix (RFC 7541 §5.1): its value and the bytes it used.
fn integer(buf: &[u8], prefix: u8) -> Result<(u64, usize), BlockError> {
    let max = (1u64 << prefix) - 1;
    let first = u64::from(*buf.first().ok_or(BlockError("truncated integer"))?) & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut value = max;
    for (i, &b) in buf.iter().enumerate().skip(1) {
        // Beyond 2^35 no length or index is meaningful here.
        if i > 5 {
            return Err(BlockError("integer too large"));
        }
        value += u64::from(b & 0x7f) << (7 * (i - 1));
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(BlockError("truncated integer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loona_hpack::Decoder;

    fn fields() -> Vec<(Vec<u8>, Vec<u8>)> {
        let spec = RequestSpec {
            method: "GET".into(),
            headers: vec![
                ("X-Test".into(), "1".into()),
                ("Connection".into(), "close".into()),
            ],
            body: vec![],
            version: crate::http::HttpVersion::Http11,
            keepalive: true,
            defaults: crate::http::DefaultHeaders::AgentAndAccept("archbench/t".into()),
        };
        let target = Target::parse("http://127.0.0.1:8080/x?y").unwrap();
        request_fields(&spec, &target, false, None)
    }

    #[test]
    fn request_fields_are_http2_shaped() {
        let f = fields();
        let names: Vec<&[u8]> = f.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(
            names,
            [
                &b":method"[..],
                b":scheme",
                b":authority",
                b":path",
                b"user-agent",
                b"accept",
                b"x-test"
            ]
        );
        assert_eq!(f[2].1, b"127.0.0.1:8080");
        assert_eq!(f[3].1, b"/x?y");
    }

    /// The server's decoder sees first, later, later, ...: every block decodes to the fields.
    #[test]
    fn first_and_later_blocks_decode_in_sequence_and_later_is_shorter() {
        let f = fields();
        let blocks = RequestBlocks::encode(&f);
        assert!(blocks.later.len() < blocks.first.len(), "{blocks:?}");
        let mut server = Decoder::new();
        for block in [&blocks.first, &blocks.later, &blocks.later, &blocks.later] {
            assert_eq!(server.decode(block).unwrap(), f);
        }
        // The plain block decodes on its own, and again after the others.
        let mut fresh = Decoder::new();
        assert_eq!(fresh.decode(&blocks.plain).unwrap(), f);
        assert_eq!(fresh.decode(&blocks.plain).unwrap(), f);
        assert_eq!(server.decode(&blocks.plain).unwrap(), f);
    }

    #[test]
    fn status_from_static_index_and_literals() {
        // nginx's shape: a size update to 0, :status 200 indexed, server literal indexed.
        let block = [&[0x20, 0x88, 0x40 | 54, 5][..], b"nginx"].concat();
        assert_eq!(
            read_response(&block, true).unwrap(),
            ResponseHead {
                status: 200,
                server: Some("nginx".into())
            }
        );
        assert_eq!(read_response(&block, false).unwrap().server, None);
        // A literal status with the static name, raw and Huffman-coded ("503": '5' 011011,
        // '0' 00000, '3' 011001, padded with ones; RFC 7541 Appendix B).
        assert_eq!(
            read_response(&[0x08, 3, b'4', b'2', b'9'], false)
                .unwrap()
                .status,
            429
        );
        let coded = [0x08, 0x80 | 3, 0b0110_1100, 0b0000_1100, 0b1111_1111];
        assert_eq!(read_response(&coded, false).unwrap().status, 503);
        // A literal name.
        let named = [&[0x00, 7][..], b":status", &[3], b"201"].concat();
        assert_eq!(read_response(&named, false).unwrap().status, 201);
        // A trailer block: no status.
        let trailer = [&[0x00, 4][..], b"x-md", &[1], b"a"].concat();
        assert_eq!(read_response(&trailer, false).unwrap().status, 0);
    }

    #[test]
    fn what_a_zero_size_table_cannot_hold_is_a_compression_error() {
        for bad in [
            &[0xbe][..],                                 // index 62: the dynamic table
            &[0x80],                                     // index 0
            &[0x3f, 0xe1, 0x1f],                         // size update to 4096
            &[0x08, 5, b'2'],                            // a string past the block
            &[0x08, 2, b'2', b'0'],                      // two digits
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // an endless integer
        ] {
            let e = read_response(bad, false).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Compression, "{bad:?}: {e}");
        }
    }

    /// Every block decodes the same however it is cut, since blocks arrive whole; but a block
    /// cut short must never panic.
    #[test]
    fn truncated_blocks_error_without_panicking() {
        let block = [
            &[0x20, 0x88, 0x40 | 54, 5][..],
            b"nginx",
            &[0x0f, 0x12, 3],
            b"abc",
        ]
        .concat();
        for end in 0..block.len() {
            let _ = read_response(&block[..end], true);
        }
        assert_eq!(read_response(&block, false).unwrap().status, 200);
    }
}
