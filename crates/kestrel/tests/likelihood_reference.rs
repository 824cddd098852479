//! `exact` and `parallel` per-step log-likelihoods against statsmodels' `loglikeobs`
//! (AR(10) with measurement error fitted to the sunspot series with the stationary prior;
//! a local level model on the Nile series), missing values included. The reference files
//! are made by `scripts/likelihood_reference.py`.

use kestrel::likelihood::{loglik, Method, Options};
use kestrel::{Device, Measurements, Model};
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/likelihood")
        .join(name)
}

/// The model, the measurements and statsmodels' per-step log-likelihoods.
fn reference(name: &str) -> (Model, Measurements<f64>, Vec<f64>) {
    let model = kestrel::model::load_model(data(&format!("{name}.toml"))).unwrap();
    let text = std::fs::read_to_string(data(&format!("{name}.csv"))).unwrap();
    let (mut z, mut ll) = (Vec::new(), Vec::new());
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        z.push(if f[1].is_empty() {
            f64::NAN
        } else {
            f[1].parse().unwrap()
        });
        ll.push(f[2].parse().unwrap());
    }
    let steps = z.len();
    (model, Measurements::new(1, steps, 1, z).unwrap(), ll)
}

fn check(name: &str, method: Method) {
    let (model, z, want) = reference(name);
    let got = loglik(Device::Cpu, &model, &z, method, &Options::default()).unwrap();
    assert_eq!(got.values.len(), want.len());
    let mut worst = 0f64;
    for (t, (g, w)) in got.values.iter().zip(&want).enumerate() {
        let rel = (g - w).abs() / w.abs().max(1.0);
        assert!(
            rel <= 1e-8,
            "{name} {method:?} step {t}: {g} vs statsmodels {w}"
        );
        worst = worst.max(rel);
    }
    // The missing steps are in the file and count 0.
    assert!(z.data().iter().filter(|v| v.is_nan()).count() >= 4);
    eprintln!("{name} {method:?}: worst relative difference {worst:.2e}");
}

#[test]
fn ar10_sunspots_exact() {
    check("ar10_sunspots", Method::Exact);
}

#[test]
fn ar10_sunspots_parallel() {
    check("ar10_sunspots", Method::Parallel);
}

#[test]
fn local_level_nile_exact() {
    check("local_level_nile", Method::Exact);
}

#[test]
fn local_level_nile_parallel() {
    check("local_level_nile", Method::Parallel);
}

/// The stationary prior reproduces statsmodels' initialisation: the first step's value
/// (which depends on nothing but P0) matches on its own.
#[test]
fn stationary_prior_first_step() {
    let (model, z, want) = reference("ar10_sunspots");
    let p00 = model.prior().p0[(0, 0)];
    let s = p00 + model.r()[(0, 0)];
    let z0 = z.data()[0];
    let ll0 = -0.5 * ((2.0 * std::f64::consts::PI * s).ln() + z0 * z0 / s);
    assert!(
        (ll0 - want[0]).abs() <= 1e-10 * want[0].abs(),
        "{ll0} vs {}",
        want[0]
    );
}
