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
    // take the long paths: several tiles of the cumulative sum a chunk (2 x 32 weights),
    // two blocks of Metropolis and rejection ancestors (2 x 32 slots each); tiles of 32
    // weights whose slots pass the 64 that shared memory stages, each particle writing
    // its own or listing ranges longer than 2 slots in pieces of 3.
    let exes = [
        build::<f64>(&cxx, &model, dir.path()),
        build_with::<f64>(&cxx, &model, dir.path(), SMALL),
        build_with::<f64>(&cxx, &model, dir.path(), TINY),
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

/// Tiles of 2 x 32 weights and blocks of 2 x 32 Metropolis and rejection slots: several a
/// chunk of 100 particles.
const SMALL: &str = "#define PF_ITEMS 2\n#define PF_AITEMS 2\n";

/// Limits that send every tile of systematic and stratified resampling with uneven
/// weights past shared memory (32 weights a tile, 64 slots staged), ranges of more than 2
/// slots to pf_fill's list, in pieces of 3.
const TINY: &str =
    "#define PF_ITEMS 1\n#define PF_AITEMS 2\n#define PF_LONG 2\n#define PF_PIECE 3\n";

#[test]
fn offspring_are_the_reference_ancestors_at_every_step() {
    // Whole filters, systematic and stratified: at every step that resamples, the harness
    // poisons the slots, runs pf_offspring and pf_fill, and checks every slot against the
    // ancestors found a slot at a time from pf_cdf's cumulative weights (exit 3 on the
    // first difference). Sharp measurements (r 0.05) put the weight on few particles:
    // long runs of zero weight, particles owning many slots, slots past the end by
    // rounding.
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sharp = RANGE.replace("r = 1.0", "r = 0.05");
    for text in [RANGE, sharp.as_str()] {
        let model = pf_model_from_toml(text, Path::new("m.toml")).unwrap();
        let (_, z) = kestrel::particle::simulate(&model, 3, 8, 9, 0.0).unwrap();
        let exes = [
            build_with::<f64>(&cxx, &model, dir.path(), SMALL),
            build_with::<f64>(&cxx, &model, dir.path(), TINY),
        ];
        for exe in &exes {
            for (resampler, ess) in [(Resampler::Systematic, 1.0), (Resampler::Stratified, 0.7)] {
                for (n, per) in [(100, 1), (100, 3), (301, 2), (700, 1)] {
                    let mut opts = PfOptions::new(n);
                    opts.resampler = resampler;
                    opts.ess_threshold = ess;
                    opts.seed = 5;
                    let a = run_device(exe, dir.path(), &z, &opts, 4, per);
                    assert!(
                        a.mean.iter().all(|v| v.is_finite()),
                        "an output was not written"
                    );
                }
            }
        }
    }
}

/// pf_offspring and pf_fill for one filter (log-weights `lw`, chunks of `per` blocks
/// with coefficients `coef` and offsets `offs`, total `wtot`): the ancestors, and the
/// reference's.
#[allow(clippy::too_many_arguments)]
fn offspring(
    exe: &Path,
    dir: &Path,
    lw: &[f64],
    per: u32,
    coef: &[f64],
    offs: &[f64],
    wtot: f64,
    scheme: u32,
) -> (Vec<u32>, Vec<u32>) {
    let mut input = Vec::new();
    for v in [lw.len() as u32, per, scheme, 4, 77, 91, 2] {
        input.extend(v.to_le_bytes());
    }
    input.extend(wtot.to_le_bytes());
    input.extend(bytes(lw));
    input.extend(bytes(coef));
    input.extend(bytes(offs));
    let (fin, fout) = (dir.join("a.bin"), dir.join("a.out"));
    std::fs::write(&fin, input).unwrap();
    let st = Command::new(exe)
        .arg("offspring")
        .arg(&fin)
        .arg(&fout)
        .status()
        .unwrap();
    assert!(st.success());
    let all: Vec<u32> = std::fs::read(&fout)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let (a, r) = all.split_at(lw.len());
    (a.to_vec(), r.to_vec())
}

#[test]
fn offspring_cover_the_edge_cases() {
    // Log-weights and chunk offsets made to reach the edges: long runs of zero weight,
    // the weight on one particle (one range of every slot), chunks without weight (last
    // ones too), a chunk whose coefficient underflowed, offsets above and below the
    // chunks' own sums (slots between a chunk's last weight and the next offset), totals
    // above the sum's end (slots past it), no weight at all. Every slot written, each to
    // the reference's ancestor; where the offsets and total are the sums', systematic
    // gives each particle n w / W slots to within one (and one more by rounding).
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = pf_model_from_toml(RANGE, Path::new("m.toml")).unwrap();
    let exes = [
        build_with::<f64>(&cxx, &model, dir.path(), "#define PF_AITEMS 2\n"),
        build_with::<f64>(&cxx, &model, dir.path(), TINY),
    ];
    let mut next = {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        }
    };
    let ninf = f64::NEG_INFINITY;
    // The chunks' coefficients and offsets from their sums (scaled by `bend` each).
    let chunks = |lw: &[f64], per: usize, bend: &mut dyn FnMut() -> f64| {
        let c = per * 32;
        let g = lw.len().div_ceil(c);
        let m: Vec<f64> = (0..g)
            .map(|r| {
                lw[r * c..lw.len().min((r + 1) * c)]
                    .iter()
                    .cloned()
                    .fold(ninf, f64::max)
            })
            .collect();
        let top = m.iter().cloned().fold(ninf, f64::max);
        let (mut coef, mut offs, mut o) = (Vec::new(), Vec::new(), 0.0);
        for r in 0..g {
            let cj = if m[r] > ninf { (m[r] - top).exp() } else { 0.0 };
            let s: f64 = lw[r * c..lw.len().min((r + 1) * c)]
                .iter()
                .map(|&l| if m[r] > ninf { (l - m[r]).exp() } else { 0.0 })
                .sum();
            coef.push(cj);
            offs.push(o);
            o += cj * s * bend();
        }
        (coef, offs, o)
    };
    // (log-weights, blocks a chunk, coefficients, offsets, total, offsets and total the sums')
    type Case = (Vec<f64>, u32, Vec<f64>, Vec<f64>, f64, bool);
    let mut cases: Vec<Case> = Vec::new();
    for (n, per) in [(7usize, 1u32), (100, 1), (301, 2), (700, 3)] {
        let random: Vec<f64> = (0..n)
            .map(|i| {
                if (i / 5) % 3 == 1 {
                    ninf
                } else {
                    -3.0 * next()
                }
            })
            .collect();
        let mut one = vec![ninf; n];
        one[n / 3] = 0.0;
        let mut first = vec![ninf; n];
        first[0] = -1.0;
        let mut tail_empty = random.clone();
        for v in &mut tail_empty[n - n.min(70)..] {
            *v = ninf;
        }
        for lw in [random, one, first, tail_empty, vec![ninf; n]] {
            for bend in [0.0, 1e-3, -1e-12] {
                let mut shift = || 1.0 + bend * (2.0 * next() - 1.0);
                let (coef, offs, tot) = chunks(&lw, per as usize, &mut shift);
                let exact = bend == 0.0;
                cases.push((lw.clone(), per, coef.clone(), offs.clone(), tot, exact));
                let above = tot * (1.0 + bend.abs());
                cases.push((lw.clone(), per, coef.clone(), offs.clone(), above, exact));
                if coef.len() > 1 {
                    // A chunk's coefficient underflowed.
                    let mut c2 = coef.clone();
                    c2[1] = 0.0;
                    let mut o2 = offs.clone();
                    for r in 2..o2.len() {
                        o2[r] = offs[r] - offs[2] + offs[1];
                    }
                    let t2 = tot - offs[2] + offs[1];
                    cases.push((lw.clone(), per, c2, o2, t2, false));
                }
            }
        }
    }
    let mut listed = 0;
    for (lw, per, coef, offs, wtot, exact) in &cases {
        let n = lw.len();
        let c = *per as usize * 32;
        let w: Vec<f64> = (0..n)
            .map(|i| {
                let r = i / c;
                let m = lw[r * c..n.min((r + 1) * c)]
                    .iter()
                    .cloned()
                    .fold(ninf, f64::max);
                if m > ninf {
                    coef[r] * (lw[i] - m).exp()
                } else {
                    0.0
                }
            })
            .collect();
        for exe in &exes {
            for scheme in [0u32, 1] {
                let (a, r) = offspring(exe, dir.path(), lw, *per, coef, offs, *wtot, scheme);
                assert!(
                    a.iter().all(|&v| (v as usize) < n),
                    "a slot was not written"
                );
                assert_eq!(
                    a, r,
                    "N {n}, chunks of {per}, total {wtot}, scheme {scheme}"
                );
                if *exact && scheme == 0 && *wtot > 0.0 {
                    let mut count = vec![0usize; n];
                    for &i in &a {
                        count[i as usize] += 1;
                    }
                    for i in 0..n {
                        let e = n as f64 * w[i] / wtot;
                        assert!(
                            (count[i] as f64 - e).abs() < 2.0,
                            "N {n}, chunks of {per}: particle {i} has {} slots for {e:.3}",
                            count[i]
                        );
                    }
                }
                // The list's path taken (a particle owning more than 2 slots).
                let mut run = 1;
                for w in a.windows(2) {
                    run = if w[0] == w[1] { run + 1 } else { 1 };
                    listed += usize::from(run == 3);
                }
            }
        }
    }
    assert!(listed > 0);
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
