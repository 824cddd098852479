//! Benchmarks of the parallel-in-time paths on the CPU: the parallel filter, RTS and
//! two-filter smoothers against the sequential filter (nx = 4, ny = 2, the random model
//! of Sarkka & Garcia-Fernandez), the f32 error against the f64 sequential filter, and
//! the simulated-PRAM operation counts of every scan algorithm (their Figures 6-7).

use super::{time_runs, Record, Sink};
use kestrel::parallel::{self, PaperModel};
use kestrel::scan::{pram_count, ScanAlgorithm};
use kestrel::{Device, Estimates, FilterOptions, Measurements, Real};

const NX: usize = 4;
const NY: usize = 2;
/// Simulated processors of the PRAM counts (the paper's simulated GPU).
const PRAM_P: usize = 15000;

fn device() -> String {
    format!("cpu ({} threads)", rayon::current_num_threads())
}

fn repeats(t: usize) -> (usize, usize) {
    if t >= 100_000 {
        (1, 3)
    } else {
        (2, 11)
    }
}

/// The benchmark's series model of `t` steps (1000 distinct random steps, cycled) and the
/// time-invariant model of its first step (what runs beyond 10^6 steps, to keep the host
/// side small).
fn paper_models(t: usize) -> anyhow::Result<(PaperModel, kestrel::Model)> {
    let tv = PaperModel::new(NX, NY, t, 1000, 42);
    let s0 = &tv.steps[0];
    let inv = kestrel::Model::new(
        s0.f.clone(),
        s0.q.clone(),
        s0.h.clone(),
        s0.r.clone(),
        tv.prior.x0.clone(),
        tv.prior.p0.clone(),
    )?
    .with_offsets(s0.u.clone(), s0.d.clone())?;
    Ok((tv, inv))
}

/// One simulated series of `t` steps from `model` and the CPU reference's filtered and
/// smoothed estimates of it (the general path, in f64).
fn series_and_reference(
    model: &dyn kestrel::StateSpace,
    t: usize,
) -> anyhow::Result<(Measurements<f64>, Estimates<f64>, Estimates<f64>)> {
    let z = kestrel::sim::simulate(model, 1, t, 7, 0.0)?.measurements;
    let general = FilterOptions::default().with_force_general(true);
    let rf = kestrel::filter(model, &z, &general)?.filtered;
    let rs = kestrel::smooth_filtered(model, &rf)?;
    Ok((z, rf, rs))
}

/// Largest per-step relative difference `||a_k - b_k||_inf / max(||b_k||_inf, 1e-3)`.
pub(super) fn rel_err<T: Real>(a: &[T], b: &[f64], per: usize) -> f64 {
    a.chunks(per)
        .zip(b.chunks(per))
        .map(|(x, y)| {
            let s = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-3);
            x.iter()
                .zip(y)
                .fold(0.0f64, |m, (p, q)| m.max((p.to_f64() - q).abs()))
                / s
        })
        .fold(0.0, f64::max)
}

fn errors<T: Real>(got: &Estimates<T>, want: &Estimates<f64>) -> serde_json::Value {
    serde_json::json!({
        "max_rel_err_mean": rel_err(got.mean(), want.mean(), got.nx()),
        "max_rel_err_cov": rel_err(got.cov(), want.cov(), got.nx() * got.nx()),
        "loglik_total": got.total_loglik(),
        "loglik_total_ref": want.total_loglik(),
    })
}

fn algorithms(t: usize) -> Vec<ScanAlgorithm> {
    let mut a = vec![ScanAlgorithm::Fastest, ScanAlgorithm::LadnerFischer];
    if t <= 100_000 {
        a.extend([ScanAlgorithm::Blelloch, ScanAlgorithm::Sengupta(1)]);
    }
    if t <= 10_000 {
        a.extend([ScanAlgorithm::Sengupta(15000), ScanAlgorithm::HillisSteele]);
    }
    a
}

fn record(
    name: &str,
    prec: &'static str,
    t: usize,
    times: &[f64],
    extra: serde_json::Value,
) -> Record {
    let mut r = Record::new(name, device(), prec, 1, t, NX, NY, times);
    r.extra = extra;
    r
}

