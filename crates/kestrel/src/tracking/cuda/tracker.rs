//! The multi-target tracker on the GPU: [`GpuTracker`] has the configuration, the scan
//! semantics and the decisions of [`Tracker`](super::super::Tracker) (GNN or JPDA, f64),
//! with every scan's work on the device. The host uploads each scan's detections and
//! reads back a few counts (the gated pairs of each stage, the association's counters,
//! the live tracks); the tracks themselves come back only when asked for
//! ([`GpuTracker::tracks`]).
//!
//! One scan (kernels in `kernels/track.cu`, on the Kalman family's per-step arithmetic):
//!
//! 1. *Predict* every track and factor its gate: `zhat = H x + d`, `S = H P H^T + R = L L^T`
//!    and `ln |S| / 2`, rounding exactly as the CPU's per-step API and `Innovations`.
//! 2. *Grid*: the detections' bounding box, square cells of side twice the mean of the
//!    gates' largest half-widths (the CPU takes the median, which needs a selection; the
//!    side decides only which cells a gate visits, never which detections pass it), at
//!    most about four cells per detection; a counting sort of the detections by cell
//!    (histogram with atomics, exclusive scan, scatter).
//! 3. *Gate*, one thread per track over the cells its gate's box covers, the chi-square
//!    test on the whitened innovation: compressed rows by track (count pass, scan, fill
//!    pass), each row sorted by detection index, with `ln N(z; zhat, S)`.
//! 4. *Associate* as the CPU does, in two stages: confirmed tracks by GNN or JPDA over
//!    every detection, then tentative tracks by GNN over the detections left (the claimed
//!    ones are skipped by the second gate pass). Under JPDA, stage 1's marginals are
//!    [`GpuJpda`]'s and `tk_pda` claims the detections more likely a track's than "none
//!    of them" and applies the confirmed tracks' PDA update (the CPU's arithmetic). The
//!    GNN of each stage is the device's
//!    ([`GpuGnn`](super::assign): clusters and the same optimal assignment as the
//!    CPU's, clusters past its limits solved on the host), on the gated pairs where the
//!    gate left them.
//! 5. *Update and life cycle* in one kernel: the pick's update (or the prediction kept),
//!    M-of-N confirmation, deletion after K misses, the tentative rule, the covariance
//!    bound; every detection no track claimed is flagged for a birth.
//! 6. *Compaction*: one exclusive scan over the kept flags of the tracks followed by the
//!    birth flags of the detections gives every output position at once (survivors in
//!    order, then births in detection order, the CPU's order); births get the CPU's
//!    identities (the next identity plus their rank among the births).
//!
//! Tracks are dense structure-of-arrays (`x [nx][C]`, packed `P [np][C]`), compacted
//! each scan into a second set of buffers, which may be larger (growth re-lays the rows).

use super::super::chi2::chi2_quantile;
use super::super::tracker::initiation;
use super::super::tracks::Tracks;
use super::super::{Assoc, Status, Timing, TrackerConfig};
use super::assign::GpuGnn;
use super::jpda::GpuJpda;
use super::params::{
    TkBounds, TkCells, TkCompact, TkGridSetup, TkPredict, TkScanApply, TkScanSums, TkScanTiles,
    TkScatter, TkUpdate,
};
use crate::cuda::{
    as_bytes, ck, dtoh, grid_for, htod, launch, sync, Addr, Arg, DevBuf, Gpu, Module, Params,
    Pinned,
};
use crate::error::{Error, Result};
use crate::kalman::cuda::source::model_params;
use crate::model::Model;
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::Arc;
use std::time::Instant;

use super::assemble::{source, BLOCK, KERNELS, MAX_NX, MAX_NY, SCAN_BLOCK, SCAN_TILE, SCRATCH};
use super::buffers::{memset, Grow, Set};

mod stage;

/// Events at the phase boundaries of a scan: upload + predict, grid + gate of stage 1,
/// association of stage 1, gate of stage 2, association of stage 2, update and life
/// cycle, compaction.
const EVENTS: usize = 8;

