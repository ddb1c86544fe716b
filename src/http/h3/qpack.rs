//! QPACK field sections (RFC 9204 §4.5) for a client that allows no dynamic table.
//!
//! We advertise SETTINGS_QPACK_MAX_TABLE_CAPACITY 0, so the server's encoder can only use the
//! static table and literals: every section must have Required Insert Count 0, and a field
//! line that refers to the dynamic table is QPACK_DECOMPRESSION_FAILED. Without a table there
//! is no decoder state at all: a section decodes from its own bytes, field line by field line,
//! borrowing them (strings stay as they arrived, Huffman-coded or not, until a caller reads
//! them). The encoder, for requests, uses the static table and plain literals; it runs once
//! per request template, so Huffman coding would save nothing worth its code.

use super::error::H3Error;
use super::huffman::decode_huffman;
use super::static_table::{find_static, StaticMatch, STATIC_TABLE};

/// A string of a field line: the name or the value, as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldText<'a> {
    bytes: &'a [u8],
    huffman: bool,
}

impl<'a> FieldText<'a> {
    pub(crate) const fn plain(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            huffman: false,
        }
    }

    /// Hands each octet of the text to `emit`, decoding Huffman if the sender used it.
    pub(crate) fn for_each_byte(self, mut emit: impl FnMut(u8)) -> Result<(), H3Error> {
        if self.huffman {
            decode_huffman(self.bytes, emit)
                .map_err(|_| H3Error::qpack("a Huffman-coded string breaks RFC 7541 §5.2"))
        } else {
            self.bytes.iter().for_each(|&b| emit(b));
            Ok(())
        }
    }
}

/// One field of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldLine<'a> {
    pub name: FieldText<'a>,
    pub value: FieldText<'a>,
}

/// The field lines of a complete section, in order; after the first error it yields nothing.
pub(crate) struct FieldLines<'a> {
    rest: &'a [u8],
}

/// Reads the section prefix (RFC 9204 §4.5.1) and returns its field lines.
pub(crate) fn field_lines(section: &[u8]) -> Result<FieldLines<'_>, H3Error> {
    let mut rest = section;
    let required_insert_count = read_prefix_int(&mut rest, 8)?;
    if required_insert_count != 0 {
        return Err(H3Error::qpack(
            "a field section needs the dynamic table, whose capacity we set to 0",
        ));
    }
    // Delta Base (and its sign) only matter to references into the dynamic table, which
    // this section cannot have: read past it whatever it says.
    read_prefix_int(&mut rest, 7)?;
    Ok(FieldLines { rest })
}

impl<'a> Iterator for FieldLines<'a> {
    type Item = Result<FieldLine<'a>, H3Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let line = read_field_line(&mut self.rest);
        if line.is_err() {
            self.rest = &[];
        }
        Some(line)
    }
}

const DYNAMIC_REFERENCE: H3Error =
    H3Error::qpack("a field line refers to the dynamic table, whose capacity we set to 0");

fn read_field_line<'a>(rest: &mut &'a [u8]) -> Result<FieldLine<'a>, H3Error> {
    let first = rest.first().copied().unwrap_or_default();
    if first & 0x80 != 0 {
        // 1Txxxxxx: indexed field line.
        if first & 0x40 == 0 {
            return Err(DYNAMIC_REFERENCE);
        }
        let (name, value) = static_entry(read_prefix_int(rest, 6)?)?;
        Ok(FieldLine {
            name: FieldText::plain(name),
            value: FieldText::plain(value),
        })
    } else if first & 0x40 != 0 {
        // 01NTxxxx: literal with name reference (N, "never index", means nothing to us).
        if first & 0x10 == 0 {
            return Err(DYNAMIC_REFERENCE);
        }
        let (name, _) = static_entry(read_prefix_int(rest, 4)?)?;
        Ok(FieldLine {
            name: FieldText::plain(name),
            value: read_string(rest, 7)?,
        })
    } else if first & 0x20 != 0 {
        // 001NHxxx: literal with literal name.
        let name = read_string(rest, 3)?;
        Ok(FieldLine {
            name,
            value: read_string(rest, 7)?,
        })
    } else {
        // 0001xxxx indexed post-base, 0000Nxxx literal with post-base name reference.
        Err(DYNAMIC_REFERENCE)
    }
}

