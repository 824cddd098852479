//! The HMM family's CUDA kernels (`hmm/kernels/*.cu`) compiled as plain C++ and run on
//! the CPU thread by thread, in the launcher's order (reduce, carry, sweep for each of
//! the filter, smoother, Viterbi scores and path), against the CPU path: sequential
//! (one chunk a track) and parallel (many chunks, short ones too), categorical and
//! Gaussian, f32 and f64, outputs poisoned first. Skips with a printed reason when there
//! is no C++ compiler.

mod emulation;
mod hmm_common;

use emulation::{bytes, compile, compiler, reals, FILE_IO};
use hmm_common::*;
use kestrel::hmm::cuda::{chunking, source::source, ModelArrays};
use kestrel::hmm::{hmm_on, Emission, HiddenMarkovModel, HmmMethod, HmmOptions};
use kestrel::{Device, Measurements, Real};
use std::path::Path;
use std::process::Command;

const HARNESS: &str = r#"
int main(int argc, char** argv) {
    std::string d = argv[1];
    long long B = atoll(argv[2]), T = atoll(argv[3]), len = atoll(argv[4]), C = atoll(argv[5]);
    auto y = load<REAL>(d + "/y");
    auto a = load<REAL>(d + "/a"); auto init = load<REAL>(d + "/init");
    auto lnp = load<REAL>(d + "/lnp"); auto means = load<REAL>(d + "/means");
    auto chol = load<REAL>(d + "/chol"); auto norm = load<REAL>(d + "/norm");
    auto lna64 = load<double>(d + "/lna64"); auto lni64 = load<double>(d + "/lni64");
    auto lnp64 = load<double>(d + "/lnp64"); auto means64 = load<double>(d + "/means64");
    auto chol64 = load<double>(d + "/chol64"); auto norm64 = load<double>(d + "/norm64");
    HmmModel m{a.data(), init.data(), lnp.data(), means.data(), chol.data(), norm.data(),
               lna64.data(), lni64.data(), lnp64.data(), means64.data(), chol64.data(), norm64.data()};
    const REAL nan = (REAL)NAN;
    std::vector<REAL> elem(B * C * (KS * KS + KS), nan), start(B * C * KS, nan), filtered(B * T * KS, nan),
        loglik(B * T, nan), g(B * C * KS * KS, nan), next(B * C * KS, nan), smoothed(B * T * KS, nan);
    std::vector<double> pm(B * C * KS * KS, NAN), dstart(B * C * KS, NAN);
    std::vector<unsigned char> back(B * T * KS, 255);
    std::vector<int> fin(B, -1), phi(B * C * KS, -1), xin(B * C, -1);
    std::vector<long long> path(B * T, -1);
    bool many = C > 1;
    // Threads of a launch in reverse order: no thread may depend on another's writes.
    #define EACH(body) for (long long b = B - 1; b >= 0; --b) for (long long c = C - 1; c >= 0; --c) { body; }
    #define TRACKS(body) for (long long b = B - 1; b >= 0; --b) { body; }
    if (many) {
        EACH(fwd_reduce_one(m, y.data(), elem.data(), T, len, C, c, b));
        TRACKS(fwd_carry_one(elem.data(), start.data(), C, b));
    }
    EACH(fwd_sweep_one(m, y.data(), start.data(), filtered.data(), loglik.data(), T, len, C, c, b));
    if (many) {
        EACH(bwd_reduce_one(m, filtered.data(), g.data(), T, len, C, c, b));
        TRACKS(bwd_carry_one(g.data(), next.data(), C, b));
    }
    EACH(bwd_sweep_one(m, filtered.data(), next.data(), smoothed.data(), T, len, C, c, b));
    if (many) {
        EACH(vit_reduce_one(m, y.data(), pm.data(), T, len, C, c, b));
        TRACKS(vit_carry_one(pm.data(), dstart.data(), C, b));
    }
    EACH(vit_sweep_one(m, y.data(), dstart.data(), back.data(), fin.data(), T, len, C, c, b));
    if (many) {
        EACH(path_reduce_one(back.data(), fin.data(), phi.data(), T, len, C, c, b));
        TRACKS(path_carry_one(phi.data(), xin.data(), C, b));
    }
    EACH(path_sweep_one(back.data(), fin.data(), xin.data(), path.data(), T, len, C, c, b));
    save(d + "/filtered", filtered);
    save(d + "/smoothed", smoothed);
    save(d + "/loglik", loglik);
    save(d + "/path", path);
    return 0;
}
"#;

struct Emulated<T> {
    filtered: Vec<T>,
    smoothed: Vec<T>,
    loglik: Vec<T>,
    path: Vec<i64>,
}

