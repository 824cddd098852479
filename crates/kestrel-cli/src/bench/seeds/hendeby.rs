//! Hendeby et al.: Figures 5-6 (CPU vs GPU against particles, and the GPU time by phase).

use super::{cpu_name, g4, gpu_name, median, rec, table, timed, Chart, Series, Sink};
use kestrel::{Device, Measurements};
use serde_json::json;
use std::path::Path;

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
    use kestrel::particle::{particle_filter_on, pf_model_from_toml, PfOptions};
    let gpu = gpu_name();
    let cpu = cpu_name();
    let model = pf_model_from_toml(crate::cmd::pf::DEMO_MODEL, Path::new("bench model"))?;
    let t = if quick { 200 } else { 1000 };
    let (_, z) = kestrel::particle::simulate(&model, 1, t, 1, 0.0)?;
    let z: Measurements<f32> = z.cast();
    let sizes: &[usize] = if quick {
        &[100, 1_000, 10_000, 100_000]
    } else {
        &[
            100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000,
        ]
    };
    // The CPU at 10^6 particles x 1000 steps takes tens of seconds a run: one run there.
    let cpu_max = if quick { 10_000 } else { 1_000_000 };
    let (mut c_cpu, mut c_gpu) = (Vec::new(), Vec::new());
    let mut shares: Vec<Vec<(f64, f64)>> = vec![Vec::new(); kestrel::particle::cuda::PHASES.len()];
    let mut rows = Vec::new();
    for &n in sizes {
        let mut opts = PfOptions::new(n);
        opts.ess_threshold = 1.0;
        let mut row = vec![n.to_string()];
        if n <= cpu_max {
            let (tc, _) = timed(|| particle_filter_on(Device::Cpu, &model, &z, &opts))?;
            let s = median(&tc);
            sink.push(rec(
                format!("seed-hendeby/cpu/N={n}"),
                &cpu,
                "f32",
                1,
                t,
                4,
                2,
                &tc,
                json!({"particles": n, "resampler": "systematic", "every_step": true}),
            ));
            c_cpu.push((n as f64, s));
            row.push(g4(s * 1e3));
        } else {
            row.push("-".into());
        }
        if let Some(dev) = &gpu {
            let (tg, _) = timed(|| particle_filter_on(Device::Cuda(0), &model, &z, &opts))?;
            let s = median(&tg);
            let (_, ph) = kestrel::particle::cuda::phase_times(0, &model, &z, &opts)?;
            let tot: f64 = ph.iter().sum();
            let mut extra = json!({"particles": n, "resampler": "systematic", "every_step": true});
            for (k, name) in kestrel::particle::cuda::PHASES.iter().enumerate() {
                extra[format!("share_{name}")] = (ph[k] / tot).into();
                shares[k].push((n as f64, 100.0 * ph[k] / tot));
            }
            sink.push(rec(
                format!("seed-hendeby/gpu/N={n}"),
                dev,
                "f32",
                1,
                t,
                4,
                2,
                &tg,
                extra,
            ));
            c_gpu.push((n as f64, s));
            row.push(g4(s * 1e3));
            row.push(
                c_cpu
                    .last()
                    .filter(|c| c.0 == n as f64)
                    .map_or("-".into(), |c| g4(c.1 / s)),
            );
            row.extend(ph.iter().map(|p| format!("{:.0}%", 100.0 * p / tot)));
        }
        rows.push(row);
    }
    let mut head = vec!["N", "CPU ms", "GPU ms", "GPU/CPU speed-up"];
    head.extend(kestrel::particle::cuda::PHASES.iter().copied());
    table(
        &format!("Hendeby et al. Figs 5-6: bootstrap filter, T = {t}, systematic resampling every step (paper: CPU faster for few particles, GPU for many; resampling the largest and growing share)"),
        &head,
        &rows,
    );
    let mut charts = vec![Chart {
        title: "Hendeby Fig 5: seconds vs particles (T = 1000)".into(),
        x: "particles N".into(),
        y: "seconds".into(),
        log_x: true,
        series: vec![Series::ours(format!("CPU, {cpu}"), c_cpu)],
    }];
    if let Some(dev) = &gpu {
        charts[0]
            .series
            .push(Series::ours(format!("GPU, {dev}"), c_gpu));
        charts.push(Chart {
            title: "Hendeby Fig 6: share of GPU time by phase (%)".into(),
            x: "particles N".into(),
            y: "percent of GPU time".into(),
            log_x: true,
            series: kestrel::particle::cuda::PHASES
                .iter()
                .zip(shares)
                .map(|(n, p)| Series::ours(*n, p))
                .collect(),
        });
    }
    Ok(charts)
}
