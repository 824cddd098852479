//! GNN association on the GPU: the clusters of tracks linked by the gated pairs an
//! optimal assignment can hold ([`live_pairs`](super::super::associate::live_pairs)) and
//! one optimal assignment (with a miss choice per track) per cluster, the same optimum
//! as [`associate::gnn`](super::super::associate::gnn) on the host.
//!
//! The gated pairs stay on the device (compressed rows by track, as the gate writes
//! them); pairs that cost a miss or more are skipped by every kernel. Kernels
//! (`kernels/assign.cu`): a lock-free union-find joins each track to the smallest track
//! gating each of its detections; a track alone in its cluster is solved by its own
//! thread (best pair against the miss); every larger cluster gets an id and a span of a
//! member list (atomic counters, no sort). A cluster within the dense limits
//! ([`DEVICE_MAX_TRACKS`] tracks, [`DEVICE_MAX_COLUMNS`] detections + tracks, those of
//! [`dense_fits`](super::super::associate::dense_fits)) is solved by one thread with the
//! dense shortest augmenting path method of [`assign`](super::super::assign) in registers
//! and local memory; a larger one by one block with the sparse form of the same method in
//! shared memory (up to [`Limits::block_tracks`] tracks, [`Limits::block_columns`]
//! columns and [`Limits::block_pairs`] live pairs): both step for step as on the host,
//! which chooses between the same two methods by the same limits, so that both pick the
//! same assignment, ties included.
//!
//! Clusters past the block's limits are solved on the host: `solve` reads five counters
//! back (one synchronisation per call), and only when such a cluster exists downloads
//! the gated pairs, solves those clusters with [`associate`](super::super::associate)'s
//! solver on every core and writes their picks back.

use super::super::assign::Assignment;
use super::super::associate::{gnn_cluster, DENSE_MAX_COLUMNS, DENSE_MAX_TRACKS};
use super::super::gate::Gated;
use super::params::{
    GaInit, GaMember, GaOwner, GaPlace, GaRoot, GaScatter, GaSolve, GaUnion, Gating,
};
use crate::cuda::{self, dtoh, grid_for, launch, DevBuf, EventTimer, Gpu, Module, Pinned};
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// Most tracks of a cluster solved by one thread (the host's dense limit).
pub const DEVICE_MAX_TRACKS: usize = DENSE_MAX_TRACKS;
/// Most columns (the cluster's detections plus its tracks) of a cluster solved by one
/// thread.
pub const DEVICE_MAX_COLUMNS: usize = DENSE_MAX_COLUMNS;

const BLOCK: u32 = 128;
const KERNELS: [&str; 9] = [
    "ga_init",
    "ga_owner",
    "ga_union",
    "ga_root",
    "ga_place",
    "ga_member",
    "ga_solve",
    "ga_solve_block",
    "ga_scatter",
];

/// The device solvers' limits (tests shrink them to reach the block and host paths).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most tracks of a cluster solved by one thread (dense).
    pub tracks: usize,
    /// Most columns (detections + tracks) of a cluster solved by one thread.
    pub columns: usize,
    /// Most tracks of a cluster solved by one block (sparse).
    pub block_tracks: usize,
    /// Most columns of a cluster solved by one block (a power of two).
    pub block_columns: usize,
    /// Most live pairs of a cluster solved by one block.
    pub block_pairs: usize,
    /// Threads of the block solver (a power of two).
    pub block_threads: usize,
}

impl Default for Limits {
    /// The thread's limits are the host's dense limits; the block's fill 43 KB of shared
    /// memory, under the 48 KB a block may take without opting in.
    fn default() -> Self {
        Limits {
            tracks: DEVICE_MAX_TRACKS,
            columns: DEVICE_MAX_COLUMNS,
            block_tracks: 512,
            block_columns: 1024,
            block_pairs: 2048,
            block_threads: 128,
        }
    }
}

/// The complete translation unit: the limits and infinity, then `kernels/assign.cu`.
#[doc(hidden)]
pub fn source() -> String {
    source_with(Limits::default())
}

