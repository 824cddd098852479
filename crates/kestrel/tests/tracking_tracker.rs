//! The tracker's parts against independent references (grid gate = gate over every
//! detection; loopy belief propagation = exact JPDA on tree-shaped clusters; exact JPDA
//! = marginals worked out by hand) and the whole tracker on simulated scenarios, scored
//! with CLEAR MOT and GOSPA.

use kestrel::model::constant_velocity;
use kestrel::tracking::associate::{clusters, jpda, jpda_exact, jpda_lbp, EXACT_EVENTS};
use kestrel::tracking::gate::{gate_all, gate_all_brute};
use kestrel::tracking::metrics::{clear_mot, frames, gospa_over_time};
use kestrel::tracking::scenario::{simulate, Kind, Scenario};
use kestrel::tracking::{Assoc, Innovations, JpdaMarginals, Tracker, TrackerConfig};
use rand::{Rng, SeedableRng};

fn random_innovation(rng: &mut impl Rng, inns: &mut Innovations, spread: f64) {
    // S = A A^T + 0.5 I, Cholesky by hand through nalgebra.
    let ny = inns.ny;
    let a = nalgebra::DMatrix::from_fn(ny, ny, |_, _| rng.gen_range(-3.0..3.0));
    let s = &a * a.transpose() + nalgebra::DMatrix::identity(ny, ny) * 0.5;
    let l = s.cholesky().unwrap().l();
    let zhat: Vec<f64> = (0..ny).map(|_| rng.gen_range(-spread..spread)).collect();
    let l: Vec<f64> = (0..ny)
        .flat_map(|i| (0..ny).map(move |j| (i, j)))
        .map(|(i, j)| l[(i, j)])
        .collect();
    inns.push_factor(&zhat, &l);
}

#[test]
fn grid_gate_equals_gating_every_detection() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(99);
    for trial in 0..60 {
        let ny = 1 + trial % 3;
        let spread = [10.0, 100.0, 1000.0][trial % 3];
        let mut inns = Innovations::new(ny);
        for _ in 0..rng.gen_range(0..80) {
            random_innovation(&mut rng, &mut inns, spread);
        }
        let ndet = rng.gen_range(0..400);
        let z: Vec<f64> = (0..ndet * ny)
            .map(|_| rng.gen_range(-spread..spread))
            .collect();
        let gamma = kestrel::tracking::chi2::chi2_quantile(ny, 0.999);
        let a = gate_all(&inns, &z, ny, gamma);
        let b = gate_all_brute(&inns, &z, ny, gamma);
        assert_eq!(a.start, b.start, "trial {trial}");
        assert_eq!(a.det, b.det, "trial {trial}");
        assert_eq!(a.ll, b.ll);
    }
}

/// A random tree-shaped association graph: tracks and detections alternate along
/// branches, so loopy belief propagation is exact.
#[test]
fn belief_propagation_is_exact_on_trees() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2014);
    for _ in 0..300 {
        let tracks = rng.gen_range(1..7);
        // Each track after the first links to one detection already in the graph (one
        // edge back: a tree) and brings new detections of its own.
        let mut ndet = 0;
        let mut a: Vec<Vec<(usize, f64)>> = Vec::new();
        for t in 0..tracks {
            let mut row = Vec::new();
            if t > 0 && ndet > 0 {
                row.push((rng.gen_range(0..ndet), rng.gen_range(0.01..5.0)));
            }
            for _ in 0..rng.gen_range(0..3) {
                row.push((ndet, rng.gen_range(0.01..5.0)));
                ndet += 1;
            }
            a.push(row);
        }
        let m: Vec<f64> = (0..tracks).map(|_| rng.gen_range(0.05..2.0)).collect();
        let exact = jpda_exact(&a, &m, ndet);
        let lbp = jpda_lbp(&a, &m, ndet);
        for (e, l) in exact.iter().zip(&lbp) {
            assert!((e.0 - l.0).abs() < 1e-9, "beta0 {} vs {}", e.0, l.0);
            for (x, y) in e.1.iter().zip(&l.1) {
                assert!((x - y).abs() < 1e-9, "beta {x} vs {y}");
            }
            let total: f64 = e.0 + e.1.iter().sum::<f64>();
            assert!((total - 1.0).abs() < 1e-12);
        }
    }
}

#[test]
fn exact_jpda_by_hand() {
    // One track, two detections with weights 2 and 1, miss weight 1: 2/4, 1/4, 1/4.
    let b = jpda_exact(&[vec![(0, 2.0), (1, 1.0)]], &[1.0], 2);
    assert_eq!(b[0].0, 0.25);
    assert_eq!(b[0].1, vec![0.5, 0.25]);
    // Two tracks sharing one detection (weights 3 and 1, misses 1 and 1): events
    // {miss, miss} = 1, {d, miss} = 3, {miss, d} = 1: beta = 3/5 and 1/5.
    let b = jpda_exact(&[vec![(0, 3.0)], vec![(0, 1.0)]], &[1.0, 1.0], 1);
    assert!((b[0].1[0] - 0.6).abs() < 1e-15 && (b[1].1[0] - 0.2).abs() < 1e-15);
    assert!((b[0].0 - 0.4).abs() < 1e-15 && (b[1].0 - 0.8).abs() < 1e-15);
}

