//! Parsers for the values people type: durations (`10s`, `1m`, `500ms`) and counts (`10k`).

use std::time::Duration;

use crate::quantity::number;
pub use crate::quantity::{count, rate};
pub use crate::slo::parse as slo;

/// h2load's counts (-n, -c, -m, -t): a plain number, as h2load reads them; it refuses `1k`.
pub fn h2load_count(text: &str) -> Result<u64, String> {
    plain_count(text)
        .ok_or_else(|| format!("bad option value: {text} (h2load takes a plain number)"))
}

/// ab's counts (-n, -c): a plain number. ab reads `1k` as 1 (atoi), which no one means:
/// refused rather than run as ab would or as wrk would.
pub fn ab_count(text: &str) -> Result<u64, String> {
    plain_count(text).ok_or_else(|| {
        format!("{text}: ab takes a plain number (it would read {text} as its leading digits); write e.g. 1000")
    })
}

/// wrk's counts (-c, -t): a whole number, optionally with k, M or G (any case), as wrk's
/// `scan_metric` reads them; it refuses `1.5` and `1.5k`.
pub fn wrk_count(text: &str) -> Result<u64, String> {
    wrk_units(text, &[('k', 1_000), ('m', 1_000_000), ('g', 1_000_000_000)]).ok_or_else(|| {
        format!("invalid number {text:?}: wrk takes a whole number, with k, M or G or none (e.g. 100, 10k)")
    })
}

/// wrk's times (-d, --timeout): whole seconds, optionally with s, m or h (any case), as wrk's
/// `scan_time` reads them; it refuses `1.5s` and `500ms`.
pub fn wrk_duration(text: &str) -> Result<Duration, String> {
    let secs = wrk_units(text, &[('s', 1), ('m', 60), ('h', 3_600)]).ok_or_else(|| {
        format!("invalid duration {text:?}: wrk takes whole seconds, minutes or hours (e.g. 10s, 2m, 1h)")
    })?;
    if secs as f64 > LONGEST_DURATION_S {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(Duration::from_secs(secs))
}

/// A whole number and at most one unit letter of `units` (letter, scale), in any case.
fn wrk_units(text: &str, units: &[(char, u64)]) -> Option<u64> {
    let t = text.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let lower = c.to_ascii_lowercase();
            let &(_, scale) = units.iter().find(|(unit, _)| *unit == lower)?;
            (&t[..i], scale)
        }
        _ => (t, 1),
    };
    plain_count(digits)?.checked_mul(scale)
}

fn plain_count(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// The longest duration a user may type, in seconds (about 31 years): beyond it a deadline
/// could not be represented.
const LONGEST_DURATION_S: f64 = 1e9;

/// Parses `10`, `10s`, `1.5m`, `2h`, `500ms`, `250us` (a bare number means seconds, as in wrk
/// and ab).
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {text:?}; use e.g. 10s, 1m, 500ms"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "invalid duration {text:?}; use e.g. 10s, 1m, 500ms"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > LONGEST_DURATION_S {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A listening address: `PORT` (on loopback) or `IP:PORT`.
pub fn listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        format!("invalid address {text:?}: give PORT (on 127.0.0.1) or IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464")
    })
}

/// `--tls-ciphers`: cipher suites by OpenSSL's names (ECDHE-ECDSA-AES128-GCM-SHA256,
/// TLS_AES_128_GCM_SHA256) or rustls's, comma-separated, in the order to offer them; as
/// rustls names them.
pub fn tls_ciphers(text: &str) -> Result<TlsNames, String> {
    names(
        text,
        "cipher suite",
        |w| {
            crate::stats::CIPHER_SUITES
                .iter()
                .find(|(ours, openssl, _)| {
                    w.eq_ignore_ascii_case(ours) || w.eq_ignore_ascii_case(openssl)
                })
                .map(|(ours, _, _)| ours.to_string())
        },
        || crate::stats::CIPHER_SUITES.iter().map(|c| c.1).collect(),
    )
}

