use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in microseconds from 1 µs to 60 s at 3 significant digits.
pub const LOWEST_US: u64 = 1;
pub const HIGHEST_US: u64 = 60_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency histogram with the run-wide bounds; every worker's must match so merges are exact.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// A histogram that travels in JSON as base64 of HdrHistogram's V2 compressed encoding (the
/// format HdrHistogram's own log tools read), so results can be merged and re-analysed later.
#[derive(Debug, Clone)]
pub struct SerializedHistogram(pub Histogram<u64>);

impl Serialize for SerializedHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode_histogram(&self.0).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> Deserialize<'de> for SerializedHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        decode_histogram(&text)
            .map(SerializedHistogram)
            .map_err(serde::de::Error::custom)
    }
}

/// Base64 of HdrHistogram's V2 compressed encoding.
pub fn encode_histogram(h: &Histogram<u64>) -> Result<String, String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| format!("histogram encoding: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A histogram from [`encode_histogram`]'s text. Its bounds are read first: decoding
/// allocates the whole counts array they imply (a 5 KB text claiming values up to 2^62 at 5
/// digits would take 47 MB), so bounds beyond any archbench records are refused before.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| format!("a histogram is not base64 ({e})"))?;
    check_header(&bytes)?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("a histogram cannot be decoded: {}", in_words(&e)))
}

/// Highest value a stored histogram may hold (2^40 µs: 12 days; archbench's reach 60 s,
/// its worker rates 10^9), and its most significant digits (archbench's have 3).
const STORED_HIGHEST: u64 = 1 << 40;
const STORED_DIGITS: u32 = 3;
/// Longest counts payload such a histogram can have: about 30,000 counts of 9 bytes at most.
const STORED_PAYLOAD: u32 = 1 << 20;

/// HdrHistogram's V2 cookies: plain, and deflated (then the plain one leads the inflated).
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;

/// Refuses an encoding whose header claims more than archbench's histograms hold; a header
/// that cannot be read is left to the decoder, which says why.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    use std::io::Read as _;
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let mut header = [0u8; 40];
    let read = match word(bytes, 0) {
        Some(V2_COOKIE) => bytes.get(..40).map(|h| header.copy_from_slice(h)).is_some(),
        Some(V2_DEFLATE_COOKIE) => {
            flate2::read::ZlibDecoder::new(bytes.get(8..).unwrap_or_default())
                .read_exact(&mut header)
                .is_ok()
        }
        _ => false,
    };
    if !read {
        return Ok(());
    }
    let long = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&header[at..at + 8]);
        u64::from_be_bytes(w)
    };
    let (payload, digits, highest) = (word(&header, 4), word(&header, 12), long(24));
    if payload.is_some_and(|p| p > STORED_PAYLOAD)
        || digits.is_some_and(|d| d > STORED_DIGITS)
        || highest > STORED_HIGHEST
    {
        return Err(format!(
            "a histogram claims values up to {highest} at {} significant digits in {} bytes, more than archbench stores (up to {STORED_HIGHEST} at {STORED_DIGITS} digits); it was not written by archbench",
            digits.unwrap_or_default(),
            payload.unwrap_or_default()
        ));
    }
    Ok(())
}

/// What a decoding error means, in words (hdrhistogram's Display is terse, its Debug a dump).
fn in_words(e: &hdrhistogram::serialization::DeserializeError) -> String {
    use hdrhistogram::serialization::DeserializeError as E;
    match e {
        E::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "it ends early (empty or cut short)".into()
        }
        E::IoError(io) => format!("its deflated data is damaged ({io})"),
        E::InvalidCookie => "it is not an HdrHistogram V2 encoding".into(),
        E::UnsupportedFeature => "it uses an HdrHistogram feature archbench does not read".into(),
        E::UnsuitableCounterType => "a count is larger than archbench counts".into(),
        E::InvalidParameters => "its bounds are not valid".into(),
        E::UsizeTypeTooSmall => "it is too large for this machine".into(),
        E::EncodedArrayTooLong => "it holds more counts than its range has".into(),
    }
}

/// The numbers people quote from a latency distribution, in microseconds. With nothing
/// recorded (`count` 0) there are none: the JSON holds null for each, never an invented 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "SummaryDoc", from = "SummaryDoc")]
pub struct LatencySummary {
    /// Number of recorded values.
    pub count: u64,
    /// Smallest recorded value (µs).
    pub min_us: u64,
    /// Arithmetic mean (µs).
    pub mean_us: f64,
    /// Standard deviation (µs).
    pub stdev_us: f64,
    /// Median (µs).
    pub p50_us: u64,
    /// 75th percentile (µs).
    pub p75_us: u64,
    /// 90th percentile (µs).
    pub p90_us: u64,
    /// 99th percentile (µs).
    pub p99_us: u64,
    /// 99.9th percentile (µs).
    pub p99_9_us: u64,
    /// 99.99th percentile (µs).
    pub p99_99_us: u64,
    /// Largest recorded value (µs).
    pub max_us: u64,
}

/// [`LatencySummary`] as JSON holds it: every figure null when nothing was recorded.
#[derive(Serialize, Deserialize)]
struct SummaryDoc {
    count: u64,
    min_us: Option<u64>,
    mean_us: Option<f64>,
    stdev_us: Option<f64>,
    p50_us: Option<u64>,
    p75_us: Option<u64>,
    p90_us: Option<u64>,
    p99_us: Option<u64>,
    p99_9_us: Option<u64>,
    p99_99_us: Option<u64>,
    max_us: Option<u64>,
}

