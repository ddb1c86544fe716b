//! The one error every part of the codec returns: which HTTP/3 error code the peer gets
//! (RFC 9114 §8.1, RFC 9204 §6), whether it closes the connection or only resets the stream,
//! and a sentence for the person reading the run's errors.

use std::fmt;

/// An HTTP/3 or QPACK error code, as sent in CONNECTION_CLOSE or RESET_STREAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ErrorCode(pub u64);

impl ErrorCode {
    pub(crate) const NO_ERROR: Self = Self(0x0100);
    pub(crate) const GENERAL_PROTOCOL_ERROR: Self = Self(0x0101);
    pub(crate) const INTERNAL_ERROR: Self = Self(0x0102);
    pub(crate) const STREAM_CREATION_ERROR: Self = Self(0x0103);
    pub(crate) const CLOSED_CRITICAL_STREAM: Self = Self(0x0104);
    pub(crate) const FRAME_UNEXPECTED: Self = Self(0x0105);
    pub(crate) const FRAME_ERROR: Self = Self(0x0106);
    pub(crate) const EXCESSIVE_LOAD: Self = Self(0x0107);
    pub(crate) const ID_ERROR: Self = Self(0x0108);
    pub(crate) const SETTINGS_ERROR: Self = Self(0x0109);
    pub(crate) const MISSING_SETTINGS: Self = Self(0x010a);
    pub(crate) const REQUEST_REJECTED: Self = Self(0x010b);
    pub(crate) const REQUEST_CANCELLED: Self = Self(0x010c);
    pub(crate) const MESSAGE_ERROR: Self = Self(0x010e);
    pub(crate) const QPACK_DECOMPRESSION_FAILED: Self = Self(0x0200);
    pub(crate) const QPACK_ENCODER_STREAM_ERROR: Self = Self(0x0201);

    /// The RFC's name, for messages; codes we never produce print as their number alone.
    pub(crate) fn name(self) -> Option<&'static str> {
        let name = match self.0 {
            0x0100 => "H3_NO_ERROR",
            0x0101 => "H3_GENERAL_PROTOCOL_ERROR",
            0x0102 => "H3_INTERNAL_ERROR",
            0x0103 => "H3_STREAM_CREATION_ERROR",
            0x0104 => "H3_CLOSED_CRITICAL_STREAM",
            0x0105 => "H3_FRAME_UNEXPECTED",
            0x0106 => "H3_FRAME_ERROR",
            0x0107 => "H3_EXCESSIVE_LOAD",
            0x0108 => "H3_ID_ERROR",
            0x0109 => "H3_SETTINGS_ERROR",
            0x010a => "H3_MISSING_SETTINGS",
            0x010b => "H3_REQUEST_REJECTED",
            0x010c => "H3_REQUEST_CANCELLED",
            0x010d => "H3_REQUEST_INCOMPLETE",
            0x010e => "H3_MESSAGE_ERROR",
            0x010f => "H3_CONNECT_ERROR",
            0x0110 => "H3_VERSION_FALLBACK",
            0x0200 => "QPACK_DECOMPRESSION_FAILED",
            0x0201 => "QPACK_ENCODER_STREAM_ERROR",
            0x0202 => "QPACK_DECODER_STREAM_ERROR",
            _ => return None,
        };
        Some(name)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} (0x{:x})", self.0),
            None => write!(f, "0x{:x}", self.0),
        }
    }
}

/// What the error ends: RFC 9114 makes most errors connection errors, but a malformed
/// response (§4.1.2) only costs its own stream, and the worker should reset just that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorScope {
    Connection,
    Stream,
}

/// A protocol error: almost always in what the server sent (the reason says what).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/3: {reason} ({code})")]
pub(crate) struct H3Error {
    pub code: ErrorCode,
    pub scope: ErrorScope,
    pub reason: &'static str,
}

impl H3Error {
    pub(crate) const fn connection(code: ErrorCode, reason: &'static str) -> Self {
        Self {
            code,
            scope: ErrorScope::Connection,
            reason,
        }
    }

    /// An error that ends only the request stream it came on.
    pub(crate) const fn stream(code: ErrorCode, reason: &'static str) -> Self {
        Self {
            code,
            scope: ErrorScope::Stream,
            reason,
        }
    }

    /// A malformed response: the stream is reset with H3_MESSAGE_ERROR, the connection lives.
    pub(crate) const fn malformed(reason: &'static str) -> Self {
        Self::stream(ErrorCode::MESSAGE_ERROR, reason)
    }

    pub(crate) const fn frame(reason: &'static str) -> Self {
        Self::connection(ErrorCode::FRAME_ERROR, reason)
    }

    pub(crate) const fn unexpected(reason: &'static str) -> Self {
        Self::connection(ErrorCode::FRAME_UNEXPECTED, reason)
    }

    pub(crate) const fn qpack(reason: &'static str) -> Self {
        Self::connection(ErrorCode::QPACK_DECOMPRESSION_FAILED, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_the_code_and_its_number() {
        let error = H3Error::unexpected("DATA before the response's HEADERS");
        assert_eq!(
            error.to_string(),
            "HTTP/3: DATA before the response's HEADERS (H3_FRAME_UNEXPECTED (0x105))"
        );
        assert_eq!(ErrorCode(0x21).to_string(), "0x21");
    }
}
