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

/// Largest number of joint events the exact JPDA enumerates in one cluster.
pub const EXACT_EVENTS: f64 = 20_000.0;

/// Clusters of tracks linked by shared gated detections; tracks with no gated detection
/// are left out (they miss).
pub fn clusters(g: &Gated, ndet: usize) -> Vec<Vec<usize>> {
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
    let mut slot = vec![usize::MAX; n];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        if g.of(i).is_empty() {
            continue;
        }
        let r = find(&mut parent, i);
        if slot[r] == usize::MAX {
            slot[r] = out.len();
            out.push(Vec::new());
        }
        out[slot[r]].push(i);
    }
    out
}

/// The detections of a cluster, sorted and unique, and each track's gated entries as
/// (local detection index, log-likelihood).
fn local(cluster: &[usize], g: &Gated) -> (Vec<u32>, Vec<Vec<(usize, f64)>>) {
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

/// JPDA weights of one track: `beta0` for "no detection" and `(detection, beta)` pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weights {
    /// Probability that none of the detections is the track's.
    pub beta0: f64,
    /// `(detection index, probability that it is the track's)` of each gated detection.
    pub det: Vec<(u32, f64)>,
}

/// Exact JPDA marginals of one cluster by enumerating the joint events. `a[r]` lists
/// track `r`'s (local detection, weight) and `m[r]` its miss weight.
pub fn jpda_exact(a: &[Vec<(usize, f64)>], m: &[f64], ndet: usize) -> Vec<(f64, Vec<f64>)> {
    let r = a.len();
    let mut beta: Vec<(f64, Vec<f64>)> = a.iter().map(|row| (0.0, vec![0.0; row.len()])).collect();
    let mut choice = vec![usize::MAX; r];
    let mut used = vec![false; ndet];
    let mut total = 0.0;
    #[allow(clippy::too_many_arguments)]
    fn go(
        k: usize,
        w: f64,
        a: &[Vec<(usize, f64)>],
        m: &[f64],
        choice: &mut [usize],
        used: &mut [bool],
        beta: &mut [(f64, Vec<f64>)],
        total: &mut f64,
    ) {
        if w == 0.0 {
            return;
        }
        if k == a.len() {
            *total += w;
            for (t, &c) in choice.iter().enumerate() {
                if c == usize::MAX {
                    beta[t].0 += w;
                } else {
                    beta[t].1[c] += w;
                }
            }
            return;
        }
        choice[k] = usize::MAX;
        go(k + 1, w * m[k], a, m, choice, used, beta, total);
        for (c, &(l, wl)) in a[k].iter().enumerate() {
            if !used[l] {
                used[l] = true;
                choice[k] = c;
                go(k + 1, w * wl, a, m, choice, used, beta, total);
                used[l] = false;
            }
        }
        choice[k] = usize::MAX;
    }
    go(0, 1.0, a, m, &mut choice, &mut used, &mut beta, &mut total);
    if total > 0.0 {
        for b in &mut beta {
            b.0 /= total;
            b.1.iter_mut().for_each(|v| *v /= total);
        }
    }
    beta
}

/// Approximate JPDA marginals by loopy belief propagation (Williams & Lau 2014, eqs.
/// 30-31): messages `mu` from tracks to detections and `nu` back,
/// `mu_ij = a_ij / (m_i + sum_{j' != j} a_ij' nu_j'i)`,
/// `nu_ji = 1 / (1 + sum_{i' != i} mu_i'j)`, iterated to a fixed point; then
/// `beta_ij = a_ij nu_ji / (m_i + sum_j' a_ij' nu_j'i)`.
pub fn jpda_lbp(a: &[Vec<(usize, f64)>], m: &[f64], ndet: usize) -> Vec<(f64, Vec<f64>)> {
    let edges: usize = a.iter().map(Vec::len).sum();
    lbp(a, m, ndet, edges >= LBP_PARALLEL_EDGES)
}