impl From<LatencySummary> for SummaryDoc {
    fn from(s: LatencySummary) -> SummaryDoc {
        let recorded = s.count > 0;
        SummaryDoc {
            count: s.count,
            min_us: recorded.then_some(s.min_us),
            mean_us: recorded.then_some(s.mean_us),
            stdev_us: recorded.then_some(s.stdev_us),
            p50_us: recorded.then_some(s.p50_us),
            p75_us: recorded.then_some(s.p75_us),
            p90_us: recorded.then_some(s.p90_us),
            p99_us: recorded.then_some(s.p99_us),
            p99_9_us: recorded.then_some(s.p99_9_us),
            p99_99_us: recorded.then_some(s.p99_99_us),
            max_us: recorded.then_some(s.max_us),
        }
    }
}

/// Documents written before the nulls hold 0 where nothing was recorded; both read the same.
impl From<SummaryDoc> for LatencySummary {
    fn from(d: SummaryDoc) -> LatencySummary {
        LatencySummary {
            count: d.count,
            min_us: d.min_us.unwrap_or(0),
            mean_us: d.mean_us.unwrap_or(0.0),
            stdev_us: d.stdev_us.unwrap_or(0.0),
            p50_us: d.p50_us.unwrap_or(0),
            p75_us: d.p75_us.unwrap_or(0),
            p90_us: d.p90_us.unwrap_or(0),
            p99_us: d.p99_us.unwrap_or(0),
            p99_9_us: d.p99_9_us.unwrap_or(0),
            p99_99_us: d.p99_99_us.unwrap_or(0),
            max_us: d.max_us.unwrap_or(0),
        }
    }
}

impl LatencySummary {
    /// The summary when something was recorded; without, it has no figures to show.
    pub fn recorded(&self) -> Option<&LatencySummary> {
        (self.count > 0).then_some(self)
    }

    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            stdev_us: h.stdev(),
            p50_us: h.value_at_quantile(0.50),
            p75_us: h.value_at_quantile(0.75),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p99_9_us: h.value_at_quantile(0.999),
            p99_99_us: h.value_at_quantile(0.9999),
            max_us: h.max(),
        }
    }
}

/// Share of values within `mean ± stdev`, in percent (wrk's "+/- Stdev" column).
pub fn within_one_stdev(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    let (mean, stdev) = (h.mean(), h.stdev());
    let (lo, hi) = (mean - stdev, mean + stdev);
    let inside: u64 = h
        .iter_recorded()
        .filter(|v| {
            let x = v.value_iterated_to() as f64;
            x >= lo && x <= hi
        })
        .map(|v| v.count_at_value())
        .sum();
    inside as f64 * 100.0 / h.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_no_archbench_histogram_has_are_refused_before_decoding() {
        use hdrhistogram::serialization::V2Serializer;
        let wide = Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
        let deflated = encode_histogram(&wide).unwrap();
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&wide, &mut bytes).unwrap();
        let plain = base64::engine::general_purpose::STANDARD.encode(bytes);
        for text in [deflated, plain] {
            let e = decode_histogram(&text).unwrap_err();
            assert!(
                e.contains("claims values up to 4611686018427387904 at 5 significant digits"),
                "{e}"
            );
        }
        // What archbench records reads: latencies, worker rates, an hour-wide histogram.
        for (high, digits) in [
            (HIGHEST_US, 3),
            (1_000_000_000, 3),
            (3_600_000_000, 3),
            (HIGHEST_US, 2),
        ] {
            let h = Histogram::<u64>::new_with_bounds(1, high, digits).unwrap();
            assert!(
                decode_histogram(&encode_histogram(&h).unwrap()).is_ok(),
                "{high} {digits}"
            );
        }
        let e = decode_histogram("").unwrap_err();
        assert_eq!(
            e,
            "a histogram cannot be decoded: it ends early (empty or cut short)"
        );
    }

    #[test]
    fn serialization_round_trips_exactly() {
        let mut h = latency_histogram();
        for v in [1u64, 17, 250, 250, 9_999, 1_234_567, 59_000_000] {
            h.record(v).unwrap();
        }
        let json = serde_json::to_string(&SerializedHistogram(h.clone())).unwrap();
        let back: SerializedHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0, h);
        assert_eq!(back.0.len(), 7);
    }

    #[test]
    fn empty_summary_has_null_figures_in_json_and_reads_back() {
        let empty = LatencySummary::of(&latency_histogram());
        let json = serde_json::to_value(&empty).unwrap();
        assert_eq!(json["count"], 0);
        for k in [
            "min_us",
            "mean_us",
            "stdev_us",
            "p50_us",
            "p99_99_us",
            "max_us",
        ] {
            assert!(json[k].is_null(), "{k}: {}", json[k]);
        }
        let back: LatencySummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, empty);
        let mut h = latency_histogram();
        h.record(250).unwrap();
        let one = LatencySummary::of(&h);
        let json = serde_json::to_value(&one).unwrap();
        assert_eq!(json["p50_us"], one.p50_us);
        assert_eq!(serde_json::from_value::<LatencySummary>(json).unwrap(), one);
    }

    #[test]
    fn summary_of_empty_is_zero() {
        assert_eq!(LatencySummary::of(&latency_histogram()).count, 0);
    }
}
