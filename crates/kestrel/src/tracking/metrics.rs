//! Multi-target metrics between a set of true states and a set of estimates.
//!
//! - **GOSPA** with `alpha = 2` (Rahmathullah, Garcia-Fernandez & Svensson, FUSION 2017):
//!   `d = (min_g sum_{(i,j) in g} d(x_i, y_j)^p + c^p/2 (|X| + |Y| - 2|g|))^(1/p)`, split
//!   into its localisation part (the sum over assigned pairs), its missed part
//!   (`c^p/2` per unassigned truth) and its false part (`c^p/2` per unassigned estimate).
//!   The parts are reported as costs in `p`-th power units, as Stone Soup does; only the
//!   total is a distance.
//! - **Switching penalty** over time (as in trajectory GOSPA, Garcia-Fernandez, Rahmathullah
//!   & Svensson, IEEE TSP 2020): with each step's GOSPA assignment, a truth whose track
//!   changes from one step to the next costs `gamma^p`, and one that gains or loses its
//!   track costs `gamma^p / 2`. The steps' assignments are each optimal on their own, so
//!   the sum is an upper bound on the trajectory metric's linear-programming value.
//! - **OSPA** (Schuhmacher, Vo & Vo, IEEE TSP 2008):
//!   `d = ((min_pi sum_i min(d, c)^p + c^p (n - m)) / n)^(1/p)` with `m <= n`; 0 when both
//!   sets are empty.
//! - **CLEAR MOT** (Bernardin & Stiefelhagen, EURASIP JIVP 2008): per step, matches of the
//!   previous step are kept while closer than the threshold; the rest are matched by an
//!   optimal assignment that maximises the number of matches and then minimises their
//!   total distance; a truth matched to a different track than at its last match is an
//!   identity switch. `MOTA = 1 - (misses + false + switches) / truths`,
//!   `MOTP = sum of matched distances / matches` (a distance: lower is better).
//!
//! Distances are Euclidean between points of equal dimension.

use super::assign::{solve_with_misses, Assignment};
use std::collections::HashMap;

fn dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// One step's GOSPA and its parts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Gospa {
    /// `(localisation + missed + false + switching)^(1/p)`.
    pub total: f64,
    /// Sum of `d^p` over assigned pairs.
    pub localisation: f64,
    /// `c^p / 2` per unassigned truth.
    pub missed: f64,
    /// `c^p / 2` per unassigned estimate.
    pub false_tracks: f64,
    /// `gamma^p` per full switch, `gamma^p / 2` per half switch (0 for a single step).
    pub switching: f64,
    /// Switches counted (a half switch counts 0.5).
    pub switches: f64,
    /// Truth-estimate pairs assigned within the cut-off.
    pub assigned: usize,
}

/// Checks the parameters of GOSPA, OSPA and CLEAR MOT (the CLI's `--c`, `--p`,
/// `--switching`, the Python `c`, `p`, `switching`) through [`crate::limits::range`]:
/// `c` in (0, 1e100], `p` in [1, 100], `gamma` in [0, 1e100], and the costs `c^p` and
/// `gamma^p` that the sums add up finite (at most 1e250, so that sums over a million
/// points stay finite too). `flag` prefixes each name (`"--"` on the command line).
pub fn check_params(flag: &str, c: f64, p: f64, gamma: f64) -> crate::error::Result<()> {
    use crate::limits::{range, End::*};
    range(&format!("{flag}c"), c, Ex(0.0), In(1e100))?;
    range(&format!("{flag}p"), p, In(1.0), In(100.0))?;
    range(&format!("{flag}switching"), gamma, In(0.0), In(1e100))?;
    // The cost `base^p` of option `opt` (the value `base`), finite.
    let cost = |what: &str, sym: &str, opt: &str, base: f64, lo| {
        let (b, e) = (crate::limits::short(base), crate::limits::short(p));
        let name = format!("the {what} cost {sym}^p ({flag}{opt} {b}, {flag}p {e})");
        range(&name, base.powf(p), lo, In(1e250))
    };
    cost("cut-off", "c", "c", c, Ex(0.0))?;
    cost("switching", "gamma", "switching", gamma, In(0.0))?;
    Ok(())
}

