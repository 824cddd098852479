//! `kestrel hmm`: filtered and smoothed state distributions, per-step log-likelihoods
//! and the Viterbi path of a hidden Markov model, sequential or parallel in time.

use super::{bad, choose_device, rate, Precision, Progress};
use kestrel::hmm::{self, HiddenMarkovModel, HmmMethod, HmmOptions, HmmOutput};
use kestrel::io::{self, Format, NpzMember};
use kestrel::{Measurements, Real, ScanAlgorithm};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum MethodArg {
    /// Forward-backward and Viterbi, each track's steps in order.
    #[default]
    Sequential,
    /// Associative scans over time (Sarkka & Garcia-Fernandez, Definitions 1-2; the
    /// max-product scan for the path).
    Parallel,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (TOML): [hmm] transition (K x K, row = from), initial (K), and
    /// [hmm.emission] kind = "categorical" (probs K x M) or "gaussian" (means K x ny,
    /// covs K x ny x ny).
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Observations `.npy` [B, T, ny] (categorical: [B, T, 1] integer codes 0..M-1,
    /// stored as integers or floats); NaN = missing.
    #[arg(long, value_name = "OBS.npy")]
    input: PathBuf,
    /// `.npz` with filtered [B, T, K], smoothed [B, T, K], loglik [B, T], path [B, T].
    #[arg(long, value_name = "OUT.npz")]
    output: PathBuf,
    /// sequential or parallel (in time).
    #[arg(long, value_enum, default_value_t)]
    method: MethodArg,
    /// Scan algorithm of the parallel method: sequential, hillis-steele, blelloch,
    /// ladner-fischer, sengupta[:N], fastest (a GPU runs its chunked scan, fastest).
    #[arg(long, value_name = "ALG", default_value = "fastest")]
    scan: ScanAlgorithm,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Default: f64 on the CPU, f32 on a GPU.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let outputs = io::Outputs::plan(&[&a.model, &a.input], &[&a.output])?;
    Format::of(&a.input, &[Format::Npy])?;
    Format::of(&a.output, &[Format::Npz])?;
    let model = hmm::load_hmm(&a.model)?;
    let device = choose_device(&a.device)?;
    let method = match a.method {
        MethodArg::Sequential => HmmMethod::Sequential,
        MethodArg::Parallel => HmmMethod::Parallel,
    };
    let opts = HmmOptions::default().with_method(method).with_scan(a.scan);
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let obs = read_observations(&a.input, &model)?;
    let precision = a.precision.unwrap_or(Precision::default_for(device));
    progress.phase("computing");
    let t1 = Instant::now();
    let summary = match precision {
        Precision::F64 => run_typed::<f64>(&a, &model, obs, device, &opts)?,
        Precision::F32 => run_typed::<f32>(&a, &model, obs.cast(), device, &opts)?,
    };
    outputs.commit()?;
    progress.finish();
    let (b, t, total) = summary;
    let secs = t1.elapsed().as_secs_f64();
    outln!("total_loglik,{total:.10e}");
    errln!(
        "hmm ({}{}): {} x {} on {device}, {}; {} ; total {:.3} s -> {}",
        method.name(),
        if method == HmmMethod::Parallel {
            format!(", scan {}", a.scan.name())
        } else {
            String::new()
        },
        super::plural(b, "track"),
        super::plural(t, "step"),
        super::value_name(&precision),
        rate(b * t, secs),
        t0.elapsed().as_secs_f64(),
        a.output.display()
    );
    Ok(())
}

/// The observations in f64, checked against the model (codes, components).
fn read_observations(
    path: &std::path::Path,
    model: &HiddenMarkovModel,
) -> anyhow::Result<Measurements<f64>> {
    let (shape, data) = io::read_npy_any(path)?;
    if shape.len() != 3 {
        return Err(bad(format!(
            "{}: expected a 3-D array [tracks, steps, ny], found shape {shape:?}",
            path.display()
        )));
    }
    let (b, t, ny) = (shape[0], shape[1], shape[2]);
    if ny != model.ny() {
        return Err(bad(format!(
            "{}: observations have {ny} components per step (shape {shape:?}), the model's {} emission takes {}",
            path.display(),
            model.emission().kind(),
            model.ny()
        )));
    }
    if b == 0 || t == 0 {
        return Err(bad(format!(
            "{}: no observations ({})",
            path.display(),
            kestrel::data::shape(b, t)
        )));
    }
    let obs = Measurements::new(b, t, ny, data)?;
    hmm::check_observations(model, &obs).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    Ok(obs)
}

fn run_typed<T: Real>(
    a: &Args,
    model: &HiddenMarkovModel,
    obs: Measurements<T>,
    device: kestrel::Device,
    opts: &HmmOptions,
) -> anyhow::Result<(usize, usize, f64)> {
    let o: HmmOutput<T> = hmm::hmm_on(device, model, &obs, opts)?;
    let (b, t, k) = (o.tracks, o.steps, o.states);
    let (fb, descr) = io::real_bytes(&o.filtered);
    let (sb, _) = io::real_bytes(&o.smoothed);
    let (lb, _) = io::real_bytes(&o.loglik);
    io::write_npz(
        &a.output,
        &[
            NpzMember {
                name: "filtered",
                descr,
                shape: vec![b, t, k],
                data: fb,
            },
            NpzMember {
                name: "smoothed",
                descr,
                shape: vec![b, t, k],
                data: sb,
            },
            NpzMember {
                name: "loglik",
                descr,
                shape: vec![b, t],
                data: lb,
            },
            NpzMember {
                name: "path",
                descr: "<i8",
                shape: vec![b, t],
                data: io::i64_bytes(&o.path),
            },
        ],
    )?;
    let total = (0..b).map(|tr| o.total_loglik(tr)).sum();
    Ok((b, t, total))
}
