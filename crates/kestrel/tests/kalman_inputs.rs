//! Per-track priors, per-step R, u and d and per-track sampling intervals in the batch filter and
//! smoother (`kalman::filter_with` / `smooth_with`), against two independent references:
//! the per-step API (`BatchState`, the SIMD lane path) driven step by step, and one
//! time-varying model per track run through the plain filter and smoother.

use kestrel::kalman::{self, filter_with, smooth_with, BatchState, Prediction, TrackInputs};
use kestrel::model::{constant_velocity, Kinematics, Prior, StepMatrices, TimeVaryingModel};
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::{
    filter_on_with, smooth_on_with, Device, Error, FilterMethod, FilterOptions, Keep, Measurements,
    ScanAlgorithm, SmoothMethod,
};
use rand::{Rng, SeedableRng};

const NX: usize = 4;
const NY: usize = 2;

/// A random batch: measurements (some missing), priors, per-step R and intervals
/// `[tracks][steps]`.
struct Batch {
    z: Measurements<f64>,
    x0: Vec<f64>,
    p0: Vec<f64>,
    r: Vec<f64>,
    dt: Vec<f64>,
    /// Control inputs `[tracks][steps][NX]` and measurement offsets `[tracks][steps][NY]`.
    u: Vec<f64>,
    d: Vec<f64>,
}

fn batch(tracks: usize, steps: usize, seed: u64) -> Batch {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut z = Vec::with_capacity(tracks * steps * NY);
    for b in 0..tracks {
        let (mut px, mut py) = (rng.gen_range(-50.0..50.0), rng.gen_range(-50.0..50.0));
        let (vx, vy) = (rng.gen_range(-2.0..2.0), rng.gen_range(-2.0..2.0));
        for k in 0..steps {
            px += vx;
            py += vy;
            if (b + k) % 7 == 3 {
                z.extend([f64::NAN, f64::NAN]);
            } else {
                z.extend([px + rng.gen_range(-1.0..1.0), py + rng.gen_range(-1.0..1.0)]);
            }
        }
    }
    let mut x0 = Vec::new();
    let mut p0 = Vec::new();
    for _ in 0..tracks {
        for _ in 0..NX {
            x0.push(rng.gen_range(-30.0..30.0));
        }
        // A random SPD covariance: A A^T + I.
        let a: Vec<f64> = (0..NX * NX).map(|_| rng.gen_range(-2.0..2.0)).collect();
        for i in 0..NX {
            for j in 0..NX {
                let mut s = if i == j { 1.0 } else { 0.0 };
                for l in 0..NX {
                    s += a[i * NX + l] * a[j * NX + l];
                }
                p0.push(s);
            }
        }
    }
    let mut r = Vec::new();
    for _ in 0..tracks * steps {
        let (s0, s1, c) = (
            rng.gen_range(0.5..4.0),
            rng.gen_range(0.5..4.0),
            rng.gen_range(-0.5..0.5),
        );
        r.extend([s0, c, c, s1]);
    }
    let dt = (0..tracks * steps)
        .map(|_| rng.gen_range(0.2..2.0))
        .collect();
    let u = (0..tracks * steps * NX)
        .map(|_| rng.gen_range(-0.5..0.5))
        .collect();
    let d = (0..tracks * steps * NY)
        .map(|_| rng.gen_range(-3.0..3.0))
        .collect();
    Batch {
        z: Measurements::new(tracks, steps, NY, z).unwrap(),
        x0,
        p0,
        r,
        dt,
        u,
        d,
    }
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs() / w.abs().max(1.0);
        assert!(
            err <= tol,
            "{what}[{i}]: got {g}, want {w} (relative error {err:e})"
        );
    }
}