/// [`jpda_lbp`], its rounds on every core or on one.
fn lbp(a: &[Vec<(usize, f64)>], m: &[f64], ndet: usize, parallel: bool) -> Vec<(f64, Vec<f64>)> {
    let mut nu: Vec<Vec<f64>> = a.iter().map(|row| vec![1.0; row.len()]).collect();
    let mut mu: Vec<Vec<f64>> = if parallel {
        Vec::new()
    } else {
        a.iter().map(|row| vec![0.0; row.len()]).collect()
    };
    let mut col = vec![0.0; ndet];
    // A large cluster (dense clutter chains 10^5 tracks into one) runs each round on
    // every core: tracks in parallel, and each detection's sum over its tracks in
    // ascending order, the serial loop's order, so both give the same bits.
    let by_det = parallel.then(|| {
        // Each pair's index in the pairs laid end to end (track after track), listed
        // per detection in ascending track order.
        let mut at: Vec<Vec<u32>> = vec![Vec::new(); ndet];
        let mut e = 0u32;
        for row in a {
            for &(l, _) in row {
                at[l].push(e);
                e += 1;
            }
        }
        at
    });
    // The parallel rounds keep the messages to detections in `flat`, track i's from
    // start[i]; the serial ones in `mu`.
    let start: Vec<usize> = if parallel {
        a.iter()
            .scan(0, |e, row| {
                let s = *e;
                *e += row.len();
                Some(s)
            })
            .collect()
    } else {
        Vec::new()
    };
    let edges: usize = if parallel {
        a.iter().map(Vec::len).sum()
    } else {
        0
    };
    let mut flat = vec![0.0; edges];
    let mu_row = |i: usize, row: &[(usize, f64)], nu: &[f64], mu: &mut [f64]| {
        let s: f64 = m[i] + row.iter().zip(nu).map(|(e, n)| e.1 * n).sum::<f64>();
        for (k, &(_, w)) in row.iter().enumerate() {
            let rest = s - w * nu[k];
            mu[k] = if rest > 0.0 { w / rest } else { f64::INFINITY };
        }
    };
    for _ in 0..500 {
        let change = if let Some(at) = &by_det {
            // The messages to detections laid end to end (track after track), so that
            // each detection's sum reads one array.
            let mut rows: Vec<&mut [f64]> = Vec::with_capacity(a.len());
            let mut rest = &mut flat[..];
            for row in a {
                let (head, tail) = rest.split_at_mut(row.len());
                rows.push(head);
                rest = tail;
            }
            rows.into_par_iter()
                .zip(&nu)
                .enumerate()
                .for_each(|(i, (mu, nu))| mu_row(i, &a[i], nu, mu));
            col.par_iter_mut().zip(at).for_each(|(c, at)| {
                let mut s = 0.0;
                for &e in at {
                    s += flat[e as usize];
                }
                *c = s;
            });
            nu.par_iter_mut()
                .zip(&start)
                .zip(a)
                .map(|((nu, &s0), row)| {
                    let mu = &flat[s0..s0 + row.len()];
                    let mut change: f64 = 0.0;
                    for (k, &(l, _)) in row.iter().enumerate() {
                        let v = 1.0 / (1.0 + col[l] - mu[k]);
                        change = change.max((v - nu[k]).abs());
                        nu[k] = v;
                    }
                    change
                })
                .reduce(|| 0.0, f64::max)
        } else {
            for (i, row) in a.iter().enumerate() {
                mu_row(i, row, &nu[i], &mut mu[i]);
            }
            col.iter_mut().for_each(|c| *c = 0.0);
            for (i, row) in a.iter().enumerate() {
                for (k, &(l, _)) in row.iter().enumerate() {
                    col[l] += mu[i][k];
                }
            }
            let mut change: f64 = 0.0;
            for (i, row) in a.iter().enumerate() {
                for (k, &(l, _)) in row.iter().enumerate() {
                    let v = 1.0 / (1.0 + col[l] - mu[i][k]);
                    change = change.max((v - nu[i][k]).abs());
                    nu[i][k] = v;
                }
            }
            change
        };
        if change < 1e-13 {
            break;
        }
    }
    a.iter()
        .enumerate()
        .map(|(i, row)| {
            let s: f64 = m[i] + row.iter().zip(&nu[i]).map(|(e, n)| e.1 * n).sum::<f64>();
            (
                m[i] / s,
                row.iter().zip(&nu[i]).map(|(e, n)| e.1 * n / s).collect(),
            )
        })
        .collect()
}

