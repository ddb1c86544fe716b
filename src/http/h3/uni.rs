//! The server's unidirectional streams (RFC 9114 §6.2): each starts with a stream type.
//! The control stream carries SETTINGS first, then perhaps GOAWAY; the QPACK encoder and
//! decoder streams carry nothing we need, since we allowed no dynamic table; a push stream
//! is an error, since we allowed no push; a stream of unknown type (grease among them) is
//! read and dropped.

use super::error::{ErrorCode, H3Error};
use super::frame::{
    is_http2_only, FrameHeader, FrameHeaderReader, PayloadBuffer, CANCEL_PUSH, DATA, GOAWAY,
    HEADERS, MAX_PUSH_ID, PUSH_PROMISE, SETTINGS,
};
use super::settings::{ServerSettings, CONTROL_STREAM_TYPE};
use super::varint::{decode_varint, MAX_VARINT_LEN};

const PUSH_STREAM_TYPE: u64 = 0x01;
const QPACK_ENCODER_STREAM_TYPE: u64 = 0x02;
const QPACK_DECODER_STREAM_TYPE: u64 = 0x03;

/// A SETTINGS frame larger than this is refused: it is read whole, and real ones are tens of
/// bytes.
const MAX_SETTINGS_FRAME: usize = 16 * 1024;

/// What a server's unidirectional stream is, by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UniStreamKind {
    Control,
    QpackEncoder,
    QpackDecoder,
    /// A type we do not know: its content is dropped. The worker may instead stop reading
    /// it (STOP_SENDING with H3_STREAM_CREATION_ERROR, RFC 9114 §6.2).
    Unknown(u64),
}

/// What one `feed` of a unidirectional stream brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServerNews {
    /// The stream's kind, in the feed that completed its type: the worker hands it to the
    /// connection's [`CriticalStreams`].
    pub kind: Option<UniStreamKind>,
    pub settings: Option<ServerSettings>,
    /// GOAWAY's stream ID: requests on streams from this ID on were not, and will not be,
    /// processed; retry them on a new connection. (The last of several in one feed.)
    pub goaway: Option<u64>,
}

/// Reads one of the server's unidirectional streams.
#[derive(Debug, Default)]
pub(crate) struct UniStreamParser {
    stream_type: [u8; MAX_VARINT_LEN],
    stream_type_len: usize,
    kind: Option<UniStreamKind>,
    content: UniContent,
}

#[derive(Debug, Default)]
enum UniContent {
    #[default]
    AwaitingType,
    Control(ControlStreamParser),
    QpackEncoder,
    Dropped,
}

impl UniStreamParser {
    /// Reads the next slice of the stream.
    pub(crate) fn feed(&mut self, mut input: &[u8]) -> Result<ServerNews, H3Error> {
        let mut news = ServerNews::default();
        if let UniContent::AwaitingType = self.content {
            let Some(stream_type) = self.read_type(&mut input) else {
                return Ok(news);
            };
            let (kind, content) = match stream_type {
                CONTROL_STREAM_TYPE => (
                    UniStreamKind::Control,
                    UniContent::Control(ControlStreamParser::default()),
                ),
                PUSH_STREAM_TYPE => {
                    return Err(H3Error::connection(
                        ErrorCode::ID_ERROR,
                        "a push stream, though we allowed no push",
                    ))
                }
                QPACK_ENCODER_STREAM_TYPE => {
                    (UniStreamKind::QpackEncoder, UniContent::QpackEncoder)
                }
                QPACK_DECODER_STREAM_TYPE => (UniStreamKind::QpackDecoder, UniContent::Dropped),
                other => (UniStreamKind::Unknown(other), UniContent::Dropped),
            };
            news.kind = Some(kind);
            self.kind = Some(kind);
            self.content = content;
        }
        match &mut self.content {
            UniContent::Control(control) => control.feed(input, &mut news)?,
            UniContent::QpackEncoder => check_encoder_instructions(input)?,
            UniContent::AwaitingType | UniContent::Dropped => {}
        }
        Ok(news)
    }

