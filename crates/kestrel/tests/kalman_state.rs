//! The per-step API (`kalman::BatchState`) against the batch filter: bit for bit where
//! both run the same arithmetic (same model, priors, noise, intervals), and against the
//! general reference for irregular sampling.

mod common;

use common::*;
use kestrel::kalman::{filter, BatchState, FilterOptions, Prediction};
use kestrel::model::{constant_acceleration, constant_velocity, Kinematics, StepMatrices};
use kestrel::{Measurements, Model, Real, TimeVaryingModel};
use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The rows of step `k` of every track, `[tracks][ny]`.
fn rows<T: Real>(z: &Measurements<T>, k: usize) -> Vec<T> {
    (0..z.tracks()).flat_map(|b| z.at(b, k).to_vec()).collect()
}

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.to_f64().to_bits()).collect()
}

/// Runs the per-step API over `z` (all targets added at step 0 with the model's prior)
/// and checks every step against the batch filter, bit for bit.
fn per_step_equals_batch<T: Real>(m: &Model, z: &Measurements<T>, general: bool) {
    let (nx, ny) = (m.nx(), m.ny());
    let opts = FilterOptions::default().with_force_general(general);
    let want = filter(m, z, &opts).unwrap().filtered;
    let mut st = BatchState::<T>::new(m, z.tracks()).unwrap();
    for b in 0..z.tracks() {
        assert_eq!(st.add().unwrap(), b);
    }
    for k in 0..z.steps() {
        if k > 0 {
            st.predict().unwrap();
        }
        st.update(&rows(z, k), None, None).unwrap();
        for b in 0..z.tracks() {
            assert_eq!(
                bits(st.mean(b).unwrap()),
                bits(want.mean_at(b, k)),
                "mean, track {b}, step {k} (nx {nx}, ny {ny})"
            );
            assert_eq!(bits(st.cov(b).unwrap()), bits(want.cov_at(b, k)));
            let ll = want.loglik().unwrap()[b * z.steps() + k];
            assert_eq!(
                st.loglik(b).unwrap().to_f64().to_bits(),
                ll.to_f64().to_bits()
            );
        }
    }
}

#[test]
fn equals_the_batch_filter_bit_for_bit() {
    // Fast-path sizes, and sizes the general path serves; group tails (37 = 4 x 8 + 5).
    for (i, &(nx, ny)) in [(4, 2), (6, 3), (1, 1), (9, 3), (3, 2), (5, 1)]
        .iter()
        .enumerate()
    {
        let m = random_model(100 + i as u64, nx, ny);
        let z = random_measurements(200 + i as u64, 37, 25, ny, 0.2);
        per_step_equals_batch(&m, &z, false);
        per_step_equals_batch(&m, &z.cast::<f32>(), false);
    }
}

/// A model equal to `m` with another prior.
fn with_prior(m: &Model, x0: &[f64], p0: &[f64]) -> Model {
    let n = m.nx();
    m.clone()
        .with_prior(
            DVector::from_column_slice(x0),
            DMatrix::from_row_slice(n, n, p0),
        )
        .unwrap()
}

