//! `kestrel retrodict` through the binary: the smoothed estimates of stored filter
//! estimates equal `kestrel smooth` on the measurements the filter read, for both
//! methods and every precision the filter's file comes in (f64, f32), for a
//! time-invariant and a time-varying model; `--means-only` writes the means alone (the
//! same means); on a GPU too when there is one. Bad inputs (a missing key, variances in
//! place of covariances, shapes that disagree with the model, too few model steps, a
//! non-finite value, the output naming the input) get one error line, exit 2, nothing
//! written.

mod common;

use common::*;
use kestrel::io::NpzArray;
use std::path::Path;

fn arr(p: &Path, name: &str) -> Option<NpzArray> {
    kestrel::io::read_npz_array_any(p, name).unwrap()
}

fn f64s(a: &NpzArray) -> Vec<f64> {
    match a {
        NpzArray::F64(_, v) => v.clone(),
        NpzArray::F32(_, v) => v.iter().map(|x| f64::from(*x)).collect(),
    }
}

fn time_varying_model(d: &Path) -> String {
    let inv = kestrel::model::constant_velocity(2, 1.0, 0.3, 2.0, 5.0).unwrap();
    let mut tv = kestrel::TimeVaryingModel::from_model(&inv, 40);
    let mut steps = tv.steps().to_vec();
    for (k, s) in steps.iter_mut().enumerate() {
        s.f[(0, 1)] = 0.5 + 0.02 * k as f64;
        s.r[(0, 0)] = 1.0 + 0.1 * (k % 7) as f64;
        s.u[1] = 0.01 * k as f64;
    }
    tv = kestrel::TimeVaryingModel::new(steps, tv.prior().clone()).unwrap();
    let toml = d.join("tv.toml");
    kestrel::model::save_time_varying_model(&tv, &toml, &d.join("tv.npz")).unwrap();
    s(&toml).to_string()
}

#[test]
fn retrodict_equals_smooth_for_both_methods_and_precisions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tv = time_varying_model(d);
    let mut devices = vec!["cpu"];
    if kestrel::parallel::cuda::available(0).is_ok() {
        devices.push("cuda");
    } else {
        eprintln!("GPU runs skipped: no GPU");
    }
    for model in [example("cv2d.toml"), tv] {
        let z = d.join("z.npy");
        ok(&simulate(
            &model,
            "5",
            "40",
            s(&z),
            &["--seed", "9", "--missing", "0.1"],
        ));
        for precision in ["f64", "f32"] {
            let tol = if precision == "f64" { 1e-9 } else { 2e-3 };
            let filtered = d.join(format!("f-{precision}.npz"));
            let smoothed = d.join(format!("s-{precision}.npz"));
            for (cmd, out) in [("filter", &filtered), ("smooth", &smoothed)] {
                ok(&kestrel(&[
                    cmd,
                    "--model",
                    &model,
                    "--input",
                    s(&z),
                    "--output",
                    s(out),
                    "--device",
                    "cpu",
                    "--precision",
                    precision,
                ]));
            }
            let want_m = f64s(&arr(&smoothed, "mean").unwrap());
            let want_c = f64s(&arr(&smoothed, "cov").unwrap());
            for device in &devices {
                for method in ["rts", "parallel"] {
                    let out = d.join("r.npz");
                    ok(&model_run(
                        "retrodict",
                        &model,
                        s(&filtered),
                        s(&out),
                        &["--method", method, "--device", device],
                    ));
                    let m = arr(&out, "mean").unwrap();
                    let c = arr(&out, "cov").unwrap();
                    assert_eq!(m.dtype(), precision, "written in the input's precision");
                    assert_eq!(c.shape(), [5, 40, 4, 4]);
                    let w = format!("{model} {precision} {device} {method}");
                    close(&f64s(&m), &want_m, tol, &format!("{w} mean"));
                    close(&f64s(&c), &want_c, tol, &format!("{w} cov"));
                    assert!(arr(&out, "loglik").is_none(), "{w}: no loglik");
                    ok(&model_run(
                        "retrodict",
                        &model,
                        s(&filtered),
                        s(&out),
                        &["--method", method, "--device", device, "--means-only"],
                    ));
                    assert!(arr(&out, "cov").is_none(), "{w}: means only writes no cov");
                    close(
                        &f64s(&arr(&out, "mean").unwrap()),
                        &want_m,
                        tol,
                        &format!("{w} means only"),
                    );
                }
            }
        }
    }
}

