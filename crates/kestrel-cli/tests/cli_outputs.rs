//! Output selection (`--outputs`) and file precision (`--output-precision`): what is
//! asked for is written, equal to the full run's values; what is not is absent; bad
//! lists and values that do not fit are clean errors.

mod common;

use common::*;
use std::path::Path;

fn simulate(dir: &Path, b: usize, t: usize) -> std::path::PathBuf {
    let z = dir.join("z.npy");
    ok(&common::simulate(
        &example("cv2d.toml"),
        &b.to_string(),
        &t.to_string(),
        s(&z),
        &["--seed", "3", "--missing", "0.1"],
    ));
    z
}

fn run(cmd: &str, z: &Path, out: &Path, extra: &[&str]) {
    let model = example("cv2d.toml");
    let mut args = vec![
        cmd,
        "--model",
        &model,
        "--input",
        s(z),
        "--output",
        s(out),
        "--device",
        "cpu",
    ];
    args.extend_from_slice(extra);
    ok(&kestrel(&args));
}

fn arr<T: kestrel::Real>(p: &Path, name: &str) -> Option<(Vec<usize>, Vec<T>)> {
    kestrel::io::read_npz_array::<T>(p, name).unwrap()
}

#[test]
fn selected_outputs_equal_the_full_run_and_nothing_else_is_written() {
    let d = tempfile::tempdir().unwrap();
    let (b, t, nx) = (7, 11, 4);
    let z = simulate(d.path(), b, t);
    let full = d.path().join("full.npz");
    run("filter", &z, &full, &[]);
    let (ms, m) = arr::<f64>(&full, "mean").unwrap();
    let (cs, c) = arr::<f64>(&full, "cov").unwrap();
    let (_, l) = arr::<f64>(&full, "loglik").unwrap();
    assert_eq!((ms, cs.clone()), (vec![b, t, nx], vec![b, t, nx, nx]));

    let part = d.path().join("part.npz");
    run("filter", &z, &part, &["--outputs", "mean,loglik"]);
    assert_eq!(arr::<f64>(&part, "mean").unwrap().1, m);
    assert_eq!(arr::<f64>(&part, "loglik").unwrap().1, l);
    assert!(arr::<f64>(&part, "cov").is_none());

    let diag = d.path().join("diag.npz");
    run("filter", &z, &diag, &["--outputs", "diag"]);
    // The diagonals are the archive's `cov`, of shape [B, T, nx].
    let (ds, dv) = arr::<f64>(&diag, "cov").unwrap();
    assert_eq!(ds, vec![b, t, nx]);
    for k in 0..b * t {
        for i in 0..nx {
            assert_eq!(dv[k * nx + i], c[k * nx * nx + i * nx + i]);
        }
    }
    assert!(arr::<f64>(&diag, "mean").is_none() && arr::<f64>(&diag, "loglik").is_none());

    // CSV: the columns follow the selection.
    let csv = d.path().join("part.csv");
    run("smooth", &z, &csv, &["--outputs", "mean,diag"]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "track,t,x0,x1,x2,x3,P00,P11,P22,P33");
    assert_eq!(lines.count(), b * t);
}

#[test]
fn output_precision_writes_f32_and_refuses_values_that_do_not_fit() {
    let d = tempfile::tempdir().unwrap();
    let z = simulate(d.path(), 5, 9);
    let full = d.path().join("f64.npz");
    run("filter", &z, &full, &[]);
    let f32p = d.path().join("f32.npz");
    run("filter", &z, &f32p, &["--output-precision", "f32"]);
    for name in ["mean", "cov", "loglik"] {
        let (s64, v64) = arr::<f64>(&full, name).unwrap();
        let (s32, v32) = arr::<f32>(&f32p, name).unwrap();
        assert_eq!(s64, s32);
        for (a, b) in v64.iter().zip(&v32) {
            assert_eq!(*a as f32, *b, "{name}");
        }
    }
    // Measurements of 1e39 give means that do not fit in f32.
    let big = d.path().join("big.csv");
    std::fs::write(&big, "track,t,z0,z1\n0,0,1e39,1e39\n0,1,1e39,1e39\n").unwrap();
    let out = d.path().join("big.npz");
    let before = std::fs::read_dir(d.path()).unwrap().count();
    let model = example("cv2d.toml");
    let o = filter(
        &model,
        s(&big),
        s(&out),
        &["--device", "cpu", "--output-precision", "f32"],
    );
    expect_bad(&o, &["does not fit in f32", "track 0"], d.path(), before);
}

#[test]
fn bad_output_lists_are_one_clean_error() {
    let d = tempfile::tempdir().unwrap();
    let z = simulate(d.path(), 2, 3);
    let model = example("cv2d.toml");
    for list in ["", "mean,mean", "cov,diag", "covariance"] {
        let out = d.path().join("o.npz");
        let before = std::fs::read_dir(d.path()).unwrap().count();
        let o = filter(&model, s(&z), s(&out), &["--outputs", list]);
        expect_bad(&o, &["outputs"], d.path(), before);
    }
}
