//! Tager 2013: thesis Tables 2.4 (the Kalman filter, CPU vs GPU against data size) and
//! 3.2 (retrodiction of the means).

use super::{cpu_name, g4, gpu_name, median, opt, rec, table, timed, Chart, Series, Sink};
use kestrel::{Device, Estimates, FilterOptions, ScanAlgorithm};
use serde_json::json;

/// Thesis Table 2.4: (data size, CPU s, GPU s), Intel Core i7 870 and GeForce GTX 570.
const TAGER_2_4: [(usize, f64, f64); 13] = [
    (64, 0.005824, 0.000734),
    (128, 0.034944, 0.001281),
    (256, 0.009531, 0.00213),
    (512, 0.011083, 0.003686),
    (1024, 1.507853, 0.007249),
    (2048, 1.046539, 0.013867),
    (4096, 0.33041, 0.027721),
    (8192, 0.419372, 0.054891),
    (16384, 0.335895, 0.109429),
    (32768, 2.47752, 0.218099),
    (65536, 4.957672, 0.434744),
    (131072, 9.861555, 0.868823),
    (262144, 20.002492, 1.737119),
];

/// Thesis Table 3.2 (retrodiction of the means).
const TAGER_3_2: [(usize, f64, f64); 14] = [
    (64, 0.001155, 0.000372),
    (128, 0.005709, 0.000621),
    (256, 0.009056, 0.001009),
    (512, 0.030386, 0.002039),
    (1024, 0.035425, 0.004093),
    (2048, 0.069176, 0.007815),
    (4096, 0.898497, 0.015266),
    (8192, 1.01493, 0.03052),
    (16384, 0.917155, 0.061148),
    (32768, 1.093203, 0.122052),
    (65536, 2.21806, 0.244505),
    (131072, 4.376406, 0.487737),
    (262144, 8.551049, 0.974989),
    (524288, 17.162158, 1.950584),
];

