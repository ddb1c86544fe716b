//! Reads the response on one request stream from whatever slices QUIC hands over: HEADERS
//! (interim 1xx ones first, perhaps), DATA, perhaps trailers, then FIN (RFC 9114 §4.1).
//!
//! One parser serves every response of a stream slot: `start` resets it, and its section
//! buffer keeps its capacity, so a steady run allocates nothing. DATA payloads are counted,
//! never copied; a field section is read in place when it arrived in one slice.

use super::error::{ErrorCode, H3Error};
use super::fields::{check_trailers, read_head, ResponseHead};
use super::frame::{
    is_http2_only, FrameHeader, FrameHeaderReader, PayloadBuffer, CANCEL_PUSH, DATA, GOAWAY,
    HEADERS, MAX_PUSH_ID, PUSH_PROMISE, SETTINGS,
};

/// The largest HEADERS frame a parser accepts unless told otherwise: the field section is
/// buffered whole, and a misbehaving server must not make us buffer without bound.
pub(crate) const DEFAULT_MAX_HEADERS_FRAME: usize = 64 * 1024;

/// A complete response, as `finish` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResponseSummary {
    /// The final status (interim 1xx responses are counted, not kept).
    pub status: u16,
    /// Content bytes: the sum of the DATA payloads.
    pub body_bytes: u64,
    pub content_length: Option<u64>,
    pub interim_responses: u32,
    pub trailers: bool,
}

/// What one `feed` brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ResponseProgress {
    /// The final response's head arrived in this slice (time to first byte, for instance).
    pub head_arrived: bool,
    /// Content bytes in this slice.
    pub body_bytes: u64,
}

/// Where in the response the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No final head yet (perhaps interim ones).
    AwaitingHead,
    Content,
    AfterTrailers,
}

/// What the bytes at hand are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    FrameHeader,
    /// A DATA payload, this many bytes still to come.
    Data(u64),
    /// A field section, gathering in the section buffer.
    Section,
    /// A frame we ignore (unknown or reserved types), this many bytes still to come.
    Skipped(u64),
}

/// Head sections longer than this are decoded every time, not kept (a parser per stream slot,
/// thousands of them, must not each keep a large one).
const KNOWN_HEAD_MAX: usize = 256;

/// The last head section a parser read and what it said. We allow the server no dynamic
/// table, so a head's meaning is its bytes alone, and a server answering alike sends the same
/// bytes every time: those are compared, not decoded again.
#[derive(Debug, Default)]
struct KnownHead {
    section: Vec<u8>,
    head: Option<ResponseHead>,
}

impl KnownHead {
    fn read(&mut self, section: &[u8]) -> Result<ResponseHead, H3Error> {
        if let Some(head) = self.head.filter(|_| self.section == section) {
            return Ok(head);
        }
        let head = read_head(section)?;
        if section.len() <= KNOWN_HEAD_MAX {
            if self.section.capacity() == 0 {
                self.section.reserve_exact(KNOWN_HEAD_MAX);
            }
            self.section.clear();
            self.section.extend_from_slice(section);
            self.head = Some(head);
        }
        Ok(head)
    }
}

/// The response parser of one request stream; see the module documentation.
#[derive(Debug)]
pub(crate) struct ResponseParser {
    header: FrameHeaderReader,
    reading: Reading,
    section: PayloadBuffer,
    known: KnownHead,
    max_headers_frame: usize,
    phase: Phase,
    is_head: bool,
    head: Option<ResponseHead>,
    interim_responses: u32,
    body_bytes: u64,
}

impl ResponseParser {
    /// A parser that refuses HEADERS frames above `max_headers_frame` bytes (see
    /// [`DEFAULT_MAX_HEADERS_FRAME`]).
    pub(crate) fn new(max_headers_frame: usize) -> Self {
        Self {
            header: FrameHeaderReader::default(),
            reading: Reading::FrameHeader,
            section: PayloadBuffer::default(),
            known: KnownHead::default(),
            max_headers_frame,
            phase: Phase::AwaitingHead,
            is_head: false,
            head: None,
            interim_responses: 0,
            body_bytes: 0,
        }
    }

