//! GOSPA, OSPA and CLEAR MOT against independent brute-force computations on small
//! random sets, and against values worked out by hand.

use kestrel::tracking::metrics::{clear_mot, gospa, gospa_over_time, ospa, Frame};
use kestrel::tracking::Assignment;
use rand::{Rng, SeedableRng};

fn d(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// GOSPA from its definition: the least, over every partial one-to-one assignment (pairs
/// at any distance allowed), of sum d^p + c^p/2 (m + n - 2|g|).
fn gospa_brute(x: &[Vec<f64>], y: &[Vec<f64>], c: f64, p: f64) -> f64 {
    fn go(i: usize, x: &[Vec<f64>], y: &[Vec<f64>], used: &mut [bool], c: f64, p: f64) -> f64 {
        if i == x.len() {
            let unused = used.iter().filter(|u| !**u).count();
            return c.powf(p) / 2.0 * unused as f64;
        }
        let mut best = c.powf(p) / 2.0 + go(i + 1, x, y, used, c, p);
        for j in 0..y.len() {
            if !used[j] {
                used[j] = true;
                best = best.min(d(&x[i], &y[j]).powf(p) + go(i + 1, x, y, used, c, p));
                used[j] = false;
            }
        }
        best
    }
    go(0, x, y, &mut vec![false; y.len()], c, p).powf(1.0 / p)
}

/// OSPA from its definition: the least over all injections of the smaller set.
fn ospa_brute(x: &[Vec<f64>], y: &[Vec<f64>], c: f64, p: f64) -> f64 {
    let (a, b) = if x.len() <= y.len() { (x, y) } else { (y, x) };
    if b.is_empty() {
        return 0.0;
    }
    fn go(i: usize, a: &[Vec<f64>], b: &[Vec<f64>], used: &mut [bool], c: f64, p: f64) -> f64 {
        if i == a.len() {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        for j in 0..b.len() {
            if !used[j] {
                used[j] = true;
                best = best.min(d(&a[i], &b[j]).min(c).powf(p) + go(i + 1, a, b, used, c, p));
                used[j] = false;
            }
        }
        best
    }
    let s = go(0, a, b, &mut vec![false; b.len()], c, p);
    ((s + c.powf(p) * (b.len() - a.len()) as f64) / b.len() as f64).powf(1.0 / p)
}

fn points(rng: &mut impl Rng, n: usize, dim: usize, spread: f64) -> Vec<Vec<f64>> {
    (0..n)
        .map(|_| (0..dim).map(|_| rng.gen_range(-spread..spread)).collect())
        .collect()
}

fn flat(v: &[Vec<f64>]) -> Vec<f64> {
    v.iter().flatten().copied().collect()
}

#[test]
fn gospa_and_ospa_equal_brute_force_on_random_sets() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2017);
    let mut solver = Assignment::new();
    for _ in 0..1500 {
        let dim = rng.gen_range(1..=3);
        let (nx, ny) = (rng.gen_range(0..=5), rng.gen_range(0..=5));
        let x = points(&mut rng, nx, dim, 10.0);
        let y = points(&mut rng, ny, dim, 10.0);
        let c = rng.gen_range(0.5..15.0);
        let p = [1.0, 2.0, 3.0, rng.gen_range(1.0..4.0)][rng.gen_range(0..4)];
        let (g, sol) = gospa(&flat(&x), &flat(&y), dim, c, p, &mut solver);
        let want = gospa_brute(&x, &y, c, p);
        assert!(
            (g.total - want).abs() <= 1e-9 * want.max(1.0),
            "GOSPA {} vs {want}",
            g.total
        );
        // The parts add up and describe the returned assignment.
        let cp = c.powf(p);
        assert!(
            ((g.localisation + g.missed + g.false_tracks).powf(1.0 / p) - g.total).abs() < 1e-9
        );
        assert_eq!(g.missed, cp / 2.0 * (x.len() - g.assigned) as f64);
        assert_eq!(g.false_tracks, cp / 2.0 * (y.len() - g.assigned) as f64);
        let loc: f64 = sol
            .iter()
            .enumerate()
            .filter_map(|(i, j)| j.map(|j| d(&x[i], &y[j]).powf(p)))
            .sum();
        assert!((loc - g.localisation).abs() < 1e-9 * loc.max(1.0));
        let o = ospa(&flat(&x), &flat(&y), dim, c, p, &mut solver);
        let want = ospa_brute(&x, &y, c, p);
        assert!(
            (o - want).abs() <= 1e-9 * want.max(1.0),
            "OSPA {o} vs {want}"
        );
        assert!(o <= c + 1e-12);
    }
}

#[test]
fn gospa_and_ospa_by_hand() {
    let mut s = Assignment::new();
    // One truth at 0, estimates at 3 and 100 (c = 10, p = 2): the pair (0, 3) costs 9,
    // the far estimate is false: 100/2 = 50; total sqrt(59).
    let (g, _) = gospa(&[0.0], &[3.0, 100.0], 1, 10.0, 2.0, &mut s);
    assert_eq!((g.localisation, g.missed, g.false_tracks), (9.0, 0.0, 50.0));
    assert!((g.total - 59f64.sqrt()).abs() < 1e-12);
    // OSPA of the same: (9 + 100) / 2, square root.
    assert!((ospa(&[0.0], &[3.0, 100.0], 1, 10.0, 2.0, &mut s) - 54.5f64.sqrt()).abs() < 1e-12);
    // Both empty: 0.
    assert_eq!(ospa(&[], &[], 2, 5.0, 1.0, &mut s), 0.0);
    assert_eq!(gospa(&[], &[], 2, 5.0, 1.0, &mut s).0.total, 0.0);
}

