//! Reliability, round 3 (issue 42): the newer commands (`pf`, `tbd`, `simulate-frames`,
//! `track`, `eval`, `loglik`, `simulate --scenario`, `filter` with nonlinear files) hold
//! the contract of the first ones, one test per class of failure, each class held by
//! one shared mechanism (named in each test's comment). Every refusal is checked with
//! [`run_bad`]: exit status 2, one `error:` line, nothing written, inputs unchanged.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const Z: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

/// Frames `[t, h, w]` of f32 noise-free ramps, as numpy writes them.
pub(crate) fn frames_npy(t: usize, h: usize, w: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(t * h * w * 4);
    for i in 0..t * h * w {
        data.extend_from_slice(&((i % 7) as f32 * 0.25).to_le_bytes());
    }
    npy(
        &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({t}, {h}, {w}), }}"),
        &data,
    )
}

/// A `.npy` file (version 1.0) with header `dict` and the bytes `data`.
fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The longest run of digits in `text` (a number quoted in full has hundreds).
pub(crate) fn longest_digits(text: &str) -> usize {
    text.split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// Mechanism: `io::output::check_paths` compares every output with every input file,
/// an input directory standing for each file in it.
#[test]
fn an_output_inside_an_input_directory_is_refused() {
    let d = Dir::new();
    std::fs::create_dir(d.p("frames")).unwrap();
    let frame = frames_npy(2, 8, 8);
    std::fs::write(d.p("frames/a.npy"), &frame).unwrap();
    std::fs::write(d.p("frames/b.npy"), &frame).unwrap();
    // A file of the directory that is not a frame is still an input of the run.
    std::fs::write(d.p("frames/notes.csv"), SENTINEL).unwrap();
    let cases: [&[&str]; 3] = [
        &words("tbd --input frames --output det.csv --state-out frames/a.npy"),
        &words("tbd --input frames/ --output det.csv --state-out ./frames/../frames/b.npy"),
        &["tbd", "--input", "frames", "--output", "frames/notes.csv"],
    ];
    for args in cases {
        d.run_bad(&with(args, &["--device", "cpu"]), &["input", "frames"]);
    }
    assert_eq!(std::fs::read(d.p("frames/notes.csv")).unwrap(), SENTINEL);
    assert_eq!(std::fs::read(d.p("frames/a.npy")).unwrap(), frame);
    assert_eq!(std::fs::read(d.p("frames/b.npy")).unwrap(), frame);
}

/// Mechanism: `limits::range` / `limits::count` (the one range check, values quoted
/// short) for options and model parameters, with clap taking negative numbers.
#[test]
fn numeric_options_go_through_one_range_check() {
    let d = Dir::new();
    d.file("z.csv", Z.as_bytes());
    d.file("f.npy", &frames_npy(3, 16, 16));
    d.file("truth.csv", b"t,id,x0,x1\n0,0,1.0,2.0\n1,0,1.5,2.5\n");
    d.file(
        "tracks.csv",
        b"t,track,status,x0,x1\n0,0,confirmed,1.0,2.0\n1,0,confirmed,1.5,2.5\n",
    );
    let cv = example("cv2d.toml");
    let ro = example("range-only.toml");
    let tr = example("tracking.toml");
    let pf = model_args("pf", &ro, "z.csv", "o.npz", "--particles 10");
    let ev = words("eval --truth truth.csv --tracks tracks.csv --metric gospa");
    let tbd = words("tbd --input f.npy --output d.csv --device cpu --threshold 1");
    let sf = words("simulate-frames --frames 2 --height 8 --width 8 --output g.npy");
    let sc = [
        "simulate",
        "--scenario",
        "random",
        "--model",
        &tr,
        "--tracks",
        "3",
        "--steps",
        "3",
        "--output",
        "q.csv",
        "--truth",
        "x.csv",
    ];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        // Refused by clap as unknown flags before round 3.
        (with(&pf, &["--ess", "-1"]), vec!["--ess", "[0, 1]", "-1"]),
        (with(&pf, &["--ess", "1.5"]), vec!["--ess", "1.5"]),
        (with(&pf, &["--ess", "NaN"]), vec!["--ess"]),
        (with(&ev, &["--switching", "-1"]), vec!["--switching", "-1"]),
        (with(&ev, &["--p", "-2"]), vec!["--p", "-2"]),
        // c^p overflowed and the assignment panicked.
        (
            with(&ev, &["--c", "1e10", "--p", "40"]),
            vec!["c^p", "--c 10000000000", "inf"],
        ),
        (with(&ev, &["--c", "1e300"]), vec!["--c", "1e300"]),
        (
            with(&ev, &["--switching", "1e90", "--p", "3"]),
            vec!["gamma^p"],
        ),
        // A huge radius wrapped to a negative one and turned suppression off.
        (
            with(&tbd, &["--nms", "99999999999999"]),
            vec!["--nms", "99999999999999"],
        ),
        // An amplitude beyond f32 wrote infinite pixels.
        (with(&sf, &["--snr", "1000"]), vec!["--snr", "1000"]),
        (with(&sf, &["--snr", "-1e300"]), vec!["--snr", "-1e300"]),
        // A sampling range of infinite width panicked.
        (with(&sc, &["--region", "1e308"]), vec!["region", "1e308"]),
        (
            with(
                &[
                    "filter", "--model", &cv, "--input", "z.csv", "--output", "o.npz",
                ],
                &[],
            ),
            vec![],
        ),
    ];
    for (args, needles) in cases {
        if needles.is_empty() {
            continue;
        }
        let o = d.run_bad(&args, &needles);
        let err = stderr(&o);
        assert!(longest_digits(&err) <= 20, "a long number quoted: {err}");
    }
}