    /// Readies the parser for the response to a new request (`is_head`: the request was
    /// HEAD, see [`super::request::RequestBytes::is_head`]). Also what follows an error.
    pub(crate) fn start(&mut self, is_head: bool) {
        self.header.clear();
        self.reading = Reading::FrameHeader;
        self.phase = Phase::AwaitingHead;
        self.is_head = is_head;
        self.head = None;
        self.interim_responses = 0;
        self.body_bytes = 0;
    }

    /// The final status, once its HEADERS arrived.
    pub(crate) fn status(&self) -> Option<u16> {
        self.head.map(|head| head.status)
    }

    /// Reads the next slice of the stream.
    pub(crate) fn feed(&mut self, mut input: &[u8]) -> Result<ResponseProgress, H3Error> {
        let mut progress = ResponseProgress::default();
        while !input.is_empty() {
            match self.reading {
                Reading::FrameHeader => {
                    if let Some(header) = self.header.read(&mut input) {
                        self.begin_frame(header, &mut progress)?;
                    }
                }
                Reading::Data(left) => {
                    let taken = take_up_to(&mut input, left);
                    self.reading = after_payload(left - taken, Reading::Data);
                    self.count_content(taken)?;
                    progress.body_bytes += taken;
                }
                Reading::Skipped(left) => {
                    let taken = take_up_to(&mut input, left);
                    self.reading = after_payload(left - taken, Reading::Skipped);
                }
                Reading::Section => self.gather_section(&mut input, &mut progress)?,
            }
        }
        Ok(progress)
    }

    /// The stream's FIN: the response is complete, or it was cut short.
    pub(crate) fn finish(&mut self) -> Result<ResponseSummary, H3Error> {
        if self.header.is_partway() || self.reading != Reading::FrameHeader {
            return Err(H3Error::frame("the stream ends inside a frame"));
        }
        let head = self.head.ok_or(H3Error::malformed(
            "the stream ends before a final response",
        ))?;
        if let Some(length) = head.content_length.filter(|_| self.may_have_content()) {
            if length != self.body_bytes {
                return Err(H3Error::malformed(
                    "the content is shorter than content-length",
                ));
            }
        }
        Ok(ResponseSummary {
            status: head.status,
            body_bytes: self.body_bytes,
            content_length: head.content_length,
            interim_responses: self.interim_responses,
            trailers: self.phase == Phase::AfterTrailers,
        })
    }

    fn begin_frame(
        &mut self,
        header: FrameHeader,
        progress: &mut ResponseProgress,
    ) -> Result<(), H3Error> {
        let len = header.payload_len;
        match header.frame_type {
            DATA => match self.phase {
                Phase::Content => self.reading = after_payload(len, Reading::Data),
                Phase::AwaitingHead => {
                    return Err(H3Error::unexpected("DATA before the response's HEADERS"))
                }
                Phase::AfterTrailers => return Err(H3Error::unexpected("DATA after trailers")),
            },
            HEADERS if self.phase == Phase::AfterTrailers => {
                return Err(H3Error::unexpected("HEADERS after trailers"))
            }
            HEADERS => {
                let too_large = H3Error::stream(
                    ErrorCode::EXCESSIVE_LOAD,
                    "a HEADERS frame larger than we take",
                );
                self.section.start(len, self.max_headers_frame, too_large)?;
                self.reading = Reading::Section;
                // An empty payload is complete now: no further byte would trigger it.
                self.gather_section(&mut &[][..], progress)?;
            }
            PUSH_PROMISE => {
                return Err(H3Error::connection(
                    ErrorCode::ID_ERROR,
                    "PUSH_PROMISE, though we allowed no push",
                ))
            }
            CANCEL_PUSH | SETTINGS | GOAWAY | MAX_PUSH_ID => {
                return Err(H3Error::unexpected("a control frame on a request stream"))
            }
            other if is_http2_only(other) => {
                return Err(H3Error::unexpected(
                    "an HTTP/2 frame type on a request stream",
                ))
            }
            _ => self.reading = after_payload(len, Reading::Skipped),
        }
        Ok(())
    }

