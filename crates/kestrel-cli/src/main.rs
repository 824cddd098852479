//! The `kestrel` command line: simulate, filter, smooth, demo, bench.
//!
//! Errors are printed as one `error: ...` line; the exit status is 2 for bad input or
//! usage (clap's own usage errors included) and 1 for any other failure.

mod bench;
mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kestrel",
    version,
    about = "Bayesian state estimation at scale: batched Kalman filters and smoothers on CPUs and NVIDIA GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Draw truth and measurements from a model.
    Simulate(cmd::simulate::Args),
    /// Kalman filter: filtered means, covariances and per-step log-likelihoods.
    Filter(cmd::estimate::FilterArgs),
    /// Smoother (retrodiction): smoothed means and covariances.
    Smooth(cmd::estimate::SmoothArgs),
    /// Simulate a large 2-D tracking scenario, filter and smooth it, report speed and accuracy, plot a few tracks.
    Demo(cmd::demo::Args),
    /// Throughput of every path: JSON lines, then a table.
    Bench(cmd::bench::Args),
    /// Score tracks against truth: GOSPA, OSPA or CLEAR MOT, per step and averaged.
    Eval(cmd::eval::Args),
    /// Multi-target tracking of unlabelled detections: gating, GNN or JPDA, track life cycle.
    Track(cmd::track::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Filter(a) => cmd::estimate::run_filter(a),
        Command::Smooth(a) => cmd::estimate::run_smooth(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Eval(a) => cmd::eval::run(a),
        Command::Track(a) => cmd::track::run(a),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A panic is a bug in kestrel, never the user's fault: report it as one error line.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error (please report): {info}");
    }));
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {}", cmd::message(&e));
            ExitCode::from(cmd::exit_code(&e))
        }
        Err(_) => ExitCode::from(1),
    }
}
