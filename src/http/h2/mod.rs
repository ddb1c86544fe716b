//! HTTP/2 on the wire (RFC 9113): frames ([`frame`]), the request's header block encoded once
//! and the response's status read from its block ([`hpack`]).
//!
//! The connection's state machine (streams, windows, GOAWAY) is the engine's; this module
//! only turns bytes into events and requests into bytes, without allocating per request.

pub mod frame;
pub mod hpack;

/// What a client sends first on every HTTP/2 connection (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Every window starts at this size (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest a window may grow (2^31 - 1).
pub const MAX_WINDOW: u32 = 0x7fff_ffff;

/// HTTP/2 error codes (RFC 9113 §7), as RST_STREAM and GOAWAY carry them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    NoError,
    Protocol,
    Internal,
    FlowControl,
    SettingsTimeout,
    StreamClosed,
    FrameSize,
    RefusedStream,
    Cancel,
    Compression,
    Connect,
    EnhanceYourCalm,
    InadequateSecurity,
    Http11Required,
    /// A code RFC 9113 does not define (to be treated as INTERNAL_ERROR, but counted as sent).
    Unknown(u32),
}

impl ErrorCode {
    /// The code's name as RFC 9113 spells it, in lower case (`refused_stream`): the key the
    /// result counts it under.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "no_error",
            ErrorCode::Protocol => "protocol_error",
            ErrorCode::Internal => "internal_error",
            ErrorCode::FlowControl => "flow_control_error",
            ErrorCode::SettingsTimeout => "settings_timeout",
            ErrorCode::StreamClosed => "stream_closed",
            ErrorCode::FrameSize => "frame_size_error",
            ErrorCode::RefusedStream => "refused_stream",
            ErrorCode::Cancel => "cancel",
            ErrorCode::Compression => "compression_error",
            ErrorCode::Connect => "connect_error",
            ErrorCode::EnhanceYourCalm => "enhance_your_calm",
            ErrorCode::InadequateSecurity => "inadequate_security",
            ErrorCode::Http11Required => "http_1_1_required",
            ErrorCode::Unknown(_) => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Unknown(c) => write!(f, "error code {c:#x}"),
            c => f.write_str(&c.name().to_ascii_uppercase()),
        }
    }
}

const CODES: [ErrorCode; 14] = [
    ErrorCode::NoError,
    ErrorCode::Protocol,
    ErrorCode::Internal,
    ErrorCode::FlowControl,
    ErrorCode::SettingsTimeout,
    ErrorCode::StreamClosed,
    ErrorCode::FrameSize,
    ErrorCode::RefusedStream,
    ErrorCode::Cancel,
    ErrorCode::Compression,
    ErrorCode::Connect,
    ErrorCode::EnhanceYourCalm,
    ErrorCode::InadequateSecurity,
    ErrorCode::Http11Required,
];

impl From<u32> for ErrorCode {
    fn from(code: u32) -> ErrorCode {
        CODES
            .get(code as usize)
            .copied()
            .unwrap_or(ErrorCode::Unknown(code))
    }
}

impl From<ErrorCode> for u32 {
    fn from(code: ErrorCode) -> u32 {
        match code {
            ErrorCode::Unknown(c) => c,
            known => CODES.iter().position(|&c| c == known).unwrap_or(2) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip_through_their_numbers() {
        for n in 0..20u32 {
            assert_eq!(u32::from(ErrorCode::from(n)), n);
        }
        assert_eq!(ErrorCode::from(7), ErrorCode::RefusedStream);
        assert_eq!(ErrorCode::from(0xd).to_string(), "HTTP_1_1_REQUIRED");
        assert_eq!(ErrorCode::from(0x99).to_string(), "error code 0x99");
    }
}
