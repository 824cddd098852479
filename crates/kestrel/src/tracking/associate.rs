//! Data association per cluster: tracks that share gated detections form a cluster
//! (union-find over the gate), and each cluster is solved on its own, in parallel.
//!
//! - **GNN**: the most likely joint assignment, as an optimal 2-D assignment with a
//!   missed-detection choice per track. Assigning detection `j` to track `i` scores
//!   `ln(pd N(z_j; zhat_i, S_i) / lambda)` against `ln(1 - pd pg)` for a miss (`pg`:
//!   the gate probability; the likelihood ratio of "target" against "clutter",
//!   Bar-Shalom, Daum & Huang, IEEE CSM 2009, eq. 33).
//! - **JPDA**: the marginal probability `beta_ij` that detection `j` is track `i`'s,
//!   over all feasible joint events (each track takes at most one detection, each
//!   detection at most one track), with event weights
//!   `prod_assigned pd N_ij / lambda * prod_missed (1 - pd pg)` (Fortmann, Bar-Shalom &
//!   Scheffe 1983, the parametric form). Exact by enumeration while a cluster has at
//!   most [`EXACT_EVENTS`] events; past that, loopy belief propagation on the
//!   association graph (Williams & Lau, IEEE TAES 2014), which is exact on clusters
//!   whose graph is a tree and otherwise a close approximation that converges fast and
//!   costs `O(edges)` a sweep.

use super::assign::{solve_sparse_with_misses, solve_with_misses, Assignment};
use super::gate::Gated;
use rayon::prelude::*;

// JPDA's marginals live in `jpda.rs`; their names stay reachable from here.
pub use super::jpda::{jpda, jpda_exact, jpda_lbp, jpda_weights, Weights, LBP_PARALLEL_EDGES};

/// Largest number of joint events the exact JPDA enumerates in one cluster.
pub const EXACT_EVENTS: f64 = 20_000.0;

/// Clusters of tracks linked by shared gated detections; tracks with no gated detection
/// are left out (they miss). Clusters come in the order of their first track, each
/// track list ascending. Gates of at least [`CLUSTERS_PARALLEL_PAIRS`] pairs are joined
/// on every core, with the same result.
pub fn clusters(g: &Gated, ndet: usize) -> Vec<Vec<usize>> {
    let n = g.start.len() - 1;
    // Each track's root: the smallest track of its cluster.
    let root = if g.det.len() >= CLUSTERS_PARALLEL_PAIRS {
        joined_on_every_core(g, ndet)
    } else {
        joined(g, ndet)
    };
    let mut slot = vec![usize::MAX; n];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        if g.of(i).is_empty() {
            continue;
        }
        let r = root[i];
        if slot[r] == usize::MAX {
            slot[r] = out.len();
            out.push(Vec::new());
        }
        out[slot[r]].push(i);
    }
    out
}

