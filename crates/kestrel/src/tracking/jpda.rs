//! JPDA's marginals per cluster (the clusters and GNN are in `associate.rs`): the
//! probability `beta_ij` that detection `j` is track `i`'s over all feasible joint
//! events, exact by enumeration while a cluster has at most
//! [`EXACT_EVENTS`](super::associate::EXACT_EVENTS) events, else by loopy belief
//! propagation on the association graph (Williams & Lau, IEEE TAES 2014), in flat arrays
//! on every core for large clusters ([`Graph`]).

use super::associate::local;
use super::gate::Gated;
use rayon::prelude::*;

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
/// `beta_ij = a_ij nu_ji / (m_i + sum_j' a_ij' nu_j'i)`. Clusters of at least
/// [`LBP_PARALLEL_EDGES`] pairs run each round on every core, with the same result.
pub fn jpda_lbp(a: &[Vec<(usize, f64)>], m: &[f64], ndet: usize) -> Vec<(f64, Vec<f64>)> {
    let edges: usize = a.iter().map(Vec::len).sum();
    if edges >= LBP_PARALLEL_EDGES {
        let mut start = vec![0];
        let mut det = Vec::with_capacity(edges);
        let mut w = Vec::with_capacity(edges);
        for row in a {
            det.extend(row.iter().map(|e| e.0 as u32));
            w.extend(row.iter().map(|e| e.1));
            start.push(det.len());
        }
        let g = Graph::build(
            a.len(),
            ndet,
            &det,
            |r| start[r]..start[r + 1],
            |r, out| {
                out.copy_from_slice(&w[start[r]..start[r + 1]]);
                m[r]
            },
        );
        let nu = g.propagate();
        g.marginals(&nu)
    } else {
        lbp(a, m, ndet)
    }
}

/// Largest number of rounds of belief propagation.
const LBP_ROUNDS: usize = 500;
/// Belief propagation stops once no message to a track moves by more than this.
const LBP_TOLERANCE: f64 = 1e-13;

/// `m + sum_k w_k nu_k`, the sum in pair order (one expression for every path, so that
/// they agree to the bit).
#[inline]
fn lbp_total(m: f64, w: &[f64], nu: &[f64]) -> f64 {
    m + w.iter().zip(nu).map(|(w, n)| w * n).sum::<f64>()
}

/// A track's messages to its detections from its messages back (`nu`).
#[inline]
fn lbp_mu(m: f64, w: &[f64], nu: &[f64], mu: &mut [f64]) {
    let s = lbp_total(m, w, nu);
    for ((mu, &w), &nu) in mu.iter_mut().zip(w).zip(nu) {
        let rest = s - w * nu;
        *mu = if rest > 0.0 { w / rest } else { f64::INFINITY };
    }
}

/// [`jpda_lbp`] on one core, rows as given.
fn lbp(a: &[Vec<(usize, f64)>], m: &[f64], ndet: usize) -> Vec<(f64, Vec<f64>)> {
    let w: Vec<Vec<f64>> = a
        .iter()
        .map(|row| row.iter().map(|e| e.1).collect())
        .collect();
    let mut nu: Vec<Vec<f64>> = a.iter().map(|row| vec![1.0; row.len()]).collect();
    let mut mu: Vec<Vec<f64>> = a.iter().map(|row| vec![0.0; row.len()]).collect();
    let mut col = vec![0.0; ndet];
    for _ in 0..LBP_ROUNDS {
        for i in 0..a.len() {
            lbp_mu(m[i], &w[i], &nu[i], &mut mu[i]);
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
        if change < LBP_TOLERANCE {
            break;
        }
    }
    (0..a.len())
        .map(|i| {
            let s = lbp_total(m[i], &w[i], &nu[i]);
            (
                m[i] / s,
                w[i].iter().zip(&nu[i]).map(|(w, n)| w * n / s).collect(),
            )
        })
        .collect()
}

/// Pairs of a cluster from which belief propagation runs each round on every core
/// ([`jpda_lbp`]; the same result as one core).
pub const LBP_PARALLEL_EDGES: usize = 1 << 14;

/// Pairs a task of a parallel round takes (whole tracks).
const LBP_TASK_PAIRS: usize = 1 << 13;

/// A cluster's association graph in flat arrays, for belief propagation on every core
/// (dense clutter chains 10^5 tracks into one cluster of 10^6 pairs): the pairs laid
/// track after track, and each detection's pairs listed in ascending track order, so
/// that a detection's sum runs in the one-core order and gives the same bits.
struct Graph {
    /// Each track's pairs: `rs[q]..rs[q + 1]`.
    rs: Vec<usize>,
    /// Detection of each pair.
    det: Vec<u32>,
    /// Weight of each pair.
    w: Vec<f64>,
    /// Miss weight of each track.
    m: Vec<f64>,
    /// Each detection's pairs: `cp[cs[l]..cs[l + 1]]`.
    cs: Vec<usize>,
    cp: Vec<u32>,
    /// Track boundaries of the parallel tasks (first 0, last the number of tracks).
    cuts: Vec<usize>,
}

/// `cp`'s slots, written from the counting sort's tasks, each slot by one task.
struct SharedSlots(*mut u32);
// SAFETY: the tasks write disjoint slots (see `Graph::build`).
unsafe impl Sync for SharedSlots {}

/// `v` cut into consecutive pieces that end at `ends` (increasing, the last `v.len()`).
fn cut_at<T>(mut v: &mut [T], ends: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    let mut at = 0;
    for end in ends {
        let (head, tail) = std::mem::take(&mut v).split_at_mut(end - at);
        out.push(head);
        v = tail;
        at = end;
    }
    out
}

/// A task's share of a round: whole tracks, their pairs' offsets relative to the first.
struct Task<'a> {
    /// The tracks' pair starts (absolute), one more than the tracks.
    rs: &'a [usize],
    det: &'a [u32],
    w: &'a [f64],
    m: &'a [f64],
}

