//! Nonlinear Gaussian filters (`kestrel bench --only nonlinear`): the EKF, UKF and CKF on
//! a coordinated turn with an estimated turn rate (nx 5) seen by a range-bearing radar
//! (ny 2), every output kept (means, covariances, log-likelihoods). The CPU (f64) at
//! 10^4 x 100; the GPU, when present, at 10^6 x 100 (issue 37's size) in f32 and f64,
//! and in f32 keeping each track's last state only, with the filter kernel's own time
//! and its share of the memory roofline in `extra`. Then the IMM of three UKF modes
//! (constant velocity and turns at +-0.02 rad/s, nx 4) on the same plots
//! (`nonlinear/imm-ukf`, mode probabilities kept too).
//! `KESTREL_BENCH_GPU_ONLY=1` skips the CPU runs; `KESTREL_BENCH_KEEP=last` keeps only
//! the GPU's last-state rows and the f32 IMM (a quick comparison of two builds of the
//! kernels).

use super::{time_runs, Record, Sink};
use kestrel::model::Prior;
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::nonlinear::{
    estimate_on, FilterKind, ImmModel, Measure, NonlinearJob, NonlinearModel, NonlinearOptions,
    NonlinearProblem, TurnRate,
};
use kestrel::{Device, Keep, Measurements, Real};

/// The H200's HBM3e bandwidth, bytes per second (the memory roofline).
const HBM_BYTES_PER_S: f64 = 4.8e12;

fn model() -> anyhow::Result<NonlinearModel> {
    Ok(NonlinearModel::coordinated_turn(
        1.0,
        0.5,
        TurnRate::Estimated { q_omega: 1e-4 },
        &Measure::RangeBearing {
            radar: [0.0, 0.0],
            r_range: 25.0,
            r_bearing: 1e-5,
        },
        Prior {
            x0: DVector::from_vec(vec![1000.0, -10.0, 500.0, 5.0, 0.02]),
            p0: DMatrix::from_diagonal(&DVector::from_vec(vec![100.0, 4.0, 100.0, 4.0, 1e-3])),
        },
    )?)
}

/// The IMM: nearly constant velocity and turns at +-0.02 rad/s, state [px, vx, py, vy].
fn imm() -> anyhow::Result<ImmModel> {
    let prior = Prior {
        x0: DVector::from_vec(vec![1000.0, -10.0, 500.0, 5.0]),
        p0: DMatrix::from_diagonal(&DVector::from_vec(vec![100.0, 4.0, 100.0, 4.0])),
    };
    let meas = Measure::RangeBearing {
        radar: [0.0, 0.0],
        r_range: 25.0,
        r_bearing: 1e-5,
    };
    let modes = [0.0, 0.02, -0.02]
        .iter()
        .map(|&w| {
            NonlinearModel::coordinated_turn(1.0, 0.5, TurnRate::Known(w), &meas, prior.clone())
        })
        .collect::<kestrel::Result<Vec<_>>>()?;
    Ok(ImmModel::new(
        modes,
        DMatrix::from_row_slice(3, 3, &[0.9, 0.05, 0.05, 0.1, 0.9, 0.0, 0.1, 0.0, 0.9]),
        DVector::from_vec(vec![0.8, 0.1, 0.1]),
        prior,
    )?)
}

/// Range-bearing plots of targets turning at 0.02 rad/s from the prior's mean, with
/// noise at the model's levels (a fixed generator: every run sees the same data).
fn plots(b: usize, t: usize) -> anyhow::Result<Measurements<f64>> {
    let mut s = 11u64;
    let mut u = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let mut data = Vec::with_capacity(b * t * 2);
    for _ in 0..b {
        let (mut px, mut vx, mut py, mut vy) =
            (1000.0 + 20.0 * u(), -10.0, 500.0 + 20.0 * u(), 5.0);
        let w: f64 = 0.02;
        for _ in 0..t {
            data.push(px.hypot(py) + 10.0 * u());
            data.push(py.atan2(px) + 0.006 * u());
            let (c, sn) = (w.cos(), w.sin());
            px += (sn * vx - (1.0 - c) * vy) / w;
            py += ((1.0 - c) * vx + sn * vy) / w;
            (vx, vy) = (c * vx - sn * vy, sn * vx + c * vy);
        }
    }
    Ok(Measurements::new(b, t, 2, data)?)
}

