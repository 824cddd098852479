//! The two-filter smoother split by direction (the split Algorithm 7 suggests): the
//! forward filter on one device and the backward filter's reduce and scan on another,
//! concurrently, one host thread per device; the backward chunk totals (one element per
//! chunk of K steps) are then copied to the forward device (peer to peer where the
//! devices allow it) and combined with the filtered moments there (the two-filter
//! sweep). Equal to the one-device two-filter smoother bit for bit: the same kernels over
//! the same chunks. The combination sweep, the smoother's most expensive kernel, runs on
//! the forward device with the filter, so this split gains only the backward reduce; the
//! time split (`split.rs`) balances the work and is what `Device::AllCuda` runs. Kept to
//! measure the two against each other (`kestrel bench --only parallel`).

use super::run::DevModel;
use super::scan::{alloc, scan};
use super::split::{budget_group, scalars_per_track};
use super::{
    cu, fe_len, first_failure, fused_chunk_len, kernels, out_as, with_as, GpuReal, Output,
};
use crate::cuda::{by_precision, catch, copy_between, gpu, Gpu, Module as Kernels};
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::kalman::dense::ConvertedModel;
use crate::linalg::Real;
use crate::model::StateSpace;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::{Poison, Reduce, Sweep, TfSweep};
use crate::scan::ScanAlgorithm;
use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::Arc;

/// The two-filter smoother with the forward filter on device `ordinals[0]` and the
/// backward filter on `ordinals[1]` (the same ordinal twice runs both on one device),
/// timing `repeats` runs after `warmup` with the data resident (wall clock from the first
/// launch until the smoothed moments are written, the copy between the devices
/// included); returns the times and `(filtered, Some(smoothed))`.
pub fn time_two_filter_by_direction<T: Real, M: StateSpace + ?Sized>(
    ordinals: [usize; 2],
    model: &M,
    z: &Measurements<T>,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<T>)> {
    if z.steps == 0 {
        return Err(Error::Input {
            msg: "measurements have no steps".into(),
        });
    }
    by_precision!(T, D => {
        let (t, o) = with_as::<T, D, _>(z, |z| {
            catch(|| run_dirs::<D, M>(ordinals, model, z, alg, warmup, repeats))
        })?;
        Ok((t, out_as(o)))
    })
}
/// One direction's device, model, measurements and buffers for a group of tracks.
struct Side<D> {
    g: Arc<Gpu>,
    k: Arc<Kernels>,
    dm: DevModel<D>,
    z: CudaSlice<D>,
    /// Chunk totals: forward on the forward device; backward on the backward device,
    /// and their copy on the forward device.
    tot: CudaSlice<D>,
    btot: CudaSlice<D>,
    mean: CudaSlice<D>,
    cov: CudaSlice<D>,
    ll: CudaSlice<D>,
    smean: CudaSlice<D>,
    scov: CudaSlice<D>,
}

impl<D: GpuReal> Side<D> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        g: &Arc<Gpu>,
        k: &Arc<Kernels>,
        m: &ConvertedModel<D>,
        varying: bool,
        z: &[D],
        nb: usize,
        t: usize,
        nc: usize,
        forward: bool,
    ) -> Result<Self> {
        g.bind()?;
        let (nx, fe) = (m.nx, fe_len(m.nx));
        let n = nb * t;
        let outs = |len: usize| if forward { len } else { 1 };
        Ok(Side {
            g: g.clone(),
            k: k.clone(),
            dm: DevModel::window(g, m, varying, 0..t)?,
            z: cu(g.stream.clone_htod(z), "uploading measurements")?,
            tot: alloc(g, if forward { nb * nc * fe } else { 1 }, "chunk totals")?,
            btot: alloc(g, nb * nc * fe, "backward chunk totals")?,
            mean: alloc(g, outs(n * nx), "means")?,
            cov: alloc(g, outs(n * nx * nx), "covariances")?,
            ll: alloc(g, outs(n), "log-likelihoods")?,
            smean: alloc(g, outs(n * nx), "smoothed means")?,
            scov: alloc(g, outs(n * nx * nx), "smoothed covariances")?,
        })
    }

    /// The parameters of this side's `{op}_reduce` over chunks of `k` of its `t` steps
    /// into `tot` (its own chunk totals, or the backward ones).
    fn reduce<'a>(&'a self, tot: &'a CudaSlice<D>, t: i64, k: i32) -> Reduce<'a> {
        Reduce {
            inputs: self.dm.inputs(&self.z),
            t,
            k,
            tot,
        }
    }

    fn poison(&mut self) -> Result<()> {
        self.g.bind()?;
        let (k, s) = (&self.k, &self.g.stream);
        for b in [
            &mut self.mean,
            &mut self.cov,
            &mut self.ll,
            &mut self.smean,
            &mut self.scov,
        ] {
            let n = b.len() as i64;
            launch(k, s, "poison", n as usize, &Poison { p: b, n })?;
        }
        cu(s.synchronize(), "poisoning the outputs")
    }
}