/// [`source`] with other device limits.
#[doc(hidden)]
pub fn source_with(l: Limits) -> String {
    assert!(l.tracks < l.columns && l.columns <= 254);
    assert!(l.block_columns.is_power_of_two() && l.block_threads.is_power_of_two());
    assert!(l.block_tracks < 65535 && l.block_columns < 65535 && l.block_pairs < 65535);
    format!(
        "#define GA_MAXR {}\n#define GA_MAXC {}\n#define GA_BROWS {}\n#define GA_BCOLS {}\n#define GA_BPAIRS {}\n#define GA_BTHREADS {}\n#define GA_INF (1e300 * 1e300)\n{}",
        l.tracks,
        l.columns,
        l.block_tracks,
        l.block_columns,
        l.block_pairs,
        l.block_threads,
        include_str!("../kernels/assign.cu")
    )
}

/// What the last [`GpuGnn::solve`] found.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GnnStats {
    /// Clusters of two tracks or more.
    pub clusters: usize,
    /// Tracks in those clusters.
    pub clustered_tracks: usize,
    /// Clusters past the device limits, solved on the host.
    pub host_clusters: usize,
    /// Clusters past one thread's limits, handed to the block solver (those past its
    /// limits too are counted in `host_clusters` as well).
    pub block_clusters: usize,
    /// Tracks of the largest cluster.
    pub largest: usize,
}

/// The device association: kernels and workspace (grown to the largest problem seen).
pub(crate) struct GpuGnn {
    pub(super) gpu: Arc<Gpu>,
    module: Arc<Module>,
    /// Per track: parent, cluster size, cluster id of a root, member list; per cluster:
    /// member span start, size, fill count; the ids of clusters left to the host.
    pub(super) parent: DevBuf<u32>,
    pub(super) size: DevBuf<u32>,
    pub(super) cid: DevBuf<u32>,
    pub(super) member: DevBuf<u32>,
    pub(super) cstart: DevBuf<u32>,
    pub(super) csize: DevBuf<u32>,
    cfill: DevBuf<u32>,
    big: DevBuf<u32>,
    blk: DevBuf<u32>,
    /// Per detection: smallest track gating it; local index in its cluster.
    owner: DevBuf<u32>,
    pub(super) dloc: DevBuf<u32>,
    pub(super) counters: DevBuf<u32>,
    counters_host: Pinned<u32>,
    /// What the last solve found.
    pub stats: GnnStats,
}

impl GpuGnn {
    /// Compiles (or finds cached) the kernels on `gpu`.
    pub fn new(gpu: &Arc<Gpu>) -> Result<GpuGnn> {
        cuda::catch(|| {
            let module = gpu.module("gnn-assign", &source(), &KERNELS)?;
            Self::with_module(gpu, module)
        })
    }

    /// The module the kernels are launched from.
    pub(crate) fn module_ref(&self) -> &Module {
        &self.module
    }

    /// The workspace over a module that holds the clustering kernels (`ga_init` ..
    /// `ga_member`), such as the JPDA's.
    pub(crate) fn with_module(gpu: &Arc<Gpu>, module: Arc<Module>) -> Result<GpuGnn> {
        cuda::catch(|| {
            let buf = |what: &str| DevBuf::<u32>::new(gpu, 1, what);
            Ok(GpuGnn {
                gpu: gpu.clone(),
                module,
                parent: buf("association parents")?,
                size: buf("association cluster sizes")?,
                cid: buf("association cluster ids")?,
                member: buf("association members")?,
                cstart: buf("association cluster starts")?,
                csize: buf("association cluster sizes")?,
                cfill: buf("association cluster fills")?,
                big: buf("association host clusters")?,
                blk: buf("association block clusters")?,
                owner: buf("association detection owners")?,
                dloc: buf("association local detections")?,
                counters: DevBuf::new(gpu, 5, "association counters")?,
                counters_host: Pinned::new(gpu, 5)?,
                stats: GnnStats::default(),
            })
        })
    }

    fn reserve(&mut self, n: usize, ndet: usize) -> Result<()> {
        let g = &self.gpu;
        if self.parent.len() < n {
            let n = n.max(self.parent.len() * 3 / 2);
            for (b, what) in [
                (&mut self.parent, "association parents"),
                (&mut self.size, "association cluster sizes"),
                (&mut self.cid, "association cluster ids"),
                (&mut self.member, "association members"),
                (&mut self.cstart, "association cluster starts"),
                (&mut self.csize, "association cluster sizes"),
                (&mut self.cfill, "association cluster fills"),
                (&mut self.big, "association host clusters"),
                (&mut self.blk, "association block clusters"),
            ] {
                *b = DevBuf::new(g, n, what)?;
            }
        }
        if self.owner.len() < ndet {
            let d = ndet.max(self.owner.len() * 3 / 2);
            self.owner = DevBuf::new(g, d, "association detection owners")?;
            self.dloc = DevBuf::new(g, d, "association local detections")?;
        }
        Ok(())
    }