/// Pairs of a cluster from which belief propagation runs each round on every core
/// ([`jpda_lbp`]; the same result as one core).
pub const LBP_PARALLEL_EDGES: usize = 1 << 14;

/// JPDA over all clusters: each track's weights (tracks outside every cluster miss).
/// Clusters with at most `exact_events` joint events are enumerated exactly, the others
/// solved by loopy belief propagation (`0.0`: belief propagation everywhere).
pub fn jpda(
    clusters: &[Vec<usize>],
    g: &Gated,
    ntracks: usize,
    pd: f64,
    pg: f64,
    clutter: f64,
    exact_events: f64,
) -> Vec<Weights> {
    let gain = pd.ln() - clutter.ln();
    let log_miss = (1.0 - pd * pg).ln();
    let solved: Vec<Vec<(usize, Weights)>> = clusters
        .par_iter()
        .map(|cl| {
            let (dets, rows) = local(cl, g);
            // Weights scaled per track by their largest, which leaves the marginals
            // unchanged and keeps products in range.
            let mut a = Vec::with_capacity(cl.len());
            let mut m = Vec::with_capacity(cl.len());
            let mut events = 1.0;
            for row in &rows {
                let top = row.iter().map(|e| gain + e.1).fold(log_miss, f64::max);
                m.push((log_miss - top).exp());
                a.push(
                    row.iter()
                        .map(|&(l, ll)| (l, (gain + ll - top).exp()))
                        .collect::<Vec<_>>(),
                );
                events *= 1.0 + row.len() as f64;
            }
            let beta = if events <= exact_events {
                jpda_exact(&a, &m, dets.len())
            } else {
                jpda_lbp(&a, &m, dets.len())
            };
            cl.iter()
                .zip(beta)
                .zip(&rows)
                .map(|((&i, (b0, bs)), row)| {
                    let det = row.iter().zip(bs).map(|(e, b)| (dets[e.0], b)).collect();
                    (i, Weights { beta0: b0, det })
                })
                .collect()
        })
        .collect();
    let mut out = vec![
        Weights {
            beta0: 1.0,
            det: Vec::new()
        };
        ntracks
    ];
    for s in solved {
        for (i, w) in s {
            out[i] = w;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn belief_propagation_on_every_core_gives_the_bits_of_one_core() {
        // A loopy cluster of 6000 tracks, each gating 3 or 4 of 4000 detections, with
        // weights spread over decades (a small generator, so no dependency).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let ndet = 4000;
        let a: Vec<Vec<(usize, f64)>> = (0..6000)
            .map(|i| {
                let mut row: Vec<(usize, f64)> = (0..3 + (i % 2))
                    .map(|j| {
                        (
                            (i * 7 / 10 + j * 13 + (next() * 5.0) as usize) % ndet,
                            10f64.powf(3.0 * next() - 2.0),
                        )
                    })
                    .collect();
                row.sort_by_key(|e| e.0);
                row.dedup_by_key(|e| e.0);
                row
            })
            .collect();
        let m: Vec<f64> = (0..a.len()).map(|_| 0.05 + next()).collect();
        assert!(a.iter().map(Vec::len).sum::<usize>() >= LBP_PARALLEL_EDGES);
        let one = lbp(&a, &m, ndet, false);
        let all = lbp(&a, &m, ndet, true);
        assert_eq!(one, all);
        // And it is a distribution per track.
        for (b0, b) in &one {
            let s: f64 = b0 + b.iter().sum::<f64>();
            assert!((s - 1.0).abs() < 1e-9, "{s}");
        }
    }
}
