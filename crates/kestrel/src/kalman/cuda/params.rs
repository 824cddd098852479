//! The Kalman family's kernel parameters (`kernels/filter.cu`, `smooth.cu`, `layout.cu`,
//! `tracker.cu`), one struct per signature, named and ordered as the kernels declare them
//! (the filters' and smoothers' lists through `FILTER_ARGS` and `RTS_ARGS`).

use crate::cuda::{group, params, Arg, Buf};

group! {
    /// The filter kernels' parameters: the model, the measurements, the outputs
    /// (`pmean`, `pcov`: the predictions, null where not kept), the error flags.
    pub(crate) struct Filtering<'a> {
        mp: Arg<'a>, z: Buf<'a>, nb: i32, steps: i32, mean: Buf<'a>, cov: Buf<'a>, ll: Buf<'a>,
        pmean: Buf<'a>, pcov: Buf<'a>, err: Buf<'a>,
    }
    /// The RTS smoother's parameters (in place where `*_out` are `*_in`).
    pub(crate) struct Smoothing<'a> {
        mp: Arg<'a>, mean_in: Buf<'a>, cov_in: Buf<'a>, mean_out: Buf<'a>, cov_out: Buf<'a>,
        nb: i32, steps: i32, err: Buf<'a>,
    }
}

params! {
    /// The filter kernels without per-track inputs.
    pub(crate) struct KfFilter<'a> for [
        "kf_filter_all_host", "kf_filter_last_host", "kf_filter_pred_host", "kf_filter_all_soa",
        "kf_filter_last_soa",
    ] {
        run: Filtering<'a>,
    }
    /// The filter kernels with per-track inputs: [`Filtering`] and the `TrackIn` struct
    /// (five device pointers, null where not given).
    pub(crate) struct KfFilterIn<'a> for [
        "kf_filter_all_host_in", "kf_filter_last_host_in", "kf_filter_pred_host_in",
        "kf_filter_all_soa_in", "kf_filter_last_soa_in",
    ] {
        run: Filtering<'a>, r#in: Arg<'a>,
    }
    /// The RTS smoother without control inputs.
    pub(crate) struct RtsSmooth<'a> for ["rts_smooth", "rts_smooth_soa"] {
        run: Smoothing<'a>,
    }
    /// The RTS smoother with per-track control inputs `u`.
    pub(crate) struct RtsSmoothIn<'a> for ["rts_smooth_in", "rts_smooth_soa_in"] {
        run: Smoothing<'a>, u: Buf<'a>,
    }
    /// Structure of arrays to the host layout (`c` rows a step; `is_cov`: unpack a
    /// packed covariance).
    pub(crate) struct SoaToHost<'a> for ["soa_to_host"] {
        r#in: Buf<'a>, out: Buf<'a>, nb: i32, steps: i32, c: i32, is_cov: i32,
    }
    /// The host layout to structure of arrays.
    pub(crate) struct HostToSoa<'a> for ["host_to_soa"] {
        r#in: Buf<'a>, out: Buf<'a>, nb: i32, steps: i32, c: i32,
    }
    /// Parameters of `tracker_predict`.
    pub(crate) struct TrackerPredict<'a> for ["tracker_predict"] {
        mp: Arg<'a>, xs: Buf<'a>, ps: Buf<'a>, live: Buf<'a>, nb: i32, ctrl: Buf<'a>,
        dts: Buf<'a>, dt: f64, kin_order: i32, kin_q: f64,
    }
    /// Parameters of `tracker_update`.
    pub(crate) struct TrackerUpdate<'a> for ["tracker_update"] {
        mp: Arg<'a>, z: Buf<'a>, mask: Buf<'a>, rs: Buf<'a>, xs: Buf<'a>, ps: Buf<'a>,
        ll: Buf<'a>, zhat: Buf<'a>, ss: Buf<'a>, live: Buf<'a>, nb: i32, apply: i32,
        err: Buf<'a>,
    }
    /// Parameters of `tracker_set`.
    pub(crate) struct TrackerSet<'a> for ["tracker_set"] {
        slots: Buf<'a>, n: i32, x0s: Buf<'a>, p0s: Buf<'a>, xs: Buf<'a>, ps: Buf<'a>,
        ll: Buf<'a>, live: Buf<'a>, nb: i32,
    }
    /// Parameters of `tracker_remove`.
    pub(crate) struct TrackerRemove<'a> for ["tracker_remove"] {
        slots: Buf<'a>, n: i32, xs: Buf<'a>, ps: Buf<'a>, live: Buf<'a>, nb: i32,
    }
}
