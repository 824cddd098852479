//! Copies between pageable host memory (the caller's `Vec`s) and the device.
//!
//! Small copies go through two page-locked staging buffers: while the copy engine moves
//! one piece, the CPU threads (rayon) move the previous piece between the staging buffer
//! and the caller's memory. A plain copy from pageable memory is staged by the driver on
//! one thread, and the first touch of freshly allocated output pages makes it slower
//! still; here both happen on every core, beside the DMA.
//!
//! Large downloads skip the second copy: the caller's memory itself is page-locked
//! (`cuMemHostRegister`) piece by piece and the copy engine writes straight into it.
//! Registering fresh pages would fault them in on one thread inside the driver, so each
//! piece is first touched on every core; the touch and registration of piece k+1 run
//! while the DMA of piece k is in flight, so the bus stays busy. A piece the driver
//! refuses to register goes through the staging buffers instead.

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
/// Address alignment and size unit of a directly registered piece (a huge page, so that
/// two pieces never share a page).
const ALIGN: usize = 2 << 20;
/// Bytes per directly registered piece.
const PIECE: usize = 64 << 20;
/// Copies of fewer bytes than this use the staging buffers only.
const DIRECT_MIN: usize = 2 * PIECE;

/// Whether a copy of `bytes` goes through the staging buffers only: a small one, or any
/// with KESTREL_STAGED_COPIES set.
fn staged_only(bytes: usize) -> bool {
    bytes < DIRECT_MIN || std::env::var_os("KESTREL_STAGED_COPIES").is_some()
}

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

/// `(h, m)`: the values before the first `ALIGN` boundary of `v` and those between it
/// and the last (the part copied straight from or into the caller's memory).
fn page_aligned<T>(v: &[T]) -> (usize, usize) {
    let sz = std::mem::size_of::<T>();
    let base = v.as_ptr() as usize;
    let a0 = base.next_multiple_of(ALIGN);
    let a1 = (base + std::mem::size_of_val(v)) / ALIGN * ALIGN;
    ((a0 - base) / sz, (a1 - a0) / sz)
}

/// Copies `src` to `dst` at element offset `at` on `stream`. Small copies return once
/// the last piece is queued (the stream orders them before later work); large ones, made
/// straight from the caller's registered memory, return when they are done.
pub(crate) fn upload<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &[T],
    dst: &DevBuf<T>,
    at: usize,
    what: &str,
) -> Result<()> {
    check_span(dst.len(), at, src.len(), what)?;
    if staged_only(std::mem::size_of_val(src)) {
        return upload_staged(gpu, stream, src, dst, at, what);
    }
    let (h, m) = page_aligned(src);
    let (head, rest) = src.split_at(h);
    let (mid, tail) = rest.split_at(m);
    upload_staged(gpu, stream, head, dst, at, what)?;
    upload_staged(gpu, stream, tail, dst, at + h + m, what)?;
    gpu.bind()?;
    let per = PIECE / std::mem::size_of::<T>();
    let mut held = Vec::new();
    let mut r = Ok(());
    for (i, piece) in mid.chunks(per).enumerate() {
        let off = at + h + i * per;
        // SAFETY: live memory of this size, only read by the device; unregistered below
        // after the stream has passed the copies. Read-only registration first (the
        // memory may be a read-only map of the input file), then plain.
        let reg = unsafe {
            register(
                piece.as_ptr() as *mut std::ffi::c_void,
                std::mem::size_of_val(piece),
                &[cudarc::driver::sys::CU_MEMHOSTREGISTER_READ_ONLY, 0],
            )
        };
        let q = if let Some(g) = reg {
            held.push(g);
            // SAFETY: bounds checked above; registered until the stream has passed.
            ck(
                unsafe { cu::memcpy_htod_async(dst.at(off), piece, stream.cu_stream()) },
                what,
            )
        } else {
            upload_staged(gpu, stream, piece, dst, off, what)
        };
        if let Err(e) = q {
            r = Err(e);
            break;
        }
    }
    let w = ck(stream.synchronize(), what);
    drop(held);
    r.and(w)
}

/// [`upload`] through the staging buffers.
fn upload_staged<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &[T],
    dst: &DevBuf<T>,
    at: usize,
    what: &str,
) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    let staged = staging(gpu)?;
    let st = &mut *staged
        .lock()
        .map_err(|_| Error::Cuda("staging buffers poisoned".into()))?;
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
    if staged_only(std::mem::size_of_val(dst)) {
        return download_staged(gpu, stream, src, at, dst, what);
    }
    // The page-aligned middle goes straight into the caller's memory; the unaligned head
    // and tail (less than ALIGN bytes each) through the staging buffers.
    let (h, m) = page_aligned(dst);
    let (head, rest) = dst.split_at_mut(h);
    let (mid, tail) = rest.split_at_mut(m);
    download_staged(gpu, stream, src, at, head, what)?;
    download_direct(gpu, stream, src, at + h, mid, what)?;
    download_staged(gpu, stream, src, at + h + m, tail, what)
}

/// A registered piece of host memory, unregistered on drop.
struct Registered(*mut std::ffi::c_void);

// SAFETY: the pointer only names the registration; unregistering from another thread
// with the context bound is allowed.
unsafe impl Send for Registered {}

impl Drop for Registered {
    fn drop(&mut self) {
        // SAFETY: registered by `register` below and not yet unregistered.
        unsafe {
            let _ = cudarc::driver::sys::cuMemHostUnregister(self.0);
        }
    }
}