/// GOSPA (`alpha = 2`) between `truth` and `est`, flat arrays of points of `dim`
/// components; also each truth's assigned estimate.
pub fn gospa(
    truth: &[f64],
    est: &[f64],
    dim: usize,
    c: f64,
    p: f64,
    solver: &mut Assignment,
) -> (Gospa, Vec<Option<usize>>) {
    let (m, n) = (truth.len() / dim, est.len() / dim);
    let cp = c.powf(p);
    // Assigning a pair closer than c replaces a missed and a false cost (c^p in all) by
    // d^p; a pair at c or farther is never better than leaving both unassigned.
    let mut cost = vec![f64::INFINITY; m * n];
    for i in 0..m {
        for j in 0..n {
            let d = dist(&truth[i * dim..(i + 1) * dim], &est[j * dim..(j + 1) * dim]);
            if d < c {
                cost[i * n + j] = d.powf(p) - cp;
            }
        }
    }
    // Feasible by construction: every row can stay unassigned.
    let (sol, _) = solve_with_misses(solver, m, n, &cost, &vec![0.0; m])
        .expect("a problem where every row may stay unassigned is feasible");
    let mut g = Gospa::default();
    for (i, j) in sol.iter().enumerate() {
        if let Some(j) = *j {
            g.localisation += (cost[i * n + j] + cp).max(0.0);
            g.assigned += 1;
        }
    }
    g.missed = cp / 2.0 * (m - g.assigned) as f64;
    g.false_tracks = cp / 2.0 * (n - g.assigned) as f64;
    g.total = (g.localisation + g.missed + g.false_tracks).powf(1.0 / p);
    (g, sol)
}

/// OSPA between `truth` and `est` (flat points of `dim` components).
pub fn ospa(
    truth: &[f64],
    est: &[f64],
    dim: usize,
    c: f64,
    p: f64,
    solver: &mut Assignment,
) -> f64 {
    let (a, b) = if truth.len() <= est.len() {
        (truth, est)
    } else {
        (est, truth)
    };
    let (m, n) = (a.len() / dim, b.len() / dim);
    if n == 0 {
        return 0.0;
    }
    let mut cost = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            cost[i * n + j] = dist(&a[i * dim..(i + 1) * dim], &b[j * dim..(j + 1) * dim])
                .min(c)
                .powf(p);
        }
    }
    // All costs finite and m <= n: always feasible.
    let sol = solver
        .solve(m, n, &cost)
        .expect("a finite assignment problem is feasible");
    let s: f64 = sol
        .iter()
        .enumerate()
        .map(|(i, j)| j.map_or(0.0, |j| cost[i * n + j]))
        .sum();
    ((s + c.powf(p) * (n - m) as f64) / n as f64).powf(1.0 / p)
}

/// The truth and the estimates at one time, each point with its identity.
#[derive(Clone, Debug, Default)]
pub struct Frame {
    /// The time.
    pub t: f64,
    /// Identity of each true target.
    pub truth_ids: Vec<u64>,
    /// `truth_ids.len() x dim`.
    pub truth: Vec<f64>,
    /// Identity of each track.
    pub track_ids: Vec<u64>,
    /// `track_ids.len() x dim`.
    pub tracks: Vec<f64>,
}

