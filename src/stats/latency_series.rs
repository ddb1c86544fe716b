//! Latency over time: one histogram per step of the run (a second, unless the run outgrew
//! [`MAX_LATENCY_STEPS`]), so "p99 over time" is exact for a run and stays exact when runs
//! are merged (histograms add; percentiles would not).
//!
//! In memory a step is its histogram's non-empty buckets only (value, count), which add by a
//! merge of two sorted lists: a full histogram is 140 KiB, a second's buckets a few KiB, and
//! merging a thousand workers' series must not decode and encode every step per worker. The
//! document form ([`LatencyStep`]) carries the figures and the encoded histogram.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::{decode_histogram, encode_histogram, latency_histogram};

/// Most steps a latency series holds; a longer run doubles its step (adding pairs exactly):
/// 68 minutes at 1 s, 2 h 16 min at 2 s, …
pub const MAX_LATENCY_STEPS: usize = 4096;

/// One step of a latency series as stored: its figures, and its histogram to check or merge
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStep {
    /// Seconds since the start of the run; the step covers [second, second + step).
    pub second: u32,
    /// Responses completed in the step (their total latency is in the histogram).
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub max_us: u64,
    /// Base64 of HdrHistogram's V2 compressed encoding (as `histograms.total`).
    pub histogram: String,
}

impl LatencyStep {
    /// The step's histogram, decoded.
    pub fn decode(&self) -> Result<Histogram<u64>, String> {
        decode_histogram(&self.histogram)
    }
}

/// A latency histogram kept as its non-empty buckets only, by value (each bucket's highest
/// equivalent value, which records back into the same bucket), ascending: a few KiB where the
/// histogram takes up to 140 KiB, and two of them add by merging sorted lists.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buckets(Vec<(u64, u64)>);

impl Buckets {
    pub fn of(h: &Histogram<u64>) -> Buckets {
        Buckets(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        )
    }

    pub fn count(&self) -> u64 {
        self.0.iter().map(|b| b.1).sum()
    }

    /// Records every value into `h` (of the run's floor and precision, so exactly).
    pub fn record_into(&self, h: &mut Histogram<u64>) {
        for &(v, n) in &self.0 {
            let _ = h.record_n(v, n);
        }
    }

