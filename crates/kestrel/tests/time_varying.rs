//! Time-varying models from files (`[model] kind = "time-varying"`, per-step matrices in an
//! `.npz`): the file round-trips exactly; every method of the filter, the smoothers and
//! the retrodiction on the model read back equals a textbook loop over the per-step
//! matrices (tests/common) on fresh random models and measurements with missing values,
//! f64 and f32; bad files get one error naming the file, the array and the shapes.

mod common;

use common::{max_rel_err, random_measurements, random_tv_model, textbook_filter, textbook_smooth};
use kestrel::model::{load_linear_model, save_time_varying_model, LinearModel};
use kestrel::parallel::{self, Moments};
use kestrel::{
    filter_on, smooth_on, Device, Estimates, FilterMethod, FilterOptions, Measurements, Real,
    ScanAlgorithm, SmoothMethod, StateSpace,
};
use std::path::Path;

struct Reference {
    mean: Vec<f64>,
    cov: Vec<f64>,
    loglik: Vec<f64>,
    smean: Vec<f64>,
    scov: Vec<f64>,
}

/// The textbook filter and RTS smoother of every track, flattened as Estimates are.
fn reference<M: StateSpace>(m: &M, z: &Measurements<f64>) -> Reference {
    let (ny, t) = (m.ny(), z.steps());
    let mut r = Reference {
        mean: vec![],
        cov: vec![],
        loglik: vec![],
        smean: vec![],
        scov: vec![],
    };
    for b in 0..z.tracks() {
        let f = textbook_filter(m, &z.data()[b * t * ny..(b + 1) * t * ny], t);
        let (xs, ps) = textbook_smooth(m, &f);
        for k in 0..t {
            r.mean.extend(f.mean[k].iter());
            r.cov.extend(f.cov[k].transpose().iter());
            r.loglik.push(f.loglik[k]);
            r.smean.extend(xs[k].iter());
            r.scov.extend(ps[k].transpose().iter());
        }
    }
    r
}

fn as_f64<T: Real>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

fn close<T: Real>(what: &str, got: &[T], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let e = max_rel_err(as_f64(got), want.iter().copied());
    assert!(
        e < tol,
        "{what}: max relative error {e:e} (tolerance {tol:e})"
    );
}

fn load(dir: &Path, seed: u64, nx: usize, ny: usize, t: usize) -> LinearModel {
    let tv = random_tv_model(seed, nx, ny, t);
    let toml = dir.join(format!("m{seed}.toml"));
    save_time_varying_model(&tv, &toml, &dir.join(format!("steps{seed}.npz"))).unwrap();
    let back = load_linear_model(&toml).unwrap();
    assert_eq!(back.varying(), Some(&tv), "the file round-trips exactly");
    back
}

fn check_all<T: Real>(m: &LinearModel, z64: &Measurements<f64>, tol: f64, tag: &str) {
    let r = reference(m, z64);
    let z: Measurements<T> = z64.cast();
    let opts = FilterOptions::default();
    let mut filters = vec![("sequential", FilterMethod::Sequential)];
    let mut smoothers = vec![("rts", SmoothMethod::Rts)];
    for alg in [
        ScanAlgorithm::Fastest,
        ScanAlgorithm::Sequential,
        ScanAlgorithm::Blelloch,
        ScanAlgorithm::HillisSteele,
        ScanAlgorithm::LadnerFischer,
        ScanAlgorithm::Sengupta(2),
    ] {
        filters.push(("parallel", FilterMethod::Parallel(alg)));
        smoothers.push(("parallel-rts", SmoothMethod::ParallelRts(alg)));
        smoothers.push(("two-filter", SmoothMethod::TwoFilter(alg)));
    }
    for (name, method) in filters {
        let f = filter_on(Device::Cpu, m, &z, method, &opts)
            .unwrap()
            .filtered;
        let w = format!("{tag} filter {name} {method:?}");
        close(&format!("{w} mean"), f.mean(), &r.mean, tol);
        close(&format!("{w} cov"), f.cov(), &r.cov, tol);
        close(&format!("{w} loglik"), f.loglik().unwrap(), &r.loglik, tol);
    }
    for (name, method) in smoothers {
        let s = smooth_on(Device::Cpu, m, &z, method).unwrap();
        let w = format!("{tag} smooth {name} {method:?}");
        close(
            &format!("{w} filtered mean"),
            s.filtered.mean(),
            &r.mean,
            tol,
        );
        close(&format!("{w} mean"), s.smoothed.mean(), &r.smean, tol);
        close(&format!("{w} cov"), s.smoothed.cov(), &r.scov, tol);
    }
    let f: Estimates<T> = filter_on(Device::Cpu, m, &z, FilterMethod::Sequential, &opts)
        .unwrap()
        .filtered;
    for alg in [ScanAlgorithm::Sequential, ScanAlgorithm::Fastest] {
        let s = parallel::retrodict(Device::Cpu, m, &f, alg, Moments::MeansAndCovariances).unwrap();
        close(
            &format!("{tag} retrodict {alg:?} mean"),
            s.mean(),
            &r.smean,
            tol,
        );
        close(
            &format!("{tag} retrodict {alg:?} cov"),
            s.cov(),
            &r.scov,
            tol,
        );
        let s = parallel::retrodict(Device::Cpu, m, &f, alg, Moments::MeansOnly).unwrap();
        close(
            &format!("{tag} retrodict means {alg:?}"),
            s.mean(),
            &r.smean,
            tol,
        );
        assert!(s.cov().is_empty(), "means only: no covariances");
    }
}

