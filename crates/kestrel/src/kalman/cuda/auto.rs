//! `--device auto` for the batched Kalman filter and smoother: the GPU only where it
//! pays. Small jobs finish on the CPU before a GPU would have opened its context and
//! compiled its kernels (a 10^4 x 50 job: about 0.01 s on 2 cores, 0.09 s on an H100
//! with its kernels cached and 0.7 s without), so the choice compares a model of both:
//!
//! - CPU: `target-steps / (rate x threads)`, the rate per thread of the filter (or of
//!   filter and smoother) in the job's precision;
//! - GPU: opening the device (0.15 s, unless this process has it open) + compiling each
//!   kernel module that is not in the disk cache (0.6 s) or loading it (0.01 s) + moving
//!   the job's bytes between host and device at the host-to-host rate (pages, pinning
//!   and copies) + the kernel at 2e10 target-steps/s.
//!
//! The rates start from figures measured on a 2-core VM and an H100 host (CPU 1.2e7
//! target-steps/s a thread for the filter, half that with the smoother; 8 GB/s host to
//! host) and then follow the machine: every filter or smoother run of at least 10^6
//! target-steps with all steps kept records its own rate ([`record_cpu`],
//! [`record_gpu`]), kept in memory and in `kalman-rates-<host>.txt` beside the kernel
//! cache (see `kestrel::cuda::set_cache_dir`), so that the next choice on this machine
//! uses what this machine did. Delete the file to start again from the defaults.

use super::source::{Part, MAX_NX, MAX_NY};
use crate::data::{CovOutput, Outputs};
use crate::device::Device;
use crate::linalg::Real;
use crate::model::Model;

/// A device chosen by [`choose`], with the estimated times that decided it.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The device to run on.
    pub device: Device,
    /// Estimated seconds on the CPU.
    pub cpu_secs: f64,
    /// Estimated seconds on GPU 0 (infinite when there is none), set-up included.
    pub gpu_secs: f64,
    /// Estimated set-up part of `gpu_secs` (opening the device, compiling or loading).
    pub gpu_setup_secs: f64,
    /// Why, in words.
    pub reason: String,
}

/// The rates the choice is made with (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// CPU target-steps per second and thread, filter, `[f32, f64]`.
    pub cpu_filter: [f64; 2],
    /// CPU target-steps per second and thread, filter and RTS smoother, `[f32, f64]`.
    pub cpu_smooth: [f64; 2],
    /// GPU host-to-host bytes per second (inputs in, outputs out).
    pub gpu_bytes: f64,
    /// GPU kernel target-steps per second.
    pub gpu_kernel: f64,
    /// Which of the above this machine measured, in the order of [`Rates::KEYS`].
    pub measured: [bool; 6],
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            cpu_filter: [1.2e7, 1.2e7],
            cpu_smooth: [6e6, 6e6],
            gpu_bytes: 8e9,
            gpu_kernel: 2e10,
            measured: [false; 6],
        }
    }
}

/// Runs shorter than this are not timed into the rates (too noisy).
const RECORD_MIN_STEPS: u64 = 1_000_000;

static RATES: std::sync::Mutex<Option<Rates>> = std::sync::Mutex::new(None);

impl Rates {
    /// The names of the rates in the file.
    pub const KEYS: [&'static str; 6] = [
        "cpu_filter_f32",
        "cpu_filter_f64",
        "cpu_smooth_f32",
        "cpu_smooth_f64",
        "gpu_host_to_host_bytes",
        "gpu_kernel",
    ];

    fn slot(&mut self, i: usize) -> &mut f64 {
        match i {
            0 => &mut self.cpu_filter[0],
            1 => &mut self.cpu_filter[1],
            2 => &mut self.cpu_smooth[0],
            3 => &mut self.cpu_smooth[1],
            4 => &mut self.gpu_bytes,
            _ => &mut self.gpu_kernel,
        }
    }