#[allow(clippy::too_many_arguments)]
fn one<T: Real>(
    sink: &mut Sink,
    device: Device,
    label: &str,
    kind: FilterKind,
    keep: Keep,
    problem: &NonlinearProblem,
    z: &Measurements<f64>,
    repeats: usize,
) {
    let z: Measurements<T> = z.cast();
    let problem = problem.clone();
    let opts = NonlinearOptions::default().with_kind(kind).with_keep(keep);
    let mut kernel = Vec::new();
    let times = time_runs(1, repeats, || {
        let r = estimate_on(device, &problem, &z, &opts, NonlinearJob::Filter);
        if device != Device::Cpu {
            kernel.push(kestrel::nonlinear::cuda::last_kernel_ms());
        }
        if let Err(e) = r {
            errln!("bench nonlinear: {e}");
        }
    });
    let (nx, ny) = (problem.nx(), problem.ny());
    let modes = match &problem {
        NonlinearProblem::Imm(i) => i.len(),
        NonlinearProblem::Single(_) => 0,
    };
    let mut r = Record::new(
        match (modes, keep) {
            (0, Keep::Last) => format!("nonlinear/{}/last-state", kind.name()),
            (0, _) => format!("nonlinear/{}", kind.name()),
            _ => format!("nonlinear/imm-{}", kind.name()),
        },
        label,
        T::NAME,
        z.tracks(),
        z.steps(),
        nx,
        ny,
        &times,
    );
    if !kernel.is_empty() {
        let ks = super::median(&kernel) / 1e3;
        let steps = (z.tracks() * z.steps()) as f64;
        // The kernel reads z and writes every output once (the last state: once a track).
        let sz = std::mem::size_of::<T>() as f64;
        let out = ((nx + nx * nx + 1 + modes) * z.tracks()) as f64 * sz;
        let bytes = steps * ny as f64 * sz
            + if keep == Keep::Last {
                out
            } else {
                out * z.steps() as f64
            };
        r.extra = serde_json::json!({
            "kernel_s": ks,
            "kernel_target_steps_per_s": steps / ks,
            "kernel_bytes": bytes,
            "memory_roofline_fraction": bytes / ks / HBM_BYTES_PER_S,
        });
    }
    sink.push(r);
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let m = NonlinearProblem::Single(model()?);
    let imm = NonlinearProblem::Imm(imm()?);
    let repeats = if quick { 2 } else { 5 };
    let gpu_only = std::env::var("KESTREL_BENCH_GPU_ONLY").is_ok_and(|v| v == "1");
    let kinds = [FilterKind::Ekf, FilterKind::Ukf, FilterKind::Ckf];
    if !gpu_only {
        let cpu_label = format!("cpu ({} threads)", rayon::current_num_threads());
        let z = plots(if quick { 1_000 } else { 10_000 }, 100)?;
        for kind in kinds {
            one::<f64>(
                sink,
                Device::Cpu,
                &cpu_label,
                kind,
                Keep::All,
                &m,
                &z,
                repeats,
            );
        }
        let ukf = FilterKind::Ukf;
        one::<f64>(
            sink,
            Device::Cpu,
            &cpu_label,
            ukf,
            Keep::All,
            &imm,
            &z,
            repeats,
        );
    }
    if kestrel::cuda::available(0).is_ok() {
        let gpu_label = format!(
            "cuda:0 ({})",
            kestrel::cuda::device_name(0).unwrap_or_default()
        );
        let z = plots(if quick { 10_000 } else { 1_000_000 }, 100)?;
        let dev = Device::Cuda(0);
        let last_only = std::env::var("KESTREL_BENCH_KEEP").is_ok_and(|v| v == "last");
        for kind in kinds {
            if last_only {
                one::<f32>(sink, dev, &gpu_label, kind, Keep::Last, &m, &z, 7);
                continue;
            }
            one::<f32>(sink, dev, &gpu_label, kind, Keep::All, &m, &z, 3);
            one::<f32>(sink, dev, &gpu_label, kind, Keep::Last, &m, &z, 3);
            one::<f64>(sink, dev, &gpu_label, kind, Keep::All, &m, &z, 3);
        }
        let ukf = FilterKind::Ukf;
        if last_only {
            one::<f32>(sink, dev, &gpu_label, ukf, Keep::All, &imm, &z, 3);
            return Ok(());
        }
        one::<f32>(sink, dev, &gpu_label, ukf, Keep::All, &imm, &z, 3);
        one::<f64>(sink, dev, &gpu_label, ukf, Keep::All, &imm, &z, 3);
    }
    Ok(())
}