#[test]
fn every_method_equals_the_textbook_loop_on_a_model_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    for (case, &(nx, ny, t, b)) in [(2, 1, 1, 1), (4, 2, 40, 3), (3, 2, 57, 2), (5, 3, 30, 9)]
        .iter()
        .enumerate()
    {
        let seed = 10 + case as u64;
        let m = load(dir.path(), seed, nx, ny, t);
        let z = random_measurements(seed + 100, b, t, ny, 0.2);
        check_all::<f64>(&m, &z, 1e-9, &format!("f64 case {case}"));
        check_all::<f32>(&m, &z, 2e-3, &format!("f32 case {case}"));
    }
}

#[test]
fn a_model_longer_than_the_measurements_uses_its_first_steps() {
    let dir = tempfile::tempdir().unwrap();
    let m = load(dir.path(), 7, 3, 1, 50);
    let z = random_measurements(8, 2, 20, 1, 0.1);
    check_all::<f64>(&m, &z, 1e-9, "longer model");
    let z = random_measurements(9, 2, 51, 1, 0.1);
    let e = filter_on(
        Device::Cpu,
        &m,
        &z,
        FilterMethod::Sequential,
        &FilterOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("50 steps") && e.contains("51"), "{e}");
    let e = smooth_on(
        Device::Cpu,
        &m,
        &z,
        SmoothMethod::TwoFilter(ScanAlgorithm::Fastest),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("50 steps") && e.contains("51"), "{e}");
}

/// Writes the TOML and an `.npz` of `arrays` into `dir`; returns the loader's error.
fn bad(dir: &Path, arrays: &[(&str, &[usize], &[f64])], prior: &str) -> String {
    let npz = dir.join("steps.npz");
    kestrel::io::write_npz_arrays(&npz, arrays).unwrap();
    let toml = dir.join("m.toml");
    std::fs::write(
        &toml,
        format!("[model]\nkind = \"time-varying\"\nfile = \"steps.npz\"\n{prior}"),
    )
    .unwrap();
    load_linear_model(&toml).unwrap_err().to_string()
}

