//! The particle filter's translation unit: the model's numbers and the configuration
//! as compile-time constants, then `kernels/philox.cuh`, `models.cuh`, `pf.cu` and
//! `resample.cu`; the kernels' names, block sizes and the resampling schemes' codes.

use super::super::models::{PfKind, PfModel};
use super::super::resample::Resampler;
use crate::cuda::nvrtc::{constexpr_table, literal};
use crate::error::{Error, Result};
use crate::linalg::{Real, LN_2PI};

pub(super) const PHILOX: &str = include_str!("../kernels/philox.cuh");
pub(super) const MODELS: &str = include_str!("../kernels/models.cuh");
pub(super) const PF: &str = include_str!("../kernels/pf.cu");
pub(super) const RESAMPLE: &str = include_str!("../kernels/resample.cu");

/// The kernels of `kernels/pf.cu` and `kernels/resample.cu`.
pub const KERNELS: [&str; 13] = [
    "pf_ancestors",
    "pf_step",
    "pf_combine",
    "pf_offspring",
    "pf_fill",
    "pf_cdf",
    "pf_weights_out",
    "pf_mn_sums",
    "pf_mn_offsets",
    "pf_mn_walk",
    "pf_grid",
    "pf_sub_plan",
    "pf_sub_draw",
];

/// Threads per block (the default; [`block_for`] picks per run).
pub const BLOCK: u32 = 256;

/// Threads per block for B filters of N particles: 128 for filters of a few thousand
/// particles (one or two chunks a filter; `kestrel bench --only particle` on an H100 at
/// B = 10^4 x N = 10^3: 1.41e10 particle-steps/s against 1.14e10 with 256, 1.33e10 with
/// 64), else 256 (B = 1 x N = 10^7: 2.55e10 against 2.29e10 with 128 and 2.43e10 with
/// 512).
pub fn block_for(_b: usize, n: usize) -> u32 {
    if n <= 2048 {
        128
    } else {
        BLOCK
    }
}

/// Systematic and stratified: the longest range of slots a thread of `pf_offspring` writes
/// itself where its tile's slots do not fit in shared memory (`PF_LONG`; longer ones are
/// listed for `pf_fill`), and the slots of a listed piece (`PF_PIECE`).
pub const OFFSPRING_LONG: usize = 64;
pub const OFFSPRING_PIECE: usize = 4096;

/// Entries of a filter's list of long ranges for N particles in G chunks: ranges of more
/// than `OFFSPRING_LONG` slots are disjoint, so at most 2 N / `OFFSPRING_LONG` pieces;
/// each chunk's slots past its last weight one range more.
pub fn offspring_list(n: usize, g: usize) -> usize {
    2 * n.div_ceil(OFFSPRING_LONG) + n.div_ceil(OFFSPRING_PIECE) + g + 1
}

/// Slots a thread of `pf_ancestors` resamples (`PF_AITEMS`).
pub const ANCESTOR_ITEMS: u32 = 8;

/// The largest state the kernels are built for (registers hold it).
pub const MAX_NX: usize = 16;
/// The largest measurement the kernels are built for (registers hold it).
pub const MAX_NY: usize = 16;

pub(super) fn define(name: &str, v: f64) -> String {
    format!("#define {name} ({})\n", literal(v))
}

