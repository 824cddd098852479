//! Filter a measurement file on the best device and write the estimates.
//!
//! ```sh
//! cargo run --release -p kestrel --example filter_file -- MODEL.toml Z.(npy|csv) OUT.(npz|csv)
//! cargo run --release -p kestrel --example filter_file      # simulates its own input
//! ```

use kestrel::kalman::FilterOptions;
use kestrel::{filter_on, io, model, Device, FilterMethod, Measurements};
use std::path::PathBuf;

fn main() -> kestrel::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scratch = std::env::temp_dir().join(format!("kestrel-example-{}", std::process::id()));
    let (model_path, input, output) = match args.as_slice() {
        [m, z, o] => (PathBuf::from(m), PathBuf::from(z), PathBuf::from(o)),
        _ => {
            // No arguments: simulate 1000 targets x 100 steps of a 2-D constant-velocity
            // model into a scratch directory.
            std::fs::create_dir_all(&scratch).map_err(|e| kestrel::Error::Io {
                path: scratch.clone(),
                source: e,
            })?;
            let m = model::constant_velocity(2, 1.0, 0.5, 25.0, 100.0)?;
            let sim = kestrel::sim::simulate(&m, 1000, 100, 7, 0.05)?;
            let (mp, zp) = (scratch.join("cv2d.toml"), scratch.join("z.npy"));
            model::save_model(&m, &mp)?;
            io::write_measurements(&zp, &sim.measurements)?;
            (mp, zp, scratch.join("filtered.npz"))
        }
    };
    let m = model::load_model(&model_path)?;
    // The GPU when one is usable (f32 there), else every core of the CPU (f64).
    let choice = Device::auto();
    let (device, why) = (choice.device, choice.why_not_gpu);
    let t0 = std::time::Instant::now();
    let est = match device {
        Device::Cpu => {
            println!("device: {device} ({})", why.unwrap_or_default());
            let z: Measurements<f64> = io::read_measurements(&input)?;
            let out = filter_on(
                device,
                &m,
                &z,
                FilterMethod::Sequential,
                &FilterOptions::default(),
            )?;
            io::write_estimates(&output, &out.filtered)?;
            out.filtered.total_loglik()
        }
        _ => {
            println!("device: {device}");
            let z: Measurements<f32> = io::read_measurements(&input)?;
            let out = filter_on(
                device,
                &m,
                &z,
                FilterMethod::Sequential,
                &FilterOptions::default(),
            )?;
            io::write_estimates(&output, &out.filtered)?;
            out.filtered.total_loglik()
        }
    };
    println!(
        "filtered {} -> {} in {:.3} s, total log-likelihood {est:.1}",
        input.display(),
        output.display(),
        t0.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
