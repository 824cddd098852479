//! The Kalman kernels' translation units: the prelude (dimensions, scalar type and, by
//! default, the model's numbers as compile-time constants) and the kernel files of each
//! [`Part`]. Compiled by the runtime's NVRTC cache (`crate::cuda`).

use crate::cuda::nvrtc::constexpr_table;
use crate::cuda::{Gpu, Module};
use crate::error::{Error, Result};
use crate::kalman::step::row_major;
use crate::linalg::Real;
use crate::model::Model;
use std::sync::Arc;

pub(crate) const COMMON: &str = include_str!("../kernels/common.cuh");
pub(super) const FILTER: &str = include_str!("../kernels/filter.cu");
pub(super) const SMOOTH: &str = include_str!("../kernels/smooth.cu");
pub(super) const LAYOUT: &str = include_str!("../kernels/layout.cu");
pub(crate) const TRACKER: &str = include_str!("../kernels/tracker.cu");

/// A group of kernels compiled together: a module holds only what one kind of run
/// needs, because NVRTC's time grows with every fully unrolled kernel in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The batched filter (every variant) and the layout conversion.
    Filter,
    /// The RTS smoother (both layouts) and the layout conversion.
    Smooth,
    /// The streaming tracker's kernels and the layout conversion.
    Tracker,
    /// The batched filter with per-track inputs (`kalman::TrackInputs`) and the layout
    /// conversion.
    FilterInputs,
    /// The RTS smoother with per-track control inputs and the layout conversion.
    SmoothInputs,
}

impl Part {
    /// Every part.
    pub const ALL: [Part; 5] = [
        Part::Filter,
        Part::Smooth,
        Part::Tracker,
        Part::FilterInputs,
        Part::SmoothInputs,
    ];

    fn sources(self) -> [(&'static str, &'static str); 4] {
        let own = match self {
            Part::Filter | Part::FilterInputs => ("filter.cu", FILTER),
            Part::Smooth | Part::SmoothInputs => ("smooth.cu", SMOOTH),
            Part::Tracker => ("tracker.cu", TRACKER),
        };
        [
            ("kestrel.cuh", crate::cuda::DEVICE_HEADER),
            ("common.cuh", COMMON),
            own,
            ("layout.cu", LAYOUT),
        ]
    }

    /// The kernels of this part (all `extern "C"`).
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Part::Filter => &[
                "kf_filter_all_host",
                "kf_filter_last_host",
                "kf_filter_pred_host",
                "kf_filter_all_soa",
                "kf_filter_last_soa",
                "soa_to_host",
            ],
            Part::Smooth => &["rts_smooth", "rts_smooth_soa", "soa_to_host"],
            Part::FilterInputs => &[
                "kf_filter_all_host_in",
                "kf_filter_last_host_in",
                "kf_filter_pred_host_in",
                "kf_filter_all_soa_in",
                "kf_filter_last_soa_in",
                "soa_to_host",
                "host_to_soa",
            ],
            Part::SmoothInputs => &[
                "rts_smooth_in",
                "rts_smooth_soa_in",
                "soa_to_host",
                "host_to_soa",
            ],
            Part::Tracker => &[
                "tracker_predict",
                "tracker_update",
                "tracker_set",
                "tracker_remove",
                "soa_to_host",
            ],
        }
    }

    /// A short name (module names, cache files).
    pub fn name(self) -> &'static str {
        match self {
            Part::Filter => "filter",
            Part::Smooth => "smooth",
            Part::Tracker => "tracker",
            Part::FilterInputs => "filter-inputs",
            Part::SmoothInputs => "smooth-inputs",
        }
    }
}

/// The largest dimensions the kernels are built for (registers hold the whole state).
pub const MAX_NX: usize = 16;
/// See [`MAX_NX`].
pub const MAX_NY: usize = 8;

/// The prelude: dimensions, scalar type and, when `baked`, the model as constants.
pub(crate) fn prelude(nx: usize, ny: usize, dtype: &str, baked: Option<&Model>) -> String {
    let real = if dtype == "f64" { "double" } else { "float" };
    // The per-step kernels follow the CPU's order of operations for this size: the SIMD
    // lanes' where they cover it, the general path's elsewhere (tracker.cu).
    let lanes = crate::kalman::lanes::supports(nx, ny) as u8;
    let mut s = format!(
        "#define NX {nx}\n#define NY {ny}\ntypedef {real} real;\n#define KS_LANE_ORDER {lanes}\n"
    );
    match baked {
        Some(m) => {
            s += "#define KS_BAKED 1\n";
            s += &constexpr_table("kF", &row_major(&m.f));
            s += &constexpr_table("kQ", &row_major(&m.q));
            s += &constexpr_table("kH", &row_major(&m.h));
            s += &constexpr_table("kR", &row_major(&m.r));
            s += &constexpr_table("ku", m.u.as_slice());
            s += &constexpr_table("kd", m.d.as_slice());
            s += &constexpr_table("kx0", m.prior.x0.as_slice());
            s += &constexpr_table("kP0", &row_major(&m.prior.p0));
        }
        None => s += "#define KS_BAKED 0\n",
    }
    s
}