/// `--tls-groups`: key-exchange groups (x25519, p-256, p-384), comma-separated, in the order
/// to offer them; as rustls names them.
pub fn tls_groups(text: &str) -> Result<TlsNames, String> {
    names(
        text,
        "key-exchange group",
        |w| {
            crate::stats::KX_GROUPS
                .iter()
                .find(|(ours, aliases, _)| {
                    w.eq_ignore_ascii_case(ours)
                        || aliases.iter().any(|a| w.eq_ignore_ascii_case(a))
                })
                .map(|(ours, _, _)| ours.to_string())
        },
        || crate::stats::KX_GROUPS.iter().map(|g| g.1[0]).collect(),
    )
}

/// TLS names as rustls spells them, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsNames(pub Vec<String>);

/// A comma-separated list of names, each known to `lookup`; an unknown one is named with the
/// known ones.
fn names(
    text: &str,
    what: &str,
    lookup: impl Fn(&str) -> Option<String>,
    known: impl Fn() -> Vec<&'static str>,
) -> Result<TlsNames, String> {
    let mut out = Vec::new();
    for w in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match lookup(w) {
            Some(n) if !out.contains(&n) => out.push(n),
            Some(_) => {}
            None => {
                return Err(format!(
                    "unknown {what} {w:?}; this client speaks {}",
                    known().join(", ")
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no {what} given"));
    }
    Ok(TlsNames(out))
}

/// `--tls-version`: 1.2 or 1.3.
pub fn tls_version(text: &str) -> Result<crate::http::tls::TlsVersion, String> {
    use crate::http::tls::TlsVersion;
    let number = text
        .trim()
        .trim_start_matches("TLSv")
        .trim_start_matches("tls");
    TlsVersion::ALL
        .into_iter()
        .find(|v| v.number() == number)
        .ok_or_else(|| {
            format!("invalid TLS version {text:?}; use 1.2 or 1.3 (older ones are not spoken)")
        })
}

/// h2load's durations: whole seconds by default (`-D 10`), or with a unit (`10s`, `1m`).
pub fn seconds_or_duration(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < LONGEST_DURATION_S => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        Ok(_) => Err(format!(
            "invalid duration {text:?}: use seconds above 0, e.g. 10"
        )),
        Err(_) => duration(text),
    }
}

/// `--alpn`: `h2` (false) or h2 with http/1.1 (true: the server chooses), in either order.
pub fn alpn(text: &str) -> Result<bool, String> {
    let mut offered: Vec<&str> = text.split(',').map(str::trim).collect();
    offered.sort_unstable();
    offered.dedup();
    match offered[..] {
        ["h2"] => Ok(false),
        ["h2", "http/1.1"] => Ok(true),
        _ => Err(format!(
            "invalid ALPN list {text:?}; use h2, or h2,http/1.1 to let the server choose"
        )),
    }
}

/// Parses `I/N`: part I (from 0) of N.
pub fn part(text: &str) -> Result<crate::engine::Part, String> {
    let bad = || format!("invalid part {text:?}; use I/N with 0 <= I < N, e.g. 0/3");
    let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
    let index: u32 = i.trim().parse().map_err(|_| bad())?;
    let count: u32 = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || index >= count {
        return Err(bad());
    }
    Ok(crate::engine::Part { index, count })
}

/// Parses a wall-clock instant: RFC 3339 (`2026-12-01T12:00:00.5Z`) or `@` and Unix seconds
/// (`@1764590400.5`, as GNU date writes them).
pub fn wall_clock(text: &str) -> Result<std::time::SystemTime, String> {
    let bad =
        || format!("invalid time {text:?}; use RFC 3339 (2026-12-01T12:00:00Z) or @UNIX_SECONDS");
    let t = text.trim();
    if let Some(unix) = t.strip_prefix('@') {
        let secs: f64 = unix.parse().map_err(|_| bad())?;
        let d = Duration::try_from_secs_f64(secs).map_err(|_| bad())?;
        return std::time::UNIX_EPOCH.checked_add(d).ok_or_else(bad);
    }
    crate::timefmt::parse_rfc3339(t).ok_or_else(bad)
}

/// Splits `Name: value` into its parts.
pub fn header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("invalid header {text:?}; use \"Name: value\""))?;
    let name = name.trim();
    if !crate::http::is_header_name(name) {
        return Err(format!(
            "invalid header name {name:?} in {text:?}; a name is letters, digits and !#$%&'*+-.^_`|~"
        ));
    }
    if !crate::http::is_header_value(value) {
        return Err(format!(
            "header {name:?} contains a control character (a line break, NUL, escape, DEL); a value is one line of visible characters, spaces and tabs"
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// One h2load `-H`: a header, or the method it overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H2loadHeader {
    Field(String, String),
    Method(String),
}

/// h2load's -H: a header, or a pseudo-header h2load overrides: `:authority` (and `:host`),
/// sent as the request's authority (Host over HTTP/1.1), and `:method`. h2load sends any
/// other pseudo-header as a header of that name, which servers refuse: refused here.
pub fn h2load_header(text: &str) -> Result<H2loadHeader, String> {
    let field = |t: &str| header(t).map(|(n, v)| H2loadHeader::Field(n, v));
    let Some(rest) = text.strip_prefix(':') else {
        return field(text);
    };
    let (name, value) = rest
        .split_once(':')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("-H: invalid header: {text}"))?;
    let value = value.trim();
    if value.is_empty() {
        return Err(format!("-H: invalid header - value missing: {text}"));
    }
    match name.to_ascii_lowercase().as_str() {
        "authority" | "host" => field(&format!("host: {value}")),
        "method" => Ok(H2loadHeader::Method(value.to_string())),
        _ => Err(format!(
            "-H :{name}: archbench h2load overrides :authority (or :host) and :method; h2load sends any other pseudo-header as a header, which servers refuse"
        )),
    }
}

/// A Kubernetes label as `KEY=VALUE` (a node selector).
#[cfg(feature = "k8s")]
pub fn label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("invalid label {text:?}; use KEY=VALUE, e.g. agentpool=load"))?;
    let key_ok = !key.is_empty()
        && key.len() <= 317
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    let value_ok = value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !key_ok || !value_ok {
        return Err(format!(
            "invalid label {text:?}: keys take letters, digits, '-', '_', '.', '/'; values up to 63 of letters, digits, '-', '_', '.'"
        ));
    }
    Ok((key.to_string(), value.to_string()))
}