/// Each track's smallest linked track, by a union-find on one core.
fn joined(g: &Gated, ndet: usize) -> Vec<usize> {
    let n = g.start.len() - 1;
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut owner = vec![usize::MAX; ndet];
    for i in 0..n {
        for &j in &g.det[g.of(i)] {
            let o = owner[j as usize];
            if o == usize::MAX {
                owner[j as usize] = i;
            } else {
                let (a, b) = (find(&mut parent, i), find(&mut parent, o));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    (0..n).map(|i| find(&mut parent, i)).collect()
}

/// Gated pairs from which [`clusters`] joins the tracks on every core.
pub const CLUSTERS_PARALLEL_PAIRS: usize = 1 << 16;

/// Each track's smallest linked track, by a union-find on every core: a root is only
/// ever linked under a smaller root (by compare-and-swap, so two tasks cannot both link
/// it), so parents only decrease, the forest has no cycle, and each tree's root is its
/// smallest track; the partition (connected components) does not depend on the order
/// of the unions.
fn joined_on_every_core(g: &Gated, ndet: usize) -> Vec<usize> {
    use std::sync::atomic::{AtomicU32, Ordering::*};
    let n = g.start.len() - 1;
    // Each detection's first track.
    let owner: Vec<AtomicU32> = (0..ndet).map(|_| AtomicU32::new(u32::MAX)).collect();
    (0..n).into_par_iter().with_min_len(1024).for_each(|i| {
        for &j in &g.det[g.of(i)] {
            // A read first: most detections already hold a smaller track.
            if owner[j as usize].load(Relaxed) > i as u32 {
                owner[j as usize].fetch_min(i as u32, Relaxed);
            }
        }
    });
    let parent: Vec<AtomicU32> = (0..n as u32).map(AtomicU32::new).collect();
    let find = |mut x: u32| -> u32 {
        loop {
            let px = parent[x as usize].load(Acquire);
            if px == x {
                return x;
            }
            let gp = parent[px as usize].load(Acquire);
            if gp != px {
                // Path halving; losing the race leaves another valid ancestor.
                let _ = parent[x as usize].compare_exchange(px, gp, AcqRel, Relaxed);
            }
            x = px;
        }
    };
    (0..n).into_par_iter().with_min_len(1024).for_each(|i| {
        for &j in &g.det[g.of(i)] {
            let o = owner[j as usize].load(Relaxed);
            if o == i as u32 {
                continue;
            }
            let (mut a, mut b) = (i as u32, o);
            loop {
                let (ra, rb) = (find(a), find(b));
                if ra == rb {
                    break;
                }
                let (hi, lo) = (ra.max(rb), ra.min(rb));
                if parent[hi as usize]
                    .compare_exchange(hi, lo, AcqRel, Relaxed)
                    .is_ok()
                {
                    break;
                }
                (a, b) = (ra, rb);
            }
        }
    });
    (0..n as u32)
        .into_par_iter()
        .map(|i| find(i) as usize)
        .collect()
}

/// The detections of a cluster, sorted and unique, and each track's gated entries as
/// (local detection index, log-likelihood).
pub(super) fn local(cluster: &[usize], g: &Gated) -> (Vec<u32>, Vec<Vec<(usize, f64)>>) {
    local_where(cluster, g, |_| true)
}

/// [`local`] of the pairs whose log-likelihood passes `keep`.
fn local_where(
    cluster: &[usize],
    g: &Gated,
    keep: impl Fn(f64) -> bool,
) -> (Vec<u32>, Vec<Vec<(usize, f64)>>) {
    let mut dets: Vec<u32> = cluster
        .iter()
        .flat_map(|&i| g.of(i).filter(|&k| keep(g.ll[k])).map(|k| g.det[k]))
        .collect();
    dets.sort_unstable();
    dets.dedup();
    let rows = cluster
        .iter()
        .map(|&i| {
            g.of(i)
                .filter(|&k| keep(g.ll[k]))
                .map(|k| {
                    // Present by construction.
                    let l = dets.binary_search(&g.det[k]).unwrap_or(0);
                    (l, g.ll[k])
                })
                .collect()
        })
        .collect();
    (dets, rows)
}

/// The gated pairs that can be part of an optimal GNN assignment: those that cost less
/// than a miss (`-(gain + ll) < miss`). A track holding a pair that costs more than its
/// miss does better missing, and the detection it frees can only help the others, so no
/// optimal assignment holds such a pair (one that costs exactly a miss ties with it, and
/// the miss is kept). Clusters of these pairs are the GNN problem's true components:
/// where dense clutter chains the gates of 10^5 tracks into one cluster, the pairs worth
/// taking split it into many small ones.
pub fn live_pairs(g: &Gated, gain: f64, miss: f64) -> Gated {
    let n = g.start.len().saturating_sub(1);
    let mut out = Gated {
        start: Vec::with_capacity(n + 1),
        det: Vec::with_capacity(g.det.len()),
        ll: Vec::with_capacity(g.ll.len()),
    };
    out.start.push(0);
    for i in 0..n {
        for k in g.of(i) {
            if live(g.ll[k], gain, miss) {
                out.det.push(g.det[k]);
                out.ll.push(g.ll[k]);
            }
        }
        out.start.push(out.det.len());
    }
    out
}

/// Whether a pair of log-likelihood `ll` costs less than a miss ([`live_pairs`]).
#[inline]
fn live(ll: f64, gain: f64, miss: f64) -> bool {
    -(gain + ll) < miss
}

/// Whether a GNN cluster of `rows` tracks and `nd` detections is solved by the dense
/// solver (else the sparse one): at most [`DENSE_MAX_TRACKS`] tracks and
/// [`DENSE_MAX_COLUMNS`] detections + tracks. The device solves clusters within the same
/// limits by the dense method, one thread each, and larger ones by the sparse method, so
/// that it picks what the host picks, ties included. Past these sizes the sparse search
/// is also the faster on the host (measured at 10^3 targets in 10^5 clutter).
pub fn dense_fits(rows: usize, nd: usize) -> bool {
    rows <= DENSE_MAX_TRACKS && nd + rows <= DENSE_MAX_COLUMNS
}

/// Most tracks of a GNN cluster solved by the dense method ([`dense_fits`]).
pub const DENSE_MAX_TRACKS: usize = 32;
/// Most columns (detections + tracks) of a GNN cluster solved by the dense method.
pub const DENSE_MAX_COLUMNS: usize = 128;

/// Cost of leaving a track without a detection when `pd = 1` (a miss is then
/// impossible unless no detection is left): large against any likelihood-ratio cost
/// yet small enough that sums of costs keep their precision.
const CERTAIN_MISS_COST: f64 = 1e6;

/// GNN over all clusters: each track's detection, if any. Any clustering of the gate is
/// solved exactly; the clusters of [`live_pairs`] are the smallest (and fastest).
pub fn gnn(
    clusters: &[Vec<usize>],
    g: &Gated,
    ntracks: usize,
    pd: f64,
    pg: f64,
    clutter: f64,
) -> Vec<Option<u32>> {
    let (gain, miss) = gnn_costs(pd, pg, clutter);
    let decided: Vec<Vec<(usize, u32)>> = clusters
        .par_iter()
        .map_init(Assignment::new, |solver, cl| {
            gnn_cluster(solver, cl, g, gain, miss)
        })
        .collect();
    let mut out = vec![None; ntracks];
    for d in decided {
        for (i, j) in d {
            out[i] = Some(j);
        }
    }
    out
}

/// The GNN costs from the detection probability `pd`, the gate probability `pg` and the
/// clutter density: `(gain, miss)`, where assigning a detection with log-likelihood `ll`
/// costs `-(gain + ll)` and a miss costs `miss`.
pub fn gnn_costs(pd: f64, pg: f64, clutter: f64) -> (f64, f64) {
    let gain = pd.ln() - clutter.ln();
    let miss = if pd * pg < 1.0 {
        -(1.0 - pd * pg).ln()
    } else {
        CERTAIN_MISS_COST
    };
    (gain, miss)
}

/// The optimal assignment of one cluster (tracks in ascending order): `(track,
/// detection)` of each track that takes one.
pub(crate) fn gnn_cluster(
    solver: &mut Assignment,
    cl: &[usize],
    g: &Gated,
    gain: f64,
    miss: f64,
) -> Vec<(usize, u32)> {
    // Pairs that cost a miss or more are never taken ([`live_pairs`]): the cluster's
    // problem is that of its live pairs, whatever gate it was clustered on, so that the
    // host and the device (which drops them in its kernels) solve the same matrix.
    let (dets, rows) = local_where(cl, g, |ll| live(ll, gain, miss));
    let nd = dets.len();
    let misses = vec![miss; cl.len()];
    if !dense_fits(cl.len(), nd) {
        // A large cluster (dense clutter joins tracks into one): the sparse
        // solver, in memory linear in the gated pairs.
        let mut start = Vec::with_capacity(cl.len() + 1);
        let (mut col, mut cost) = (Vec::new(), Vec::new());
        start.push(0);
        for row in &rows {
            for &(l, ll) in row {
                col.push(l as u32);
                cost.push(-(gain + ll));
            }
            start.push(col.len());
        }
        let (sol, _) = solve_sparse_with_misses(cl.len(), nd, &start, &col, &cost, &misses)
            .expect("every track may miss, so the problem is feasible");
        return cl
            .iter()
            .zip(sol)
            .filter_map(|(&i, s)| s.map(|l| (i, dets[l])))
            .collect();
    }
    let mut cost = vec![f64::INFINITY; cl.len() * nd];
    for (r, row) in rows.iter().enumerate() {
        for &(l, ll) in row {
            cost[r * nd + l] = -(gain + ll);
        }
    }
    // Feasible: every track may miss.
    let (sol, _) = solve_with_misses(solver, cl.len(), nd, &cost, &misses)
        .expect("every track may miss, so the problem is feasible");
    cl.iter()
        .zip(sol)
        .filter_map(|(&i, s)| s.map(|l| (i, dets[l])))
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Uniforms in [0, 1) from a xorshift generator (small, so no dependency).
    pub(in crate::tracking) fn uniforms(mut x: u64) -> impl FnMut() -> f64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn clusters_joined_on_every_core_are_those_of_one_core() {
        // 40,000 tracks gating 0 to 4 of 30,000 detections near their own place, so
        // that gates chain into clusters of every size (some tracks gate nothing).
        let mut next = uniforms(0x2545_f491_4f6c_dd1d);
        let (n, ndet) = (40_000usize, 30_000usize);
        let mut g = Gated {
            start: vec![0],
            det: Vec::new(),
            ll: Vec::new(),
        };
        for i in 0..n {
            let k = (next() * 5.0) as usize;
            let mut row: Vec<u32> = (0..k)
                .map(|_| ((i * 3 / 4 + (next() * 9.0) as usize) % ndet) as u32)
                .collect();
            row.sort_unstable();
            row.dedup();
            g.ll.extend(row.iter().map(|_| -1.0));
            g.det.extend(row);
            g.start.push(g.det.len());
        }
        assert!(g.det.len() >= CLUSTERS_PARALLEL_PAIRS);
        let one = joined(&g, ndet);
        let all = joined_on_every_core(&g, ndet);
        assert_eq!(one, all);
        // Clusters of many sizes, each rooted at its smallest track.
        let cl = clusters(&g, ndet);
        let largest = cl.iter().map(Vec::len).max().unwrap_or(0);
        assert!(
            cl.len() > 100 && largest > 10,
            "{} clusters, largest {largest}",
            cl.len()
        );
        for c in &cl {
            assert!(c.windows(2).all(|w| w[0] < w[1]));
            assert!(c.iter().all(|&i| one[i] == c[0]));
        }
    }
}
