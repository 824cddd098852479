//! The windowed ("splash") filter: equal to a straightforward implementation of Lin,
//! Moore & Russell's Algorithm 2 written here (one small Kalman filter per step, explicit
//! inverses), its error against `exact` within the bound and falling with the window,
//! `window:auto`'s choice, the steady-state exact filter, and bad input.

use kestrel::likelihood::{
    bound::bound_curve, choose_window, data_scale, loglik, window_bound, Method, Options,
};
use kestrel::model::{ar, random_walk};
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model};
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};

/// Predicted `(x, P)` at the first step, `z` the measurements `[steps][ny]` from there
/// to the step whose log-likelihood is returned (the last); the textbook filter.
fn textbook(model: &Model, x0: DVector<f64>, p0: DMatrix<f64>, z: &[DVector<f64>]) -> f64 {
    let (mut x, mut p) = (x0, p0);
    let mut ll = 0.0;
    for (i, zi) in z.iter().enumerate() {
        if i > 0 {
            x = model.f() * x + model.u();
            p = model.f() * p * model.f().transpose() + model.q();
        }
        if zi.iter().any(|v| v.is_nan()) {
            ll = 0.0;
            continue;
        }
        let s = model.h() * &p * model.h().transpose() + model.r();
        let si = s.clone().try_inverse().unwrap();
        let y = zi - model.h() * &x - model.d();
        let k = &p * model.h().transpose() * &si;
        let ny = zi.len() as f64;
        ll = -0.5 * (ny * (2.0 * std::f64::consts::PI).ln() + s.determinant().ln())
            - 0.5 * (y.transpose() * &si * &y)[(0, 0)];
        x = &x + &k * y;
        let ikh = DMatrix::identity(x.len(), x.len()) - &k * model.h();
        p = &ikh * p * ikh.transpose() + &k * model.r() * k.transpose();
    }
    ll
}

/// Algorithm 2 with the convention for the first steps: step `t` of one track.
fn algorithm2(model: &Model, z: &[DVector<f64>], n: usize, vague: f64, t: usize) -> f64 {
    let nx = model.nx();
    if t + 1 < n {
        return textbook(
            model,
            model.prior().x0.clone(),
            model.prior().p0.clone(),
            &z[..=t],
        );
    }
    let s = t + 1 - n;
    textbook(
        model,
        DVector::zeros(nx),
        DMatrix::identity(nx, nx) * vague,
        &z[s..=t],
    )
}

fn random_model(rng: &mut rand::rngs::StdRng, nx: usize, ny: usize) -> Model {
    let a = DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-1.0..1.0));
    let f = &a
        * (0.9
            / a.complex_eigenvalues()
                .iter()
                .fold(0f64, |m, v| m.max(v.norm())));
    let g = DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-1.0..1.0));
    let q = &g * g.transpose() * 0.3 + DMatrix::identity(nx, nx) * 0.05;
    let h = DMatrix::from_fn(ny, nx, |_, _| rng.gen_range(-1.0..1.0));
    let e = DMatrix::from_fn(ny, ny, |_, _| rng.gen_range(-1.0..1.0));
    let r = &e * e.transpose() * 0.2 + DMatrix::identity(ny, ny) * 0.3;
    Model::new(
        f,
        q,
        h,
        r,
        DVector::from_fn(nx, |_, _| rng.gen_range(-1.0..1.0)),
        DMatrix::identity(nx, nx) * 2.0,
    )
    .unwrap()
    .with_offsets(
        DVector::from_fn(nx, |_, _| rng.gen_range(-0.5..0.5)),
        DVector::from_fn(ny, |_, _| rng.gen_range(-0.5..0.5)),
    )
    .unwrap()
}

fn steps_of(z: &Measurements<f64>, b: usize) -> Vec<DVector<f64>> {
    (0..z.steps())
        .map(|k| DVector::from_column_slice(z.at(b, k)))
        .collect()
}