    /// The stream's FIN. A control or QPACK stream must never end (RFC 9114 §6.2.1,
    /// RFC 9204 §4.2); other streams may, even before their type arrived.
    pub(crate) fn finish(&self) -> Result<(), H3Error> {
        match self.kind {
            None | Some(UniStreamKind::Unknown(_)) => Ok(()),
            Some(_) => Err(H3Error::connection(
                ErrorCode::CLOSED_CRITICAL_STREAM,
                "the server closed its control stream or a QPACK stream",
            )),
        }
    }

    /// The stream's kind, once its type has arrived.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> Option<UniStreamKind> {
        self.kind
    }

    /// Takes stream-type bytes from `input` until the varint is whole.
    fn read_type(&mut self, input: &mut &[u8]) -> Option<u64> {
        while let Some((&byte, rest)) = input.split_first() {
            *input = rest;
            // A varint is whole by its eighth byte, so the array cannot overflow.
            let slot = self.stream_type.get_mut(self.stream_type_len)?;
            *slot = byte;
            self.stream_type_len += 1;
            if let Ok((stream_type, _)) = decode_varint(&self.stream_type[..self.stream_type_len]) {
                return Some(stream_type);
            }
        }
        None
    }
}

/// The only encoder instruction valid towards a table of capacity 0 is Set Dynamic Table
/// Capacity 0, the single byte 0x20 (RFC 9204 §4.3.1); any insertion needs room we refused.
fn check_encoder_instructions(input: &[u8]) -> Result<(), H3Error> {
    if input.iter().all(|&b| b == 0x20) {
        Ok(())
    } else {
        Err(H3Error::connection(
            ErrorCode::QPACK_ENCODER_STREAM_ERROR,
            "the server's QPACK encoder uses a dynamic table, whose capacity we set to 0",
        ))
    }
}

/// Which critical streams a connection's server has opened: each at most once (RFC 9114
/// §6.2.1, RFC 9204 §4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CriticalStreams {
    control: bool,
    qpack_encoder: bool,
    qpack_decoder: bool,
}

impl CriticalStreams {
    /// Notes a new stream of `kind`; a second one of a critical kind is an error.
    pub(crate) fn claim(&mut self, kind: UniStreamKind) -> Result<(), H3Error> {
        let seen = match kind {
            UniStreamKind::Control => &mut self.control,
            UniStreamKind::QpackEncoder => &mut self.qpack_encoder,
            UniStreamKind::QpackDecoder => &mut self.qpack_decoder,
            UniStreamKind::Unknown(_) => return Ok(()),
        };
        if std::mem::replace(seen, true) {
            return Err(H3Error::connection(
                ErrorCode::STREAM_CREATION_ERROR,
                "the server opened a second control or QPACK stream",
            ));
        }
        Ok(())
    }
}

/// The control stream's frames, after its type.
#[derive(Debug, Default)]
struct ControlStreamParser {
    header: FrameHeaderReader,
    reading: ControlReading,
    payload: PayloadBuffer,
    state: ControlState,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ControlReading {
    #[default]
    FrameHeader,
    /// A frame read whole, of this type.
    Gathering(u64),
    /// A frame we ignore, this many bytes still to come.
    Skipped(u64),
}

/// What the control stream has said so far.
#[derive(Debug, Clone, Copy, Default)]
struct ControlState {
    settings_seen: bool,
    goaway: Option<u64>,
}

impl ControlStreamParser {
    fn feed(&mut self, mut input: &[u8], news: &mut ServerNews) -> Result<(), H3Error> {
        while !input.is_empty() {
            match self.reading {
                ControlReading::FrameHeader => {
                    if let Some(header) = self.header.read(&mut input) {
                        self.begin_frame(header, news)?;
                    }
                }
                ControlReading::Gathering(frame_type) => {
                    self.gather(frame_type, &mut input, news)?
                }
                ControlReading::Skipped(left) => {
                    let taken = usize::try_from(left).map_or(input.len(), |l| l.min(input.len()));
                    input = &input[taken..];
                    let left = left - taken as u64;
                    self.reading = if left == 0 {
                        ControlReading::FrameHeader
                    } else {
                        ControlReading::Skipped(left)
                    };
                }
            }
        }
        Ok(())
    }

