//! Wall-clock times in the API's formats (RFC 3339, UTC) without a date library: the node
//! agent only needs "now" at the API's precisions and parsing its own timestamps back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds and nanoseconds since the epoch.
fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `2026-12-01T12:33:22Z`: the precision of `metav1.Time`.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = since_epoch(t).as_secs() as i64;
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `2026-12-01T12:33:22.123456789Z`: the precision of CRI log lines and `metav1.MicroTime`.
pub fn rfc3339_nanos(t: SystemTime) -> String {
    let d = since_epoch(t);
    let (y, mo, day, h, mi, s) = civil(d.as_secs() as i64);
    format!(
        "{y:04}-{mo:02}-{day:02}T{h:02}:{mi:02}:{s:02}.{:09}Z",
        d.subsec_nanos()
    )
}

/// `2026-12-01T12:33:22.123456Z`: the precision of `metav1.MicroTime` (lease renewals).
pub fn rfc3339_micros(t: SystemTime) -> String {
    let d = since_epoch(t);
    let (y, mo, day, h, mi, s) = civil(d.as_secs() as i64);
    format!(
        "{y:04}-{mo:02}-{day:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
        d.subsec_micros()
    )
}

pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Parses what `rfc3339`/`rfc3339_nanos` write (and offsets `+hh:mm`, which clients may send in
/// `sinceTime`). None for anything else.
pub fn parse(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits: String = frac.chars().take_while(|c| c.is_ascii_digit()).collect();
        rest = &frac[digits.len()..];
        let padded = format!("{digits:0<9}");
        nanos = padded.get(..9)?.parse().ok()?;
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

// Howard Hinnant's civil-from-days and days-from-civil (public domain algorithms).
fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
