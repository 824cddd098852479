//! The nonlinear family against straightforward textbook implementations (explicit
//! inverses, hand-written Jacobians) on random nonlinear models; the extended and
//! sigma-point filters on linear models against kestrel's Kalman filter; the coordinated
//! turn through zero turn rate. nonlinear_models.rs has the rest (Jacobians, IMM, the
//! pendulum, model files).

use super::nonlinear_models::check_jacobian;
use kestrel::model::{constant_velocity, Prior};
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::nonlinear::{
    estimate_on, FilterKind, Measure, NonlinearJob, NonlinearModel, NonlinearOptions,
    NonlinearProblem, NonlinearSmoother, TurnRate,
};
use kestrel::{Device, Measurements};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::f64::consts::PI;

type V = DVector<f64>;
type M = DMatrix<f64>;

pub(crate) fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

pub(crate) fn wrap(a: f64) -> f64 {
    let r = a - 2.0 * PI * ((a + PI) / (2.0 * PI)).floor();
    if r == -PI {
        PI
    } else {
        r
    }
}

fn random_spd(rng: &mut impl Rng, n: usize, scale: f64) -> M {
    let a = M::from_fn(n, n, |_, _| rng.gen_range(-1.0..1.0));
    (&a * a.transpose() + M::identity(n, n)) * scale
}

/// A random nonlinear model with a hand-written twin: a pendulum-like state of 3 and a
/// range-bearing measurement from a sensor (the bearing an angle).
pub(crate) struct Random {
    pub(crate) a: f64,
    pub(crate) b: f64,
    pub(crate) c: f64,
    pub(crate) d: f64,
    pub(crate) dt: f64,
    pub(crate) sx: f64,
    pub(crate) sy: f64,
    pub(crate) q: M,
    pub(crate) r: M,
    pub(crate) prior: Prior,
}

impl Random {
    pub(crate) fn new(seed: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        Random {
            a: rng.gen_range(0.5..2.0),
            b: rng.gen_range(0.5..0.95),
            c: rng.gen_range(-0.3..0.3),
            d: rng.gen_range(-0.3..0.3),
            dt: rng.gen_range(0.05..0.2),
            sx: rng.gen_range(-3.0..-1.0),
            sy: rng.gen_range(-3.0..-1.0),
            q: random_spd(&mut rng, 3, 0.002),
            r: M::from_diagonal(&V::from_vec(vec![0.05, 0.01])),
            prior: Prior {
                x0: V::from_vec(vec![1.0, 0.2, 0.5]),
                p0: random_spd(&mut rng, 3, 0.05),
            },
        }
    }

    pub(crate) fn model(&self) -> NonlinearModel {
        NonlinearModel::from_expressions(
            &s(&["x", "v", "u"]),
            &s(&[
                "x + dt * v",
                "v - dt * a * sin(x) + c * u",
                "b * u + d * cos(v)",
            ]),
            &s(&["hypot(x - sx, u - sy)", "atan2(u - sy, x - sx)"]),
            self.q.clone(),
            self.r.clone(),
            &[
                ("a".into(), self.a),
                ("b".into(), self.b),
                ("c".into(), self.c),
                ("d".into(), self.d),
                ("dt".into(), self.dt),
                ("sx".into(), self.sx),
                ("sy".into(), self.sy),
            ],
            &[1],
            self.prior.clone(),
        )
        .unwrap()
    }

    pub(crate) fn f(&self, x: &V) -> V {
        V::from_vec(vec![
            x[0] + self.dt * x[1],
            x[1] - self.dt * self.a * x[0].sin() + self.c * x[2],
            self.b * x[2] + self.d * x[1].cos(),
        ])
    }
    pub(crate) fn fj(&self, x: &V) -> M {
        M::from_row_slice(
            3,
            3,
            &[
                1.0,
                self.dt,
                0.0,
                -self.dt * self.a * x[0].cos(),
                1.0,
                self.c,
                0.0,
                -self.d * x[1].sin(),
                self.b,
            ],
        )
    }
    pub(crate) fn h(&self, x: &V) -> V {
        let (dx, dy) = (x[0] - self.sx, x[2] - self.sy);
        V::from_vec(vec![dx.hypot(dy), dy.atan2(dx)])
    }
    pub(crate) fn hj(&self, x: &V) -> M {
        let (dx, dy) = (x[0] - self.sx, x[2] - self.sy);
        let r2 = dx * dx + dy * dy;
        let r = r2.sqrt();
        M::from_row_slice(2, 3, &[dx / r, 0.0, dy / r, -dy / r2, 0.0, dx / r2])
    }