#[test]
fn window_equals_algorithm2() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(10);
    let models = [
        ar(&[0.6, -0.25, 0.1], 1.0, 0.4, 3.0)
            .unwrap()
            .with_offsets(
                DVector::from_vec(vec![0.2, 0.0, 0.0]),
                DVector::from_vec(vec![0.5]),
            )
            .unwrap(),
        random_walk(2, 0.5, 1.0, 4.0).unwrap(),
        random_model(&mut rng, 4, 2),
        random_model(&mut rng, 3, 1),
    ];
    let vague = 1e4;
    for (mi, model) in models.iter().enumerate() {
        let sim = simulate(model, 3, 90, 7 + mi as u64, 0.0).unwrap();
        let mut z = sim.measurements;
        let ny = z.ny();
        // Track 0: none missing; track 1: every 9th; track 2: at random (with a run).
        for k in (4..z.steps()).step_by(9) {
            let t = z.steps();
            z.data_mut()[(t + k) * ny..(t + k + 1) * ny].fill(f64::NAN);
        }
        for k in 0..z.steps() {
            if rng.gen_bool(0.12) || (40..43).contains(&k) {
                let t = z.steps();
                z.data_mut()[(2 * t + k) * ny] = f64::NAN;
            }
        }
        for n in [1usize, 2, 5, 13, 40, 200] {
            let got = loglik(
                Device::Cpu,
                model,
                &z,
                Method::Window(n),
                &Options::default().with_vague(vague),
            )
            .unwrap();
            for b in 0..z.tracks() {
                let zs = steps_of(&z, b);
                for t in 0..z.steps() {
                    let want = algorithm2(model, &zs, n, vague, t);
                    let g = got.values[b * z.steps() + t];
                    assert!(
                        (g - want).abs() <= 1e-10 * want.abs().max(1.0),
                        "model {mi}, N = {n}, track {b}, step {t}: {g} vs {want}"
                    );
                }
            }
        }
    }
}

fn sunspot_model() -> Model {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/likelihood/ar10_sunspots.toml");
    kestrel::model::load_model(path).unwrap()
}

