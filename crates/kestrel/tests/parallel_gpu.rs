//! The parallel filter and smoothers on the GPU equal the sequential CPU reference on
//! random time-varying models with missing measurements, for every GPU scan algorithm.
//! Skips without a GPU; `KESTREL_REQUIRE_GPU=1` makes a missing GPU a failure.

mod common;

use kestrel::parallel::{self, PaperModel};
use kestrel::{Device, Estimates, FilterOptions, Measurements, ScanAlgorithm};

fn gpu_or_skip() -> bool {
    match kestrel::parallel::cuda::available(0) {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("KESTREL_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("KESTREL_REQUIRE_GPU=1 but no GPU: {why}");
            }
            eprintln!("skipped: no GPU ({why})");
            false
        }
    }
}

/// Largest per-step relative difference, with a floor of 1e-3 (NaN is infinite).
fn rel_err(a: &[f64], b: &[f64], per: usize) -> f64 {
    common::rel_err(a, b, per, 1e-3)
}

fn errs(got: &Estimates<f64>, want: &Estimates<f64>) -> f64 {
    let mut e = rel_err(got.mean(), want.mean(), want.nx()).max(rel_err(
        got.cov(),
        want.cov(),
        want.nx() * want.nx(),
    ));
    if let (Some(g), Some(w)) = (&got.loglik(), &want.loglik()) {
        e = e.max(rel_err(g, w, 1));
    }
    e
}

fn reference(model: &PaperModel, z: &Measurements<f64>) -> (Estimates<f64>, Estimates<f64>) {
    let opts = FilterOptions::default().with_force_general(true);
    let f = kestrel::filter(model, z, &opts).unwrap().filtered;
    let s = kestrel::smooth_filtered(model, &f).unwrap();
    (f, s)
}

const ALGS: [ScanAlgorithm; 7] = [
    ScanAlgorithm::Fastest,
    ScanAlgorithm::LadnerFischer,
    ScanAlgorithm::Blelloch,
    ScanAlgorithm::HillisSteele,
    ScanAlgorithm::Sengupta(1),
    ScanAlgorithm::Sengupta(64),
    ScanAlgorithm::Sequential,
];

#[test]
fn gpu_parallel_methods_equal_the_cpu_reference() {
    if !gpu_or_skip() {
        return;
    }
    let cases = [
        (4, 2, 1, 1),
        (4, 2, 2, 1),
        (4, 2, 17, 2),
        (4, 2, 1000, 1),
        (4, 2, 4097, 1),
        (3, 1, 300, 1),
    ];
    for (case, &(nx, ny, t, b)) in cases.iter().enumerate() {
        let model = PaperModel::new(nx, ny, t, t, 100 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, rs) = reference(&model, &z);
        for alg in ALGS {
            let tag = format!("nx={nx} ny={ny} T={t} B={b} {alg:?}");
            let f = parallel::filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let e = errs(&f, &rf);
            assert!(e < 1e-8, "f64 filter {tag}: {e:e}");
            let (f2, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f2, &rf), errs(&s, &rs));
            assert!(ef < 1e-8 && es < 1e-8, "f64 rts {tag}: {ef:e} {es:e}");
            let (f3, s3) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f3, &rf), errs(&s3, &rs));
            assert!(
                ef < 1e-8 && es < 1e-8,
                "f64 two-filter {tag}: {ef:e} {es:e}"
            );
            let z32: Measurements<f32> = z.cast();
            let (f4, s4) = parallel::smooth_rts(Device::Cuda(0), &model, &z32, alg).unwrap();
            let (ef, es) = (errs(&f4.cast(), &rf), errs(&s4.cast(), &rs));
            eprintln!("{tag}: f32 rts errors {ef:.2e} {es:.2e}");
            assert!(ef < 1e-3 && es < 1e-3, "f32 rts {tag}: {ef:e} {es:e}");
        }
    }
}

