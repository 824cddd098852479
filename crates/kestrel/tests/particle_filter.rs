//! The bootstrap filter against the Kalman filter on a linear-Gaussian model (where the
//! Kalman filter is exact): means, covariances and total log-likelihood converge at the
//! Monte Carlo rate, with tolerances computed from the replicas' own spread; results
//! do not depend on the thread count or on how the work is split; bad input is refused.

use kestrel::particle::philox::Normals;
use kestrel::particle::{
    particle_filter_cpu, pf_model_from_toml, ParticleModel, PfModel, PfOptions, Resampler,
};
use kestrel::{FilterOptions, Measurements, Model};
use nalgebra::{DMatrix, DVector};

fn cv_model() -> Model {
    let q = 0.1;
    Model::new(
        DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 0.0, 1.0]),
        DMatrix::from_row_slice(2, 2, &[q / 3.0, q / 2.0, q / 2.0, q]),
        DMatrix::from_row_slice(1, 2, &[1.0, 0.0]),
        DMatrix::from_row_slice(1, 1, &[1.0]),
        DVector::from_vec(vec![0.0, 1.0]),
        DMatrix::from_row_slice(2, 2, &[4.0, 0.0, 0.0, 1.0]),
    )
    .unwrap()
}

/// One simulated track of `steps` steps (one missing measurement), copied `reps` times.
fn replicated(model: &Model, steps: usize, reps: usize) -> (Measurements<f64>, Measurements<f64>) {
    let mut sim = kestrel::sim::simulate(model, 1, steps, 4, 0.0).unwrap();
    if steps > 7 {
        sim.measurements.data_mut()[7] = f64::NAN;
    }
    let one = sim.measurements;
    let data: Vec<f64> = (0..reps).flat_map(|_| one.data().iter().copied()).collect();
    (
        one.clone(),
        Measurements::new(reps, steps, 1, data).unwrap(),
    )
}

struct Errors {
    /// Per replica: normalised squared error of the means and covariances over all
    /// steps, and the error of the total log-likelihood.
    mean_sq: Vec<f64>,
    cov_sq: Vec<f64>,
    ll: Vec<f64>,
}

