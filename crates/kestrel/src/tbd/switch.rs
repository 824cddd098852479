//! Track-before-detect with manoeuvres (Mazurek, eq. 1b): a Markov matrix `M` between
//! the motion vectors, `M[v', v]` the probability that a trajectory on vector `v'`
//! continues on `v` (row = from, column = to, rows sum to 1). The recursion is
//!
//! ```text
//! P_k(x, v) = (1 - alpha) sum_v' M[v', v] P_{k-1}(x - v, v') + alpha X_k(x),   P_0 = 0.
//! ```
//!
//! Sampling is linear, so the sum is taken first, per pixel, over the previous state's
//! planes (the *mixed* state `Q(., v) = sum_v' M[v', v] P(., v')`), and then the plain
//! step of `cpu.rs` runs from `Q` instead of `P`. The sum runs over the non-zero entries of
//! the column only (the paper: the matrix is sparse and belongs in code, not a table), in
//! ascending `v'`, the first term a product and each later one added: with `M = I` every
//! plane of `Q` is `1 * P`, the same bits, so the step is today's recursion exactly.
//!
//! Decimation `D` with a transition matrix: the trajectories switch every frame, so the
//! state advances frame by frame (no fold along a straight trajectory) and the map is
//! emitted after frames `D-1, 2D-1, ...` and after the last frame (the plain recursion's
//! maps at those frames).
//!
//! [`Transition::switching`] builds the shorthand `--switch P`: each vector keeps `1 - P`
//! and spreads `P` evenly over its neighbours in the speed/direction grid
//! ([`neighbours`]).

use super::cpu::sample;
use super::motion::Motion;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// How far a row of the matrix may sum from 1 (the values as read, in f64).
pub const ROW_SUM_TOLERANCE: f64 = 1e-5;

/// A Markov matrix between `v` motion vectors, kept dense (row-major, f32, as the
/// recursion uses it) and by columns for the sum (non-zero entries only).
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    v: usize,
    dense: Vec<f32>,
    /// Column `c`'s entries are `src[start[c]..start[c + 1]]` with weights `wt[..]`.
    start: Vec<u32>,
    src: Vec<u32>,
    wt: Vec<f32>,
}

impl Transition {
    /// The matrix `m` (`v x v`, row-major, row = from): entries finite and >= 0, each row
    /// summing to 1 within [`ROW_SUM_TOLERANCE`]. `what` names it in errors (a file).
    pub fn new(v: usize, m: &[f64], what: &str) -> Result<Transition> {
        if v == 0 || m.len() != v * v {
            return Err(Error::input(format!(
                "{what}: {} values are not a square matrix of {v} x {v} (one row and column per motion vector)",
                m.len()
            )));
        }
        for (r, row) in m.chunks(v).enumerate() {
            if let Some(c) = row.iter().position(|x| !x.is_finite() || *x < 0.0) {
                return Err(Error::input(format!(
                    "{what}: row {r}, column {c}: {} is not a probability (entries must be finite and >= 0)",
                    row[c]
                )));
            }
            let s: f64 = row.iter().sum();
            if (s - 1.0).abs() > ROW_SUM_TOLERANCE {
                return Err(Error::input(format!(
                    "{what}: row {r} sums to {s}, not 1 (row = from, column = to; each row must sum to 1 within {ROW_SUM_TOLERANCE:e})"
                )));
            }
        }
        let dense: Vec<f32> = m.iter().map(|&x| x as f32).collect();
        let mut start = Vec::with_capacity(v + 1);
        let (mut src, mut wt) = (Vec::new(), Vec::new());
        for c in 0..v {
            start.push(src.len() as u32);
            for r in 0..v {
                let x = dense[r * v + c];
                if x != 0.0 {
                    src.push(r as u32);
                    wt.push(x);
                }
            }
        }
        start.push(src.len() as u32);
        Ok(Transition {
            v,
            dense,
            start,
            src,
            wt,
        })
    }

