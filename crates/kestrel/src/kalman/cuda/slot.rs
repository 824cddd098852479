//! The device buffers for one chunk of tracks and the kernel calls on them. A chunked
//! run uses two slots on two streams, so that one slot's copies overlap the other's
//! kernels (`crate::cuda`'s chunk pipeline); the device-resident [`super::DeviceBatch`] is one slot for the whole batch.

use super::params::{
    Filtering, HostToSoa, KfFilter, KfFilterIn, RtsSmooth, RtsSmoothIn, Smoothing, SoaToHost,
};
use super::source::Part;
use super::{CudaOptions, OutputLayout};
use crate::cuda::{as_bytes, grid_for, launch, Addr, Arg, ChunkSlot, DevBuf, Gpu, Module};
use crate::error::{Error, Result};
use crate::linalg::Real;
use cudarc::driver::CudaStream;
use std::sync::Arc;

pub(crate) const BLOCK: u32 = 128;

/// What a slot holds: shapes and which outputs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub nx: usize,
    pub ny: usize,
    pub steps: usize,
    /// Steps kept in the outputs: `steps`, or 1 when only the final state is kept.
    pub kept: usize,
    /// Only the final state (and the track's total log-likelihood) is kept.
    pub last: bool,
    pub predicted: bool,
    pub layout: OutputLayout,
    /// Room for smoothed outputs beside the filtered ones.
    pub smoothed: bool,
    /// The per-track inputs the slot holds beside the measurements.
    pub inputs: InputSet,
}

/// Which per-track inputs (`kalman::TrackInputs`) a run takes: each is a device buffer
/// of the slot, uploaded with the measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InputSet {
    /// Prior means and covariances per track.
    pub prior: bool,
    /// Control inputs per track and step.
    pub u: bool,
    /// Measurement offsets per track and step.
    pub d: bool,
    /// Measurement noise per track and step.
    pub r: bool,
}

impl InputSet {
    pub fn any(&self) -> bool {
        self.prior || self.u || self.d || self.r
    }

    /// The kernel modules of a run with these inputs: the filter's, and the smoother's
    /// when it smooths (the inputs parts where the run needs them).
    pub fn parts(&self, smooth: bool) -> (Part, Option<Part>) {
        let f = if self.any() {
            Part::FilterInputs
        } else {
            Part::Filter
        };
        let s = smooth.then_some(if self.u {
            Part::SmoothInputs
        } else {
            Part::Smooth
        });
        (f, s)
    }

    /// Values per track: the inputs, and the scratch their upload goes through before
    /// the structure-of-arrays transpose.
    pub fn per_track(&self, nx: usize, ny: usize, steps: usize) -> usize {
        usize::from(self.prior) * (nx + nx * nx)
            + usize::from(self.u) * steps * nx
            + usize::from(self.d) * steps * ny
            + usize::from(self.r) * steps * ny * ny
            + self.scratch_per_track(nx, ny, steps)
    }

    /// Values per track of the upload scratch (the largest per-step input).
    pub fn scratch_per_track(&self, nx: usize, ny: usize, steps: usize) -> usize {
        let per = [(self.u, nx), (self.d, ny), (self.r, ny * ny)]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        steps * per
    }
}

impl Shape {
    pub fn np(&self) -> usize {
        self.nx * (self.nx + 1) / 2
    }

    /// Device bytes per track of a slot.
    pub fn bytes_per_track(&self, scalar: usize) -> usize {
        let (nx, ny, t, s) = (self.nx, self.ny, self.steps, self.kept);
        let mut n = t * ny + s * (nx + nx * nx + 1) + self.inputs.per_track(nx, ny, t);
        if self.predicted {
            n += t * (nx + nx * nx);
        }
        if self.layout == OutputLayout::Soa {
            n += s * (nx + self.np() + 1);
        }
        if self.smoothed {
            n += t * (nx + nx * nx);
            if self.layout == OutputLayout::Soa {
                n += t * (nx + self.np());
            }
        }
        n * scalar
    }
}

