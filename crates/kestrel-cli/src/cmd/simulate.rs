//! `kestrel simulate`: truth and measurements drawn from a model; with `--scenario`, a
//! multi-target scenario (births, deaths, crossings, misses, clutter) as unlabelled
//! detections `t,z0,..` and truth `t,id,x0,..`.

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
    /// Also write the true states: `.csv` (track,t,x0,..) or `.npy` ([B, T, nx]);
    /// with --scenario, `.csv` `t,id,x0,..`.
    #[arg(long, value_name = "X.csv|X.npy")]
    truth: Option<PathBuf>,
    /// A multi-target scenario: --tracks targets at step 0 (random: anywhere in the
    /// region; crossing: in pairs that meet at the middle step), written as detections
    /// `t,z0,..` (--output) and truth `t,id,x0,..` (--truth).
    #[arg(long, value_enum)]
    scenario: Option<ScenarioArg>,
    /// Scenario: detection probability (default 0.9).
    #[arg(long, allow_negative_numbers = true, value_name = "P")]
    pd: Option<f64>,
    /// Scenario: mean number of clutter detections per scan, Poisson (default 10).
    #[arg(long, allow_negative_numbers = true, value_name = "L")]
    clutter: Option<f64>,
    /// Scenario: half-width A of the region [-A, A]^ny where targets start and clutter
    /// falls (default 1000).
    #[arg(long, allow_negative_numbers = true, value_name = "A")]
    region: Option<f64>,
    /// Scenario: mean number of target births per step, Poisson (default 0).
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    births: Option<f64>,
    /// Scenario: probability that a target dies at each step (default 0).
    #[arg(long, allow_negative_numbers = true, value_name = "P")]
    death: Option<f64>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioArg {
    Random,
    Crossing,
}

fn run_scenario(a: &Args, kind: ScenarioArg) -> anyhow::Result<()> {
    use kestrel::tracking::{files, scenario};
    if a.missing != 0.0 {
        return Err(bad("--missing does not apply to a scenario: use --pd"));
    }
    if let Some(t) = &a.truth {
        Format::of(t, &[Format::Csv])?;
    }
    let s = scenario::Scenario {
        kind: match kind {
            ScenarioArg::Random => scenario::Kind::Random,
            ScenarioArg::Crossing => scenario::Kind::Crossing,
        },
        targets: a.tracks,
        steps: a.steps,
        pd: a.pd.unwrap_or(0.9),
        clutter: a.clutter.unwrap_or(10.0),
        region: a.region.unwrap_or(1000.0),
        births: a.births.unwrap_or(0.0),
        death: a.death.unwrap_or(0.0),
        seed: a.seed,
    };
    if !(s.pd > 0.0 && s.pd <= 1.0) {
        return Err(bad(format!("--pd must be in (0, 1], got {}", s.pd)));
    }
    for (flag, v) in [("--clutter", s.clutter), ("--births", s.births)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(bad(format!("{flag} must be non-negative, got {v}")));
        }
    }
    if !(s.region > 0.0 && s.region.is_finite()) {
        return Err(bad(format!("--region must be positive, got {}", s.region)));
    }
    if !(0.0..=1.0).contains(&s.death) {
        return Err(bad(format!(
            "--death must be a probability in [0, 1], got {}",
            s.death
        )));
    }
    let mut outs = vec![a.output.as_path()];
    outs.extend(a.truth.as_deref());
    let outputs = io::Outputs::plan(&[&a.model], &outs)?;
    let model = super::load_linear_model(&a.model)?;
    let t0 = Instant::now();
    let (truth, det) = scenario::simulate(&model, &s)?;
    files::write_detections(&a.output, &det)?;
    if let Some(t) = &a.truth {
        files::write_truth(t, &truth)?;
    }
    // Both files or neither.
    outputs.commit()?;
    let ids: std::collections::HashSet<u64> = truth.id.iter().copied().collect();
    errln!(
        "simulate: {} scenario, {} targets in all ({} at step 0), {} steps, {} detections (pd {}, {} clutter per scan in [-{}, {}]^{}, density {:.3e}), seed {}; {:.3} s -> {}{}",
        super::value_name(&kind),
        ids.len(),
        a.tracks,
        a.steps,
        det.len(),
        s.pd,
        s.clutter,
        s.region,
        s.region,
        model.ny(),
        s.clutter_density(model.ny()),
        a.seed,
        t0.elapsed().as_secs_f64(),
        a.output.display(),
        a.truth.as_ref().map(|t| format!(", truth -> {}", t.display())).unwrap_or_default()
    );
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    Format::of(&a.output, MEASUREMENT_FORMATS)?;
    if let Some(kind) = a.scenario {
        if a.steps == 0 {
            return Err(bad("--steps must be at least 1"));
        }
        return run_scenario(&a, kind);
    }
    let only_scenario = [
        ("--pd", a.pd.is_some()),
        ("--clutter", a.clutter.is_some()),
        ("--region", a.region.is_some()),
        ("--births", a.births.is_some()),
        ("--death", a.death.is_some()),
    ];
    if let Some((flag, _)) = only_scenario.iter().find(|f| f.1) {
        return Err(bad(format!("{flag} applies only with --scenario")));
    }
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
    // The particle filter's nonlinear kinds have their own simulation (a time-varying
    // linear model is not one of them).
    let text = std::fs::read_to_string(&a.model).unwrap_or_default();
    let varying = kestrel::model::is_time_varying_text(&text);
    if kestrel::nonlinear::is_gaussian_only_text(&text) {
        return simulate_gaussian(&a, outputs);
    }
    let Some(outputs) = (if varying {
        Some(outputs)
    } else {
        super::pf::simulate_nonlinear(
            &a.model,
            (a.tracks, a.steps, a.seed, a.missing),
            &a.output,
            a.truth.as_deref(),
            outputs,
        )?
    }) else {
        return Ok(());
    };
    let model = super::load_any_linear_model(&a.model)?;
    super::check_model_steps(&a.model, &model, "--steps asks for", a.steps)?;
    let t0 = Instant::now();
    let progress = Progress::new("simulating");
    let sim = kestrel::sim::simulate(&model, a.tracks, a.steps, a.seed, a.missing)?;
    write_simulation(
        &a,
        outputs,
        progress,
        &sim,
        (model.nx(), model.ny()),
        "",
        t0,
    )
}

