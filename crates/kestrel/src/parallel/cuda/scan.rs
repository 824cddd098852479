//! The associative scans on the device: every algorithm of `ScanAlgorithm` over a batch
//! of sequences in the same launches, and the chunked scan (`Fastest`).

use super::{chunk_len, cu, Gpu, GpuReal, Kernels};
use crate::error::Result;
use crate::scan::ScanAlgorithm;
use cudarc::driver::CudaSlice;

/// A device buffer of `n` (at least 1) scalars, uninitialised.
pub(super) fn alloc<D: GpuReal>(g: &Gpu, n: usize, what: &str) -> Result<CudaSlice<D>> {
    // SAFETY: every buffer is written by a kernel before it is read (outputs are
    // poisoned first where a test must see unwritten values).
    cu(
        unsafe { g.stream.alloc::<D>(n.max(1)) },
        &format!("allocating {what}"),
    )
}

/// Scans each of the `nb` sequences of `n` elements of `len` scalars in `a` (stored one
/// after the other) with the operator `op` (`"pf"`: filtering, `"ps"`: smoothing),
/// forward or in reverse: all sequences in the same launches (the sequence is the grid's
/// second dimension), so that a batch costs the launches of one sequence.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan<D: GpuReal>(
    g: &Gpu,
    k: &Kernels,
    op: &str,
    len: usize,
    a: &mut CudaSlice<D>,
    n: usize,
    nb: usize,
    alg: ScanAlgorithm,
    reverse: bool,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let s = &g.stream;
    let rev = i32::from(reverse);
    let nn = n as i64;
    let name = |x: &str| format!("{op}_{x}");
    let levels = n.next_power_of_two().trailing_zeros();
    match alg {
        ScanAlgorithm::Sequential => {
            launch!(k, s, &name("seq"), (1, nb), [&mut *a, &nn, &rev, &rev])
        }
        ScanAlgorithm::LadnerFischer => {
            for d in 0..levels {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    (n.div_ceil(2 << d), nb),
                    [&mut *a, &nn, &st, &rev, &rev]
                );
            }
            for d in (0..levels).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("lf_down"),
                    (n.div_ceil(2 << d), nb),
                    [&mut *a, &nn, &st, &rev, &rev]
                );
            }
        }
        ScanAlgorithm::HillisSteele => {
            let mut other = alloc::<D>(g, nb * n * len, "the Hillis-Steele buffer")?;
            let mut st = 1i64;
            while (st as usize) < n {
                launch!(
                    k,
                    s,
                    &name("hs"),
                    (n, nb),
                    [&*a, &mut other, &nn, &st, &rev, &rev]
                );
                std::mem::swap(a, &mut other);
                st *= 2;
            }
        }
        ScanAlgorithm::Blelloch => {
            let p = n.next_power_of_two();
            let pp = p as i64;
            let mut w = alloc::<D>(g, nb * p * len, "the Blelloch buffer")?;
            let mut orig = alloc::<D>(g, nb * p * len, "the Blelloch input copy")?;
            launch!(
                k,
                s,
                &name("bl_load"),
                (p, nb),
                [&*a, &nn, &mut w, &mut orig, &pp, &rev]
            );
            let zero = 0i32;
            for d in 0..levels {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    (p.div_ceil(2 << d), nb),
                    [&mut w, &pp, &st, &rev, &zero]
                );
            }
            launch!(k, s, &name("bl_clear_last"), (1, nb), [&mut w, &pp]);
            for d in (0..levels).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("bl_down"),
                    (p.div_ceil(2 << d), nb),
                    [&mut w, &pp, &st, &rev]
                );
            }
            launch!(
                k,
                s,
                &name("bl_fix"),
                (n, nb),
                [&w, &orig, &mut *a, &nn, &rev, &rev]
            );
        }
        ScanAlgorithm::Fastest => chunked(g, k, op, len, a, n, nb, rev, rev)?,
        ScanAlgorithm::Sengupta(big_n) => {
            // Pair reductions (up-sweep levels) until at most 2N block totals remain,
            // Hillis-Steele over those, then the down-sweep of the same levels.
            let big_n = big_n.max(1);
            let mut lv = 0u32;
            while (n >> lv) > 2 * big_n {
                lv += 1;
            }
            for d in 0..lv {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("up"),
                    (n.div_ceil(2 << d), nb),
                    [&mut *a, &nn, &st, &rev, &rev]
                );
            }
            let stride = 1i64 << lv;
            let cnt = (n >> lv) as i64;
            let mut other = alloc::<D>(g, nb * n * len, "the Sengupta buffer")?;
            let mut in_a = true;
            let mut st = 1i64;
            while st < cnt {
                if in_a {
                    launch!(
                        k,
                        s,
                        &name("hs_strided"),
                        (cnt as usize, nb),
                        [&*a, &mut other, &nn, &stride, &cnt, &st, &rev, &rev]
                    );
                } else {
                    launch!(
                        k,
                        s,
                        &name("hs_strided"),
                        (cnt as usize, nb),
                        [&other, &mut *a, &nn, &stride, &cnt, &st, &rev, &rev]
                    );
                }
                in_a = !in_a;
                st *= 2;
            }
            if !in_a {
                launch!(
                    k,
                    s,
                    &name("hs_strided"),
                    (cnt as usize, nb),
                    [&other, &mut *a, &nn, &stride, &cnt, &cnt, &rev, &rev]
                );
            }
            for d in (0..lv).rev() {
                let st = 1i64 << d;
                launch!(
                    k,
                    s,
                    &name("lf_down"),
                    (n.div_ceil(2 << d), nb),
                    [&mut *a, &nn, &st, &rev, &rev]
                );
            }
        }
    }
    Ok(())
}

/// The chunked scan: chunks scanned by a warp each (32 elements) or by one thread each (`K`;
/// by the number of elements, `warp_scan`), the chunk totals scanned recursively, then
/// every element after the first chunk fixed up with its prefix.
#[allow(clippy::too_many_arguments)]
fn chunked<D: GpuReal>(
    g: &Gpu,
    k: &Kernels,
    op: &str,
    len: usize,
    a: &mut CudaSlice<D>,
    n: usize,
    nb: usize,
    flip: i32,
    ridx: i32,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let s = &g.stream;
    let warp = super::warp_scan(n * nb);
    let kk = if warp { 32 } else { chunk_len() };
    let nc = n.div_ceil(kk);
    let mut carry = alloc::<D>(g, nb * nc * len, "the chunk totals")?;
    let (nn, k32) = (n as i64, kk as i32);
    if warp {
        launch!(
            k,
            s,
            &format!("{op}_warp"),
            (nc * 32, nb),
            [&mut *a, &nn, &mut carry, &flip, &ridx]
        );
    } else {
        launch!(
            k,
            s,
            &format!("{op}_chunk"),
            (nc, nb),
            [&mut *a, &nn, &k32, &mut carry, &flip, &ridx]
        );
    }
    chunked(g, k, op, len, &mut carry, nc, nb, flip, 0)?;
    if n > kk {
        launch!(
            k,
            s,
            &format!("{op}_fix"),
            (n - kk, nb),
            [&mut *a, &nn, &k32, &carry, &flip, &ridx]
        );
    }
    Ok(())
}