/// Device buffers for up to `cap` tracks.
pub(crate) struct Slot<T> {
    pub cap: usize,
    pub shape: Shape,
    pub z: DevBuf<T>,
    pub mean: DevBuf<T>,
    pub cov: DevBuf<T>,
    pub ll: DevBuf<T>,
    pub pmean: Option<DevBuf<T>>,
    pub pcov: Option<DevBuf<T>>,
    /// Structure-of-arrays outputs (mean, packed cov, loglik) of the SoA layout.
    pub soa: Option<(DevBuf<T>, DevBuf<T>, DevBuf<T>)>,
    /// Smoothed mean and covariance (host layout).
    pub smean: Option<DevBuf<T>>,
    pub scov: Option<DevBuf<T>>,
    /// Smoothed mean and packed covariance in the SoA layout.
    pub ssoa: Option<(DevBuf<T>, DevBuf<T>)>,
    pub err: DevBuf<u64>,
    /// Per-track inputs: prior means, prior covariances (`[B][..]`), u, d, R (the
    /// structure-of-arrays layout `[T][..][B]`), as the shape says.
    pub inputs: [Option<DevBuf<T>>; 5],
    /// Where per-step inputs land in the host's layout before their transpose.
    pub input_scratch: Option<DevBuf<T>>,
    pub stream: Arc<CudaStream>,
}

impl<T> Slot<T> {
    /// The buffers a run copies to the host, in a fixed order: filtered means,
    /// covariances, log-likelihoods, then the predicted (filter) or smoothed (smoother)
    /// means and covariances; `None` where the slot has no such buffer.
    pub fn outputs(&self) -> [Option<(&DevBuf<T>, &'static str)>; 5] {
        [
            Some((&self.mean, "means")),
            Some((&self.cov, "covariances")),
            Some((&self.ll, "log-likelihoods")),
            self.pmean
                .as_ref()
                .map(|b| (b, "predicted means"))
                .or(self.smean.as_ref().map(|b| (b, "smoothed means"))),
            self.pcov
                .as_ref()
                .map(|b| (b, "predicted covariances"))
                .or(self.scov.as_ref().map(|b| (b, "smoothed covariances"))),
        ]
    }
}

impl<T> ChunkSlot for Slot<T> {
    fn stream(&self) -> &CudaStream {
        &self.stream
    }
}

impl<T: Real> Slot<T> {
    pub fn new(gpu: &Gpu, cap: usize, shape: Shape, stream: Arc<CudaStream>) -> Result<Self> {
        let (nx, ny, t, s) = (shape.nx, shape.ny, shape.steps, shape.kept);
        let buf = |n: usize, what: &str| DevBuf::<T>::new(gpu, n, what);
        Ok(Slot {
            cap,
            shape,
            z: buf(cap * t * ny, "measurements")?,
            mean: buf(cap * s * nx, "filtered means")?,
            cov: buf(cap * s * nx * nx, "filtered covariances")?,
            ll: buf(cap * s, "log-likelihoods")?,
            pmean: if shape.predicted {
                Some(buf(cap * t * nx, "predicted means")?)
            } else {
                None
            },
            pcov: if shape.predicted {
                Some(buf(cap * t * nx * nx, "predicted covariances")?)
            } else {
                None
            },
            soa: if shape.layout == OutputLayout::Soa {
                Some((
                    buf(cap * s * nx, "means (SoA)")?,
                    buf(cap * s * shape.np(), "covariances (SoA)")?,
                    buf(cap * s, "log-likelihoods (SoA)")?,
                ))
            } else {
                None
            },
            smean: if shape.smoothed {
                Some(buf(cap * t * nx, "smoothed means")?)
            } else {
                None
            },
            scov: if shape.smoothed {
                Some(buf(cap * t * nx * nx, "smoothed covariances")?)
            } else {
                None
            },
            ssoa: if shape.smoothed && shape.layout == OutputLayout::Soa {
                Some((
                    buf(cap * t * nx, "smoothed means (SoA)")?,
                    buf(cap * t * shape.np(), "smoothed covariances (SoA)")?,
                ))
            } else {
                None
            },
            err: DevBuf::new(gpu, 2, "the error flags")?,
            inputs: {
                let i = shape.inputs;
                let opt = |on: bool, n: usize, what: &str| -> Result<Option<DevBuf<T>>> {
                    if on {
                        buf(n, what).map(Some)
                    } else {
                        Ok(None)
                    }
                };
                [
                    opt(i.prior, cap * nx, "prior means")?,
                    opt(i.prior, cap * nx * nx, "prior covariances")?,
                    opt(i.u, cap * t * nx, "control inputs")?,
                    opt(i.d, cap * t * ny, "measurement offsets")?,
                    opt(i.r, cap * t * ny * ny, "measurement noise covariances")?,
                ]
            },
            input_scratch: {
                let n = shape.inputs.scratch_per_track(nx, ny, t);
                if n > 0 {
                    Some(buf(cap * n, "input staging")?)
                } else {
                    None
                }
            },
            stream,
        })
    }

