//! `kestrel bench`: runs the benchmark families and prints their table.

use crate::bench::{self, Sink};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Cpu,
    Cuda,
    Parallel,
    Likelihood,
    Particle,
    Tbd,
    Tracking,
    Retrodict,
    Hmm,
    Nonlinear,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Small sizes, for a quick look.
    #[arg(long)]
    quick: bool,
    /// Run one family only.
    #[arg(long, value_enum)]
    only: Option<Family>,
    /// Write the families' plots (SVG) into this folder (tracking: tracking-scale.svg;
    /// a seed: seed-NAME.svg).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Rebuild a seed paper's headline experiment on its own axes, its numbers beside
    /// kestrel's (docs/seeds.md): tager, sarkka, mazurek, lin, hendeby or all.
    #[arg(long, value_enum, value_name = "NAME", conflicts_with = "only")]
    seed: Option<bench::seeds::Seed>,
}

type Runner = fn(&mut Sink, bool) -> anyhow::Result<()>;

pub fn run(a: Args) -> anyhow::Result<()> {
    let families: [(Family, &str, Runner); 10] = [
        (Family::Cpu, "cpu", bench::cpu::run),
        (Family::Cuda, "cuda", bench::cuda::run),
        (Family::Parallel, "parallel", bench::parallel::run),
        (Family::Likelihood, "likelihood", bench::likelihood::run),
        (Family::Particle, "particle", bench::particle::run),
        (Family::Tbd, "tbd", bench::tbd::run),
        (Family::Tracking, "tracking", bench::tracking::run),
        (Family::Retrodict, "retrodict", bench::retrodict::run),
        (Family::Hmm, "hmm", bench::hmm::run),
        (Family::Nonlinear, "nonlinear", bench::nonlinear::run),
    ];
    // The knobs a family reads from the environment, checked before any family runs.
    if a.only.is_none_or(|o| o == Family::Tbd) {
        bench::tbd::ring_bytes()?;
        bench::tbd::frame_size()?;
        bench::tbd::timed_frames()?;
        bench::tbd::kernel_parts()?;
    }
    if a.only.is_none_or(|o| o == Family::Cuda) {
        let e2e = bench::cuda::multi_only()?.unwrap_or(true);
        bench::cuda::multi_tracks(a.quick, e2e)?;
        bench::cuda::piece_cap()?;
    }
    let mut sink = Sink::default();
    if let Some(seed) = a.seed {
        if let Some(dir) = a.plot.as_ref().filter(|d| !d.is_dir()) {
            return Err(crate::cmd::bad(format!(
                "--plot {}: no such directory",
                dir.display()
            )));
        }
        let failed = bench::seeds::run(&mut sink, seed, a.quick, a.plot.as_deref());
        out!("{}", sink.table());
        if !failed.is_empty() {
            anyhow::bail!("seed benchmarks failed: {}", failed.join(", "));
        }
        return Ok(());
    }
    let mut failed = Vec::new();
    for (f, name, runner) in families {
        if a.only.is_some_and(|o| o != f) {
            continue;
        }
        if let Err(e) = runner(&mut sink, a.quick) {
            errln!("bench {name}: error: {e:#}");
            failed.push(name);
        }
    }
    out!("{}", sink.table());
    if let Some(dir) = &a.plot {
        bench::tracking::plot(&sink.records, dir)?;
    }
    if !failed.is_empty() {
        anyhow::bail!("benchmark families failed: {}", failed.join(", "));
    }
    Ok(())
}