    /// `tracks` simulated tracks of `t` steps, every 7th step missing.
    pub(crate) fn data(&self, tracks: usize, t: usize, seed: u64) -> Measurements<f64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let lq = self.q.clone().cholesky().unwrap().l();
        let lr = self.r.clone().cholesky().unwrap().l();
        let mut out = Vec::new();
        for _ in 0..tracks {
            let mut x = self.prior.x0.clone();
            for k in 0..t {
                if k > 0 {
                    let w = V::from_fn(3, |_, _| rng.sample(StandardNormal));
                    x = self.f(&x) + &lq * w;
                }
                let v = V::from_fn(2, |_, _| rng.sample(StandardNormal));
                let z = self.h(&x) + &lr * v;
                if k % 7 == 3 {
                    out.extend([f64::NAN, f64::NAN]);
                } else {
                    out.extend(z.iter());
                }
            }
        }
        Measurements::new(tracks, t, 2, out).unwrap()
    }
}

/// A textbook filter of one track: `(means, covs, logliks, predicted)`.
#[derive(Clone, Copy, PartialEq)]
enum Ref {
    Ekf,
    Iekf(usize),
    Sigma(f64, f64, f64), // alpha, beta, kappa (kappa NaN: cubature)
}

fn weights(n: usize, rule: Ref) -> (f64, Vec<f64>, Vec<f64>, bool) {
    match rule {
        Ref::Sigma(alpha, beta, kappa) if !kappa.is_nan() => {
            let c = alpha * alpha * (n as f64 + kappa);
            let lambda = c - n as f64;
            let mut wm = vec![lambda / c];
            let mut wc = vec![lambda / c + 1.0 - alpha * alpha + beta];
            for _ in 0..2 * n {
                wm.push(0.5 / c);
                wc.push(0.5 / c);
            }
            (c.sqrt(), wm, wc, true)
        }
        _ => {
            let w = vec![0.5 / n as f64; 2 * n];
            ((n as f64).sqrt(), w.clone(), w, false)
        }
    }
}

fn points(m: &V, p: &M, rule: Ref) -> (Vec<V>, Vec<f64>, Vec<f64>) {
    let n = m.len();
    let (scale, wm, wc, central) = weights(n, rule);
    let l = p.clone().cholesky().unwrap().l();
    let mut pts = Vec::new();
    if central {
        pts.push(m.clone());
    }
    for sign in [1.0, -1.0] {
        for i in 0..n {
            pts.push(m + l.column(i) * (sign * scale));
        }
    }
    (pts, wm, wc)
}

/// Unscented moments: mean (angle components circular), cov, cross.
fn ut(m: &V, p: &M, rule: Ref, g: &dyn Fn(&V) -> V, angles: &[usize]) -> (V, M, M) {
    let (pts, wm, wc) = points(m, p, rule);
    let ys: Vec<V> = pts.iter().map(g).collect();
    let d = ys[0].len();
    let mut mean = V::zeros(d);
    for (y, w) in ys.iter().zip(&wm) {
        mean += y * *w;
    }
    for &a in angles {
        let sn: f64 = ys.iter().zip(&wm).map(|(y, w)| w * y[a].sin()).sum();
        let cs: f64 = ys.iter().zip(&wm).map(|(y, w)| w * y[a].cos()).sum();
        mean[a] = sn.atan2(cs);
    }
    let mut cov = M::zeros(d, d);
    let mut cross = M::zeros(m.len(), d);
    for ((x, y), w) in pts.iter().zip(&ys).zip(&wc) {
        let mut dy = y - &mean;
        for &a in angles {
            dy[a] = wrap(dy[a]);
        }
        cov += &dy * dy.transpose() * *w;
        cross += (x - m) * dy.transpose() * *w;
    }
    (mean, cov, cross)
}

pub(crate) fn loglik(y: &V, s: &M) -> f64 {
    let n = y.len() as f64;
    -0.5 * (n * (2.0 * PI).ln()
        + s.determinant().ln()
        + (y.transpose() * s.clone().try_inverse().unwrap() * y)[0])
}

