//! Lin, Moore & Russell: Figures 4-6 (the windowed filter against T, and its error
//! against the window).

use super::{cpu_name, g4, gpu_name, median, rec, table, timed, Chart, Series, Sink};
use kestrel::{Device, Measurements, Model};
use serde_json::json;
use std::path::Path;

fn seismic() -> anyhow::Result<Model> {
    Ok(kestrel::model::model_from_toml(
        include_str!("../../../../../examples/seismic.toml"),
        Path::new("examples/seismic.toml"),
    )?)
}

fn ar10() -> anyhow::Result<Model> {
    Ok(kestrel::model::model_from_toml(
        include_str!("../../../../../examples/ar10-seismic-noise.toml"),
        Path::new("examples/ar10-seismic-noise.toml"),
    )?)
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
    use kestrel::likelihood::{loglik, Method, Options};
    let gpu = gpu_name();
    let cpu = cpu_name();
    let lengths: Vec<usize> = (5..=12).map(|k| 1usize << k).collect();
    let rw2 = kestrel::model::random_walk(2, 1.0, 2.0, 10.0)?;
    let rw10 = kestrel::model::random_walk(10, 1.0, 2.0, 10.0)?;
    let ar = ar10()?;
    let cases: [(&str, &Model, usize, Option<usize>); 4] = [
        ("RW 2-D", &rw2, 10, None),
        ("RW 10-D", &rw10, 10, None),
        ("AR(10)", &ar, 11, None),
        ("AR(10), missing every 20", &ar, 11, Some(20)),
    ];
    let mut charts = Vec::new();
    let mut rows = Vec::new();
    let opts = Options::default();
    for (name, model, window, missing) in cases {
        let (mut c_cpu, mut c_gpu, mut c_par) = (Vec::new(), Vec::new(), Vec::new());
        for &t in &lengths {
            let mut z = kestrel::sim::simulate(model, 1, t, 9, 0.0)?.measurements;
            if let Some(e) = missing {
                let ny = z.ny();
                let mut data = z.data().to_vec();
                for k in (e - 1..t).step_by(e) {
                    data[k * ny..(k + 1) * ny].fill(f64::NAN);
                }
                z = Measurements::new(1, t, ny, data)?;
            }
            let z32: Measurements<f32> = z.cast();
            // The paper's serial baseline: the sequential filter (its C++ one stops
            // updating the covariance once it has converged: kestrel's steady state).
            let serial_opts = if name.starts_with("AR") {
                Options::default().with_steady(Some(1e-9))
            } else {
                Options::default()
            };
            let (t_cpu, _) = timed(|| loglik(Device::Cpu, model, &z, Method::Exact, &serial_opts))?;
            let s_cpu = median(&t_cpu);
            sink.push(rec(
                format!("seed-lin/{name}/cpu-sequential/T={t}"),
                &cpu,
                "f64",
                1,
                t,
                model.nx(),
                model.ny(),
                &t_cpu,
                json!({"model": name, "method": "exact"}),
            ));
            c_cpu.push((t as f64, s_cpu));
            let mut row = vec![name.to_string(), t.to_string(), g4(s_cpu * 1e3)];
            if let Some(dev) = &gpu {
                let exact_ll = loglik(Device::Cpu, model, &z, Method::Exact, &opts)?.values;
                let (tg, out) =
                    timed(|| loglik(Device::Cuda(0), model, &z32, Method::Window(window), &opts))?;
                let err = out
                    .values
                    .iter()
                    .zip(&exact_ll)
                    .fold(0.0f64, |m, (a, b)| m.max((f64::from(*a) - b).abs()));
                let s = median(&tg);
                sink.push(rec(
                    format!("seed-lin/{name}/gpu-window:{window}/T={t}"),
                    dev,
                    "f32",
                    1,
                    t,
                    model.nx(),
                    model.ny(),
                    &tg,
                    json!({"model": name, "window": window, "max_abs_err_per_step": err, "speedup_vs_cpu_sequential": s_cpu / s}),
                ));
                c_gpu.push((t as f64, s));
                let (tp, _) =
                    timed(|| loglik(Device::Cuda(0), model, &z32, Method::Parallel, &opts))?;
                let sp = median(&tp);
                sink.push(rec(
                    format!("seed-lin/{name}/gpu-parallel/T={t}"),
                    dev,
                    "f32",
                    1,
                    t,
                    model.nx(),
                    model.ny(),
                    &tp,
                    json!({"model": name, "speedup_vs_cpu_sequential": s_cpu / sp}),
                ));
                c_par.push((t as f64, sp));
                row.extend([g4(s * 1e3), g4(s_cpu / s), g4(err)]);
            }
            rows.push(row);
        }
        if let (Some(first), Some(last)) = (c_gpu.first(), c_gpu.last()) {
            outln!(
                "seed lin: {name}: the GPU window at T = 4096 takes {:.2}x its time at T = 32 (paper: RW 2-D 1.05x, RW 10-D 2.8x)",
                last.1 / first.1
            );
        }
        let mut series = vec![Series::ours(format!("sequential, {cpu}"), c_cpu)];
        if let Some(dev) = &gpu {
            series.push(Series::ours(format!("window n = {window}, {dev}"), c_gpu));
            series.push(Series::ours("parallel scan (exact), GPU", c_par));
        }
        charts.push(Chart {
            title: format!("Lin Figs 4-5: {name}, seconds vs T"),
            x: "T (steps)".into(),
            y: "seconds".into(),
            log_x: true,
            series,
        });
    }
    table(
        "Lin, Moore & Russell Figs 4-5 (ms; paper: RW 10-D 470x over serial Python at T = 4096, AR(10) up to 7x with missing data)",
        &["model", "T", "CPU sequential", "GPU window", "speed-up", "max |err| per step"],
        &rows,
    );
    // Figure 6: the largest per-step error of the window against the exact filter.
    let sm = seismic()?;
    let t = if quick { 1024 } else { 4096 };
    let windows: Vec<usize> = vec![
        1, 2, 3, 4, 6, 8, 10, 11, 12, 16, 20, 32, 48, 64, 96, 128, 192, 256, 384,
    ];
    let mut series = Vec::new();
    let mut rows = Vec::new();
    for (name, model) in [
        ("seismic (examples/seismic.toml)", &sm),
        ("AR(10)", &ar),
        ("RW 2-D", &rw2),
    ] {
        let z = kestrel::sim::simulate(model, 1, t, 13, 0.0)?.measurements;
        let exact = loglik(Device::Cpu, model, &z, Method::Exact, &opts)?.values;
        let mut p = Vec::new();
        for &n in &windows {
            let got = loglik(Device::Cpu, model, &z, Method::Window(n), &opts)?.values;
            let err = got
                .iter()
                .zip(&exact)
                .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            let mean = got
                .iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).abs())
                .sum::<f64>()
                / t as f64;
            sink.push(rec(
                format!("seed-lin/fig6/{name}/window:{n}"),
                &cpu,
                "f64",
                1,
                t,
                model.nx(),
                model.ny(),
                &[f64::NAN],
                json!({"model": name, "window": n, "max_abs_err_per_step": err, "mean_abs_err_per_step": mean}),
            ));
            p.push((n as f64, err.max(1e-16)));
            rows.push(vec![name.to_string(), n.to_string(), g4(err), g4(mean)]);
        }
        series.push(Series::ours(name, p));
    }
    table(
        &format!(
            "Lin Fig 6: |window - exact| of the per-step log-likelihood vs window n (T = {t}, f64)"
        ),
        &["model", "n", "max", "mean"],
        &rows,
    );
    charts.push(Chart {
        title: "Lin Fig 6: largest per-step error vs window".into(),
        x: "window n (steps)".into(),
        y: "max |loglik error| per step".into(),
        log_x: true,
        series,
    });
    Ok(charts)
}
