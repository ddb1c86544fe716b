//! What a response's field sections must be (RFC 9114 §4.2-4.3, RFC 9110 §5): the head has
//! one `:status` before any regular field and no other pseudo-header; trailers have no
//! pseudo-header; names are lower-case tokens, values hold no NUL, CR or LF, and no field of
//! HTTP/1.1's connection management appears. Anything else is a malformed response.
//!
//! The parser needs only the status and, to check the body against it, `content-length`;
//! every other field is checked and forgotten. Nothing is copied: names are classified by
//! their first bytes kept on the stack as they decode.

use super::error::H3Error;
use super::qpack::{field_lines, FieldText};

/// What the head of a response said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResponseHead {
    pub status: u16,
    pub content_length: Option<u64>,
}

/// Reads a response's head: the HEADERS before the content (an interim 1xx one too).
pub(crate) fn read_head(section: &[u8]) -> Result<ResponseHead, H3Error> {
    let mut status = None;
    let mut content_length = None;
    let mut regular_seen = false;
    for line in field_lines(section)? {
        let line = line?;
        match classify(line.name)? {
            FieldName::Status if regular_seen => {
                return Err(H3Error::malformed(":status after a regular field"))
            }
            FieldName::Status if status.is_some() => {
                return Err(H3Error::malformed("two :status fields"))
            }
            FieldName::Status => status = Some(read_status(line.value)?),
            FieldName::ContentLength => {
                regular_seen = true;
                let length = read_content_length(line.value)?;
                if content_length.is_some_and(|seen| seen != length) {
                    return Err(H3Error::malformed("two different content-length fields"));
                }
                content_length = Some(length);
            }
            FieldName::Regular => {
                regular_seen = true;
                check_value(line.value)?;
            }
            FieldName::OtherPseudo => {
                return Err(H3Error::malformed(
                    "a response pseudo-header other than :status",
                ))
            }
        }
    }
    let status = status.ok_or(H3Error::malformed("a response without :status"))?;
    Ok(ResponseHead {
        status,
        content_length,
    })
}

/// Checks trailers (the HEADERS after the content), whose content we do not use.
pub(crate) fn check_trailers(section: &[u8]) -> Result<(), H3Error> {
    for line in field_lines(section)? {
        let line = line?;
        match classify(line.name)? {
            FieldName::Status | FieldName::OtherPseudo => {
                return Err(H3Error::malformed("a pseudo-header in trailers"))
            }
            FieldName::ContentLength | FieldName::Regular => check_value(line.value)?,
        }
    }
    Ok(())
}

/// The names the parser tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldName {
    Status,
    OtherPseudo,
    ContentLength,
    Regular,
}

/// HTTP/1.1's connection management, which HTTP/3 forbids (RFC 9114 §4.2).
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// The start of a decoded string, enough to recognise every name above.
struct ShortText {
    held: [u8; 20],
    /// The whole string's length, which may pass what `held` keeps.
    len: usize,
}

impl ShortText {
    /// The whole string, when it fitted.
    fn whole(&self) -> Option<&[u8]> {
        self.held.get(..self.len)
    }
}

/// Decodes `text`, asking `valid` about each byte and its position, and keeps its start.
fn read_short(
    text: FieldText,
    mut valid: impl FnMut(usize, u8) -> bool,
) -> Result<(ShortText, bool), H3Error> {
    let mut short = ShortText {
        held: [0; 20],
        len: 0,
    };
    let mut all_valid = true;
    text.for_each_byte(|byte| {
        all_valid &= valid(short.len, byte);
        if let Some(slot) = short.held.get_mut(short.len) {
            *slot = byte;
        }
        short.len += 1;
    })?;
    Ok((short, all_valid))
}

fn classify(name: FieldText) -> Result<FieldName, H3Error> {
    let (short, valid) = read_short(name, name_byte_is_valid)?;
    if !valid || short.len == 0 {
        return Err(H3Error::malformed(
            "a field name that is not a lower-case token",
        ));
    }
    let kind = match short.whole() {
        Some(b":status") => FieldName::Status,
        Some(b"content-length") => FieldName::ContentLength,
        Some(name) if CONNECTION_SPECIFIC.contains(&name) => {
            return Err(H3Error::malformed("a connection-specific field"))
        }
        _ if short.held[0] == b':' => FieldName::OtherPseudo,
        _ => FieldName::Regular,
    };
    Ok(kind)
}

