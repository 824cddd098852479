//! The streaming tracker against the batch filter and the CPU reference: the same
//! targets stepped one measurement at a time end where the batch filter ends; targets
//! added and removed between steps are filtered from their own first step.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, BatchTracker, CudaOptions};
use kestrel::{kalman, FilterOptions, Keep, Measurements, Real};

fn last_of<T: Real>(m: &kestrel::Model, z: &Measurements<T>) -> kestrel::Estimates<T> {
    let o = FilterOptions {
        keep: Keep::Last,
        force_general: true,
        ..Default::default()
    };
    kalman::filter(m, z, &o).expect("CPU reference").filtered
}

/// Steps `k0..k1` of track `b` as a one-track batch.
fn slice<T: Real>(z: &Measurements<T>, b: usize, k0: usize, k1: usize) -> Measurements<T> {
    let ny = z.ny;
    let data = z.track(b)[k0 * ny..k1 * ny].to_vec();
    Measurements::new(1, k1 - k0, ny, data).expect("consistent shape")
}

fn step_all<T: Real>(tr: &mut BatchTracker<T>, z: &Measurements<T>, k: usize, active: &[bool]) {
    let ny = z.ny;
    let buf = tr.staging().expect("staging buffer");
    for b in 0..z.tracks {
        let dst = &mut buf[b * ny..(b + 1) * ny];
        if active[b] {
            dst.copy_from_slice(z.at(b, k));
        } else {
            dst.fill(T::nan());
        }
    }
    tr.step_staged().expect("step");
}

#[test]
fn streaming_equals_batch() {
    if !gpu_or_skip("streaming_equals_batch") {
        return;
    }
    for (nx, ny, seed) in [(4usize, 2usize, 10u64), (6, 2, 11), (3, 3, 12)] {
        let m = random_model(nx, ny, seed);
        let (b, t) = (500, 30);
        let z = random_measurements::<f64>(&m, b, t, seed + 100, 0.1);
        let mut tr = BatchTracker::<f64>::new(0, &m, b, &CudaOptions::default()).expect("tracker");
        eprintln!("tracker uses CUDA graphs: {}", tr.uses_graphs());
        assert_eq!(tr.add(b).expect("add"), (0..b).collect::<Vec<_>>());
        let all = vec![true; b];
        for k in 0..t {
            step_all(&mut tr, &z, k, &all);
        }
        let got = tr.state().expect("state");
        assert_close(
            &format!("tracker nx={nx} vs CPU"),
            &got,
            &last_of(&m, &z),
            1e-10,
        );
        let batch = cuda::filter(
            0,
            &m,
            &z,
            &FilterOptions {
                keep: Keep::Last,
                ..Default::default()
            },
        )
        .expect("GPU batch")
        .filtered;
        assert_close(
            &format!("tracker nx={nx} vs GPU batch"),
            &got,
            &batch,
            1e-12,
        );
        // The copying form of step gives the same.
        let mut tr2 = BatchTracker::<f64>::new(0, &m, b, &CudaOptions::default()).expect("tracker");
        tr2.add(b).expect("add");
        for k in 0..t {
            let zk: Vec<f64> = (0..b).flat_map(|i| z.at(i, k).to_vec()).collect();
            tr2.step(&zk).expect("step");
        }
        assert_eq!(tr2.state().expect("state"), got);
    }
}

#[test]
fn targets_come_and_go_between_steps() {
    if !gpu_or_skip("targets_come_and_go_between_steps") {
        return;
    }
    let m = random_model(4, 2, 20);
    let (cap, t) = (64, 24);
    let z = random_measurements::<f32>(&m, cap, t, 21, 0.1);
    let mut tr = BatchTracker::<f32>::new(0, &m, cap, &CudaOptions::default()).expect("tracker");
    let first = tr.add(40).expect("add 40");
    let mut start = vec![usize::MAX; cap];
    let mut active = vec![false; cap];
    for &s in &first {
        start[s] = 0;
        active[s] = true;
    }
    for k in 0..t {
        if k == 8 {
            // Remove every third target; its slot is reused by a new target below.
            let gone: Vec<usize> = (0..40).filter(|i| i % 3 == 0).collect();
            tr.remove(&gone).expect("remove");
            for &g in &gone {
                active[g] = false;
            }
            assert_eq!(tr.len(), 40 - gone.len());
        }
        if k == 10 {
            let new = tr.add(30).expect("add 30");
            for &s in &new {
                assert!(!active[s], "slot {s} handed out twice");
                start[s] = k;
                active[s] = true;
            }
        }
        step_all(&mut tr, &z, k, &active);
    }
    let got = tr.state().expect("state");
    for b in 0..cap {
        if !active[b] {
            assert!(got.mean_at(b, 0)[0].is_nan(), "free slot {b} must read NaN");
            continue;
        }
        let want = last_of(&m, &slice(&z, b, start[b], t));
        let one = kestrel::Estimates {
            tracks: 1,
            steps: 1,
            nx: 4,
            mean: got.mean_at(b, 0).to_vec(),
            cov: got.cov_at(b, 0).to_vec(),
            loglik: Some(vec![got.loglik.as_ref().expect("totals")[b]]),
        };
        assert_close(
            &format!("target in slot {b} (from step {})", start[b]),
            &one,
            &want,
            1e-4,
        );
    }
    assert!(tr.remove(&[cap + 5]).is_err());
    assert!(tr.add(cap).is_err(), "adding past capacity must fail");
}
