//! Time-varying model files (`[model] kind = "time-varying"`, per-step matrices in an
//! `.npz` beside the TOML) through the binary: simulate, filter (sequential, parallel),
//! smooth (rts, parallel-rts, two-filter) and loglik (exact, parallel, window:N) equal the
//! library on the model read back (which tests/time_varying.rs holds to the textbook
//! loop), in f64 and f32; on a GPU too when there is one. Bad files (a missing array, a
//! wrong shape, a non-finite entry, fewer steps than the measurements) get one error line
//! naming the file, the array and the shapes, exit 2, nothing written.

mod common;

use common::*;
use kestrel::model::{load_linear_model, save_time_varying_model, StepMatrices, TimeVaryingModel};
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::{
    filter_on, smooth_on, Device, FilterMethod, FilterOptions, ScanAlgorithm, SmoothMethod,
};
use rand::{Rng, SeedableRng};
use std::path::Path;

fn spd(rng: &mut rand::rngs::StdRng, n: usize, floor: f64) -> DMatrix<f64> {
    let a = DMatrix::from_fn(n, n, |_, _| rng.gen_range(-1.0..1.0));
    &a * a.transpose() * 0.3 + DMatrix::identity(n, n) * floor
}

/// A random time-varying model of `t` steps written as `m.toml` + `steps.npz` in `dir`.
fn write_model(
    dir: &Path,
    seed: u64,
    nx: usize,
    ny: usize,
    t: usize,
) -> (String, TimeVaryingModel) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let steps = (0..t)
        .map(|_| StepMatrices {
            f: DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-1.0..1.0))
                .qr()
                .q()
                * 0.95,
            u: DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0)),
            q: spd(&mut rng, nx, 0.01),
            h: DMatrix::from_fn(ny, nx, |_, _| rng.gen_range(-1.0..1.0)),
            d: DVector::from_fn(ny, |_, _| rng.gen_range(-1.0..1.0)),
            r: spd(&mut rng, ny, 0.1),
        })
        .collect();
    let prior = kestrel::model::Prior {
        x0: DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0)),
        p0: spd(&mut rng, nx, 0.1),
    };
    let m = TimeVaryingModel::new(steps, prior).unwrap();
    let toml = dir.join("m.toml");
    save_time_varying_model(&m, &toml, &dir.join("steps.npz")).unwrap();
    (s(&toml).to_string(), m)
}

fn simulate(model: &str, z: &Path, tracks: &str, steps: &str) {
    ok(&common::simulate(
        model,
        tracks,
        steps,
        s(z),
        &["--seed", "3", "--missing", "0.1"],
    ));
}

fn run(args: &[&str]) {
    ok(&kestrel(args));
}

