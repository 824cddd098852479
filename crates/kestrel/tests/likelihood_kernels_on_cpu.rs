//! The windowed filter's CUDA kernels (`likelihood/kernels/window.cu`) compiled as plain
//! C++ and run on the CPU from the same plan the GPU launcher uploads (block by block
//! with the kernel's shared-memory staging; pattern windows one by one), against the CPU
//! path. Skips with a printed reason when there is no C++ compiler.

mod emulation;
mod gpu_common;

use emulation::{bytes, compile, compiler, reals, FILE_IO};
use gpu_common::random_model;
use kestrel::likelihood::cuda::{prepare, source, Plan, BLOCK};
use kestrel::likelihood::{loglik, Method, Options};
use kestrel::model::ar;
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model, Real};
use std::path::Path;
use std::process::Command;

/// Both harnesses read their inputs with `load` (emulation::FILE_IO).
const LOADER: &str = "#include <cstdio>\n#include <cstdlib>\n#include <vector>\n";

const HARNESS: &str = r#"
int main(int argc, char** argv) {
    // dir tracks steps n count norm
    std::string d = argv[1];
    long long tracks = atoll(argv[2]), steps = atoll(argv[3]), count = atoll(argv[5]);
    int n = atoi(argv[4]);
    REAL norm = (REAL)atof(argv[6]);
    auto z = load<REAL>((d + "/z").c_str());
    auto g = load<REAL>((d + "/g").c_str());
    auto c = load<REAL>((d + "/c").c_str());
    auto l = load<REAL>((d + "/l").c_str());
    auto pg = load<REAL>((d + "/pg").c_str());
    auto pc = load<REAL>((d + "/pc").c_str());
    auto pl = load<REAL>((d + "/pl").c_str());
    auto pn = load<REAL>((d + "/pn").c_str());
    auto idx = load<unsigned long long>((d + "/idx").c_str());
    auto pat = load<int>((d + "/pat").c_str());
    std::vector<REAL> out(tracks * steps, (REAL)NAN);
    long long t_begin = n - 1;
    if (t_begin < steps) {
        long long blocks = (steps - t_begin + BLOCK - 1) / BLOCK;
        for (long long b = 0; b < tracks; ++b)
            for (long long bx = 0; bx < blocks; ++bx)
                window_shared_block(z.data(), g.data(), c.data(), l.data(), norm, out.data(),
                                    steps, n, t_begin, bx, b);
    }
    for (long long j = 0; j < count; ++j)
        window_patterns_one(z.data(), pg.data(), pc.data(), pl.data(), pn.data(), idx.data(),
                            pat.data(), out.data(), steps, n, j);
    FILE* f = fopen((d + "/out").c_str(), "wb");
    fwrite(out.data(), sizeof(REAL), out.size(), f);
    fclose(f);
    return 0;
}
"#;

fn emulate<T: Real>(cxx: &str, dir: &Path, plan: &Plan<T>, z: &Measurements<T>) -> Vec<T> {
    let tag = format!("window_{}_ny{}", T::NAME, plan.ny);
    let exe = dir.join(&tag);
    if !exe.exists() {
        let src = format!(
            "#define KESTREL_HOST\n#include <string>\n#include <cmath>\n{}\n{LOADER}{FILE_IO}{HARNESS}",
            source(plan.ny, T::NAME)
        );
        compile(cxx, dir, &tag, &src, &["-std=c++17", "-O1", "-w"]);
    }
    let w = |name: &str, b: Vec<u8>| std::fs::write(dir.join(name), b).unwrap();
    w("z", bytes(z.data()));
    w("g", bytes(&plan.g));
    w("c", bytes(&plan.c));
    w("l", bytes(&plan.l));
    w("pg", bytes(&plan.pg));
    w("pc", bytes(&plan.pc));
    w("pl", bytes(&plan.pl));
    w("pn", bytes(&plan.pnorm));
    w(
        "idx",
        plan.index.iter().flat_map(|v| v.to_le_bytes()).collect(),
    );
    w(
        "pat",
        plan.pattern.iter().flat_map(|v| v.to_le_bytes()).collect(),
    );
    let o = Command::new(&exe)
        .arg(dir)
        .arg(plan.tracks.to_string())
        .arg(plan.steps.to_string())
        .arg(plan.n.to_string())
        .arg(plan.index.len().to_string())
        .arg(format!("{:e}", plan.norm.to_f64()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let raw = std::fs::read(dir.join("out")).unwrap();
    let mut out: Vec<T> = reals(&raw);
    for &(i, v) in &plan.host {
        out[i] = v;
    }
    out
}

fn check<T: Real>(cxx: &str, dir: &Path, model: &Model, z: &Measurements<T>, n: usize, tol: f64) {
    let plan = prepare(model, z, n, 1e4).unwrap();
    let got = emulate(cxx, dir, &plan, z);
    let want = loglik(
        Device::Cpu,
        model,
        z,
        Method::Window(n),
        &Options::default().with_vague(1e4),
    )
    .unwrap();
    for (i, (g, w)) in got.iter().zip(&want.values).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{} N = {n}: track {}, step {}: kernel {g} vs cpu {w}",
            T::NAME,
            i / z.steps(),
            i % z.steps()
        );
    }
}

