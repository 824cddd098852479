//! Statistical consistency of the filter and smoother on data simulated from the model.

mod common;

use common::chi2_quantile;
use kestrel::kalman::{filter, mean_nees, rmse, smooth_filtered, FilterOptions};
use kestrel::model::constant_velocity;
use kestrel::sim::simulate;
use kestrel::Estimates;

/// z quantile of the standard normal at 0.995 (two-sided 99%).
const Z995: f64 = 2.575_829_303_548_901;

/// Mean of `per_sample` over tracks at step `k` of an `nx`-dof quadratic form lies in
/// the two-sided 99% interval of chi^2(tracks * dof) / tracks.
fn assert_in_chi2_interval(mean: f64, tracks: usize, dof: usize, what: &str) {
    let n = (tracks * dof) as f64;
    let lo = chi2_quantile(n, -Z995) / tracks as f64;
    let hi = chi2_quantile(n, Z995) / tracks as f64;
    assert!(
        lo <= mean && mean <= hi,
        "{what}: mean {mean:.4} outside the 99% interval [{lo:.4}, {hi:.4}]"
    );
}

fn step_slice(e: &Estimates<f64>, k: usize) -> Estimates<f64> {
    // The estimates of every track at step k only.
    let nx = e.nx();
    let mut mean = Vec::new();
    let mut cov = Vec::new();
    for b in 0..e.tracks() {
        mean.extend_from_slice(e.mean_at(b, k));
        cov.extend_from_slice(e.cov_at(b, k));
    }
    Estimates::new(e.tracks(), 1, nx, mean, cov, None).expect("consistent buffers")
}

fn truth_slice(truth: &[f64], tracks: usize, steps: usize, nx: usize, k: usize) -> Vec<f64> {
    (0..tracks)
        .flat_map(|b| truth[(b * steps + k) * nx..(b * steps + k + 1) * nx].to_vec())
        .collect()
}

#[test]
fn nees_nis_and_smoother_gain_on_simulated_data() {
    let m = constant_velocity(2, 1.0, 0.5, 4.0, 25.0).unwrap();
    let (tracks, steps) = (2000, 60);
    let sim = simulate(&m, tracks, steps, 2024, 0.05).unwrap();
    let z = &sim.measurements;
    let out = filter(
        &m,
        z,
        &FilterOptions::default()
            .with_predicted(true)
            .with_force_general(true),
    )
    .unwrap();
    let f = out.filtered;
    let fast = filter(&m, z, &FilterOptions::default()).unwrap().filtered;
    assert!(common::max_rel_err(fast.mean().iter().cloned(), f.mean().iter().cloned()) < 1e-10);
    let s = smooth_filtered(&m, &f).unwrap();
    // NEES of filter and smoother at several steps: each an average over independent tracks.
    for k in [0, 1, 10, 30, steps - 1] {
        let tk = truth_slice(&sim.truth, tracks, steps, 4, k);
        assert_in_chi2_interval(
            mean_nees(&step_slice(&f, k), &tk),
            tracks,
            4,
            &format!("filter NEES, step {k}"),
        );
        assert_in_chi2_interval(
            mean_nees(&step_slice(&s, k), &tk),
            tracks,
            4,
            &format!("smoother NEES, step {k}"),
        );
    }
    // NIS at several steps over the tracks whose measurement is present.
    let pred = out.predicted.unwrap();
    for k in [0, 5, 30, steps - 1] {
        let mut sum = 0.0;
        let mut n = 0;
        for b in 0..tracks {
            if z.is_missing(b, k) {
                continue;
            }
            let zk = z.at(b, k);
            let x = pred.mean_at(b, k);
            let p = pred.cov_at(b, k);
            // H picks positions 0 and 2; R = 4 I.
            let y = [zk[0] - x[0], zk[1] - x[2]];
            let s = [p[0] + 4.0, p[2], p[2 * 4], p[2 * 4 + 2] + 4.0];
            sum += kestrel::kalman::nees(&y, &s);
            n += 1;
        }
        assert_in_chi2_interval(sum / n as f64, n, 2, &format!("NIS, step {k}"));
    }
    // The smoother is more accurate than the filter, which beats the raw measurements.
    let pos = [0usize, 2];
    let rm_f = rmse(
        &f.mean()
            .chunks(4)
            .flat_map(|c| [c[0], c[2]])
            .collect::<Vec<_>>(),
        2,
        &sim.truth,
        4,
        &pos,
    );
    let rm_s = rmse(
        &s.mean()
            .chunks(4)
            .flat_map(|c| [c[0], c[2]])
            .collect::<Vec<_>>(),
        2,
        &sim.truth,
        4,
        &pos,
    );
    let rm_z = rmse(z.data(), 2, &sim.truth, 4, &pos);
    assert!(
        rm_s < rm_f && rm_f < rm_z,
        "RMSE smoother {rm_s}, filter {rm_f}, measurements {rm_z}"
    );
}