fn errors(n: usize, reps: usize, resampler: Resampler) -> Errors {
    let model = cv_model();
    let steps = 20;
    let (one, z) = replicated(&model, steps, reps);
    let kf = kestrel::filter(&model, &one, &FilterOptions::default())
        .unwrap()
        .filtered;
    let mut opts = PfOptions::new(n);
    opts.resampler = resampler;
    opts.seed = 17;
    let pf = particle_filter_cpu(&PfModel::linear(&model).unwrap(), &z, &opts).unwrap();
    let est = &pf.estimates;
    let mut e = Errors {
        mean_sq: vec![],
        cov_sq: vec![],
        ll: vec![],
    };
    for r in 0..reps {
        let (mut m2, mut c2) = (0.0, 0.0);
        for k in 0..steps {
            let (pm, km) = (est.mean_at(r, k), kf.mean_at(0, k));
            let (pc, kc) = (est.cov_at(r, k), kf.cov_at(0, k));
            for a in 0..2 {
                m2 += (pm[a] - km[a]).powi(2) / kc[a * 3];
                for b in 0..2 {
                    c2 += (pc[a * 2 + b] - kc[a * 2 + b]).powi(2) / (kc[a * 3] * kc[b * 3]);
                }
            }
        }
        e.mean_sq.push(m2);
        e.cov_sq.push(c2);
        let ll_pf: f64 = est.loglik().unwrap()[r * steps..(r + 1) * steps]
            .iter()
            .sum();
        e.ll.push(ll_pf - kf.total_loglik());
        assert_eq!(
            est.loglik().unwrap()[r * steps + 7],
            0.0,
            "missing step: no update"
        );
    }
    e
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sd(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

#[test]
fn converges_to_the_kalman_filter_at_the_monte_carlo_rate() {
    let reps = 16;
    let ns = [400usize, 4_000, 40_000];
    let runs: Vec<Errors> = ns
        .iter()
        .map(|&n| errors(n, reps, Resampler::Systematic))
        .collect();
    for (n, e) in ns.iter().zip(&runs) {
        // The likelihood estimate is unbiased, its logarithm biased by about -Var/2: the
        // replicas' mean error lies within 4.5 standard errors of that.
        let s = sd(&e.ll);
        let tol = 4.5 * s / (reps as f64).sqrt() + s * s / 2.0;
        assert!(
            mean(&e.ll).abs() < tol,
            "N = {n}: log-likelihood error {} (tolerance {tol})",
            mean(&e.ll)
        );
    }
    // Mean squared errors fall as 1 / N: the log-log slope of the RMS error is -1/2.
    // Each MSE is a mean over `reps` replicas, relative sd <= sqrt(2 / reps); the slope
    // over two decades then has sd <= sqrt(2 * 2 / reps) / 2 / ln(100).
    let slope_sd = (4.0 / reps as f64).sqrt() / 2.0 / (100f64).ln();
    for (what, get) in [
        (
            "mean",
            (|e: &Errors| mean(&e.mean_sq)) as fn(&Errors) -> f64,
        ),
        ("covariance", |e: &Errors| mean(&e.cov_sq)),
        ("log-likelihood", |e: &Errors| {
            mean(&e.ll.iter().map(|x| x * x).collect::<Vec<_>>())
        }),
    ] {
        let slope = 0.5 * (get(&runs[2]) / get(&runs[0])).ln() / (100f64).ln();
        assert!(
            (slope + 0.5).abs() < 4.0 * slope_sd,
            "{what}: RMS error falls as N^{slope:.3} (expected -0.5 +- {:.3})",
            4.0 * slope_sd
        );
    }
    // And the error at the largest N is small in absolute terms: the normalised mean
    // error over 20 steps x 2 components is about 40 x (a few) / N.
    assert!(
        mean(&runs[2].mean_sq) < 40.0 * 50.0 / 40_000.0,
        "{}",
        mean(&runs[2].mean_sq)
    );
}

#[test]
fn every_resampler_tracks_the_kalman_filter() {
    for r in Resampler::ALL {
        let e = errors(3_000, 4, r);
        // Normalised squared error per (step, component) of order a few / N.
        let per = mean(&e.mean_sq) / 40.0;
        assert!(per < 50.0 / 3_000.0, "{r}: {per}");
    }
}

#[test]
fn results_do_not_depend_on_threads_or_on_the_split() {
    let model = cv_model();
    let (one, _) = replicated(&model, 6, 1);
    let pm = PfModel::linear(&model).unwrap();
    let mut opts = PfOptions::new(70_000); // more than 4 chunks: particles spread over cores
    opts.ess_threshold = 1.0;
    let run = |threads: usize, z: &Measurements<f64>| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| particle_filter_cpu(&pm, z, &opts).unwrap())
    };
    let a = run(1, &one);
    let b = run(2, &one);
    assert_eq!(a.estimates, b.estimates);
    assert_eq!(a.ess, b.ess);
    // More threads than this machine may have cores (the crew's helpers not bound to
    // cores of their own, waiting by yielding).
    let b3 = run(3, &one);
    assert_eq!(a.estimates, b3.estimates);
    assert_eq!(a.ess, b3.ess);
    // Four filters side by side (one per task): filter 0 is the same filter.
    let four = Measurements::new(4, 6, 1, one.data().repeat(4)).unwrap();
    let c = run(2, &four);
    assert_eq!(c.estimates.mean_at(0, 5), a.estimates.mean_at(0, 5));
    assert_eq!(
        c.estimates.loglik().unwrap()[..6],
        a.estimates.loglik().unwrap()[..]
    );
    // Buffers reused from filter to filter (one thread) start each filter afresh.
    let small = {
        let mut o = opts;
        o.particles = 500;
        o
    };
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let many = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let a4 = one_thread.install(|| particle_filter_cpu(&pm, &four, &small).unwrap());
    let b4 = many.install(|| particle_filter_cpu(&pm, &four, &small).unwrap());
    let alone = particle_filter_cpu(&pm, &one, &small).unwrap();
    assert_eq!(a4.estimates, b4.estimates);
    assert_eq!(a4.estimates.mean_at(3, 5), b4.estimates.mean_at(3, 5));
    assert_eq!(a4.estimates.mean_at(0, 5), alone.estimates.mean_at(0, 5));
    // Filters differ from each other (their own random numbers).
    assert_ne!(c.estimates.mean_at(1, 5), c.estimates.mean_at(0, 5));
}

