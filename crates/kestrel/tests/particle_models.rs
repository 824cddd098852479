//! The model file's particle-filter kinds: parsing, errors naming the key, simulation
//! and filtering of each nonlinear kind.

use kestrel::particle::{
    particle_filter_cpu, pf_model_from_toml, simulate, Batch, PfKind, PfOptions,
};
use std::path::Path;

fn parse(text: &str) -> kestrel::Result<kestrel::particle::PfModel> {
    pf_model_from_toml(text, Path::new("m.toml"))
}

const RANGE: &str = r#"
[model]
kind = "range-only"
dt = 1.0
q = 0.01
sensors = [[0.0, 0.0], [100.0, 60.0]]
r = 1.0
[prior]
x0 = [20.0, 1.0, 80.0, 0.5]
P0 = [[4.0, 0.0, 0.0, 0.0], [0.0, 0.1, 0.0, 0.0], [0.0, 0.0, 4.0, 0.0], [0.0, 0.0, 0.0, 0.1]]
"#;

#[test]
fn kinds_parse() {
    let m = parse(RANGE).unwrap();
    assert!(matches!(m.kind, PfKind::RangeOnly { ref sensors, .. } if sensors.len() == 2));
    let b = parse("[model]\nkind = \"bearings-only\"\nq = 0.1\nsensors = [[0, 0], [10, 5]]\nr = 1e-4\n[prior]\nx0 = [1, 0, 2, 0]\np0 = 1.0\n").unwrap();
    assert!(matches!(b.kind, PfKind::BearingsOnly { .. }));
    let rb = parse("[model]\nkind = \"range-bearing\"\nq = 0.1\nradar = [1, 2]\nr_range = 1\nr_bearing = 1e-4\n[prior]\nx0 = [1, 0, 2, 0]\np0 = 1.0\n").unwrap();
    assert!(matches!(
        rb.kind,
        PfKind::RangeBearing {
            radar: [1.0, 2.0],
            ..
        }
    ));
    let sv =
        parse("[model]\nkind = \"stochastic-volatility\"\nmu = -1.0\nphi = 0.95\nsigma = 0.3\n")
            .unwrap();
    assert!(sv.prior.is_none());
    let lin = parse("[model]\nkind = \"cv\"\ndims = 2\nq = 0.1\nr = 1.0\n").unwrap();
    assert!(matches!(lin.kind, PfKind::Linear(ref l) if l.nx == 4 && l.ny == 2));
}

#[test]
fn errors_name_what_is_wrong() {
    let cases = [
        ("[model]\nkind = \"warp-drive\"\n", "unknown model kind \"warp-drive\""),
        (&RANGE.replace("sensors = [[0.0, 0.0], [100.0, 60.0]]\n", ""), "sensors: missing"),
        (&RANGE.replace("sensors = [[0.0, 0.0], [100.0, 60.0]]", "sensors = []"), "no sensors"),
        (&RANGE.replace("r = 1.0", "r = 1.0\nphi = 0.3"), "phi does not apply to kind = \"range-only\""),
        (&RANGE.replace("q = 0.01", "q = nan"), "q: must be finite"),
        (&RANGE.replace("r = 1.0", "r = inf"), "r: must be finite"),
        (&RANGE.replace("[20.0, 1.0, 80.0, 0.5]", "[20.0, 1.0]"), "x0: has 2 entries"),
        (&RANGE.replace("[100.0, 60.0]", "[100.0]"), "sensors[1]"),
        ("[model]\nkind = \"stochastic-volatility\"\nmu = 0\nphi = 1.0\nsigma = 1\n", "phi: must be in (-1, 1)"),
        ("[model]\nkind = \"stochastic-volatility\"\nmu = 0\nphi = 0.5\nsigma = 1\n[prior]\nx0 = [0]\n", "[prior]: does not apply"),
        ("[model]\nkind = \"custom\"\nsource = \"nope.cu\"\nnx = 2\nny = 1\n", "nope.cu"),
        ("[model]\nF = [[1.0]]\nQ = [[1.0]]\nH = [[1.0]]\nR = [[nan]]\n[prior]\nx0 = [0.0]\nP0 = [[1.0]]\n", "R"),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "expected \"{want}\" in: {e}");
        assert!(e.starts_with("m.toml") || e.contains("nope.cu"), "{e}");
    }
}

#[test]
fn every_nonlinear_kind_simulates_and_filters() {
    let models = [
        RANGE.to_string(),
        "[model]\nkind = \"bearings-only\"\nq = 0.01\nsensors = [[0, 0], [100, 0]]\nr = 1e-4\n[prior]\nx0 = [50, 0.5, 80, 0]\np0 = 1.0\n".into(),
        "[model]\nkind = \"range-bearing\"\nq = 0.01\nr_range = 1\nr_bearing = 1e-4\n[prior]\nx0 = [50, 0.5, 80, 0]\np0 = 1.0\n".into(),
        "[model]\nkind = \"stochastic-volatility\"\nmu = -1.0\nphi = 0.95\nsigma = 0.3\n".into(),
    ];
    for text in models {
        let m = parse(&text).unwrap();
        let (truth, z) = simulate(&m, 2, 30, 3, 0.1).unwrap();
        let out = particle_filter_cpu(&m, &z, &PfOptions::new(2_000)).unwrap();
        let est = &out.estimates;
        assert!(
            est.mean().iter().chain(est.cov()).all(|v| v.is_finite()),
            "{text}"
        );
        assert!(est.loglik().unwrap().iter().all(|v| v.is_finite()));
        if !matches!(m.kind, PfKind::StochasticVolatility { .. }) {
            // Position errors at the last step within 4 posterior standard deviations.
            for b in 0..2 {
                let (x, p) = (est.mean_at(b, 29), est.cov_at(b, 29));
                let t = &truth[(b * 30 + 29) * 4..(b * 30 + 30) * 4];
                for a in [0, 2] {
                    let err = (x[a] - t[a]).abs();
                    assert!(
                        err < 4.0 * p[a * 5].sqrt() + 1e-9,
                        "{text}: track {b} axis {a}: {err} vs sd {}",
                        p[a * 5].sqrt()
                    );
                }
            }
        }
    }
}

