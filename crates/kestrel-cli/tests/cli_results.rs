//! The reliability contract, continued (cli_reliability.rs): results that are not finite
//! are never written silently, the newer commands hold the contract, f32 limits, and the
//! window longer than the tracks.

mod common;

use super::cli_reliability::GOOD_CSV;
use common::*;

const UNSTABLE: &str = "[model]\nF = [[10.0, 0.0], [0.0, 10.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0]]\nR = [[1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n";

#[test]
fn non_finite_results_are_never_written_silently() {
    let d = Dir::new();
    let m = d.file("unstable.toml", UNSTABLE.as_bytes());
    // F = 10 I, only the first component measured, T = 1000.
    let mut csv = String::from("track,t,z0\n");
    for k in 0..1000 {
        csv += &format!("0,{k},{}\n", ((k * 7919) % 13) as f64 * 0.1 - 0.6);
    }
    let z = d.file("z.csv", csv.as_bytes());
    for out in ["s.npz", "s.csv"] {
        let o_path = d.sentinel(out);
        let o = smooth(&m, &z, &o_path, &[]);
        contract(
            &o,
            1,
            &[out, "track 0, step", "NaN"],
            d.path(),
            &[out, "unstable.toml", "z.csv"],
        );
        d.intact(out);
        std::fs::remove_file(&o_path).unwrap();
    }
    // The filter's means are right and only the unobserved variance is infinite: the
    // output is written, with one warning line naming where.
    let f = d.p("f.npz");
    let o = filter(&m, &z, f.to_str().unwrap(), &[]);
    ok(&o);
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("infinite") && warnings[0].contains("P11"),
        "{err}"
    );
    let est = npz(&f);
    assert!(est.mean().iter().all(|v| v.is_finite()));
    assert!(est.cov().iter().any(|v| v.is_infinite()));
    // Simulating the unstable model overflows the state: an error, not a NaN file.
    let x = d.p("x.csv");
    let o = simulate(&m, "1", "1000", x.to_str().unwrap(), &[]);
    contract(
        &o,
        1,
        &["truth", "track 0, step", "overflows"],
        d.path(),
        &["f.npz", "unstable.toml", "z.csv"],
    );
}

