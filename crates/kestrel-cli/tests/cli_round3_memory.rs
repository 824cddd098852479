//! Reliability, round 3 (issue 42), continued: large buffers under a limited address
//! space are errors, not aborts (the fixtures are `cli_round3`'s).

mod common;

use super::cli_round3::{frames_npy, Z};
use common::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// Runs kestrel in `dir` with its address space limited to `bytes` (as `ulimit -v`).
fn run_with_address_space(dir: &Path, args: &[&str], bytes: u64) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kestrel"));
    c.args(args).current_dir(dir);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    c.output().unwrap()
}

/// Mechanism: `data::alloc::try_filled` / `try_zeroed` (`try_reserve` and a checked
/// `alloc_zeroed`): the particle buffers and the track-before-detect state, which
/// fit the machine's memory but not an address space limited as by `ulimit -v`, are an
/// error naming them (exit 2), never SIGABRT.
#[test]
fn large_buffers_under_a_limited_address_space_are_errors_not_aborts() {
    let d = Dir::new();
    d.file("z.csv", Z.as_bytes());
    d.file("f.npy", &frames_npy(1, 1024, 1024));
    let limit = 1u64 << 30;
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "pf",
                "--model",
                &example("range-only.toml"),
                "--input",
                "z.csv",
                "--output",
                "o.npz",
                "--particles",
                "40000000",
                "--device",
                "cpu",
            ],
            "particle",
        ),
        (
            &words("tbd --input f.npy --output d.csv --device cpu --threshold 1 --speeds 0,1,2,3,4 --directions 64"),
            "track-before-detect state",
        ),
    ];
    for (args, what) in cases {
        let before = snapshot(d.path());
        let o = run_with_address_space(d.path(), args, limit);
        assert!(
            o.status.code().is_some(),
            "{args:?}: killed by a signal ({:?}): {}",
            o.status,
            stderr(&o)
        );
        one_error_line(&o, 2, &[what, "allocator"]);
        assert_eq!(snapshot(d.path()), before);
    }
}
