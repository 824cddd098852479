use super::sums::*;

/// Weights in [0, 1] (some zero) and particles around a point, from a fixed seed.
fn chunk(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let w = (0..n)
        .map(|_| {
            let u = next();
            if u < 0.1 {
                0.0
            } else {
                u
            }
        })
        .collect();
    let xs = (0..4 * n).map(|_| 100.0 * next() - 50.0).collect();
    (w, xs)
}

#[test]
fn four_component_sums_are_the_plain_sums_and_the_same_bits_in_avx2() {
    for n in [1usize, 3, 4, 7, 64, 1001, 2048] {
        let (w, xs) = chunk(n, n as u64);
        let c0 = [xs[0], xs[1], xs[2], xs[3]];
        let (mut p, mut cdf) = (vec![0.0; 16], vec![0.0; n]);
        sums4_lanes(&w, &xs, &c0, &mut p, &mut cdf);
        // Against the sums formed one particle after another, to rounding: two sums
        // of the same n terms in different orders differ by at most about
        // 2 n eps sum |term| (`a`: the sums of the terms' magnitudes).
        let (mut q, mut a) = ([0.0f64; 16], [0.0f64; 16]);
        let mut run = 0.0;
        for (j, &v) in w.iter().enumerate() {
            run += v;
            assert_eq!(cdf[j], run, "running sum {j} of {n}");
            let d = [0, 1, 2, 3].map(|i| xs[4 * j + i] - c0[i]);
            let mut terms = [0.0f64; 16];
            terms[0] = v;
            terms[1] = v * v;
            let mut t = 6;
            for i in 0..4 {
                terms[2 + i] = v * d[i];
                for k in i..4 {
                    terms[t] = v * d[i] * d[k];
                    t += 1;
                }
            }
            for t in 0..16 {
                q[t] += terms[t];
                a[t] += terms[t].abs();
            }
        }
        for (t, (&got, &want)) in p.iter().zip(&q).enumerate() {
            let tol = 2.0 * n as f64 * f64::EPSILON * a[t];
            assert!(
                (got - want).abs() <= tol,
                "sum {t} of {n}: {got} vs {want} (tolerance {tol})"
            );
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let (mut pv, mut cv) = (vec![0.0; 16], vec![0.0; n]);
            // SAFETY: the processor has AVX2 (checked above).
            unsafe { sums4_avx2(&w, &xs, &c0, &mut pv, &mut cv) };
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&pv), bits(&p), "AVX2 sums of {n}");
            assert_eq!(bits(&cv), bits(&cdf), "AVX2 running sums of {n}");
        }
    }
}
