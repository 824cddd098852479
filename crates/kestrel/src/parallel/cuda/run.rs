//! The scans and the filter / smoother pipelines on the device.

use super::scan::{alloc, scan};
use super::{chunk_len, cu, fe_len, fused, fused_chunk_len, me_len, se_len, Gpu, GpuReal, Kernels};
use crate::error::Result;
use crate::kalman::dense::ConvertedModel;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::{
    Build, Combine, Extract, Filtered, Inputs, KfSeq, MeansBuild, MeansExtract, MeansSweep, Poison,
    Reduce, SeqFilter, SeqRts, Shift, SmoothBuild, SmoothExtract, SmoothReduce, SmoothSweep, Sweep,
    TfSweep,
};
use crate::scan::ScanAlgorithm;
use cudarc::driver::CudaSlice;
use std::sync::Arc;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Algorithm 5.
    Filter,
    /// Algorithms 5 and 6.
    Rts,
    /// Algorithm 7.
    TwoFilter,
    /// The plain Kalman filter in one GPU thread per track (the speed-up baseline).
    OneThread,
    /// The retrodiction scan alone (Algorithm 6 over given filtered moments: the thesis's
    /// `(C_k, b_k)` pairs with their covariance parts).
    Retrodict,
    /// The retrodiction of the smoothed means alone: the thesis's `(C_k, b_k)` pairs
    /// scanned without any covariance part (`kernels/parallel_means.cu`).
    RetrodictMeans,
    /// The sequential Kalman filter over the model's per-step matrices, one thread per
    /// track (`kernels/parallel_seq.cu`): the batched GPU filter of time-varying models.
    Sequential,
    /// [`Method::Sequential`] then the RTS smoother, one thread per track.
    SequentialRts,
    /// The square-root parallel filter (`kernels/parallel_sqrt.cu`): factors through the
    /// scan (fused by default, as [`Method::Filter`]).
    SqrtFilter,
    /// [`Method::SqrtFilter`] then the square-root parallel RTS smoother.
    SqrtRts,
}

impl Method {
    /// Whether the method writes smoothed moments.
    pub fn smooths(self) -> bool {
        matches!(
            self,
            Method::Rts
                | Method::TwoFilter
                | Method::Retrodict
                | Method::RetrodictMeans
                | Method::SequentialRts
                | Method::SqrtRts
        )
    }

    /// Whether the method runs the square-root kernels.
    pub fn sqrt(self) -> bool {
        matches!(self, Method::SqrtFilter | Method::SqrtRts)
    }

    /// Whether the method writes smoothed covariances.
    pub fn smooths_covariances(self) -> bool {
        self.smooths() && self != Method::RetrodictMeans
    }

    /// Whether the method reads given filtered moments instead of measurements.
    pub fn retrodicts(self) -> bool {
        matches!(self, Method::Retrodict | Method::RetrodictMeans)
    }

    /// Whether the method runs one thread per track (no scan).
    pub fn one_thread(self) -> bool {
        matches!(
            self,
            Method::OneThread | Method::Sequential | Method::SequentialRts
        )
    }
}

/// The model on the device: per-step matrices (one set when time-invariant) and prior.
pub(crate) struct DevModel<D> {
    pub steps: CudaSlice<D>,
    pub varying: i32,
    pub prior: CudaSlice<D>,
    pub nx: usize,
}

impl<D: GpuReal> DevModel<D> {
    /// The model with the measurements `z`, as the filtering kernels take them.
    pub fn inputs<'a>(&'a self, z: &'a CudaSlice<D>) -> Inputs<'a> {
        Inputs {
            st: &self.steps,
            varying: self.varying,
            prior: &self.prior,
            z,
        }
    }

    pub fn new(g: &Gpu, m: &ConvertedModel<D>, varying: bool) -> Result<Self> {
        Self::window(g, m, varying, 0..m.steps.len())
    }

