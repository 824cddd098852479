//! JPDA marginals on the GPU: the clusters of [`assign`](super::assign)'s union-find over
//! every gated pair, then per cluster the marginals of
//! [`associate::jpda`](super::super::associate::jpda): a track alone in its cluster by its
//! own thread; a cluster of up to `exact_events` joint events by one thread enumerating
//! them in the host's order (the same sums in the same order, so the same marginals to
//! the rounding of `exp`); every larger cluster by loopy belief propagation over all
//! their pairs at once, a round of four kernels, each cluster stopping after the round
//! whose largest change of a message is below the host's 1e-13, as on the host (one
//! read-back a round); each detection's column summed in the host's order from a list of
//! its pairs built once, so that the rounds, and the marginals, are the host's to the
//! rounding of `exp` and the same from run to run. Kernels:
//! `kernels/jpda.cu` after `kernels/assign.cu`.

use super::super::associate::{jpda_weights, Weights};
use super::super::gate::Gated;
use super::assign::{check_gated, time_repeats, upload_gated, GpuGnn, Pairs};
use super::params::{
    GjCheck, GjClassify, GjCol, GjDcount, GjDfill, GjDplace, GjDsort, GjFinal, GjInit, GjMu, GjNu,
    GjSingle, GjWeights, Graph,
};
use crate::cuda::{self, dtoh, grid_for, launch, DevBuf, Gpu, Pinned};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Most tracks of a cluster whose events are enumerated (the host enumerates at most
/// `exact_events` events, and a cluster's tracks each have a pair, so at most
/// log2(exact_events) tracks: 14 at the default 2e4).
pub const ENUMERATED_MAX_TRACKS: usize = 16;
/// Rounds of belief propagation at most (the host's bound).
const MAX_ROUNDS: usize = 500;
const BLOCK: u32 = 128;
const KERNELS: [&str; 19] = [
    "ga_init",
    "ga_owner",
    "ga_union",
    "ga_root",
    "ga_place",
    "ga_member",
    "gj_weights",
    "gj_single",
    "gj_init",
    "gj_classify",
    "gj_dcount",
    "gj_dplace",
    "gj_dfill",
    "gj_dsort",
    "gj_mu",
    "gj_col",
    "gj_nu",
    "gj_check",
    "gj_final",
];

/// The translation unit: the association's (for its clustering), then `kernels/jpda.cu`.
#[doc(hidden)]
pub fn source() -> String {
    format!(
        "{}\n#define GJ_MAXR {ENUMERATED_MAX_TRACKS}\n{}",
        super::assign::source(),
        include_str!("../kernels/jpda.cu")
    )
}

/// What the last [`GpuJpda::solve`] found.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JpdaStats {
    /// Clusters of two tracks or more.
    pub clusters: usize,
    /// Of those, the clusters whose events were enumerated.
    pub enumerated: usize,
    /// The clusters solved by belief propagation, and their tracks.
    pub propagated: usize,
    pub propagated_tracks: usize,
    /// Tracks of the largest cluster.
    pub largest: usize,
    /// Rounds of belief propagation.
    pub rounds: usize,
}

/// The device JPDA: the clustering's workspace and the marginals' (grown to the largest
/// problem seen).
pub(crate) struct GpuJpda {
    gnn: GpuGnn,
    mw: DevBuf<f64>,
    a: DevBuf<f64>,
    nu: DevBuf<f64>,
    mu: DevBuf<f64>,
    col: DevBuf<f64>,
    /// Each detection's pairs among the clusters propagated: how many, where its list
    /// starts in `dp`, a fill count, and the lists (pair indices, ascending).
    dn: DevBuf<u32>,
    ds: DevBuf<u32>,
    dfill: DevBuf<u32>,
    dp: DevBuf<u32>,
    clbp: DevBuf<u32>,
    jc: DevBuf<u32>,
    cchange: DevBuf<u64>,
    active: DevBuf<u32>,
    pick: DevBuf<i32>,
    host: Pinned<u32>,
    /// What the last solve found.
    pub stats: JpdaStats,
}

fn grow<T: Copy>(gpu: &Arc<Gpu>, b: &mut DevBuf<T>, n: usize, what: &str) -> Result<()> {
    if b.len() < n {
        *b = DevBuf::new(gpu, n.max(b.len() * 3 / 2), what)?;
    }
    Ok(())
}

