//! The exact filter for AR(p)-shaped models: a companion `F` (first row `a^T`, ones on
//! the subdiagonal) and one measurement of the first state (`H = e_0^T`), the seismic
//! noise model of the seed. Each step is `O(p^2)` instead of `O(p^3)`:
//!
//! ```text
//! update:  S = P_00 + r,  w = P e_0 / sqrt(S),  e = (z - x_0 - d) / sqrt(S)
//!          x += w e,      ll = -(ln 2 pi + ln S + e^2) / 2,   P^+ = P - w w^T
//! predict: v = P^+ a = P a - w (w . a)
//!          P'_00 = a . v + Q_00,  P'_0j = v_{j-1} + Q_0j,  P'_ij = P^+_{i-1,j-1} + Q_ij
//!          x' = (a . x + u_0, x_0 + u_1, ..., x_{p-2} + u_{p-1})
//! ```
//!
//! (`w w^T` is symmetric in floating point too, so `P` stays exactly symmetric.) The
//! state dimension is a compile-time constant (2 ..= [`MAX_P`]) so that every loop is
//! unrolled and vectorised. With a steady-state tolerance the gain freezes once the
//! predicted covariance moves by less than `tol` times its largest entry across an
//! update, as in the general path.

use crate::kalman::dense::ConvertedModel;
use crate::linalg::{Real, LN_2PI};
use crate::model::Model;

/// The largest `p` compiled.
pub const MAX_P: usize = 16;

/// `Some(p)` when the model has this structure (and `2 <= p <= MAX_P`).
pub(crate) fn applies(model: &Model) -> Option<usize> {
    let p = model.nx();
    let e0 = model.ny() == 1 && (0..p).all(|j| model.h[(0, j)] == if j == 0 { 1.0 } else { 0.0 });
    let companion = super::exact::Structure::of(&model.f) == super::exact::Structure::Companion;
    (e0 && companion && (2..=MAX_P).contains(&p)).then_some(p)
}

/// One track; `Err(step)` where `S` is not positive.
pub(crate) fn track<T: Real>(
    p: usize,
    m: &ConvertedModel<T>,
    z: &[T],
    steady: Option<f64>,
    out: &mut [T],
) -> std::result::Result<(), usize> {
    track_with(p, m, z, steady, true, out)
}

/// [`track`], replaying the covariance recursion's cycle (`cycles`) or not.
pub(crate) fn track_with<T: Real>(
    p: usize,
    m: &ConvertedModel<T>,
    z: &[T],
    steady: Option<f64>,
    cycles: bool,
    out: &mut [T],
) -> std::result::Result<(), usize> {
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match p {
                $($n => run::<T, $n>(m, z, steady, cycles, out),)*
                _ => unreachable!("applies() bounds p"),
            }
        };
    }
    dispatch!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

/// One step's update products and the predicted covariance they came from.
#[derive(Clone, Copy)]
struct Rec<T, const P: usize> {
    w: [T; P],
    rs: T,
    c: T,
    p: [[T; P]; P],
}

/// Predicted covariances kept to find the recursion's cycle (without `--steady`).
const RING: usize = 64;
/// Consecutive updates searched for a cycle before giving up (until a missing value).
const SEARCH: usize = 1 << 16;

/// Bitwise equality of two covariances.
#[inline]
fn same<T: Real, const P: usize>(a: &[[T; P]; P], b: &[[T; P]; P]) -> bool {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits())
}

#[inline(always)]
fn predict_mean<T: Real, const P: usize>(a: &[T; P], u: &[T; P], x: &mut [T; P]) {
    let mut s = u[0];
    for j in 0..P {
        s += a[j] * x[j];
    }
    for i in (1..P).rev() {
        x[i] = x[i - 1] + u[i];
    }
    x[0] = s;
}

/// Step result: `Err(step)` where `S` is not positive.
type StepResult = std::result::Result<(), usize>;

with_avx2! {
    /// [`body`], compiled for AVX2 where the processor has it (4 doubles a vector; 25%
    /// faster on AR(10)).
    fn run[T: Real, const P: usize](
        m: &ConvertedModel<T>,
        z: &[T],
        steady: Option<f64>,
        cycles: bool,
        out: &mut [T],
    ) -> StepResult = body[T, P];
}

