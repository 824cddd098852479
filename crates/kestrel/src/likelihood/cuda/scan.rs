//! The exact method on the GPU (`kernels/scan.cu`): the per-step likelihoods by a
//! chunked scan of each track (the carry between chunks sequential), the companion form
//! where the model has it.

use super::params::{ScanCarryWarp, ScanFinal, ScanLocal};
use super::LAST_MS;
use crate::cuda::{catch, download, gpu, launch, upload, Addr, DevBuf, EventTimer};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;

/// The exact method's kernels' source (`kernels/scan.cu`).
pub const SCAN_SOURCE: &str = include_str!("../kernels/scan.cu");
/// The largest state the exact scan's kernels are compiled for (a thread holds one
/// state vector in registers, `scan_carry_warp` a matrix row a lane).
pub const SCAN_MAX_NX: usize = 32;
/// See [`SCAN_MAX_NX`].
pub const SCAN_MAX_NY: usize = 16;
/// Chunks a track is cut into, at most (the carry between chunks is sequential).
const SCAN_CHUNKS: usize = 4096;
/// Steps per chunk, at least.
const SCAN_MIN_LEN: usize = 64;

/// The exact scan's source with its compile-time constants.
pub fn scan_source(nx: usize, ny: usize, companion: bool, real: &str) -> String {
    format!(
        "#define REAL {}\n#define NX {nx}\n#define NY {ny}\n#define COMPANION {}\n{SCAN_SOURCE}",
        if real == "f32" { "float" } else { "double" },
        companion as i32
    )
}

/// The chunk length and the number of chunks of a track of `steps` steps.
pub fn scan_chunks(steps: usize) -> (usize, usize) {
    let len = steps.div_ceil(SCAN_CHUNKS).max(SCAN_MIN_LEN);
    (len, steps.div_ceil(len))
}

/// Whether `F` is a companion matrix (first row dense, ones on the subdiagonal).
pub fn is_companion(model: &Model) -> bool {
    super::super::exact::Structure::of(&model.f) == super::super::exact::Structure::Companion
}

/// The exact per-step log-likelihoods on GPU `ordinal`: the covariance recursion on the
/// host ([`super::schedule`]), the mean recursion as a chunked scan on the device.
pub(crate) fn exact<T: Real>(ordinal: usize, model: &Model, z: &Measurements<T>) -> Result<Vec<T>> {
    let (nx, ny) = (model.nx(), model.ny());
    if nx > SCAN_MAX_NX || ny > SCAN_MAX_NY {
        return Err(Error::Unsupported(format!(
            "the exact filter on cuda handles states up to {SCAN_MAX_NX} and measurements up to \
             {SCAN_MAX_NY} components (this model: {nx} and {ny}); use --device cpu"
        )));
    }
    let sched = super::super::schedule::Schedule::new(model, z)?;
    catch(|| run_scan(ordinal, model, z, &sched))
}