    /// The matrix of a `.npy` file of shape `[v, v]` (f32 or f64), checked as
    /// [`Transition::new`] checks it; errors name the file.
    pub fn from_npy(path: &std::path::Path, v: usize) -> Result<Transition> {
        let (shape, vals) = crate::io::read_npy_array(path)?;
        Transition::from_array(&shape, &vals, v, &path.display().to_string())
    }

    /// The matrix of an array of `shape` (row-major values), which must be `[v, v]`.
    pub fn from_array(shape: &[usize], vals: &[f64], v: usize, what: &str) -> Result<Transition> {
        if shape != [v, v] {
            return Err(Error::input(format!(
                "{what}: shape {shape:?}, expected [{v}, {v}] (row = from, column = to: one of each per motion vector)"
            )));
        }
        Transition::new(v, vals, what)
    }

    /// The identity (every trajectory keeps its vector).
    pub fn identity(v: usize) -> Transition {
        let mut m = vec![0.0; v * v];
        (0..v).for_each(|i| m[i * v + i] = 1.0);
        Transition::new(v, &m, "the identity").expect("the identity is a Markov matrix")
    }

    /// The shorthand `--switch P`: each vector keeps `1 - p` and gives `p / n` to each of
    /// its `n` neighbours ([`neighbours`]); a vector without neighbours keeps all.
    pub fn switching(motions: &[Motion], p: f64) -> Result<Transition> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::input(format!(
                "--switch must lie in [0, 1], got {p}"
            )));
        }
        let v = motions.len();
        let nb = neighbours(motions);
        let mut m = vec![0.0; v * v];
        for (i, n) in nb.iter().enumerate() {
            if n.is_empty() {
                m[i * v + i] = 1.0;
                continue;
            }
            m[i * v + i] = 1.0 - p;
            for &j in n {
                m[i * v + j] += p / n.len() as f64;
            }
        }
        Transition::new(v, &m, "--switch")
    }

    /// The number of motion vectors.
    pub fn len(&self) -> usize {
        self.v
    }

    /// Never: a transition holds at least one vector.
    pub fn is_empty(&self) -> bool {
        self.v == 0
    }

    /// `M[from, to]`.
    pub fn get(&self, from: usize, to: usize) -> f32 {
        self.dense[from * self.v + to]
    }

    /// Every entry of the diagonal 1 (and so every other 0): the plain recursion.
    pub fn is_identity(&self) -> bool {
        (0..self.v).all(|i| self.dense[i * self.v + i] == 1.0) && self.src.len() == self.v
    }

    /// The columns: `(start, src, wt)`, column `c`'s non-zero entries `src[start[c]..
    /// start[c + 1]]` (ascending source vectors) with weights `wt[..]`.
    pub fn columns(&self) -> (&[u32], &[u32], &[f32]) {
        (&self.start, &self.src, &self.wt)
    }

    /// The mixed value of column `c` from the planes' values `at(v')`, in the order of
    /// the module's definition (first a product, then sums).
    #[inline(always)]
    fn mix_at(&self, c: usize, at: impl Fn(usize) -> f32) -> f32 {
        let (a, b) = (self.start[c] as usize, self.start[c + 1] as usize);
        let mut q = self.wt[a] * at(self.src[a] as usize);
        for j in a + 1..b {
            q += self.wt[j] * at(self.src[j] as usize);
        }
        q
    }

    /// The mixed state `Q` of a state `P`, both `[H][V][W]` (the CPU fast path's layout).
    pub fn mix_rows(&self, state: &[f32], out: &mut [f32], w: usize) {
        let v = self.v;
        out.par_chunks_mut(v * w)
            .zip(state.par_chunks(v * w))
            .for_each(|(o, s)| {
                for c in 0..v {
                    let (a, b) = (self.start[c] as usize, self.start[c + 1] as usize);
                    let orow = &mut o[c * w..(c + 1) * w];
                    if a == b {
                        // A vector nothing switches into (a zero column).
                        orow.fill(0.0);
                        continue;
                    }
                    let (s0, w0) = (&s[self.src[a] as usize * w..][..w], self.wt[a]);
                    for (q, &x) in orow.iter_mut().zip(s0) {
                        *q = w0 * x;
                    }
                    for j in a + 1..b {
                        let (sj, wj) = (&s[self.src[j] as usize * w..][..w], self.wt[j]);
                        for (q, &x) in orow.iter_mut().zip(sj) {
                            *q += wj * x;
                        }
                    }
                }
            });
    }

    /// The mixed state of a state `P`, both `[V][H][W]`.
    pub fn mix_planes(&self, state: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0.0; state.len()];
        for c in 0..self.v {
            for p in 0..n {
                out[c * n + p] = if self.start[c] == self.start[c + 1] {
                    0.0
                } else {
                    self.mix_at(c, |s| state[s * n + p])
                };
            }
        }
        out
    }
}

