//! The failure contract of issue 13, command by command: for every subcommand that
//! writes a file, broken inputs (a malformed file, a missing file, an absurd size, a bad
//! option) exit with status 2 and exactly one `error:` line, without panic text, with
//! the pre-existing outputs' sentinels intact and no file left behind (hidden
//! temporaries included); and a successful run leaves its outputs and nothing else.

mod common;

use common::*;

const Z_CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

/// One command: a good run and the outputs it writes, and broken variants of it.
struct Case {
    good: Vec<&'static str>,
    outputs: Vec<&'static str>,
    bad: Vec<(Vec<&'static str>, Vec<&'static str>)>,
}

/// The inputs every case reads, in the scratch directory (relative names: the runs
/// start there).
fn fixtures(d: &Dir) -> Vec<String> {
    std::fs::copy(example("cv2d.toml"), d.p("m.toml")).unwrap();
    std::fs::copy(example("tracking.toml"), d.p("tracking.toml")).unwrap();
    std::fs::copy(example("hmm-weather.toml"), d.p("hmm.toml")).unwrap();
    std::fs::copy(example("hmm-weather-obs.npy"), d.p("obs.npy")).unwrap();
    d.file("z.csv", Z_CSV.as_bytes());
    kestrel::tbd::frames::write_npy(&d.p("frames.npy"), &[3, 16, 16], &vec![0.5f32; 768]).unwrap();
    d.file("det.csv", b"t,z0,z1\n0,1,2\n1,3,4\n2,5,6\n");
    d.file("truth.csv", b"t,id,x0,x1\n0,1,0,0\n1,1,1,1\n");
    d.file(
        "tracks.csv",
        b"t,track,status,x0,x1\n0,5,confirmed,3,4\n1,5,confirmed,1,1\n",
    );
    // Broken inputs: a malformed field, a truncated model, a file that is not .npy,
    // a short row, a quoted NaN where a number must be.
    d.file("bad.csv", b"track,t,z0,z1\n0,0,x,1\n");
    d.file("bad.toml", b"[model\nF = [[1.0]]\n");
    d.file("bad.npy", b"hello");
    d.file("bad.npz", b"hello");
    d.file("baddet.csv", b"t,z0,z1\n0,1\n");
    d.file("badtruth.csv", b"t,id,x0,x1\n0,1,0,abc\n");
    // Directories where files are read: a read failure that is the input's fault.
    std::fs::create_dir(d.p("dir.csv")).unwrap();
    std::fs::create_dir(d.p("dir.toml")).unwrap();
    listing(d.path())
}