#[test]
fn every_command_and_method_reads_a_time_varying_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, _) = write_model(d, 1, 4, 2, 60);
    let z = d.join("z.npy");
    simulate(&model, &z, "3", "50");
    let lm = load_linear_model(&model).unwrap();
    let zm: kestrel::Measurements<f64> = kestrel::io::read_measurements(&z).unwrap();
    assert_eq!((zm.tracks(), zm.steps(), zm.ny()), (3, 50, 2));
    let gpu = kestrel::parallel::cuda::available(0).is_ok();
    let mut devices = vec!["cpu"];
    if gpu {
        devices.push("cuda");
    } else {
        eprintln!("GPU runs skipped: no GPU");
    }
    for device in devices {
        for precision in ["f64", "f32"] {
            let tol = if precision == "f64" { 1e-9 } else { 2e-3 };
            let options = |method| {
                [
                    "--method",
                    method,
                    "--device",
                    device,
                    "--precision",
                    precision,
                    "--output-precision",
                    "f64",
                ]
            };
            for method in ["sequential", "parallel"] {
                let out = d.join(format!("f-{device}-{precision}-{method}.npz"));
                ok(&filter(&model, s(&z), s(&out), &options(method)));
                let want = filter_on(
                    Device::Cpu,
                    &lm,
                    &zm,
                    if method == "sequential" {
                        FilterMethod::Sequential
                    } else {
                        FilterMethod::Parallel(ScanAlgorithm::Fastest)
                    },
                    &FilterOptions::default(),
                )
                .unwrap()
                .filtered;
                let got = npz(&out);
                let w = format!("filter {method} {device} {precision}");
                close(got.mean(), want.mean(), tol, &format!("{w} mean"));
                close(got.cov(), want.cov(), tol, &format!("{w} cov"));
                close(
                    got.loglik().unwrap(),
                    want.loglik().unwrap(),
                    tol,
                    &format!("{w} loglik"),
                );
            }
            for method in ["rts", "parallel-rts", "two-filter"] {
                let out = d.join(format!("s-{device}-{precision}-{method}.npz"));
                ok(&smooth(&model, s(&z), s(&out), &options(method)));
                let want = smooth_on(Device::Cpu, &lm, &zm, SmoothMethod::Rts)
                    .unwrap()
                    .smoothed;
                let got = npz(&out);
                let w = format!("smooth {method} {device} {precision}");
                close(got.mean(), want.mean(), tol, &format!("{w} mean"));
                close(got.cov(), want.cov(), tol, &format!("{w} cov"));
            }
        }
    }
    // loglik: exact and parallel are the filter's log-likelihoods.
    let want = filter_on(
        Device::Cpu,
        &lm,
        &zm,
        FilterMethod::Sequential,
        &FilterOptions::default(),
    )
    .unwrap()
    .filtered;
    for method in ["exact", "parallel", "window:100"] {
        let out = d.join(format!("ll-{}.npy", method.replace(':', "_")));
        run(&[
            "loglik",
            "--model",
            &model,
            "--input",
            s(&z),
            "--output",
            s(&out),
            "--method",
            method,
            "--device",
            "cpu",
        ]);
        let (shape, v) = kestrel::io::read_npy_array(&out).unwrap();
        assert_eq!(shape, [3, 50]);
        // A window longer than the series is the exact filter.
        close(
            &v,
            want.loglik().unwrap(),
            1e-9,
            &format!("loglik {method}"),
        );
    }
}

/// The windowed log-likelihood of a time-varying model whose steps all repeat one
/// time-invariant model equals the time-invariant path's (taps, FIR) through the binary.
#[test]
fn windowed_loglik_of_a_repeated_model_equals_the_time_invariant_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inv = kestrel::model::constant_velocity(1, 1.0, 0.5, 2.0, 10.0).unwrap();
    let inv_toml = d.join("inv.toml");
    kestrel::model::save_model(&inv, &inv_toml).unwrap();
    let tv = TimeVaryingModel::from_model(&inv, 200);
    let tv_toml = d.join("tv.toml");
    save_time_varying_model(&tv, &tv_toml, &d.join("tv.npz")).unwrap();
    let z = d.join("z.npy");
    simulate(s(&inv_toml), &z, "2", "200");
    for w in ["window:1", "window:7", "window:30"] {
        let (a, b) = (d.join("a.npy"), d.join("b.npy"));
        run(&[
            "loglik",
            "--model",
            s(&inv_toml),
            "--input",
            s(&z),
            "--output",
            s(&a),
            "--method",
            w,
            "--device",
            "cpu",
        ]);
        run(&[
            "loglik",
            "--model",
            s(&tv_toml),
            "--input",
            s(&z),
            "--output",
            s(&b),
            "--method",
            w,
            "--device",
            "cpu",
        ]);
        let (_, va) = kestrel::io::read_npy_array(&a).unwrap();
        let (_, vb) = kestrel::io::read_npy_array(&b).unwrap();
        close(&vb, &va, 1e-7, w);
    }
}

