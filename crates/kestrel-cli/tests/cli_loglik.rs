//! `kestrel loglik`: outputs in both formats, the methods against each other, totals on
//! stdout, and broken input (exit 2, one `error:` line, no output file).

mod common;

use common::*;
use std::path::Path;

fn simulate(dir: &Path, model: &str, tracks: &str, steps: &str, missing: &str) -> String {
    let z = dir.join("z.npy");
    ok(&common::simulate(
        model,
        tracks,
        steps,
        s(&z),
        &["--seed", "4", "--missing", missing],
    ));
    s(&z).to_string()
}

fn read_csv(p: &Path) -> Vec<(usize, usize, f64)> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("track,t,loglik"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn loglik(args: &[&str]) -> std::process::Output {
    let mut a = vec!["loglik", "--device", "cpu"];
    a.extend_from_slice(args);
    kestrel(&a)
}

#[test]
fn methods_agree_and_both_formats_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = example("ar10-seismic-noise.toml");
    let z = simulate(dir.path(), &m, "3", "400", "0.05");
    let mut results = Vec::new();
    for method in ["exact", "parallel", "window:auto:1e-9", "window:auto"] {
        let out = dir.path().join(format!("{}.csv", method.replace(':', "_")));
        let o = loglik(&[
            "--model",
            &m,
            "--input",
            &z,
            "--output",
            s(&out),
            "--method",
            method,
        ]);
        ok(&o);
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(stdout.starts_with("track,total_loglik\n0,"), "{stdout}");
        assert!(stdout.contains("\ntotal,"), "{stdout}");
        let rows = read_csv(&out);
        assert_eq!(rows.len(), 3 * 400);
        assert_eq!((rows[401].0, rows[401].1), (1, 1));
        // The printed total is the sum of the file's values.
        let total: f64 = rows.iter().map(|r| r.2).sum();
        let printed: f64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("total,"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (total - printed).abs() <= 1e-8 * total.abs(),
            "{total} vs {printed}"
        );
        if method.starts_with("window") {
            assert!(stderr(&o).contains("window"), "{}", stderr(&o));
        }
        results.push(rows);
    }
    // parallel is exact to rounding; window:auto:TOL within TOL (with missing values).
    for (r, tol) in results[1..].iter().zip([1e-10, 1e-9, 1e-6]) {
        for (a, b) in results[0].iter().zip(r) {
            assert!((a.2 - b.2).abs() <= tol, "{a:?} vs {b:?}");
        }
    }
    // NPY: [B, T], the same numbers as the CSV.
    let npy = dir.path().join("ll.npy");
    ok(&loglik(&[
        "--model",
        &m,
        "--input",
        &z,
        "--output",
        s(&npy),
        "--method",
        "exact",
        "--steady",
        "1e-12",
    ]));
    let bytes = std::fs::read(&npy).unwrap();
    let header = String::from_utf8_lossy(&bytes[..128]);
    assert!(
        header.contains("(3, 400)") && header.contains("<f8"),
        "{header}"
    );
    let off = bytes.len() - 3 * 400 * 8;
    let v = |i: usize| f64::from_le_bytes(bytes[off + 8 * i..off + 8 * i + 8].try_into().unwrap());
    for i in [0usize, 17, 399, 400, 1199] {
        assert!(
            (v(i) - results[0][i].2).abs() <= 1e-8,
            "{i}: {} vs {}",
            v(i),
            results[0][i].2
        );
    }
}

#[test]
fn broken_input() {
    let dir = tempfile::tempdir().unwrap();
    let m = example("ar10-seismic-noise.toml");
    let z = simulate(dir.path(), &m, "1", "50", "0");
    // Velocity observed, position unobservable and unstable: no window is certified.
    let unobservable = dir.path().join("unobservable.toml");
    std::fs::write(
        &unobservable,
        "[model]\nF = [[1.0, 1.0], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[0.0, 1.0]]\nR = [[1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
    )
    .unwrap();
    let unstable = dir.path().join("unstable.toml");
    std::fs::write(
        &unstable,
        "[model]\nkind = \"ar\"\ncoeffs = [1.0]\nq = 1.0\nr = 1.0\nprior = \"stationary\"\n",
    )
    .unwrap();
    let out = dir.path().join("ll.npy");
    let o = s(&out).to_string();
    let run = |model: &str, output: &str, extra: &[&str], needles: &[&str]| {
        let base = [
            "loglik", "--device", "cpu", "--model", model, "--input", &z, "--output", output,
        ];
        run_bad(dir.path(), &with(&base, extra), needles);
    };
    run(&m, &o, &["--method", "window:0"], &["window", "at least 1"]);
    run(
        &m,
        &o,
        &["--method", "window:auto:0"],
        &["tolerance", "positive"],
    );
    run(
        &m,
        &o,
        &["--method", "window:auto:-1"],
        &["tolerance", "positive"],
    );
    run(&m, &o, &["--method", "window:ten"], &["not an integer"]);
    run(
        &m,
        &o,
        &["--method", "kalman"],
        // The library names the method, the command line its flag.
        &[
            "--method: method \"kalman\"",
            "expected exact, parallel, window:N",
        ],
    );
    run(
        &m,
        &o,
        &["--method", "window:5", "--vague", "0"],
        &["--vague", "positive"],
    );
    run(
        &m,
        &o,
        &["--method", "window:5", "--steady", "1e-9"],
        &["--steady", "exact"],
    );
    run(&m, &o, &["--steady=-1"], &["--steady"]);
    run(
        s(&unobservable),
        &o,
        &["--method", "window:auto"],
        &["does not converge", "exact"],
    );
    let npz = dir.path().join("ll.npz");
    run(&m, s(&npz), &[], &["ll.npz", ".csv or .npy"]);
    run(&example("random-walk-2d.toml"), &o, &[], &["components"]);
    run(s(&unstable), &o, &[], &["unstable.toml", "stable"]);
    let missing = dir.path().join("nope.toml");
    run(s(&missing), &o, &[], &["nope.toml"]);
    assert!(!out.exists());
}
