//! One long sequence smoothed parallel in time (Sarkka & Garcia-Fernandez's associative
//! scans), against the sequential Rauch-Tung-Striebel smoother.
//!
//! ```sh
//! cargo run --release -p kestrel --example parallel_smoother -- [STEPS]
//! ```

use kestrel::{model, smooth_on, Device, ScanAlgorithm, SmoothMethod};
use std::time::Instant;

fn main() -> kestrel::Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let m = model::constant_velocity(2, 1.0, 0.5, 25.0, 100.0)?;
    let sim = kestrel::sim::simulate(&m, 1, steps, 11, 0.05)?;
    let z = sim.measurements;
    let device = Device::auto().device;
    println!("one sequence of {steps} steps on {device}");
    let t = Instant::now();
    let seq = smooth_on(Device::Cpu, &m, &z, SmoothMethod::Rts)?.smoothed;
    println!(
        "sequential RTS (CPU):           {:8.3} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let par = smooth_on(
        device,
        &m,
        &z.cast::<f64>(),
        SmoothMethod::ParallelRts(ScanAlgorithm::default()),
    )?
    .smoothed;
    println!(
        "parallel-in-time RTS ({device}): {:8.3} s",
        t.elapsed().as_secs_f64()
    );
    let worst = seq
        .mean()
        .iter()
        .zip(par.mean())
        .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
        .fold(0.0, f64::max);
    // Position error of the smoothed track against the simulated truth (x at 0, y at 2).
    let rmse = (0..steps)
        .map(|k| {
            let (dx, dy) = (
                par.mean()[k * 4] - sim.truth[k * 4],
                par.mean()[k * 4 + 2] - sim.truth[k * 4 + 2],
            );
            dx * dx + dy * dy
        })
        .sum::<f64>()
        / steps as f64;
    println!(
        "largest relative difference of the means: {worst:.1e}; position RMSE {:.2}",
        rmse.sqrt()
    );
    assert!(
        worst < 1e-6,
        "the parallel smoother must agree with the sequential one"
    );
    Ok(())
}
