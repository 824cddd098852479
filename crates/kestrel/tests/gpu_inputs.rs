//! Per-track priors, control inputs u, measurement offsets d and noise R on the GPU
//! (`kalman::cuda::filter_inputs_on_devices`, `smooth_inputs_on_devices`, and
//! `filter_on_with` / `smooth_on_with` on a CUDA device) against the CPU's
//! `kalman::filter_with` / `smooth_with` on random models and fresh random inputs, every
//! output layout and kept-steps choice, outputs poisoned with NaN before each run, in
//! chunks and whole, f64 and f32. Without a GPU each test prints why it is skipped.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, CudaOptions, OutputLayout};
use kestrel::kalman::{self, TrackInputs};
use kestrel::{
    filter_on_with, smooth_on_with, Device, FilterMethod, FilterOptions, Keep, Real, SmoothMethod,
};
use rand::{Rng, SeedableRng};

/// Random inputs for `tracks` x `steps`: priors, u, d and R, each present as `which` says
/// (`[prior, u, d, r]`).
struct Inputs {
    x0: Vec<f64>,
    p0: Vec<f64>,
    u: Vec<f64>,
    d: Vec<f64>,
    r: Vec<f64>,
    which: [bool; 4],
}

impl Inputs {
    fn new(
        nx: usize,
        ny: usize,
        tracks: usize,
        steps: usize,
        seed: u64,
        which: [bool; 4],
    ) -> Inputs {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut spd = |n: usize, lo: f64| -> Vec<f64> {
            let a: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-0.7..0.7)).collect();
            let mut m = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    let mut s = if i == j { lo } else { 0.0 };
                    for l in 0..n {
                        s += a[i * n + l] * a[j * n + l];
                    }
                    m[i * n + j] = s;
                }
            }
            m
        };
        let p0 = (0..tracks).flat_map(|_| spd(nx, 0.5)).collect();
        let r = (0..tracks * steps).flat_map(|_| spd(ny, 0.3)).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 1);
        let mut uni =
            |n: usize, a: f64| -> Vec<f64> { (0..n).map(|_| rng.gen_range(-a..a)).collect() };
        Inputs {
            x0: uni(tracks * nx, 2.0),
            p0,
            u: uni(tracks * steps * nx, 0.5),
            d: uni(tracks * steps * ny, 1.0),
            r,
            which,
        }
    }

    fn track_inputs(&self) -> TrackInputs<'_> {
        let mut t = TrackInputs::new();
        if self.which[0] {
            t = t.with_priors(&self.x0, &self.p0);
        }
        if self.which[1] {
            t = t.with_u(&self.u);
        }
        if self.which[2] {
            t = t.with_d(&self.d);
        }
        if self.which[3] {
            t = t.with_r(&self.r);
        }
        t
    }
}

fn options(layout: OutputLayout) -> CudaOptions {
    CudaOptions::default().with_layout(layout).with_poison(true)
}

fn case<T: Real>(nx: usize, ny: usize, seed: u64, which: [bool; 4], tol: f64) {
    let m = random_model(nx, ny, seed);
    let (b, t) = (301usize, 23usize);
    let z = random_measurements::<T>(&m, b, t, seed + 3, 0.15);
    let inp = Inputs::new(nx, ny, b, t, seed + 5, which);
    let ti = inp.track_inputs();
    let tag = |what: &str| format!("{what} {} nx={nx} ny={ny} inputs {which:?}", T::NAME);
    for layout in [OutputLayout::Host, OutputLayout::Soa] {
        for keep in [Keep::All, Keep::Last] {
            let o = FilterOptions::default().with_keep(keep);
            let want = kalman::filter_with(&m, &z, &o, &ti).expect("CPU").filtered;
            let got = cuda::filter_inputs_on_devices(&[0], &m, &z, &o, &options(layout), &ti)
                .expect("GPU")
                .filtered;
            assert_close(
                &tag(&format!("filter {layout:?} {keep:?}")),
                &got,
                &want,
                tol,
            );
        }
    }
    let o = FilterOptions::default().with_predicted(true);
    let want = kalman::filter_with(&m, &z, &o, &ti).expect("CPU");
    let got = cuda::filter_inputs_on_devices(&[0], &m, &z, &o, &options(OutputLayout::Soa), &ti)
        .expect("GPU");
    assert_close(
        &tag("predicted: filtered"),
        &got.filtered,
        &want.filtered,
        tol,
    );
    assert_close(
        &tag("predicted"),
        got.predicted.as_ref().expect("predicted"),
        want.predicted.as_ref().expect("predicted"),
        tol,
    );
    let (wf, ws) = kalman::smooth_with(&m, &z, &ti).expect("CPU smoother");
    for layout in [OutputLayout::Host, OutputLayout::Soa] {
        let (gf, gs) = cuda::smooth_inputs_on_devices(&[0], &m, &z, &options(layout), &ti)
            .expect("GPU smoother");
        assert_close(
            &tag(&format!("smoother: filtered {layout:?}")),
            &gf,
            &wf,
            tol,
        );
        assert_close(&tag(&format!("smoothed {layout:?}")), &gs, &ws, tol);
    }
    // Several chunks (a budget that holds a few dozen tracks): each chunk's inputs are
    // those of its own tracks.
    let small = CudaOptions::default()
        .with_poison(true)
        .with_memory_budget(Some(64 * 1024));
    let got = cuda::filter_inputs_on_devices(&[0], &m, &z, &FilterOptions::default(), &small, &ti)
        .expect("GPU, chunked")
        .filtered;
    let want = kalman::filter_with(&m, &z, &FilterOptions::default(), &ti)
        .expect("CPU")
        .filtered;
    assert_close(&tag("chunked"), &got, &want, tol);
    eprintln!("{}: ok", tag("inputs"));
}