#[test]
fn per_target_priors_late_starts_and_removals() {
    let (nx, ny, steps, tracks) = (4, 2, 20, 21);
    let m = random_model(7, nx, ny);
    let z = random_measurements(8, tracks, steps, ny, 0.1);
    let mut rng = StdRng::seed_from_u64(9);
    // Track b starts at step b % 5 with its own prior and, for odd b, ends at step 15.
    let priors: Vec<(Vec<f64>, Vec<f64>)> = (0..tracks)
        .map(|_| {
            let p = random_prior(&mut rng, nx);
            let p0: Vec<f64> = (0..nx * nx).map(|i| p.p0[(i / nx, i % nx)]).collect();
            (p.x0.iter().copied().collect(), p0)
        })
        .collect();
    let start = |b: usize| b % 5;
    let end = |b: usize| if b % 2 == 1 { 15 } else { steps };
    let mut st = BatchState::<f64>::new(&m, 32).unwrap();
    let mut slot = vec![usize::MAX; tracks];
    let mut zk = vec![f64::NAN; st.capacity() * ny];
    for k in 0..steps {
        if k > 0 {
            st.predict().unwrap();
        }
        for b in 0..tracks {
            if end(b) == k {
                st.remove(slot[b]).unwrap();
            }
        }
        for b in 0..tracks {
            if start(b) == k {
                slot[b] = st.add_with_prior(&priors[b].0, &priors[b].1).unwrap();
            }
        }
        zk.fill(f64::NAN);
        for b in 0..tracks {
            if (start(b)..end(b)).contains(&k) {
                zk[slot[b] * ny..(slot[b] + 1) * ny].copy_from_slice(z.at(b, k));
            }
        }
        st.update(&zk, None, None).unwrap();
        for b in 0..tracks {
            if !(start(b)..end(b)).contains(&k) {
                continue;
            }
            // The reference: this track alone from its start, with its prior.
            let len = k + 1 - start(b);
            let one =
                Measurements::new(1, len, ny, z.track(b)[start(b) * ny..(k + 1) * ny].to_vec())
                    .unwrap();
            let mb = with_prior(&m, &priors[b].0, &priors[b].1);
            let f = filter(&mb, &one, &FilterOptions::default())
                .unwrap()
                .filtered;
            assert_eq!(
                bits(st.mean(slot[b]).unwrap()),
                bits(f.mean_at(0, len - 1)),
                "track {b} step {k}"
            );
            assert_eq!(bits(st.cov(slot[b]).unwrap()), bits(f.cov_at(0, len - 1)));
        }
    }
    assert_eq!(st.len(), (0..tracks).filter(|&b| end(b) == steps).count());
}

#[test]
fn mask_per_target_noise_and_control() {
    // Masked rows equal NaN rows; per-target R and control equal models that carry them.
    let (nx, ny, steps, tracks) = (6, 2, 15, 11);
    let base = random_model(21, nx, ny);
    let z = random_measurements(22, tracks, steps, ny, 0.0);
    let mut rng = StdRng::seed_from_u64(23);
    let rs: Vec<DMatrix<f64>> = (0..tracks)
        .map(|_| {
            let a = DMatrix::from_fn(ny, ny, |_, _| rng.gen_range(-1.0..1.0));
            &a * a.transpose() + DMatrix::identity(ny, ny) * 0.2
        })
        .collect();
    let cs: Vec<f64> = (0..tracks * nx).map(|_| rng.gen_range(-0.5..0.5)).collect();
    let masked = |b: usize, k: usize| (b + k).is_multiple_of(3);
    let mut st = BatchState::<f64>::new(&base, tracks).unwrap();
    for _ in 0..tracks {
        st.add().unwrap();
    }
    let r_all: Vec<f64> = rs
        .iter()
        .flat_map(|r| r.transpose().iter().copied().collect::<Vec<_>>())
        .collect();
    let mut mask = vec![true; tracks];
    for k in 0..steps {
        if k > 0 {
            st.predict_with(&Prediction::new().control(&cs)).unwrap();
        }
        for b in 0..tracks {
            mask[b] = !masked(b, k);
        }
        st.update(&rows(&z, k), Some(&mask), Some(&r_all)).unwrap();
    }
    for b in 0..tracks {
        let mut u = base.u().clone();
        for i in 0..nx {
            u[i] += cs[b * nx + i];
        }
        let mb = base
            .clone()
            .with_r(rs[b].clone())
            .unwrap()
            .with_offsets(u, base.d().clone())
            .unwrap();
        let mut data = z.track(b).to_vec();
        for k in 0..steps {
            if masked(b, k) {
                data[k * ny..(k + 1) * ny].fill(f64::NAN);
            }
        }
        let one = Measurements::new(1, steps, ny, data).unwrap();
        let f = filter(&mb, &one, &FilterOptions::default())
            .unwrap()
            .filtered;
        // u + c is one f64 addition on both sides: equal bits.
        assert_eq!(
            bits(st.mean(b).unwrap()),
            bits(f.mean_at(0, steps - 1)),
            "track {b}"
        );
        assert_eq!(bits(st.cov(b).unwrap()), bits(f.cov_at(0, steps - 1)));
    }
}