    fn gather_section(
        &mut self,
        input: &mut &[u8],
        progress: &mut ResponseProgress,
    ) -> Result<(), H3Error> {
        let Some(section) = self.section.gather(input) else {
            return Ok(());
        };
        self.reading = Reading::FrameHeader;
        if self.phase == Phase::Content {
            check_trailers(section)?;
            self.phase = Phase::AfterTrailers;
            return Ok(());
        }
        let head = self.known.read(section)?;
        match head.status {
            101 => Err(H3Error::malformed(
                "101 Switching Protocols, which HTTP/3 forbids",
            )),
            100..=199 => {
                self.interim_responses += 1;
                Ok(())
            }
            _ => {
                self.head = Some(head);
                self.phase = Phase::Content;
                progress.head_arrived = true;
                Ok(())
            }
        }
    }

    /// Responses to HEAD, 204 and 304 have no content, whatever content-length says.
    fn may_have_content(&self) -> bool {
        !self.is_head && !matches!(self.status(), Some(204 | 304))
    }

    fn count_content(&mut self, bytes: u64) -> Result<(), H3Error> {
        self.body_bytes += bytes;
        if bytes == 0 {
            return Ok(());
        }
        if !self.may_have_content() {
            return Err(H3Error::malformed(
                "content in a response that can have none",
            ));
        }
        let limit = self.head.and_then(|head| head.content_length);
        if limit.is_some_and(|limit| self.body_bytes > limit) {
            return Err(H3Error::malformed("more content than content-length"));
        }
        Ok(())
    }
}

/// Moves past up to `wanted` bytes of `input`, returning how many.
fn take_up_to(input: &mut &[u8], wanted: u64) -> u64 {
    let taken = usize::try_from(wanted).map_or(input.len(), |w| w.min(input.len()));
    *input = &input[taken..];
    taken as u64
}

