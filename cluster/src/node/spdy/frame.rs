//! SPDY/3.1 frames as bytes: the eight control frames and DATA, and the name/value header
//! blocks inside SYN_STREAM, SYN_REPLY and HEADERS, compressed with zlib against the SPDY/3
//! dictionary. Each direction of a session is one zlib stream (sync-flushed after every
//! block), so one `HeaderCodec` serves a whole session: its compressor for what we write,
//! its decompressor for what we read.
//!
//! `decode` takes a buffer that may hold less than a frame: it answers `None` (read more)
//! without touching the decompressor, so a frame cut anywhere decodes once it is whole.

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::dictionary::DICTIONARY;
use crate::error::{ClusterError, Result};

pub const VERSION: u16 = 3;
/// The largest payload a frame's 24-bit length can say.
pub const MAX_LENGTH: usize = (1 << 24) - 1;
/// A header block's limits (spdystream's: 1000 pairs, 1 MiB a field); decompressed blocks
/// beyond `MAX_BLOCK` are refused rather than inflated without end.
const MAX_PAIRS: usize = 1000;
const MAX_FIELD: usize = 1 << 20;
const MAX_BLOCK: usize = 4 << 20;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

pub const FLAG_FIN: u8 = 0x01;
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;

/// RST_STREAM status codes this server sends.
pub const PROTOCOL_ERROR: u32 = 1;
pub const REFUSED_STREAM: u32 = 3;

/// Name/value pairs in the order they came; names lowercase on the wire, several values of
/// one name joined by NUL (as the protocol has them).
pub type Headers = Vec<(String, String)>;

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated: u32,
        priority: u8,
        slot: u8,
        flags: u8,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Settings {
        flags: u8,
        /// (flags, id, value)
        entries: Vec<(u8, u32, u32)>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
    /// A control frame of a type SPDY/3.1 does not define: the protocol says to ignore it.
    Unknown {
        kind: u16,
    },
}

fn bad(what: impl std::fmt::Display) -> ClusterError {
    ClusterError::Spdy(what.to_string())
}

/// One session's header compression: a zlib stream per direction, primed with the dictionary.
pub struct HeaderCodec {
    compress: Compress,
    decompress: Decompress,
}

impl HeaderCodec {
    pub fn new() -> Result<HeaderCodec> {
        let mut compress = Compress::new(Compression::best(), true);
        compress
            .set_dictionary(DICTIONARY)
            .map_err(|e| bad(format!("header compressor: {e}")))?;
        Ok(HeaderCodec {
            compress,
            decompress: Decompress::new(true),
        })
    }

    /// A header block, compressed and sync-flushed (the peer can read it whole at once).
    pub fn compress(&mut self, headers: &Headers) -> Result<Vec<u8>> {
        let mut plain = Vec::new();
        put_u32(&mut plain, len_u32(headers.len())?);
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            put_u32(&mut plain, len_u32(name.len())?);
            plain.extend_from_slice(name.as_bytes());
            put_u32(&mut plain, len_u32(value.len())?);
            plain.extend_from_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut done = 0usize;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let before = self.compress.total_in();
            self.compress
                .compress_vec(&plain[done..], &mut out, FlushCompress::Sync)
                .map_err(|e| bad(format!("header compression: {e}")))?;
            done += (self.compress.total_in() - before) as usize;
            // a sync flush is complete when all input is in and the output had room to spare
            if done == plain.len() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }

    /// A compressed header block back to its pairs.
    pub fn decompress(&mut self, block: &[u8]) -> Result<Headers> {
        let mut plain: Vec<u8> = Vec::with_capacity(block.len() * 4 + 64);
        let mut used = 0usize;
        while used < block.len() {
            if plain.capacity() - plain.len() < 64 {
                plain.reserve(plain.capacity());
            }
            let before = self.decompress.total_in();
            let r =
                self.decompress
                    .decompress_vec(&block[used..], &mut plain, FlushDecompress::Sync);
            let took = (self.decompress.total_in() - before) as usize;
            used += took;
            match r {
                Ok(Status::StreamEnd) if used < block.len() => {
                    return Err(bad("header block: bytes after the end of the zlib stream"))
                }
                Ok(_) if took == 0 && plain.len() < plain.capacity() => {
                    return Err(bad("header block: the zlib stream makes no progress"))
                }
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.decompress
                        .set_dictionary(DICTIONARY)
                        .map_err(|e| bad(format!("header block: {e}")))?;
                }
                Err(e) => return Err(bad(format!("header block: {e}"))),
            }
            if plain.len() > MAX_BLOCK {
                return Err(bad("header block larger than 4 MiB"));
            }
        }
        parse_pairs(&plain)
    }
}

