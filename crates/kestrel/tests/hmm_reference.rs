//! The HMM family on the CPU against plain references written in the tests: the
//! textbook forward-backward in f64 and enumeration of every path (likelihood and
//! Viterbi path) on random models and observations; sequential = parallel under every
//! scan algorithm; the tie rule; f32; long sequences; bad inputs.

mod hmm_common;

use hmm_common::*;
use kestrel::hmm::{hmm_on, Emission, HiddenMarkovModel, HmmMethod, HmmOptions, HmmOutput};
use kestrel::{Device, Measurements, Real, ScanAlgorithm};

fn run<T: Real>(
    m: &HiddenMarkovModel,
    z: &Measurements<T>,
    method: HmmMethod,
    scan: ScanAlgorithm,
) -> HmmOutput<T> {
    hmm_on(
        Device::Cpu,
        m,
        z,
        &HmmOptions::default().with_method(method).with_scan(scan),
    )
    .unwrap()
}

fn assert_same_path(a: &[i64], b: &[i64], what: &str) {
    if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
        panic!(
            "{what}: paths differ first at index {i}: {} vs {}",
            a[i], b[i]
        );
    }
}

fn track64<T: Real>(z: &Measurements<T>, b: usize) -> Vec<f64> {
    z.track(b).iter().map(|v| v.to_f64()).collect()
}

fn check_against_textbook<T: Real>(seed: u64, tol: f64) {
    let mut r = rng(seed);
    for case in 0..24 {
        let k = 1 + case % 5;
        let gauss = (case % 3 == 2).then_some(1 + case % 3);
        let m = random_model(&mut r, k, 1 + case % 4, gauss);
        let (b, t) = (3, 1 + (case * 7) % 40);
        let z: Measurements<T> = simulate(&mut r, &m, b, t, 0.15);
        for method in [HmmMethod::Sequential, HmmMethod::Parallel] {
            let o = run(&m, &z, method, ScanAlgorithm::Fastest);
            assert_eq!((o.tracks, o.steps, o.states), (b, t, k));
            for tr in 0..b {
                let (f, s, l) = textbook(&m, &track64(&z, tr));
                let r = tr * t * k..(tr + 1) * t * k;
                let what = format!(
                    "case {case} (K {k}, T {t}, {method:?}, {}) track {tr}",
                    T::NAME
                );
                assert!(
                    max_diff(&o.filtered[r.clone()], &f) < tol,
                    "{what}: filtered"
                );
                assert!(max_diff(&o.smoothed[r], &s) < tol, "{what}: smoothed");
                let ll = &o.loglik[tr * t..(tr + 1) * t];
                // Gaussian log-densities reach tens: compare relative to their size.
                let scale = 1.0 + l.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                assert!(
                    max_diff(ll, &l) < tol * scale,
                    "{what}: loglik {ll:?} vs {l:?}"
                );
            }
        }
    }
}

#[test]
fn filter_smoother_and_likelihood_equal_the_textbook_in_f64() {
    check_against_textbook::<f64>(1, 1e-10);
}

#[test]
fn filter_smoother_and_likelihood_equal_the_textbook_in_f32() {
    check_against_textbook::<f32>(2, 2e-4);
}

#[test]
fn viterbi_path_and_likelihood_equal_enumeration_of_every_path() {
    let mut r = rng(3);
    for case in 0..40 {
        let k = 1 + case % 3;
        let t = 1 + case % 7;
        let gauss = (case % 2 == 1).then_some(1 + case % 2);
        let m = random_model(&mut r, k, 2 + case % 3, gauss);
        let z: Measurements<f64> = simulate(&mut r, &m, 2, t, 0.1);
        for method in [HmmMethod::Sequential, HmmMethod::Parallel] {
            for scan in ScanAlgorithm::all() {
                let o = run(&m, &z, method, scan);
                for tr in 0..2 {
                    let (ll, best, path) = brute_force(&m, &track64(&z, tr), 1e-12);
                    let got: Vec<usize> = o.path[tr * t..(tr + 1) * t]
                        .iter()
                        .map(|&p| p as usize)
                        .collect();
                    assert_eq!(
                        got, path,
                        "case {case} {method:?} {scan:?} track {tr} (best {best})"
                    );
                    assert!(
                        (o.total_loglik(tr) - ll).abs() < 1e-10 * (1.0 + ll.abs()),
                        "case {case}: {} vs {ll}",
                        o.total_loglik(tr)
                    );
                }
            }
        }
    }
}

