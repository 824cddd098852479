//! Shared by the nonlinear family's GPU and kernel-emulation tests: three models (a
//! pendulum-like state with a range-bearing sensor whose bearing crosses +-pi, the
//! coordinated turn with an estimated turn rate seen by a radar, a model using every
//! function of the expression language) and data simulated from them.
#![allow(dead_code)]

use kestrel::model::Prior;
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::nonlinear::{ImmModel, Measure, NonlinearModel, TurnRate};
use kestrel::{Measurements, Real};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

pub fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

pub fn spd(rng: &mut impl Rng, n: usize, scale: f64) -> DMatrix<f64> {
    let a = DMatrix::from_fn(n, n, |_, _| rng.gen_range(-1.0..1.0));
    (&a * a.transpose() + DMatrix::identity(n, n)) * scale
}

pub fn pendulum(seed: u64) -> NonlinearModel {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let c = |rng: &mut rand::rngs::StdRng, lo: f64, hi: f64| rng.gen_range(lo..hi);
    let consts = vec![
        ("a".to_string(), c(&mut rng, 0.5, 2.0)),
        ("b".to_string(), c(&mut rng, 0.5, 0.95)),
        ("c".to_string(), c(&mut rng, -0.3, 0.3)),
        ("d".to_string(), c(&mut rng, -0.3, 0.3)),
        ("dt".to_string(), c(&mut rng, 0.05, 0.2)),
    ];
    let q = spd(&mut rng, 3, 0.002);
    let p0 = spd(&mut rng, 3, 0.05);
    NonlinearModel::from_expressions(
        &s(&["x", "v", "u"]),
        &s(&[
            "x + dt * v",
            "v - dt * a * sin(x) + c * u",
            "b * u + d * cos(v)",
        ]),
        // The sensor sits right of the state's range: the bearing crosses +-pi.
        &s(&["hypot(x - 3, u)", "atan2(u, x - 3)"]),
        q,
        DMatrix::from_diagonal(&DVector::from_vec(vec![0.05, 0.01])),
        &consts,
        &[1],
        Prior {
            x0: DVector::from_vec(vec![1.0, 0.2, 0.3]),
            p0,
        },
    )
    .unwrap()
}

pub fn turn() -> NonlinearModel {
    NonlinearModel::coordinated_turn(
        1.0,
        0.5,
        TurnRate::Estimated { q_omega: 1e-4 },
        &Measure::RangeBearing {
            radar: [0.0, 0.0],
            r_range: 25.0,
            r_bearing: 1e-5,
        },
        Prior {
            x0: DVector::from_vec(vec![1000.0, -10.0, 500.0, 5.0, 0.02]),
            p0: DMatrix::from_diagonal(&DVector::from_vec(vec![100.0, 4.0, 100.0, 4.0, 1e-3])),
        },
    )
    .unwrap()
}

pub fn every_function() -> NonlinearModel {
    NonlinearModel::from_expressions(
        &s(&["x", "v"]),
        &s(&[
            "x + 0.1 * tanh(v) + 0.01 * sinh(v) - 0.01 * atan(x)",
            "0.9 * v + 0.05 * exp(-x^2) - 0.01 * abs(x) + 0.01 * cosh(0.1 * x) + 0.001 * x^3",
        ]),
        &s(&[
            "max(x, -5) + min(v, 5) + sqrt(1 + x^2) + 0.1 * log(2 + v^2)",
            "tan(0.1 * x) + asin(0.1 * tanh(v)) + acos(0.1 * tanh(x)) + (1 + v^2)^0.5",
        ]),
        DMatrix::identity(2, 2) * 0.01,
        DMatrix::identity(2, 2) * 0.1,
        &[],
        &[],
        Prior {
            x0: DVector::from_vec(vec![0.3, -0.2]),
            p0: DMatrix::identity(2, 2) * 0.2,
        },
    )
    .unwrap()
}

