//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use kestrel::Estimates;
use std::path::Path;
use std::process::{Command, Output};

pub fn kestrel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .output()
        .expect("the kestrel binary runs")
}

pub fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    p.to_str().expect("a UTF-8 path").to_string()
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "kestrel failed ({:?}):\n{}",
        o.status,
        stderr(o)
    );
}

/// Exit status 2, an `error:` line holding every needle, and nothing written to `dir`
/// beyond the files that were there before.
pub fn expect_bad(o: &Output, needles: &[&str], dir: &Path, before: usize) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "expected exit 2, stderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no line starting with `error:` in:\n{err}"));
    for n in needles {
        assert!(line.contains(n), "`{line}` does not mention `{n}`");
    }
    let now = std::fs::read_dir(dir).unwrap().count();
    assert_eq!(
        now,
        before,
        "a file was left behind in {}: {:?}",
        dir.display(),
        std::fs::read_dir(dir).unwrap().collect::<Vec<_>>()
    );
}

pub fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
        assert!(ok, "{what}[{i}]: {x} vs {y}");
    }
}

/// Parses an estimates CSV: (means, covariances, log-likelihoods), checking the header
/// and the track and step columns.
pub fn read_estimates_csv(
    p: &Path,
    tracks: usize,
    steps: usize,
    nx: usize,
    loglik: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut want = vec!["track".to_string(), "t".to_string()];
    want.extend((0..nx).map(|i| format!("x{i}")));
    want.extend((0..nx * nx).map(|i| format!("P{}{}", i / nx, i % nx)));
    if loglik {
        want.push("loglik".into());
    }
    assert_eq!(header, want);
    let (mut m, mut c, mut l) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = 0;
    for (i, line) in lines.enumerate() {
        let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(v.len(), want.len());
        assert_eq!((v[0] as usize, v[1] as usize), (i / steps, i % steps));
        m.extend_from_slice(&v[2..2 + nx]);
        c.extend_from_slice(&v[2 + nx..2 + nx + nx * nx]);
        l.extend_from_slice(&v[2 + nx + nx * nx..]);
        rows += 1;
    }
    assert_eq!(rows, tracks * steps);
    (m, c, l)
}

pub fn npz(p: &Path) -> Estimates<f64> {
    kestrel::io::read_estimates_npz(p).unwrap()
}

/// The names in `dir`, hidden files included, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The failure contract of issue 13: exit status `code`, stderr exactly one line, that
/// line starts with `error:` and holds every needle, no panic text, and the directory
/// holds exactly `left` afterwards (no output, no temporary, hidden files included).
pub fn contract(o: &Output, code: i32, needles: &[&str], dir: &Path, left: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "exit status; stderr:\n{err}");
    for bad in ["panicked", "RUST_BACKTRACE", "ZipWriter", "internal error"] {
        assert!(!err.contains(bad), "`{bad}` in stderr:\n{err}");
    }
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, found:\n{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].chars().count() < 700, "a long error line: {err}");
    for n in needles {
        assert!(
            lines[0].contains(n),
            "`{}` does not mention `{n}`",
            lines[0]
        );
    }
    let mut want: Vec<String> = left.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listing(dir), want, "files left in {}", dir.display());
}