/// Table 2.4: the thesis's 2-D constant-acceleration model (nx 6, ny 2), f32, one
/// Kalman step for each of `size` targets (the thesis's data items: one 6 x 6 instance
/// each), end to end (data in host memory, all outputs back in host memory).
/// Table 3.2: the 2-D constant-velocity model (nx 4, ny 2), one series of `size` steps
/// (the thesis scans over k = 1..N), the means retrodicted from stored filter estimates:
/// CPU the RTS recursion of the means, GPU the (C_k, b_k) scan end to end and resident.
pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
    let gpu = gpu_name();
    let cpu = cpu_name();
    let ca = kestrel::model::constant_acceleration(2, 1.0, 0.5, 25.0, 100.0)?;
    let max = if quick { 8192 } else { usize::MAX };
    let fo = FilterOptions::default();
    let mut rows = Vec::new();
    let (mut c_cpu, mut c_gpu) = (Vec::new(), Vec::new());
    for &(size, p_cpu, p_gpu) in TAGER_2_4.iter().filter(|r| r.0 <= max) {
        let z = kestrel::sim::simulate(&ca, size, 1, 3, 0.0)?
            .measurements
            .cast::<f32>();
        let (t, _) = timed(|| kestrel::filter(&ca, &z, &fo))?;
        let ours_cpu = median(&t);
        sink.push(rec(
            format!("seed-tager/table-2.4/cpu/size={size}"),
            &cpu,
            "f32",
            size,
            1,
            6,
            2,
            &t,
            json!({"data_size": size, "paper_cpu_s": p_cpu, "paper_gpu_s": p_gpu}),
        ));
        c_cpu.push((size as f64, ours_cpu));
        let mut ours_gpu = None;
        if let Some(dev) = &gpu {
            let copts = kestrel::kalman::cuda::CudaOptions::default();
            let (t, _) = timed(|| kestrel::kalman::cuda::filter_with(0, &ca, &z, &fo, &copts))?;
            let s = median(&t);
            sink.push(rec(
                format!("seed-tager/table-2.4/gpu/size={size}"),
                dev,
                "f32",
                size,
                1,
                6,
                2,
                &t,
                json!({"data_size": size, "paper_gpu_s": p_gpu, "speedup_vs_paper_gpu": p_gpu / s}),
            ));
            c_gpu.push((size as f64, s));
            ours_gpu = Some(s);
        }
        rows.push(vec![
            size.to_string(),
            g4(p_cpu),
            g4(p_gpu),
            g4(ours_cpu),
            opt(ours_gpu),
            opt(ours_gpu.map(|g| p_gpu / g)),
        ]);
    }
    table(
        "Tager Table 2.4 (Kalman filter, seconds): thesis (i7 870 / GTX 570) beside kestrel",
        &[
            "size",
            "thesis CPU",
            "thesis GPU",
            "kestrel CPU",
            "kestrel GPU",
            "GPU vs thesis GPU",
        ],
        &rows,
    );
    let mut charts = vec![Chart {
        title: "Tager Table 2.4: Kalman filter, seconds vs data size".into(),
        x: "data size (targets, one step each)".into(),
        y: "seconds".into(),
        log_x: true,
        series: vec![
            Series::paper(
                "thesis CPU (i7 870)",
                TAGER_2_4.iter().map(|r| (r.0 as f64, r.1)).collect(),
            ),
            Series::paper(
                "thesis GPU (GTX 570)",
                TAGER_2_4.iter().map(|r| (r.0 as f64, r.2)).collect(),
            ),
            Series::ours(format!("kestrel {cpu}"), c_cpu),
        ],
    }];
    if let Some(dev) = &gpu {
        charts[0]
            .series
            .push(Series::ours(format!("kestrel {dev}"), c_gpu));
    }

    // Table 3.2.
    use kestrel::parallel::{self, Moments};
    let cv = kestrel::model::constant_velocity(2, 1.0, 0.5, 4.0, 10.0)?;
    let max = if quick { 16384 } else { usize::MAX };
    let mut rows = Vec::new();
    let (mut c_cpu, mut c_gpu, mut c_res) = (Vec::new(), Vec::new(), Vec::new());
    for &(size, p_cpu, p_gpu) in TAGER_3_2.iter().filter(|r| r.0 <= max) {
        let z = kestrel::sim::simulate(&cv, 1, size, 5, 0.0)?.measurements;
        let rf: Estimates<f64> = kestrel::filter(&cv, &z, &fo)?.filtered;
        let rf32: Estimates<f32> = rf.cast();
        let (t, _) = timed(|| {
            parallel::retrodict(
                Device::Cpu,
                &cv,
                &rf32,
                ScanAlgorithm::Sequential,
                Moments::MeansOnly,
            )
        })?;
        let ours_cpu = median(&t);
        sink.push(rec(
            format!("seed-tager/table-3.2/cpu-rts-means/size={size}"),
            &cpu,
            "f32",
            1,
            size,
            4,
            2,
            &t,
            json!({"data_size": size, "paper_cpu_s": p_cpu, "paper_gpu_s": p_gpu}),
        ));
        c_cpu.push((size as f64, ours_cpu));
        let (mut e2e, mut res) = (None, None);
        if let Some(dev) = &gpu {
            let (t, _) = timed(|| {
                parallel::retrodict(
                    Device::Cuda(0),
                    &cv,
                    &rf32,
                    ScanAlgorithm::Fastest,
                    Moments::MeansOnly,
                )
            })?;
            let s = median(&t);
            sink.push(rec(
                format!("seed-tager/table-3.2/gpu-scan-means/size={size}"),
                dev,
                "f32",
                1,
                size,
                4,
                2,
                &t,
                json!({"data_size": size, "paper_gpu_s": p_gpu, "end_to_end": true, "speedup_vs_paper_gpu": p_gpu / s}),
            ));
            c_gpu.push((size as f64, s));
            e2e = Some(s);
            let (t, _) =
                parallel::cuda::time_retrodict(0, &cv, &rf32, ScanAlgorithm::Fastest, true, 2, 10)?;
            let s = median(&t);
            sink.push(rec(
                format!("seed-tager/table-3.2/gpu-scan-means-resident/size={size}"),
                dev,
                "f32",
                1,
                size,
                4,
                2,
                &t,
                json!({"data_size": size, "paper_gpu_s": p_gpu, "end_to_end": false}),
            ));
            c_res.push((size as f64, s));
            res = Some(s);
        }
        rows.push(vec![
            size.to_string(),
            g4(p_cpu),
            g4(p_gpu),
            g4(ours_cpu),
            opt(e2e),
            opt(res),
            opt(e2e.map(|g| p_gpu / g)),
        ]);
    }
    table(
        "Tager Table 3.2 (retrodiction of the means, seconds): thesis beside kestrel",
        &[
            "size",
            "thesis CPU",
            "thesis GPU",
            "kestrel CPU",
            "kestrel GPU e2e",
            "GPU resident",
            "e2e vs thesis GPU",
        ],
        &rows,
    );
    let mut c = Chart {
        title: "Tager Table 3.2: retrodiction (means), seconds vs data size".into(),
        x: "data size (steps of one series)".into(),
        y: "seconds".into(),
        log_x: true,
        series: vec![
            Series::paper(
                "thesis CPU (i7 870)",
                TAGER_3_2.iter().map(|r| (r.0 as f64, r.1)).collect(),
            ),
            Series::paper(
                "thesis GPU (GTX 570)",
                TAGER_3_2.iter().map(|r| (r.0 as f64, r.2)).collect(),
            ),
            Series::ours(format!("kestrel RTS {cpu}"), c_cpu),
        ],
    };
    if let Some(dev) = &gpu {
        c.series.push(Series::ours(
            format!("kestrel scan, end to end, {dev}"),
            c_gpu,
        ));
        c.series
            .push(Series::ours("kestrel scan, data on the GPU", c_res));
    }
    charts.push(c);
    Ok(charts)
}
