//! The square-root filter and smoother on the device (`kernels/parallel_sqrt*.cu`): the
//! model with its factors, and the two pipelines (over stored elements, and fused).

use super::run::{DevModel, GroupBufs, Method};
use super::scan::scan;
use super::{cu, fe_len, se_len, Gpu, GpuReal, Kernels};
use crate::error::Result;
use crate::kalman::dense::ConvertedModel;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::{FilteredSqrt, QfSweep, QsBuild, QsExtract, QsReduce, QsSweep};
use crate::scan::ScanAlgorithm;
use std::sync::Arc;

impl<D: GpuReal> DevModel<D> {
    /// The model of the square-root kernels: every step's `F, u, L_Q, H, d, L_R` and the
    /// prior `(x0, L_P0)`, the factors found on the host as the CPU's square-root filter
    /// finds them (`parallel/sqrt/factor.rs`, `psd_factor`).
    pub fn factored(g: &Gpu, m: &ConvertedModel<D>, varying: bool) -> Result<Self> {
        use crate::error::Error;
        use crate::parallel::sqrt::psd_factor;
        let (nx, ny) = (m.nx, m.ny);
        let steps = if varying { m.steps.len() } else { 1 };
        let mut flat = Vec::new();
        let (mut lq, mut lr) = (vec![D::zero(); nx * nx], vec![D::zero(); ny * ny]);
        for (k, s) in m.steps[..steps].iter().enumerate() {
            let bad = |what| Error::NotPositiveDefinite {
                track: 0,
                step: k,
                what,
            };
            if !psd_factor(&s.q, nx, &mut lq) {
                return Err(bad(
                    "the process noise Q (a factor for the square-root filter)",
                ));
            }
            if !psd_factor(&s.r, ny, &mut lr) || (0..ny).any(|i| lr[i * ny + i] <= D::zero()) {
                return Err(bad(
                    "the measurement noise R (a factor for the square-root filter)",
                ));
            }
            for part in [&s.f, &s.u, &lq, &s.h, &s.d, &lr] {
                flat.extend_from_slice(part);
            }
        }
        let mut prior = m.x0.clone();
        let mut lp0 = vec![D::zero(); nx * nx];
        if !psd_factor(&m.p0, nx, &mut lp0) {
            return Err(Error::NotPositiveDefinite {
                track: 0,
                step: 0,
                what: "the prior covariance P0",
            });
        }
        prior.extend_from_slice(&lp0);
        Ok(DevModel {
            steps: cu(g.stream.clone_htod(&flat), "uploading the model")?,
            varying: i32::from(varying),
            prior: cu(g.stream.clone_htod(&prior), "uploading the prior")?,
            nx,
        })
    }
}

impl<D: GpuReal> GroupBufs<D> {
    /// The square-root filter and smoother over stored elements (`kernels/parallel_sqrt.cu`;
    /// every scan but the fused default): elements built and stored, scanned with `alg`,
    /// read out; the smoother's elements from the scanned
    /// filtering elements (their means and factors), scanned in reverse.
    pub(super) fn run_sqrt(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        method: Method,
        alg: ScanAlgorithm,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt, nb, nx) = (self.t, self.t as i64, self.nb, m.nx);
        self.filter_pass(g, k, m, "qf", alg, false)?;
        if method == Method::SqrtRts {
            launch(
                k,
                s,
                "qs_build",
                (t, nb),
                &QsBuild {
                    st: &m.steps,
                    varying: m.varying,
                    el: &self.el,
                    t: tt,
                    se: &self.se,
                },
            )?;
            scan(g, k, "qs", se_len(nx), &mut self.se, t, nb, alg, true)?;
            launch(
                k,
                s,
                "qs_extract",
                (t, nb),
                &QsExtract {
                    se: &self.se,
                    t: tt,
                    smean: &self.smean,
                    scov: &self.scov,
                },
            )?;
        }
        Ok(())
    }

    /// The fused square-root filter and smoother (`kernels/parallel_sqrt.cu`, as
    /// `run_fused`): reduce, scan of the chunk totals, and a sweep with the
    /// square-root Kalman recursion; the smoother's reduce and sweep over the filtered
    /// means and factors, in reverse.
    pub(super) fn run_sqrt_fused(
        &mut self,
        g: &Gpu,
        k: &Arc<Kernels>,
        m: &DevModel<D>,
        method: Method,
    ) -> Result<()> {
        let s = &g.stream;
        let (t, tt, nb, nx) = (self.t, self.t as i64, self.nb, m.nx);
        let kk = self.fused_k as i32;
        let nc = t.div_ceil(self.fused_k);
        let fast = ScanAlgorithm::Fastest;
        let keep = i32::from(method == Method::SqrtRts);
        launch(k, s, "qf_reduce", (nc, nb), &self.reduce(m))?;
        scan(g, k, "qf", fe_len(nx), &mut self.tot, nc, nb, fast, false)?;
        launch(
            k,
            s,
            "qf_sweep",
            (nc, nb),
            &QfSweep {
                tot: &self.tot,
                inputs: m.inputs(&self.z),
                t: tt,
                k: kk,
                mean: &self.mean,
                cov: &self.cov,
                ll: &self.ll,
                fac: &self.fac,
                keep,
            },
        )?;
        if method == Method::SqrtRts {
            let filtered = FilteredSqrt {
                st: &m.steps,
                varying: m.varying,
                mean: &self.mean,
                fac: &self.fac,
            };
            launch(
                k,
                s,
                "qs_reduce",
                (nc, nb),
                &QsReduce {
                    filtered,
                    t: tt,
                    k: kk,
                    tot: &self.tot,
                },
            )?;
            scan(g, k, "qs", se_len(nx), &mut self.tot, nc, nb, fast, true)?;
            launch(
                k,
                s,
                "qs_sweep",
                (nc, nb),
                &QsSweep {
                    tot: &self.tot,
                    filtered,
                    t: tt,
                    k: kk,
                    smean: &self.smean,
                    scov: &self.scov,
                },
            )?;
        }
        Ok(())
    }
}
