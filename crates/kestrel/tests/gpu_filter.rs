//! The CUDA filter and smoother against the CPU reference on random models, with offsets
//! and missing values, fresh inputs, and device outputs poisoned with NaN before each run.
//! Without a GPU each test prints why it is skipped (and fails with KESTREL_REQUIRE_GPU=1).

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::source::Part;
use kestrel::kalman::cuda::{self, CudaOptions, OutputLayout};
use kestrel::{kalman, FilterOptions, Keep, Real};

const SIZES: [(usize, usize); 10] = [
    (1, 1),
    (2, 1),
    (3, 2),
    (4, 2),
    (4, 1),
    (5, 3),
    (6, 2),
    (7, 4),
    (8, 3),
    (9, 4),
];

fn reference() -> FilterOptions {
    FilterOptions::default().with_force_general(true)
}

fn options(bake: bool, layout: OutputLayout) -> CudaOptions {
    CudaOptions::default()
        .with_bake_model(bake)
        .with_layout(layout)
        .with_poison(true)
}

fn filter_case<T: Real>(
    nx: usize,
    ny: usize,
    seed: u64,
    tol: f64,
    bake: bool,
    layout: OutputLayout,
) {
    let m = random_model(nx, ny, seed);
    let z = random_measurements::<T>(&m, 257, 40, seed + 7, 0.15);
    let want = kalman::filter(&m, &z, &reference())
        .expect("CPU reference")
        .filtered;
    let got = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &options(bake, layout))
        .expect("GPU filter")
        .filtered;
    let tag = format!("filter {} nx={nx} ny={ny} bake={bake} {layout:?}", T::NAME);
    assert_close(&tag, &got, &want, tol);
    eprintln!("{tag}: ok");
}

#[test]
fn compiles_for_every_shape_class() {
    if !gpu_or_skip("compiles_for_every_shape_class") {
        return;
    }
    // Small shapes in every variant; the largest ones (slow to compile: everything is
    // unrolled) once each, with the model as parameters.
    let mut cases = vec![];
    for (nx, ny) in [(1, 1), (2, 1), (4, 2), (6, 2)] {
        for bake in [false, true] {
            cases.push((nx, ny, bake, "f32"));
            cases.push((nx, ny, bake, "f64"));
        }
    }
    cases.extend([
        (9, 4, false, "f32"),
        (9, 4, true, "f64"),
        (12, 6, false, "f64"),
        (16, 8, false, "f32"),
    ]);
    for (nx, ny, bake, dtype) in cases {
        let m = random_model(nx, ny, 1);
        for part in Part::ALL {
            let t = std::time::Instant::now();
            let log = if dtype == "f32" {
                cuda::compile_kernels::<f32>(0, &m, bake, part)
            } else {
                cuda::compile_kernels::<f64>(0, &m, bake, part)
            }
            .unwrap_or_else(|e| panic!("nx={nx} ny={ny} {dtype} bake={bake} {part:?}: {e}"));
            eprintln!(
                "compiled {part:?} nx={nx} ny={ny} {dtype} bake={bake} in {:.2} s{}",
                t.elapsed().as_secs_f64(),
                if log.trim().is_empty() {
                    String::new()
                } else {
                    format!("\nlog: {log}")
                }
            );
        }
    }
    let big = random_model(17, 2, 1);
    assert!(
        cuda::compile_kernels::<f32>(0, &big, false, Part::Filter).is_err(),
        "nx = 17 must be refused"
    );
}

#[test]
fn filter_f64_matches_the_cpu_reference() {
    if !gpu_or_skip("filter_f64_matches_the_cpu_reference") {
        return;
    }
    for (i, &(nx, ny)) in SIZES.iter().enumerate() {
        let bake = i % 2 == 0;
        let layout = if i % 3 == 0 {
            OutputLayout::Soa
        } else {
            OutputLayout::Host
        };
        filter_case::<f64>(nx, ny, 1000 + i as u64, 1e-10, bake, layout);
    }
    filter_case::<f64>(4, 2, 77, 1e-10, true, OutputLayout::Soa);
    filter_case::<f64>(4, 2, 78, 1e-10, false, OutputLayout::Host);
}

