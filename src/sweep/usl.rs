//! The Universal Scalability Law (Gunther): throughput at concurrency N is
//! X(N) = λN / (1 + σ(N−1) + κN(N−1)), with σ the contention (serial fraction) and κ the
//! coherency cost (crosstalk). Fitted to a sweep's throughput-vs-connections points, it puts
//! a number on "how does it scale": where throughput peaks (N* = √((1−σ)/κ)) and how much
//! each added connection costs. A fit that does not fit is refused, not printed.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The fitted law and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Throughput of one connection alone (requests per second).
    pub lambda: f64,
    /// Contention: the serial fraction, 0 (none) to 1 (no parallelism at all).
    pub sigma: f64,
    /// Coherency: the cost of every pair of connections; above 0 throughput has a peak.
    pub kappa: f64,
    /// Share of the throughput's variance the law explains (1 is a perfect fit).
    pub r_squared: f64,
    /// The concurrency at which throughput peaks, when κ > 0.
    pub peak_concurrency: Option<f64>,
    /// The throughput there (or the ceiling λ/σ the law approaches when κ = 0 and σ > 0).
    pub peak_throughput: Option<f64>,
}

#[derive(Debug, Error, PartialEq)]
pub enum UslError {
    #[error("a USL fit needs at least {MIN_POINTS} distinct concurrencies with throughput; the sweep has {0}")]
    TooFewPoints(usize),
    #[error("the throughput does not follow the Universal Scalability Law (R² = {r_squared:.3}, below {MIN_R_SQUARED}): no fit is given")]
    DoesNotFit { r_squared: f64 },
}

/// Fewer points leave three parameters undetermined or exactly determined (no check).
pub const MIN_POINTS: usize = 4;
/// Below this, the law explains too little of the throughput to stand for it.
pub const MIN_R_SQUARED: f64 = 0.95;

impl UslFit {
    /// The law's throughput at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }
}

/// Fits the law to `(concurrency, throughput)` points.
///
/// N/X(N) = (1 + σ(N−1) + κN(N−1)) / λ is linear in (1/λ, σ/λ, κ/λ), so the fit is a weighted
/// linear least squares on y = N/X with weights 1/y² (relative errors, so the high-concurrency
/// points do not outweigh the rest). σ and κ are kept in [0, 1] and [0, ∞): a coefficient the
/// noise makes negative is fixed at 0 and the rest refitted.
pub fn fit(points: &[(f64, f64)]) -> Result<UslFit, UslError> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n >= 1.0 && x > 0.0 && n.is_finite() && x.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts.dedup_by(|a, b| a.0 == b.0);
    if pts.len() < MIN_POINTS {
        return Err(UslError::TooFewPoints(pts.len()));
    }
    let mut best: Option<(f64, f64, f64)> = None;
    // Free σ and κ first; then each fixed at 0, then both: the best admissible fit wins.
    for (free_sigma, free_kappa) in [(true, true), (true, false), (false, true), (false, false)] {
        let Some((a, b, c)) = solve(&pts, free_sigma, free_kappa) else {
            continue;
        };
        if a <= 0.0 || b < 0.0 || c < 0.0 || b / a > 1.0 {
            continue;
        }
        let candidate = (1.0 / a, b / a, c / a);
        let better = best.is_none_or(|old| r_squared(&pts, candidate) > r_squared(&pts, old));
        if better {
            best = Some(candidate);
        }
    }
    let (lambda, sigma, kappa) = best.ok_or(UslError::DoesNotFit { r_squared: 0.0 })?;
    let r2 = r_squared(&pts, (lambda, sigma, kappa));
    if r2 < MIN_R_SQUARED {
        return Err(UslError::DoesNotFit { r_squared: r2 });
    }
    let mut fitted = UslFit {
        lambda,
        sigma,
        kappa,
        r_squared: r2,
        peak_concurrency: None,
        peak_throughput: None,
    };
    if kappa > 0.0 {
        let n = ((1.0 - sigma) / kappa).sqrt();
        fitted.peak_concurrency = Some(n);
        fitted.peak_throughput = Some(fitted.throughput(n.max(1.0)));
    } else if sigma > 0.0 {
        fitted.peak_throughput = Some(lambda / sigma);
    }
    Ok(fitted)
}

/// Weighted least squares of y = N/X on [1, N−1, N(N−1)] (the columns left free), as (a, b, c).
fn solve(pts: &[(f64, f64)], free_sigma: bool, free_kappa: bool) -> Option<(f64, f64, f64)> {
    let columns = |n: f64| {
        let mut row = vec![1.0];
        if free_sigma {
            row.push(n - 1.0);
        }
        if free_kappa {
            row.push(n * (n - 1.0));
        }
        row
    };
    let k = 1 + usize::from(free_sigma) + usize::from(free_kappa);
    let mut ata = vec![vec![0.0; k]; k];
    let mut aty = vec![0.0; k];
    for &(n, x) in pts {
        let y = n / x;
        let w = 1.0 / (y * y);
        let row = columns(n);
        for i in 0..k {
            aty[i] += w * row[i] * y;
            for j in 0..k {
                ata[i][j] += w * row[i] * row[j];
            }
        }
    }
    let sol = gauss(ata, aty)?;
    let mut it = sol.into_iter();
    let a = it.next()?;
    let b = if free_sigma { it.next()? } else { 0.0 };
    let c = if free_kappa { it.next()? } else { 0.0 };
    Some((a, b, c))
}