/// GOSPA at every frame with the switching penalty `gamma` between consecutive frames.
pub fn gospa_over_time(frames: &[Frame], dim: usize, c: f64, p: f64, gamma: f64) -> Vec<Gospa> {
    let mut solver = Assignment::new();
    let mut prev: HashMap<u64, Option<u64>> = HashMap::new();
    let gp = gamma.powf(p);
    frames
        .iter()
        .map(|f| {
            let (mut g, sol) = gospa(&f.truth, &f.tracks, dim, c, p, &mut solver);
            let mut now = HashMap::with_capacity(f.truth_ids.len());
            for (i, &id) in f.truth_ids.iter().enumerate() {
                let track = sol[i].map(|j| f.track_ids[j]);
                if let Some(before) = prev.get(&id) {
                    if *before != track {
                        g.switches += if before.is_some() && track.is_some() {
                            1.0
                        } else {
                            0.5
                        };
                    }
                }
                now.insert(id, track);
            }
            prev = now;
            g.switching = gp * g.switches;
            g.total = (g.localisation + g.missed + g.false_tracks + g.switching).powf(1.0 / p);
            g
        })
        .collect()
}

/// One step of CLEAR MOT.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MotStep {
    /// True targets present.
    pub truths: usize,
    /// Truths matched to a track.
    pub matches: usize,
    /// Truths without a track.
    pub misses: usize,
    /// Tracks without a truth.
    pub false_tracks: usize,
    /// Truths whose matched track changed.
    pub switches: usize,
    /// Sum of the matched distances.
    pub distance: f64,
}

/// CLEAR MOT totals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MotSummary {
    /// Multiple-object tracking accuracy, `1 - (misses + false tracks + switches) / truths`.
    pub mota: f64,
    /// Mean matched distance (NaN without matches).
    pub motp: f64,
    /// True targets summed over the frames.
    pub truths: usize,
    /// Matches summed over the frames.
    pub matches: usize,
    /// Misses summed over the frames.
    pub misses: usize,
    /// False tracks summed over the frames.
    pub false_tracks: usize,
    /// Identity switches summed over the frames.
    pub switches: usize,
}

/// CLEAR MOT over the frames, with matches allowed below the distance `threshold`.
pub fn clear_mot(frames: &[Frame], dim: usize, threshold: f64) -> (Vec<MotStep>, MotSummary) {
    let mut solver = Assignment::new();
    // A truth's track at its last match.
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut steps = Vec::with_capacity(frames.len());
    for f in frames {
        let (m, n) = (f.truth_ids.len(), f.track_ids.len());
        let d = |i: usize, j: usize| {
            dist(
                &f.truth[i * dim..(i + 1) * dim],
                &f.tracks[j * dim..(j + 1) * dim],
            )
        };
        let mut truth_match: Vec<Option<usize>> = vec![None; m];
        let mut track_used = vec![false; n];
        let col: HashMap<u64, usize> = f
            .track_ids
            .iter()
            .enumerate()
            .map(|(j, &id)| (id, j))
            .collect();
        // 1. Keep last step's correspondences that are still close enough.
        for (i, id) in f.truth_ids.iter().enumerate() {
            if let Some(j) = last.get(id).and_then(|h| col.get(h)).copied() {
                if !track_used[j] && d(i, j) < threshold {
                    truth_match[i] = Some(j);
                    track_used[j] = true;
                }
            }
        }
        // 2. The rest: most matches, then least total distance. Every match earns a
        // bonus larger than any possible sum of distances, so the count comes first.
        let rows: Vec<usize> = (0..m).filter(|&i| truth_match[i].is_none()).collect();
        let cols: Vec<usize> = (0..n).filter(|&j| !track_used[j]).collect();
        if !rows.is_empty() && !cols.is_empty() {
            let bonus = threshold * (rows.len().min(cols.len()) + 1) as f64 + 1.0;
            let mut cost = vec![f64::INFINITY; rows.len() * cols.len()];
            for (a, &i) in rows.iter().enumerate() {
                for (b, &j) in cols.iter().enumerate() {
                    let dd = d(i, j);
                    if dd < threshold {
                        cost[a * cols.len() + b] = dd - bonus;
                    }
                }
            }
            let zeros = vec![0.0; rows.len()];
            let (sol, _) = solve_with_misses(&mut solver, rows.len(), cols.len(), &cost, &zeros)
                .expect("a problem where every row may stay unassigned is feasible");
            for (a, s) in sol.iter().enumerate() {
                if let Some(b) = s {
                    truth_match[rows[a]] = Some(cols[*b]);
                }
            }
        }
        let mut s = MotStep {
            truths: m,
            ..Default::default()
        };
        for (i, j) in truth_match.iter().enumerate() {
            if let Some(j) = *j {
                s.matches += 1;
                s.distance += d(i, j);
                let h = f.track_ids[j];
                if let Some(old) = last.insert(f.truth_ids[i], h) {
                    if old != h {
                        s.switches += 1;
                    }
                }
            }
        }
        s.misses = m - s.matches;
        s.false_tracks = n - s.matches;
        steps.push(s);
    }
    let mut sum = MotSummary::default();
    let mut dsum = 0.0;
    for s in &steps {
        sum.truths += s.truths;
        sum.matches += s.matches;
        sum.misses += s.misses;
        sum.false_tracks += s.false_tracks;
        sum.switches += s.switches;
        dsum += s.distance;
    }
    sum.mota = if sum.truths == 0 {
        f64::NAN
    } else {
        1.0 - (sum.misses + sum.false_tracks + sum.switches) as f64 / sum.truths as f64
    };
    sum.motp = if sum.matches == 0 {
        f64::NAN
    } else {
        dsum / sum.matches as f64
    };
    (steps, sum)
}

