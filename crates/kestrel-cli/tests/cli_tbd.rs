//! `kestrel simulate-frames`, `kestrel tbd` and `kestrel tbd-eval` end to end, and every
//! kind of broken input of `tbd`.

mod common;

use common::*;
use kestrel::tbd::frames::write_npy;
use std::path::Path;

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn simulated_target_is_detected_on_its_path() {
    let d = tempfile::tempdir().unwrap();
    let (f, truth, det, state) = (
        d.path().join("f.npy"),
        d.path().join("truth.csv"),
        d.path().join("det.csv"),
        d.path().join("state.npy"),
    );
    for dtype in ["f32", "u8", "u16"] {
        ok(&kestrel(&[
            "simulate-frames",
            "--output",
            s(&f),
            "--truth",
            s(&truth),
            "--frames",
            "60",
            "--height",
            "64",
            "--width",
            "80",
            "--target",
            "10:20:1:0",
            "--target",
            "60:62:0:-1",
            "--snr",
            "6",
            "--dtype",
            dtype,
            "--seed",
            "3",
        ]));
        for dec in ["1", "4"] {
            ok(&kestrel(&[
                "tbd",
                "--input",
                s(&f),
                "--output",
                s(&det),
                "--velocities",
                "1:0,0:-1,0:0,-1:0",
                "--decimation",
                dec,
                "--pfa",
                "1e-4",
                "--state-out",
                s(&state),
            ]));
            let text = std::fs::read_to_string(&det).unwrap();
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("t,x,y,vx,vy,score"));
            let rows: Vec<Vec<f64>> = lines
                .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
                .collect();
            // At the last emitted frame both targets are found where they are, with
            // their velocity.
            let last = rows.iter().map(|r| r[0]).fold(0.0, f64::max);
            assert_eq!(last, 59.0, "{dtype} D {dec}");
            let found = |x: f64, y: f64, vx: f64, vy: f64| {
                rows.iter().any(|r| {
                    r[0] == last
                        && (r[1] - x).abs() <= 1.0
                        && (r[2] - y).abs() <= 1.0
                        && r[3] == vx
                        && r[4] == vy
                })
            };
            assert!(found(69.0, 20.0, 1.0, 0.0), "{dtype} D {dec}: {rows:?}");
            assert!(found(60.0, 3.0, 0.0, -1.0), "{dtype} D {dec}: {rows:?}");
            let st = kestrel::tbd::Frames::open(&state).unwrap();
            assert_eq!((st.len, st.h, st.w), (4, 64, 80));
        }
    }
    let truth_text = std::fs::read_to_string(&truth).unwrap();
    assert!(truth_text.starts_with("t,target,x,y,vx,vy,amplitude\n"));
    assert!(truth_text.contains("\n59,0,69,20,1,0,"));
}

#[test]
fn tbd_eval_prints_both_detectors_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let plot = d.path().join("pd.svg");
    let o = kestrel(&[
        "tbd-eval",
        "--size",
        "64",
        "--frames",
        "50",
        "--targets",
        "4",
        "--snr-max",
        "2",
        "--pfa",
        "1e-3",
        "--plot",
        s(&plot),
    ]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().filter(|l| l.starts_with('{')).count(), 3 + 7);
    assert!(out.contains("Pd TBD"));
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
}

