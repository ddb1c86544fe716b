//! An open loop whose rate changes over the run (`--stages`, `--rate A:B/D`): stages, each a
//! length and a rate that goes linearly from one value to another (equal for a steady one),
//! the way k6's ramping-arrival-rate shapes a load.
//!
//! The schedule stays exact through the changes: the k-th request of the whole load is due
//! when the target count `C(t)` (the rate integrated from the start) reaches k, so a sender
//! that sent at `t` sends next at `C⁻¹(C(t) + senders)`, and a steady rate gives back the
//! even spacing `senders / rate`. No connection is opened or closed for a change of rate.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::units::typed_number;

/// One stage: `length_s` seconds during which the rate goes from `from` to `to` requests per
/// second.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stage {
    pub length_s: f64,
    pub from: f64,
    pub to: f64,
}

/// Stages in order, with the target count at each one's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    stages: Arc<[Stage]>,
    /// Requests due before each stage (C at its start), and at the end.
    before: Arc<[f64]>,
    /// Each stage's start, in seconds from the run's, and the end.
    starts: Arc<[f64]>,
}

#[derive(Debug, Error, PartialEq)]
pub enum StagesError {
    #[error("no stages given")]
    Empty,
    #[error("stage {0}: its length must be above zero and finite")]
    Length(usize),
    #[error("stage {0}: rates must be finite and not negative")]
    Rate(usize),
    #[error("the stages ask for less than one request in all (their rates over their lengths)")]
    Nothing,
    #[error("more than {MAX_STAGES} stages")]
    TooMany,
}

/// Stages a load may have: more is a script, not a shape.
pub const MAX_STAGES: usize = 1_000;

impl Stages {
    pub fn new(stages: Vec<Stage>) -> Result<Stages, StagesError> {
        if stages.is_empty() {
            return Err(StagesError::Empty);
        }
        if stages.len() > MAX_STAGES {
            return Err(StagesError::TooMany);
        }
        let mut before = Vec::with_capacity(stages.len() + 1);
        let mut starts = Vec::with_capacity(stages.len() + 1);
        let (mut count, mut at) = (0.0, 0.0);
        for (k, s) in stages.iter().enumerate() {
            if !(s.length_s.is_finite() && s.length_s > 0.0) {
                return Err(StagesError::Length(k + 1));
            }
            let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
            if !(rate_ok(s.from) && rate_ok(s.to)) {
                return Err(StagesError::Rate(k + 1));
            }
            before.push(count);
            starts.push(at);
            count += s.length_s * (s.from + s.to) / 2.0;
            at += s.length_s;
        }
        before.push(count);
        starts.push(at);
        if !(count >= 1.0 && count.is_finite() && at.is_finite()) {
            return Err(StagesError::Nothing);
        }
        Ok(Stages {
            stages: stages.into(),
            before: before.into(),
            starts: starts.into(),
        })
    }

    pub fn list(&self) -> &[Stage] {
        &self.stages
    }

    /// The whole length, in seconds.
    pub fn length_s(&self) -> f64 {
        self.starts[self.stages.len()]
    }

    /// Requests due over the whole length.
    pub fn total(&self) -> f64 {
        self.before[self.stages.len()]
    }

    /// The mean rate over the whole length.
    pub fn mean_rate(&self) -> f64 {
        self.total() / self.length_s()
    }

    /// The highest rate any stage reaches.
    pub fn peak_rate(&self) -> f64 {
        self.stages
            .iter()
            .map(|s| s.from.max(s.to))
            .fold(0.0, f64::max)
    }

    /// The stage `t` seconds from the start lies in (the last one past the end).
    fn stage_at(&self, t: f64) -> usize {
        // Stages are few: the one whose start is the last at or before t.
        let n = self.stages.len();
        self.starts[1..n].partition_point(|&s| s <= t)
    }

    /// `C(t)`: requests due by `t` seconds from the start (at most the total).
    pub fn count_by(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        if t >= self.length_s() {
            return self.total();
        }
        let k = self.stage_at(t);
        let s = self.stages[k];
        let u = t - self.starts[k];
        self.before[k] + s.from * u + (s.to - s.from) * u * u / (2.0 * s.length_s)
    }

    /// `C⁻¹(n)`: when the n-th request (counted from 0) is due, in seconds from the start —
    /// the first moment the target count reaches it; None past the last stage.
    pub fn time_of(&self, n: f64) -> Option<f64> {
        // The first request is due as the rate first rises above 0 (a leading pause holds it).
        let n = n.max(1e-9);
        if n > self.total() {
            return None;
        }
        // The stage whose count range holds n (a stage at rate 0 holds none and is passed).
        let k = self.before[1..]
            .partition_point(|&c| c < n)
            .min(self.stages.len() - 1);
        let s = self.stages[k];
        let d = n - self.before[k];
        let slope = (s.to - s.from) / s.length_s;
        // Solves from·u + slope·u²/2 = d in the form that stays exact as slope → 0.
        let root = (s.from * s.from + 2.0 * slope * d).max(0.0).sqrt();
        let u = if s.from + root > 0.0 {
            2.0 * d / (s.from + root)
        } else {
            0.0
        };
        Some(self.starts[k] + u.min(s.length_s))
    }

