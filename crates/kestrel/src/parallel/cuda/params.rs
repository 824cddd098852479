//! The parallel family's kernel parameters (`kernels/parallel_*.cu`), one struct per
//! signature, named and ordered as the kernels declare them; a kernel built per operator
//! by `SCAN_KERNELS` (`pf_`, `ps_`, `pm_`, `qf_`, `qs_`) shares its struct with its
//! siblings. `t` is the steps of a sequence, `k` a chunk's length, `f` and `r` the
//! scan's direction flags.

use crate::cuda::{group, params, Buf};

group! {
    /// What the filtering elements are built from: the model's per-step matrices (one
    /// set unless `varying`), the prior and the measurements.
    pub(crate) struct Inputs<'a> {
        st: Buf<'a>, varying: i32, prior: Buf<'a>, z: Buf<'a>,
    }
    /// What the smoothing elements are built from: the model's per-step matrices and
    /// the filtered moments.
    pub(crate) struct Filtered<'a> {
        st: Buf<'a>, varying: i32, mean: Buf<'a>, cov: Buf<'a>,
    }
    /// The square-root smoother's [`Filtered`]: the filtered covariances as factors.
    pub(crate) struct FilteredSqrt<'a> {
        st: Buf<'a>, varying: i32, mean: Buf<'a>, fac: Buf<'a>,
    }
}

