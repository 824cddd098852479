//! The kernels' source: the compile-time constants, `common.cuh`, then the three kernel
//! families (`forward.cu`, `backward.cu`, `viterbi.cu`).

/// The family's device helpers.
pub const COMMON: &str = include_str!("../kernels/common.cuh");
/// The forward filter: `fwd_reduce`, `fwd_carry`, `fwd_sweep`.
pub const FORWARD: &str = include_str!("../kernels/forward.cu");
/// The backward smoother: `bwd_reduce`, `bwd_carry`, `bwd_sweep`.
pub const BACKWARD: &str = include_str!("../kernels/backward.cu");
/// The Viterbi path: `vit_*` and `path_*`.
pub const VITERBI: &str = include_str!("../kernels/viterbi.cu");

/// Every kernel of the module.
pub const KERNELS: [&str; 12] = [
    "fwd_reduce",
    "fwd_carry",
    "fwd_sweep",
    "bwd_reduce",
    "bwd_carry",
    "bwd_sweep",
    "vit_reduce",
    "vit_carry",
    "vit_sweep",
    "path_reduce",
    "path_carry",
    "path_sweep",
];

/// The translation unit for `k` states, `ny` components, categorical or Gaussian
/// emissions, scalar `real` (`f32` | `f64`).
pub fn source(k: usize, ny: usize, categorical: bool, real: &str) -> String {
    format!(
        "#define REAL {}\n#define KS {k}\n#define NY {ny}\n#define CATEGORICAL {}\n{COMMON}\n{FORWARD}\n{BACKWARD}\n{VITERBI}",
        if real == "f32" { "float" } else { "double" },
        categorical as i32
    )
}