    /// The model with the matrices of `steps` only (a share's window; all of a
    /// time-invariant model's one set whatever `steps`).
    pub fn window(
        g: &Gpu,
        m: &ConvertedModel<D>,
        varying: bool,
        steps: std::ops::Range<usize>,
    ) -> Result<Self> {
        let steps = if varying { steps } else { 0..1 };
        let mut flat = Vec::new();
        for s in &m.steps[steps] {
            for part in [&s.f, &s.u, &s.q, &s.h, &s.d, &s.r] {
                flat.extend_from_slice(part);
            }
        }
        let mut prior = m.x0.clone();
        prior.extend_from_slice(&m.p0);
        Ok(DevModel {
            steps: cu(g.stream.clone_htod(&flat), "uploading the model")?,
            varying: i32::from(varying),
            prior: cu(g.stream.clone_htod(&prior), "uploading the prior")?,
            nx: m.nx,
        })
    }
}

/// Scalars of device memory one track of `t` steps needs for `method` with scan `alg`
/// (inputs, elements, the scan's work space and outputs).
pub(crate) fn scalars_per_track(
    nx: usize,
    ny: usize,
    t: usize,
    method: Method,
    alg: ScanAlgorithm,
) -> Option<usize> {
    let fe = fe_len(nx);
    let se = se_len(nx);
    if method == Method::RetrodictMeans {
        // The filtered moments in, the smoothed means out, the elements or chunk totals.
        let el = if fused(alg) {
            me_len(nx) / 2
        } else {
            2 * me_len(nx)
        };
        return t.checked_mul(el + 2 * nx + nx * nx);
    }
    if fused(alg) && !method.one_thread() {
        // Chunk totals (at least one per 4 steps) and their scan's work space; the
        // square-root smoother keeps the filtered factors too.
        let outs = if method.smooths() {
            2 * (nx + nx * nx) + 1
        } else {
            nx + nx * nx + 1
        };
        let fac = if method == Method::SqrtRts {
            nx * nx
        } else {
            0
        };
        return t.checked_mul(fe / 2 + outs + ny + 1 + fac);
    }
    let (el, scanned) = match method {
        Method::OneThread | Method::Sequential | Method::SequentialRts => (0, 0),
        Method::Filter | Method::SqrtFilter => (fe, fe),
        Method::Rts | Method::SqrtRts => (fe + se, fe),
        Method::TwoFilter => (2 * fe, fe),
        Method::Retrodict => (se, se),
        Method::RetrodictMeans => unreachable!("returned above"),
    };
    let work = if method.one_thread() {
        0
    } else {
        work_of(alg, scanned)
    };
    let outs = if method.smooths() {
        2 * (nx + nx * nx) + 1
    } else {
        nx + nx * nx + 1
    };
    t.checked_mul(el + work + outs + ny)
}

/// Scalars of a scan's work space over `scanned` scalars per step.
fn work_of(alg: ScanAlgorithm, scanned: usize) -> usize {
    match alg {
        ScanAlgorithm::Sequential | ScanAlgorithm::LadnerFischer => 0,
        ScanAlgorithm::Fastest => scanned.div_ceil(chunk_len().min(32).saturating_sub(1).max(1)),
        ScanAlgorithm::HillisSteele | ScanAlgorithm::Sengupta(_) => scanned,
        // Two padded copies of up to twice the length.
        ScanAlgorithm::Blelloch => 4 * scanned,
    }
}

/// The buffers of a group of `nb` tracks of `t` steps each, stored one after the other.
pub(crate) struct GroupBufs<D> {
    pub t: usize,
    pub nb: usize,
    /// Chunk length of the fused scan, 0 when the elements are stored and scanned.
    pub(super) fused_k: usize,
    pub(super) tot: CudaSlice<D>,
    pub z: CudaSlice<D>,
    pub(super) el: CudaSlice<D>,
    back: CudaSlice<D>,
    pub(super) se: CudaSlice<D>,
    me: CudaSlice<D>,
    pub mean: CudaSlice<D>,
    pub cov: CudaSlice<D>,
    pub ll: CudaSlice<D>,
    pub smean: CudaSlice<D>,
    pub scov: CudaSlice<D>,
    /// The filtered factors of the fused square-root smoother.
    pub(super) fac: CudaSlice<D>,
}

