//! The `kestrel` command line: every family of the library (Kalman filter and smoothers,
//! parallel in time, per-step likelihoods, particle filter, track-before-detect,
//! multi-target tracking and metrics), their simulators, the demo and the benchmarks.
//!
//! The contract (README, "Reliability"): a failure prints exactly one `error: ...` line
//! on stderr (control characters escaped, long excerpts cut) and exits 2 for bad input or
//! usage, 1 for any other failure (a full disk, a numerical breakdown); printing never
//! panics (a closed pipe, a full device); SIGINT, SIGTERM and SIGHUP remove the
//! temporary files of outputs being written and exit 130, 143 or 129; notes such as the
//! device chosen and warnings are printed after success, or at once with `--verbose`.

/// `println!` that never panics: on a closed pipe or a full device the line is dropped.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `print!` that never panics.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

mod bench;
mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kestrel",
    version,
    about = "Bayesian state estimation at scale on CPUs and NVIDIA GPUs: Kalman filters and smoothers, parallel in time, per-step likelihoods, nonlinear filters and IMM, particle filters, track-before-detect, multi-target tracking, hidden Markov models",
    long_about = "Bayesian state estimation at scale, on CPUs and NVIDIA GPUs, with the same results on both.\n\n\
Families: Kalman filter and smoothers (filter, smooth), parallel in time (filter --method \
parallel, smooth --method parallel-rts | two-filter), per-step likelihoods (loglik), \
nonlinear filters and IMM (filter, smooth --filter ekf | iekf | ukf | ckf, model files of \
expressions, an [imm] of modes), particle filter (pf), track-before-detect (tbd, \
simulate-frames, tbd-eval), multi-target tracking and metrics (track, eval, simulate \
--scenario), hidden Markov models (hmm). Every family simulates its inputs \
(simulate, simulate-frames); demo shows one end to end, bench measures them all. The same \
library is a Rust crate (kestrel) and a Python package (pip install .)."
)]
struct Cli {
    /// Flush every output and its directory to the disk before and after the rename,
    /// so that outputs survive a power loss (measured: ~60 ms per small file, seconds per GB).
    #[arg(long, global = true)]
    fsync: bool,
    /// Print notes (the device chosen) as they come instead of after success.
    #[arg(long, short, global = true)]
    verbose: bool,
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
    /// Retrodiction of stored filter estimates (kestrel filter's NPZ): smoothed means (and covariances).
    Retrodict(cmd::retrodict::Args),
    /// Per-step marginal log-likelihoods: exact, parallel or windowed (splash) filter.
    Loglik(cmd::loglik::Args),
    /// Simulate a large 2-D tracking scenario, filter and smooth it, report speed and accuracy, plot a few tracks.
    Demo(cmd::demo::Args),
    /// Throughput of every path: JSON lines, then a table.
    Bench(cmd::bench::Args),
    /// Score tracks against truth: GOSPA, OSPA or CLEAR MOT, per step and averaged.
    Eval(cmd::eval::Args),
    /// Track-before-detect over a frame sequence: detections as CSV.
    Tbd(cmd::tbd::Args),
    /// Frame sequences with point targets in noise, and their truth.
    SimulateFrames(cmd::simulate_frames::Args),
    /// Pd of track-before-detect against a single-frame detector (SNR sweep, ROC, plot).
    TbdEval(cmd::tbd_eval::Args),
    /// Bootstrap particle filter: weighted means, covariances, log-likelihood estimates and ESS.
    Pf(cmd::pf::Args),
    /// Multi-target tracking of unlabelled detections: gating, GNN or JPDA, track life cycle.
    Track(cmd::track::Args),
    /// Hidden Markov model: filtered and smoothed state distributions, per-step log-likelihoods, Viterbi path.
    Hmm(cmd::hmm::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Filter(a) => cmd::estimate::run_filter(a),
        Command::Smooth(a) => cmd::estimate::run_smooth(a),
        Command::Retrodict(a) => cmd::retrodict::run(a),
        Command::Loglik(a) => cmd::loglik::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Eval(a) => cmd::eval::run(a),
        Command::Tbd(a) => cmd::tbd::run(a),
        Command::SimulateFrames(a) => cmd::simulate_frames::run(a),
        Command::TbdEval(a) => cmd::tbd_eval::run(a),
        Command::Pf(a) => cmd::pf::run(a),
        Command::Track(a) => cmd::track::run(a),
        Command::Hmm(a) => cmd::hmm::run(a),
    }
}

fn main() -> ExitCode {
    kestrel::io::output::remove_temporaries_on_signals();
    // Every command takes negative numbers as values (`--ess -1`, `--switching -1`), so
    // that the range check of the option answers rather than clap's "unexpected
    // argument" (options whose value may start with a hyphen take it as before).
    let command = <Cli as clap::CommandFactory>::command()
        .mut_subcommands(|s| s.allow_negative_numbers(true));
    let parsed = command
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let commands: Vec<String> = <Cli as clap::CommandFactory>::command()
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            return cmd::usage_error(e, &commands);
        }
    };
    kestrel::io::set_fsync(cli.fsync);
    cmd::set_verbose(cli.verbose);
    // A panic is a bug in kestrel, never the user's fault: report it as one error line,
    // once, however many threads panic.
    std::panic::set_hook(Box::new(|info| {
        static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !ONCE.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let msg = cmd::one_line(&format!("internal error (please report): {info}"));
            errln!("error: {msg}");
        }
    }));
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(())) => {
            cmd::print_notes();
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            errln!("error: {}", cmd::one_line(&cmd::message(&e)));
            ExitCode::from(cmd::exit_code(&e))
        }
        Err(_) => ExitCode::from(1),
    }
}
