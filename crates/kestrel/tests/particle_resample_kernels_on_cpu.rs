//! The GPU resamplers of `particle/kernels/resample.cu` (multinomial, systematic:grid,
//! stratified:grid, subsets:S), compiled as plain C++ and run on the CPU (a block's
//! threads at a barrier, particle_emulation/shim.h), against their CPU references on
//! random weights: from the same cumulative weights and the same random stream they pick
//! the same ancestors, slot for slot (the design allows exactness: every position is the
//! same f64 expression in the same order). The grid selections also equal the searches of
//! systematic and stratified resampling. Weights: random, heavy-tailed, with runs of
//! zeros, one particle holding almost everything, and a single particle; sizes across the
//! kernels' blocks and the multinomial's chunks. Skips with a printed reason when there
//! is no C++20 compiler.

mod emulation;

use emulation::*;
use kestrel::particle::philox::key_of;
use kestrel::particle::resample::{cumulative_weights, resample, Draws, Resampler, Scratch};
use kestrel::particle::{cuda::source, pf_model_from_toml};
use rand::{Rng, SeedableRng};

const SHIM: &str = include_str!("particle_emulation/shim.h");
const HARNESS: &str = include_str!("particle_emulation/resample_harness.inc");
const BLOCK: u32 = 32;
const FLAGS: &[&str] = &["-std=c++20", "-O2", "-pthread", "-ffp-contract=off"];

fn compiler() -> Option<String> {
    compiler_for(&FLAGS[..1], "#include <barrier>\nint main() {}\n")
}

/// Weights of pattern `p` for `n` particles.
fn weights(rng: &mut impl Rng, n: usize, p: usize) -> Vec<f64> {
    (0..n)
        .map(|i| match p {
            0 => rng.gen_range(0.0..1.0),
            1 => (rng.gen_range(-3.0f64..3.0) * 3.0).exp(),
            2 => {
                if (i / 7) % 3 == 1 || i == n - 1 {
                    0.0
                } else {
                    rng.gen_range(0.1..1.0)
                }
            }
            _ => {
                if i == n / 3 {
                    1.0
                } else {
                    rng.gen_range(0.0..1e-9)
                }
            }
        })
        .collect()
}

fn code(r: Resampler) -> (u32, u32) {
    match r {
        Resampler::SystematicGrid => (4, 0),
        Resampler::StratifiedGrid => (5, 0),
        Resampler::Multinomial => (6, 0),
        Resampler::Subsets(k) => (7, k),
        _ => unreachable!("not a resample.cu scheme"),
    }
}

#[test]
fn resample_kernels_equal_their_cpu_references() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++20 compiler with <barrier>");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = pf_model_from_toml(
        "[model]\nkind = \"stochastic-volatility\"\nmu = 0.0\nphi = 0.9\nsigma = 0.5\n",
        std::path::Path::new("."),
    )
    .unwrap();
    let src = format!(
        "{SHIM}\n{}\n{HARNESS}",
        source::<f64>(&model, BLOCK).unwrap()
    );
    let exe = compile(&cxx, dir.path(), "pf_resample", &src, FLAGS);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3804);
    let schemes = [
        Resampler::Multinomial,
        Resampler::SystematicGrid,
        Resampler::StratifiedGrid,
        Resampler::Subsets(1),
        Resampler::Subsets(5),
        Resampler::Subsets(64),
    ];
    let mut checked = 0;
    for (ci, &n) in [1usize, 2, 7, 33, 1000, 5000].iter().enumerate() {
        for p in 0..4 {
            let w = weights(&mut rng, n, p);
            if w.iter().all(|&x| x == 0.0) {
                continue;
            }
            let (cdf, total) = cumulative_weights(&w);
            for &scheme in &schemes {
                let seed: u64 = rng.gen();
                let key = key_of(seed);
                let kr: u32 = rng.gen_range(0..1000);
                let draws = Draws {
                    key,
                    filter: 0,
                    step: kr,
                };
                let mut want = vec![0u32; n];
                resample(scheme, &w, draws, &mut want, &mut Scratch::default(), false).unwrap();
                let (s, k) = code(scheme);
                let mut input = Vec::new();
                for v in [s, n as u32, kr, key[0], key[1], k] {
                    input.extend(v.to_le_bytes());
                }
                input.extend(total.to_le_bytes());
                cdf.iter().for_each(|c| input.extend(c.to_le_bytes()));
                let out = run_piped(&exe, input, &format!("{scheme} n={n}"));
                let got: Vec<u32> = out
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                assert_eq!(got.len(), n);
                let what = format!("{scheme}, {n} particles, weights {p}, case {ci}");
                for (j, (&g, &x)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g, x, "{what}: slot {j}");
                }
                // Grid selection = the search, slot for slot.
                let search = match scheme {
                    Resampler::SystematicGrid => Some(Resampler::Systematic),
                    Resampler::StratifiedGrid => Some(Resampler::Stratified),
                    _ => None,
                };
                if let Some(sc) = search {
                    let mut s = vec![0u32; n];
                    resample(sc, &w, draws, &mut s, &mut Scratch::default(), false).unwrap();
                    assert_eq!(got, s, "{what}: the grid against the search");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100);
}
