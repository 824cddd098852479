//! What the tracker needs from the per-step API (`kalman::BatchState`): the PDA mixture
//! update against the moments of the Gaussian mixture it summarises, growth that keeps
//! the targets, and cheap adds with a shared prior covariance.

use kestrel::kalman::{BatchState, Mixture};
use kestrel::model::constant_velocity;
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};

/// One Kalman update in nalgebra (the textbook form, with an explicit inverse).
fn kf(
    x: &DVector<f64>,
    p: &DMatrix<f64>,
    h: &DMatrix<f64>,
    r: &DMatrix<f64>,
    z: &DVector<f64>,
) -> (DVector<f64>, DMatrix<f64>) {
    let s = h * p * h.transpose() + r;
    let k = p * h.transpose() * s.try_inverse().unwrap();
    let x1 = x + &k * (z - h * x);
    let p1 = p - &k * h * p;
    (x1, p1)
}

#[test]
fn mixture_update_equals_the_moments_of_the_mixture() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(38);
    let model = constant_velocity(2, 1.0, 0.5, 4.0, 10.0).unwrap();
    let h = model.h().clone();
    let r = model.r().clone();
    let cap = 40;
    let mut st = BatchState::<f64>::new(&model, cap).unwrap();
    let mut priors = Vec::new();
    for _ in 0..cap {
        let a = DMatrix::from_fn(4, 4, |_, _| rng.gen_range(-1.0..1.0));
        let p = &a * a.transpose() + DMatrix::identity(4, 4) * 0.3;
        let x = DVector::from_fn(4, |_, _| rng.gen_range(-5.0..5.0));
        let pr: Vec<f64> = (0..16).map(|k| p[(k / 4, k % 4)]).collect();
        st.add_with_prior(x.as_slice(), &pr).unwrap();
        priors.push((x, p));
    }
    // Slot b gets b % 4 candidates (0: no update), weights summing to below 1.
    let mut start = vec![0usize];
    let (mut z, mut beta) = (Vec::new(), Vec::new());
    for b in 0..cap {
        let m = b % 4;
        let w: Vec<f64> = (0..m).map(|_| rng.gen_range(0.05..1.0)).collect();
        let total: f64 = w.iter().sum::<f64>() + rng.gen_range(0.0..1.0);
        for wk in w {
            beta.push(wk / total);
            z.extend([rng.gen_range(-8.0..8.0), rng.gen_range(-8.0..8.0)]);
        }
        start.push(beta.len());
    }
    st.update_mixture(&Mixture {
        start: &start,
        z: &z,
        beta: &beta,
    })
    .unwrap();
    for b in 0..cap {
        let (x0, p0) = &priors[b];
        let rows = start[b]..start[b + 1];
        // The mixture: "no detection" (the prediction) with beta_0, each candidate's
        // update with beta_j; its mean and covariance (moment matching).
        let mut parts = vec![(
            1.0 - beta[rows.clone()].iter().sum::<f64>(),
            x0.clone(),
            p0.clone(),
        )];
        for k in rows.clone() {
            let zk = DVector::from_column_slice(&z[2 * k..2 * k + 2]);
            let (x1, p1) = kf(x0, p0, &h, &r, &zk);
            parts.push((beta[k], x1, p1));
        }
        let mean: DVector<f64> = parts
            .iter()
            .fold(DVector::zeros(4), |a, (w, x, _)| a + x * *w);
        let cov: DMatrix<f64> = parts.iter().fold(DMatrix::zeros(4, 4), |a, (w, x, p)| {
            let d = x - &mean;
            a + (p + &d * d.transpose()) * *w
        });
        let got_x = st.mean(b).unwrap();
        let got_p = st.cov(b).unwrap();
        for i in 0..4 {
            assert!(
                (got_x[i] - mean[i]).abs() < 1e-9 * (1.0 + mean[i].abs()),
                "slot {b} x{i}: {} vs {}",
                got_x[i],
                mean[i]
            );
            for j in 0..4 {
                let want = cov[(i, j)];
                assert!(
                    (got_p[i * 4 + j] - want).abs() < 1e-9 * (1.0 + want.abs()),
                    "slot {b} P{i}{j}: {} vs {want}",
                    got_p[i * 4 + j]
                );
            }
        }
        if rows.is_empty() {
            assert_eq!(st.loglik(b), Some(0.0));
        }
    }
}

#[test]
fn mixture_update_refuses_bad_weights() {
    let model = constant_velocity(1, 1.0, 0.5, 4.0, 10.0).unwrap();
    let mut st = BatchState::<f64>::new(&model, 2).unwrap();
    st.add().unwrap();
    let z = [1.0, 2.0];
    for (start, beta) in [
        (&[0usize, 2, 2][..], &[0.7, 0.6][..]),
        (&[0, 2, 2], &[-0.1, 0.5]),
        (&[0, 2, 2], &[f64::NAN, 0.5]),
        (&[0, 2], &[0.5, 0.5]),
        (&[0, 3, 2], &[0.5, 0.5]),
    ] {
        assert!(
            st.update_mixture(&Mixture { start, z: &z, beta }).is_err(),
            "{start:?} {beta:?}"
        );
    }
    let inf = [f64::INFINITY, 0.0];
    assert!(st
        .update_mixture(&Mixture {
            start: &[0, 2, 2],
            z: &inf,
            beta: &[0.5, 0.5]
        })
        .is_err());
}

#[test]
fn reserve_keeps_targets_and_add_with_mean_uses_the_prior() {
    let model = constant_velocity(2, 1.0, 0.5, 4.0, 10.0).unwrap();
    let mut st = BatchState::<f64>::new(&model, 2).unwrap();
    let p0: Vec<f64> = (0..16)
        .map(|k| if k % 5 == 0 { 2.0 + k as f64 } else { 0.0 })
        .collect();
    st.set_prior(&[0.0; 4], &p0).unwrap();
    let a = st.add_with_mean(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    let b = st.add_with_mean(&[5.0, 6.0, 7.0, 8.0]).unwrap();
    assert!(st.add_with_mean(&[0.0; 4]).is_err());
    st.predict().unwrap();
    let before: Vec<Vec<f64>> = [a, b]
        .iter()
        .map(|&s| st.mean(s).unwrap().to_vec())
        .collect();
    st.reserve(5).unwrap();
    assert_eq!(st.capacity(), 5);
    assert_eq!(st.len(), 2);
    assert_eq!(st.mean(a).unwrap(), &before[0][..]);
    assert_eq!(st.mean(b).unwrap(), &before[1][..]);
    st.remove(a).unwrap();
    assert_eq!(st.add_with_mean(&[9.0; 4]).unwrap(), a);
    assert_eq!(st.cov(a).unwrap(), &p0[..]);
    assert_eq!(st.add_with_mean(&[9.0; 4]).unwrap(), 2);
    assert!(st.add_with_mean(&[f64::NAN; 4]).is_err());
    assert!(st.add_with_mean(&[1.0; 3]).is_err());
    // A prior that is not positive semi-definite is refused once, at set_prior.
    let mut bad = p0.clone();
    bad[0] = -1.0;
    assert!(st.set_prior(&[0.0; 4], &bad).is_err());
    // Every slot filled after growth, and the filter runs over the grown batch.
    st.add_with_mean(&[9.0; 4]).unwrap();
    st.add_with_mean(&[9.0; 4]).unwrap();
    assert_eq!(st.len(), 5);
    st.predict().unwrap();
    st.measure(None).unwrap();
    let z = vec![1.0; 10];
    st.update(&z, None, None).unwrap();
    assert!(st.means().iter().all(|v| v.is_finite()));
}