/// Each vector's neighbours in the speed/direction grid: vectors are grouped by speed
/// `|v|` (rings; speeds within 1e-4 are one ring) and ordered by direction within a ring.
/// A vector's neighbours are the next and previous direction of its own ring (one when
/// the ring holds two, none when it holds one) and, in each adjacent ring (next slower,
/// next faster), the vectors of the nearest direction (both on a tie); the vector (0, 0)
/// is the whole ring next to it, and every vector of that ring has it as a neighbour.
/// Each list ascending, without repeats.
pub fn neighbours(motions: &[Motion]) -> Vec<Vec<usize>> {
    let speed = |m: &Motion| (m.vx as f64).hypot(m.vy as f64);
    let angle = |m: &Motion| (m.vy as f64).atan2(m.vx as f64);
    let mut order: Vec<usize> = (0..motions.len()).collect();
    order.sort_by(|&a, &b| speed(&motions[a]).total_cmp(&speed(&motions[b])));
    let mut rings: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match rings.last_mut() {
            Some(r) if (speed(&motions[i]) - speed(&motions[r[0]])).abs() <= 1e-4 => r.push(i),
            _ => rings.push(vec![i]),
        }
    }
    for r in &mut rings {
        r.sort_by(|&a, &b| {
            angle(&motions[a])
                .total_cmp(&angle(&motions[b]))
                .then(a.cmp(&b))
        });
    }
    let still = |r: &[usize]| r.len() == 1 && speed(&motions[r[0]]) == 0.0;
    let mut nb: Vec<Vec<usize>> = vec![Vec::new(); motions.len()];
    // The angle between two directions, in [0, pi].
    let gap = |a: f64, b: f64| {
        let d = (a - b).rem_euclid(std::f64::consts::TAU);
        d.min(std::f64::consts::TAU - d)
    };
    for (k, ring) in rings.iter().enumerate() {
        let n = ring.len();
        for (j, &i) in ring.iter().enumerate() {
            if n > 1 {
                nb[i].push(ring[(j + 1) % n]);
                nb[i].push(ring[(j + n - 1) % n]);
            }
            for other in [k.checked_sub(1), Some(k + 1)].into_iter().flatten() {
                let Some(o) = rings.get(other) else { continue };
                if still(ring) || still(o) {
                    nb[i].extend(o.iter().copied());
                    continue;
                }
                let a = angle(&motions[i]);
                let best = o
                    .iter()
                    .map(|&x| gap(a, angle(&motions[x])))
                    .fold(f64::INFINITY, f64::min);
                nb[i].extend(
                    o.iter()
                        .copied()
                        .filter(|&x| gap(a, angle(&motions[x])) <= best + 1e-9),
                );
            }
        }
    }
    for (i, n) in nb.iter_mut().enumerate() {
        n.sort_unstable();
        n.dedup();
        n.retain(|&x| x != i);
    }
    nb
}

