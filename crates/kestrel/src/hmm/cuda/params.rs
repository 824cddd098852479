//! The HMM family's kernel parameters (`kernels/forward.cu`, `backward.cu`, `viterbi.cu`),
//! one struct per kernel, named and ordered as the kernel declares them.

use crate::cuda::{params, Arg, Buf};

params! {
    /// Parameters of `bwd_reduce`.
    pub(crate) struct BwdReduce<'a> for ["bwd_reduce"] {
        m: Arg<'a>, filtered: Buf<'a>, g: Buf<'a>, steps: i64, len: i64, chunks: i64,
    }
    /// Parameters of `bwd_carry`.
    pub(crate) struct BwdCarry<'a> for ["bwd_carry"] {
        g: Buf<'a>, next: Buf<'a>, chunks: i64, tracks: i64,
    }
    /// Parameters of `bwd_sweep`.
    pub(crate) struct BwdSweep<'a> for ["bwd_sweep"] {
        m: Arg<'a>, filtered: Buf<'a>, next: Buf<'a>, smoothed: Buf<'a>, steps: i64, len: i64,
        chunks: i64,
    }
    /// Parameters of `fwd_reduce`.
    pub(crate) struct FwdReduce<'a> for ["fwd_reduce"] {
        m: Arg<'a>, y: Buf<'a>, elem: Buf<'a>, steps: i64, len: i64, chunks: i64,
    }
    /// Parameters of `fwd_carry`.
    pub(crate) struct FwdCarry<'a> for ["fwd_carry"] {
        elem: Buf<'a>, start: Buf<'a>, chunks: i64, tracks: i64,
    }
    /// Parameters of `fwd_sweep`.
    pub(crate) struct FwdSweep<'a> for ["fwd_sweep"] {
        m: Arg<'a>, y: Buf<'a>, start: Buf<'a>, filtered: Buf<'a>, loglik: Buf<'a>, steps: i64,
        len: i64, chunks: i64,
    }
    /// Parameters of `vit_reduce`.
    pub(crate) struct VitReduce<'a> for ["vit_reduce"] {
        m: Arg<'a>, y: Buf<'a>, pm: Buf<'a>, steps: i64, len: i64, chunks: i64,
    }
    /// Parameters of `vit_carry`.
    pub(crate) struct VitCarry<'a> for ["vit_carry"] {
        pm: Buf<'a>, dstart: Buf<'a>, chunks: i64, tracks: i64,
    }
    /// Parameters of `vit_sweep`.
    pub(crate) struct VitSweep<'a> for ["vit_sweep"] {
        m: Arg<'a>, y: Buf<'a>, dstart: Buf<'a>, back: Buf<'a>, final_state: Buf<'a>, steps: i64,
        len: i64, chunks: i64,
    }
    /// Parameters of `path_reduce`.
    pub(crate) struct PathReduce<'a> for ["path_reduce"] {
        back: Buf<'a>, final_state: Buf<'a>, phi: Buf<'a>, steps: i64, len: i64, chunks: i64,
    }
    /// Parameters of `path_carry`.
    pub(crate) struct PathCarry<'a> for ["path_carry"] {
        phi: Buf<'a>, xin: Buf<'a>, chunks: i64, tracks: i64,
    }
    /// Parameters of `path_sweep`.
    pub(crate) struct PathSweep<'a> for ["path_sweep"] {
        back: Buf<'a>, final_state: Buf<'a>, xin: Buf<'a>, path: Buf<'a>, steps: i64, len: i64,
        chunks: i64,
    }
}
