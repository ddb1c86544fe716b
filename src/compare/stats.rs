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

/// Two-sided p-value of the Mann-Whitney U test: exact when there are no ties and both
/// samples have at most 20 values, normal approximation with tie correction otherwise.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Ranks of the pooled sample, ties sharing their average rank.
    let mut pooled: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for r in ranks.iter_mut().take(j + 1).skip(i) {
            *r = rank;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let r1: f64 = pooled
        .iter()
        .zip(&ranks)
        .filter(|(p, _)| p.1 == 0)
        .map(|(_, r)| r)
        .sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u = u1.min((n1 * n2) as f64 - u1);
    if tie_term == 0.0 && n1 <= 20 && n2 <= 20 {
        // P(U <= u) under H0 from the exact distribution, doubled.
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let below: f64 = counts.iter().take(u as usize + 1).sum();
        return (2.0 * below / total).min(1.0);
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
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

/// Number of arrangements giving each U value, for samples of n1 and n2 without ties.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j][u]: arrangements of i values of one sample and j of the other with statistic u.
    let max_u = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0; // i = 0: one arrangement, U = 0
    }
    for _i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for u in 0..=max_u {
                // The largest value belongs to the first sample (adds j to U) or the second.
                let from_first = if u >= j { prev[j][u - j] } else { 0.0 };
                cur[j][u] = from_first + cur[j - 1][u];
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
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

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // Normal approximation with tie-corrected variance and continuity correction,
        // computed by hand: U = 1, var = 22.083, z = 3.085, p = 0.019244.
        let p = mann_whitney_p(&[1.0, 2.0, 2.0, 3.0, 3.0], &[3.0, 4.0, 4.0, 5.0, 6.0]);
        assert!((p - 0.019_244).abs() < 1e-4, "{p}");
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
