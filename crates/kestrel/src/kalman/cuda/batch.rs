//! A batch that stays on the GPU between kernel runs, for measuring the kernels alone
//! (CUDA events around each launch) apart from the copies to and from the host.

use super::slot::{Shape, Slot};
use super::source::{kernels, model_params};
use super::{CudaOptions, OutputLayout};
use crate::cuda::{dtoh, htod, EventTimer, Gpu, Module};
use crate::data::{Estimates, Measurements};
use crate::error::Result;
use crate::kalman::{FilterOptions, Keep};
use crate::linalg::Real;
use crate::model::Model;
use std::sync::Arc;

/// Measurements and estimates of a whole batch held in device memory.
pub struct DeviceBatch<T: Real> {
    gpu: Arc<Gpu>,
    k: Arc<Module>,
    ks: Option<Arc<Module>>,
    params: Vec<T>,
    slot: Slot<T>,
    tracks: usize,
}

impl<T: Real> DeviceBatch<T> {
    /// Uploads `z` to GPU `ordinal` and allocates outputs for a filter that keeps `keep`
    /// in `layout`, and room for the smoother when `smoothed`.
    pub fn new(
        ordinal: usize,
        model: &Model,
        z: &Measurements<T>,
        keep: Keep,
        layout: OutputLayout,
        smoothed: bool,
        opts: &CudaOptions,
    ) -> Result<Self> {
        Self::with_inputs(
            ordinal,
            model,
            z,
            keep,
            layout,
            smoothed,
            opts,
            &crate::kalman::TrackInputs::new(),
        )
    }

    /// [`DeviceBatch::new`] with per-track inputs (priors, `u`, `d`, `R`; see
    /// `filter_inputs_on_devices`), uploaded with the measurements.
    #[allow(clippy::too_many_arguments)]
    pub fn with_inputs(
        ordinal: usize,
        model: &Model,
        z: &Measurements<T>,
        keep: Keep,
        layout: OutputLayout,
        smoothed: bool,
        opts: &CudaOptions,
        inputs: &crate::kalman::TrackInputs<'_>,
    ) -> Result<Self> {
        super::pipeline::check_input(model, z, &FilterOptions::default())?;
        let host = if inputs.is_empty() {
            None
        } else {
            Some(super::gpu_inputs(model, z, inputs)?)
        };
        let set = host.as_ref().map(|h| h.set()).unwrap_or_default();
        let gpu = crate::cuda::gpu(ordinal)?;
        let (pf, ps) = set.parts(smoothed);
        let k = kernels::<T>(&gpu, model, opts.bake_model, pf)?;
        let ks = match ps {
            Some(p) => Some(kernels::<T>(&gpu, model, opts.bake_model, p)?),
            None => None,
        };
        let last = keep == Keep::Last;
        let shape = Shape {
            nx: model.nx(),
            ny: model.ny(),
            steps: z.steps,
            kept: if last { 1 } else { z.steps },
            last,
            predicted: false,
            layout,
            smoothed,
            inputs: set,
        };
        let slot = Slot::new(&gpu, z.tracks, shape, gpu.stream.clone())?;
        if let Some(h) = &host {
            slot.upload_inputs(&gpu, &k, h, 0, z.tracks)?;
        }
        htod(
            &slot.stream,
            &z.data,
            &slot.z,
            0,
            "copying measurements to the GPU",
        )?;
        slot.clear_err()?;
        crate::cuda::sync(&slot.stream, "uploading measurements")?;
        Ok(DeviceBatch {
            params: model_params::<T>(model),
            tracks: z.tracks,
            gpu,
            k,
            ks,
            slot,
        })
    }

    /// Device memory a batch of `model` with `steps` steps a track holds per track, in
    /// bytes (measurements, outputs and their work space; [`DeviceBatch::new`]'s
    /// arguments).
    pub fn bytes_per_track(
        model: &Model,
        steps: usize,
        keep: Keep,
        layout: OutputLayout,
        smoothed: bool,
    ) -> usize {
        let last = keep == Keep::Last;
        Shape {
            nx: model.nx(),
            ny: model.ny(),
            steps,
            kept: if last { 1 } else { steps },
            last,
            predicted: false,
            layout,
            smoothed,
            inputs: Default::default(),
        }
        .bytes_per_track(std::mem::size_of::<T>())
    }