impl<D: GpuReal> GroupBufs<D> {
    /// Buffers for `method`, with `z` (the group's measurements, `nb * t * ny`) uploaded;
    /// for [`Method::Retrodict`], `filtered` (means and covariances) instead.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        g: &Gpu,
        nx: usize,
        t: usize,
        nb: usize,
        method: Method,
        alg: ScanAlgorithm,
        z: &[D],
        filtered: Option<(&[D], &[D])>,
    ) -> Result<Self> {
        let n = nb * t;
        let fused_k = if fused(alg) && !method.one_thread() {
            fused_chunk_len(n)
        } else {
            0
        };
        let stored = fused_k == 0;
        let used = |yes: bool, len: usize| if yes && stored { n * len } else { 1 };
        let filter = !method.retrodicts() && !method.one_thread();
        let (mean, cov) = match filtered {
            Some((m, c)) => (
                cu(g.stream.clone_htod(m), "uploading filtered means")?,
                cu(g.stream.clone_htod(c), "uploading filtered covariances")?,
            ),
            None => (
                alloc(g, n * nx, "means")?,
                alloc(g, n * nx * nx, "covariances")?,
            ),
        };
        let tot = if stored {
            1
        } else if method == Method::RetrodictMeans {
            nb * t.div_ceil(fused_k) * me_len(nx)
        } else {
            nb * t.div_ceil(fused_k) * fe_len(nx)
        };
        Ok(GroupBufs {
            t,
            nb,
            fused_k,
            tot: alloc(g, tot, "chunk totals")?,
            z: if z.is_empty() {
                alloc(g, 1, "measurements")?
            } else {
                cu(g.stream.clone_htod(z), "uploading measurements")?
            },
            el: alloc(g, used(filter, fe_len(nx)), "filtering elements")?,
            back: alloc(
                g,
                used(method == Method::TwoFilter, fe_len(nx)),
                "backward elements",
            )?,
            se: alloc(
                g,
                used(
                    matches!(method, Method::Rts | Method::Retrodict | Method::SqrtRts),
                    se_len(nx),
                ),
                "smoothing elements",
            )?,
            me: alloc(
                g,
                used(method == Method::RetrodictMeans, me_len(nx)),
                "retrodiction pairs",
            )?,
            mean,
            cov,
            ll: alloc(g, if filtered.is_none() { n } else { 1 }, "log-likelihoods")?,
            smean: alloc(
                g,
                if method.smooths() { n * nx } else { 1 },
                "smoothed means",
            )?,
            scov: alloc(
                g,
                if method.smooths_covariances() {
                    n * nx * nx
                } else {
                    1
                },
                "smoothed covariances",
            )?,
            fac: alloc(
                g,
                if method == Method::SqrtRts && !stored {
                    n * nx * nx
                } else {
                    1
                },
                "filtered factors",
            )?,
        })
    }

    /// Fills every output with NaN, so that an element no kernel wrote shows.
    pub fn poison(&mut self, g: &Gpu, k: &Kernels, method: Method) -> Result<()> {
        let s = &g.stream;
        let mut outs = vec![&mut self.smean, &mut self.scov];
        if !method.retrodicts() {
            outs.extend([&mut self.mean, &mut self.cov, &mut self.ll]);
        }
        for b in outs {
            let n = b.len() as i64;
            launch(k, s, "poison", n as usize, &Poison { p: b, n })?;
        }
        Ok(())
    }

    /// The filtering elements of operator `op` (`pf`, `qf`: `{op}_build`) built, scanned
    /// with `alg` and read out (`{op}_extract`) into the filtered moments and per-step
    /// log-likelihoods; `shift`: the two-filter smoother's copy of the elements is made
    /// between the build and the scan (`tf_shift`).
    pub(super) fn filter_pass(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        op: &str,
        alg: ScanAlgorithm,
        shift: bool,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt, nb, nx) = (self.t, self.t as i64, self.nb, m.nx);
        launch(
            k,
            s,
            &format!("{op}_build"),
            (t, nb),
            &Build {
                inputs: m.inputs(&self.z),
                t: tt,
                el: &self.el,
            },
        )?;
        if shift {
            launch(
                k,
                s,
                "tf_shift",
                (t, nb),
                &Shift {
                    el: &self.el,
                    back: &self.back,
                    t: tt,
                },
            )?;
        }
        scan(g, k, op, fe_len(nx), &mut self.el, t, nb, alg, false)?;
        launch(
            k,
            s,
            &format!("{op}_extract"),
            (t, nb),
            &Extract {
                el: &self.el,
                inputs: m.inputs(&self.z),
                t: tt,
                mean: &self.mean,
                cov: &self.cov,
                ll: &self.ll,
            },
        )?;
        Ok(())
    }

    /// Launches `method` for every track of the group (asynchronously on the device's
    /// stream): each kernel once for the whole group, each scan level once.
    pub fn run(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        method: Method,
        alg: ScanAlgorithm,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt, nb) = (self.t, self.t as i64, self.nb);
        let nx = m.nx;
        if method == Method::OneThread {
            launch(
                k,
                s,
                "kf_seq",
                (1, nb),
                &KfSeq {
                    inputs: m.inputs(&self.z),
                    t: tt,
                    mean: &self.mean,
                    cov: &self.cov,
                    ll: &self.ll,
                },
            )?;
            return Ok(());
        }
        if matches!(method, Method::Sequential | Method::SequentialRts) {
            let bb = nb as i64;
            launch(
                k,
                s,
                "seq_filter",
                nb,
                &SeqFilter {
                    inputs: m.inputs(&self.z),
                    b: bb,
                    t: tt,
                    mean: &self.mean,
                    cov: &self.cov,
                    ll: &self.ll,
                },
            )?;
            if method == Method::SequentialRts {
                launch(
                    k,
                    s,
                    "seq_rts",
                    nb,
                    &SeqRts {
                        filtered: self.filtered(m),
                        b: bb,
                        t: tt,
                        smean: &self.smean,
                        scov: &self.scov,
                    },
                )?;
            }
            return Ok(());
        }
        if method.sqrt() && self.fused_k > 0 {
            return self.run_sqrt_fused(g, k, m, method);
        }
        if method.sqrt() {
            return self.run_sqrt(g, k, m, method, alg);
        }
        if self.fused_k > 0 {
            return self.run_fused(g, k, m, method);
        }
        if !method.retrodicts() {
            self.filter_pass(g, k, m, "pf", alg, method == Method::TwoFilter)?;
        }
        match method {
            Method::Rts | Method::Retrodict => {
                launch(
                    k,
                    s,
                    "ps_build",
                    (t, nb),
                    &SmoothBuild {
                        filtered: self.filtered(m),
                        t: tt,
                        se: &self.se,
                    },
                )?;
                scan(g, k, "ps", se_len(nx), &mut self.se, t, nb, alg, true)?;
                launch(
                    k,
                    s,
                    "ps_extract",
                    (t, nb),
                    &SmoothExtract {
                        se: &self.se,
                        t: tt,
                        mean: &self.smean,
                        cov: &self.scov,
                    },
                )?;
            }
            Method::RetrodictMeans => {
                launch(
                    k,
                    s,
                    "pm_build",
                    (t, nb),
                    &MeansBuild {
                        filtered: self.filtered(m),
                        t: tt,
                        me: &self.me,
                    },
                )?;
                scan(g, k, "pm", me_len(nx), &mut self.me, t, nb, alg, true)?;
                launch(
                    k,
                    s,
                    "pm_extract",
                    (t, nb),
                    &MeansExtract {
                        me: &self.me,
                        t: tt,
                        smean: &self.smean,
                    },
                )?;
            }
            Method::TwoFilter => {
                scan(g, k, "pf", fe_len(nx), &mut self.back, t, nb, alg, true)?;
                launch(
                    k,
                    s,
                    "tf_combine",
                    (t, nb),
                    &Combine {
                        back: &self.back,
                        mean: &self.mean,
                        cov: &self.cov,
                        t: tt,
                        smean: &self.smean,
                        scov: &self.scov,
                    },
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The fused kernels' parameters of `{op}_reduce` (`pf`, `tf`, `qf`): each chunk of
    /// `fused_k` steps' filtering element into `tot`.
    pub(super) fn reduce<'a>(&'a self, m: &'a DevModel<D>) -> Reduce<'a> {
        Reduce {
            inputs: m.inputs(&self.z),
            t: self.t as i64,
            k: self.fused_k as i32,
            tot: &self.tot,
        }
    }

    /// The model's matrices and the filtered moments, the smoothing kernels' inputs.
    fn filtered<'a>(&'a self, m: &'a DevModel<D>) -> Filtered<'a> {
        Filtered {
            st: &m.steps,
            varying: m.varying,
            mean: &self.mean,
            cov: &self.cov,
        }
    }

    /// The fused kernels' parameters of `ps_reduce` and `pm_reduce`: each chunk's
    /// smoothing element from the filtered moments into `tot`.
    fn smooth_reduce<'a>(&'a self, m: &'a DevModel<D>) -> SmoothReduce<'a> {
        SmoothReduce {
            filtered: self.filtered(m),
            t: self.t as i64,
            k: self.fused_k as i32,
            tot: &self.tot,
        }
    }

    /// The fused scan (`kernels/parallel_fused.cu`): per method, a reduce over chunks of
    /// `fused_k` steps, the chunked scan of the chunk totals, and a sweep that writes the
    /// moments.
    fn run_fused(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        method: Method,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt, nb, nx) = (self.t, self.t as i64, self.nb, m.nx);
        let kk = self.fused_k as i32;
        let grid = (t.div_ceil(self.fused_k), nb);
        let fast = ScanAlgorithm::Fastest;
        // The filter's reduce: `pf` forward, `tf` (the two-filter smoother's backward
        // filter) scanned in reverse.
        let filter = |this: &mut Self, op: &str, reverse: bool| {
            launch(k, s, &format!("{op}_reduce"), grid, &this.reduce(m))?;
            scan(
                g,
                k,
                "pf",
                fe_len(nx),
                &mut this.tot,
                grid.0,
                nb,
                fast,
                reverse,
            )
        };
        if !method.retrodicts() {
            filter(self, "pf", false)?;
            let sweep = Sweep {
                tot: &self.tot,
                inputs: m.inputs(&self.z),
                t: tt,
                k: kk,
                mean: &self.mean,
                cov: &self.cov,
                ll: &self.ll,
            };
            launch(k, s, "pf_sweep", grid, &sweep)?;
        }
        match method {
            Method::Rts | Method::Retrodict | Method::RetrodictMeans => {
                let means = method == Method::RetrodictMeans;
                let (op, len) = if means {
                    ("pm", me_len(nx))
                } else {
                    ("ps", se_len(nx))
                };
                launch(k, s, &format!("{op}_reduce"), grid, &self.smooth_reduce(m))?;
                scan(g, k, op, len, &mut self.tot, grid.0, nb, fast, true)?;
                if means {
                    let sweep = MeansSweep {
                        tot: &self.tot,
                        filtered: self.filtered(m),
                        t: tt,
                        k: kk,
                        smean: &self.smean,
                    };
                    launch(k, s, "pm_sweep", grid, &sweep)?;
                } else {
                    let sweep = SmoothSweep {
                        tot: &self.tot,
                        filtered: self.filtered(m),
                        t: tt,
                        k: kk,
                        smean: &self.smean,
                        scov: &self.scov,
                    };
                    launch(k, s, "ps_sweep", grid, &sweep)?;
                }
            }
            Method::TwoFilter => {
                filter(self, "tf", true)?;
                let sweep = TfSweep {
                    tot: &self.tot,
                    inputs: m.inputs(&self.z),
                    mean: &self.mean,
                    cov: &self.cov,
                    t: tt,
                    k: kk,
                    smean: &self.smean,
                    scov: &self.scov,
                };
                launch(k, s, "tf_sweep", grid, &sweep)?;
            }
            _ => {}
        }
        Ok(())
    }
}
