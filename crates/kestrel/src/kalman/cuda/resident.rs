//! The batched filter and RTS smoother on arrays that already live on the GPU (a
//! caller's PyTorch or CuPy arrays, through DLPack): the kernels read the measurements
//! in place and the layout conversion writes each output asked for straight into the
//! caller's buffer, so nothing crosses the bus and no output is copied twice. Only the
//! kernels' structure-of-arrays scratch is allocated here (in chunks of tracks when it
//! does not fit the memory budget), once per device and kept between calls
//! ([`release_scratch`] frees it).

use super::slot::{budget, transpose, Shape, Slot};
use super::source::{kernels, model_params, Part};
use super::{CudaOptions, OutputLayout};
use crate::cuda::{catch, gpu, plan, DevBuf};
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;

/// A batch in device memory: the measurements `[tracks][steps][ny]` and the outputs
/// wanted (`None`: not computed into any caller buffer), all C-contiguous arrays of the
/// run's scalar type on one device. The means are `[tracks][steps][nx]`, the
/// covariances `[tracks][steps][nx][nx]`, the log-likelihoods `[tracks][steps]`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceArrays {
    /// Device address of the measurements.
    pub z: u64,
    /// Tracks, B.
    pub tracks: usize,
    /// Steps, T.
    pub steps: usize,
    /// Components per measurement.
    pub ny: usize,
    /// Device address of the means to write.
    pub mean: Option<u64>,
    /// Device address of the covariances to write.
    pub cov: Option<u64>,
    /// Device address of the per-step log-likelihoods to write (a smoother's are its
    /// filter's).
    pub loglik: Option<u64>,
}

/// Runs the batched filter (or, with `smooth`, the filter and RTS smoother) of `model`
/// on GPU `ordinal` over `a`, writing the outputs asked for into the caller's buffers;
/// returns when they are written. Same numbers as [`super::filter`] / [`super::smooth`]:
/// the same kernels. An infinite measurement is refused as the host path refuses it
/// (track, step and component of the first), found by the filter kernel in the pass
/// that reads the measurements; NaN marks a missing step as everywhere.
///
/// # Safety
/// Every address in `a` must point to device memory of GPU `ordinal`'s primary context
/// holding at least the values its shape says, the outputs writable and not aliasing
/// the measurements or each other, none of it used by other work until this returns.
pub unsafe fn estimate_resident<T: Real>(
    ordinal: usize,
    model: &Model,
    a: &DeviceArrays,
    smooth: bool,
    copts: &CudaOptions,
) -> Result<()> {
    crate::model::check_fits(model, a.ny, a.steps)?;
    if a.tracks == 0 || a.steps == 0 {
        return Err(Error::Input {
            msg: format!(
                "no measurements ({})",
                crate::data::shape(a.tracks, a.steps)
            ),
        });
    }
    if a.steps > i32::MAX as usize / 2 {
        return Err(Error::Unsupported(format!(
            "{} steps exceed the CUDA kernels' limit",
            a.steps
        )));
    }
    // SAFETY: the caller's contract, passed on.
    catch(|| unsafe { run::<T>(ordinal, model, a, smooth, copts) })
}