params! {
    /// One thread folds each sequence (`{op}_seq`).
    pub(crate) struct Seq<'a> for ["pf_seq", "ps_seq", "pm_seq", "qf_seq", "qs_seq"] {
        a: Buf<'a>, n: i64, f: i32, r: i32,
    }
    /// One level of the up- or down-sweep (`{op}_up`, `{op}_lf_down`).
    pub(crate) struct Level<'a> for [
        "pf_up", "ps_up", "pm_up", "qf_up", "qs_up", "pf_lf_down", "ps_lf_down", "pm_lf_down",
        "qf_lf_down", "qs_lf_down",
    ] {
        a: Buf<'a>, n: i64, s: i64, f: i32, r: i32,
    }
    /// One Hillis-Steele step (`{op}_hs`).
    pub(crate) struct Hs<'a> for ["pf_hs", "ps_hs", "pm_hs", "qf_hs", "qs_hs"] {
        x: Buf<'a>, y: Buf<'a>, n: i64, s: i64, f: i32, r: i32,
    }
    /// One Hillis-Steele step over the block totals of the hybrid scan (`{op}_hs_strided`).
    pub(crate) struct HsStrided<'a> for [
        "pf_hs_strided", "ps_hs_strided", "pm_hs_strided", "qf_hs_strided", "qs_hs_strided",
    ] {
        x: Buf<'a>, y: Buf<'a>, n: i64, st: i64, c: i64, s: i64, f: i32, r: i32,
    }
    /// Blelloch: the padded work copy and the input kept (`{op}_bl_load`).
    pub(crate) struct BlLoad<'a> for [
        "pf_bl_load", "ps_bl_load", "pm_bl_load", "qf_bl_load", "qs_bl_load",
    ] {
        a: Buf<'a>, n: i64, w: Buf<'a>, o: Buf<'a>, p: i64, r: i32,
    }
    /// Blelloch: the identity at the root (`{op}_bl_clear_last`).
    pub(crate) struct BlClearLast<'a> for [
        "pf_bl_clear_last", "ps_bl_clear_last", "pm_bl_clear_last", "qf_bl_clear_last",
        "qs_bl_clear_last",
    ] {
        w: Buf<'a>, p: i64,
    }
    /// Blelloch: one level of the down-sweep (`{op}_bl_down`).
    pub(crate) struct BlDown<'a> for [
        "pf_bl_down", "ps_bl_down", "pm_bl_down", "qf_bl_down", "qs_bl_down",
    ] {
        w: Buf<'a>, p: i64, s: i64, f: i32,
    }
    /// Blelloch: the exclusive results made inclusive (`{op}_bl_fix`).
    pub(crate) struct BlFix<'a> for [
        "pf_bl_fix", "ps_bl_fix", "pm_bl_fix", "qf_bl_fix", "qs_bl_fix",
    ] {
        w: Buf<'a>, o: Buf<'a>, a: Buf<'a>, n: i64, f: i32, r: i32,
    }
    /// A chunk's scan, and each element's fix-up by its chunk's prefix (`{op}_chunk`,
    /// `{op}_fix`).
    pub(crate) struct Chunk<'a> for [
        "pf_chunk", "ps_chunk", "pm_chunk", "qf_chunk", "qs_chunk", "pf_fix", "ps_fix", "pm_fix",
        "qf_fix", "qs_fix",
    ] {
        a: Buf<'a>, n: i64, k: i32, c: Buf<'a>, f: i32, r: i32,
    }
    /// A warp's chunk of 32 (`{op}_warp`).
    pub(crate) struct Warp<'a> for ["pf_warp", "ps_warp", "pm_warp", "qf_warp", "qs_warp"] {
        a: Buf<'a>, n: i64, c: Buf<'a>, f: i32, r: i32,
    }
    /// Parameters of `pf_reduce`, `tf_reduce`, `qf_reduce`.
    pub(crate) struct Reduce<'a> for ["pf_reduce", "tf_reduce", "qf_reduce"] {
        inputs: Inputs<'a>, t: i64, k: i32, tot: Buf<'a>,
    }
    /// Parameters of `pf_sweep`.
    pub(crate) struct Sweep<'a> for ["pf_sweep"] {
        tot: Buf<'a>, inputs: Inputs<'a>, t: i64, k: i32,
        mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>,
    }
    /// Parameters of `tf_sweep`.
    pub(crate) struct TfSweep<'a> for ["tf_sweep"] {
        tot: Buf<'a>, inputs: Inputs<'a>, mean: Buf<'a>,
        cov: Buf<'a>, t: i64, k: i32, smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `qf_sweep`.
    pub(crate) struct QfSweep<'a> for ["qf_sweep"] {
        tot: Buf<'a>, inputs: Inputs<'a>, t: i64, k: i32,
        mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>, fac: Buf<'a>, keep: i32,
    }
    /// Parameters of `pf_reduce_at`, `tf_reduce_at`.
    pub(crate) struct ReduceAt<'a> for ["pf_reduce_at", "tf_reduce_at"] {
        inputs: Inputs<'a>, ta: i64, first: i64, n: i64, k: i32,
        tot: Buf<'a>,
    }
    /// Parameters of `pf_sweep_at`.
    pub(crate) struct SweepAt<'a> for ["pf_sweep_at"] {
        tot: Buf<'a>, carry: Buf<'a>, has_carry: i32, inputs: Inputs<'a>, ta: i64, first: i64, n: i64, k: i32, mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>,
    }
    /// Parameters of `tf_sweep_at`.
    pub(crate) struct TfSweepAt<'a> for ["tf_sweep_at"] {
        tot: Buf<'a>, carry: Buf<'a>, has_carry: i32, inputs: Inputs<'a>, mean: Buf<'a>, cov: Buf<'a>, ta: i64, first: i64, n: i64, k: i32,
        smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `fe_pick`.
    pub(crate) struct Pick<'a> for ["fe_pick"] { tot: Buf<'a>, nc: i64, i: i64, out: Buf<'a> }
    /// Parameters of `ps_reduce`, `pm_reduce`.
    pub(crate) struct SmoothReduce<'a> for ["ps_reduce", "pm_reduce"] {
        filtered: Filtered<'a>, t: i64, k: i32, tot: Buf<'a>,
    }
    /// Parameters of `qs_reduce`.
    pub(crate) struct QsReduce<'a> for ["qs_reduce"] {
        filtered: FilteredSqrt<'a>, t: i64, k: i32, tot: Buf<'a>,
    }
    /// Parameters of `ps_sweep`.
    pub(crate) struct SmoothSweep<'a> for ["ps_sweep"] {
        tot: Buf<'a>, filtered: Filtered<'a>, t: i64, k: i32,
        smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `qs_sweep`.
    pub(crate) struct QsSweep<'a> for ["qs_sweep"] {
        tot: Buf<'a>, filtered: FilteredSqrt<'a>, t: i64, k: i32,
        smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `pm_sweep`.
    pub(crate) struct MeansSweep<'a> for ["pm_sweep"] {
        tot: Buf<'a>, filtered: Filtered<'a>, t: i64, k: i32,
        smean: Buf<'a>,
    }
    /// Parameters of `pm_build`.
    pub(crate) struct MeansBuild<'a> for ["pm_build"] {
        filtered: Filtered<'a>, t: i64, me: Buf<'a>,
    }
    /// Parameters of `ps_build`.
    pub(crate) struct SmoothBuild<'a> for ["ps_build"] {
        filtered: Filtered<'a>, t: i64, se: Buf<'a>,
    }
    /// Parameters of `pm_extract`.
    pub(crate) struct MeansExtract<'a> for ["pm_extract"] { me: Buf<'a>, t: i64, smean: Buf<'a> }
    /// Parameters of `ps_extract`.
    pub(crate) struct SmoothExtract<'a> for ["ps_extract"] {
        se: Buf<'a>, t: i64, mean: Buf<'a>, cov: Buf<'a>,
    }
    /// Parameters of `qs_extract`.
    pub(crate) struct QsExtract<'a> for ["qs_extract"] {
        se: Buf<'a>, t: i64, smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `pf_build`, `qf_build`.
    pub(crate) struct Build<'a> for ["pf_build", "qf_build"] {
        inputs: Inputs<'a>, t: i64, el: Buf<'a>,
    }
    /// Parameters of `pf_extract`, `qf_extract`.
    pub(crate) struct Extract<'a> for ["pf_extract", "qf_extract"] {
        el: Buf<'a>, inputs: Inputs<'a>, t: i64, mean: Buf<'a>,
        cov: Buf<'a>, ll: Buf<'a>,
    }
    /// Parameters of `tf_shift`.
    pub(crate) struct Shift<'a> for ["tf_shift"] { el: Buf<'a>, back: Buf<'a>, t: i64 }
    /// Parameters of `tf_combine`.
    pub(crate) struct Combine<'a> for ["tf_combine"] {
        back: Buf<'a>, mean: Buf<'a>, cov: Buf<'a>, t: i64, smean: Buf<'a>, scov: Buf<'a>,
    }
    /// Parameters of `kf_seq`.
    pub(crate) struct KfSeq<'a> for ["kf_seq"] {
        inputs: Inputs<'a>, t: i64, mean: Buf<'a>, cov: Buf<'a>,
        ll: Buf<'a>,
    }
    /// Parameters of `poison`.
    pub(crate) struct Poison<'a> for ["poison"] { p: Buf<'a>, n: i64 }
    /// Parameters of `seq_filter`.
    pub(crate) struct SeqFilter<'a> for ["seq_filter"] {
        inputs: Inputs<'a>, b: i64, t: i64, mean: Buf<'a>,
        cov: Buf<'a>, ll: Buf<'a>,
    }
    /// Parameters of `seq_rts`.
    pub(crate) struct SeqRts<'a> for ["seq_rts"] {
        filtered: Filtered<'a>, b: i64, t: i64, smean: Buf<'a>,
        scov: Buf<'a>,
    }
    /// Parameters of `qs_build`.
    pub(crate) struct QsBuild<'a> for ["qs_build"] {
        st: Buf<'a>, varying: i32, el: Buf<'a>, t: i64, se: Buf<'a>,
    }
}