fn run_scan<T: Real>(
    ordinal: usize,
    model: &Model,
    z: &Measurements<T>,
    sched: &super::super::schedule::Schedule<T>,
) -> Result<Vec<T>> {
    let g = gpu(ordinal)?;
    let (nx, ny) = (model.nx(), model.ny());
    let module = g.module(
        "the exact scan",
        &scan_source(nx, ny, is_companion(model), T::NAME),
        &["scan_local", "scan_carry_warp", "scan_final"],
    )?;
    let st = &g.stream;
    let (b, steps) = (z.tracks, z.steps);
    let (len, chunks) = scan_chunks(steps);
    let conv = |v: &[f64]| -> Vec<T> { v.iter().map(|x| T::of(*x)).collect() };
    let mf = conv(model.f.transpose().as_slice());
    let mh = conv(model.h.transpose().as_slice());
    let (mu, md, mx0) = (
        conv(model.u.as_slice()),
        conv(model.d.as_slice()),
        conv(model.prior.x0.as_slice()),
    );
    let buf = |v: &[T], what: &str| DevBuf::from_slice(&g, st, v, what);
    let dz = DevBuf::<T>::new(&g, z.data.len().max(1), "measurements")?;
    upload(&g, st, &z.data, &dz, 0, "measurements")?;
    let dtable = buf(&sched.table, "gain table")?;
    let dindex = DevBuf::from_slice(&g, st, &sched.index, "gain index")?;
    let (df, du, dh, dd, dx0) = (
        buf(&mf, "model")?,
        buf(&mu, "model")?,
        buf(&mh, "model")?,
        buf(&md, "model")?,
        buf(&mx0, "model")?,
    );
    let per = b * chunks;
    let dm = DevBuf::<T>::new(&g, per * nx * nx, "chunk maps")?;
    let dv = DevBuf::<T>::new(&g, per * nx, "chunk maps")?;
    let dstart = DevBuf::<T>::new(&g, per * nx, "chunk starts")?;
    let dout = DevBuf::<T>::new(&g, b * steps, "log-likelihoods")?;
    for d in [&dm, &dv, &dstart, &dout] {
        d.poison(st)?;
    }
    let timer = EventTimer::new(&g)?;
    timer.start(st)?;
    // Tracks go in groups of at most 65535 (the grid's y dimension).
    let group = 65_535usize;
    let mut b0 = 0;
    while b0 < b {
        let nb = group.min(b - b0);
        let zoff = dz.at(b0 * steps * ny);
        let ioff = dindex.at(b0 * sched.stride);
        let (moff, voff, soff) = (
            dm.at(b0 * chunks * nx * nx),
            dv.at(b0 * chunks * nx),
            dstart.at(b0 * chunks * nx),
        );
        let (z, table, index, f, u, h, d) = (&Addr(zoff), &dtable, &Addr(ioff), &df, &du, &dh, &dd);
        let (istride, ilen, isteady) = (sched.stride as i64, sched.index_len as i64, sched.steady);
        let (steps, len, chunks) = (steps as i64, len as i64, chunks as i64);
        let (m, v, start) = (&Addr(moff), &Addr(voff), &Addr(soff));
        let threads = chunks as usize * (nx + 1);
        launch(
            st,
            &module,
            "scan_local",
            (threads.div_ceil(128) as u32, nb as u32, 1),
            (128, 1, 1),
            &ScanLocal {
                z,
                table,
                index,
                istride,
                ilen,
                isteady,
                f,
                u,
                h,
                d,
                steps,
                len,
                chunks,
                m,
                v,
            },
        )?;
        let x0 = &dx0;
        let tracks = nb as i64;
        let p = ScanCarryWarp {
            m,
            v,
            x0,
            chunks,
            tracks,
            start,
        };
        launch(
            st,
            &module,
            "scan_carry_warp",
            (nb as u32, 1, 1),
            (32, 1, 1),
            &p,
        )?;
        let out = &Addr(dout.at(b0 * steps as usize));
        launch(
            st,
            &module,
            "scan_final",
            ((chunks as usize).div_ceil(64) as u32, nb as u32, 1),
            (64, 1, 1),
            &ScanFinal {
                z,
                table,
                index,
                istride,
                ilen,
                isteady,
                f,
                u,
                h,
                d,
                steps,
                len,
                chunks,
                start,
                out,
            },
        )?;
        b0 += nb;
    }
    timer.stop(st)?;
    let ms = f64::from(timer.elapsed_ms()?);
    LAST_MS.with(|c| c.set(ms));
    let mut out = vec![T::zero(); b * steps];
    download(&g, st, &dout, 0, &mut out, "log-likelihoods")?;
    if let Some(i) = crate::data::first_where(&out, |v: T| v.is_nan_value()) {
        return Err(Error::Cuda(format!(
            "the exact scan left track {}, step {} unwritten (or not finite)",
            i / steps,
            i % steps
        )));
    }
    Ok(out)
}