/// The reference, straight from the definition (in f64, each sample of each source
/// plane summed): one frame applied to `prev` (`[V][H][W]`), written to `next` (as f32);
/// returns the detection map and its arg-max (the first vector on ties).
pub fn reference_step(
    prev: &[f32],
    frame: &[f32],
    h: usize,
    w: usize,
    motions: &[Motion],
    alpha: f32,
    m: &Transition,
    next: &mut [f32],
) -> (Vec<f64>, Vec<u16>) {
    let n = h * w;
    let nv = motions.len();
    let mut score = vec![f64::NEG_INFINITY; n];
    let mut arg = vec![0u16; n];
    for (v, mv) in motions.iter().enumerate() {
        for y in 0..h {
            for x in 0..w {
                let mut s = 0.0f64;
                for from in 0..nv {
                    let p = m.get(from, v) as f64;
                    s += p * sample(prev, from * n, w, h, w, x, y, -mv.vx, -mv.vy) as f64;
                }
                let val = (1.0 - alpha as f64) * s + alpha as f64 * frame[y * w + x] as f64;
                next[v * n + y * w + x] = val as f32;
                if val > score[y * w + x] {
                    score[y * w + x] = val;
                    arg[y * w + x] = v as u16;
                }
            }
        }
    }
    (score, arg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tbd::speeds_directions;

    #[test]
    fn neighbours_of_the_twelve_directions() {
        let m = speeds_directions(&[0.0, 1.0], 12).unwrap();
        let nb = neighbours(&m);
        assert_eq!(nb[0], (1..13).collect::<Vec<_>>());
        assert_eq!(nb[1], vec![0, 2, 12]);
        assert_eq!(nb[5], vec![0, 4, 6]);
    }

    #[test]
    fn neighbours_of_the_nine_vectors() {
        let m: Vec<Motion> = (-1..=1)
            .flat_map(|vy| (-1..=1).map(move |vx| Motion::new(vx as f32, vy as f32)))
            .collect();
        let nb = neighbours(&m);
        // (1, 0) is index 5: (0, -1) = 1, (0, 1) = 7 in its ring, the diagonals (1, -1) = 2
        // and (1, 1) = 8 at 45 degrees, and (0, 0) = 4.
        assert_eq!(nb[5], vec![1, 2, 4, 7, 8]);
        // (1, 1) = 8: its ring (1, -1) = 2 and (-1, 1) = 6, and (1, 0) = 5 and (0, 1) = 7.
        assert_eq!(nb[8], vec![2, 5, 6, 7]);
        assert_eq!(nb[4], vec![1, 3, 5, 7]);
    }

    #[test]
    fn switching_rows_sum_to_one_and_zero_is_the_identity() {
        let m = speeds_directions(&[0.0, 1.0, 2.0], 8).unwrap();
        let t = Transition::switching(&m, 0.2).unwrap();
        for r in 0..m.len() {
            let s: f64 = (0..m.len()).map(|c| t.get(r, c) as f64).sum();
            assert!((s - 1.0).abs() < 1e-6, "row {r}: {s}");
            assert!((t.get(r, r) - 0.8).abs() < 1e-7);
        }
        assert!(!t.is_identity());
        assert!(Transition::switching(&m, 0.0).unwrap().is_identity());
        assert!(Transition::switching(&m, 1.5).is_err());
        assert!(Transition::switching(&m, -0.1).is_err());
    }

    #[test]
    fn bad_matrices_name_the_row() {
        let e = Transition::new(2, &[0.5, 0.5, 0.3, 0.3], "M.npy").unwrap_err();
        assert!(e.to_string().contains("row 1 sums to"), "{e}");
        let e = Transition::new(2, &[1.5, -0.5, 0.0, 1.0], "M.npy").unwrap_err();
        assert!(e.to_string().contains("row 0, column 1"), "{e}");
        assert!(Transition::new(2, &[1.0, 0.0, 0.0], "M.npy").is_err());
    }
}