#[test]
fn sequential_equals_parallel_under_every_scan_algorithm() {
    let mut r = rng(4);
    for (case, (k, gauss)) in [(4, None), (3, Some(2)), (6, None), (2, Some(1))]
        .into_iter()
        .enumerate()
    {
        let m = random_model(&mut r, k, 5, gauss);
        let z: Measurements<f64> = simulate(&mut r, &m, 5, 700, 0.05);
        let seq = run(&m, &z, HmmMethod::Sequential, ScanAlgorithm::Fastest);
        for scan in ScanAlgorithm::all() {
            let par = run(&m, &z, HmmMethod::Parallel, scan);
            let what = format!("case {case} {scan:?}");
            let to64 = |v: &[f64]| v.to_vec();
            assert!(
                max_diff(&par.filtered, &to64(&seq.filtered)) < 1e-10,
                "{what}: filtered"
            );
            assert!(
                max_diff(&par.smoothed, &to64(&seq.smoothed)) < 1e-10,
                "{what}: smoothed"
            );
            assert!(
                max_diff(&par.loglik, &to64(&seq.loglik)) < 1e-9,
                "{what}: loglik"
            );
            assert_same_path(&par.path, &seq.path, &what);
        }
    }
}

/// States 0 and 1 are copies of each other (same emission, same transitions into and
/// out of them), so every path through them has an exact twin: the documented rule
/// (smallest last state, then the smallest before it, ...) decides.
#[test]
fn viterbi_ties_follow_the_documented_rule_in_both_forms() {
    let mut r = rng(5);
    for case in 0..12 {
        let row = |r: &mut rand::rngs::StdRng| {
            let d = dist(r, 2, false);
            vec![d[0] / 2.0, d[0] / 2.0, d[1]]
        };
        let r0 = row(&mut r);
        let r2 = row(&mut r);
        let transition: Vec<f64> = [r0.clone(), r0, r2].concat();
        let p = dist(&mut r, 3, false);
        let q = dist(&mut r, 3, false);
        let probs: Vec<f64> = [p.clone(), p, q].concat();
        let i = dist(&mut r, 2, false);
        let initial = vec![i[0] / 2.0, i[0] / 2.0, i[1]];
        let m = HiddenMarkovModel::new(
            transition,
            initial,
            Emission::Categorical { symbols: 3, probs },
        )
        .unwrap();
        let t = 1 + case % 6;
        let z: Measurements<f64> = simulate(&mut r, &m, 3, t, 0.2);
        for method in [HmmMethod::Sequential, HmmMethod::Parallel] {
            for scan in ScanAlgorithm::all() {
                let o = run(&m, &z, method, scan);
                let z32 = z.cast::<f32>();
                let o32 = run(&m, &z32, method, scan);
                for tr in 0..3 {
                    let (_, _, path) = brute_force(&m, &track64(&z, tr), 1e-9);
                    let got: Vec<usize> = o.path[tr * t..(tr + 1) * t]
                        .iter()
                        .map(|&p| p as usize)
                        .collect();
                    assert_eq!(got, path, "case {case} {method:?} {scan:?} track {tr}");
                    assert_eq!(
                        &o32.path[tr * t..(tr + 1) * t],
                        &o.path[tr * t..(tr + 1) * t],
                        "f32 case {case}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_million_steps_neither_underflow_nor_lose_the_likelihood() {
    let mut r = rng(6);
    let m = random_model(&mut r, 3, 4, None);
    let z: Measurements<f64> = simulate(&mut r, &m, 1, 1_000_000, 0.01);
    let seq = run(&m, &z, HmmMethod::Sequential, ScanAlgorithm::Fastest);
    let par = run(&m, &z, HmmMethod::Parallel, ScanAlgorithm::Fastest);
    let z32 = z.cast::<f32>();
    let par32 = run(&m, &z32, HmmMethod::Parallel, ScanAlgorithm::Fastest);
    for o in [&seq, &par] {
        assert!(o
            .filtered
            .iter()
            .chain(&o.smoothed)
            .chain(&o.loglik)
            .all(|v| v.is_finite()));
    }
    assert!(par32
        .filtered
        .iter()
        .chain(&par32.smoothed)
        .chain(&par32.loglik)
        .all(|v| v.is_finite()));
    // Every step's log-likelihood is that of one symbol: within (ln min p, 0].
    assert!(seq.loglik.iter().all(|&l| l <= 1e-12 && l > -20.0));
    assert!(max_diff(&par.loglik, &seq.loglik) < 1e-9);
    assert!(max_diff(&par.smoothed, &seq.smoothed) < 1e-8);
    assert!(max_diff(&par32.loglik, &seq.loglik) < 1e-3);
    assert!(max_diff(&par32.filtered, &seq.filtered) < 1e-3);
    // The Viterbi scores are exact sums in f64 whatever the precision: one path.
    assert_same_path(&par.path, &seq.path, "f64");
    assert_same_path(&par32.path, &seq.path, "f32");
}

#[test]
fn bad_observations_and_models_are_refused_naming_where() {
    let mut r = rng(7);
    let m = random_model(&mut r, 2, 3, None);
    let mut data = vec![0.0, 1.0, 2.0, f64::NAN, 1.0, 2.5];
    let z = Measurements::new(2, 3, 1, data.clone()).unwrap();
    let e = hmm_on(Device::Cpu, &m, &z, &HmmOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("track 1, step 2") && e.contains("not an integer"),
        "{e}"
    );
    data[5] = 3.0;
    let z = Measurements::new(2, 3, 1, data.clone()).unwrap();
    let e = hmm_on(Device::Cpu, &m, &z, &HmmOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("track 1, step 2") && e.contains("out of range"),
        "{e}"
    );
    data[5] = -1.0;
    let z = Measurements::new(2, 3, 1, data).unwrap();
    assert!(hmm_on(Device::Cpu, &m, &z, &HmmOptions::default()).is_err());
    let z2 = Measurements::new(1, 2, 2, vec![0.0; 4]).unwrap();
    let e = hmm_on(Device::Cpu, &m, &z2, &HmmOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 components"), "{e}");
    // Models.
    let cat = |p: Vec<f64>| Emission::Categorical {
        symbols: 2,
        probs: p,
    };
    let e = HiddenMarkovModel::new(vec![0.5, 0.6, 0.5, 0.5], vec![0.5, 0.5], cat(vec![0.5; 4]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("transition row 0") && e.contains("sums to"),
        "{e}"
    );
    let e = HiddenMarkovModel::new(vec![0.5; 4], vec![0.7, 0.5], cat(vec![0.5; 4]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("initial"), "{e}");
    let e = HiddenMarkovModel::new(vec![0.5; 4], vec![0.5, 0.5], cat(vec![1.5, -0.5, 0.5, 0.5]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("emission.probs row 0"), "{e}");
    let e = HiddenMarkovModel::new(vec![0.5; 3], vec![0.5, 0.5], cat(vec![0.5; 4]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("transition"), "{e}");
    let g = Emission::Gaussian {
        ny: 1,
        means: vec![0.0, 1.0],
        covs: vec![1.0, -1.0],
    };
    let e = HiddenMarkovModel::new(vec![0.5; 4], vec![0.5, 0.5], g)
        .unwrap_err()
        .to_string();
    assert!(e.contains("covs[1]"), "{e}");
}

#[test]
fn an_impossible_observation_is_an_error_naming_track_and_step() {
    let probs = vec![1.0, 0.0, 1.0, 0.0];
    let m = HiddenMarkovModel::new(
        vec![0.5; 4],
        vec![0.5, 0.5],
        Emission::Categorical { symbols: 2, probs },
    )
    .unwrap();
    let z = Measurements::new(2, 3, 1, vec![0.0, 0.0, 0.0, 0.0, f64::NAN, 1.0]).unwrap();
    for method in [HmmMethod::Sequential, HmmMethod::Parallel] {
        let e = hmm_on(
            Device::Cpu,
            &m,
            &z,
            &HmmOptions::default().with_method(method),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("track 1, step 2") && e.contains("probability 0"),
            "{method:?}: {e}"
        );
    }
}

#[test]
fn zero_probabilities_in_the_model_are_handled_exactly() {
    let mut r = rng(8);
    for case in 0..20 {
        let k = 2 + case % 3;
        let transition: Vec<f64> = (0..k).flat_map(|_| dist(&mut r, k, true)).collect();
        let probs: Vec<f64> = (0..k)
            .flat_map(|_| dist(&mut r, 3, case % 2 == 0))
            .collect();
        let m = HiddenMarkovModel::new(
            transition,
            dist(&mut r, k, false),
            Emission::Categorical { symbols: 3, probs },
        )
        .unwrap();
        let z: Measurements<f64> = simulate(&mut r, &m, 2, 6, 0.1);
        let seq = run(&m, &z, HmmMethod::Sequential, ScanAlgorithm::Fastest);
        let par = run(&m, &z, HmmMethod::Parallel, ScanAlgorithm::Blelloch);
        for tr in 0..2 {
            let (f, s, _) = textbook(&m, &track64(&z, tr));
            let (ll, _, path) = brute_force(&m, &track64(&z, tr), 1e-12);
            for o in [&seq, &par] {
                assert!(
                    max_diff(&o.filtered[tr * 6 * k..(tr + 1) * 6 * k], &f) < 1e-10,
                    "case {case}"
                );
                assert!(
                    max_diff(&o.smoothed[tr * 6 * k..(tr + 1) * 6 * k], &s) < 1e-10,
                    "case {case}"
                );
                assert!((o.total_loglik(tr) - ll).abs() < 1e-9, "case {case}");
                let got: Vec<usize> = o.path[tr * 6..(tr + 1) * 6]
                    .iter()
                    .map(|&p| p as usize)
                    .collect();
                assert_eq!(got, path, "case {case}");
            }
        }
    }
}
