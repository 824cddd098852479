//! The GPU tracker's kernels (`tracking/kernels/track.cu` on the Kalman per-step code),
//! compiled as plain C++ by the host compiler and run on the CPU (each block as host
//! threads meeting at a barrier for `__syncthreads`, see tracking_emulation/shim.h),
//! against the CPU tracker's own functions on fresh random inputs, every output starting
//! as NaN (or all-ones integers):
//!
//! - the gate: prediction, the gate's factors, the grid with its counting sort and both
//!   gate passes give the CPU's `BatchState::predict` / `measure`, `Innovations` and
//!   `gate_all` (confirmed tracks over every detection, tentative tracks over the
//!   unclaimed ones) bit for bit: the same pairs in the same order, the same
//!   log-likelihoods (the host's `log` is the CPU tracker's);
//! - the end of a scan: the update of the picked tracks equals `BatchState::update`'s
//!   bit for bit, and the life cycle, the exclusive scan and the compaction give the
//!   survivors in order then the births in detection order, with the CPU's rules and
//!   identities;
//! - JPDA: the confirmed tracks' PDA update equals `BatchState::update_mixture`'s bit for
//!   bit, with the CPU tracker's claims (a pair more likely than "none of them").
//!
//! Skips with a printed reason when there is no C++20 compiler. The device's compiler
//! and hardware are checked by tests/tracking_gpu.rs on the GPU.
#![cfg(feature = "cuda")]

mod emulation;

use emulation::*;
use kestrel::kalman::{BatchState, Mixture};
use kestrel::model::{constant_velocity, Model};
use kestrel::tracking::chi2::chi2_quantile;
use kestrel::tracking::cuda::source;
use kestrel::tracking::gate::gate_all;
use kestrel::tracking::Innovations;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

const SHIM: &str = include_str!("tracking_emulation/shim.h");
const HARNESS: &str = include_str!("tracking_emulation/harness.inc");
const FLAGS: &[&str] = &["-std=c++20", "-O1", "-pthread", "-ffp-contract=off"];

fn compiler() -> Option<String> {
    compiler_for(&FLAGS[..1], "#include <barrier>\nint main() {}\n")
}

/// The kernels for `model` with small blocks (32 threads: several blocks and tiles even
/// for a few hundred items), with the harness.
fn build(cxx: &str, model: &Model, dir: &Path, tag: &str) -> PathBuf {
    let src = format!(
        "{SHIM}\n#define TK_BLOCK 32\n#define TK_SCAN_BLOCK 32\n{}\n{HARNESS}",
        source(model)
    );
    compile(cxx, dir, tag, &src, FLAGS)
}

fn pk(i: usize, j: usize) -> usize {
    if i >= j {
        i * (i + 1) / 2 + j
    } else {
        j * (j + 1) / 2 + i
    }
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn take_u32(b: &[u8], at: &mut usize, n: usize) -> Vec<u32> {
    let v = b[*at..*at + 4 * n]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    *at += 4 * n;
    v
}
fn take_u64(b: &[u8], at: &mut usize, n: usize) -> Vec<u64> {
    let v = b[*at..*at + 8 * n]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    *at += 8 * n;
    v
}
fn same(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits(),
            "{what}[{k}]: kernels {x:e}, CPU {y:e}"
        );
    }
}

/// A random scan: `n` tracks around a region (means, SPD covariances, statuses) and
/// `ndet` detections, most of them near some track's predicted position.
struct Scan {
    x: Vec<f64>,
    p: Vec<f64>,
    status: Vec<u8>,
    z: Vec<f64>,
    claimed: Vec<u8>,
}

