//! `kestrel filter|smooth` with nonlinear models, IMM files and `--filter`: the extended
//! filter on a linear model equals the Kalman filter through the binary, nonlinear
//! files in both output formats, the IMM's mode probabilities, and bad model files or
//! options (exit 2, one `error:` line naming file, field and column, nothing written).

mod common;

use common::*;
use std::path::Path;

const PENDULUM: &str = r#"
[model]
kind = "nonlinear"
states = ["a", "w"]
f = ["a + w * dt", "w - g * sin(a) * dt"]
h = ["sin(a)"]
Q = [[3.3333333333333335e-9, 5e-7], [5e-7, 1e-4]]
R = [[0.1]]
constants = { dt = 0.01, g = 9.81 }
[prior]
x0 = [1.5, 0.0]
P0 = [[0.1, 0.0], [0.0, 0.1]]
[filter]
kind = "ukf"
"#;

const IMM: &str = r#"
[imm]
transition = [[0.95, 0.05], [0.05, 0.95]]
initial = [0.5, 0.5]
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.01
omega = 0.0
r = 1.0
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.01
omega = 0.2
r = 1.0
[prior]
x0 = [0.0, 1.0, 0.0, 0.0]
p0 = 10.0
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    s(&p).to_string()
}

fn pendulum_data(dir: &Path) -> String {
    // A few tracks of sin(angle) readings, one missing.
    let mut csv = String::from("track,t,z0\n");
    for b in 0..3 {
        for k in 0..40 {
            let a = 1.5 * (0.3 * k as f64 + b as f64).cos();
            let z = if k == 7 {
                "nan".to_string()
            } else {
                format!("{}", a.sin() + 0.01 * ((k * 7 + b) % 5) as f64)
            };
            csv += &format!("{b},{k},{z}\n");
        }
    }
    write(dir, "z.csv", &csv)
}

#[test]
fn the_extended_and_sigma_point_filters_on_a_linear_model_are_the_kalman_filter() {
    let dir = tempfile::tempdir().unwrap();
    let m = example("cv2d.toml");
    let z = dir.path().join("z.npy");
    ok(&simulate(
        &m,
        "4",
        "30",
        s(&z),
        &["--seed", "3", "--missing", "0.1"],
    ));
    for cmd in ["filter", "smooth"] {
        let kf = dir.path().join(format!("{cmd}-kf.npz"));
        ok(&kestrel(&[
            cmd,
            "--model",
            &m,
            "--input",
            s(&z),
            "--output",
            s(&kf),
            "--device",
            "cpu",
        ]));
        let want = npz(&kf);
        for kind in ["ekf", "ukf", "ckf", "iekf"] {
            let out = dir.path().join(format!("{cmd}-{kind}.npz"));
            let o = kestrel(&[
                cmd,
                "--model",
                &m,
                "--input",
                s(&z),
                "--output",
                s(&out),
                "--filter",
                kind,
            ]);
            ok(&o);
            assert!(stderr(&o).contains(kind), "{}", stderr(&o));
            let got = npz(&out);
            close(got.mean(), want.mean(), 1e-9, kind);
            close(got.cov(), want.cov(), 1e-9, kind);
            if cmd == "filter" {
                close(got.loglik().unwrap(), want.loglik().unwrap(), 1e-9, kind);
            }
        }
    }
    // `--filter kf` is the Kalman filter itself.
    let kf2 = dir.path().join("kf2.npz");
    ok(&filter(&m, s(&z), s(&kf2), &["--filter", "kf"]));
    assert_eq!(
        npz(&kf2).mean(),
        npz(&dir.path().join("filter-kf.npz")).mean()
    );
}