impl GpuJpda {
    /// Compiles (or finds cached) the kernels on `gpu`.
    pub fn new(gpu: &Arc<Gpu>) -> Result<GpuJpda> {
        cuda::catch(|| {
            let module = gpu.module("jpda", &source(), &KERNELS)?;
            Ok(GpuJpda {
                gnn: GpuGnn::with_module(gpu, module)?,
                mw: DevBuf::new(gpu, 1, "JPDA miss weights")?,
                a: DevBuf::new(gpu, 1, "JPDA pair weights")?,
                nu: DevBuf::new(gpu, 1, "JPDA messages to tracks")?,
                mu: DevBuf::new(gpu, 1, "JPDA messages to detections")?,
                col: DevBuf::new(gpu, 1, "JPDA detection sums")?,
                dn: DevBuf::new(gpu, 1, "JPDA pairs of a detection")?,
                ds: DevBuf::new(gpu, 1, "JPDA list starts")?,
                dfill: DevBuf::new(gpu, 1, "JPDA list fills")?,
                dp: DevBuf::new(gpu, 1, "JPDA detection lists")?,
                clbp: DevBuf::new(gpu, 1, "JPDA cluster methods")?,
                jc: DevBuf::new(gpu, 4, "JPDA counters")?,
                cchange: DevBuf::new(gpu, 1, "JPDA largest changes")?,
                active: DevBuf::new(gpu, 1, "JPDA clusters going")?,
                pick: DevBuf::new(gpu, 1, "JPDA scratch picks")?,
                host: Pinned::new(gpu, 8)?,
                stats: JpdaStats::default(),
            })
        })
    }