fn random_scan(model: &Model, n: usize, ndet: usize, seed: u64) -> Scan {
    let (nx, ny) = (model.nx(), model.ny());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut x = vec![0.0; n * nx];
    let mut p = vec![0.0; n * nx * nx];
    for i in 0..n {
        for k in 0..nx {
            x[i * nx + k] = rng.gen_range(-300.0..300.0);
        }
        let a = nalgebra::DMatrix::from_fn(nx, nx, |_, _| rng.gen_range(-3.0..3.0));
        let s = &a * a.transpose() + nalgebra::DMatrix::identity(nx, nx) * 2.0;
        let s = (&s + s.transpose()) * 0.5;
        for r in 0..nx {
            for c in 0..nx {
                p[(i * nx + r) * nx + c] = s[(r, c)];
            }
        }
    }
    // Detections: near the measured part of a random track's mean (shifted by the
    // prediction, roughly), or anywhere.
    let mut z = vec![0.0; ndet * ny];
    for j in 0..ndet {
        let near = rng.gen_bool(0.7) && n > 0;
        let i = rng.gen_range(0..n.max(1));
        for a in 0..ny {
            let h: f64 = (0..nx).map(|k| model.h()[(a, k)] * x[i * nx + k]).sum();
            let f: f64 = (0..nx)
                .map(|k| {
                    let fx: f64 = (0..nx).map(|l| model.f()[(k, l)] * x[i * nx + l]).sum();
                    model.h()[(a, k)] * fx
                })
                .sum();
            let _ = h;
            z[j * ny + a] = if near {
                f + rng.gen_range(-8.0..8.0)
            } else {
                rng.gen_range(-400.0..400.0)
            };
        }
    }
    Scan {
        x,
        p,
        status: (0..n).map(|_| rng.gen_bool(0.5) as u8).collect(),
        z,
        claimed: (0..ndet).map(|_| rng.gen_bool(0.3) as u8).collect(),
    }
}

fn params(model: &Model) -> Vec<f64> {
    kestrel::kalman::cuda::source::model_params::<f64>(model)
}

/// The common head of the harness's input: mode, model, sizes, tracks (SoA), detections.
fn head(mode: i32, model: &Model, s: &Scan) -> Vec<u8> {
    let (nx, ny) = (model.nx(), model.ny());
    let n = s.status.len();
    let ndet = s.z.len() / ny;
    let np = nx * (nx + 1) / 2;
    let mut inp = i32s(&[mode]);
    put::<f64>(&mut inp, &params(model));
    inp.extend(i32s(&[n as i32, ndet as i32]));
    let mut soa = vec![0.0; nx * n];
    let mut psoa = vec![0.0; np * n];
    for i in 0..n {
        for k in 0..nx {
            soa[k * n + i] = s.x[i * nx + k];
            for c in 0..=k {
                psoa[pk(k, c) * n + i] = s.p[(i * nx + k) * nx + c];
            }
        }
    }
    put::<f64>(&mut inp, &soa);
    put::<f64>(&mut inp, &psoa);
    inp.extend(&s.status);
    put::<f64>(&mut inp, &s.z);
    inp.extend(&s.claimed);
    inp
}

fn state_of(model: &Model, s: &Scan) -> BatchState<f64> {
    let (nx, n) = (model.nx(), s.status.len());
    let mut st = BatchState::<f64>::new(model, n.max(1)).unwrap();
    for i in 0..n {
        let slot = st
            .add_with_prior(
                &s.x[i * nx..(i + 1) * nx],
                &s.p[i * nx * nx..(i + 1) * nx * nx],
            )
            .unwrap();
        assert_eq!(slot, i);
    }
    st
}

