//! The CPU filter and smoother against closed forms and an independent textbook
//! implementation, on random models with offsets and missing values.

mod common;

use common::*;
use kestrel::kalman::{filter, smooth_filtered, FilterOptions, Keep};
use kestrel::model::random_walk;
use kestrel::{Estimates, Measurements, Model, StateSpace};

fn opts(general: bool) -> FilterOptions {
    FilterOptions::default().with_force_general(general)
}

/// Compares both CPU paths (fast where available, general) with the textbook filter and
/// smoother, in f64 and f32.
fn check_against_textbook<M: StateSpace>(m: &M, z: &Measurements<f64>, tol64: f64, tol32: f64) {
    let steps = z.steps();
    let nx = m.nx();
    let refs: Vec<_> = (0..z.tracks())
        .map(|b| textbook_filter(m, z.track(b), steps))
        .collect();
    let smooths: Vec<_> = refs.iter().map(|r| textbook_smooth(m, r)).collect();
    let ref_mean = || {
        refs.iter().flat_map(|r| {
            r.mean
                .iter()
                .flat_map(|v| v.iter().cloned().collect::<Vec<_>>())
        })
    };
    let ref_cov = || {
        refs.iter().flat_map(|r| {
            r.cov
                .iter()
                .flat_map(|c| c.transpose().iter().cloned().collect::<Vec<_>>())
        })
    };
    let ref_ll = || refs.iter().flat_map(|r| r.loglik.iter().cloned());
    let sm_mean = || {
        smooths
            .iter()
            .flat_map(|(x, _)| x.iter().flat_map(|v| v.iter().cloned().collect::<Vec<_>>()))
    };
    let sm_cov = || {
        smooths.iter().flat_map(|(_, p)| {
            p.iter()
                .flat_map(|c| c.transpose().iter().cloned().collect::<Vec<_>>())
        })
    };
    for general in [false, true] {
        let f = filter(m, z, &opts(general)).unwrap().filtered;
        let label = if general { "general" } else { "fast" };
        let e = max_rel_err(f.mean().iter().cloned(), ref_mean());
        assert!(e < tol64, "{label} f64 mean: {e:e} (nx={nx})");
        let e = max_rel_err(f.cov().iter().cloned(), ref_cov());
        assert!(e < tol64, "{label} f64 cov: {e:e}");
        let e = max_rel_err(f.loglik().map(|l| l.to_vec()).unwrap(), ref_ll());
        assert!(e < tol64, "{label} f64 loglik: {e:e}");
        let s = smooth_filtered(m, &f).unwrap();
        let e = max_rel_err(s.mean().iter().cloned(), sm_mean());
        assert!(e < tol64, "{label} f64 smoothed mean: {e:e}");
        let e = max_rel_err(s.cov().iter().cloned(), sm_cov());
        assert!(e < tol64, "{label} f64 smoothed cov: {e:e}");

        let z32: Measurements<f32> = z.cast();
        let f32out: Estimates<f32> = filter(m, &z32, &opts(general)).unwrap().filtered;
        let e = max_rel_err(f32out.mean().iter().map(|v| *v as f64), ref_mean());
        assert!(e < tol32, "{label} f32 mean: {e:e}");
        let e = max_rel_err(f32out.cov().iter().map(|v| *v as f64), ref_cov());
        assert!(e < tol32, "{label} f32 cov: {e:e}");
        let s32 = smooth_filtered(m, &f32out).unwrap();
        let e = max_rel_err(s32.mean().iter().map(|v| *v as f64), sm_mean());
        assert!(e < tol32, "{label} f32 smoothed mean: {e:e} (nx={nx})");
    }
}

