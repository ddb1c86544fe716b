//! Wall-clock formatting: RFC 3339 for results, IMF-fixdate for the HTTP `Date` header. The
//! calendar is jiff's (already in the tree through k8s-openapi), tested by others.

use std::time::SystemTime;

use jiff::fmt::rfc2822::DateTimePrinter;
use jiff::Timestamp;

/// A SystemTime as jiff's instant; the epoch for the (unreachable on a sane clock) times
/// outside jiff's range of years -9999..=9999.
fn instant(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn rfc3339(t: SystemTime) -> String {
    instant(t).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// RFC 3339 UTC with microseconds: 2026-12-01T05:15:00.123456Z. Results from several
/// machines line up on these.
pub fn rfc3339_micros(t: SystemTime) -> String {
    format!("{:.6}", instant(t))
}

/// Reads an RFC 3339 time: `2026-12-01T05:15:00Z`, with optional fraction and a `Z` or
/// `±HH:MM` offset; None when it is not one (a time without an offset is not an instant).
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    text.parse::<Timestamp>().ok().map(SystemTime::from)
}

/// Whether `text` is an RFC 3339 time that [`parse_rfc3339`] refuses only for lying beyond
/// the instants it represents (jiff's, from year -9999 to 9999-12-30T22:00Z, e.g.
/// 9999-12-31T23:59:59Z), so that an error can say that rather than "not RFC 3339".
pub fn rfc3339_out_of_range(text: &str) -> bool {
    use jiff::fmt::temporal::Pieces;
    parse_rfc3339(text).is_none()
        && Pieces::parse(text).is_ok_and(|p| p.time().is_some() && p.offset().is_some())
}

/// A name safe for files: 20261201T051500Z.
pub fn compact(t: SystemTime) -> String {
    instant(t).strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// IMF-fixdate (RFC 9110 section 5.6.7): `Mon, 01 Dec 2025 05:15:00 GMT`.
pub fn http_date(t: SystemTime) -> String {
    DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&instant(t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn known_instants() {
        let t = UNIX_EPOCH + Duration::from_secs(1_764_566_100); // 2025-12-01 05:15:00 UTC
        assert_eq!(rfc3339(t), "2025-12-01T05:15:00Z");
        assert_eq!(http_date(t), "Mon, 01 Dec 2025 05:15:00 GMT");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_micros(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(compact(t), "20251201T051500Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_valid_time_beyond_the_calendars_reach_is_told_from_a_malformed_one() {
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), None);
        assert!(rfc3339_out_of_range("9999-12-31T23:59:59Z"));
        assert!(rfc3339_out_of_range("9999-12-31T00:00:00.5+01:00"));
        for text in [
            "2026-13-01T00:00:00Z",
            "yesterday",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00Z",
        ] {
            assert!(!rfc3339_out_of_range(text), "{text}");
        }
    }

    #[test]
    fn micros_round_trip_and_offsets() {
        let t = UNIX_EPOCH + Duration::new(1_764_566_100, 123_456_000);
        let text = rfc3339_micros(t);
        assert_eq!(text, "2025-12-01T05:15:00.123456Z");
        assert_eq!(parse_rfc3339(&text), Some(t));
        assert_eq!(
            parse_rfc3339("2025-12-01T06:15:00+01:00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_764_566_100))
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00Z"),
            Some(UNIX_EPOCH + Duration::from_secs(951_782_400))
        );
        for bad in [
            "",
            "2025-13-01T00:00:00Z",
            "2025-12-01 05:15",
            "2025-12-01T05:15:00",
            "2025-12-01T05:15:00.Z",
            "x025-12-01T05:15:00Z",
            "2025-02-30T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