/// The translation unit of one module: the prelude (dimensions, scalar type, `baked`
/// model numbers) and the kernel files of `part`.
pub fn source(nx: usize, ny: usize, dtype: &str, baked: Option<&Model>, part: Part) -> String {
    let mut s = prelude(nx, ny, dtype, baked);
    // The kernels of the inputs parts and of the plain ones share their files.
    s += &format!(
        "#define KS_INPUTS {}\n",
        u8::from(matches!(part, Part::FilterInputs | Part::SmoothInputs))
    );
    for (name, text) in part.sources() {
        s += &format!("// ---- {name}\n");
        s += text;
        s += "\n";
    }
    s
}

/// The name of a module (errors, cache files).
pub(crate) fn module_name<T: Real>(nx: usize, ny: usize, bake: bool, part: Part) -> String {
    format!(
        "kestrel-{}-nx{nx}-ny{ny}-{}{}",
        part.name(),
        T::NAME,
        if bake { "-baked" } else { "" }
    )
}

/// The kernels of `part` for `model`'s dimensions and type `T` on `gpu`, compiled on
/// first use (the runtime caches them); `bake` compiles the model's numbers into the code.
pub(crate) fn kernels<T: Real>(
    gpu: &Gpu,
    model: &Model,
    bake: bool,
    part: Part,
) -> Result<Arc<Module>> {
    let (nx, ny) = (model.nx(), model.ny());
    if nx == 0 || ny == 0 || nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the CUDA kernels are built for 1 <= nx <= {MAX_NX} and 1 <= ny <= {MAX_NY}; this model has nx = {nx}, ny = {ny}"
        )));
    }
    let what = module_name::<T>(nx, ny, bake, part);
    let src = source(nx, ny, T::NAME, bake.then_some(model), part);
    gpu.module(&what, &src, part.kernels())
}

/// The model as the kernels' `ModelParams` struct: F, Q, H, R, u, d, x0, P0, row-major,
/// in the working precision (kernels/common.cuh).
pub fn model_params<T: Real>(m: &Model) -> Vec<T> {
    let mut v = Vec::new();
    for mat in [&m.f, &m.q, &m.h, &m.r] {
        for i in 0..mat.nrows() {
            for j in 0..mat.ncols() {
                v.push(T::of(mat[(i, j)]));
            }
        }
    }
    v.extend(m.u.iter().map(|x| T::of(*x)));
    v.extend(m.d.iter().map(|x| T::of(*x)));
    v.extend(m.prior.x0.iter().map(|x| T::of(*x)));
    let p0 = &m.prior.p0;
    for i in 0..p0.nrows() {
        for j in 0..p0.ncols() {
            v.push(T::of(p0[(i, j)]));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::nvrtc::literal;

    #[test]
    fn baked_prelude_lists_nonzero_entries_only() {
        let m =
            crate::model::constant_velocity(2, 1.0, 0.5, 1.0, 10.0).expect("a valid builder model");
        let p = prelude(4, 2, "f32", Some(&m));
        assert!(p.contains("typedef float real;"));
        assert!(p.contains("#define KS_BAKED 1"));
        // F of a 2-D constant-velocity model has 6 non-zero entries.
        let kf = p
            .split("constexpr double kF")
            .nth(1)
            .expect("kF is defined");
        let kf = kf.split("default").next().expect("switch has a default");
        assert_eq!(kf.matches("case").count(), 6, "{kf}");
        let g = prelude(3, 1, "f64", None);
        assert!(g.contains("typedef double real;") && g.contains("#define KS_BAKED 0"));
        assert!(!g.contains("kF"));
    }

    #[test]
    fn literals_round_trip() {
        for v in [0.1, -1.0 / 3.0, 1e-300, 6.02e23, 1.0] {
            assert_eq!(literal(v).parse::<f64>().expect("a float literal"), v);
        }
    }

    #[test]
    fn every_kernel_name_is_defined_in_the_source() {
        for part in Part::ALL {
            let s = source(4, 2, "f32", None, part);
            for k in part.kernels() {
                assert!(s.contains(&format!(" {k}(")), "{k} missing from {part:?}");
            }
        }
    }
}