/// Mechanism: `limits::work` bounds the work of a job before it starts (the
/// suppression window, rejection resampling's proposals, the --pfa calibration counting
/// the motion vectors, the scenario's rows) and the tracker's gated pairs are bounded
/// by the memory (`gate_all_bounded`).
#[test]
fn work_is_bounded_before_it_starts() {
    let d = Dir::new();
    d.file("f.npy", &frames_npy(2, 64, 64));
    // 97 vectors x 10^9 pixel-frames: counted without the vectors it passed the old
    // bound and ran for hours.
    let start = Instant::now();
    d.run_bad(
        &words("tbd --input f.npy --output d.csv --device cpu --pfa 1e-7 --speeds 0,1,2,3 --directions 32"),
        &["calibration", "motion vectors", "larger false-alarm"],
    );
    // A wide window on a map all over the threshold: 10^6 pixels x 201^2.
    d.file("big.npy", &frames_npy(1, 1024, 1024));
    d.run_bad(
        &words("tbd --input big.npy --output d.csv --device cpu --threshold -1 --nms 100"),
        &["non-maximum suppression", "radius"],
    );
    // Rejection resampling on weights peaked on one particle: N^2 = 4e10 proposals.
    d.file("far.csv", b"track,t,z0,z1\n0,0,1e6,1e6\n0,1,1e6,1e6\n");
    d.run_bad(
        &model_args(
            "pf",
            &example("range-only.toml"),
            "far.csv",
            "o.npz",
            "--particles 200000 --resample rejection --device cpu",
        ),
        &["rejection resampling", "step 0", "systematic"],
    );
    // The scenario's rows.
    d.run_bad(
        &[
            "simulate",
            "--scenario",
            "random",
            "--model",
            &example("tracking.toml"),
            "--tracks",
            "3",
            "--steps",
            "3",
            "--clutter",
            "1e12",
            "--output",
            "q.csv",
            "--truth",
            "x.csv",
        ],
        &["scenario", "would need"],
    );
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "the refusals took {:?}",
        start.elapsed()
    );
}

