//! `kestrel bench --seed NAME`: each seed paper's headline experiment rebuilt on the
//! paper's own axes, kestrel's figures beside the paper's numbers (where its text has
//! them), as JSON lines, a table of the pairs and a plot (`--plot DIR`: `seed-NAME.svg`).
//! `docs/seeds.md` holds the records of the H200 machine and the commands.
//!
//! - `tager`: thesis Table 2.4 (Kalman filter, CPU vs GPU, data size 64 .. 262,144) and
//!   Table 3.2 (retrodiction of the means, 64 .. 524,288).
//! - `sarkka`: Figures 10-15 (the paper's random time-varying model, nx 4 / ny 2, f32):
//!   every scan x {filter, RTS, two-filter} vs T, the speed-up of the parallel filter
//!   over the sequential filter in one GPU thread, the two-filter smoother split over two
//!   GPUs where two are present.
//! - `mazurek`: Figures 3-4, time per frame vs decimation 1 .. 20 for the kernel variants
//!   (1024 x 1024 f32 frames, 13 motion vectors), the best block shape of each.
//! - `lin`: Figures 4-6 at T = 32 .. 4096: the windowed filter (n = 10; 11 for AR(10)) on
//!   the GPU against the sequential filter on the CPU, random walks in 2 and 10 dimensions,
//!   AR(10) fully observed and with a measurement missing every 20 steps (the "7x"), and
//!   the error-vs-window curves of the seismic model (`examples/seismic.toml`), AR(10) and
//!   the 2-D random walk.
//! - `hendeby`: Figures 5-6, the bootstrap filter (constant velocity, two range sensors)
//!   CPU vs GPU vs N at T = 1000, and the GPU time's shares by phase vs N.

mod hendeby;
mod lin;
mod mazurek;
pub mod plot;
mod sarkka;
mod tager;

use super::{median, time_runs, Record, Sink};
use plot::{Chart, Series};
use std::path::Path;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    Tager,
    Sarkka,
    Mazurek,
    Lin,
    Hendeby,
    All,
}

impl Seed {
    fn name(self) -> &'static str {
        match self {
            Seed::Tager => "tager",
            Seed::Sarkka => "sarkka",
            Seed::Mazurek => "mazurek",
            Seed::Lin => "lin",
            Seed::Hendeby => "hendeby",
            Seed::All => "all",
        }
    }
}

type Runner = fn(&mut Sink, bool) -> anyhow::Result<Vec<Chart>>;

/// Runs one seed (or all), pushing records to `sink`; writes `seed-NAME.svg` into
/// `plot` when given. Returns the names of seeds that failed.
pub fn run(sink: &mut Sink, seed: Seed, quick: bool, plot: Option<&Path>) -> Vec<&'static str> {
    let all: [(Seed, Runner); 5] = [
        (Seed::Tager, tager::run),
        (Seed::Sarkka, sarkka::run),
        (Seed::Mazurek, mazurek::run),
        (Seed::Lin, lin::run),
        (Seed::Hendeby, hendeby::run),
    ];
    let mut failed = Vec::new();
    for (s, runner) in all {
        if seed != Seed::All && seed != s {
            continue;
        }
        let charts = match runner(sink, quick) {
            Ok(c) => c,
            Err(e) => {
                errln!("bench seed {}: error: {e:#}", s.name());
                failed.push(s.name());
                continue;
            }
        };
        if let Some(dir) = plot {
            if !charts.is_empty() {
                if let Err(e) = plot::write(&dir.join(format!("seed-{}.svg", s.name())), &charts) {
                    errln!("bench seed {}: error: {e:#}", s.name());
                    failed.push(s.name());
                }
            }
        }
    }
    failed
}

fn gpu_name() -> Option<String> {
    kestrel::cuda::available(0).ok().map(|_| {
        format!(
            "cuda:0 ({})",
            kestrel::cuda::device_name(0).unwrap_or_default()
        )
    })
}

fn cpu_name() -> String {
    format!("cpu ({} threads)", rayon::current_num_threads())
}

/// Warm-up and timed runs for a run of about `secs` seconds: fewer for long runs.
fn reps(secs_guess: f64) -> (usize, usize) {
    if secs_guess > 2.0 {
        (0, 1)
    } else if secs_guess > 0.3 {
        (1, 3)
    } else {
        (2, 10)
    }
}

/// Times `f` (its result checked), with `reps` from one trial run's time.
fn timed<R>(mut f: impl FnMut() -> kestrel::Result<R>) -> anyhow::Result<(Vec<f64>, R)> {
    let t0 = std::time::Instant::now();
    let mut out = f()?;
    let (w, n) = reps(t0.elapsed().as_secs_f64());
    let mut err = None;
    let times = time_runs(w.saturating_sub(1), n, || match f() {
        Ok(o) => out = o,
        Err(e) => err = Some(e),
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    Ok((times, out))
}

#[allow(clippy::too_many_arguments)]
fn rec(
    name: String,
    dev: &str,
    prec: &'static str,
    tracks: usize,
    steps: usize,
    nx: usize,
    ny: usize,
    times: &[f64],
    extra: serde_json::Value,
) -> Record {
    let mut r = Record::new(name, dev, prec, tracks, steps, nx, ny, times);
    r.extra = extra;
    r
}

/// A table of columns, printed after a seed's JSON lines.
fn table(title: &str, head: &[&str], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:>width$}", width = w[i]))
            .collect::<Vec<_>>()
            .join("  ")
    };
    outln!("\n{title}");
    outln!("{}", line(head.iter().map(|s| s.to_string()).collect()));
    for r in rows {
        outln!("{}", line(r.clone()));
    }
}

fn g4(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1e4 || (x != 0.0 && x.abs() < 1e-3) {
        format!("{x:.3e}")
    } else {
        format!("{x:.4}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), g4)
}