#[test]
fn random_invariant_models_of_many_sizes() {
    let sizes = [
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 2),
        (6, 2),
        (6, 3),
        (9, 3),
        (5, 4),
        (3, 2),
        (8, 1),
        (2, 2),
    ];
    for (i, &(nx, ny)) in sizes.iter().enumerate() {
        let m = random_model(100 + i as u64, nx, ny);
        // 13 tracks: one full group of lanes and a partial one.
        let z = random_measurements(200 + i as u64, 13, 40, ny, 0.15);
        check_against_textbook(&m, &z, 1e-10, 1e-4);
    }
}

#[test]
fn random_time_varying_models() {
    for (i, &(nx, ny)) in [(1, 1), (4, 2), (7, 3), (9, 4)].iter().enumerate() {
        let m = random_tv_model(300 + i as u64, nx, ny, 30);
        let z = random_measurements(400 + i as u64, 5, 30, ny, 0.2);
        check_against_textbook(&m, &z, 1e-10, 1e-4);
    }
}

#[test]
fn scalar_random_walk_reaches_the_riccati_steady_state() {
    let (q, r) = (0.3, 2.0);
    let m = random_walk(1, q, r, 5.0).unwrap();
    // Steady-state predicted variance solves P = P - P^2/(P + r) + q.
    let pp = 0.5 * (q + (q * q + 4.0 * q * r).sqrt());
    let pf = pp * r / (pp + r);
    let gain = pp / (pp + r);
    let z = random_measurements(7, 3, 200, 1, 0.0);
    for general in [false, true] {
        let f = filter(&m, &z, &opts(general)).unwrap().filtered;
        for b in 0..3 {
            let p_last = f.cov_at(b, 199)[0];
            assert!(
                (p_last - pf).abs() < 1e-12,
                "P = {p_last}, Riccati gives {pf}"
            );
            // The last update moved the mean by gain x innovation.
            let x_prev = f.mean_at(b, 198)[0];
            let innov = z.at(b, 199)[0] - x_prev;
            let x_last = f.mean_at(b, 199)[0];
            assert!((x_last - (x_prev + gain * innov)).abs() < 1e-12);
        }
    }
}

#[test]
fn one_update_by_hand() {
    // nx = 2, ny = 1, step 0 only: an update of the prior.
    let m = Model::new(
        nalgebra::DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 0.0, 1.0]),
        nalgebra::DMatrix::from_row_slice(2, 2, &[0.3, 0.5, 0.5, 1.0]),
        nalgebra::DMatrix::from_row_slice(1, 2, &[1.0, 0.0]),
        nalgebra::DMatrix::from_row_slice(1, 1, &[1.0]),
        nalgebra::DVector::from_vec(vec![1.0, 2.0]),
        nalgebra::DMatrix::from_row_slice(2, 2, &[4.0, 2.0, 2.0, 3.0]),
    )
    .unwrap();
    let z = Measurements::<f64>::new(1, 1, 1, vec![4.0]).unwrap();
    // S = 4 + 1 = 5, K = [4/5, 2/5], y = 3: x = [1 + 12/5, 2 + 6/5] = [3.4, 3.2];
    // P = P - K S K^T = [[4 - 16/5, 2 - 8/5], [., 3 - 4/5]] = [[0.8, 0.4], [0.4, 2.2]];
    // ll = -0.5 (ln 2pi + ln 5 + 9/5).
    for general in [false, true] {
        let f = filter(&m, &z, &opts(general)).unwrap().filtered;
        let want_x: [f64; 2] = [3.4, 3.2];
        let want_p: [f64; 4] = [0.8, 0.4, 0.4, 2.2];
        for i in 0..2 {
            assert!((f.mean()[i] - want_x[i]).abs() < 1e-14, "{:?}", f.mean());
        }
        for i in 0..4 {
            assert!((f.cov()[i] - want_p[i]).abs() < 1e-14, "{:?}", f.cov());
        }
        let ll = -0.5 * ((2.0 * std::f64::consts::PI).ln() + 5f64.ln() + 1.8);
        assert!((f.loglik().unwrap()[0] - ll).abs() < 1e-14);
    }
}