    /// NaN in every output, so that an element no kernel wrote shows.
    pub fn poison(&self) -> Result<()> {
        let st = &self.stream;
        for b in [&self.mean, &self.cov, &self.ll] {
            b.poison(st)?;
        }
        for b in [&self.pmean, &self.pcov, &self.smean, &self.scov]
            .into_iter()
            .flatten()
        {
            b.poison(st)?;
        }
        if let Some((a, b, c)) = &self.soa {
            for x in [a, b, c] {
                x.poison(st)?;
            }
        }
        if let Some((a, b)) = &self.ssoa {
            a.poison(st)?;
            b.poison(st)?;
        }
        Ok(())
    }

    /// Resets the error flag to "no failure" (all ones = u64::MAX).
    pub fn clear_err(&self) -> Result<()> {
        self.err.poison(&self.stream)
    }

    /// Enqueues the filter over the first `nb` tracks of `z`.
    pub fn filter(&self, k: &Module, params: &[T], nb: usize) -> Result<()> {
        if nb > self.cap {
            return Err(Error::Cuda(format!(
                "a chunk of {nb} tracks exceeds the slot's {}",
                self.cap
            )));
        }
        let sh = self.shape;
        let name = match (sh.layout, sh.last, sh.predicted, sh.inputs.any()) {
            (_, false, true, false) => "kf_filter_pred_host",
            (OutputLayout::Host, false, false, false) => "kf_filter_all_host",
            (OutputLayout::Host, true, _, false) => "kf_filter_last_host",
            (OutputLayout::Soa, false, false, false) => "kf_filter_all_soa",
            (OutputLayout::Soa, true, _, false) => "kf_filter_last_soa",
            (_, false, true, true) => "kf_filter_pred_host_in",
            (OutputLayout::Host, false, false, true) => "kf_filter_all_host_in",
            (OutputLayout::Host, true, _, true) => "kf_filter_last_host_in",
            (OutputLayout::Soa, false, false, true) => "kf_filter_all_soa_in",
            (OutputLayout::Soa, true, _, true) => "kf_filter_last_soa_in",
        };
        let (m, c, l) = match (&self.soa, sh.predicted) {
            (Some((a, b, c)), false) => (a.ptr(), b.ptr(), c.ptr()),
            _ => (self.mean.ptr(), self.cov.ptr(), self.ll.ptr()),
        };
        let pm = self.pmean.as_ref().map(|b| b.ptr()).unwrap_or(0);
        let pc = self.pcov.as_ref().map(|b| b.ptr()).unwrap_or(0);
        // The kernels' TrackIn struct: five device pointers, null where not given.
        let track_in: Vec<u8> = self
            .inputs
            .iter()
            .flat_map(|b| b.as_ref().map(|b| b.ptr()).unwrap_or(0).to_le_bytes())
            .collect();
        let (grid, blk) = (grid_for(nb, BLOCK), (BLOCK, 1, 1));
        let (mp, z, err) = (Arg::Bytes(as_bytes(params)), &self.z, &self.err);
        let (nb, steps) = (nb as i32, sh.steps as i32);
        let (mean, cov, ll, pmean, pcov) = (&Addr(m), &Addr(c), &Addr(l), &Addr(pm), &Addr(pc));
        let run = Filtering {
            mp,
            z,
            nb,
            steps,
            mean,
            cov,
            ll,
            pmean,
            pcov,
            err,
        };
        if sh.inputs.any() {
            let r#in = Arg::Bytes(&track_in);
            launch(&self.stream, k, name, grid, blk, &KfFilterIn { run, r#in })
        } else {
            launch(&self.stream, k, name, grid, blk, &KfFilter { run })
        }
    }

    /// Enqueues the copies of the per-track inputs of tracks `b0..b0 + nb` of `inputs`
    /// (`[tracks][..]` each, in the working precision) into the slot: the priors as
    /// they are, the per-step inputs through the scratch and `host_to_soa` of `k` (a
    /// module of an inputs part) into the structure-of-arrays layout the kernels read.
    pub fn upload_inputs(
        &self,
        gpu: &Gpu,
        k: &Module,
        inputs: &HostInputs<T>,
        b0: usize,
        nb: usize,
    ) -> Result<()> {
        let (nx, ny, t) = (self.shape.nx, self.shape.ny, self.shape.steps);
        // Values per track, and per step for the per-step inputs.
        let per = [
            (nx, 0),
            (nx * nx, 0),
            (t * nx, nx),
            (t * ny, ny),
            (t * ny * ny, ny * ny),
        ];
        let names = [
            "copying prior means to the GPU",
            "copying prior covariances to the GPU",
            "copying control inputs to the GPU",
            "copying measurement offsets to the GPU",
            "copying measurement noise covariances to the GPU",
        ];
        for (((dev, host), (n, comps)), what) in
            self.inputs.iter().zip(inputs.all()).zip(per).zip(names)
        {
            let (Some(dev), Some(host)) = (dev, host) else {
                continue;
            };
            let src = &host[b0 * n..(b0 + nb) * n];
            match &self.input_scratch {
                Some(scratch) if comps > 0 => {
                    crate::cuda::upload(gpu, &self.stream, src, scratch, 0, what)?;
                    let cols = t * comps;
                    launch(
                        &self.stream,
                        k,
                        "host_to_soa",
                        (
                            nb.div_ceil(32) as u32,
                            cols.div_ceil(32).clamp(1, 65535) as u32,
                            1,
                        ),
                        (32, 8, 1),
                        &HostToSoa {
                            r#in: scratch,
                            out: dev,
                            nb: nb as i32,
                            steps: t as i32,
                            c: comps as i32,
                        },
                    )?;
                }
                _ => crate::cuda::upload(gpu, &self.stream, src, dev, 0, what)?,
            }
        }
        Ok(())
    }

    /// Enqueues the conversion of the SoA filter outputs of `nb` tracks to the host
    /// layout (nothing for the host layout).
    pub fn to_host_layout(&self, k: &Module, nb: usize) -> Result<()> {
        self.to_host_layout_of(k, nb, [true; 3])
    }

    /// [`Slot::to_host_layout`] of the outputs selected: `[means, covariances,
    /// log-likelihoods]`.
    pub fn to_host_layout_of(&self, k: &Module, nb: usize, which: [bool; 3]) -> Result<()> {
        let Some((m, c, l)) = &self.soa else {
            return Ok(());
        };
        let sh = self.shape;
        if which[0] {
            transpose(&self.stream, k, m, &self.mean, nb, sh.kept, sh.nx, sh.nx)?;
        }
        if which[1] {
            transpose(
                &self.stream,
                k,
                c,
                &self.cov,
                nb,
                sh.kept,
                sh.np(),
                sh.nx * sh.nx,
            )?;
        }
        if which[2] {
            transpose(&self.stream, k, l, &self.ll, nb, sh.kept, 1, 1)?;
        }
        Ok(())
    }

    /// Enqueues the conversion of the SoA smoothed outputs to the host layout.
    pub fn smoothed_to_host_layout(&self, k: &Module, nb: usize) -> Result<()> {
        let (Some((m, c)), Some(sm), Some(sc)) = (&self.ssoa, &self.smean, &self.scov) else {
            return Ok(());
        };
        let sh = self.shape;
        transpose(&self.stream, k, m, sm, nb, sh.steps, sh.nx, sh.nx)?;
        transpose(&self.stream, k, c, sc, nb, sh.steps, sh.np(), sh.nx * sh.nx)
    }

    /// Enqueues the RTS smoother over the filtered outputs of `nb` tracks: from the SoA
    /// outputs into the SoA smoothed buffers when the slot has them, else from the
    /// host-layout outputs into the smoothed buffers, or in place when there are none.
    pub fn smooth(&self, k: &Module, params: &[T], nb: usize) -> Result<()> {
        let sh = self.shape;
        let u = self.inputs[2].as_ref().map(|b| b.ptr());
        let (name, im, ic, om, oc) = match (&self.soa, &self.ssoa, &self.smean, &self.scov) {
            (Some((m, c, _)), Some((sm, sc)), _, _) => {
                ("rts_smooth_soa", m.ptr(), c.ptr(), sm.ptr(), sc.ptr())
            }
            (_, _, Some(a), Some(b)) => (
                "rts_smooth",
                self.mean.ptr(),
                self.cov.ptr(),
                a.ptr(),
                b.ptr(),
            ),
            _ => (
                "rts_smooth",
                self.mean.ptr(),
                self.cov.ptr(),
                self.mean.ptr(),
                self.cov.ptr(),
            ),
        };
        let (grid, blk) = (grid_for(nb, BLOCK), (BLOCK, 1, 1));
        let (mp, err) = (Arg::Bytes(as_bytes(params)), &self.err);
        let (mean_in, cov_in, mean_out, cov_out) = (&Addr(im), &Addr(ic), &Addr(om), &Addr(oc));
        let (nb, steps) = (nb as i32, sh.steps as i32);
        let run = Smoothing {
            mp,
            mean_in,
            cov_in,
            mean_out,
            cov_out,
            nb,
            steps,
            err,
        };
        match u {
            // With per-track control inputs: the kernel that reads them.
            Some(u) => {
                let name = if name == "rts_smooth" {
                    "rts_smooth_in"
                } else {
                    "rts_smooth_soa_in"
                };
                let u = &Addr(u);
                launch(&self.stream, k, name, grid, blk, &RtsSmoothIn { run, u })
            }
            None => launch(&self.stream, k, name, grid, blk, &RtsSmooth { run }),
        }
    }

    /// Reads the error flag (synchronising the slot's stream) and names the failure:
    /// `code = track_in_chunk * steps + step`, tracks offset by `first`.
    pub fn check_err(&self, first: usize, what: &'static str) -> Result<()> {
        let mut v = [0u64; 2];
        crate::cuda::dtoh(
            &self.stream,
            &self.err,
            0,
            &mut v,
            "reading the error flags",
        )?;
        crate::cuda::sync(&self.stream, "waiting for the kernels")?;
        if v[1] != u64::MAX {
            // An infinite measurement (only arrays already on the device get here).
            let (t, ny) = (self.shape.steps as u64, self.shape.ny as u64);
            let (i, j) = (v[1] / ny, v[1] % ny);
            return Err(Error::input(format!(
                "track {}, step {}: measurement component z{j} is infinite",
                first + (i / t) as usize,
                i % t
            )));
        }
        if v[0] != u64::MAX {
            let t = self.shape.steps as u64;
            return Err(Error::NotPositiveDefinite {
                track: first + (v[0] / t) as usize,
                step: (v[0] % t) as usize,
                what,
            });
        }
        Ok(())
    }
}

/// Enqueues `soa_to_host` from `src` (`comps` rows per step) to `dst` (`out` values per
/// step: `comps`, or `nx * nx` for a packed covariance unpacked) for `nb` tracks and
/// `steps` steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn transpose<T: Real>(
    stream: &CudaStream,
    k: &Module,
    src: &DevBuf<T>,
    dst: &DevBuf<T>,
    nb: usize,
    steps: usize,
    comps: usize,
    out: usize,
) -> Result<()> {
    let is_cov = out != comps;
    let cols = steps * out;
    let gy = cols.div_ceil(32).clamp(1, 65535) as u32;
    launch(
        stream,
        k,
        "soa_to_host",
        (nb.div_ceil(32) as u32, gy, 1),
        (32, 8, 1),
        &SoaToHost {
            r#in: src,
            out: dst,
            nb: nb as i32,
            steps: steps as i32,
            c: comps as i32,
            is_cov: i32::from(is_cov),
        },
    )
}

/// Per-track inputs in the working precision, `[tracks][..]` each: prior means, prior
/// covariances, control inputs, measurement offsets, measurement noise covariances.
pub(crate) struct HostInputs<T> {
    pub parts: [Option<Vec<T>>; 5],
}

impl<T: Real> HostInputs<T> {
    /// `inputs` converted (sampling intervals are not taken here: the caller refuses
    /// them first).
    pub fn new(inputs: &crate::kalman::TrackInputs<'_>) -> Self {
        let conv = |v: Option<&[f64]>| v.map(|v| v.iter().map(|x| T::of(*x)).collect());
        HostInputs {
            parts: [
                conv(inputs.x0),
                conv(inputs.p0),
                conv(inputs.u),
                conv(inputs.d),
                conv(inputs.r),
            ],
        }
    }

