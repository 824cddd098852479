//! The share arithmetic and the carries on the host.

use super::{carries, shares, window};
use crate::parallel::FilterOp;
use crate::scan::AssocOp;

/// The carries are the folds of the share totals before (forward) and after
/// (backward) each share, per track, in order: checked against a plain fold with
/// random (non-commuting) elements, 1 to 5 shares, 2 tracks.
#[test]
fn carries_fold_the_totals_in_order() {
    let nx = 3;
    let op = FilterOp::<f64>::new(nx);
    let fe = op.elem_len();
    let mut seed = 7u64;
    let mut rnd = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    };
    // An element with C and J symmetric positive semi-definite (a valid one).
    let mut element = || {
        let mut e: Vec<f64> = (0..fe).map(|_| rnd()).collect();
        for part in [nx * nx + nx, 2 * nx * nx + 2 * nx] {
            let m: Vec<f64> = e[part..part + nx * nx].to_vec();
            for i in 0..nx {
                for j in 0..nx {
                    e[part + i * nx + j] =
                        (0..nx).map(|k| m[i * nx + k] * m[j * nx + k]).sum::<f64>()
                            + if i == j { 0.1 } else { 0.0 };
                }
            }
        }
        e
    };
    let tracks = 2;
    for p in 1..=5 {
        let lasts: Vec<Vec<f64>> = (0..p)
            .map(|_| (0..tracks).flat_map(|_| element()).collect())
            .collect();
        let firsts: Vec<Vec<f64>> = (0..p)
            .map(|_| (0..tracks).flat_map(|_| element()).collect())
            .collect();
        let (fwd, bwd) = carries(&op, &lasts, Some(&firsts));
        let (fwd_only, none) = carries(&op, &lasts, None);
        let mut s = op.scratch();
        for g in 0..p {
            assert_eq!(fwd[g], fwd_only[g]);
            assert!(none[g].is_none());
            assert_eq!(fwd[g].is_none(), g == 0, "p = {p}, g = {g}");
            assert_eq!(bwd[g].is_none(), g + 1 == p, "p = {p}, g = {g}");
            for b in 0..tracks {
                let at = |v: &Vec<f64>| v[b * fe..(b + 1) * fe].to_vec();
                let fold = |items: Vec<Vec<f64>>, s: &mut _| {
                    let mut acc = vec![0.0; fe];
                    op.identity(&mut acc);
                    for e in items {
                        let mut o = vec![0.0; fe];
                        op.combine(&acc, &e, &mut o, s);
                        acc = o;
                    }
                    acc
                };
                let close = |x: &[f64], y: &[f64]| {
                    x.iter()
                        .zip(y)
                        .all(|(a, c)| (a - c).abs() <= 1e-9 * (1.0 + c.abs()))
                };
                if let Some(f) = &fwd[g] {
                    let want = fold((0..g).map(|i| at(&lasts[i])).collect(), &mut s);
                    assert!(
                        close(&f[b * fe..(b + 1) * fe], &want),
                        "forward p = {p}, g = {g}"
                    );
                }
                if let Some(k) = &bwd[g] {
                    let want = fold((g + 1..p).map(|i| at(&firsts[i])).collect(), &mut s);
                    assert!(
                        close(&k[b * fe..(b + 1) * fe], &want),
                        "backward p = {p}, g = {g}"
                    );
                }
            }
        }
    }
}

#[test]
fn shares_cover_the_steps_in_order() {
    for t in [1, 2, 7, 100, 1001] {
        for p in 1..=4.min(t) {
            let s = shares(t, p);
            assert_eq!(s.len(), p);
            assert_eq!(s[0].0, 0);
            let mut at = 0;
            for &(k0, n) in &s {
                assert_eq!(k0, at);
                assert!(n >= 1, "t = {t}, p = {p}: an empty share");
                at += n;
            }
            assert_eq!(at, t);
        }
    }
}

#[test]
fn windows_reach_one_step_beyond_the_share() {
    // The first share starts at 0; later ones one step early.
    assert_eq!(window(0, 5, 10, false), (0, 5));
    assert_eq!(window(5, 5, 10, false), (4, 10));
    // The backward filter reads the step after the share, except at the end.
    assert_eq!(window(0, 5, 10, true), (0, 6));
    assert_eq!(window(5, 5, 10, true), (4, 10));
}
