//! The reliability contract of the whole command line (issue 13), one test per class of
//! failure found: exit status (2 bad input or usage, 1 other failures, 128 + signal),
//! exactly one `error:` line, no panic text, a pre-existing output untouched, and no
//! file left in the output directory (hidden temporaries included).

mod common;

use common::*;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SENTINEL: &[u8] = b"sentinel: a file that was here before the run\n";
const GOOD_CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("kestrel runs")
}

struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.p(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }
    fn sentinel(&self, name: &str) -> String {
        self.file(name, SENTINEL)
    }
    fn intact(&self, name: &str) {
        assert_eq!(
            std::fs::read(self.p(name)).unwrap(),
            SENTINEL,
            "{name} was changed"
        );
    }
}

/// Runs kestrel with the size of files it may write limited to `bytes` (writes beyond
/// fail with EFBIG, as on a full disk; SIGXFSZ ignored so the write returns the error).
fn run_with_file_limit(args: &[&str], bytes: u64) -> Output {
    let mut c = bin();
    c.args(args);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn an_output_equal_to_an_input_is_refused() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    std::fs::create_dir(d.p("sub")).unwrap();
    let dotted = d.p("sub/../z.csv");
    for out in [z.clone(), dotted.to_str().unwrap().to_string()] {
        for cmd in ["filter", "smooth"] {
            let o = run(&[cmd, "--model", &m, "--input", &z, "--output", &out]);
            contract(&o, 2, &["z.csv", "input"], d.path(), &["sub", "z.csv"]);
            assert_eq!(std::fs::read_to_string(d.p("z.csv")).unwrap(), GOOD_CSV);
        }
    }
    // The model is an input too.
    let mcopy = d.file("m.toml", &std::fs::read(&m).unwrap());
    let o = run(&[
        "filter", "--model", &mcopy, "--input", &z, "--output", &mcopy,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // simulate --output a.npy --truth a.npy: refused, the existing a.npy kept.
    let a = d.sentinel("a.npy");
    let o = run(&[
        "simulate", "--model", &m, "--tracks", "2", "--steps", "3", "--output", &a, "--truth", &a,
    ]);
    contract(
        &o,
        2,
        &["a.npy", "two outputs"],
        d.path(),
        &["a.npy", "m.toml", "sub", "z.csv"],
    );
    d.intact("a.npy");
}

#[test]
fn simulate_writes_both_files_or_neither() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let z = d.sentinel("z.npy");
    // The truth's directory does not exist: refused before any work.
    let absent = d.p("absent/x.npy");
    let o = run(&[
        "simulate",
        "--model",
        &m,
        "--tracks",
        "2",
        "--steps",
        "3",
        "--output",
        &z,
        "--truth",
        absent.to_str().unwrap(),
    ]);
    contract(&o, 2, &["absent"], d.path(), &["z.npy"]);
    d.intact("z.npy");
    // The truth cannot be written (the disk fills while writing it): exit 1, the
    // measurements file as it was, no temporary left.
    let x = d.p("x.npy");
    let o = run_with_file_limit(
        &[
            "simulate",
            "--model",
            &m,
            "--tracks",
            "100",
            "--steps",
            "100",
            "--output",
            &z,
            "--truth",
            x.to_str().unwrap(),
        ],
        // z: 100 x 100 x 2 f64 = 160 kB fits; the truth (320 kB) does not.
        200_000,
    );
    contract(&o, 1, &["x.npy"], d.path(), &["z.npy"]);
    d.intact("z.npy");
}

#[test]
fn a_full_disk_is_one_error_line_exit_1_and_the_old_output_kept() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let z = d.p("z.npy");
    ok(&run(&[
        "simulate",
        "--model",
        &m,
        "--tracks",
        "50",
        "--steps",
        "50",
        "--output",
        z.to_str().unwrap(),
    ]));
    for out in ["f.npz", "f.csv"] {
        let f = d.sentinel(out);
        let o = run_with_file_limit(
            &[
                "filter",
                "--model",
                &m,
                "--input",
                z.to_str().unwrap(),
                "--output",
                &f,
                "--device",
                "cpu",
            ],
            // The estimates (2500 steps x 21 values) need several times more.
            60_000,
        );
        contract(&o, 1, &[out, "cannot write"], d.path(), &[out, "z.npy"]);
        d.intact(out);
        std::fs::remove_file(&f).unwrap();
    }
}