fn emulate<T: Real>(
    cxx: &str,
    dir: &Path,
    m: &HiddenMarkovModel,
    z: &Measurements<T>,
    len: usize,
    chunks: usize,
) -> Emulated<T> {
    let categorical = matches!(m.emission(), Emission::Categorical { .. });
    let tag = format!(
        "hmm_{}_k{}_ny{}_{}",
        T::NAME,
        m.states(),
        m.ny(),
        categorical as u8
    );
    let exe = dir.join(&tag);
    if !exe.exists() {
        let src = format!(
            "#define KESTREL_HOST\n#include <cmath>\n#include <cstdio>\n#include <cstdlib>\n#include <string>\n#include <vector>\nusing std::exp; using std::log; using std::rint;\n{}\n{FILE_IO}\n{HARNESS}",
            source(m.states(), m.ny(), categorical, T::NAME)
        );
        compile(
            cxx,
            dir,
            &tag,
            &src,
            &["-std=c++17", "-O1", "-w", "-ffp-contract=off"],
        );
    }
    let ma = ModelArrays::<T>::new(m);
    let w = |name: &str, b: Vec<u8>| std::fs::write(dir.join(name), b).unwrap();
    let w64 = |name: &str, v: &[f64]| {
        std::fs::write(
            dir.join(name),
            v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap()
    };
    w("y", bytes(z.data()));
    w("a", bytes(&ma.a));
    w("init", bytes(&ma.init));
    w("lnp", bytes(&ma.lnp));
    w("means", bytes(&ma.means));
    w("chol", bytes(&ma.chol));
    w("norm", bytes(&ma.norm));
    w64("lna64", &ma.lna64);
    w64("lni64", &ma.lni64);
    w64("lnp64", &ma.lnp64);
    w64("means64", &ma.means64);
    w64("chol64", &ma.chol64);
    w64("norm64", &ma.norm64);
    let o = Command::new(&exe)
        .arg(dir)
        .args([z.tracks(), z.steps(), len, chunks].map(|v| v.to_string()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = |name: &str| std::fs::read(dir.join(name)).unwrap();
    Emulated {
        filtered: reals(&r("filtered")),
        smoothed: reals(&r("smoothed")),
        loglik: reals(&r("loglik")),
        path: r("path")
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

fn check<T: Real>(cxx: &str, dir: &Path, seed: u64, tol: f64) {
    let mut r = rng(seed);
    let cases: [(usize, usize, Option<usize>, usize, usize); 6] = [
        (3, 4, None, 4, 300),
        (1, 2, None, 2, 40),
        (5, 3, Some(2), 3, 200),
        (2, 5, Some(1), 2, 1),
        (4, 3, None, 3, 97),
        (6, 6, Some(3), 2, 130),
    ];
    for (case, &(k, m_syms, gauss, b, t)) in cases.iter().enumerate() {
        let m = random_model(&mut r, k, m_syms, gauss);
        let z: Measurements<T> = simulate(&mut r, &m, b, t, 0.1);
        let want = hmm_on(Device::Cpu, &m, &z, &HmmOptions::default()).unwrap();
        let mut layouts = vec![
            chunking(t, HmmMethod::Sequential),
            chunking(t, HmmMethod::Parallel),
        ];
        // Short chunks, and a last chunk of one step.
        for len in [1, 2, 7] {
            layouts.push((len, t.div_ceil(len)));
        }
        if t > 1 {
            layouts.push((t - 1, 2));
        }
        for (len, chunks) in layouts {
            let got = emulate(cxx, dir, &m, &z, len, chunks);
            let what = format!(
                "case {case} (K {k}, T {t}, {}) len {len} chunks {chunks}",
                T::NAME
            );
            let to64 = |v: &[T]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
            assert!(
                max_diff(&got.filtered, &to64(&want.filtered)) < tol,
                "{what}: filtered"
            );
            assert!(
                max_diff(&got.smoothed, &to64(&want.smoothed)) < tol,
                "{what}: smoothed"
            );
            let scale = 1.0
                + want
                    .loglik
                    .iter()
                    .fold(0.0f64, |a, v| a.max(v.to_f64().abs()));
            assert!(
                max_diff(&got.loglik, &to64(&want.loglik)) < tol * scale,
                "{what}: loglik"
            );
            if let Some(i) = got.path.iter().zip(&want.path).position(|(a, b)| a != b) {
                panic!(
                    "{what}: path differs first at {i}: {} vs {}",
                    got.path[i], want.path[i]
                );
            }
        }
    }
}

#[test]
fn kernels_equal_the_cpu_in_f64() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile_dir("f64");
    check::<f64>(&cxx, &dir, 11, 1e-11);
}

#[test]
fn kernels_equal_the_cpu_in_f32() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile_dir("f32");
    check::<f32>(&cxx, &dir, 12, 5e-4);
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kestrel-hmm-emul-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
