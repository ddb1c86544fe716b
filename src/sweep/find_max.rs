//! `sweep --find-max`: the highest open-loop rate at which a target holds the SLO, found by
//! bisection (what wrk2's users do by hand with `-R`): the lowest rate first, then the top
//! (or doubling, without one), then halving the gap between the highest rate that held and the
//! lowest that failed until it is within the precision asked; the two rates at the boundary are
//! then run again (`--runs`) and their held counts are the answer's weight.

use serde::{Deserialize, Serialize};

/// A rate probed, and in how many of its runs the SLO held.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateHeld {
    pub rate: f64,
    pub held: u64,
    pub runs: u64,
}

impl RateHeld {
    pub fn held_in_all(&self) -> bool {
        self.runs > 0 && self.held == self.runs
    }
}

/// One target's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MaxRate {
    pub name: String,
    /// The highest rate at which the SLO held (in every run of the boundary check).
    pub sustained: Option<RateHeld>,
    /// The lowest rate above it at which it failed.
    pub failed: Option<RateHeld>,
    /// The gap asked for between the two, as a fraction of the sustained rate.
    pub precision: f64,
    /// How the search ended, in words.
    pub verdict: String,
    /// Every probe, in the order run (one run each; the boundary check's with `--runs`).
    pub probes: Vec<RateHeld>,
}

/// The range `--find-max` searches, from the rates asked: their lowest, and their highest
/// when it is above (None: one rate, doubled from until the SLO fails).
pub fn range_asked(rates: &[f64]) -> (f64, Option<f64>) {
    let floor = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let top = rates.iter().copied().fold(0.0, f64::max);
    (floor, (top > floor).then_some(top))
}

/// What the search does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    Probe(f64),
    /// Bracketed within the precision (or at an end of the range): the boundary is known.
    Bracketed,
    /// It fails at the lowest rate.
    FailsAtFloor,
    /// It holds at the top rate asked (or the most one process sends).
    HoldsAtCeiling,
}

/// The bisection's state: the range, and the highest rate that held and the lowest that
/// failed so far.
#[derive(Debug, Clone)]
pub struct Bisection {
    floor: f64,
    ceiling: Option<f64>,
    /// Without a ceiling, doubling stops here.
    most: f64,
    precision: f64,
    held: Option<f64>,
    failed: Option<f64>,
}

impl Bisection {
    pub fn new(floor: f64, ceiling: Option<f64>, most: f64, precision: f64) -> Bisection {
        Bisection {
            floor,
            ceiling,
            most,
            precision,
            held: None,
            failed: None,
        }
    }

    pub fn record(&mut self, rate: f64, held: bool) {
        if held {
            self.held = Some(self.held.map_or(rate, |h| h.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
    }

    /// The gap asked for between the rate that held and the one that failed, as a fraction
    /// of the former.
    pub fn precision(&self) -> f64 {
        self.precision
    }

    /// The highest rate that held and the lowest that failed so far.
    pub fn bounds(&self) -> (Option<f64>, Option<f64>) {
        (self.held, self.failed)
    }

    pub fn next(&self) -> Next {
        match (self.held, self.failed) {
            (None, None) => Next::Probe(self.floor),
            (None, Some(_)) => Next::FailsAtFloor,
            (Some(h), None) => {
                let top = self.ceiling.unwrap_or(self.most);
                if h >= top {
                    Next::HoldsAtCeiling
                } else if self.ceiling.is_some() {
                    Next::Probe(top)
                } else {
                    Next::Probe((h * 2.0).min(top))
                }
            }
            (Some(h), Some(f)) if f <= h * (1.0 + self.precision) => Next::Bracketed,
            (Some(h), Some(f)) => Next::Probe(((h + f) / 2.0).round().clamp(h, f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search against a target that holds up to `limit`, to its end; the probes.
    fn search(mut b: Bisection, limit: f64) -> (Next, Vec<f64>) {
        let mut probes = Vec::new();
        loop {
            match b.next() {
                Next::Probe(r) => {
                    assert!(!probes.contains(&r), "{r} probed twice: {probes:?}");
                    probes.push(r);
                    b.record(r, r <= limit);
                }
                end => return (end, probes),
            }
        }
    }

    #[test]
    fn the_boundary_is_bracketed_within_the_precision() {
        let b = Bisection::new(500.0, Some(8000.0), 1e6, 0.05);
        let (end, probes) = search(b.clone(), 2000.0);
        assert_eq!(end, Next::Bracketed);
        assert_eq!(probes[..2], [500.0, 8000.0]);
        let mut b = b;
        for &r in &probes {
            b.record(r, r <= 2000.0);
        }
        let (h, f) = b.bounds();
        let (h, f) = (h.unwrap(), f.unwrap());
        assert!(h <= 2000.0 && f > 2000.0, "{h} {f}");
        assert!(f <= h * 1.05, "{h} {f}");
        // log2 of 7,500 / 100 plus the two ends: a handful, not a ladder.
        assert!(probes.len() <= 10, "{probes:?}");
    }

    #[test]
    fn without_a_top_it_doubles_until_it_fails() {
        let (end, probes) = search(Bisection::new(100.0, None, 1e6, 0.05), 1000.0);
        assert_eq!(end, Next::Bracketed);
        assert_eq!(probes[..5], [100.0, 200.0, 400.0, 800.0, 1600.0]);
    }

    #[test]
    fn the_ends_of_the_range_are_said() {
        let (end, probes) = search(Bisection::new(500.0, Some(8000.0), 1e6, 0.05), 100.0);
        assert_eq!((end, probes), (Next::FailsAtFloor, vec![500.0]));
        let (end, probes) = search(Bisection::new(500.0, Some(8000.0), 1e6, 0.05), 1e5);
        assert_eq!((end, probes), (Next::HoldsAtCeiling, vec![500.0, 8000.0]));
        let (end, _) = search(Bisection::new(500.0, None, 4000.0, 0.05), 1e5);
        assert_eq!(end, Next::HoldsAtCeiling);
    }
}
