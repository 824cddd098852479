//! Every resampler's offspring counts are unbiased, `E[o_i] = N w_i`: Pearson's
//! chi-square test on the counts summed over many independent resamplings (exact for
//! multinomial and rejection, whose draws are independent; conservative for the
//! low-variance schemes). Metropolis is unbiased only as its number of steps grows: it
//! passes with B from Murray, Lee & Jacob's rule and fails with B = 1. At 10^7 particles
//! in f32 the prefix-sum schemes place every block of particles' offspring within the
//! scheme's own rounding (+-2), which a running f32 sum cannot.

use kestrel::particle::philox::{counter, key_of, philox4x32_10, uniform_f64, Purpose};
use kestrel::particle::resample::{
    offspring, resample, systematic_ancestors, systematic_uniform, ChunkedCdf, Draws, Resampler,
    Scratch, CHUNK,
};

/// Upper 0.999 quantile of chi-square with `k` degrees of freedom (Wilson-Hilferty).
fn chi2_999(k: f64) -> f64 {
    let z = 3.090_232;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Weights in (0, 1) with a few exact zeros, from the generator itself.
fn weights(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if i % 17 == 5 {
                0.0
            } else {
                uniform_f64(
                    philox4x32_10(counter(i as u32, 0, 0, Purpose::SimState, 0), key_of(seed))[0],
                )
            }
        })
        .collect()
}

/// Offspring counts summed over `reps` resamplings (step index = repetition).
fn summed_counts(scheme: Resampler, w: &[f64], reps: u32, par: bool) -> Vec<f64> {
    let n = w.len();
    let mut anc = vec![0u32; n];
    let mut scratch = Scratch::default();
    let mut total = vec![0.0; n];
    for r in 0..reps {
        let d = Draws {
            key: key_of(99),
            filter: 3,
            step: r,
        };
        resample(scheme, w, d, &mut anc, &mut scratch, par).unwrap();
        for (t, o) in total.iter_mut().zip(offspring(&anc, n)) {
            *t += o as f64;
        }
    }
    total
}

/// Pearson's statistic of summed counts against `reps N w_i / W`, and its degrees of
/// freedom (the particles of positive weight, less one). A zero-weight particle with
/// offspring is an infinite statistic.
fn pearson(counts: &[f64], w: &[f64], reps: u32) -> (f64, f64) {
    let n = w.len() as f64;
    let total: f64 = w.iter().sum();
    let mut x = 0.0;
    let mut k = 0.0;
    for (&o, &wi) in counts.iter().zip(w) {
        let e = reps as f64 * n * wi / total;
        if e == 0.0 {
            if o > 0.0 {
                return (f64::INFINITY, 1.0);
            }
            continue;
        }
        x += (o - e) * (o - e) / e;
        k += 1.0;
    }
    (x, k - 1.0)
}

#[test]
fn every_resampler_is_unbiased() {
    let w = weights(60, 1);
    let reps = 3000;
    // Murray et al.'s rule with eps = 1e-6: B >= ln(eps) / ln(1 - mean(w) / max(w)).
    let wmax = w.iter().cloned().fold(0.0, f64::max);
    let beta = w.iter().sum::<f64>() / w.len() as f64 / wmax;
    let b = ((1e-6f64).ln() / (1.0 - beta).ln()).ceil() as u32;
    let mut schemes = Resampler::ALL.to_vec();
    schemes.push(Resampler::Metropolis(b));
    for scheme in schemes {
        if scheme == Resampler::Metropolis(kestrel::particle::resample::DEFAULT_METROPOLIS_STEPS)
            && b > kestrel::particle::resample::DEFAULT_METROPOLIS_STEPS
        {
            continue;
        }
        let counts = summed_counts(scheme, &w, reps, false);
        let (x, k) = pearson(&counts, &w, reps);
        assert!(
            x < chi2_999(k),
            "{scheme}: chi-square {x:.1} with {k} dof (limit {:.1})",
            chi2_999(k)
        );
        // The chunked parallel path draws the same ancestors.
        assert_eq!(
            summed_counts(scheme, &w, 50, true),
            summed_counts(scheme, &w, 50, false)
        );
    }
}