#[test]
fn window_kernels_equal_the_cpu_path() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let models = [
        ar(&[0.7, -0.2, 0.1, 0.05], 1.0, 0.5, 2.0).unwrap(),
        random_model(4, 2, 21),
    ];
    for model in &models {
        let mut z = simulate(model, 3, 3 * BLOCK + 37, 5, 0.0)
            .unwrap()
            .measurements;
        let ny = z.ny();
        // Track 1: missing every 20 steps (patterns); track 2: a few at random places.
        for k in (5..z.steps()).step_by(20) {
            let t = z.steps();
            z.data_mut()[(t + k) * ny..(t + k + 1) * ny].fill(f64::NAN);
        }
        for k in [3usize, 100, 101, 300] {
            let t = z.steps();
            z.data_mut()[(2 * t + k) * ny] = f64::NAN;
        }
        // Windows shorter than, equal to and longer than a tile of taps.
        for n in [1usize, 7, 40, 300] {
            check::<f64>(&cxx, dir.path(), model, &z, n, 1e-10);
            check::<f32>(&cxx, dir.path(), model, &z.cast(), n, 2e-4);
        }
    }
}

const SCAN_HARNESS: &str = r#"
int main(int argc, char** argv) {
    // dir tracks steps len chunks istride ilen isteady
    std::string d = argv[1];
    long long tracks = atoll(argv[2]), steps = atoll(argv[3]), len = atoll(argv[4]),
              chunks = atoll(argv[5]), istride = atoll(argv[6]), ilen = atoll(argv[7]);
    int isteady = atoi(argv[8]);
    auto z = load<REAL>((d + "/z").c_str());
    auto table = load<REAL>((d + "/table").c_str());
    auto index = load<int>((d + "/index").c_str());
    auto f = load<REAL>((d + "/f").c_str());
    auto u = load<REAL>((d + "/u").c_str());
    auto h = load<REAL>((d + "/h").c_str());
    auto dd = load<REAL>((d + "/d").c_str());
    auto x0 = load<REAL>((d + "/x0").c_str());
    std::vector<REAL> m(tracks * chunks * NX * NX, (REAL)NAN), v(tracks * chunks * NX, (REAL)NAN),
        start(tracks * chunks * NX, (REAL)NAN), out(tracks * steps, (REAL)NAN);
    for (long long b = 0; b < tracks; ++b)
        for (long long j = 0; j < chunks; ++j)
            for (int col = 0; col <= NX; ++col)
                scan_local_one(z.data(), table.data(), index.data(), istride, ilen, isteady, f.data(), u.data(), h.data(),
                               dd.data(), steps, len, chunks, m.data(), v.data(), b, j, col);
    for (long long b = 0; b < tracks; ++b)
        scan_carry_one(m.data(), v.data(), x0.data(), chunks, start.data(), b);
    for (long long b = 0; b < tracks; ++b)
        for (long long j = 0; j < chunks; ++j)
            scan_final_one(z.data(), table.data(), index.data(), istride, ilen, isteady, f.data(), u.data(), h.data(),
                           dd.data(), steps, len, chunks, start.data(), out.data(), b, j);
    FILE* o = fopen((d + "/out").c_str(), "wb");
    fwrite(out.data(), sizeof(REAL), out.size(), o);
    fclose(o);
    return 0;
}
"#;

fn row_major<T: Real>(m: &nalgebra::DMatrix<f64>) -> Vec<T> {
    m.transpose().as_slice().iter().map(|v| T::of(*v)).collect()
}

