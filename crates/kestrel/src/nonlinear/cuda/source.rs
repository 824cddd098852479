//! The CUDA translation unit of one nonlinear model: its functions emitted from their
//! tapes (one register a line, the CPU's operations), its matrices and the filter's
//! sigma-point rule as constants, then the family's kernels. NVRTC compiles it once per
//! model and precision; the runtime caches it by source.

use super::super::expr::{Bin, Ins, Tape, Un};
use super::super::models::NonlinearModel;
use super::super::sigma::SigmaRule;
use crate::linalg::Real;
use std::fmt::Write;

const COMMON: &str = include_str!("../kernels/common.cuh");
pub(super) const FILTER: &str = include_str!("../kernels/filter.cu");
pub(super) const IMM: &str = include_str!("../kernels/imm.cu");
pub(super) const LINEARISE: &str = include_str!("../kernels/linearise.cu");

/// A constant as CUDA source, exact (Rust prints the shortest string that reads back as
/// the same f64).
fn lit(v: f64) -> String {
    if v.is_nan() {
        "((real)NAN)".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "((real)INFINITY)"
        } else {
            "((real)-INFINITY)"
        }
        .into()
    } else {
        format!("((real){v:e})")
    }
}

fn array(out: &mut String, name: &str, ty: &str, vals: &[String]) {
    let vals = if vals.is_empty() {
        vec!["0".to_string()]
    } else {
        vals.to_vec()
    };
    let _ = writeln!(
        out,
        "__constant__ {ty} {name}[{}] = {{{}}};",
        vals.len(),
        vals.join(", ")
    );
}

/// `tape` as the device function `name(x, y)`.
pub(crate) fn function(out: &mut String, name: &str, tape: &Tape) {
    let _ = writeln!(
        out,
        "__device__ __forceinline__ void {name}(const real* __restrict__ x, real* __restrict__ y) {{"
    );
    let ins = tape.instructions();
    // A sine and a cosine of one register share one range reduction (`k_sincos`),
    // emitted at the first of the two: sincos[i] = (sine's register, cosine's).
    let mut sincos = vec![None; ins.len()];
    let mut skip = vec![false; ins.len()];
    for (i, a) in ins.iter().enumerate() {
        if let Ins::Un(Un::Sin, x) = *a {
            if let Some(j) = ins
                .iter()
                .position(|b| matches!(*b, Ins::Un(Un::Cos, y) if y == x))
            {
                // The tape holds each operation once; a repeat is left unpaired.
                if sincos[i.min(j)].is_none() && !skip[i.max(j)] {
                    sincos[i.min(j)] = Some((i, j));
                    skip[i.max(j)] = true;
                }
            }
        }
    }
    for (i, ins) in ins.iter().enumerate() {
        if skip[i] {
            continue;
        }
        if let (Some((si, ci)), Ins::Un(_, a)) = (sincos[i], ins) {
            let _ = writeln!(
                out,
                "    real r{si}, r{ci};\n    k_sincos(r{a}, &r{si}, &r{ci});"
            );
            continue;
        }
        let e = match *ins {
            Ins::Const(c) => lit(c),
            Ins::Var(v) => format!("x[{v}]"),
            Ins::Un(op, a) => {
                let f = match op {
                    Un::Neg => "-",
                    Un::Sin => "k_sin",
                    Un::Cos => "k_cos",
                    Un::Tan => "tan",
                    Un::Asin => "asin",
                    Un::Acos => "acos",
                    Un::Atan => "atan",
                    Un::Sinh => "sinh",
                    Un::Cosh => "cosh",
                    Un::Tanh => "tanh",
                    Un::Exp => "exp",
                    Un::Log => "log",
                    Un::Sqrt => "sqrt",
                    Un::Abs => "fabs",
                    Un::Sign => "k_sign",
                };
                format!("{f}(r{a})")
            }
            Ins::Bin(op, a, b) => match op {
                Bin::Add => format!("r{a} + r{b}"),
                Bin::Sub => format!("r{a} - r{b}"),
                Bin::Mul => format!("r{a} * r{b}"),
                Bin::Div => format!("r{a} / r{b}"),
                _ => {
                    let f = match op {
                        Bin::Pow => "k_pow",
                        Bin::Atan2 => "atan2",
                        Bin::Hypot => "hypot",
                        Bin::Min => "fmin",
                        Bin::Max => "fmax",
                        Bin::Le => "k_le",
                        Bin::SinOver => "k_sin_over",
                        Bin::CosOver => "k_cos_over",
                        Bin::DSinOver => "k_dsin_over",
                        Bin::DCosOver => "k_dcos_over",
                        Bin::Add | Bin::Sub | Bin::Mul | Bin::Div => unreachable!(),
                    };
                    format!("{f}(r{a}, r{b})")
                }
            },
        };
        let _ = writeln!(out, "    const real r{i} = {e};");
    }
    for (k, r) in tape.output_registers().iter().enumerate() {
        let _ = writeln!(out, "    y[{k}] = r{r};");
    }
    out.push_str("}\n");
}

/// The whole translation unit for `model` in precision `T` with the sigma-point `rule`
/// (`None`: the EKF). Public for the tests that compile the kernels as C++.
pub fn source<T: Real>(model: &NonlinearModel, rule: Option<&SigmaRule>) -> String {
    source_of::<T>(&[model], rule, 1, None)
}

