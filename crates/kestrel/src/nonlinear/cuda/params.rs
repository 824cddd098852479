//! The nonlinear family's kernel parameters (`kernels/filter.cu`, `imm.cu`, `linearise.cu`),
//! one struct per kernel, named and ordered as the kernel declares them.

use crate::cuda::{params, Buf};

params! {
    /// Parameters of `nl_filter`.
    pub(crate) struct NlFilter<'a> for ["nl_filter"] {
        z: Buf<'a>, mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>, err: Buf<'a>, nb: i32, steps: i32,
        last: i32,
    }
    /// Parameters of `nl_rts`.
    pub(crate) struct NlRts<'a> for ["nl_rts"] {
        mean: Buf<'a>, cov: Buf<'a>, err: Buf<'a>, nb: i32, steps: i32,
    }
    /// Parameters of `nl_iterated`.
    pub(crate) struct NlIterated<'a> for ["nl_iterated"] {
        z: Buf<'a>, fmean: Buf<'a>, fcov: Buf<'a>, ll: Buf<'a>, smean: Buf<'a>, scov: Buf<'a>,
        err: Buf<'a>, nb: i32, steps: i32, passes: i32,
    }
    /// Parameters of `nl_transpose`.
    pub(crate) struct NlTranspose<'a> for ["nl_transpose"] {
        r#in: Buf<'a>, out: Buf<'a>, r: i64, c: i64,
    }
    /// Parameters of `nl_imm`.
    pub(crate) struct NlImm<'a> for ["nl_imm"] {
        z: Buf<'a>, mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>, probs: Buf<'a>, err: Buf<'a>, nb: i32,
        steps: i32,
    }
    /// Parameters of `nl_linearise_steps`.
    pub(crate) struct NlLineariseSteps<'a> for ["nl_linearise_steps"] {
        sm: Buf<'a>, sc: Buf<'a>, z: Buf<'a>, steps: Buf<'a>, zu: Buf<'a>, err: Buf<'a>, t: i32,
    }
    /// Parameters of `nl_widen`.
    pub(crate) struct NlWiden<'a> for ["nl_widen"] { r#in: Buf<'a>, out: Buf<'a>, n: i64 }
}