fn frame(t: f64, truth: &[(u64, f64)], tracks: &[(u64, f64)]) -> Frame {
    Frame {
        t,
        truth_ids: truth.iter().map(|p| p.0).collect(),
        truth: truth.iter().map(|p| p.1).collect(),
        track_ids: tracks.iter().map(|p| p.0).collect(),
        tracks: tracks.iter().map(|p| p.1).collect(),
    }
}

#[test]
fn switching_penalty_by_hand() {
    // Truths 1 (at 0) and 2 (at 10). Tracks 7 and 8 follow them, then swap at step 2,
    // then track 8 disappears at step 3.
    let frames = vec![
        frame(0.0, &[(1, 0.0), (2, 10.0)], &[(7, 0.5), (8, 10.5)]),
        frame(1.0, &[(1, 0.0), (2, 10.0)], &[(7, 0.5), (8, 10.5)]),
        frame(2.0, &[(1, 0.0), (2, 10.0)], &[(8, 0.5), (7, 10.5)]),
        frame(3.0, &[(1, 0.0), (2, 10.0)], &[(7, 10.5)]),
    ];
    let g = gospa_over_time(&frames, 1, 4.0, 2.0, 3.0);
    let sw: Vec<f64> = g.iter().map(|s| s.switches).collect();
    // Step 2: both truths change track (2 full switches); step 3: truth 1 loses its
    // track (a half switch), truth 2 keeps track 7.
    assert_eq!(sw, vec![0.0, 0.0, 2.0, 0.5]);
    assert_eq!(g[2].switching, 2.0 * 9.0);
    assert!((g[2].total - (0.25 + 0.25 + 18.0f64).sqrt()).abs() < 1e-12);
    assert!((g[3].total - (0.25 + 8.0 + 4.5f64).sqrt()).abs() < 1e-12);
}

#[test]
fn clear_mot_by_hand() {
    // Truth 1 at 0 and truth 2 at 10 for four steps. Tracks: 7 follows truth 1 until it
    // jumps to truth 2 at step 2 (truth 2's track 8 vanishes), then track 9 picks up
    // truth 1; a false track 5 at 50 at step 1.
    let frames = vec![
        frame(0.0, &[(1, 0.0), (2, 10.0)], &[(7, 0.5), (8, 10.0)]),
        frame(
            1.0,
            &[(1, 0.0), (2, 10.0)],
            &[(7, 1.0), (8, 9.0), (5, 50.0)],
        ),
        frame(2.0, &[(1, 0.0), (2, 10.0)], &[(7, 10.0)]),
        frame(3.0, &[(1, 0.0), (2, 10.0)], &[(7, 10.0), (9, 0.0)]),
    ];
    let (steps, sum) = clear_mot(&frames, 1, 2.0);
    let per: Vec<(usize, usize, usize, usize)> = steps
        .iter()
        .map(|s| (s.matches, s.misses, s.false_tracks, s.switches))
        .collect();
    // Step 2: truth 2 is now on track 7 (was 8): a switch; truth 1 missed.
    // Step 3: truth 1 on track 9 (was 7): a switch.
    assert_eq!(
        per,
        vec![(2, 0, 0, 0), (2, 0, 1, 0), (1, 1, 0, 1), (2, 0, 0, 1)]
    );
    assert_eq!(sum.truths, 8);
    assert!((sum.mota - (1.0 - (1.0 + 1.0 + 2.0) / 8.0)).abs() < 1e-12);
    assert!((sum.motp - (0.5 + 1.0 + 1.0) / 7.0).abs() < 1e-12);
}

#[test]
fn clear_mot_keeps_a_valid_match_over_a_closer_newcomer() {
    // Track 7 follows truth 1; at step 1 track 8 appears closer to truth 1, but the kept
    // correspondence stays (CLEAR MOT's first rule), so track 8 is a false track.
    let frames = vec![
        frame(0.0, &[(1, 0.0)], &[(7, 0.9)]),
        frame(1.0, &[(1, 0.0)], &[(7, 0.9), (8, 0.1)]),
    ];
    let (steps, sum) = clear_mot(&frames, 1, 1.0);
    assert_eq!(
        (steps[1].matches, steps[1].false_tracks, sum.switches),
        (1, 1, 0)
    );
    assert!((steps[1].distance - 0.9).abs() < 1e-12);
}

#[test]
fn clear_mot_matches_as_many_as_possible_first() {
    // Truth 1 at 0, truth 2 at 1.7; tracks at 0.9 and 2.6 (threshold 1): the closest
    // pair (truth 2, 0.9), at 0.8, would leave truth 1 without a track near enough; the
    // most matches pair truth 1 with 0.9 and truth 2 with 2.6, both at 0.9.
    let frames = vec![frame(0.0, &[(1, 0.0), (2, 1.7)], &[(7, 0.9), (8, 2.6)])];
    let (steps, _) = clear_mot(&frames, 1, 1.0);
    assert_eq!(steps[0].matches, 2);
    // By brute force over the two possible pairings, only one has both within 1.
    assert!((steps[0].distance - 1.8).abs() < 1e-12);
}