/// The state after a payload of which `left` bytes remain to be read.
fn after_payload(left: u64, reading: fn(u64) -> Reading) -> Reading {
    if left == 0 {
        Reading::FrameHeader
    } else {
        reading(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h3::frame::push_frame_header;
    use crate::http::h3::qpack::encode_field_section;

    fn frame(frame_type: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_frame_header(frame_type, payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    fn headers(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut section = Vec::new();
        encode_field_section(fields.iter().copied(), &mut section);
        frame(HEADERS, &section)
    }

    fn ok_200(content_length: &[u8]) -> Vec<u8> {
        headers(&[
            (b":status", b"200"),
            (b"content-length", content_length),
            (b"server", b"test"),
        ])
    }

    /// Feeds `stream` in slices of the given sizes (cycled), then FIN.
    fn parse_in(stream: &[u8], sizes: &[usize]) -> Result<(ResponseSummary, u64), H3Error> {
        let mut parser = ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME);
        parser.start(false);
        let mut counted = 0;
        let mut rest = stream;
        for &size in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (slice, tail) = rest.split_at(size.min(rest.len()));
            counted += parser.feed(slice)?.body_bytes;
            rest = tail;
        }
        Ok((parser.finish()?, counted))
    }

    fn parse(stream: &[u8]) -> Result<ResponseSummary, H3Error> {
        parse_in(stream, &[usize::MAX]).map(|(summary, _)| summary)
    }

    fn code(stream: &[u8]) -> ErrorCode {
        parse(stream).unwrap_err().code
    }

    #[test]
    fn byte_by_byte_reads_as_all_at_once() {
        let mut stream = ok_200(b"11");
        stream.extend(frame(DATA, b"hello"));
        stream.extend(frame(DATA, b" world"));
        let expected = ResponseSummary {
            status: 200,
            body_bytes: 11,
            content_length: Some(11),
            interim_responses: 0,
            trailers: false,
        };
        assert_eq!(parse_in(&stream, &[usize::MAX]), Ok((expected, 11)));
        assert_eq!(parse_in(&stream, &[1]), Ok((expected, 11)));
        for sizes in [&[2, 3][..], &[5, 1, 7], &[13]] {
            assert_eq!(parse_in(&stream, sizes), Ok((expected, 11)), "{sizes:?}");
        }
    }

    #[test]
    fn reports_the_head_when_it_arrives() {
        let mut parser = ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME);
        parser.start(false);
        let head = ok_200(b"3");
        let (first, second) = head.split_at(4);
        assert_eq!(parser.feed(first).map(|p| p.head_arrived), Ok(false));
        assert_eq!(parser.status(), None);
        assert_eq!(parser.feed(second).map(|p| p.head_arrived), Ok(true));
        assert_eq!(parser.status(), Some(200));
        assert_eq!(
            parser.feed(&frame(DATA, b"abc")).map(|p| p.body_bytes),
            Ok(3)
        );
        assert_eq!(parser.finish().map(|s| s.body_bytes), Ok(3));

        // The same parser, started again, reads the next response from scratch.
        parser.start(false);
        assert_eq!(
            parser
                .feed(&headers(&[(b":status", b"404")]))
                .map(|p| p.head_arrived),
            Ok(true)
        );
        assert_eq!(parser.finish().map(|s| s.status), Ok(404));
    }

    /// A head read before is compared, not decoded again; any other is decoded, a malformed
    /// one refused however close to the one known.
    #[test]
    fn a_head_seen_before_reads_as_it_did_and_others_read_afresh() {
        let mut parser = ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME);
        let mut read = |stream: &[u8]| {
            parser.start(false);
            parser.feed(stream)?;
            parser.finish()
        };
        let with_body = |head: Vec<u8>| [head, frame(DATA, b"ab")].concat();
        for _ in 0..3 {
            assert_eq!(read(&with_body(ok_200(b"2"))).map(|s| s.status), Ok(200));
        }
        let other = headers(&[(b":status", b"404"), (b"content-length", b"2")]);
        assert_eq!(read(&with_body(other)).map(|s| s.status), Ok(404));
        // The known head with one byte of its length changed: content-length 3 against 2.
        let longer = with_body(ok_200(b"3"));
        assert_eq!(read(&longer).unwrap_err().code, ErrorCode::MESSAGE_ERROR);
        let bad = headers(&[(b":status", b"200"), (b"connection", b"close")]);
        assert_eq!(read(&bad).unwrap_err().code, ErrorCode::MESSAGE_ERROR);
        assert_eq!(read(&with_body(ok_200(b"2"))).map(|s| s.status), Ok(200));
    }

    #[test]
    fn skips_interim_responses_and_takes_the_final_status() {
        let mut stream = headers(&[(b":status", b"103"), (b"link", b"</a.css>; rel=preload")]);
        stream.extend(headers(&[(b":status", b"100")]));
        stream.extend(ok_200(b"2"));
        stream.extend(frame(DATA, b"ok"));
        let summary = parse(&stream).unwrap();
        assert_eq!((summary.status, summary.interim_responses), (200, 2));
        let (summary, _) = parse_in(&stream, &[1]).unwrap();
        assert_eq!((summary.status, summary.interim_responses), (200, 2));
        // 101 has no place in HTTP/3.
        assert_eq!(
            code(&headers(&[(b":status", b"101")])),
            ErrorCode::MESSAGE_ERROR
        );
    }

    #[test]
    fn accepts_trailers() {
        let mut stream = headers(&[(b":status", b"200")]);
        stream.extend(frame(DATA, b"body"));
        stream.extend(headers(&[(b"grpc-status", b"0"), (b"x-checksum", b"abc")]));
        let summary = parse(&stream).unwrap();
        assert!(summary.trailers);
        assert_eq!(summary.body_bytes, 4);
        // Trailers straight after the head, no content, are fine too.
        let mut stream = headers(&[(b":status", b"204")]);
        stream.extend(headers(&[(b"x-done", b"1")]));
        assert!(parse(&stream).unwrap().trailers);
    }

    #[test]
    fn skips_unknown_and_grease_frames() {
        let grease = |n: u64| 0x1f * n + 0x21;
        let mut stream = frame(grease(0), b"");
        stream.extend(frame(grease(7), b"ignored payload"));
        stream.extend(ok_200(b"2"));
        stream.extend(frame(grease(1_000_000), &[0xff; 300]));
        stream.extend(frame(DATA, b"o"));
        stream.extend(frame(0x2f, b"xyz"));
        stream.extend(frame(DATA, b"k"));
        stream.extend(frame(grease(3), b"!"));
        let expected = parse(&stream).unwrap();
        assert_eq!((expected.status, expected.body_bytes), (200, 2));
        assert_eq!(parse_in(&stream, &[1]).map(|(s, _)| s), Ok(expected));
    }

    #[test]
    fn empty_data_frames_and_empty_bodies() {
        let mut stream = headers(&[(b":status", b"200")]);
        stream.extend(frame(DATA, b""));
        assert_eq!(parse(&stream).map(|s| s.body_bytes), Ok(0));
    }

    #[test]
    fn frames_in_the_wrong_place_are_unexpected() {
        assert_eq!(code(&frame(DATA, b"x")), ErrorCode::FRAME_UNEXPECTED);
        let forbidden = [
            SETTINGS,
            GOAWAY,
            MAX_PUSH_ID,
            CANCEL_PUSH,
            0x02,
            0x06,
            0x08,
            0x09,
        ];
        for frame_type in forbidden {
            let mut stream = ok_200(b"0");
            stream.extend(frame(frame_type, &[0x00]));
            assert_eq!(
                code(&stream),
                ErrorCode::FRAME_UNEXPECTED,
                "{frame_type:#x}"
            );
        }
        let mut after_trailers = headers(&[(b":status", b"200")]);
        after_trailers.extend(headers(&[(b"x-t", b"1")]));
        let mut data_after = after_trailers.clone();
        data_after.extend(frame(DATA, b"x"));
        assert_eq!(code(&data_after), ErrorCode::FRAME_UNEXPECTED);
        after_trailers.extend(headers(&[(b"x-t", b"2")]));
        assert_eq!(code(&after_trailers), ErrorCode::FRAME_UNEXPECTED);
        // A push we never allowed.
        assert_eq!(
            code(&frame(PUSH_PROMISE, &[0x00, 0x00, 0x00])),
            ErrorCode::ID_ERROR
        );
    }

    #[test]
    fn malformed_and_cut_responses() {
        // No :status.
        assert_eq!(
            code(&headers(&[(b"server", b"x")])),
            ErrorCode::MESSAGE_ERROR
        );
        // FIN before any response, and FIN after only an interim one.
        assert_eq!(code(b""), ErrorCode::MESSAGE_ERROR);
        assert_eq!(
            code(&headers(&[(b":status", b"103")])),
            ErrorCode::MESSAGE_ERROR
        );
        // FIN inside a frame header, inside a payload.
        let stream = ok_200(b"5");
        assert_eq!(code(&stream[..1]), ErrorCode::FRAME_ERROR);
        assert_eq!(code(&stream[..stream.len() - 1]), ErrorCode::FRAME_ERROR);
        let mut cut_data = stream.clone();
        cut_data.extend(&frame(DATA, b"12345")[..4]);
        assert_eq!(code(&cut_data), ErrorCode::FRAME_ERROR);
        // Content shorter and longer than content-length.
        let mut short = stream.clone();
        short.extend(frame(DATA, b"1234"));
        assert_eq!(code(&short), ErrorCode::MESSAGE_ERROR);
        let mut long = stream;
        long.extend(frame(DATA, b"123456"));
        assert_eq!(code(&long), ErrorCode::MESSAGE_ERROR);
        // An empty HEADERS payload lacks even the section prefix.
        assert_eq!(
            code(&frame(HEADERS, b"")),
            ErrorCode::QPACK_DECOMPRESSION_FAILED
        );
    }

    #[test]
    fn content_length_is_not_checked_where_there_is_no_content() {
        let head = ok_200(b"100");
        let mut parser = ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME);
        parser.start(true);
        parser.feed(&head).unwrap();
        assert_eq!(parser.finish().map(|s| s.content_length), Ok(Some(100)));
        // But a HEAD response must not carry content.
        parser.start(true);
        let mut with_content = head;
        with_content.extend(frame(DATA, b"x"));
        assert_eq!(
            parser.feed(&with_content).unwrap_err().code,
            ErrorCode::MESSAGE_ERROR
        );
        let not_modified = headers(&[(b":status", b"304"), (b"content-length", b"10")]);
        assert_eq!(parse(&not_modified).map(|s| s.status), Ok(304));
    }

    #[test]
    fn dynamic_table_references_fail_decompression() {
        // Required Insert Count 1.
        assert_eq!(
            code(&frame(HEADERS, &[0x02, 0x00, 0x80])),
            ErrorCode::QPACK_DECOMPRESSION_FAILED
        );
        // Indexed field line into the dynamic table.
        assert_eq!(
            code(&frame(HEADERS, &[0x00, 0x00, 0x80])),
            ErrorCode::QPACK_DECOMPRESSION_FAILED
        );
    }

    #[test]
    fn refuses_headers_frames_above_the_limit() {
        let stream = ok_200(b"0");
        let mut parser = ResponseParser::new(stream.len() - 3);
        parser.start(false);
        let error = parser.feed(&stream).unwrap_err();
        assert_eq!(
            (error.code, error.scope),
            (
                ErrorCode::EXCESSIVE_LOAD,
                super::super::error::ErrorScope::Stream
            )
        );
    }

    /// A head as quic-go (Caddy's HTTP/3) writes it: prefix 0 0, exact static matches as
    /// indexed field lines, every other value Huffman-coded behind a static name reference.
    /// The Huffman strings are RFC 7541 C.6's, so every byte here is checked by hand.
    #[test]
    fn reads_a_head_as_quic_go_encodes_it() {
        #[rustfmt::skip]
        let section: &[u8] = &[
            0x00, 0x00,
            0x5f, 0x09, 0x82, 0x64, 0x02,       // :status (24), Huffman "302"
            0x5f, 0x15, 0x85, 0xae, 0xc3, 0x77, 0x1a, 0x4b, // cache-control (36), "private"
            0x56, 0x96,                         // date (6), 22 Huffman bytes:
            0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95,
            0x04, 0x0b, 0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff,
            0x5c, 0x91,                         // location (12), 17 Huffman bytes:
            0x9d, 0x29, 0xad, 0x17, 0x18, 0x63, 0xc7, 0x8f, 0x0b, 0x97, 0xc8, 0xe9,
            0xae, 0x82, 0xae, 0x43, 0xd3,
            0x54, 0x82, 0x0b, 0x3f,             // content-length (4), Huffman "13"
            0xc4,                               // indexed: content-length 0 (4)
        ];
        // Two content-length fields, 13 and 0, disagree: take the block without the last.
        let head = crate::http::h3::fields::read_head(&section[..section.len() - 1]).unwrap();
        assert_eq!((head.status, head.content_length), (302, Some(13)));
        let mut stream = frame(HEADERS, &section[..section.len() - 1]);
        stream.extend(frame(DATA, b"thirteen byte"));
        assert_eq!(
            parse_in(&stream, &[3]).map(|(s, n)| (s.status, n)),
            Ok((302, 13))
        );
        let both = crate::http::h3::fields::read_head(section).unwrap_err();
        assert_eq!(both.code, ErrorCode::MESSAGE_ERROR);
    }
}