struct RefOut {
    mean: Vec<V>,
    cov: Vec<M>,
    ll: Vec<f64>,
}

fn ref_filter(md: &Random, z: &[f64], t: usize, rule: Ref) -> RefOut {
    let mut m = md.prior.x0.clone();
    let mut p = md.prior.p0.clone();
    let mut out = RefOut {
        mean: vec![],
        cov: vec![],
        ll: vec![],
    };
    for k in 0..t {
        if k > 0 {
            match rule {
                Ref::Sigma(..) => {
                    let (mm, pp, _) = ut(&m, &p, rule, &|x| md.f(x), &[]);
                    m = mm;
                    p = pp + &md.q;
                }
                _ => {
                    let f = md.fj(&m);
                    m = md.f(&m);
                    p = &f * &p * f.transpose() + &md.q;
                }
            }
        }
        let zk = &z[2 * k..2 * k + 2];
        if zk[0].is_nan() {
            out.ll.push(0.0);
        } else {
            let zv = V::from_column_slice(zk);
            match rule {
                Ref::Sigma(..) => {
                    let (zh, pzz, c) = ut(&m, &p, rule, &|x| md.h(x), &[1]);
                    let mut y = zv - zh;
                    y[1] = wrap(y[1]);
                    let s = pzz + &md.r;
                    let k = &c * s.clone().try_inverse().unwrap();
                    out.ll.push(loglik(&y, &s));
                    m += &k * y;
                    p -= &k * s * k.transpose();
                }
                Ref::Ekf | Ref::Iekf(_) => {
                    let iters = if let Ref::Iekf(n) = rule { n } else { 1 };
                    let mp = m.clone();
                    let mut x = m.clone();
                    let (mut kk, mut ss) = (M::zeros(3, 2), M::zeros(2, 2));
                    for i in 0..iters {
                        let h = md.hj(&x);
                        let mut y = &zv - md.h(&x) - &h * (&mp - &x);
                        y[1] = wrap(y[1]);
                        ss = &h * &p * h.transpose() + &md.r;
                        kk = &p * h.transpose() * ss.clone().try_inverse().unwrap();
                        if i == 0 {
                            out.ll.push(loglik(&y, &ss));
                        }
                        x = &mp + &kk * y;
                    }
                    m = x;
                    p -= &kk * ss * kk.transpose();
                }
            }
        }
        p = (&p + p.transpose()) * 0.5;
        out.mean.push(m.clone());
        out.cov.push(p.clone());
    }
    out
}

fn ref_rts(md: &Random, f: &RefOut, rule: Ref) -> (Vec<V>, Vec<M>) {
    let t = f.mean.len();
    let mut ms = f.mean.clone();
    let mut ps = f.cov.clone();
    for k in (0..t - 1).rev() {
        let (m, p) = (&f.mean[k], &f.cov[k]);
        let (mp, pp, d) = match rule {
            Ref::Sigma(..) => {
                let (mm, pp, c) = ut(m, p, rule, &|x| md.f(x), &[]);
                (mm, pp + &md.q, c)
            }
            _ => {
                let fj = md.fj(m);
                (
                    md.f(m),
                    &fj * p * fj.transpose() + &md.q,
                    p * fj.transpose(),
                )
            }
        };
        let g = d * pp.clone().try_inverse().unwrap();
        ms[k] = m + &g * (&ms[k + 1] - mp);
        ps[k] = p + &g * (&ps[k + 1] - pp) * g.transpose();
    }
    (ms, ps)
}

