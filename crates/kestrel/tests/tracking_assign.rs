//! The 2-D assignment solver against brute force on random problems, and the chi-square
//! quantile against closed forms.

use kestrel::tracking::assign::{solve_sparse_with_misses, solve_with_misses, Assignment};
use kestrel::tracking::chi2::{chi2_cdf, chi2_quantile};
use rand::{Rng, SeedableRng};

/// The least total over all injective maps of rows into columns (rows <= cols), by
/// enumeration; `INFINITY` when every map uses a forbidden pair.
fn brute(rows: usize, cols: usize, c: &[f64]) -> f64 {
    fn go(i: usize, rows: usize, cols: usize, c: &[f64], used: &mut Vec<bool>) -> f64 {
        if i == rows {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        for j in 0..cols {
            if !used[j] && c[i * cols + j].is_finite() {
                used[j] = true;
                best = best.min(c[i * cols + j] + go(i + 1, rows, cols, c, used));
                used[j] = false;
            }
        }
        best
    }
    go(0, rows, cols, c, &mut vec![false; cols])
}

fn total(rows: usize, cols: usize, c: &[f64], sol: &[Option<usize>]) -> f64 {
    let mut used = vec![false; cols];
    let mut t = 0.0;
    for i in 0..rows {
        if let Some(j) = sol[i] {
            assert!(!used[j], "column {j} used twice");
            used[j] = true;
            t += c[i * cols + j];
        }
    }
    t
}

#[test]
fn equals_brute_force_on_random_rectangular_problems() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut solver = Assignment::new();
    for _ in 0..3000 {
        let rows = rng.gen_range(1..=6);
        let cols = rng.gen_range(1..=6);
        let forbid = rng.gen_range(0.0..0.5);
        let integer = rng.gen_bool(0.3);
        let c: Vec<f64> = (0..rows * cols)
            .map(|_| {
                if rng.gen_bool(forbid) {
                    f64::INFINITY
                } else if integer {
                    rng.gen_range(0..4) as f64
                } else {
                    rng.gen_range(-5.0..10.0)
                }
            })
            .collect();
        let (r, k, cm) = if rows <= cols {
            (rows, cols, c.clone())
        } else {
            let mut t = vec![0.0; rows * cols];
            for i in 0..rows {
                for j in 0..cols {
                    t[j * rows + i] = c[i * cols + j];
                }
            }
            (cols, rows, t)
        };
        let best = brute(r, k, &cm);
        match solver.solve(rows, cols, &c) {
            None => assert!(
                best.is_infinite(),
                "solver found no assignment, best {best}"
            ),
            Some(sol) => {
                assert_eq!(sol.iter().filter(|s| s.is_some()).count(), rows.min(cols));
                let t = total(rows, cols, &c, &sol);
                assert!((t - best).abs() < 1e-9, "solver {t}, brute force {best}");
            }
        }
    }
}

#[test]
fn misses_are_chosen_when_cheaper() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut solver = Assignment::new();
    for _ in 0..2000 {
        let rows = rng.gen_range(1..=5);
        let cols = rng.gen_range(0..=5);
        let c: Vec<f64> = (0..rows * cols)
            .map(|_| {
                if rng.gen_bool(0.3) {
                    f64::INFINITY
                } else {
                    rng.gen_range(0.0..10.0)
                }
            })
            .collect();
        let miss: Vec<f64> = (0..rows).map(|_| rng.gen_range(0.0..8.0)).collect();
        // Brute force over partial maps: each row picks a free column or nothing.
        fn go(i: usize, r: usize, k: usize, c: &[f64], m: &[f64], used: &mut [bool]) -> f64 {
            if i == r {
                return 0.0;
            }
            let mut best = m[i] + go(i + 1, r, k, c, m, used);
            for j in 0..k {
                if !used[j] && c[i * k + j].is_finite() {
                    used[j] = true;
                    best = best.min(c[i * k + j] + go(i + 1, r, k, c, m, used));
                    used[j] = false;
                }
            }
            best
        }
        let best = go(0, rows, cols, &c, &miss, &mut vec![false; cols]);
        let (sol, t) = solve_with_misses(&mut solver, rows, cols, &c, &miss).unwrap();
        let mut check = 0.0;
        for i in 0..rows {
            check += sol[i].map_or(miss[i], |j| c[i * cols + j]);
        }
        assert!((t - best).abs() < 1e-9 && (check - t).abs() < 1e-9);
    }
}

