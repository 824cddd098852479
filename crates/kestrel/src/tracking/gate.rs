//! The hypothesiser: a chi-square gate on each track's innovation, with detections kept
//! in a uniform grid (counting sort by cell) over their first one or two components, so
//! that a track looks only at the cells its gate's bounding box covers instead of at
//! every detection.

use crate::linalg::{cholesky_in_place, solve_lower_in_place, LN_2PI};
use rayon::prelude::*;

/// The predicted measurements of a set of tracks, as the gate needs them (structure of
/// arrays): `zhat = H x + d` (`[n][ny]`), the Cholesky factor `L` of `S = H P H^T + R`
/// (`[n][ny][ny]`, row-major, lower) and `ln |S| / 2 = sum ln L_aa` (`[n]`).
///
/// Components listed in `angles` are angles: their innovations are wrapped to
/// (-pi, pi], and the gate expects them (detections and predictions) in (-pi, pi].
#[derive(Clone, Debug, Default)]
pub struct Innovations {
    /// Measurement size.
    pub ny: usize,
    /// The components that are angles.
    pub angles: Vec<usize>,
    /// Predicted measurements, `[n][ny]`.
    pub zhat: Vec<f64>,
    /// Cholesky factors of `S`, `[n][ny][ny]`.
    pub l: Vec<f64>,
    /// `ln |S| / 2` of each track, `[n]`.
    pub half_logdet: Vec<f64>,
}

impl Innovations {
    /// An empty set for measurements of `ny` components.
    pub fn new(ny: usize) -> Self {
        Innovations {
            ny,
            ..Default::default()
        }
    }

    /// An empty set whose components `angles` are angles.
    pub fn with_angles(ny: usize, angles: &[usize]) -> Self {
        Innovations {
            ny,
            angles: angles.to_vec(),
            ..Default::default()
        }
    }

    /// Tracks held.
    pub fn len(&self) -> usize {
        self.half_logdet.len()
    }

    /// True when no track is held.
    pub fn is_empty(&self) -> bool {
        self.half_logdet.is_empty()
    }

    /// Removes every track (keeps the buffers).
    pub fn clear(&mut self) {
        self.zhat.clear();
        self.l.clear();
        self.half_logdet.clear();
    }

    /// Adds a track with predicted measurement `zhat` and innovation covariance `s`
    /// (full, row-major); `false` (nothing added) when `S` is not positive definite.
    pub fn push(&mut self, zhat: &[f64], s: &[f64]) -> bool {
        let ny = self.ny;
        let at = self.l.len();
        self.l.extend_from_slice(&s[..ny * ny]);
        let l = &mut self.l[at..];
        if !cholesky_in_place(l, ny) {
            self.l.truncate(at);
            return false;
        }
        self.half_logdet
            .push((0..ny).map(|a| l[a * ny + a].ln()).sum());
        self.zhat.extend_from_slice(&zhat[..ny]);
        true
    }

    /// Adds a track from its predicted measurement and the Cholesky factor of `S`.
    pub fn push_factor(&mut self, zhat: &[f64], l: &[f64]) {
        let ny = self.ny;
        self.zhat.extend_from_slice(&zhat[..ny]);
        self.l.extend_from_slice(&l[..ny * ny]);
        self.half_logdet
            .push((0..ny).map(|a| l[a * ny + a].ln()).sum());
    }

    /// The predicted measurement of track `i`.
    pub fn zhat(&self, i: usize) -> &[f64] {
        &self.zhat[i * self.ny..(i + 1) * self.ny]
    }

    /// Whitened innovation `e = L^{-1} (z - zhat)` of track `i` into `e`; returns
    /// `|e|^2`, the squared Mahalanobis distance.
    pub fn whiten(&self, i: usize, z: &[f64], e: &mut [f64]) -> f64 {
        let ny = self.ny;
        let zhat = self.zhat(i);
        for a in 0..ny {
            e[a] = z[a] - zhat[a];
        }
        for &a in &self.angles {
            e[a] = crate::nonlinear::wrap(e[a]);
        }
        solve_lower_in_place(&self.l[i * ny * ny..(i + 1) * ny * ny], ny, e, 1);
        e.iter().map(|v| v * v).sum()
    }

