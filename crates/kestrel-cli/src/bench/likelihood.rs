//! Per-step log-likelihoods (`kestrel bench --only likelihood`): the seed's models
//! (AR(10) with measurement noise; random walks in 2 and 10 dimensions), T = 10^3 ...
//! 10^7, B = 1 and B = 10^3, every method on the CPU and (when present) the GPU, with
//! the windowed filter's largest error against `exact` beside its time, fully observed
//! and with a measurement missing every 20 steps. `KESTREL_BENCH_GPU_ONLY=1` skips the
//! CPU runs.

use super::{time_runs, Record, Sink};
use kestrel::likelihood::{self, loglik, Method, Options};
use kestrel::model::{model_from_toml, random_walk};
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model, Real};
use std::path::Path;

/// The AR(10) noise model of `examples/ar10-seismic-noise.toml`, read from the file.
fn ar10() -> anyhow::Result<Model> {
    let text = include_str!("../../../../examples/ar10-seismic-noise.toml");
    Ok(model_from_toml(
        text,
        Path::new("examples/ar10-seismic-noise.toml"),
    )?)
}

struct Case {
    name: &'static str,
    model: Model,
    tracks: usize,
    steps: usize,
    missing_every: Option<usize>,
    /// A configuration of the targets (run in quick mode too).
    target: bool,
}

fn data(c: &Case) -> anyhow::Result<Measurements<f64>> {
    // Long series are simulated as one track and copied: simulation is not what is timed.
    let mut z = simulate(&c.model, c.tracks.min(4), c.steps, 1, 0.0)?.measurements;
    if z.tracks() < c.tracks {
        let one = z.data().to_vec();
        let data = one
            .iter()
            .cycle()
            .take(one.len() / z.tracks() * c.tracks)
            .copied()
            .collect();
        z = Measurements::new(c.tracks, z.steps(), z.ny(), data)?;
    }
    if let Some(e) = c.missing_every {
        let ny = z.ny();
        for b in 0..z.tracks() {
            for k in (e - 1..z.steps()).step_by(e) {
                let o = (b * z.steps() + k) * ny;
                z.data_mut()[o..o + ny].fill(f64::NAN);
            }
        }
    }
    Ok(z)
}