/// A token character in lower case (RFC 9110 §5.6.2), or the colon that starts a
/// pseudo-header's name.
fn name_byte_is_valid(position: usize, byte: u8) -> bool {
    match byte {
        b'a'..=b'z' | b'0'..=b'9' => true,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' => true,
        b'`' | b'|' | b'~' => true,
        b':' => position == 0,
        _ => false,
    }
}

fn value_byte_is_valid(byte: u8) -> bool {
    !matches!(byte, 0 | b'\r' | b'\n')
}

fn check_value(value: FieldText) -> Result<(), H3Error> {
    let mut valid = true;
    value.for_each_byte(|byte| valid &= value_byte_is_valid(byte))?;
    valid
        .then_some(())
        .ok_or(H3Error::malformed("a field value with NUL, CR or LF"))
}

fn read_status(value: FieldText) -> Result<u16, H3Error> {
    let (short, _) = read_short(value, |_, _| true)?;
    match short.whole() {
        Some(&[a @ b'1'..=b'5', b @ b'0'..=b'9', c @ b'0'..=b'9']) => {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(H3Error::malformed(
            ":status is not a three-digit code from 100 to 599",
        )),
    }
}

fn read_content_length(value: FieldText) -> Result<u64, H3Error> {
    let mut length = Some(0u64);
    let mut digits = 0;
    value.for_each_byte(|byte| {
        digits += 1;
        length = length
            .filter(|_| byte.is_ascii_digit())
            .and_then(|n| n.checked_mul(10)?.checked_add(u64::from(byte - b'0')));
    })?;
    length.filter(|_| digits > 0).ok_or(H3Error::malformed(
        "content-length is not a number of bytes",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h3::error::ErrorCode;
    use crate::http::h3::huffman::encode_huffman;
    use crate::http::h3::qpack::encode_field_section;

    fn section(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_field_section(fields.iter().copied(), &mut out);
        out
    }

    fn head(fields: &[(&[u8], &[u8])]) -> Result<ResponseHead, H3Error> {
        read_head(&section(fields))
    }

    #[test]
    fn reads_status_and_content_length() {
        let fields: [(&[u8], &[u8]); 4] = [
            (b":status", b"200"),
            (b"server", b"x"),
            (b"content-length", b"1234"),
            (b"content-length", b"1234"),
        ];
        let expected = ResponseHead {
            status: 200,
            content_length: Some(1234),
        };
        assert_eq!(head(&fields), Ok(expected));
        assert_eq!(
            head(&[(b":status", b"599")]).map(|h| h.status),
            Ok(599),
            "a status outside the static table"
        );
    }

    #[test]
    fn reads_a_huffman_coded_status() {
        // Literal with static name reference :status (24), Huffman value "201".
        let coded = encode_huffman(b"201");
        let mut block = vec![0x00, 0x00, 0x5f, 0x09, 0x80 | coded.len() as u8];
        block.extend(&coded);
        assert_eq!(read_head(&block).map(|h| h.status), Ok(201));
    }

    #[test]
    fn malformed_heads_are_message_errors() {
        let cases: [&[(&[u8], &[u8])]; 11] = [
            &[(b"server", b"x")],
            &[(b":status", b"200"), (b":status", b"200")],
            &[(b"server", b"x"), (b":status", b"200")],
            &[(b":status", b"200"), (b":path", b"/")],
            &[(b":status", b"20")],
            &[(b":status", b"700")],
            &[
                (b":status", b"200"),
                (b"content-length", b"1"),
                (b"content-length", b"2"),
            ],
            &[(b":status", b"200"), (b"content-length", b"-1")],
            &[(b":status", b"200"), (b"Server", b"x")],
            &[(b":status", b"200"), (b"connection", b"close")],
            &[(b":status", b"200"), (b"x", b"a\r\nb")],
        ];
        for fields in cases {
            let error = head(fields).unwrap_err();
            assert_eq!(error.code, ErrorCode::MESSAGE_ERROR, "{fields:?}");
        }
        let huge = head(&[
            (b":status", b"200"),
            (b"content-length", b"99999999999999999999"),
        ]);
        assert_eq!(huge.unwrap_err().code, ErrorCode::MESSAGE_ERROR);
    }

    #[test]
    fn trailers_take_regular_fields_only() {
        assert_eq!(check_trailers(&section(&[(b"grpc-status", b"0")])), Ok(()));
        assert_eq!(check_trailers(&section(&[])), Ok(()));
        let error = check_trailers(&section(&[(b":status", b"200")])).unwrap_err();
        assert_eq!(error.code, ErrorCode::MESSAGE_ERROR);
    }
}
