//! The particle filter's CUDA kernels (`particle/kernels/*`), compiled as plain C++ by the
//! host compiler and run on the CPU (each block as PF_BLOCK threads meeting at a barrier
//! for `__syncthreads`, see particle_emulation/shim.h), against the CPU reference:
//! the same Philox words and Gaussian draws, and in f64 the same filter to rounding, on
//! fresh random measurements with every output starting as NaN. A resampling choice
//! flipped by rounding (the device sums in another order) sends a filter its own way from
//! then on; the tests count such filters. Skips with a printed reason when there is no
//! C++ compiler. The device's own compiler and hardware are checked by
//! tests/particle_gpu.rs on the GPU.

mod emulation;

use emulation::*;
use kestrel::particle::philox::{key_of, Normals, Purpose};
use kestrel::particle::{
    cuda::source, particle_filter_cpu, pf_model_from_toml, PfModel, PfOptions, Resampler,
};
use kestrel::{Measurements, Real};
use std::path::{Path, PathBuf};
use std::process::Command;

const SHIM: &str = include_str!("particle_emulation/shim.h");
const HARNESS: &str = include_str!("particle_emulation/harness.inc");
const BLOCK: u32 = 32;
const FLAGS: &[&str] = &["-std=c++20", "-O2", "-pthread", "-ffp-contract=off"];

/// The host compiler, if it has C++20's `<barrier>` (the shim's `__syncthreads`).
fn compiler() -> Option<String> {
    compiler_for(&FLAGS[..1], "#include <barrier>\nint main() {}\n")
}

/// Compiles the kernels for `model` in precision `T` with the harness; the executable.
fn build<T: Real>(cxx: &str, model: &PfModel, dir: &Path) -> PathBuf {
    build_with::<T>(cxx, model, dir, "")
}

