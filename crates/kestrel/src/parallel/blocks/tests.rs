use super::*;
use crate::model::Model;
use nalgebra::{DMatrix, DVector};

fn model() -> Model {
    Model::new(
        DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 0.0, 1.0]),
        DMatrix::from_row_slice(2, 2, &[0.02, 0.01, 0.01, 0.03]),
        DMatrix::from_row_slice(1, 2, &[1.0, 0.0]),
        DMatrix::from_row_slice(1, 1, &[0.5]),
        DVector::from_vec(vec![0.3, -0.1]),
        DMatrix::from_row_slice(2, 2, &[2.0, 0.1, 0.1, 1.0]),
    )
    .unwrap()
}

fn split(z: &Measurements<f64>, cuts: &[usize]) -> Vec<Measurements<f64>> {
    let (b, t) = (z.tracks, z.steps);
    cuts.windows(2)
        .map(|w| {
            let mut d = Vec::new();
            for i in 0..b {
                d.extend_from_slice(&z.data[i * t + w[0]..i * t + w[1]]);
            }
            Measurements::new(b, w[1] - w[0], 1, d).unwrap()
        })
        .collect()
}

#[test]
fn blocks_equal_the_whole_run() {
    let m = model();
    let (b, t) = (3, 37);
    let data: Vec<f64> = (0..b * t)
        .map(|i| {
            if i % 11 == 5 {
                f64::NAN
            } else {
                (i as f64 * 0.37).sin() * 3.0
            }
        })
        .collect();
    let z = Measurements::new(b, t, 1, data).unwrap();
    let alg = ScanAlgorithm::default();
    let whole = super::super::smooth_rts(crate::Device::Cpu, &m, &z, alg).unwrap();
    let cuts = [0, 1, 9, 20, 37];
    let blocks = split(&z, &cuts);
    let at = |j: usize| BlockAt {
        track: 0,
        step: cuts[j],
    };
    let totals: Vec<Vec<f64>> = blocks
        .iter()
        .enumerate()
        .map(|(j, zb)| filter_block_total(&m, zb, at(j)).unwrap())
        .collect();
    let refs: Vec<&[f64]> = totals.iter().map(|v| v.as_slice()).collect();
    let carries = filter_carries(2, &refs).unwrap();
    let filt: Vec<Estimates<f64>> = blocks
        .iter()
        .enumerate()
        .map(|(j, zb)| filter_block(&m, zb, at(j), carries[j].as_deref(), alg).unwrap())
        .collect();
    let g = blocks.len();
    let stot: Vec<Vec<f64>> = filt
        .iter()
        .enumerate()
        .map(|(j, f)| smooth_block_total(&m, f, at(j), j + 1 == g).unwrap())
        .collect();
    let refs: Vec<&[f64]> = stot.iter().map(|v| v.as_slice()).collect();
    let sc = smooth_carries(2, &refs).unwrap();
    for (j, f) in filt.iter().enumerate() {
        let s = smooth_block(&m, f, at(j), j + 1 == g, sc[j].as_deref(), alg).unwrap();
        for tr in 0..b {
            for i in 0..f.steps {
                let k = cuts[j] + i;
                let close = |a: &[f64], c: &[f64]| {
                    a.iter()
                        .zip(c)
                        .all(|(x, y)| (x - y).abs() <= 1e-9 * (1.0 + y.abs()))
                };
                assert!(close(f.mean_at(tr, i), whole.0.mean_at(tr, k)));
                assert!(close(f.cov_at(tr, i), whole.0.cov_at(tr, k)));
                let (l1, l2) = (
                    f.loglik().unwrap()[tr * f.steps + i],
                    whole.0.loglik().unwrap()[tr * t + k],
                );
                assert!((l1 - l2).abs() <= 1e-9 * (1.0 + l2.abs()), "{l1} {l2}");
                assert!(close(s.mean_at(tr, i), whole.1.mean_at(tr, k)));
                assert!(close(s.cov_at(tr, i), whole.1.cov_at(tr, k)));
            }
        }
    }
    // Wrong carries are refused.
    assert!(filter_block(&m, &blocks[1], at(1), None, alg).is_err());
    assert!(filter_block(&m, &blocks[0], at(0), carries[1].as_deref(), alg).is_err());
}