#[test]
fn a_nonlinear_file_filters_and_smooths_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pendulum.toml", PENDULUM);
    let z = pendulum_data(dir.path());
    let csv = dir.path().join("f.csv");
    let o = filter(&m, &z, s(&csv), &[]);
    ok(&o);
    assert!(stderr(&o).contains("filter (ukf)"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("track,t,"), "{}", &text[..60]);
    assert!(text.contains("loglik"));
    assert_eq!(text.lines().count(), 1 + 3 * 40);
    for (method, extra) in [
        ("rts", vec![]),
        ("iterated", vec!["--iterations", "3"]),
        ("parallel-iterated", vec!["--iterations", "3"]),
    ] {
        for kind in ["ekf", "ukf", "ckf", "iekf"] {
            let out = dir.path().join(format!("s-{method}-{kind}.npz"));
            let mut args = vec![
                "smooth",
                "--model",
                &m,
                "--input",
                &z,
                "--output",
                s(&out),
                "--filter",
                kind,
                "--method",
                method,
            ];
            args.extend(&extra);
            ok(&kestrel(&args));
            let e = npz(&out);
            assert_eq!((e.tracks(), e.steps(), e.nx()), (3, 40, 2));
            assert!(e.mean().iter().all(|v| v.is_finite()));
        }
    }
    // The parallel passes reach the sequential passes' smoother.
    for kind in ["ekf", "ukf"] {
        let (a, b) = (
            npz(&dir.path().join(format!("s-iterated-{kind}.npz"))),
            npz(&dir.path().join(format!("s-parallel-iterated-{kind}.npz"))),
        );
        close(b.mean(), a.mean(), 1e-8, kind);
    }
}

#[test]
fn the_particle_filters_range_bearing_kind_runs_the_ukf() {
    let dir = tempfile::tempdir().unwrap();
    let m = example("range-bearing.toml");
    let z = dir.path().join("z.npy");
    ok(&simulate(&m, "3", "25", s(&z), &["--seed", "2"]));
    let out = dir.path().join("out.npz");
    ok(&smooth(&m, s(&z), s(&out), &["--filter", "ukf"]));
    assert_eq!(npz(&out).nx(), 4);
}

#[test]
fn an_imm_file_writes_mode_probabilities() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "imm.toml", IMM);
    let mut csv = String::from("track,t,z0,z1\n");
    for k in 0..20 {
        csv += &format!("0,{k},{},{}\n", k as f64, 0.1 * (k % 3) as f64);
    }
    let z = write(dir.path(), "z.csv", &csv);
    let out = dir.path().join("imm.csv");
    let o = filter(&m, &z, s(&out), &[]);
    ok(&o);
    assert!(
        stderr(&o).contains("IMM filter (2 modes, ekf)"),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(",loglik,p0,p1"), "{header}");
    for line in text.lines().skip(1) {
        let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        let (p0, p1) = (v[v.len() - 2], v[v.len() - 1]);
        assert!((p0 + p1 - 1.0).abs() < 1e-9, "{line}");
    }
    // Straight-line data: the zero-turn mode wins.
    let last: Vec<f64> = text
        .lines()
        .last()
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(last[last.len() - 2] > 0.7, "{last:?}");
    // In an NPZ archive: one array `mode_probs` [B, T, r], the CSV's columns.
    let onpz = dir.path().join("imm.npz");
    ok(&filter(&m, &z, s(&onpz), &[]));
    let Some(kestrel::io::NpzArray::F64(shape, p)) =
        kestrel::io::read_npz_array_any(&onpz, "mode_probs").unwrap()
    else {
        panic!("no f64 mode_probs in the archive");
    };
    assert_eq!(shape, vec![1, 20, 2]);
    for (k, line) in text.lines().skip(1).enumerate() {
        let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(&p[2 * k..2 * k + 2], &v[v.len() - 2..], "step {k}");
    }
    assert!(kestrel::io::read_npz_array_any(&onpz, "p0")
        .unwrap()
        .is_none());
}

