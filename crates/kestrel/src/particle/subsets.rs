//! Resampling in subsets with redistribution: the distributed resampling that Hendeby et
//! al. use when one resampling unit cannot hold every particle, in the form of Bolić,
//! Djurić & Hong ("Resampling algorithms and architectures for distributed particle
//! filters", 2005: resampling with proportional allocation).
//!
//! The N particles are cut into `S` contiguous subsets, subset `s` the particles
//! `[s N / S, (s + 1) N / S)` (M_s of them). Then
//!
//! 1. *allocation*: subset `s` draws `N_s` particles, `N_s` the number of systematic
//!    positions `(k + u) W / N` that fall in its range of the cumulative weights (so
//!    `sum N_s = N` and `E N_s = N W_s / W`); positions past the total (rounding) go to
//!    the last subset of positive weight;
//! 2. *local resampling*: each subset draws its `N_s` particles systematically from its
//!    own weights alone, positions `C_start + (k + u_s) W_s / N_s`, searched only in its
//!    own range (its own uniform `u_s`: slot `s`, block 1 of the resampling stream);
//! 3. *redistribution*: a subset keeps its first `min(N_s, M_s)` draws in its own slots;
//!    the surplus of the subsets that drew more than `M_s` (in subset order) fills the
//!    remaining slots of those that drew fewer (in subset order). That surplus is the
//!    fraction exchanged between subsets; everything else stays local.
//!
//! Every particle's expected number of offspring is `N w_i / W`, as for the global
//! schemes, and all new particles weigh the same.

use super::philox::uniform_f64;
use super::resample::Draws;

/// Subsets when `subsets` is given without `:S`.
pub const DEFAULT_SUBSETS: u32 = 16;

/// The most subsets (the GPU plans a filter's subsets in one block).
pub const MAX_SUBSETS: u32 = 1 << 16;

/// The bounds of subset `s` of `n` particles in `k` subsets: `[s n / k, (s + 1) n / k)`.
#[inline]
pub fn bounds(s: usize, k: usize, n: usize) -> (usize, usize) {
    (
        (s as u64 * n as u64 / k as u64) as usize,
        ((s as u64 + 1) * n as u64 / k as u64) as usize,
    )
}

/// The plan of a subset resampling: per subset its draws `N_s`, the first slot of the
/// exchange pool its surplus goes to, and the first pool slot its deficit takes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Draws of each subset.
    pub draws: Vec<u32>,
    /// Each subset's surplus starts at this pool slot.
    pub out_at: Vec<u32>,
    /// Each subset's deficit is filled from this pool slot on.
    pub in_at: Vec<u32>,
}

/// The allocation (step 1) and the pool offsets (step 3) for `k` subsets over the
/// inclusive cumulative weights `cdf` (total `total`).
pub fn plan(cdf: &[f64], total: f64, k: usize, draws: Draws) -> Plan {
    let n = cdf.len();
    let scale = total / n as f64;
    let u = super::resample::systematic_uniform(draws);
    let last = cdf[n - 1];
    let mut nd = Vec::with_capacity(k);
    let mut prev = 0usize;
    for s in 0..k {
        let (a, b) = bounds(s, k, n);
        let top = if b > a {
            cdf[b - 1]
        } else if a > 0 {
            cdf[a - 1]
        } else {
            0.0
        };
        let c = if top == last && b > a {
            n
        } else {
            super::grid::count_below(top, n, scale, |j| (j as f64 + u) * scale)
        };
        // Subsets after the last of positive weight: none.
        let c = c.max(prev);
        nd.push((c - prev) as u32);
        prev = c;
    }
    let (mut out_at, mut in_at) = (Vec::with_capacity(k), Vec::with_capacity(k));
    let (mut o, mut i) = (0u32, 0u32);
    for (s, &d) in nd.iter().enumerate() {
        let (a, b) = bounds(s, k, n);
        let m = (b - a) as u32;
        out_at.push(o);
        in_at.push(i);
        o += d.saturating_sub(m);
        i += m.saturating_sub(d);
    }
    Plan {
        draws: nd,
        out_at,
        in_at,
    }
}

/// The slot of draw `j` of subset `s` (step 3).
#[inline]
pub fn slot_of(p: &Plan, s: usize, j: usize, k: usize, n: usize) -> usize {
    let (a, b) = bounds(s, k, n);
    let m = b - a;
    if j < m {
        return a + j;
    }
    let q = p.out_at[s] as usize + (j - m);
    // The subset whose deficit holds pool slot q: the first t with in_at[t] + D_t > q.
    let deficit_end = |t: usize| {
        let (ta, tb) = bounds(t, k, n);
        p.in_at[t] as usize + (tb - ta).saturating_sub(p.draws[t] as usize)
    };
    let (mut lo, mut hi) = (0usize, k);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if deficit_end(mid) <= q {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let (ta, _) = bounds(lo, k, n);
    ta + p.draws[lo] as usize + (q - p.in_at[lo] as usize)
}

/// Draw `j` of subset `s` (step 2): the first particle of the subset whose cumulative
/// weight exceeds the position; past the subset's total, its last of positive weight.
#[inline]
pub fn draw(cdf: &[f64], p: &Plan, s: usize, j: usize, k: usize, draws: Draws) -> u32 {
    let n = cdf.len();
    let (a, b) = bounds(s, k, n);
    let base = if a > 0 { cdf[a - 1] } else { 0.0 };
    let top = cdf[b - 1];
    let u = uniform_f64(draws.words(s as u32, 1)[0]);
    let x = base + (j as f64 + u) * ((top - base) / p.draws[s] as f64);
    let i = a + cdf[a..b].partition_point(|&c| c <= x);
    if i < b {
        return i as u32;
    }
    let mut r = b - 1;
    while r > a && cdf[r] == cdf[r - 1] {
        r -= 1;
    }
    r as u32
}

/// Resampling in `k` subsets with redistribution: the ancestors of every slot from the
/// inclusive cumulative weights `cdf` (total `total` as the filter has it).
pub fn resample_subsets(cdf: &[f64], total: f64, k: usize, draws: Draws, anc: &mut [u32]) {
    let n = cdf.len();
    assert_eq!(anc.len(), n, "one ancestor per particle");
    if n == 0 {
        return;
    }
    let k = k.clamp(1, n);
    let p = plan(cdf, total, k, draws);
    for s in 0..k {
        for j in 0..p.draws[s] as usize {
            anc[slot_of(&p, s, j, k, n)] = draw(cdf, &p, s, j, k, draws);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_cover_the_particles() {
        for (n, k) in [(10, 3), (7, 7), (100, 16), (5, 1)] {
            let mut next = 0;
            for s in 0..k {
                let (a, b) = bounds(s, k, n);
                assert_eq!(a, next);
                next = b;
            }
            assert_eq!(next, n);
        }
    }
}