/// Timings of one precision at one length; `reference` is the f64 sequential filter.
fn timings<T: Real>(
    sink: &mut Sink,
    model: &PaperModel,
    z: &Measurements<f64>,
    reference: &Estimates<f64>,
    t: usize,
) -> anyhow::Result<()> {
    let z: Measurements<T> = z.cast();
    let (w, n) = repeats(t);
    let general = FilterOptions::default().with_force_general(true);
    let mut out = None;
    let times = time_runs(w, n, || out = Some(kestrel::filter(model, &z, &general)));
    let seq = out.expect("ran")?.filtered;
    let seq_s = super::median(&times);
    sink.push(record(
        "filter/sequential",
        T::NAME,
        t,
        &times,
        errors(&seq, reference),
    ));
    for alg in algorithms(t) {
        let mut out = None;
        let times = time_runs(w, n, || {
            out = Some(parallel::filter(Device::Cpu, model, &z, alg))
        });
        let f = out.expect("ran")?;
        let mut extra = errors(&f, reference);
        extra["cost_vs_sequential"] = (super::median(&times) / seq_s).into();
        sink.push(record(
            &format!("parallel-filter/{}", alg.name()),
            T::NAME,
            t,
            &times,
            extra,
        ));
    }
    let mut out = None;
    let times = time_runs(w, n, || out = Some(kestrel::smooth(model, &z)));
    out.expect("ran")?;
    let rts_s = super::median(&times);
    sink.push(record(
        "smooth/rts-sequential",
        T::NAME,
        t,
        &times,
        serde_json::Value::Null,
    ));
    for (name, two) in [("parallel-rts", false), ("two-filter", true)] {
        let mut out = None;
        let times = time_runs(w, n, || {
            out = Some(if two {
                parallel::smooth_two_filter(Device::Cpu, model, &z, ScanAlgorithm::Fastest)
            } else {
                parallel::smooth_rts(Device::Cpu, model, &z, ScanAlgorithm::Fastest)
            })
        });
        out.expect("ran")?;
        let extra = serde_json::json!({ "cost_vs_sequential_rts": super::median(&times) / rts_s });
        sink.push(record(
            &format!("{name}/fastest"),
            T::NAME,
            t,
            &times,
            extra,
        ));
    }
    Ok(())
}

/// The PRAM table: work, span and steps on `PRAM_P` processors for every algorithm.
fn pram(sink: &mut Sink, quick: bool) {
    let lengths: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    let mut table = format!(
        "{:<16} {:>9} {:>12} {:>9} {:>12}\n",
        "scan",
        "T",
        "work",
        "span",
        format!("time(P={PRAM_P})")
    );
    for &t in lengths {
        for alg in ScanAlgorithm::all() {
            let c = pram_count(alg, t, PRAM_P);
            let mut r = Record::new(
                format!("pram/{}", alg.name()),
                format!("pram (P = {PRAM_P})"),
                "-",
                1,
                t,
                NX,
                NY,
                &[f64::NAN],
            );
            r.repeats = 0;
            r.extra = serde_json::json!({ "work": c.work, "span": c.span, "processors": c.processors, "time": c.time });
            table += &format!(
                "{:<16} {:>9} {:>12} {:>9} {:>12}\n",
                alg.name(),
                t,
                c.work,
                c.span,
                c.time
            );
            sink.push(r);
        }
    }
    errln!("\nsimulated PRAM (operator applications):\n{table}");
}