#[test]
fn printing_never_panics() {
    let d = Dir::new();
    let plot = d.p("p.svg");
    // stdout closed before the demo prints its table (`kestrel demo | head -0`).
    let mut child = bin()
        .args([
            "demo",
            "--tracks",
            "4",
            "--steps",
            "5",
            "--device",
            "cpu",
            "--plot",
            plot.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}: {err}");
    assert!(!err.contains("panicked") && !err.contains("error"), "{err}");
    // stderr on a full device: a successful run still succeeds.
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let st = bin()
        .args([
            "filter",
            "--model",
            &example("cv2d.toml"),
            "--input",
            &z,
            "--output",
            d.p("f.csv").to_str().unwrap(),
        ])
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
}

#[test]
fn usage_errors_are_one_line() {
    let d = Dir::new();
    let o = run(&[]);
    contract(&o, 2, &["no command"], d.path(), &[]);
    let o = run(&["filter", "--bogus"]);
    contract(&o, 2, &["--bogus"], d.path(), &[]);
    let o = run(&["filter"]);
    contract(&o, 2, &["--model"], d.path(), &[]);
    let o = run(&["frobnicate"]);
    contract(&o, 2, &["frobnicate"], d.path(), &[]);
    let o = run(&["simulate", "--tracks", "many"]);
    contract(&o, 2, &["many"], d.path(), &[]);
    let o = run(&["simulate", "--tracks", "18446744073709551616"]);
    contract(&o, 2, &["18446744073709551616"], d.path(), &[]);
    assert!(run(&["--help"]).status.success());
    assert!(run(&["--version"]).status.success());
}

#[test]
fn the_device_line_comes_after_success_only() {
    let d = Dir::new();
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let m = example("cv2d.toml");
    let f = d.p("f.csv");
    let o = run(&[
        "filter",
        "--model",
        &m,
        "--input",
        &z,
        "--output",
        f.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(err.lines().any(|l| l.starts_with("device: ")), "{err}");
    let bad = d.file("bad.csv", b"track,t,z0,z1\n0,0,x,1\n");
    let o = run(&[
        "filter",
        "--model",
        &m,
        "--input",
        &bad,
        "--output",
        d.p("g.csv").to_str().unwrap(),
    ]);
    contract(
        &o,
        2,
        &["bad.csv:2"],
        d.path(),
        &["bad.csv", "f.csv", "z.csv"],
    );
    let o = run(&[
        "filter",
        "--model",
        &m,
        "--input",
        &z,
        "--output",
        d.p("g.csv").to_str().unwrap(),
        "--verbose",
    ]);
    ok(&o);
    assert!(stderr(&o).starts_with("device: "), "{}", stderr(&o));
}

#[test]
fn quoted_text_is_cut_and_escaped() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let out = d.p("o.csv");
    let out = out.to_str().unwrap();
    // A CR-only file is one long line.
    let mut cr = b"track,t,z0,z1".to_vec();
    for k in 0..20_000 {
        cr.extend_from_slice(format!("\r0,{k},1.0,2.0").as_bytes());
    }
    let cr = d.file("cr.csv", &cr);
    let o = run(&["filter", "--model", &m, "--input", &cr, "--output", out]);
    contract(
        &o,
        2,
        &["cr.csv:1", "header", "\\r0,0"],
        d.path(),
        &["cr.csv"],
    );
    // A megabyte field and a NUL in a field.
    let mut big = b"track,t,z0,z1\n0,0,1.0,".to_vec();
    big.extend(vec![b'7'; 1 << 20]);
    big.extend_from_slice(b"x\n");
    let big = d.file("big.csv", &big);
    let o = run(&["filter", "--model", &m, "--input", &big, "--output", out]);
    contract(
        &o,
        2,
        &["big.csv:2", "z1", "bytes in all"],
        d.path(),
        &["big.csv", "cr.csv"],
    );
    let nul = d.file("nul.csv", b"track,t,z0,z1\n0,0,1.0,2\x003\n");
    let o = run(&["filter", "--model", &m, "--input", &nul, "--output", out]);
    contract(
        &o,
        2,
        &["nul.csv:2", "2\\03"],
        d.path(),
        &["big.csv", "cr.csv", "nul.csv"],
    );
    // A newline in a path.
    let nl = d.p("a\nb.csv");
    let o = run(&[
        "filter",
        "--model",
        &m,
        "--input",
        nl.to_str().unwrap(),
        "--output",
        out,
    ]);
    contract(
        &o,
        2,
        &["a\\nb.csv"],
        d.path(),
        &["big.csv", "cr.csv", "nul.csv"],
    );
}

#[test]
fn an_output_name_of_255_bytes_works() {
    let d = Dir::new();
    let name = format!("{}.csv", "o".repeat(251));
    let z = d.p(&name);
    ok(&run(&[
        "simulate",
        "--model",
        &example("cv2d.toml"),
        "--tracks",
        "2",
        "--steps",
        "2",
        "--output",
        z.to_str().unwrap(),
    ]));
    assert_eq!(listing(d.path()), vec![name]);
}

/// Starts `args`, waits until a hidden temporary appears in `dir`, sends `sig`, and
/// returns the exit status.
fn interrupted(args: &[&str], dir: &Path, sig: libc::c_int) -> Option<i32> {
    let mut child = bin()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !listing(dir).iter().any(|n| n.ends_with(".tmp")) {
        assert!(
            start.elapsed().as_secs() < 60,
            "no temporary file appeared in {}",
            dir.display()
        );
        if child.try_wait().unwrap().is_some() {
            // Finished before it could be interrupted: say so through the status.
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    child.wait().unwrap().code()
}

#[test]
fn signals_remove_the_temporaries() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let z = d.sentinel("z.csv");
    for (sig, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        let mut tracks = 2000;
        loop {
            let t = tracks.to_string();
            let args = [
                "simulate", "--model", &m, "--tracks", &t, "--steps", "200", "--output", &z,
            ];
            match interrupted(&args, d.path(), sig) {
                Some(c) => {
                    assert_eq!(c, code, "signal {sig}");
                    break;
                }
                // Too fast to catch: a larger run.
                None if tracks < 1 << 20 => {
                    std::fs::write(&z, SENTINEL).unwrap();
                    tracks *= 4;
                }
                None => panic!("could not interrupt a write"),
            }
        }
        assert_eq!(listing(d.path()), vec!["z.csv"]);
        d.intact("z.csv");
    }
}