    pub fn set(&self) -> InputSet {
        InputSet {
            prior: self.parts[0].is_some(),
            u: self.parts[2].is_some(),
            d: self.parts[3].is_some(),
            r: self.parts[4].is_some(),
        }
    }

    fn all(&self) -> impl Iterator<Item = Option<&[T]>> {
        self.parts.iter().map(|p| p.as_deref())
    }
}

/// The options' memory budget, or 80% of the usable device memory.
pub(crate) fn budget(gpu: &Gpu, opts: &CudaOptions) -> Result<usize> {
    match opts.memory_budget {
        Some(b) => Ok(b),
        None => Ok(gpu.usable_memory()? / 10 * 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_per_track_counts_every_buffer() {
        let sh = Shape {
            nx: 4,
            ny: 2,
            steps: 10,
            kept: 10,
            last: false,
            predicted: false,
            layout: OutputLayout::Host,
            smoothed: false,
            inputs: InputSet::default(),
        };
        // z 20 + mean 40 + cov 160 + ll 10 values.
        assert_eq!(sh.bytes_per_track(4), 230 * 4);
        let soa = Shape {
            layout: OutputLayout::Soa,
            ..sh
        };
        assert_eq!(soa.bytes_per_track(4), (230 + 10 * (4 + 10 + 1)) * 4);
    }
}