    /// The optimal GNN assignment of `n` tracks to `ndet` detections from the `m` gated
    /// pairs in compressed rows by track (`start` [n + 1] with `start[0] = 0`,
    /// `start[n] = m`; `det` [m], ascending within a row; `ll` [m], `ln N(z; zhat, S)`):
    /// a pair costs `-(gain + ll)`, a miss `miss` (see
    /// [`associate::gnn_costs`](super::super::associate::gnn_costs)). Writes `pick` [n]: each
    /// track's detection or -1. Queued on the device's stream; reads five counters back
    /// (a synchronisation), and when a cluster is past the device limits, solves it on
    /// the host before returning.
    pub fn solve(
        &mut self,
        pairs: Pairs<'_>,
        gain: f64,
        miss: f64,
        pick: &DevBuf<i32>,
    ) -> Result<()> {
        pairs.check("GPU association", ("pick", pick.len(), pairs.n))?;
        let (n, ndet, m, start, det, ll) = pairs.parts();
        self.stats = GnnStats::default();
        if n == 0 {
            return Ok(());
        }
        cuda::catch(|| {
            self.cluster(pairs, gain, miss, pick)?;
            let s = &self.gpu.stream;
            let k = &*self.module;
            // At most n / 2 clusters of two tracks or more.
            let p = GaSolve {
                counters: &self.counters,
                cstart: &self.cstart,
                csize: &self.csize,
                member: &self.member,
                start,
                det,
                ll,
                gain,
                miss,
                dloc: &self.dloc,
                blk: &self.blk,
                big: &self.big,
                pick,
            };
            // At most n / 2 clusters of two tracks or more.
            launch(s, k, "ga_solve", grid_for(n / 2 + 1, 64), (64, 1, 1), &p)?;
            // Clusters past a thread's limits: more than DEVICE_MAX_TRACKS tracks or
            // DEVICE_MAX_COLUMNS columns, so at most this many (detections belong to one
            // cluster each); the blocks past the count return at once.
            let most = n / (DEVICE_MAX_TRACKS + 1) + ndet / (DEVICE_MAX_COLUMNS / 2) + 1;
            let threads = Limits::default().block_threads as u32;
            launch(
                s,
                k,
                "ga_solve_block",
                (most.min(4096) as u32, 1, 1),
                (threads, 1, 1),
                &p,
            )?;
            dtoh(
                s,
                &self.counters,
                0,
                self.counters_host.as_mut_slice(),
                "reading the association counters",
            )?;
            cuda::sync(s, "GPU association")?;
            let c = self.counters_host.as_slice();
            self.stats = GnnStats {
                clusters: c[0] as usize,
                clustered_tracks: c[1] as usize,
                host_clusters: c[2] as usize,
                largest: c[3] as usize,
                block_clusters: c[4] as usize,
            };
            if self.stats.host_clusters > 0 {
                self.solve_on_host(n, m, start, det, ll, gain, miss, pick)?;
            }
            Ok(())
        })
    }