/// The exact scan's kernels as C++ with `len`-step chunks, against the CPU's exact
/// filter.
fn check_scan<T: Real>(
    cxx: &str,
    dir: &Path,
    model: &Model,
    z: &Measurements<T>,
    len: usize,
    tol: f64,
) {
    use kestrel::likelihood::cuda::{is_companion, scan_source};
    use kestrel::likelihood::schedule::Schedule;
    let (nx, ny) = (model.nx(), model.ny());
    let companion = is_companion(model);
    let exe = dir.join(format!("scan_{}_{nx}_{ny}_{companion}", T::NAME));
    if !exe.exists() {
        let src = format!(
            "#define KESTREL_HOST\n#include <string>\n#include <cmath>\n{}\n{LOADER}{FILE_IO}{SCAN_HARNESS}",
            scan_source(nx, ny, companion, T::NAME)
        );
        let cpp = exe.with_extension("cpp");
        std::fs::write(&cpp, src).unwrap();
        let o = Command::new(cxx)
            .args(["-std=c++17", "-O1", "-w", "-o"])
            .arg(&exe)
            .arg(&cpp)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let sched = Schedule::new(model, z).unwrap();
    let w = |name: &str, b: Vec<u8>| std::fs::write(dir.join(name), b).unwrap();
    let col = |v: &nalgebra::DVector<f64>| -> Vec<T> { v.iter().map(|x| T::of(*x)).collect() };
    w("z", bytes(z.data()));
    w("table", bytes(&sched.table));
    w(
        "index",
        sched.index.iter().flat_map(|v| v.to_le_bytes()).collect(),
    );
    w("f", bytes(&row_major::<T>(model.f())));
    w("h", bytes(&row_major::<T>(model.h())));
    w("u", bytes(&col(model.u())));
    w("d", bytes(&col(model.d())));
    w("x0", bytes(&col(&model.prior().x0)));
    let chunks = z.steps().div_ceil(len);
    let o = Command::new(&exe)
        .arg(dir)
        .arg(z.tracks().to_string())
        .arg(z.steps().to_string())
        .arg(len.to_string())
        .arg(chunks.to_string())
        .arg(sched.stride.to_string())
        .arg(sched.index_len.to_string())
        .arg(sched.steady.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let raw = std::fs::read(dir.join("out")).unwrap();
    let got: Vec<f64> = if T::NAME == "f64" {
        raw.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    } else {
        raw.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect()
    };
    let want = loglik(Device::Cpu, model, z, Method::Exact, &Options::default()).unwrap();
    // The host's mean recursion over the same schedule, in f64.
    let host = sched.loglik(model, z);
    for (i, ((g, w), hv)) in got.iter().zip(&want.values).zip(&host).enumerate() {
        let w = w.to_f64();
        assert!(
            (hv - w).abs() <= tol.max(1e-12) * w.abs().max(1.0),
            "schedule: track {}, step {}: {hv} vs exact {w}",
            i / z.steps(),
            i % z.steps()
        );
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{} chunks of {len}: track {}, step {}: kernel {g} vs exact {w}",
            T::NAME,
            i / z.steps(),
            i % z.steps()
        );
    }
}

#[test]
fn scan_kernels_equal_the_exact_filter() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++ compiler ($CXX or c++)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let models = [
        // Companion F (AR), dense F, a stationary prior with a slow transient.
        ar(&[0.7, -0.2, 0.1, 0.05], 1.0, 0.5, 2.0).unwrap(),
        random_model(4, 2, 21),
        ar(&[1.2, -0.4, 0.1], 3.0, 0.2, 1.0)
            .unwrap()
            .with_stationary_prior()
            .unwrap(),
    ];
    for model in &models {
        let mut z = simulate(model, 3, 1000, 9, 0.0).unwrap().measurements;
        let ny = z.ny();
        // Track 1: missing every 20 steps; track 2: a few, one at the first step.
        for k in (5..z.steps()).step_by(20) {
            let t = z.steps();
            z.data_mut()[(t + k) * ny..(t + k + 1) * ny].fill(f64::NAN);
        }
        for k in [0usize, 100, 101, 999] {
            let t = z.steps();
            z.data_mut()[(2 * t + k) * ny] = f64::NAN;
        }
        // One chunk, chunks that divide the track, and a ragged last chunk.
        for len in [1000usize, 100, 37] {
            check_scan::<f64>(&cxx, dir.path(), model, &z, len, 1e-10);
            check_scan::<f32>(&cxx, dir.path(), model, &z.cast(), len, 2e-4);
        }
    }
    // Complete series: one row shared by every track, ending where the recursion has
    // settled; later steps read the settled record.
    for model in &models {
        let z = simulate(model, 3, 5000, 10, 0.0).unwrap().measurements;
        let s = kestrel::likelihood::schedule::Schedule::new(model, &z).unwrap();
        assert_eq!(s.stride, 0, "one shared row");
        assert!(
            s.index_len < z.steps() && s.steady >= 0,
            "settled within a prefix: {} of {} steps",
            s.index_len,
            z.steps()
        );
        for t in [0, s.index_len - 1, s.index_len, z.steps() - 1] {
            assert!(s.id(2, t) >= 0 && s.id(2, t) == s.id(0, t), "step {t}");
        }
        for len in [5000usize, 700, 37] {
            check_scan::<f64>(&cxx, dir.path(), model, &z, len, 1e-10);
            check_scan::<f32>(&cxx, dir.path(), model, &z.cast(), len, 2e-4);
        }
    }
}