impl Task<'_> {
    /// One round from the detections' sums `col`: each pair's message to its track
    /// (`nu`), then each track's messages to its detections (`mu`, the next round's);
    /// the largest change of `nu`. Flat loops over the pairs (the divisions vectorize),
    /// with the same operations per pair as [`lbp`], so the same bits.
    fn round(&self, col: &[f64], mu: &mut [f64], nu: &mut [f64], scratch: &mut Vec<f64>) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { self.round_avx2(col, mu, nu, scratch) };
        }
        self.round_any(col, mu, nu, scratch)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn round_avx2(
        &self,
        col: &[f64],
        mu: &mut [f64],
        nu: &mut [f64],
        scratch: &mut Vec<f64>,
    ) -> f64 {
        self.round_any(col, mu, nu, scratch)
    }

    #[inline(always)]
    fn round_any(
        &self,
        col: &[f64],
        mu: &mut [f64],
        nu: &mut [f64],
        scratch: &mut Vec<f64>,
    ) -> f64 {
        let n = self.det.len();
        scratch.clear();
        scratch.extend(self.det.iter().map(|&l| col[l as usize]));
        for (v, &mu) in scratch.iter_mut().zip(&*mu) {
            *v = 1.0 / (1.0 + *v - mu);
        }
        // The largest change, four lanes side by side (`lane` is never NaN, so the
        // select is `lane.max(d)`; the maximum does not depend on the order).
        let mut lanes = [0.0f64; 4];
        let mut nus = nu.chunks_exact_mut(4);
        let mut vs = scratch.chunks_exact(4);
        for (nu, v) in (&mut nus).zip(&mut vs) {
            for j in 0..4 {
                let d = (v[j] - nu[j]).abs();
                lanes[j] = if d > lanes[j] { d } else { lanes[j] };
                nu[j] = v[j];
            }
        }
        for (nu, &v) in nus.into_remainder().iter_mut().zip(vs.remainder()) {
            let d = (v - *nu).abs();
            lanes[0] = if d > lanes[0] { d } else { lanes[0] };
            *nu = v;
        }
        let change = lanes.iter().fold(0.0, |a: f64, &b| a.max(b));
        // Each track's total, spread over its pairs.
        let o = self.rs[0];
        scratch.clear();
        for (q, r) in self.rs.windows(2).enumerate() {
            let (a, b) = (r[0] - o, r[1] - o);
            let s = lbp_total(self.m[q], &self.w[a..b], &nu[a..b]);
            scratch.extend(std::iter::repeat_n(s, b - a));
        }
        debug_assert_eq!(scratch.len(), n);
        for (((mu, &w), &nu), &s) in mu.iter_mut().zip(self.w).zip(&*nu).zip(scratch.iter()) {
            let rest = s - w * nu;
            *mu = if rest > 0.0 { w / rest } else { f64::INFINITY };
        }
        change
    }
}

