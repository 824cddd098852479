//! The per-step GPU kernels (`BatchTracker`: kalman/kernels/tracker.cu) compiled as plain
//! C++ and run thread by thread on the CPU, on a scripted sequence of calls, against the
//! CPU per-step API (`kalman::BatchState`) given the same calls: removals and adds with
//! their own priors, predictions by the model's step, per-target intervals and control
//! inputs, updates with missing rows, masks and per-target R, and measure-only calls.
//! Skips with a printed reason when there is no C++ compiler.

mod emulation;
mod gpu_common;

use emulation::*;

use kestrel::kalman::cuda::source::{model_params, source, Part};
use kestrel::kalman::{BatchState, Prediction};
use kestrel::model::{constant_velocity, Kinematics};
use kestrel::{Model, Real};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

const SHIM: &str = include_str!("kernel_emulation/shim.h");
const HARNESS: &str = include_str!("kernel_emulation/tracker_harness.inc");

fn put_i(out: &mut Vec<u8>, v: usize) {
    out.extend((v as i32).to_le_bytes());
}

/// `tol` 0: the same number bit for bit (the kernels round as the CPU does).
fn close(what: &str, got: f64, want: f64, tol: f64) {
    let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
    assert!(
        same || (tol > 0.0 && (got - want).abs() <= tol * want.abs().max(1.0)),
        "{what}: kernel {got:e}, CPU {want:e}"
    );
}

fn rand_spd(rng: &mut StdRng, n: usize, floor: f64) -> Vec<f64> {
    let a: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let mut m = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut s = 0.0;
            for k in 0..n {
                s += a[i * n + k] * a[j * n + k];
            }
            m[i * n + j] = s + if i == j { floor } else { 0.0 };
        }
    }
    m
}