fn check_gate(cxx: &str, dir: &Path, model: &Model, tag: &str, n: usize, ndet: usize, seed: u64) {
    let (nx, ny) = (model.nx(), model.ny());
    let (np, nyp) = (nx * (nx + 1) / 2, ny * (ny + 1) / 2);
    let exe = build(cxx, model, dir, tag);
    let s = random_scan(model, n, ndet, seed);
    let gamma = chi2_quantile(ny, 0.999);
    let mut inp = head(0, model, &s);
    put::<f64>(&mut inp, &[gamma]);
    let out = run_piped(&exe, inp, tag);
    // The CPU: predict, measure, the gate's factors, the two stages' gates.
    let mut st = state_of(model, &s);
    st.predict().unwrap();
    st.measure(None).unwrap();
    let mut at = 0;
    let xs: Vec<f64> = take(&out, &mut at, nx * n);
    let ps: Vec<f64> = take(&out, &mut at, np * n);
    let zhat: Vec<f64> = take(&out, &mut at, ny * n);
    let lf: Vec<f64> = take(&out, &mut at, nyp * n);
    let hld: Vec<f64> = take(&out, &mut at, n);
    let mut inns = [Innovations::new(ny), Innovations::new(ny)];
    let mut lists: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for i in 0..n {
        let m = st.mean(i).unwrap();
        let p = st.cov(i).unwrap();
        for k in 0..nx {
            same(&[xs[k * n + i]], &[m[k]], &format!("{tag} mean {i}.{k}"));
            for c in 0..=k {
                same(
                    &[ps[pk(k, c) * n + i]],
                    &[p[k * nx + c]],
                    &format!("{tag} cov {i}.{k}{c}"),
                );
            }
        }
        let zh = st.predicted_measurement(i).unwrap();
        let sm = st.innovation_cov(i).unwrap();
        let mut one = Innovations::new(ny);
        assert!(one.push(zh, sm));
        for a in 0..ny {
            same(&[zhat[a * n + i]], &[zh[a]], &format!("{tag} zhat {i}.{a}"));
            for b in 0..=a {
                same(
                    &[lf[pk(a, b) * n + i]],
                    &[one.l[a * ny + b]],
                    &format!("{tag} L {i}.{a}{b}"),
                );
            }
        }
        same(
            &[hld[i]],
            &[one.half_logdet[0]],
            &format!("{tag} ln|S|/2 {i}"),
        );
        let k = 1 - s.status[i] as usize;
        inns[k].push(zh, sm);
        lists[k].push(i);
    }
    let mut pairs = 0;
    for (stage, want) in [(0usize, 1u8), (1, 0)] {
        let rows = take_u32(&out, &mut at, n + 1);
        let m = rows[n] as usize;
        let det = take_u32(&out, &mut at, m);
        let ll: Vec<f64> = take(&out, &mut at, m);
        let dets: Vec<usize> = (0..ndet)
            .filter(|&j| want == 1 || s.claimed[j] == 0)
            .collect();
        let zs: Vec<f64> = dets
            .iter()
            .flat_map(|&j| s.z[j * ny..(j + 1) * ny].iter().copied())
            .collect();
        let g = gate_all(&inns[stage], &zs, ny, gamma);
        let mut k = 0;
        for i in 0..n {
            let r = rows[i] as usize..rows[i + 1] as usize;
            if s.status[i] != want {
                assert!(r.is_empty(), "{tag} stage {stage}: track {i} is not in it");
                continue;
            }
            let cpu = g.of(k);
            let cpu_det: Vec<u32> = g.det[cpu.clone()]
                .iter()
                .map(|&l| dets[l as usize] as u32)
                .collect();
            assert_eq!(det[r.clone()], cpu_det[..], "{tag} stage {stage} track {i}");
            same(&ll[r], &g.ll[cpu], &format!("{tag} stage {stage} ll {i}"));
            k += 1;
        }
        assert_eq!(k, lists[stage].len());
        pairs += m;
    }
    let err = take_u64(&out, &mut at, 1)[0];
    assert_eq!(err, u64::MAX, "{tag}: no factor failed");
    assert_eq!(at, out.len());
    assert!(
        pairs > n / 4,
        "{tag}: the scan gates enough pairs to test ({pairs})"
    );
}

#[test]
fn gate_kernels_equal_the_cpu_gate() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cv = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    check_gate(&cxx, dir.path(), &cv, "gate_cv2", 300, 400, 1);
    // One measured component (a one-axis grid), and a model off the SIMD lanes' sizes.
    let cv1 = constant_velocity(1, 0.5, 2.0, 9.0, 50.0).unwrap();
    check_gate(&cxx, dir.path(), &cv1, "gate_cv1", 200, 250, 2);
    let ca3 = kestrel::model::constant_acceleration(3, 1.0, 0.5, 16.0, 100.0).unwrap();
    check_gate(&cxx, dir.path(), &ca3, "gate_ca3", 150, 200, 3);
}