fn cases() -> Vec<(&'static str, Case)> {
    let est = |cmd: &'static str, out: &'static str, extra: &[&'static str]| {
        let mut good = vec![
            cmd, "--model", "m.toml", "--input", "z.csv", "--output", out, "--device", "cpu",
        ];
        good.extend_from_slice(extra);
        let swap = |flag: &'static str, to: &'static str| with(&good, &[flag, to]);
        Case {
            outputs: vec![out],
            bad: vec![
                (swap("--input", "bad.csv"), vec!["bad.csv:2", "z0"]),
                (swap("--input", "absent.csv"), vec!["absent.csv"]),
                (swap("--input", "dir.csv"), vec!["dir.csv"]),
                (swap("--model", "bad.toml"), vec!["bad.toml"]),
                (swap("--model", "dir.toml"), vec!["dir.toml"]),
                (swap("--output", "z.csv"), vec!["z.csv", "input"]),
                (swap("--output", "nodir/o.csv"), vec!["nodir"]),
            ],
            good,
        }
    };
    let mut v = vec![
        ("filter", est("filter", "f.npz", &[])),
        ("smooth", est("smooth", "s.csv", &[])),
        ("loglik", est("loglik", "ll.npy", &[])),
        ("pf", est("pf", "pf.npz", &["--particles", "64"])),
    ];
    // Reads the filter's output of the case above.
    let retro = words("retrodict --model m.toml --input f.npz --output r.npz --device cpu");
    v.insert(
        2,
        (
            "retrodict",
            Case {
                good: retro.to_vec(),
                outputs: vec!["r.npz"],
                bad: vec![
                    (with(&retro, &["--input", "z.csv"]), vec!["z.csv", ".npz"]),
                    (with(&retro, &["--input", "absent.npz"]), vec!["absent.npz"]),
                    (with(&retro, &["--input", "bad.npz"]), vec!["bad.npz"]),
                    (with(&retro, &["--model", "bad.toml"]), vec!["bad.toml"]),
                    (with(&retro, &["--output", "f.npz"]), vec!["f.npz", "input"]),
                    (with(&retro, &["--output", "nodir/r.npz"]), vec!["nodir"]),
                    (with(&retro, &["--method", "fast"]), vec!["fast"]),
                ],
            },
        ),
    );
    let sim = words("simulate --model m.toml --tracks 2 --steps 3 --output sz.npy --truth sx.csv");
    v.push((
        "simulate",
        Case {
            good: sim.to_vec(),
            outputs: vec!["sz.npy", "sx.csv"],
            bad: vec![
                (with(&sim, &["--model", "bad.toml"]), vec!["bad.toml"]),
                (with(&sim, &["--model", "absent.toml"]), vec!["absent.toml"]),
                (with(&sim, &["--truth", "sz.npy"]), vec!["two outputs"]),
                (with(&sim, &["--output", "m.toml"]), vec!["m.toml"]),
                (
                    with(&sim, &["--tracks", "1000000000000"]),
                    vec!["would need", "GB"],
                ),
            ],
        },
    ));
    let scen = words("simulate --scenario random --model tracking.toml --tracks 2 --steps 3 --output scen.csv --truth scentruth.csv");
    v.push((
        "simulate --scenario",
        Case {
            good: scen.to_vec(),
            outputs: vec!["scen.csv", "scentruth.csv"],
            bad: vec![
                (with(&scen, &["--model", "bad.toml"]), vec!["bad.toml"]),
                (with(&scen, &["--truth", "scen.csv"]), vec!["two outputs"]),
                (with(&scen, &["--truth", "nodir/t.csv"]), vec!["nodir"]),
                (
                    with(&scen, &["--tracks", "1000000000000"]),
                    vec!["would need", "GB"],
                ),
            ],
        },
    ));
    let track = words("track --model tracking.toml --detections det.csv --output trk.csv");
    v.push((
        "track",
        Case {
            good: track.to_vec(),
            outputs: vec!["trk.csv"],
            bad: vec![
                (
                    with(&track, &["--detections", "baddet.csv"]),
                    vec!["baddet.csv:2"],
                ),
                (
                    with(&track, &["--detections", "absent.csv"]),
                    vec!["absent.csv"],
                ),
                (with(&track, &["--output", "det.csv"]), vec!["input"]),
                (with(&track, &["--model", "bad.toml"]), vec!["bad.toml"]),
            ],
        },
    ));
    let eval = words(
        "eval --truth truth.csv --tracks tracks.csv --metric gospa --output ev.csv --plot ev.svg",
    );
    v.push((
        "eval",
        Case {
            good: eval.to_vec(),
            outputs: vec!["ev.csv", "ev.svg"],
            bad: vec![
                (
                    with(&eval, &["--truth", "badtruth.csv"]),
                    vec!["badtruth.csv:2", "x1"],
                ),
                (with(&eval, &["--tracks", "absent.csv"]), vec!["absent.csv"]),
                (with(&eval, &["--output", "truth.csv"]), vec!["input"]),
            ],
        },
    ));
    let tbd = words(
        "tbd --input frames.npy --output tbd.csv --state-out state.npy --threshold 1 --device cpu",
    );
    v.push((
        "tbd",
        Case {
            good: tbd.to_vec(),
            outputs: vec!["tbd.csv", "state.npy"],
            bad: vec![
                (with(&tbd, &["--input", "bad.npy"]), vec!["bad.npy"]),
                (with(&tbd, &["--input", "absent.npy"]), vec!["absent.npy"]),
                (with(&tbd, &["--state-out", "frames.npy"]), vec!["input"]),
                (with(&tbd, &["--alpha", "0"]), vec!["alpha"]),
            ],
        },
    ));
    let frames = words("simulate-frames --output sf.npy --truth sf.csv --frames 2 --height 8 --width 8 --target 2:2:1:0");
    v.push((
        "simulate-frames",
        Case {
            good: frames.to_vec(),
            outputs: vec!["sf.npy", "sf.csv"],
            bad: vec![
                (with(&frames, &["--target", "1:2"]), vec!["--target"]),
                (with(&frames, &["--truth", "sf.npy"]), vec!["two outputs"]),
                (
                    with(&frames, &["--frames", "100000000000"]),
                    vec!["would need", "GB"],
                ),
            ],
        },
    ));
    let te = words("tbd-eval --size 16 --frames 12 --alpha 0.5 --targets 1 --velocities 0:0,1:0 --snr-max 1 --plot te.svg");
    v.push((
        "tbd-eval",
        Case {
            good: te.to_vec(),
            outputs: vec!["te.svg"],
            bad: vec![
                (with(&te, &["--pfa", "2"]), vec!["--pfa"]),
                (with(&te, &["--plot", "nodir/te.svg"]), vec!["nodir"]),
                (
                    with(&te, &["--size", "10000000000"]),
                    vec!["would need", "GB"],
                ),
            ],
        },
    ));
    let hmm = words("hmm --model hmm.toml --input obs.npy --output hmm.npz --device cpu");
    v.push((
        "hmm",
        Case {
            good: hmm.to_vec(),
            outputs: vec!["hmm.npz"],
            bad: vec![
                (with(&hmm, &["--input", "bad.npy"]), vec!["bad.npy"]),
                (with(&hmm, &["--input", "absent.npy"]), vec!["absent.npy"]),
                (with(&hmm, &["--input", "z.csv"]), vec!["z.csv", ".npy"]),
                (with(&hmm, &["--model", "bad.toml"]), vec!["bad.toml"]),
                (with(&hmm, &["--model", "m.toml"]), vec!["m.toml"]),
                (with(&hmm, &["--output", "obs.npy"]), vec!["input"]),
                (with(&hmm, &["--output", "nodir/h.npz"]), vec!["nodir"]),
            ],
        },
    ));
    let demo = words("demo --tracks 4 --steps 5 --device cpu --plot demo.svg");
    v.push((
        "demo",
        Case {
            good: demo.to_vec(),
            outputs: vec!["demo.svg"],
            bad: vec![
                (with(&demo, &["--plot", "demo.png"]), vec!["demo.png"]),
                (with(&demo, &["--plot", "nodir/d.svg"]), vec!["nodir"]),
                (with(&demo, &["--steps", "0"]), vec!["--steps"]),
            ],
        },
    ));
    let demo_pf = words("demo --pf --steps 5 --particles 100 --device cpu --plot demopf.svg");
    v.push((
        "demo --pf",
        Case {
            good: demo_pf.to_vec(),
            outputs: vec!["demopf.svg"],
            bad: vec![
                (with(&demo_pf, &["--particles", "0"]), vec!["--particles"]),
                (
                    with(&demo_pf, &["--particles", "2000000000"]),
                    vec!["would need", "GB"],
                ),
                (
                    with(&demo_pf, &["--particles", "1000000000000000"]),
                    vec!["1000000000000000 particles", "at most"],
                ),
            ],
        },
    ));
    let demo_tr = ["demo", "--tracking", "--plot", "demotr.svg"];
    v.push((
        "demo --tracking",
        Case {
            good: demo_tr.to_vec(),
            outputs: vec!["demotr.svg"],
            bad: vec![(with(&demo_tr, &["--plot", "nodir/t.svg"]), vec!["nodir"])],
        },
    ));
    v
}