#[test]
fn missing_steps_are_predict_only() {
    let m = random_model(5, 4, 2);
    let mut z = random_measurements(6, 2, 10, 2, 0.0);
    // Only one component missing still makes the whole step missing.
    let (track, step, steps) = (0, 3, 10);
    z.data_mut()[(track * steps + step) * 2 + 1] = f64::NAN;
    for general in [false, true] {
        let o = filter(
            &m,
            &z,
            &FilterOptions::default()
                .with_force_general(true)
                .with_predicted(true),
        )
        .unwrap();
        let f = if general {
            o.filtered.clone()
        } else {
            filter(&m, &z, &opts(false)).unwrap().filtered
        };
        let pred = o.predicted.unwrap();
        assert_eq!(f.loglik().unwrap()[3], 0.0);
        assert!(
            max_rel_err(
                f.mean_at(0, 3).iter().cloned(),
                pred.mean_at(0, 3).iter().cloned()
            ) < 1e-12
        );
        assert!(
            max_rel_err(
                f.cov_at(0, 3).iter().cloned(),
                pred.cov_at(0, 3).iter().cloned()
            ) < 1e-12
        );
        assert_ne!(f.loglik().unwrap()[2], 0.0);
    }
}

#[test]
fn keep_last_equals_the_last_step_and_the_total() {
    let m = random_model(8, 6, 2);
    let z = random_measurements(9, 11, 25, 2, 0.1);
    for general in [false, true] {
        let all = filter(&m, &z, &opts(general)).unwrap().filtered;
        let last = filter(
            &m,
            &z,
            &FilterOptions::default()
                .with_keep(Keep::Last)
                .with_force_general(general),
        )
        .unwrap()
        .filtered;
        assert_eq!(last.steps(), 1);
        for b in 0..11 {
            assert_eq!(last.mean_at(b, 0), all.mean_at(b, 24));
            assert_eq!(last.cov_at(b, 0), all.cov_at(b, 24));
            let total: f64 = all.loglik().unwrap()[b * 25..(b + 1) * 25].iter().sum();
            assert!((last.loglik().unwrap()[b] - total).abs() < 1e-9 * total.abs().max(1.0));
        }
    }
}

#[test]
fn errors_name_track_and_step() {
    let m = random_model(10, 4, 2);
    let z = random_measurements(11, 2, 5, 3, 0.0);
    let e = filter(&m, &z, &opts(false)).unwrap_err().to_string();
    assert!(
        e.contains("3 components") && e.contains("measures 2"),
        "{e}"
    );
    let mut z = random_measurements(11, 2, 5, 2, 0.0);
    let (track, step, steps) = (1, 4, 5);
    z.data_mut()[(track * steps + step) * 2] = f64::INFINITY;
    let e = filter(&m, &z, &opts(false)).unwrap_err().to_string();
    assert!(e.contains("track 1") && e.contains("step 4"), "{e}");
    let tv = random_tv_model(12, 4, 2, 3);
    let z = random_measurements(11, 2, 5, 2, 0.0);
    assert!(filter(&tv, &z, &opts(true)).is_err());
}

#[test]
fn filter_into_reuses_buffers_and_smooth_in_place_matches() {
    let m = random_model(20, 4, 2);
    let z1 = random_measurements(21, 17, 30, 2, 0.1);
    let z2 = random_measurements(22, 9, 12, 2, 0.1);
    for general in [false, true] {
        let o = opts(general);
        // Stale contents from a larger batch must all be overwritten.
        let mut est = filter(&m, &z1, &o).unwrap().filtered;
        kestrel::filter_into(&m, &z2, &o, &mut est).unwrap();
        let fresh = filter(&m, &z2, &o).unwrap().filtered;
        assert_eq!(est, fresh);
        let s = smooth_filtered(&m, &fresh).unwrap();
        kestrel::smooth_in_place(&m, &mut est).unwrap();
        assert_eq!(est, s);
    }
}