    /// Queues the clustering (`ga_init` .. `ga_member`) of the pairs with
    /// `-(gain + ll) < miss` (`miss` infinite: every pair): per track its root, per
    /// cluster of two tracks or more its id, member span and size; the counters' first
    /// four entries; `pick` of tracks without pairs (-1) and alone in their cluster.
    pub(crate) fn cluster(
        &mut self,
        pairs: Pairs<'_>,
        gain: f64,
        miss: f64,
        pick: &DevBuf<i32>,
    ) -> Result<()> {
        let (n, ndet, _, start, det, ll) = pairs.parts();
        self.reserve(n, ndet)?;
        let s = &self.gpu.stream;
        let k = &*self.module;
        let (nu, du) = (n as u32, ndet as u32);
        let blk = (BLOCK, 1, 1);
        let over_n = grid_for(n, BLOCK);
        let gating = Gating {
            n: nu,
            start,
            det,
            ll,
            gain,
            miss,
        };
        launch(
            s,
            k,
            "ga_init",
            grid_for(n.max(ndet).max(5), BLOCK),
            blk,
            &GaInit {
                n: nu,
                ndet: du,
                parent: &self.parent,
                size: &self.size,
                owner: &self.owner,
                dloc: &self.dloc,
                counters: &self.counters,
            },
        )?;
        launch(
            s,
            k,
            "ga_owner",
            over_n,
            blk,
            &GaOwner {
                gating,
                owner: &self.owner,
            },
        )?;
        launch(
            s,
            k,
            "ga_union",
            over_n,
            blk,
            &GaUnion {
                gating,
                owner: &self.owner,
                parent: &self.parent,
            },
        )?;
        launch(
            s,
            k,
            "ga_root",
            over_n,
            blk,
            &GaRoot {
                n: nu,
                start,
                ll,
                gain,
                miss,
                parent: &self.parent,
                size: &self.size,
            },
        )?;
        launch(
            s,
            k,
            "ga_place",
            over_n,
            blk,
            &GaPlace {
                gating,
                parent: &self.parent,
                size: &self.size,
                cid: &self.cid,
                cstart: &self.cstart,
                csize: &self.csize,
                cfill: &self.cfill,
                counters: &self.counters,
                pick,
            },
        )?;
        launch(
            s,
            k,
            "ga_member",
            over_n,
            blk,
            &GaMember {
                n: nu,
                start,
                ll,
                gain,
                miss,
                parent: &self.parent,
                size: &self.size,
                cid: &self.cid,
                cstart: &self.cstart,
                cfill: &self.cfill,
                member: &self.member,
            },
        )?;
        Ok(())
    }

    /// Solves the clusters listed in `big` on the host and writes their picks.
    #[allow(clippy::too_many_arguments)]
    fn solve_on_host(
        &mut self,
        n: usize,
        m: usize,
        start: &DevBuf<u32>,
        det: &DevBuf<u32>,
        ll: &DevBuf<f64>,
        gain: f64,
        miss: f64,
        pick: &DevBuf<i32>,
    ) -> Result<()> {
        let s = &self.gpu.stream;
        let st = self.stats;
        let mut big = vec![0u32; st.host_clusters];
        let mut cstart = vec![0u32; st.clusters];
        let mut csize = vec![0u32; st.clusters];
        let mut member = vec![0u32; st.clustered_tracks];
        let mut rows = vec![0u32; n + 1];
        let mut g = Gated {
            start: Vec::new(),
            det: vec![0; m],
            ll: vec![0.0; m],
        };
        dtoh(s, &self.big, 0, &mut big, "reading the host clusters")?;
        dtoh(
            s,
            &self.cstart,
            0,
            &mut cstart,
            "reading the cluster starts",
        )?;
        dtoh(s, &self.csize, 0, &mut csize, "reading the cluster sizes")?;
        dtoh(
            s,
            &self.member,
            0,
            &mut member,
            "reading the cluster members",
        )?;
        dtoh(s, start, 0, &mut rows, "reading the gated rows")?;
        dtoh(s, det, 0, &mut g.det, "reading the gated detections")?;
        dtoh(s, ll, 0, &mut g.ll, "reading the gated log-likelihoods")?;
        cuda::sync(s, "reading the clusters for the host")?;
        g.start = rows.iter().map(|&r| r as usize).collect();
        let solved: Vec<(Vec<u32>, Vec<i32>)> = big
            .par_iter()
            .map_init(Assignment::new, |solver, &c| {
                let (a, len) = (cstart[c as usize] as usize, csize[c as usize] as usize);
                let mut cl: Vec<usize> = member[a..a + len].iter().map(|&t| t as usize).collect();
                cl.sort_unstable();
                let mut val = vec![-1i32; len];
                for (i, d) in gnn_cluster(solver, &cl, &g, gain, miss) {
                    // `cl` is sorted.
                    if let Ok(r) = cl.binary_search(&i) {
                        val[r] = d as i32;
                    }
                }
                (cl.iter().map(|&t| t as u32).collect(), val)
            })
            .collect();
        let tracks: Vec<u32> = solved.iter().flat_map(|x| x.0.iter().copied()).collect();
        let values: Vec<i32> = solved.iter().flat_map(|x| x.1.iter().copied()).collect();
        let gpu = &self.gpu;
        let t = DevBuf::from_slice(gpu, s, &tracks, "the host clusters' tracks")?;
        let v = DevBuf::from_slice(gpu, s, &values, "the host clusters' picks")?;
        launch(
            s,
            &self.module,
            "ga_scatter",
            grid_for(tracks.len(), BLOCK),
            (BLOCK, 1, 1),
            &GaScatter {
                count: tracks.len() as u32,
                track: &t,
                value: &v,
                pick,
            },
        )?;
        // The host vectors and the two buffers live until the copies and the scatter
        // are done.
        cuda::sync(s, "writing the host clusters' picks")
    }
}