    /// The JPDA marginals of `n` tracks and `ndet` detections from the `m` gated pairs
    /// (compressed rows by track, as [`GpuGnn::solve`] takes them): a pair weighs
    /// `exp(gain + ll)`, a miss `exp(log_miss)`; clusters of at most `exact_events`
    /// events are enumerated. Writes `beta0` [n] (the probability that a track has none
    /// of its detections; 1 without pairs) and `beta` [m] (each pair's). Synchronises
    /// once, and once a round of belief propagation when a cluster needs it.
    pub fn solve(
        &mut self,
        pairs: Pairs<'_>,
        gain: f64,
        log_miss: f64,
        exact_events: f64,
        beta0: &DevBuf<f64>,
        beta: &DevBuf<f64>,
    ) -> Result<()> {
        pairs.check("GPU JPDA", ("beta", beta.len(), pairs.m))?;
        pairs.check("GPU JPDA", ("beta0", beta0.len(), pairs.n))?;
        let (n, ndet, m, start, det, ll) = pairs.parts();
        self.stats = JpdaStats::default();
        if n == 0 {
            return Ok(());
        }
        cuda::catch(|| {
            let gpu = self.gnn.gpu.clone();
            grow(&gpu, &mut self.mw, n, "JPDA miss weights")?;
            grow(&gpu, &mut self.clbp, n, "JPDA cluster methods")?;
            grow(&gpu, &mut self.cchange, n, "JPDA largest changes")?;
            grow(&gpu, &mut self.pick, n, "JPDA scratch picks")?;
            grow(&gpu, &mut self.a, m.max(1), "JPDA pair weights")?;
            grow(&gpu, &mut self.nu, m.max(1), "JPDA messages to tracks")?;
            grow(&gpu, &mut self.mu, m.max(1), "JPDA messages to detections")?;
            grow(&gpu, &mut self.col, ndet.max(1), "JPDA detection sums")?;
            grow(&gpu, &mut self.dn, ndet.max(1), "JPDA pairs of a detection")?;
            grow(&gpu, &mut self.ds, ndet.max(1), "JPDA list starts")?;
            grow(&gpu, &mut self.dfill, ndet.max(1), "JPDA list fills")?;
            grow(&gpu, &mut self.dp, m.max(1), "JPDA detection lists")?;
            // Every pair takes part: an infinite miss cost.
            self.gnn.cluster(pairs, 0.0, f64::INFINITY, &self.pick)?;
            let g = &self.gnn;
            let s = &gpu.stream;
            let k = g.module_ref();
            let blk = (BLOCK, 1, 1);
            let over_n = grid_for(n, BLOCK);
            let (nu32, du32, mu32) = (n as u32, ndet as u32, m as u32);
            launch(
                s,
                k,
                "gj_weights",
                over_n,
                blk,
                &GjWeights {
                    n: nu32,
                    start,
                    ll,
                    gain,
                    log_miss,
                    mw: &self.mw,
                    a: &self.a,
                },
            )?;
            launch(
                s,
                k,
                "gj_single",
                over_n,
                blk,
                &GjSingle {
                    n: nu32,
                    start,
                    parent: &g.parent,
                    size: &g.size,
                    mw: &self.mw,
                    a: &self.a,
                    beta0,
                    beta,
                },
            )?;
            launch(
                s,
                k,
                "gj_init",
                grid_for(m.max(ndet).max(4), BLOCK),
                blk,
                &GjInit {
                    m: mu32,
                    ndet: du32,
                    nu: &self.nu,
                    dn: &self.dn,
                    jc: &self.jc,
                },
            )?;
            launch(
                s,
                k,
                "gj_classify",
                grid_for(n / 2 + 1, 64),
                (64, 1, 1),
                &GjClassify {
                    counters: &g.counters,
                    cstart: &g.cstart,
                    csize: &g.csize,
                    member: &g.member,
                    start,
                    det,
                    mw: &self.mw,
                    a: &self.a,
                    exact: exact_events,
                    dloc: &g.dloc,
                    clbp: &self.clbp,
                    cchange: &self.cchange,
                    jc: &self.jc,
                    beta0,
                    beta,
                },
            )?;
            dtoh(
                s,
                &g.counters,
                0,
                &mut self.host.as_mut_slice()[..4],
                "reading the JPDA clusters",
            )?;
            dtoh(
                s,
                &self.jc,
                0,
                &mut self.host.as_mut_slice()[4..7],
                "reading the JPDA counters",
            )?;
            cuda::sync(s, "GPU JPDA")?;
            let h = self.host.as_slice();
            self.stats = JpdaStats {
                clusters: h[0] as usize,
                enumerated: h[4] as usize,
                propagated: h[5] as usize,
                propagated_tracks: h[6] as usize,
                largest: h[3] as usize,
                rounds: 0,
            };
            if self.stats.propagated == 0 {
                return Ok(());
            }
            let over_d = grid_for(ndet.max(1), BLOCK);
            // The clusters' graph, as each belief propagation kernel takes it.
            let (parent, size, cid, clbp) = (&g.parent, &g.size, &g.cid, &self.clbp);
            let graph = Graph {
                n: nu32,
                start,
                det,
                parent,
                size,
                cid,
                clbp,
            };
            let p = GjDcount {
                graph,
                dn: &self.dn,
            };
            launch(s, k, "gj_dcount", over_n, blk, &p)?;
            launch(
                s,
                k,
                "gj_dplace",
                over_d,
                blk,
                &GjDplace {
                    ndet: du32,
                    dn: &self.dn,
                    ds: &self.ds,
                    dfill: &self.dfill,
                    jc: &self.jc,
                },
            )?;
            let (ds, dfill, dp) = (&self.ds, &self.dfill, &self.dp);
            let p = GjDfill {
                graph,
                ds,
                dfill,
                dp,
            };
            launch(s, k, "gj_dfill", over_n, blk, &p)?;
            launch(
                s,
                k,
                "gj_dsort",
                over_d,
                blk,
                &GjDsort {
                    ndet: du32,
                    dn: &self.dn,
                    ds: &self.ds,
                    dp: &self.dp,
                },
            )?;
            let mut rounds = 0;
            while rounds < MAX_ROUNDS {
                rounds += 1;
                let (mw, a, nu, mu) = (&self.mw, &self.a, &self.nu, &self.mu);
                let p = GjMu {
                    graph,
                    mw,
                    a,
                    nu,
                    mu,
                };
                launch(s, k, "gj_mu", over_n, blk, &p)?;
                launch(
                    s,
                    k,
                    "gj_col",
                    over_d,
                    blk,
                    &GjCol {
                        ndet: du32,
                        dn: &self.dn,
                        ds: &self.ds,
                        dp: &self.dp,
                        mu: &self.mu,
                        col: &self.col,
                        active: &self.active,
                    },
                )?;
                let (col, cchange) = (&self.col, &self.cchange);
                let p = GjNu {
                    graph,
                    mu,
                    col,
                    nu,
                    cchange,
                };
                launch(s, k, "gj_nu", over_n, blk, &p)?;
                launch(
                    s,
                    k,
                    "gj_check",
                    grid_for(n / 2 + 1, BLOCK),
                    blk,
                    &GjCheck {
                        counters: &g.counters,
                        clbp: &self.clbp,
                        cchange: &self.cchange,
                        active: &self.active,
                    },
                )?;
                dtoh(
                    s,
                    &self.active,
                    0,
                    &mut self.host.as_mut_slice()[7..8],
                    "reading the JPDA clusters going",
                )?;
                cuda::sync(s, "GPU JPDA belief propagation")?;
                if self.host.as_slice()[7] == 0 {
                    break;
                }
            }
            self.stats.rounds = rounds;
            let (mw, a, nu) = (&self.mw, &self.a, &self.nu);
            let p = GjFinal {
                n: nu32,
                start,
                parent,
                size,
                cid,
                clbp,
                mw,
                a,
                nu,
                beta0,
                beta,
            };
            launch(s, k, "gj_final", over_n, blk, &p)?;
            cuda::sync(s, "GPU JPDA marginals")
        })
    }
}