#[test]
fn the_test_has_power() {
    // Metropolis with one step is biased towards the starting index: detected.
    let w = weights(60, 2);
    let reps = 3000;
    let (x, k) = pearson(
        &summed_counts(Resampler::Metropolis(1), &w, reps, false),
        &w,
        reps,
    );
    assert!(
        x > chi2_999(k),
        "metropolis:1 passed: {x:.1} <= {:.1}",
        chi2_999(k)
    );
    // Systematic counts tested against weights 20% off at every fourth particle.
    let counts = summed_counts(Resampler::Systematic, &w, reps, false);
    let wrong: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 4 == 0 { v * 1.2 } else { *v })
        .collect();
    let (x, k) = pearson(&counts, &wrong, reps);
    assert!(x > chi2_999(k), "a 20% error passed: {x:.1}");
}

#[test]
fn parallel_and_sequential_paths_agree() {
    // Above one chunk, so that the chunked cumulative sum and walks are exercised.
    let w = weights(100_000, 3);
    let d = Draws {
        key: key_of(5),
        filter: 0,
        step: 1,
    };
    for scheme in Resampler::ALL {
        let (mut a, mut b) = (vec![0u32; w.len()], vec![0u32; w.len()]);
        let mut s = Scratch::default();
        resample(scheme, &w, d, &mut a, &mut s, false).unwrap();
        resample(scheme, &w, d, &mut b, &mut s, true).unwrap();
        assert_eq!(a, b, "{scheme}");
        assert!(
            a.iter().all(|&i| w[i as usize] > 0.0),
            "{scheme} chose a zero weight"
        );
    }
}

/// The running sums within chunks and the chunk offsets of `w`, as the filter forms them.
fn chunked_cdf(w: &[f64]) -> (Vec<f64>, Vec<f64>, f64) {
    let mut local = vec![0.0; w.len()];
    let mut offsets = vec![];
    let mut off = 0.0f64;
    for (wc, lc) in w.chunks(CHUNK).zip(local.chunks_mut(CHUNK)) {
        let mut acc = 0.0f64;
        for (v, o) in wc.iter().zip(lc.iter_mut()) {
            acc += v;
            *o = acc;
        }
        offsets.push(off);
        off += acc;
    }
    (local, offsets, off)
}

#[test]
fn chunked_systematic_ancestors_are_the_resamplers_choice() {
    // The ancestors of slot ranges (as the filter's chunks take them, and odd ones)
    // over the chunked cumulative sums. Weights with zeros, with trailing zeros (positions past the
    // total land on the last positive weight), one dominant weight; N off the chunks.
    let n = 3 * CHUNK + 123;
    let mut cases = vec![weights(n, 9), weights(n, 10)];
    let mut tail = weights(n, 11);
    tail[n - 40..].iter_mut().for_each(|v| *v = 0.0);
    cases.push(tail);
    let mut spike = vec![1e-300; n];
    spike[CHUNK + 7] = 1.0;
    cases.push(spike);
    let mut s = Scratch::default();
    for (c, w) in cases.iter().enumerate() {
        for step in 0..20 {
            let d = Draws {
                key: key_of(c as u64),
                filter: 2,
                step,
            };
            let mut want = vec![0u32; n];
            resample(Resampler::Systematic, w, d, &mut want, &mut s, false).unwrap();
            let (local, offsets, total) = chunked_cdf(w);
            let ones = vec![1.0; offsets.len()];
            let cdf = ChunkedCdf {
                local: &local,
                offsets: &offsets,
                scale: &ones,
                chunk: CHUNK,
            };
            let u = systematic_uniform(d);
            let mut got = vec![u32::MAX; n];
            // Slot ranges as the filter's chunks, and odd ones.
            let mut s0 = 0usize;
            for len in [CHUNK, 1, 17, CHUNK + 5, usize::MAX] {
                let s1 = s0.saturating_add(len).min(n);
                systematic_ancestors(cdf, u, total / n as f64, s0, &mut got[s0..s1]);
                s0 = s1;
            }
            for j in 0..n {
                assert_eq!(got[j], want[j], "case {c}, step {step}, slot {j}");
            }
        }
    }
}