/// [`build`] with `defines` ahead of the kernels (to shrink their tiles).
fn build_with<T: Real>(cxx: &str, model: &PfModel, dir: &Path, defines: &str) -> PathBuf {
    let src = format!(
        "{SHIM}\n{defines}\n{}\n{HARNESS}",
        source::<T>(model, BLOCK).unwrap()
    );
    // One executable per set of defines (a shared name would leave the last one built).
    let tag: u64 = defines.bytes().fold(0xcbf2_9ce4_8422_2325, |h, c| {
        (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
    });
    let name = format!("pf_{}_{tag:016x}", T::NAME);
    compile(cxx, dir, &name, &src, FLAGS)
}

struct DeviceRun<T> {
    mean: Vec<T>,
    cov: Vec<T>,
    loglik: Vec<T>,
    ess: Vec<T>,
    fail: Vec<u32>,
}

fn run_device<T: Real>(
    exe: &Path,
    dir: &Path,
    z: &Measurements<T>,
    opts: &PfOptions,
    nx: usize,
    per: u32,
) -> DeviceRun<T> {
    let (scheme, steps_b) = match opts.resampler {
        Resampler::Systematic => (0u32, 0u32),
        Resampler::Stratified => (1, 0),
        Resampler::Metropolis(b) => (2, b),
        Resampler::Rejection => (3, 0),
        other => panic!("{other} is not on the GPU"),
    };
    let key = key_of(opts.seed);
    let mut input = Vec::new();
    for v in [
        z.tracks() as u32,
        z.steps() as u32,
        opts.particles as u32,
        scheme,
        steps_b,
        per,
        key[0],
        key[1],
        opts.track_offset,
    ] {
        input.extend(v.to_le_bytes());
    }
    input.extend(opts.ess_threshold.to_le_bytes());
    input.extend(bytes(z.data()));
    let (fin, fout) = (dir.join("in.bin"), dir.join("out.bin"));
    std::fs::write(&fin, input).unwrap();
    let st = Command::new(exe)
        .arg("filter")
        .arg(&fin)
        .arg(&fout)
        .status()
        .unwrap();
    assert!(st.success());
    let out = std::fs::read(&fout).unwrap();
    let s = std::mem::size_of::<T>();
    let (b, t) = (z.tracks(), z.steps());
    let sizes = [b * t * nx, b * t * nx * nx, b * t, b * t];
    let mut o = 0;
    let mut parts = Vec::new();
    for n in sizes {
        parts.push(reals::<T>(&out[o..o + n * s]));
        o += n * s;
    }
    let fail = out[o..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let ess = parts.pop().unwrap();
    let loglik = parts.pop().unwrap();
    let cov = parts.pop().unwrap();
    let mean = parts.pop().unwrap();
    DeviceRun {
        mean,
        cov,
        loglik,
        ess,
        fail,
    }
}

const RANGE: &str = r#"
[model]
kind = "range-only"
dt = 1.0
q = 0.05
sensors = [[0.0, 0.0], [150.0, 40.0]]
r = 1.0
[prior]
x0 = [20.0, 1.0, 100.0, -0.3]
p0 = 4.0
"#;

#[test]
fn philox_and_gaussians_are_the_cpu_ones() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    for f32_ in [false, true] {
        let exe = if f32_ {
            build::<f32>(&cxx, &model, dir.path())
        } else {
            build::<f64>(&cxx, &model, dir.path())
        };
        let key = key_of(0xDEAD_BEEF_0123_4567);
        let cells: Vec<[u32; 3]> = (0..500u32).map(|c| [c * 7919, c % 13, c / 3]).collect();
        let mut input = Vec::new();
        for v in [cells.len() as u32, key[0], key[1]] {
            input.extend(v.to_le_bytes());
        }
        for c in &cells {
            for v in c {
                input.extend(v.to_le_bytes());
            }
        }
        let (fin, fout) = (dir.path().join("n.bin"), dir.path().join("n.out"));
        std::fs::write(&fin, input).unwrap();
        assert!(Command::new(&exe)
            .arg("normals")
            .arg(&fin)
            .arg(&fout)
            .status()
            .unwrap()
            .success());
        let out = std::fs::read(&fout).unwrap();
        let check = |dev: Vec<f64>, host: Vec<f64>, tol: f64| {
            for (j, (d, h)) in dev.iter().zip(&host).enumerate() {
                assert!(
                    (d - h).abs() <= tol * (1.0 + h.abs()),
                    "draw {j}: device {d}, host {h}"
                );
            }
        };
        if f32_ {
            let dev: Vec<f64> = reals::<f32>(&out).iter().map(|v| *v as f64).collect();
            let mut host = Vec::new();
            for c in &cells {
                let mut n = Normals::<f32>::new(key, c[0], c[1], c[2], Purpose::Propagate);
                host.extend((0..8).map(|_| n.draw() as f64));
            }
            check(dev, host, 1e-6);
        } else {
            let dev: Vec<f64> = reals::<f64>(&out);
            let mut host = Vec::new();
            for c in &cells {
                let mut n = Normals::<f64>::new(key, c[0], c[1], c[2], Purpose::Propagate);
                host.extend((0..8).map(|_| n.draw()));
            }
            check(dev, host, 1e-15);
        }
    }
}

/// Filters whose device run leaves the CPU's (a flipped resampling choice); the rest
/// must agree to `tol` (relative to the posterior standard deviation) at every step.
fn compare<T: Real>(
    cpu: &kestrel::particle::PfOutput<T>,
    dev: &DeviceRun<T>,
    nx: usize,
    tol: f64,
) -> usize {
    let est = &cpu.estimates;
    let (b, t) = (est.tracks(), est.steps());
    assert!(dev.fail.iter().all(|&f| f == 0));
    let all = dev
        .mean
        .iter()
        .chain(&dev.cov)
        .chain(&dev.loglik)
        .chain(&dev.ess);
    assert!(
        all.clone().all(|v| v.is_finite_value()),
        "an output was not written"
    );
    let mut flipped = 0;
    for tr in 0..b {
        let mut same = true;
        for k in 0..t {
            let o = tr * t + k;
            for a in 0..nx {
                let sd = est.cov_at(tr, k)[a * nx + a].to_f64().sqrt();
                let d = (dev.mean[o * nx + a].to_f64() - est.mean_at(tr, k)[a].to_f64()).abs();
                same &= d <= tol * sd;
                let dc = (dev.cov[(o * nx + a) * nx + a].to_f64()
                    - est.cov_at(tr, k)[a * nx + a].to_f64())
                .abs();
                same &= dc <= tol * sd * sd;
            }
            let l = est.loglik().unwrap()[o].to_f64();
            same &= (dev.loglik[o].to_f64() - l).abs() <= tol * (1.0 + l.abs());
            same &= (dev.ess[o].to_f64() - cpu.ess[o].to_f64()).abs() <= tol * cpu.ess[o].to_f64();
        }
        if !same {
            flipped += 1;
        }
    }
    flipped
}

#[test]
fn the_filter_kernels_match_the_cpu_filter() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let (_, z) = kestrel::particle::simulate(&model, 4, 6, 5, 0.1).unwrap();
    // The kernels as built for the GPU, and with limits small enough that 100 particles
    // take the long paths: the ancestors marked over ranges of up to 128 particles, or
    // searched in global memory where a block's range passes 8; several tiles of the
    // cumulative sum a chunk (2 x 32 weights); two blocks of ancestors (2 x 32 slots
    // each).
    let exes = [
        build::<f64>(&cxx, &model, dir.path()),
        build_with::<f64>(
            &cxx,
            &model,
            dir.path(),
            "#define PF_SPAN 128\n#define PF_ITEMS 2\n#define PF_AITEMS 2\n",
        ),
        build_with::<f64>(
            &cxx,
            &model,
            dir.path(),
            "#define PF_SPAN 8\n#define PF_ITEMS 2\n#define PF_AITEMS 2\n",
        ),
    ];
    // 100 particles in blocks of 32 (the last one partial); chunks of 1, 2 and 3 blocks.
    for (exe, per) in exes.iter().flat_map(|e| [(e, 1), (e, 2), (e, 3)]) {
        for (resampler, ess) in [
            (Resampler::Systematic, 1.0),
            (Resampler::Stratified, 0.5),
            (Resampler::Metropolis(12), 1.0),
            (Resampler::Rejection, 0.8),
        ] {
            let mut opts = PfOptions::new(100);
            opts.resampler = resampler;
            opts.ess_threshold = ess;
            opts.seed = 21;
            let cpu = particle_filter_cpu(&model, &z, &opts).unwrap();
            let dev = run_device(exe, dir.path(), &z, &opts, 4, per);
            let flipped = compare(&cpu, &dev, 4, 1e-9);
            eprintln!(
                "{resampler}, chunks of {per}: {flipped} of 4 filters flipped a resampling choice"
            );
            assert!(flipped <= 1, "{resampler}: {flipped} of 4 filters differ");
        }
    }
    // A track offset (a chunk of a larger batch): the kernels draw the streams of the
    // offset tracks, as the CPU filter does, and not those of tracks 0..B.
    for resampler in [Resampler::Systematic, Resampler::Metropolis(12)] {
        let mut opts = PfOptions::new(100);
        opts.resampler = resampler;
        opts.ess_threshold = 1.0;
        opts.seed = 21;
        opts.track_offset = 7;
        let cpu = particle_filter_cpu(&model, &z, &opts).unwrap();
        let dev = run_device(&exes[0], dir.path(), &z, &opts, 4, 2);
        let flipped = compare(&cpu, &dev, 4, 1e-9);
        assert!(
            flipped <= 1,
            "{resampler}, offset 7: {flipped} of 4 filters differ"
        );
        let unshifted = particle_filter_cpu(&model, &z, &opts.with_track_offset(0)).unwrap();
        assert_ne!(
            unshifted.estimates.mean(),
            cpu.estimates.mean(),
            "the offset changes the draws"
        );
    }
}