fn static_entry(index: u64) -> Result<(&'static [u8], &'static [u8]), H3Error> {
    usize::try_from(index)
        .ok()
        .and_then(|index| STATIC_TABLE.get(index).copied())
        .ok_or(H3Error::qpack(
            "a field line refers beyond the static table",
        ))
}

const TRUNCATED: H3Error = H3Error::qpack("a field section ends inside a field line");

/// Reads an integer with an N-bit prefix (RFC 7541 §5.1, RFC 9204 §4.1.1) from the start of
/// `input`, whose first byte's high bits (flags) are ignored here, and moves past it.
pub(crate) fn read_prefix_int(input: &mut &[u8], prefix_bits: u32) -> Result<u64, H3Error> {
    let (&first, mut rest) = input.split_first().ok_or(TRUNCATED)?;
    let all_ones = (1u64 << prefix_bits) - 1;
    let mut value = u64::from(first) & all_ones;
    if value == all_ones {
        let mut shift = 0;
        loop {
            let (&byte, tail) = rest.split_first().ok_or(TRUNCATED)?;
            rest = tail;
            // Nine continuation bytes would pass 63 bits: no length or index is that large.
            if shift > 56 {
                return Err(H3Error::qpack("an integer in a field section is too large"));
            }
            value += u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
    }
    *input = rest;
    Ok(value)
}

/// Reads a string literal whose H bit sits just above an N-bit length prefix.
fn read_string<'a>(input: &mut &'a [u8], prefix_bits: u32) -> Result<FieldText<'a>, H3Error> {
    let huffman = input.first().is_some_and(|&b| b & (1 << prefix_bits) != 0);
    let len = read_prefix_int(input, prefix_bits)?;
    let len = usize::try_from(len).map_err(|_| TRUNCATED)?;
    if len > input.len() {
        return Err(TRUNCATED);
    }
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    Ok(FieldText { bytes, huffman })
}

