//! Fuzzing of the command line, in the test suite: argument vectors drawn by proptest
//! from the commands, their flags and hostile values (huge and negative numbers, NaN,
//! empty strings, missing files, directories, the input named as the output), and real
//! input files mutated byte by byte. Whatever the arguments, kestrel exits 0, 1 or 2,
//! never panics, prints exactly one `error:` line on failure, leaves no file behind on
//! failure, and never changes its inputs. The case count is small (each case starts a
//! process); `PROPTEST_CASES` raises it.

mod common;

use common::*;
use proptest::prelude::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

/// Runs kestrel in `dir` with a time limit (a hang is a failure).
fn run_in(dir: &Path, args: &[String]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("kestrel {args:?} ran for over 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("z.csv".to_string()),
        Just("z.npy".to_string()),
        Just("m.toml".to_string()),
        Just("out.csv".to_string()),
        Just("out.npz".to_string()),
        Just("out.npy".to_string()),
        Just("x.csv".to_string()),
        Just("absent.csv".to_string()),
        Just("dir".to_string()),
        Just("dir/".to_string()),
        Just("./dir/../z.csv".to_string()),
        Just("nodir/o.csv".to_string()),
        Just(String::new()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1".to_string()),
        Just("3".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("1e308".to_string()),
        Just("0.5".to_string()),
        Just("4294967296".to_string()),
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("cpu".to_string()),
        Just("cuda:7".to_string()),
        Just("f32".to_string()),
        Just("parallel".to_string()),
        Just("two-filter".to_string()),
        Just("parallel-sqrt".to_string()),
        Just("parallel-sqrt-rts".to_string()),
        Just("bogus\n\r\u{1b}[31m".to_string()),
        "[a-z0-9.:/_-]{0,12}",
    ]
}

fn flag() -> impl Strategy<Value = String> {
    proptest::sample::select(words("--model --input --output --truth --tracks --steps --seed --missing --device --precision --method --scan --fsync --verbose --plot --help -x --"))
    .prop_map(str::to_string)
}

/// A command, then flags and values in any order; often a nearly valid call.
fn argv() -> impl Strategy<Value = Vec<String>> {
    let cmd = proptest::sample::select(vec!["simulate", "filter", "smooth", "demo", "nope", ""]);
    let base = prop_oneof![
        Just(vec![]),
        Just(
            ["--model", "m.toml", "--input", "z.csv", "--output", "out.npz",]
                .map(String::from)
                .to_vec()
        ),
        Just(
            ["--model", "m.toml", "--tracks", "2", "--steps", "3", "--output", "out.csv",]
                .map(String::from)
                .to_vec()
        ),
    ];
    let extra = proptest::collection::vec(prop_oneof![flag(), value()], 0..6);
    (cmd, base, extra).prop_map(|(c, mut b, e)| {
        let mut v = vec![c.to_string()];
        if c == "demo" {
            // The demo's defaults are a large run; keep every case small.
            v.extend(["--tracks", "3", "--steps", "3"].map(String::from));
            b.clear();
        }
        v.extend(b);
        v.extend(e);
        v
    })
}

struct Setup {
    dir: tempfile::TempDir,
    files: Vec<(String, Vec<u8>)>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("z.csv"), CSV).unwrap();
    std::fs::copy(example("cv2d.toml"), d.join("m.toml")).unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();
    let o = run_in(
        d,
        &words("simulate --model m.toml --tracks 2 --steps 3 --output z.npy")
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>(),
    );
    ok(&o);
    let files = ["z.csv", "z.npy", "m.toml"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(d.join(n)).unwrap()))
        .collect();
    Setup { dir, files }
}

/// The contract for any outcome; `before` is the directory listing before the run.
fn check(o: &Output, s: &Setup, before: &[String], args: &[String]) {
    let err = stderr(o);
    let code = o.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{args:?}: status {:?}, stderr:\n{err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{args:?}:\n{err}");
    if code != Some(0) {
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line expected:\n{err}");
        assert!(lines[0].starts_with("error: "), "{args:?}:\n{err}");
        assert_eq!(listing(s.dir.path()), before, "{args:?}: files changed");
    }
    // The files this run reads (named after --model or --input) are never changed.
    let read: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--model" || w[0] == "--input")
        .map(|w| w[1].as_str())
        .collect();
    for (name, bytes) in s.files.iter().filter(|(n, _)| read.contains(&n.as_str())) {
        assert_eq!(
            &std::fs::read(s.dir.path().join(name)).unwrap(),
            bytes,
            "{args:?} changed the input {name}"
        );
    }
    assert!(
        !listing(s.dir.path()).iter().any(|n| n.ends_with(".tmp")),
        "{args:?}: a temporary file was left"
    );
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn any_argument_vector_holds_the_contract(args in argv()) {
        let s = setup();
        let before = listing(s.dir.path());
        let o = run_in(s.dir.path(), &args);
        check(&o, &s, &before, &args);
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Mutated input files through the whole command: exit 2 and one line, or success.
    #[test]
    fn mutated_inputs_through_the_cli(
        which in 0usize..3,
        at in any::<usize>(),
        bytes in proptest::collection::vec(prop_oneof![any::<u8>(), proptest::sample::select(b",\n\r\0-e9[]=".to_vec())], 1..8),
        cut in any::<bool>(),
        smooth in any::<bool>(),
    ) {
        let s = setup();
        let (name, orig) = &s.files[which];
        let mut b = orig.clone();
        let i = at % (b.len() + 1);
        if cut {
            b.truncate(i);
        }
        b.splice(i.min(b.len())..i.min(b.len()), bytes);
        std::fs::write(s.dir.path().join(name), &b).unwrap();
        let s = Setup { files: s.files.iter().map(|(n, v)| (n.clone(), if n == name { b.clone() } else { v.clone() })).collect(), dir: s.dir };
        let input = if which == 1 { "z.npy" } else { "z.csv" };
        let args: Vec<String> = [if smooth { "smooth" } else { "filter" }, "--model", "m.toml", "--input", input, "--output", "out.npz", "--device", "cpu"]
            .map(String::from)
            .to_vec();
        let before = listing(s.dir.path());
        let o = run_in(s.dir.path(), &args);
        check(&o, &s, &before, &args);
    }
}