/// The tracker's gates in one giant cluster: every track pairs with every detection;
/// the pairs are bounded by the memory (`KESTREL_MAX_MEMORY` lowers it here).
#[test]
fn a_giant_cluster_is_refused_not_grown_without_bound() {
    let d = Dir::new();
    let mut det = String::from("t,z0,z1\n");
    for t in 0..3 {
        for j in 0..300 {
            det += &format!(
                "{t},{},{}\n",
                (j % 17) as f64 * 0.01,
                (j / 17) as f64 * 0.01
            );
        }
    }
    d.file("det.csv", det.as_bytes());
    let before = snapshot(d.path());
    let o = Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args([
            "track",
            "--model",
            &example("tracking.toml"),
            "--detections",
            "det.csv",
            "--output",
            "t.csv",
            "--gate",
            "0.999999",
            "--clutter",
            "1e-9",
        ])
        .env("KESTREL_MAX_MEMORY", "2000000")
        .current_dir(d.path())
        .output()
        .unwrap();
    one_error_line(&o, 2, &["scan", "candidate pairs", "narrow the gate"]);
    assert_eq!(snapshot(d.path()), before);
}

/// Mechanism: `io::parse_npy_header`, the one strict `.npy` header reader (numpy's
/// rules) for the frames and the measurements alike.
#[test]
fn crafted_npy_headers_are_refused_by_every_reader() {
    let d = Dir::new();
    let data: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let crafted = [
        // The old frames reader found 'descr' inside the note and read f32 data as u8.
        "{'fortran_order': False, 'shape': (1, 4, 4), 'note': \"'descr': '|u1'\", 'descr': '<f4'}",
        "{'descr': '<f4', 'shape': (1, 4, 4)}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 4, 4)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 4), 'descr': '|u1'}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [1, 4, 4]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 4.0)}",
    ];
    for (i, dict) in crafted.iter().enumerate() {
        let name = format!("c{i}.npy");
        d.file(&name, &npy(dict, &data));
        d.run_bad(
            &[
                "tbd",
                "--input",
                &name,
                "--output",
                "d.csv",
                "--device",
                "cpu",
                "--threshold",
                "1",
            ],
            &[&name, "not a valid .npy file"],
        );
        d.run_bad(
            &model_args("filter", &example("cv2d.toml"), &name, "o.npz", ""),
            &[&name],
        );
    }
    // A header without its newline.
    let mut raw = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 4), }",
        &data,
    );
    let nl = raw.iter().position(|&b| b == b'\n').unwrap();
    raw[nl] = b' ';
    d.file("nonl.npy", &raw);
    d.run_bad(
        &words("tbd --input nonl.npy --output d.csv --device cpu --threshold 1"),
        &["newline"],
    );
    // The well-formed file is read.
    d.file("good.npy", &frames_npy(2, 4, 4));
    ok(&kestrel_in(
        d.path(),
        &words("tbd --input good.npy --output d.csv --device cpu --threshold 1"),
    ));
}

/// Mechanism: `tracking::files::time_key`, the one key of a time (every reader of a
/// time column and `metrics::frames`): -0 and 0 are the same step.
#[test]
fn time_minus_zero_is_step_zero_in_eval() {
    let d = Dir::new();
    d.file("truth.csv", b"t,id,x0,x1\n-1,0,0.0,0.0\n-0,0,1.0,1.0\n");
    d.file(
        "tracks.csv",
        b"t,track,status,x0,x1\n-1,0,confirmed,0.0,0.0\n0,0,confirmed,1.0,1.0\n",
    );
    let o = kestrel_in(
        d.path(),
        &words("eval --truth truth.csv --tracks tracks.csv --metric gospa --output steps.csv"),
    );
    ok(&o);
    let steps = std::fs::read_to_string(d.p("steps.csv")).unwrap();
    let rows: Vec<&str> = steps.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{steps}");
    for r in rows {
        let total: f64 = r.split(',').nth(1).unwrap().parse().unwrap();
        assert_eq!(total, 0.0, "every track on its truth, yet: {steps}");
    }
}

