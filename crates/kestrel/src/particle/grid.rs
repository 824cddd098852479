//! Particle selection from cumulative weights snapped to a grid (Hendeby, Hol, Karlsson &
//! Gustafsson, "A graphics processing unit implementation of the particle filter",
//! eq. 6): with ordered positions `x_k`, one in each interval of length `W / N`
//! (systematic: `x_k = (k + u) W / N`; stratified: `x_k = (k + u_k) W / N`), each particle
//! finds in O(1), on its own, the number of positions below its cumulative weight,
//!
//! ```text
//! p_i = #{k : x_k < C_i},
//! ```
//!
//! and owns the slots `p_{i-1} <= k < p_i` (the paper's line segment from vertex
//! `p_{i-1}` to `p_i`; zero-weight particles own none). The count needs no search: `x_k <
//! C_i` can hold only for `k` within two strata of `C_i N / W`, so it is the number of
//! those few positions below `C_i` plus the strata before them, each compared with the
//! very expression the search compares, so the ancestors are the search's
//! ([`super::resample`]'s systematic and stratified) exactly. Positions past the total
//! (rounding) go to the last particle of positive weight, as there.

use super::philox::uniform_f64;
use super::resample::Draws;

/// `#{k in 0..n : pos(k) < c}` for non-decreasing positions with `pos(k)` in stratum `k`
/// of width `scale` (to rounding): the strata up to two before `c / scale` all lie
/// below, those from two after it none.
#[inline]
pub fn count_below(c: f64, n: usize, scale: f64, pos: impl Fn(usize) -> f64) -> usize {
    let e = (c / scale).floor();
    let e = if e.is_nan() || e < 0.0 {
        0
    } else if e >= n as f64 {
        n
    } else {
        e as usize
    };
    let lo = e.saturating_sub(2);
    let hi = (e + 2).min(n);
    lo + (lo..hi).filter(|&k| pos(k) < c).count()
}

/// The positions of systematic (`stratified` false) or stratified resampling of the
/// filter and step of `draws`, for `n` particles of total weight `total`: `(k + u) scale`
/// with `scale = total / n` (the search's expression).
pub fn positions(draws: Draws, stratified: bool, n: usize, total: f64) -> impl Fn(usize) -> f64 {
    let scale = total / n as f64;
    let u0 = super::resample::systematic_uniform(draws);
    move |k: usize| {
        let u = if stratified {
            uniform_f64(draws.words(k as u32, 0)[0])
        } else {
            u0
        };
        (k as f64 + u) * scale
    }
}

/// The ancestors of every slot from the inclusive cumulative weights `cdf` (total
/// `cdf[n - 1]` = `total` as the filter has it) and the positions `pos` (stratum width
/// `total / n`): each particle writes its index into the slots it owns.
pub fn grid_ancestors(cdf: &[f64], total: f64, pos: impl Fn(usize) -> f64, anc: &mut [u32]) {
    let n = cdf.len();
    assert_eq!(anc.len(), n, "one ancestor per particle");
    if n == 0 {
        return;
    }
    let scale = total / n as f64;
    let last = cdf[n - 1];
    let mut prev = 0usize;
    for i in 0..n {
        let p = count_below(cdf[i], n, scale, &pos);
        // The last particle of positive weight also takes the slots past the total.
        let end = if cdf[i] == last && (i == 0 || cdf[i - 1] != cdf[i]) {
            n
        } else {
            p
        };
        for a in anc[prev.min(n)..end.max(prev).min(n)].iter_mut() {
            *a = i as u32;
        }
        prev = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_a_linear_count() {
        let n = 37;
        let pos = |k: usize| (k as f64 + 0.3) * 0.25;
        for c in [0.0, 0.01, 0.075, 0.0751, 1.0, 3.3, 9.25, 9.3, 100.0] {
            let want = (0..n).filter(|&k| pos(k) < c).count();
            assert_eq!(count_below(c, n, 0.25, pos), want, "c = {c}");
        }
    }
}
