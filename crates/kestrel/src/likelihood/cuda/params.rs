//! The per-step likelihoods' kernel parameters (`kernels/scan.cu`, `kernels/window.cu`),
//! one struct per kernel, named and ordered as the kernel declares them.

use crate::cuda::{params, Arg, Buf};

params! {
    /// Parameters of `scan_local`.
    pub(crate) struct ScanLocal<'a> for ["scan_local"] {
        z: Buf<'a>, table: Buf<'a>, index: Buf<'a>, istride: i64, ilen: i64, isteady: i32,
        f: Buf<'a>, u: Buf<'a>, h: Buf<'a>, d: Buf<'a>, steps: i64, len: i64, chunks: i64,
        m: Buf<'a>, v: Buf<'a>,
    }
    /// Parameters of `scan_carry_warp`.
    pub(crate) struct ScanCarryWarp<'a> for ["scan_carry_warp"] {
        m: Buf<'a>, v: Buf<'a>, x0: Buf<'a>, chunks: i64, tracks: i64, start: Buf<'a>,
    }
    /// Parameters of `scan_final`.
    pub(crate) struct ScanFinal<'a> for ["scan_final"] {
        z: Buf<'a>, table: Buf<'a>, index: Buf<'a>, istride: i64, ilen: i64, isteady: i32,
        f: Buf<'a>, u: Buf<'a>, h: Buf<'a>, d: Buf<'a>, steps: i64, len: i64, chunks: i64,
        start: Buf<'a>, out: Buf<'a>,
    }
    /// Parameters of `window_shared`.
    pub(crate) struct WindowShared<'a> for ["window_shared"] {
        z: Buf<'a>, g: Buf<'a>, c: Buf<'a>, l: Buf<'a>, norm: Arg<'a>, out: Buf<'a>, steps: i64,
        n: i32, t_begin: i64,
    }
    /// Parameters of `window_patterns`.
    pub(crate) struct WindowPatterns<'a> for ["window_patterns"] {
        z: Buf<'a>, g: Buf<'a>, c: Buf<'a>, l: Buf<'a>, norm: Buf<'a>, index: Buf<'a>,
        pattern: Buf<'a>, count: i64, out: Buf<'a>, steps: i64, n: i32,
    }
}