    /// The GPU's name.
    pub fn device_name(&self) -> &str {
        &self.gpu.name
    }

    /// Device memory the batch holds, in bytes.
    pub fn device_bytes(&self) -> usize {
        self.tracks * self.slot.shape.bytes_per_track(std::mem::size_of::<T>())
    }

    fn timed(&self, f: impl FnOnce(&Self) -> Result<()>) -> Result<f64> {
        let t = EventTimer::new(&self.gpu)?;
        t.start(&self.slot.stream)?;
        f(self)?;
        t.stop(&self.slot.stream)?;
        Ok(f64::from(t.elapsed_ms()?) * 1e-3)
    }

    /// Runs the filter kernel; returns its device time in seconds (CUDA events).
    pub fn filter(&self) -> Result<f64> {
        let t = self.timed(|s| s.slot.filter(&s.k, &s.params, s.tracks))?;
        self.slot.check_err(0, "innovation covariance S")?;
        Ok(t)
    }

    /// Converts structure-of-arrays outputs to the host layout on the device (nothing
    /// for the host layout); returns the device time in seconds.
    pub fn to_host_layout(&self) -> Result<f64> {
        self.timed(|s| s.slot.to_host_layout(&s.k, s.tracks))
    }

    /// [`DeviceBatch::to_host_layout`] of the outputs selected (means, covariances,
    /// log-likelihoods: full covariances for [`crate::data::CovOutput::Diag`] too).
    pub fn to_host_layout_of(&self, outputs: crate::data::Outputs) -> Result<f64> {
        let which = [outputs.mean, outputs.cov.wanted(), outputs.loglik];
        self.timed(|s| s.slot.to_host_layout_of(&s.k, s.tracks, which))
    }

    /// Runs the RTS smoother over the filtered outputs (host layout); returns its
    /// device time in seconds.
    pub fn smooth(&self) -> Result<f64> {
        let ks = self.smoother()?;
        let t = self.timed(|s| s.slot.smooth(ks, &s.params, s.tracks))?;
        self.slot
            .check_err(0, "predicted covariance P(k+1|k) in the smoother")?;
        Ok(t)
    }

    fn smoother(&self) -> Result<&Module> {
        self.ks
            .as_deref()
            .ok_or_else(|| crate::error::Error::Input {
                msg: "this device batch was made without room for the smoother".into(),
            })
    }

    /// Converts the smoothed SoA outputs to the host layout on the device; returns the
    /// device time in seconds.
    pub fn smoothed_to_host_layout(&self) -> Result<f64> {
        let ks = self.smoother()?;
        self.timed(|s| s.slot.smoothed_to_host_layout(ks, s.tracks))
    }

    /// Copies the filtered estimates back (after [`DeviceBatch::to_host_layout`] for the
    /// SoA layout).
    pub fn filtered(&self) -> Result<Estimates<T>> {
        let sh = self.slot.shape;
        let mut e = Estimates::nan(self.tracks, sh.kept, sh.nx, true);
        let st = &self.slot.stream;
        dtoh(st, &self.slot.mean, 0, &mut e.mean, "copying means")?;
        dtoh(st, &self.slot.cov, 0, &mut e.cov, "copying covariances")?;
        if let Some(ll) = e.loglik.as_mut() {
            dtoh(st, &self.slot.ll, 0, ll, "copying log-likelihoods")?;
        }
        crate::cuda::sync(st, "copying estimates")?;
        Ok(e)
    }

    /// Copies the smoothed estimates back (after [`DeviceBatch::smooth`], and
    /// [`DeviceBatch::smoothed_to_host_layout`] for the SoA layout).
    pub fn smoothed(&self) -> Result<Estimates<T>> {
        let sh = self.slot.shape;
        let mut e = Estimates::nan(self.tracks, sh.kept, sh.nx, false);
        let st = &self.slot.stream;
        let (m, c) = match (&self.slot.smean, &self.slot.scov) {
            (Some(m), Some(c)) => (m, c),
            _ => (&self.slot.mean, &self.slot.cov),
        };
        dtoh(st, m, 0, &mut e.mean, "copying smoothed means")?;
        dtoh(st, c, 0, &mut e.cov, "copying smoothed covariances")?;
        crate::cuda::sync(st, "copying estimates")?;
        Ok(e)
    }
}
