//! Large outputs are copied from the device straight into the caller's memory (the
//! destination page-locked piece by piece), small ones through staging buffers. Tracks
//! are independent and every path runs the same kernels, so the tracks of a large batch
//! must equal, bit for bit, the same tracks filtered as a small batch; and no element of
//! the large result may be left unwritten. Skips without a GPU.

mod gpu_common;

use gpu_common::*;
use kestrel::kalman::cuda::{self, CudaOptions};
use kestrel::{FilterOptions, Measurements};

#[test]
fn large_direct_copies_equal_small_staged_ones() {
    if !gpu_or_skip("large_direct_copies_equal_small_staged_ones") {
        return;
    }
    let m = random_model(4, 2, 21);
    // 1.9 GB of covariances and 0.5 GB of means: far above the direct-copy threshold,
    // cut into many registered pieces plus an unaligned head and tail.
    let (b, t) = (300_001usize, 100usize);
    let base = random_measurements::<f32>(&m, 1000, t, 3, 0.1);
    let per = t * base.ny();
    let mut data = Vec::with_capacity(b * per);
    while data.len() < b * per {
        let take = (b * per - data.len()).min(base.data().len());
        data.extend_from_slice(&base.data()[..take]);
    }
    let z = Measurements::new(b, t, base.ny(), data).expect("measurements");
    let opts = CudaOptions::default().with_poison(true);
    let fo = FilterOptions::default();
    let big = cuda::filter_with(0, &m, &z, &fo, &opts)
        .expect("large batch")
        .filtered;
    // No element left as the host allocator's zero: every variance is positive.
    let nx = 4;
    for (i, c) in big.cov().chunks(nx * nx).enumerate() {
        for d in 0..nx {
            assert!(
                c[d * nx + d] > 0.0,
                "variance {d} of track-step {i} is {}",
                c[d * nx + d]
            );
        }
    }
    assert!(
        big.mean().iter().all(|v| v.is_finite()),
        "every mean written"
    );
    // The first, a middle and the last 1000 tracks as small batches.
    for first in [0, 150_000, b - 1000] {
        let part = Measurements::new(
            1000,
            t,
            z.ny(),
            z.data()[first * per..(first + 1000) * per].to_vec(),
        )
        .expect("part");
        let small = cuda::filter_with(0, &m, &part, &fo, &opts)
            .expect("small batch")
            .filtered;
        let (mx, cx) = (t * nx, t * nx * nx);
        assert_eq!(
            small.mean(),
            &big.mean()[first * mx..(first + 1000) * mx],
            "means of tracks {first}.."
        );
        assert_eq!(
            small.cov(),
            &big.cov()[first * cx..(first + 1000) * cx],
            "covariances of tracks {first}.."
        );
        assert_eq!(
            small.loglik().expect("loglik"),
            &big.loglik().expect("loglik")[first * t..(first + 1000) * t],
            "log-likelihoods of tracks {first}.."
        );
    }
}
