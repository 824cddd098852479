//! The windowed filter's CUDA kernels (`likelihood/kernels/window.cu`) compiled as plain
//! C++ and run on the CPU from the same plan the GPU launcher uploads (block by block
//! with the kernel's shared-memory staging; pattern windows one by one), against the CPU
//! path. Skips with a printed reason when there is no C++ compiler.

mod emulation;
mod gpu_common;

use emulation::{bytes, compile, compiler, reals};
use gpu_common::random_model;
use kestrel::likelihood::cuda::{prepare, source, Plan, BLOCK};
use kestrel::likelihood::{loglik, Method, Options};
use kestrel::model::ar;
use kestrel::sim::simulate;
use kestrel::{Device, Measurements, Model, Real};
use std::path::Path;
use std::process::Command;

const HARNESS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <vector>
template <class T> std::vector<T> load(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(3); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    std::vector<T> v(n / sizeof(T) + 1);
    if (n > 0 && fread(v.data(), 1, n, f) != (size_t)n) exit(4);
    fclose(f);
    return v;
}
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
            "#define KESTREL_HOST\n#include <string>\n#include <cmath>\n{}\n{HARNESS}",
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
        &Options {
            vague: 1e4,
            ..Options::default()
        },
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
