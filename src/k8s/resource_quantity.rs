//! Resource quantities as Kubernetes writes them (`500m`, `1.5`, `512Mi`, `129M`, `1e3`), in
//! their base unit: cores for CPU, bytes for memory. The API server writes them for any pod
//! or node in these forms, and a user may type them the same way.

/// The suffixes Kubernetes reads, each with its factor: binary (Ki…Ei), then decimal (n…E).
const SUFFIXES: [(&str, f64); 15] = [
    ("Ki", 1024.0),
    ("Mi", 1024.0 * 1024.0),
    ("Gi", 1024.0 * 1024.0 * 1024.0),
    ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("Ei", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// The amount a quantity stands for, in its base unit; None for what Kubernetes would not
/// read as one (no number, a negative one, "inf").
pub fn amount(text: &str) -> Option<f64> {
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| text.strip_suffix(suffix).map(|n| (n, *factor)))
        .unwrap_or((text, 1.0));
    // Rust's float reading takes "inf" and "NaN" too: Kubernetes' does not.
    if !number.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '+') {
        return None;
    }
    let n: f64 = number.parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some(n * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_the_api_server_writes_reads_in_base_units() {
        for (text, want) in [
            ("2", 2.0),
            ("1.5", 1.5),
            ("500m", 0.5),
            ("250000u", 0.25),
            ("512Mi", 512.0 * 1024.0 * 1024.0),
            ("32879124Ki", 32_879_124.0 * 1024.0),
            ("129M", 129e6),
            ("1e3", 1000.0),
            ("1Gi", 1024.0 * 1024.0 * 1024.0),
            ("0", 0.0),
        ] {
            let got = amount(text).unwrap_or_else(|| panic!("{text} unread"));
            assert!(
                (got - want).abs() <= want * 1e-12,
                "{text}: {got} not {want}"
            );
        }
        for text in ["", "m", "-1", "inf", "NaN", "1x", "Gi", "1 Gi"] {
            assert_eq!(amount(text), None, "{text}");
        }
    }
}
