//! The particle filter's kernel parameters (`kernels/pf.cu`, `resample.cu`), one struct per
//! kernel, named and ordered as the kernel declares them.

use crate::cuda::{group, params, Buf};

group! {
    /// Where a step's draws come from: the filters' resampling flags, the particles per
    /// filter, the step drawn for, the Philox key and the first filter of the launch
    /// (the resampling kernels take them alike).
    pub(crate) struct Draw<'a> {
        flag: Buf<'a>, n: u32, kr: u32, key0: u32, key1: u32, b0: u32,
    }
}

params! {
    /// Parameters of `pf_ancestors`.
    pub(crate) struct PfAncestors<'a> for ["pf_ancestors"] {
        lw: Buf<'a>, fmx: Buf<'a>, anc: Buf<'a>, draw: Draw<'a>, scheme: u32, steps_b: u32,
    }
    /// Parameters of `pf_step`.
    pub(crate) struct PfStep<'a> for ["pf_step"] {
        x: Buf<'a>, xn: Buf<'a>, lw: Buf<'a>, lwn: Buf<'a>, anc: Buf<'a>, flag: Buf<'a>,
        rec: Buf<'a>, z: Buf<'a>, k: u32, n: u32, steps: u32, per: u32, g: u32, key0: u32,
        key1: u32, b0: u32,
    }
    /// Parameters of `pf_combine`.
    pub(crate) struct PfCombine<'a> for ["pf_combine"] {
        rec: Buf<'a>, coef: Buf<'a>, offs: Buf<'a>, z: Buf<'a>, fmx: Buf<'a>, logprev: Buf<'a>,
        wtot: Buf<'a>, flag: Buf<'a>, fail: Buf<'a>, mean: Buf<'a>, cov: Buf<'a>, loglik: Buf<'a>,
        ess: Buf<'a>, nlong: Buf<'a>, k: u32, n: u32, steps: u32, g: u32, threshold: f64,
    }
    /// Parameters of `pf_cdf`.
    pub(crate) struct PfCdf<'a> for ["pf_cdf"] {
        lw: Buf<'a>, rec: Buf<'a>, coef: Buf<'a>, offs: Buf<'a>, cdf: Buf<'a>, flag: Buf<'a>,
        n: u32, per: u32, g: u32,
    }
    /// Parameters of `pf_offspring`.
    pub(crate) struct PfOffspring<'a> for ["pf_offspring"] {
        lw: Buf<'a>, rec: Buf<'a>, coef: Buf<'a>, offs: Buf<'a>, wtot: Buf<'a>, flag: Buf<'a>,
        anc: Buf<'a>, nlong: Buf<'a>, list: Buf<'a>, cap: u32, n: u32, per: u32, g: u32, kr: u32,
        key0: u32, key1: u32, b0: u32, scheme: u32,
    }
    /// Parameters of `pf_fill`.
    pub(crate) struct PfFill<'a> for ["pf_fill"] {
        flag: Buf<'a>, nlong: Buf<'a>, list: Buf<'a>, anc: Buf<'a>, cap: u32, n: u32,
    }
    /// Parameters of `pf_weights_out`.
    pub(crate) struct PfWeightsOut<'a> for ["pf_weights_out"] {
        lw: Buf<'a>, fmx: Buf<'a>, w: Buf<'a>, n: u32,
    }
    /// Parameters of `pf_mn_sums`.
    pub(crate) struct PfMnSums<'a> for ["pf_mn_sums"] {
        draw: Draw<'a>, sums: Buf<'a>,
    }
    /// Parameters of `pf_mn_offsets`.
    pub(crate) struct PfMnOffsets<'a> for ["pf_mn_offsets"] {
        draw: Draw<'a>, sums: Buf<'a>, bn: u32,
    }
    /// Parameters of `pf_mn_walk`.
    pub(crate) struct PfMnWalk<'a> for ["pf_mn_walk"] {
        cdf: Buf<'a>, wtot: Buf<'a>, draw: Draw<'a>, sums: Buf<'a>, anc: Buf<'a>,
    }
    /// Parameters of `pf_grid`.
    pub(crate) struct PfGrid<'a> for ["pf_grid"] {
        cdf: Buf<'a>, wtot: Buf<'a>, draw: Draw<'a>, strat: u32, anc: Buf<'a>,
    }
    /// Parameters of `pf_sub_plan`.
    pub(crate) struct PfSubPlan<'a> for ["pf_sub_plan"] {
        cdf: Buf<'a>, wtot: Buf<'a>, draw: Draw<'a>, k: u32, plan: Buf<'a>,
    }
    /// Parameters of `pf_sub_draw`.
    pub(crate) struct PfSubDraw<'a> for ["pf_sub_draw"] {
        cdf: Buf<'a>, draw: Draw<'a>, k: u32, plan: Buf<'a>, anc: Buf<'a>,
    }
}
