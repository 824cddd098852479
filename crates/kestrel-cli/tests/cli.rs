//! The command line end to end: round trips through CSV, NPY and NPZ compared with the
//! library, and every kind of broken input giving exit status 2, an `error:` line that
//! names the problem, and no output file.

use kestrel::{Estimates, FilterOptions, Measurements};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kestrel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .output()
        .expect("the kestrel binary runs")
}

fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    p.to_str().expect("a UTF-8 path").to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "kestrel failed ({:?}):\n{}",
        o.status,
        stderr(o)
    );
}

/// Exit status 2, an `error:` line holding every needle, and nothing written to `dir`
/// beyond the files that were there before.
fn expect_bad(o: &Output, needles: &[&str], dir: &Path, before: usize) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "expected exit 2, stderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no line starting with `error:` in:\n{err}"));
    for n in needles {
        assert!(line.contains(n), "`{line}` does not mention `{n}`");
    }
    let now = std::fs::read_dir(dir).unwrap().count();
    assert_eq!(
        now,
        before,
        "a file was left behind in {}: {:?}",
        dir.display(),
        std::fs::read_dir(dir).unwrap().collect::<Vec<_>>()
    );
}

fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
        assert!(ok, "{what}[{i}]: {x} vs {y}");
    }
}

/// Parses an estimates CSV: (means, covariances, log-likelihoods), checking the header
/// and the track and step columns.
fn read_estimates_csv(
    p: &Path,
    tracks: usize,
    steps: usize,
    nx: usize,
    loglik: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut want = vec!["track".to_string(), "t".to_string()];
    want.extend((0..nx).map(|i| format!("x{i}")));
    want.extend((0..nx * nx).map(|i| format!("P{}{}", i / nx, i % nx)));
    if loglik {
        want.push("loglik".into());
    }
    assert_eq!(header, want);
    let (mut m, mut c, mut l) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = 0;
    for (i, line) in lines.enumerate() {
        let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(v.len(), want.len());
        assert_eq!((v[0] as usize, v[1] as usize), (i / steps, i % steps));
        m.extend_from_slice(&v[2..2 + nx]);
        c.extend_from_slice(&v[2 + nx..2 + nx + nx * nx]);
        l.extend_from_slice(&v[2 + nx + nx * nx..]);
        rows += 1;
    }
    assert_eq!(rows, tracks * steps);
    (m, c, l)
}

fn npz(p: &Path) -> Estimates<f64> {
    kestrel::io::read_estimates_npz(p).unwrap()
}