#[test]
fn gpu_long_sequence_and_errors() {
    if !gpu_or_skip() {
        return;
    }
    let t = 100_000;
    let model = PaperModel::new(4, 2, t, 1000, 9);
    let z = kestrel::sim::simulate(&model, 1, t, 3, 0.05)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    let (f, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, ScanAlgorithm::Fastest).unwrap();
    let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
    assert!(ef < 1e-8 && es < 1e-8, "f64 T=1e5: {ef:e} {es:e}");
    let (f, s) = parallel::smooth_rts(
        Device::Cuda(0),
        &model,
        &z.cast::<f32>(),
        ScanAlgorithm::Fastest,
    )
    .unwrap();
    eprintln!(
        "f32 T=1e5: filter error {:.2e}, rts error {:.2e}",
        errs(&f.cast(), &rf),
        errs(&s.cast(), &rs)
    );
}

/// Many tracks in one launch (the track as the grid's second dimension), split into groups
/// of at most 5 tracks by `KESTREL_PAR_GROUP` so that the grouping is exercised too:
/// filter, RTS and two-filter smoother of every track equal the reference, both
/// precisions, time-varying model, missing measurements.
#[test]
fn gpu_batched_tracks_equal_the_cpu_reference() {
    if !gpu_or_skip() {
        return;
    }
    for (case, &(nx, ny, t, b, group)) in [(4, 2, 515, 37, "5"), (3, 2, 64, 300, "65535")]
        .iter()
        .enumerate()
    {
        std::env::set_var("KESTREL_PAR_GROUP", group);
        let model = PaperModel::new(nx, ny, t, t, 300 + case as u64);
        let z = kestrel::sim::simulate(&model, b, t, 40 + case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, rs) = reference(&model, &z);
        for alg in [
            ScanAlgorithm::Fastest,
            ScanAlgorithm::LadnerFischer,
            ScanAlgorithm::Blelloch,
            ScanAlgorithm::HillisSteele,
            ScanAlgorithm::Sengupta(4),
            ScanAlgorithm::Sequential,
        ] {
            let tag = format!("nx={nx} ny={ny} T={t} B={b} group={group} {alg:?}");
            let (f, s) = parallel::smooth_rts(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
            assert!(ef < 1e-8 && es < 1e-8, "f64 rts {tag}: {ef:e} {es:e}");
            let (f, s) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z, alg).unwrap();
            let (ef, es) = (errs(&f, &rf), errs(&s, &rs));
            assert!(
                ef < 1e-8 && es < 1e-8,
                "f64 two-filter {tag}: {ef:e} {es:e}"
            );
            let z32: Measurements<f32> = z.cast();
            let f = parallel::filter(Device::Cuda(0), &model, &z32, alg).unwrap();
            let ef = errs(&f.cast(), &rf);
            assert!(ef < 1e-3, "f32 filter {tag}: {ef:e}");
            let (_, s) = parallel::smooth_two_filter(Device::Cuda(0), &model, &z32, alg).unwrap();
            let es = errs(&s.cast(), &rs);
            assert!(es < 1e-3, "f32 two-filter {tag}: {es:e}");
        }
        std::env::remove_var("KESTREL_PAR_GROUP");
    }
}

/// The retrodiction scan on the GPU over the CPU's filtered estimates equals the RTS
/// smoother, covariances included, for a batch of tracks in both precisions; with
/// `means_only` there are no covariances and the means are unchanged.
#[test]
fn gpu_retrodiction_equals_the_rts_smoother() {
    if !gpu_or_skip() {
        return;
    }
    let (nx, ny, t, b) = (4, 2, 777, 9);
    let model = PaperModel::new(nx, ny, t, t, 77);
    let z = kestrel::sim::simulate(&model, b, t, 78, 0.2)
        .unwrap()
        .measurements;
    let (rf, rs) = reference(&model, &z);
    for alg in [
        ScanAlgorithm::Fastest,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::Sengupta(8),
    ] {
        let s = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf,
            alg,
            parallel::Moments::MeansAndCovariances,
        )
        .unwrap();
        let e = errs(&s, &rs);
        assert!(e < 1e-8, "f64 retrodiction {alg:?}: {e:e}");
        let s32 = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf.cast::<f32>(),
            alg,
            parallel::Moments::MeansAndCovariances,
        )
        .unwrap();
        let e = errs(&s32.cast(), &rs);
        assert!(e < 1e-3, "f32 retrodiction {alg:?}: {e:e}");
        let m = parallel::retrodict(
            Device::Cuda(0),
            &model,
            &rf,
            alg,
            parallel::Moments::MeansOnly,
        )
        .unwrap();
        assert!(m.cov().is_empty(), "means only: no covariances");
        assert!(rel_err(m.mean(), rs.mean(), nx) < 1e-8, "means only: means");
    }
}