    /// The rates of this machine: those recorded in this process or in the rates file,
    /// the defaults for the rest.
    pub fn current() -> Rates {
        *loaded(&mut RATES.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The rates in `path` over the defaults (a missing or unreadable file, or a line
    /// that is not `name = positive number`, leaves the defaults).
    pub fn load(path: &std::path::Path) -> Rates {
        let mut r = Rates::default();
        let Ok(text) = std::fs::read_to_string(path) else {
            return r;
        };
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim().parse::<f64>());
            if let (Some(i), Ok(v)) = (Self::KEYS.iter().position(|n| *n == k), v) {
                if v.is_finite() && v > 0.0 {
                    *r.slot(i) = v;
                    r.measured[i] = true;
                }
            }
        }
        r
    }

    /// Writes the measured rates to `path` (replacing it whole).
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut text = String::from(
            "# kestrel: rates measured on this machine by the Kalman filter's runs, for\n\
             # --device auto (target-steps per second and thread; bytes per second).\n\
             # Delete this file to start again from the defaults.\n",
        );
        let mut r = *self;
        for (i, k) in Self::KEYS.iter().enumerate() {
            if r.measured[i] {
                text += &format!("{k} = {:e}\n", *r.slot(i));
            }
        }
        crate::cuda::nvrtc::write_cache(path, text.as_bytes())
    }

    /// Folds a measurement into rate `i`: the first replaces the default, later ones
    /// move it half way (geometrically), so one slow run does not swing the choice.
    fn fold(&mut self, i: usize, v: f64) {
        if !(v.is_finite() && v > 0.0) {
            return;
        }
        let first = !self.measured[i];
        let s = self.slot(i);
        *s = if first { v } else { (*s * v).sqrt() };
        self.measured[i] = true;
    }

    fn any_measured(&self) -> bool {
        self.measured.iter().any(|m| *m)
    }
}

/// The process's rates, read from the rates file on first use.
fn loaded(g: &mut Option<Rates>) -> &mut Rates {
    g.get_or_insert_with(|| file().map(|f| Rates::load(&f)).unwrap_or_default())
}

/// The rates file of this machine, beside the kernel cache (none when it is off).
fn file() -> Option<std::path::PathBuf> {
    // The host's name, read once a process.
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let host = HOST.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_default();
        host.trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    });
    crate::cuda::nvrtc::cache_dir().map(|d| d.join(format!("kalman-rates-{host}.txt")))
}

fn record(i: usize, v: f64) {
    let r = {
        let mut g = RATES.lock().unwrap_or_else(|e| e.into_inner());
        let r = loaded(&mut g);
        r.fold(i, v);
        *r
    };
    if let Some(f) = file() {
        // Failing soft, as the kernel cache does: only the next choice is less informed.
        let _ = r.save(&f);
    }
}

/// Records a CPU run of the batched filter (`smooth`: with the RTS smoother) of
/// `target_steps` in precision `T` on `threads` threads, all steps kept, that took
/// `secs`. Short runs are ignored.
pub fn record_cpu<T: Real>(target_steps: u64, threads: usize, secs: f64, smooth: bool) {
    if target_steps >= RECORD_MIN_STEPS && secs > 0.0 {
        let i = 2 * usize::from(smooth) + usize::from(T::NAME == "f64");
        record(i, target_steps as f64 / (secs * threads.max(1) as f64));
    }
}

/// Records a GPU run of `target_steps` that moved `bytes` between host and device and
/// took `secs` from the host's arrays to the host's arrays, kernel set-up excluded.
pub fn record_gpu(target_steps: u64, bytes: u64, secs: f64) {
    if target_steps >= RECORD_MIN_STEPS && secs > 0.0 {
        let kernel = target_steps as f64 / Rates::current().gpu_kernel;
        record(4, bytes as f64 / (secs - kernel).max(0.5 * secs));
    }
}

/// What is known of GPU 0 before opening it: why it cannot be used, or the estimated
/// set-up (opening, compiling or loading the modules).
pub enum GpuSetup {
    /// The GPU cannot run this job; the reason.
    Unusable(String),
    /// Seconds of set-up.
    Secs(f64),
}

/// Chooses the CPU or GPU 0 for `target_steps` target-steps of `model` in precision `T`
/// (`smooth`: filter and RTS smoother), by the model of the module documentation with
/// this machine's rates, every output kept.
pub fn choose<T: Real>(model: &Model, target_steps: u64, smooth: bool) -> AutoChoice {
    choose_for::<T>(model, target_steps, smooth, Outputs::ALL)
}

/// [`choose`] for a filter that keeps `outputs` (what is not kept is not copied off the
/// GPU; the smoother copies everything whatever is kept).
pub fn choose_for<T: Real>(
    model: &Model,
    target_steps: u64,
    smooth: bool,
    outputs: Outputs,
) -> AutoChoice {
    let threads = rayon::current_num_threads().max(1);
    decide::<T>(
        model,
        target_steps,
        smooth,
        outputs,
        threads,
        &Rates::current(),
        gpu_setup::<T>(model, smooth),
    )
}