#[test]
fn systematic_ancestors_are_the_first_cumulative_weight_above_each_position() {
    // Chunks with their own scales (as the filter's chunks, each relative to its own
    // largest weight), small chunks, chunks of zeros and trailing zeros: every slot's
    // ancestor is the first i with C_i > (j + u) W / N, searched one slot at a time over
    // the same C_i.
    let n: usize = 9 * 300 + 77;
    let chunk: usize = 300;
    let chunks = n.div_ceil(chunk);
    for case in 0..6u64 {
        let mut local = weights(n, 20 + case);
        match case {
            1 => local[n - 500..].iter_mut().for_each(|v| *v = 0.0),
            2 => local[chunk..3 * chunk].iter_mut().for_each(|v| *v = 0.0),
            3 => {
                local.iter_mut().for_each(|v| *v = 0.0);
                local[4 * chunk + 17] = 1.0;
            }
            4 => local.iter_mut().step_by(3).for_each(|v| *v = 0.0),
            _ => {}
        }
        for lc in local.chunks_mut(chunk) {
            let mut acc = 0.0;
            for v in lc.iter_mut() {
                acc += *v;
                *v = acc;
            }
        }
        let scale: Vec<f64> = (0..chunks)
            .map(|c| {
                if c % 4 == 3 {
                    1.0
                } else {
                    0.37 + 0.9 * (c as f64).sin().abs()
                }
            })
            .collect();
        let mut offsets = vec![0.0; chunks];
        let mut off = 0.0;
        for c in 0..chunks {
            offsets[c] = off;
            off += scale[c] * local[((c + 1) * chunk).min(n) - 1];
        }
        let cdf = ChunkedCdf {
            local: &local,
            offsets: &offsets,
            scale: &scale,
            chunk,
        };
        let full: Vec<f64> = (0..n)
            .map(|i| offsets[i / chunk] + scale[i / chunk] * local[i])
            .collect();
        let last = (0..n)
            .rev()
            .find(|&i| i == 0 || full[i] > full[i - 1])
            .unwrap();
        for step in 0..10u32 {
            let u = systematic_uniform(Draws {
                key: key_of(case),
                filter: 0,
                step,
            });
            // Positions past the total too (rounding): a scale slightly above W / N.
            for scale_pos in [off / n as f64, off / n as f64 * (1.0 + 1e-3)] {
                let mut got = vec![u32::MAX; n];
                let mut s0 = 0usize;
                for len in [chunk, 1, 17, 2 * chunk + 5, usize::MAX] {
                    let s1 = s0.saturating_add(len).min(n);
                    systematic_ancestors(cdf, u, scale_pos, s0, &mut got[s0..s1]);
                    s0 = s1;
                }
                for j in 0..n {
                    let x = (j as f64 + u) * scale_pos;
                    let want = full.partition_point(|&c| c <= x);
                    let want = if want == n { last } else { want };
                    assert_eq!(got[j] as usize, want, "case {case}, step {step}, slot {j}");
                }
            }
        }
    }
}

#[test]
fn prefix_sum_schemes_stay_unbiased_at_ten_million_in_f32() {
    let n = 10_000_000usize;
    let key = key_of(11);
    // f32 weights spread over four orders of magnitude.
    let w: Vec<f32> = (0..n)
        .map(|i| {
            let u =
                uniform_f64(philox4x32_10(counter(i as u32, 0, 0, Purpose::SimState, 0), key)[0]);
            (10f64.powf(4.0 * u - 4.0)) as f32
        })
        .collect();
    eprintln!("weights ready");
    let blocks = 100;
    let per = n / blocks;
    let total: f64 = w.iter().map(|&v| v as f64).sum();
    let expected: Vec<f64> = (0..blocks)
        .map(|c| {
            w[c * per..(c + 1) * per]
                .iter()
                .map(|&v| v as f64)
                .sum::<f64>()
                * n as f64
                / total
        })
        .collect();
    let mut anc = vec![0u32; n];
    let mut s = Scratch::default();
    let d = Draws {
        key,
        filter: 0,
        step: 0,
    };
    for scheme in [
        Resampler::Systematic,
        Resampler::Stratified,
        Resampler::Multinomial,
        Resampler::Residual,
    ] {
        let t0 = std::time::Instant::now();
        resample(scheme, &w, d, &mut anc, &mut s, true).unwrap();
        eprintln!("{scheme}: {:.3} s", t0.elapsed().as_secs_f64());
        let mut got = vec![0.0f64; blocks];
        for &a in &anc {
            got[a as usize / per] += 1.0;
        }
        match scheme {
            Resampler::Systematic | Resampler::Stratified => {
                for c in 0..blocks {
                    assert!(
                        (got[c] - expected[c]).abs() <= 2.0,
                        "{scheme} block {c}: {} vs {}",
                        got[c],
                        expected[c]
                    );
                }
            }
            _ => {
                let x: f64 = got
                    .iter()
                    .zip(&expected)
                    .map(|(o, e)| (o - e) * (o - e) / e)
                    .sum();
                assert!(
                    x < chi2_999((blocks - 1) as f64),
                    "{scheme}: chi-square {x:.1}"
                );
            }
        }
    }
    // What the f64 sum prevents: a running f32 sum misplaces whole blocks' offspring.
    let mut acc = 0.0f32;
    let mut worst = 0.0f64;
    let mut exact = 0.0f64;
    for c in 0..blocks {
        for &v in &w[c * per..(c + 1) * per] {
            acc += v;
            exact += v as f64;
        }
        worst = worst.max(((acc as f64 - exact) / total * n as f64).abs());
    }
    assert!(
        worst > 2.0,
        "an f32 running sum stays within {worst} particles"
    );
}