#[test]
fn filter_f32_matches_the_cpu_reference() {
    if !gpu_or_skip("filter_f32_matches_the_cpu_reference") {
        return;
    }
    for (i, &(nx, ny)) in SIZES.iter().enumerate() {
        let bake = i % 2 == 1;
        let layout = if i % 3 == 1 {
            OutputLayout::Soa
        } else {
            OutputLayout::Host
        };
        filter_case::<f32>(nx, ny, 2000 + i as u64, 1e-4, bake, layout);
    }
}

#[test]
fn keep_last_and_predicted_match_the_cpu_reference() {
    if !gpu_or_skip("keep_last_and_predicted_match_the_cpu_reference") {
        return;
    }
    for (i, &(nx, ny)) in [(4, 2), (6, 2), (3, 1), (7, 3)].iter().enumerate() {
        let m = random_model(nx, ny, 3000 + i as u64);
        let z = random_measurements::<f64>(&m, 300, 50, 3100 + i as u64, 0.2);
        for layout in [OutputLayout::Host, OutputLayout::Soa] {
            let last = FilterOptions::default().with_keep(Keep::Last);
            let want = kalman::filter(&m, &z, &last.with_force_general(true))
                .expect("CPU")
                .filtered;
            let got = cuda::filter_with(0, &m, &z, &last, &options(i % 2 == 0, layout))
                .expect("GPU")
                .filtered;
            assert_close(&format!("keep last nx={nx} {layout:?}"), &got, &want, 1e-10);
        }
        let pred = FilterOptions::default().with_predicted(true);
        let want = kalman::filter(&m, &z, &pred.with_force_general(true)).expect("CPU");
        let got =
            cuda::filter_with(0, &m, &z, &pred, &options(true, OutputLayout::Host)).expect("GPU");
        assert_close("predicted: filtered", &got.filtered, &want.filtered, 1e-10);
        assert_close(
            "predicted: predicted",
            got.predicted.as_ref().expect("asked for"),
            want.predicted.as_ref().expect("asked for"),
            1e-10,
        );
    }
}

#[test]
fn smoother_matches_the_cpu_reference() {
    if !gpu_or_skip("smoother_matches_the_cpu_reference") {
        return;
    }
    for (i, &(nx, ny)) in SIZES.iter().enumerate() {
        let m = random_model(nx, ny, 4000 + i as u64);
        let z = random_measurements::<f64>(&m, 200, 30, 4100 + i as u64, 0.1);
        let f = kalman::filter(&m, &z, &reference()).expect("CPU").filtered;
        let want = kalman::smooth_filtered(&m, &f).expect("CPU smoother");
        let layout = if i % 2 == 0 {
            OutputLayout::Soa
        } else {
            OutputLayout::Host
        };
        let copts = options(i % 3 == 0, layout);
        let got = cuda::smooth_filtered_with(0, &m, &f, &copts).expect("GPU smoother");
        assert_close(&format!("smooth f64 nx={nx} ny={ny}"), &got, &want, 1e-10);
        let (gf, gs) = cuda::smooth(0, &m, &z, &copts).expect("GPU filter + smoother");
        assert_close(&format!("fused filter f64 nx={nx}"), &gf, &f, 1e-10);
        assert_close(&format!("fused smooth f64 nx={nx}"), &gs, &want, 1e-10);
        let z32 = z.cast::<f32>();
        let f32r = kalman::filter(&m, &z32, &reference())
            .expect("CPU")
            .filtered;
        let w32 = kalman::smooth_filtered(&m, &f32r).expect("CPU smoother");
        let (_, g32) = cuda::smooth(0, &m, &z32, &copts).expect("GPU f32");
        assert_close(&format!("fused smooth f32 nx={nx}"), &g32, &w32, 1e-4);
        eprintln!("smoother nx={nx} ny={ny}: ok");
    }
}

