//! Benchmarks of the CPU paths: the Kalman filter (fast path and the general reference
//! path), the smoother (filter + RTS), the readers and writers, and the command-line
//! path read NPY -> filter -> write NPZ end to end, and the per-step API
//! (`kalman::BatchState`) on 10^5 targets in f64 and f32. 2-D constant velocity (nx 4,
//! ny 2), f64 unless named, every output kept.

use super::{median, time_runs, Record, Sink};
use crate::cmd::estimate::{estimate, Job};
use kestrel::io;
use kestrel::kalman::{self, FilterOptions};
use kestrel::{Device, FilterMethod, Measurements};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

const STEPS: usize = 100;

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let p = std::env::temp_dir().join(format!("kestrel-bench-{}", std::process::id()));
        std::fs::create_dir_all(&p)?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs this family's benchmarks; `quick` keeps sizes small.
pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let model = kestrel::model::constant_velocity(2, 1.0, 0.5, 25.0, 100.0)?;
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[10_000, 100_000]
    };
    let dev = Device::Cpu.to_string();
    let scratch = Scratch::new()?;
    for &b in sizes {
        let z: Measurements<f64> = kestrel::sim::simulate(&model, b, STEPS, 7, 0.05)?.measurements;
        let big = b * STEPS >= 5_000_000;
        let (warm, reps) = if big { (1, 5) } else { (2, 10) };
        let rec = |name: &str, times: &[f64]| {
            Record::new(name, dev.clone(), "f64", b, STEPS, 4, 2, times)
        };

        let fast = FilterOptions::default();
        kalman::filter(&model, &z, &fast)?;
        sink.push(rec(
            "filter",
            &time_runs(warm, reps, || {
                let _ = black_box(kalman::filter(&model, &z, &fast));
            }),
        ));

        // The same filter into buffers reused from run to run (kalman::filter_into): the
        // steady state of a program filtering batch after batch, without first-touch
        // page faults.
        let mut out = kalman::filter(&model, &z, &fast)?.filtered;
        sink.push(rec(
            "filter_into (reused outputs)",
            &time_runs(warm, reps, || {
                let _ = black_box(kalman::filter_into(&model, &z, &fast, &mut out));
            }),
        ));
        let filtered = out.clone();
        // The RTS pass alone, over restored filtered estimates (the restore is not timed).
        let mut rts_times = Vec::with_capacity(reps);
        for i in 0..warm + reps {
            out.mean_mut().copy_from_slice(filtered.mean());
            out.cov_mut().copy_from_slice(filtered.cov());
            let t = Instant::now();
            kalman::smooth_in_place(&model, &mut out)?;
            if i >= warm {
                rts_times.push(t.elapsed().as_secs_f64());
            }
        }
        sink.push(rec("rts smooth_in_place (reused outputs)", &rts_times));

        let general = FilterOptions::default().with_force_general(true);
        kalman::filter(&model, &z, &general)?;
        sink.push(rec(
            "filter/general",
            &time_runs(warm.min(1), reps.min(5), || {
                let _ = black_box(kalman::filter(&model, &z, &general));
            }),
        ));

        kalman::smooth(&model, &z)?;
        sink.push(rec(
            "smooth (filter+rts)",
            &time_runs(warm, reps, || {
                let _ = black_box(kalman::smooth(&model, &z));
            }),
        ));

        // Readers, and the command-line path read NPY -> filter -> write NPZ.
        let npy = scratch.0.join("z.npy");
        let csv = scratch.0.join("z.csv");
        let npz = scratch.0.join("out.npz");
        io::write_measurements(&npy, &z)?;
        io::write_measurements(&csv, &z)?;
        sink.push(rec(
            "io: read csv measurements",
            &time_runs(1, reps.min(5), || {
                let _ = black_box(io::read_measurements::<f64>(&csv));
            }),
        ));
        sink.push(rec(
            "io: read npy measurements",
            &time_runs(1, reps.min(5), || {
                let _ = black_box(io::read_measurements::<f64>(&npy));
            }),
        ));
        let (mut read, mut filt, mut write) = (Vec::new(), Vec::new(), Vec::new());
        let mut stage = || -> anyhow::Result<()> {
            let t0 = Instant::now();
            let zr: Measurements<f64> = io::read_measurements(&npy)?;
            let t1 = Instant::now();
            let (est, _) = estimate(
                Device::Cpu,
                &model,
                &zr,
                Job::Filter(FilterMethod::Sequential),
                kestrel::data::Outputs::ALL,
            )?;
            let t2 = Instant::now();
            io::write_estimates(&npz, &est)?;
            let t3 = Instant::now();
            read.push((t1 - t0).as_secs_f64());
            filt.push((t2 - t1).as_secs_f64());
            write.push((t3 - t2).as_secs_f64());
            Ok(())
        };
        stage()?;
        let mut totals = Vec::new();
        for _ in 0..reps.min(5) {
            let t = Instant::now();
            stage()?;
            totals.push(t.elapsed().as_secs_f64());
        }
        let mut r = rec("cli: npy -> filter -> npz", &totals);
        r.extra = serde_json::json!({
            "read_s": median(&read[1..]),
            "filter_s": median(&filt[1..]),
            "write_s": median(&write[1..]),
            "npz_bytes": std::fs::metadata(&npz).map(|m| m.len()).unwrap_or(0),
        });
        sink.push(r);
        if !big {
            let est = kalman::filter(&model, &z, &fast)?.filtered;
            let out = scratch.0.join("out.csv");
            sink.push(rec(
                "io: write csv estimates",
                &time_runs(1, 3, || {
                    let _ = black_box(io::write_estimates(&out, &est));
                }),
            ));
        }
        let _ = std::fs::remove_file(&csv);
    }
    drop(scratch);
    per_step::<f64>(sink, &model, quick)?;
    per_step::<f32>(sink, &model, quick)?;
    Ok(())
}

