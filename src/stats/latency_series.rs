//! Latency over time: one histogram per step of the run (a second, unless the run outgrew
//! [`MAX_LATENCY_STEPS`]), kept encoded, so "p99 over time" is exact for a run and stays exact
//! when runs are merged (histograms add; percentiles would not).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::histogram::{decode_histogram, encode_histogram};

/// Most steps a latency series holds. A step's histogram takes a few hundred bytes encoded,
/// so a series stays within a few MiB; a longer run doubles its step (merging pairs exactly):
/// 68 minutes at 1 s, 2 h 16 min at 2 s, …
pub const MAX_LATENCY_STEPS: usize = 4096;

/// One step of a latency series: its figures, and its histogram to check or merge them.
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
    /// The step starting at `second` holding `h`.
    pub fn of(second: u32, h: &Histogram<u64>) -> Result<LatencyStep, String> {
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        Ok(LatencyStep {
            second,
            count: h.len(),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            max_us: if h.is_empty() { 0 } else { h.max() },
            histogram: encode_histogram(h)?,
        })
    }

    /// The step's histogram, decoded.
    pub fn decode(&self) -> Result<Histogram<u64>, String> {
        decode_histogram(&self.histogram)
    }
}

/// A run's latency over time, step by step (steps with no response are left out).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySeries {
    /// Seconds each step covers: 1, doubled each time the series outgrows
    /// [`MAX_LATENCY_STEPS`].
    pub step_s: u32,
    /// In order of `second`.
    pub steps: Vec<LatencyStep>,
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
    pub fn add(&mut self, second: u32, h: &Histogram<u64>) -> Result<(), String> {
        if h.is_empty() {
            return Ok(());
        }
        let start = second - second % self.step_s;
        match self.steps.binary_search_by_key(&start, |s| s.second) {
            Ok(i) => {
                let mut sum = self.steps[i].decode()?;
                sum.add(h).map_err(|e| format!("latency series: {e:?}"))?;
                self.steps[i] = LatencyStep::of(start, &sum)?;
            }
            Err(i) => self.steps.insert(i, LatencyStep::of(start, h)?),
        }
        while self.steps.len() > MAX_LATENCY_STEPS {
            self.coarsen()?;
        }
        Ok(())
    }

    /// Doubles the step, adding neighbouring steps' histograms.
    fn coarsen(&mut self) -> Result<(), String> {
        self.step_s = self.step_s.saturating_mul(2);
        let old = std::mem::take(&mut self.steps);
        let mut current: Option<(u32, Histogram<u64>)> = None;
        for s in &old {
            let start = s.second - s.second % self.step_s;
            let h = s.decode()?;
            current = match current {
                Some((at, mut sum)) if at == start => {
                    sum.add(&h).map_err(|e| format!("latency series: {e:?}"))?;
                    Some((at, sum))
                }
                Some((at, sum)) => {
                    self.steps.push(LatencyStep::of(at, &sum)?);
                    Some((start, h))
                }
                None => Some((start, h)),
            };
        }
        if let Some((at, sum)) = current {
            self.steps.push(LatencyStep::of(at, &sum)?);
        }
        Ok(())
    }

    /// Adds another run's series, its seconds shifted by `offset_s` (whole seconds between
    /// the runs' starts, as the per-second series does). A finer series lands in the coarser
    /// steps; steps are powers of two, so they nest.
    pub fn merge(&mut self, other: &LatencySeries, offset_s: u32) -> Result<(), String> {
        while self.step_s < other.step_s {
            self.coarsen()?;
        }
        for s in &other.steps {
            self.add(s.second.saturating_add(offset_s), &s.decode()?)?;
        }
        Ok(())
    }

    /// Responses counted in all steps.
    pub fn count(&self) -> u64 {
        self.steps.iter().map(|s| s.count).sum()
    }

    /// Checks a stored series: steps in order on the step grid, figures that are their
    /// histograms'.
    pub fn checked(step_s: u32, steps: Vec<LatencyStep>) -> Result<LatencySeries, String> {
        if !step_s.is_power_of_two() {
            return Err("latency_step_s is not a power of two".into());
        }
        for (k, s) in steps.iter().enumerate() {
            if s.second % step_s != 0 || (k > 0 && steps[k - 1].second >= s.second) {
                return Err(format!(
                    "latency_series is out of order or off its {step_s} s steps at second {}",
                    s.second
                ));
            }
            let h = s.decode()?;
            if LatencyStep::of(s.second, &h)?.count != s.count {
                return Err(format!(
                    "latency_series at second {}: the histogram holds {} values, not {}",
                    s.second,
                    h.len(),
                    s.count
                ));
            }
        }
        Ok(LatencySeries { step_s, steps })
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram::latency_histogram;
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = latency_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    #[test]
    fn steps_hold_exact_figures_and_add_up() {
        let mut s = LatencySeries::default();
        s.add(0, &hist(&[100, 200, 300])).unwrap();
        s.add(2, &hist(&[1_000; 99])).unwrap();
        s.add(2, &hist(&[50_000])).unwrap();
        s.add(1, &hist(&[])).unwrap();
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.count(), 103);
        let two = &s.steps[1];
        assert_eq!((two.second, two.count), (2, 100));
        assert_eq!(two.p50_us, 1_000);
        assert_eq!(two.p99_us, 1_000);
        assert_eq!(two.max_us, hist(&[50_000]).max());
        assert_eq!(two.decode().unwrap().len(), 100);
        let back = LatencySeries::checked(1, s.steps.clone()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn a_long_series_coarsens_exactly() {
        let mut s = LatencySeries::default();
        let n = MAX_LATENCY_STEPS as u32 + 10;
        for sec in 0..n {
            s.add(sec, &hist(&[u64::from(sec) + 1])).unwrap();
        }
        assert_eq!(s.step_s, 2);
        assert!(s.steps.len() <= MAX_LATENCY_STEPS);
        assert_eq!(s.count(), u64::from(n));
        assert_eq!(s.steps[3].second, 6);
        assert_eq!(s.steps[3].count, 2);
        // Merging a finer series into it keeps every count, in the right step.
        let mut fine = LatencySeries::default();
        fine.add(7, &hist(&[5, 6, 7])).unwrap();
        s.merge(&fine, 0).unwrap();
        assert_eq!(s.steps[3].count, 5);
        assert_eq!(s.count(), u64::from(n) + 3);
    }

    #[test]
    fn merge_shifts_and_adds_histograms() {
        let mut a = LatencySeries::default();
        a.add(1, &hist(&[10, 20])).unwrap();
        let mut b = LatencySeries::default();
        b.add(0, &hist(&[30])).unwrap();
        b.add(1, &hist(&[40])).unwrap();
        a.merge(&b, 1).unwrap();
        assert_eq!(
            a.steps
                .iter()
                .map(|s| (s.second, s.count))
                .collect::<Vec<_>>(),
            vec![(1, 3), (2, 1)]
        );
        assert_eq!(a.steps[0].decode().unwrap(), hist(&[10, 20, 30]));
    }

    #[test]
    fn stored_series_that_disagree_are_refused() {
        let mut s = LatencySeries::default();
        s.add(0, &hist(&[1, 2])).unwrap();
        s.add(1, &hist(&[3])).unwrap();
        let mut bad = s.steps.clone();
        bad[0].count = 3;
        assert!(LatencySeries::checked(1, bad)
            .unwrap_err()
            .contains("holds 2 values"));
        let mut swapped = s.steps.clone();
        swapped.swap(0, 1);
        assert!(LatencySeries::checked(1, swapped).is_err());
        assert!(LatencySeries::checked(3, s.steps.clone()).is_err());
        let mut garbage = s.steps;
        garbage[0].histogram = "not base64!".into();
        assert!(LatencySeries::checked(1, garbage).is_err());
    }
}
