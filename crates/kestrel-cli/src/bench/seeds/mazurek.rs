//! Mazurek: Figures 3-4 (time per frame against decimation for the kernel variants).

use super::{g4, gpu_name, median, rec, table, Chart, Series, Sink};
use serde_json::json;

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<Vec<Chart>> {
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
    // The paper's variant groups, each in the block shape that led on the H200 (two
    // staged shapes, each ahead at some D; the best reported, as the paper reports the
    // best over its block sweep; docs/seeds.md has the sweep): one kernel for every vector, the
    // frames through the read-only (texture) cache or plain loads; one kernel per motion
    // vector, both loads; and kestrel's shared-memory kernels (frame tiles staged in
    // shared memory) and its own lean (D = 1) and late (D > 1) kernels.
    type Family = (&'static str, fn(usize) -> Vec<KernelConfig>);
    let families: [Family; 6] = [
        ("one kernel, texture (ldg)", |d| {
            [(64, 4)]
                .map(|block| KernelConfig {
                    ldg: true,
                    block,
                    ..KernelConfig::fused(d)
                })
                .to_vec()
        }),
        ("one kernel, direct loads", |d| {
            [(64, 4)]
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
                // Two pixels a thread where its frame tiles fit in shared memory (up to
                // D = 10 here), one pixel a thread in wider blocks above.
                [(2, (32, 8)), (1, (64, 8))]
                    .map(|(px, block)| KernelConfig {
                        variant: Variant::Late { px },
                        ldg: false,
                        block,
                        ..KernelConfig::fused(d)
                    })
                    .to_vec()
            }
        }),
    ];
    let params = |d: usize| Params {
        motions: speeds_directions(&[0.0, 1.0], 12).expect("the benchmark's vectors"),
        alpha: 0.1,
        decimation: d,
        transition: None,
    };
    // Every kernel compiled first, on all host cores at once: NVRTC takes about a second
    // a configuration, which one at a time would be most of the sweep's run.
    let jobs: Vec<(usize, KernelConfig)> = decimations
        .iter()
        .flat_map(|&d| {
            families
                .iter()
                .flat_map(move |f| f.1(d))
                .map(move |c| (d, c))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads.min(jobs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(d, cfg)) = jobs.get(i) else { break };
                // A configuration that does not apply is skipped again below.
                let _ = kestrel::tbd::cuda::prepare(0, &params(d), w, cfg, Dtype::F32);
            });
        }
    });
    let mut pts: Vec<Vec<(f64, f64)>> = vec![Vec::new(); families.len()];
    let mut rows = Vec::new();
    for &d in decimations {
        let p = params(d);
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