/// The GPU: every GPU scan algorithm for the filter, the RTS and the two-filter smoother,
/// data resident on the device, against kestrel's Kalman filter in one GPU thread (the
/// paper's speed-up metric); errors against the f64 sequential CPU filter and smoother.
fn gpu(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    use kestrel::parallel::cuda::{self as cp, Method};
    // `KESTREL_BENCH_PAR_STEPS=1000000,...`: these sequence lengths only (a profiler's run).
    let chosen: Option<Vec<usize>> = std::env::var("KESTREL_BENCH_PAR_STEPS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let lengths: &[usize] = match &chosen {
        Some(l) => l,
        None if quick => &[1_000, 10_000, 1_000_000],
        None => &[1_000, 10_000, 100_000, 1_000_000, 10_000_000],
    };
    let dev = format!("cuda:0 ({})", cp::device_name(0)?);
    for &t in lengths {
        // Time-varying (1000 distinct random steps, cycled) up to 10^6; beyond, the first
        // of them for every step (time-invariant), to keep the host side small.
        let (tv, inv) = paper_models(t)?;
        let big = t > 1_000_000;
        let model: &dyn kestrel::StateSpace = if big { &inv } else { &tv };
        let (z, rf, rs) = series_and_reference(model, t)?;
        let (w, n) = if t >= 1_000_000 { (1, 5) } else { (2, 10) };
        for prec in ["f32", "f64"] {
            if big && prec == "f64" {
                continue;
            }
            let one = if t <= 1_000_000 {
                let times = if prec == "f32" {
                    cp::time(
                        0,
                        model,
                        &z.cast::<f32>(),
                        Method::OneThread,
                        ScanAlgorithm::Sequential,
                        0,
                        1,
                    )?
                    .0
                } else {
                    cp::time(
                        0,
                        model,
                        &z,
                        Method::OneThread,
                        ScanAlgorithm::Sequential,
                        0,
                        1,
                    )?
                    .0
                };
                let mut r = Record::new(
                    "gpu-one-thread-filter",
                    dev.clone(),
                    if prec == "f32" { "f32" } else { "f64" },
                    1,
                    t,
                    NX,
                    NY,
                    &times,
                );
                r.extra = serde_json::Value::Null;
                let m = r.median_s;
                sink.push(r);
                Some(m)
            } else {
                None
            };
            let mut algs = vec![
                (ScanAlgorithm::Fastest, true),
                (ScanAlgorithm::Fastest, false),
                (ScanAlgorithm::LadnerFischer, true),
            ];
            if !quick {
                algs.extend([
                    (ScanAlgorithm::Blelloch, true),
                    (ScanAlgorithm::Sengupta(1), true),
                ]);
                if t <= 1_000_000 {
                    algs.push((ScanAlgorithm::HillisSteele, true));
                }
            }
            let mut default_median = std::collections::HashMap::new();
            for (alg, fused) in algs {
                // The fastest scan fused (the default) and over stored elements.
                if fused {
                    std::env::remove_var("KESTREL_PAR_FUSED");
                } else {
                    std::env::set_var("KESTREL_PAR_FUSED", "0");
                }
                let aname = if alg == ScanAlgorithm::Fastest {
                    if fused {
                        "fastest-fused".to_string()
                    } else {
                        "fastest-stored".to_string()
                    }
                } else {
                    alg.name()
                };
                for (mname, method) in [
                    ("parallel-filter", Method::Filter),
                    ("parallel-rts", Method::Rts),
                    ("two-filter", Method::TwoFilter),
                    ("parallel-sqrt-filter", Method::SqrtFilter),
                    ("parallel-sqrt-rts", Method::SqrtRts),
                ] {
                    let (times, (f, s)) = if prec == "f32" {
                        let (a, (f, s)) = cp::time(0, model, &z.cast::<f32>(), method, alg, w, n)?;
                        (a, (f.cast::<f64>(), s.map(|s| s.cast::<f64>())))
                    } else {
                        cp::time(0, model, &z, method, alg, w, n)?
                    };
                    let mut extra = serde_json::json!({
                        "max_rel_err_mean": rel_err(f.mean(), rf.mean(), NX),
                        "max_rel_err_cov": rel_err(f.cov(), rf.cov(), NX * NX),
                        "time_varying": !big,
                    });
                    if let Some(s) = s {
                        extra["smoothed_max_rel_err_mean"] =
                            rel_err(s.mean(), rs.mean(), NX).into();
                        extra["smoothed_max_rel_err_cov"] =
                            rel_err(s.cov(), rs.cov(), NX * NX).into();
                    }
                    if let Some(o) = one {
                        extra["speedup_vs_one_gpu_thread"] = (o / super::median(&times)).into();
                    }
                    if !method.sqrt() && alg == ScanAlgorithm::Fastest && fused {
                        default_median.insert(mname, super::median(&times));
                    }
                    if method.sqrt() {
                        // Against the covariance form's default (fused) run of the same job.
                        let plain = if method == Method::SqrtRts {
                            "parallel-rts"
                        } else {
                            "parallel-filter"
                        };
                        if let Some(p) = default_median.get(plain) {
                            extra["time_vs_covariance_form"] = (super::median(&times) / p).into();
                        }
                    }
                    // The least traffic: z read, the moments written (filtered, and
                    // smoothed for the smoothers), against the device's bandwidth.
                    let size = if prec == "f32" { 4 } else { 8 };
                    let per_step =
                        NY + NX + NX * NX + 1 + if !method.smooths() { 0 } else { NX + NX * NX };
                    let bytes = (t * per_step * size) as f64;
                    extra["min_bytes"] = bytes.into();
                    extra["gb_per_s_of_min_bytes"] = (bytes / super::median(&times) / 1e9).into();
                    let mut r = Record::new(
                        format!("gpu-{mname}/{aname}"),
                        dev.clone(),
                        if prec == "f32" { "f32" } else { "f64" },
                        1,
                        t,
                        NX,
                        NY,
                        &times,
                    );
                    r.extra = extra;
                    sink.push(r);
                }
            }
            std::env::remove_var("KESTREL_PAR_FUSED");
        }
        if t == 1_000_000 {
            // The chunk length of the default (fused) scan, swept (f32 filter, both forms).
            for (kk, method, mname) in [4, 8, 16, 32, 64].into_iter().flat_map(|kk| {
                [
                    (kk, Method::Filter, "parallel-filter"),
                    (kk, Method::SqrtFilter, "parallel-sqrt-filter"),
                ]
            }) {
                std::env::set_var("KESTREL_PAR_CHUNK", kk.to_string());
                let (times, _) = cp::time(
                    0,
                    model,
                    &z.cast::<f32>(),
                    method,
                    ScanAlgorithm::Fastest,
                    1,
                    5,
                )?;
                let mut r = Record::new(
                    format!("gpu-{mname}/fastest-chunk{kk}"),
                    dev.clone(),
                    "f32",
                    1,
                    t,
                    NX,
                    NY,
                    &times,
                );
                r.extra = serde_json::json!({ "chunk": kk });
                sink.push(r);
            }
            std::env::remove_var("KESTREL_PAR_CHUNK");
        }
    }
    if chosen.is_some() {
        return Ok(());
    }
    batched(sink, &dev)?;
    multi_gpu(sink, quick)?;
    Ok(())
}