#[test]
fn per_target_intervals_for_kinematic_models() {
    let (q, r, p0) = (0.7, 2.0, 50.0);
    for (dims, order) in [(2, 2), (3, 3), (1, 2)] {
        let build = |dt: f64| {
            if order == 2 {
                constant_velocity(dims, dt, q, r, p0).unwrap()
            } else {
                constant_acceleration(dims, dt, q, r, p0).unwrap()
            }
        };
        let kin = if order == 2 {
            Kinematics::constant_velocity(dims, q).unwrap()
        } else {
            Kinematics::constant_acceleration(dims, q).unwrap()
        };
        let (tracks, steps) = (13, 12);
        let ny = dims;
        let nx = dims * order;
        let z = random_measurements(31, tracks, steps, ny, 0.1);
        let dts: Vec<f64> = (0..tracks).map(|b| 0.25 + 0.1 * b as f64).collect();
        // Constant interval per track: bit for bit against a model built for it.
        let mut st = BatchState::<f64>::new(&build(1.0), tracks)
            .unwrap()
            .with_kinematics(kin)
            .unwrap();
        for _ in 0..tracks {
            st.add().unwrap();
        }
        for k in 0..steps {
            if k > 0 {
                st.predict_with(&Prediction::new().per_target_dt(&dts))
                    .unwrap();
            }
            st.update(&rows(&z, k), None, None).unwrap();
        }
        for b in 0..tracks {
            let one = Measurements::new(1, steps, ny, z.track(b).to_vec()).unwrap();
            let f = filter(&build(dts[b]), &one, &FilterOptions::default())
                .unwrap()
                .filtered;
            assert_eq!(
                bits(st.mean(b).unwrap()),
                bits(f.mean_at(0, steps - 1)),
                "dims {dims} order {order} track {b}"
            );
            assert_eq!(bits(st.cov(b).unwrap()), bits(f.cov_at(0, steps - 1)));
        }
        // Irregular intervals: against the general filter on a time-varying model.
        let mut rng = StdRng::seed_from_u64(32);
        let irregular: Vec<Vec<f64>> = (0..steps)
            .map(|_| (0..tracks).map(|_| rng.gen_range(0.05..2.0)).collect())
            .collect();
        let mut st = BatchState::<f64>::new(&build(1.0), tracks)
            .unwrap()
            .with_kinematics(kin)
            .unwrap();
        for _ in 0..tracks {
            st.add().unwrap();
        }
        for k in 0..steps {
            if k > 0 {
                st.predict_with(&Prediction::new().per_target_dt(&irregular[k]))
                    .unwrap();
            }
            st.update(&rows(&z, k), None, None).unwrap();
        }
        for b in 0..tracks {
            let base = build(1.0);
            let tv = TimeVaryingModel::new(
                (0..steps)
                    .map(|k| {
                        let (f, qm) = kin.transition(irregular[k][b]).unwrap();
                        StepMatrices {
                            f,
                            q: qm,
                            u: DVector::zeros(nx),
                            h: base.h().clone(),
                            d: base.d().clone(),
                            r: base.r().clone(),
                        }
                    })
                    .collect(),
                base.prior().clone(),
            )
            .unwrap();
            let one = Measurements::new(1, steps, ny, z.track(b).to_vec()).unwrap();
            let f = filter(&tv, &one, &FilterOptions::default())
                .unwrap()
                .filtered;
            let e = max_rel_err(
                st.mean(b).unwrap().iter().copied(),
                f.mean_at(0, steps - 1).iter().copied(),
            )
            .max(max_rel_err(
                st.cov(b).unwrap().iter().copied(),
                f.cov_at(0, steps - 1).iter().copied(),
            ));
            assert!(e < 1e-10, "irregular intervals, track {b}: {e}");
        }
    }
}