#[test]
fn broken_inputs_of_tbd() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let good = dir.join("good.npy");
    write_npy(&good, &[3, 16, 16], &vec![0.5f32; 3 * 256]).unwrap();
    let det = dir.join("det.csv");
    let run = |args: &[&str], needles: &[&str]| {
        run_bad(dir, &with(&["tbd", "--output", s(&det)], args), needles);
    };
    // Frames of different sizes (a directory of files).
    let seq = dir.join("seq");
    std::fs::create_dir(&seq).unwrap();
    write_npy(&seq.join("a.npy"), &[2, 16, 16], &vec![0.0f32; 512]).unwrap();
    write_npy(&seq.join("b.npy"), &[16, 12], &vec![0.0f32; 192]).unwrap();
    run(
        &["--input", s(&seq), "--threshold", "1"],
        &["b.npy", "different sizes"],
    );
    // Velocities larger than the frame.
    run(
        &[
            "--input",
            s(&good),
            "--velocities",
            "20:0",
            "--threshold",
            "1",
        ],
        &["good.npy", "larger than"],
    );
    // Alpha outside (0, 1].
    run(
        &["--input", s(&good), "--alpha", "0", "--threshold", "1"],
        &["alpha"],
    );
    run(
        &["--input", s(&good), "--alpha", "1.5", "--threshold", "1"],
        &["alpha"],
    );
    // Empty sequence.
    let empty = dir.join("empty.npy");
    write_npy(&empty, &[0, 16, 16], &[0.0f32; 0]).unwrap();
    run(
        &["--input", s(&empty), "--threshold", "1"],
        &["empty.npy", "empty sequence"],
    );
    let nodir = dir.join("nothing");
    std::fs::create_dir(&nodir).unwrap();
    run(
        &["--input", s(&nodir), "--threshold", "1"],
        &["nothing", "empty sequence"],
    );
    // Unknown dtype.
    let i64s = dir.join("i64.npy");
    let mut bytes = kestrel::tbd::frames::npy_header(kestrel::tbd::Dtype::F64, &[1, 2, 2]);
    let at = bytes.windows(3).position(|w| w == b"<f8").unwrap();
    bytes[at..at + 3].copy_from_slice(b"<i8");
    bytes.extend([0u8; 32]);
    std::fs::write(&i64s, &bytes).unwrap();
    run(
        &["--input", s(&i64s), "--threshold", "1"],
        &["i64.npy", "dtype <i8"],
    );
    // Truncated file, not a .npy file, wrong rank, missing file.
    let cut = dir.join("cut.npy");
    let full = std::fs::read(&good).unwrap();
    std::fs::write(&cut, &full[..full.len() - 10]).unwrap();
    run(
        &["--input", s(&cut), "--threshold", "1"],
        &["cut.npy", "truncated"],
    );
    let txt = dir.join("text.npy");
    std::fs::write(&txt, "hello").unwrap();
    run(
        &["--input", s(&txt), "--threshold", "1"],
        &["text.npy", "not a .npy"],
    );
    let flat = dir.join("flat.npy");
    write_npy(&flat, &[4], &[0.0f32; 4]).unwrap();
    run(
        &["--input", s(&flat), "--threshold", "1"],
        &["flat.npy", "[T, H, W]"],
    );
    run(
        &["--input", s(&dir.join("missing.npy")), "--threshold", "1"],
        &["missing.npy"],
    );
    // Bad flags.
    run(
        &["--input", s(&good), "--decimation", "0", "--threshold", "1"],
        &["decimation"],
    );
    run(&["--input", s(&good), "--pfa", "2"], &["--pfa"]);
    run(
        &[
            "--input",
            s(&good),
            "--velocities",
            "1:x",
            "--threshold",
            "1",
        ],
        &["--velocities"],
    );
    run(
        &["--input", s(&good), "--threshold", "1", "--pfa", "0.1"],
        &["--pfa"],
    );
    run(
        &[
            "--input",
            s(&good),
            "--threshold",
            "1",
            "--state-out",
            s(&dir.join("m.csv")),
        ],
        &["--state-out"],
    );
    // A kernel name that is not one, and kernels that cannot run these vectors (a wave
    // kernel with no lag; one whose tile is smaller than the state it samples; a lean
    // kernel with more vectors between barriers than it folds; one of another decimation):
    // refused on any device.
    for (decimation, kernel, want) in [
        ("1", "nonsense", &["--kernel", "unknown kernel name"][..]),
        (
            "10",
            "wave3g0/plain/unroll/f32/32x16/D10",
            &["--kernel", "wave3g0", "lag 0"][..],
        ),
        (
            "10",
            "wave3g6/plain/unroll/f32/32x8/D10",
            &["--kernel", "smaller than the state it samples"][..],
        ),
        (
            "1",
            "lean4v5/ldg/unroll/f32/96x8/K4",
            &["--kernel", "lean4v5", "5 vectors between barriers (1..=4)"][..],
        ),
        // A retired kernel's name is no kernel's.
        (
            "1",
            "resident4/ldg/unroll/f32/128x8/K4",
            &["--kernel", "unknown kernel name"][..],
        ),
        // The packed kernel computes in f16: an f32 state is refused, as are more
        // vectors between barriers than it holds.
        (
            "1",
            "packed2v5/ldg/unroll/f32/32x16/K4",
            &["--kernel", "packed2v5", "needs the f16 state"][..],
        ),
        (
            "1",
            "packed2v9/ldg/unroll/f16/32x16/K4",
            &["--kernel", "9 vectors between barriers (1..=8)"][..],
        ),
        // Its wave form: a tile smaller than its halo (the tiles around would not hold
        // it), no lag, more periods than an item holds.
        (
            "1",
            "packed3v4w2g2/ldg/unroll/f16/32x11/K12",
            &["--kernel", "packed3v4w2g2", "smaller than its halo"][..],
        ),
        (
            "1",
            "packed3v4w4g0/ldg/unroll/f16/32x11/K4",
            &["--kernel", "lag 0 tile rows (1..=4095)"][..],
        ),
        (
            "1",
            "packed3v4w256g4/ldg/unroll/f16/32x11/K4",
            &["--kernel", "256 periods per launch (1..=255)"][..],
        ),
        // Kernels of another decimation than the one asked for.
        (
            "10",
            "lean4v3/ldg/unroll/f32/64x12/K4",
            &["--kernel", "emits every frame", "decimation 10"][..],
        ),
        (
            "5",
            "late2/plain/unroll/f32/32x16/D10",
            &["--kernel", "folds 10 frames", "decimation is 5"][..],
        ),
    ] {
        run(
            &[
                "--input",
                s(&good),
                "--threshold",
                "1",
                "--decimation",
                decimation,
                "--kernel",
                kernel,
            ],
            want,
        );
    }
    // More vectors than the packed kernel's byte arg-max holds (257, all below a pixel
    // a frame).
    let many: Vec<String> = (0..257)
        .map(|i| format!("{}:0", i as f32 / 512.0))
        .collect();
    let many = many.join(",");
    run(
        &[
            "--input",
            s(&good),
            "--threshold",
            "1",
            "--velocities",
            &many,
            "--kernel",
            "packed2v5/ldg/unroll/f16/32x16/K4",
        ],
        &["--kernel", "257 vectors", "at most 256"],
    );
    // Non-finite frame values.
    let nan = dir.join("nan.npy");
    let mut v = vec![0.0f32; 2 * 16 * 16];
    v[300] = f32::NAN;
    write_npy(&nan, &[2, 16, 16], &v).unwrap();
    run(
        &["--input", s(&nan), "--threshold", "1"],
        &["nan.npy", "frame 1", "not finite"],
    );
    // A state too large for memory.
    let big = dir.join("big.npy");
    let mut hdr = kestrel::tbd::frames::npy_header(kestrel::tbd::Dtype::U8, &[1, 400000, 400000]);
    hdr.extend(vec![0u8; 64]);
    std::fs::write(&big, &hdr).unwrap();
    run(
        &["--input", s(&big), "--threshold", "1"],
        &["big.npy", "truncated"],
    );
}

