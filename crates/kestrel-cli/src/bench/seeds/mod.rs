//! `kestrel bench --seed NAME`: each seed paper's headline experiment rebuilt on the
//! paper's own axes, kestrel's figures beside the paper's numbers (where its text has
//! them), as JSON lines, a table of the pairs and a plot (`--plot DIR`: `seed-NAME.svg`).
//! `docs/seeds.md` holds the records of the H200 machine and the commands.
//!
//! - `tager`: thesis Table 2.4 (Kalman filter, CPU vs GPU, data size 64 .. 262,144) and
//!   Table 3.2 (retrodiction of the means, 64 .. 524,288).
//! - `sarkka`: Figures 10-15 (the paper's random time-varying model, nx 4 / ny 2, f32):
//!   every scan x {filter, RTS, two-filter} vs T, the speed-up of the parallel filter
//!   over the sequential filter in one GPU thread, the two-filter smoother split over two
//!   GPUs where two are present.
//! - `mazurek`: Figures 3-4, time per frame vs decimation 1 .. 20 for the kernel variants
//!   (1024 x 1024 f32 frames, 13 motion vectors), the best block shape of each.
//! - `lin`: Figures 4-6 at T = 32 .. 4096: the windowed filter (n = 10; 11 for AR(10)) on
//!   the GPU against the sequential filter on the CPU, random walks in 2 and 10 dimensions,
//!   AR(10) fully observed and with a measurement missing every 20 steps (the "7x"), and
//!   the error-vs-window curves of the seismic model (`examples/seismic.toml`), AR(10) and
//!   the 2-D random walk.
//! - `hendeby`: Figures 5-6, the bootstrap filter (constant velocity, two range sensors)
//!   CPU vs GPU vs N at T = 1000, and the GPU time's shares by phase vs N.

pub mod plot;

use super::{median, time_runs, Record, Sink};
use kestrel::{Device, Estimates, FilterOptions, Measurements, Model, ScanAlgorithm};
use plot::{Chart, Series};
use serde_json::json;
use std::path::Path;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    Tager,
    Sarkka,
    Mazurek,
    Lin,
    Hendeby,
    All,
}

impl Seed {
    fn name(self) -> &'static str {
        match self {
            Seed::Tager => "tager",
            Seed::Sarkka => "sarkka",
            Seed::Mazurek => "mazurek",
            Seed::Lin => "lin",
            Seed::Hendeby => "hendeby",
            Seed::All => "all",
        }
    }
}

type Runner = fn(&mut Sink, bool) -> anyhow::Result<Vec<Chart>>;

/// Runs one seed (or all), pushing records to `sink`; writes `seed-NAME.svg` into
/// `plot` when given. Returns the names of seeds that failed.
pub fn run(sink: &mut Sink, seed: Seed, quick: bool, plot: Option<&Path>) -> Vec<&'static str> {
    let all: [(Seed, Runner); 5] = [
        (Seed::Tager, tager),
        (Seed::Sarkka, sarkka),
        (Seed::Mazurek, mazurek),
        (Seed::Lin, lin),
        (Seed::Hendeby, hendeby),
    ];
    let mut failed = Vec::new();
    for (s, runner) in all {
        if seed != Seed::All && seed != s {
            continue;
        }
        let charts = match runner(sink, quick) {
            Ok(c) => c,
            Err(e) => {
                errln!("bench seed {}: error: {e:#}", s.name());
                failed.push(s.name());
                continue;
            }
        };
        if let Some(dir) = plot {
            if !charts.is_empty() {
                if let Err(e) = plot::write(&dir.join(format!("seed-{}.svg", s.name())), &charts) {
                    errln!("bench seed {}: error: {e:#}", s.name());
                    failed.push(s.name());
                }
            }
        }
    }
    failed
}

fn gpu_name() -> Option<String> {
    kestrel::cuda::available(0).ok().map(|_| {
        format!(
            "cuda:0 ({})",
            kestrel::cuda::device_name(0).unwrap_or_default()
        )
    })
}