    fn begin_frame(&mut self, header: FrameHeader, news: &mut ServerNews) -> Result<(), H3Error> {
        let FrameHeader {
            frame_type,
            payload_len,
        } = header;
        if !self.state.settings_seen && frame_type != SETTINGS {
            return Err(H3Error::connection(
                ErrorCode::MISSING_SETTINGS,
                "the server's control stream does not start with SETTINGS",
            ));
        }
        let limit = match frame_type {
            SETTINGS if self.state.settings_seen => {
                return Err(H3Error::unexpected("a second SETTINGS frame"))
            }
            SETTINGS => MAX_SETTINGS_FRAME,
            // Each carries one varint.
            GOAWAY | CANCEL_PUSH => MAX_VARINT_LEN,
            MAX_PUSH_ID => return Err(H3Error::unexpected("MAX_PUSH_ID, which only clients send")),
            DATA | HEADERS | PUSH_PROMISE => {
                return Err(H3Error::unexpected(
                    "a request-stream frame on the control stream",
                ))
            }
            other if is_http2_only(other) => {
                return Err(H3Error::unexpected(
                    "an HTTP/2 frame type on the control stream",
                ))
            }
            _ => {
                if payload_len > 0 {
                    self.reading = ControlReading::Skipped(payload_len);
                }
                return Ok(());
            }
        };
        let too_large = if frame_type == SETTINGS {
            H3Error::connection(
                ErrorCode::EXCESSIVE_LOAD,
                "a SETTINGS frame larger than we take",
            )
        } else {
            H3Error::frame("a GOAWAY or CANCEL_PUSH frame longer than its one varint")
        };
        self.payload.start(payload_len, limit, too_large)?;
        self.reading = ControlReading::Gathering(frame_type);
        // An empty payload is complete now: no further byte would trigger it.
        self.gather(frame_type, &mut &[][..], news)
    }