/// `tracks` tracks of `t` steps simulated from `m`, about one step in ten missing.
pub fn data(m: &NonlinearModel, tracks: usize, t: usize, seed: u64) -> Measurements<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (nx, ny) = (m.nx(), m.ny());
    let lq = m.q().clone().cholesky().unwrap().l();
    let lr = m.r().clone().cholesky().unwrap().l();
    let lp = m.prior().p0.clone().cholesky().unwrap().l();
    let mut regs = Vec::new();
    let mut out = Vec::with_capacity(tracks * t * ny);
    for _ in 0..tracks {
        let w = DVector::from_fn(nx, |_, _| rng.sample::<f64, _>(StandardNormal));
        let mut x = &m.prior().x0 + &lp * w;
        for k in 0..t {
            if k > 0 {
                let mut y = vec![0.0; nx];
                m.f().value(x.as_slice(), &mut y, &mut regs);
                let w = DVector::from_fn(nx, |_, _| rng.sample::<f64, _>(StandardNormal));
                x = DVector::from_vec(y) + &lq * w;
            }
            let mut z = vec![0.0; ny];
            m.h().value(x.as_slice(), &mut z, &mut regs);
            let v = DVector::from_fn(ny, |_, _| rng.sample::<f64, _>(StandardNormal));
            let z = DVector::from_vec(z) + &lr * v;
            if rng.gen::<f64>() < 0.1 {
                out.extend(std::iter::repeat_n(f64::NAN, ny));
            } else {
                out.extend(z.iter());
            }
        }
    }
    Measurements::new(tracks, t, ny, out).unwrap()
}

pub fn cast<T: Real>(z: &Measurements<f64>) -> Measurements<T> {
    let v = z.data().iter().map(|&x| T::of(x)).collect();
    Measurements::new(z.tracks(), z.steps(), z.ny(), v).unwrap()
}

/// Asserts that a device or kernel output `got` equals the CPU's `want` within `tol`,
/// relative to each entry and, for entries near 0, to the array's scale; prints the worst
/// relative difference.
pub fn assert_close<T: Real>(what: &str, got: &[T], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        let d = (x.to_f64() - y).abs();
        assert!(
            d <= tol * (1.0 + y.abs() + 1e-2 * scale),
            "{what}[{i}]: got {} want {y}",
            x.to_f64()
        );
        worst = worst.max(d / (1.0 + y.abs()));
    }
    eprintln!("{what}: worst relative difference {worst:.2e}");
}

/// IMMs of three modes: pendulums of three seeds (the bearing crossing +-pi), and a
/// radar's coordinated turns at rates 0 and +-0.05 (state [px, vx, py, vy]).
pub fn imms() -> Vec<(&'static str, ImmModel)> {
    let tr = DMatrix::from_row_slice(3, 3, &[0.9, 0.05, 0.05, 0.1, 0.85, 0.05, 0.2, 0.1, 0.7]);
    let mu0 = DVector::from_vec(vec![0.6, 0.3, 0.1]);
    let p = pendulum(1);
    let pend = ImmModel::new(
        vec![p.clone(), pendulum(2), pendulum(3)],
        tr.clone(),
        mu0.clone(),
        p.prior().clone(),
    )
    .unwrap();
    let prior = Prior {
        x0: DVector::from_vec(vec![1000.0, -10.0, 500.0, 5.0]),
        p0: DMatrix::from_diagonal(&DVector::from_vec(vec![100.0, 4.0, 100.0, 4.0])),
    };
    let meas = Measure::RangeBearing {
        radar: [0.0, 0.0],
        r_range: 25.0,
        r_bearing: 1e-5,
    };
    let modes = [0.0, 0.05, -0.05]
        .map(|w| {
            NonlinearModel::coordinated_turn(1.0, 0.5, TurnRate::Known(w), &meas, prior.clone())
                .unwrap()
        })
        .to_vec();
    let radar = ImmModel::new(modes, tr, mu0, prior).unwrap();
    vec![("pendulum imm", pend), ("radar imm", radar)]
}