#[test]
fn f32_agrees_with_f64_to_its_precision() {
    let model = cv_model();
    let (one, _) = replicated(&model, 10, 1);
    let pm = PfModel::linear(&model).unwrap();
    let opts = PfOptions::new(2_000);
    let a = particle_filter_cpu(&pm, &one, &opts).unwrap();
    let b = particle_filter_cpu(&pm, &one.cast::<f32>(), &opts).unwrap();
    // Same random numbers; f32 rounding may flip a resampling choice now and then, which
    // moves the estimate by about one particle's share of the spread.
    for k in 0..10 {
        for a_ in 0..2 {
            let (x, y) = (
                a.estimates.mean_at(0, k)[a_],
                b.estimates.mean_at(0, k)[a_] as f64,
            );
            let s = a.estimates.cov_at(0, k)[a_ * 3].sqrt();
            assert!((x - y).abs() < 0.05 * s, "step {k}: {x} vs {y}");
        }
    }
}

#[test]
fn tiny_likelihoods_do_not_underflow() {
    // A measurement 1000 standard deviations off: every weight is exp(-5e5) before the
    // shift; the estimate stays finite and the log-likelihood is the huge negative it is.
    let model = cv_model();
    let z = Measurements::<f64>::new(1, 3, 1, vec![0.0, 1000.0, 2.0]).unwrap();
    let out =
        particle_filter_cpu(&PfModel::linear(&model).unwrap(), &z, &PfOptions::new(1000)).unwrap();
    let ll = out.estimates.loglik().unwrap();
    assert!(ll.iter().all(|v| v.is_finite()), "{ll:?}");
    assert!(ll[1] < -1e5, "{ll:?}");
    assert!(out.estimates.mean().iter().all(|v| v.is_finite()));
    assert!(out.ess.iter().all(|&e| (1.0..=1000.0).contains(&e)));
}