#[test]
fn bad_model_files_and_options_give_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let z = pendulum_data(d);
    let good = write(d, "pendulum.toml", PENDULUM);
    let typo = write(
        d,
        "typo.toml",
        &PENDULUM.replace("g * sin(a)", "g * sin(b)"),
    );
    let arity = write(
        d,
        "arity.toml",
        &PENDULUM.replace("sin(a)\"]", "atan2(a)\"]"),
    );
    let kind = write(
        d,
        "kind.toml",
        &PENDULUM.replace("kind = \"ukf\"", "kind = \"ufk\""),
    );
    let imm = write(d, "imm.toml", IMM);
    let cv = example("cv2d.toml");
    let out = "out.npz";
    for (cmd, model, extra, needles) in [
        ("filter", &typo, "", vec!["typo.toml", "model.f[1]: column 13: unknown name \"b\""]),
        ("filter", &arity, "", vec!["model.h[0]: column 1: atan2 takes 2 arguments, got 1"]),
        ("filter", &kind, "", vec!["filter.kind: expected kf, ekf, ukf, ckf or iekf"]),
        ("filter", &good, "--filter pf", vec!["--filter pf: unknown filter"]),
        ("filter", &good, "--filter kf", vec!["the Kalman filter (kf) needs a linear model"]),
        ("smooth", &cv, "--method iterated", vec!["--method iterated, parallel-iterated and --iterations apply to the nonlinear filters"]),
        ("smooth", &good, "--method two-filter", vec!["--method two-filter applies to the linear Kalman filter"]),
        ("smooth", &good, "--method parallel-sqrt-rts", vec!["--method parallel-sqrt-rts applies to the linear Kalman filter"]),
        ("filter", &good, "--method parallel-sqrt", vec!["--method parallel-sqrt applies to the linear Kalman filter"]),
        ("smooth", &imm, "", vec!["smoothing an IMM model is not available"]),
        ("smooth", &imm, "--method parallel-iterated", vec!["smoothing an IMM model is not available"]),
        ("smooth", &cv, "--method parallel-iterated", vec!["--method iterated, parallel-iterated and --iterations apply to the nonlinear filters"]),
        ("filter", &good, "--iterations 0", vec!["--iterations: must be at least 1"]),
        ("filter", &imm, "", vec!["z.csv", "the model measures 2"]),
    ] {
        run_bad(d, &model_args(cmd, model, &z, out, extra), &needles);
    }
}

#[test]
fn nonlinear_model_files_simulate_and_an_imm_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (z, x) = (d.join("rb.npy"), d.join("x.npy"));
    let model = example("ct-radar.toml");
    let o = simulate(&model, "20", "30", s(&z), &["--truth", s(&x)]);
    ok(&o);
    assert!(
        stderr(&o).contains("nonlinear, nx 5, ny 2"),
        "{}",
        stderr(&o)
    );
    let sim = kestrel::io::read_measurements::<f64>(&z).unwrap();
    assert_eq!((sim.tracks(), sim.steps(), sim.ny()), (20, 30, 2));
    // Bearings in (-pi, pi], ranges near the prior's 250 m.
    for zk in sim.data().chunks(2) {
        assert!(zk[1] > -std::f64::consts::PI && zk[1] <= std::f64::consts::PI);
        assert!(zk[0] > 100.0 && zk[0] < 400.0, "range {}", zk[0]);
    }
    let out = d.join("ct.npz");
    ok(&filter(&model, s(&z), s(&out), &[]));
    assert_eq!(npz(&out).nx(), 5);
    let imm = example("imm-two-modes.toml");
    run_bad(
        d,
        &[
            "simulate", "--model", &imm, "--tracks", "2", "--steps", "5", "--output", "i.npy",
        ],
        &["imm-two-modes.toml", "no single model to simulate"],
    );
    // A broken expression file, a missing probability out of range, a size too large to
    // hold: one error line, exit 2, nothing written (an existing output kept as it was).
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "[model]\nkind = \"nonlinear\"\nf = [\"x0 + y\"]\nh = [\"x0\"]\nQ = [[1.0]]\nR = [[1.0]]\n[prior]\nx0 = [0.0]\nP0 = [[1.0]]\n",
    )
    .unwrap();
    std::fs::write(d.join("keep.npy"), b"kept").unwrap();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[
                "simulate",
                "--model",
                s(&bad),
                "--tracks",
                "2",
                "--steps",
                "5",
                "--output",
                "keep.npy",
            ],
            &["bad.toml", "y"],
        ),
        (
            &[
                "simulate",
                "--model",
                &model,
                "--tracks",
                "2",
                "--steps",
                "5",
                "--missing",
                "1.5",
                "--output",
                "keep.npy",
            ],
            &["--missing"],
        ),
        (
            &[
                "simulate",
                "--model",
                &model,
                "--tracks",
                "99999999999",
                "--steps",
                "99999999999",
                "--output",
                "keep.npy",
            ],
            &["99999999999"],
        ),
    ];
    for (args, needles) in cases {
        run_bad(d, args, needles);
        assert_eq!(std::fs::read(d.join("keep.npy")).unwrap(), b"kept");
    }
}
