//! Copies between pageable host memory (the caller's `Vec`s) and the device through two
//! page-locked staging buffers: while the copy engine moves one piece, the CPU threads
//! (rayon) move the previous piece between the staging buffer and the caller's memory.
//! A plain copy from pageable memory is staged by the driver on one thread, and the
//! first touch of freshly allocated output pages makes it slower still; here both
//! happen on every core, beside the DMA.

use super::gpu::{check_span, ck, DevBuf, Gpu, Pinned};
use crate::error::{Error, Result};
use crate::linalg::Real;
use cudarc::driver::{result as cu, CudaEvent, CudaStream};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes per staging buffer.
const STAGE_BYTES: usize = 64 << 20;
/// Values per parallel host copy task.
const TASK: usize = 1 << 16;

/// Two page-locked buffers and the events that say when the device is done with them.
pub(crate) struct Staging {
    bufs: [Pinned<f64>; 2],
    done: [CudaEvent; 2],
}

impl Staging {
    pub fn new(gpu: &Gpu) -> Result<Staging> {
        let n = STAGE_BYTES / 8;
        let ev = || ck(gpu.ctx.new_event(None), "creating an event");
        Ok(Staging {
            bufs: [Pinned::new(gpu, n)?, Pinned::new(gpu, n)?],
            done: [ev()?, ev()?],
        })
    }

    /// Buffer `i` seen as `len` values of `T` (`len * size_of::<T>() <= STAGE_BYTES`).
    fn view<T: Real>(&mut self, i: usize, len: usize) -> &mut [T] {
        let b = self.bufs[i].as_mut_slice();
        debug_assert!(len * std::mem::size_of::<T>() <= std::mem::size_of_val(b));
        // SAFETY: the buffer is page-aligned, holds STAGE_BYTES initialised bytes, and
        // f32/f64 accept any bit pattern; `len` fits (callers cut pieces to size).
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut T, len) }
    }
}

fn par_copy<T: Real>(dst: &mut [T], src: &[T]) {
    dst.par_chunks_mut(TASK)
        .zip(src.par_chunks(TASK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The staging buffers of `gpu`, made on first use (one pair per device, shared by its
/// callers in turn).
fn staging(gpu: &Gpu) -> Result<Arc<Mutex<Staging>>> {
    static REG: OnceLock<Mutex<HashMap<usize, Arc<Mutex<Staging>>>>> = OnceLock::new();
    let mut reg = REG
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .map_err(|_| Error::Cuda("staging registry poisoned".into()))?;
    if let Some(s) = reg.get(&gpu.ordinal) {
        return Ok(s.clone());
    }
    let s = Arc::new(Mutex::new(Staging::new(gpu)?));
    reg.insert(gpu.ordinal, s.clone());
    Ok(s)
}

/// Copies `src` to `dst` at element offset `at` on `stream`. Returns once the last piece
/// is queued; the stream orders the copies before later work.
pub(crate) fn upload<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &[T],
    dst: &DevBuf<T>,
    at: usize,
    what: &str,
) -> Result<()> {
    check_span(dst.len(), at, src.len(), what)?;
    let staged = staging(gpu)?;
    let mut guard = staged
        .lock()
        .map_err(|_| Error::Cuda("staging buffers poisoned".into()))?;
    let st = &mut *guard;
    let per = STAGE_BYTES / std::mem::size_of::<T>();
    for (i, piece) in src.chunks(per).enumerate() {
        let s = i % 2;
        ck(st.done[s].synchronize(), what)?;
        let buf = st.view::<T>(s, piece.len());
        par_copy(buf, piece);
        // SAFETY: bounds checked above; the pinned buffer stays untouched until the
        // event recorded after the copy has passed.
        ck(
            unsafe { cu::memcpy_htod_async(dst.at(at + i * per), buf, stream.cu_stream()) },
            what,
        )?;
        ck(st.done[s].record(stream), what)?;
    }
    Ok(())
}

/// Copies `dst.len()` values from `src` at element offset `at` on `stream` into `dst`;
/// returns when they are there.
pub(crate) fn download<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &DevBuf<T>,
    at: usize,
    dst: &mut [T],
    what: &str,
) -> Result<()> {
    check_span(src.len(), at, dst.len(), what)?;
    let staged = staging(gpu)?;
    let mut guard = staged
        .lock()
        .map_err(|_| Error::Cuda("staging buffers poisoned".into()))?;
    let st = &mut *guard;
    let per = STAGE_BYTES / std::mem::size_of::<T>();
    let mut pieces: Vec<&mut [T]> = dst.chunks_mut(per).collect();
    let n = pieces.len();
    for i in 0..=n {
        if i < n {
            let s = i % 2;
            // An upload on another stream may still be reading this buffer.
            ck(st.done[s].synchronize(), what)?;
            let len = pieces[i].len();
            let buf = st.view::<T>(s, len);
            // SAFETY: bounds checked above; the buffer is read only after the event.
            ck(
                unsafe { cu::memcpy_dtoh_async(buf, src.at(at + i * per), stream.cu_stream()) },
                what,
            )?;
            ck(st.done[s].record(stream), what)?;
        }
        if i >= 1 {
            let p = (i - 1) % 2;
            ck(st.done[p].synchronize(), what)?;
            let len = pieces[i - 1].len();
            let buf = st.view::<T>(p, len);
            par_copy(&mut *pieces[i - 1], buf);
        }
    }
    Ok(())
}