impl Graph {
    /// The graph of `tracks` rows: row `r`'s pairs are the detections `det[row(r)]`
    /// (indices below `ndet`, none twice in a row); `weigh(r, w)` writes the row's
    /// weights in row order and returns its miss weight. Every phase on every core.
    fn build(
        tracks: usize,
        ndet: usize,
        det: &[u32],
        row: impl Fn(usize) -> std::ops::Range<usize> + Sync,
        weigh: impl Fn(usize, &mut [f64]) -> f64 + Sync,
    ) -> Graph {
        // The pairs laid track after track, a task of tracks at a time.
        let mut rs = Vec::with_capacity(tracks + 1);
        let mut cuts = vec![0];
        let mut at = 0;
        rs.push(0);
        for r in 0..tracks {
            at += row(r).len();
            rs.push(at);
            if at - rs[*cuts.last().unwrap_or(&0)] >= LBP_TASK_PAIRS {
                cuts.push(rs.len() - 1);
            }
        }
        if *cuts.last().unwrap_or(&0) != tracks {
            cuts.push(tracks);
        }
        let (mut pd, mut w, mut m) = (vec![0u32; at], vec![0.0; at], vec![0.0; tracks]);
        let pair_ends = || cuts[1..].iter().map(|&c| rs[c]);
        cut_at(&mut pd, pair_ends())
            .into_par_iter()
            .zip(cut_at(&mut w, pair_ends()))
            .zip(cut_at(&mut m, cuts[1..].iter().copied()))
            .zip(cuts.par_windows(2))
            .for_each(|(((pd, w), m), c)| {
                let o = rs[c[0]];
                for r in c[0]..c[1] {
                    let (a, b) = (rs[r] - o, rs[r + 1] - o);
                    for (e, k) in (a..b).zip(row(r)) {
                        pd[e] = det[k];
                    }
                    m[r - c[0]] = weigh(r, &mut w[a..b]);
                }
            });
        // Each detection's pairs in ascending order: a counting sort, its passes a
        // block of pairs a task. Each block's counts, made running totals block after
        // block; block `b` then owns slots `cs[l] + total[b - 1][l] .. cs[l] +
        // total[b][l]` of detection `l` and fills them from the top, its pairs taken
        // last to first.
        const BLOCKS: usize = 32;
        let block = at.div_ceil(BLOCKS).max(1);
        let mut counts: Vec<Vec<u32>> = pd
            .par_chunks(block)
            .map(|b| {
                let mut c = vec![0u32; ndet];
                for &l in b {
                    c[l as usize] += 1;
                }
                c
            })
            .collect();
        for b in 1..counts.len() {
            let (done, rest) = counts.split_at_mut(b);
            rest[0]
                .par_iter_mut()
                .zip(&done[b - 1])
                .for_each(|(c, &p)| *c += p);
        }
        let mut cs = vec![0usize; ndet + 1];
        if let Some(total) = counts.last() {
            for l in 0..ndet {
                cs[l + 1] = cs[l] + total[l] as usize;
            }
        }
        let mut cp = vec![0u32; at];
        let out = SharedSlots(cp.as_mut_ptr());
        pd.par_chunks(block)
            .zip(counts.par_iter_mut())
            .enumerate()
            .for_each(|(k, (b, top))| {
                let out = &out;
                for (e, &l) in b.iter().enumerate().rev() {
                    top[l as usize] -= 1;
                    let slot = cs[l as usize] + top[l as usize] as usize;
                    // SAFETY: block k's slots are its own (counted for it alone), each
                    // written once, and all lie in `cp` (below cs[ndet] = its length).
                    unsafe { *out.0.add(slot) = (k * block + e) as u32 };
                }
            });
        Graph {
            rs,
            det: pd,
            w,
            m,
            cs,
            cp,
            cuts,
        }
    }