/// Pairs truth and tracks at each time present in either (in time order), with points
/// `proj x` (`proj`: `dim x n` row-major, `None`: the states themselves). Only confirmed
/// tracks count unless `all_tracks`.
pub fn frames(
    truth: &super::files::Labelled,
    tracks: &super::files::Labelled,
    proj: Option<(&[f64], usize)>,
    all_tracks: bool,
) -> crate::error::Result<(Vec<Frame>, usize)> {
    let n = truth.n;
    let dim = match proj {
        Some((p, d)) => {
            if p.len() != d * n || tracks.n != n {
                return Err(crate::error::Error::input(format!(
                    "the model's H is {d} x {}, the truth has {n} state components and the tracks {}",
                    p.len() / d.max(1),
                    tracks.n
                )));
            }
            d
        }
        None => {
            if tracks.n != n {
                return Err(crate::error::Error::input(format!(
                    "the truth has {n} state components (x0..x{}), the tracks {} (x0..x{}): give --model to compare measured components",
                    n.saturating_sub(1),
                    tracks.n,
                    tracks.n.saturating_sub(1)
                )));
            }
            n
        }
    };
    let point = |x: &[f64], out: &mut Vec<f64>| match proj {
        Some((p, d)) => {
            for a in 0..d {
                out.push((0..n).map(|r| p[a * n + r] * x[r]).sum());
            }
        }
        None => out.extend_from_slice(x),
    };
    use super::files::time_key;
    let mut times: Vec<f64> = truth
        .t
        .iter()
        .chain(&tracks.t)
        .map(|&t| time_key(t))
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let mut frames: Vec<Frame> = times
        .iter()
        .map(|&t| Frame {
            t,
            ..Default::default()
        })
        .collect();
    let at = |t: f64| {
        times
            .binary_search_by(|v| v.total_cmp(&time_key(t)))
            .unwrap_or(0)
    };
    for i in 0..truth.t.len() {
        let f = &mut frames[at(truth.t[i])];
        f.truth_ids.push(truth.id[i]);
        point(&truth.x[i * n..(i + 1) * n], &mut f.truth);
    }
    for i in 0..tracks.t.len() {
        if all_tracks || tracks.confirmed[i] {
            let f = &mut frames[at(tracks.t[i])];
            f.track_ids.push(tracks.id[i]);
            point(&tracks.x[i * n..(i + 1) * n], &mut f.tracks);
        }
    }
    Ok((frames, dim))
}