#[test]
fn marked_ancestors_are_the_searched_ones() {
    // The ancestors of systematic and stratified resampling marked over each block's range
    // of particles (the default) against every slot searched in the cumulative weights
    // (PF_SPAN 0): the same ancestors, so the same outputs to the bit. Sharp measurements
    // (r 0.05) put the weight on few particles, leaving long runs of zero weight and
    // slots past the end of the cumulative sum by rounding.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sharp = RANGE.replace("r = 1.0", "r = 0.05");
    for text in [RANGE, sharp.as_str()] {
        let model = pf_model_from_toml(text, Path::new("m.toml")).unwrap();
        let (_, z) = kestrel::particle::simulate(&model, 3, 8, 9, 0.0).unwrap();
        let small = "#define PF_ITEMS 2\n#define PF_AITEMS 2\n";
        let marked = build_with::<f64>(&cxx, &model, dir.path(), small);
        let searched = build_with::<f64>(
            &cxx,
            &model,
            dir.path(),
            &format!("#define PF_SPAN 0\n{small}"),
        );
        for (resampler, ess) in [(Resampler::Systematic, 1.0), (Resampler::Stratified, 0.7)] {
            for (n, per) in [(100, 1), (100, 3), (301, 2)] {
                let mut opts = PfOptions::new(n);
                opts.resampler = resampler;
                opts.ess_threshold = ess;
                opts.seed = 5;
                let a = run_device(&marked, dir.path(), &z, &opts, 4, per);
                let b = run_device(&searched, dir.path(), &z, &opts, 4, per);
                let bits = |r: &DeviceRun<f64>| {
                    r.mean
                        .iter()
                        .chain(&r.cov)
                        .chain(&r.loglik)
                        .chain(&r.ess)
                        .map(|v| v.to_bits())
                        .collect::<Vec<_>>()
                };
                assert!(
                    a.mean.iter().all(|v| v.is_finite()),
                    "an output was not written"
                );
                assert_eq!(bits(&a), bits(&b), "{resampler}, N {n}, chunks of {per}");
                assert_eq!(a.fail, b.fail);
            }
        }
    }
}

