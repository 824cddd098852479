//! One device's share of a group of tracks: its buffers, the window's upload, the
//! fused scan's reduce and sweep over the share, and the outputs' download.

use super::super::run::DevModel;
use super::super::scan::{alloc, scan};
use super::super::{cu, fe_len, fused_chunk_len, GpuReal};
use super::window;
use crate::cuda::{Gpu, Module as Kernels};
use crate::data::{Estimates, Measurements};
use crate::error::Result;
use crate::kalman::dense::ConvertedModel;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::{Pick, Poison, ReduceAt, SweepAt, TfSweepAt};
use crate::scan::ScanAlgorithm;
use cudarc::driver::CudaSlice;
use std::sync::Arc;

/// One device's share of every track of a group.
pub(super) struct Share<D> {
    pub(super) g: Arc<Gpu>,
    pub(super) k: Arc<Kernels>,
    pub(super) dm: DevModel<D>,
    /// First global step owned, steps owned.
    pub(super) k0: usize,
    pub(super) n: usize,
    /// Steps in the window, index of the first owned step in it.
    pub(super) ta: usize,
    pub(super) first: usize,
    /// Chunk length and chunks of the share.
    pub(super) kk: usize,
    pub(super) nc: usize,
    pub(super) z: CudaSlice<D>,
    pub(super) tot: CudaSlice<D>,
    pub(super) btot: CudaSlice<D>,
    pub(super) pick: CudaSlice<D>,
    pub(super) bpick: CudaSlice<D>,
    pub(super) carry: CudaSlice<D>,
    pub(super) bcarry: CudaSlice<D>,
    pub(super) mean: CudaSlice<D>,
    pub(super) cov: CudaSlice<D>,
    pub(super) ll: CudaSlice<D>,
    pub(super) smean: CudaSlice<D>,
    pub(super) scov: CudaSlice<D>,
}

