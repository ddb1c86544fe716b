use super::*;

/// What Go's spdystream framer (v0.5.1, the one kubectl 1.37 uses) writes for a
/// port-forward's two SYN_STREAMs (error then data stream of request 0, headers
/// `streamType`, `port`, `requestID`), a DATA frame with FIN and a PING: one zlib stream
/// across both header blocks, so the second one only decodes after the first.
const GO_CLIENT: &str = "800300010000003d0000000100000000000078f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45a024cc6461c0c0c0c0590489c44c50e2663400000000ffff800300010000001a00000003000000000000826a25a406d56850299508000000ffff0000000301000012474554202f20485454502f312e310d0a0d0a800300060000000400000001";
/// And what it writes for two SYN_REPLYs without headers (what a Go server answers).
const GO_REPLIES: &str = "80030002000000140000000178f9e3c6a7c26260606000000000ffff800300020000000c00000003026100000000ffff";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn all(mut buf: &[u8], codec: &mut HeaderCodec) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some((f, n)) = decode(buf, codec).unwrap() {
        out.push(f);
        buf = &buf[n..];
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    out
}

fn pf_headers(kind: &str) -> Headers {
    vec![
        ("port".into(), "80".into()),
        ("requestid".into(), "0".into()),
        ("streamtype".into(), kind.into()),
    ]
}

fn sorted(mut h: Headers) -> Headers {
    h.sort();
    h
}