/// The set-up GPU 0 would need for `model`'s kernels in precision `T`.
pub fn gpu_setup<T: Real>(model: &Model, smooth: bool) -> GpuSetup {
    if let Err(why) = crate::cuda::available_without_opening(0) {
        return GpuSetup::Unusable(format!("no usable CUDA GPU: {why}"));
    }
    let (nx, ny) = (model.nx(), model.ny());
    if nx > MAX_NX || ny > MAX_NY {
        return GpuSetup::Unusable("the model is larger than the GPU kernels are built for".into());
    }
    if let Err(e) = crate::cuda::compute_capability(0) {
        return GpuSetup::Unusable(e.to_string());
    }
    let parts: &[Part] = if smooth {
        &[Part::Filter, Part::Smooth]
    } else {
        &[Part::Filter]
    };
    let mut setup = if crate::cuda::is_open(0) { 0.0 } else { 0.15 };
    for &part in parts {
        setup += if super::kernels_cached::<T>(0, model, true, part) {
            0.01
        } else {
            0.6
        };
    }
    GpuSetup::Secs(setup)
}

/// Bytes a job moves between host and device: the measurements in, the outputs out
/// (a filter's `outputs`; the smoother's filtered and smoothed moments whole).
pub fn job_bytes<T: Real>(model: &Model, target_steps: u64, smooth: bool, outputs: Outputs) -> f64 {
    let (nx, ny) = (model.nx(), model.ny());
    let out = if smooth {
        nx + nx * nx + 1 + nx + nx * nx
    } else {
        let cov = match outputs.cov {
            CovOutput::Full | CovOutput::Diag => nx * nx,
            CovOutput::None => 0,
        };
        usize::from(outputs.mean) * nx + cov + usize::from(outputs.loglik)
    };
    target_steps as f64 * (ny + out) as f64 * std::mem::size_of::<T>() as f64
}