fn run_dirs<D: GpuReal, M: StateSpace + ?Sized>(
    ordinals: [usize; 2],
    model: &M,
    z: &Measurements<D>,
    alg: ScanAlgorithm,
    warmup: usize,
    repeats: usize,
) -> Result<(Vec<f64>, Output<D>)> {
    let (nx, ny, t) = (model.nx(), model.ny(), z.steps);
    let m = ConvertedModel::<D>::new(model, t);
    let varying = model.as_invariant().is_none();
    let (ga, gb) = (gpu(ordinals[0])?, gpu(ordinals[1])?);
    let (ka, kb) = (kernels::<D>(&ga, nx, ny)?, kernels::<D>(&gb, nx, ny)?);
    // Both sides budgeted as the forward one (the larger: measurements, two sets of chunk
    // totals, filtered and smoothed moments).
    let per = scalars_per_track(nx, ny, t, t, true);
    let group = budget_group::<D>(
        &[ga.clone(), gb.clone()],
        &ordinals,
        &[per, per],
        t,
        z.tracks,
    )?;
    let fe = fe_len(nx);
    let mut f = Estimates::nan(z.tracks, t, nx, true);
    let mut s = Estimates::nan(z.tracks, t, nx, false);
    let mut times = vec![0.0; repeats];
    let (n1, n2) = (t * nx, t * nx * nx);
    let mut b0 = 0;
    while b0 < z.tracks {
        let nb = group.min(z.tracks - b0);
        let kk = fused_chunk_len(nb * t);
        let nc = t.div_ceil(kk);
        let zg = &z.data[b0 * t * ny..(b0 + nb) * t * ny];
        // Set-up on both devices at once (the uploads overlap).
        let (a, b) = std::thread::scope(|sc| {
            let hb = sc.spawn(|| Side::new(&gb, &kb, &m, varying, zg, nb, t, nc, false));
            let a = Side::new(&ga, &ka, &m, varying, zg, nb, t, nc, true);
            let b = hb
                .join()
                .unwrap_or_else(|_| Err(Error::Cuda("the backward set-up panicked".into())));
            (a, b)
        });
        let (mut a, mut b) = (a?, b?);
        let (tt, k32) = (t as i64, kk as i32);
        for rep in 0..warmup + repeats {
            a.poison()?;
            let start = std::time::Instant::now();
            std::thread::scope(|sc| -> Result<()> {
                let hb = sc.spawn(|| -> Result<()> {
                    b.g.bind()?;
                    let (g, k) = (&*b.g, &b.k);
                    let st = &g.stream;
                    launch(k, st, "tf_reduce", (nc, nb), &b.reduce(&b.btot, tt, k32))?;
                    scan(g, k, "pf", fe, &mut b.btot, nc, nb, alg, true)?;
                    cu(st.synchronize(), "running the backward filter")
                });
                a.g.bind()?;
                let (g, k) = (&*a.g, &a.k);
                let st = &g.stream;
                launch(k, st, "pf_reduce", (nc, nb), &a.reduce(&a.tot, tt, k32))?;
                scan(g, k, "pf", fe, &mut a.tot, nc, nb, alg, false)?;
                launch(
                    k,
                    st,
                    "pf_sweep",
                    (nc, nb),
                    &Sweep {
                        tot: &a.tot,
                        inputs: a.dm.inputs(&a.z),
                        t: tt,
                        k: k32,
                        mean: &a.mean,
                        cov: &a.cov,
                        ll: &a.ll,
                    },
                )?;
                hb.join()
                    .unwrap_or_else(|_| Err(Error::Cuda("the backward filter panicked".into())))
            })?;
            // The backward chunk totals to the forward device, then the combination.
            {
                let bytes = nb * nc * fe * std::mem::size_of::<D>();
                let (src, _s1) = b.btot.device_ptr(&b.g.stream);
                let (dst, _s2) = a.btot.device_ptr(&a.g.stream);
                copy_between(
                    (&a.g, dst),
                    (&b.g, src),
                    bytes,
                    &a.g.stream,
                    "copying the backward chunk totals",
                )?;
            }
            a.g.bind()?;
            let (k, st) = (&a.k, &a.g.stream);
            launch(
                k,
                st,
                "tf_sweep",
                (nc, nb),
                &TfSweep {
                    tot: &a.btot,
                    inputs: a.dm.inputs(&a.z),
                    mean: &a.mean,
                    cov: &a.cov,
                    t: tt,
                    k: k32,
                    smean: &a.smean,
                    scov: &a.scov,
                },
            )?;
            cu(st.synchronize(), "running the two-filter combination")?;
            if rep >= warmup {
                times[rep - warmup] += start.elapsed().as_secs_f64();
            }
        }
        let st = &a.g.stream;
        let ll = f.loglik.as_mut().expect("allocated with log-likelihoods");
        let r1 = b0 * n1..(b0 + nb) * n1;
        let r2 = b0 * n2..(b0 + nb) * n2;
        cu(
            st.memcpy_dtoh(&a.mean, &mut f.mean[r1.clone()]),
            "reading means",
        )?;
        cu(
            st.memcpy_dtoh(&a.cov, &mut f.cov[r2.clone()]),
            "reading covariances",
        )?;
        cu(
            st.memcpy_dtoh(&a.ll, &mut ll[b0 * t..(b0 + nb) * t]),
            "reading log-likelihoods",
        )?;
        cu(
            st.memcpy_dtoh(&a.smean, &mut s.mean[r1]),
            "reading smoothed means",
        )?;
        cu(
            st.memcpy_dtoh(&a.scov, &mut s.cov[r2]),
            "reading smoothed covariances",
        )?;
        cu(st.synchronize(), "reading the results")?;
        b0 += nb;
    }
    let bad = first_failure(&f, &s);
    if let Some((track, step)) = bad {
        return Err(Error::NotPositiveDefinite {
            track,
            step,
            what: "a covariance of the two-filter smoother split by direction (a solve or Cholesky failed)",
        });
    }
    Ok((times, (f, Some(s))))
}
