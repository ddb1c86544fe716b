//! SETTINGS (RFC 9114 §7.2.4): what the client announces first on its control stream, and
//! what the server's SETTINGS frame says.

use super::error::{ErrorCode, H3Error};
use super::frame::{push_frame_header, SETTINGS};
use super::varint::{decode_varint, push_varint, MAX_VARINT};

/// The stream type of a control stream (RFC 9114 §6.2.1).
pub(crate) const CONTROL_STREAM_TYPE: u64 = 0x00;

const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
const QPACK_BLOCKED_STREAMS: u64 = 0x07;

/// HTTP/2's setting identifiers, reserved in HTTP/3: sending one is H3_SETTINGS_ERROR.
fn is_http2_setting(id: u64) -> bool {
    matches!(id, 0x02..=0x05)
}

/// What the client announces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClientSettings {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest response field section we accept
    /// (values past 2^62-1 are sent as 2^62-1, no less unlimited); `None` leaves it unsaid.
    pub max_field_section_size: Option<u64>,
}

impl ClientSettings {
    /// The bytes that open the client's control stream: its stream type, then SETTINGS with
    /// a QPACK table capacity and blocked-stream count of 0, so that the server's encoder
    /// may never use a dynamic table and our decoder needs none. (Zero is the default of
    /// both; saying so costs four bytes and reads plainly in a capture.) Written once per
    /// connection, before any request.
    pub(crate) fn control_stream_prefix(&self) -> Vec<u8> {
        let mut settings = vec![
            QPACK_MAX_TABLE_CAPACITY as u8,
            0,
            QPACK_BLOCKED_STREAMS as u8,
            0,
        ];
        if let Some(size) = self.max_field_section_size {
            settings.push(MAX_FIELD_SECTION_SIZE as u8);
            // Clamped into range, so the push cannot be refused.
            let _ = push_varint(size.min(MAX_VARINT), &mut settings);
        }
        let mut out = Vec::with_capacity(settings.len() + 3);
        out.push(CONTROL_STREAM_TYPE as u8);
        let _ = push_frame_header(SETTINGS, settings.len() as u64, &mut out);
        out.extend_from_slice(&settings);
        out
    }
}

/// What the server's SETTINGS frame said that a client can act on; settings it leaves out
/// have their defaults (RFC 9114 §7.2.4.1, RFC 9204 §5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServerSettings {
    /// How large a request field section the server accepts; `None` is unlimited.
    pub max_field_section_size: Option<u64>,
    /// The dynamic table the server would let our encoder use (ours never does).
    pub qpack_max_table_capacity: u64,
    pub qpack_blocked_streams: u64,
}

impl ServerSettings {
    /// Parses a whole SETTINGS payload: pairs of varints, identifier and value.
    pub(crate) fn parse(payload: &[u8]) -> Result<Self, H3Error> {
        let mut settings = ServerSettings::default();
        // Identifiers seen, for the duplicates §7.2.4 forbids; unknown ones (grease among
        // them) are not remembered: only the known ones can conflict in what they mean.
        let mut seen = [false; 3];
        let mut rest = payload;
        while !rest.is_empty() {
            let (id, used) = decode_varint(rest).map_err(|_| TRUNCATED)?;
            rest = &rest[used..];
            let (value, used) = decode_varint(rest).map_err(|_| TRUNCATED)?;
            rest = &rest[used..];
            if is_http2_setting(id) {
                return Err(settings_error("the server sent an HTTP/2 setting"));
            }
            let slot = match id {
                QPACK_MAX_TABLE_CAPACITY => {
                    settings.qpack_max_table_capacity = value;
                    0
                }
                MAX_FIELD_SECTION_SIZE => {
                    settings.max_field_section_size = Some(value);
                    1
                }
                QPACK_BLOCKED_STREAMS => {
                    settings.qpack_blocked_streams = value;
                    2
                }
                _ => continue,
            };
            if std::mem::replace(&mut seen[slot], true) {
                return Err(settings_error("the server sent a setting twice"));
            }
        }
        Ok(settings)
    }
}

const TRUNCATED: H3Error = H3Error::frame("a SETTINGS frame ends inside a setting");

fn settings_error(reason: &'static str) -> H3Error {
    H3Error::connection(ErrorCode::SETTINGS_ERROR, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_stream_prefix_is_type_then_settings() {
        let plain = ClientSettings::default().control_stream_prefix();
        assert_eq!(plain, [0x00, 0x04, 0x04, 0x01, 0x00, 0x07, 0x00]);
        let limited = ClientSettings {
            max_field_section_size: Some(16_384),
        };
        assert_eq!(
            limited.control_stream_prefix(),
            [0x00, 0x04, 0x09, 0x01, 0x00, 0x07, 0x00, 0x06, 0x80, 0x00, 0x40, 0x00]
        );
    }

    #[test]
    fn parses_known_settings_and_skips_grease() {
        // Capacity 4096, grease 0x21 = 7, max field section 65536, blocked 100.
        let payload = [
            0x01, 0x50, 0x00, 0x21, 0x07, 0x06, 0x80, 0x01, 0x00, 0x00, 0x07, 0x40, 0x64,
        ];
        assert_eq!(
            ServerSettings::parse(&payload),
            Ok(ServerSettings {
                max_field_section_size: Some(65_536),
                qpack_max_table_capacity: 4096,
                qpack_blocked_streams: 100,
            })
        );
        assert_eq!(ServerSettings::parse(&[]), Ok(ServerSettings::default()));
    }

    #[test]
    fn refuses_duplicates_http2_settings_and_truncation() {
        let code = |payload: &[u8]| ServerSettings::parse(payload).unwrap_err().code;
        assert_eq!(code(&[0x06, 0x01, 0x06, 0x02]), ErrorCode::SETTINGS_ERROR);
        assert_eq!(code(&[0x02, 0x00]), ErrorCode::SETTINGS_ERROR);
        assert_eq!(code(&[0x06]), ErrorCode::FRAME_ERROR);
        assert_eq!(code(&[0x06, 0x40]), ErrorCode::FRAME_ERROR);
    }
}