#[test]
fn bad_time_varying_files_get_one_error_line() {
    let dir = Dir::new();
    let d = dir.path();
    let (model, m) = write_model(d, 2, 2, 1, 20);
    let z = d.join("z.npy");
    simulate(&model, &z, "2", "20");
    let z30 = d.join("z30.npy");
    let inv = kestrel::model::random_walk(1, 1.0, 1.0, 1.0).unwrap();
    let inv_toml = d.join("inv.toml");
    kestrel::model::save_model(&inv, &inv_toml).unwrap();
    simulate(s(&inv_toml), &z30, "2", "30");
    // A 2-d state measured in 1 component, 30 steps: the model covers 20.
    let z30b = d.join("z30b.npy");
    let data: Vec<f64> = (0..60).map(|i| i as f64 * 0.1).collect();
    kestrel::io::write_npy_array(&z30b, &[2, 30, 1], &data).unwrap();
    std::fs::remove_file(&z30).unwrap();
    let out = d.join("out.npz");
    let o = s(&out);
    dir.run_bad(
        &[
            "filter",
            "--model",
            &model,
            "--input",
            s(&z30b),
            "--output",
            o,
            "--device",
            "cpu",
        ],
        &["m.toml", "steps.npz", "20 steps", "30 steps"],
    );
    dir.run_bad(
        &[
            "simulate",
            "--model",
            &model,
            "--tracks",
            "1",
            "--steps",
            "21",
            "--output",
            s(&d.join("zz.npy")),
        ],
        &["steps.npz", "20 steps", "21 steps"],
    );
    dir.run_bad(
        &[
            "loglik",
            "--model",
            &model,
            "--input",
            s(&z30b),
            "--output",
            s(&d.join("ll.npy")),
            "--method",
            "exact",
        ],
        &["steps.npz", "20 steps", "30 steps"],
    );
    dir.run_bad(
        &model_args(
            "loglik",
            &model,
            s(&z),
            s(&d.join("ll.npy")),
            "--method window:auto --device cpu",
        ),
        &["window:auto", "time-varying"],
    );
    // Broken .npz files: each differs from the model's own in one thing.
    let t = m.len();
    let flat = |f: &dyn Fn(&StepMatrices) -> Vec<f64>| -> Vec<f64> {
        m.steps().iter().flat_map(f).collect()
    };
    let rows = |a: &DMatrix<f64>| -> Vec<f64> { a.transpose().iter().copied().collect() };
    let f = flat(&|s| rows(&s.f));
    let q = flat(&|s| rows(&s.q));
    let h = flat(&|s| rows(&s.h));
    let r = flat(&|s| rows(&s.r));
    type Arrays = Vec<(&'static str, Vec<usize>, Vec<f64>)>;
    let good: Arrays = vec![
        ("F", vec![t, 2, 2], f),
        ("Q", vec![t, 2, 2], q),
        ("H", vec![t, 1, 2], h),
        ("R", vec![t, 1, 1], r),
    ];
    // Each case: what it changes in the model's own arrays, and what the error names.
    type Change<'a> = &'a dyn Fn(&mut Arrays);
    let cases: [(Change, &[&str]); 4] = [
        (
            &|a| drop(a.pop()),
            &["steps.npz", "array R is missing", "H [20, 1, 2]"],
        ),
        (
            &|a| a[2].1 = vec![t, 2, 1],
            &["steps.npz", "array H has shape [20, 2, 1]", "[20, ny, 2]"],
        ),
        (
            &|a| {
                a[3].1 = vec![t - 1, 1, 1];
                a[3].2.remove(0);
            },
            &["steps.npz", "array R has shape [19, 1, 1]", "[20, 1, 1]"],
        ),
        (
            &|a| a[0].2[13] = f64::INFINITY,
            &["steps.npz", "array F", "[3][0][1]", "not finite"],
        ),
    ];
    for (change, needles) in cases {
        let mut arrays = good.clone();
        change(&mut arrays);
        let list: Vec<(&str, &[usize], &[f64])> = arrays
            .iter()
            .map(|(n, s, v)| (*n, s.as_slice(), v.as_slice()))
            .collect();
        kestrel::io::write_npz_arrays(&d.join("steps.npz"), &list).unwrap();
        for cmd in ["filter", "smooth"] {
            dir.run_bad(&model_args(cmd, &model, s(&z), o, "--device cpu"), needles);
        }
        let ll = d.join("ll.npy");
        dir.run_bad(&model_args("loglik", &model, s(&z), s(&ll), ""), needles);
    }
}