/// Mechanism: `model::family` (which commands read a file of each kind, consulted by
/// all three readers before their own parsers; `conflict` for two keys of one thing).
#[test]
fn model_files_say_where_they_belong_and_refuse_conflicts() {
    let d = Dir::new();
    d.file("z.csv", Z.as_bytes());
    d.file("d.csv", b"t,z0,z1\n0,1,1\n");
    d.file("truth.csv", b"t,id,x0,x1\n0,0,1.0,2.0\n");
    d.file(
        "tracks.csv",
        b"t,track,status,x0,x1\n0,0,confirmed,1.0,2.0\n",
    );
    let sv = example("stochastic-volatility.toml");
    let ro = example("range-only.toml");
    for m in [&sv, &ro] {
        for args in [
            vec![
                "loglik", "--model", m, "--input", "z.csv", "--output", "o.npy",
            ],
            vec![
                "track",
                "--model",
                m,
                "--detections",
                "d.csv",
                "--output",
                "t.csv",
            ],
            vec![
                "eval",
                "--truth",
                "truth.csv",
                "--tracks",
                "tracks.csv",
                "--metric",
                "gospa",
                "--model",
                m,
            ],
        ] {
            // The tracker reads the range-only kind as a nonlinear model (below).
            if args[0] == "track" && m == &ro {
                continue;
            }
            let o = d.run_bad(&args, &["kind = \"", "read it"]);
            assert!(!stderr(&o).contains("unknown field"), "{}", stderr(&o));
        }
    }
    let o = kestrel_in(
        d.path(),
        &[
            "track",
            "--model",
            &ro,
            "--detections",
            "d.csv",
            "--output",
            "t.csv",
        ],
    );
    ok(&o);
    assert!(stderr(&o).contains("ekf"), "{}", stderr(&o));
    // The particle filter's own kind given to the nonlinear filters.
    let o = d.run_bad(
        &[
            "filter", "--model", &sv, "--input", "z.csv", "--output", "o.npz",
        ],
        &["stochastic-volatility", "kestrel pf"],
    );
    assert!(!stderr(&o).contains("unknown"), "{}", stderr(&o));
    // A time-varying file to the particle filter and the nonlinear filters, an [hmm]
    // file to the Kalman commands, a [model] file to kestrel hmm: each names its reader.
    let tv = example("time-varying.toml");
    let hmm = example("hmm-weather.toml");
    let obs = example("hmm-weather-obs.npy");
    for (args, needles) in [
        (
            vec![
                "pf",
                "--model",
                &tv,
                "--input",
                "z.csv",
                "--output",
                "o.npz",
                "--particles",
                "10",
            ],
            vec!["time-varying", "kestrel filter"],
        ),
        (
            vec![
                "filter", "--model", &tv, "--filter", "ukf", "--input", "z.csv", "--output",
                "o.npz",
            ],
            vec!["time-varying", "kestrel filter"],
        ),
        (
            vec![
                "filter", "--model", &hmm, "--input", "z.csv", "--output", "o.npz",
            ],
            vec!["[hmm]", "kestrel hmm reads it"],
        ),
        (
            vec!["hmm", "--model", &ro, "--input", &obs, "--output", "o.npz"],
            vec!["range-only", "kestrel hmm needs"],
        ),
    ] {
        let o = d.run_bad(&args, &needles);
        assert!(!stderr(&o).contains("unknown"), "{}", stderr(&o));
    }
    // P0 and p0 together, in every reader.
    let p0 = "P0 = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]\np0 = 3.0\n";
    d.file(
        "builder.toml",
        format!("[model]\nkind = \"cv\"\ndims = 2\nq = 1.0\nr = 1.0\n[prior]\nx0 = [0.0, 0.0, 0.0, 0.0]\n{p0}").as_bytes(),
    );
    let explicit = std::fs::read_to_string(example("cv2d.toml")).unwrap();
    let explicit = explicit.replace("[prior]", "[prior]\np0 = 3.0");
    d.file("explicit.toml", explicit.as_bytes());
    let ranged = std::fs::read_to_string(&ro).unwrap();
    let ranged = ranged.replace("[prior]", "[prior]\np0 = 3.0");
    assert!(ranged.contains("P0"), "the example has a P0");
    d.file("ro.toml", ranged.as_bytes());
    for (m, cmd) in [
        ("builder.toml", "filter"),
        ("explicit.toml", "filter"),
        ("ro.toml", "pf"),
        ("ro.toml", "filter"),
    ] {
        let mut args = vec![cmd, "--model", m, "--input", "z.csv", "--output", "o.npz"];
        if cmd == "pf" {
            args.extend(["--particles", "10"]);
        }
        d.run_bad(&args, &[m, "P0 and p0 both given"]);
    }
}