#[test]
fn the_dictionary_is_spdy3s() {
    // zlib names a preset dictionary by its Adler-32; Go's framer's header says e3c6a7c2
    let (mut a, mut b) = (1u32, 0u32);
    for &x in DICTIONARY.iter() {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!((b << 16) | a, 0xe3c6_a7c2);
    assert!(DICTIONARY.starts_with(b"\x00\x00\x00\x07options"));
    assert!(DICTIONARY.ends_with(b"enq=0."));
}

#[test]
fn frames_from_gos_framer_decode() {
    let mut codec = HeaderCodec::new().unwrap();
    let frames = all(&unhex(GO_CLIENT), &mut codec);
    assert_eq!(frames.len(), 4);
    let Frame::SynStream {
        stream_id: 1,
        headers,
        flags: 0,
        ..
    } = &frames[0]
    else {
        panic!("{:?}", frames[0])
    };
    assert_eq!(sorted(headers.clone()), pf_headers("error"));
    let Frame::SynStream {
        stream_id: 3,
        headers,
        ..
    } = &frames[1]
    else {
        panic!("{:?}", frames[1])
    };
    assert_eq!(sorted(headers.clone()), pf_headers("data"));
    assert_eq!(
        frames[2],
        Frame::Data {
            stream_id: 3,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n")
        }
    );
    assert_eq!(frames[3], Frame::Ping { id: 1 });
    let replies = all(&unhex(GO_REPLIES), &mut HeaderCodec::new().unwrap());
    assert_eq!(
        replies,
        [1, 3].map(|stream_id| Frame::SynReply {
            stream_id,
            flags: 0,
            headers: vec![]
        })
    );
}

#[test]
fn our_replies_open_the_zlib_stream_as_gos_do() {
    // Deflate may choose other blocks than Go's (these bytes were checked to read back with
    // spdystream's framer); what a reader needs is the zlib header naming the SPDY
    // dictionary (FDICT, id e3c6a7c2) on the first block, and sync-flushed blocks after.
    let mut codec = HeaderCodec::new().unwrap();
    let mut out = Vec::new();
    for stream_id in [1, 3] {
        let f = Frame::SynReply {
            stream_id,
            flags: 0,
            headers: vec![],
        };
        encode(&f, &mut codec, &mut out).unwrap();
    }
    assert_eq!(out[12..18], unhex("78f9e3c6a7c2"));
    let go = unhex(GO_REPLIES);
    assert_eq!(out[..12], go[..12], "the same control header and stream id");
    assert!(
        out.ends_with(&[0, 0, 0xff, 0xff]),
        "a sync flush ends each block"
    );
    let frames = all(&out, &mut HeaderCodec::new().unwrap());
    assert_eq!(frames, all(&go, &mut HeaderCodec::new().unwrap()));
}

fn every_kind() -> Vec<Frame> {
    vec![
        Frame::SynStream {
            stream_id: 5,
            associated: 0,
            priority: 7,
            slot: 0,
            flags: FLAG_UNIDIRECTIONAL,
            headers: pf_headers("data"),
        },
        Frame::SynReply {
            stream_id: 5,
            flags: FLAG_FIN,
            headers: vec![("a".into(), "1\u{0}2".into())],
        },
        Frame::RstStream {
            stream_id: 5,
            status: REFUSED_STREAM,
        },
        Frame::Settings {
            flags: 1,
            entries: vec![(1, 4, 100), (0, 7, 65536)],
        },
        Frame::Ping { id: 2 },
        Frame::GoAway {
            last_good: 5,
            status: 0,
        },
        Frame::Headers {
            stream_id: 5,
            flags: 0,
            headers: pf_headers("error"),
        },
        Frame::WindowUpdate {
            stream_id: 5,
            delta: 1 << 20,
        },
        Frame::Data {
            stream_id: 5,
            flags: FLAG_FIN,
            data: Bytes::from(vec![7u8; 70_000]),
        },
        Frame::Data {
            stream_id: 7,
            flags: 0,
            data: Bytes::new(),
        },
    ]
}

fn encode_all(frames: &[Frame]) -> Vec<u8> {
    let mut codec = HeaderCodec::new().unwrap();
    let mut out = Vec::new();
    for f in frames {
        encode(f, &mut codec, &mut out).unwrap();
    }
    out
}

#[test]
fn each_frame_kind_round_trips() {
    let frames = every_kind();
    let bytes = encode_all(&frames);
    assert_eq!(all(&bytes, &mut HeaderCodec::new().unwrap()), frames);
}

#[test]
fn a_frame_cut_at_any_byte_waits_for_the_rest() {
    let frames = every_kind();
    let bytes = encode_all(&frames);
    // one decoder fed the stream a byte more at a time: every prefix is either a whole
    // frame or None, and the header stream's state is touched only by whole frames
    let mut codec = HeaderCodec::new().unwrap();
    let (mut start, mut got) = (0usize, Vec::new());
    for end in 0..=bytes.len() {
        if let Some((f, n)) = decode(&bytes[start..end], &mut codec).unwrap() {
            assert_eq!(start + n, end, "a frame decoded before its last byte");
            got.push(f);
            start = end;
        }
    }
    assert_eq!(got, frames);
}

#[test]
fn header_blocks_round_trip_through_one_zlib_stream() {
    let mut tx = HeaderCodec::new().unwrap();
    let mut rx = HeaderCodec::new().unwrap();
    let long: String = "x".repeat(100_000);
    for h in [
        vec![],
        pf_headers("error"),
        pf_headers("data"),
        vec![("big".to_string(), long.clone())],
        pf_headers("data"),
    ] {
        let block = tx.compress(&h).unwrap();
        assert_eq!(rx.decompress(&block).unwrap(), h);
    }
    // the dictionary works: a second, repeated block costs a few bytes
    assert!(tx.compress(&pf_headers("data")).unwrap().len() < 12);
    // names go out lowercase, as SPDY/3 requires
    let block = tx.compress(&vec![("Port".into(), "80".into())]).unwrap();
    assert_eq!(
        rx.decompress(&block).unwrap(),
        [("port".into(), "80".into())]
    );
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    let cases: Vec<Vec<u8>> = vec![
        // version 2
        unhex("800200060000000400000001"),
        // PING of 3 bytes, RST_STREAM of 4
        unhex("80030006000000030000000a"),
        unhex("800300030000000400000001"),
        // SETTINGS claiming 2 entries in 12 bytes
        unhex("800300040000000c000000020000000100000001"),
        // DATA on stream 0
        unhex("0000000000000001ff"),
        // SYN_STREAM on stream 0, and one whose header block is not zlib
        unhex("800300010000000c00000000000000000000ffff"),
        unhex("800300010000000e000000010000000000000102030405"),
        // SYN_REPLY shorter than its stream id
        unhex("80030002000000020001"),
    ];
    for c in cases {
        let mut codec = HeaderCodec::new().unwrap();
        match decode(&c, &mut codec) {
            Err(_) => {}
            Ok(None) => panic!("{c:02x?} waits for more instead of failing"),
            Ok(Some(f)) => panic!("{c:02x?} decoded to {f:?}"),
        }
    }
    // every byte of a real session flipped in turn: errors or frames, no panic
    let good = unhex(GO_CLIENT);
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0xa5;
        let mut codec = HeaderCodec::new().unwrap();
        let mut at = 0;
        while let Ok(Some((_, n))) = decode(&b[at..], &mut codec) {
            at += n;
        }
    }
    // an unknown control type is skipped, as the protocol says
    let mut codec = HeaderCodec::new().unwrap();
    let f = decode(&unhex("8003000b00000002abcd"), &mut codec).unwrap();
    assert_eq!(f, Some((Frame::Unknown { kind: 11 }, 10)));
}

#[test]
fn a_header_bomb_is_refused() {
    // 8 MiB of one name inflates far past the block limit
    let mut tx = HeaderCodec::new().unwrap();
    let block = tx
        .compress(&vec![("a".into(), "b".repeat(8 << 20))])
        .unwrap();
    assert!(block.len() < 64 * 1024);
    let mut rx = HeaderCodec::new().unwrap();
    assert!(rx.decompress(&block).is_err());
}
