//! The tracker with nonlinear models and IMMs: against the Kalman tracker on linear
//! models (the EKF and UKF of a linear model are the Kalman filter), an IMM of equal modes
//! against its one model, one target against the nonlinear family's own IMM filter, a
//! gate over wrapped angles against gating every detection, and radar targets that
//! cross the bearing's wrap at +-pi.

use kestrel::model::{constant_velocity, Model, Prior};
use kestrel::nalgebra::{DMatrix, DVector};
use kestrel::nonlinear::{
    estimate_on, FilterKind, ImmModel, Measure, NonlinearJob, NonlinearModel, NonlinearOptions,
    NonlinearProblem, TurnRate,
};
use kestrel::tracking::gate::{gate_all, gate_all_brute};
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, Innovations, Status, Tracker, TrackerConfig};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use std::f64::consts::PI;

fn scans(det: &kestrel::tracking::files::Detections, steps: usize) -> Vec<Vec<f64>> {
    let ny = det.ny;
    let mut out = vec![Vec::new(); steps];
    for (i, &t) in det.t.iter().enumerate() {
        out[t as usize].extend_from_slice(&det.z[i * ny..(i + 1) * ny]);
    }
    out
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())))
}

/// Both trackers hold the same tracks (identity, status, mean, covariance).
fn same_tracks(a: &Tracker, b: &Tracker, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: live tracks");
    for i in 0..a.len() {
        assert_eq!(a.id(i), b.id(i), "{what}: track {i}");
        assert_eq!(a.status(i), b.status(i), "{what}: track {i}");
        assert!(
            close(a.mean(i), b.mean(i), 1e-7),
            "{what}: track {i}: mean {:?} vs {:?}",
            a.mean(i),
            b.mean(i)
        );
        assert!(close(a.cov(i), b.cov(i), 1e-7), "{what}: track {i}: cov");
    }
}

fn cv_scenario(seed: u64) -> (Model, Scenario) {
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    let s = Scenario {
        kind: Kind::Crossing,
        targets: 12,
        steps: 30,
        pd: 0.9,
        clutter: 15.0,
        region: 800.0,
        births: 0.2,
        death: 0.01,
        seed,
    };
    (model, s)
}

fn config(assoc: Assoc, s: &Scenario) -> TrackerConfig {
    TrackerConfig::default()
        .with_assoc(assoc)
        .with_pd(s.pd)
        .with_clutter(s.clutter_density(2))
        .with_confirm((2, 3))
        .with_max_variance(5e3)
}

#[test]
fn a_linear_model_tracked_by_the_ekf_or_ukf_equals_the_kalman_tracker() {
    for (seed, assoc) in [(3, Assoc::Gnn), (4, Assoc::Jpda)] {
        let (model, s) = cv_scenario(seed);
        let (_, det) = simulate(&model, &s).unwrap();
        let problem = NonlinearProblem::Single(NonlinearModel::from_linear(&model).unwrap());
        for kind in [FilterKind::Ekf, FilterKind::Ukf, FilterKind::Iekf] {
            let opts = NonlinearOptions::default().with_kind(kind);
            let mut kf = Tracker::new(&model, config(assoc, &s)).unwrap();
            let mut nl = Tracker::nonlinear(&problem, &opts, config(assoc, &s)).unwrap();
            assert!(nl.state().is_none() && kf.state().is_some());
            let mut seen = 0;
            for (k, z) in scans(&det, s.steps).iter().enumerate() {
                kf.step(z).unwrap();
                nl.step(z).unwrap();
                same_tracks(&kf, &nl, &format!("{assoc:?} {kind:?} scan {k}"));
                seen += kf.len();
                assert!(nl.mode_probs(0).is_none() || nl.is_empty());
            }
            assert!(seen > 100, "the scenario holds tracks ({seen})");
        }
    }
}