    /// `ln N(z; zhat, S)` of track `i` from the squared Mahalanobis distance.
    pub fn log_likelihood(&self, i: usize, maha: f64) -> f64 {
        -0.5 * (self.ny as f64 * LN_2PI + maha) - self.half_logdet[i]
    }

    /// Half-width of track `i`'s gate `maha <= gamma` along measurement component `a`:
    /// `sqrt(gamma S_aa)`, `S_aa = sum_b L_ab^2`.
    pub fn half_width(&self, i: usize, a: usize, gamma: f64) -> f64 {
        let ny = self.ny;
        let l = &self.l[i * ny * ny..(i + 1) * ny * ny];
        let saa: f64 = (0..=a).map(|b| l[a * ny + b].powi(2)).sum();
        (gamma * saa).sqrt()
    }
}

/// Detections sorted into uniform cells over measurement components 0 (and 1).
#[derive(Clone, Debug)]
pub struct Grid {
    dims: usize,
    lo: [f64; 2],
    inv_h: f64,
    n: [usize; 2],
    /// Detections of cell `c` are `order[starts[c]..starts[c + 1]]`.
    starts: Vec<u32>,
    order: Vec<u32>,
}

impl Grid {
    /// Sorts the detections `z` (`len x ny`, row-major) into square cells of side about
    /// `cell`, with at most about four cells per detection.
    pub fn new(z: &[f64], ny: usize, cell: f64) -> Grid {
        let dims = ny.min(2);
        let count = z.len() / ny;
        let mut lo = [f64::INFINITY; 2];
        let mut hi = [f64::NEG_INFINITY; 2];
        for row in z.chunks(ny) {
            for a in 0..dims {
                lo[a] = lo[a].min(row[a]);
                hi[a] = hi[a].max(row[a]);
            }
        }
        if count == 0 {
            lo = [0.0; 2];
            hi = [0.0; 2];
        }
        let extent = (0..dims).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
        let cap = 4.0 * count as f64 + 16.0;
        let mut h = if cell.is_finite() && cell > 0.0 {
            cell
        } else {
            extent.max(1.0)
        };
        // Cap the number of cells at about 4 per detection.
        let cells = |h: f64| -> f64 { (0..dims).map(|a| (hi[a] - lo[a]) / h + 1.0).product() };
        if cells(h) > cap {
            h = extent.max(1e-300) / (cap.powf(1.0 / dims as f64) - 1.0).max(1.0);
            while cells(h) > cap {
                h *= 1.5;
            }
        }
        let inv_h = 1.0 / h;
        let mut n = [1usize; 2];
        for a in 0..dims {
            n[a] = ((hi[a] - lo[a]) * inv_h) as usize + 1;
        }
        let ncell = n[0] * n[1];
        let cell_of = |row: &[f64]| -> usize {
            let mut c = 0;
            let mut stride = 1;
            for a in 0..dims {
                let k = (((row[a] - lo[a]) * inv_h) as usize).min(n[a] - 1);
                c += k * stride;
                stride *= n[a];
            }
            c
        };
        let mut starts = vec![0u32; ncell + 1];
        let cell_ids: Vec<usize> = z.chunks(ny).map(cell_of).collect();
        for &c in &cell_ids {
            starts[c + 1] += 1;
        }
        for c in 0..ncell {
            starts[c + 1] += starts[c];
        }
        let mut fill = starts.clone();
        let mut order = vec![0u32; count];
        for (j, &c) in cell_ids.iter().enumerate() {
            order[fill[c] as usize] = j as u32;
            fill[c] += 1;
        }
        Grid {
            dims,
            lo,
            inv_h,
            n,
            starts,
            order,
        }
    }

    fn range(&self, a: usize, lo: f64, hi: f64) -> Option<(usize, usize)> {
        let a0 = (lo - self.lo[a]) * self.inv_h;
        let a1 = (hi - self.lo[a]) * self.inv_h;
        if a1 < 0.0 || a0 >= self.n[a] as f64 {
            return None;
        }
        let k0 = a0.max(0.0) as usize;
        let k1 = (a1 as usize).min(self.n[a] - 1);
        Some((k0, k1))
    }