/// The iterated extended RTS smoother: the EKF + ERTS, then Gauss-Newton passes.
fn ref_ieks(md: &Random, z: &[f64], t: usize, iterations: usize) -> (Vec<V>, Vec<f64>) {
    let f = ref_filter(md, z, t, Ref::Ekf);
    let (mut ns, _) = ref_rts(md, &f, Ref::Ekf);
    let mut ll = f.ll.clone();
    for _ in 1..iterations {
        let mut m = md.prior.x0.clone();
        let mut p = md.prior.p0.clone();
        let mut fm = vec![];
        let mut fp = vec![];
        let mut pred = vec![];
        ll.clear();
        for k in 0..t {
            if k > 0 {
                let nb = &ns[k - 1];
                let a = md.fj(nb);
                let b = md.f(nb) - &a * nb;
                let mp = &a * &m + b;
                let pp = &a * &p * a.transpose() + &md.q;
                pred.push((mp.clone(), pp.clone(), &p * a.transpose()));
                m = mp;
                p = pp;
            }
            let zk = &z[2 * k..2 * k + 2];
            if zk[0].is_nan() {
                ll.push(0.0);
            } else {
                let h = md.hj(&ns[k]);
                let c = md.h(&ns[k]) - &h * &ns[k];
                let mut y = V::from_column_slice(zk) - &h * &m - c;
                y[1] = wrap(y[1]);
                let s = &h * &p * h.transpose() + &md.r;
                let kk = &p * h.transpose() * s.clone().try_inverse().unwrap();
                ll.push(loglik(&y, &s));
                m += &kk * y;
                p -= &kk * s * kk.transpose();
            }
            fm.push(m.clone());
            fp.push(p.clone());
        }
        let mut ms = fm.clone();
        let mut ps = fp.clone();
        for k in (0..t - 1).rev() {
            let (mp, pp, d) = &pred[k];
            let g = d * pp.clone().try_inverse().unwrap();
            ms[k] = &fm[k] + &g * (&ms[k + 1] - mp);
            ps[k] = &fp[k] + &g * (&ps[k + 1] - pp) * g.transpose();
        }
        ns = ms;
    }
    (ns, ll)
}

pub(crate) fn opts(kind: FilterKind) -> NonlinearOptions {
    NonlinearOptions::default().with_kind(kind)
}

pub(crate) fn run(
    model: &NonlinearModel,
    z: &Measurements<f64>,
    o: NonlinearOptions,
    job: NonlinearJob,
) -> kestrel::nonlinear::NonlinearOutput<f64> {
    estimate_on(
        Device::Cpu,
        &NonlinearProblem::Single(model.clone()),
        z,
        &o,
        job,
    )
    .unwrap()
}

pub(crate) fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!(
        (a - b).abs() <= tol * (1.0 + b.abs()),
        "{what}: {a} vs {b} (diff {:e})",
        (a - b).abs()
    );
}

#[test]
fn every_filter_and_smoother_matches_the_textbook_on_random_models() {
    for seed in 0..4 {
        let md = Random::new(seed);
        let model = md.model();
        let (b, t) = (3, 40);
        let z = md.data(b, t, 100 + seed);
        let cases = [
            (FilterKind::Ekf, Ref::Ekf, opts(FilterKind::Ekf)),
            (
                FilterKind::Iekf,
                Ref::Iekf(4),
                opts(FilterKind::Iekf).with_iterations(4),
            ),
            (
                FilterKind::Ukf,
                Ref::Sigma(1.0, 0.0, 0.0),
                opts(FilterKind::Ukf),
            ),
            (
                FilterKind::Ukf,
                Ref::Sigma(0.7, 2.0, 1.5),
                opts(FilterKind::Ukf)
                    .with_alpha(0.7)
                    .with_beta(2.0)
                    .with_kappa(Some(1.5)),
            ),
            (
                FilterKind::Ckf,
                Ref::Sigma(1.0, 0.0, f64::NAN),
                opts(FilterKind::Ckf),
            ),
        ];
        for (kind, rule, o) in cases {
            let out = run(&model, &z, o, NonlinearJob::Smooth(NonlinearSmoother::Rts));
            let sm = out.smoothed.unwrap();
            for tr in 0..b {
                let zt = &z.data()[tr * t * 2..(tr + 1) * t * 2];
                let r = ref_filter(&md, zt, t, rule);
                let (rms, rps) = ref_rts(&md, &r, rule);
                for k in 0..t {
                    let what = format!("{kind:?} seed {seed} track {tr} step {k}");
                    for i in 0..3 {
                        close(out.filtered.mean_at(tr, k)[i], r.mean[k][i], 1e-9, &what);
                        close(sm.mean_at(tr, k)[i], rms[k][i], 1e-8, &what);
                        for j in 0..3 {
                            close(
                                out.filtered.cov_at(tr, k)[3 * i + j],
                                r.cov[k][(i, j)],
                                1e-9,
                                &what,
                            );
                            close(sm.cov_at(tr, k)[3 * i + j], rps[k][(i, j)], 1e-8, &what);
                        }
                    }
                    close(
                        out.filtered.loglik().unwrap()[tr * t + k],
                        r.ll[k],
                        1e-9,
                        &what,
                    );
                }
            }
        }
        // The iterated extended smoother against the textbook Gauss-Newton passes.
        let out = run(
            &model,
            &z,
            opts(FilterKind::Ekf).with_iterations(5),
            NonlinearJob::Smooth(NonlinearSmoother::Iterated),
        );
        let sm = out.smoothed.unwrap();
        for tr in 0..b {
            let zt = &z.data()[tr * t * 2..(tr + 1) * t * 2];
            let (rms, rll) = ref_ieks(&md, zt, t, 5);
            for k in 0..t {
                for i in 0..3 {
                    close(sm.mean_at(tr, k)[i], rms[k][i], 1e-8, "IEKS");
                }
                close(
                    out.filtered.loglik().unwrap()[tr * t + k],
                    rll[k],
                    1e-8,
                    "IEKS loglik",
                );
            }
        }
    }
}

