//! Property tests of the CPU filter.

mod common;

use common::*;
use kestrel::kalman::{filter, FilterOptions};
use kestrel::model::constant_velocity;
use kestrel::{Measurements, Model};
use proptest::prelude::*;

fn sizes() -> impl Strategy<Value = (usize, usize)> {
    prop::sample::select(vec![
        (1, 1),
        (2, 1),
        (4, 2),
        (6, 2),
        (6, 3),
        (9, 3),
        (3, 2),
        (5, 1),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn batch_equals_each_track_alone(seed in 0u64..1_000_000, (nx, ny) in sizes(), tracks in 1usize..20, steps in 1usize..30, general in any::<bool>()) {
        let m: Model = random_model(seed, nx, ny);
        let z = random_measurements(seed + 1, tracks, steps, ny, 0.2);
        let opts = FilterOptions::default().with_force_general(general);
        let all = filter(&m, &z, &opts).unwrap().filtered;
        for b in 0..tracks {
            let one = Measurements::new(1, steps, ny, z.track(b).to_vec()).unwrap();
            let f = filter(&m, &one, &opts).unwrap().filtered;
            prop_assert_eq!(f.mean(), &all.mean()[b * steps * nx..(b + 1) * steps * nx]);
            prop_assert_eq!(f.cov(), &all.cov()[b * steps * nx * nx..(b + 1) * steps * nx * nx]);
            prop_assert_eq!(f.loglik().unwrap(), &all.loglik().unwrap()[b * steps..(b + 1) * steps]);
        }
    }

    #[test]
    fn total_loglik_is_the_sum_of_steps(seed in 0u64..1_000_000, (nx, ny) in sizes(), tracks in 1usize..10, steps in 1usize..40) {
        let m = random_model(seed, nx, ny);
        let z = random_measurements(seed + 7, tracks, steps, ny, 0.3);
        let f = filter(&m, &z, &FilterOptions::default()).unwrap().filtered;
        let ll = f.loglik().unwrap();
        let mut sum = 0.0;
        for v in ll {
            prop_assert!(v.is_finite());
            sum += v;
        }
        prop_assert!((f.total_loglik() - sum).abs() <= 1e-9 * sum.abs().max(1.0));
        // And it equals the textbook filter's sum, track by track.
        for b in 0..tracks {
            let t = textbook_filter(&m, z.track(b), steps);
            let want: f64 = t.loglik.iter().sum();
            let got: f64 = ll[b * steps..(b + 1) * steps].iter().sum();
            prop_assert!((want - got).abs() <= 1e-9 * want.abs().max(1.0), "{} vs {}", got, want);
        }
    }
}

/// Covariances stay symmetric positive definite over 10^5 steps in f32.
#[test]
fn f32_covariances_stay_positive_definite_over_1e5_steps() {
    let m = constant_velocity(2, 0.1, 1.0, 0.5, 10.0).unwrap();
    let steps = 100_000;
    let sim = kestrel::sim::simulate(&m, 3, steps, 99, 0.1).unwrap();
    let z32: Measurements<f32> = sim.measurements.cast();
    for general in [false, true] {
        let f = filter(
            &m,
            &z32,
            &FilterOptions::default().with_force_general(general),
        )
        .unwrap()
        .filtered;
        for b in 0..3 {
            for k in 0..steps {
                let c = f.cov_at(b, k);
                let mut a: Vec<f64> = c.iter().map(|v| *v as f64).collect();
                for i in 0..4 {
                    for j in 0..4 {
                        assert_eq!(
                            c[i * 4 + j],
                            c[j * 4 + i],
                            "asymmetric at track {b}, step {k}"
                        );
                    }
                }
                assert!(
                    kestrel::linalg::cholesky_in_place(&mut a, 4),
                    "not positive definite at track {b}, step {k}"
                );
            }
        }
    }
}
