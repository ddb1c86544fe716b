//! Wall-clock times in the API's formats (RFC 3339, UTC), on jiff's calendar (k8s-openapi's
//! own): the node agent only needs "now" at the API's precisions and parsing its own
//! timestamps back.

use std::time::SystemTime;

use jiff::Timestamp;

/// The epoch for times outside jiff's years -9999..=9999 (no sane clock reads one).
fn instant(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `2026-12-01T12:33:22Z`: the precision of `metav1.Time`.
pub fn rfc3339(t: SystemTime) -> String {
    format!("{:.0}", instant(t))
}

/// `2026-12-01T12:33:22.123456789Z`: the precision of CRI log lines.
pub fn rfc3339_nanos(t: SystemTime) -> String {
    format!("{:.9}", instant(t))
}

/// `2026-12-01T12:33:22.123456Z`: the precision of `metav1.MicroTime` (lease renewals).
pub fn rfc3339_micros(t: SystemTime) -> String {
    format!("{:.6}", instant(t))
}

pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Parses what `rfc3339`/`rfc3339_nanos` write (and offsets `+hh:mm`, which clients may send in
/// `sinceTime`). None for anything else.
pub fn parse(s: &str) -> Option<SystemTime> {
    s.parse::<Timestamp>().ok().map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_and_parses_back() {
        let t = UNIX_EPOCH + Duration::new(1_796_128_402, 123_456_789);
        assert_eq!(rfc3339(t), "2026-12-01T12:33:22Z");
        assert_eq!(rfc3339_nanos(t), "2026-12-01T12:33:22.123456789Z");
        assert_eq!(parse("2026-12-01T12:33:22.123456789Z"), Some(t));
        assert_eq!(
            parse("2026-12-01T13:33:22+01:00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_796_128_402))
        );
        assert_eq!(parse("yesterday"), None);
        assert_eq!(rfc3339_micros(t), "2026-12-01T12:33:22.123456Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_nanos(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
    }
}
