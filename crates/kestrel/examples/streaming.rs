//! A streaming tracking loop on the per-step API: targets appear and disappear, each
//! step predicts every track, gates every detection against the predicted measurement
//! (chi-square 99% gate on the Mahalanobis distance), updates the tracks that got one,
//! starts tracks from detections no track claimed and drops tracks missed too often.
//! Runs on the CPU (`BatchState`) and, when a GPU is usable, on the GPU
//! (`BatchTracker`): the same loop through a small trait.
//!
//! ```sh
//! cargo run --release -p kestrel --example streaming
//! ```

use kestrel::kalman::cuda::{BatchTracker, CudaOptions};
use kestrel::kalman::BatchState;
use kestrel::model::{constant_velocity, Kinematics};
use kestrel::Result;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// What the loop needs from a batch of filters.
trait Tracks {
    fn add_track(&mut self, x0: &[f64], p0: &[f64]) -> Result<usize>;
    fn drop_track(&mut self, slot: usize) -> Result<()>;
    fn predict_dt(&mut self, dt: f64) -> Result<()>;
    /// Predicted measurements `[capacity][2]` and `S` `[capacity][2][2]`.
    fn gate_data(&mut self) -> Result<(Vec<f64>, Vec<f64>)>;
    fn update_rows(&mut self, z: &[f64]) -> Result<()>;
}

impl Tracks for BatchState<f64> {
    fn add_track(&mut self, x0: &[f64], p0: &[f64]) -> Result<usize> {
        self.add_with_prior(x0, p0)
    }
    fn drop_track(&mut self, slot: usize) -> Result<()> {
        self.remove(slot)
    }
    fn predict_dt(&mut self, dt: f64) -> Result<()> {
        BatchState::predict_dt(self, dt)
    }
    fn gate_data(&mut self) -> Result<(Vec<f64>, Vec<f64>)> {
        self.measure(None)?;
        Ok((
            self.predicted_measurements().to_vec(),
            self.innovation_covs().to_vec(),
        ))
    }
    fn update_rows(&mut self, z: &[f64]) -> Result<()> {
        self.update(z, None, None)
    }
}

impl Tracks for BatchTracker<f32> {
    fn add_track(&mut self, x0: &[f64], p0: &[f64]) -> Result<usize> {
        let c = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        self.add_with_prior(&c(x0), &c(p0))
    }
    fn drop_track(&mut self, slot: usize) -> Result<()> {
        self.remove(slot)
    }
    fn predict_dt(&mut self, dt: f64) -> Result<()> {
        BatchTracker::predict_dt(self, dt)
    }
    fn gate_data(&mut self) -> Result<(Vec<f64>, Vec<f64>)> {
        let (z, s) = self.measure(None)?;
        let w = |v: Vec<f32>| v.into_iter().map(f64::from).collect();
        Ok((w(z), w(s)))
    }
    fn update_rows(&mut self, z: &[f64]) -> Result<()> {
        let z: Vec<f32> = z.iter().map(|&v| v as f32).collect();
        self.update(&z, None, None)
    }
}

/// Squared Mahalanobis distance of `z` from `zhat` under the 2 x 2 covariance `s`.
fn d2(z: &[f64], zhat: &[f64], s: &[f64]) -> f64 {
    let (a, b, d) = (s[0], s[1], s[3]);
    let det = a * d - b * b;
    let (y0, y1) = (z[0] - zhat[0], z[1] - zhat[1]);
    (d * y0 * y0 - 2.0 * b * y0 * y1 + a * y1 * y1) / det
}