fn len_u32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| bad("header block too large"))
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| bad("frame shorter than its fields"))
}

fn parse_pairs(plain: &[u8]) -> Result<Headers> {
    let n = u32_at(plain, 0)? as usize;
    if n > MAX_PAIRS {
        return Err(bad(format!("{n} header pairs (at most {MAX_PAIRS})")));
    }
    let mut at = 4usize;
    let field = |at: &mut usize| -> Result<String> {
        let len = u32_at(plain, *at)? as usize;
        if len > MAX_FIELD {
            return Err(bad("header field longer than 1 MiB"));
        }
        let s = plain
            .get(*at + 4..*at + 4 + len)
            .ok_or_else(|| bad("header block shorter than its fields"))?;
        *at += 4 + len;
        String::from_utf8(s.to_vec()).map_err(|_| bad("header field is not UTF-8"))
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = field(&mut at)?;
        let value = field(&mut at)?;
        out.push((name.to_ascii_lowercase(), value));
    }
    if at != plain.len() {
        return Err(bad("bytes after the header block's pairs"));
    }
    Ok(out)
}

/// The first frame in `buf` and the bytes it took, `None` while it is incomplete.
pub fn decode(buf: &[u8], codec: &mut HeaderCodec) -> Result<Option<(Frame, usize)>> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let first = u32_at(buf, 0)?;
    let word = u32_at(buf, 4)?;
    let (flags, len) = ((word >> 24) as u8, (word & 0x00ff_ffff) as usize);
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let body = &buf[8..8 + len];
    let frame = if first & 0x8000_0000 == 0 {
        let stream_id = first & 0x7fff_ffff;
        if stream_id == 0 {
            return Err(bad("DATA frame on stream 0"));
        }
        Frame::Data {
            stream_id,
            flags,
            data: Bytes::copy_from_slice(body),
        }
    } else {
        let version = ((first >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(bad(format!(
                "SPDY version {version} (this server speaks 3)"
            )));
        }
        control((first & 0xffff) as u16, flags, body, codec)?
    };
    Ok(Some((frame, 8 + len)))
}

fn stream_at(body: &[u8], at: usize) -> Result<u32> {
    let id = u32_at(body, at)? & 0x7fff_ffff;
    if id == 0 {
        return Err(bad("control frame for stream 0"));
    }
    Ok(id)
}

fn fixed(body: &[u8], len: usize, what: &str) -> Result<()> {
    if body.len() != len {
        return Err(bad(format!(
            "{what} of {} bytes (must be {len})",
            body.len()
        )));
    }
    Ok(())
}

fn control(kind: u16, flags: u8, body: &[u8], codec: &mut HeaderCodec) -> Result<Frame> {
    Ok(match kind {
        SYN_STREAM => {
            let b = body.get(10..).ok_or_else(|| bad("short SYN_STREAM"))?;
            Frame::SynStream {
                stream_id: stream_at(body, 0)?,
                associated: u32_at(body, 4)? & 0x7fff_ffff,
                priority: body[8] >> 5,
                slot: body[9],
                flags,
                headers: codec.decompress(b)?,
            }
        }
        SYN_REPLY | HEADERS => {
            let stream_id = stream_at(body, 0)?;
            let headers = codec.decompress(&body[4..])?;
            if kind == SYN_REPLY {
                Frame::SynReply {
                    stream_id,
                    flags,
                    headers,
                }
            } else {
                Frame::Headers {
                    stream_id,
                    flags,
                    headers,
                }
            }
        }
        RST_STREAM => {
            fixed(body, 8, "RST_STREAM")?;
            Frame::RstStream {
                stream_id: stream_at(body, 0)?,
                status: u32_at(body, 4)?,
            }
        }
        SETTINGS => settings(flags, body)?,
        PING => {
            fixed(body, 4, "PING")?;
            Frame::Ping {
                id: u32_at(body, 0)?,
            }
        }
        GOAWAY => {
            fixed(body, 8, "GOAWAY")?;
            Frame::GoAway {
                last_good: u32_at(body, 0)? & 0x7fff_ffff,
                status: u32_at(body, 4)?,
            }
        }
        WINDOW_UPDATE => {
            fixed(body, 8, "WINDOW_UPDATE")?;
            Frame::WindowUpdate {
                stream_id: u32_at(body, 0)? & 0x7fff_ffff,
                delta: u32_at(body, 4)? & 0x7fff_ffff,
            }
        }
        kind => Frame::Unknown { kind },
    })
}