/// The multi-target tracker with its tracks on a GPU (see the module documentation).
pub struct GpuTracker {
    gpu: Arc<Gpu>,
    k: Arc<Module>,
    stream: Arc<CudaStream>,
    cfg: TrackerConfig,
    gamma: f64,
    nx: usize,
    ny: usize,
    params: Vec<f64>,
    life: Vec<u8>,
    birth: Vec<f64>,
    n: usize,
    next_id: u64,
    cur: Set,
    spare: Set,
    zhat: Grow<f64>,
    lf: Grow<f64>,
    hld: Grow<f64>,
    rows: Grow<u32>,
    pick1: Grow<i32>,
    pick2: Grow<i32>,
    det: Grow<u32>,
    ll: Grow<f64>,
    z: Grow<f64>,
    zs: Grow<f64>,
    claimed: Grow<u8>,
    cell: Grow<u32>,
    rank: Grow<u32>,
    order: Grow<u32>,
    cstart: Grow<u32>,
    flags: Grow<u32>,
    sums: Grow<u32>,
    scratch: DevBuf<u64>,
    err: DevBuf<u64>,
    staged: Pinned<f64>,
    events: Vec<CudaEvent>,
    gnn: GpuGnn,
    /// JPDA's marginals (JPDA association only) and their buffers.
    jpda: Option<GpuJpda>,
    beta0: Grow<f64>,
    beta: Grow<f64>,
    poison: bool,
    /// Time spent in each phase so far, by CUDA events (`predict` includes the upload of
    /// the detections; `cluster` is part of `associate`).
    pub timing: Timing,
    /// Wall-clock seconds of the scans so far, as the host sees them.
    pub wall: f64,
}

impl GpuTracker {
    /// A tracker without tracks on GPU `ordinal` for targets of `model`; `cfg` and the
    /// model are checked.
    pub fn new(ordinal: usize, model: &Model, cfg: TrackerConfig) -> Result<GpuTracker> {
        crate::cuda::catch(|| Self::open(ordinal, model, cfg))
    }

