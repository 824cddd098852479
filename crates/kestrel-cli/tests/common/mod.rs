//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use kestrel::Estimates;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The content of a file that was there before a run (a pre-existing output).
pub const SENTINEL: &[u8] = b"sentinel: a file that was here before the run\n";

pub fn kestrel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .output()
        .expect("the kestrel binary runs")
}

/// `kestrel filter --model model --input input --output output`, then `extra`.
pub fn filter(model: &str, input: &str, output: &str, extra: &[&str]) -> Output {
    model_run("filter", model, input, output, extra)
}

/// `kestrel smooth --model model --input input --output output`, then `extra`.
pub fn smooth(model: &str, input: &str, output: &str, extra: &[&str]) -> Output {
    model_run("smooth", model, input, output, extra)
}

/// `kestrel cmd --model model --input input --output output`, then `extra` (filter,
/// smooth, pf, loglik, retrodict).
pub fn model_run(cmd: &str, model: &str, input: &str, output: &str, extra: &[&str]) -> Output {
    let mut args = vec![cmd, "--model", model, "--input", input, "--output", output];
    args.extend_from_slice(extra);
    kestrel(&args)
}

/// The arguments of `kestrel cmd --model model --input input --output output`, then the
/// words of `extra` (for tables of runs that differ in a few options).
pub fn model_args<'a>(
    cmd: &'a str,
    model: &'a str,
    input: &'a str,
    output: &'a str,
    extra: &'a str,
) -> Vec<&'a str> {
    let mut args = vec![cmd, "--model", model, "--input", input, "--output", output];
    args.extend(extra.split_whitespace());
    args
}

/// `kestrel simulate --model model --tracks tracks --steps steps --output output`, then
/// `extra`.
pub fn simulate(model: &str, tracks: &str, steps: &str, output: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "simulate", "--model", model, "--tracks", tracks, "--steps", steps, "--output", output,
    ];
    args.extend_from_slice(extra);
    kestrel(&args)
}

/// `kestrel eval --truth truth --tracks tracks --metric metric`, then `extra`.
pub fn eval(truth: &str, tracks: &str, metric: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval", "--truth", truth, "--tracks", tracks, "--metric", metric,
    ];
    args.extend_from_slice(extra);
    kestrel(&args)
}

/// Runs kestrel with `dir` as its working directory.
pub fn kestrel_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the kestrel binary runs")
}

/// A scratch directory for one test, removed at its end.
pub struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    pub fn new() -> Dir {
        Dir {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    /// Writes `name` and returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.p(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }
    /// A pre-existing output: [`SENTINEL`] in `name`.
    pub fn sentinel(&self, name: &str) -> String {
        self.file(name, SENTINEL)
    }
    /// Asserts that `name` still holds [`SENTINEL`].
    pub fn intact(&self, name: &str) {
        assert_eq!(
            std::fs::read(self.p(name)).unwrap(),
            SENTINEL,
            "{name} was changed"
        );
    }
    /// [`run_bad`] in this directory.
    pub fn run_bad(&self, args: &[&str], needles: &[&str]) -> Output {
        run_bad(self.path(), args, needles)
    }
}

impl Default for Dir {
    fn default() -> Self {
        Dir::new()
    }
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

/// Exit status 2 and the one-line failure contract (see [`contract`]) with every needle,
/// and nothing written to `dir` beyond the `before` files that were there.
pub fn expect_bad(o: &Output, needles: &[&str], dir: &Path, before: usize) {
    one_error_line(o, 2, needles);
    let now = std::fs::read_dir(dir).unwrap().count();
    assert_eq!(
        now,
        before,
        "a file was left behind in {}: {:?}",
        dir.display(),
        listing(dir)
    );
}

/// Every file directly in `dir` (hidden ones included) with its bytes, sorted by name.
pub fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    listing(dir)
        .into_iter()
        .map(|n| {
            let p = dir.join(&n);
            let bytes = p.is_file().then(|| std::fs::read(&p).unwrap());
            (n, bytes)
        })
        .collect()
}

/// Runs kestrel with `args` in `dir` (its working directory, so that relative names
/// land there) and asserts the failure contract of a bad input: exit
/// status 2, exactly one `error:` line holding every needle, no panic text, and `dir`
/// exactly as it was (no new file, no temporary, every existing file, a pre-existing
/// output's sentinel included, byte for byte the same).
pub fn run_bad(dir: &Path, args: &[&str], needles: &[&str]) -> Output {
    let before = snapshot(dir);
    let o = kestrel_in(dir, args);
    one_error_line(&o, 2, needles);
    let after = snapshot(dir);
    let names =
        |s: &[(String, Option<Vec<u8>>)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&after),
        names(&before),
        "{args:?}: files left in {}",
        dir.display()
    );
    for ((name, a), (_, b)) in after.iter().zip(&before) {
        assert!(a == b, "{args:?}: {name} was changed");
    }
    o
}

/// The words of a command line written as one string (no quoting: for arguments
/// without spaces), e.g. `words("simulate-frames --frames 2 --output g.npy")`.
pub fn words(line: &'static str) -> Vec<&'static str> {
    line.split_whitespace().collect()
}

/// `base` with the options of `extra` set: `--flag value` replaces the value of a
/// `--flag` already in `base` (options are given once) or is appended; any other token
/// (`--switch`, `--flag=value`) is appended. For tables of cases that differ in a few
/// arguments.
pub fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = base.to_vec();
    let mut i = 0;
    while i < extra.len() {
        let t = extra[i];
        let value = extra.get(i + 1).filter(|n| !n.starts_with("--"));
        match value {
            Some(&val) if t.starts_with("--") && !t.contains('=') => {
                match v.iter().position(|a| *a == t) {
                    Some(at) if at + 1 < v.len() => v[at + 1] = val,
                    _ => v.extend([t, val]),
                }
                i += 2;
            }
            _ => {
                v.push(t);
                i += 1;
            }
        }
    }
    v
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
    one_error_line(o, code, needles);
    let mut want: Vec<String> = left.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listing(dir), want, "files left in {}", dir.display());
}

/// Exit status `code`, and stderr exactly one `error:` line (short, holding every
/// needle) with no panic or debug text.
pub fn one_error_line(o: &Output, code: i32, needles: &[&str]) {
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
}