impl<D: GpuReal> Share<D> {
    /// The buffers of share `(k0, n)` of tracks `[b0, b0 + nb)` on `g`, with the window's
    /// measurements and model uploaded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        g: &Arc<Gpu>,
        k: &Arc<Kernels>,
        m: &ConvertedModel<D>,
        varying: bool,
        z: &Measurements<D>,
        (b0, nb): (usize, usize),
        (k0, n): (usize, usize),
        (zoff, t): (usize, usize),
        tf: bool,
    ) -> Result<Self> {
        g.bind()?;
        let (zt, ny, nx) = (z.steps, z.ny, m.nx);
        let (off, end) = window(k0, n, t, tf);
        let ta = end - off;
        let kk = fused_chunk_len(nb * n);
        let nc = n.div_ceil(kk);
        // `z` holds the global steps [zoff, zoff + zt) of every track; a window step
        // before them (the step before a block, which no forward kernel reads) is
        // missing.
        let pad = zoff.saturating_sub(off);
        let (lo, hi) = (off + pad - zoff, end - zoff);
        debug_assert!(hi <= zt);
        let zw: std::borrow::Cow<'_, [D]> = if nb == 1 && pad == 0 {
            let r = b0 * zt * ny;
            (&z.data[r + lo * ny..r + hi * ny]).into()
        } else {
            let mut v = Vec::with_capacity(nb * ta * ny);
            for b in b0..b0 + nb {
                let r = b * zt * ny;
                v.extend(std::iter::repeat_n(D::nan(), pad * ny));
                v.extend_from_slice(&z.data[r + lo * ny..r + hi * ny]);
            }
            v.into()
        };
        let fe = fe_len(nx);
        let nn = nb * n;
        Ok(Share {
            g: g.clone(),
            k: k.clone(),
            dm: DevModel::window(g, m, varying, off..end)?,
            k0,
            n,
            ta,
            first: k0 - off,
            kk,
            nc,
            z: cu(g.stream.clone_htod(&zw[..]), "uploading measurements")?,
            tot: alloc(g, nb * nc * fe, "chunk totals")?,
            btot: alloc(
                g,
                if tf { nb * nc * fe } else { 1 },
                "backward chunk totals",
            )?,
            pick: alloc(g, nb * fe, "share totals")?,
            bpick: alloc(g, nb * fe, "backward share totals")?,
            carry: alloc(g, nb * fe, "carried prefixes")?,
            bcarry: alloc(g, nb * fe, "carried suffixes")?,
            mean: alloc(g, nn * nx, "means")?,
            cov: alloc(g, nn * nx * nx, "covariances")?,
            ll: alloc(g, nn, "log-likelihoods")?,
            smean: alloc(g, if tf { nn * nx } else { 1 }, "smoothed means")?,
            scov: alloc(g, if tf { nn * nx * nx } else { 1 }, "smoothed covariances")?,
        })
    }

    pub(super) fn nb(&self) -> usize {
        self.pick.len() / fe_len(self.dm.nx)
    }

    pub(super) fn sync(&self, what: &str) -> Result<()> {
        self.g.bind()?;
        cu(self.g.stream.synchronize(), what)
    }

    pub(super) fn poison(&mut self, tf: bool) -> Result<()> {
        self.g.bind()?;
        let (k, s) = (&self.k, &self.g.stream);
        let mut outs = vec![&mut self.mean, &mut self.cov, &mut self.ll];
        if tf {
            outs.extend([&mut self.smean, &mut self.scov]);
        }
        for b in outs {
            let n = b.len() as i64;
            launch(k, s, "poison", n as usize, &Poison { p: b, n })?;
        }
        Ok(())
    }

    /// The reduce and the scan of the chunk totals, then the share totals picked out
    /// (asynchronous).
    pub(super) fn reduce(&mut self, alg: ScanAlgorithm, tf: bool) -> Result<()> {
        self.g.bind()?;
        let (g, k) = (&*self.g, &self.k);
        let s = &g.stream;
        let nb = self.nb();
        let fe = fe_len(self.dm.nx);
        let (ta, first, n) = (self.ta as i64, self.first as i64, self.n as i64);
        let (kk, chunks, nc) = (self.kk as i32, self.nc, self.nc as i64);
        let (dm, z) = (&self.dm, &self.z);
        // One direction: the chunk totals of the forward (pf_reduce_at) or backward
        // (tf_reduce_at) filtering elements into `tot`, scanned (in reverse backward), and
        // the share's total (the last prefix, or the first suffix) into `out`.
        let pass = |kernel: &str, tot: &mut CudaSlice<D>, reverse: bool, out: &CudaSlice<D>| {
            let p = ReduceAt {
                inputs: dm.inputs(z),
                ta,
                first,
                n,
                k: kk,
                tot: &*tot,
            };
            launch(k, s, kernel, (chunks, nb), &p)?;
            scan(g, k, "pf", fe, tot, chunks, nb, alg, reverse)?;
            let i = if reverse { 0 } else { nc - 1 };
            let p = Pick {
                tot: &*tot,
                nc,
                i,
                out,
            };
            launch(k, s, "fe_pick", (1, nb), &p)
        };
        pass("pf_reduce_at", &mut self.tot, false, &self.pick)?;
        if tf {
            pass("tf_reduce_at", &mut self.btot, true, &self.bpick)?;
        }
        Ok(())
    }

    /// The share's forward total and (two-filter) backward total of every track, read
    /// back (waits for this device's reduce).
    pub(super) fn totals(&self, tf: bool) -> Result<(Vec<D>, Vec<D>)> {
        self.g.bind()?;
        let s = &self.g.stream;
        let n = self.pick.len();
        let mut last = vec![D::zero(); n];
        cu(s.memcpy_dtoh(&self.pick, &mut last), "reading share totals")?;
        let mut first = Vec::new();
        if tf {
            first = vec![D::zero(); n];
            cu(
                s.memcpy_dtoh(&self.bpick, &mut first),
                "reading backward share totals",
            )?;
        }
        cu(s.synchronize(), "reading share totals")?;
        Ok((last, first))
    }

    /// The sweeps with the carried prefix `fwd` and suffix `bwd` (one element per track;
    /// `None` at the first / last share).
    pub(super) fn sweep(&mut self, fwd: Option<&[D]>, bwd: Option<&[D]>, tf: bool) -> Result<()> {
        self.g.bind()?;
        let (g, k) = (&*self.g, &self.k);
        let s = &g.stream;
        let nb = self.nb();
        if let Some(c) = fwd {
            cu(
                s.memcpy_htod(c, &mut self.carry),
                "uploading carried prefixes",
            )?;
        }
        if let Some(c) = bwd {
            cu(
                s.memcpy_htod(c, &mut self.bcarry),
                "uploading carried suffixes",
            )?;
        }
        let (hf, hb) = (i32::from(fwd.is_some()), i32::from(bwd.is_some()));
        let (ta, first, n) = (self.ta as i64, self.first as i64, self.n as i64);
        let kk = self.kk as i32;
        launch(
            k,
            s,
            "pf_sweep_at",
            (self.nc, nb),
            &SweepAt {
                tot: &self.tot,
                carry: &self.carry,
                has_carry: hf,
                inputs: self.dm.inputs(&self.z),
                ta,
                first,
                n,
                k: kk,
                mean: &self.mean,
                cov: &self.cov,
                ll: &self.ll,
            },
        )?;
        if tf {
            launch(
                k,
                s,
                "tf_sweep_at",
                (self.nc, nb),
                &TfSweepAt {
                    tot: &self.btot,
                    carry: &self.bcarry,
                    has_carry: hb,
                    inputs: self.dm.inputs(&self.z),
                    mean: &self.mean,
                    cov: &self.cov,
                    ta,
                    first,
                    n,
                    k: kk,
                    smean: &self.smean,
                    scov: &self.scov,
                },
            )?;
        }
        Ok(())
    }

    /// The share's outputs, read back: means, covariances, log-likelihoods and (two-filter)
    /// smoothed means and covariances, `nb * n` steps each.
    pub(super) fn fetch(&self, tf: bool) -> Result<Fetched<D>> {
        self.g.bind()?;
        let st = &self.g.stream;
        let get = |src: &CudaSlice<D>, what: &str| -> Result<Vec<D>> {
            let mut h = vec![D::zero(); src.len()];
            cu(st.memcpy_dtoh(src, &mut h), what)?;
            Ok(h)
        };
        let mut out = vec![
            get(&self.mean, "reading means")?,
            get(&self.cov, "reading covariances")?,
            get(&self.ll, "reading log-likelihoods")?,
        ];
        if tf {
            out.push(get(&self.smean, "reading smoothed means")?);
            out.push(get(&self.scov, "reading smoothed covariances")?);
        }
        cu(st.synchronize(), "reading the results")?;
        Ok(out)
    }

    /// Copies fetched outputs into steps `[k0, k0 + n)` of tracks `[b0, b0 + nb)`.
    pub(super) fn place(
        &self,
        got: Fetched<D>,
        f: &mut Estimates<D>,
        s: Option<&mut Estimates<D>>,
        b0: usize,
        nb: usize,
        t: usize,
    ) {
        let (nx, n, k0) = (self.dm.nx, self.n, self.k0);
        let put = |h: &[D], per: usize, dst: &mut [D]| {
            for b in 0..nb {
                let at = ((b0 + b) * t + k0) * per;
                dst[at..at + n * per].copy_from_slice(&h[b * n * per..(b + 1) * n * per]);
            }
        };
        put(&got[0], nx, &mut f.mean);
        put(&got[1], nx * nx, &mut f.cov);
        let ll = f.loglik.as_mut().expect("allocated with log-likelihoods");
        put(&got[2], 1, ll);
        if let (Some(s), Some(sm), Some(sc)) = (s, got.get(3), got.get(4)) {
            put(sm, nx, &mut s.mean);
            put(sc, nx * nx, &mut s.cov);
        }
    }
}

/// A share's outputs on the host: means, covariances, log-likelihoods, then (two-filter)
/// smoothed means and covariances.
pub(super) type Fetched<D> = Vec<Vec<D>>;