#[test]
fn uniform_interval_equals_a_model_built_for_it() {
    let z = random_measurements(41, 9, 10, 2, 0.1);
    let kin = Kinematics::constant_velocity(2, 0.3).unwrap();
    for dt in [0.1, 0.5, 3.0] {
        let want = filter(
            &constant_velocity(2, dt, 0.3, 1.5, 20.0).unwrap(),
            &z,
            &FilterOptions::default(),
        )
        .unwrap()
        .filtered;
        let mut st = BatchState::<f64>::new(&constant_velocity(2, 1.0, 0.3, 1.5, 20.0).unwrap(), 9)
            .unwrap()
            .with_kinematics(kin)
            .unwrap();
        for _ in 0..9 {
            st.add().unwrap();
        }
        for k in 0..10 {
            if k > 0 {
                st.predict_dt(dt).unwrap();
            }
            st.update(&rows(&z, k), None, None).unwrap();
        }
        for b in 0..9 {
            assert_eq!(bits(st.mean(b).unwrap()), bits(want.mean_at(b, 9)));
            assert_eq!(bits(st.cov(b).unwrap()), bits(want.cov_at(b, 9)));
        }
    }
}

#[test]
fn measure_and_score_agree_with_the_update() {
    for (nx, ny) in [(4, 2), (5, 2)] {
        let m = random_model(51, nx, ny);
        let z = random_measurements(52, 10, 6, ny, 0.0);
        let mut st = BatchState::<f64>::new(&m, 10).unwrap();
        for _ in 0..10 {
            st.add().unwrap();
        }
        for k in 0..6 {
            if k > 0 {
                st.predict().unwrap();
            }
            st.measure(None).unwrap();
            let zhat = st.predicted_measurements().to_vec();
            let s = st.innovation_covs().to_vec();
            let scores: Vec<_> = (0..10).map(|b| st.score(b, z.at(b, k)).unwrap()).collect();
            // Independent: y^T S^{-1} y with nalgebra's inverse.
            for b in 0..10 {
                let sm = DMatrix::from_row_slice(ny, ny, &s[b * ny * ny..(b + 1) * ny * ny]);
                let y = DVector::from_fn(ny, |a, _| z.at(b, k)[a] - zhat[b * ny + a]);
                let d2 = (y.transpose() * sm.clone().try_inverse().unwrap() * &y)[(0, 0)];
                assert!((scores[b].mahalanobis2 - d2).abs() < 1e-9 * d2.max(1.0));
            }
            st.update(&rows(&z, k), None, None).unwrap();
            for b in 0..10 {
                assert_eq!(
                    st.predicted_measurement(b).unwrap(),
                    &zhat[b * ny..(b + 1) * ny]
                );
                assert_eq!(
                    st.innovation_cov(b).unwrap(),
                    &s[b * ny * ny..(b + 1) * ny * ny]
                );
                let ll = st.loglik(b).unwrap();
                assert!(
                    (scores[b].loglik - ll).abs() < 1e-10 * ll.abs().max(1.0),
                    "{} vs {ll}",
                    scores[b].loglik
                );
            }
        }
    }
}

#[test]
fn a_covariance_that_fails_names_the_slot() {
    let m = constant_velocity(2, 1.0, 0.5, 4.0, 10.0).unwrap();
    let mut st = BatchState::<f64>::new(&m, 10).unwrap();
    for _ in 0..10 {
        st.add().unwrap();
    }
    let mut r = Vec::new();
    for b in 0..10 {
        let v = if b == 6 { -100.0 } else { 4.0 };
        r.extend_from_slice(&[v, 0.0, 0.0, v]);
    }
    let z = vec![1.0; 20];
    let e = st.update(&z, None, Some(&r)).unwrap_err();
    assert!(
        matches!(
            e,
            kestrel::Error::NotPositiveDefinite {
                track: 6,
                step: 0,
                ..
            }
        ),
        "{e}"
    );
    // Every other target was updated.
    assert!(st.loglik(5).unwrap().is_finite());
}