    /// Calls `f` with every detection in the cells that the box `[lo, hi]` touches.
    pub fn visit(&self, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(usize)) {
        let Some((x0, x1)) = self.range(0, lo[0], hi[0]) else {
            return;
        };
        let (y0, y1) = if self.dims == 2 {
            match self.range(1, lo[1], hi[1]) {
                Some(r) => r,
                None => return,
            }
        } else {
            (0, 0)
        };
        for ky in y0..=y1 {
            let row = ky * self.n[0];
            let (s, e) = (
                self.starts[row + x0] as usize,
                self.starts[row + x1 + 1] as usize,
            );
            for &j in &self.order[s..e] {
                f(j as usize);
            }
        }
    }
}

/// The boxes in (-pi, pi] that a gate box `[lo, hi]` covers when its angle components
/// (among the grid's `dims`) wrap: one box, or its pieces on either side of +-pi.
fn wrapped_boxes(
    lo: [f64; 2],
    hi: [f64; 2],
    dims: usize,
    angles: &[usize],
) -> Vec<([f64; 2], [f64; 2])> {
    use std::f64::consts::PI;
    let mut boxes = vec![(lo, hi)];
    for &a in angles.iter().filter(|&&a| a < dims) {
        let mut next = Vec::with_capacity(2 * boxes.len());
        for (l, h) in boxes {
            if h[a] - l[a] >= 2.0 * PI {
                let (mut l2, mut h2) = (l, h);
                l2[a] = -PI;
                h2[a] = PI;
                next.push((l2, h2));
                continue;
            }
            let mut main = (l, h);
            main.0[a] = l[a].max(-PI);
            main.1[a] = h[a].min(PI);
            next.push(main);
            if l[a] < -PI {
                let mut b = (l, h);
                b.0[a] = l[a] + 2.0 * PI;
                b.1[a] = PI;
                next.push(b);
            }
            if h[a] > PI {
                let mut b = (l, h);
                b.0[a] = -PI;
                b.1[a] = h[a] - 2.0 * PI;
                next.push(b);
            }
        }
        boxes = next;
    }
    boxes
}

/// Gated detections of every track, compressed rows: track `i` gated
/// `det[start[i]..start[i + 1]]` with log-likelihoods `ll[..]` (`ln N(z; zhat, S)`).
#[derive(Clone, Debug, Default)]
pub struct Gated {
    /// Row starts, one more than the tracks.
    pub start: Vec<usize>,
    /// Gated detection indices, track after track.
    pub det: Vec<u32>,
    /// `ln N(z; zhat, S)` of each gated detection.
    pub ll: Vec<f64>,
}

impl Gated {
    /// The entries of track `i` in `det` and `ll`.
    pub fn of(&self, i: usize) -> std::ops::Range<usize> {
        self.start[i]..self.start[i + 1]
    }
}

/// Tracks per rayon task of the gate.
const GATE_CHUNK: usize = 512;

/// Gates every track's innovation against the detections `z` (`len x ny`): detection `j`
/// is in track `i`'s gate when `(z_j - zhat_i)^T S_i^{-1} (z_j - zhat_i) <= gamma`.
pub fn gate_all(inns: &Innovations, z: &[f64], ny: usize, gamma: f64) -> Gated {
    // Without a bound nothing can exceed it.
    gate_all_bounded(inns, z, ny, gamma, usize::MAX).unwrap_or_default()
}

/// Most candidate (track, detection) pairs one scan's gates may hold (16 bytes each,
/// about 4 GB, and the association's work grows with them).
pub const MAX_PAIRS: usize = 1 << 28;