#[test]
fn infeasible_and_nan_are_refused() {
    let mut s = Assignment::new();
    let inf = f64::INFINITY;
    assert!(s.solve(2, 2, &[1.0, inf, 2.0, inf]).is_none());
    assert!(s.solve(1, 2, &[f64::NAN, 1.0]).is_none());
    assert_eq!(s.solve(2, 0, &[]).unwrap(), vec![None, None]);
}

#[test]
fn closed_forms() {
    // k = 2: the CDF is 1 - exp(-x/2), so the quantile is -2 ln(1 - p).
    for p in [0.5, 0.9, 0.99, 0.999, 0.9999] {
        let q = chi2_quantile(2, p);
        assert!((q + 2.0 * (1.0 - p).ln()).abs() < 1e-9 * q, "{p}: {q}");
    }
    // k = 1: x = z^2 with z normal; P(|z| < 1.959963984540054) = 0.95.
    let q = chi2_quantile(1, 0.95);
    assert!((q - 1.959_963_984_540_054f64.powi(2)).abs() < 1e-9);
    // k = 4: CDF = 1 - exp(-x/2)(1 + x/2).
    for x in [0.5, 3.0, 9.0, 18.467] {
        let want = 1.0 - (-x / 2.0f64).exp() * (1.0 + x / 2.0);
        assert!((chi2_cdf(4, x) - want).abs() < 1e-13);
    }
}

/// The sparse solver against the dense one on random sparse problems with misses
/// (negative costs included, as the tracker's log-likelihood ratios are): the same
/// optimal total, a feasible assignment whose cost is that total.
#[test]
fn sparse_solver_equals_the_dense_one() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1987);
    let mut solver = Assignment::new();
    for trial in 0..400 {
        let rows = rng.gen_range(0..30);
        let cols = rng.gen_range(0..30);
        let density = [0.05, 0.2, 0.6][trial % 3];
        let mut dense = vec![f64::INFINITY; rows * cols];
        let (mut start, mut col, mut cost) = (vec![0], Vec::new(), Vec::new());
        for i in 0..rows {
            for j in 0..cols {
                if rng.gen_bool(density) {
                    let c = rng.gen_range(-20.0..10.0);
                    dense[i * cols + j] = c;
                    col.push(j as u32);
                    cost.push(c);
                }
            }
            start.push(col.len());
        }
        let miss: Vec<f64> = (0..rows).map(|_| rng.gen_range(-5.0..8.0)).collect();
        let (want, t0) = solve_with_misses(&mut solver, rows, cols, &dense, &miss).unwrap();
        let (got, t1) = solve_sparse_with_misses(rows, cols, &start, &col, &cost, &miss).unwrap();
        assert!(
            (t0 - t1).abs() <= 1e-9 * (1.0 + t0.abs()),
            "trial {trial}: {t0} vs {t1}"
        );
        let mut used = vec![false; cols];
        let mut again = 0.0;
        for (i, s) in got.iter().enumerate() {
            match *s {
                Some(j) => {
                    assert!(!used[j], "trial {trial}: column {j} twice");
                    used[j] = true;
                    assert!(
                        dense[i * cols + j].is_finite(),
                        "trial {trial}: forbidden pair"
                    );
                    again += dense[i * cols + j];
                }
                None => again += miss[i],
            }
        }
        assert!((again - t1).abs() <= 1e-9 * (1.0 + t1.abs()));
        assert_eq!(want.len(), got.len());
    }
    // A row that can neither take a column nor miss: infeasible.
    assert!(solve_sparse_with_misses(1, 1, &[0, 0], &[], &[], &[f64::INFINITY]).is_none());
    assert!(solve_sparse_with_misses(1, 1, &[0, 1], &[0], &[f64::NAN], &[1.0]).is_none());
}