/// Parses `NAME=PRICE_PER_HOUR` (`arm=0.154`, `intel=$0.192`): what a target's node costs.
pub fn price(text: &str) -> Result<(String, f64), String> {
    let bad = || {
        format!("invalid --cost {text:?}; use NAME=PRICE_PER_HOUR, e.g. arm=0.154 (any currency)")
    };
    let (name, price) = text.split_once('=').ok_or_else(bad)?;
    let price: f64 = price
        .trim()
        .trim_start_matches(['$', '€', '£'])
        .parse()
        .map_err(|_| bad())?;
    if name.trim().is_empty() || !price.is_finite() || price <= 0.0 || price > 1e9 {
        return Err(bad());
    }
    Ok((name.trim().to_string(), price))
}

/// A Kubernetes namespace: an RFC 1123 label (1 to 63 lowercase letters, digits and '-',
/// beginning and ending with a letter or digit), as the API server demands.
#[cfg(feature = "k8s")]
pub fn namespace(text: &str) -> Result<String, String> {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = (1..=63).contains(&text.len())
        && text.starts_with(alnum)
        && text.ends_with(alnum)
        && text.chars().all(|c| alnum(c) || c == '-');
    if ok {
        Ok(text.to_string())
    } else {
        Err("a namespace is 1 to 63 lowercase letters, digits and '-', beginning and ending with a letter or digit (e.g. nginx)".into())
    }
}

/// The loads of a sweep, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Ladder {
    pub loads: Vec<f64>,
    /// Every load was written out (a list, or a range's two ends), none stepped to by a
    /// factor or amount: a connection count among them is meant as typed, so a fraction is a
    /// mistake, where a stepped one is rounded.
    pub written: bool,
}

/// The most steps a ladder may have.
pub const MAX_LADDER_STEPS: usize = 100;