#[test]
fn custom_models_run_on_the_gpu_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.cu"), "// a model\n").unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, "[model]\nkind = \"custom\"\nsource = \"m.cu\"\nnx = 2\nny = 1\n[prior]\nx0 = [0, 0]\np0 = 1\n").unwrap();
    let m = kestrel::particle::load_pf_model(&path).unwrap();
    let e = m.check_cpu().unwrap_err().to_string();
    assert!(e.contains("GPU"), "{e}");
}

/// The built-in kinds read resampled particles where they are
/// (`advance_batch_from`): the same bits as copying them first and advancing the copy,
/// on a range-only and a stochastic-volatility model, 37 particles (two full groups of
/// lanes and a shorter tail).
#[test]
fn advancing_from_ancestors_equals_copying_them_first() {
    use kestrel::particle::ParticleModel;
    let sv = "[model]\nkind = \"stochastic-volatility\"\nmu = -1.0\nphi = 0.95\nsigma = 0.3\n";
    let kinds = [RANGE, sv];
    for text in kinds {
        let m = parse(text).unwrap();
        let (nx, ny) = (ParticleModel::<f64>::nx(&m), ParticleModel::<f64>::ny(&m));
        let n = 37;
        let src: Vec<f64> = (0..n * nx)
            .map(|i| ((i * 7919) % 101) as f64 * 0.37 - 9.0)
            .collect();
        let anc: Vec<u32> = (0..n as u32).map(|i| (i * i * 13 + 5) % n as u32).collect();
        let z: Vec<f64> = (0..ny).map(|q| 30.0 + q as f64).collect();
        let key = [17, 4];
        let (mut a, mut b) = (vec![f64::NAN; n * nx], vec![f64::NAN; n * nx]);
        let (mut la, mut lb) = (vec![f64::NAN; n], vec![f64::NAN; n]);
        let at = Batch {
            k: 3,
            key,
            b: 2,
            first: 100,
        };
        m.advance_batch_from(at, &src, &anc, &mut a, Some((&z, &mut la)));
        for (i, &p) in anc.iter().enumerate() {
            b[i * nx..(i + 1) * nx].copy_from_slice(&src[p as usize * nx..(p as usize + 1) * nx]);
        }
        m.advance_batch(at, &mut b, Some((&z, &mut lb)));
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{text}"
        );
        assert!(
            la.iter().zip(&lb).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{text}"
        );
        assert!(a.iter().all(|v| v.is_finite()));
    }
}

/// The built-in kinds' batch step (lanes, and the range-only model's explicit AVX2
/// where the processor has it) gives the per-particle methods' values bit for bit: the
/// prior (k = 0) and a step (k = 3) of 37 particles (two full groups of lanes and a
/// tail), their log-likelihoods included.
#[test]
fn batch_steps_equal_the_per_particle_methods() {
    use kestrel::particle::philox::{Normals, Purpose};
    use kestrel::particle::ParticleModel;
    let lin = "[model]\nkind = \"bearings-only\"\nq = 0.01\nsensors = [[0, 0], [100, 0]]\nr = 1e-4\n[prior]\nx0 = [50, 0.5, 80, 0]\np0 = 1.0\n";
    for text in [RANGE, lin] {
        let m = parse(text).unwrap();
        let (nx, ny) = (ParticleModel::<f64>::nx(&m), ParticleModel::<f64>::ny(&m));
        let n = 37;
        let z: Vec<f64> = (0..ny).map(|q| 30.0 + q as f64 * 0.1).collect();
        let (key, b, first) = ([5u32, 9u32], 3u32, 200u32);
        for k in [0usize, 3] {
            let x0: Vec<f64> = (0..n * nx)
                .map(|i| ((i * 7919) % 101) as f64 * 0.37 - 9.0)
                .collect();
            let mut got = x0.clone();
            let mut lg = vec![f64::NAN; n];
            let at = Batch { k, key, b, first };
            m.advance_batch(at, &mut got, Some((&z, &mut lg)));
            for p in 0..n {
                let mut x = x0[p * nx..(p + 1) * nx].to_vec();
                let mut noise =
                    Normals::<f64>::new(key, first + p as u32, b, k as u32, Purpose::Propagate);
                if k == 0 {
                    m.sample_prior(&mut x, &mut noise);
                } else {
                    m.propagate(k, &mut x, &mut noise);
                }
                let want_ll = m.log_likelihood(k, &x, &z);
                for a in 0..nx {
                    assert_eq!(
                        got[p * nx + a].to_bits(),
                        x[a].to_bits(),
                        "{text}: k {k}, particle {p}, value {a}"
                    );
                }
                assert_eq!(
                    lg[p].to_bits(),
                    want_ll.to_bits(),
                    "{text}: k {k}, particle {p}"
                );
            }
        }
    }
}