/// The steps `[a, b)` of every track of `z`.
fn steps_of<T: kestrel::Real>(z: &Measurements<T>, a: usize, b: usize) -> Measurements<T> {
    let ny = z.data().len() / (z.tracks() * z.steps());
    let mut v = Vec::with_capacity(z.tracks() * (b - a) * ny);
    for k in 0..z.tracks() {
        v.extend_from_slice(&z.track(k)[a * ny..b * ny]);
    }
    Measurements::new(z.tracks(), b - a, ny, v).unwrap()
}

/// The steps `[a, b)` of every track of estimates `e` (mean, cov, loglik), as f64.
fn est_steps<T: kestrel::Real>(e: &Estimates<T>, a: usize, b: usize) -> Estimates<f64> {
    let (nb, t, nx) = (e.tracks(), e.steps(), e.nx());
    let pick = |v: &[T], per: usize| -> Vec<f64> {
        (0..nb)
            .flat_map(|k| {
                v[(k * t + a) * per..(k * t + b) * per]
                    .iter()
                    .map(|x| x.to_f64())
            })
            .collect()
    };
    Estimates::new(
        nb,
        b - a,
        nx,
        pick(e.mean(), nx),
        pick(e.cov(), nx * nx),
        e.loglik().map(|l| pick(l, 1)),
    )
    .unwrap()
}