/// The commands added this round hold the same contract: an output that is an input or
/// another output is refused, sizes are checked, failures are one line.
#[test]
fn the_newer_commands_hold_the_contract() {
    let d = Dir::new();
    let f = d.p("f.npy");
    let f = f.to_str().unwrap();
    ok(&kestrel(&[
        "simulate-frames",
        "--output",
        f,
        "--frames",
        "3",
        "--height",
        "16",
        "--width",
        "16",
    ]));
    d.sentinel("x.csv");
    let o = kestrel(&[
        "simulate-frames",
        "--output",
        f,
        "--truth",
        f,
        "--frames",
        "2",
    ]);
    contract(
        &o,
        2,
        &["f.npy", "two outputs"],
        d.path(),
        &["f.npy", "x.csv"],
    );
    d.intact("x.csv");
    let o = kestrel(&[
        "simulate-frames",
        "--output",
        d.p("g.npy").to_str().unwrap(),
        "--frames",
        "1",
        "--height",
        "4294967296",
        "--width",
        "4294967296",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert_eq!(listing(d.path()), vec!["f.npy", "x.csv"]);
    // tbd: the state written over its own frames.
    let o = kestrel(&[
        "tbd",
        "--input",
        f,
        "--output",
        d.p("det.csv").to_str().unwrap(),
        "--state-out",
        f,
    ]);
    contract(&o, 2, &["f.npy", "input"], d.path(), &["f.npy", "x.csv"]);
    // eval: the per-step output over the truth.
    let truth = d.file("truth.csv", b"t,id,x,y\n0,0,1.0,2.0\n");
    let o = kestrel(&[
        "eval", "--truth", &truth, "--tracks", &truth, "--output", &truth, "--metric", "gospa",
    ]);
    contract(
        &o,
        2,
        &["truth.csv", "input"],
        d.path(),
        &["f.npy", "truth.csv", "x.csv"],
    );
    // pf: output over the measurements.
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let o = model_run("pf", &example("cv2d.toml"), &z, &z, &["--particles", "10"]);
    contract(
        &o,
        2,
        &["z.csv", "input"],
        d.path(),
        &["f.npy", "truth.csv", "x.csv", "z.csv"],
    );
    assert_eq!(std::fs::read_to_string(d.p("z.csv")).unwrap(), GOOD_CSV);
}

/// The log-likelihoods of `loglik` and the states of `track` are checked like the
/// filter's estimates: a non-finite log-likelihood is an error naming track and step,
/// with the old output kept; an infinite variance with finite means is a warning.
#[test]
fn loglik_and_track_outputs_are_checked_for_non_finite_values() {
    let d = Dir::new();
    let rw = "[model]\nF = [[1.0]]\nQ = [[1.0]]\nH = [[1.0]]\nR = [[1.0]]\n[prior]\nx0 = [0.0]\nP0 = [[1.0]]\n";
    let m = d.file("rw.toml", rw.as_bytes());
    // |z| = 1e300: the quadratic form overflows, the log-likelihood is -inf.
    let z = d.file("z.csv", b"track,t,z0\n0,0,1.0\n0,1,1e300\n0,2,3.0\n");
    for (out, method) in [("ll.csv", "exact"), ("ll.npy", "window:2")] {
        let o_path = d.sentinel(out);
        let o = model_run(
            "loglik",
            &m,
            &z,
            &o_path,
            &["--method", method, "--device", "cpu"],
        );
        contract(
            &o,
            1,
            &[out, "track 0, step 1", "loglik is -inf"],
            d.path(),
            &[out, "rw.toml", "z.csv"],
        );
        d.intact(out);
        std::fs::remove_file(&o_path).unwrap();
    }
    // F = 1e200: a coasting track's variance overflows while its mean (0) stays finite.
    let big = d.file(
        "big.toml",
        rw.replace("F = [[1.0]]", "F = [[1e200]]").as_bytes(),
    );
    let det = d.file("det.csv", b"t,z0\n0,0\n1,0\n2,0\n");
    let t = d.p("t.csv");
    let o = kestrel(&[
        "track",
        "--model",
        &big,
        "--detections",
        &det,
        "--output",
        t.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("t.csv: track 0, step 1") && warnings[0].contains("infinite"),
        "{err}"
    );
    let text = std::fs::read_to_string(&t).unwrap();
    assert!(text.lines().any(|l| l.ends_with(",inf")), "{text}");
}

/// `pf` and `loglik` under `--precision f32`: a value beyond the f32 range is named
/// ("does not fit in f32"), a large one gives the accuracy warning.
#[test]
fn pf_and_loglik_hold_the_f32_limits() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let huge = d.file("huge.csv", b"track,t,z0,z1\n0,0,1e39,2\n");
    let large = d.file("large.csv", b"track,t,z0,z1\n0,0,5e7,2\n0,1,5e7,3\n");
    for (cmd, out, extra) in [
        ("pf", "o.npz", ["--particles", "64"]),
        ("loglik", "o.npy", ["--method", "parallel"]),
    ] {
        let o_path = d.p(out);
        let base = [
            cmd,
            "--model",
            &m,
            "--input",
            &huge,
            "--output",
            o_path.to_str().unwrap(),
            "--precision",
            "f32",
            "--device",
            "cpu",
        ];
        let base = with(&base, &extra);
        let o = kestrel(&base);
        contract(
            &o,
            2,
            &["huge.csv:2", "z0", "does not fit in f32"],
            d.path(),
            &["huge.csv", "large.csv"],
        );
        let o = kestrel(&with(&base, &["--input", &large]));
        ok(&o);
        let err = stderr(&o);
        assert!(
            err.lines()
                .any(|l| l.starts_with("warning: ") && l.contains("f32") && l.contains("5.000e7")),
            "{cmd}: {err}"
        );
        std::fs::remove_file(&o_path).unwrap();
    }
}

/// A window length from the command line costs nothing beyond the track: `window:N`
/// with N far beyond the steps is the exact filter (it hung, computing N gains).
#[test]
fn a_window_longer_than_the_tracks_is_the_exact_filter() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let read = |name: &str| -> Vec<f64> {
        std::fs::read_to_string(d.p(name))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
            .collect()
    };
    for (method, out) in [("exact", "e.csv"), ("window:1000000000000000", "w.csv")] {
        let o = d.p(out);
        ok(&model_run(
            "loglik",
            &m,
            &z,
            o.to_str().unwrap(),
            &["--method", method, "--device", "cpu"],
        ));
    }
    close(
        &read("w.csv"),
        &read("e.csv"),
        1e-9,
        "window beyond the tracks",
    );
}