unsafe fn run<T: Real>(
    ordinal: usize,
    model: &Model,
    a: &DeviceArrays,
    smooth: bool,
    copts: &CudaOptions,
) -> Result<()> {
    let g = gpu(ordinal)?;
    g.bind()?;
    let k = kernels::<T>(&g, model, copts.bake_model, Part::Filter)?;
    let ks = if smooth {
        Some(kernels::<T>(&g, model, copts.bake_model, Part::Smooth)?)
    } else {
        None
    };
    let params = model_params::<T>(model);
    let (nx, ny, t) = (model.nx(), a.ny, a.steps);
    let shape = Shape {
        nx,
        ny,
        steps: t,
        kept: t,
        last: false,
        predicted: false,
        layout: OutputLayout::Soa,
        smoothed: smooth,
        inputs: Default::default(),
    };
    let np = shape.np();
    // Scratch a track: the filter's SoA outputs, and the smoother's.
    let per = t * (nx + np + 1 + if smooth { nx + np } else { 0 }) * std::mem::size_of::<T>();
    let (cap, _) = plan(a.tracks, per, budget(&g, copts)?, i32::MAX as usize / 2);
    // The scratch comes from the device's arena (kept between calls: allocating and
    // freeing gigabytes with cuMemAlloc / cuMemFree each call costs as much as the
    // kernels), held locked for the call.
    let sizes = [
        cap * t * nx,
        cap * t * np,
        cap * t,
        if smooth { cap * t * nx } else { 0 },
        if smooth { cap * t * np } else { 0 },
    ];
    let mut arena = scratch(ordinal)?;
    // Each buffer at a 256-byte boundary (as cuMemAlloc would place it), then the two
    // error flags (u64) at `flag`.
    let mut offsets = [0usize; 5];
    let mut end = 0usize;
    for (o, n) in offsets.iter_mut().zip(sizes) {
        *o = end;
        end = (end + n * std::mem::size_of::<T>()).div_ceil(256) * 256;
    }
    let flag = end;
    let total = flag + 16;
    if arena.as_ref().is_none_or(|b| b.len() < total) {
        *arena = None;
        *arena = Some(DevBuf::<u8>::new(&g, total, "the filter's scratch")?);
    }
    let base = arena.as_ref().expect("allocated above").ptr();
    // SAFETY: buffer `i` lies inside the arena's allocation (sized to `total` above),
    // apart from every other.
    let buf = |i: usize| unsafe { DevBuf::<T>::borrowed(&g, base + offsets[i] as u64, sizes[i]) };
    // SAFETY (every `borrowed` below): addresses and extents from the caller's contract;
    // a null placeholder stands where an output is not wanted and is never touched.
    let none = || unsafe { DevBuf::<T>::borrowed(&g, 0, 0) };
    let mut slot = Slot {
        cap,
        shape,
        z: none(),
        mean: none(),
        cov: none(),
        ll: none(),
        pmean: None,
        pcov: None,
        soa: Some((buf(0), buf(1), buf(2))),
        smean: None,
        scov: None,
        ssoa: if smooth { Some((buf(3), buf(4))) } else { None },
        // SAFETY: the arena's last 16 bytes, aligned, apart from the values.
        err: unsafe { DevBuf::<u64>::borrowed(&g, base + flag as u64, 2) },
        inputs: Default::default(),
        input_scratch: None,
        stream: g.stream.clone(),
    };
    let size = std::mem::size_of::<T>() as u64;
    let at = |base: u64, start: usize, per_track: usize, nb: usize| unsafe {
        DevBuf::<T>::borrowed(&g, base + (start * per_track) as u64 * size, nb * per_track)
    };
    let mut start = 0;
    while start < a.tracks {
        let nb = cap.min(a.tracks - start);
        slot.z = at(a.z, start, t * ny, nb);
        let mean = a.mean.map(|p| at(p, start, t * nx, nb));
        let cov = a.cov.map(|p| at(p, start, t * nx * nx, nb));
        let ll = a.loglik.map(|p| at(p, start, t, nb));
        if copts.poison {
            slot.poison()?;
            for b in [&mean, &cov, &ll].into_iter().flatten() {
                b.poison(&slot.stream)?;
            }
        }
        slot.clear_err()?;
        slot.filter(&k, &params, nb)?;
        slot.check_err(start, "innovation covariance S")?;
        let (sm, sc, sl) = slot.soa.as_ref().expect("allocated above");
        if let Some(ll) = &ll {
            transpose(&slot.stream, &k, sl, ll, nb, t, 1, 1)?;
        }
        let (src_m, src_c, kt) = match (&ks, &slot.ssoa) {
            (Some(ks), Some((m, c))) => {
                slot.smooth(ks, &params, nb)?;
                slot.check_err(start, "predicted covariance P(k+1|k) in the smoother")?;
                (m, c, &**ks)
            }
            _ => (sm, sc, &*k),
        };
        if let Some(mean) = &mean {
            transpose(&slot.stream, kt, src_m, mean, nb, t, nx, nx)?;
        }
        if let Some(cov) = &cov {
            transpose(&slot.stream, kt, src_c, cov, nb, t, np, nx * nx)?;
        }
        crate::cuda::sync(&slot.stream, "writing the outputs")?;
        start += nb;
    }
    Ok(())
}

type Slot8 = std::sync::Mutex<Option<DevBuf<u8>>>;
type Arena = std::sync::MutexGuard<'static, Option<DevBuf<u8>>>;

/// The scratch arena of device `ordinal`, locked (calls on one device take turns).
fn scratch(ordinal: usize) -> Result<Arena> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ARENAS: OnceLock<Mutex<HashMap<usize, &'static Slot8>>> = OnceLock::new();
    let m = {
        let mut all = ARENAS
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .map_err(|_| Error::Cuda("the scratch registry is poisoned".into()))?;
        *all.entry(ordinal)
            .or_insert_with(|| Box::leak(Box::new(Mutex::new(None))))
    };
    Ok(m.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Frees the scratch that [`estimate_resident`] keeps on device `ordinal` between calls
/// (the size of the largest batch run there); the next call allocates it again.
pub fn release_scratch(ordinal: usize) -> Result<()> {
    *scratch(ordinal)? = None;
    Ok(())
}