    fn open(ordinal: usize, model: &Model, cfg: TrackerConfig) -> Result<GpuTracker> {
        cfg.validate()?;
        model.validate()?;
        let (nx, ny) = (model.nx(), model.ny());
        if nx > MAX_NX || ny > MAX_NY {
            return Err(Error::Unsupported(format!(
                "the GPU tracker is built for nx <= {MAX_NX} and ny <= {MAX_NY}; this model has nx = {nx}, ny = {ny}"
            )));
        }
        let (g, n_x0, p) = initiation(model)?;
        if p.iter().any(|v| !v.is_finite()) || n_x0.iter().any(|v| !v.is_finite()) {
            return Err(Error::model("P0", "a new track's prior is not finite"));
        }
        crate::model::check_psd("P0", &nalgebra::DMatrix::from_row_slice(nx, nx, &p))?;
        let gpu = crate::cuda::gpu(ordinal)?;
        let name = format!("kestrel-track-nx{nx}-ny{ny}-f64-baked");
        let k = gpu.module(&name, &source(model), KERNELS)?;
        let mut birth = g;
        birth.extend_from_slice(&n_x0);
        birth.extend(model.d.iter().copied());
        birth.extend_from_slice(&p);
        let (m, n) = cfg.confirm;
        let mut life = cfg.max_variance.to_le_bytes().to_vec();
        for v in [m, n, cfg.delete, cfg.delete_tentative] {
            life.extend(v.to_le_bytes());
        }
        let mut events = Vec::with_capacity(EVENTS);
        for _ in 0..EVENTS {
            events.push(ck(
                gpu.ctx
                    .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)),
                "creating an event",
            )?);
        }
        let first = 1024;
        let jpda = match cfg.assoc {
            Assoc::Jpda => Some(GpuJpda::new(&gpu)?),
            Assoc::Gnn => None,
        };
        Ok(GpuTracker {
            stream: gpu.stream.clone(),
            k,
            gamma: chi2_quantile(ny, cfg.gate),
            cfg,
            nx,
            ny,
            params: model_params::<f64>(model),
            life,
            birth,
            n: 0,
            next_id: 0,
            cur: Set::new(&gpu, first, nx)?,
            spare: Set::new(&gpu, first, nx)?,
            zhat: Grow::new(&gpu, "predicted measurements")?,
            lf: Grow::new(&gpu, "gate factors")?,
            hld: Grow::new(&gpu, "gate log-determinants")?,
            rows: Grow::new(&gpu, "gated rows")?,
            pick1: Grow::new(&gpu, "picks of confirmed tracks")?,
            pick2: Grow::new(&gpu, "picks of tentative tracks")?,
            det: Grow::new(&gpu, "gated detections")?,
            ll: Grow::new(&gpu, "gated log-likelihoods")?,
            z: Grow::new(&gpu, "detections")?,
            zs: Grow::new(&gpu, "detections by cell")?,
            claimed: Grow::new(&gpu, "claimed detections")?,
            cell: Grow::new(&gpu, "detection cells")?,
            rank: Grow::new(&gpu, "detection ranks")?,
            order: Grow::new(&gpu, "detection order")?,
            cstart: Grow::new(&gpu, "cell starts")?,
            flags: Grow::new(&gpu, "compaction flags")?,
            sums: Grow::new(&gpu, "scan tile sums")?,
            scratch: DevBuf::new(&gpu, SCRATCH, "the scan's scratch")?,
            err: DevBuf::new(&gpu, 1, "the error flag")?,
            staged: Pinned::new(&gpu, 1)?,
            events,
            gnn: GpuGnn::new(&gpu)?,
            jpda,
            beta0: Grow::new(&gpu, "JPDA beta0")?,
            beta: Grow::new(&gpu, "JPDA marginals")?,
            poison: false,
            timing: Timing::default(),
            wall: 0.0,
            gpu,
        })
    }

    /// Fills every buffer a scan writes with NaN (all-ones bytes) before it is written,
    /// so that a value a kernel failed to write shows (tests).
    pub fn with_poison(mut self, poison: bool) -> Self {
        self.poison = poison;
        self
    }

    /// The settings.
    pub fn config(&self) -> &TrackerConfig {
        &self.cfg
    }

    /// The Mahalanobis gate threshold (the chi-square quantile).
    pub fn gate_threshold(&self) -> f64 {
        self.gamma
    }

    /// Live tracks.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True without live tracks.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.ny
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.gpu.name
    }

    fn poison_buf<T>(&self, b: &DevBuf<T>) -> Result<()> {
        if self.poison {
            b.poison(&self.stream)?;
        }
        Ok(())
    }

    /// Launches `name` over `threads` threads (none: nothing) with the parameters `p`.
    fn go<'a, P: Params<'a>>(&self, name: &str, threads: usize, p: &P) -> Result<()> {
        if threads == 0 {
            return Ok(());
        }
        launch(
            &self.stream,
            &self.k,
            name,
            grid_for(threads, BLOCK),
            (BLOCK, 1, 1),
            p,
        )
    }

    /// Exclusive scan of `a[0..len)` in place, the total in `a[len]`.
    fn scan(&mut self, a: u64, len: usize) -> Result<()> {
        let tiles = len.div_ceil(SCAN_TILE);
        self.sums.ensure(&self.gpu, tiles + 1)?;
        let s = &self.stream;
        let b = (SCAN_BLOCK, 1, 1);
        if tiles > 0 {
            launch(
                s,
                &self.k,
                "tk_scan_tiles",
                (tiles as u32, 1, 1),
                b,
                &TkScanTiles {
                    a: &Addr(a),
                    len: len as i64,
                    sums: &self.sums,
                },
            )?;
        }
        launch(
            s,
            &self.k,
            "tk_scan_sums",
            (1, 1, 1),
            b,
            &TkScanSums {
                sums: &self.sums,
                tiles: tiles as i32,
            },
        )?;
        launch(
            s,
            &self.k,
            "tk_scan_apply",
            (tiles.max(1) as u32, 1, 1),
            b,
            &TkScanApply {
                a: &Addr(a),
                len: len as i64,
                sums: &self.sums,
                tiles: tiles as i32,
            },
        )
    }

    fn record(&self, e: usize) -> Result<()> {
        ck(self.events[e].record(&self.stream), "recording an event")
    }

    fn read_u32(&self, b: &DevBuf<u32>, at: usize) -> Result<u32> {
        let mut v = [0u32];
        dtoh(&self.stream, b, at, &mut v, "reading a count")?;
        sync(&self.stream, "reading a count")?;
        Ok(v[0])
    }

    /// The identity of the track at dense index `i` (for errors).
    fn id_at(&self, i: usize) -> u64 {
        let mut v = [0u64];
        if dtoh(&self.stream, &self.cur.id, i, &mut v, "reading an identity").is_ok()
            && sync(&self.stream, "reading an identity").is_ok()
        {
            v[0]
        } else {
            i as u64
        }
    }

    /// The first track a kernel found without a positive definite matrix, if any.
    fn check_err(&self, what: &'static str) -> Result<()> {
        let mut v = [0u64];
        dtoh(&self.stream, &self.err, 0, &mut v, "reading the error flag")?;
        sync(&self.stream, "reading the error flag")?;
        if v[0] != u64::MAX {
            return Err(Error::NotPositiveDefinite {
                track: self.id_at(v[0] as usize) as usize,
                step: self.timing.scans,
                what,
            });
        }
        Ok(())
    }

    /// Processes one scan of detections `z` (`count x ny`, row-major): predicts every
    /// track to this scan, associates, updates, and runs the life cycle, as
    /// [`Tracker::step`](super::super::Tracker::step).
    pub fn step(&mut self, z: &[f64]) -> Result<()> {
        crate::cuda::catch(|| self.scan_once(z))
    }

    fn scan_once(&mut self, z: &[f64]) -> Result<()> {
        let (nx, ny) = (self.nx, self.ny);
        if !z.len().is_multiple_of(ny) {
            return Err(Error::input(format!(
                "a scan of {} values is not a whole number of {ny}-component detections",
                z.len()
            )));
        }
        if let Some(k) = z.iter().position(|v| !v.is_finite()) {
            return Err(Error::input(format!(
                "detection {} of the scan: component z{} is {}",
                k / ny,
                k % ny,
                z[k]
            )));
        }
        let wall = Instant::now();
        let ndet = z.len() / ny;
        let n = self.n;
        if n + ndet > u32::MAX as usize / 2 {
            return Err(Error::input(format!(
                "{n} tracks and {ndet} detections exceed what the GPU tracker indexes"
            )));
        }
        let gpu = self.gpu.clone();
        let s = self.stream.clone();
        // Buffers: per track, per detection, the output set.
        let nyp = ny * (ny + 1) / 2;
        self.zhat.ensure(&gpu, n * ny)?;
        self.lf.ensure(&gpu, n * nyp)?;
        self.hld.ensure(&gpu, n)?;
        self.rows.ensure(&gpu, n + 1)?;
        self.pick1.ensure(&gpu, n)?;
        self.pick2.ensure(&gpu, n)?;
        self.z.ensure(&gpu, ndet * ny)?;
        self.zs.ensure(&gpu, ndet * ny)?;
        self.claimed.ensure(&gpu, ndet)?;
        self.cell.ensure(&gpu, ndet)?;
        self.rank.ensure(&gpu, ndet)?;
        self.order.ensure(&gpu, ndet)?;
        let ncap = 4 * ndet + 16;
        self.cstart.ensure(&gpu, ncap + 1)?;
        self.flags.ensure(&gpu, n + ndet + 1)?;
        if self.spare.cap < n + ndet {
            let cap = (n + ndet).max(2 * self.spare.cap);
            self.spare = Set::new(&gpu, cap, nx)?;
        }
        if self.staged.as_slice().len() < z.len() {
            sync(&s, "the previous upload")?;
            self.staged = Pinned::new(&gpu, z.len().max(2 * self.staged.as_slice().len()))?;
        }
        // The previous scan ended with a synchronisation: the staging buffer is free.
        self.staged.as_mut_slice()[..z.len()].copy_from_slice(z);
        self.record(0)?;
        if !z.is_empty() {
            htod(
                &s,
                &self.staged.as_slice()[..z.len()],
                &self.z.buf,
                0,
                "uploading the detections",
            )?;
        }
        memset(&s, self.scratch.ptr(), 0xff, 16, "clearing the scratch")?;
        memset(&s, self.scratch.at(2), 0, 24, "clearing the scratch")?;
        memset(&s, self.err.ptr(), 0xff, 8, "clearing the error flag")?;
        let cur_cap = self.cur.cap as i64;
        if n > 0 {
            for b in [&self.zhat.buf, &self.lf.buf, &self.hld.buf] {
                self.poison_buf(b)?;
            }
            self.go(
                "tk_predict",
                n,
                &TkPredict {
                    mp: Arg::Bytes(as_bytes(&self.params)),
                    n: n as i32,
                    c: cur_cap,
                    xs: &self.cur.x,
                    ps: &self.cur.p,
                    zhat: &self.zhat,
                    lf: &self.lf,
                    hld: &self.hld,
                    gamma: self.gamma,
                    scratch: &self.scratch,
                    err: &self.err,
                },
            )?;
        }
        self.record(1)?;
        memset(&s, self.claimed.buf.ptr(), 0, ndet, "clearing the claims")?;
        let gating = n > 0 && ndet > 0;
        if gating {
            self.go(
                "tk_bounds",
                ndet,
                &TkBounds {
                    ndet: ndet as i32,
                    z: &self.z,
                    scratch: &self.scratch,
                },
            )?;
            launch(
                &s,
                &self.k,
                "tk_grid_setup",
                (1, 1, 1),
                (1, 1, 1),
                &TkGridSetup {
                    ndet: ndet as i32,
                    n: n as i32,
                    scratch: &self.scratch,
                },
            )?;
            memset(
                &s,
                self.cstart.buf.ptr(),
                0,
                4 * (ncap + 1),
                "clearing the histogram",
            )?;
            self.go(
                "tk_cells",
                ndet,
                &TkCells {
                    ndet: ndet as i32,
                    z: &self.z,
                    scratch: &self.scratch,
                    count: &self.cstart,
                    cell: &self.cell,
                    rank: &self.rank,
                },
            )?;
            self.scan(self.cstart.buf.ptr(), ncap)?;
            self.poison_buf(&self.zs.buf)?;
            self.go(
                "tk_scatter",
                ndet,
                &TkScatter {
                    ndet: ndet as i32,
                    z: &self.z,
                    cell: &self.cell,
                    rank: &self.rank,
                    start: &self.cstart,
                    order: &self.order,
                    zs: &self.zs,
                },
            )?;
            self.stage(1, n, ndet, 2)?;
            self.stage(0, n, ndet, 4)?;
        } else {
            // No pairs: every track misses.
            memset(&s, self.pick1.buf.ptr(), 0xff, 4 * n, "clearing the picks")?;
            memset(&s, self.pick2.buf.ptr(), 0xff, 4 * n, "clearing the picks")?;
            for e in 2..=5 {
                self.record(e)?;
            }
        }
        self.poison_buf(&self.flags.buf)?;
        self.go(
            "tk_update",
            n.max(ndet),
            &TkUpdate {
                mp: Arg::Bytes(as_bytes(&self.params)),
                lp: Arg::Bytes(&self.life),
                n: n as i32,
                ndet: ndet as i32,
                c: cur_cap,
                xs: &self.cur.x,
                ps: &self.cur.p,
                status: &self.cur.status,
                age: &self.cur.age,
                hits: &self.cur.hits,
                misses: &self.cur.misses,
                pick1: &self.pick1,
                pick2: &self.pick2,
                z: &self.z,
                claimed: &self.claimed,
                flags: &self.flags,
                err: &self.err,
                pda: i32::from(self.jpda.is_some()),
            },
        )?;
        self.record(6)?;
        self.scan(self.flags.buf.ptr(), n + ndet)?;
        if self.poison {
            let o = &self.spare;
            for b in [&o.x, &o.p] {
                b.poison(&s)?;
            }
            o.id.poison(&s)?;
            o.status.poison(&s)?;
            for b in [&o.age, &o.hits, &o.misses] {
                b.poison(&s)?;
            }
        }
        let (o, c) = (&self.spare, &self.cur);
        self.go(
            "tk_compact",
            n + ndet,
            &TkCompact {
                bp: Arg::Bytes(as_bytes(&self.birth)),
                n: n as i32,
                ndet: ndet as i32,
                cin: cur_cap,
                cout: o.cap as i64,
                flags: &self.flags,
                xs: &c.x,
                ps: &c.p,
                id: &c.id,
                status: &c.status,
                age: &c.age,
                hits: &c.hits,
                misses: &c.misses,
                xo: &o.x,
                po: &o.p,
                ido: &o.id,
                statuso: &o.status,
                ageo: &o.age,
                hitso: &o.hits,
                misseso: &o.misses,
                z: &self.z,
                next_id: self.next_id,
            },
        )?;
        self.record(7)?;
        let mut counts = [0u32; 2];
        dtoh(
            &s,
            &self.flags.buf,
            n,
            &mut counts[..1],
            "reading the survivors",
        )?;
        dtoh(
            &s,
            &self.flags.buf,
            n + ndet,
            &mut counts[1..],
            "reading the live tracks",
        )?;
        self.check_err("innovation covariance S")?;
        let (kept, total) = (counts[0] as usize, counts[1] as usize);
        std::mem::swap(&mut self.cur, &mut self.spare);
        self.next_id += (total - kept) as u64;
        self.n = total;
        let ms = |a: usize, b: usize| -> Result<f64> {
            Ok(f64::from(ck(
                self.events[a].elapsed_ms(&self.events[b]),
                "reading an event timer",
            )?) * 1e-3)
        };
        let t = [
            ms(0, 1)?,
            ms(1, 2)? + ms(3, 4)?,
            ms(2, 3)? + ms(4, 5)?,
            ms(5, 6)?,
            ms(6, 7)?,
        ];
        let tm = &mut self.timing;
        tm.predict += t[0];
        tm.gate += t[1];
        tm.associate += t[2];
        tm.update += t[3];
        tm.life += t[4];
        tm.scans += 1;
        self.wall += wall.elapsed().as_secs_f64();
        Ok(())
    }

    /// A host copy of the live tracks (in the CPU tracker's order).
    pub fn tracks(&self) -> Result<Tracks> {
        crate::cuda::catch(|| self.download())
    }

    fn download(&self) -> Result<Tracks> {
        let (n, nx) = (self.n, self.nx);
        let np = nx * (nx + 1) / 2;
        let c = &self.cur;
        let s = &self.stream;
        let mut x = vec![0.0; nx * n];
        let mut p = vec![0.0; np * n];
        let mut id = vec![0u64; n];
        let mut st = vec![0u8; n];
        if n > 0 {
            for k in 0..nx {
                dtoh(
                    s,
                    &c.x,
                    k * c.cap,
                    &mut x[k * n..(k + 1) * n],
                    "reading the means",
                )?;
            }
            for q in 0..np {
                dtoh(
                    s,
                    &c.p,
                    q * c.cap,
                    &mut p[q * n..(q + 1) * n],
                    "reading the covariances",
                )?;
            }
            dtoh(s, &c.id, 0, &mut id, "reading the identities")?;
            dtoh(s, &c.status, 0, &mut st, "reading the statuses")?;
        }
        sync(s, "reading the tracks")?;
        let pk = |i: usize, j: usize| {
            if i >= j {
                i * (i + 1) / 2 + j
            } else {
                j * (j + 1) / 2 + i
            }
        };
        let mut mean = vec![0.0; n * nx];
        let mut cov = vec![0.0; n * nx * nx];
        for t in 0..n {
            for i in 0..nx {
                mean[t * nx + i] = x[i * n + t];
                for j in 0..nx {
                    cov[(t * nx + i) * nx + j] = p[pk(i, j) * n + t];
                }
            }
        }
        Ok(Tracks {
            nx,
            id,
            status: st
                .iter()
                .map(|&v| {
                    if v == 1 {
                        Status::Confirmed
                    } else {
                        Status::Tentative
                    }
                })
                .collect(),
            mean,
            cov,
        })
    }
}
