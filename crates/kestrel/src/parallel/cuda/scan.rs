//! The associative scans on the device: every algorithm of `ScanAlgorithm` over a batch
//! of sequences in the same launches, and the chunked scan (`Fastest`).

use super::{chunk_len, cu, Gpu, GpuReal, Kernels};
use crate::error::Result;
use crate::parallel::cuda::launch;
use crate::parallel::cuda::params::{
    BlClearLast, BlDown, BlFix, BlLoad, Chunk, Hs, HsStrided, Level, Seq, Warp,
};
use crate::scan::ScanAlgorithm;
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::Arc;

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
    let depth = n.next_power_of_two().trailing_zeros();
    match alg {
        ScanAlgorithm::Sequential => launch(
            k,
            s,
            &name("seq"),
            (1, nb),
            &Seq {
                a: &*a,
                n: nn,
                f: rev,
                r: rev,
            },
        )?,
        ScanAlgorithm::LadnerFischer => {
            levels(k, s, &name("up"), &*a, n, nb, 0..depth, rev, rev)?;
            levels(
                k,
                s,
                &name("lf_down"),
                &*a,
                n,
                nb,
                (0..depth).rev(),
                rev,
                rev,
            )?;
        }
        ScanAlgorithm::HillisSteele => {
            let mut other = alloc::<D>(g, nb * n * len, "the Hillis-Steele buffer")?;
            let mut st = 1i64;
            while (st as usize) < n {
                launch(
                    k,
                    s,
                    &name("hs"),
                    (n, nb),
                    &Hs {
                        x: &*a,
                        y: &other,
                        n: nn,
                        s: st,
                        f: rev,
                        r: rev,
                    },
                )?;
                std::mem::swap(a, &mut other);
                st *= 2;
            }
        }
        ScanAlgorithm::Blelloch => {
            let p = n.next_power_of_two();
            let pp = p as i64;
            let w = alloc::<D>(g, nb * p * len, "the Blelloch buffer")?;
            let orig = alloc::<D>(g, nb * p * len, "the Blelloch input copy")?;
            launch(
                k,
                s,
                &name("bl_load"),
                (p, nb),
                &BlLoad {
                    a: &*a,
                    n: nn,
                    w: &w,
                    o: &orig,
                    p: pp,
                    r: rev,
                },
            )?;
            let zero = 0i32;
            levels(k, s, &name("up"), &w, p, nb, 0..depth, rev, zero)?;
            launch(
                k,
                s,
                &name("bl_clear_last"),
                (1, nb),
                &BlClearLast { w: &w, p: pp },
            )?;
            for d in (0..depth).rev() {
                let st = 1i64 << d;
                launch(
                    k,
                    s,
                    &name("bl_down"),
                    (p.div_ceil(2 << d), nb),
                    &BlDown {
                        w: &w,
                        p: pp,
                        s: st,
                        f: rev,
                    },
                )?;
            }
            launch(
                k,
                s,
                &name("bl_fix"),
                (n, nb),
                &BlFix {
                    w: &w,
                    o: &orig,
                    a: &*a,
                    n: nn,
                    f: rev,
                    r: rev,
                },
            )?;
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
            levels(k, s, &name("up"), &*a, n, nb, 0..lv, rev, rev)?;
            let stride = 1i64 << lv;
            let cnt = (n >> lv) as i64;
            let other = alloc::<D>(g, nb * n * len, "the Sengupta buffer")?;
            let mut in_a = true;
            let mut st = 1i64;
            while st < cnt {
                if in_a {
                    launch(
                        k,
                        s,
                        &name("hs_strided"),
                        (cnt as usize, nb),
                        &HsStrided {
                            x: &*a,
                            y: &other,
                            n: nn,
                            st: stride,
                            c: cnt,
                            s: st,
                            f: rev,
                            r: rev,
                        },
                    )?;
                } else {
                    launch(
                        k,
                        s,
                        &name("hs_strided"),
                        (cnt as usize, nb),
                        &HsStrided {
                            x: &other,
                            y: &*a,
                            n: nn,
                            st: stride,
                            c: cnt,
                            s: st,
                            f: rev,
                            r: rev,
                        },
                    )?;
                }
                in_a = !in_a;
                st *= 2;
            }
            if !in_a {
                launch(
                    k,
                    s,
                    &name("hs_strided"),
                    (cnt as usize, nb),
                    &HsStrided {
                        x: &other,
                        y: &*a,
                        n: nn,
                        st: stride,
                        c: cnt,
                        s: cnt,
                        f: rev,
                        r: rev,
                    },
                )?;
            }
            levels(k, s, &name("lf_down"), &*a, n, nb, (0..lv).rev(), rev, rev)?;
        }
    }
    Ok(())
}

/// Levels `ds` of an up- or down-sweep (kernel `name`, [`Level`]) over the `n` elements
/// of each of the `nb` sequences in `a`, level `d` with stride `2^d`.
#[allow(clippy::too_many_arguments)]
fn levels<D: GpuReal>(
    k: &Kernels,
    s: &Arc<CudaStream>,
    name: &str,
    a: &CudaSlice<D>,
    n: usize,
    nb: usize,
    ds: impl Iterator<Item = u32>,
    f: i32,
    r: i32,
) -> Result<()> {
    let nn = n as i64;
    for d in ds {
        let p = Level {
            a,
            n: nn,
            s: 1i64 << d,
            f,
            r,
        };
        launch(k, s, name, (n.div_ceil(2 << d), nb), &p)?;
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
        launch(
            k,
            s,
            &format!("{op}_warp"),
            (nc * 32, nb),
            &Warp {
                a: &*a,
                n: nn,
                c: &carry,
                f: flip,
                r: ridx,
            },
        )?;
    } else {
        launch(
            k,
            s,
            &format!("{op}_chunk"),
            (nc, nb),
            &Chunk {
                a: &*a,
                n: nn,
                k: k32,
                c: &carry,
                f: flip,
                r: ridx,
            },
        )?;
    }
    chunked(g, k, op, len, &mut carry, nc, nb, flip, 0)?;
    if n > kk {
        launch(
            k,
            s,
            &format!("{op}_fix"),
            (n - kk, nb),
            &Chunk {
                a: &*a,
                n: nn,
                k: k32,
                c: &carry,
                f: flip,
                r: ridx,
            },
        )?;
    }
    Ok(())
}