/// The CPU's life cycle (tracker.rs, `Tracker::life_cycle`) of one track.
#[allow(clippy::too_many_arguments)]
fn life(
    status: &mut u8,
    age: &mut u32,
    hits: &mut u32,
    misses: &mut u32,
    detected: bool,
    p: &[f64],
    model: &Model,
    (m, n, kdel, ktent, bound): (u32, u32, u32, u32, f64),
) -> bool {
    let nx = model.nx();
    *age += 1;
    *misses = if detected { 0 } else { *misses + 1 };
    let mut keep = true;
    if *status == 0 {
        if detected {
            *hits += 1;
        }
        if *hits >= m {
            *status = 1;
        } else if *hits + n.saturating_sub(*age) < m || *misses >= ktent {
            keep = false;
        }
    } else if *misses >= kdel {
        keep = false;
    }
    if keep && bound.is_finite() {
        for a in 0..model.ny() {
            let mut v = 0.0;
            for r in 0..nx {
                for c in 0..nx {
                    v += model.h()[(a, r)] * p[r * nx + c] * model.h()[(a, c)];
                }
            }
            if v > bound {
                keep = false;
            }
        }
    }
    keep
}

#[test]
fn update_life_and_compaction_kernels_follow_the_cpu() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
    let (nx, ny) = (model.nx(), model.ny());
    let np = nx * (nx + 1) / 2;
    let exe = build(&cxx, &model, dir.path(), "life_cv2");
    for (seed, rules) in [
        (4u64, (2u32, 3u32, 3u32, u32::MAX, f64::INFINITY)),
        (5, (3, 4, 2, 2, 60.0)),
    ] {
        let (n, ndet) = (260, 230);
        let s = random_scan(&model, n, ndet, seed);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 100);
        let age: Vec<u32> = (0..n).map(|_| rng.gen_range(1..6)).collect();
        let hits: Vec<u32> = (0..n).map(|i| rng.gen_range(1..=age[i])).collect();
        let misses: Vec<u32> = (0..n).map(|_| rng.gen_range(0..3)).collect();
        let id: Vec<u64> = (0..n as u64).map(|i| 1000 + 3 * i).collect();
        let pick = |rng: &mut rand::rngs::StdRng| -> i32 {
            if rng.gen_bool(0.5) {
                rng.gen_range(0..ndet as i32)
            } else {
                -1
            }
        };
        let p1: Vec<i32> = (0..n).map(|_| pick(&mut rng)).collect();
        let p2: Vec<i32> = (0..n).map(|_| pick(&mut rng)).collect();
        let (g, n_x0, pinit) = {
            let gm = model.h().clone().pseudo_inverse(1e-12).unwrap();
            let nm = nalgebra::DMatrix::identity(nx, nx) - &gm * model.h();
            let p = &gm * model.r() * gm.transpose() + &nm * &model.prior().p0 * nm.transpose();
            let p = (&p + p.transpose()) * 0.5;
            let rm = |m: &nalgebra::DMatrix<f64>| -> Vec<f64> {
                (0..m.nrows())
                    .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
                    .collect()
            };
            (
                rm(&gm),
                (&nm * &model.prior().x0)
                    .iter()
                    .copied()
                    .collect::<Vec<_>>(),
                rm(&p),
            )
        };
        let next_id = 5000u64;
        let mut inp = head(1, &model, &s);
        inp.extend(u32s(&age));
        inp.extend(u32s(&hits));
        inp.extend(u32s(&misses));
        inp.extend(u64s(&id));
        inp.extend(i32s(&p1));
        inp.extend(i32s(&p2));
        inp.extend(rules.4.to_le_bytes());
        inp.extend(u32s(&[rules.0, rules.1, rules.2, rules.3]));
        let mut birth = g.clone();
        birth.extend_from_slice(&n_x0);
        birth.extend(model.d().iter().copied());
        birth.extend_from_slice(&pinit);
        put::<f64>(&mut inp, &birth);
        inp.extend(next_id.to_le_bytes());
        let out = run_piped(&exe, inp, "life");
        // The CPU: the picks' update, the life cycle, survivors then births.
        let mut st = state_of(&model, &s);
        let mut zbuf = vec![f64::NAN; n * ny];
        let picks: Vec<i32> = (0..n)
            .map(|i| if s.status[i] == 1 { p1[i] } else { p2[i] })
            .collect();
        for i in 0..n {
            if picks[i] >= 0 {
                let j = picks[i] as usize;
                zbuf[i * ny..(i + 1) * ny].copy_from_slice(&s.z[j * ny..(j + 1) * ny]);
            }
        }
        st.update(&zbuf, None, None).unwrap();
        let mut want_x = Vec::new();
        let mut want_p = Vec::new();
        let mut want_life = Vec::new();
        for i in 0..n {
            let (mut stt, mut ag, mut ht, mut ms) = (s.status[i], age[i], hits[i], misses[i]);
            let p = st.cov(i).unwrap();
            if life(
                &mut stt,
                &mut ag,
                &mut ht,
                &mut ms,
                picks[i] >= 0,
                p,
                &model,
                rules,
            ) {
                want_x.extend_from_slice(st.mean(i).unwrap());
                want_p.extend_from_slice(p);
                want_life.push((id[i], stt, ag, ht, ms));
            }
        }
        let kept = want_life.len();
        let mut births = 0u64;
        for j in 0..ndet {
            if s.claimed[j] != 0 {
                continue;
            }
            for r in 0..nx {
                let mut acc = n_x0[r];
                for a in 0..ny {
                    acc += g[r * ny + a] * (s.z[j * ny + a] - model.d()[a]);
                }
                want_x.push(acc);
            }
            want_p.extend_from_slice(&pinit);
            want_life.push((next_id + births, 0, 1, 1, 0));
            births += 1;
        }
        let total = want_life.len();
        let co = n + ndet;
        let mut at = 0;
        let flags = take_u32(&out, &mut at, co + 1);
        assert_eq!(flags[n] as usize, kept, "seed {seed}: survivors");
        assert_eq!(flags[co] as usize, total, "seed {seed}: live tracks");
        let xo: Vec<f64> = take(&out, &mut at, nx * co);
        let po: Vec<f64> = take(&out, &mut at, np * co);
        let ido = take_u64(&out, &mut at, co);
        let so = out[at..at + co].to_vec();
        at += co;
        let ao = take_u32(&out, &mut at, co);
        let ho = take_u32(&out, &mut at, co);
        let mo = take_u32(&out, &mut at, co);
        let err = take_u64(&out, &mut at, 1)[0];
        assert_eq!(err, u64::MAX);
        assert_eq!(at, out.len());
        for t in 0..total {
            let what = format!("seed {seed} track {t}");
            assert_eq!(
                (ido[t], so[t], ao[t], ho[t], mo[t]),
                want_life[t],
                "{what}: life"
            );
            for k in 0..nx {
                same(
                    &[xo[k * co + t]],
                    &[want_x[t * nx + k]],
                    &format!("{what} x{k}"),
                );
                for c in 0..nx {
                    same(
                        &[po[pk(k, c) * co + t]],
                        &[want_p[(t * nx + k) * nx + c]],
                        &format!("{what} P{k}{c}"),
                    );
                }
            }
        }
        assert!(
            kept > 20 && kept < n,
            "seed {seed}: some tracks kept, some deleted ({kept})"
        );
    }
}