#[test]
fn every_command_holds_the_contract() {
    let d = Dir::new();
    let mut files = fixtures(&d);
    for (name, case) in cases() {
        for out in &case.outputs {
            d.sentinel(out);
        }
        for (args, needles) in &case.bad {
            eprintln!("{name}: {args:?}");
            d.run_bad(args, needles);
        }
        for out in &case.outputs {
            d.intact(out);
        }
        let o = kestrel_in(d.path(), &case.good);
        ok(&o);
        files.extend(case.outputs.iter().map(|s| s.to_string()));
        files.sort();
        files.dedup();
        assert_eq!(listing(d.path()), files, "{name}: files after success");
        for out in &case.outputs {
            assert_ne!(
                std::fs::read(d.p(out)).unwrap(),
                SENTINEL,
                "{name}: {out} not written"
            );
        }
    }
}

/// Every command `kestrel --help` lists is in the table above (or writes no file).
#[test]
fn the_table_names_every_command() {
    let o = kestrel(&["--help"]);
    ok(&o);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(listed.len() >= 12, "{help}");
    let covered: Vec<&str> = cases()
        .iter()
        .map(|(n, _)| n.split_whitespace().next().unwrap())
        .collect();
    for c in listed {
        // `bench` prints only; `help` is clap's.
        if c == "bench" || c == "help" {
            continue;
        }
        assert!(covered.contains(&c), "{c} is not covered");
    }
}