fn two_modes(a: NonlinearModel, b: NonlinearModel, prior: Prior) -> ImmModel {
    ImmModel::new(
        vec![a, b],
        DMatrix::from_row_slice(2, 2, &[0.9, 0.1, 0.2, 0.8]),
        DVector::from_vec(vec![0.6, 0.4]),
        prior,
    )
    .unwrap()
}

#[test]
fn an_imm_of_equal_modes_tracks_as_its_one_model() {
    for (seed, assoc) in [(5, Assoc::Gnn), (6, Assoc::Jpda)] {
        let (model, s) = cv_scenario(seed);
        let (_, det) = simulate(&model, &s).unwrap();
        let one = NonlinearModel::from_linear(&model).unwrap();
        let imm = two_modes(one.clone(), one.clone(), model.prior().clone());
        let opts = NonlinearOptions::default();
        let mut single =
            Tracker::nonlinear(&NonlinearProblem::Single(one), &opts, config(assoc, &s)).unwrap();
        let mut both =
            Tracker::nonlinear(&NonlinearProblem::Imm(imm), &opts, config(assoc, &s)).unwrap();
        assert_eq!(both.modes(), 2);
        let mut ages = std::collections::HashMap::new();
        for (k, z) in scans(&det, s.steps).iter().enumerate() {
            single.step(z).unwrap();
            both.step(z).unwrap();
            same_tracks(&single, &both, &format!("{assoc:?} scan {k}"));
            // Equal likelihoods leave the mode probabilities to the Markov chain:
            // mu = (Pi^T)^(age - 1) initial.
            for i in 0..both.len() {
                let age = ages.entry(both.id(i)).or_insert(0usize);
                *age += 1;
                let mut mu = [0.6, 0.4];
                for _ in 1..*age {
                    mu = [0.9 * mu[0] + 0.2 * mu[1], 0.1 * mu[0] + 0.8 * mu[1]];
                }
                let got = both.mode_probs(i).unwrap();
                assert!(close(got, &mu, 1e-12), "scan {k}: {got:?} vs {mu:?}");
            }
        }
    }
}

/// A radar at the origin: constant velocity and a known turn as two modes.
fn radar_modes(turn: f64, prior: Prior) -> (NonlinearModel, NonlinearModel) {
    let meas = Measure::RangeBearing {
        radar: [0.0, 0.0],
        r_range: 25.0,
        r_bearing: 4e-6,
    };
    let cv = NonlinearModel::coordinated_turn(1.0, 0.5, TurnRate::Known(0.0), &meas, prior.clone())
        .unwrap();
    let ct =
        NonlinearModel::coordinated_turn(1.0, 0.5, TurnRate::Known(turn), &meas, prior).unwrap();
    (cv, ct)
}

fn vague_prior() -> Prior {
    Prior {
        x0: DVector::from_vec(vec![0.0, 0.0, 0.0, 0.0]),
        p0: DMatrix::from_diagonal(&DVector::from_vec(vec![1e6, 100.0, 1e6, 100.0])),
    }
}

/// `[range, bearing]` of the position `(px, py)` with noise.
fn radar_plot(rng: &mut impl Rng, px: f64, py: f64) -> [f64; 2] {
    let n = |rng: &mut dyn rand::RngCore, sd: f64| -> f64 {
        let v: f64 = StandardNormal.sample(rng);
        sd * v
    };
    [
        px.hypot(py) + n(rng, 5.0),
        kestrel::nonlinear::wrap(py.atan2(px) + n(rng, 0.002)),
    ]
}

