//! The scans and the filter / smoother pipelines on the device.

use super::{chunk_len, cu, fe_len, se_len, Gpu, GpuReal, Kernels};
use crate::error::Result;
use crate::kalman::dense::ConvertedModel;
use crate::scan::ScanAlgorithm;
use cudarc::driver::{CudaSlice, PushKernelArg};
use std::sync::Arc;

fn alloc<D: GpuReal>(g: &Gpu, n: usize, what: &str) -> Result<CudaSlice<D>> {
    // SAFETY: every buffer is written by a kernel before it is read (outputs are
    // poisoned first where a test must see unwritten values).
    cu(
        unsafe { g.stream.alloc::<D>(n.max(1)) },
        &format!("allocating {what}"),
    )
}

/// Scans the `n` elements of `len` scalars in `a` with the operator `op` (`"pf"`:
/// filtering, `"ps"`: smoothing), forward or in reverse.
pub(crate) fn scan<D: GpuReal>(
    g: &Gpu,
    k: &Kernels,
    op: &str,
    len: usize,
    a: &mut CudaSlice<D>,
    n: usize,
    alg: ScanAlgorithm,
    reverse: bool,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let s = &g.stream;
    let rev = i32::from(reverse);
    let nn = n as i64;
    let name = |x: &str| format!("{op}_{x}");
    let levels = n.next_power_of_two().trailing_zeros();
    match alg {
        ScanAlgorithm::Sequential => launch!(k, s, &name("seq"), 1, &mut *a, &nn, &rev, &rev),
        ScanAlgorithm::LadnerFischer => {
            for d in 0..levels {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    n.div_ceil(2 << d),
                    &mut *a,
                    &nn,
                    &st,
                    &rev,
                    &rev
                );
            }
            for d in (0..levels).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("lf_down"),
                    n.div_ceil(2 << d),
                    &mut *a,
                    &nn,
                    &st,
                    &rev,
                    &rev
                );
            }
        }
        ScanAlgorithm::HillisSteele => {
            let mut other = alloc::<D>(g, n * len, "the Hillis-Steele buffer")?;
            let mut st = 1i64;
            while (st as usize) < n {
                launch!(k, s, &name("hs"), n, &*a, &mut other, &nn, &st, &rev, &rev);
                std::mem::swap(a, &mut other);
                st *= 2;
            }
        }
        ScanAlgorithm::Blelloch => {
            let p = n.next_power_of_two();
            let pp = p as i64;
            let mut w = alloc::<D>(g, p * len, "the Blelloch buffer")?;
            let mut orig = alloc::<D>(g, p * len, "the Blelloch input copy")?;
            launch!(
                k,
                s,
                &name("bl_load"),
                p,
                &*a,
                &nn,
                &mut w,
                &mut orig,
                &pp,
                &rev
            );
            let zero = 0i32;
            for d in 0..levels {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    p.div_ceil(2 << d),
                    &mut w,
                    &pp,
                    &st,
                    &rev,
                    &zero
                );
            }
            launch!(k, s, &name("bl_clear_last"), 1, &mut w, &pp);
            for d in (0..levels).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("bl_down"),
                    p.div_ceil(2 << d),
                    &mut w,
                    &pp,
                    &st,
                    &rev
                );
            }
            launch!(
                k,
                s,
                &name("bl_fix"),
                n,
                &w,
                &orig,
                &mut *a,
                &nn,
                &rev,
                &rev
            );
        }
        ScanAlgorithm::Fastest => chunked(g, k, op, len, a, n, rev, rev)?,
        ScanAlgorithm::Sengupta(big_n) => {
            // Pair reductions (up-sweep levels) until at most 2N block totals remain,
            // Hillis-Steele over those, then the down-sweep of the same levels.
            let big_n = big_n.max(1);
            let mut lv = 0u32;
            while (n >> lv) > 2 * big_n {
                lv += 1;
            }
            for d in 0..lv {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    n.div_ceil(2 << d),
                    &mut *a,
                    &nn,
                    &st,
                    &rev,
                    &rev
                );
            }
            let stride = 1i64 << lv;
            let cnt = (n >> lv) as i64;
            let mut other = alloc::<D>(g, n * len, "the Sengupta buffer")?;
            let mut in_a = true;
            let mut st = 1i64;
            while st < cnt {
                if in_a {
                    launch!(
                        k,
                        s,
                        &name("hs_strided"),
                        cnt as usize,
                        &*a,
                        &mut other,
                        &nn,
                        &stride,
                        &cnt,
                        &st,
                        &rev,
                        &rev
                    );
                } else {
                    launch!(
                        k,
                        s,
                        &name("hs_strided"),
                        cnt as usize,
                        &other,
                        &mut *a,
                        &nn,
                        &stride,
                        &cnt,
                        &st,
                        &rev,
                        &rev
                    );
                }
                in_a = !in_a;
                st *= 2;
            }
            if !in_a {
                launch!(
                    k,
                    s,
                    &name("hs_strided"),
                    cnt as usize,
                    &other,
                    &mut *a,
                    &nn,
                    &stride,
                    &cnt,
                    &cnt,
                    &rev,
                    &rev
                );
            }
            for d in (0..lv).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("lf_down"),
                    n.div_ceil(2 << d),
                    &mut *a,
                    &nn,
                    &st,
                    &rev,
                    &rev
                );
            }
        }
    }
    Ok(())
}

