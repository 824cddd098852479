//! The HMM family's kernel parameters (`kernels/forward.cu`, `backward.cu`, `viterbi.cu`),
//! one struct per kernel, named and ordered as the kernel declares them.

use crate::cuda::{params, Arg, Buf};

params! {
    /// Parameters of `fwd_reduce`, `bwd_reduce` and `vit_reduce`: the model, what the
    /// chunks read (observations or filtered probabilities) and each chunk's element.
    pub(crate) struct Reduce<'a> for ["fwd_reduce", "bwd_reduce", "vit_reduce"] {
        m: Arg<'a>, src: Buf<'a>, elem: Buf<'a>, steps: i64, len: i64, chunks: i64,
    }
    /// Parameters of every `*_carry`: each track's chunk elements folded into the value
    /// each chunk starts from.
    pub(crate) struct Carry<'a> for ["fwd_carry", "bwd_carry", "vit_carry", "path_carry"] {
        elem: Buf<'a>, start: Buf<'a>, chunks: i64, tracks: i64,
    }
    /// Parameters of `bwd_sweep`.
    pub(crate) struct BwdSweep<'a> for ["bwd_sweep"] {
        m: Arg<'a>, filtered: Buf<'a>, next: Buf<'a>, smoothed: Buf<'a>, steps: i64, len: i64,
        chunks: i64,
    }
    /// Parameters of `fwd_sweep`.
    pub(crate) struct FwdSweep<'a> for ["fwd_sweep"] {
        m: Arg<'a>, y: Buf<'a>, start: Buf<'a>, filtered: Buf<'a>, loglik: Buf<'a>, steps: i64,
        len: i64, chunks: i64,
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
    /// Parameters of `path_sweep`.
    pub(crate) struct PathSweep<'a> for ["path_sweep"] {
        back: Buf<'a>, final_state: Buf<'a>, xin: Buf<'a>, path: Buf<'a>, steps: i64, len: i64,
        chunks: i64,
    }
}
