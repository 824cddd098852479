//! The element operators of the parallel filter and smoothers are associative and their
//! identities are two-sided, on random elements, in both precisions.

use kestrel::parallel::{FilterOp, SmoothOp};
use kestrel::scan::AssocOp;
use kestrel::Real;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// `X X^T / n` for a random `n x n` Gaussian `X`: symmetric positive semi-definite.
fn gram(rng: &mut impl Rng, n: usize) -> Vec<f64> {
    let x: Vec<f64> = (0..n * n)
        .map(|_| rng.sample::<f64, _>(StandardNormal))
        .collect();
    let mut g = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            g[i * n + j] = (0..n).map(|l| x[i * n + l] * x[j * n + l]).sum::<f64>() / n as f64;
        }
    }
    g
}

fn normal(rng: &mut impl Rng, m: usize, scale: f64) -> Vec<f64> {
    (0..m)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// A random valid filtering element: `C` and `J` symmetric positive semi-definite.
fn filter_element(rng: &mut impl Rng, n: usize) -> Vec<f64> {
    let mut e = normal(rng, n * n, 0.5);
    e.extend(normal(rng, n, 1.0));
    e.extend(gram(rng, n));
    e.extend(normal(rng, n, 1.0));
    e.extend(gram(rng, n));
    e
}

fn smooth_element(rng: &mut impl Rng, n: usize) -> Vec<f64> {
    let mut e = normal(rng, n * n, 0.5);
    e.extend(normal(rng, n, 1.0));
    e.extend(gram(rng, n));
    e
}

fn cast<T: Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|x| T::of(*x)).collect()
}

fn comb<O: AssocOp>(op: &O, a: &[O::Scalar], b: &[O::Scalar]) -> Vec<O::Scalar> {
    let mut out = vec![O::Scalar::default(); op.elem_len()];
    op.combine(a, b, &mut out, &mut op.scratch());
    out
}

/// `max |a - b| / (1 + max |b|)`.
fn rel<T: Real>(a: &[T], b: &[T]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.to_f64().abs()));
    let d = a
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x.to_f64() - y.to_f64()).abs()));
    assert!(a.iter().all(|v| v.is_finite_value()), "non-finite result");
    d / (1.0 + scale)
}

fn check_op<T: Real, O: AssocOp<Scalar = T>>(op: &O, a: &[f64], b: &[f64], c: &[f64], tol: f64) {
    let (a, b, c) = (cast::<T>(a), cast::<T>(b), cast::<T>(c));
    let left = comb(op, &comb(op, &a, &b), &c);
    let right = comb(op, &a, &comb(op, &b, &c));
    let r = rel(&left, &right);
    assert!(r < tol, "{}: (a b) c vs a (b c): {r:e}", T::NAME);
    let mut e = vec![T::zero(); op.elem_len()];
    op.identity(&mut e);
    assert!(rel(&comb(op, &e, &a), &a) < tol, "{}: e a != a", T::NAME);
    assert!(rel(&comb(op, &a, &e), &a) < tol, "{}: a e != a", T::NAME);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn filtering_operator_is_associative_with_a_two_sided_identity(seed in any::<u64>(), n in 1usize..6) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (a, b, c) = (filter_element(&mut rng, n), filter_element(&mut rng, n), filter_element(&mut rng, n));
        check_op::<f64, _>(&FilterOp::<f64>::new(n), &a, &b, &c, 1e-11);
        check_op::<f32, _>(&FilterOp::<f32>::new(n), &a, &b, &c, 2e-4);
    }

    #[test]
    fn smoothing_operator_is_associative_with_a_two_sided_identity(seed in any::<u64>(), n in 1usize..6) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (a, b, c) = (smooth_element(&mut rng, n), smooth_element(&mut rng, n), smooth_element(&mut rng, n));
        check_op::<f64, _>(&SmoothOp::<f64>::new(n, false), &a, &b, &c, 1e-12);
        check_op::<f32, _>(&SmoothOp::<f32>::new(n, false), &a, &b, &c, 1e-5);
        let trim = |v: &[f64]| v[..n * n + n].to_vec();
        check_op::<f64, _>(&SmoothOp::<f64>::new(n, true), &trim(&a), &trim(&b), &trim(&c), 1e-12);
    }
}

#[test]
fn the_papers_zero_element_is_not_an_identity() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let n = 3;
    let op = FilterOp::<f64>::new(n);
    let a = filter_element(&mut rng, n);
    let zero = vec![0.0; op.elem_len()];
    // a ⊗ 0 has A = 0: the zero element annihilates the transition of its left side.
    let r = comb(&op, &a, &zero);
    assert!(r[..n * n].iter().all(|v| *v == 0.0));
    assert!(rel(&r, &a) > 1e-3);
}
