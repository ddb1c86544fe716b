//! The codec as a whole: what the worker feeds it, whole and in pieces, and noise.

#![cfg(test)]

use super::qpack::field_lines;
use super::response::ResponseSummary;
use super::uni::ServerNews;
use super::*;

/// xorshift64: a fixed sequence, so a failure repeats.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A valid response to mutate: interim head, head, DATA, grease, DATA, trailers.
fn valid_response() -> Vec<u8> {
    let mut stream = vec![0x01, 0x03, 0x00, 0x00, 0xd8]; // :status 103
    stream.extend([0x01, 0x07, 0x00, 0x00, 0xd9, 0x54, 0x82, 0x0b, 0x3f]); // 200, c-l 13
    stream.extend([0x00, 0x06]);
    stream.extend(b"hello ");
    stream.extend([0x21, 0x02, 0xaa, 0xbb]);
    stream.extend([0x00, 0x07]);
    stream.extend(b"world!!");
    stream.extend([0x01, 0x05, 0x00, 0x00, 0x21, b'x', 0x00]); // trailer "x: "
    stream
}

/// A valid control stream to mutate: SETTINGS, a grease frame, two GOAWAYs.
fn valid_control() -> Vec<u8> {
    let mut stream = vec![0x00, 0x04, 0x05, 0x06, 0x44, 0x00, 0x21, 0x00];
    stream.extend([0x21, 0x02, 0xaa, 0xbb, 0x07, 0x01, 0x08, 0x07, 0x01, 0x04]);
    stream
}

/// Feeds a server's unidirectional stream in slices; the news merged, then FIN.
fn read_uni(stream: &[u8], slices: &[usize]) -> Result<ServerNews, H3Error> {
    let mut parser = UniStreamParser::default();
    let mut merged = ServerNews::default();
    let mut rest = stream;
    for &size in slices.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (slice, tail) = rest.split_at(size.clamp(1, rest.len()));
        let news = parser.feed(slice)?;
        merged.kind = merged.kind.or(news.kind);
        merged.settings = merged.settings.or(news.settings);
        merged.goaway = news.goaway.or(merged.goaway);
        rest = tail;
    }
    parser.finish().map(|()| merged)
}

fn parse(stream: &[u8], slices: &[usize]) -> Result<ResponseSummary, H3Error> {
    let mut parser = ResponseParser::new(DEFAULT_MAX_HEADERS_FRAME);
    parser.start(false);
    let mut rest = stream;
    for &size in slices.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (slice, tail) = rest.split_at(size.clamp(1, rest.len()));
        parser.feed(slice)?;
        rest = tail;
    }
    parser.finish()
}

#[test]
fn the_valid_response_parses() {
    let summary = parse(&valid_response(), &[usize::MAX]).unwrap();
    assert_eq!(
        (
            summary.status,
            summary.body_bytes,
            summary.interim_responses,
            summary.trailers
        ),
        (200, 13, 1, true)
    );
    // The control stream reads whole; only its FIN, which must not come, is an error.
    let error = read_uni(&valid_control(), &[usize::MAX]).unwrap_err();
    assert_eq!(error.code, ErrorCode::CLOSED_CRITICAL_STREAM);
}

/// Random, truncated and mutated input never panics, and the outcome never depends on
/// how the stream was sliced.
#[test]
fn no_input_panics_and_slicing_never_changes_the_outcome() {
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let valid_streams = [valid_response(), valid_control()];
    for round in 0..20_000 {
        let valid = &valid_streams[round % 2];
        let stream = match round % 3 {
            0 => {
                let len = noise.below(48);
                noise.bytes(len)
            }
            1 => valid[..noise.below(valid.len() + 1)].to_vec(),
            _ => {
                let mut mutated = valid.clone();
                for _ in 0..=noise.below(3) {
                    let at = noise.below(mutated.len());
                    mutated[at] = noise.next() as u8;
                }
                mutated
            }
        };
        let whole = parse(&stream, &[usize::MAX]);
        let sizes = [1 + noise.below(4), 1 + noise.below(9), 1];
        assert_eq!(parse(&stream, &sizes), whole, "{stream:02x?} in {sizes:?}");

        let whole = read_uni(&stream, &[usize::MAX]);
        assert_eq!(
            read_uni(&stream, &sizes),
            whole,
            "{stream:02x?} in {sizes:?}"
        );
        if let Ok(lines) = field_lines(&stream) {
            lines.for_each(|line| {
                let _ = line.map(|l| (l.name.for_each_byte(|_| ()), l.value.for_each_byte(|_| ())));
            });
        }
    }
}
