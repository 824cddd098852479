//! Sarkka & Garcia-Fernandez: Figures 10-15 (scans x methods x T on the GPU, the
//! speed-up over one GPU thread, the two-filter smoother over two GPUs).

use super::{g4, gpu_name, median, opt, rec, table, Chart, Series, Sink};
use kestrel::ScanAlgorithm;
use serde_json::json;

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

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
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
        // The split pays one crossing between the GPUs: below 10^4 steps it is all overhead.
        if n_gpus >= 2 && t >= 10_000 {
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