#[test]
fn bad_files_are_refused_with_the_file_the_array_and_the_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prior = "[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n";
    let t = 4;
    let eye2: Vec<f64> = (0..t).flat_map(|_| [1.0, 0.0, 0.0, 1.0]).collect();
    let h: Vec<f64> = (0..t).flat_map(|_| [1.0, 0.0]).collect();
    let r: Vec<f64> = vec![2.0; t];
    let f = ("F", &[t, 2, 2][..], &eye2[..]);
    let q = ("Q", &[t, 2, 2][..], &eye2[..]);
    let hh = ("H", &[t, 1, 2][..], &h[..]);
    let rr = ("R", &[t, 1, 1][..], &r[..]);
    // A good file first: the cases below differ from it in one thing.
    let npz = d.join("steps.npz");
    kestrel::io::write_npz_arrays(&npz, &[f, q, hh, rr]).unwrap();
    std::fs::write(
        d.join("ok.toml"),
        format!("[model]\nkind = \"time-varying\"\nfile = \"steps.npz\"\n{prior}"),
    )
    .unwrap();
    let ok = load_linear_model(d.join("ok.toml")).unwrap();
    assert_eq!((ok.nx(), ok.ny(), ok.steps_covered()), (2, 1, Some(t)));

    let e = bad(d, &[f, q, hh], prior);
    assert!(
        e.contains("steps.npz") && e.contains("array R is missing") && e.contains("H [4, 1, 2]"),
        "{e}"
    );
    let r2: Vec<f64> = vec![2.0; 3];
    let e = bad(d, &[f, q, hh, ("R", &[3, 1, 1], &r2)], prior);
    assert!(
        e.contains("steps.npz")
            && e.contains("array R has shape [3, 1, 1]")
            && e.contains("[4, 1, 1]"),
        "{e}"
    );
    let e = bad(d, &[f, ("Q", &[t, 2, 1], &h), hh, rr], prior);
    assert!(
        e.contains("array Q has shape [4, 2, 1], expected [T, nx, nx] = [4, 2, 2]"),
        "{e}"
    );
    let e = bad(d, &[("F", &[t, 2, 1], &h), q, hh, rr], prior);
    assert!(
        e.contains("array F has shape [4, 2, 1], expected [T, nx, nx]"),
        "{e}"
    );
    let e = bad(d, &[f, q, ("H", &[t, 2], &eye2[..8]), rr], prior);
    assert!(e.contains("array H has shape [4, 2]"), "{e}");
    let e = bad(d, &[f, q, hh, rr, ("u", &[t, 3], &[0.0; 12])], prior);
    assert!(
        e.contains("array u has shape [4, 3], expected [T, nx] = [4, 2]"),
        "{e}"
    );
    let mut qn = eye2.clone();
    qn[9] = f64::NAN;
    let e = bad(d, &[f, ("Q", &[t, 2, 2], &qn), hh, rr], prior);
    assert!(
        e.contains("array Q") && e.contains("[2][0][1]") && e.contains("not finite"),
        "{e}"
    );
    let mut rn = r.clone();
    rn[3] = -1.0;
    let e = bad(d, &[f, q, hh, ("R", &[t, 1, 1], &rn)], prior);
    assert!(
        e.contains("steps.npz") && e.contains("step 3") && e.contains("R"),
        "{e}"
    );
    let e = bad(d, &[f, q, hh, rr, ("G", &[1], &[1.0])], prior);
    assert!(e.contains("array G is not a model array"), "{e}");
    let e = bad(d, &[f, q, hh, rr], "[prior]\nx0 = [0.0]\nP0 = [[1.0]]\n");
    assert!(e.contains("m.toml") && e.contains("x0"), "{e}");
    let e = bad(d, &[f, q, hh, rr], "");
    assert!(e.contains("m.toml") && e.contains("[prior]"), "{e}");
    std::fs::write(
        d.join("nofile.toml"),
        format!("[model]\nkind = \"time-varying\"\n{prior}"),
    )
    .unwrap();
    let e = load_linear_model(d.join("nofile.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nofile.toml") && e.contains("file: missing"),
        "{e}"
    );
    std::fs::write(
        d.join("absent.toml"),
        format!("[model]\nkind = \"time-varying\"\nfile = \"none.npz\"\n{prior}"),
    )
    .unwrap();
    let e = load_linear_model(d.join("absent.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none.npz") && e.contains("absent.toml"), "{e}");
    std::fs::write(
        d.join("extra.toml"),
        format!("[model]\nkind = \"time-varying\"\nfile = \"steps.npz\"\nF = [[1.0]]\n{prior}"),
    )
    .unwrap();
    let e = load_linear_model(d.join("extra.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("F") && e.contains("not used by"), "{e}");
    // The time-invariant reader names the reader that takes it.
    let e = kestrel::model::load_model(d.join("ok.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("time-varying") && e.contains("load_linear_model"),
        "{e}"
    );
}