/// Checks host pairs for the host-data entry points ([`gnn_gpu_timed`],
/// [`jpda_gpu_timed`](super::jpda::jpda_gpu_timed)): rows from 0 to the number of pairs,
/// detections below `ndet`; `what` names the caller in the error.
pub(super) fn check_gated(g: &Gated, ndet: usize, what: &str) -> Result<()> {
    let m = g.det.len();
    if g.start.first().is_some_and(|&s| s != 0) || g.start.last().is_some_and(|&s| s != m) {
        return Err(Error::Input {
            msg: format!("{what}: gated rows must start at 0 and end at the number of pairs"),
        });
    }
    if let Some(&d) = g.det.iter().find(|&&d| d as usize >= ndet) {
        return Err(Error::Input {
            msg: format!("{what}: detection {d} of {ndet}"),
        });
    }
    Ok(())
}

/// Refuses counts the kernels' 32-bit indices cannot hold.
/// The gated pairs of `n` tracks and `ndet` detections on the device, `m` of them in
/// compressed rows by track: `start` [n + 1] with `start[0] = 0` and `start[n] = m`,
/// `det` [m] (ascending within a row), `ll` [m] (`ln N(z; zhat, S)`), as both
/// associations ([`GpuGnn::solve`], [`GpuJpda::solve`](super::jpda::GpuJpda::solve))
/// take them.
#[derive(Clone, Copy)]
pub(crate) struct Pairs<'a> {
    /// Tracks.
    pub(crate) n: usize,
    /// Detections.
    pub(crate) ndet: usize,
    /// Pairs.
    pub(crate) m: usize,
    /// Each track's first pair, and `m` last.
    pub(crate) start: &'a DevBuf<u32>,
    /// Each pair's detection.
    pub(crate) det: &'a DevBuf<u32>,
    /// Each pair's log-likelihood.
    pub(crate) ll: &'a DevBuf<f64>,
}

type Parts<'a> = (
    usize,
    usize,
    usize,
    &'a DevBuf<u32>,
    &'a DevBuf<u32>,
    &'a DevBuf<f64>,
);

impl<'a> Pairs<'a> {
    /// `(n, ndet, m, start, det, ll)`.
    pub(super) fn parts(&self) -> Parts<'a> {
        (self.n, self.ndet, self.m, self.start, self.det, self.ll)
    }

    /// An input error, naming `what`, where a buffer is shorter than the counts need
    /// (the pairs' own, and `out`: an output's name, length and need) or a count does not
    /// fit the kernels' 32-bit indices.
    pub(super) fn check(&self, what: &str, out: (&str, usize, usize)) -> Result<()> {
        let (n, ndet, m) = (self.n, self.ndet, self.m);
        let lens = [
            ("start", self.start.len(), n + 1),
            ("det", self.det.len(), m),
            ("ll", self.ll.len(), m),
            out,
        ];
        if let Some((name, have, need)) = lens.into_iter().find(|&(_, have, need)| have < need) {
            return Err(Error::Input {
                msg: format!(
                    "{what}: {name} holds {have} values where {n} tracks and {m} pairs need {need}"
                ),
            });
        }
        if n.max(ndet).max(m) >= u32::MAX as usize {
            return Err(Error::Input {
                msg: format!(
                    "{what}: {n} tracks, {ndet} detections, {m} pairs: at most {} each",
                    u32::MAX - 1
                ),
            });
        }
        Ok(())
    }
}