/// [`choose`] with the threads, rates and GPU set-up given.
pub fn decide<T: Real>(
    model: &Model,
    target_steps: u64,
    smooth: bool,
    outputs: Outputs,
    threads: usize,
    rates: &Rates,
    gpu: GpuSetup,
) -> AutoChoice {
    let p = usize::from(T::NAME == "f64");
    let rate = if smooth {
        rates.cpu_smooth[p]
    } else {
        rates.cpu_filter[p]
    } * threads.max(1) as f64;
    let n = target_steps as f64;
    let cpu_secs = n / rate;
    let source = if rates.any_measured() {
        "rates measured on this machine"
    } else {
        "default rates"
    };
    let setup = match gpu {
        GpuSetup::Unusable(why) => {
            return AutoChoice {
                device: Device::Cpu,
                cpu_secs,
                gpu_secs: f64::INFINITY,
                gpu_setup_secs: f64::INFINITY,
                reason: why,
            }
        }
        GpuSetup::Secs(s) => s,
    };
    let bytes = job_bytes::<T>(model, target_steps, smooth, outputs);
    let gpu_secs = setup + bytes / rates.gpu_bytes + n / rates.gpu_kernel;
    let (device, reason) = if gpu_secs < cpu_secs {
        (
            Device::Cuda(0),
            format!(
                "the GPU is estimated at {gpu_secs:.3} s (set-up {setup:.3} s) against {cpu_secs:.3} s on the CPU; {source}"
            ),
        )
    } else {
        (
            Device::Cpu,
            format!(
                "the CPU is estimated at {cpu_secs:.3} s against {gpu_secs:.3} s on the GPU (set-up {setup:.3} s); {source}"
            ),
        )
    };
    AutoChoice {
        device,
        cpu_secs,
        gpu_secs,
        gpu_setup_secs: setup,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Outputs = Outputs::ALL;

    fn cv() -> Model {
        crate::model::constant_velocity(2, 1.0, 0.5, 1.0, 10.0).expect("a valid model")
    }

    #[test]
    fn small_jobs_stay_on_the_cpu_and_the_reason_is_given() {
        // On any machine: 10^4 x 50 is done on the CPU before a GPU is open.
        let small = choose::<f32>(&cv(), 10_000 * 50, true);
        assert_eq!(small.device, Device::Cpu, "{}", small.reason);
        assert!(!small.reason.is_empty());
        // With the default rates and a GPU whose kernels are cached, likewise; and with
        // 16 threads that a 10^8 filter is CPU work exactly when the CPU's time is the
        // smaller.
        let r = Rates::default();
        let s = decide::<f32>(&cv(), 500_000, true, ALL, 2, &r, GpuSetup::Secs(0.17));
        assert_eq!(s.device, Device::Cpu, "{}", s.reason);
        assert!(
            s.cpu_secs < 0.1 && s.reason.contains("default rates"),
            "{}",
            s.reason
        );
        let big = decide::<f32>(&cv(), 100_000_000, false, ALL, 16, &r, GpuSetup::Secs(0.16));
        assert_eq!(
            big.device == Device::Cpu,
            big.cpu_secs <= big.gpu_secs,
            "{}",
            big.reason
        );
        let none = decide::<f32>(
            &cv(),
            100_000_000,
            false,
            ALL,
            2,
            &r,
            GpuSetup::Unusable("no usable CUDA GPU: none".into()),
        );
        assert_eq!(none.device, Device::Cpu);
        assert!(
            none.reason.contains("no usable CUDA GPU"),
            "{}",
            none.reason
        );
    }

    #[test]
    fn the_measured_rates_decide_and_a_cached_kernel_is_cheap() {
        // A machine whose CPU does 8e6 a thread on 16 threads and whose GPU moves 20 GB/s
        // host to host: 10^8 target-steps take ~0.78 s on the CPU and ~0.63 s on the GPU
        // with its kernels cached.
        let mut r = Rates::default();
        r.fold(0, 8e6);
        r.fold(4, 2e10);
        let cached = decide::<f32>(&cv(), 100_000_000, false, ALL, 16, &r, GpuSetup::Secs(0.16));
        assert_eq!(cached.device, Device::Cuda(0), "{}", cached.reason);
        assert!(
            cached.reason.contains("measured on this machine"),
            "{}",
            cached.reason
        );
        // The same job with both modules to compile stays on the CPU.
        let cold = decide::<f32>(&cv(), 100_000_000, false, ALL, 16, &r, GpuSetup::Secs(1.35));
        assert_eq!(cold.device, Device::Cpu, "{}", cold.reason);
        // A GPU that moves 12 GB/s: all outputs (23 values a step) stay on the CPU,
        // means and log-likelihoods (7 with the measurements) go to the GPU.
        let mut slow = r;
        slow.gpu_bytes = 1.2e10;
        let all = decide::<f32>(
            &cv(),
            100_000_000,
            false,
            ALL,
            16,
            &slow,
            GpuSetup::Secs(0.16),
        );
        assert_eq!(all.device, Device::Cpu, "{}", all.reason);
        let few = Outputs {
            mean: true,
            cov: CovOutput::None,
            loglik: true,
        };
        let part = decide::<f32>(
            &cv(),
            100_000_000,
            false,
            few,
            16,
            &slow,
            GpuSetup::Secs(0.16),
        );
        assert_eq!(part.device, Device::Cuda(0), "{}", part.reason);
        // The smoother copies everything back whatever is kept.
        let sm = decide::<f32>(
            &cv(),
            100_000_000,
            true,
            few,
            16,
            &slow,
            GpuSetup::Secs(0.16),
        );
        assert!(
            sm.gpu_secs > all.gpu_secs,
            "{} vs {}",
            sm.gpu_secs,
            all.gpu_secs
        );
        // A later, slower measurement moves the rate half way (geometrically).
        r.fold(0, 2e6);
        assert!((r.cpu_filter[0] - 4e6).abs() < 1.0, "{}", r.cpu_filter[0]);
        assert!(!r.measured[1], "f64 is not measured by an f32 run");
    }

    #[test]
    fn the_rates_file_keeps_what_was_measured() {
        let dir = std::env::temp_dir().join(format!("kestrel-rates-{}", std::process::id()));
        let f = dir.join("rates.txt");
        let mut r = Rates::default();
        r.fold(3, 3.5e6);
        r.fold(4, 9.5e9);
        r.save(&f).expect("written");
        let back = Rates::load(&f);
        assert_eq!(back, r);
        // Lines that are not a known rate with a positive value leave the defaults.
        std::fs::write(
            &f,
            "cpu_filter_f32 = -1\nnot a line\ngpu_kernel = 5e10\nwhat = 3\n",
        )
        .unwrap();
        let odd = Rates::load(&f);
        assert_eq!(odd.cpu_filter, Rates::default().cpu_filter);
        assert_eq!(odd.gpu_kernel, 5e10);
        assert_eq!(odd.measured, [false, false, false, false, false, true]);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(Rates::load(&f), Rates::default(), "no file: the defaults");
    }
}