fn settings(flags: u8, body: &[u8]) -> Result<Frame> {
    let n = u32_at(body, 0)? as usize;
    if body.len() != 4 + n.saturating_mul(8) {
        return Err(bad(format!(
            "SETTINGS of {} bytes for {n} entries",
            body.len()
        )));
    }
    let mut entries = Vec::with_capacity(n);
    for i in 0..n {
        let word = u32_at(body, 4 + i * 8)?;
        entries.push((
            (word >> 24) as u8,
            word & 0x00ff_ffff,
            u32_at(body, 8 + i * 8)?,
        ));
    }
    Ok(Frame::Settings { flags, entries })
}

fn control_header(out: &mut Vec<u8>, kind: u16, flags: u8, len: usize) -> Result<()> {
    if len > MAX_LENGTH {
        return Err(bad(format!("a control frame of {len} bytes")));
    }
    put_u32(
        out,
        0x8000_0000 | (u32::from(VERSION) << 16) | u32::from(kind),
    );
    put_u32(out, (u32::from(flags) << 24) | len as u32);
    Ok(())
}

/// SYN_REPLY and HEADERS: a stream id and a header block.
fn with_headers(
    out: &mut Vec<u8>,
    kind: u16,
    stream_id: u32,
    flags: u8,
    headers: &Headers,
    codec: &mut HeaderCodec,
) -> Result<()> {
    let block = codec.compress(headers)?;
    control_header(out, kind, flags, 4 + block.len())?;
    put_u32(out, stream_id & 0x7fff_ffff);
    out.extend_from_slice(&block);
    Ok(())
}

/// Appends `frame`'s bytes to `out`.
pub fn encode(frame: &Frame, codec: &mut HeaderCodec, out: &mut Vec<u8>) -> Result<()> {
    let id = |v: u32| v & 0x7fff_ffff;
    match frame {
        Frame::Data {
            stream_id,
            flags,
            data,
        } => {
            if data.len() > MAX_LENGTH || *stream_id == 0 {
                return Err(bad("a DATA frame over 16 MiB or on stream 0"));
            }
            put_u32(out, id(*stream_id));
            put_u32(out, (u32::from(*flags) << 24) | data.len() as u32);
            out.extend_from_slice(data);
        }
        Frame::SynStream {
            stream_id,
            associated,
            priority,
            slot,
            flags,
            headers,
        } => {
            let block = codec.compress(headers)?;
            control_header(out, SYN_STREAM, *flags, 10 + block.len())?;
            put_u32(out, id(*stream_id));
            put_u32(out, id(*associated));
            out.extend_from_slice(&[(priority & 7) << 5, *slot]);
            out.extend_from_slice(&block);
        }
        Frame::SynReply {
            stream_id,
            flags,
            headers,
        } => with_headers(out, SYN_REPLY, *stream_id, *flags, headers, codec)?,
        Frame::Headers {
            stream_id,
            flags,
            headers,
        } => with_headers(out, HEADERS, *stream_id, *flags, headers, codec)?,
        Frame::RstStream { stream_id, status } => {
            control_header(out, RST_STREAM, 0, 8)?;
            put_u32(out, id(*stream_id));
            put_u32(out, *status);
        }
        Frame::Settings { flags, entries } => {
            control_header(out, SETTINGS, *flags, 4 + entries.len() * 8)?;
            put_u32(out, len_u32(entries.len())?);
            for (f, i, v) in entries {
                put_u32(out, (u32::from(*f) << 24) | (i & 0x00ff_ffff));
                put_u32(out, *v);
            }
        }
        Frame::Ping { id } => {
            control_header(out, PING, 0, 4)?;
            put_u32(out, *id);
        }
        Frame::GoAway { last_good, status } => {
            control_header(out, GOAWAY, 0, 8)?;
            put_u32(out, id(*last_good));
            put_u32(out, *status);
        }
        Frame::WindowUpdate { stream_id, delta } => {
            control_header(out, WINDOW_UPDATE, 0, 8)?;
            put_u32(out, id(*stream_id));
            put_u32(out, id(*delta));
        }
        Frame::Unknown { kind } => return Err(bad(format!("cannot send control type {kind}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