#[test]
fn too_large_a_state_is_refused_before_allocating() {
    // A sparse file of 60000 x 60000 u8 frames: 13 vectors would need ~375 GB.
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big.npy");
    let hdr = kestrel::tbd::frames::npy_header(kestrel::tbd::Dtype::U8, &[1, 60000, 60000]);
    let f = std::fs::File::create(&big).unwrap();
    use std::io::Write;
    (&f).write_all(&hdr).unwrap();
    f.set_len(hdr.len() as u64 + 60000 * 60000).unwrap();
    drop(f);
    let det = d.path().join("det.csv");
    let before = count(d.path());
    let o = kestrel(&[
        "tbd",
        "--input",
        s(&big),
        "--output",
        s(&det),
        "--threshold",
        "1",
    ]);
    expect_bad(&o, &["would need", "GB"], d.path(), before);
}

/// A `.npy` of f64 values of `shape` (the transition matrices).
fn write_f64_npy(path: &Path, shape: &[usize], v: &[f64]) {
    kestrel::io::write_npy_array(path, shape, v).unwrap();
}

#[test]
fn transition_and_switch_flags() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let frames = dir.join("f.npy");
    let vals: Vec<f32> = (0..6 * 20 * 24)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 0.5)
        .collect();
    write_npy(&frames, &[6, 20, 24], &vals).unwrap();
    let run = |extra: &[&str], tag: &str| -> (Vec<u8>, Vec<u8>) {
        let det = dir.join(format!("{tag}.csv"));
        let st = dir.join(format!("{tag}-state.npy"));
        let mut args = vec![
            "tbd",
            "--input",
            s(&frames),
            "--output",
            s(&det),
            "--state-out",
            s(&st),
            "--threshold",
            "0.3",
            "--device",
            "cpu",
        ];
        args.extend(extra);
        ok(&kestrel(&args));
        let out = (std::fs::read(&det).unwrap(), std::fs::read(&st).unwrap());
        std::fs::remove_file(&det).unwrap();
        std::fs::remove_file(&st).unwrap();
        out
    };
    // The default 13 vectors: the identity and --switch 0 are the plain recursion, bit
    // for bit; a real switch changes the state.
    let eye = dir.join("eye.npy");
    let mut m = vec![0.0f64; 13 * 13];
    (0..13).for_each(|i| m[i * 13 + i] = 1.0);
    write_f64_npy(&eye, &[13, 13], &m);
    let plain = run(&[], "plain");
    assert_eq!(run(&["--transition", s(&eye)], "eye"), plain);
    assert_eq!(run(&["--switch", "0"], "zero"), plain);
    let switched = run(&["--switch", "0.2"], "sw");
    assert_ne!(switched.1, plain.1);
    // The same matrix as a file gives the same outputs as the shorthand.
    let motions = kestrel::tbd::speeds_directions(&[0.0, 1.0], 12).unwrap();
    let t = kestrel::tbd::Transition::switching(&motions, 0.2).unwrap();
    let dense: Vec<f64> = (0..13 * 13).map(|i| t.get(i / 13, i % 13) as f64).collect();
    let file = dir.join("sw.npy");
    write_f64_npy(&file, &[13, 13], &dense);
    assert_eq!(run(&["--transition", s(&file)], "swfile"), switched);
    // Decimation with a switch runs too.
    run(&["--switch", "0.3", "--decimation", "3"], "dec");

    // Bad matrices and values: one error line, exit 2, nothing written.
    let det = dir.join("det.csv");
    let bad = |args: &[&str], needles: &[&str]| {
        let mut a = vec![
            "tbd",
            "--input",
            s(&frames),
            "--output",
            s(&det),
            "--threshold",
            "0.3",
        ];
        a.extend(args);
        run_bad(dir, &a, needles);
    };
    let small = dir.join("small.npy");
    write_f64_npy(
        &small,
        &[3, 3],
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    );
    bad(
        &["--transition", s(&small)],
        &["small.npy", "shape [3, 3]", "[13, 13]"],
    );
    let flat = dir.join("flat.npy");
    write_f64_npy(&flat, &[169], &m);
    bad(&["--transition", s(&flat)], &["flat.npy", "shape [169]"]);
    let mut rows = m.clone();
    rows[2 * 13 + 2] = 0.9;
    let rowsum = dir.join("rowsum.npy");
    write_f64_npy(&rowsum, &[13, 13], &rows);
    bad(
        &["--transition", s(&rowsum)],
        &["rowsum.npy", "row 2 sums to 0.9"],
    );
    let mut neg = m.clone();
    neg[4 * 13 + 4] = 1.5;
    neg[4 * 13 + 7] = -0.5;
    let negative = dir.join("neg.npy");
    write_f64_npy(&negative, &[13, 13], &neg);
    bad(
        &["--transition", s(&negative)],
        &["neg.npy", "row 4, column 7", "-0.5"],
    );
    let txt = dir.join("m.txt");
    std::fs::write(&txt, "1").unwrap();
    bad(
        &["--transition", s(&txt)],
        &["--transition", "m.txt", ".npy"],
    );
    bad(&["--transition", s(&dir.join("none.npy"))], &["none.npy"]);
    bad(&["--switch", "1.5"], &["--switch", "[0, 1]", "1.5"]);
    bad(&["--switch", "-0.1"], &["--switch", "[0, 1]", "-0.1"]);
    bad(&["--switch", "nan"], &["--switch"]);
    bad(
        &["--switch", "0.2", "--transition", s(&eye)],
        &["--switch", "--transition"],
    );
}

#[test]
fn tbd_eval_compares_the_switching_bank_on_turning_targets() {
    let o = kestrel(&words("tbd-eval --size 48 --frames 40 --targets 4 --snr-max 1 --pfa 1e-2 --scenario turning --turn-every 6 --switch 0.2"));
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    let json: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(json.len(), 2 + 7);
    assert!(json.iter().all(|l| l.contains("\"pd_switch\":")), "{out}");
    assert!(
        out.contains("Pd switch") && out.contains("turning"),
        "{out}"
    );
    // Without a switch: no switching column.
    let o = kestrel(&words(
        "tbd-eval --size 48 --frames 40 --targets 4 --snr-max 0 --pfa 1e-2 --scenario turning",
    ));
    ok(&o);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("pd_switch"));
    let d = tempfile::tempdir().unwrap();
    run_bad(
        d.path(),
        &["tbd-eval", "--scenario", "turning", "--turn-every", "0"],
        &["--turn-every"],
    );
    run_bad(
        d.path(),
        &words("tbd-eval --size 16 --frames 200 --scenario turning --turn-every 100"),
        &["too small", "turning"],
    );
    run_bad(d.path(), &["tbd-eval", "--switch", "2"], &["--switch"]);
}