/// The per-step API over the same batch: update at step 0, predict + update after, each
/// target with its prior, its R of the step and its interval.
fn per_step_reference(
    model: &kestrel::Model,
    kin: &Kinematics,
    bt: &Batch,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (tracks, steps) = (bt.z.tracks(), bt.z.steps());
    let mut st = BatchState::<f64>::new(model, tracks)
        .unwrap()
        .with_kinematics(*kin)
        .unwrap();
    for b in 0..tracks {
        let s = st
            .add_with_prior(
                &bt.x0[b * NX..(b + 1) * NX],
                &bt.p0[b * NX * NX..(b + 1) * NX * NX],
            )
            .unwrap();
        assert_eq!(s, b);
    }
    let (mut mean, mut cov, mut ll) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = vec![(Vec::new(), Vec::new(), Vec::new()); tracks];
    for k in 0..steps {
        if k > 0 {
            let dts: Vec<f64> = (0..tracks).map(|b| bt.dt[b * steps + k]).collect();
            st.predict_with(&Prediction::new().per_target_dt(&dts))
                .unwrap();
        }
        let zk: Vec<f64> = (0..tracks).flat_map(|b| bt.z.at(b, k).to_vec()).collect();
        let rk: Vec<f64> = (0..tracks)
            .flat_map(|b| bt.r[(b * steps + k) * NY * NY..(b * steps + k + 1) * NY * NY].to_vec())
            .collect();
        st.update(&zk, None, Some(&rk)).unwrap();
        for (b, o) in out.iter_mut().enumerate() {
            o.0.extend_from_slice(st.mean(b).unwrap());
            o.1.extend_from_slice(st.cov(b).unwrap());
            o.2.push(st.loglik(b).unwrap());
        }
    }
    for o in out {
        mean.extend(o.0);
        cov.extend(o.1);
        ll.extend(o.2);
    }
    (mean, cov, ll)
}

/// Track `b` as a time-varying model of its own: `F`, `Q` of its intervals, its `R`, `u`
/// and `d` of each step, its prior.
fn track_model(model: &kestrel::Model, kin: &Kinematics, bt: &Batch, b: usize) -> TimeVaryingModel {
    let steps = bt.z.steps();
    let h = DMatrix::from_fn(NY, NX, |i, j| if j == 2 * i { 1.0 } else { 0.0 });
    let mats = (0..steps)
        .map(|k| {
            let (f, q) = kin.transition(bt.dt[b * steps + k]).unwrap();
            let r = &bt.r[(b * steps + k) * NY * NY..(b * steps + k + 1) * NY * NY];
            let at = b * steps + k;
            StepMatrices {
                f,
                u: DVector::from_row_slice(&bt.u[at * NX..(at + 1) * NX]),
                q,
                h: h.clone(),
                d: DVector::from_row_slice(&bt.d[at * NY..(at + 1) * NY]),
                r: DMatrix::from_row_slice(NY, NY, r),
            }
        })
        .collect();
    assert_eq!(model.nx(), NX);
    let prior = Prior {
        x0: DVector::from_row_slice(&bt.x0[b * NX..(b + 1) * NX]),
        p0: DMatrix::from_row_slice(NX, NX, &bt.p0[b * NX * NX..(b + 1) * NX * NX]),
    };
    TimeVaryingModel::new(mats, prior).unwrap()
}

fn setup() -> (kestrel::Model, Kinematics) {
    (
        constant_velocity(2, 1.0, 0.3, 2.0, 50.0).unwrap(),
        Kinematics::constant_velocity(2, 0.3).unwrap(),
    )
}

#[test]
fn filter_with_priors_r_and_intervals_equals_the_per_step_api() {
    let (model, kin) = setup();
    let bt = batch(37, 25, 1);
    let inputs = TrackInputs::new()
        .with_priors(&bt.x0, &bt.p0)
        .with_r(&bt.r)
        .with_dt(&kin, &bt.dt);
    let out = filter_with(&model, &bt.z, &FilterOptions::default(), &inputs).unwrap();
    let (mean, cov, ll) = per_step_reference(&model, &kin, &bt);
    close("mean", out.filtered.mean(), &mean, 1e-9);
    close("cov", out.filtered.cov(), &cov, 1e-9);
    close("loglik", out.filtered.loglik().unwrap(), &ll, 1e-9);
}