/// Solves m·x = v by Gaussian elimination with partial pivoting; None when singular.
fn gauss(mut m: Vec<Vec<f64>>, mut v: Vec<f64>) -> Option<Vec<f64>> {
    let k = v.len();
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, pivot);
        v.swap(col, pivot);
        for row in col + 1..k {
            let f = m[row][col] / m[col][col];
            let (upper, lower) = m.split_at_mut(row);
            for (x, p) in lower[0][col..].iter_mut().zip(&upper[col][col..]) {
                *x -= f * p;
            }
            v[row] -= f * v[col];
        }
    }
    let mut x = vec![0.0; k];
    for row in (0..k).rev() {
        let rest: f64 = (row + 1..k).map(|j| m[row][j] * x[j]).sum();
        x[row] = (v[row] - rest) / m[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// R² of the law's throughput against the measured one.
fn r_squared(pts: &[(f64, f64)], (lambda, sigma, kappa): (f64, f64, f64)) -> f64 {
    let law = UslFit {
        lambda,
        sigma,
        kappa,
        r_squared: 0.0,
        peak_concurrency: None,
        peak_throughput: None,
    };
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let total: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let residual: f64 = pts
        .iter()
        .map(|p| (p.1 - law.throughput(p.0)).powi(2))
        .sum();
    if total == 0.0 {
        // Flat throughput: the law (σ = 1) fits exactly or not at all.
        return if residual == 0.0 { 1.0 } else { 0.0 };
    }
    1.0 - residual / total
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

    fn law(lambda: f64, sigma: f64, kappa: f64) -> UslFit {
        UslFit {
            lambda,
            sigma,
            kappa,
            r_squared: 1.0,
            peak_concurrency: None,
            peak_throughput: None,
        }
    }

    fn within(got: f64, want: f64, share: f64) -> bool {
        (got - want).abs() <= share * want.abs()
    }

    #[test]
    fn recovers_sigma_and_kappa_within_5_percent_from_noisy_points() {
        for (lambda, sigma, kappa) in [
            (1000.0, 0.05, 0.001),
            (25_000.0, 0.02, 0.0002),
            (400.0, 0.3, 0.01),
        ] {
            let truth = law(lambda, sigma, kappa);
            // ±1% of deterministic noise, alternating in sign.
            let points: Vec<(f64, f64)> = LADDER
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let noise = if i % 2 == 0 { 1.01 } else { 0.99 };
                    (n, truth.throughput(n) * noise)
                })
                .collect();
            let f = fit(&points).unwrap();
            assert!(within(f.sigma, sigma, 0.05), "σ {} vs {sigma}", f.sigma);
            assert!(within(f.kappa, kappa, 0.05), "κ {} vs {kappa}", f.kappa);
            assert!(within(f.lambda, lambda, 0.05), "λ {} vs {lambda}", f.lambda);
            assert!(f.r_squared > 0.99, "{f:?}");
            let peak = ((1.0 - sigma) / kappa).sqrt();
            assert!(within(f.peak_concurrency.unwrap(), peak, 0.05), "{f:?}");
        }
    }

    #[test]
    fn exact_points_give_the_law_back() {
        let truth = law(5000.0, 0.1, 0.0005);
        let points: Vec<(f64, f64)> = LADDER.iter().map(|&n| (n, truth.throughput(n))).collect();
        let f = fit(&points).unwrap();
        assert!(
            within(f.sigma, 0.1, 1e-9) && within(f.kappa, 0.0005, 1e-9),
            "{f:?}"
        );
        assert!(f.r_squared > 0.999_999);
    }

    #[test]
    fn amdahl_has_no_peak_but_a_ceiling() {
        let truth = law(1000.0, 0.1, 0.0);
        let points: Vec<(f64, f64)> = LADDER.iter().map(|&n| (n, truth.throughput(n))).collect();
        let f = fit(&points).unwrap();
        assert!(f.kappa.abs() < 1e-9, "{f:?}");
        assert_eq!(f.peak_concurrency, None);
        assert!(within(f.peak_throughput.unwrap(), 10_000.0, 1e-6), "{f:?}");
    }

    #[test]
    fn refuses_what_is_not_usl_shaped() {
        // Zig-zag: no law explains it.
        let zigzag: Vec<(f64, f64)> = LADDER
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, if i % 2 == 0 { 100.0 } else { 1000.0 }))
            .collect();
        assert!(
            matches!(fit(&zigzag), Err(UslError::DoesNotFit { .. })),
            "{:?}",
            fit(&zigzag)
        );
        // Superlinear (throughput ∝ N²): would need negative contention.
        let superlinear: Vec<(f64, f64)> = LADDER.iter().map(|&n| (n, n * n)).collect();
        assert!(
            matches!(fit(&superlinear), Err(UslError::DoesNotFit { .. })),
            "{:?}",
            fit(&superlinear)
        );
        // Too few concurrencies (duplicates count once).
        let few = [(1.0, 10.0), (2.0, 19.0), (2.0, 19.5), (4.0, 35.0)];
        assert_eq!(fit(&few), Err(UslError::TooFewPoints(3)));
    }
}