/// Parses a ladder: `1,2,4,8`, `1:512:x2` (from 1, times 2, up to 512, which ends it even
/// when the factor skips it) or `1k:10k:+1k` (from 1k in steps of 1k).
pub fn ladder(text: &str) -> Result<Ladder, String> {
    let bad = |why: &str| {
        format!("invalid ladder {text:?}: {why}; use e.g. 1,2,4,8 or 1:512:x2 or 1k:10k:+1k")
    };
    let positive = |t: &str| {
        rate(t)
            .ok()
            .filter(|v| *v > 0.0 && *v <= 1e9)
            .ok_or_else(|| bad(&format!("{t:?} is not a number above 0, up to 1G")))
    };
    let mut values = Vec::new();
    let parts: Vec<&str> = text.split(':').collect();
    // A list, or a range's two ends.
    let written = parts.len() < 3;
    match parts.as_slice() {
        [list] => {
            for v in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                values.push(positive(v)?);
            }
        }
        [from, to] => {
            // Two loads: the ends of a range (sweep --find-max searches between them).
            let (from, to) = (positive(from)?, positive(to)?);
            if to < from {
                return Err(bad("it ends below where it starts"));
            }
            if to == from {
                return Err(bad(
                    "it ends where it starts; give one load, or a range that grows",
                ));
            }
            values.extend([from, to]);
        }
        [from, to, step] => {
            let (from, to) = (positive(from)?, positive(to)?);
            if to < from {
                return Err(bad("it ends below where it starts"));
            }
            let step = step.trim();
            let next: Box<dyn Fn(f64) -> f64> = if let Some(f) = step.strip_prefix(['x', '*']) {
                let f = number(f).map_err(|w| bad(&w))?;
                if f <= 1.0 {
                    return Err(bad("a factor must be above 1"));
                }
                Box::new(move |v| v * f)
            } else if let Some(d) = step.strip_prefix('+') {
                let d = positive(d)?;
                Box::new(move |v| v + d)
            } else {
                return Err(bad("the step is xFACTOR or +AMOUNT"));
            };
            let mut v = from;
            while v < to * (1.0 + 1e-9) {
                values.push(v);
                if values.len() > MAX_LADDER_STEPS {
                    break;
                }
                v = next(v);
            }
            if values.last().is_some_and(|&last| last < to * (1.0 - 1e-9)) {
                values.push(to);
            }
        }
        _ => return Err(bad("a list, or FROM:TO:STEP")),
    }
    rising(&values).map_err(|why| bad(&why))?;
    Ok(Ladder {
        loads: values,
        written,
    })
}

