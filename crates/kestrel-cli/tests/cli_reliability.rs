//! The reliability contract of the whole command line (issue 13), one test per class of
//! failure found: exit status (2 bad input or usage, 1 other failures, 128 + signal),
//! exactly one `error:` line, no panic text, a pre-existing output untouched, and no
//! file left in the output directory (hidden temporaries included).

mod common;

use common::*;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub(crate) const GOOD_CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
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
            let o = kestrel(&[cmd, "--model", &m, "--input", &z, "--output", &out]);
            contract(&o, 2, &["z.csv", "input"], d.path(), &["sub", "z.csv"]);
            assert_eq!(std::fs::read_to_string(d.p("z.csv")).unwrap(), GOOD_CSV);
        }
    }
    // The model is an input too.
    let mcopy = d.file("m.toml", &std::fs::read(&m).unwrap());
    let o = filter(&mcopy, &z, &mcopy, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // simulate --output a.npy --truth a.npy: refused, the existing a.npy kept.
    let a = d.sentinel("a.npy");
    let o = simulate(&m, "2", "3", &a, &["--truth", &a]);
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
    let o = simulate(&m, "2", "3", &z, &["--truth", absent.to_str().unwrap()]);
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
    ok(&simulate(&m, "50", "50", z.to_str().unwrap(), &[]));
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
    let o = kestrel(&[]);
    contract(&o, 2, &["no command"], d.path(), &[]);
    let o = kestrel(&["filter", "--bogus"]);
    contract(&o, 2, &["--bogus"], d.path(), &[]);
    let o = kestrel(&["filter"]);
    contract(&o, 2, &["--model"], d.path(), &[]);
    let o = kestrel(&["frobnicate"]);
    contract(&o, 2, &["frobnicate"], d.path(), &[]);
    let o = kestrel(&["simulate", "--tracks", "many"]);
    contract(&o, 2, &["many"], d.path(), &[]);
    let o = kestrel(&["simulate", "--tracks", "18446744073709551616"]);
    contract(&o, 2, &["18446744073709551616"], d.path(), &[]);
    assert!(kestrel(&["--help"]).status.success());
    assert!(kestrel(&["--version"]).status.success());
}