#[test]
fn one_target_tracked_equals_the_imm_filter_from_its_first_detection() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let steps = 40;
    // A target that flies straight, then turns.
    let (mut x, mut y, mut vx, mut vy) = (3000.0, 1000.0, -40.0, 10.0);
    let mut z = Vec::new();
    for k in 0..steps {
        if k > 15 {
            let (c, s) = (0.1f64.cos(), 0.1f64.sin());
            (vx, vy) = (c * vx - s * vy, s * vx + c * vy);
        }
        x += vx;
        y += vy;
        z.extend(radar_plot(&mut rng, x, y));
    }
    for kind in [FilterKind::Ukf, FilterKind::Ekf, FilterKind::Ckf] {
        let (cv, ct) = radar_modes(0.1, vague_prior());
        let imm = two_modes(cv, ct, vague_prior());
        let opts = NonlinearOptions::default().with_kind(kind);
        let cfg = TrackerConfig::default()
            .with_pd(1.0)
            .with_clutter(1e-9)
            .with_confirm((1, 1))
            .with_gate(1.0 - 1e-12);
        let mut tracker =
            Tracker::nonlinear(&NonlinearProblem::Imm(imm.clone()), &opts, cfg).unwrap();
        let mut means = Vec::new();
        let mut probs = Vec::new();
        let mut p0 = DMatrix::zeros(4, 4);
        for k in 0..steps {
            tracker.step(&z[2 * k..2 * k + 2]).unwrap();
            assert_eq!(tracker.len(), 1, "{kind:?} scan {k}: one track");
            means.push(tracker.mean(0).to_vec());
            probs.push(tracker.mode_probs(0).unwrap().to_vec());
            if k == 0 {
                p0 = DMatrix::from_row_slice(4, 4, tracker.cov(0));
            }
        }
        // The IMM filter from the track's first state: step 0 missing (no update), then
        // the same detections.
        let x0 = DVector::from_vec(means[0].clone());
        let (cv, ct) = radar_modes(0.1, vague_prior());
        let prior = Prior { x0, p0 };
        let imm0 = two_modes(cv, ct, prior);
        let mut zz = z.clone();
        zz[0] = f64::NAN;
        zz[1] = f64::NAN;
        let meas = kestrel::Measurements::new(1, steps, 2, zz).unwrap();
        let out = estimate_on(
            kestrel::Device::Cpu,
            &NonlinearProblem::Imm(imm0),
            &meas,
            &opts,
            NonlinearJob::Filter,
        )
        .unwrap();
        let fm = out.filtered.mean();
        let mp = out.mode_probs.unwrap();
        for k in 0..steps {
            assert!(
                close(&means[k], &fm[4 * k..4 * k + 4], 1e-9),
                "{kind:?} step {k}: {:?} vs {:?}",
                means[k],
                &fm[4 * k..4 * k + 4]
            );
            assert!(
                close(&probs[k], &mp[2 * k..2 * k + 2], 1e-9),
                "{kind:?} step {k}"
            );
        }
        // The turn mode takes over once the target turns.
        let turn = |r: std::ops::Range<usize>| {
            let n = r.len() as f64;
            probs[r].iter().map(|p| p[1]).sum::<f64>() / n
        };
        let (early, late) = (turn(5..16), turn(steps - 15..steps));
        assert!(early < 0.35 && late > 0.6, "{kind:?}: {early} then {late}");
    }
}

#[test]
fn the_grid_gate_over_angles_equals_gating_every_detection() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for trial in 0..40 {
        let mut inns = Innovations::with_angles(2, &[1]);
        for _ in 0..rng.gen_range(1..60) {
            let (r, b) = (rng.gen_range(100.0..2000.0), rng.gen_range(-PI..PI));
            // Bearings near the wrap in half the trials.
            let b = if trial % 2 == 0 {
                kestrel::nonlinear::wrap(PI + 0.05 * (b / PI))
            } else {
                b
            };
            let sb: f64 = rng.gen_range(0.005..0.3);
            let sr: f64 = rng.gen_range(5.0..50.0);
            let s = [sr * sr, 0.0, 0.0, sb * sb];
            assert!(inns.push(&[r, b], &s));
        }
        let z: Vec<f64> = (0..rng.gen_range(0..500))
            .flat_map(|_| {
                let b = if rng.gen_bool(0.5) {
                    kestrel::nonlinear::wrap(PI + rng.gen_range(-0.4..0.4))
                } else {
                    rng.gen_range(-PI..PI)
                };
                [rng.gen_range(0.0..2100.0), b]
            })
            .collect();
        let gamma = kestrel::tracking::chi2::chi2_quantile(2, 0.999);
        let a = gate_all(&inns, &z, 2, gamma);
        let b = gate_all_brute(&inns, &z, 2, gamma);
        assert_eq!(a.start, b.start, "trial {trial}");
        assert_eq!(a.det, b.det, "trial {trial}");
        if trial % 2 == 0 {
            assert!(
                !a.det.is_empty(),
                "trial {trial}: gates across the wrap hold pairs"
            );
        }
    }
}

