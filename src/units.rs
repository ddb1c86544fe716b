//! Number formatting shared by the reports and the live views: wrk's unit rules (units.c),
//! grouped integers, IEC bytes, figures in their metric's unit.

struct Units {
    scale: f64,
    base: &'static str,
    units: &'static [&'static str],
}

const TIME_US: Units = Units {
    scale: 1000.0,
    base: "us",
    units: &["ms", "s"],
};
const TIME_S: Units = Units {
    scale: 60.0,
    base: "s",
    units: &["m", "h"],
};
const BINARY: Units = Units {
    scale: 1024.0,
    base: "",
    units: &["K", "M", "G", "T", "P"],
};
const METRIC: Units = Units {
    scale: 1000.0,
    base: "",
    units: &["k", "M", "G", "T", "P"],
};

/// A number the way a person types it: `2000`, `0.5`, and `1e300` or `1e-300` rather than
/// hundreds of digits (a figure far outside what a run can use, quoted back in an error).
pub fn typed_number(v: f64) -> String {
    if v == 0.0 || (1e-6..1e15).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// wrk's format_units: scale up while the amount is at least 85% of the next unit, never to
/// the last unit of the list.
fn format_units(n: f64, m: &Units, precision: usize) -> String {
    let mut amt = n;
    let mut unit = m.base;
    let threshold = m.scale * 0.85;
    let mut i = 0;
    while i + 1 < m.units.len() && amt >= threshold {
        amt /= m.scale;
        unit = m.units[i];
        i += 1;
    }
    format!("{amt:.precision$}{unit}")
}

pub fn wrk_time_us(n: f64) -> String {
    if n >= 1_000_000.0 {
        format_units(n / 1_000_000.0, &TIME_S, 2)
    } else {
        format_units(n, &TIME_US, 2)
    }
}

pub fn wrk_time_s(n: f64) -> String {
    format_units(n, &TIME_S, 0)
}

pub fn wrk_binary(n: f64) -> String {
    format_units(n, &BINARY, 2)
}

pub fn wrk_metric(n: f64) -> String {
    format_units(n, &METRIC, 2)
}

/// 1234567 -> "1,234,567".
pub fn grouped(n: u64) -> String {
    group_digits(&n.to_string())
}

/// A figure rounded to a whole number and grouped: 1234567.8 -> "1,234,568". Exact at any
/// size (a cast to u64 stops at 18,446,744,073,709,551,615 without a word), signed, and "-"
/// for a figure that is none (NaN, infinite).
pub fn grouped_rounded(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let digits = format!("{:.0}", v.abs().round());
    // -0.4 rounds to zero, which has no sign.
    let sign = if v.round() < 0.0 { "-" } else { "" };
    format!("{sign}{}", group_digits(&digits))
}

/// A run of decimal digits with a comma every three from the right.
pub fn group_digits(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A comparison figure in its metric's unit: MiB for bytes, two decimals for cores and small
/// values, grouped integers otherwise; "-" when there is none.
pub fn metric_figure(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    match unit {
        "B" => format!("{:.2} MiB", v / (1024.0 * 1024.0)),
        "B/s" => format!("{:.2} MiB/s", v / (1024.0 * 1024.0)),
        "cores" => format!("{v:.2}"),
        _ if v >= 100.0 || v.fract() == 0.0 => grouped_rounded(v),
        _ => format!("{v:.2}"),
    }
}

/// Bytes in IEC units with two decimals: "333.12 MiB".
pub fn bytes_iec(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.2} {}", units[u])
    }
}

/// A figure judged by an objective, in its unit: latencies as wrk prints them (8.21ms),
/// rates with two decimals, counts grouped.
pub fn slo_figure(v: f64, unit: &str) -> String {
    match unit {
        "µs" => wrk_time_us(v),
        "%" => format!("{v:.3}%"),
        "req/s" => format!("{} req/s", grouped_rounded(v)),
        _ => format!("{} {unit}", grouped_rounded(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounded_figures_are_exact_at_any_size() {
        assert_eq!(grouped_rounded(1234567.5), "1,234,568");
        assert_eq!(grouped_rounded(2.5), "3");
        assert_eq!(grouped_rounded(-1234.4), "-1,234");
        assert_eq!(grouped_rounded(-0.4), "0");
        // A cast to u64 printed 18,446,744,073,709,551,615 for both.
        assert_eq!(grouped_rounded(1e20), "100,000,000,000,000,000,000");
        assert_eq!(grouped_rounded(1e308).len(), 309 + 102);
        assert_eq!(grouped_rounded(f64::NAN), "-");
        assert_eq!(grouped_rounded(f64::INFINITY), "-");
        assert_eq!(metric_figure(1e20, "req/s"), "100,000,000,000,000,000,000");
    }

    #[test]
    fn typed_numbers_stay_short() {
        assert_eq!(typed_number(2000.0), "2000");
        assert_eq!(typed_number(0.5), "0.5");
        assert_eq!(typed_number(0.0), "0");
        assert_eq!(typed_number(1e300), "1e300");
        assert_eq!(typed_number(1e-300), "1e-300");
        assert_eq!(typed_number(123456789012345.0), "123456789012345");
    }

    #[test]
    fn wrk_units_match_wrk() {
        // Figures and their renderings taken from real wrk 4.1 output.
        assert_eq!(wrk_time_us(249.01), "249.01us");
        assert_eq!(wrk_time_us(2550.0), "2.55ms");
        assert_eq!(wrk_time_us(850.0), "0.85ms");
        assert_eq!(wrk_time_us(2_100_000.0), "2.10s");
        assert_eq!(wrk_time_s(10.0), "10s");
        assert_eq!(wrk_time_s(60.0), "1m");
        assert_eq!(wrk_metric(40450.0), "40.45k");
        assert_eq!(wrk_metric(9320.0), "9.32k");
        assert_eq!(wrk_binary(68.56 * 1024.0 * 1024.0), "68.56M");
        assert_eq!(wrk_binary(500.0), "500.00");
    }

    #[test]
    fn grouping() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
