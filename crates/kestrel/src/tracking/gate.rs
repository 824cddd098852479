//! The hypothesiser: a chi-square gate on each track's innovation, with detections kept
//! in a uniform grid (counting sort by cell) over their first one or two components, so
//! that a track looks only at the cells its gate's bounding box covers instead of at
//! every detection.

use super::filter::Innovation;
use rayon::prelude::*;

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

/// Half-width of the gate `maha <= gamma` along measurement component `a`:
/// `sqrt(gamma S_aa)`, `S_aa = sum_b L_ab^2`.
pub fn half_width(inn: &Innovation, a: usize, gamma: f64) -> f64 {
    let ny = inn.zhat.len();
    let saa: f64 = (0..=a).map(|b| inn.l[a * ny + b].powi(2)).sum();
    (gamma * saa).sqrt()
}

/// Gates every track's innovation against the detections `z` (`len x ny`): detection `j`
/// is in track `i`'s gate when `(z_j - zhat_i)^T S_i^{-1} (z_j - zhat_i) <= gamma`.
pub fn gate_all(inns: &[Innovation], z: &[f64], ny: usize, gamma: f64) -> Gated {
    let dims = ny.min(2);
    // Cells about the size of a typical gate: a gate then covers a few cells.
    let mut widths: Vec<f64> = inns
        .iter()
        .map(|inn| {
            (0..dims)
                .map(|a| half_width(inn, a, gamma))
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
    let lists: Vec<Vec<(u32, f64)>> = inns
        .par_iter()
        .with_min_len(64)
        .map_init(
            || vec![0.0; ny],
            |e, inn| {
                let mut lo = [0.0; 2];
                let mut hi = [0.0; 2];
                for a in 0..dims {
                    let w = half_width(inn, a, gamma);
                    lo[a] = inn.zhat[a] - w;
                    hi[a] = inn.zhat[a] + w;
                }
                let mut out = Vec::new();
                grid.visit(lo, hi, |j| {
                    let maha = inn.whiten(&z[j * ny..(j + 1) * ny], e);
                    if maha <= gamma {
                        out.push((j as u32, inn.log_likelihood(maha)));
                    }
                });
                // Detection order, so that results do not depend on the grid.
                out.sort_unstable_by_key(|p| p.0);
                out
            },
        )
        .collect();
    let mut g = Gated {
        start: Vec::with_capacity(inns.len() + 1),
        ..Default::default()
    };
    g.start.push(0);
    for l in lists {
        for (j, ll) in l {
            g.det.push(j);
            g.ll.push(ll);
        }
        g.start.push(g.det.len());
    }
    g
}

/// The same gate by looking at every detection (the reference for tests).
pub fn gate_all_brute(inns: &[Innovation], z: &[f64], ny: usize, gamma: f64) -> Gated {
    let mut g = Gated {
        start: vec![0],
        ..Default::default()
    };
    let mut e = vec![0.0; ny];
    for inn in inns {
        for (j, zj) in z.chunks(ny).enumerate() {
            let maha = inn.whiten(zj, &mut e);
            if maha <= gamma {
                g.det.push(j as u32);
                g.ll.push(inn.log_likelihood(maha));
            }
        }
        g.start.push(g.det.len());
    }
    g
}