/// The complete translation unit for `model` in precision `T` with blocks of `block`
/// threads: sizes, scalar type and the model's numbers, then `philox.cuh`, the model
/// (`models.cuh` or the custom source) and `pf.cu`.
#[doc(hidden)]
pub fn source<T: Real>(model: &PfModel, block: u32) -> Result<String> {
    use super::super::ParticleModel;
    let nx = ParticleModel::<f64>::nx(model);
    let ny = ParticleModel::<f64>::ny(model);
    if nx > MAX_NX || ny > MAX_NY {
        return Err(Error::Unsupported(format!(
            "the GPU particle filter is built for states up to {MAX_NX} and measurements up to {MAX_NY} components (this model: {nx}, {ny}); run it on the CPU"
        )));
    }
    let real = if T::NAME == "f32" { "float" } else { "double" };
    let mut s = format!(
        "typedef {real} real_t;\n#define PF_F32 {}\n#define NX {nx}\n#define NY {ny}\n#define PF_BLOCK {block}\n#define PF_INF (1e300 * 1e300)\n",
        u8::from(T::NAME == "f32")
    );
    if let Some(p) = &model.prior {
        s += "#define PF_GAUSSIAN_PRIOR 1\n";
        s += &constexpr_table("PF_X0", &p.x0);
        s += &constexpr_table("PF_L0", &p.sqrt_p0);
    }
    let gauss = |r: f64| (-0.5 * (LN_2PI + r.ln()), 0.5 / r);
    let cv = |s: &mut String, c: &super::super::models::ConstantVelocity| {
        let (a, b, cc) = c.noise_factor();
        *s += "#define PF_KIND_CV 1\n";
        *s += &define("PF_DT", c.dt);
        *s += &define("PF_A", a);
        *s += &define("PF_B", b);
        *s += &define("PF_C", cc);
    };
    let mut custom = None;
    match &model.kind {
        PfKind::Linear(l) => {
            s += "#define PF_KIND_LINEAR 1\n";
            s += &constexpr_table("PF_F", &l.f);
            s += &constexpr_table("PF_SQ", &l.sqrt_q);
            s += &constexpr_table("PF_H", &l.h);
            s += &constexpr_table("PF_CR", &l.chol_r);
            s += &constexpr_table("PF_U", &l.u);
            s += &constexpr_table("PF_D", &l.d);
            s += &define("PF_LOG_NORM", l.log_norm);
        }
        PfKind::RangeOnly { cv: c, sensors, r } | PfKind::BearingsOnly { cv: c, sensors, r } => {
            cv(&mut s, c);
            s += if matches!(model.kind, PfKind::RangeOnly { .. }) {
                "#define PF_MEASURE_RANGE 1\n"
            } else {
                "#define PF_MEASURE_BEARING 1\n"
            };
            let flat: Vec<f64> = sensors.iter().flat_map(|p| [p[0], p[1]]).collect();
            s += &constexpr_table("PF_SENSORS", &flat);
            let (c0, c1) = gauss(*r);
            s += &define("PF_LL0", c0);
            s += &define("PF_LL1", c1);
        }
        PfKind::RangeBearing {
            cv: c,
            radar,
            r_range,
            r_bearing,
        } => {
            cv(&mut s, c);
            s += &constexpr_table("PF_SENSORS", radar);
            let (c0, c1) = gauss(*r_range);
            let (b0, b1) = gauss(*r_bearing);
            s += &define("PF_LL0", c0);
            s += &define("PF_LL1", c1);
            s += &define("PF_LL0B", b0);
            s += &define("PF_LL1B", b1);
        }
        PfKind::StochasticVolatility { mu, phi, sigma } => {
            s += "#define PF_KIND_SV 1\n";
            s += &define("PF_MU", *mu);
            s += &define("PF_PHI", *phi);
            s += &define("PF_SIGMA", *sigma);
            s += &define("PF_SD0", sigma / (1.0 - phi * phi).sqrt());
        }
        PfKind::Custom { source, origin, .. } => {
            custom = Some((source.clone(), origin.display().to_string()));
        }
    }
    s += &ziggurat_tables::<T>();
    s += "// ---- philox.cuh\n";
    s += PHILOX;
    match custom {
        None => {
            s += "// ---- models.cuh\n";
            s += MODELS;
        }
        Some((src, origin)) => {
            // The Gaussian prior helper of models.cuh, then the user's model.
            s += "#define PF_KIND_CUSTOM 1\n";
            s += MODELS;
            s += &format!("// ---- {origin}\n#line 1 \"{origin}\"\n");
            s += &src;
            s += "\n#line 1 \"pf.cu\"\n";
        }
    }
    s += &format!("#ifndef PF_AITEMS\n#define PF_AITEMS {ANCESTOR_ITEMS}\n#endif\n");
    s += &format!("#ifndef PF_LONG\n#define PF_LONG {OFFSPRING_LONG}\n#endif\n");
    s += &format!("#ifndef PF_PIECE\n#define PF_PIECE {OFFSPRING_PIECE}\n#endif\n");
    s += "// ---- pf.cu\n";
    s += PF;
    s += &format!(
        "#define PF_MN_CHUNK {}\n// ---- resample.cu\n",
        super::super::resample::CHUNK
    );
    s += RESAMPLE;
    Ok(s)
}

/// The ziggurat's tables as the kernels read them: the host's numbers rounded to `T`
/// (written as the f64 literals of those values, so the device reads the same bits).
pub(super) fn ziggurat_tables<T: Real>() -> String {
    use super::super::philox::{ziggurat, ZIG_R};
    let z = ziggurat();
    let real = |v: f64| literal(T::of(v).to_f64());
    let list = |vals: &[f64]| vals.iter().map(|v| real(*v)).collect::<Vec<_>>().join(", ");
    let k: Vec<String> = z.k.iter().map(|v| format!("{v}u")).collect();
    format!(
        "__device__ const unsigned PF_ZK[256] = {{{}}};\n__device__ const real_t PF_ZW[256] = {{{}}};\n__device__ const real_t PF_ZF[256] = {{{}}};\n#define PF_ZR ((real_t){})\n",
        k.join(", "),
        list(&z.w),
        list(&z.f),
        real(ZIG_R)
    )
}

/// Scheme codes of the resamplers in `kernels/resample.cu` (after pf.cu's 0..3).
pub(super) const SYSTEMATIC_GRID: u32 = 4;
pub(super) const STRATIFIED_GRID: u32 = 5;
pub(super) const MULTINOMIAL: u32 = 6;
pub(super) const SUBSETS: u32 = 7;

/// The kernel code of a resampler: `(scheme, Metropolis steps or subsets)`.
pub(super) fn scheme_of(r: Resampler) -> Result<(u32, u32)> {
    match r {
        Resampler::Systematic => Ok((0, 0)),
        Resampler::Stratified => Ok((1, 0)),
        Resampler::Metropolis(b) => Ok((2, b)),
        Resampler::Rejection => Ok((3, 0)),
        Resampler::SystematicGrid => Ok((SYSTEMATIC_GRID, 0)),
        Resampler::StratifiedGrid => Ok((STRATIFIED_GRID, 0)),
        Resampler::Multinomial => Ok((MULTINOMIAL, 0)),
        Resampler::Subsets(k) => Ok((SUBSETS, k)),
        other => Err(Error::Unsupported(format!(
            "resampling scheme {other} runs on the CPU only; on the GPU use systematic, stratified, multinomial, metropolis[:B], rejection, systematic:grid, stratified:grid or subsets[:S] (or run on the CPU)"
        ))),
    }
}

/// Blocks of `block` threads a chunk of `kernels/pf.cu` holds (`per`): enough chunks in
/// the whole grid to fill `sms` multiprocessors several times over, and no more, so that
/// the per-step combination of the chunks' records stays small.
pub fn chunk_per(b: usize, n: usize, sms: usize, block: u32) -> usize {
    let target = (8 * sms.max(1)).div_ceil(b.max(1)).max(1);
    n.div_ceil(block as usize * target).max(1)
}
