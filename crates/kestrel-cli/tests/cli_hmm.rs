//! `kestrel hmm`: the outputs (keys, shapes, types) equal the library's, sequential =
//! parallel through the binary, integer and float codes, Gaussian emissions, f32; every
//! class of bad input gets one `error:` line, exit 2 and nothing written.

mod common;

use common::*;
use kestrel::hmm::{hmm_on, load_hmm, HmmMethod, HmmOptions};
use kestrel::{Device, Measurements};
use std::path::Path;

const CAT: &str = r#"[hmm]
transition = [[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.3, 0.3, 0.4]]
initial = [0.6, 0.3, 0.1]
[hmm.emission]
kind = "categorical"
probs = [[0.7, 0.2, 0.1, 0.0], [0.1, 0.3, 0.5, 0.1], [0.25, 0.25, 0.25, 0.25]]
"#;

const GAUSS: &str = r#"[hmm]
transition = [[0.9, 0.1], [0.25, 0.75]]
initial = [0.5, 0.5]
[hmm.emission]
kind = "gaussian"
means = [[0.0, 1.0], [2.0, -1.0]]
covs = [[[1.0, 0.3], [0.3, 2.0]], [[0.5, 0.0], [0.0, 0.5]]]
"#;

/// An `.npy` file of `descr` values (raw little-endian bytes) and `shape`.
fn npy(shape: &[usize], descr: &str, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let sh = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {sh}, }}");
    let total = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(total.next_multiple_of(64) - total));
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.extend_from_slice(data);
    h
}

