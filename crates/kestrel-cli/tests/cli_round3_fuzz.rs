//! Fuzzing of the newer commands in CI (a few seconds; `PROPTEST_CASES` raises the
//! counts): option values at their limits, and malformed files of each format.

mod common;

use super::cli_round3::{frames_npy, longest_digits, Z};
use common::*;
use proptest::prelude::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The fixtures every case starts from, in a fresh directory.
fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("z.csv"), Z).unwrap();
    std::fs::write(d.join("f.npy"), frames_npy(3, 16, 16)).unwrap();
    std::fs::write(
        d.join("det.csv"),
        b"t,z0,z1\n0,1.0,2.0\n0,5.0,5.0\n1,1.5,2.5\n2,2.0,3.0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("truth.csv"),
        b"t,id,x0,x1\n0,0,1.0,2.0\n1,0,1.5,2.5\n",
    )
    .unwrap();
    std::fs::write(
        d.join("tracks.csv"),
        b"t,track,status,x0,x1\n0,0,confirmed,1.0,2.0\n1,0,tentative,1.5,2.5\n",
    )
    .unwrap();
    std::fs::copy(example("range-only.toml"), d.join("ro.toml")).unwrap();
    std::fs::copy(example("tracking.toml"), d.join("tr.toml")).unwrap();
    std::fs::copy(example("cv2d.toml"), d.join("cv.toml")).unwrap();
    dir
}

/// Each newer command: a valid call and its numeric options.
fn commands() -> Vec<(Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            words("pf --model ro.toml --input z.csv --output o.npz --particles 50 --device cpu"),
            vec!["--particles", "--ess", "--seed"],
        ),
        (
            words("tbd --input f.npy --output d.csv --device cpu"),
            words("--alpha --decimation --threshold --pfa --nms --directions"),
        ),
        (
            words("simulate-frames --frames 2 --height 8 --width 8 --output g.npy"),
            words("--frames --height --width --targets --snr --seed"),
        ),
        (
            words("track --model tr.toml --detections det.csv --output t.csv"),
            words("--gate --pd --clutter --delete --max-variance --dt"),
        ),
        (
            words("eval --truth truth.csv --tracks tracks.csv --metric gospa"),
            vec!["--c", "--p", "--switching"],
        ),
        (
            words("loglik --model cv.toml --input z.csv --output l.npy"),
            vec!["--vague", "--steady"],
        ),
        (
            words("simulate --scenario random --model tr.toml --tracks 3 --steps 3 --output q.csv --truth x.csv"),
            words("--tracks --steps --pd --clutter --region --births --death"),
        ),
    ]
}

const LIMITS: [&str; 14] = [
    "-1",
    "0",
    "-0",
    "1",
    "0.5",
    "1e-300",
    "1e308",
    "-1e308",
    "NaN",
    "inf",
    "-inf",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999999999",
];

/// Runs `args` in `dir` with a time limit, and checks the contract of any outcome.
fn holds(dir: &Path, args: &[&str]) {
    let before = snapshot(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{args:?} ran for over 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{args:?}: {:?}: {err}",
        o.status
    );
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{args:?}: {err}"
    );
    if !o.status.success() {
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(longest_digits(&err) <= 40, "{args:?}: a long number: {err}");
        assert_eq!(snapshot(dir), before, "{args:?}: files changed");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn options_at_their_limits(cmd in 0usize..7, picks in proptest::collection::vec((any::<usize>(), 0usize..LIMITS.len()), 1..3)) {
        let dir = fixtures();
        let all = commands();
        let (base, flags) = &all[cmd];
        let mut args = base.clone();
        for (f, v) in picks {
            args = with(&args, &[flags[f % flags.len()], LIMITS[v]]);
        }
        holds(dir.path(), &args);
    }

    #[test]
    fn malformed_files_of_each_format(which in 0usize..6, at in any::<usize>(), bytes in proptest::collection::vec(prop_oneof![any::<u8>(), proptest::sample::select(b",\n\r\0-e9[]='(){}:".to_vec())], 1..6), cut in any::<bool>()) {
        let dir = fixtures();
        let files = ["f.npy", "det.csv", "truth.csv", "tracks.csv", "ro.toml", "tr.toml"];
        let p = dir.path().join(files[which]);
        let mut b = std::fs::read(&p).unwrap();
        // The header of a .npy, where a reader's rules matter, more often than its data.
        let i = if which == 0 { at % 80 } else { at % (b.len() + 1) };
        if cut {
            b.truncate(i);
        }
        let i = i.min(b.len());
        b.splice(i..i, bytes);
        std::fs::write(&p, &b).unwrap();
        let args: Vec<&str> = match which {
            0 => vec!["tbd", "--input", "f.npy", "--output", "d.csv", "--device", "cpu", "--threshold", "1"],
            1 | 5 => vec!["track", "--model", "tr.toml", "--detections", "det.csv", "--output", "t.csv"],
            2 | 3 => vec!["eval", "--truth", "truth.csv", "--tracks", "tracks.csv", "--metric", "ospa"],
            _ => vec!["pf", "--model", "ro.toml", "--input", "z.csv", "--output", "o.npz", "--particles", "50", "--device", "cpu"],
        };
        holds(dir.path(), &args);
        prop_assert_eq!(std::fs::read(&p).unwrap(), b);
    }
}