/// Runs the scenario; returns (tracks started, tracks confirmed alive at the end).
fn run(t: &mut dyn Tracks, capacity: usize, steps: usize) -> Result<(usize, usize)> {
    const GATE: f64 = 9.21; // chi-square, 2 degrees of freedom, 99%
    let (dt, r): (f64, f64) = (0.5, 4.0);
    let mut rng = StdRng::seed_from_u64(3);
    let noise = Normal::new(0.0, r.sqrt()).expect("a valid deviation");
    // Truth: targets moving at constant velocity, born and dying at random.
    let mut truth: Vec<[f64; 4]> = Vec::new();
    let mut slot_misses: Vec<Option<usize>> = vec![None; capacity];
    let mut started = 0;
    let mut z = vec![f64::NAN; capacity * 2];
    for k in 0..steps {
        truth.retain(|_| rng.gen::<f64>() > 0.01);
        for _ in 0..rng.gen_range(0..4) {
            truth.push([
                rng.gen_range(-1e3..1e3),
                rng.gen_range(-10.0..10.0),
                rng.gen_range(-1e3..1e3),
                rng.gen_range(-10.0..10.0),
            ]);
        }
        for x in truth.iter_mut() {
            x[0] += dt * x[1];
            x[2] += dt * x[3];
        }
        // Detections: each target seen with probability 0.9, plus clutter.
        let mut dets: Vec<[f64; 2]> = Vec::new();
        for x in &truth {
            if rng.gen::<f64>() < 0.9 {
                dets.push([x[0] + noise.sample(&mut rng), x[2] + noise.sample(&mut rng)]);
            }
        }
        for _ in 0..5 {
            dets.push([rng.gen_range(-1e3..1e3), rng.gen_range(-1e3..1e3)]);
        }
        if k > 0 {
            t.predict_dt(dt)?;
        }
        // Gate: each track takes the nearest detection inside its gate (greedy nearest
        // neighbour; a real tracker solves the assignment).
        let (zhat, s) = t.gate_data()?;
        let mut taken = vec![false; dets.len()];
        z.fill(f64::NAN);
        for slot in 0..capacity {
            let Some(misses) = slot_misses[slot] else {
                continue;
            };
            let best = dets
                .iter()
                .enumerate()
                .filter(|(i, _)| !taken[*i])
                .map(|(i, d)| {
                    (
                        i,
                        d2(d, &zhat[slot * 2..slot * 2 + 2], &s[slot * 4..slot * 4 + 4]),
                    )
                })
                .filter(|(_, g)| *g < GATE)
                .min_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((i, _)) => {
                    taken[i] = true;
                    z[slot * 2..slot * 2 + 2].copy_from_slice(&dets[i]);
                    slot_misses[slot] = Some(0);
                }
                None => slot_misses[slot] = Some(misses + 1),
            }
        }
        t.update_rows(&z)?;
        // Drop tracks missed three times in a row; start tracks from free detections.
        for slot in 0..capacity {
            if slot_misses[slot].is_some_and(|m| m >= 3) {
                t.drop_track(slot)?;
                slot_misses[slot] = None;
            }
        }
        for (i, d) in dets.iter().enumerate() {
            if taken[i] || slot_misses.iter().all(|m| m.is_some()) {
                continue;
            }
            let p0 = [
                r, 0.0, 0.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 0.0, r, 0.0, 0.0, 0.0, 0.0, 100.0,
            ];
            let slot = t.add_track(&[d[0], 0.0, d[1], 0.0], &p0)?;
            slot_misses[slot] = Some(0);
            started += 1;
        }
    }
    let alive = slot_misses
        .iter()
        .filter(|m| m.is_some_and(|m| m == 0))
        .count();
    Ok((started, alive))
}

fn main() -> Result<()> {
    let (capacity, steps) = (4096, 200);
    let model = constant_velocity(2, 0.5, 1.0, 4.0, 100.0)?;
    let kin = Kinematics::constant_velocity(2, 1.0)?;
    let mut cpu = BatchState::<f64>::new(&model, capacity)?.with_kinematics(kin)?;
    let (started, alive) = run(&mut cpu, capacity, steps)?;
    println!("cpu: {steps} steps, {started} tracks started, {alive} updated at the last step");
    match kestrel::cuda::available(0) {
        Ok(()) => {
            let mut gpu = BatchTracker::<f32>::new(0, &model, capacity, &CudaOptions::default())?
                .with_kinematics(kin)?;
            let (g_started, g_alive) = run(&mut gpu, capacity, steps)?;
            println!("gpu: {steps} steps, {g_started} tracks started, {g_alive} updated at the last step");
        }
        Err(why) => println!("gpu: skipped ({why})"),
    }
    Ok(())
}
