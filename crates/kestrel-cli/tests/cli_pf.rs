//! `kestrel pf`, `kestrel simulate` of the nonlinear kinds and `kestrel demo --pf`:
//! round trips in both formats, and every class of broken input (exit 2, one `error:`
//! line naming the problem, no output left behind).

mod common;

use common::*;

fn simulate(model: &str, z: &std::path::Path, truth: Option<&std::path::Path>) {
    let mut args = vec![
        "simulate",
        "--model",
        model,
        "--tracks",
        "3",
        "--steps",
        "25",
        "--seed",
        "2",
        "--missing",
        "0.1",
        "--output",
        s(z),
    ];
    if let Some(t) = truth {
        args.extend(["--truth", s(t)]);
    }
    ok(&kestrel(&args));
}

#[test]
fn filter_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let z = dir.path().join("z.npy");
    let x = dir.path().join("x.csv");
    let m = example("range-only.toml");
    simulate(&m, &z, Some(&x));
    let truth = std::fs::read_to_string(&x).unwrap();
    assert!(
        truth.starts_with("track,t,x0,x1,x2,x3\n"),
        "{}",
        &truth[..40]
    );
    let npz = dir.path().join("out.npz");
    let csv = dir.path().join("out.csv");
    for out in [&npz, &csv] {
        ok(&model_run(
            "pf",
            &m,
            s(&z),
            s(out),
            &[
                "--particles",
                "2000",
                "--resample",
                "stratified",
                "--ess",
                "0.7",
                "--seed",
                "9",
                "--device",
                "cpu",
            ],
        ));
    }
    let est = kestrel::io::read_estimates_npz::<f64>(&npz).unwrap();
    assert_eq!((est.tracks(), est.steps(), est.nx()), (3, 25, 4));
    assert!(est.mean().iter().chain(est.cov()).all(|v| v.is_finite()));
    let bytes = std::fs::read(&npz).unwrap();
    assert!(bytes.windows(7).any(|w| w == b"ess.npy"), "no ess array");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let mut want = String::from("track,t,x0,x1,x2,x3");
    for i in 0..4 {
        for j in 0..4 {
            want += &format!(",P{i}{j}");
        }
    }
    want += ",loglik,ess";
    assert_eq!(header, want);
    // The CSV holds the same numbers as the NPZ (same seed: the same run).
    let row: Vec<f64> = lines
        .nth(30)
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let (b, k) = (row[0] as usize, row[1] as usize);
    assert_eq!(&row[2..6], est.mean_at(b, k));
    assert_eq!(row[22], est.loglik().unwrap()[b * 25 + k]);
    assert!(row[23] >= 1.0 && row[23] <= 2000.0);
    // Linear kinds run too (checked against the Kalman filter in the library's tests).
    let zl = dir.path().join("zl.csv");
    simulate(&example("cv2d.toml"), &zl, None);
    ok(&model_run(
        "pf",
        &example("cv2d.toml"),
        s(&zl),
        s(&npz),
        &[
            "--particles",
            "500",
            "--device",
            "cpu",
            "--precision",
            "f32",
        ],
    ));
}

#[test]
fn nonlinear_kinds_simulate_and_filter() {
    let dir = tempfile::tempdir().unwrap();
    for (m, ny) in [
        ("stochastic-volatility.toml", 1),
        ("bearings-only.toml", 2),
        ("range-bearing.toml", 2),
    ] {
        let z = dir.path().join("z.csv");
        simulate(&example(m), &z, None);
        let text = std::fs::read_to_string(&z).unwrap();
        assert_eq!(
            text.lines().next().unwrap().split(',').count(),
            2 + ny,
            "{m}"
        );
        let out = dir.path().join("o.npz");
        ok(&model_run(
            "pf",
            &example(m),
            s(&z),
            s(&out),
            &[
                "--particles",
                "1000",
                "--resample",
                "metropolis:20",
                "--device",
                "cpu",
            ],
        ));
    }
}

#[test]
fn demo_draws_the_particle_cloud() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("pf.svg");
    let o = kestrel(&[
        "demo",
        "--pf",
        "--steps",
        "30",
        "--particles",
        "3000",
        "--device",
        "cpu",
        "--plot",
        s(&svg),
    ]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("position RMSE"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("particle mean"));
}

