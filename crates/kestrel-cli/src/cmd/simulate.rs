//! `kestrel simulate`: truth and measurements drawn from a model.

use super::{bad, Progress};
use kestrel::io::{self, Format, MEASUREMENT_FORMATS};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (TOML).
    #[arg(long, value_name = "M.toml")]
    model: PathBuf,
    /// Number of independent tracks B.
    #[arg(long, value_name = "B")]
    tracks: usize,
    /// Number of steps T per track.
    #[arg(long, value_name = "T")]
    steps: usize,
    /// Seed of the random number generator (results do not depend on the thread count).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Probability that a measurement is missing (written as NaN).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    missing: f64,
    /// Measurements: `.csv` (track,t,z0,..) or `.npy` ([B, T, ny]).
    #[arg(long, value_name = "Z.csv|Z.npy")]
    output: PathBuf,
    /// Also write the true states: `.csv` (track,t,x0,..) or `.npy` ([B, T, nx]).
    #[arg(long, value_name = "X.csv|X.npy")]
    truth: Option<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    Format::of(&a.output, MEASUREMENT_FORMATS)?;
    if let Some(t) = &a.truth {
        Format::of(t, MEASUREMENT_FORMATS)?;
    }
    if a.tracks == 0 || a.steps == 0 {
        return Err(bad(format!(
            "--tracks and --steps must be at least 1 (got {} and {})",
            a.tracks, a.steps
        )));
    }
    if !(0.0..=1.0).contains(&a.missing) {
        return Err(bad(format!(
            "--missing must be a probability in [0, 1], got {}",
            a.missing
        )));
    }
    let mut outs = vec![a.output.as_path()];
    outs.extend(a.truth.as_deref());
    let outputs = io::Outputs::plan(&[&a.model], &outs)?;
    // The particle filter's nonlinear kinds have their own simulation.
    let Some(outputs) = super::pf::simulate_nonlinear(
        &a.model,
        (a.tracks, a.steps, a.seed, a.missing),
        &a.output,
        a.truth.as_deref(),
        outputs,
    )?
    else {
        return Ok(());
    };
    let model = kestrel::model::load_model(&a.model)?;
    let t0 = Instant::now();
    let progress = Progress::new("simulating");
    let sim = kestrel::sim::simulate(&model, a.tracks, a.steps, a.seed, a.missing)?;
    progress.phase("writing");
    io::write_measurements(&a.output, &sim.measurements)?;
    if let Some(t) = &a.truth {
        io::write_truth(t, a.tracks, a.steps, model.nx(), &sim.truth)?;
    }
    // Both files or neither.
    outputs.commit()?;
    progress.finish();
    let missing = sim
        .measurements
        .data()
        .chunks(model.ny())
        .filter(|z| z.iter().any(|v| v.is_nan()))
        .count();
    errln!(
        "simulate: {} tracks x {} steps (nx {}, ny {}), seed {}, {} of {} measurements missing; {:.3} s -> {}{}",
        a.tracks,
        a.steps,
        model.nx(),
        model.ny(),
        a.seed,
        missing,
        a.tracks * a.steps,
        t0.elapsed().as_secs_f64(),
        a.output.display(),
        a.truth.as_ref().map(|t| format!(", truth -> {}", t.display())).unwrap_or_default()
    );
    Ok(())
}
