//! `kestrel bench --only retrodict`: the retrodiction of stored filter estimates (Tager
//! 2013, ch. 3; `kestrel retrodict`), full (means and covariances) against means only
//! (the pairs `(C_k, b_k)` alone: no covariance formed, stored, scanned or copied back).
//! CPU: the RTS recursion and the parallel scan, both moments. GPU (when there is one):
//! the device-resident time of each (the filtered moments uploaded once, outputs
//! poisoned before every run, which the timing leaves out) and the end-to-end time of
//! `parallel::retrodict` (uploads and downloads included), f32 and f64, with the
//! speed-up of means only over the full path and the error against the CPU's smoothed
//! means. One JSON line per measurement, then the table.

use super::parallel::rel_err;
use super::{time_runs, Record, Sink};
use kestrel::parallel::{self, Moments};
use kestrel::{Device, Estimates, Real, ScanAlgorithm};

const NX: usize = 4;
const NY: usize = 2;

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    // A 2-D constant-velocity model (nx 4, ny 2): a batch of tracks, as a tracker stores
    // them.
    let (b, t) = if quick { (16, 2_000) } else { (256, 10_000) };
    let model = kestrel::model::constant_velocity(2, 1.0, 0.5, 4.0, 10.0)?;
    let z = kestrel::sim::simulate(&model, b, t, 11, 0.05)?.measurements;
    let rf = kestrel::filter(&model, &z, &kestrel::FilterOptions::default())?.filtered;
    let rs = kestrel::smooth_filtered(&model, &rf)?;
    let (w, n) = if quick { (1, 3) } else { (1, 5) };
    // CPU: both methods, both moments (f64).
    for (method, alg) in [
        ("rts", ScanAlgorithm::Sequential),
        ("parallel", ScanAlgorithm::Fastest),
    ] {
        for (what, moments) in [
            ("full", Moments::MeansAndCovariances),
            ("means-only", Moments::MeansOnly),
        ] {
            let mut out = None;
            let times = time_runs(w, n, || {
                out = Some(parallel::retrodict(Device::Cpu, &model, &rf, alg, moments))
            });
            let s = out.expect("ran")?;
            let mut r = Record::new(
                format!("retrodict-cpu/{method}/{what}"),
                "cpu",
                "f64",
                b,
                t,
                NX,
                NY,
                &times,
            );
            r.extra = serde_json::json!({ "max_rel_err_mean": rel_err(s.mean(), rs.mean(), NX) });
            sink.push(r);
        }
    }
    if let Err(why) = parallel::cuda::available(0) {
        outln!("retrodict GPU benchmarks skipped: no usable GPU: {why}");
        return Ok(());
    }
    let dev = format!("cuda:0 ({})", parallel::cuda::device_name(0)?);
    gpu::<f32>(sink, &dev, &model, &rf.cast(), &rs, b, t, quick)?;
    gpu::<f64>(sink, &dev, &model, &rf, &rs, b, t, quick)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn gpu<T: Real>(
    sink: &mut Sink,
    dev: &str,
    model: &kestrel::Model,
    rf: &Estimates<T>,
    rs: &Estimates<f64>,
    b: usize,
    t: usize,
    quick: bool,
) -> anyhow::Result<()> {
    let (w, n) = if quick { (1, 3) } else { (2, 10) };
    for (method, alg) in [
        ("parallel", ScanAlgorithm::Fastest),
        ("rts", ScanAlgorithm::Sequential),
    ] {
        let mut resident = [0.0; 2];
        for (i, (what, means_only)) in [("full", false), ("means-only", true)]
            .into_iter()
            .enumerate()
        {
            let (times, s) = parallel::cuda::time_retrodict(0, model, rf, alg, means_only, w, n)?;
            let mut r = Record::new(
                format!("retrodict-gpu-resident/{method}/{what}"),
                dev,
                T::NAME,
                b,
                t,
                NX,
                NY,
                &times,
            );
            resident[i] = r.median_s;
            r.extra = serde_json::json!({
                "max_rel_err_mean": rel_err(s.mean(), rs.mean(), NX),
                "speedup_vs_full": if i == 1 { resident[0] / resident[1].max(1e-12) } else { 1.0 },
            });
            sink.push(r);
        }
        let mut e2e = [0.0; 2];
        for (i, (what, moments)) in [
            ("full", Moments::MeansAndCovariances),
            ("means-only", Moments::MeansOnly),
        ]
        .into_iter()
        .enumerate()
        {
            let mut out = None;
            let times = time_runs(1, 3, || {
                out = Some(parallel::retrodict(
                    Device::Cuda(0),
                    model,
                    rf,
                    alg,
                    moments,
                ))
            });
            let s = out.expect("ran")?;
            let mut r = Record::new(
                format!("retrodict-gpu-end-to-end/{method}/{what}"),
                dev,
                T::NAME,
                b,
                t,
                NX,
                NY,
                &times,
            );
            e2e[i] = r.median_s;
            r.extra = serde_json::json!({
                "max_rel_err_mean": rel_err(s.mean(), rs.mean(), NX),
                "speedup_vs_full": if i == 1 { e2e[0] / e2e[1].max(1e-12) } else { 1.0 },
            });
            sink.push(r);
        }
    }
    Ok(())
}