#[test]
fn missing_steps_only_predict() {
    let md = Random::new(9);
    let model = md.model();
    let z = md.data(1, 10, 3);
    for kind in [
        FilterKind::Ekf,
        FilterKind::Ukf,
        FilterKind::Ckf,
        FilterKind::Iekf,
    ] {
        let out = run(&model, &z, opts(kind), NonlinearJob::Filter);
        let ll = out.filtered.loglik().unwrap();
        assert_eq!(ll[3], 0.0, "{kind:?}");
        assert!(ll.iter().enumerate().all(|(k, l)| k == 3 || *l != 0.0));
    }
}

#[test]
fn the_iterations_of_one_are_the_plain_methods() {
    let md = Random::new(4);
    let model = md.model();
    let z = md.data(2, 30, 8);
    let ekf = run(&model, &z, opts(FilterKind::Ekf), NonlinearJob::Filter);
    let iekf1 = run(
        &model,
        &z,
        opts(FilterKind::Iekf).with_iterations(1),
        NonlinearJob::Filter,
    );
    assert_eq!(ekf.filtered.mean(), iekf1.filtered.mean());
    for kind in [FilterKind::Ekf, FilterKind::Ukf, FilterKind::Ckf] {
        let rts = run(
            &model,
            &z,
            opts(kind),
            NonlinearJob::Smooth(NonlinearSmoother::Rts),
        );
        let it1 = run(
            &model,
            &z,
            opts(kind).with_iterations(1),
            NonlinearJob::Smooth(NonlinearSmoother::Iterated),
        );
        assert_eq!(
            rts.smoothed.unwrap().mean(),
            it1.smoothed.unwrap().mean(),
            "{kind:?}"
        );
    }
}

/// The parallel iterated smoothers reach the sequential ones' passes: the same filtered
/// and smoothed moments after every number of passes (one pass: the method's own
/// smoother, bit for bit), every method, the bearing measured as an angle.
#[test]
fn the_parallel_iterated_smoothers_are_the_iterated_smoothers() {
    for seed in [4, 9] {
        let md = Random::new(seed);
        let model = md.model();
        let z = md.data(3, 300, seed + 1);
        for kind in [
            FilterKind::Ekf,
            FilterKind::Iekf,
            FilterKind::Ukf,
            FilterKind::Ckf,
        ] {
            for n in [1, 3] {
                let o = opts(kind).with_iterations(n);
                let seq = run(
                    &model,
                    &z,
                    o,
                    NonlinearJob::Smooth(NonlinearSmoother::Iterated),
                );
                let par = run(
                    &model,
                    &z,
                    o,
                    NonlinearJob::Smooth(NonlinearSmoother::ParallelIterated),
                );
                let (ss, ps) = (seq.smoothed.unwrap(), par.smoothed.unwrap());
                if n == 1 {
                    assert_eq!(ss.mean(), ps.mean(), "{kind:?}");
                    continue;
                }
                let close = |a: &[f64], b: &[f64], what: &str| {
                    for (i, (x, y)) in a.iter().zip(b).enumerate() {
                        assert!(
                            (x - y).abs() <= 1e-8 * (1.0 + y.abs()),
                            "seed {seed} {kind:?} {n} passes {what}[{i}]: {x} vs {y}"
                        );
                    }
                };
                close(ps.mean(), ss.mean(), "smoothed mean");
                close(ps.cov(), ss.cov(), "smoothed cov");
                close(par.filtered.mean(), seq.filtered.mean(), "filtered mean");
                close(
                    par.filtered.loglik().unwrap(),
                    seq.filtered.loglik().unwrap(),
                    "loglik",
                );
            }
        }
    }
}