    /// A sender that sent at `t` seconds sends next at this time: `senders` requests later in
    /// the whole load's count; None past the last stage.
    pub fn next_after(&self, t: f64, senders: f64) -> Option<f64> {
        self.time_of(self.count_by(t) + senders)
    }

    /// The target rate of `[from, to)` seconds: what is due in it over its length.
    pub fn rate_over(&self, from: f64, to: f64) -> f64 {
        if to <= from {
            return 0.0;
        }
        (self.count_by(to) - self.count_by(from)) / (to - from)
    }
}

impl fmt::Display for Stage {
    /// As `--stages` takes one: `30s@1000`, `60s@1000..20000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s@{}", self.length_s, typed_number(self.from))?;
        if self.to != self.from {
            write!(f, "..{}", typed_number(self.to))?;
        }
        Ok(())
    }
}

impl fmt::Display for Stages {
    /// As `--stages` takes them: `30s@1000, 60s@1000..20000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, s) in self.stages.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(list: &[(f64, f64, f64)]) -> Stages {
        Stages::new(
            list.iter()
                .map(|&(length_s, from, to)| Stage { length_s, from, to })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn a_steady_stage_spaces_requests_evenly() {
        let s = stages(&[(10.0, 100.0, 100.0)]);
        assert_eq!(s.total(), 1000.0);
        assert!(s.time_of(0.0).unwrap() < 1e-9);
        // A leading pause holds the first request until the rate rises.
        let p = stages(&[(1.0, 0.0, 0.0), (1.0, 10.0, 10.0)]);
        assert!((p.time_of(0.0).unwrap() - 1.0).abs() < 1e-9);
        assert!((s.time_of(250.0).unwrap() - 2.5).abs() < 1e-12);
        // A sender among 4 sends every 40 ms.
        assert!((s.next_after(2.5, 4.0).unwrap() - 2.54).abs() < 1e-12);
        assert_eq!(s.time_of(1000.5), None);
    }

    #[test]
    fn a_ramp_follows_the_integral_of_its_rate() {
        // 0 → 200 req/s over 10 s: C(t) = 10 t², 1,000 requests in all.
        let s = stages(&[(10.0, 0.0, 200.0)]);
        assert_eq!(s.total(), 1000.0);
        assert!((s.count_by(5.0) - 250.0).abs() < 1e-9);
        assert!((s.time_of(250.0).unwrap() - 5.0).abs() < 1e-9);
        assert!((s.time_of(1000.0).unwrap() - 10.0).abs() < 1e-9);
        for t in [0.1, 1.0, 3.3, 7.7, 9.99] {
            let back = s.time_of(s.count_by(t)).unwrap();
            assert!((back - t).abs() < 1e-9, "{t} {back}");
        }
        assert!((s.rate_over(4.0, 5.0) - 90.0).abs() < 1e-9);
        // Down ramps too.
        let d = stages(&[(4.0, 100.0, 20.0)]);
        for t in [0.5, 2.0, 3.9] {
            assert!((d.time_of(d.count_by(t)).unwrap() - t).abs() < 1e-9);
        }
    }

    #[test]
    fn stages_join_without_a_gap_and_a_pause_is_passed() {
        let s = stages(&[(2.0, 100.0, 100.0), (1.0, 0.0, 0.0), (2.0, 50.0, 50.0)]);
        assert_eq!((s.length_s(), s.total()), (5.0, 300.0));
        assert!((s.time_of(200.0).unwrap() - 2.0).abs() < 1e-9);
        // The 201st request waits out the pause: it is due 20 ms into the third stage.
        assert!((s.time_of(201.0).unwrap() - 3.02).abs() < 1e-9);
        assert!((s.count_by(2.5) - 200.0).abs() < 1e-9);
        assert_eq!(s.mean_rate(), 60.0);
        assert_eq!(s.peak_rate(), 100.0);
        assert_eq!(s.to_string(), "2s@100, 1s@0, 2s@50");
    }

    #[test]
    fn bad_stages_are_refused_by_what_is_wrong() {
        let one = |length_s, from, to| Stages::new(vec![Stage { length_s, from, to }]);
        assert_eq!(Stages::new(vec![]), Err(StagesError::Empty));
        assert_eq!(one(0.0, 1.0, 1.0), Err(StagesError::Length(1)));
        assert_eq!(one(f64::INFINITY, 1.0, 1.0), Err(StagesError::Length(1)));
        assert_eq!(one(1.0, -1.0, 1.0), Err(StagesError::Rate(1)));
        assert_eq!(one(1.0, 1.0, f64::NAN), Err(StagesError::Rate(1)));
        assert_eq!(one(5.0, 0.0, 0.0), Err(StagesError::Nothing));
    }
}