/// Targets of the per-step benchmark (the streaming size).
const PER_STEP_TARGETS: usize = 100_000;

/// The per-step API (`kalman::BatchState`) on 10^5 targets: one `predict` and one
/// `update` call per step for all targets, the measurement rows gathered per step
/// beforehand (as a tracker would after association). Target-steps/s counts one
/// predict + update of one target.
fn per_step<T: kestrel::Real>(
    sink: &mut Sink,
    model: &kestrel::Model,
    quick: bool,
) -> anyhow::Result<()> {
    let b = PER_STEP_TARGETS;
    let steps = if quick { 20 } else { STEPS };
    let z: Measurements<f64> = kestrel::sim::simulate(model, b, steps, 11, 0.05)?.measurements;
    let rows: Vec<Vec<T>> = (0..steps)
        .map(|k| {
            (0..b)
                .flat_map(|t| z.at(t, k).iter().map(|&v| T::of(v)))
                .collect()
        })
        .collect();
    drop(z);
    let mut st = kalman::BatchState::<T>::new(model, b)?;
    for _ in 0..b {
        st.add()?;
    }
    let (warm, reps) = if quick { (1, 5) } else { (2, 10) };
    let cpu0 = cpu_seconds();
    let times = time_runs(warm, reps, || {
        for (k, row) in rows.iter().enumerate() {
            if k > 0 {
                let _ = st.predict();
            }
            let _ = black_box(st.update(row, None, None));
        }
    });
    let mut r = Record::new(
        "per-step predict + update (BatchState)",
        Device::Cpu.to_string(),
        T::NAME,
        b,
        steps,
        4,
        2,
        &times,
    );
    // CPU time (user + sys, all threads) per run: on a machine shared with other work
    // the wall-clock rate understates what the cores deliver.
    if let (Some(c0), Some(c1)) = (cpu0, cpu_seconds()) {
        let per_run = (c1 - c0) / (warm + reps) as f64;
        r.extra = serde_json::json!({
            "cpu_s_per_run": per_run,
            "target_steps_per_cpu_s": (b * steps) as f64 / per_run,
            "threads": rayon::current_num_threads(),
        });
    }
    sink.push(r);
    Ok(())
}

/// User + system CPU time of this process so far, in seconds (Linux: `/proc/self/stat`,
/// clock ticks of 1/100 s; `None` elsewhere).
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in parentheses: utime and
    // stime are fields 14 and 15 of the line, 12 and 13 after the ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