    /// `v` (one entry a pair) cut at the tasks' track boundaries.
    fn tasks<'a, T>(&self, v: &'a mut [T]) -> Vec<&'a mut [T]> {
        cut_at(v, self.cuts[1..].iter().map(|&c| self.rs[c]))
    }

    /// The messages to the tracks (`nu`, one a pair) at the fixed point, each round on
    /// every core.
    fn propagate(&self) -> Vec<f64> {
        let e = self.det.len();
        let mut nu = vec![1.0; e];
        let mut mu = vec![0.0; e];
        let mut col = vec![0.0; self.cs.len() - 1];
        let (rs, w, m) = (&self.rs, &self.w, &self.m);
        // The first round's messages to detections.
        self.tasks(&mut mu)
            .into_par_iter()
            .zip(self.cuts.par_windows(2))
            .for_each(|(mu, c)| {
                let o = rs[c[0]];
                for i in c[0]..c[1] {
                    let (a, b) = (rs[i], rs[i + 1]);
                    lbp_mu(m[i], &w[a..b], &nu[a..b], &mut mu[a - o..b - o]);
                }
            });
        for _ in 0..LBP_ROUNDS {
            // Each detection's sum, in ascending track order.
            col.par_chunks_mut(1024).enumerate().for_each(|(c, out)| {
                for (k, out) in out.iter_mut().enumerate() {
                    let l = c * 1024 + k;
                    let mut s = 0.0;
                    for &p in &self.cp[self.cs[l]..self.cs[l + 1]] {
                        s += mu[p as usize];
                    }
                    *out = s;
                }
            });
            // The messages back to the tracks, then (for the next round) each track's
            // messages to its detections.
            let change = self
                .tasks(&mut mu)
                .into_par_iter()
                .zip(self.tasks(&mut nu))
                .zip(self.cuts.par_windows(2))
                .map_init(Vec::new, |scratch, ((mu, nu), c)| {
                    let o = rs[c[0]];
                    let (a, b) = (o, rs[c[1]]);
                    let task = Task {
                        rs: &rs[c[0]..=c[1]],
                        det: &self.det[a..b],
                        w: &w[a..b],
                        m: &m[c[0]..c[1]],
                    };
                    task.round(&col, mu, nu, scratch)
                })
                .reduce(|| 0.0, f64::max);
            if change < LBP_TOLERANCE {
                break;
            }
        }
        nu
    }

    /// Track `q`'s `beta0` and its pairs' betas from the messages `nu`.
    fn betas<'a>(&'a self, q: usize, nu: &'a [f64]) -> (f64, impl Iterator<Item = f64> + 'a) {
        let (a, b) = (self.rs[q], self.rs[q + 1]);
        let s = lbp_total(self.m[q], &self.w[a..b], &nu[a..b]);
        let betas = self.w[a..b]
            .iter()
            .zip(&nu[a..b])
            .map(move |(w, n)| w * n / s);
        (self.m[q] / s, betas)
    }

    /// Each track's `(beta0, betas)` from the messages `nu`.
    fn marginals(&self, nu: &[f64]) -> Vec<(f64, Vec<f64>)> {
        (0..self.m.len())
            .into_par_iter()
            .map(|q| {
                let (b0, betas) = self.betas(q, nu);
                (b0, betas.collect())
            })
            .collect()
    }
}