/// One run of [`jpda_gpu_timed`]: device time per solve (CUDA events, ms) and what the
/// last solve found.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct JpdaGpuRun {
    /// Milliseconds of each timed solve, the rounds' read-backs included.
    pub times_ms: Vec<f64>,
    /// What the last solve found.
    pub stats: JpdaStats,
}

/// [`associate::jpda`](super::super::associate::jpda) on GPU 0 from host data (for tests
/// and benchmarks): uploads `g`, solves with [`GpuJpda`] (outputs poisoned with NaN
/// first, so an unwritten marginal is an error), downloads each track's weights; then
/// `repeats` more solves timed by CUDA events.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn jpda_gpu_timed(
    g: &Gated,
    ndet: usize,
    pd: f64,
    pg: f64,
    clutter: f64,
    exact_events: f64,
    repeats: usize,
) -> Result<(Vec<Weights>, JpdaGpuRun)> {
    let n = g.start.len().saturating_sub(1);
    let m = g.det.len();
    check_gated(g, ndet, "GPU JPDA")?;
    let (gain, log_miss) = jpda_weights(pd, pg, clutter);
    cuda::catch(|| {
        let gpu = cuda::gpu(0)?;
        let s = &gpu.stream;
        let (start, det, ll) = upload_gated(&gpu, g)?;
        let beta0 = DevBuf::from_slice(&gpu, s, &vec![f64::NAN; n.max(1)], "JPDA beta0")?;
        let beta = DevBuf::from_slice(&gpu, s, &vec![f64::NAN; m.max(1)], "JPDA beta")?;
        let mut jp = GpuJpda::new(&gpu)?;
        let pairs = Pairs {
            n,
            ndet,
            m,
            start: &start,
            det: &det,
            ll: &ll,
        };
        let mut solve = || jp.solve(pairs, gain, log_miss, exact_events, &beta0, &beta);
        solve()?;
        let (mut b0, mut b) = (vec![0.0; n], vec![0.0; m]);
        dtoh(s, &beta0, 0, &mut b0, "reading the JPDA beta0")?;
        dtoh(s, &beta, 0, &mut b, "reading the JPDA beta")?;
        cuda::sync(s, "reading the JPDA marginals")?;
        let times_ms = time_repeats(&gpu, repeats, &mut solve)?;
        let run = JpdaGpuRun {
            times_ms,
            stats: jp.stats,
        };
        if let Some(i) = b0.iter().position(|v| !v.is_finite()) {
            return Err(Error::Cuda(format!(
                "GPU JPDA: track {i} has beta0 {}",
                b0[i]
            )));
        }
        if let Some(k) = b.iter().position(|v| !v.is_finite()) {
            return Err(Error::Cuda(format!("GPU JPDA: pair {k} has beta {}", b[k])));
        }
        let w = (0..n)
            .map(|i| Weights {
                beta0: b0[i],
                det: g.of(i).map(|k| (g.det[k], b[k])).collect(),
            })
            .collect();
        Ok((w, run))
    })
}