/// `bench` writes no file: its usage errors are one line.
#[test]
fn bench_usage_errors_are_one_line() {
    let d = Dir::new();
    d.run_bad(&["bench", "--only", "nothing"], &["nothing"]);
    d.run_bad(&["bench", "--seed", "nobody"], &["nobody"]);
    d.run_bad(&["bench", "--seed", "lin", "--only", "cpu"], &["--only"]);
    d.run_bad(
        &["bench", "--seed", "lin", "--plot", "nodir"],
        &["--plot", "nodir"],
    );
    // A malformed knob of the TBD family stops the run before any family starts: one
    // error line naming it, exit 2, nothing written (no family's table either).
    // So does a kernel part that names nothing to time (a typo, or a kernel the
    // benchmark's vectors cannot run).
    let knobs = [
        ("KESTREL_BENCH_TBD_RING", "lots"),
        ("KESTREL_BENCH_TBD_SIZE", "1024x0"),
        ("KESTREL_BENCH_TBD_SIZE", "2048"),
        ("KESTREL_BENCH_TBD_SIZE", "99999999999x99999999999"),
        ("KESTREL_BENCH_TBD_FRAMES", "0"),
        ("KESTREL_BENCH_TBD_FRAMES", "100000000000"),
        ("KESTREL_BENCH_TBD", "wave9z"),
        // A retired kernel is nothing to time.
        ("KESTREL_BENCH_TBD", "resident4/"),
        (
            "KESTREL_BENCH_TBD",
            "late2/,wave2g8/plain/unroll/f32/64x12/D10",
        ),
    ];
    // The same for the knobs of the Kalman family's multi-GPU comparison.
    let cuda_knobs = [
        ("KESTREL_BENCH_CUDA", "multy"),
        ("KESTREL_BENCH_MULTI_TRACKS", "lots"),
        ("KESTREL_BENCH_MULTI_TRACKS", "0"),
        ("KESTREL_BENCH_MULTI_TRACKS", "99999999999999"),
        ("KESTREL_BENCH_MULTI_PIECE", "-3"),
    ];
    let runs = knobs
        .iter()
        .map(|&(k, v)| (k, v, "tbd"))
        .chain(cuda_knobs.iter().map(|&(k, v)| (k, v, "cuda")));
    for (knob, value, family) in runs {
        for only in [&["--only", family][..], &[]] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_kestrel"))
                .arg("bench")
                .args(only)
                .env(knob, value)
                .current_dir(d.path())
                .output()
                .expect("the kestrel binary runs");
            let named = value.rsplit(',').next().unwrap();
            one_error_line(&o, 2, &[knob, named]);
            assert!(o.stdout.is_empty(), "printed before the error");
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        }
    }
}

/// `bench --seed lin --quick`: the Lin et al. records and tables, the chart written, and
/// the windowed likelihood's error falling to rounding as the window grows (Figure 6).
#[test]
fn the_lin_seed_runs_and_its_window_error_falls() {
    let d = Dir::new();
    let o = kestrel_in(
        d.path(),
        &["bench", "--seed", "lin", "--quick", "--plot", "."],
    );
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Lin Fig 6"), "{out}");
    assert!(d.p("seed-lin.svg").is_file());
    let err = |model: &str, n: usize| -> f64 {
        let name = format!("\"name\":\"seed-lin/fig6/{model}/window:{n}\"");
        let line = out
            .lines()
            .find(|l| l.contains(&name))
            .unwrap_or_else(|| panic!("no record {name}"));
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["extra"]["max_abs_err_per_step"].as_f64().unwrap()
    };
    for model in ["AR(10)", "RW 2-D", "seismic (examples/seismic.toml)"] {
        assert!(err(model, 1) > 0.1, "{model}: a window of 1 is far off");
        assert!(err(model, 384) < 1e-8, "{model}: a long window is exact");
        assert!(err(model, 384) < err(model, 32));
    }
    // The AR(10) needs its order plus one: 11 beats 8 by orders of magnitude.
    assert!(err("AR(10)", 11) < 1e-2 * err("AR(10)", 8));
}