#[test]
fn chunked_equals_unchunked_under_a_small_memory_budget() {
    if !gpu_or_skip("chunked_equals_unchunked_under_a_small_memory_budget") {
        return;
    }
    let m = random_model(4, 2, 5000);
    let z = random_measurements::<f32>(&m, 1001, 64, 5001, 0.1);
    let whole = cuda::filter_with(
        0,
        &m,
        &z,
        &FilterOptions::default(),
        &options(true, OutputLayout::Host),
    )
    .expect("GPU")
    .filtered;
    // Per track: z 128 + mean 256 + cov 1024 + loglik 64 values of 4 bytes = 5.9 KB; a
    // 600 KB budget holds about 50 tracks per slot: 21 chunks, two slots.
    for layout in [OutputLayout::Host, OutputLayout::Soa] {
        let small = options(true, layout).with_memory_budget(Some(600_000));
        let chunked = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &small)
            .expect("GPU chunked")
            .filtered;
        assert_eq!(
            chunked, whole,
            "chunked filter ({layout:?}) differs from the whole batch"
        );
    }
    for layout in [OutputLayout::Host, OutputLayout::Soa] {
        let small = options(true, layout).with_memory_budget(Some(600_000));
        let (f1, s1) = cuda::smooth(0, &m, &z, &options(true, layout)).expect("GPU");
        let (f2, s2) = cuda::smooth(0, &m, &z, &small).expect("GPU chunked");
        assert_eq!(f1, f2, "chunked fused filter differs ({layout:?})");
        assert_eq!(s1, s2, "chunked fused smoother differs ({layout:?})");
        let s3 = cuda::smooth_filtered_with(0, &m, &f1, &small).expect("GPU chunked smoother");
        assert_eq!(s3, s1, "chunked smoother differs ({layout:?})");
    }
    let want = kalman::filter(&m, &z, &reference()).expect("CPU").filtered;
    assert_close("chunked vs CPU", &whole, &want, 1e-4);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    if !gpu_or_skip("bad_input_is_an_error_not_a_panic") {
        return;
    }
    let m = random_model(4, 2, 6000);
    let z = random_measurements::<f64>(&m, 3, 5, 6001, 0.0);
    let m3 = random_model(4, 3, 6002);
    let e = cuda::filter(0, &m3, &z, &FilterOptions::default()).expect_err("ny mismatch");
    assert!(e.is_bad_input(), "{e}");
    let mut bad = z.clone();
    // Track 1, step 1, component 0 of 3 tracks x 5 steps x 2 components.
    bad.data_mut()[12] = f64::INFINITY;
    let e = cuda::filter(0, &m, &bad, &FilterOptions::default()).expect_err("infinite value");
    assert!(e.to_string().contains("track 1, step 1"), "{e}");
    assert!(kestrel::Device::parse("cuda").is_ok());
    assert!(kestrel::Device::parse("cuda:99").is_err());
}

#[test]
fn large_batches_cross_the_staging_buffers_intact() {
    if !gpu_or_skip("large_batches_cross_the_staging_buffers_intact") {
        return;
    }
    // 200,000 tracks x 50 steps: 640 MB of covariances, ten pieces of the 64 MB staging
    // buffers on the way down, two on the way up.
    let m = random_model(4, 2, 7000);
    let base = random_measurements::<f32>(&m, 1000, 50, 7001, 0.05);
    let tracks = 200_000;
    let mut data = Vec::with_capacity(tracks * base.data().len() / 1000);
    for i in 0..tracks {
        data.extend_from_slice(base.track(i % 1000));
    }
    // Make every track distinct so that a piece copied to the wrong place shows.
    for (i, v) in data.iter_mut().enumerate() {
        if !v.is_nan() {
            *v += ((i / 100) % 97) as f32 * 0.01;
        }
    }
    let z = kestrel::Measurements::new(tracks, 50, 2, data).expect("consistent shape");
    let opts = options(true, OutputLayout::Soa);
    let got = cuda::filter_with(0, &m, &z, &FilterOptions::default(), &opts)
        .expect("GPU")
        .filtered;
    let db = cuda::DeviceBatch::new(0, &m, &z, Keep::All, OutputLayout::Soa, false, &opts)
        .expect("device batch");
    db.filter().expect("filter");
    db.to_host_layout().expect("transpose");
    assert_eq!(
        db.filtered().expect("download"),
        got,
        "staged copies differ from plain copies"
    );
    for first in [0, 99_000, tracks - 1000] {
        let sub = kestrel::Measurements::new(
            1000,
            50,
            2,
            z.data()[first * 100..(first + 1000) * 100].to_vec(),
        )
        .expect("consistent shape");
        let want = kalman::filter(&m, &sub, &reference())
            .expect("CPU")
            .filtered;
        let part = kestrel::Estimates::new(
            1000,
            50,
            4,
            got.mean()[first * 200..(first + 1000) * 200].to_vec(),
            got.cov()[first * 800..(first + 1000) * 800].to_vec(),
            got.loglik()
                .map(|l| l[first * 50..(first + 1000) * 50].to_vec()),
        )
        .expect("consistent buffers");
        assert_close(&format!("tracks {first}.."), &part, &want, 1e-4);
    }
}