/// Writes a simulation's measurements (and `--truth`), commits both files together (or
/// neither) and prints the summary line; `kind` tags the model in it.
fn write_simulation(
    a: &Args,
    outputs: io::Outputs,
    progress: Progress,
    sim: &kestrel::sim::Simulation,
    (nx, ny): (usize, usize),
    kind: &str,
    t0: Instant,
) -> anyhow::Result<()> {
    progress.phase("writing");
    io::write_measurements(&a.output, &sim.measurements)?;
    if let Some(t) = &a.truth {
        io::write_truth(t, a.tracks, a.steps, nx, &sim.truth)?;
    }
    outputs.commit()?;
    progress.finish();
    let missing = sim
        .measurements
        .data()
        .chunks(ny)
        .filter(|z| z.iter().any(|v| v.is_nan()))
        .count();
    errln!(
        "simulate: {} x {} ({kind}nx {nx}, ny {ny}), seed {}, {} of {} measurements missing; {:.3} s -> {}{}",
        super::plural(a.tracks, "track"),
        super::plural(a.steps, "step"),
        a.seed,
        missing,
        a.tracks * a.steps,
        t0.elapsed().as_secs_f64(),
        a.output.display(),
        a.truth
            .as_ref()
            .map(|t| format!(", truth -> {}", t.display()))
            .unwrap_or_default()
    );
    Ok(())
}

/// Simulates a nonlinear model file (`kestrel::nonlinear::simulate`).
fn simulate_gaussian(a: &Args, outputs: io::Outputs) -> anyhow::Result<()> {
    use kestrel::nonlinear::NonlinearProblem;
    let file = kestrel::nonlinear::load_nonlinear(&a.model)?;
    let model = match &file.problem {
        NonlinearProblem::Single(m) => m,
        NonlinearProblem::Imm(_) => {
            return Err(bad(format!(
                "{}: an [imm] file has no single model to simulate (simulate one of its modes as a [model] file)",
                a.model.display()
            )))
        }
    };
    let t0 = Instant::now();
    let progress = Progress::new("simulating");
    let sim = kestrel::nonlinear::simulate(model, a.tracks, a.steps, a.seed, a.missing)?;
    write_simulation(
        a,
        outputs,
        progress,
        &sim,
        (model.nx(), model.ny()),
        "nonlinear, ",
        t0,
    )
}