#[test]
fn jpda_update_kernel_equals_the_cpu_mixture_update() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (model, tag) in [
        (
            constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap(),
            "pda_cv2",
        ),
        (
            constant_velocity(3, 0.5, 2.0, 4.0, 50.0).unwrap(),
            "pda_cv3",
        ),
    ] {
        let (nx, ny) = (model.nx(), model.ny());
        let np = nx * (nx + 1) / 2;
        let exe = build(&cxx, &model, dir.path(), tag);
        let (n, ndet) = (150, 120);
        let s = random_scan(&model, n, ndet, 21);
        let mut rng = rand::rngs::StdRng::seed_from_u64(22);
        // Gated rows: up to four distinct detections a track, in ascending order, with
        // marginals that sum with beta0 to one; tentative tracks get rows too (the
        // kernel must leave them).
        let (mut rows, mut det, mut beta, mut beta0) =
            (vec![0u32], Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            let k = rng.gen_range(0..5usize);
            let mut ds: Vec<u32> = (0..k).map(|_| rng.gen_range(0..ndet as u32)).collect();
            ds.sort_unstable();
            ds.dedup();
            let w: Vec<f64> = (0..=ds.len()).map(|_| rng.gen_range(0.01..1.0)).collect();
            let total: f64 = w.iter().sum();
            beta0.push(w[0] / total);
            beta.extend(w[1..].iter().map(|v| v / total));
            det.extend(&ds);
            rows.push(det.len() as u32);
        }
        let mut inp = head(2, &model, &s);
        inp.extend(u32s(&rows));
        inp.extend(u32s(&det));
        put::<f64>(&mut inp, &beta);
        put::<f64>(&mut inp, &beta0);
        let out = run_piped(&exe, inp, tag);
        let mut at = 0;
        let xo: Vec<f64> = take(&out, &mut at, nx * n);
        let po: Vec<f64> = take(&out, &mut at, np * n);
        let pick: Vec<i32> = take_u32(&out, &mut at, n)
            .into_iter()
            .map(|v| v as i32)
            .collect();
        let claimed = out[at..at + ndet].to_vec();
        at += ndet;
        let err = take_u64(&out, &mut at, 1)[0];
        assert_eq!(at, out.len());
        assert_eq!(err, u64::MAX, "{tag}: no failure");
        // The CPU: the mixture of the confirmed tracks' rows; claims as Tracker::associate.
        let mut st = state_of(&model, &s);
        let (mut start, mut zz, mut bb) = (vec![0usize], Vec::new(), Vec::new());
        let mut want_claimed = s.claimed.clone();
        let mut updated = 0;
        for i in 0..n {
            if s.status[i] == 1 {
                let (r0, r1) = (rows[i] as usize, rows[i + 1] as usize);
                let mut detected = false;
                for k in r0..r1 {
                    let j = det[k] as usize;
                    zz.extend_from_slice(&s.z[j * ny..(j + 1) * ny]);
                    bb.push(beta[k]);
                    if beta[k] > beta0[i] {
                        want_claimed[j] = 1;
                        detected = true;
                    }
                }
                updated += usize::from(r1 > r0);
                assert_eq!(
                    pick[i],
                    if detected { 0 } else { -1 },
                    "{tag}: track {i} pick"
                );
            } else {
                assert_eq!(pick[i], 12345, "{tag}: tentative track {i} left");
            }
            start.push(bb.len());
        }
        assert!(
            updated > 30,
            "{tag}: confirmed tracks with pairs ({updated})"
        );
        st.update_mixture(&Mixture {
            start: &start,
            z: &zz,
            beta: &bb,
        })
        .unwrap();
        assert_eq!(claimed, want_claimed, "{tag}: claims");
        for i in 0..n {
            let (m, p) = (st.mean(i).unwrap(), st.cov(i).unwrap());
            for k in 0..nx {
                same(&[xo[k * n + i]], &[m[k]], &format!("{tag} track {i} x{k}"));
                for c in 0..=k {
                    same(
                        &[po[pk(k, c) * n + i]],
                        &[p[k * nx + c]],
                        &format!("{tag} track {i} P{k}{c}"),
                    );
                }
            }
        }
    }
}