/// Milliseconds of each of `repeats` runs of `solve` on `gpu`'s stream (CUDA events).
pub(super) fn time_repeats(
    gpu: &Arc<Gpu>,
    repeats: usize,
    mut solve: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let s = &gpu.stream;
    let timer = EventTimer::new(gpu)?;
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        timer.start(s)?;
        solve()?;
        timer.stop(s)?;
        times.push(f64::from(timer.elapsed_ms()?));
    }
    Ok(times)
}

/// Host pairs on GPU `gpu`: rows (one entry at least), detections, log-likelihoods.
pub(super) fn upload_gated(
    gpu: &Arc<Gpu>,
    g: &Gated,
) -> Result<(DevBuf<u32>, DevBuf<u32>, DevBuf<f64>)> {
    let s = &gpu.stream;
    let rows: Vec<u32> = g.start.iter().map(|&r| r as u32).collect();
    let rows = if rows.is_empty() { vec![0] } else { rows };
    Ok((
        DevBuf::from_slice(gpu, s, &rows, "gated rows")?,
        DevBuf::from_slice(gpu, s, &g.det, "gated detections")?,
        DevBuf::from_slice(gpu, s, &g.ll, "gated log-likelihoods")?,
    ))
}

/// One run of [`gnn_gpu_timed`]: device time per solve (CUDA events, ms) and what the
/// last solve found.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct GnnGpuRun {
    /// Milliseconds of each timed solve, from its first kernel to its last write
    /// (the host's share included when a cluster went there).
    pub times_ms: Vec<f64>,
    /// What the last solve found.
    pub stats: GnnStats,
}

/// [`associate::gnn`](super::super::associate::gnn) on GPU 0 from host data (for tests and
/// benchmarks): uploads `g`, solves with [`GpuGnn`] (the output poisoned first with a
/// value no solve writes, so that an unwritten pick is an error), and downloads each
/// track's detection.
#[doc(hidden)]
pub fn gnn_gpu(g: &Gated, ndet: usize, gain: f64, miss: f64) -> Result<Vec<Option<u32>>> {
    gnn_gpu_timed(g, ndet, gain, miss, 0).map(|r| r.0)
}

/// [`gnn_gpu`], then `repeats` more solves of the same problem timed by CUDA events.
#[doc(hidden)]
pub fn gnn_gpu_timed(
    g: &Gated,
    ndet: usize,
    gain: f64,
    miss: f64,
    repeats: usize,
) -> Result<(Vec<Option<u32>>, GnnGpuRun)> {
    let n = g.start.len().saturating_sub(1);
    let m = g.det.len();
    check_gated(g, ndet, "GPU association")?;
    cuda::catch(|| {
        let gpu = cuda::gpu(0)?;
        let s = &gpu.stream;
        let (start, det, ll) = upload_gated(&gpu, g)?;
        // Poisoned with a value no solve writes (all-ones bytes would read as -1, a miss).
        let junk = vec![i32::MIN; n.max(1)];
        let pick = DevBuf::from_slice(&gpu, s, &junk, "association picks")?;
        let mut gnn = GpuGnn::new(&gpu)?;
        let pairs = Pairs {
            n,
            ndet,
            m,
            start: &start,
            det: &det,
            ll: &ll,
        };
        gnn.solve(pairs, gain, miss, &pick)?;
        let mut out = vec![0i32; n];
        dtoh(s, &pick, 0, &mut out, "reading the association picks")?;
        cuda::sync(s, "reading the association picks")?;
        let mut run = GnnGpuRun {
            times_ms: Vec::with_capacity(repeats),
            stats: gnn.stats,
        };
        run.times_ms = time_repeats(&gpu, repeats, || gnn.solve(pairs, gain, miss, &pick))?;
        if repeats > 0 {
            let mut again = vec![0i32; n];
            dtoh(s, &pick, 0, &mut again, "reading the association picks")?;
            cuda::sync(s, "reading the association picks")?;
            if again != out {
                return Err(Error::Cuda(
                    "GPU association: a repeated solve picked differently".into(),
                ));
            }
        }
        if let Some(i) = out.iter().position(|&p| p < -1 || p >= ndet as i32) {
            return Err(Error::Cuda(format!(
                "GPU association: track {i} was given {} (not a detection of {ndet}, nor -1)",
                out[i]
            )));
        }
        let picks = out.iter().map(|&p| (p >= 0).then_some(p as u32)).collect();
        Ok((picks, run))
    })
}