/// The schedule's gap entries: a covariance met before reuses the records that followed
/// it, across gaps that repeat, tracks that share a period at another phase, and runs of
/// missing steps that break the cycle (the reuse ends and the recursion is replayed from
/// the last gap). The records stay few where the gaps repeat, and the likelihoods equal
/// the exact filter's.
#[test]
fn schedule_reuses_the_recursion_where_gaps_repeat() {
    use kestrel::likelihood::schedule::{record_len, Schedule};
    let models = [
        ar(&[1.2, -0.4, 0.1], 3.0, 0.2, 1.0)
            .unwrap()
            .with_stationary_prior()
            .unwrap(),
        random_model(4, 2, 33),
    ];
    let steps = 20_000;
    for model in &models {
        let (nx, ny) = (model.nx(), model.ny());
        let mut z = simulate(model, 4, steps, 12, 0.0).unwrap().measurements;
        let mut miss = |b: usize, k: usize| {
            let o = (b * steps + k) * ny;
            z.data_mut()[o..o + ny].fill(f64::NAN);
        };
        for k in (19..steps).step_by(20) {
            // Track 0: every 20 steps; track 1: the same period at another phase.
            miss(0, k);
            miss(1, k - 12);
        }
        // Track 1: a run of missing steps breaks its cycle twice.
        for k in (5000..5003).chain(12_345..12_346) {
            miss(1, k);
        }
        // Tracks 2 and 3: every 20 steps from step 0 and a repeating pair of gaps.
        for k in (0..steps).step_by(20) {
            miss(2, k);
        }
        for k in (3..steps).step_by(50) {
            miss(3, k);
            miss(3, (k + 7).min(steps - 1));
        }
        let s = Schedule::new(model, &z).unwrap();
        let records = s.table.len() / record_len(nx, ny);
        // Without reuse every observed step of every track is a record (~76,000).
        assert!(
            records < steps / 2,
            "{records} records for 4 tracks of {steps} steps"
        );
        equals_exact(model, &z, &s, "repeating gaps");
        // A track of random gaps (5%) as well: whatever it reuses, the values hold.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut z = simulate(model, 2, steps, 13, 0.0).unwrap().measurements;
        for k in 0..2 * steps {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if rng.is_multiple_of(20) {
                z.data_mut()[k * ny..(k + 1) * ny].fill(f64::NAN);
            }
        }
        equals_exact(model, &z, &Schedule::new(model, &z).unwrap(), "random gaps");
    }
}

/// The schedule's mean recursion (host, f64) against the exact filter, to 1e-10.
fn equals_exact(
    model: &Model,
    z: &Measurements<f64>,
    s: &kestrel::likelihood::schedule::Schedule<f64>,
    what: &str,
) {
    let host = s.loglik(model, z);
    let want = loglik(Device::Cpu, model, z, Method::Exact, &Options::default()).unwrap();
    for (i, (h, w)) in host.iter().zip(&want.values).enumerate() {
        assert!(
            (h - w).abs() <= 1e-10 * w.abs().max(1.0),
            "{what}: track {}, step {}: schedule {h} vs exact {w}",
            i / z.steps(),
            i % z.steps()
        );
    }
}
