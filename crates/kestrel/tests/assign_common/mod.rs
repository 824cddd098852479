//! Random gated problems for the GNN association tests (`tracking_assign_*`): spatial
//! scenes of many small clusters, chains that join into large clusters, stars of
//! tracks around one detection, tracks with no pairs; and the host reference.
#![allow(dead_code)]

use kestrel::tracking::associate::{clusters, gnn, gnn_costs, live_pairs};
use kestrel::tracking::gate::Gated;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One association problem: the gated pairs, the number of detections, and `pd`, `pg`,
/// `clutter` (the costs follow from them).
pub struct Problem {
    pub name: String,
    pub g: Gated,
    pub ndet: usize,
    pub pd: f64,
    pub pg: f64,
    pub clutter: f64,
}

impl Problem {
    pub fn n(&self) -> usize {
        self.g.start.len() - 1
    }
    pub fn costs(&self) -> (f64, f64) {
        gnn_costs(self.pd, self.pg, self.clutter)
    }
    /// The host's GNN (the reference), on the clusters of the live pairs as the tracker
    /// forms them.
    pub fn reference(&self) -> Vec<Option<u32>> {
        let (gain, miss) = self.costs();
        let live = live_pairs(&self.g, gain, miss);
        gnn(
            &clusters(&live, self.ndet),
            &live,
            self.n(),
            self.pd,
            self.pg,
            self.clutter,
        )
    }
    /// Total cost of an assignment (pairs `-(gain + ll)`, misses `miss` for tracks
    /// with pairs; tracks without pairs cost nothing either way); `None` if it uses a
    /// pair that is not gated or a detection twice.
    pub fn cost(&self, pick: &[Option<u32>]) -> Option<f64> {
        let (gain, miss) = self.costs();
        let mut used = vec![false; self.ndet];
        let mut total = 0.0;
        for (i, p) in pick.iter().enumerate() {
            let r = self.g.of(i);
            match p {
                None => {
                    if !r.is_empty() {
                        total += miss
                    }
                }
                Some(d) => {
                    let k = r.clone().find(|&k| self.g.det[k] == *d)?;
                    if std::mem::replace(&mut used[*d as usize], true) {
                        return None;
                    }
                    total += -(gain + self.g.ll[k]);
                }
            }
        }
        Some(total)
    }
}

/// Compressed rows from per-track (detection, ll) lists, detections ascending.
pub fn gated(rows: Vec<Vec<(u32, f64)>>) -> Gated {
    let mut g = Gated {
        start: vec![0],
        det: Vec::new(),
        ll: Vec::new(),
    };
    for mut r in rows {
        r.sort_by_key(|e| e.0);
        r.dedup_by_key(|e| e.0);
        for (d, l) in r {
            g.det.push(d);
            g.ll.push(l);
        }
        g.start.push(g.det.len());
    }
    g
}

/// A log-likelihood as a 2-D gate gives: `-(ln 2 pi + ln |S| / 2 ... )`, here
/// `-1.84 - half_logdet - maha / 2` with `maha` in the gate.
fn ll_of(rng: &mut StdRng, maha: f64) -> f64 {
    -1.8378770664093453 - rng.gen_range(-1.0..2.0) - 0.5 * maha
}

/// A log-likelihood at a random distance inside the gate.
fn rand_ll(rng: &mut StdRng) -> f64 {
    let maha = rng.gen_range(0.0..13.8);
    ll_of(rng, maha)
}