/// The chunked scan: chunks of `K` scanned by one thread each, the chunk totals scanned
/// recursively, then every element after the first chunk fixed up with its prefix.
#[allow(clippy::too_many_arguments)]
fn chunked<D: GpuReal>(
    g: &Gpu,
    k: &Kernels,
    op: &str,
    len: usize,
    a: &mut CudaSlice<D>,
    n: usize,
    flip: i32,
    ridx: i32,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let s = &g.stream;
    let kk = chunk_len();
    let nc = n.div_ceil(kk);
    let mut carry = alloc::<D>(g, nc * len, "the chunk totals")?;
    let (nn, k32) = (n as i64, kk as i32);
    launch!(
        k,
        s,
        &format!("{op}_chunk"),
        nc,
        &mut *a,
        &nn,
        &k32,
        &mut carry,
        &flip,
        &ridx
    );
    chunked(g, k, op, len, &mut carry, nc, flip, 0)?;
    if n > kk {
        launch!(
            k,
            s,
            &format!("{op}_fix"),
            n - kk,
            &mut *a,
            &nn,
            &k32,
            &carry,
            &flip,
            &ridx
        );
    }
    Ok(())
}

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Algorithm 5.
    Filter,
    /// Algorithms 5 and 6.
    Rts,
    /// Algorithm 7.
    TwoFilter,
    /// The plain Kalman filter in one GPU thread (the speed-up baseline).
    OneThread,
}

/// The model on the device: per-step matrices (one set when time-invariant) and prior.
pub(crate) struct DevModel<D> {
    pub steps: CudaSlice<D>,
    pub varying: i32,
    pub prior: CudaSlice<D>,
    pub nx: usize,
}

impl<D: GpuReal> DevModel<D> {
    pub fn new(g: &Gpu, m: &ConvertedModel<D>, varying: bool) -> Result<Self> {
        let mut flat = Vec::new();
        for s in &m.steps {
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

/// One track's buffers on the device.
pub(crate) struct TrackBufs<D> {
    pub t: usize,
    pub z: CudaSlice<D>,
    el: CudaSlice<D>,
    back: CudaSlice<D>,
    se: CudaSlice<D>,
    pub mean: CudaSlice<D>,
    pub cov: CudaSlice<D>,
    pub ll: CudaSlice<D>,
    pub smean: CudaSlice<D>,
    pub scov: CudaSlice<D>,
}

impl<D: GpuReal> TrackBufs<D> {
    pub fn new(g: &Gpu, nx: usize, z: &[D], t: usize) -> Result<Self> {
        Ok(TrackBufs {
            t,
            z: cu(g.stream.clone_htod(z), "uploading measurements")?,
            el: alloc(g, t * fe_len(nx), "filtering elements")?,
            back: alloc(g, t * fe_len(nx), "backward elements")?,
            se: alloc(g, t * se_len(nx), "smoothing elements")?,
            mean: alloc(g, t * nx, "means")?,
            cov: alloc(g, t * nx * nx, "covariances")?,
            ll: alloc(g, t, "log-likelihoods")?,
            smean: alloc(g, t * nx, "smoothed means")?,
            scov: alloc(g, t * nx * nx, "smoothed covariances")?,
        })
    }

    /// Fills every output with NaN, so that an element no kernel wrote shows.
    pub fn poison(&mut self, g: &Gpu, k: &Kernels) -> Result<()> {
        let s = &g.stream;
        for b in [
            &mut self.mean,
            &mut self.cov,
            &mut self.ll,
            &mut self.smean,
            &mut self.scov,
        ] {
            let n = b.len() as i64;
            launch!(k, s, "poison", n as usize, b, &n);
        }
        Ok(())
    }

    /// Launches `method` (asynchronously on the device's stream).
    pub fn run(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        method: Method,
        alg: ScanAlgorithm,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt) = (self.t, self.t as i64);
        let nx = m.nx;
        if method == Method::OneThread {
            launch!(
                k,
                s,
                "kf_seq",
                1,
                &m.steps,
                &m.varying,
                &m.prior,
                &self.z,
                &tt,
                &mut self.mean,
                &mut self.cov,
                &mut self.ll
            );
            return Ok(());
        }
        launch!(
            k,
            s,
            "pf_build",
            t,
            &m.steps,
            &m.varying,
            &m.prior,
            &self.z,
            &tt,
            &mut self.el
        );
        if method == Method::TwoFilter {
            launch!(k, s, "tf_shift", t, &self.el, &mut self.back, &tt);
        }
        scan(g, k, "pf", fe_len(nx), &mut self.el, t, alg, false)?;
        launch!(
            k,
            s,
            "pf_extract",
            t,
            &self.el,
            &m.steps,
            &m.varying,
            &m.prior,
            &self.z,
            &tt,
            &mut self.mean,
            &mut self.cov,
            &mut self.ll
        );
        match method {
            Method::Rts => {
                launch!(
                    k,
                    s,
                    "ps_build",
                    t,
                    &m.steps,
                    &m.varying,
                    &self.mean,
                    &self.cov,
                    &tt,
                    &mut self.se
                );
                scan(g, k, "ps", se_len(nx), &mut self.se, t, alg, true)?;
                launch!(
                    k,
                    s,
                    "ps_extract",
                    t,
                    &self.se,
                    &tt,
                    &mut self.smean,
                    &mut self.scov
                );
            }
            Method::TwoFilter => {
                scan(g, k, "pf", fe_len(nx), &mut self.back, t, alg, true)?;
                launch!(
                    k,
                    s,
                    "tf_combine",
                    t,
                    &self.back,
                    &self.mean,
                    &self.cov,
                    &tt,
                    &mut self.smean,
                    &mut self.scov
                );
            }
            _ => {}
        }
        Ok(())
    }
}