#[test]
fn clusters_join_tracks_that_share_detections() {
    use kestrel::tracking::gate::Gated;
    // Track 0 gates {0, 1}, track 1 {1}, track 2 {2}, track 3 nothing, track 4 {2, 3}.
    let g = Gated {
        start: vec![0, 2, 3, 4, 4, 6],
        det: vec![0, 1, 1, 2, 2, 3],
        ll: vec![0.0; 6],
    };
    let mut c = clusters(&g, 4);
    c.sort();
    assert_eq!(c, vec![vec![0, 1], vec![2, 4]]);
}

/// `jpda` solves a cluster exactly up to its event limit and by belief propagation past
/// it: a cluster with a loop (where the two differ) under both limits.
#[test]
fn jpda_enumerates_up_to_the_event_limit() {
    use kestrel::tracking::gate::Gated;
    // Tracks 0 and 1 both gate detections 0 and 1: a loop, 3 x 3 = 9 joint events.
    let ll = [-1.0, -2.5, -1.7, -0.4];
    let g = Gated {
        start: vec![0, 2, 4],
        det: vec![0, 1, 0, 1],
        ll: ll.to_vec(),
    };
    let cl = clusters(&g, 2);
    let (pd, pg, lambda) = (0.9, 0.999, 0.05);
    // The weights jpda forms: pd N / lambda against 1 - pd pg.
    let a: Vec<Vec<(usize, f64)>> = (0..2)
        .map(|i| {
            (0..2)
                .map(|k| (k, pd * f64::exp(ll[2 * i + k]) / lambda))
                .collect()
        })
        .collect();
    let m = [1.0 - pd * pg; 2];
    for (limit, want) in [
        (EXACT_EVENTS, jpda_exact(&a, &m, 2)),
        (9.0, jpda_exact(&a, &m, 2)),
        (8.0, jpda_lbp(&a, &m, 2)),
        (0.0, jpda_lbp(&a, &m, 2)),
    ] {
        let w = jpda(&cl, &g, 2, pd, pg, lambda, limit);
        for (i, wi) in w.iter().enumerate() {
            assert!((wi.beta0 - want[i].0).abs() < 1e-12, "limit {limit}");
            for (k, &(j, b)) in wi.det.iter().enumerate() {
                assert_eq!(j as usize, k);
                assert!((b - want[i].1[k]).abs() < 1e-12, "limit {limit}");
            }
        }
    }
    // On a loop the two differ, so the cases above tell them apart.
    let (e, l) = (jpda_exact(&a, &m, 2), jpda_lbp(&a, &m, 2));
    assert!((e[0].1[0] - l[0].1[0]).abs() > 1e-6);
}

fn scenario(kind: Kind, targets: usize, clutter: f64, seed: u64) -> Scenario {
    Scenario {
        kind,
        targets,
        steps: 40,
        pd: 0.9,
        clutter,
        region: 1000.0,
        births: 0.2,
        death: 0.005,
        seed,
    }
}

fn run_with(assoc: Assoc, marginals: JpdaMarginals, s: &Scenario) -> (f64, f64, usize) {
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    let (truth, det) = simulate(&model, s).unwrap();
    let cfg = TrackerConfig::default()
        .with_assoc(assoc)
        .with_marginals(marginals)
        .with_pd(s.pd)
        .with_clutter(s.clutter_density(2))
        .with_confirm((3, 4))
        .with_delete(3);
    let mut tracker = Tracker::new(&model, cfg).unwrap();
    let mut tracks = kestrel::tracking::files::Labelled {
        n: 4,
        ..Default::default()
    };
    let mut row = 0;
    for k in 0..s.steps {
        let start = row;
        while row < det.len() && det.t[row] == k as f64 {
            row += 1;
        }
        tracker.step(&det.z[start * 2..row * 2]).unwrap();
        for i in 0..tracker.len() {
            tracks.t.push(k as f64);
            tracks.id.push(tracker.id(i));
            tracks
                .confirmed
                .push(tracker.status(i) == kestrel::tracking::Status::Confirmed);
            tracks.x.extend_from_slice(tracker.mean(i));
        }
    }
    let h = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    let (fr, dim) = frames(&truth, &tracks, Some((&h, 2)), false).unwrap();
    let (_, mot) = clear_mot(&fr, dim, 20.0);
    let g = gospa_over_time(&fr, dim, 20.0, 2.0, 0.0);
    // Mean squared position error of GOSPA's assigned pairs.
    let sq = g.iter().map(|s| s.localisation).sum::<f64>()
        / g.iter().map(|s| s.assigned).sum::<usize>() as f64;
    (mot.mota, sq, mot.switches)
}

#[test]
fn gnn_and_jpda_track_random_and_crossing_targets_in_clutter() {
    for (kind, seed) in [(Kind::Random, 1), (Kind::Crossing, 2)] {
        let s = scenario(kind, 20, 20.0, seed);
        for (assoc, marginals) in [
            (Assoc::Gnn, JpdaMarginals::Auto),
            (Assoc::Jpda, JpdaMarginals::Auto),
            (Assoc::Jpda, JpdaMarginals::Lbp),
        ] {
            let (mota, sq, switches) = run_with(assoc, marginals, &s);
            // Confirmation takes 3 of the 40 steps and pd = 0.9: most of the truth is
            // matched, with few false tracks; the tracks are closer to the truth than
            // the detections are (their mean squared position error is tr R = 50).
            assert!(mota > 0.8, "{kind:?} {assoc:?}: MOTA {mota}");
            assert!(
                sq < 0.8 * 50.0,
                "{kind:?} {assoc:?}: mean squared error {sq}"
            );
            assert!(
                switches <= 4,
                "{kind:?} {assoc:?}: {switches} identity switches"
            );
        }
    }
}