#[test]
fn radar_targets_across_the_bearing_wrap_keep_their_tracks() {
    // Four targets fly north or south across the negative x axis, where the bearing
    // jumps between +pi and -pi, among clutter over the whole scan.
    let steps = 40;
    let starts = [
        (-2000.0, -300.0, 0.0, 15.0),
        (-2600.0, 400.0, 0.0, -15.0),
        (-1500.0, -200.0, 2.0, 10.0),
        (-3200.0, 350.0, -3.0, -18.0),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let (rmax, clutter) = (4000.0, 10.0);
    let mut scans = vec![Vec::new(); steps];
    let mut truth = vec![Vec::new(); steps];
    for &(x0, y0, vx, vy) in &starts {
        for (k, scan) in scans.iter_mut().enumerate() {
            let (x, y) = (x0 + vx * k as f64, y0 + vy * k as f64);
            truth[k].push((x, y));
            if rng.gen_bool(0.95) {
                scan.extend(radar_plot(&mut rng, x, y));
            }
        }
    }
    for scan in &mut scans {
        for _ in 0..clutter as usize {
            scan.extend([rng.gen_range(0.0..rmax), rng.gen_range(-PI..PI)]);
        }
    }
    let density = clutter / (rmax * 2.0 * PI);
    for (kind, assoc) in [
        (FilterKind::Ukf, Assoc::Gnn),
        (FilterKind::Ekf, Assoc::Jpda),
        (FilterKind::Ckf, Assoc::Gnn),
    ] {
        let (cv, _) = radar_modes(0.0, vague_prior());
        let cfg = TrackerConfig::default()
            .with_assoc(assoc)
            .with_pd(0.95)
            .with_clutter(density)
            .with_confirm((3, 4));
        let opts = NonlinearOptions::default().with_kind(kind);
        let mut tracker = Tracker::nonlinear(&NonlinearProblem::Single(cv), &opts, cfg).unwrap();
        let mut confirmed = std::collections::HashSet::new();
        for (k, z) in scans.iter().enumerate() {
            tracker.step(z).unwrap();
            for i in 0..tracker.len() {
                if tracker.status(i) != Status::Confirmed {
                    continue;
                }
                let m = tracker.mean(i);
                // A confirmed track is near a target (no false track survives long).
                let near = truth[k]
                    .iter()
                    .any(|&(x, y)| (m[0] - x).hypot(m[2] - y) < 60.0);
                if near {
                    confirmed.insert(tracker.id(i));
                }
            }
        }
        // One track per target over the whole crossing: none broke at the wrap.
        assert_eq!(
            confirmed.len(),
            starts.len(),
            "{kind:?} {assoc:?}: {} confirmed tracks near the targets",
            confirmed.len()
        );
        let end = &truth[steps - 1];
        for &(x, y) in end {
            let hit = (0..tracker.len()).any(|i| {
                let m = tracker.mean(i);
                tracker.status(i) == Status::Confirmed && (m[0] - x).hypot(m[2] - y) < 30.0
            });
            assert!(
                hit,
                "{kind:?} {assoc:?}: target at ({x}, {y}) has no track at the end"
            );
        }
    }
}
