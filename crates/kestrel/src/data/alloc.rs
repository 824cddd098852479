//! Large output buffers, allocated so that first touch is cheap.
//!
//! A batch's estimates run to gigabytes (10^5 tracks x 100 steps x 21 values x 8 bytes
//! is 1.7 GB). Touching fresh memory page by page costs as much as the filter itself on
//! a small machine: one fault per 4 KiB page, each zeroing its page. So large buffers
//! ask the kernel for transparent huge pages (one fault per 2 MiB; a no-op where the
//! kernel has them off), and are filled in parallel so that both the faults and the fill
//! are spread over all cores.

use crate::error::{Error, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Below this many bytes a buffer is filled the plain way.
const LARGE: usize = 8 << 20;

/// A vector of `n` copies of `value`, its pages all written now (huge pages asked for
/// from 2 MiB, the fill in parallel from [`LARGE`]). Also for working buffers that a
/// loop reads before it writes them: a fresh page first read maps the shared zero page,
/// and the write that follows costs a second fault and a TLB shootdown on every core
/// (`vec![0.0; n]` leaves its pages fresh).
pub(crate) fn filled<T: Copy + Send + Sync>(n: usize, value: T) -> Vec<T> {
    try_filled("a buffer", n, value).unwrap_or_else(|_| {
        // The infallible form keeps the standard library's behaviour on refusal.
        std::alloc::handle_alloc_error(
            std::alloc::Layout::array::<T>(n).unwrap_or(std::alloc::Layout::new::<T>()),
        )
    })
}

/// The allocation of `n` elements through `try_reserve_exact`: an allocator refusal
/// (an address space limited by `ulimit -v`, overcommit off) is an [`Error::TooLarge`]
/// naming `what`, never an abort.
pub(crate) fn reserve<T>(what: &str, n: usize) -> Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::TooLarge {
        what: what.to_string(),
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
        limit: "more than the allocator could give".into(),
    })?;
    Ok(v)
}

/// [`filled`] through [`reserve`]: an allocator refusal is an error.
pub(crate) fn try_filled<T: Copy + Send + Sync>(what: &str, n: usize, value: T) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let mut v: Vec<T> = reserve(what, n)?;
    if bytes >= HUGE {
        advise_huge_pages(v.as_mut_ptr() as usize, bytes);
    }
    let spare = &mut v.spare_capacity_mut()[..n];
    if bytes >= LARGE {
        spare
            .par_chunks_mut(1 << 16)
            .for_each(|c| c.fill(MaybeUninit::new(value)));
    } else {
        spare.fill(MaybeUninit::new(value));
    }
    // SAFETY: the first `n` elements were just initialised, and `n <= capacity`.
    unsafe { v.set_len(n) };
    Ok(v)
}

/// A vector of `n` zeros straight from the allocator (fresh, untouched pages for large
/// sizes: no fill pass; the pages are faulted in, as huge pages where possible, by
/// whoever writes them first). For outputs that a path writes completely.
pub(crate) fn zeroed<T: crate::linalg::Real>(n: usize) -> Vec<T> {
    try_zeroed("a buffer", n).unwrap_or_else(|_| {
        std::alloc::handle_alloc_error(
            std::alloc::Layout::array::<T>(n).unwrap_or(std::alloc::Layout::new::<T>()),
        )
    })
}

/// [`zeroed`] through [`reserve`]: an allocator refusal is an error.
pub(crate) fn try_zeroed<T: crate::linalg::Real>(what: &str, n: usize) -> Result<Vec<T>> {
    let refused = || Error::TooLarge {
        what: what.to_string(),
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
        limit: "more than the allocator could give".into(),
    };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| refused())?;
    let mut v: Vec<T> = if layout.size() == 0 {
        vec![T::zero(); n]
    } else {
        // SAFETY: a non-zero layout of `n` elements of `T`; zeroed memory (as calloc
        // gives it: fresh pages untouched) is `n` valid zeros of f32 / f64, the only
        // `Real`s; the vector takes the allocation with the same layout.
        unsafe {
            let p = std::alloc::alloc_zeroed(layout) as *mut T;
            if p.is_null() {
                return Err(refused());
            }
            Vec::from_raw_parts(p, n, n)
        }
    };
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if bytes >= LARGE {
        advise_huge_pages(v.as_mut_ptr() as usize, bytes);
    }
    Ok(v)
}

/// A copy of a large slice, written in parallel into fresh (huge-page) memory.
pub(crate) fn copied<T: crate::linalg::Real>(src: &[T]) -> Vec<T> {
    let mut v = zeroed(src.len());
    v.par_chunks_mut(1 << 16)
        .zip(src.par_chunks(1 << 16))
        .for_each(|(d, s)| d.copy_from_slice(s));
    v
}

/// A transparent huge page.
const HUGE: usize = 2 << 20;

#[cfg(target_os = "linux")]
fn advise_huge_pages(addr: usize, bytes: usize) {
    let start = (addr + HUGE - 1) & !(HUGE - 1);
    let end = (addr + bytes) & !(HUGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation this process owns and has not
        // touched yet; MADV_HUGEPAGE only changes how its pages are backed, never their
        // contents, and failure (e.g. THP disabled) is harmless, so the result is ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_addr: usize, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn large_and_small_buffers_are_filled() {
        let v = super::filled(3 << 20, 1.5f64);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|x| *x == 1.5));
        let w = super::filled(10, f32::NAN);
        assert!(w.iter().all(|x| x.is_nan()) && w.len() == 10);
        for n in [0, 7, (2 << 20) / 8 + 3, (8 << 20) / 8 + 5] {
            let v = super::filled(n, -2.0f64);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|x| *x == -2.0));
        }
    }
}
