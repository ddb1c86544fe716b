//! The HTTP/2 frame decoder on arbitrary bytes: never panics, and gives the same events
//! (DATA lengths summed per stream) or the same error however the bytes are split; each
//! header block it hands over goes through the response block reader, which must not panic.
#![no_main]

use archbench::http::h2::frame::{Event, FrameDecoder, FrameError};
use archbench::http::h2::hpack::read_response;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Data(u32, u64, u64, bool),
    Other(String),
}

fn run(parts: &[&[u8]]) -> (Vec<Seen>, Option<FrameError>) {
    let mut d = FrameDecoder::new();
    let mut seen: Vec<Seen> = Vec::new();
    let mut on = |e: Event| -> Result<(), FrameError> {
        match e {
            Event::Data { stream, flow, data, end_stream } => {
                assert!(data <= flow, "more body than payload");
                match seen.last_mut() {
                    Some(Seen::Data(s, f, b, false)) if *s == stream => {
                        *f += u64::from(flow);
                        *b += u64::from(data);
                        if end_stream {
                            seen.push(Seen::Data(stream, 0, 0, true));
                        }
                    }
                    _ => seen.push(Seen::Data(stream, flow.into(), data.into(), end_stream)),
                }
            }
            Event::Headers { block, .. } => {
                let _ = read_response(block, true);
                seen.push(Seen::Other(format!("{e:?}")));
            }
            other => seen.push(Seen::Other(format!("{other:?}"))),
        }
        Ok(())
    };
    for part in parts {
        if let Err(e) = d.feed(part, &mut on) {
            return (seen, Some(e));
        }
    }
    (seen, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let split = (split as usize * bytes.len() / 255).min(bytes.len());
    let whole = run(&[bytes]);
    let halves = run(&[&bytes[..split], &bytes[split..]]);
    assert_eq!(whole, halves, "split at {split} changed the result");
});
