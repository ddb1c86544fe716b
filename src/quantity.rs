//! The quantities people type, wherever they type them (flags, SLO conditions): counts with
//! wrk's suffixes (`10k`), rates, plain numbers, latencies with a unit (`10ms`).

/// Parses a count with an optional metric suffix: `100`, `10k`, `1M` (wrk's notation).
pub fn count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000.0),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000.0),
        Some((i, 'g' | 'G')) => (&t[..i], 1_000_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid number {text:?}; use e.g. 100 or 10k"))?;
    if v.is_nan() || v < 0.0 || !v.is_finite() || v * mult > u64::MAX as f64 {
        return Err(format!("number {text:?} is out of range"));
    }
    Ok((v * mult).round() as u64)
}

/// Parses a rate in requests per second (fractions allowed, suffixes as [`count`]).
pub fn rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("invalid rate {text:?}"))
        };
    }
    count(t).map(|v| v as f64)
}

/// A plain non-negative number.
pub fn number(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(v)
}

/// A latency with its unit (us, µs, ms, s), in microseconds.
pub fn micros(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = [("µs", 1.0), ("us", 1.0), ("ms", 1e3), ("s", 1e6)]
        .iter()
        .find_map(|(u, s)| t.strip_suffix(u).map(|n| (n, *s)))
        .ok_or_else(|| match t.to_lowercase() {
            // "1MS": a unit, in the wrong case (M is mega elsewhere).
            lower if lower != t && micros(&lower).is_ok() => {
                format!("{text:?}: a unit is written in lower case (us, ms or s)")
            }
            _ => format!("{text:?} needs a unit (us, ms or s)"),
        })?;
    let v = number(num)? * scale;
    if v > 3.6e12 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_rates() {
        assert_eq!(count("512").unwrap(), 512);
        assert_eq!(count("10k").unwrap(), 10_000);
        assert_eq!(count("1M").unwrap(), 1_000_000);
        assert!(count("abc").is_err());
        assert!(count("-3").is_err());
        assert_eq!(rate("2.5").unwrap(), 2.5);
        assert_eq!(rate("2k").unwrap(), 2000.0);
    }

    #[test]
    fn latencies_need_a_unit() {
        assert_eq!(micros("10ms").unwrap(), 10_000.0);
        assert_eq!(micros(" 1e3us ").unwrap(), 1_000.0);
        assert_eq!(micros("0.05s").unwrap(), 50_000.0);
        assert!(micros("10").is_err());
        assert!(micros("-1ms").is_err());
    }
}
