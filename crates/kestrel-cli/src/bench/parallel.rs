//! Benchmarks of the parallel paths.

use super::Sink;

/// Runs this family's benchmarks; `quick` keeps sizes small.
pub fn run(_sink: &mut Sink, _quick: bool) -> anyhow::Result<()> {
    Ok(())
}
