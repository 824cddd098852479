//! `kestrel bench`: throughput of every path, as JSON lines (one per measurement) and a
//! short table at the end. Each family of algorithms has its own file.

pub mod cpu;
pub mod cuda;
pub mod hmm;
pub mod likelihood;
pub mod nonlinear;
pub mod parallel;
pub mod particle;
pub mod retrodict;
pub mod seeds;
pub mod tbd;
pub mod tracking;
pub mod tracking_assign;

use std::time::Instant;

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Record {
    /// What was timed, e.g. `filter`, `smooth`, `parallel-filter/blelloch`.
    pub name: String,
    /// `cpu` or `cuda:0 (NVIDIA H100 ...)`.
    pub device: String,
    pub precision: &'static str,
    /// Tracks (sequences).
    pub tracks: usize,
    pub steps: usize,
    pub nx: usize,
    pub ny: usize,
    /// Median seconds per run after warm-up.
    pub median_s: f64,
    pub repeats: usize,
    /// `tracks * steps / median_s`.
    pub target_steps_per_s: f64,
    /// Anything else worth keeping (bandwidth, roofline fraction, errors...).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
}

impl Record {
    pub fn new(
        name: impl Into<String>,
        device: impl Into<String>,
        precision: &'static str,
        tracks: usize,
        steps: usize,
        nx: usize,
        ny: usize,
        times: &[f64],
    ) -> Record {
        let median_s = median(times);
        Record {
            name: name.into(),
            device: device.into(),
            precision,
            tracks,
            steps,
            nx,
            ny,
            median_s,
            repeats: times.len(),
            target_steps_per_s: (tracks * steps) as f64 / median_s,
            extra: serde_json::Value::Null,
        }
    }
}

/// Device 0's memory bandwidth for the rooflines, bytes/s, measured once a run: a copy of
/// 1 GiB from one buffer to another on the device (median of five after a warm-up),
/// counting the bytes read and written, as the anchors' 2.9 TB/s of the H100
/// (ANCHORS.md) was measured (about 4.0 TB/s on an H200). NaN where it cannot be
/// measured, so that no roofline is made up.
pub fn device_bandwidth() -> f64 {
    static BANDWIDTH: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *BANDWIDTH.get_or_init(|| match kestrel::cuda::copy_rates(0, 0, 1 << 30, 5) {
        Ok((gbps, _)) => {
            let b = 2.0 * gbps * 1e9;
            errln!(
                "bench: device bandwidth {:.2} TB/s (a 1 GiB device copy, bytes read and written)",
                b / 1e12
            );
            b
        }
        Err(e) => {
            errln!("bench: the device bandwidth could not be measured ({e}); rooflines are NaN");
            f64::NAN
        }
    })
}

/// Median of a non-empty list of timings.
pub fn median(times: &[f64]) -> f64 {
    let mut t = times.to_vec();
    t.sort_by(|a, b| a.total_cmp(b));
    let n = t.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        t[n / 2]
    } else {
        0.5 * (t[n / 2 - 1] + t[n / 2])
    }
}

/// Times `f` with the wall clock: `warmup` untimed runs, then `repeats` timed ones.
pub fn time_runs<F: FnMut()>(warmup: usize, repeats: usize, mut f: F) -> Vec<f64> {
    for _ in 0..warmup {
        f();
    }
    (0..repeats)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// Where records go: printed as JSON lines as they come, kept for the final table.
#[derive(Default)]
pub struct Sink {
    pub records: Vec<Record>,
}

impl Sink {
    pub fn push(&mut self, r: Record) {
        outln!(
            "{}",
            serde_json::to_string(&r).expect("a record always serialises")
        );
        self.records.push(r);
    }

    /// The closing table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<34} {:<26} {:<4} {:>9} {:>8} {:>6} {:>12} {:>14}\n",
            "name", "device", "prec", "tracks", "steps", "nx/ny", "median", "target-steps/s"
        );
        for r in &self.records {
            let dev: String = r.device.chars().take(26).collect();
            s += &format!(
                "{:<34} {:<26} {:<4} {:>9} {:>8} {:>6} {:>12} {:>14.3e}\n",
                r.name,
                dev,
                r.precision,
                r.tracks,
                r.steps,
                format!("{}/{}", r.nx, r.ny),
                fmt_time(r.median_s),
                r.target_steps_per_s
            );
        }
        s
    }
}

/// Seconds with a readable unit.
pub fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}