#[test]
fn bad_filtered_files_get_one_error_line() {
    let dir = Dir::new();
    let d = dir.path();
    let model = example("cv2d.toml");
    let z = d.join("z.npy");
    ok(&simulate(&model, "2", "50", s(&z), &[]));
    let f = d.join("f.npz");
    ok(&filter(&model, s(&z), s(&f), &["--device", "cpu"]));
    let diag = d.join("diag.npz");
    ok(&filter(
        &model,
        s(&z),
        s(&diag),
        &["--device", "cpu", "--outputs", "mean, diag"],
    ));
    let m = f64s(&arr(&f, "mean").unwrap());
    let c = f64s(&arr(&f, "cov").unwrap());
    let only_mean = d.join("only_mean.npz");
    kestrel::io::write_npz_arrays(&only_mean, &[("mean", &[2, 50, 4], &m)]).unwrap();
    let no_mean = d.join("no_mean.npz");
    kestrel::io::write_npz_arrays(&no_mean, &[("cov", &[2, 50, 4, 4], &c)]).unwrap();
    let mut cn = c.clone();
    cn[16 * 7 + 5] = f64::NAN;
    let nan = d.join("nan.npz");
    kestrel::io::write_npz_arrays(
        &nan,
        &[("mean", &[2, 50, 4], &m), ("cov", &[2, 50, 4, 4], &cn)],
    )
    .unwrap();
    let skew = d.join("skew.npz");
    kestrel::io::write_npz_arrays(
        &skew,
        &[("mean", &[2, 50, 4], &m), ("cov", &[2, 25, 8, 4], &c)],
    )
    .unwrap();
    let rw = d.join("rw.toml");
    kestrel::model::save_model(&kestrel::model::random_walk(3, 1.0, 1.0, 1.0).unwrap(), &rw)
        .unwrap();
    let tv = time_varying_model(d);
    let out = d.join("out.npz");
    let run = |input: &Path, model: &str, extra: &[&str], needles: &[&str]| {
        let mut a = vec![
            "retrodict",
            "--model",
            model,
            "--input",
            s(input),
            "--output",
            s(&out),
            "--device",
            "cpu",
        ];
        a.extend_from_slice(extra);
        dir.run_bad(&a, needles);
    };
    run(
        &only_mean,
        &model,
        &[],
        &["only_mean.npz", "no array `cov`"],
    );
    run(&no_mean, &model, &[], &["no_mean.npz", "no array `mean`"]);
    run(
        &diag,
        &model,
        &[],
        &[
            "diag.npz",
            "[2, 50, 4]",
            "full covariances",
            "[2, 50, 4, 4]",
        ],
    );
    run(
        &skew,
        &model,
        &[],
        &["skew.npz", "[2, 25, 8, 4]", "[2, 50, 4, 4]"],
    );
    run(&f, s(&rw), &[], &["f.npz", "[2, 50, 4]", "3"]);
    run(&f, &tv, &[], &["tv.npz", "40 steps", "50 steps"]);
    run(&nan, &model, &[], &["track 0", "step 7", "not finite"]);
    run(&f, &model, &["--method", "fast"], &["fast"]);
    run(&z, &model, &[], &["z.npy", ".npz"]);
    dir.run_bad(
        &[
            "retrodict",
            "--model",
            &model,
            "--input",
            s(&f),
            "--output",
            s(&f),
            "--device",
            "cpu",
        ],
        &["f.npz", "input"],
    );
}