/// Runs one scripted scenario through the emulated kernels and the CPU API.
fn scenario<T: Real>(
    cxx: &str,
    dir: &Path,
    m: &Model,
    kin: Option<Kinematics>,
    bake: bool,
    seed: u64,
    tol: f64,
) {
    let (nx, ny) = (m.nx(), m.ny());
    let (b, steps) = (19usize, 12usize);
    let tag = format!(
        "tracker_nx{nx}_ny{ny}_{}_{}",
        T::NAME,
        if bake { "baked" } else { "params" }
    );
    let src = format!(
        "{SHIM}\n{}\n{HARNESS}",
        source(nx, ny, T::NAME, bake.then_some(m), Part::Tracker)
    );
    let exe = compile(
        cxx,
        dir,
        &tag,
        &src,
        &["-std=c++17", "-O1", "-w", "-ffp-contract=off"],
    );

    let mut rng = StdRng::seed_from_u64(seed);
    let mut st = BatchState::<T>::new(m, b).expect("state");
    if let Some(k) = kin {
        st = st.with_kinematics(k).expect("kinematics");
    }
    let mut input = Vec::new();
    put_i(&mut input, b);
    put_i(&mut input, steps);
    put(&mut input, &model_params::<T>(m));
    put_i(&mut input, kin.map_or(0, |k| k.order()));
    input.extend(kin.map_or(0.0, |k| k.q()).to_le_bytes());
    // What the CPU saw after each call: (live slots, ll, zhat, S, applied).
    let mut seen = Vec::new();
    for t in 0..steps {
        // Remove a few live targets, add new ones with their own priors.
        let live: Vec<usize> = st.live_slots().collect();
        let rem: Vec<usize> = live
            .into_iter()
            .filter(|_| t > 2 && rng.gen::<f64>() < 0.15)
            .collect();
        for &s in &rem {
            st.remove(s).expect("remove");
        }
        put_i(&mut input, rem.len());
        for &s in &rem {
            put_i(&mut input, s);
        }
        let nadd = if t == 0 {
            14
        } else {
            rng.gen_range(0..4).min(b - st.len())
        };
        let mut slots = Vec::new();
        let (mut xs, mut ps) = (Vec::new(), Vec::new());
        for _ in 0..nadd {
            let x0: Vec<T> = (0..nx).map(|_| T::of(rng.gen_range(-2.0..2.0))).collect();
            let p0: Vec<T> = rand_spd(&mut rng, nx, 0.5).into_iter().map(T::of).collect();
            slots.push(st.add_with_prior(&x0, &p0).expect("add"));
            xs.extend(x0);
            ps.extend(p0);
        }
        put_i(&mut input, nadd);
        for &s in &slots {
            put_i(&mut input, s);
        }
        put(&mut input, &xs);
        put(&mut input, &ps);
        // Predict: none at step 0; per-target intervals on odd steps when the model has
        // kinematics, else the model's step; a control input every third step.
        let dts: Vec<f64> = (0..b).map(|_| rng.gen_range(0.1..1.5)).collect();
        let ctrl: Vec<T> = (0..b * nx)
            .map(|_| T::of(rng.gen_range(-0.3..0.3)))
            .collect();
        let mode = if t == 0 {
            0
        } else if kin.is_some() && t % 2 == 1 {
            2
        } else {
            1
        };
        let with_ctrl = t % 3 == 2;
        if mode > 0 {
            let mut p = Prediction::new();
            if mode == 2 {
                p = p.per_target_dt(&dts);
            }
            if with_ctrl {
                p = p.control(&ctrl);
            }
            st.predict_with(&p).expect("predict");
        }
        put_i(&mut input, mode);
        if mode == 2 {
            for d in &dts {
                input.extend(d.to_le_bytes());
            }
        }
        put_i(&mut input, usize::from(with_ctrl));
        if with_ctrl {
            put(&mut input, &ctrl);
        }
        // Update (measure only every fourth step): missing rows, a mask, per-target R.
        let apply = t % 4 != 3;
        let z: Vec<T> = (0..b * ny)
            .map(|i| {
                if (i / ny + t) % 5 == 0 {
                    T::nan()
                } else {
                    T::of(rng.gen_range(-3.0..3.0))
                }
            })
            .collect();
        let mask: Vec<bool> = (0..b).map(|s| (s + t) % 6 != 1).collect();
        let with_mask = t % 2 == 0;
        let r: Vec<T> = (0..b)
            .flat_map(|_| rand_spd(&mut rng, ny, 0.3))
            .map(T::of)
            .collect();
        let with_r = t % 3 == 1;
        if apply {
            st.update(&z, with_mask.then_some(&mask[..]), with_r.then_some(&r[..]))
                .expect("update");
        } else {
            st.measure(with_r.then_some(&r[..])).expect("measure");
        }
        put_i(&mut input, usize::from(apply));
        put(&mut input, &z);
        put_i(&mut input, usize::from(with_mask));
        if with_mask {
            input.extend(mask.iter().map(|&v| u8::from(v)));
        }
        put_i(&mut input, usize::from(with_r));
        if with_r {
            put(&mut input, &r);
        }
        seen.push((
            st.live_slots().collect::<Vec<_>>(),
            st.logliks().to_vec(),
            st.predicted_measurements().to_vec(),
            st.innovation_covs().to_vec(),
            apply,
        ));
    }
    let stdout = run_piped(&exe, input, &tag);
    let (np, nyp) = (nx * (nx + 1) / 2, ny * (ny + 1) / 2);
    let pk = |i: usize, j: usize| {
        if i >= j {
            i * (i + 1) / 2 + j
        } else {
            j * (j + 1) / 2 + i
        }
    };
    let mut at = 0;
    for (t, (live, ll, zhat, s, apply)) in seen.iter().enumerate() {
        let kll: Vec<T> = take(&stdout, &mut at, b);
        let kz: Vec<T> = take(&stdout, &mut at, b * ny);
        let ks: Vec<T> = take(&stdout, &mut at, b * nyp);
        for &sl in live {
            if *apply {
                close(
                    &format!("{tag} step {t} slot {sl} loglik"),
                    kll[sl].to_f64(),
                    ll[sl].to_f64(),
                    tol,
                );
            }
            for a in 0..ny {
                close(
                    &format!("{tag} step {t} slot {sl} zhat"),
                    kz[a * b + sl].to_f64(),
                    zhat[sl * ny + a].to_f64(),
                    tol,
                );
                for c in 0..ny {
                    close(
                        &format!("{tag} step {t} slot {sl} S"),
                        ks[pk(a, c) * b + sl].to_f64(),
                        s[(sl * ny + a) * ny + c].to_f64(),
                        tol,
                    );
                }
            }
        }
    }
    let kx: Vec<T> = take(&stdout, &mut at, b * nx);
    let kp: Vec<T> = take(&stdout, &mut at, b * np);
    let err = u64::from_le_bytes(stdout[at..at + 8].try_into().expect("8 bytes"));
    assert_eq!(err, u64::MAX, "{tag}: error flag");
    for sl in st.live_slots() {
        let (x, p) = (st.mean(sl).expect("live"), st.cov(sl).expect("live"));
        for i in 0..nx {
            close(
                &format!("{tag} slot {sl} mean"),
                kx[i * b + sl].to_f64(),
                x[i].to_f64(),
                tol,
            );
            for j in 0..nx {
                close(
                    &format!("{tag} slot {sl} cov"),
                    kp[pk(i, j) * b + sl].to_f64(),
                    p[i * nx + j].to_f64(),
                    tol,
                );
            }
        }
    }
    eprintln!("{tag}: ok");
}

#[test]
fn tracker_kernels_match_the_cpu_per_step_api() {
    let Some(cxx) = compiler() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cv = constant_velocity(2, 1.0, 0.4, 1.5, 20.0).expect("cv model");
    let kin = Kinematics::constant_velocity(2, 0.4).expect("kinematics");
    let general = gpu_common::random_model(3, 2, 7);
    for bake in [true, false] {
        // Every quantity bit for bit, in f64 and in f32.
        scenario::<f64>(&cxx, dir.path(), &cv, Some(kin), bake, 1, 0.0);
        scenario::<f32>(&cxx, dir.path(), &cv, Some(kin), bake, 2, 0.0);
        scenario::<f64>(&cxx, dir.path(), &general, None, bake, 3, 0.0);
        scenario::<f32>(&cxx, dir.path(), &general, None, bake, 4, 0.0);
    }
}