fn npy_i64(shape: &[usize], v: &[i64]) -> Vec<u8> {
    npy(
        shape,
        "<i8",
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
}

fn npy_f64(shape: &[usize], v: &[f64]) -> Vec<u8> {
    npy(
        shape,
        "<f8",
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
}

fn codes(b: usize, t: usize) -> Vec<i64> {
    (0..b * t).map(|i| ((i * 7 + i / 3) % 4) as i64).collect()
}

fn read<T: kestrel::linalg::NpyElement + Copy>(p: &Path, name: &str) -> (Vec<usize>, Vec<T>) {
    kestrel::io::read_npz_array::<T>(p, name)
        .unwrap()
        .unwrap_or_else(|| panic!("no {name}"))
}

fn hmm(dir: &Dir, args: &[&str]) {
    let mut a = vec!["hmm", "--device", "cpu"];
    a.extend_from_slice(args);
    ok(&kestrel_in(dir.path(), &a));
}

#[test]
fn outputs_equal_the_library_for_integer_and_float_codes_both_methods() {
    let d = Dir::new();
    let m = d.file("m.toml", CAT.as_bytes());
    let (b, t) = (3, 50);
    let c = codes(b, t);
    d.file("obs.npy", &npy_i64(&[b, t, 1], &c));
    let mut f: Vec<f64> = c.iter().map(|&x| x as f64).collect();
    f[5] = f64::NAN;
    f[100] = f64::NAN;
    d.file("obsf.npy", &npy_f64(&[b, t, 1], &f));
    let model = load_hmm(Path::new(&m)).unwrap();
    for (input, data) in [
        ("obs.npy", c.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        ("obsf.npy", f.clone()),
    ] {
        let z = Measurements::new(b, t, 1, data).unwrap();
        let want = hmm_on(Device::Cpu, &model, &z, &HmmOptions::default()).unwrap();
        for method in ["sequential", "parallel"] {
            for scan in ["fastest", "blelloch", "sengupta:4"] {
                let out = format!("out-{method}-{scan}.npz");
                hmm(
                    &d,
                    &[
                        "--model", "m.toml", "--input", input, "--output", &out, "--method",
                        method, "--scan", scan,
                    ],
                );
                let p = d.p(&out);
                let (sf, fil) = read::<f64>(&p, "filtered");
                let (ss, smo) = read::<f64>(&p, "smoothed");
                let (sl, ll) = read::<f64>(&p, "loglik");
                let (sp, path) = read::<i64>(&p, "path");
                assert_eq!(
                    (sf, ss, sl.clone(), sp),
                    (vec![b, t, 3], vec![b, t, 3], vec![b, t], sl)
                );
                close(&fil, &want.filtered, 1e-12, "filtered");
                close(&smo, &want.smoothed, 1e-12, "smoothed");
                close(&ll, &want.loglik, 1e-11, "loglik");
                assert_eq!(path, want.path, "{input} {method} {scan}");
                if input == "obsf.npy" {
                    assert_eq!(
                        (ll[5], ll[100]),
                        (0.0, 0.0),
                        "a missing step has log-likelihood 0"
                    );
                }
            }
        }
    }
    // f32: the arrays are float32, the path the same (its scores are f64 whatever the
    // precision).
    hmm(
        &d,
        &words("--model m.toml --input obs.npy --output o32.npz --precision f32 --method parallel"),
    );
    hmm(
        &d,
        &words("--model m.toml --input obs.npy --output o64.npz"),
    );
    let (_, f32s) = read::<f32>(&d.p("o32.npz"), "smoothed");
    let (_, f64s) = read::<f64>(&d.p("o64.npz"), "smoothed");
    close(
        &f32s.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &f64s,
        1e-4,
        "f32 smoothed",
    );
    assert_eq!(
        read::<i64>(&d.p("o32.npz"), "path").1,
        read::<i64>(&d.p("o64.npz"), "path").1
    );
}

#[test]
fn gaussian_emissions_through_the_binary() {
    let d = Dir::new();
    let m = d.file("m.toml", GAUSS.as_bytes());
    let (b, t) = (2, 40);
    let mut v: Vec<f64> = (0..b * t * 2)
        .map(|i| ((i * 37) % 11) as f64 / 3.0 - 1.5)
        .collect();
    v[7] = f64::NAN;
    d.file("y.npy", &npy_f64(&[b, t, 2], &v));
    let model = load_hmm(Path::new(&m)).unwrap();
    let z = Measurements::new(b, t, 2, v).unwrap();
    let want = hmm_on(
        Device::Cpu,
        &model,
        &z,
        &HmmOptions::default().with_method(HmmMethod::Parallel),
    )
    .unwrap();
    hmm(
        &d,
        &["--model", "m.toml", "--input", "y.npy", "--output", "o.npz"],
    );
    close(
        &read::<f64>(&d.p("o.npz"), "smoothed").1,
        &want.smoothed,
        1e-10,
        "smoothed",
    );
    close(
        &read::<f64>(&d.p("o.npz"), "loglik").1,
        &want.loglik,
        1e-10,
        "loglik",
    );
    assert_eq!(read::<i64>(&d.p("o.npz"), "path").1, want.path);
}

#[test]
fn every_bad_input_gets_one_error_line_and_nothing_written() {
    let d = Dir::new();
    d.file("m.toml", CAT.as_bytes());
    d.file("g.toml", GAUSS.as_bytes());
    d.file("obs.npy", &npy_i64(&[2, 3, 1], &[0, 1, 2, 3, 0, 1]));
    d.file("range.npy", &npy_i64(&[2, 3, 1], &[0, 1, 2, 3, 0, 4]));
    d.file("neg.npy", &npy_i64(&[2, 3, 1], &[0, 1, 2, -1, 0, 1]));
    d.file(
        "frac.npy",
        &npy_f64(&[2, 3, 1], &[0.0, 1.0, 2.0, 3.0, 0.5, 1.0]),
    );
    d.file(
        "inf.npy",
        &npy_f64(&[2, 3, 1], &[0.0, 1.0, 2.0, 3.0, f64::INFINITY, 1.0]),
    );
    d.file("flat.npy", &npy_i64(&[6], &[0, 1, 2, 3, 0, 1]));
    d.file("empty.npy", &npy_i64(&[0, 3, 1], &[]));
    d.file("y2.npy", &npy_f64(&[1, 2, 3], &[0.0; 6]));
    d.sentinel("out.npz");
    let model = |name: &str, text: &str| {
        d.file(name, text.as_bytes());
    };
    model(
        "unknown_key.toml",
        &CAT.replace("initial =", "colour = 1\ninitial ="),
    );
    model("unknown_section.toml", &format!("{CAT}\n[extra]\nx = 1\n"));
    model(
        "no_transition.toml",
        &CAT.replace(
            "transition = [[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.3, 0.3, 0.4]]\n",
            "",
        ),
    );
    model(
        "shape.toml",
        &CAT.replace("[0.3, 0.3, 0.4]]", "[0.3, 0.3, 0.4], [1.0, 0.0, 0.0]]"),
    );
    model(
        "ragged.toml",
        &CAT.replace("[0.3, 0.3, 0.4]]", "[0.3, 0.7]]"),
    );
    model(
        "row.toml",
        &CAT.replace("[0.1, 0.7, 0.2]", "[0.1, 0.7, 0.3]"),
    );
    model(
        "initial.toml",
        &CAT.replace("[0.6, 0.3, 0.1]", "[0.6, 0.3, 0.2]"),
    );
    model(
        "negative.toml",
        &CAT.replace("[0.8, 0.15, 0.05]", "[1.1, -0.15, 0.05]"),
    );
    model(
        "probs_row.toml",
        &CAT.replace("[0.7, 0.2, 0.1, 0.0]", "[0.7, 0.2, 0.1, 0.1]"),
    );
    model(
        "probs_shape.toml",
        &CAT.replace(", [0.25, 0.25, 0.25, 0.25]]", "]"),
    );
    model("kind.toml", &CAT.replace("categorical", "poisson"));
    model("no_kind.toml", &CAT.replace("kind = \"categorical\"\n", ""));
    model(
        "cov.toml",
        &GAUSS.replace("[[0.5, 0.0], [0.0, 0.5]]", "[[0.5, 0.0], [0.0, -0.5]]"),
    );
    model(
        "cov_shape.toml",
        &GAUSS.replace("[[0.5, 0.0], [0.0, 0.5]]", "[[0.5]]"),
    );
    model("means.toml", &GAUSS.replace("[2.0, -1.0]]", "[2.0]]"));
    model("syntax.toml", "[hmm\n");
    model(
        "gauss_probs.toml",
        &GAUSS.replace("covs", "probs = [[1.0]]\ncovs"),
    );
    let base = words("hmm --device cpu --model m.toml --input obs.npy --output out.npz");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            with(&base, &["--model", "unknown_key.toml"]),
            vec!["unknown_key.toml", "hmm.colour", "unknown key"],
        ),
        (
            with(&base, &["--model", "unknown_section.toml"]),
            vec!["[extra]"],
        ),
        (
            with(&base, &["--model", "no_transition.toml"]),
            vec!["hmm.transition", "missing"],
        ),
        (
            with(&base, &["--model", "shape.toml"]),
            vec!["hmm.transition", "4 x 3"],
        ),
        (
            with(&base, &["--model", "ragged.toml"]),
            vec!["hmm.transition[2]"],
        ),
        (
            with(&base, &["--model", "row.toml"]),
            vec!["transition row 1", "sums to"],
        ),
        (
            with(&base, &["--model", "initial.toml"]),
            vec!["hmm.initial", "sums to"],
        ),
        (
            with(&base, &["--model", "negative.toml"]),
            vec!["transition row 0", "non-negative"],
        ),
        (
            with(&base, &["--model", "probs_row.toml"]),
            vec!["emission.probs row 0"],
        ),
        (
            with(&base, &["--model", "probs_shape.toml"]),
            vec!["hmm.emission.probs", "2 x 4"],
        ),
        (
            with(&base, &["--model", "kind.toml"]),
            vec!["hmm.emission.kind", "poisson"],
        ),
        (
            with(&base, &["--model", "no_kind.toml"]),
            vec!["hmm.emission.kind", "missing"],
        ),
        (
            with(&base, &["--model", "cov.toml"]),
            vec!["emission.covs[1]", "positive definite"],
        ),
        (
            with(&base, &["--model", "cov_shape.toml"]),
            vec!["hmm.emission.covs[1]", "1 x 1"],
        ),
        (
            with(&base, &["--model", "means.toml"]),
            vec!["hmm.emission.means[1]"],
        ),
        (
            with(&base, &["--model", "syntax.toml"]),
            vec!["syntax.toml"],
        ),
        (
            with(&base, &["--model", "gauss_probs.toml"]),
            vec!["hmm.emission.probs", "unknown key"],
        ),
        (
            with(&base, &["--model", "missing.toml"]),
            vec!["missing.toml"],
        ),
        (
            with(&base, &["--input", "range.npy"]),
            vec!["range.npy", "track 1, step 2", "out of range"],
        ),
        (
            with(&base, &["--input", "neg.npy"]),
            vec!["neg.npy", "track 1, step 0", "out of range"],
        ),
        (
            with(&base, &["--input", "frac.npy"]),
            vec!["frac.npy", "track 1, step 1", "not an integer"],
        ),
        (
            with(&base, &["--input", "inf.npy"]),
            vec!["inf.npy", "track 1, step 1"],
        ),
        (
            with(&base, &["--input", "flat.npy"]),
            vec!["flat.npy", "3-D"],
        ),
        (
            with(&base, &["--input", "empty.npy"]),
            vec!["empty.npy", "no observations"],
        ),
        (
            with(&base, &["--input", "nothere.npy"]),
            vec!["nothere.npy"],
        ),
        (
            with(&base, &["--input", "y2.npy"]),
            vec!["y2.npy", "3 components", "categorical"],
        ),
        (
            with(&base, &["--model", "g.toml"]),
            vec!["obs.npy", "1 components", "gaussian", "takes 2"],
        ),
        (with(&base, &["--output", "obs.npy"]), vec!["obs.npy"]),
        (with(&base, &["--output", "m.toml"]), vec!["m.toml"]),
        (
            with(&base, &["--output", "out.csv"]),
            vec!["out.csv", ".npz"],
        ),
        (with(&base, &["--method", "magic"]), vec!["magic"]),
        (with(&base, &["--scan", "zigzag"]), vec!["zigzag"]),
        (with(&base, &["--precision", "f16"]), vec!["f16"]),
    ];
    for (args, needles) in &cases {
        d.run_bad(args, needles);
    }
    d.intact("out.npz");
}