#[test]
fn filter_round_trips_through_csv_npy_and_npz() {
    let d = tempfile::tempdir().unwrap();
    let model_path = example("cv2d.toml");
    let model = kestrel::model::load_model(Path::new(&model_path)).unwrap();
    let (b, t) = (23, 17);
    let mut outputs = Vec::new();
    for ext in ["csv", "npy"] {
        let z = d.path().join(format!("z.{ext}"));
        let x = d.path().join(format!("x.{ext}"));
        let (bs, ts) = (b.to_string(), t.to_string());
        ok(&kestrel(&[
            "simulate",
            "--model",
            &model_path,
            "--tracks",
            &bs,
            "--steps",
            &ts,
            "--seed",
            "5",
            "--missing",
            "0.1",
            "--output",
            s(&z),
            "--truth",
            s(&x),
        ]));
        let zs: Measurements<f64> = kestrel::io::read_measurements(&z).unwrap();
        assert_eq!((zs.tracks, zs.steps, zs.ny), (b, t, 2));
        assert!((0..b)
            .flat_map(|i| (0..t).map(move |k| (i, k)))
            .any(|(i, k)| zs.is_missing(i, k)));
        let truth: Vec<f64> = if ext == "npy" {
            let xs: Measurements<f64> = kestrel::io::read_measurements(&x).unwrap();
            assert_eq!((xs.tracks, xs.steps, xs.ny), (b, t, 4));
            xs.data
        } else {
            let text = std::fs::read_to_string(&x).unwrap();
            assert!(text.starts_with("track,t,x0,x1,x2,x3\n"));
            text.lines()
                .skip(1)
                .flat_map(|l| {
                    l.split(',')
                        .skip(2)
                        .map(|f| f.parse::<f64>().unwrap())
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        assert_eq!(truth.len(), b * t * 4);
        assert!(truth.iter().all(|v| v.is_finite()));

        let (fz, fc) = (
            d.path().join(format!("f-{ext}.npz")),
            d.path().join(format!("f-{ext}.csv")),
        );
        ok(&kestrel(&[
            "filter",
            "--model",
            &model_path,
            "--input",
            s(&z),
            "--output",
            s(&fz),
            "--device",
            "cpu",
        ]));
        ok(&kestrel(&[
            "filter",
            "--model",
            &model_path,
            "--input",
            s(&z),
            "--output",
            s(&fc),
        ]));
        let e = npz(&fz);
        assert_eq!((e.tracks, e.steps, e.nx), (b, t, 4));
        let (m, c, l) = read_estimates_csv(&fc, b, t, 4, true);
        // CSV numbers are written in their shortest exact form: the files agree exactly.
        assert_eq!(m, e.mean);
        assert_eq!(c, e.cov);
        assert_eq!(Some(l), e.loglik);
        let lib = kestrel::filter(&model, &zs, &FilterOptions::default())
            .unwrap()
            .filtered;
        close(&e.mean, &lib.mean, 1e-12, "mean");
        close(&e.cov, &lib.cov, 1e-12, "cov");
        close(
            e.loglik.as_ref().unwrap(),
            lib.loglik.as_ref().unwrap(),
            1e-12,
            "loglik",
        );
        assert!(e.mean.iter().chain(&e.cov).all(|v| v.is_finite()));
        outputs.push(e);
    }
    // The same measurements through CSV and through NPY give the same estimates.
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn smooth_and_f32_match_the_library() {
    let d = tempfile::tempdir().unwrap();
    let model_path = example("cv2d-builder.toml");
    let model = kestrel::model::load_model(Path::new(&model_path)).unwrap();
    let z = d.path().join("z.npy");
    ok(&kestrel(&[
        "simulate",
        "--model",
        &model_path,
        "--tracks",
        "9",
        "--steps",
        "30",
        "--missing",
        "0.2",
        "--output",
        s(&z),
    ]));
    let zs: Measurements<f64> = kestrel::io::read_measurements(&z).unwrap();

    let out = d.path().join("s.npz");
    ok(&kestrel(&[
        "smooth",
        "--model",
        &model_path,
        "--input",
        s(&z),
        "--output",
        s(&out),
        "--method",
        "rts",
    ]));
    let e = npz(&out);
    assert!(e.loglik.is_none(), "smoother output has no log-likelihood");
    let (_, lib) = kestrel::smooth(&model, &zs).unwrap();
    close(&e.mean, &lib.mean, 1e-12, "smoothed mean");
    close(&e.cov, &lib.cov, 1e-12, "smoothed cov");
    let csv = d.path().join("s.csv");
    ok(&kestrel(&[
        "smooth",
        "--model",
        &model_path,
        "--input",
        s(&z),
        "--output",
        s(&csv),
    ]));
    let (m, c, l) = read_estimates_csv(&csv, 9, 30, 4, false);
    assert_eq!((m, c), (e.mean.clone(), e.cov.clone()));
    assert!(l.is_empty());

    let out32 = d.path().join("f32.npz");
    let o = kestrel(&[
        "filter",
        "--model",
        &model_path,
        "--input",
        s(&z),
        "--output",
        s(&out32),
        "--precision",
        "f32",
        "--device",
        "cpu",
    ]);
    ok(&o);
    assert!(
        stderr(&o).contains("f32") && stderr(&o).contains("total log-likelihood"),
        "{}",
        stderr(&o)
    );
    let e32: Estimates<f32> = kestrel::io::read_estimates_npz(&out32).unwrap();
    let lib32 = kestrel::filter(&model, &zs.cast::<f32>(), &FilterOptions::default())
        .unwrap()
        .filtered;
    assert_eq!(e32.mean, lib32.mean);
    assert_eq!(e32.cov, lib32.cov);
}

#[test]
fn parallel_method_gives_the_filter_or_a_clean_error() {
    let d = tempfile::tempdir().unwrap();
    let model_path = example("cv2d.toml");
    let z = d.path().join("z.csv");
    ok(&kestrel(&[
        "simulate",
        "--model",
        &model_path,
        "--tracks",
        "4",
        "--steps",
        "40",
        "--output",
        s(&z),
    ]));
    let reference = |cmd: &str| {
        let out = d.path().join(format!("{cmd}-seq.npz"));
        ok(&kestrel(
            &[
                "filter",
                "--model",
                &model_path,
                "--input",
                s(&z),
                "--output",
                s(&out),
                "--device",
                "cpu",
            ]
            .map(|a| if a == "filter" { cmd } else { a }),
        ));
        npz(&out)
    };
    let (filtered, smoothed) = (reference("filter"), reference("smooth"));
    let runs = [
        ("filter", "parallel", "fastest"),
        ("filter", "parallel", "blelloch"),
        ("smooth", "parallel-rts", "fastest"),
        ("smooth", "two-filter", "fastest"),
    ];
    for (cmd, method, scan) in runs {
        let before = std::fs::read_dir(d.path()).unwrap().count();
        let out = d.path().join(format!("{cmd}-{method}-{scan}.npz"));
        let o = kestrel(&[
            cmd,
            "--model",
            &model_path,
            "--input",
            s(&z),
            "--output",
            s(&out),
            "--device",
            "cpu",
            "--method",
            method,
            "--scan",
            scan,
        ]);
        if o.status.success() {
            let (a, b) = (
                if cmd == "filter" {
                    &filtered
                } else {
                    &smoothed
                },
                npz(&out),
            );
            close(&b.mean, &a.mean, 1e-8, &format!("{method} mean"));
            close(&b.cov, &a.cov, 1e-8, &format!("{method} cov"));
            assert_eq!(a.loglik.is_some(), b.loglik.is_some());
            if let (Some(x), Some(y)) = (&b.loglik, &a.loglik) {
                close(x, y, 1e-8, &format!("{method} loglik"));
            }
        } else {
            expect_bad(&o, &[method], d.path(), before);
        }
    }
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        Case {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn count(&self) -> usize {
        std::fs::read_dir(self.dir.path()).unwrap().count()
    }
    fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// Runs `filter` with the given model and input, expecting a clean failure.
    fn filter_fails(&self, model: &str, input: &Path, extra: &[&str], needles: &[&str]) {
        let before = self.count();
        let out = self.out("out.npz");
        let mut args = vec![
            "filter",
            "--model",
            model,
            "--input",
            s(input),
            "--output",
            s(&out),
        ];
        args.extend_from_slice(extra);
        expect_bad(&kestrel(&args), needles, self.dir.path(), before);
        assert!(!out.exists());
    }
}

const GOOD_CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

#[test]
fn malformed_measurements_are_named() {
    let c = Case::new();
    let m = example("cv2d.toml");
    let bad_number = c.file("num.csv", "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.x5\n");
    c.filter_fails(
        &m,
        &bad_number,
        &[],
        &[
            "num.csv:3",
            "z1",
            "track 0",
            "step 1",
            "malformed number \"2.x5\"",
        ],
    );
    let columns = c.file("cols.csv", "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5\n");
    c.filter_fails(
        &m,
        &columns,
        &[],
        &["cols.csv:3", "expected 4 fields", "found 3"],
    );
    let gap = c.file("gap.csv", "track,t,z0,z1\n0,0,1,2\n0,1,1,2\n0,3,1,2\n");
    c.filter_fails(
        &m,
        &gap,
        &[],
        &["gap.csv:4", "track 0", "step 2 is missing"],
    );
    let header = c.file("head.csv", "id,t,z0,z1\n0,0,1,2\n");
    c.filter_fails(&m, &header, &[], &["head.csv:1", "header"]);
    let dims = c.file("dims.csv", "track,t,z0,z1,z2\n0,0,1,2,3\n");
    c.filter_fails(
        &m,
        &dims,
        &[],
        &["dims.csv", "3 components", "model measures 2"],
    );
    let junk = c.file("junk.npy", "this is not an array");
    c.filter_fails(&m, &junk, &[], &["junk.npy", ".npy"]);
}

#[test]
fn broken_models_are_named() {
    let c = Case::new();
    let z = c.file("z.csv", GOOD_CSV);
    let r_not_pd = c.file(
        "r.toml",
        "[model]\nF = [[1.0, 0.0], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0], [0.0, 1.0]]\nR = [[1.0, 2.0], [2.0, 1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
    );
    c.filter_fails(
        s(&r_not_pd),
        &z,
        &[],
        &["r.toml", "R", "not positive definite"],
    );
    let nan = c.file(
        "nan.toml",
        "[model]\nF = [[1.0, nan], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0], [0.0, 1.0]]\nR = [[1.0, 0.0], [0.0, 1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
    );
    c.filter_fails(s(&nan), &z, &[], &["nan.toml", "F", "not finite"]);
    let syntax = c.file("syntax.toml", "[model\nF = 1\n");
    c.filter_fails(s(&syntax), &z, &[], &["syntax.toml"]);
    let missing = c.out("absent.toml");
    c.filter_fails(s(&missing), &z, &[], &["absent.toml"]);
}

#[test]
fn files_devices_and_usage_errors() {
    let c = Case::new();
    let m = example("cv2d.toml");
    let z = c.file("z.csv", GOOD_CSV);
    c.filter_fails(&m, &c.out("absent.csv"), &[], &["absent.csv"]);
    std::fs::create_dir(c.out("dir.csv")).unwrap();
    c.filter_fails(&m, &c.out("dir.csv"), &[], &["dir.csv", "is a directory"]);
    let txt = c.file("z.txt", GOOD_CSV);
    c.filter_fails(&m, &txt, &[], &["z.txt", ".csv or .npy"]);
    c.filter_fails(&m, &z, &["--device", "tpu"], &["unknown device", "tpu"]);
    if kestrel::cuda::available(0).is_err() {
        c.filter_fails(&m, &z, &["--device", "cuda"], &["cuda"]);
    } else {
        println!("a CUDA GPU is present: the no-GPU error of --device cuda is not checked");
    }

    // An unknown output extension is refused before any work.
    let before = c.count();
    let o = kestrel(&[
        "filter",
        "--model",
        &m,
        "--input",
        s(&z),
        "--output",
        s(&c.out("out.json")),
    ]);
    expect_bad(&o, &["out.json", ".csv or .npz"], c.dir.path(), before);
    // clap's usage errors exit 2 as well.
    let o = kestrel(&[
        "filter",
        "--model",
        &m,
        "--input",
        s(&z),
        "--output",
        s(&c.out("o.npz")),
        "--method",
        "sideways",
    ]);
    expect_bad(&o, &["sideways"], c.dir.path(), before);
    let o = kestrel(&[
        "smooth",
        "--model",
        &m,
        "--input",
        s(&z),
        "--output",
        s(&c.out("o.npz")),
        "--scan",
        "bogus",
    ]);
    expect_bad(&o, &["bogus"], c.dir.path(), before);
    let o = kestrel(&[
        "simulate",
        "--model",
        &m,
        "--tracks",
        "2",
        "--steps",
        "3",
        "--missing",
        "1.5",
        "--output",
        s(&c.out("z2.csv")),
    ]);
    expect_bad(&o, &["--missing"], c.dir.path(), before);
    let o = kestrel(&[
        "demo",
        "--tracks",
        "3",
        "--steps",
        "3",
        "--plot",
        s(&c.out("p.png")),
    ]);
    expect_bad(&o, &["svg"], c.dir.path(), before);
}

#[test]
fn demo_reports_accuracy_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let plot = d.path().join("demo.svg");
    let o = kestrel(&[
        "demo",
        "--tracks",
        "300",
        "--steps",
        "40",
        "--device",
        "cpu",
        "--plot",
        s(&plot),
    ]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("position RMSE"))
        .expect("an RMSE line");
    let nums: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums.len(), 3, "{line}");
    let (raw, filt, smooth) = (nums[0], nums[1], nums[2]);
    assert!(
        smooth < filt && filt < raw,
        "smoother < filter < measurements: {line}"
    );
    let nees = out
        .lines()
        .find(|l| l.contains("mean NEES"))
        .expect("a NEES line");
    let n: Vec<f64> = nees
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // 300 x 40 steps of a 4-D state: the mean NEES of a consistent filter is 4 within a few percent.
    assert!(
        n.len() == 2 && (n[0] - 4.0).abs() < 0.4 && (n[1] - 4.0).abs() < 0.6,
        "{nees}"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("truth")
            && svg.contains("smoother")
            && svg.contains("track 0")
    );
}
