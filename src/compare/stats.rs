//! Statistics for repeated runs: medians, Mann-Whitney U (as Go's benchstat uses) and a
//! bootstrap confidence interval for the relative difference of medians.

/// Median of `xs` (mean of the middle two for an even count); NaN for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The largest pooled sample tested exactly (by the permutation distribution of the rank
/// sum); beyond it the normal approximation holds well enough.
const EXACT_UP_TO: usize = 40;

/// Two-sided p-value of the Mann-Whitney U test: exact for pooled samples of up to 40 values —
/// the permutation distribution of the rank sum over the ranks as they are, ties sharing their
/// average rank, so tied samples get no p below what their arrangements allow — and the
/// normal approximation with tie correction beyond.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Doubled ranks of the pooled sample (ties share their average rank, which doubled is a
    // whole number).
    let mut pooled: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut doubled = vec![0u64; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // ranks i+1 … j+1, averaged and doubled: i + j + 2
        for r in doubled.iter_mut().take(j + 1).skip(i) {
            *r = (i + j + 2) as u64;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let w1: u64 = pooled
        .iter()
        .zip(&doubled)
        .filter(|(p, _)| p.1 == 0)
        .map(|(_, r)| r)
        .sum();
    if n <= EXACT_UP_TO {
        let counts = rank_sum_distribution(&doubled, n1);
        let total: f64 = counts.iter().sum();
        let w = w1 as usize;
        let below: f64 = counts.iter().take(w + 1).sum();
        let above: f64 = counts.iter().skip(w).sum();
        return (2.0 * below.min(above) / total).min(1.0);
    }
    let u1 = w1 as f64 / 2.0 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u = u1.min((n1 * n2) as f64 - u1);
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// How many of the C(n, k) ways of choosing `k` of the pooled values give each (doubled)
/// rank sum: the distribution of the statistic under the null hypothesis, ties included.
fn rank_sum_distribution(doubled_ranks: &[u64], k: usize) -> Vec<f64> {
    let max: usize = doubled_ranks.iter().map(|r| *r as usize).sum();
    // ways[j][s]: subsets of j values seen so far with doubled rank sum s
    let mut ways = vec![vec![0.0f64; max + 1]; k + 1];
    ways[0][0] = 1.0;
    for &r in doubled_ranks {
        let r = r as usize;
        for j in (1..=k).rev() {
            for s in (r..=max).rev() {
                let from = ways[j - 1][s - r];
                if from != 0.0 {
                    ways[j][s] += from;
                }
            }
        }
    }
    ways.swap_remove(k)
}

/// The smallest two-sided p-value Mann-Whitney U can give for samples of `n1` and `n2`
/// values: both extreme arrangements out of C(n1 + n2, n1). With 3 runs a side it is 0.1,
/// so nothing can be significant at 0.05.
pub fn smallest_two_sided_p(n1: usize, n2: usize) -> f64 {
    let (k, n) = (n1.min(n2), n1 + n2);
    // C(n, k) as a float, term by term; it only needs to be compared with 2 / alpha.
    let arrangements = (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
    (2.0 / arrangements).min(1.0)
}

/// P(Z > z) for a standard normal Z (Abramowitz-Stegun 7.1.26 via erfc; error < 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

/// 95% bootstrap interval (percentile method, fixed seed) of median(b)/median(a) - 1.
pub fn relative_difference_ci(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        // xorshift64*: reproducible intervals from run to run.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    };
    let mut ratios = Vec::with_capacity(2000);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..2000 {
        for x in ra.iter_mut() {
            *x = a[next(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[next(b.len())];
        }
        let ma = median(&ra);
        if ma != 0.0 {
            ratios.push(median(&rb) / ma - 1.0);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn mann_whitney_matches_reference_values() {
        // Reference p-values by enumerating every arrangement of the pooled sample.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 0.007_936_5).abs() < 1e-6, "{p}");
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!((p - 0.690_476).abs() < 1e-5, "{p}");
        let p = mann_whitney_p(&[1.0, 2.0, 4.0], &[3.0, 5.0, 6.0, 7.0]);
        assert!((p - 0.114_286).abs() < 1e-5, "{p}");
        // All equal: nothing to tell apart.
        assert_eq!(mann_whitney_p(&[1.0; 5], &[1.0; 5]), 1.0);
    }

    /// The two-sided p of the rank-sum test by listing every way of choosing |a| of the
    /// pooled values: the definition the distribution above must agree with.
    fn p_by_enumeration(a: &[f64], b: &[f64]) -> f64 {
        let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
        let rank = |x: f64| {
            let below = pooled.iter().filter(|y| **y < x).count() as f64;
            let equal = pooled.iter().filter(|y| **y == x).count() as f64;
            below + (equal + 1.0) / 2.0
        };
        let ranks: Vec<f64> = pooled.iter().map(|x| rank(*x)).collect();
        let observed: f64 = ranks[..a.len()].iter().sum();
        let (mut below, mut above, mut total) = (0.0, 0.0, 0.0);
        for mask in 0u32..(1 << pooled.len()) {
            if mask.count_ones() as usize != a.len() {
                continue;
            }
            let sum: f64 = (0..pooled.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| ranks[i])
                .sum();
            total += 1.0;
            if sum <= observed + 1e-9 {
                below += 1.0;
            }
            if sum >= observed - 1e-9 {
                above += 1.0;
            }
        }
        (2.0 * f64::min(below, above) / total).min(1.0)
    }

    #[test]
    fn ties_get_the_exact_permutation_p() {
        // Five identical values against five others: 2 of the 252 arrangements are as
        // extreme, so p = 2/252 — not the normal approximation's 0.004.
        let p = mann_whitney_p(&[7.0; 5], &[9.0; 5]);
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        for (a, b) in [
            (
                &[1.0, 2.0, 2.0, 3.0, 3.0][..],
                &[3.0, 4.0, 4.0, 5.0, 6.0][..],
            ),
            (&[5.0, 5.0, 6.0, 6.0, 6.0], &[5.0, 6.0, 7.0, 7.0]),
            (&[1.0, 1.0, 1.0], &[1.0, 1.0, 2.0, 2.0, 2.0, 3.0]),
        ] {
            let p = mann_whitney_p(a, b);
            let reference = p_by_enumeration(a, b);
            assert!(
                (p - reference).abs() < 1e-12,
                "{a:?} {b:?}: {p} vs {reference}"
            );
        }
        // Beyond 40 pooled values: the tie-corrected normal approximation, close to exact.
        let a: Vec<f64> = (0..25).map(|i| f64::from(i / 3)).collect();
        let b: Vec<f64> = (0..25).map(|i| f64::from(i / 3 + 2)).collect();
        let p = mann_whitney_p(&a, &b);
        assert!(p > 0.0001 && p < 0.05, "{p}");
    }

    #[test]
    fn smallest_p_is_two_over_the_arrangements() {
        assert_eq!(smallest_two_sided_p(1, 1), 1.0);
        assert!((smallest_two_sided_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((smallest_two_sided_p(4, 4) - 2.0 / 70.0).abs() < 1e-12);
        assert!((smallest_two_sided_p(2, 5) - 2.0 / 21.0).abs() < 1e-12);
        // The exact test reaches it: completely separated samples.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]);
        assert!((p - smallest_two_sided_p(4, 4)).abs() < 1e-12, "{p}");
    }

    #[test]
    fn interval_brackets_the_true_difference() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [110.0, 111.0, 109.0, 110.5, 109.5];
        let (lo, hi) = relative_difference_ci(&a, &b).unwrap();
        assert!(
            lo > 0.08 && hi < 0.12 && lo <= 0.10 && hi >= 0.10,
            "[{lo}, {hi}]"
        );
        assert_eq!(
            relative_difference_ci(&a, &b),
            relative_difference_ci(&a, &b)
        );
    }
}