/// Tracks and detections uniform in the unit square; a detection is gated when closer
/// than `radius` to the track (squared Mahalanobis distance `13.8 (d / radius)^2`).
/// Grid-bucketed, so scale-sized scenes are quick to make.
pub fn spatial(n: usize, ndet: usize, radius: f64, seed: u64) -> Gated {
    let mut rng = StdRng::seed_from_u64(seed);
    let tr: Vec<[f64; 2]> = (0..n).map(|_| [rng.gen(), rng.gen()]).collect();
    let de: Vec<[f64; 2]> = (0..ndet).map(|_| [rng.gen(), rng.gen()]).collect();
    let cells = ((1.0 / radius).floor() as usize).clamp(1, 4096);
    let cell = |x: f64| ((x * cells as f64) as usize).min(cells - 1);
    let mut grid: Vec<Vec<u32>> = vec![Vec::new(); cells * cells];
    for (j, d) in de.iter().enumerate() {
        grid[cell(d[1]) * cells + cell(d[0])].push(j as u32);
    }
    let rows = tr
        .iter()
        .map(|t| {
            let (cx, cy) = (cell(t[0]), cell(t[1]));
            let mut row = Vec::new();
            for y in cy.saturating_sub(1)..(cy + 2).min(cells) {
                for x in cx.saturating_sub(1)..(cx + 2).min(cells) {
                    for &j in &grid[y * cells + x] {
                        let d = de[j as usize];
                        let r2 = (d[0] - t[0]).powi(2) + (d[1] - t[1]).powi(2);
                        if r2 < radius * radius {
                            let maha = 13.8 * r2 / (radius * radius);
                            row.push((j, ll_of(&mut rng, maha)));
                        }
                    }
                }
            }
            row
        })
        .collect();
    gated(rows)
}

/// Chains: track i gates detections i and i + 1 (and sometimes i + 2), so that runs of
/// tracks form clusters as long as the run; `breaks` ends a run at random.
pub fn chains(n: usize, breaks: f64, seed: u64) -> (Gated, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rows = Vec::new();
    let mut d = 0u32;
    for _ in 0..n {
        let mut row = vec![(d, rand_ll(&mut rng))];
        row.push((d + 1, rand_ll(&mut rng)));
        if rng.gen_bool(0.3) {
            row.push((d + 2, rand_ll(&mut rng)));
        }
        rows.push(row);
        d += if rng.gen_bool(breaks) { 3 } else { 1 };
    }
    (gated(rows), d as usize + 3)
}

/// Stars: `k` tracks that all gate one detection (and nothing else), tracks with no
/// pairs between them, and single tracks with several detections of their own.
pub fn stars(groups: usize, seed: u64) -> (Gated, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rows = Vec::new();
    let mut d = 0u32;
    for _ in 0..groups {
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..6) {
                    rows.push(vec![(d, rand_ll(&mut rng))]);
                }
                d += 1;
            }
            1 => {
                for _ in 0..rng.gen_range(1..3) {
                    rows.push(Vec::new());
                }
            }
            _ => {
                let k = rng.gen_range(1..5);
                rows.push((0..k).map(|a| (d + a, rand_ll(&mut rng))).collect());
                d += k;
            }
        }
    }
    (gated(rows), d as usize)
}

/// The problems both tests run: every shape, with `pd` below and at 1.
pub fn problems(seed: u64) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut add = |name: &str, g: Gated, ndet: usize, pd: f64, clutter: f64| {
        out.push(Problem {
            name: name.to_string(),
            g,
            ndet,
            pd,
            pg: 0.999,
            clutter,
        })
    };
    for (k, &(n, nd, r)) in [
        (300, 300, 0.02),
        (1000, 800, 0.02),
        (500, 1500, 0.03),
        (2000, 2000, 0.012),
        (400, 100, 0.05),
    ]
    .iter()
    .enumerate()
    {
        let s = seed + k as u64;
        add(
            &format!("spatial {n}x{nd} r {r}"),
            spatial(n, nd, r, s),
            nd,
            0.9,
            2e-3,
        );
        add(
            &format!("spatial {n}x{nd} r {r} pd 1"),
            spatial(n, nd, r, s + 100),
            nd,
            1.0,
            5e-4,
        );
    }
    let (g, nd) = chains(600, 0.03, seed + 7);
    add("chains (long)", g, nd, 0.9, 1e-3);
    let (g, nd) = chains(600, 0.3, seed + 8);
    add("chains (short)", g, nd, 0.8, 1e-2);
    let (g, nd) = chains(300, 0.1, seed + 9);
    add("chains pd 1", g, nd, 1.0, 1e-3);
    // Runs of tens of tracks, and one cluster of about a thousand (past the block
    // solver's limits).
    let (g, nd) = chains(2500, 0.004, seed + 12);
    add("chains (very long)", g, nd, 0.9, 1e-3);
    add(
        "spatial 1200x1200 r 0.06 (one large cluster)",
        spatial(1200, 1200, 0.06, seed + 13),
        1200,
        0.9,
        2e-3,
    );
    let (g, nd) = stars(400, seed + 10);
    add("stars", g, nd, 0.9, 3e-3);
    let (g, nd) = stars(300, seed + 11);
    add("stars pd 1", g, nd, 1.0, 3e-3);
    add("no pairs", gated(vec![Vec::new(); 17]), 5, 0.9, 1e-3);
    add(
        "one track",
        gated(vec![vec![(2, -3.0), (4, -9.0)]]),
        6,
        0.9,
        1e-2,
    );
    out
}