fn worst(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[allow(clippy::too_many_arguments)]
fn one<T: Real>(
    sink: &mut Sink,
    c: &Case,
    z: &Measurements<T>,
    device: Device,
    dev_name: &str,
    method: Method,
    label: &str,
    exact: Option<&[f64]>,
    steady: Option<f64>,
    repeats: usize,
) -> anyhow::Result<()> {
    let opts = Options::default().with_steady(steady);
    let mut last = None;
    let mut err = None;
    let times = time_runs(1, repeats, || {
        last = Some(loglik(device, &c.model, z, method, &opts));
    });
    let out = match last {
        Some(Ok(o)) => o,
        Some(Err(e)) => {
            errln!("bench likelihood {label} on {dev_name}: {e}");
            return Ok(());
        }
        None => return Ok(()),
    };
    if let Some(ex) = exact {
        let v: Vec<f64> = out.values.iter().map(|v| v.to_f64()).collect();
        err = Some(worst(ex, &v));
    }
    let mut r = Record::new(
        format!(
            "loglik/{}/{label}{}",
            c.name,
            if c.missing_every.is_some() {
                "/missing20"
            } else {
                ""
            }
        ),
        dev_name,
        T::NAME,
        c.tracks,
        c.steps,
        c.model.nx(),
        c.model.ny(),
        &times,
    );
    let kernel_ms = if matches!(device, Device::Cuda(_))
        && matches!(
            method,
            Method::Window(_) | Method::WindowAuto(_) | Method::Parallel
        ) {
        Some(likelihood::cuda::last_kernel_ms())
    } else {
        None
    };
    r.extra = serde_json::json!({
        "method": label,
        "window": out.window,
        "bound": out.bound,
        "max_abs_error_vs_exact": err,
        "kernel_ms": kernel_ms,
        "missing_every": c.missing_every,
    });
    let name = r.name.clone();
    let median = r.median_s;
    sink.push(r);
    SUMMARY.with(|s| {
        s.borrow_mut().push(format!(
            "{:<34} {:<18} {:<4} {:>5} {:>9} {:>7} {:>11} {:>11} {:>10}",
            name,
            dev_name.chars().take(18).collect::<String>(),
            T::NAME,
            c.tracks,
            c.steps,
            out.window.map_or("-".into(), |w| w.to_string()),
            super::fmt_time(median),
            kernel_ms.map_or("-".into(), |k| format!("{k:.3} ms")),
            err.map_or("-".into(), |e| format!("{e:.2e}")),
        ))
    });
    Ok(())
}

thread_local! {
    /// The closing table's lines.
    static SUMMARY: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let gpu_only = std::env::var("KESTREL_BENCH_GPU_ONLY").is_ok_and(|v| v == "1");
    let gpu = kestrel::cuda::available(0).is_ok();
    let gpu_name = if gpu {
        format!(
            "cuda:0 ({})",
            kestrel::cuda::device_name(0).unwrap_or_default()
        )
    } else {
        String::new()
    };
    let lengths: Vec<usize> = if quick {
        vec![1_000, 100_000]
    } else {
        vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    };
    let mut cases = Vec::new();
    for &t in &lengths {
        cases.push(Case {
            name: "ar10",
            model: ar10()?,
            tracks: 1,
            steps: t,
            missing_every: None,
            target: t == 10_000_000,
        });
    }
    if quick {
        // The targets: AR(10), T = 10^7 (the CPU's exact, the GPU's window:auto and
        // parallel) and B = 10^3 series of T = 10^4.
        cases.push(Case {
            name: "ar10",
            model: ar10()?,
            tracks: 1,
            steps: 10_000_000,
            missing_every: None,
            target: true,
        });
    }
    cases.push(Case {
        name: "ar10",
        model: ar10()?,
        tracks: 1,
        steps: if quick { 100_000 } else { 1_000_000 },
        missing_every: Some(20),
        target: false,
    });
    cases.push(Case {
        name: "ar10",
        model: ar10()?,
        tracks: 1_000,
        steps: 10_000,
        missing_every: None,
        target: true,
    });
    for (name, dims) in [("rw2", 2usize), ("rw10", 10)] {
        for t in [10_000usize, if quick { 100_000 } else { 1_000_000 }] {
            cases.push(Case {
                name,
                model: random_walk(dims, 1.0, 2.0, 10.0)?,
                tracks: 1,
                steps: t,
                missing_every: None,
                target: false,
            });
        }
        cases.push(Case {
            name,
            model: random_walk(dims, 1.0, 2.0, 10.0)?,
            tracks: 1_000,
            steps: if quick { 1_000 } else { 10_000 },
            missing_every: None,
            target: false,
        });
    }
    SUMMARY.with(|s| s.borrow_mut().clear());
    for c in &cases {
        let z = data(c)?;
        let n = c.tracks * c.steps;
        let repeats = if n >= 1_000_000 { 3 } else { 5 };
        // The reference: exact, with the steady state where the series is long.
        let steady = (n > 200_000).then_some(1e-12);
        let exact = loglik(
            Device::Cpu,
            &c.model,
            &z,
            Method::Exact,
            &Options::default().with_steady(steady),
        )?;
        let ex: Vec<f64> = exact.values.clone();
        if !gpu_only {
            if n <= 1_000_000 || c.target {
                one(
                    sink,
                    c,
                    &z,
                    Device::Cpu,
                    "cpu",
                    Method::Exact,
                    "exact",
                    None,
                    None,
                    repeats,
                )?;
            }
            one(
                sink,
                c,
                &z,
                Device::Cpu,
                "cpu",
                Method::Exact,
                "exact-steady:1e-9",
                Some(&ex),
                Some(1e-9),
                repeats,
            )?;
            if n <= 1_000_000 && c.model.nx() <= 10 {
                one(
                    sink,
                    c,
                    &z,
                    Device::Cpu,
                    "cpu",
                    Method::Parallel,
                    "parallel",
                    Some(&ex),
                    None,
                    repeats,
                )?;
            }
            one(
                sink,
                c,
                &z,
                Device::Cpu,
                "cpu",
                Method::WindowAuto(1e-6),
                "window:auto:1e-6",
                Some(&ex),
                None,
                repeats,
            )?;
            if c.steps == 100_000 || (quick && c.steps == 1_000 && c.tracks == 1) {
                for w in [4usize, 8, 16, 24, 32, 48, 64, 96, 128] {
                    one(
                        sink,
                        c,
                        &z,
                        Device::Cpu,
                        "cpu",
                        Method::Window(w),
                        &format!("window:{w}"),
                        Some(&ex),
                        None,
                        3,
                    )?;
                }
            }
        }
        if gpu {
            let z32: Measurements<f32> = z.cast();
            let d = Device::Cuda(0);
            one(
                sink,
                c,
                &z32,
                d,
                &gpu_name,
                Method::WindowAuto(1e-6),
                "window:auto:1e-6",
                Some(&ex),
                None,
                repeats,
            )?;
            if n <= 10_000_000 {
                one(
                    sink,
                    c,
                    &z32,
                    d,
                    &gpu_name,
                    Method::Parallel,
                    "parallel",
                    Some(&ex),
                    None,
                    repeats,
                )?;
            }
            if c.steps == 100_000 {
                for w in [8usize, 16, 32, 64, 128] {
                    one(
                        sink,
                        c,
                        &z32,
                        d,
                        &gpu_name,
                        Method::Window(w),
                        &format!("window:{w}"),
                        Some(&ex),
                        None,
                        3,
                    )?;
                }
            }
        }
    }
    outln!(
        "\nper-step log-likelihoods: window = N used, kernel = device time of the kernels \
         (data resident), error = largest |loglik - exact| per step"
    );
    outln!(
        "{:<34} {:<18} {:<4} {:>5} {:>9} {:>7} {:>11} {:>11} {:>10}",
        "name",
        "device",
        "prec",
        "B",
        "T",
        "window",
        "median",
        "kernel",
        "error"
    );
    SUMMARY.with(|s| {
        for l in s.borrow().iter() {
            outln!("{l}");
        }
    });
    Ok(())
}