#[test]
fn resampler_names_parse() {
    for s in [
        "systematic",
        "stratified",
        "multinomial",
        "residual",
        "rejection",
        "metropolis",
        "metropolis:7",
    ] {
        let r = Resampler::parse(s).unwrap();
        if s != "metropolis" {
            assert_eq!(r.to_string(), s);
        }
    }
    for bad in [
        "bogus",
        "metropolis:",
        "metropolis:0",
        "metropolis:x",
        "Systematic",
    ] {
        let e = Resampler::parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn grid_selection_and_subsets_are_unbiased() {
    // Pearson's test at false-alarm rate 0.001 per scheme (conservative for these
    // low-variance schemes), with a fixed seed; the grid selections also pick the
    // search's ancestors exactly, slot for slot.
    for (n, seed) in [(60, 1), (97, 4)] {
        let w = weights(n, seed);
        let reps = 3000;
        for scheme in [
            Resampler::SystematicGrid,
            Resampler::StratifiedGrid,
            Resampler::Subsets(1),
            Resampler::Subsets(4),
            Resampler::Subsets(7),
            Resampler::Subsets(n as u32),
        ] {
            let counts = summed_counts(scheme, &w, reps, false);
            let (x, k) = pearson(&counts, &w, reps);
            assert!(
                x < chi2_999(k),
                "{scheme}, {n} particles: chi-square {x:.1} with {k} dof (limit {:.1})",
                chi2_999(k)
            );
            assert_eq!(
                summed_counts(scheme, &w, 50, true),
                summed_counts(scheme, &w, 50, false)
            );
        }
        for (grid, search) in [
            (Resampler::SystematicGrid, Resampler::Systematic),
            (Resampler::StratifiedGrid, Resampler::Stratified),
        ] {
            for r in 0..200 {
                let d = Draws {
                    key: key_of(5),
                    filter: 1,
                    step: r,
                };
                let (mut a, mut b) = (vec![0u32; n], vec![0u32; n]);
                resample(grid, &w, d, &mut a, &mut Scratch::default(), false).unwrap();
                resample(search, &w, d, &mut b, &mut Scratch::default(), false).unwrap();
                assert_eq!(a, b, "{grid} against {search}, step {r}");
            }
        }
    }
}

#[test]
fn subsets_keep_most_particles_local() {
    // With weights spread evenly over the subsets, few draws cross between them: every
    // slot of subset s holds a particle of subset s, except the exchanged surplus.
    let n = 4000;
    let w = weights(n, 12);
    let k = 8;
    let d = Draws {
        key: key_of(1),
        filter: 0,
        step: 3,
    };
    let mut a = vec![0u32; n];
    resample(
        Resampler::Subsets(k),
        &w,
        d,
        &mut a,
        &mut Scratch::default(),
        false,
    )
    .unwrap();
    let sub = |i: usize| i * k as usize / n;
    let crossed = a
        .iter()
        .enumerate()
        .filter(|&(j, &i)| sub(j) != sub(i as usize))
        .count();
    assert!(
        crossed * 20 < n,
        "{crossed} of {n} slots hold another subset's particle"
    );
    assert!(a.iter().all(|&i| w[i as usize] > 0.0));
}

#[test]
fn new_resampler_names_parse() {
    for s in [
        "systematic:grid",
        "stratified:grid",
        "subsets:1",
        "subsets:64",
    ] {
        assert_eq!(Resampler::parse(s).unwrap().to_string(), s);
    }
    assert_eq!(Resampler::parse("subsets").unwrap(), Resampler::Subsets(16));
    for bad in [
        "subsets:0",
        "subsets:",
        "subsets:x",
        "subsets:70000",
        "grid",
        "systematic:",
    ] {
        let e = Resampler::parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}