#[test]
fn filter_and_smoother_with_inputs_equal_one_time_varying_model_per_track() {
    let (model, kin) = setup();
    let bt = batch(9, 30, 2);
    let inputs = TrackInputs::new()
        .with_priors(&bt.x0, &bt.p0)
        .with_r(&bt.r)
        .with_u(&bt.u)
        .with_d(&bt.d)
        .with_dt(&kin, &bt.dt);
    let (f, s) = smooth_with(&model, &bt.z, &inputs).unwrap();
    for b in 0..bt.z.tracks() {
        let tvm = track_model(&model, &kin, &bt, b);
        let zb = Measurements::new(1, bt.z.steps(), NY, bt.z.track(b).to_vec()).unwrap();
        let (wf, ws) = kalman::smooth(&tvm, &zb).unwrap();
        let n = bt.z.steps();
        let (m, c) = (NX, NX * NX);
        close(
            "filtered mean",
            &f.mean()[b * n * m..(b + 1) * n * m],
            wf.mean(),
            1e-10,
        );
        close(
            "filtered cov",
            &f.cov()[b * n * c..(b + 1) * n * c],
            wf.cov(),
            1e-10,
        );
        close(
            "loglik",
            &f.loglik().unwrap()[b * n..(b + 1) * n],
            wf.loglik().unwrap(),
            1e-10,
        );
        close(
            "smoothed mean",
            &s.mean()[b * n * m..(b + 1) * n * m],
            ws.mean(),
            1e-10,
        );
        close(
            "smoothed cov",
            &s.cov()[b * n * c..(b + 1) * n * c],
            ws.cov(),
            1e-10,
        );
    }
}

#[test]
fn one_interval_per_track_equals_the_builder_at_that_interval() {
    let bt = batch(5, 20, 3);
    let kin = Kinematics::constant_velocity(2, 0.3).unwrap();
    let dts = [0.25, 0.5, 1.0, 1.5, 3.0];
    let base = constant_velocity(2, 1.0, 0.3, 2.0, 50.0).unwrap();
    let inputs = TrackInputs::new().with_dt(&kin, &dts);
    let (f, s) = smooth_with(&base, &bt.z, &inputs).unwrap();
    let n = bt.z.steps();
    for (b, &dt) in dts.iter().enumerate() {
        let m = constant_velocity(2, dt, 0.3, 2.0, 50.0).unwrap();
        let zb = Measurements::new(1, n, NY, bt.z.track(b).to_vec()).unwrap();
        let (wf, ws) = kalman::smooth(&m, &zb).unwrap();
        close(
            "filtered mean",
            &f.mean()[b * n * NX..(b + 1) * n * NX],
            wf.mean(),
            1e-10,
        );
        close(
            "smoothed cov",
            &s.cov()[b * n * NX * NX..(b + 1) * n * NX * NX],
            ws.cov(),
            1e-10,
        );
    }
}

#[test]
fn priors_alone_equal_the_model_with_that_prior_and_options_are_honoured() {
    let (model, _) = setup();
    let bt = batch(6, 15, 4);
    let inputs = TrackInputs::new().with_priors(&bt.x0, &bt.p0);
    let all = filter_with(
        &model,
        &bt.z,
        &FilterOptions::default().with_predicted(true),
        &inputs,
    )
    .unwrap();
    let last = filter_with(
        &model,
        &bt.z,
        &FilterOptions::default().with_keep(Keep::Last),
        &inputs,
    )
    .unwrap();
    let n = bt.z.steps();
    for b in 0..bt.z.tracks() {
        let mb = model
            .clone()
            .with_prior(
                DVector::from_row_slice(&bt.x0[b * NX..(b + 1) * NX]),
                DMatrix::from_row_slice(NX, NX, &bt.p0[b * NX * NX..(b + 1) * NX * NX]),
            )
            .unwrap();
        let zb = Measurements::new(1, n, NY, bt.z.track(b).to_vec()).unwrap();
        let want =
            kalman::filter(&mb, &zb, &FilterOptions::default().with_predicted(true)).unwrap();
        close(
            "mean",
            &all.filtered.mean()[b * n * NX..(b + 1) * n * NX],
            want.filtered.mean(),
            1e-12,
        );
        let (pa, pw) = (
            all.predicted.as_ref().unwrap(),
            want.predicted.as_ref().unwrap(),
        );
        close(
            "predicted cov",
            &pa.cov()[b * n * NX * NX..(b + 1) * n * NX * NX],
            pw.cov(),
            1e-12,
        );
        close(
            "last mean",
            last.filtered.last_mean(b).unwrap(),
            want.filtered.last_mean(0).unwrap(),
            1e-12,
        );
        let total: f64 = want.filtered.loglik().unwrap().iter().sum();
        close(
            "total loglik",
            &[last.filtered.loglik().unwrap()[b]],
            &[total],
            1e-12,
        );
    }
}