/// [`gate_all`] that stops as soon as the gates hold more than `max_pairs` pairs (a
/// gate so wide, or detections so dense, that every track pairs with every detection)
/// and returns an input error with the counts, before memory grows without bound.
pub fn gate_all_bounded(
    inns: &Innovations,
    z: &[f64],
    ny: usize,
    gamma: f64,
    max_pairs: usize,
) -> crate::error::Result<Gated> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let pairs = AtomicUsize::new(0);
    let dims = ny.min(2);
    let n = inns.len();
    // Cells about the size of a typical gate: a gate then covers a few cells.
    let mut widths: Vec<f64> = (0..n)
        .map(|i| {
            (0..dims)
                .map(|a| inns.half_width(i, a, gamma))
                .fold(0.0, f64::max)
        })
        .collect();
    let cell = if widths.is_empty() {
        1.0
    } else {
        let mid = widths.len() / 2;
        *widths.select_nth_unstable_by(mid, f64::total_cmp).1 * 2.0
    };
    let grid = Grid::new(z, ny, cell);
    // Each task gates a run of tracks into its own compressed rows; the runs are then
    // joined in order.
    let parts: Vec<(Vec<u32>, Vec<u32>, Vec<f64>)> = (0..n.div_ceil(GATE_CHUNK))
        .into_par_iter()
        .map(|c| {
            let (mut count, mut det, mut ll) = (Vec::new(), Vec::new(), Vec::new());
            let mut e = vec![0.0; ny];
            let mut found: Vec<(u32, f64)> = Vec::new();
            for i in c * GATE_CHUNK..((c + 1) * GATE_CHUNK).min(n) {
                let mut lo = [0.0; 2];
                let mut hi = [0.0; 2];
                let zhat = inns.zhat(i);
                for a in 0..dims {
                    let w = inns.half_width(i, a, gamma);
                    lo[a] = zhat[a] - w;
                    hi[a] = zhat[a] + w;
                }
                found.clear();
                if pairs.load(Ordering::Relaxed) > max_pairs {
                    break;
                }
                let mut visit = |j: usize| {
                    let maha = inns.whiten(i, &z[j * ny..(j + 1) * ny], &mut e);
                    if maha <= gamma {
                        found.push((j as u32, inns.log_likelihood(i, maha)));
                    }
                };
                if inns.angles.is_empty() {
                    grid.visit(lo, hi, &mut visit);
                } else {
                    for (lo, hi) in wrapped_boxes(lo, hi, dims, &inns.angles) {
                        grid.visit(lo, hi, &mut visit);
                    }
                }
                // Detection order, so that results do not depend on the grid (a
                // detection near the wrap of an angle may be visited twice).
                found.sort_unstable_by_key(|p| p.0);
                if !inns.angles.is_empty() {
                    found.dedup_by_key(|p| p.0);
                }
                pairs.fetch_add(found.len(), Ordering::Relaxed);
                count.push(found.len() as u32);
                for &(j, l) in &found {
                    det.push(j);
                    ll.push(l);
                }
            }
            (count, det, ll)
        })
        .collect();
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    if pairs.load(Ordering::Relaxed) > max_pairs {
        return Err(crate::error::Error::input(format!(
            "the gates of {n} tracks pair them with {} detections in more than {max_pairs} candidate pairs (at least {total} counted): narrow the gate or thin the detections",
            z.len() / ny.max(1)
        )));
    }
    let mut g = Gated {
        start: Vec::with_capacity(n + 1),
        det: Vec::with_capacity(total),
        ll: Vec::with_capacity(total),
    };
    g.start.push(0);
    for (count, det, ll) in parts {
        for c in count {
            let last = g.start[g.start.len() - 1];
            g.start.push(last + c as usize);
        }
        g.det.extend_from_slice(&det);
        g.ll.extend_from_slice(&ll);
    }
    Ok(g)
}

/// The same gate by looking at every detection (the reference for tests).
pub fn gate_all_brute(inns: &Innovations, z: &[f64], ny: usize, gamma: f64) -> Gated {
    let mut g = Gated {
        start: vec![0],
        ..Default::default()
    };
    let mut e = vec![0.0; ny];
    for i in 0..inns.len() {
        for (j, zj) in z.chunks(ny).enumerate() {
            let maha = inns.whiten(i, zj, &mut e);
            if maha <= gamma {
                g.det.push(j as u32);
                g.ll.push(inns.log_likelihood(i, maha));
            }
        }
        g.start.push(g.det.len());
    }
    g
}
