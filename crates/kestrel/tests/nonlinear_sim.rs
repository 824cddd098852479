//! Simulation from nonlinear models (`nonlinear::simulate`): the residuals of the truth
//! against f and of the measurements against h have the model's Q and R as their sample
//! covariances, bearings are wrapped, the same seed gives the same draws, missing steps
//! come at the asked rate, and a model leaving its domain is an error naming the step.

mod nonlinear_common;

use kestrel::model::Prior;
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::nonlinear::{simulate, NonlinearModel};
use nonlinear_common::*;
use std::f64::consts::PI;

/// The sample covariance of the rows of `r` (`n` columns), about zero.
fn cov(r: &[f64], n: usize) -> DMatrix<f64> {
    let m = r.len() / n;
    DMatrix::from_fn(n, n, |i, j| {
        (0..m).map(|k| r[k * n + i] * r[k * n + j]).sum::<f64>() / m as f64
    })
}

#[test]
fn residuals_have_the_models_noise() {
    let m = pendulum(3);
    let (b, t, nx, ny) = (400, 60, m.nx(), m.ny());
    let sim = simulate(&m, b, t, 11, 0.0).unwrap();
    let (x, z) = (&sim.truth, sim.measurements.data());
    let mut regs = Vec::new();
    let (mut wq, mut wr) = (Vec::new(), Vec::new());
    let mut y = vec![0.0; nx.max(ny)];
    for i in 0..b {
        for k in 0..t {
            let xk = &x[(i * t + k) * nx..(i * t + k + 1) * nx];
            if k > 0 {
                let xp = &x[(i * t + k - 1) * nx..(i * t + k) * nx];
                m.f().value(xp, &mut y[..nx], &mut regs);
                wq.extend((0..nx).map(|j| xk[j] - y[j]));
            }
            m.h().value(xk, &mut y[..ny], &mut regs);
            let zk = &z[(i * t + k) * ny..(i * t + k + 1) * ny];
            assert!(zk[1] > -PI && zk[1] <= PI, "bearing not wrapped: {}", zk[1]);
            let mut d: Vec<f64> = (0..ny).map(|j| zk[j] - y[j]).collect();
            d[1] = (d[1] + PI).rem_euclid(2.0 * PI) - PI;
            wr.extend(d);
        }
    }
    // 23,600 and 24,000 draws: a sample variance within 5% of its value (about 4 standard
    // errors), off-diagonal entries within 5% of the diagonal's scale.
    for (name, w, n, want) in [("Q", &wq, nx, m.q()), ("R", &wr, ny, m.r())] {
        let got = cov(w, n);
        for i in 0..n {
            for j in 0..n {
                let scale = (want[(i, i)] * want[(j, j)]).sqrt();
                assert!(
                    (got[(i, j)] - want[(i, j)]).abs() < 0.05 * scale,
                    "{name}[{i},{j}]: sample {} model {}",
                    got[(i, j)],
                    want[(i, j)]
                );
            }
        }
    }
}

#[test]
fn seeds_repeat_and_missing_steps_come_at_their_rate() {
    let m = turn();
    let a = simulate(&m, 50, 40, 5, 0.25).unwrap();
    let b = simulate(&m, 50, 40, 5, 0.25).unwrap();
    assert_eq!(a.truth, b.truth);
    let same = a
        .measurements
        .data()
        .iter()
        .zip(b.measurements.data())
        .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));
    assert!(same, "the same seed must give the same measurements");
    let c = simulate(&m, 50, 40, 6, 0.25).unwrap();
    assert_ne!(a.truth, c.truth, "another seed, other draws");
    let missing = a
        .measurements
        .data()
        .chunks(2)
        .filter(|z| z.iter().all(|v| v.is_nan()))
        .count() as f64
        / 2000.0;
    assert!((missing - 0.25).abs() < 0.04, "missing fraction {missing}");
    // One track alone draws what it draws in a batch (its own generator).
    let one = simulate(&m, 1, 40, 5, 0.25).unwrap();
    assert_eq!(one.truth, a.truth[..40 * 5]);
}

#[test]
fn leaving_the_domain_is_an_error_naming_the_step() {
    let m = NonlinearModel::from_expressions(
        &["x".to_string()],
        &["x - 1".to_string()],
        &["sqrt(x)".to_string()],
        DMatrix::identity(1, 1) * 1e-12,
        DMatrix::identity(1, 1) * 1e-12,
        &[],
        &[],
        Prior {
            x0: DVector::from_vec(vec![2.5]),
            p0: DMatrix::identity(1, 1) * 1e-12,
        },
    )
    .unwrap();
    let Err(e) = simulate(&m, 2, 10, 0, 0.0) else {
        panic!("sqrt of a negative state must fail");
    };
    let e = e.to_string();
    assert!(e.contains("measurements") && e.contains("step 3"), "{e}");
}