/// JPDA's log-weights from the detection probability `pd`, the gate probability `pg`
/// and the clutter density: `(gain, log_miss)`, where a pair with log-likelihood `ll`
/// weighs `exp(gain + ll)` and a track's miss `exp(log_miss)`.
pub fn jpda_weights(pd: f64, pg: f64, clutter: f64) -> (f64, f64) {
    (pd.ln() - clutter.ln(), (1.0 - pd * pg).ln())
}

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
    let (gain, log_miss) = jpda_weights(pd, pg, clutter);
    // Detections the gate names, for the large clusters' arrays (found once, if needed).
    let ndet = std::sync::OnceLock::new();
    let solved: Vec<Vec<(usize, Weights)>> = clusters
        .par_iter()
        .map(|cl| {
            let pairs: usize = cl.iter().map(|&i| g.of(i).len()).sum();
            if pairs >= LBP_PARALLEL_EDGES {
                let events = cl
                    .iter()
                    .fold(1.0, |e, &i| e * (1.0 + g.of(i).len() as f64));
                if events > exact_events {
                    let ndet = *ndet.get_or_init(|| ndet_of(g));
                    return jpda_wide(cl, g, ndet, gain, log_miss);
                }
            }
            jpda_local(cl, g, gain, log_miss, exact_events)
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

/// JPDA of one cluster through its local rows: enumerated up to `exact_events` joint
/// events, else by belief propagation ([`jpda_lbp`]).
fn jpda_local(
    cl: &[usize],
    g: &Gated,
    gain: f64,
    log_miss: f64,
    exact_events: f64,
) -> Vec<(usize, Weights)> {
    let (dets, rows) = local(cl, g);
    let mut a = Vec::with_capacity(cl.len());
    let mut m = Vec::with_capacity(cl.len());
    let mut events = 1.0;
    for row in &rows {
        let top = log_top(gain, log_miss, row.iter().map(|e| e.1));
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
}

/// A track's largest log-weight, its miss's (`log_miss`) or a pair's (`gain + ll`):
/// the weights are scaled per track by it, which leaves the marginals unchanged and
/// keeps products in range.
fn log_top(gain: f64, log_miss: f64, ll: impl Iterator<Item = f64>) -> f64 {
    ll.map(|l| gain + l).fold(log_miss, f64::max)
}

/// Detections a gate can name: one past its largest index.
fn ndet_of(g: &Gated) -> usize {
    g.det.iter().max().map_or(0, |&l| l as usize + 1)
}

/// JPDA of one large loopy cluster by belief propagation in flat arrays, every phase on
/// every core ([`Graph`]); the weights and marginals are formed as in [`jpda`]'s
/// per-cluster path, so both give the same bits.
fn jpda_wide(
    cl: &[usize],
    g: &Gated,
    ndet: usize,
    gain: f64,
    log_miss: f64,
) -> Vec<(usize, Weights)> {
    let gr = Graph::build(
        cl.len(),
        ndet,
        &g.det,
        |r| g.of(cl[r]),
        |r, w| {
            let row = g.of(cl[r]);
            let top = log_top(gain, log_miss, row.clone().map(|k| g.ll[k]));
            for (w, k) in w.iter_mut().zip(row) {
                *w = (gain + g.ll[k] - top).exp();
            }
            (log_miss - top).exp()
        },
    );
    let nu = gr.propagate();
    (0..cl.len())
        .into_par_iter()
        .map(|q| {
            let i = cl[q];
            let (beta0, betas) = gr.betas(q, &nu);
            let det = g.of(i).zip(betas).map(|(k, b)| (g.det[k], b)).collect();
            (i, Weights { beta0, det })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::associate::clusters;
    use super::super::associate::tests::uniforms;
    use super::*;

    #[test]
    fn belief_propagation_on_every_core_gives_the_bits_of_one_core() {
        // A loopy cluster of 6000 tracks, each gating 3 or 4 of 4000 detections, with
        // weights spread over decades.
        let mut next = uniforms(0x9e37_79b9_7f4a_7c15);
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
        let one = lbp(&a, &m, ndet);
        let all = jpda_lbp(&a, &m, ndet);
        assert_eq!(one, all);
        // And it is a distribution per track.
        for (b0, b) in &one {
            let s: f64 = b0 + b.iter().sum::<f64>();
            assert!((s - 1.0).abs() < 1e-9, "{s}");
        }
    }

    #[test]
    fn a_large_cluster_in_flat_arrays_gives_the_bits_of_its_rows() {
        // One loopy cluster of 6000 tracks gating 3 or 4 of 4000 detections: the path
        // from the gate (weights, marginals and detections formed in place) against the
        // one through the cluster's local rows.
        let mut next = uniforms(0x5851_f42d_4c95_7f2d);
        let ndet = 4000;
        let mut g = Gated {
            start: vec![0],
            det: Vec::new(),
            ll: Vec::new(),
        };
        for i in 0..6000usize {
            let mut row: Vec<u32> = (0..3 + (i % 2))
                .map(|j| ((i * 7 / 10 + j * 13 + (next() * 5.0) as usize) % ndet) as u32)
                .collect();
            row.sort_unstable();
            row.dedup();
            g.ll.extend(row.iter().map(|_| -8.0 * next()));
            g.det.extend(row);
            g.start.push(g.det.len());
        }
        let cl = clusters(&g, ndet);
        assert_eq!(cl.len(), 1);
        assert!(g.det.len() >= LBP_PARALLEL_EDGES);
        let (gain, log_miss) = (0.9f64.ln() - 1e-3f64.ln(), (1.0 - 0.9 * 0.99f64).ln());
        let wide = jpda_wide(&cl[0], &g, ndet, gain, log_miss);
        let rows = jpda_local(&cl[0], &g, gain, log_miss, 0.0);
        assert_eq!(wide, rows);
    }
}
