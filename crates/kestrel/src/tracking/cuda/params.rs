//! The tracking family's kernel parameters (`kernels/track.cu`, `assign.cu`, `jpda.cu`),
//! one struct per kernel, named and ordered as the kernel declares them.

use crate::cuda::{group, params, Arg, Buf};

group! {
    /// The gated pairs (`n` tracks, each track's pairs from `start`, their detections
    /// and log-likelihoods) and the test a pair passes, `-(gain + ll) < miss`.
    pub(crate) struct Gating<'a> {
        n: u32, start: Buf<'a>, det: Buf<'a>, ll: Buf<'a>, gain: f64, miss: f64,
    }
    /// The clusters' association graph as the belief propagation kernels take it: the
    /// gated pairs of `n` tracks, each track's root and cluster size, the clusters' ids
    /// and which clusters propagate.
    pub(crate) struct Graph<'a> {
        n: u32, start: Buf<'a>, det: Buf<'a>, parent: Buf<'a>, size: Buf<'a>, cid: Buf<'a>,
        clbp: Buf<'a>,
    }
}

params! {
    /// Parameters of `ga_init`.
    pub(crate) struct GaInit<'a> for ["ga_init"] {
        n: u32, ndet: u32, parent: Buf<'a>, size: Buf<'a>, owner: Buf<'a>, dloc: Buf<'a>,
        counters: Buf<'a>,
    }
    /// Parameters of `ga_owner`.
    pub(crate) struct GaOwner<'a> for ["ga_owner"] {
        gating: Gating<'a>, owner: Buf<'a>,
    }
    /// Parameters of `ga_union`.
    pub(crate) struct GaUnion<'a> for ["ga_union"] {
        gating: Gating<'a>, owner: Buf<'a>, parent: Buf<'a>,
    }
    /// Parameters of `ga_root`.
    pub(crate) struct GaRoot<'a> for ["ga_root"] {
        n: u32, start: Buf<'a>, ll: Buf<'a>, gain: f64, miss: f64, parent: Buf<'a>, size: Buf<'a>,
    }
    /// Parameters of `ga_place`.
    pub(crate) struct GaPlace<'a> for ["ga_place"] {
        gating: Gating<'a>, parent: Buf<'a>, size: Buf<'a>, cid: Buf<'a>, cstart: Buf<'a>,
        csize: Buf<'a>, cfill: Buf<'a>, counters: Buf<'a>, pick: Buf<'a>,
    }
    /// Parameters of `ga_member`.
    pub(crate) struct GaMember<'a> for ["ga_member"] {
        n: u32, start: Buf<'a>, ll: Buf<'a>, gain: f64, miss: f64, parent: Buf<'a>, size: Buf<'a>,
        cid: Buf<'a>, cstart: Buf<'a>, cfill: Buf<'a>, member: Buf<'a>,
    }
    /// Parameters of `ga_solve` and `ga_solve_block` (the thread's solver ignores `big`).
    pub(crate) struct GaSolve<'a> for ["ga_solve", "ga_solve_block"] {
        counters: Buf<'a>, cstart: Buf<'a>, csize: Buf<'a>, member: Buf<'a>, start: Buf<'a>,
        det: Buf<'a>, ll: Buf<'a>, gain: f64, miss: f64, dloc: Buf<'a>, blk: Buf<'a>, big: Buf<'a>,
        pick: Buf<'a>,
    }
    /// Parameters of `ga_scatter`.
    pub(crate) struct GaScatter<'a> for ["ga_scatter"] {
        count: u32, track: Buf<'a>, value: Buf<'a>, pick: Buf<'a>,
    }
    /// Parameters of `gj_weights`.
    pub(crate) struct GjWeights<'a> for ["gj_weights"] {
        n: u32, start: Buf<'a>, ll: Buf<'a>, gain: f64, log_miss: f64, mw: Buf<'a>, a: Buf<'a>,
    }
    /// Parameters of `gj_single`.
    pub(crate) struct GjSingle<'a> for ["gj_single"] {
        n: u32, start: Buf<'a>, parent: Buf<'a>, size: Buf<'a>, mw: Buf<'a>, a: Buf<'a>,
        beta0: Buf<'a>, beta: Buf<'a>,
    }
    /// Parameters of `gj_classify`.
    pub(crate) struct GjClassify<'a> for ["gj_classify"] {
        counters: Buf<'a>, cstart: Buf<'a>, csize: Buf<'a>, member: Buf<'a>, start: Buf<'a>,
        det: Buf<'a>, mw: Buf<'a>, a: Buf<'a>, exact: f64, dloc: Buf<'a>, clbp: Buf<'a>,
        cchange: Buf<'a>, jc: Buf<'a>, beta0: Buf<'a>, beta: Buf<'a>,
    }
    /// Parameters of `gj_init`.
    pub(crate) struct GjInit<'a> for ["gj_init"] {
        m: u32, ndet: u32, nu: Buf<'a>, dn: Buf<'a>, jc: Buf<'a>,
    }
    /// Parameters of `gj_dcount`.
    pub(crate) struct GjDcount<'a> for ["gj_dcount"] {
        graph: Graph<'a>, dn: Buf<'a>,
    }
    /// Parameters of `gj_dplace`.
    pub(crate) struct GjDplace<'a> for ["gj_dplace"] {
        ndet: u32, dn: Buf<'a>, ds: Buf<'a>, dfill: Buf<'a>, jc: Buf<'a>,
    }
    /// Parameters of `gj_dfill`.
    pub(crate) struct GjDfill<'a> for ["gj_dfill"] {
        graph: Graph<'a>, ds: Buf<'a>, dfill: Buf<'a>, dp: Buf<'a>,
    }
    /// Parameters of `gj_dsort`.
    pub(crate) struct GjDsort<'a> for ["gj_dsort"] {
        ndet: u32, dn: Buf<'a>, ds: Buf<'a>, dp: Buf<'a>,
    }
    /// Parameters of `gj_mu`.
    pub(crate) struct GjMu<'a> for ["gj_mu"] {
        graph: Graph<'a>, mw: Buf<'a>, a: Buf<'a>, nu: Buf<'a>, mu: Buf<'a>,
    }
    /// Parameters of `gj_col`.
    pub(crate) struct GjCol<'a> for ["gj_col"] {
        ndet: u32, dn: Buf<'a>, ds: Buf<'a>, dp: Buf<'a>, mu: Buf<'a>, col: Buf<'a>,
        active: Buf<'a>,
    }
    /// Parameters of `gj_nu`.
    pub(crate) struct GjNu<'a> for ["gj_nu"] {
        graph: Graph<'a>, mu: Buf<'a>, col: Buf<'a>, nu: Buf<'a>, cchange: Buf<'a>,
    }
    /// Parameters of `gj_check`.
    pub(crate) struct GjCheck<'a> for ["gj_check"] {
        counters: Buf<'a>, clbp: Buf<'a>, cchange: Buf<'a>, active: Buf<'a>,
    }
    /// Parameters of `gj_final`.
    pub(crate) struct GjFinal<'a> for ["gj_final"] {
        n: u32, start: Buf<'a>, parent: Buf<'a>, size: Buf<'a>, cid: Buf<'a>, clbp: Buf<'a>,
        mw: Buf<'a>, a: Buf<'a>, nu: Buf<'a>, beta0: Buf<'a>, beta: Buf<'a>,
    }
    /// Parameters of `tk_predict`.
    pub(crate) struct TkPredict<'a> for ["tk_predict"] {
        mp: Arg<'a>, n: i32, c: i64, xs: Buf<'a>, ps: Buf<'a>, zhat: Buf<'a>, lf: Buf<'a>,
        hld: Buf<'a>, gamma: f64, scratch: Buf<'a>, err: Buf<'a>,
    }
    /// Parameters of `tk_bounds`.
    pub(crate) struct TkBounds<'a> for ["tk_bounds"] { ndet: i32, z: Buf<'a>, scratch: Buf<'a> }
    /// Parameters of `tk_grid_setup`.
    pub(crate) struct TkGridSetup<'a> for ["tk_grid_setup"] { ndet: i32, n: i32, scratch: Buf<'a> }
    /// Parameters of `tk_cells`.
    pub(crate) struct TkCells<'a> for ["tk_cells"] {
        ndet: i32, z: Buf<'a>, scratch: Buf<'a>, count: Buf<'a>, cell: Buf<'a>, rank: Buf<'a>,
    }
    /// Parameters of `tk_scatter`.
    pub(crate) struct TkScatter<'a> for ["tk_scatter"] {
        ndet: i32, z: Buf<'a>, cell: Buf<'a>, rank: Buf<'a>, start: Buf<'a>, order: Buf<'a>,
        zs: Buf<'a>,
    }
    /// Parameters of `tk_gate`.
    pub(crate) struct TkGate<'a> for ["tk_gate"] {
        n: i32, want: i32, status: Buf<'a>, zhat: Buf<'a>, lf: Buf<'a>, hld: Buf<'a>, gamma: f64,
        scratch: Buf<'a>, cstart: Buf<'a>, order: Buf<'a>, zs: Buf<'a>, claimed: Buf<'a>,
        rows: Buf<'a>, det: Buf<'a>, ll: Buf<'a>, fill: i32,
    }
    /// Parameters of `tk_claim`.
    pub(crate) struct TkClaim<'a> for ["tk_claim"] { n: i32, pick: Buf<'a>, claimed: Buf<'a> }
    /// Parameters of `tk_pda`.
    pub(crate) struct TkPda<'a> for ["tk_pda"] {
        mp: Arg<'a>, n: i32, c: i64, xs: Buf<'a>, ps: Buf<'a>, status: Buf<'a>, rows: Buf<'a>,
        det: Buf<'a>, beta: Buf<'a>, beta0: Buf<'a>, z: Buf<'a>, pick: Buf<'a>, claimed: Buf<'a>,
        err: Buf<'a>,
    }
    /// Parameters of `tk_update`.
    pub(crate) struct TkUpdate<'a> for ["tk_update"] {
        mp: Arg<'a>, lp: Arg<'a>, n: i32, ndet: i32, c: i64, xs: Buf<'a>, ps: Buf<'a>,
        status: Buf<'a>, age: Buf<'a>, hits: Buf<'a>, misses: Buf<'a>, pick1: Buf<'a>,
        pick2: Buf<'a>, z: Buf<'a>, claimed: Buf<'a>, flags: Buf<'a>, err: Buf<'a>, pda: i32,
    }
    /// Parameters of `tk_compact`.
    pub(crate) struct TkCompact<'a> for ["tk_compact"] {
        bp: Arg<'a>, n: i32, ndet: i32, cin: i64, cout: i64, flags: Buf<'a>, xs: Buf<'a>,
        ps: Buf<'a>, id: Buf<'a>, status: Buf<'a>, age: Buf<'a>, hits: Buf<'a>, misses: Buf<'a>,
        xo: Buf<'a>, po: Buf<'a>, ido: Buf<'a>, statuso: Buf<'a>, ageo: Buf<'a>, hitso: Buf<'a>,
        misseso: Buf<'a>, z: Buf<'a>, next_id: u64,
    }
    /// Parameters of `tk_scan_tiles`.
    pub(crate) struct TkScanTiles<'a> for ["tk_scan_tiles"] { a: Buf<'a>, len: i64, sums: Buf<'a> }
    /// Parameters of `tk_scan_sums`.
    pub(crate) struct TkScanSums<'a> for ["tk_scan_sums"] { sums: Buf<'a>, tiles: i32 }
    /// Parameters of `tk_scan_apply`.
    pub(crate) struct TkScanApply<'a> for ["tk_scan_apply"] {
        a: Buf<'a>, len: i64, sums: Buf<'a>, tiles: i32,
    }
}