/// A ladder's loads are some, rise (the knee and "beyond the ladder's top" read the steps as
/// rising loads), and are not too many.
fn rising(values: &[f64]) -> Result<(), String> {
    if values.is_empty() {
        return Err("no load in it".into());
    }
    if let Some(w) = values.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "{} after {}: give the loads in increasing order",
            w[1], w[0]
        ));
    }
    if values.len() > MAX_LADDER_STEPS {
        return Err(format!("more than {MAX_LADDER_STEPS} steps"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_numbers_are_whole_with_wrks_units() {
        assert_eq!(wrk_count("10"), Ok(10));
        assert_eq!(wrk_count("2k"), Ok(2_000));
        assert_eq!(wrk_count("1M"), Ok(1_000_000));
        assert_eq!(wrk_count("1m"), Ok(1_000_000), "wrk's units ignore case");
        assert_eq!(wrk_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(wrk_duration("10S"), Ok(Duration::from_secs(10)));
        assert_eq!(wrk_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(wrk_duration("1h"), Ok(Duration::from_secs(3_600)));
        for refused in [
            "1.5",
            "1.5k",
            "1kb",
            "k",
            "",
            "-1",
            "1x",
            "99999999999999999999",
        ] {
            assert!(wrk_count(refused).is_err(), "{refused:?}");
        }
        for refused in [
            "1.5s",
            "500ms",
            "1d",
            "s",
            "-2s",
            "99999999999999999h",
            "300000h",
        ] {
            assert!(wrk_duration(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(duration("ten").is_err());
        assert!(duration("10x").is_err());
        assert!(duration("").is_err());
        assert!(duration("-1s").is_err());
    }

    #[test]
    fn prices() {
        assert_eq!(price("arm=0.154").unwrap(), ("arm".into(), 0.154));
        assert_eq!(price("intel=$0.192").unwrap(), ("intel".into(), 0.192));
        for bad in [
            "arm",
            "=1",
            "arm=0",
            "arm=-1",
            "arm=free",
            "arm=NaN",
            "arm=1e300",
        ] {
            assert!(
                price(bad).unwrap_err().contains("NAME=PRICE_PER_HOUR"),
                "{bad}"
            );
        }
    }

    #[test]
    #[cfg(feature = "k8s")]
    fn namespaces_are_rfc_1123_labels() {
        for good in ["nginx", "a", "nginx-2", "0ns", &"a".repeat(63)] {
            assert_eq!(namespace(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "Bad_NS!",
            "nginx-",
            "-nginx",
            "NGINX",
            "a.b",
            &"a".repeat(64),
        ] {
            assert!(namespace(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ladders() {
        assert_eq!(ladder("1,2,4,8").unwrap().loads, [1.0, 2.0, 4.0, 8.0]);
        assert_eq!(ladder("1:16:x2").unwrap().loads, [1.0, 2.0, 4.0, 8.0, 16.0]);
        // The end is a step even when the factor skips it.
        assert_eq!(
            ladder("1k:50k:x2").unwrap().loads,
            [1e3, 2e3, 4e3, 8e3, 16e3, 32e3, 50e3]
        );
        assert_eq!(ladder("1k:3k:+1k").unwrap().loads, [1e3, 2e3, 3e3]);
        // Two ends: the range sweep --find-max searches (a ladder of the two loads).
        assert_eq!(ladder("500:4k").unwrap().loads, [500.0, 4e3]);
        for bad in [
            "", "0,1", "-1,2", "8:1:x2", "1:8:x1", "1:8:/2", "1:1G:+1", "2:1", "a,b", "1:2:3:4",
            "2,1", "1,2,2",
        ] {
            let e = ladder(bad).unwrap_err();
            assert!(e.contains("use e.g."), "{bad:?}: {e}");
        }
        assert!(ladder("1,4,2")
            .unwrap_err()
            .contains("2 after 4: give the loads in increasing order"));
    }

    #[cfg(feature = "k8s")]
    #[test]
    fn labels() {
        assert_eq!(
            label("kubernetes.io/arch=amd64").unwrap(),
            ("kubernetes.io/arch".into(), "amd64".into())
        );
        assert_eq!(label("pool=").unwrap(), ("pool".into(), String::new()));
        assert!(label("pool").is_err());
        assert!(label("=x").is_err());
        assert!(label("a b=c").is_err());
        assert!(label("a=b c").is_err());
        assert!(label(&format!("a={}", "v".repeat(64))).is_err());
    }

    #[test]
    fn listening_addresses() {
        let a = |t: &str| listen_addr(t).map(|a| a.to_string());
        assert_eq!(a("9464").unwrap(), "127.0.0.1:9464");
        assert_eq!(a("0.0.0.0:9464").unwrap(), "0.0.0.0:9464");
        assert_eq!(a("[::1]:9464").unwrap(), "[::1]:9464");
        for bad in ["x", "99999", "localhost:9464", ""] {
            assert!(a(bad).unwrap_err().contains("IP:PORT"), "{bad}");
        }
    }

    #[test]
    fn parts_and_times() {
        assert_eq!(
            part("1/3").unwrap(),
            crate::engine::Part { index: 1, count: 3 }
        );
        for bad in ["3/3", "0/0", "1", "a/b", "-1/3", "1/99999999999"] {
            assert!(part(bad).is_err(), "{bad}");
        }
        let t = wall_clock("@1764590400.5").unwrap();
        assert_eq!(
            t.duration_since(std::time::UNIX_EPOCH).unwrap(),
            Duration::from_millis(1_764_590_400_500)
        );
        assert_eq!(wall_clock("2025-12-01T12:00:00.5Z").unwrap(), t);
        for bad in ["@-1", "@nan", "@1e300", "tomorrow", "@"] {
            assert!(wall_clock(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers() {
        assert_eq!(
            header("Accept:  text/html ").unwrap(),
            ("Accept".to_string(), "text/html".to_string())
        );
        assert!(header("novalue").is_err());
        assert!(header("Bad Name: x").is_err());
        // A name is an RFC 9110 token: every tchar, nothing else (it was sent as typed).
        assert!(header("A1!#$%&'*+-.^_`|~: x").is_ok());
        for bad in [
            "\u{dc}n\u{ef}: v",
            "X(y): v",
            "X\"y: v",
            "X/y: v",
            "X@y: v",
            ": v",
        ] {
            let e = header(bad).unwrap_err();
            assert!(e.starts_with("invalid header name"), "{bad:?}: {e}");
        }
        for bad in [
            "X-A: b\nc",
            "X-A: b\rc",
            "X-A: b\0c",
            "X-A: \u{1b}[31mred",
            "X-A: b\u{7f}",
            "X-A: b\u{b}c",
        ] {
            assert!(
                header(bad)
                    .unwrap_err()
                    .contains("contains a control character"),
                "{bad:?}"
            );
        }
        // A tab is a field value's own whitespace, and bytes past ASCII are obs-text.
        assert_eq!(
            header("X-A: b\tc ü"),
            Ok(("X-A".to_string(), "b\tc ü".to_string()))
        );
    }
}

/// What `--rate` takes: a steady rate, or a linear ramp `FROM:TO/LENGTH`.
#[derive(Debug, Clone, PartialEq)]
pub enum RateArg {
    Steady(f64),
    Ramp(crate::stages::Stages),
}

/// `--rate`: `10k`, or `1k:20k/60s` (from 1k to 20k req/s linearly over 60 s).
pub fn rate_or_ramp(text: &str) -> Result<RateArg, String> {
    let Some((rates, length)) = text.split_once('/') else {
        if text.contains(':') {
            return Err(format!(
                "invalid ramp {text:?}: it needs its length, FROM:TO/LENGTH, e.g. 1k:20k/60s"
            ));
        }
        return rate(text).map(RateArg::Steady);
    };
    let (from, to) = rates
        .split_once(':')
        .ok_or_else(|| format!("invalid ramp {text:?}; use FROM:TO/LENGTH, e.g. 1k:20k/60s"))?;
    let stage = crate::stages::Stage {
        length_s: stage_length(length, text)?,
        from: rate(from)?,
        to: rate(to)?,
    };
    crate::stages::Stages::new(vec![stage])
        .map(RateArg::Ramp)
        .map_err(|e| format!("ramp {text:?}: {e}"))
}

/// `--stages`: `LENGTH@RATE` or `LENGTH@FROM..TO`, comma-separated.
pub fn stages(text: &str) -> Result<crate::stages::Stages, String> {
    let list = text
        .split(',')
        .map(|one| {
            let one = one.trim();
            let (length, rates) = one.split_once('@').ok_or_else(|| {
                format!(
                    "stage {one:?}: use LENGTH@RATE or LENGTH@FROM..TO, e.g. 30s@1k or 60s@1k..20k"
                )
            })?;
            let (from, to) = match rates.split_once("..") {
                Some((a, b)) => (rate(a)?, rate(b)?),
                None => {
                    let r = rate(rates)?;
                    (r, r)
                }
            };
            Ok(crate::stages::Stage {
                length_s: stage_length(length, one)?,
                from,
                to,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    crate::stages::Stages::new(list).map_err(|e| format!("--stages {text:?}: {e}"))
}

/// A stage's length: a duration with its unit.
fn stage_length(text: &str, whole: &str) -> Result<f64, String> {
    let d = duration(text.trim()).map_err(|e| format!("{whole:?}: {e}"))?;
    Ok(d.as_secs_f64())
}

/// A share given in percent (`5%` or `5`), as a fraction; above 0 and below 100%.
pub fn percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = number(t.strip_suffix('%').unwrap_or(t))?;
    if v <= 0.0 || v >= 100.0 {
        return Err(format!(
            "{text:?}: give a percentage above 0 and below 100, e.g. 5%"
        ));
    }
    Ok(v / 100.0)
}