#[test]
fn broken_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let z = d.join("z.npy");
    let m = example("range-only.toml");
    simulate(&m, &z, None);
    let write = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let range = std::fs::read_to_string(&m).unwrap();
    let no_sensors = write(
        "nosensors.toml",
        &range.replace("sensors = [[0.0, 0.0], [150.0, 40.0]]\n", ""),
    );
    let unknown = write("unknown.toml", "[model]\nkind = \"teleport\"\n");
    let nan = write("nan.toml", &range.replace("q = 0.05", "q = nan"));
    let extra = write("extra.toml", &range.replace("r = 1.0", "r = 1.0\nmu = 3.0"));
    let cu = write("m.cu", "// model\n");
    let custom = write("custom.toml", "[model]\nkind = \"custom\"\nsource = \"m.cu\"\nnx = 4\nny = 2\n[prior]\nx0 = [0, 0, 0, 0]\np0 = 1\n");
    let _ = cu;
    let sv = example("stochastic-volatility.toml");
    let out = d.join("out.npz");
    let txt = d.join("o.txt");
    let base = model_args("pf", &m, s(&z), s(&out), "--device cpu --particles 100");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--particles", "0"], vec!["--particles", "at least 1"]),
        (vec!["--resample", "bogus"], vec!["--resample", "bogus"]),
        (vec!["--resample", "metropolis:0"], vec!["metropolis:0"]),
        (vec!["--ess=-1"], vec!["--ess"]),
        (
            vec!["--model", s(&no_sensors)],
            vec!["nosensors.toml", "sensors: missing"],
        ),
        (
            vec!["--model", s(&unknown)],
            vec!["unknown.toml", "teleport"],
        ),
        (vec!["--model", s(&nan)], vec!["nan.toml", "q", "finite"]),
        (vec!["--model", s(&extra)], vec!["mu", "does not apply"]),
        (
            vec!["--model", s(&custom)],
            vec!["custom", "GPU", "--device cuda"],
        ),
        (
            vec!["--model", &sv],
            vec!["z.npy", "2 components", "model measures 1"],
        ),
        (vec!["--particles", "2000000000"], vec!["would need", "GB"]),
        (
            vec!["--particles", "1000000000000000"],
            vec!["1000000000000000 particles", "at most"],
        ),
        (vec!["--output", s(&txt)], vec!["o.txt", ".npz"]),
        // A GPU that is not there (no machine has 100), before any set-up.
        (vec!["--device", "cuda:99"], vec!["--device cuda:99"]),
    ];
    for (extra_args, needles) in cases {
        run_bad(d, &with(&base, &extra_args), &needles);
    }
}

#[test]
fn grid_and_subset_resamplers_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let z = dir.path().join("z.npy");
    let m = example("range-only.toml");
    simulate(&m, &z, None);
    let run = |scheme: &str, tag: &str| -> Vec<u8> {
        let out = dir.path().join(format!("{tag}.csv"));
        ok(&model_run(
            "pf",
            &m,
            s(&z),
            s(&out),
            &[
                "--particles",
                "1500",
                "--resample",
                scheme,
                "--ess",
                "0.8",
                "--seed",
                "3",
                "--device",
                "cpu",
            ],
        ));
        std::fs::read(&out).unwrap()
    };
    // The grid selections pick the searches' ancestors: the same outputs, byte for byte.
    assert_eq!(run("systematic:grid", "sg"), run("systematic", "s"));
    assert_eq!(run("stratified:grid", "tg"), run("stratified", "t"));
    assert!(!run("subsets:8", "sub").is_empty());
    assert!(!run("subsets", "sub16").is_empty());
    let bad_csv = dir.path().join("bad.csv");
    for (bad, needle) in [
        ("subsets:0", "subsets:0"),
        ("subsets:x", "subsets:x"),
        ("grid", "grid"),
    ] {
        run_bad(
            dir.path(),
            &with(
                &model_args("pf", &m, s(&z), s(&bad_csv), "--particles 100"),
                &["--resample", bad],
            ),
            &["--resample", needle],
        );
    }
}