/// Appends `value` with an N-bit prefix; `flags` are the first byte's bits above the prefix.
pub(crate) fn write_prefix_int(value: u64, prefix_bits: u32, flags: u8, out: &mut Vec<u8>) {
    let all_ones = (1u64 << prefix_bits) - 1;
    if value < all_ones {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | all_ones as u8);
    let mut rest = value - all_ones;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a plain (not Huffman-coded) string literal with an N-bit length prefix.
fn write_string(text: &[u8], prefix_bits: u32, flags: u8, out: &mut Vec<u8>) {
    write_prefix_int(text.len() as u64, prefix_bits, flags, out);
    out.extend_from_slice(text);
}

/// Appends a field section of `fields` (names already in lower case): the prefix for no
/// dynamic table, then for each field the shortest static form: an indexed field line when
/// name and value are in the table, a literal with a static name reference when the name
/// is, else a literal with a literal name.
pub(crate) fn encode_field_section<'f>(
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    out: &mut Vec<u8>,
) {
    // Required Insert Count 0, Delta Base 0 with sign 0.
    out.extend_from_slice(&[0x00, 0x00]);
    for (name, value) in fields {
        match find_static(name, value) {
            StaticMatch::Field(index) => write_prefix_int(index, 6, 0b1100_0000, out),
            StaticMatch::Name(index) => {
                write_prefix_int(index, 4, 0b0101_0000, out);
                write_string(value, 7, 0, out);
            }
            StaticMatch::None => {
                write_string(name, 3, 0b0010_0000, out);
                write_string(value, 7, 0, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h3::error::ErrorCode;
    use crate::http::h3::huffman::encode_huffman;

    fn text(field: FieldText) -> Result<Vec<u8>, H3Error> {
        let mut out = Vec::new();
        field.for_each_byte(|b| out.push(b)).map(|()| out)
    }

    type DecodedFields = Vec<(Vec<u8>, Vec<u8>)>;

    fn decode(section: &[u8]) -> Result<DecodedFields, H3Error> {
        field_lines(section)?
            .map(|line| line.and_then(|line| Ok((text(line.name)?, text(line.value)?))))
            .collect()
    }

    #[test]
    fn prefix_integers_round_trip_around_every_prefix() {
        for prefix_bits in [3, 4, 6, 7, 8] {
            let all_ones = (1u64 << prefix_bits) - 1;
            for value in [
                0,
                1,
                all_ones - 1,
                all_ones,
                all_ones + 1,
                127 + all_ones,
                1 << 40,
            ] {
                let mut out = Vec::new();
                write_prefix_int(value, prefix_bits, 0, &mut out);
                out.push(0xaa);
                let mut input = out.as_slice();
                assert_eq!(read_prefix_int(&mut input, prefix_bits), Ok(value));
                assert_eq!(input, [0xaa]);
            }
        }
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        write_prefix_int(1337, 5, 0, &mut out);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn prefix_integers_refuse_truncation_and_overflow() {
        assert_eq!(read_prefix_int(&mut &[][..], 7), Err(TRUNCATED));
        assert_eq!(read_prefix_int(&mut &[0x7f, 0x80][..], 7), Err(TRUNCATED));
        let endless = [
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let error = read_prefix_int(&mut &endless[..], 7).unwrap_err();
        assert_eq!(error.code, ErrorCode::QPACK_DECOMPRESSION_FAILED);
    }

    #[test]
    fn encodes_with_static_references_and_literals() {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"GET"),
            (b":path", b"/x"),
            (b"x-id", b"7"),
            (b"accept", b"*/*"),
            (b"user-agent", b"ab"),
        ];
        let mut out = Vec::new();
        encode_field_section(fields, &mut out);
        #[rustfmt::skip]
        let expected = [
            0x00, 0x00,
            0xd1,                               // indexed, static 17
            0x51, 0x02, b'/', b'x',             // name ref static 1, value "/x"
            0x24, b'x', b'-', b'i', b'd', 0x01, b'7', // literal name "x-id", value "7"
            0xdd,                               // indexed, static 29
            0x5f, 0x50, 0x02, b'a', b'b',       // name ref static 95 (15 + 80), value "ab"
        ];
        assert_eq!(out, expected);
        let decoded = decode(&out).unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn decodes_huffman_names_and_values() {
        let mut section = vec![0x00, 0x00];
        // Literal with literal name, both Huffman-coded (H bits 0x08 and 0x80).
        let name = encode_huffman(b"x-host");
        let value = encode_huffman(b"www.example.com");
        section.push(0x28 | name.len() as u8);
        section.extend(&name);
        section.push(0x80 | value.len() as u8);
        section.extend(&value);
        assert_eq!(
            decode(&section).unwrap(),
            [(b"x-host".to_vec(), b"www.example.com".to_vec())]
        );
    }

    #[test]
    fn refuses_every_dynamic_table_reference() {
        let cases: [&[u8]; 6] = [
            &[0x01, 0x00],             // Required Insert Count 1
            &[0x00, 0x00, 0x81],       // indexed, dynamic (T = 0)
            &[0x00, 0x00, 0x10],       // indexed post-base
            &[0x00, 0x00, 0x41, 0x00], // literal with dynamic name reference
            &[0x00, 0x00, 0x00, 0x00], // literal with post-base name reference
            &[0x00, 0x00, 0xff, 0x24], // static index 63 + 36 = 99: beyond the table
        ];
        for section in cases {
            let error = decode(section).unwrap_err();
            assert_eq!(
                error.code,
                ErrorCode::QPACK_DECOMPRESSION_FAILED,
                "{section:02x?}"
            );
        }
    }

    #[test]
    fn refuses_truncated_sections_and_bad_huffman() {
        for section in [
            &[][..],
            &[0x00],
            &[0x00, 0x00, 0x51, 0x05, b'a'],
            &[0x00, 0x00, 0x23],
        ] {
            assert!(decode(section).is_err(), "{section:02x?}");
        }
        // A Huffman value of a whole byte of padding.
        let error = decode(&[0x00, 0x00, 0x51, 0x81, 0xff]).unwrap_err();
        assert_eq!(error.code, ErrorCode::QPACK_DECOMPRESSION_FAILED);
    }
}