/// One sequence split into blocks that run as separate calls (the passes `kestrel.dask`
/// runs on its workers) on the GPU: each block's totals equal the CPU's
/// (`blocks::filter_block_total`) to rounding, the carries combine totals from either,
/// and the GPU's blocks behind their carries give the sequential reference's filtered
/// moments and log-likelihoods, on time-varying models with missing measurements, blocks
/// of one step included, in both precisions. Bad carries and measurements are refused.
#[test]
fn gpu_split_blocks_equal_the_cpu_blocks_and_the_reference() {
    use kestrel::parallel::blocks::{self, BlockAt};
    if !gpu_or_skip() {
        return;
    }
    let dev = Device::Cuda(0);
    let cases: [(usize, usize, usize, usize, &[usize]); 4] = [
        (4, 2, 1000, 3, &[0, 300, 301, 1000]),
        (3, 1, 257, 2, &[0, 1, 128, 257]),
        (2, 1, 5000, 1, &[0, 2500, 5000]),
        (4, 2, 40, 70, &[0, 40]),
    ];
    for (case, &(nx, ny, t, nb, cuts)) in cases.iter().enumerate() {
        let model = PaperModel::new(nx, ny, t, t, 300 + case as u64);
        let z = kestrel::sim::simulate(&model, nb, t, 40 + case as u64, 0.2)
            .unwrap()
            .measurements;
        let (rf, _) = reference(&model, &z);
        let blocks_of = |z: &Measurements<f64>| -> Vec<(BlockAt, Measurements<f64>)> {
            cuts.windows(2)
                .map(|w| {
                    (
                        BlockAt {
                            track: 0,
                            step: w[0],
                        },
                        steps_of(z, w[0], w[1]),
                    )
                })
                .collect()
        };
        let bl = blocks_of(&z);
        // Pass 1 on both devices.
        let gt: Vec<Vec<f64>> = bl
            .iter()
            .map(|(at, zb)| blocks::filter_block_total_on(dev, &model, zb, *at).unwrap())
            .collect();
        let fe = blocks::filter_elem_len(nx);
        for ((at, zb), g) in bl.iter().zip(&gt) {
            let c = blocks::filter_block_total(&model, zb, *at).unwrap();
            assert_eq!(g.len(), nb * fe);
            let e = rel_err(g, &c, fe);
            assert!(
                e < 1e-8,
                "case {case}, block at {}: totals differ by {e:e}",
                at.step
            );
        }
        // Pass 2 over the GPU's totals, pass 3 on the GPU.
        let refs: Vec<&[f64]> = gt.iter().map(|v| &v[..]).collect();
        let carries = blocks::filter_carries(nx, &refs).unwrap();
        for (j, (at, zb)) in bl.iter().enumerate() {
            for alg in [ScanAlgorithm::Fastest, ScanAlgorithm::Sequential] {
                let got = blocks::filter_block_on(dev, &model, zb, *at, carries[j].as_deref(), alg)
                    .unwrap();
                let want = est_steps(&rf, cuts[j], cuts[j + 1]);
                let e = errs(&got, &want);
                assert!(e < 1e-8, "case {case}, block {j}, {alg:?}: {e:e}");
            }
        }
        // f32: the same passes from f32 measurements.
        let z32: Measurements<f32> = z.cast();
        let b32: Vec<(BlockAt, Measurements<f32>)> = cuts
            .windows(2)
            .map(|w| {
                (
                    BlockAt {
                        track: 0,
                        step: w[0],
                    },
                    steps_of(&z32, w[0], w[1]),
                )
            })
            .collect();
        let t32: Vec<Vec<f32>> = b32
            .iter()
            .map(|(at, zb)| blocks::filter_block_total_on(dev, &model, zb, *at).unwrap())
            .collect();
        let r32: Vec<&[f32]> = t32.iter().map(|v| &v[..]).collect();
        let c32 = blocks::filter_carries(nx, &r32).unwrap();
        for (j, (at, zb)) in b32.iter().enumerate() {
            let got = blocks::filter_block_on(
                dev,
                &model,
                zb,
                *at,
                c32[j].as_deref(),
                ScanAlgorithm::Fastest,
            )
            .unwrap();
            let e = errs(
                &est_steps(&got, 0, got.steps()),
                &est_steps(&rf, cuts[j], cuts[j + 1]),
            );
            assert!(e < 1e-3, "f32 case {case}, block {j}: {e:e}");
        }
    }
    // Refusals: a later block without its carry, the first with one, a carry of the
    // wrong size, measurements of the wrong size.
    let model = PaperModel::new(4, 2, 100, 100, 9);
    let z = kestrel::sim::simulate(&model, 2, 100, 1, 0.0)
        .unwrap()
        .measurements;
    let zb = steps_of(&z, 50, 100);
    let at = BlockAt { track: 0, step: 50 };
    let fe = blocks::filter_elem_len(4);
    let no = blocks::filter_block_on(dev, &model, &zb, at, None, ScanAlgorithm::Fastest);
    assert!(no
        .unwrap_err()
        .to_string()
        .contains("needs the filter carry"));
    let c = vec![0.0; 2 * fe];
    let first = steps_of(&z, 0, 50);
    let at0 = BlockAt { track: 0, step: 0 };
    let e = blocks::filter_block_on(dev, &model, &first, at0, Some(&c), ScanAlgorithm::Fastest);
    assert!(e.unwrap_err().to_string().contains("takes no filter carry"));
    let e = blocks::filter_block_on(dev, &model, &zb, at, Some(&c[1..]), ScanAlgorithm::Fastest);
    assert!(e.unwrap_err().to_string().contains("expected 2 tracks"));
    let z1 = Measurements::new(2, 50, 1, vec![0.0; 100]).unwrap();
    let e = blocks::filter_block_total_on(dev, &model, &z1, at);
    assert!(e.unwrap_err().to_string().contains("components"));
    // A block past the end of the time-varying model.
    let late = BlockAt { track: 0, step: 80 };
    let e = blocks::filter_block_total_on(dev, &model, &zb, late);
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("matrices for 100 steps"));
}
