//! A dim target that the single-frame detector misses is found by track-before-detect.

use kestrel::tbd::eval::{pd_vs_snr, Scenario};
use kestrel::tbd::{Motion, Noise, Params};

#[test]
fn dim_target_missed_by_one_frame_is_found_by_tbd() {
    // Nine integer vectors (|vx|, |vy| <= 1), SNR 3 dB (amplitude 1.41 in unit noise),
    // Pfa 1e-4 per pixel: one frame sees about 1 target in 50, the recursion nearly all.
    let motions: Vec<Motion> = (-1..=1)
        .flat_map(|vy| (-1..=1).map(move |vx| Motion::new(vx as f32, vy as f32)))
        .collect();
    let s = Scenario {
        h: 160,
        w: 160,
        frames: 100,
        targets: 24,
        params: Params {
            motions,
            alpha: 0.1,
            decimation: 1,
            transition: None,
        },
        noise: Noise::UNIT_GAUSSIAN,
        seed: 5,
        turn_every: 0,
        switching: None,
    };
    let pts = pd_vs_snr(&s, 1e-4, &[3.0]).unwrap();
    let p = pts[0];
    eprintln!("{p:?}");
    assert!(p.trials >= 1500, "{p:?}");
    assert!(
        p.pd_single < 0.2,
        "the single-frame detector should miss it: {p:?}"
    );
    assert!(p.pd_tbd >= 0.9, "track-before-detect should find it: {p:?}");
}