fn cpu_name() -> String {
    format!("cpu ({} threads)", rayon::current_num_threads())
}

/// Warm-up and timed runs for a run of about `secs` seconds: fewer for long runs.
fn reps(secs_guess: f64) -> (usize, usize) {
    if secs_guess > 2.0 {
        (0, 1)
    } else if secs_guess > 0.3 {
        (1, 3)
    } else {
        (2, 10)
    }
}

/// Times `f` (its result checked), with `reps` from one trial run's time.
fn timed<R>(mut f: impl FnMut() -> kestrel::Result<R>) -> anyhow::Result<(Vec<f64>, R)> {
    let t0 = std::time::Instant::now();
    let mut out = f()?;
    let (w, n) = reps(t0.elapsed().as_secs_f64());
    let mut err = None;
    let times = time_runs(w.saturating_sub(1), n, || match f() {
        Ok(o) => out = o,
        Err(e) => err = Some(e),
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    Ok((times, out))
}

#[allow(clippy::too_many_arguments)]
fn rec(
    name: String,
    dev: &str,
    prec: &'static str,
    tracks: usize,
    steps: usize,
    nx: usize,
    ny: usize,
    times: &[f64],
    extra: serde_json::Value,
) -> Record {
    let mut r = Record::new(name, dev, prec, tracks, steps, nx, ny, times);
    r.extra = extra;
    r
}

/// A table of columns, printed after a seed's JSON lines.
fn table(title: &str, head: &[&str], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:>width$}", width = w[i]))
            .collect::<Vec<_>>()
            .join("  ")
    };
    outln!("\n{title}");
    outln!("{}", line(head.iter().map(|s| s.to_string()).collect()));
    for r in rows {
        outln!("{}", line(r.clone()));
    }
}