#[inline(always)]
fn body<T: Real, const P: usize>(
    m: &ConvertedModel<T>,
    z: &[T],
    steady: Option<f64>,
    cycles: bool,
    out: &mut [T],
) -> StepResult {
    let mats = m.at(0);
    let mut a = [T::zero(); P];
    let mut u = [T::zero(); P];
    let mut q = [[T::zero(); P]; P];
    let mut x = [T::zero(); P];
    let mut bufs = [[[T::zero(); P]; P]; 2];
    for i in 0..P {
        a[i] = mats.f[i];
        u[i] = mats.u[i];
        x[i] = m.x0[i];
        for j in 0..P {
            q[i][j] = mats.q[i * P + j];
            bufs[0][i][j] = m.p0[i * P + j];
        }
    }
    let (d, r) = (mats.d[0], mats.r[0]);
    let half = T::of(0.5);
    let c0 = T::of(-0.5 * LN_2PI);
    let tol = steady.map(T::of);
    let mut cur = 0;
    let mut settled = false;
    // The records the mean recursion replays: one (the steady state of `--steady`) or
    // the cycle the floating-point recursion has entered (without `--steady`: the
    // covariance recursion is a deterministic map of P, so once a predicted P repeats
    // bit for bit after updates only, the records between repeat forever and replaying
    // them is the full recursion, bit for bit).
    let mut frozen: Vec<Rec<T, P>> = Vec::new();
    let mut ring: Vec<Rec<T, P>> = Vec::with_capacity(if tol.is_none() { RING } else { 0 });
    let mut head = 0;
    let mut searched = if cycles { 0 } else { SEARCH };
    let steps = out.len();
    let mut k = 0;
    while k < steps {
        if !frozen.is_empty() {
            // The mean recursion alone, until the next missing measurement.
            let mut pos = 0;
            while k < steps {
                let zk = z[k];
                if zk.is_nan_value() {
                    break;
                }
                let f = &frozen[pos];
                let e = (zk - x[0] - d) * f.rs;
                for i in 0..P {
                    x[i] += f.w[i] * e;
                }
                out[k] = f.c - half * e * e;
                predict_mean(&a, &u, &mut x);
                k += 1;
                pos += 1;
                if pos == frozen.len() {
                    pos = 0;
                }
            }
            if k == steps {
                break;
            }
            // A missing measurement: the full recursion resumes from this step's P.
            bufs[cur] = frozen[pos].p;
            frozen.clear();
            settled = false;
        }
        let (lo, hi) = bufs.split_at_mut(1);
        let (p, pn) = if cur == 0 {
            (&lo[0], &mut hi[0])
        } else {
            (&hi[0], &mut lo[0])
        };
        let zk = z[k];
        let present = !zk.is_nan_value();
        if !present {
            ring.clear();
            head = 0;
            searched = if cycles { 0 } else { SEARCH };
        } else if tol.is_none() && searched < SEARCH {
            searched += 1;
            // The ring holds the records of the latest consecutive updates, oldest at
            // `head` once full.
            let n = ring.len();
            if let Some(j) = (0..n).find(|&j| same(&ring[(head + j) % n].p, p)) {
                frozen.extend((j..n).map(|i| ring[(head + i) % n]));
                ring.clear();
                head = 0;
                continue;
            }
        }
        let mut w = [T::zero(); P];
        if present {
            let s = p[0][0] + r;
            if !(s > T::zero()) {
                return Err(k);
            }
            let rs = T::one() / s.sqrt();
            for i in 0..P {
                w[i] = p[i][0] * rs;
            }
            let e = (zk - x[0] - d) * rs;
            for i in 0..P {
                x[i] += w[i] * e;
            }
            let c = c0 - half * s.ln();
            out[k] = c - half * e * e;
            let rec = Rec { w, rs, c, p: *p };
            if settled {
                frozen.push(rec);
                predict_mean(&a, &u, &mut x);
                k += 1;
                continue;
            }
            if tol.is_none() && searched < SEARCH {
                if ring.len() < RING {
                    ring.push(rec);
                } else {
                    ring[head] = rec;
                    head = (head + 1) % RING;
                }
            }
        } else {
            out[k] = T::zero();
        }
        predict_mean(&a, &u, &mut x);
        k += 1;
        if k == steps {
            break;
        }
        // v = P a - w (w . a)  (P symmetric: a sum of its rows)
        let mut wa = T::zero();
        for j in 0..P {
            wa += w[j] * a[j];
        }
        let mut v = [T::zero(); P];
        for j in 0..P {
            let aj = a[j];
            let row = &p[j];
            for i in 0..P {
                v[i] += aj * row[i];
            }
        }
        for i in 0..P {
            v[i] -= w[i] * wa;
        }
        let mut av = q[0][0];
        for j in 0..P {
            av += a[j] * v[j];
        }
        pn[0][0] = av;
        for j in 1..P {
            pn[0][j] = v[j - 1] + q[0][j];
            pn[j][0] = v[j - 1] + q[j][0];
        }
        for i in 1..P {
            let wi = w[i - 1];
            let (src, qi) = (&p[i - 1], &q[i]);
            let dst = &mut pn[i];
            for j in 1..P {
                dst[j] = src[j - 1] - wi * w[j - 1] + qi[j];
            }
        }
        settled = match tol {
            Some(tol) if present => {
                let mut scale = T::zero();
                let mut diff = T::zero();
                for i in 0..P {
                    for j in 0..P {
                        scale = scale.max(pn[i][j].abs());
                        diff = diff.max((pn[i][j] - p[i][j]).abs());
                    }
                }
                diff <= tol * scale
            }
            _ => false,
        };
        cur ^= 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::likelihood::exact::{self, Structure};
    use crate::model::ar;
    use nalgebra::DVector;

    /// The `O(p^2)` recursion equals the general one (offsets, a stationary prior,
    /// missing values, with and without the steady switch), in f64 and f32.
    #[test]
    fn equals_the_general_recursion() {
        let coef = [0.9, -0.3, 0.2, 0.1, -0.05, 0.02, 0.0, 0.01, 0.1, -0.02];
        let model = ar(&coef, 2.0, 0.7, 1.5)
            .unwrap()
            .with_offsets(
                DVector::from_fn(10, |i, _| 0.1 * i as f64 - 0.3),
                DVector::from_vec(vec![0.4]),
            )
            .unwrap();
        let stat = ar(&coef[..3], 5.0, 0.3, 1.0)
            .unwrap()
            .with_stationary_prior()
            .unwrap();
        for m in [&model, &stat] {
            let p = applies(m).expect("an AR model");
            let steps = 30_000;
            let mut z: Vec<f64> = (0..steps)
                .map(|k| (k as f64 * 0.37).sin() * 4.0 + (k as f64 * 0.011).cos())
                .collect();
            for k in [0usize, 1, 57, 58, 59, 1000, 2999, 20_000, 20_003] {
                z[k] = f64::NAN;
            }
            for steady in [None, Some(1e-12)] {
                let cm = ConvertedModel::<f64>::new(m, steps);
                let mut fast = vec![0.0; steps];
                let mut slow = vec![0.0; steps];
                track(p, &cm, &z, steady, &mut fast).unwrap();
                exact::track(&cm, Structure::Dense, 0, &z, None, &mut slow).unwrap();
                for k in 0..steps {
                    assert!(
                        (fast[k] - slow[k]).abs() <= 1e-10 * slow[k].abs().max(1.0),
                        "p = {p}, steady {steady:?}, step {k}: {} vs {}",
                        fast[k],
                        slow[k]
                    );
                }
                if steady.is_none() {
                    // Replaying the covariance's cycle is the full recursion, bit for bit.
                    let mut full = vec![0.0; steps];
                    track_with(p, &cm, &z, None, false, &mut full).unwrap();
                    for k in 0..steps {
                        assert_eq!(fast[k].to_bits(), full[k].to_bits(), "p = {p}, step {k}");
                    }
                }
                let c32 = ConvertedModel::<f32>::new(m, steps);
                let z32: Vec<f32> = z.iter().map(|v| *v as f32).collect();
                let mut f32s = vec![0f32; steps];
                track(p, &c32, &z32, steady, &mut f32s).unwrap();
                for k in 0..steps {
                    assert!(
                        (f32s[k] as f64 - slow[k]).abs() <= 1e-4 * slow[k].abs().max(1.0),
                        "f32, step {k}"
                    );
                }
            }
        }
    }
}