    fn gather(
        &mut self,
        frame_type: u64,
        input: &mut &[u8],
        news: &mut ServerNews,
    ) -> Result<(), H3Error> {
        let Some(payload) = self.payload.gather(input) else {
            return Ok(());
        };
        self.reading = ControlReading::FrameHeader;
        read_control_frame(frame_type, payload, &mut self.state, news)
    }
}

fn read_control_frame(
    frame_type: u64,
    payload: &[u8],
    state: &mut ControlState,
    news: &mut ServerNews,
) -> Result<(), H3Error> {
    match frame_type {
        SETTINGS => {
            news.settings = Some(ServerSettings::parse(payload)?);
            state.settings_seen = true;
        }
        GOAWAY => {
            let stream_id = single_varint(payload)?;
            // Only client-initiated bidirectional streams (ID ≡ 0 mod 4) carry requests.
            if stream_id % 4 != 0 {
                return Err(id_error(
                    "GOAWAY names a stream that is not a request stream",
                ));
            }
            if state.goaway.is_some_and(|earlier| stream_id > earlier) {
                return Err(id_error("a GOAWAY's stream ID is above an earlier one's"));
            }
            state.goaway = Some(stream_id);
            news.goaway = Some(stream_id);
        }
        _ => {
            // CANCEL_PUSH: well-formed or not, it names a push ID above the maximum, since
            // we allowed none (RFC 9114 §7.2.3).
            single_varint(payload)?;
            return Err(id_error("CANCEL_PUSH, though we allowed no push"));
        }
    }
    Ok(())
}

fn id_error(reason: &'static str) -> H3Error {
    H3Error::connection(ErrorCode::ID_ERROR, reason)
}

/// A payload that must be exactly one varint.
fn single_varint(payload: &[u8]) -> Result<u64, H3Error> {
    match decode_varint(payload) {
        Ok((value, len)) if len == payload.len() => Ok(value),
        _ => Err(H3Error::frame(
            "a frame whose payload is not exactly one varint",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h3::frame::push_frame_header;
    use crate::http::h3::varint::push_varint;

    fn frame(frame_type: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_frame_header(frame_type, payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    fn control(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0x00];
        frames.iter().for_each(|f| out.extend(f));
        out
    }

    fn settings() -> Vec<u8> {
        frame(SETTINGS, &[0x06, 0x44, 0x00, 0x21, 0x00])
    }

    fn goaway(stream_id: u64) -> Vec<u8> {
        let mut id = Vec::new();
        push_varint(stream_id, &mut id);
        frame(GOAWAY, &id)
    }

    /// Feeds the stream one byte at a time, gathering the news.
    fn feed_bytes(stream: &[u8]) -> Result<(UniStreamParser, Vec<ServerNews>), H3Error> {
        let mut parser = UniStreamParser::default();
        let mut news = Vec::new();
        parser.feed(&[])?;
        for byte in stream {
            let fed = parser.feed(std::slice::from_ref(byte))?;
            if fed != ServerNews::default() {
                news.push(fed);
            }
        }
        Ok((parser, news))
    }

    fn code(stream: &[u8]) -> ErrorCode {
        let whole = UniStreamParser::default().feed(stream).unwrap_err().code;
        let bytewise = feed_bytes(stream).err().map(|e| e.code);
        assert_eq!(bytewise, Some(whole), "{stream:02x?}");
        whole
    }

    #[test]
    fn control_stream_reports_settings_and_goaway() {
        let stream = control(&[settings(), frame(0x21, b"grease"), goaway(8), goaway(4)]);
        let (parser, news) = feed_bytes(&stream).unwrap();
        let server = ServerSettings {
            max_field_section_size: Some(0x0400),
            ..ServerSettings::default()
        };
        let expected = [
            ServerNews {
                kind: Some(UniStreamKind::Control),
                ..ServerNews::default()
            },
            ServerNews {
                settings: Some(server),
                ..ServerNews::default()
            },
            ServerNews {
                goaway: Some(8),
                ..ServerNews::default()
            },
            ServerNews {
                goaway: Some(4),
                ..ServerNews::default()
            },
        ];
        assert_eq!(news, expected);
        assert_eq!(parser.kind(), Some(UniStreamKind::Control));
        assert_eq!(
            parser.finish().unwrap_err().code,
            ErrorCode::CLOSED_CRITICAL_STREAM
        );

        let all = UniStreamParser::default().feed(&stream).unwrap();
        let expected_all = ServerNews {
            kind: Some(UniStreamKind::Control),
            settings: Some(server),
            goaway: Some(4),
        };
        assert_eq!(all, expected_all);
    }

    #[test]
    fn control_stream_errors() {
        assert_eq!(code(&control(&[goaway(0)])), ErrorCode::MISSING_SETTINGS);
        assert_eq!(
            code(&control(&[frame(0x21, b"")])),
            ErrorCode::MISSING_SETTINGS
        );
        let after_settings = |f: Vec<u8>| control(&[settings(), f]);
        assert_eq!(
            code(&after_settings(settings())),
            ErrorCode::FRAME_UNEXPECTED
        );
        for frame_type in [
            DATA,
            HEADERS,
            PUSH_PROMISE,
            MAX_PUSH_ID,
            0x02,
            0x06,
            0x08,
            0x09,
        ] {
            let stream = after_settings(frame(frame_type, &[0x00]));
            assert_eq!(
                code(&stream),
                ErrorCode::FRAME_UNEXPECTED,
                "{frame_type:#x}"
            );
        }
        assert_eq!(
            code(&after_settings(frame(CANCEL_PUSH, &[0x00]))),
            ErrorCode::ID_ERROR
        );
        assert_eq!(
            code(&after_settings(frame(GOAWAY, &[0x00, 0x00]))),
            ErrorCode::FRAME_ERROR
        );
        assert_eq!(
            code(&after_settings(frame(GOAWAY, &[]))),
            ErrorCode::FRAME_ERROR
        );
        assert_eq!(
            code(&after_settings(frame(GOAWAY, &[0x40]))),
            ErrorCode::FRAME_ERROR
        );
        assert_eq!(code(&after_settings(goaway(3))), ErrorCode::ID_ERROR);
        assert_eq!(
            code(&control(&[settings(), goaway(4), goaway(8)])),
            ErrorCode::ID_ERROR
        );
        let duplicate = control(&[frame(SETTINGS, &[0x01, 0x00, 0x01, 0x00])]);
        assert_eq!(code(&duplicate), ErrorCode::SETTINGS_ERROR);
        let huge = control(&[frame(SETTINGS, &vec![0x21; MAX_SETTINGS_FRAME + 2])]);
        assert_eq!(code(&huge), ErrorCode::EXCESSIVE_LOAD);
    }

    #[test]
    fn push_streams_are_refused() {
        assert_eq!(code(&[0x01, 0x00]), ErrorCode::ID_ERROR);
    }

    #[test]
    fn qpack_streams_are_read_and_must_stay_open() {
        // Set Dynamic Table Capacity 0, twice: the only instruction a zero table allows.
        let (encoder, _) = feed_bytes(&[0x02, 0x20, 0x20]).unwrap();
        assert_eq!(encoder.kind(), Some(UniStreamKind::QpackEncoder));
        assert_eq!(
            encoder.finish().unwrap_err().code,
            ErrorCode::CLOSED_CRITICAL_STREAM
        );
        // Set Dynamic Table Capacity 4096.
        assert_eq!(
            code(&[0x02, 0x3f, 0xe1, 0x1f]),
            ErrorCode::QPACK_ENCODER_STREAM_ERROR
        );
        // Anything on the decoder stream is dropped.
        let (decoder, _) = feed_bytes(&[0x03, 0x81, 0x40, 0x01]).unwrap();
        assert_eq!(decoder.kind(), Some(UniStreamKind::QpackDecoder));
        assert_eq!(
            decoder.finish().unwrap_err().code,
            ErrorCode::CLOSED_CRITICAL_STREAM
        );
    }

    #[test]
    fn unknown_and_grease_streams_are_dropped() {
        // Stream type 0x1f * 5 + 0x21 = 0x7a, a two-byte varint.
        let mut stream = Vec::new();
        push_varint(0x7a, &mut stream);
        stream.extend_from_slice(&[0xff; 40]);
        let (parser, news) = feed_bytes(&stream).unwrap();
        assert_eq!(news[0].kind, Some(UniStreamKind::Unknown(0x7a)));
        assert_eq!(parser.finish(), Ok(()));
        // A stream closed before its type arrived is no error either.
        assert_eq!(UniStreamParser::default().finish(), Ok(()));
    }

    #[test]
    fn a_second_critical_stream_is_an_error() {
        let mut streams = CriticalStreams::default();
        for kind in [
            UniStreamKind::Control,
            UniStreamKind::QpackEncoder,
            UniStreamKind::QpackDecoder,
        ] {
            assert_eq!(streams.claim(kind), Ok(()));
        }
        assert_eq!(streams.claim(UniStreamKind::Unknown(0x21)), Ok(()));
        assert_eq!(streams.claim(UniStreamKind::Unknown(0x21)), Ok(()));
        let error = streams.claim(UniStreamKind::Control).unwrap_err();
        assert_eq!(error.code, ErrorCode::STREAM_CREATION_ERROR);
    }
}
