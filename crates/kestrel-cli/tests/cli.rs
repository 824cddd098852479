//! The command line end to end: round trips through CSV, NPY and NPZ compared with the
//! library, the smoother, f32, the parallel methods, and the demo.

mod common;

use common::*;
use kestrel::{Estimates, FilterOptions, Measurements};
use std::path::Path;

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
        ok(&simulate(
            &model_path,
            &bs,
            &ts,
            s(&z),
            &["--seed", "5", "--missing", "0.1", "--truth", s(&x)],
        ));
        let zs: Measurements<f64> = kestrel::io::read_measurements(&z).unwrap();
        assert_eq!((zs.tracks(), zs.steps(), zs.ny()), (b, t, 2));
        assert!((0..b)
            .flat_map(|i| (0..t).map(move |k| (i, k)))
            .any(|(i, k)| zs.is_missing(i, k)));
        let truth: Vec<f64> = if ext == "npy" {
            let xs: Measurements<f64> = kestrel::io::read_measurements(&x).unwrap();
            assert_eq!((xs.tracks(), xs.steps(), xs.ny()), (b, t, 4));
            xs.data().to_vec()
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
        ok(&filter(&model_path, s(&z), s(&fz), &["--device", "cpu"]));
        ok(&filter(&model_path, s(&z), s(&fc), &[]));
        let e = npz(&fz);
        assert_eq!((e.tracks(), e.steps(), e.nx()), (b, t, 4));
        let (m, c, l) = read_estimates_csv(&fc, b, t, 4, true);
        // CSV numbers are written in their shortest exact form: the files agree exactly.
        assert_eq!(m, e.mean());
        assert_eq!(c, e.cov());
        assert_eq!(Some(&l[..]), e.loglik());
        let lib = kestrel::filter(&model, &zs, &FilterOptions::default())
            .unwrap()
            .filtered;
        close(e.mean(), lib.mean(), 1e-12, "mean");
        close(e.cov(), lib.cov(), 1e-12, "cov");
        close(e.loglik().unwrap(), lib.loglik().unwrap(), 1e-12, "loglik");
        assert!(e.mean().iter().chain(e.cov()).all(|v| v.is_finite()));
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
    ok(&simulate(
        &model_path,
        "9",
        "30",
        s(&z),
        &["--missing", "0.2"],
    ));
    let zs: Measurements<f64> = kestrel::io::read_measurements(&z).unwrap();

    let out = d.path().join("s.npz");
    ok(&smooth(&model_path, s(&z), s(&out), &["--method", "rts"]));
    let e = npz(&out);
    assert!(
        e.loglik().is_none(),
        "smoother output has no log-likelihood"
    );
    let (_, lib) = kestrel::smooth(&model, &zs).unwrap();
    close(e.mean(), lib.mean(), 1e-12, "smoothed mean");
    close(e.cov(), lib.cov(), 1e-12, "smoothed cov");
    let csv = d.path().join("s.csv");
    ok(&smooth(&model_path, s(&z), s(&csv), &[]));
    let (m, c, l) = read_estimates_csv(&csv, 9, 30, 4, false);
    assert_eq!((m, c), (e.mean().to_vec(), e.cov().to_vec()));
    assert!(l.is_empty());

    let out32 = d.path().join("f32.npz");
    let o = filter(
        &model_path,
        s(&z),
        s(&out32),
        &["--precision", "f32", "--device", "cpu"],
    );
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
    assert_eq!(e32.mean(), lib32.mean());
    assert_eq!(e32.cov(), lib32.cov());
}

#[test]
fn parallel_method_gives_the_filter_or_a_clean_error() {
    let d = tempfile::tempdir().unwrap();
    let model_path = example("cv2d.toml");
    let z = d.path().join("z.csv");
    ok(&simulate(&model_path, "4", "40", s(&z), &[]));
    let reference = |cmd: &str| {
        let out = d.path().join(format!("{cmd}-seq.npz"));
        ok(&model_run(
            cmd,
            &model_path,
            s(&z),
            s(&out),
            &["--device", "cpu"],
        ));
        npz(&out)
    };
    let (filtered, smoothed) = (reference("filter"), reference("smooth"));
    let runs = [
        ("filter", "parallel", "fastest"),
        ("filter", "parallel", "blelloch"),
        ("smooth", "parallel-rts", "fastest"),
        ("smooth", "two-filter", "fastest"),
        ("filter", "parallel-sqrt", "fastest"),
        ("filter", "parallel-sqrt", "ladner-fischer"),
        ("smooth", "parallel-sqrt-rts", "fastest"),
    ];
    for (cmd, method, scan) in runs {
        let before = std::fs::read_dir(d.path()).unwrap().count();
        let out = d.path().join(format!("{cmd}-{method}-{scan}.npz"));
        let extra = ["--device", "cpu", "--method", method, "--scan", scan];
        let o = model_run(cmd, &model_path, s(&z), s(&out), &extra);
        if o.status.success() {
            let (a, b) = (
                if cmd == "filter" {
                    &filtered
                } else {
                    &smoothed
                },
                npz(&out),
            );
            close(b.mean(), a.mean(), 1e-8, &format!("{method} mean"));
            close(b.cov(), a.cov(), 1e-8, &format!("{method} cov"));
            assert_eq!(a.loglik().is_some(), b.loglik().is_some());
            if let (Some(x), Some(y)) = (&b.loglik(), &a.loglik()) {
                close(x, y, 1e-8, &format!("{method} loglik"));
            }
        } else {
            expect_bad(&o, &[method], d.path(), before);
        }
    }
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