fn g4(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1e4 || (x != 0.0 && x.abs() < 1e-3) {
        format!("{x:.3e}")
    } else {
        format!("{x:.4}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), g4)
}

// ---------------------------------------------------------------------------------------
// Tager 2013: Tables 2.4 and 3.2.

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
fn tager(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
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

// ---------------------------------------------------------------------------------------
// Sarkka & Garcia-Fernandez: Figures 10-15.

/// The paper's scans by its names: Hillis-Steele, Blelloch, in-place Ladner-Fischer,
/// Sengupta A (N = 1) and B (N = 20,000, its CUDA threshold), and kestrel's default.
fn sarkka_scans() -> [(&'static str, ScanAlgorithm); 6] {
    [
        ("Hillis-Steele", ScanAlgorithm::HillisSteele),
        ("Blelloch", ScanAlgorithm::Blelloch),
        ("Inplace LaFi", ScanAlgorithm::LadnerFischer),
        ("Sengupta A", ScanAlgorithm::Sengupta(1)),
        ("Sengupta B", ScanAlgorithm::Sengupta(20_000)),
        ("kestrel fastest", ScanAlgorithm::Fastest),
    ]
}

fn sarkka(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
    use kestrel::parallel::cuda::{self as cp, Method};
    use kestrel::parallel::PaperModel;
    let Some(dev) = gpu_name() else {
        outln!("seed sarkka: skipped: its figures are GPU figures and there is no usable GPU");
        return Ok(Vec::new());
    };
    let lengths: &[usize] = if quick {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    let methods = [
        ("PKF", Method::Filter),
        ("PRTS", Method::Rts),
        ("PTFS", Method::TwoFilter),
    ];
    let scans = sarkka_scans();
    // (method, scan) -> points
    let mut pts: Vec<Vec<Vec<(f64, f64)>>> = vec![vec![Vec::new(); scans.len()]; methods.len()];
    let mut speedup = Vec::new();
    let mut two_gpu = Vec::new();
    let mut rows = Vec::new();
    let n_gpus = kestrel::cuda::device_count();
    for &t in lengths {
        // Time-varying: 1000 distinct random steps (the paper's recipe), cycled beyond.
        let model = PaperModel::new(4, 2, t, 1000, 42);
        let z = kestrel::sim::simulate(&model, 1, t, 7, 0.0)?
            .measurements
            .cast::<f32>();
        let (w, n) = if t >= 300_000 { (1, 5) } else { (2, 10) };
        let (one, _) = cp::time(
            0,
            &model,
            &z,
            Method::OneThread,
            ScanAlgorithm::Sequential,
            0,
            if t >= 300_000 { 1 } else { 3 },
        )?;
        let one = median(&one);
        let mut row = vec![t.to_string()];
        for (mi, &(mname, method)) in methods.iter().enumerate() {
            for (si, &(sname, alg)) in scans.iter().enumerate() {
                let (times, _) = cp::time(0, &model, &z, method, alg, w, n)?;
                let s = median(&times);
                let mut extra = json!({"method": mname, "scan": sname, "time_varying_steps": 1000});
                if method == Method::Filter {
                    extra["speedup_vs_one_gpu_thread"] = (one / s).into();
                }
                sink.push(rec(
                    format!("seed-sarkka/{mname}/{}", alg.name()),
                    &dev,
                    "f32",
                    1,
                    t,
                    4,
                    2,
                    &times,
                    extra,
                ));
                pts[mi][si].push((t as f64, s));
                if method == Method::Filter && alg == ScanAlgorithm::LadnerFischer {
                    speedup.push((t as f64, one / s));
                }
                if sname == "Sengupta B" || sname == "kestrel fastest" {
                    row.push(g4(s * 1e3));
                }
            }
        }
        let mut ptfs2 = None;
        if n_gpus >= 2 && method_two_gpu_ok(t) {
            let (times, _) = cp::time_on_devices(
                &[0, 1],
                &model,
                &z,
                Method::TwoFilter,
                ScanAlgorithm::Sengupta(20_000),
                w,
                n,
            )?;
            let s = median(&times);
            sink.push(rec(
                format!(
                    "seed-sarkka/PTFS-2gpu/{}",
                    ScanAlgorithm::Sengupta(20_000).name()
                ),
                &format!("{dev} x2"),
                "f32",
                1,
                t,
                4,
                2,
                &times,
                json!({"method": "PTFS on 2 GPUs", "scan": "Sengupta B"}),
            ));
            two_gpu.push((t as f64, s));
            ptfs2 = Some(s * 1e3);
        }
        row.push(opt(ptfs2));
        row.push(g4(one * 1e3));
        row.push(g4(speedup.last().map_or(f64::NAN, |p| p.1)));
        rows.push(row);
    }
    if n_gpus < 2 {
        outln!("seed sarkka: the 2-GPU two-filter smoother (Figures 12-13) skipped: this host has {n_gpus} GPU");
    }
    table(
        "Sarkka & Garcia-Fernandez Figs 10-15 on this GPU (ms, f32; Sengupta B / kestrel's fastest scan)",
        &[
            "T",
            "PKF SgB",
            "PKF fast",
            "PRTS SgB",
            "PRTS fast",
            "PTFS SgB",
            "PTFS fast",
            "PTFS 2 GPUs",
            "KF 1 thread",
            "PKF LaFi speed-up (paper ~500, A100)",
        ],
        &rows,
    );
    let mut charts = Vec::new();
    for (mi, &(mname, _)) in methods.iter().enumerate() {
        let mut series: Vec<Series> = scans
            .iter()
            .enumerate()
            .map(|(si, &(sname, _))| Series::ours(sname, pts[mi][si].clone()))
            .collect();
        if mname == "PTFS" && !two_gpu.is_empty() {
            series.push(Series::ours("Sengupta B, 2 GPUs", two_gpu.clone()));
        }
        charts.push(Chart {
            title: format!("Sarkka Figs 10-13: {mname} vs T, {dev}"),
            x: "T (steps)".into(),
            y: "seconds".into(),
            log_x: true,
            series,
        });
    }
    let flat = |v: f64| lengths.iter().map(|&t| (t as f64, v)).collect::<Vec<_>>();
    charts.push(Chart {
        title: "Sarkka Fig 15: PKF (Inplace LaFi) over the KF in one GPU thread".into(),
        x: "T (steps)".into(),
        y: "speed-up".into(),
        log_x: true,
        series: vec![
            Series::ours(format!("kestrel, {dev}"), speedup),
            Series::paper("paper's plateau (A100), about 500", flat(500.0)),
        ],
    });
    Ok(charts)
}

/// The split over two GPUs pays one crossing; below 10^4 steps it is all overhead.
fn method_two_gpu_ok(t: usize) -> bool {
    t >= 10_000
}

// ---------------------------------------------------------------------------------------
// Mazurek: Figures 3-4.

fn mazurek(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
    use kestrel::tbd::cuda::{GpuTbd, KernelConfig, Variant};
    use kestrel::tbd::{autotune, speeds_directions, Dtype, Params};
    let Some(dev) = gpu_name() else {
        outln!("seed mazurek: skipped: its figures are GPU figures and there is no usable GPU");
        return Ok(Vec::new());
    };
    let (h, w) = if quick { (512, 512) } else { (1024, 1024) };
    let n = h * w;
    let decimations: &[usize] = if quick {
        &[1, 2, 5, 10, 20]
    } else {
        &[1, 2, 3, 4, 5, 8, 10, 15, 20]
    };
    // The paper's variant groups, each over a few block shapes (the best reported, as the
    // paper reports the best over its block sweep): one kernel for every vector, the
    // frames through the read-only (texture) cache or plain loads; one kernel per motion
    // vector, both loads; and kestrel's shared-memory kernels (frame tiles staged in
    // shared memory) and its own lean (D = 1) and late (D > 1) kernels.
    type Family = (&'static str, fn(usize) -> Vec<KernelConfig>);
    let families: [Family; 6] = [
        ("one kernel, texture (ldg)", |d| {
            [(32, 8), (64, 4)]
                .map(|block| KernelConfig {
                    ldg: true,
                    block,
                    ..KernelConfig::fused(d)
                })
                .to_vec()
        }),
        ("one kernel, direct loads", |d| {
            [(32, 8), (64, 4)]
                .map(|block| KernelConfig {
                    ldg: false,
                    block,
                    ..KernelConfig::fused(d)
                })
                .to_vec()
        }),
        ("kernel per vector, texture (ldg)", |d| {
            vec![KernelConfig {
                variant: Variant::PerVector,
                ldg: true,
                ..KernelConfig::fused(d)
            }]
        }),
        ("kernel per vector, direct loads", |d| {
            vec![KernelConfig {
                variant: Variant::PerVector,
                ldg: false,
                ..KernelConfig::fused(d)
            }]
        }),
        ("frames staged in shared memory", |d| {
            if d == 1 {
                vec![KernelConfig {
                    variant: Variant::Tiled,
                    unroll: false,
                    frames: 4,
                    ..KernelConfig::fused(1)
                }]
            } else {
                [(2, (32, 8)), (1, (64, 8))]
                    .map(|(px, block)| KernelConfig {
                        variant: Variant::Staged { px },
                        ldg: false,
                        block,
                        ..KernelConfig::fused(d)
                    })
                    .to_vec()
            }
        }),
        // kestrel's own designs: at D = 1 the lean kernel (a column of cells a thread,
        // the state on chip for 4 frames), above it the late kernel (frame tiles staged,
        // the state sampled last).
        ("kestrel lean (D=1) / late (D>1)", |d| {
            if d == 1 {
                vec![KernelConfig {
                    variant: Variant::Lean { rows: 4, vecs: 3 },
                    ldg: true,
                    unroll: true,
                    frames: 4,
                    block: (96, 8),
                    ..KernelConfig::fused(1)
                }]
            } else {
                [(32, 8), (32, 12)]
                    .map(|block| KernelConfig {
                        variant: Variant::Late { px: 2 },
                        ldg: false,
                        block,
                        ..KernelConfig::fused(d)
                    })
                    .to_vec()
            }
        }),
    ];
    let mut pts: Vec<Vec<(f64, f64)>> = vec![Vec::new(); families.len()];
    let mut rows = Vec::new();
    for &d in decimations {
        let p = Params {
            motions: speeds_directions(&[0.0, 1.0], 12).expect("the benchmark's vectors"),
            alpha: 0.1,
            decimation: d,
            transition: None,
        };
        let nv = p.motions.len();
        let mut row = vec![d.to_string()];
        for (fi, (fname, cfgs)) in families.iter().enumerate() {
            let mut best: Option<(f64, String)> = None;
            for cfg in cfgs(d) {
                if cfg.check(&p.motions).is_err() || cfg.check_decimation(d).is_err() {
                    continue;
                }
                let mut g = match GpuTbd::new(0, &p, h, w, cfg, Dtype::F32) {
                    Ok(g) => g,
                    Err(e) => {
                        errln!("seed mazurek: {}: {e}", cfg.name());
                        continue;
                    }
                };
                let raw = autotune::timing_frames(n * 4 * cfg.frames_per_launch(), Dtype::F32);
                // Twice the H200's L2: no launch finds its frames in L2.
                let slots = (128usize << 20).div_ceil(raw.len()).max(2);
                g.frame_slots(slots)?;
                for s in 0..slots {
                    g.load_frames_into(s, &raw)?;
                }
                let launches = ((if quick { 40 } else { 200 }) / cfg.frames_per_launch()).max(4);
                let ms = match g.time_launches(2).and_then(|_| {
                    (0..5)
                        .map(|_| g.time_launches(launches))
                        .collect::<Result<Vec<f64>, _>>()
                }) {
                    Ok(ms) => ms,
                    Err(e) => {
                        errln!("seed mazurek: {}: {e}", cfg.name());
                        continue;
                    }
                };
                let frames = launches * cfg.frames_per_launch();
                let per_frame: Vec<f64> = ms.iter().map(|m| m / 1e3 / frames as f64).collect();
                let s = median(&per_frame);
                sink.push(rec(
                    format!("seed-mazurek/D{d}/{}", cfg.name()),
                    &dev,
                    "f32",
                    n,
                    frames,
                    nv,
                    1,
                    &per_frame,
                    json!({"decimation": d, "family": fname, "seconds_per_frame": s, "height": h, "width": w}),
                ));
                if best.as_ref().is_none_or(|b| s < b.0) {
                    best = Some((s, cfg.name()));
                }
            }
            if let Some((s, _)) = &best {
                pts[fi].push((d as f64, *s));
            }
            row.push(best.map_or("-".into(), |b| g4(b.0 * 1e6)));
        }
        rows.push(row);
    }
    let mut head = vec!["D"];
    head.extend(families.iter().map(|f| f.0));
    table(
        &format!("Mazurek Figs 3-4: us per {h}x{w} frame (13 vectors, f32) vs decimation D, best block shape of each variant"),
        &head,
        &rows,
    );
    let series = families
        .iter()
        .zip(pts)
        .map(|(f, p)| Series::ours(f.0, p))
        .collect();
    Ok(vec![Chart {
        title: format!("Mazurek Figs 3-4: time per frame vs decimation, {dev}"),
        x: "decimation D".into(),
        y: "seconds per frame".into(),
        log_x: false,
        series,
    }])
}

// ---------------------------------------------------------------------------------------
// Lin, Moore & Russell: Figures 4-6.

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

fn lin(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
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
            let exact = Method::Exact;
            let serial_opts = if name.starts_with("AR") {
                Options::default().with_steady(Some(1e-9))
            } else {
                Options::default()
            };
            let (t_cpu, _) = timed(|| loglik(Device::Cpu, model, &z, exact, &serial_opts))?;
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

// ---------------------------------------------------------------------------------------
// Hendeby et al.: Figures 5-6.

fn hendeby(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
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