#[test]
fn inconsistent_inputs_are_refused_with_what_and_where() {
    let (model, kin) = setup();
    let bt = batch(3, 4, 5);
    let o = FilterOptions::default();
    let input_err = |i: &TrackInputs<'_>, needle: &str| match filter_with(&model, &bt.z, &o, i) {
        Err(Error::Input { msg }) => assert!(msg.contains(needle), "{msg}"),
        other => panic!("expected an input error naming {needle}, got {other:?}"),
    };
    input_err(&TrackInputs::new().with_priors(&bt.x0[..5], &bt.p0), "x0");
    input_err(&TrackInputs::new().with_r(&bt.r[1..]), "per-step R");
    input_err(&TrackInputs::new().with_u(&bt.u[NX..]), "control inputs u");
    let mut bad_d = bt.d.clone();
    bad_d[(4 + 3) * NY + 1] = f64::INFINITY; // track 1, step 3
    input_err(
        &TrackInputs::new().with_d(&bad_d),
        "offsets d of track 1, step 3",
    );
    let mut bad_r = bt.r.clone();
    bad_r[(2 * 4 + 1) * 4] = -1.0; // track 2, step 1: R00 < 0
    input_err(&TrackInputs::new().with_r(&bad_r), "track 2, step 1");
    let mut bad_dt = bt.dt.clone();
    bad_dt[4 + 2] = 0.0; // track 1, step 2
    input_err(
        &TrackInputs::new().with_dt(&kin, &bad_dt),
        "track 1, step 2",
    );
    input_err(
        &TrackInputs::new().with_dt(&kin, &bt.dt[..5]),
        "sampling intervals",
    );
    let mut p = TrackInputs::new();
    p.x0 = Some(&bt.x0);
    input_err(&p, "p0");
    let ca = Kinematics::constant_acceleration(2, 0.3).unwrap();
    input_err(&TrackInputs::new().with_dt(&ca, &bt.dt), "kinematics");
    let mut neg = bt.p0.clone();
    neg[0] = -5.0;
    assert!(filter_with(
        &model,
        &bt.z,
        &o,
        &TrackInputs::new().with_priors(&bt.x0, &neg)
    )
    .is_err());

    // Devices and methods that take the model alone say so, naming the input: the GPU
    // takes every input but the sampling intervals (refused before a device is opened).
    let i = TrackInputs::new().with_r(&bt.r);
    match filter_on_with(
        Device::Cuda(0),
        &model,
        &bt.z,
        FilterMethod::Sequential,
        &o,
        &TrackInputs::new().with_r(&bt.r).with_dt(&kin, &bt.dt),
    ) {
        Err(Error::Unsupported(m)) => assert!(m.contains("sampling intervals"), "{m}"),
        other => panic!("{other:?}"),
    }
    let par = FilterMethod::Parallel(ScanAlgorithm::Fastest);
    match filter_on_with(Device::Cpu, &model, &bt.z, par, &o, &i) {
        Err(Error::Unsupported(m)) => {
            assert!(m.contains("per-step R") && m.contains("Parallel"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    match smooth_on_with(
        Device::Cpu,
        &model,
        &bt.z,
        SmoothMethod::TwoFilter(ScanAlgorithm::Fastest),
        &i,
    ) {
        Err(Error::Unsupported(m)) => assert!(m.contains("per-step R"), "{m}"),
        other => panic!("{other:?}"),
    }
    // On the CPU they run, and without inputs the entry points are the plain ones.
    let a = filter_on_with(Device::Cpu, &model, &bt.z, FilterMethod::Sequential, &o, &i).unwrap();
    assert!(a.filtered.mean().iter().all(|v| v.is_finite()));
    let plain = filter_on_with(
        Device::Cpu,
        &model,
        &bt.z,
        FilterMethod::Sequential,
        &o,
        &TrackInputs::new(),
    )
    .unwrap();
    let want = kestrel::filter(&model, &bt.z, &o).unwrap();
    assert_eq!(plain.filtered.mean(), want.filtered.mean());
}