    /// Adds `other`'s buckets (a merge of two sorted lists).
    pub fn add(&mut self, other: &Buckets) {
        if other.0.is_empty() {
            return;
        }
        let mine = std::mem::take(&mut self.0);
        let theirs = &other.0;
        let mut out = Vec::with_capacity(mine.len() + theirs.len());
        let (mut i, mut j) = (0, 0);
        while i < mine.len() && j < theirs.len() {
            match mine[i].0.cmp(&theirs[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(mine[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(theirs[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push((mine[i].0, mine[i].1 + theirs[j].1));
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&mine[i..]);
        out.extend_from_slice(&theirs[j..]);
        self.0 = out;
    }

    fn histogram(&self) -> Result<Histogram<u64>, String> {
        let mut h = latency_histogram();
        for &(v, n) in &self.0 {
            h.record_n(v, n)
                .map_err(|e| format!("latency series: value {v} µs: {e:?}"))?;
        }
        Ok(h)
    }
}

/// A run's latency over time, step by step (steps with no response are left out).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySeries {
    /// Seconds each step covers: 1, doubled each time the series outgrows
    /// [`MAX_LATENCY_STEPS`].
    pub step_s: u32,
    /// (second the step starts at, its buckets), in order of second.
    steps: Vec<(u32, Buckets)>,
}

impl Default for LatencySeries {
    fn default() -> Self {
        LatencySeries {
            step_s: 1,
            steps: Vec::new(),
        }
    }
}

impl LatencySeries {
    /// Adds the latencies of `h`, recorded at `second`, to the step covering it.
    pub fn add(&mut self, second: u32, h: &Histogram<u64>) {
        if !h.is_empty() {
            self.add_buckets(second, &Buckets::of(h));
        }
    }

    /// Adds buckets recorded at `second` to the step covering it.
    pub fn add_buckets(&mut self, second: u32, b: &Buckets) {
        let start = second - second % self.step_s;
        match self.steps.binary_search_by_key(&start, |s| s.0) {
            Ok(i) => self.steps[i].1.add(b),
            Err(i) => self.steps.insert(i, (start, b.clone())),
        }
        while self.steps.len() > MAX_LATENCY_STEPS {
            self.coarsen();
        }
    }

    /// Doubles the step, adding neighbouring steps.
    fn coarsen(&mut self) {
        self.step_s = self.step_s.saturating_mul(2);
        let step = self.step_s;
        let mut out: Vec<(u32, Buckets)> = Vec::with_capacity(self.steps.len() / 2 + 1);
        for (second, b) in std::mem::take(&mut self.steps) {
            let start = second - second % step;
            match out.last_mut() {
                Some(last) if last.0 == start => last.1.add(&b),
                _ => out.push((start, b)),
            }
        }
        self.steps = out;
    }

    /// Adds another run's series, its seconds shifted by `offset_s` (whole seconds between
    /// the runs' starts, as the per-second series does). A finer series lands in the coarser
    /// steps; steps are powers of two, so they nest.
    pub fn merge(&mut self, other: &LatencySeries, offset_s: u32) {
        while self.step_s < other.step_s {
            self.coarsen();
        }
        for (second, b) in &other.steps {
            self.add_buckets(second.saturating_add(offset_s), b);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Responses counted in all steps.
    pub fn count(&self) -> u64 {
        self.steps.iter().map(|s| s.1.count()).sum()
    }

    /// The steps as stored: figures and encoded histograms.
    pub fn to_steps(&self) -> Result<Vec<LatencyStep>, String> {
        self.steps
            .iter()
            .map(|(second, b)| {
                let h = b.histogram()?;
                let q = |p: f64| h.value_at_quantile(p);
                Ok(LatencyStep {
                    second: *second,
                    count: h.len(),
                    p50_us: q(0.5),
                    p90_us: q(0.9),
                    p99_us: q(0.99),
                    p99_9_us: q(0.999),
                    max_us: h.max(),
                    histogram: encode_histogram(&h)?,
                })
            })
            .collect()
    }

    /// A stored series, checked: steps in order on the step grid, each count its histogram's.
    pub fn from_steps(step_s: u32, steps: &[LatencyStep]) -> Result<LatencySeries, String> {
        if !step_s.is_power_of_two() {
            return Err("latency_step_s is not a power of two".into());
        }
        let mut series = LatencySeries {
            step_s,
            steps: Vec::with_capacity(steps.len()),
        };
        for (k, s) in steps.iter().enumerate() {
            if s.second % step_s != 0 || (k > 0 && steps[k - 1].second >= s.second) {
                return Err(format!(
                    "latency_series is out of order or off its {step_s} s steps at second {}",
                    s.second
                ));
            }
            let h = s.decode()?;
            if h.len() != s.count {
                return Err(format!(
                    "latency_series at second {}: the histogram holds {} values, not {}",
                    s.second,
                    h.len(),
                    s.count
                ));
            }
            series.steps.push((s.second, Buckets::of(&h)));
        }
        Ok(series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = latency_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    fn counts(s: &LatencySeries) -> Vec<(u32, u64)> {
        s.steps.iter().map(|(sec, b)| (*sec, b.count())).collect()
    }

    #[test]
    fn steps_hold_exact_figures_and_add_up() {
        let mut s = LatencySeries::default();
        s.add(0, &hist(&[100, 200, 300]));
        s.add(2, &hist(&[1_000; 99]));
        s.add(2, &hist(&[50_000, 123_456]));
        s.add(1, &hist(&[]));
        assert_eq!(counts(&s), vec![(0, 3), (2, 101)]);
        let stored = s.to_steps().unwrap();
        let two = &stored[1];
        assert_eq!((two.second, two.count), (2, 101));
        assert_eq!((two.p50_us, two.p90_us), (1_000, 1_000));
        let mut all = hist(&[1_000; 99]);
        all.add(hist(&[50_000, 123_456])).unwrap();
        assert_eq!(two.decode().unwrap(), all);
        assert_eq!(two.max_us, all.max());
        assert_eq!(two.p99_us, all.value_at_quantile(0.99));
        let back = LatencySeries::from_steps(1, &stored).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn a_long_series_coarsens_exactly() {
        let mut s = LatencySeries::default();
        let n = MAX_LATENCY_STEPS as u32 + 10;
        for sec in 0..n {
            s.add(sec, &hist(&[u64::from(sec) + 1]));
        }
        assert_eq!(s.step_s, 2);
        assert!(s.steps.len() <= MAX_LATENCY_STEPS);
        assert_eq!(s.count(), u64::from(n));
        assert_eq!(counts(&s)[3], (6, 2));
        // Merging a finer series into it keeps every count, in the right step.
        let mut fine = LatencySeries::default();
        fine.add(7, &hist(&[5, 6, 7]));
        s.merge(&fine, 0);
        assert_eq!(counts(&s)[3], (6, 5));
        assert_eq!(s.count(), u64::from(n) + 3);
    }

    #[test]
    fn merge_shifts_and_adds_histograms() {
        let mut a = LatencySeries::default();
        a.add(1, &hist(&[10, 20, 2_000_001]));
        let mut b = LatencySeries::default();
        b.add(0, &hist(&[30, 2_000_001, 2_000_002]));
        b.add(1, &hist(&[40]));
        a.merge(&b, 1);
        assert_eq!(counts(&a), vec![(1, 6), (2, 1)]);
        let stored = a.to_steps().unwrap();
        assert_eq!(
            stored[0].decode().unwrap(),
            hist(&[10, 20, 30, 2_000_001, 2_000_001, 2_000_002])
        );
    }

    #[test]
    fn stored_series_that_disagree_are_refused() {
        let mut s = LatencySeries::default();
        s.add(0, &hist(&[1, 2]));
        s.add(1, &hist(&[3]));
        let stored = s.to_steps().unwrap();
        let mut bad = stored.clone();
        bad[0].count = 3;
        let why = LatencySeries::from_steps(1, &bad).unwrap_err();
        assert!(why.contains("holds 2 values"), "{why}");
        let mut swapped = stored.clone();
        swapped.swap(0, 1);
        assert!(LatencySeries::from_steps(1, &swapped).is_err());
        assert!(LatencySeries::from_steps(3, &stored).is_err());
        let mut garbage = stored;
        garbage[0].histogram = "not base64!".into();
        assert!(LatencySeries::from_steps(1, &garbage).is_err());
    }
}