#[test]
fn gpu_filter_and_smoother_with_track_inputs_equal_the_cpu() {
    if !gpu_or_skip("gpu_filter_and_smoother_with_track_inputs_equal_the_cpu") {
        return;
    }
    let all = [true; 4];
    for (i, &(nx, ny)) in [(4usize, 2usize), (2, 1), (6, 3)].iter().enumerate() {
        case::<f64>(nx, ny, 10 + i as u64, all, 1e-10);
        case::<f32>(nx, ny, 20 + i as u64, all, 2e-3);
    }
    // Each input alone (the others the model's).
    for (i, which) in [
        [true, false, false, false],
        [false, true, false, false],
        [false, false, true, false],
        [false, false, false, true],
    ]
    .into_iter()
    .enumerate()
    {
        case::<f64>(4, 2, 40 + i as u64, which, 1e-10);
    }
}

#[test]
fn the_estimate_entry_points_take_track_inputs_on_the_gpu() {
    if !gpu_or_skip("the_estimate_entry_points_take_track_inputs_on_the_gpu") {
        return;
    }
    let m = random_model(4, 2, 77);
    let z = random_measurements::<f64>(&m, 50, 30, 78, 0.1);
    let inp = Inputs::new(4, 2, 50, 30, 79, [true; 4]);
    let ti = inp.track_inputs();
    let o = FilterOptions::default();
    let got =
        filter_on_with(Device::Cuda(0), &m, &z, FilterMethod::Sequential, &o, &ti).expect("GPU");
    let want = filter_on_with(Device::Cpu, &m, &z, FilterMethod::Sequential, &o, &ti).expect("CPU");
    assert_close("filter_on_with", &got.filtered, &want.filtered, 1e-10);
    let gs = smooth_on_with(Device::AllCuda, &m, &z, SmoothMethod::Rts, &ti).expect("GPU");
    let ws = smooth_on_with(Device::Cpu, &m, &z, SmoothMethod::Rts, &ti).expect("CPU");
    assert_close("smooth_on_with", &gs.smoothed, &ws.smoothed, 1e-10);
    // The model's u and d given as per-step inputs equal the model alone.
    let (nx, ny, b, t) = (4, 2, 50, 30);
    let u: Vec<f64> = (0..b * t)
        .flat_map(|_| m.u().iter().copied().collect::<Vec<_>>())
        .collect();
    let d: Vec<f64> = (0..b * t)
        .flat_map(|_| m.d().iter().copied().collect::<Vec<_>>())
        .collect();
    assert_eq!((u.len(), d.len()), (b * t * nx, b * t * ny));
    let same = cuda::filter_inputs_on_devices(
        &[0],
        &m,
        &z,
        &o,
        &CudaOptions::default().with_bake_model(false),
        &TrackInputs::new().with_u(&u).with_d(&d),
    )
    .expect("GPU");
    let plain = cuda::filter_with(
        0,
        &m,
        &z,
        &o,
        &CudaOptions::default().with_bake_model(false),
    )
    .expect("GPU");
    assert_close(
        "model's u and d as inputs",
        &same.filtered,
        &plain.filtered,
        1e-12,
    );
}
