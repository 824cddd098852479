//! `kestrel retrodict`: smoothed estimates from stored filter estimates (the NPZ that
//! `kestrel filter` writes), without the measurements: Tager 2013, ch. 3. `--method rts`
//! is the Rauch-Tung-Striebel recursion, `--method parallel` the reverse associative scan
//! of the pairs `(C_k, b_k)`; `--means-only` writes the smoothed means alone, and on a GPU
//! then forms no covariance at all (`parallel/kernels/parallel_means.cu`). The result
//! equals `kestrel smooth` on the measurements the filter read.

use super::{bad, choose_device, rate, Progress};
use kestrel::io::{self, Format, NpzArray, ESTIMATE_FORMATS};
use kestrel::model::LinearModel;
use kestrel::parallel::Moments;
use kestrel::{Device, Estimates, Real, ScanAlgorithm};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MethodArg {
    /// The Rauch-Tung-Striebel recursion, each track's steps in order.
    #[default]
    Rts,
    /// The reverse associative scan of the retrodiction pairs (with --scan).
    Parallel,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (TOML, any form `kestrel filter` reads): the model the filter ran.
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Filtered estimates as `kestrel filter` writes them: `.npz` with `mean` [B, T, nx]
    /// and `cov` [B, T, nx, nx] (f64 or f32; `loglik` is ignored).
    #[arg(long, value_name = "FILTERED.npz")]
    input: PathBuf,
    /// Smoothed estimates: `.npz` (`mean`, `cov`) or `.csv`, in the input's precision.
    #[arg(long, value_name = "OUT.npz")]
    output: PathBuf,
    /// Write the smoothed means only (no covariance is computed on a GPU).
    #[arg(long)]
    means_only: bool,
    /// rts: the RTS recursion; parallel: the associative scan over time.
    #[arg(long, value_enum, default_value_t)]
    method: MethodArg,
    /// Scan algorithm of `--method parallel`: sequential, hillis-steele, blelloch,
    /// ladner-fischer, sengupta[:N], fastest.
    #[arg(long, value_name = "ALG", default_value = "fastest")]
    scan: ScanAlgorithm,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match Format::of(&a.input, &[Format::Npz]) {
        Ok(_) => {}
        Err(_) => {
            return Err(bad(format!(
                "--input {}: expected the .npz of `kestrel filter` (mean, cov)",
                a.input.display()
            )))
        }
    }
    Format::of(&a.output, ESTIMATE_FORMATS)?;
    let outputs = io::Outputs::plan(&[&a.model, &a.input], &[&a.output])?;
    let model = super::load_any_linear_model(&a.model)?;
    let device = choose_device(&a.device)?;
    let t0 = Instant::now();
    let progress = Progress::new("reading");
    let mean = read(&a.input, "mean")?;
    let cov = read(&a.input, "cov")?;
    if mean.dtype() != cov.dtype() {
        return Err(bad(format!(
            "{}: mean is {} and cov is {}: expected one precision",
            a.input.display(),
            mean.dtype(),
            cov.dtype()
        )));
    }
    let (b, t) = shapes(&a.input, &model, mean.shape(), cov.shape())?;
    super::check_model_steps(&a.model, &model, &format!("{} has", a.input.display()), t)?;
    let t_read = t0.elapsed().as_secs_f64();
    progress.phase("retrodicting");
    let nx = model.nx();
    match (mean, cov) {
        (NpzArray::F64(_, m), NpzArray::F64(_, c)) => {
            let f = Estimates::new(b, t, nx, m, c, None)?;
            finish(&a, device, &model, f, t0, t_read, progress, outputs)
        }
        (NpzArray::F32(_, m), NpzArray::F32(_, c)) => {
            let f = Estimates::new(b, t, nx, m, c, None)?;
            finish(&a, device, &model, f, t0, t_read, progress, outputs)
        }
        _ => unreachable!("the dtypes are checked equal above"),
    }
}

fn read(path: &Path, name: &str) -> anyhow::Result<NpzArray> {
    io::read_npz_array_any(path, name)?.ok_or_else(|| {
        bad(format!(
            "{}: no array `{name}` (the retrodiction reads the filter's mean [B, T, nx] and cov [B, T, nx, nx], as `kestrel filter` writes them)",
            path.display()
        ))
    })
}

/// `(B, T)` from the shapes of `mean` and `cov`, checked against each other and the model.
fn shapes(
    path: &Path,
    model: &LinearModel,
    ms: &[usize],
    cs: &[usize],
) -> anyhow::Result<(usize, usize)> {
    let nx = model.nx();
    if ms.len() != 3 {
        return Err(bad(format!(
            "{}: mean has shape {ms:?}, expected [B, T, nx] with nx = {nx}",
            path.display()
        )));
    }
    if ms[2] != nx {
        return Err(bad(format!(
            "{}: mean has shape {ms:?}: states of {} components, the model's state has {nx}",
            path.display(),
            ms[2]
        )));
    }
    let want = [ms[0], ms[1], nx, nx];
    if cs == &want[..3] {
        return Err(bad(format!(
            "{}: cov has shape {cs:?} (variances only): the retrodiction needs the full covariances {want:?} (filter with --outputs all or mean,cov)",
            path.display()
        )));
    }
    if cs != want {
        return Err(bad(format!(
            "{}: cov has shape {cs:?}, expected {want:?} (mean has shape {ms:?})",
            path.display()
        )));
    }
    if ms[0] == 0 || ms[1] == 0 {
        return Err(bad(format!(
            "{}: no estimates ({})",
            path.display(),
            kestrel::data::shape(ms[0], ms[1])
        )));
    }
    Ok((ms[0], ms[1]))
}

#[allow(clippy::too_many_arguments)]
fn finish<T: Real>(
    a: &Args,
    device: Device,
    model: &LinearModel,
    f: Estimates<T>,
    t0: Instant,
    t_read: f64,
    progress: Progress,
    outputs: io::Outputs,
) -> anyhow::Result<()> {
    let alg = match a.method {
        MethodArg::Rts => ScanAlgorithm::Sequential,
        MethodArg::Parallel => a.scan,
    };
    let moments = if a.means_only {
        Moments::MeansOnly
    } else {
        Moments::MeansAndCovariances
    };
    let t1 = Instant::now();
    let s = kestrel::parallel::retrodict(device, model, &f, alg, moments)?;
    let t_compute = t1.elapsed().as_secs_f64();
    drop(f);
    progress.tracks("writing", s.tracks());
    let t2 = Instant::now();
    io::write_estimates_with_progress(&a.output, &s, &|n| progress.inc(n))?;
    outputs.commit()?;
    let t_write = t2.elapsed().as_secs_f64();
    progress.finish();
    let method = match a.method {
        MethodArg::Rts => "rts".to_string(),
        MethodArg::Parallel => format!("parallel, scan {}", a.scan.name()),
    };
    errln!(
        "retrodict ({method}{}): {} x {} on {device}, {}; compute {t_compute:.3} s ({}); total {:.3} s (read {t_read:.3} s, write {t_write:.3} s) -> {}",
        if a.means_only { ", means only" } else { "" },
        super::plural(s.tracks(), "track"),
        super::plural(s.steps(), "step"),
        T::NAME,
        rate(s.tracks() * s.steps(), t_compute),
        t0.elapsed().as_secs_f64(),
        a.output.display()
    );
    Ok(())
}