/// Per-step `|window:N - exact|`, worst over all steps.
fn window_error(model: &Model, z: &Measurements<f64>, n: usize, vague: f64) -> f64 {
    let o = Options::default().with_vague(vague);
    let exact = loglik(Device::Cpu, model, z, Method::Exact, &o).unwrap();
    let w = loglik(Device::Cpu, model, z, Method::Window(n), &o).unwrap();
    exact
        .values
        .iter()
        .zip(&w.values)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

#[test]
fn error_within_the_bound_and_falling_with_the_window() {
    for (name, model) in [
        ("ar10 sunspots", sunspot_model()),
        ("random walk 2-D", random_walk(2, 1.0, 2.0, 5.0).unwrap()),
        (
            "ar(2)",
            ar(&[1.2, -0.5], 1.0, 3.0, 1.0)
                .unwrap()
                .with_stationary_prior()
                .unwrap(),
        ),
    ] {
        let z = simulate(&model, 4, 3000, 3, 0.0).unwrap().measurements;
        let scale = data_scale(&model, &z);
        let vague = 1e6;
        let curve = bound_curve(&model, vague, scale, 400).unwrap();
        let exact = loglik(Device::Cpu, &model, &z, Method::Exact, &Options::default()).unwrap();
        let rounding = 64.0 * f64::EPSILON * exact.values.iter().fold(0f64, |m, v| m.max(v.abs()));
        let mut prev_err = f64::INFINITY;
        let mut falls = 0;
        for n in [2usize, 4, 8, 16, 32, 64, 128] {
            let err = window_error(&model, &z, n, vague);
            let b = window_bound(&model, n, vague, scale).unwrap();
            assert_eq!(b, curve[n - 1], "{name}: one walk gives every N");
            eprintln!("{name}: N = {n:4}: error {err:.3e}, bound {b:.3e}");
            // The bound is for exact arithmetic; the two f64 computations themselves
            // differ by rounding (a few ulps of the largest log-likelihood).
            assert!(
                err <= b + rounding,
                "{name}: N = {n}: error {err:e} above the bound {b:e}"
            );
            if err < 0.5 * prev_err {
                falls += 1;
            }
            if err > 1e-13 {
                prev_err = err;
            }
        }
        assert!(falls >= 2, "{name}: the error should fall with N");
        // window:auto meets its tolerance, and one step shorter would not be certified.
        for tol in [1e-3, 1e-6] {
            let c = choose_window(&model, tol, vague, scale).unwrap();
            assert!(c.bound <= tol);
            assert!(
                c.window == 1 || curve[c.window - 2] > tol,
                "{name}: not the smallest"
            );
            let err = window_error(&model, &z, c.window, vague);
            eprintln!(
                "{name}: tol {tol:e}: N = {}, bound {:.2e}, error {err:.2e}, rho {:.4}",
                c.window, c.bound, c.rho
            );
            assert!(err <= tol, "{name}: window:auto:{tol} error {err:e}");
        }
    }
}

#[test]
fn steady_state_exact_is_exact_to_its_tolerance() {
    let model = sunspot_model();
    let mut z = simulate(&model, 2, 4000, 5, 0.0).unwrap().measurements;
    // Missing values far enough apart for the covariance to settle in between.
    for k in (10..z.steps()).step_by(400) {
        z.data_mut()[k] = f64::NAN;
    }
    let exact = loglik(Device::Cpu, &model, &z, Method::Exact, &Options::default()).unwrap();
    for tol in [1e-9, 1e-12] {
        let o = Options::default().with_steady(Some(tol));
        let fast = loglik(Device::Cpu, &model, &z, Method::Exact, &o).unwrap();
        let worst = exact
            .values
            .iter()
            .zip(&fast.values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        eprintln!("steady tol {tol:e}: worst difference {worst:.2e}");
        assert!(
            worst > 0.0 || tol < 1e-11,
            "the switch should change the rounding"
        );
        assert!(worst <= 1e3 * tol, "tol {tol:e}: {worst:e}");
        assert_eq!(fast.values[10], 0.0);
    }
}

/// A stationary prior repeats itself through a missing first measurement (no update):
/// that is not the filter's fixed point, and the switch must wait for an update.
#[test]
fn steady_state_waits_for_an_update() {
    let model = kestrel::model::ar(&[1.2, -0.4, 0.1], 3.0, 0.2, 1.0)
        .unwrap()
        .with_stationary_prior()
        .unwrap();
    let mut z = simulate(&model, 1, 300, 3, 0.0).unwrap().measurements;
    z.data_mut()[0] = f64::NAN;
    z.data_mut()[150] = f64::NAN;
    let exact = loglik(Device::Cpu, &model, &z, Method::Exact, &Options::default()).unwrap();
    let o = Options::default().with_steady(Some(1e-9));
    let fast = loglik(Device::Cpu, &model, &z, Method::Exact, &o).unwrap();
    for (k, (a, b)) in exact.values.iter().zip(&fast.values).enumerate() {
        assert!((a - b).abs() <= 1e-6, "step {k}: exact {a} vs steady {b}");
    }
}

#[test]
fn f32_window_agrees_with_f64() {
    let model = sunspot_model();
    let mut z = simulate(&model, 2, 2000, 9, 0.0).unwrap().measurements;
    for k in (3..z.steps()).step_by(20) {
        let t = z.steps();
        z.data_mut()[t + k] = f64::NAN;
    }
    let z32: Measurements<f32> = z.cast();
    for n in [12usize, 60] {
        let a = loglik(
            Device::Cpu,
            &model,
            &z,
            Method::Window(n),
            &Options::default(),
        )
        .unwrap();
        let b = loglik(
            Device::Cpu,
            &model,
            &z32,
            Method::Window(n),
            &Options::default(),
        )
        .unwrap();
        for (x, y) in a.values.iter().zip(&b.values) {
            assert!(
                (x - *y as f64).abs() <= 1e-3 * x.abs().max(1.0),
                "{x} vs {y}"
            );
        }
    }
}

#[test]
fn bad_input() {
    for (s, want) in [
        ("window:0", "at least 1"),
        ("window:-3", "at least 1"),
        ("window:x", "not an integer"),
        ("window:auto:0", "positive"),
        ("window:auto:-1e-3", "positive"),
        ("window:auto:abc", "not a number"),
        ("splash", "expected exact"),
    ] {
        let e = s.parse::<Method>().unwrap_err().to_string();
        assert!(e.contains(want), "{s}: {e}");
    }
    assert_eq!(
        "window:auto".parse::<Method>().unwrap(),
        Method::WindowAuto(1e-6)
    );
    assert_eq!(
        "window:auto:1e-4".parse::<Method>().unwrap(),
        Method::WindowAuto(1e-4)
    );
    assert_eq!("window:25".parse::<Method>().unwrap(), Method::Window(25));
    // Velocity observed, position unobservable and unstable: the exact covariance grows
    // without bound and no window is certified.
    let model = Model::new(
        DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 0.0, 1.0]),
        DMatrix::identity(2, 2),
        DMatrix::from_row_slice(1, 2, &[0.0, 1.0]),
        DMatrix::identity(1, 1),
        DVector::zeros(2),
        DMatrix::identity(2, 2),
    )
    .unwrap();
    let z = Measurements::new(1, 50, 1, vec![0.5; 50]).unwrap();
    let e = loglik(
        Device::Cpu,
        &model,
        &z,
        Method::WindowAuto(1e-6),
        &Options::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("does not converge") && e.contains("exact"),
        "{e}"
    );
    // The vague variance must be positive.
    let e = loglik(
        Device::Cpu,
        &random_walk(1, 1.0, 1.0, 1.0).unwrap(),
        &z,
        Method::WindowAuto(1e-6),
        &Options::default().with_vague(-1.0),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("vague"), "{e}");
}