/// Compares `got` (`-2` entries: left to the host, checked by `host_ok`) with the
/// reference; on a difference, the total costs must be equal (a tie) or the test fails.
pub fn check(p: &Problem, got: &[Option<u32>], what: &str) {
    let want = p.reference();
    assert_eq!(got.len(), want.len(), "{}: {what}: length", p.name);
    let diff = (0..want.len()).filter(|&i| got[i] != want[i]).count();
    if diff > 0 {
        let (a, b) = (p.cost(got), p.cost(&want));
        let a = a.unwrap_or_else(|| panic!("{}: {what}: not a valid assignment", p.name));
        let b = b.expect("the reference is valid");
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "{}: {what}: {diff} tracks differ, total cost {a} against the reference's {b}",
            p.name
        );
        eprintln!(
            "{}: {what}: {diff} tracks differ at an equal total cost {a} (a tie)",
            p.name
        );
    }
}

/// A scene of `nblobs` targets, each with 1 to 5 tracks (a confirmed track and the
/// tentative ones started near it) and `tracks - 1` or `tracks` detections close by,
/// blobs uniform in the unit square: about `3 nblobs` tracks, `2.5 nblobs` detections,
/// `9.5 nblobs` gated pairs, mostly tiny clusters, blobs that happen to fall close
/// together joining into larger ones.
pub fn blobs(nblobs: usize, seed: u64) -> (Gated, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (spread, radius) = (1e-4, 3e-4);
    let (mut tr, mut de) = (Vec::new(), Vec::new());
    for _ in 0..nblobs {
        let c: [f64; 2] = [rng.gen(), rng.gen()];
        let t = rng.gen_range(1..=5);
        let d = t - 1 + rng.gen_range(0..=1);
        let near = |rng: &mut StdRng| {
            [
                c[0] + spread * rng.gen_range(-1.0..1.0),
                c[1] + spread * rng.gen_range(-1.0..1.0),
            ]
        };
        for _ in 0..t {
            tr.push(near(&mut rng));
        }
        for _ in 0..d {
            de.push(near(&mut rng));
        }
    }
    let cells = (1.0 / radius) as usize;
    let cell = |x: f64| ((x.clamp(0.0, 1.0) * cells as f64) as usize).min(cells - 1);
    let mut grid: std::collections::HashMap<(usize, usize), Vec<u32>> = Default::default();
    for (j, d) in de.iter().enumerate() {
        grid.entry((cell(d[0]), cell(d[1])))
            .or_default()
            .push(j as u32);
    }
    let rows = tr
        .iter()
        .map(|t| {
            let (cx, cy) = (cell(t[0]), cell(t[1]));
            let mut row = Vec::new();
            for y in cy.saturating_sub(1)..(cy + 2).min(cells) {
                for x in cx.saturating_sub(1)..(cx + 2).min(cells) {
                    for &j in grid.get(&(x, y)).map(|v| v.as_slice()).unwrap_or(&[]) {
                        let d = de[j as usize];
                        let r2 = (d[0] - t[0]).powi(2) + (d[1] - t[1]).powi(2);
                        if r2 < radius * radius {
                            row.push((j, ll_of(&mut rng, 13.8 * r2 / (radius * radius))));
                        }
                    }
                }
            }
            row
        })
        .collect();
    (gated(rows), de.len())
}