#[test]
fn every_filter_on_a_linear_model_is_the_kalman_filter() {
    let lin = constant_velocity(2, 0.5, 0.3, 2.0, 10.0).unwrap();
    let sim = kestrel::sim::simulate(&lin, 4, 60, 5, 0.1).unwrap();
    let z: Measurements<f64> = sim.measurements;
    let (kf_f, kf_s) = kestrel::smooth(&lin, &z).unwrap();
    let model = NonlinearModel::from_linear(&lin).unwrap();
    for kind in [
        FilterKind::Ekf,
        FilterKind::Ukf,
        FilterKind::Ckf,
        FilterKind::Iekf,
    ] {
        for method in [NonlinearSmoother::Rts, NonlinearSmoother::Iterated] {
            let out = run(
                &model,
                &z,
                opts(kind).with_iterations(3),
                NonlinearJob::Smooth(method),
            );
            let sm = out.smoothed.unwrap();
            let pairs = [
                (out.filtered.mean(), kf_f.mean()),
                (out.filtered.cov(), kf_f.cov()),
                (out.filtered.loglik().unwrap(), kf_f.loglik().unwrap()),
                (sm.mean(), kf_s.mean()),
                (sm.cov(), kf_s.cov()),
            ];
            for (a, b) in pairs {
                for (x, y) in a.iter().zip(b) {
                    close(*x, *y, 1e-9, &format!("{kind:?} {method:?}"));
                }
            }
        }
    }
}

#[test]
fn the_coordinated_turn_is_constant_velocity_at_zero_turn_rate() {
    let prior = Prior {
        x0: V::from_vec(vec![1.0, 2.0, -1.0, 0.5]),
        p0: M::identity(4, 4),
    };
    let ct = NonlinearModel::coordinated_turn(
        0.5,
        0.3,
        TurnRate::Known(0.0),
        &Measure::Position { r: 2.0 },
        prior.clone(),
    )
    .unwrap();
    let lin = constant_velocity(2, 0.5, 0.3, 2.0, 1.0)
        .unwrap()
        .with_prior(prior.x0.clone(), prior.p0.clone())
        .unwrap();
    let z: Measurements<f64> = kestrel::sim::simulate(&lin, 2, 30, 1, 0.0)
        .unwrap()
        .measurements;
    let kf = kestrel::filter(&lin, &z, &Default::default())
        .unwrap()
        .filtered;
    let out = run(&ct, &z, opts(FilterKind::Ekf), NonlinearJob::Filter);
    for (x, y) in out.filtered.mean().iter().zip(kf.mean()) {
        close(*x, *y, 1e-10, "ct(0) vs cv");
    }
    // Estimated turn rate: the Jacobian at and near omega = 0 against a finite difference.
    let est = NonlinearModel::coordinated_turn(
        0.7,
        0.3,
        TurnRate::Estimated { q_omega: 0.01 },
        &Measure::RangeBearing {
            radar: [0.0, 0.0],
            r_range: 1.0,
            r_bearing: 1e-4,
        },
        Prior {
            x0: V::from_vec(vec![1.0, 2.0, -1.0, 0.5, 0.0]),
            p0: M::identity(5, 5),
        },
    )
    .unwrap();
    for w in [0.0, 1e-9, 1e-4, 0.01, -0.5, 1.3] {
        let x = [3.0, 1.5, -2.0, 0.7, w];
        check_jacobian(est.f(), &x, 1e-7);
        // Exactness at zero: the limit of the turn.
        let mut y = [0.0; 5];
        est.f().value(&x, &mut y, &mut Vec::new());
        if w == 0.0 {
            assert_eq!(y, [3.0 + 0.7 * 1.5, 1.5, -2.0 + 0.7 * 0.7, 0.7, 0.0]);
        }
    }
}