#[test]
fn bad_input_is_refused() {
    let model = cv_model();
    let pm = PfModel::linear(&model).unwrap();
    let z = Measurements::new(1, 2, 1, vec![0.0, 1.0]).unwrap();
    let e = particle_filter_cpu(&pm, &z, &PfOptions::new(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 1"), "{e}");
    // Too many for memory: refused before allocating.
    let e = particle_filter_cpu(&pm, &z, &PfOptions::new(1 << 31))
        .unwrap_err()
        .to_string();
    assert!(e.contains("would need") && e.contains("GB"), "{e}");
    let inf = Measurements::new(1, 2, 1, vec![0.0, f64::INFINITY]).unwrap();
    assert!(particle_filter_cpu(&pm, &inf, &PfOptions::new(10)).is_err());
    let wrong = Measurements::new(1, 2, 2, vec![0.0; 4]).unwrap();
    let e = particle_filter_cpu(&pm, &wrong, &PfOptions::new(10))
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 components"), "{e}");
    let mut o = PfOptions::new(10);
    o.ess_threshold = f64::NAN;
    assert!(particle_filter_cpu(&pm, &z, &o).is_err());
}

/// A model that hides the built-in kinds' batch form: the filter goes particle by
/// particle, with the C library's logarithm, sine and cosine in the Gaussians.
struct OneByOne(PfModel);

impl ParticleModel<f64> for OneByOne {
    fn nx(&self) -> usize {
        ParticleModel::<f64>::nx(&self.0)
    }
    fn ny(&self) -> usize {
        ParticleModel::<f64>::ny(&self.0)
    }
    fn sample_prior(&self, x: &mut [f64], noise: &mut Normals<f64>) {
        self.0.sample_prior(x, noise)
    }
    fn propagate(&self, k: usize, x: &mut [f64], noise: &mut Normals<f64>) {
        self.0.propagate(k, x, noise)
    }
    fn log_likelihood(&self, k: usize, x: &[f64], z: &[f64]) -> f64 {
        self.0.log_likelihood(k, x, z)
    }
    fn measure(&self, k: usize, x: &[f64], noise: &mut Normals<f64>, z: &mut [f64]) {
        self.0.measure(k, x, noise, z)
    }
}

#[test]
fn batched_kinds_are_the_particle_by_particle_filter_to_rounding() {
    // Every kind with a batch form; N not a multiple of the lanes; missing values.
    let kinds = [
        "[model]\nkind = \"range-only\"\ndt = 1.0\nq = 0.05\nsensors = [[0.0, 0.0], [150.0, 40.0]]\nr = 1.0\n[prior]\nx0 = [20.0, 1.0, 100.0, -0.3]\np0 = 4.0\n",
        "[model]\nkind = \"bearings-only\"\ndt = 1.0\nq = 0.01\nsensors = [[0.0, 0.0], [150.0, 40.0]]\nr = 0.001\n[prior]\nx0 = [20.0, 1.0, 100.0, -0.3]\np0 = 4.0\n",
        "[model]\nkind = \"range-bearing\"\ndt = 1.0\nq = 0.05\nradar = [-10.0, 5.0]\nr_range = 1.0\nr_bearing = 0.001\n[prior]\nx0 = [20.0, 1.0, 100.0, -0.3]\np0 = 4.0\n",
        "[model]\nkind = \"stochastic-volatility\"\nmu = -1.0\nphi = 0.95\nsigma = 0.3\n",
        "[model]\nkind = \"cv\"\ndims = 2\nq = 0.3\nr = 2.0\n",
    ];
    for src in kinds {
        let model = pf_model_from_toml(src, std::path::Path::new("m.toml")).unwrap();
        let (_, mut z) = kestrel::particle::simulate(&model, 3, 8, 5, 0.0).unwrap();
        z.data_mut()[2 * ParticleModel::<f64>::ny(&model)] = f64::NAN;
        let mut opts = PfOptions::new(1003);
        opts.seed = 8;
        opts.ess_threshold = 0.7;
        let fast = particle_filter_cpu(&model, &z, &opts).unwrap();
        let slow = particle_filter_cpu(&OneByOne(model.clone()), &z, &opts).unwrap();
        let (a, b) = (&fast.estimates, &slow.estimates);
        let mut differ = 0;
        for tr in 0..3 {
            let mut same = true;
            for k in 0..8 {
                let nx = a.nx();
                for i in 0..nx {
                    let sd = b.cov_at(tr, k)[i * nx + i].sqrt();
                    same &= (a.mean_at(tr, k)[i] - b.mean_at(tr, k)[i]).abs() <= 1e-9 * sd;
                    for j in 0..nx {
                        let (p, q) = (a.cov_at(tr, k)[i * nx + j], b.cov_at(tr, k)[i * nx + j]);
                        same &= (p - q).abs() <= 1e-9 * sd * b.cov_at(tr, k)[j * nx + j].sqrt();
                    }
                }
                let (p, q) = (
                    a.loglik().unwrap()[tr * 8 + k],
                    b.loglik().unwrap()[tr * 8 + k],
                );
                same &= (p - q).abs() <= 1e-9 * (1.0 + q.abs());
                let (p, q) = (fast.ess[tr * 8 + k], slow.ess[tr * 8 + k]);
                same &= (p - q).abs() <= 1e-9 * q;
            }
            if !same {
                differ += 1;
            }
        }
        // Draws that differ in the last bits move a weight across a resampling position
        // rarely: at most one of the three filters.
        eprintln!(
            "{}: {differ} of 3 filters flipped a resampling choice",
            model.kind_name()
        );
        assert!(
            differ <= 1,
            "{}: {differ} of 3 filters differ",
            model.kind_name()
        );
    }
}

/// Chunks of a batch filtered apart, each with the index of its first track as
/// `track_offset` (as `kestrel.dask` runs them), give exactly the whole batch's result,
/// for every resampler, in both precisions; without the offset they do not.
#[test]
fn chunks_with_their_track_offsets_equal_the_whole_batch() {
    let model = pf_model_from_toml(
        "[model]\nkind = \"range-only\"\nsensors = [[-50.0, 0.0], [50.0, 0.0]]\nq = 0.5\nr = 1.0\ndt = 1.0\n[prior]\nx0 = [0.0, 10.0, 1.0, 0.0]\np0 = 4.0\n",
        std::path::Path::new("m.toml"),
    )
    .unwrap();
    let (_, z) = kestrel::particle::simulate(&model, 6, 15, 3, 0.1).unwrap();
    fn chunk(z: &Measurements<f64>, from: usize, to: usize) -> Measurements<f64> {
        let per = z.steps() * z.ny();
        Measurements::new(
            to - from,
            z.steps(),
            z.ny(),
            z.data()[from * per..to * per].to_vec(),
        )
        .unwrap()
    }
    for r in Resampler::ALL {
        let opts = PfOptions::new(200)
            .with_resampler(r)
            .with_ess_threshold(0.7)
            .with_seed(9);
        let whole = particle_filter_cpu(&model, &z, &opts).unwrap();
        let (per_mean, per_ll) = (15 * 4, 15);
        for cuts in [&[0usize, 2, 6][..], &[0, 1, 4, 6]] {
            for w in cuts.windows(2) {
                let part = chunk(&z, w[0], w[1]);
                let got = particle_filter_cpu(&model, &part, &opts.with_track_offset(w[0] as u32))
                    .unwrap();
                assert_eq!(
                    got.estimates.mean(),
                    &whole.estimates.mean()[w[0] * per_mean..w[1] * per_mean],
                    "{r}: tracks {}..{}",
                    w[0],
                    w[1]
                );
                assert_eq!(
                    got.estimates.loglik().unwrap(),
                    &whole.estimates.loglik().unwrap()[w[0] * per_ll..w[1] * per_ll],
                    "{r}: log-likelihoods of tracks {}..{}",
                    w[0],
                    w[1]
                );
            }
        }
        // Without its offset, the second chunk repeats the streams of tracks 0..: it
        // differs from the whole batch's tracks 2..6.
        let plain = particle_filter_cpu(&model, &chunk(&z, 2, 6), &opts).unwrap();
        assert_ne!(
            plain.estimates.mean(),
            &whole.estimates.mean()[2 * per_mean..]
        );
    }
    // f32 too.
    let z32: Measurements<f32> = z.cast();
    let opts = PfOptions::new(200).with_seed(4);
    let whole = particle_filter_cpu(&model, &z32, &opts).unwrap();
    let part = Measurements::new(3, 15, 2, z32.data()[3 * 30..].to_vec()).unwrap();
    let got = particle_filter_cpu(&model, &part, &opts.with_track_offset(3)).unwrap();
    assert_eq!(got.estimates.mean(), &whole.estimates.mean()[3 * 60..]);
}
