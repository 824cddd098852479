use super::*;
use rand::{Rng, SeedableRng};

fn random_affine(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..2 * n).map(|_| rng.gen()).collect()
}

/// The left fold, written out independently of the engine.
fn fold(data: &[u64], dir: Direction) -> Vec<u64> {
    let n = data.len() / 2;
    let mut out = data.to_vec();
    let op = AffineU64;
    let mut tmp = [0u64; 2];
    match dir {
        Direction::Forward => {
            for i in 1..n {
                op.combine(
                    &out[2 * (i - 1)..2 * i],
                    &data[2 * i..2 * i + 2],
                    &mut tmp,
                    &mut (),
                );
                out[2 * i..2 * i + 2].copy_from_slice(&tmp);
            }
        }
        Direction::Reverse => {
            for i in (0..n.saturating_sub(1)).rev() {
                op.combine(
                    &data[2 * i..2 * i + 2],
                    &out[2 * (i + 1)..2 * i + 4],
                    &mut tmp,
                    &mut (),
                );
                out[2 * i..2 * i + 2].copy_from_slice(&tmp);
            }
        }
    }
    out
}

fn algorithms() -> Vec<ScanAlgorithm> {
    vec![
        ScanAlgorithm::Sequential,
        ScanAlgorithm::HillisSteele,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Sengupta(1),
        ScanAlgorithm::Sengupta(3),
        ScanAlgorithm::Sengupta(16),
        ScanAlgorithm::Sengupta(1000),
        ScanAlgorithm::Fastest,
    ]
}

#[test]
fn every_algorithm_equals_the_fold_for_lengths_1_to_300() {
    for n in 1..=300 {
        let data = random_affine(n, n as u64);
        for dir in [Direction::Forward, Direction::Reverse] {
            let want = fold(&data, dir);
            for alg in algorithms() {
                for exec in [Exec::Serial, Exec::Rayon] {
                    let mut got = data.clone();
                    scan(&AffineU64, &mut got, alg, dir, exec);
                    assert_eq!(got, want, "{alg:?} {dir:?} {exec:?} n={n}");
                }
            }
        }
    }
}

#[test]
fn every_algorithm_equals_the_fold_for_random_larger_lengths() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..6 {
        let n = rng.gen_range(301..20_000);
        let data = random_affine(n, n as u64);
        for dir in [Direction::Forward, Direction::Reverse] {
            let want = fold(&data, dir);
            for alg in algorithms() {
                let mut got = data.clone();
                scan(&AffineU64, &mut got, alg, dir, Exec::Rayon);
                assert_eq!(got, want, "{alg:?} {dir:?} n={n}");
            }
        }
    }
}

#[test]
fn identity_is_two_sided() {
    let data = random_affine(50, 1);
    let mut e = [0u64; 2];
    AffineU64.identity(&mut e);
    let mut out = [0u64; 2];
    for x in data.chunks(2) {
        AffineU64.combine(&e, x, &mut out, &mut ());
        assert_eq!(out, x);
        AffineU64.combine(x, &e, &mut out, &mut ());
        assert_eq!(out, x);
    }
}

#[test]
fn pram_counts_match_the_closed_forms() {
    let t = 1024usize;
    let lg = 10u64;
    let big = usize::MAX / 4;
    let seq = pram_count(ScanAlgorithm::Sequential, t, big);
    assert_eq!((seq.work, seq.span), (t as u64 - 1, t as u64 - 1));
    // Hillis-Steele: sum over levels of (T - 2^d) = T log T - (T - 1), log T steps.
    let hs = pram_count(ScanAlgorithm::HillisSteele, t, big);
    assert_eq!((hs.work, hs.span), (t as u64 * lg - (t as u64 - 1), lg));
    // Ladner-Fischer: up-sweep T-1, down-sweep T-1-log T; 2 log T - 1 steps.
    let lf = pram_count(ScanAlgorithm::LadnerFischer, t, big);
    assert_eq!((lf.work, lf.span), (2 * (t as u64 - 1) - lg, 2 * lg - 1));
    // Blelloch: up T-1, down T-1, fix-up T; 2 log T + 1 steps: two more than the circuit.
    let bl = pram_count(ScanAlgorithm::Blelloch, t, big);
    assert_eq!((bl.work, bl.span), (3 * t as u64 - 2, 2 * lg + 1));
    assert_eq!(bl.span, lf.span + 2);
    // With P processors a level of m operations takes ceil(m / P) steps.
    let lf4 = pram_count(ScanAlgorithm::LadnerFischer, t, 4);
    assert!(lf4.time >= lf4.work / 4 && lf4.time < lf4.work / 4 + 2 * lg);
    // Chunked with P = 8 chunks of 128: 127 steps in every chunk, the circuit over the 8
    // totals (11 operations in 5 steps), 127 fix-up steps in the 7 later chunks.
    let ch = pram_count(ScanAlgorithm::Fastest, t, 8);
    assert_eq!(ch.work, (8 + 7) * (128 - 1) + 11);
    assert_eq!(ch.time, 2 * (128 - 1) + 5);
    // Sengupta with N = 1 has the work of the circuit plus a short Hillis-Steele on top.
    let sa = pram_count(ScanAlgorithm::Sengupta(1), t, big);
    assert!(sa.work <= 2 * t as u64 && sa.span <= 2 * lg + 1, "{sa:?}");
}

#[test]
fn algorithm_names_round_trip() {
    for alg in ScanAlgorithm::all() {
        assert_eq!(alg.name().parse::<ScanAlgorithm>().unwrap(), alg);
    }
    assert!("nope".parse::<ScanAlgorithm>().is_err());
}