/// The filter and the two-filter smoother with the time steps split over every GPU of the
/// host (`parallel::cuda::time_on_devices`: one share per GPU, one element per track
/// crossing between shares) against the same run on one GPU, and the two-filter smoother
/// split by direction against the one-GPU two-filter and parallel RTS smoothers, f32, T =
/// 10^3 .. 10^6 (time-varying model) and 10^7 (time-invariant, to keep the host side
/// small); the speed-ups are in `extra`. On a host with fewer than 2 GPUs those entries are skipped
/// with a printed line, and the split into 2 shares on the one GPU is measured instead
/// (`.../split-2-shares-1gpu`: the cost of the crossing, a speed-up of about 1 expected).
fn multi_gpu(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    use kestrel::parallel::cuda::{self as cp, Method};
    let n = kestrel::cuda::device_count();
    let (all, label): (Vec<usize>, String) = if n >= 2 {
        ((0..n).collect(), format!("{n}gpus"))
    } else {
        outln!(
            "parallel multi-GPU benchmarks skipped: needs 2 GPUs, this host has {n} (measuring the split into 2 shares on GPU 0 instead)"
        );
        (vec![0, 0], "split-2-shares-1gpu".into())
    };
    let dev = if n >= 2 {
        format!("cuda:all ({n} x {})", cp::device_name(0)?)
    } else {
        format!("cuda:0 ({})", cp::device_name(0)?)
    };
    // What crosses between two devices: a few elements (the time split), the backward
    // chunk totals (by direction, 35 MB at 10^7 in f32) or all moments (0.8 GB).
    if n >= 2 {
        for bytes in [224usize, 35_000_000, 800_000_000] {
            let (direct, via) = kestrel::cuda::copy_rates(0, 1, bytes, 5)?;
            let mut r = Record::new(
                format!("gpu-copy/{bytes}-bytes"),
                dev.clone(),
                "f32",
                1,
                1,
                NX,
                NY,
                &[bytes as f64 / direct / 1e9],
            );
            r.extra = serde_json::json!({
                "bytes": bytes,
                "gb_per_s_direct": direct,
                "gb_per_s_through_host": via,
                "ms_direct": bytes as f64 / direct / 1e6,
                "ms_through_host": bytes as f64 / via / 1e6,
            });
            sink.push(r);
        }
    }
    let lengths: &[usize] = if quick {
        &[1_000_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    };
    for &t in lengths {
        let (tv, inv) = paper_models(t)?;
        let big = t > 1_000_000;
        let model: &dyn kestrel::StateSpace = if big { &inv } else { &tv };
        let (z, rf, rs) = series_and_reference(model, t)?;
        let z32 = z.cast::<f32>();
        let alg = ScanAlgorithm::Fastest;
        for (mname, method) in [
            ("parallel-filter", Method::Filter),
            ("two-filter", Method::TwoFilter),
        ] {
            let (one, (f1, s1)) = cp::time(0, model, &z32, method, alg, 1, 5)?;
            let (times, (f, s)) = cp::time_on_devices(&all, model, &z32, method, alg, 1, 5)?;
            let (f, f1) = (f.cast::<f64>(), f1.cast::<f64>());
            let mut extra = serde_json::json!({
                "ordinals": all.clone(),
                "one_gpu_median_s": super::median(&one),
                "speedup_vs_one_gpu": super::median(&one) / super::median(&times),
                "max_rel_err_mean": rel_err(f.mean(), rf.mean(), NX),
                "max_rel_err_cov": rel_err(f.cov(), rf.cov(), NX * NX),
                "max_rel_diff_mean_vs_one_gpu": rel_err(f.mean(), f1.mean(), NX),
                "time_varying": !big,
            });
            if let (Some(s), Some(s1)) = (s, s1) {
                let (s, s1) = (s.cast::<f64>(), s1.cast::<f64>());
                extra["smoothed_max_rel_err_mean"] = rel_err(s.mean(), rs.mean(), NX).into();
                extra["smoothed_max_rel_err_cov"] = rel_err(s.cov(), rs.cov(), NX * NX).into();
                extra["smoothed_max_rel_diff_mean_vs_one_gpu"] =
                    rel_err(s.mean(), s1.mean(), NX).into();
            }
            let mut r = Record::new(
                format!("gpu-{mname}/fastest-fused-{label}"),
                dev.clone(),
                "f32",
                1,
                t,
                NX,
                NY,
                &times,
            );
            r.extra = extra;
            sink.push(r);
        }
        // The two-filter smoother split by direction: forward filter on the first GPU,
        // backward on the second, the backward chunk totals copied over and combined on
        // the first (bit for bit the one-GPU result).
        let (one, _) = cp::time(0, model, &z32, Method::TwoFilter, alg, 1, 5)?;
        // The one-GPU parallel RTS smoother beside them (the paper's Figures 12-13).
        let (rts, _) = cp::time(0, model, &z32, Method::Rts, alg, 1, 5)?;
        let (times, _) =
            cp::time_two_filter_by_direction([all[0], all[1]], model, &z32, alg, 1, 5)?;
        let mut r = Record::new(
            format!("gpu-two-filter/fastest-fused-by-direction-{label}"),
            dev.clone(),
            "f32",
            1,
            t,
            NX,
            NY,
            &times,
        );
        r.extra = serde_json::json!({
            "ordinals": [all[0], all[1]],
            "one_gpu_median_s": super::median(&one),
            "one_gpu_rts_median_s": super::median(&rts),
            "speedup_vs_one_gpu": super::median(&one) / super::median(&times),
            "speedup_vs_one_gpu_rts": super::median(&rts) / super::median(&times),
            "time_varying": !big,
        });
        sink.push(r);
    }
    Ok(())
}

/// Many sequences as one batch (B = 1000 x T = 10^4, f32, time-varying model, 10% of the
/// measurements missing): every method in one set of launches for all tracks, data
/// resident on the device; then end to end (uploads and downloads included) for the
/// filter and for the retrodiction of the CPU's filtered estimates.
fn batched(sink: &mut Sink, dev: &str) -> anyhow::Result<()> {
    use kestrel::parallel::cuda::{self as cp, Method};
    let (b, t) = (1000, 10_000);
    let model = PaperModel::new(NX, NY, t, 1000, 5);
    let z = kestrel::sim::simulate(&model, b, t, 3, 0.1)?.measurements;
    let general = FilterOptions::default().with_force_general(true);
    let rf = kestrel::filter(&model, &z, &general)?.filtered;
    let rs = kestrel::smooth_filtered(&model, &rf)?;
    let z32: Measurements<f32> = z.cast();
    for alg in [ScanAlgorithm::Fastest, ScanAlgorithm::LadnerFischer] {
        for (mname, method) in [
            ("parallel-filter", Method::Filter),
            ("parallel-rts", Method::Rts),
            ("two-filter", Method::TwoFilter),
        ] {
            let (times, (f, s)) = cp::time(0, &model, &z32, method, alg, 1, 5)?;
            let mut extra = serde_json::json!({
                "max_rel_err_mean": rel_err(f.mean(), rf.mean(), NX),
                "max_rel_err_cov": rel_err(f.cov(), rf.cov(), NX * NX),
                "time_varying": true,
                "missing": 0.1,
            });
            if let Some(s) = s {
                extra["smoothed_max_rel_err_mean"] = rel_err(s.mean(), rs.mean(), NX).into();
                extra["smoothed_max_rel_err_cov"] = rel_err(s.cov(), rs.cov(), NX * NX).into();
            }
            let mut r = Record::new(
                format!("gpu-batched-{mname}/{}", alg.name()),
                dev.to_string(),
                "f32",
                b,
                t,
                NX,
                NY,
                &times,
            );
            r.extra = extra;
            sink.push(r);
        }
    }
    // The fused scan's chunk length for the batch, swept (filter).
    for kk in [8, 16, 32, 64] {
        std::env::set_var("KESTREL_PAR_CHUNK", kk.to_string());
        let (times, _) = cp::time(
            0,
            &model,
            &z32,
            Method::Filter,
            ScanAlgorithm::Fastest,
            1,
            5,
        )?;
        let mut r = Record::new(
            format!("gpu-batched-parallel-filter/fastest-chunk{kk}"),
            dev.to_string(),
            "f32",
            b,
            t,
            NX,
            NY,
            &times,
        );
        r.extra = serde_json::json!({ "chunk": kk });
        sink.push(r);
    }
    std::env::remove_var("KESTREL_PAR_CHUNK");
    let mut out = None;
    let times = time_runs(1, 3, || {
        out = Some(parallel::filter(
            Device::Cuda(0),
            &model,
            &z32,
            ScanAlgorithm::Fastest,
        ))
    });
    out.expect("ran")?;
    sink.push(Record::new(
        "gpu-parallel-filter/fastest-batched-end-to-end",
        dev.to_string(),
        "f32",
        b,
        t,
        NX,
        NY,
        &times,
    ));
    let rf32 = rf.cast::<f32>();
    let mut out = None;
    let times = time_runs(1, 3, || {
        out = Some(parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf32,
            ScanAlgorithm::Fastest,
            parallel::Moments::MeansAndCovariances,
        ))
    });
    let s = out.expect("ran")?;
    let mut r = Record::new(
        "gpu-retrodiction/fastest-batched-end-to-end",
        dev.to_string(),
        "f32",
        b,
        t,
        NX,
        NY,
        &times,
    );
    r.extra = serde_json::json!({
        "max_rel_err_mean": rel_err(s.mean(), rs.mean(), NX),
        "max_rel_err_cov": rel_err(s.cov(), rs.cov(), NX * NX),
    });
    sink.push(r);
    Ok(())
}