/// Touches every page of `piece` on every core (first-touch faults spread over threads).
fn touch<T: Real>(piece: &mut [T]) {
    let per_page = 4096 / std::mem::size_of::<T>();
    piece
        .par_chunks_mut(per_page * 64)
        .for_each(|c| c.iter_mut().step_by(per_page).for_each(|v| *v = T::zero()));
}

/// Page-locks the `n` bytes at `p` for the device (current context) with the first of
/// `flags` the driver accepts; `None` if it refuses them all.
///
/// # Safety
/// `p .. p + n` is live memory that stays so until the guard is dropped.
unsafe fn register(p: *mut std::ffi::c_void, n: usize, flags: &[u32]) -> Option<Registered> {
    use cudarc::driver::sys::{cuMemHostRegister_v2, CUresult::CUDA_SUCCESS};
    flags
        .iter()
        // SAFETY: as the caller promises.
        .any(|&f| unsafe { cuMemHostRegister_v2(p, n, f) } == CUDA_SUCCESS)
        .then_some(Registered(p))
}

/// Seconds spent in each part of direct downloads, printed with KESTREL_COPY_PROFILE=1.
struct Profile {
    on: bool,
    at: std::time::Instant,
    parts: [f64; 4],
}

impl Profile {
    fn new() -> Profile {
        Profile {
            on: std::env::var_os("KESTREL_COPY_PROFILE").is_some(),
            at: std::time::Instant::now(),
            parts: [0.0; 4],
        }
    }
    /// Adds the time since the last mark to part `i`.
    fn mark(&mut self, i: usize) {
        if self.on {
            let now = std::time::Instant::now();
            self.parts[i] += (now - self.at).as_secs_f64();
            self.at = now;
        }
    }
    fn report(&self, bytes: usize, mode: &str) {
        if self.on {
            let [t, r, w, u] = self.parts;
            eprintln!(
                "copy profile ({mode}): {:.1} MB: touch {:.1} ms, register {:.1} ms, wait {:.1} ms, unregister {:.1} ms",
                bytes as f64 / 1e6,
                t * 1e3,
                r * 1e3,
                w * 1e3,
                u * 1e3
            );
        }
    }
}

/// [`download`] of a page-aligned destination, piece by piece into registered memory.
fn download_direct<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &DevBuf<T>,
    at: usize,
    dst: &mut [T],
    what: &str,
) -> Result<()> {
    gpu.bind()?;
    let mut prof = Profile::new();
    let bytes = std::mem::size_of_val(dst);
    let per = PIECE / std::mem::size_of::<T>();
    // The pieces as raw parts: piece i+1 is touched on the pool while piece i is
    // registered, each by one task; they never overlap.
    let raw: Vec<(usize, usize)> = dst
        .chunks_mut(per)
        .map(|p| (p.as_mut_ptr() as usize, p.len()))
        .collect();
    let n = raw.len();
    let piece = |k: usize| -> &mut [T] {
        // SAFETY: disjoint pieces of `dst`, which is borrowed mutably for this whole call;
        // each piece is used by one task at a time (touch, then register, then the DMA).
        unsafe { std::slice::from_raw_parts_mut(raw[k].0 as *mut T, raw[k].1) }
    };
    let ev = || ck(gpu.ctx.new_event(None), "creating an event");
    let done = [ev()?, ev()?, ev()?];
    // Registered pieces whose copy may be in flight, oldest first.
    let mut held: std::collections::VecDeque<(usize, Option<Registered>)> =
        std::collections::VecDeque::new();
    let mut r = Ok(());
    touch(piece(0));
    prof.mark(0);
    for i in 0..n {
        // On one task: release piece i-2 once its copy is done, then register piece i
        // (the driver takes both calls one at a time); on the others: touch piece i+1.
        let old = if held.len() >= 2 {
            held.pop_front()
        } else {
            None
        };
        let (reg, ()) = rayon::join(
            || -> Result<Option<Registered>> {
                gpu.bind()?;
                if let Some((k, g)) = old {
                    ck(done[k % 3].synchronize(), what)?;
                    drop(g);
                }
                let p = piece(i);
                // SAFETY: `p` is live, owned memory of this size; it is unregistered (on
                // drop of the guard) before the borrow of `dst` ends.
                Ok(unsafe {
                    register(
                        p.as_mut_ptr() as *mut std::ffi::c_void,
                        std::mem::size_of_val(p),
                        &[0],
                    )
                })
            },
            || {
                if i + 1 < n {
                    touch(piece(i + 1));
                }
            },
        );
        prof.mark(1);
        let off = at + i * per;
        let q = match reg {
            Ok(Some(g)) => {
                // SAFETY: bounds checked by the caller; the memory stays registered and
                // borrowed until the event recorded after the copy has passed.
                let q = unsafe { cu::memcpy_dtoh_async(piece(i), src.at(off), stream.cu_stream()) };
                held.push_back((i, Some(g)));
                ck(q, what).and_then(|_| ck(done[i % 3].record(stream), what))
            }
            Ok(None) => download_staged(gpu, stream, src, off, piece(i), what),
            Err(e) => Err(e),
        };
        if let Err(e) = q {
            r = Err(e);
            break;
        }
    }
    // Wait for every copy before the registrations (and the borrow) end, on error too.
    let w = ck(stream.synchronize(), what);
    prof.mark(2);
    drop(held);
    prof.mark(3);
    prof.report(bytes, "pipelined pieces");
    r.and(w)
}

/// [`download`] through the staging buffers.
fn download_staged<T: Real>(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &DevBuf<T>,
    at: usize,
    dst: &mut [T],
    what: &str,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let staged = staging(gpu)?;
    let st = &mut *staged
        .lock()
        .map_err(|_| Error::Cuda("staging buffers poisoned".into()))?;
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
