//! The bytes of one request, encoded once per run: a HEADERS frame whose field section uses
//! only the static table and literals, and a DATA frame when there is a body. Every request
//! stream gets the same bytes, copied, then FIN.

use super::error::{ErrorCode, H3Error};
use super::frame::{push_frame_header, DATA, HEADERS};
use super::qpack::encode_field_section;

/// Fields that belong to an HTTP/1.1 connection: HTTP/3 forbids them (RFC 9114 §4.2), and
/// `host` is carried by `:authority` instead.
const NOT_IN_HTTP3: [&[u8]; 6] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
    b"host",
];

/// What a request template says; the scheme is always `https`, as HTTP/3 has no other.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestTemplate<'a, H> {
    pub method: &'a str,
    pub authority: &'a str,
    /// The path and query, e.g. `/` or `/search?q=1`.
    pub path: &'a str,
    /// More fields, in order; names in any case (they are sent in lower case), the
    /// connection-specific ones above dropped.
    pub headers: &'a [(H, H)],
    pub body: &'a [u8],
}

/// A request's bytes, ready to write on each new bidirectional stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestBytes {
    bytes: Vec<u8>,
    is_head: bool,
}

impl RequestBytes {
    /// Encodes `template` once. Refused only for sizes beyond QUIC's 2^62 bytes.
    pub(crate) fn encode<H: AsRef<[u8]>>(
        template: &RequestTemplate<'_, H>,
    ) -> Result<Self, H3Error> {
        let pseudo: [(&[u8], &[u8]); 4] = [
            (b":method", template.method.as_bytes()),
            (b":scheme", b"https"),
            (b":authority", template.authority.as_bytes()),
            (b":path", template.path.as_bytes()),
        ];
        let lowered: Vec<(Vec<u8>, &[u8])> = template
            .headers
            .iter()
            .map(|(name, value)| (name.as_ref().to_ascii_lowercase(), value.as_ref()))
            .filter(|(name, _)| !NOT_IN_HTTP3.contains(&name.as_slice()))
            .collect();
        let fields = pseudo.into_iter().chain(
            lowered
                .iter()
                .map(|(name, value)| (name.as_slice(), *value)),
        );
        let mut section = Vec::new();
        encode_field_section(fields, &mut section);

        let mut bytes = Vec::with_capacity(section.len() + template.body.len() + 32);
        push_frame_header(HEADERS, section.len() as u64, &mut bytes).ok_or(TOO_LARGE)?;
        bytes.extend_from_slice(&section);
        if !template.body.is_empty() {
            push_frame_header(DATA, template.body.len() as u64, &mut bytes).ok_or(TOO_LARGE)?;
            bytes.extend_from_slice(template.body);
        }
        Ok(Self {
            bytes,
            is_head: template.method.eq_ignore_ascii_case("HEAD"),
        })
    }

    /// Everything to write on the request stream before FIN.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A HEAD request's response has no content, whatever its `content-length` says: the
    /// response parser needs to know (see `ResponseParser::start`).
    pub(crate) fn is_head(&self) -> bool {
        self.is_head
    }
}

const TOO_LARGE: H3Error = H3Error::connection(
    ErrorCode::INTERNAL_ERROR,
    "the request is larger than a QUIC stream can carry",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h3::qpack::field_lines;
    use crate::http::h3::varint::decode_varint;

    fn get(path: &str, headers: &[(&str, &str)], body: &[u8]) -> RequestBytes {
        RequestBytes::encode(&RequestTemplate {
            method: "GET",
            authority: "example.com",
            path,
            headers,
            body,
        })
        .unwrap()
    }

    /// Splits the bytes into (frame type, payload) pairs.
    fn frames(mut bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (frame_type, used) = decode_varint(bytes).unwrap();
            bytes = &bytes[used..];
            let (len, used) = decode_varint(bytes).unwrap();
            let (payload, rest) = bytes[used..].split_at(len as usize);
            out.push((frame_type, payload.to_vec()));
            bytes = rest;
        }
        out
    }

    fn fields(section: &[u8]) -> Vec<(String, String)> {
        let text = |t: crate::http::h3::qpack::FieldText| {
            let mut out = Vec::new();
            t.for_each_byte(|b| out.push(b)).unwrap();
            String::from_utf8(out).unwrap()
        };
        field_lines(section)
            .unwrap()
            .map(|line| line.map(|l| (text(l.name), text(l.value))).unwrap())
            .collect()
    }

    #[test]
    fn get_slash_is_these_bytes() {
        // HEADERS, 18 bytes: prefix 0 0; :method GET (static 17); :scheme https (23);
        // :authority (0) with a literal value; :path / (1).
        let mut expected = vec![0x01, 0x12, 0x00, 0x00, 0xd1, 0xd7, 0x50, 0x0b];
        expected.extend_from_slice(b"example.com");
        expected.push(0xc1);
        let request = get("/", &[], b"");
        assert_eq!(request.as_bytes(), expected);
        assert!(!request.is_head());
        // And our own decoder reads it back.
        let frames = frames(request.as_bytes());
        let pairs = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "example.com"),
            (":path", "/"),
        ];
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(frames.len(), 1);
        assert_eq!(fields(&frames[0].1), pairs);
    }

    #[test]
    fn decodes_back_to_the_template_with_names_lowered() {
        let headers = [
            ("User-Agent", "archbench"),
            ("Accept", "*/*"),
            ("X-Request-Tag", "Mixed Case Value"),
            ("Host", "dropped.example"),
            ("Connection", "keep-alive"),
            ("Transfer-Encoding", "chunked"),
        ];
        let request = RequestBytes::encode(&RequestTemplate {
            method: "POST",
            authority: "example.com:8443",
            path: "/submit?x=1",
            headers: &headers,
            body: b"{\"a\":1}",
        })
        .unwrap();
        let frames = frames(request.as_bytes());
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].0, HEADERS);
        let expected = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "example.com:8443"),
            (":path", "/submit?x=1"),
            ("user-agent", "archbench"),
            ("accept", "*/*"),
            ("x-request-tag", "Mixed Case Value"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(fields(&frames[0].1), expected);
        assert_eq!(frames[1], (DATA, b"{\"a\":1}".to_vec()));
    }

    #[test]
    fn head_requests_say_so() {
        let request = RequestBytes::encode(&RequestTemplate::<&str> {
            method: "HEAD",
            authority: "a",
            path: "/",
            headers: &[],
            body: b"",
        })
        .unwrap();
        assert!(request.is_head());
        // :method HEAD is static 18.
        assert_eq!(request.as_bytes()[4], 0xc0 | 18);
    }
}