/// Mechanism: `data::require_data` (`Measurements::require_data`), the one check of
/// empty inputs for every command and Python entry point.
#[test]
fn empty_inputs_are_the_same_error_everywhere() {
    let d = Dir::new();
    let empty = |b: usize, t: usize, ny: usize| {
        let data = vec![0u8; 0];
        npy(
            &format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({b}, {t}, {ny}), }}"),
            &data,
        )
    };
    d.file("b0.npy", &empty(0, 5, 2));
    d.file("t0.npy", &empty(2, 0, 2));
    d.file("sv0.npy", &empty(2, 0, 1));
    for (z, b, t) in [("b0.npy", 0, 5), ("t0.npy", 2, 0)] {
        let shape = format!("no measurements ({b} tracks x {t} steps)");
        for args in [
            vec!["filter", "--model", &example("cv2d.toml")],
            vec![
                "smooth",
                "--model",
                &example("cv2d.toml"),
                "--method",
                "two-filter",
            ],
            vec![
                "smooth",
                "--model",
                &example("cv2d.toml"),
                "--method",
                "parallel-sqrt-rts",
            ],
            vec![
                "filter",
                "--model",
                &example("cv2d.toml"),
                "--method",
                "parallel-sqrt",
            ],
            vec!["filter", "--model", &example("range-only.toml")],
            vec![
                "pf",
                "--model",
                &example("range-only.toml"),
                "--particles",
                "10",
            ],
        ] {
            let mut a = args.clone();
            a.extend(["--input", z, "--output", "o.npz"]);
            d.run_bad(&a, &[z, &shape]);
        }
        d.run_bad(
            &[
                "loglik",
                "--model",
                &example("cv2d.toml"),
                "--input",
                z,
                "--output",
                "o.npy",
            ],
            &[z, &shape],
        );
    }
    // The particle filter panicked here ("chunk size must be non-zero").
    d.run_bad(
        &[
            "pf",
            "--model",
            &example("stochastic-volatility.toml"),
            "--input",
            "sv0.npy",
            "--output",
            "o.npz",
            "--particles",
            "10",
        ],
        &["sv0.npy", "no measurements (2 tracks x 0 steps)"],
    );
    d.file("det.csv", b"t,z0,z1\n");
    d.run_bad(
        &[
            "track",
            "--model",
            &example("tracking.toml"),
            "--detections",
            "det.csv",
            "--output",
            "t.csv",
        ],
        &["det.csv", "no detections"],
    );
}

/// Output names are checked against the format written before any work.
#[test]
fn output_extensions_are_checked() {
    let d = Dir::new();
    d.file("f.npy", &frames_npy(2, 8, 8));
    d.run_bad(
        &words("tbd --input f.npy --output d.txt --device cpu --threshold 1"),
        &["d.txt", ".csv"],
    );
    d.run_bad(
        &words("simulate-frames --frames 2 --height 8 --width 8 --output g.npy --truth t.txt"),
        &["t.txt", ".csv"],
    );
}
