//! HTTP/3 frames (RFC 9114 §7): a type and a length, both varints, then the payload. The
//! readers here take whatever slices QUIC hands over: a frame header may arrive a byte at a
//! time, and a payload that must be seen whole (a field section, SETTINGS) is gathered in a
//! buffer that the stream's parser keeps and reuses.

use super::error::H3Error;
use super::varint::{decode_varint, push_varint, MAX_VARINT_LEN};

pub(crate) const DATA: u64 = 0x00;
pub(crate) const HEADERS: u64 = 0x01;
pub(crate) const CANCEL_PUSH: u64 = 0x03;
pub(crate) const SETTINGS: u64 = 0x04;
pub(crate) const PUSH_PROMISE: u64 = 0x05;
pub(crate) const GOAWAY: u64 = 0x07;
pub(crate) const MAX_PUSH_ID: u64 = 0x0d;

/// HTTP/2's PRIORITY, PING, WINDOW_UPDATE and CONTINUATION: reserved in HTTP/3, and
/// receiving one is H3_FRAME_UNEXPECTED wherever it comes (RFC 9114 §7.2.8).
pub(crate) fn is_http2_only(frame_type: u64) -> bool {
    matches!(frame_type, 0x02 | 0x06 | 0x08 | 0x09)
}

/// Appends a frame header.
pub(crate) fn push_frame_header(
    frame_type: u64,
    payload_len: u64,
    out: &mut Vec<u8>,
) -> Option<()> {
    push_varint(frame_type, out)?;
    push_varint(payload_len, out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub frame_type: u64,
    pub payload_len: u64,
}

/// Gathers one frame header from as many slices as it takes.
#[derive(Debug, Default)]
pub(crate) struct FrameHeaderReader {
    held: [u8; 2 * MAX_VARINT_LEN],
    len: usize,
}

impl FrameHeaderReader {
    /// Takes header bytes from the front of `input`; `Some` once the header is whole (and
    /// `input` then starts at the payload), `None` when `input` ran out first.
    pub(crate) fn read(&mut self, input: &mut &[u8]) -> Option<FrameHeader> {
        if self.len == 0 {
            // The usual case: the whole header is in this slice, read it in place.
            if let Some((header, used)) = parse_header(input) {
                *input = &input[used..];
                return Some(header);
            }
        }
        while let Some((&byte, rest)) = input.split_first() {
            *input = rest;
            // A header is at most 16 bytes, and parses before a 17th could arrive.
            *self.held.get_mut(self.len)? = byte;
            self.len += 1;
            if let Some((header, _)) = parse_header(&self.held[..self.len]) {
                self.len = 0;
                return Some(header);
            }
        }
        None
    }

    /// Whether part of a header has arrived: a stream that ends now was cut inside a frame.
    pub(crate) fn is_partway(&self) -> bool {
        self.len != 0
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
}

fn parse_header(input: &[u8]) -> Option<(FrameHeader, usize)> {
    let (frame_type, type_len) = decode_varint(input).ok()?;
    let (payload_len, len_len) = decode_varint(input.get(type_len..)?).ok()?;
    let header = FrameHeader {
        frame_type,
        payload_len,
    };
    Some((header, type_len + len_len))
}

/// A payload that must be read whole, gathered across slices into a buffer kept for the
/// stream's life (it grows to the largest such payload and is only cleared after that).
#[derive(Debug, Default)]
pub(crate) struct PayloadBuffer {
    bytes: Vec<u8>,
    wanted: usize,
}

impl PayloadBuffer {
    /// Starts gathering a payload of `len` bytes, refused above `limit`.
    pub(crate) fn start(
        &mut self,
        len: u64,
        limit: usize,
        too_large: H3Error,
    ) -> Result<(), H3Error> {
        self.wanted = usize::try_from(len)
            .ok()
            .filter(|&len| len <= limit)
            .ok_or(too_large)?;
        self.bytes.clear();
        Ok(())
    }

    /// Takes payload bytes from the front of `input`; the whole payload once it is there —
    /// straight from `input` when it came in one slice, without a copy.
    pub(crate) fn gather<'s, 'i: 's>(&'s mut self, input: &mut &'i [u8]) -> Option<&'s [u8]> {
        if self.bytes.is_empty() && input.len() >= self.wanted {
            let (payload, rest) = input.split_at(self.wanted);
            *input = rest;
            self.wanted = 0;
            return Some(payload);
        }
        let missing = self.wanted - self.bytes.len();
        let (taken, rest) = input.split_at(missing.min(input.len()));
        self.bytes.extend_from_slice(taken);
        *input = rest;
        (self.bytes.len() == self.wanted).then_some(self.bytes.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_header_in_one_piece_or_byte_by_byte() {
        let mut bytes = Vec::new();
        push_frame_header(0x21, 16_384, &mut bytes);
        bytes.extend_from_slice(b"payload");
        let expected = FrameHeader {
            frame_type: 0x21,
            payload_len: 16_384,
        };

        let mut reader = FrameHeaderReader::default();
        let mut input = bytes.as_slice();
        assert_eq!(reader.read(&mut input), Some(expected));
        assert_eq!(input, b"payload");

        let mut reader = FrameHeaderReader::default();
        for (i, byte) in bytes[..5].iter().enumerate() {
            let mut input = std::slice::from_ref(byte);
            let header = reader.read(&mut input);
            assert_eq!(header.is_some(), i == 4);
            assert_eq!(reader.is_partway(), i < 4);
        }
    }

    #[test]
    fn gathers_a_payload_across_slices_and_reuses_the_buffer() {
        let too_large = H3Error::frame("too large");
        let mut buffer = PayloadBuffer::default();
        buffer.start(5, 8, too_large).unwrap();
        let mut first = &b"ab"[..];
        assert_eq!(buffer.gather(&mut first), None);
        let mut second = &b"cdeXY"[..];
        assert_eq!(buffer.gather(&mut second), Some(&b"abcde"[..]));
        assert_eq!(second, b"XY");

        buffer.start(2, 8, too_large).unwrap();
        let mut whole = &b"fgh"[..];
        assert_eq!(buffer.gather(&mut whole), Some(&b"fg"[..]));
        assert_eq!(whole, b"h");
        assert_eq!(buffer.start(9, 8, too_large), Err(too_large));
    }
}
