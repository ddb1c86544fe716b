//! The response parser on arbitrary bytes: never panics, never claims more bytes than it was
//! given, and gives the same answer however the bytes are split across reads.
#![no_main]

use archbench::http::{Feed, ResponseParser};
use libfuzzer_sys::fuzz_target;

/// Feeds `parts` in order; returns (outcome, status, body bytes, keep-alive).
fn run(parts: &[&[u8]], head_request: bool) -> (Result<Option<usize>, String>, u16, u64, bool) {
    let mut p = ResponseParser::new();
    p.reset(head_request, true);
    let mut offset = 0;
    for part in parts {
        match p.feed(part) {
            Ok(Feed::Done { consumed }) => {
                assert!(consumed <= part.len(), "consumed more than given");
                return (Ok(Some(offset + consumed)), p.status, p.body_bytes, p.keep_alive);
            }
            Ok(Feed::NeedMore) => offset += part.len(),
            Err(e) => return (Err(e.to_string()), p.status, p.body_bytes, p.keep_alive),
        }
    }
    let eof = p.on_eof().map(|()| None).map_err(|e| e.to_string());
    (eof, p.status, p.body_bytes, p.keep_alive)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let head_request = data[0] & 1 == 1;
    let split = data[1] as usize;
    let bytes = &data[2..];
    let split = split.min(bytes.len());
    let whole = run(&[bytes], head_request);
    let halves = run(&[&bytes[..split], &bytes[split..]], head_request);
    // Oversized heads may be noticed at different points; everything else must agree.
    if whole.0.as_ref().err().is_some_and(|e| e.contains("exceeds"))
        || halves.0.as_ref().err().is_some_and(|e| e.contains("exceeds"))
    {
        return;
    }
    assert_eq!(whole, halves, "split at {split} changed the result");
});
