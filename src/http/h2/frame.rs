//! HTTP/2 frames (RFC 9113 §4, §6): an incremental decoder over whatever slices the socket
//! gives, and encoders that append to a connection's output buffer.
//!
//! The decoder never copies a DATA payload (it reports lengths: a load generator counts body
//! bytes, it does not keep them) and keeps a header block in one buffer of the connection,
//! reused; small control payloads go through a fixed array. Nothing here allocates once the
//! block buffer has grown to the largest block seen.

use thiserror::Error;

use super::ErrorCode;

/// Every frame begins with these nine bytes.
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value; we never raise ours, so no peer may exceed it.
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
/// A header block (HEADERS and its CONTINUATIONs) larger than this is refused: a misbehaving
/// server must not make us buffer without bound.
pub const MAX_BLOCK_BYTES: usize = 64 * 1024;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// A frame the connection must answer with a connection error (GOAWAY with `code`).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{what} ({code})")]
pub struct FrameError {
    pub code: ErrorCode,
    pub what: &'static str,
}

fn error(code: ErrorCode, what: &'static str) -> FrameError {
    FrameError { code, what }
}

/// What the decoder saw, handed to the connection as it is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// Some of a DATA frame's payload: `flow` bytes count against the flow-control windows
    /// (padding included), `data` of them are body. `end_stream` on the frame's last piece.
    Data {
        stream: u32,
        flow: u32,
        data: u32,
        end_stream: bool,
    },
    /// A whole header block (HEADERS with its CONTINUATIONs, padding and priority removed).
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
    },
    /// One parameter of a SETTINGS frame, as it is read.
    Setting {
        id: u16,
        value: u32,
    },
    /// The end of a SETTINGS frame (every parameter handed over), or its acknowledgement.
    SettingsEnd {
        ack: bool,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    RstStream {
        stream: u32,
        code: ErrorCode,
    },
    GoAway {
        last_stream: u32,
        code: ErrorCode,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a frame header: `have` of its nine bytes.
    Header { have: usize },
    /// Inside a frame's payload: `left` bytes still to come.
    Payload { left: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Head {
    len: u32,
    kind: u8,
    flags: u8,
    stream: u32,
}

/// Incremental frame decoder for one connection (the client side: it refuses PUSH_PROMISE,
/// which a client that sent SETTINGS_ENABLE_PUSH 0 never accepts).
#[derive(Debug)]
pub struct FrameDecoder {
    state: State,
    header: [u8; HEADER_LEN],
    head: Head,
    /// Bytes of the current payload kept for the frame kinds that need them (SETTINGS six at
    /// a time, PING, GOAWAY's first eight, RST_STREAM, WINDOW_UPDATE, a padded or prioritised
    /// HEADERS' prefix).
    small: [u8; 8],
    small_len: usize,
    /// DATA/HEADERS padding: whether the pad length was read, and how many trailing bytes of
    /// the payload are padding.
    pad: Option<u32>,
    /// The header block being assembled, and the stream a CONTINUATION must belong to.
    block: Vec<u8>,
    continuing: Option<(u32, bool)>,
    max_frame: u32,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    pub fn new() -> FrameDecoder {
        FrameDecoder {
            state: State::Header { have: 0 },
            header: [0; HEADER_LEN],
            head: Head::default(),
            small: [0; 8],
            small_len: 0,
            pad: None,
            block: Vec::new(),
            continuing: None,
            max_frame: DEFAULT_MAX_FRAME,
        }
    }

    /// Back to the start of a connection, keeping the block buffer's capacity.
    pub fn reset(&mut self) {
        let block = std::mem::take(&mut self.block);
        *self = FrameDecoder::new();
        self.block = block;
        self.block.clear();
    }

    /// True between frames (nothing of a frame is pending).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Header { have: 0 } && self.continuing.is_none()
    }

    /// Decodes `data`, handing each event to `on` as it completes. `on` may refuse (its error
    /// ends the feed); a malformed frame is a [`FrameError`].
    pub fn feed<E: From<FrameError>>(
        &mut self,
        mut data: &[u8],
        on: &mut impl FnMut(Event) -> Result<(), E>,
    ) -> Result<(), E> {
        while !data.is_empty() {
            match self.state {
                State::Header { have } => {
                    let take = (HEADER_LEN - have).min(data.len());
                    self.header[have..have + take].copy_from_slice(&data[..take]);
                    data = &data[take..];
                    if have + take < HEADER_LEN {
                        self.state = State::Header { have: have + take };
                        return Ok(());
                    }
                    self.begin_frame()?;
                    if self.head.len == 0 {
                        self.end_frame(on)?;
                    }
                }
                State::Payload { left } => {
                    let take = (left as usize).min(data.len());
                    self.payload(&data[..take], left, on)?;
                    data = &data[take..];
                    let left = left - take as u32;
                    self.state = State::Payload { left };
                    if left == 0 {
                        self.end_frame(on)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The nine header bytes are in: checks what can be checked before the payload.
    fn begin_frame(&mut self) -> Result<(), FrameError> {
        let h = &self.header;
        let head = Head {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        };
        if head.len > self.max_frame {
            return Err(error(
                ErrorCode::FrameSize,
                "frame larger than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        if let Some((stream, _)) = self.continuing {
            if head.kind != CONTINUATION || head.stream != stream {
                return Err(error(ErrorCode::Protocol, "header block interrupted"));
            }
        }
        // Some(true): a stream's frame; Some(false): the connection's; None: either.
        let need_stream = match head.kind {
            DATA | HEADERS | PRIORITY | RST_STREAM | CONTINUATION => Some(true),
            SETTINGS | PING | GOAWAY => Some(false),
            PUSH_PROMISE => {
                return Err(error(
                    ErrorCode::Protocol,
                    "PUSH_PROMISE after ENABLE_PUSH 0",
                ))
            }
            _ => None,
        };
        match (need_stream, head.stream) {
            (Some(true), 0) => return Err(error(ErrorCode::Protocol, "stream frame on stream 0")),
            (Some(false), s) if s != 0 => {
                return Err(error(ErrorCode::Protocol, "connection frame on a stream"))
            }
            _ => {}
        }
        let size_ok = match head.kind {
            RST_STREAM | WINDOW_UPDATE => head.len == 4,
            PRIORITY => head.len == 5,
            PING => head.len == 8,
            SETTINGS if head.flags & ACK != 0 => head.len == 0,
            SETTINGS => head.len.is_multiple_of(6),
            GOAWAY => head.len >= 8,
            _ => true,
        };
        if !size_ok {
            return Err(error(
                ErrorCode::FrameSize,
                "frame of the wrong length for its type",
            ));
        }
        let padded = matches!(head.kind, DATA | HEADERS) && head.flags & PADDED != 0;
        self.pad = if padded { None } else { Some(0) };
        if head.kind == HEADERS {
            self.block.clear();
        }
        self.small_len = 0;
        self.head = head;
        self.state = State::Payload { left: head.len };
        Ok(())
    }

    /// The next `chunk` of the current payload, `left` bytes of which (this chunk included)
    /// were still to come.
    fn payload<E: From<FrameError>>(
        &mut self,
        mut chunk: &[u8],
        left: u32,
        on: &mut impl FnMut(Event) -> Result<(), E>,
    ) -> Result<(), E> {
        let head = self.head;
        let mut at = head.len - left;
        // Every byte of a DATA payload counts against the windows, padding included.
        let flow = chunk.len() as u32;
        // The pad length: the first payload byte of a padded DATA or HEADERS.
        if self.pad.is_none() && !chunk.is_empty() {
            let pad = u32::from(chunk[0]);
            if pad >= head.len {
                return Err(error(ErrorCode::Protocol, "padding as long as the frame").into());
            }
            self.pad = Some(pad);
            chunk = &chunk[1..];
            at += 1;
        }
        let pad = self.pad.unwrap_or(0);
        // Payload bytes [at, at + chunk.len()); the body ends where the padding begins.
        let body_end = head.len - pad;
        match head.kind {
            DATA => {
                let end = at + chunk.len() as u32;
                let data = end.min(body_end).saturating_sub(at.min(body_end));
                on(Event::Data {
                    stream: head.stream,
                    flow,
                    data,
                    end_stream: false,
                })?;
            }
            HEADERS | CONTINUATION => self.block_fragment(chunk, at, body_end)?,
            SETTINGS => {
                for &b in chunk {
                    self.small[self.small_len] = b;
                    self.small_len += 1;
                    if self.small_len == 6 {
                        self.small_len = 0;
                        let s = &self.small;
                        on(Event::Setting {
                            id: u16::from_be_bytes([s[0], s[1]]),
                            value: u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                        })?;
                    }
                }
            }
            _ => {
                // Control frames keep their first eight bytes (GOAWAY's debug data is skipped).
                let take = (8 - self.small_len).min(chunk.len());
                self.small[self.small_len..self.small_len + take].copy_from_slice(&chunk[..take]);
                self.small_len += take;
            }
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION payload's piece `chunk` at payload offset `at` (the pad
    /// length already read): what lies between the priority fields and the padding is kept.
    fn block_fragment(
        &mut self,
        mut chunk: &[u8],
        at: u32,
        body_end: u32,
    ) -> Result<(), FrameError> {
        let head = self.head;
        let mut start = at;
        let prefix = if head.kind == HEADERS && head.flags & PRIORITY_FLAG != 0 {
            // Pad length (if any) and the five priority bytes come before the block.
            5 + u32::from(head.flags & PADDED != 0)
        } else {
            u32::from(head.kind == HEADERS && head.flags & PADDED != 0)
        };
        if prefix > body_end {
            return Err(error(
                ErrorCode::Protocol,
                "HEADERS too short for its flags",
            ));
        }
        let skip = prefix.saturating_sub(start).min(chunk.len() as u32);
        chunk = &chunk[skip as usize..];
        start += skip;
        let keep = (body_end.saturating_sub(start) as usize).min(chunk.len());
        if self.block.len() + keep > MAX_BLOCK_BYTES {
            return Err(error(
                ErrorCode::EnhanceYourCalm,
                "header block over 64 KiB",
            ));
        }
        self.block.extend_from_slice(&chunk[..keep]);
        Ok(())
    }

    /// The current frame's payload is complete.
    fn end_frame<E: From<FrameError>>(
        &mut self,
        on: &mut impl FnMut(Event) -> Result<(), E>,
    ) -> Result<(), E> {
        let head = self.head;
        self.state = State::Header { have: 0 };
        let s = self.small;
        let word = |i: usize| u32::from_be_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        match head.kind {
            DATA => {
                if self.pad.is_none() {
                    // A padded frame of length zero has no room for its pad length.
                    return Err(
                        error(ErrorCode::Protocol, "padded frame without a pad length").into(),
                    );
                }
                on(Event::Data {
                    stream: head.stream,
                    flow: 0,
                    data: 0,
                    end_stream: head.flags & END_STREAM != 0,
                })
            }
            HEADERS | CONTINUATION => {
                if self.pad.is_none() {
                    return Err(
                        error(ErrorCode::Protocol, "padded frame without a pad length").into(),
                    );
                }
                let end_stream = match (head.kind, self.continuing) {
                    (HEADERS, _) => head.flags & END_STREAM != 0,
                    (_, Some((_, end))) => end,
                    _ => {
                        return Err(
                            error(ErrorCode::Protocol, "CONTINUATION without HEADERS").into()
                        )
                    }
                };
                if head.flags & END_HEADERS == 0 {
                    self.continuing = Some((head.stream, end_stream));
                    return Ok(());
                }
                self.continuing = None;
                on(Event::Headers {
                    stream: head.stream,
                    block: &self.block,
                    end_stream,
                })
            }
            SETTINGS => on(Event::SettingsEnd {
                ack: head.flags & ACK != 0,
            }),
            PING => on(Event::Ping {
                ack: head.flags & ACK != 0,
                data: s,
            }),
            RST_STREAM => on(Event::RstStream {
                stream: head.stream,
                code: ErrorCode::from(word(0)),
            }),
            GOAWAY => on(Event::GoAway {
                last_stream: word(0) & 0x7fff_ffff,
                code: ErrorCode::from(word(4)),
            }),
            WINDOW_UPDATE => {
                let increment = word(0) & 0x7fff_ffff;
                on(Event::WindowUpdate {
                    stream: head.stream,
                    increment,
                })
            }
            // PRIORITY and unknown kinds are ignored, as RFC 9113 §4.1 and §5.5 say.
            _ => Ok(()),
        }
    }
}

/// Appends a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// Appends a SETTINGS frame with these parameters.
pub fn put_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    put_head(out, params.len() * 6, SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, SETTINGS, ACK, 0);
}

pub fn put_ping_ack(out: &mut Vec<u8>, data: [u8; 8]) {
    put_head(out, 8, PING, ACK, 0);
    out.extend_from_slice(&data);
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

pub fn put_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    put_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&u32::from(code).to_be_bytes());
}

pub fn put_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    put_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&u32::from(code).to_be_bytes());
}

/// Appends a header block as HEADERS and as many CONTINUATIONs as `max_frame` makes it.
pub fn put_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(1);
    let mut chunks = block.chunks(max_frame).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let last = chunks.peek().is_none();
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    put_head(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        put_head(out, chunk.len(), CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// Appends one DATA frame (the caller keeps it within the frame size and the windows).
pub fn put_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    put_head(
        out,
        data.len(),
        DATA,
        if end_stream { END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owned copy of an event, for comparing runs.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Seen {
        Data {
            stream: u32,
            flow: u32,
            data: u32,
            end: bool,
        },
        Headers {
            stream: u32,
            block: Vec<u8>,
            end: bool,
        },
        Setting(u16, u32),
        SettingsEnd(bool),
        Ping(bool, [u8; 8]),
        Rst(u32, ErrorCode),
        GoAway(u32, ErrorCode),
        Window(u32, u32),
    }

    /// Decodes `bytes` fed in pieces of `step` (0: all at once); DATA pieces are summed per
    /// frame, since how a payload is cut into events depends on the reads.
    fn decode(bytes: &[u8], step: usize) -> Result<Vec<Seen>, FrameError> {
        let mut d = FrameDecoder::new();
        let mut seen = Vec::new();
        let mut on = |e: Event| -> Result<(), FrameError> {
            let s = match e {
                Event::Data {
                    stream,
                    flow,
                    data,
                    end_stream,
                } => {
                    if let Some(Seen::Data {
                        stream: s,
                        flow: f,
                        data: b,
                        end: false,
                    }) = seen.last_mut()
                    {
                        if *s == stream {
                            *f += flow;
                            *b += data;
                            if end_stream {
                                seen.push(Seen::Data {
                                    stream,
                                    flow: 0,
                                    data: 0,
                                    end: true,
                                });
                            }
                            return Ok(());
                        }
                    }
                    Seen::Data {
                        stream,
                        flow,
                        data,
                        end: end_stream,
                    }
                }
                Event::Headers {
                    stream,
                    block,
                    end_stream,
                } => Seen::Headers {
                    stream,
                    block: block.to_vec(),
                    end: end_stream,
                },
                Event::Setting { id, value } => Seen::Setting(id, value),
                Event::SettingsEnd { ack } => Seen::SettingsEnd(ack),
                Event::Ping { ack, data } => Seen::Ping(ack, data),
                Event::RstStream { stream, code } => Seen::Rst(stream, code),
                Event::GoAway { last_stream, code } => Seen::GoAway(last_stream, code),
                Event::WindowUpdate { stream, increment } => Seen::Window(stream, increment),
            };
            seen.push(s);
            Ok(())
        };
        if step == 0 {
            d.feed(bytes, &mut on)?;
        } else {
            for piece in bytes.chunks(step) {
                d.feed(piece, &mut on)?;
            }
        }
        Ok(seen)
    }

    /// Every frame kind a client receives, padded and prioritised ones included.
    fn conversation() -> Vec<u8> {
        let mut out = Vec::new();
        put_settings(&mut out, &[(0x3, 100), (0x4, 1 << 20)]);
        put_settings_ack(&mut out);
        put_window_update(&mut out, 0, 1 << 24);
        put_headers(&mut out, 1, b"\x88abc", false, 16_384);
        put_data(&mut out, 1, &[7u8; 300], false);
        // DATA, padded: pad length 4, 3 bytes of body, 4 of padding.
        put_head(&mut out, 8, DATA, PADDED, 1);
        out.extend_from_slice(&[4, 1, 2, 3, 0, 0, 0, 0]);
        // Trailers split over CONTINUATION, ending the stream.
        put_headers(&mut out, 1, b"trailer-block!", true, 5);
        // HEADERS padded and with priority: pad 2, 5 bytes of priority, block "xy", padding.
        put_head(
            &mut out,
            1 + 5 + 2 + 2,
            HEADERS,
            PADDED | PRIORITY_FLAG | END_HEADERS,
            3,
        );
        out.extend_from_slice(&[2, 0, 0, 0, 1, 16, b'x', b'y', 0, 0]);
        put_head(&mut out, 5, PRIORITY, 0, 3);
        out.extend_from_slice(&[0, 0, 0, 0, 1]);
        // An unknown frame type is skipped.
        put_head(&mut out, 3, 0xfa, 0, 0);
        out.extend_from_slice(b"???");
        put_data(&mut out, 3, b"", true);
        put_head(&mut out, 8, PING, 0, 0);
        out.extend_from_slice(b"pingpong");
        put_rst_stream(&mut out, 5, ErrorCode::RefusedStream);
        // GOAWAY with debug data.
        put_head(&mut out, 8 + 6, GOAWAY, 0, 0);
        out.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 0]);
        out.extend_from_slice(b"bye...");
        out
    }

    #[test]
    fn every_frame_kind_decodes_the_same_at_any_split() {
        let bytes = conversation();
        let whole = decode(&bytes, 0).unwrap();
        assert_eq!(
            whole,
            [
                Seen::Setting(0x3, 100),
                Seen::Setting(0x4, 1 << 20),
                Seen::SettingsEnd(false),
                Seen::SettingsEnd(true),
                Seen::Window(0, 1 << 24),
                Seen::Headers {
                    stream: 1,
                    block: b"\x88abc".to_vec(),
                    end: false
                },
                Seen::Data {
                    stream: 1,
                    flow: 308,
                    data: 303,
                    end: false
                },
                Seen::Headers {
                    stream: 1,
                    block: b"trailer-block!".to_vec(),
                    end: true
                },
                Seen::Headers {
                    stream: 3,
                    block: b"xy".to_vec(),
                    end: false
                },
                Seen::Data {
                    stream: 3,
                    flow: 0,
                    data: 0,
                    end: true
                },
                Seen::Ping(false, *b"pingpong"),
                Seen::Rst(5, ErrorCode::RefusedStream),
                Seen::GoAway(9, ErrorCode::NoError),
            ]
        );
        for step in 1..=bytes.len() {
            assert_eq!(decode(&bytes, step).unwrap(), whole, "pieces of {step}");
        }
        // Two pieces, cut at every byte.
        for cut in 0..=bytes.len() {
            let mut d = FrameDecoder::new();
            let mut n = 0;
            let mut on = |_: Event| -> Result<(), FrameError> {
                n += 1;
                Ok(())
            };
            d.feed(&bytes[..cut], &mut on).unwrap();
            d.feed(&bytes[cut..], &mut on).unwrap();
            assert!(d.at_boundary(), "cut at {cut}");
        }
    }

    #[test]
    fn a_block_longer_than_a_frame_goes_out_as_continuations() {
        let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        put_headers(&mut out, 7, &block, true, 16_384);
        // 3 frames: 16384 + 16384 + 7232, each with its nine-byte header.
        assert_eq!(out.len(), block.len() + 3 * HEADER_LEN);
        assert_eq!(out[3], HEADERS);
        assert_eq!(out[4], END_STREAM);
        assert_eq!(
            decode(&out, 1000).unwrap(),
            [Seen::Headers {
                stream: 7,
                block,
                end: true
            }]
        );
    }

    fn refused(bytes: &[u8]) -> FrameError {
        let whole = decode(bytes, 0).unwrap_err();
        // Noticed the same way byte by byte.
        assert_eq!(decode(bytes, 1).unwrap_err(), whole);
        whole
    }

    #[test]
    fn malformed_frames_are_connection_errors() {
        let mut oversized = Vec::new();
        put_head(&mut oversized, DEFAULT_MAX_FRAME as usize + 1, DATA, 0, 1);
        assert_eq!(refused(&oversized).code, ErrorCode::FrameSize);

        let mut on_zero = Vec::new();
        put_data(&mut on_zero, 0, b"x", false);
        assert_eq!(refused(&on_zero).code, ErrorCode::Protocol);

        let mut settings_on_stream = Vec::new();
        put_head(&mut settings_on_stream, 0, SETTINGS, 0, 1);
        assert_eq!(refused(&settings_on_stream).code, ErrorCode::Protocol);

        let mut short_ping = Vec::new();
        put_head(&mut short_ping, 7, PING, 0, 0);
        assert_eq!(refused(&short_ping).code, ErrorCode::FrameSize);

        let mut odd_settings = Vec::new();
        put_head(&mut odd_settings, 5, SETTINGS, 0, 0);
        assert_eq!(refused(&odd_settings).code, ErrorCode::FrameSize);

        let mut push = Vec::new();
        put_head(&mut push, 4, PUSH_PROMISE, END_HEADERS, 1);
        assert_eq!(refused(&push).code, ErrorCode::Protocol);

        // A HEADERS without END_HEADERS, then a DATA: the block was interrupted.
        let mut interrupted = Vec::new();
        put_head(&mut interrupted, 1, HEADERS, 0, 1);
        interrupted.push(0x88);
        put_data(&mut interrupted, 1, b"x", false);
        assert_eq!(refused(&interrupted).code, ErrorCode::Protocol);

        let mut orphan = Vec::new();
        put_head(&mut orphan, 1, CONTINUATION, END_HEADERS, 1);
        orphan.push(0x88);
        assert_eq!(refused(&orphan).code, ErrorCode::Protocol);

        // Padding that leaves no room: pad length 5 in a 5-byte frame.
        let mut overpadded = Vec::new();
        put_head(&mut overpadded, 5, DATA, PADDED, 1);
        overpadded.extend_from_slice(&[5, 0, 0, 0, 0]);
        assert_eq!(refused(&overpadded).code, ErrorCode::Protocol);

        let mut empty_padded = Vec::new();
        put_head(&mut empty_padded, 0, DATA, PADDED, 1);
        assert_eq!(refused(&empty_padded).code, ErrorCode::Protocol);

        // A block that keeps growing through CONTINUATIONs is cut off at 64 KiB.
        let mut endless = Vec::new();
        put_head(&mut endless, 16_000, HEADERS, 0, 1);
        endless.extend_from_slice(&[0; 16_000]);
        for _ in 0..4 {
            put_head(&mut endless, 16_000, CONTINUATION, 0, 1);
            endless.extend_from_slice(&[0; 16_000]);
        }
        assert_eq!(refused(&endless).code, ErrorCode::EnhanceYourCalm);
    }

    #[test]
    fn a_refusing_callback_ends_the_feed() {
        let mut d = FrameDecoder::new();
        let mut out = Vec::new();
        put_settings_ack(&mut out);
        put_settings_ack(&mut out);
        let mut calls = 0;
        let r = d.feed(&out, &mut |_e: Event| {
            calls += 1;
            Err(error(ErrorCode::Cancel, "enough"))
        });
        assert_eq!(r.unwrap_err().code, ErrorCode::Cancel);
        assert_eq!(calls, 1);
    }

    /// The fuzz target's property on mutations of a real conversation (a quick stand-in for
    /// `bench/fuzz.sh h2_frames`, run with every test): no panic, and the same events or error
    /// whole and cut in two.
    #[test]
    fn mutated_conversations_decode_the_same_whole_and_split() {
        let base = conversation();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3_000 {
            let mut bytes = base.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % bytes.len();
                bytes[at] = next() as u8;
            }
            let cut = (next() as usize) % (bytes.len() + 1);
            let whole = decode(&bytes, 0);
            let mut d = FrameDecoder::new();
            let mut events = 0;
            let mut on = |_: Event| -> Result<(), FrameError> {
                events += 1;
                Ok(())
            };
            let halves = d
                .feed(&bytes[..cut], &mut on)
                .and_then(|()| d.feed(&bytes[cut..], &mut on));
            assert_eq!(whole.as_ref().err(), halves.as_ref().err(), "cut at {cut}");
            for step in [1, 7] {
                assert_eq!(decode(&bytes, step), whole, "pieces of {step}");
            }
        }
    }
}
