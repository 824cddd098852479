//! The parallel RTS smoother of one track whose time-varying model and measurements are
//! written on the device by another family's kernels and whose outputs stay there
//! between runs: the loop of the parallel iterated smoother (`nonlinear::cuda`), each
//! pass's affine model made on the device from the last pass's smoothed moments.

use super::run::{DevModel, GroupBufs, Method};
use super::{cu, first_failure, kernels, Gpu, GpuReal, Kernels};
use crate::data::Estimates;
use crate::error::{Error, Result};
use crate::model::Prior;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::Poison;
use crate::scan::ScanAlgorithm;
use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::Arc;

/// Scalars of one step's model record: `F [nx][nx]`, `u [nx]`, `Q [nx][nx]`,
/// `H [ny][nx]`, `d [ny]`, `R [ny][ny]`, row-major (as [`DevModel`] lays them out).
fn record_len(nx: usize, ny: usize) -> usize {
    2 * nx * nx + nx + ny * nx + ny + ny * ny
}

/// One track of `t` steps: its per-step model records and measurements on the device
/// (written by the caller's kernels before each [`ResidentRts::run`]), and the parallel
/// filter's and RTS smoother's outputs, `[t][..]`, left on the device.
pub(crate) struct ResidentRts<D: GpuReal> {
    g: Arc<Gpu>,
    k: Arc<Kernels>,
    model: DevModel<D>,
    bufs: GroupBufs<D>,
    nx: usize,
    t: usize,
}

const ALG: ScanAlgorithm = ScanAlgorithm::Fastest;

impl<D: GpuReal> ResidentRts<D> {
    /// Buffers on `g` for one track of `t` steps of an `nx`-state, `ny`-measurement
    /// model with `prior`; the model records and measurements are NaN until written.
    pub fn new(g: &Arc<Gpu>, nx: usize, ny: usize, t: usize, prior: &Prior) -> Result<Self> {
        let k = kernels::<D>(g, nx, ny)?;
        let nan = |n: usize| vec![D::of(f64::NAN); n];
        let mut p = prior.x0.iter().map(|&v| D::of(v)).collect::<Vec<D>>();
        for i in 0..nx {
            for j in 0..nx {
                p.push(D::of(prior.p0[(i, j)]));
            }
        }
        let model = DevModel {
            steps: cu(
                g.stream.clone_htod(&nan(t * record_len(nx, ny))),
                "allocating the linearised model",
            )?,
            varying: 1,
            prior: cu(g.stream.clone_htod(&p), "uploading the prior")?,
            nx,
        };
        let bufs = GroupBufs::new(g, nx, t, 1, Method::Rts, ALG, &nan(t * ny), None)?;
        Ok(ResidentRts {
            g: g.clone(),
            k,
            model,
            bufs,
            nx,
            t,
        })
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        // The context does not track events (`crate::cuda`): the guard records nothing.
        s.device_ptr(&self.g.stream).0
    }

    /// Device pointers of the model records (`[t][record_len]`) and the measurements
    /// (`[t][ny]`), for the kernels that write them.
    pub fn inputs(&self) -> (u64, u64) {
        (self.ptr(&self.model.steps), self.ptr(&self.bufs.z))
    }

    /// Device pointers of the smoothed means (`[t][nx]`) and covariances
    /// (`[t][nx][nx]`) of the last run.
    pub fn smoothed(&self) -> (u64, u64) {
        (self.ptr(&self.bufs.smean), self.ptr(&self.bufs.scov))
    }

    /// Fills the model records and measurements with NaN (before the kernels that write
    /// them, so that an element they leave unwritten shows).
    pub fn poison_inputs(&mut self) -> Result<()> {
        let (k, s) = (&self.k, &self.g.stream);
        for b in [&mut self.model.steps, &mut self.bufs.z] {
            let n = b.len() as i64;
            launch(k, s, "poison", n as usize, &Poison { p: b, n })?;
        }
        Ok(())
    }

    /// Queues the filter and smoother on the device's stream, outputs poisoned first.
    pub fn run(&mut self) -> Result<()> {
        self.bufs.poison(&self.g, &self.k, Method::Rts)?;
        self.bufs
            .run(&self.g, &self.k, &self.model, Method::Rts, ALG)
    }

    /// The last run's filtered and smoothed estimates (one track), checked finite as the
    /// batch path checks them.
    pub fn read(&self) -> Result<(Estimates<D>, Estimates<D>)> {
        let (nx, t) = (self.nx, self.t);
        let mut f = Estimates::nan(1, t, nx, true);
        let mut s = Estimates::nan(1, t, nx, false);
        let st = &self.g.stream;
        cu(
            st.memcpy_dtoh(&self.bufs.mean, &mut f.mean),
            "reading means",
        )?;
        cu(
            st.memcpy_dtoh(&self.bufs.cov, &mut f.cov),
            "reading covariances",
        )?;
        let ll = f.loglik.as_mut().expect("allocated with log-likelihoods");
        cu(st.memcpy_dtoh(&self.bufs.ll, ll), "reading log-likelihoods")?;
        cu(
            st.memcpy_dtoh(&self.bufs.smean, &mut s.mean),
            "reading smoothed means",
        )?;
        cu(
            st.memcpy_dtoh(&self.bufs.scov, &mut s.cov),
            "reading smoothed covariances",
        )?;
        cu(st.synchronize(), "reading the results")?;
        let bad = first_failure(&f, &s);
        if let Some((_, step)) = bad {
            return Err(Error::NotPositiveDefinite {
                track: 0,
                step,
                what: "a covariance of the parallel filter or smoother on the GPU (a solve or Cholesky failed)",
            });
        }
        Ok((f, s))
    }
}