/// With missing values `window:auto` lengthens the window (a rule of thumb, see
/// `widen_for_missing`): its error stays within the tolerance for missing values every
/// 20 steps (the seed's setting) and at random.
#[test]
fn window_auto_with_missing_values() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for (name, model) in [
        ("ar10 sunspots", sunspot_model()),
        ("random walk 2-D", random_walk(2, 1.0, 2.0, 5.0).unwrap()),
    ] {
        let mut z = simulate(&model, 3, 1000, 11, 0.0).unwrap().measurements;
        let ny = z.ny();
        for k in (7..z.steps()).step_by(20) {
            z.data_mut()[k * ny..(k + 1) * ny].fill(f64::NAN);
        }
        for k in z.steps()..z.tracks() * z.steps() {
            if rng.gen_bool(0.08) {
                z.data_mut()[k * ny..(k + 1) * ny].fill(f64::NAN);
            }
        }
        let exact = loglik(Device::Cpu, &model, &z, Method::Exact, &Options::default()).unwrap();
        for tol in [1e-4, 1e-8] {
            let w = loglik(
                Device::Cpu,
                &model,
                &z,
                Method::WindowAuto(tol),
                &Options::default(),
            )
            .unwrap();
            let err = exact
                .values
                .iter()
                .zip(&w.values)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            eprintln!(
                "{name}: tol {tol:e}: window {:?}, error {err:.2e}",
                w.window
            );
            assert!(err <= tol, "{name}: tol {tol:e}: error {err:e}");
        }
    }
}

/// The seismic application: a known template arriving in AR(10) noise. The likelihood
/// of an arrival hypothesis is that of `z - template` under the noise model; the
/// statistic `sum ll(z - s) - sum ll(z)` is large when the template is there and
/// negative when it is not, with every method.
#[test]
fn signal_plus_ar_noise() {
    let model = sunspot_model();
    let steps = 3000;
    let noise = simulate(&model, 1, steps, 8, 0.0).unwrap().measurements;
    let template: Vec<f64> = (0..steps)
        .map(|k| {
            if (1000..1300).contains(&k) {
                let u = (k - 1000) as f64;
                80.0 * (-u / 60.0).exp() * (u * 0.35).sin()
            } else {
                0.0
            }
        })
        .collect();
    let with: Vec<f64> = noise
        .data()
        .iter()
        .zip(&template)
        .map(|(n, s)| n + s)
        .collect();
    let minus = |z: &[f64]| -> Measurements<f64> {
        Measurements::new(
            1,
            steps,
            1,
            z.iter().zip(&template).map(|(a, s)| a - s).collect(),
        )
        .unwrap()
    };
    let total = |z: &Measurements<f64>, m: Method| -> f64 {
        loglik(Device::Cpu, &model, z, m, &Options::default())
            .unwrap()
            .total(0)
    };
    let arrived = Measurements::new(1, steps, 1, with.clone()).unwrap();
    for m in [Method::Exact, Method::WindowAuto(1e-6), Method::Parallel] {
        let present = total(&minus(&with), m) - total(&arrived, m);
        let absent = total(&minus(noise.data()), m) - total(&noise, m);
        eprintln!("{m:?}: statistic with the arrival {present:.2}, without {absent:.2}");
        assert!(
            present > 20.0 && absent < -20.0,
            "{m:?}: {present} / {absent}"
        );
    }
}