/// `pf_ancestors` of one filter with cumulative weights `cdf` and total `wtot`.
fn ancestors(exe: &Path, dir: &Path, cdf: &[f64], wtot: f64, scheme: u32, ahead: bool) -> Vec<u32> {
    let mut input = Vec::new();
    for v in [cdf.len() as u32, scheme, 4, 77, 91, 2, ahead as u32] {
        input.extend(v.to_le_bytes());
    }
    input.extend(wtot.to_le_bytes());
    input.extend(bytes(cdf));
    let (fin, fout) = (dir.join("a.bin"), dir.join("a.out"));
    std::fs::write(&fin, input).unwrap();
    let st = Command::new(exe)
        .arg("ancestors")
        .arg(&fin)
        .arg(&fout)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(&fout)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn marked_ancestors_cover_the_edge_cases_of_the_search() {
    // Cumulative weights made to reach the edges: long runs of zero weight, the weight on
    // one particle, totals above the sum's end (slots past it, by rounding) with the last
    // particle of positive weight owning no slot of its own, whole blocks of slots past
    // the end, and all weights zero but the first. The marked ancestors against the searched ones (PF_SPAN 0), both ways of
    // finding the blocks' ranges.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let small = "#define PF_AITEMS 2\n";
    let marked = build_with::<f64>(&cxx, &model, dir.path(), small);
    let searched = build_with::<f64>(
        &cxx,
        &model,
        dir.path(),
        &format!("#define PF_SPAN 0\n{small}"),
    );
    let mut next = {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    };
    let cum = |w: &[f64]| {
        let mut s = 0.0;
        w.iter()
            .map(|v| {
                s += v;
                s
            })
            .collect::<Vec<f64>>()
    };
    let mut cases: Vec<(Vec<f64>, f64)> = Vec::new();
    for n in [7usize, 100, 301] {
        // Random weights, a third of them zero, in runs.
        let w: Vec<f64> = (0..n)
            .map(|i| if (i / 5) % 3 == 1 { 0.0 } else { next() })
            .collect();
        let c = cum(&w);
        let t = c[n - 1];
        cases.push((c.clone(), t));
        // The total a little above the sum's end: the last slots fall past it.
        cases.push((c.clone(), t * (1.0 + 1e-3)));
        // The weight on one particle.
        let mut one = vec![0.0; n];
        one[n / 3] = 1.0;
        cases.push((cum(&one), 1.0));
        cases.push((cum(&one), 1.0 + 1e-9));
        // The last positive weight too small to own a slot, the tail past the end.
        let mut w2 = w.clone();
        for v in &mut w2[n - n / 4..] {
            *v = 0.0;
        }
        w2[n - n / 4 - 1] = 1e-12;
        let c2 = cum(&w2);
        cases.push((c2.clone(), c2[n - 1] * (1.0 + 1e-2)));
        // Whole blocks of slots past the end.
        cases.push((c2.clone(), c2[n - 1] * 1.5));
        // Only the first weight.
        let mut first = vec![0.0; n];
        first[0] = 0.25;
        cases.push((cum(&first), 0.25 * (1.0 + 1e-6)));
        cases.push((cum(&first), 0.5));
    }
    for (c, wtot) in &cases {
        for scheme in [0u32, 1] {
            for ahead in [false, true] {
                let a = ancestors(&marked, dir.path(), c, *wtot, scheme, ahead);
                let b = ancestors(&searched, dir.path(), c, *wtot, scheme, ahead);
                assert!(
                    a.iter().all(|&v| (v as usize) < c.len()),
                    "a slot was not written"
                );
                assert_eq!(
                    a,
                    b,
                    "N {}, total {wtot}, scheme {scheme}, ahead {ahead}",
                    c.len()
                );
            }
        }
    }
}

#[test]
fn linear_and_f32_kernels_match_the_cpu_filter() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let lin = pf_model_from_toml(
        "[model]\nkind = \"cv\"\ndims = 2\nq = 0.3\nr = 2.0\n",
        Path::new("m.toml"),
    )
    .unwrap();
    let (_, mut z) = kestrel::particle::simulate(&lin, 4, 6, 8, 0.0).unwrap();
    z.data_mut()[5] = f64::NAN; // track 0, step 2: missing
    let exe = build::<f64>(&cxx, &lin, dir.path());
    let mut opts = PfOptions::new(100);
    opts.seed = 3;
    let cpu = particle_filter_cpu(&lin, &z, &opts).unwrap();
    let dev = run_device(&exe, dir.path(), &z, &opts, 4, 2);
    assert_eq!(dev.loglik[2], 0.0);
    assert!(compare(&cpu, &dev, 4, 1e-9) <= 1);
    // f32: the same draws to rounding; agreement to f32's precision.
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let (_, z) = kestrel::particle::simulate(&model, 4, 6, 5, 0.0).unwrap();
    let z32: Measurements<f32> = z.cast();
    let exe = build::<f32>(&cxx, &model, dir.path());
    let opts = PfOptions::new(100);
    let cpu = particle_filter_cpu(&model, &z32, &opts).unwrap();
    let dev = run_device(&exe, dir.path(), &z32, &opts, 4, 4);
    let flipped = compare(&cpu, &dev, 4, 2e-3);
    eprintln!("f32: {flipped} of 4 filters flipped a resampling choice");
    assert!(flipped <= 1);
}