/// Runs this family's benchmarks; `quick` keeps sizes small. With a GPU, the GPU part
/// runs too (`KESTREL_BENCH_GPU_ONLY=1` skips the CPU part; `KESTREL_BENCH_PAR_MULTI=1`
/// runs only the split over several GPUs; `KESTREL_BENCH_PAR_STEPS=1000000` only the single
/// sequences of these lengths, without the batch and the split).
pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    // `KESTREL_BENCH_PAR_MULTI=1`: the time steps split over the GPUs only, full sizes.
    if std::env::var("KESTREL_BENCH_PAR_MULTI").is_ok_and(|v| v == "1") {
        if let Err(why) = kestrel::parallel::cuda::available(0) {
            outln!("parallel multi-GPU benchmarks skipped: no usable GPU: {why}");
            return Ok(());
        }
        return multi_gpu(sink, quick);
    }
    if kestrel::parallel::cuda::available(0).is_ok() {
        gpu(sink, quick)?;
        if std::env::var("KESTREL_BENCH_GPU_ONLY").is_ok_and(|v| v == "1") {
            return Ok(());
        }
    }
    pram(sink, quick);
    let lengths: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    for &t in lengths {
        let model = PaperModel::new(NX, NY, t, 1000, 42);
        let z = kestrel::sim::simulate(&model, 1, t, 7, 0.0)?.measurements;
        let general = FilterOptions::default().with_force_general(true);
        let reference = kestrel::filter(&model, &z, &general)?.filtered;
        timings::<f64>(sink, &model, &z, &reference, t)?;
        timings::<f32>(sink, &model, &z, &reference, t)?;
    }
    Ok(())
}