#[test]
fn the_device_line_comes_after_success_only() {
    let d = Dir::new();
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let m = example("cv2d.toml");
    let f = d.p("f.csv");
    let o = filter(&m, &z, f.to_str().unwrap(), &[]);
    ok(&o);
    let err = stderr(&o);
    assert!(err.lines().any(|l| l.starts_with("device: ")), "{err}");
    let bad = d.file("bad.csv", b"track,t,z0,z1\n0,0,x,1\n");
    let o = filter(&m, &bad, d.p("g.csv").to_str().unwrap(), &[]);
    contract(
        &o,
        2,
        &["bad.csv:2"],
        d.path(),
        &["bad.csv", "f.csv", "z.csv"],
    );
    let o = filter(&m, &z, d.p("g.csv").to_str().unwrap(), &["--verbose"]);
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
    let o = filter(&m, &cr, out, &[]);
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
    let o = filter(&m, &big, out, &[]);
    contract(
        &o,
        2,
        &["big.csv:2", "z1", "bytes in all"],
        d.path(),
        &["big.csv", "cr.csv"],
    );
    let nul = d.file("nul.csv", b"track,t,z0,z1\n0,0,1.0,2\x003\n");
    let o = filter(&m, &nul, out, &[]);
    contract(
        &o,
        2,
        &["nul.csv:2", "2\\03"],
        d.path(),
        &["big.csv", "cr.csv", "nul.csv"],
    );
    // A newline in a path.
    let nl = d.p("a\nb.csv");
    let o = filter(&m, nl.to_str().unwrap(), out, &[]);
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
    ok(&simulate(
        &example("cv2d.toml"),
        "2",
        "2",
        z.to_str().unwrap(),
        &[],
    ));
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

#[test]
fn sizes_from_input_are_checked_before_allocating() {
    let d = Dir::new();
    let out = d.sentinel("z.csv");
    let mut left = vec!["z.csv"];
    for (i, (dims, why)) in [
        ("2000", "limit"),
        ("100000000", "limit"),
        ("4294967296", "limit"),
        ("18446744073709551615", "too large"),
    ]
    .iter()
    .enumerate()
    {
        let name = format!("rw{i}.toml");
        let m = d.file(
            &name,
            format!("[model]\nkind = \"random-walk\"\ndims = {dims}\nq = 1.0\nr = 1.0\n")
                .as_bytes(),
        );
        left.push(Box::leak(name.into_boxed_str()));
        let o = simulate(&m, "1", "1", &out, &[]);
        contract(&o, 2, &["dims", why], d.path(), &left);
    }
    let m = example("cv2d.toml");
    for (tracks, steps) in [
        ("1000000000000", "10"),
        ("18446744073709551615", "1"),
        ("4294967296", "4294967296"),
    ] {
        let o = simulate(&m, tracks, steps, &out, &[]);
        contract(&o, 2, &[tracks, "would need", "GB"], d.path(), &left);
    }
    let o = kestrel(&[
        "demo",
        "--tracks",
        "1000000000000",
        "--steps",
        "1000",
        "--device",
        "cpu",
        "--plot",
        d.p("p.svg").to_str().unwrap(),
    ]);
    contract(&o, 2, &["would need"], d.path(), &left);
    d.intact("z.csv");
}

#[test]
fn model_keys_of_the_other_form_are_refused() {
    let d = Dir::new();
    let z = d.file("z.csv", GOOD_CSV.as_bytes());
    let out = d.p("o.csv");
    let cases = [
        (
            "[model]\nkind = \"cv\"\ndims = 2\nq = 1.0\nr = 1.0\nF = [[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]\n",
            "F",
        ),
        (
            "[model]\nkind = \"cv\"\ndims = 2\nq = 1.0\nr = 1.0\ncoeffs = [0.5]\n",
            "coeffs",
        ),
        (
            "[model]\nF = [[1.0, 0.0], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0], [0.0, 1.0]]\nR = [[1.0, 0.0], [0.0, 1.0]]\nq = 5.0\ndt = 0.1\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
            "dt, q",
        ),
    ];
    for (text, key) in cases {
        let m = d.file("m.toml", text.as_bytes());
        let o = filter(&m, &z, out.to_str().unwrap(), &[]);
        contract(
            &o,
            2,
            &["m.toml", key, "not used by"],
            d.path(),
            &["m.toml", "z.csv"],
        );
    }
}

#[test]
fn values_too_large_for_f32_are_named_and_large_ones_warned() {
    let d = Dir::new();
    let m = example("cv2d.toml");
    let out = d.p("o.csv");
    let out = out.to_str().unwrap();
    let z = d.file("z.csv", b"track,t,z0,z1\n0,0,1e39,2\n");
    let o = filter(&m, &z, out, &["--precision", "f32"]);
    contract(
        &o,
        2,
        &["z.csv:2", "z0", "does not fit in f32"],
        d.path(),
        &["z.csv"],
    );
    // The same value in an f64 .npy file.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 2), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&1e39f64.to_le_bytes());
    npy.extend_from_slice(&2f64.to_le_bytes());
    let zn = d.file("z.npy", &npy);
    let o = filter(&m, &zn, out, &["--precision", "f32"]);
    contract(
        &o,
        2,
        &["z.npy", "track 0, step 0", "does not fit in f32"],
        d.path(),
        &["z.csv", "z.npy"],
    );
    ok(&filter(&m, &zn, out, &["--precision", "f64"]));
    // Large but representable: filtered, with a warning about f32 accuracy.
    let big = d.file("big.csv", b"track,t,z0,z1\n0,0,5e7,2\n0,1,5e7,3\n");
    let o = filter(&m, &big, out, &["--precision", "f32"]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning: ") && l.contains("f32") && l.contains("5.000e7")),
        "{err}"
    );
}
