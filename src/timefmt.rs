//! Wall-clock formatting without a calendar crate: RFC 3339 for results, IMF-fixdate for the
//! HTTP `Date` header.

use std::time::{SystemTime, UNIX_EPOCH};

/// (year, month, day, hour, minute, second, weekday 0=Sunday) of a Unix time, UTC.
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let weekday = (days + 4).rem_euclid(7) as u32;
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60, weekday)
}

pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// RFC 3339 UTC with microseconds: 2026-12-01T05:15:00.123456Z. Results from several
/// machines line up on these.
pub fn rfc3339_micros(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    let us = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}Z")
}

/// Reads an RFC 3339 time: `2026-12-01T05:15:00Z`, with optional fraction and a `Z` or
/// `±HH:MM` offset; None when it is not one.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        for (k, c) in frac.bytes().take(9).enumerate().take(digits) {
            nanos += u64::from(c - b'0') * 10u64.pow(8 - k as u32);
        }
        rest = &frac[digits..];
    }
    // Bytes, not str slices: a multi-byte character must not split a slice (no panic on
    // what a user or another machine wrote).
    let o = rest.as_bytes();
    let digits2 = |b: &[u8]| -> Option<i64> {
        (b.len() == 2 && b.iter().all(u8::is_ascii_digit))
            .then(|| i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'))
    };
    let offset_s: i64 = match o {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let v = digits2(&[*h1, *h2])? * 3600 + digits2(&[*m1, *m2])? * 60;
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    // Howard Hinnant's days-from-civil.
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset_s;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + std::time::Duration::new(secs, nanos as u32))
}

/// A name safe for files: 20261201T051500Z.
pub fn compact(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

pub fn http_date(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s, wd) = civil(t);
    format!(
        "{}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} GMT",
        DAYS[wd as usize],
        MONTHS[mo as usize - 1]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        let t = UNIX_EPOCH + Duration::from_secs(1_764_566_100); // 2025-12-01 05:15:00 UTC
        assert_eq!(rfc3339(t), "2025-12-01T05:15:00Z");
        assert_eq!(http_date(t), "Mon, 01 Dec 2025 05:15:00 GMT");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
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
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