/// The translation unit of the modes `models` (one model: mode 0), the sigma-point
/// `rule` (`None`: the EKF, `iterations > 1`: the iterated EKF) and, for an IMM, its
/// transition matrix and initial mode probabilities (the kernel `nl_imm`). Every mode
/// shares the prior and the angle components of mode 0. Public for the tests that
/// compile the kernels as C++.
pub fn source_of<T: Real>(
    models: &[&NonlinearModel],
    rule: Option<&SigmaRule>,
    iterations: usize,
    imm: Option<(&nalgebra::DMatrix<f64>, &nalgebra::DVector<f64>)>,
) -> String {
    let model = models[0];
    let (nx, ny, r) = (model.nx(), model.ny(), models.len());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "typedef {} real;",
        if T::NAME == "f32" { "float" } else { "double" }
    );
    let _ = writeln!(
        s,
        "#define NX {nx}\n#define NY {ny}\n#define NANG {}\n#define NMODE {r}\n#define ITER {}",
        model.angles.len(),
        iterations.max(1)
    );
    // The semi-definite factor's tolerance for a vanishing pivot: the CPU's (1e-12 of the
    // largest diagonal) in f64, and f32's rounding in f32.
    let tol = if T::NAME == "f32" { 1e-5 } else { 1e-12 };
    let _ = writeln!(s, "#define PSD_TOL ((real){tol:e})");
    match rule {
        Some(r) => {
            let central = usize::from(r.len() == 2 * nx + 1);
            let _ = writeln!(
                s,
                "#define SIGMA 1\n#define NP {}\n#define CENTRAL {central}\n#define SCALE {}",
                r.len(),
                lit(r.scale())
            );
            array(
                &mut s,
                "WM",
                "real",
                &r.wm().iter().map(|&v| lit(v)).collect::<Vec<_>>(),
            );
            array(
                &mut s,
                "WC",
                "real",
                &r.wc().iter().map(|&v| lit(v)).collect::<Vec<_>>(),
            );
        }
        None => s.push_str("#define SIGMA 0\n"),
    }
    let mat = |m: &nalgebra::DMatrix<f64>| -> Vec<String> {
        // Row-major, as the kernels index them.
        (0..m.nrows())
            .flat_map(|i| (0..m.ncols()).map(move |j| (i, j)))
            .map(|(i, j)| lit(m[(i, j)]))
            .collect()
    };
    let each = |f: &dyn Fn(&NonlinearModel) -> Vec<String>| -> Vec<String> {
        models.iter().flat_map(|m| f(m)).collect()
    };
    array(&mut s, "QM", "real", &each(&|m| mat(&m.q)));
    array(&mut s, "RM", "real", &each(&|m| mat(&m.r)));
    array(
        &mut s,
        "X0",
        "real",
        &model.prior.x0.iter().map(|&v| lit(v)).collect::<Vec<_>>(),
    );
    array(&mut s, "P00", "real", &mat(&model.prior.p0));
    // The angle components as a function that folds to a constant in unrolled loops (a
    // constant array indexed there would put the points' arrays in local memory).
    let ang = model
        .angles
        .iter()
        .enumerate()
        .fold("0".to_string(), |rest, (i, a)| {
            format!("a == {i} ? {a} : ({rest})")
        });
    let _ = writeln!(
        s,
        "__device__ __forceinline__ constexpr int k_ang(int a) {{ return {ang}; }}"
    );
    if let Some((tr, init)) = imm {
        array(&mut s, "TR", "real", &mat(tr));
        array(
            &mut s,
            "MU0",
            "real",
            &init.iter().map(|&v| lit(v)).collect::<Vec<_>>(),
        );
    }
    s.push_str(crate::cuda::DEVICE_HEADER);
    s.push_str(COMMON);
    let names: [(&str, &str); 2] = if rule.is_some() {
        [("model_f", "f"), ("model_h", "h")]
    } else {
        [("model_fjac", "f"), ("model_hjac", "h")]
    };
    for (name, _) in names {
        let _ = writeln!(
            s,
            "template <int J> __device__ __forceinline__ void {name}(const real* __restrict__ x, real* __restrict__ y);"
        );
    }
    for (j, m) in models.iter().enumerate() {
        for (name, which) in names {
            let f = if which == "f" { &m.f } else { &m.h };
            let tape = if rule.is_some() {
                f.tape()
            } else {
                f.jacobian_tape()
            };
            function(&mut s, &format!("{name}_{j}"), tape);
            let _ = writeln!(
                s,
                "template <> __device__ __forceinline__ void {name}<{j}>(const real* __restrict__ x, real* __restrict__ y) {{ {name}_{j}(x, y); }}"
            );
        }
    }
    s.push_str(FILTER);
    if imm.is_some() {
        // The modes by index, for the IMM's loops over them (unrolled, so each call is
        // to one mode's code).
        let cases = |call: &str| -> String {
            (0..r)
                .map(|j| {
                    format!(
                        "case {j}: return {};",
                        call.replace("<J>", &format!("<{j}>"))
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            s,
            "__device__ __forceinline__ bool predict_mode(int j, real* m, real* P) {{ switch (j) {{ {} default: return false; }} }}",
            cases("predict<J>(m, P)")
        );
        let _ = writeln!(
            s,
            "__device__ __forceinline__ int update_mode(int j, const real* z, real* m, real* P, real* ll) {{ switch (j) {{ {} default: return 2; }} }}",
            cases("update<J>(z, m, P, ll)")
        );
        s.push_str(IMM);
    }
    s
}

/// The translation unit of the parallel iterated smoother's linearisation
/// (`kernels/linearise.cu`) for `model` and its filter (`rule`: `None` for the EKF and
/// IEKF): the model in f64, as the CPU linearises, writing the scan's model records and
/// measurements in `T`.
pub fn linearise_source<T: Real>(model: &NonlinearModel, rule: Option<&SigmaRule>) -> String {
    let mut s = source_of::<f64>(&[model], rule, 1, None);
    let out = if T::NAME == "f32" { "float" } else { "double" };
    let _ = writeln!(s, "typedef {out} lin_out;");
    s.push_str(LINEARISE);
    s
}
