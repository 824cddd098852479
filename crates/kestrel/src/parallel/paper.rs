//! The random model of Sarkka & Garcia-Fernandez's experiments (Section VI-A), used by
//! benchmarks and tests: per step, `F` = 0.99 times the orthogonal factor of a Gaussian
//! matrix, Gaussian `H`, `u`, `d`, and `Q = Xi Xi^T`, `R = Xi Xi^T` with Gaussian `Xi`; a
//! random prior. To keep very long sequences cheap, `distinct` random steps are drawn and
//! cycled (`steps[k mod distinct]`).

use crate::model::{Prior, StateSpace, StepMatrices};
use nalgebra::{DMatrix, DVector};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// A time-varying model whose steps cycle through `distinct` random ones.
#[derive(Clone, Debug)]
pub struct PaperModel {
    /// The matrices of each step.
    pub steps: Vec<StepMatrices>,
    /// The prior at step 0.
    pub prior: Prior,
    /// How many steps the model covers.
    pub len: usize,
}

fn gauss(rng: &mut impl Rng, r: usize, c: usize) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| rng.sample(StandardNormal))
}

fn gram(rng: &mut impl Rng, n: usize) -> DMatrix<f64> {
    let x = gauss(rng, n, n);
    &x * x.transpose()
}

impl PaperModel {
    /// Draws the model (seeded). `R` and `P0` get `1e-2 I` added so that a near-singular
    /// draw cannot make the innovation covariance numerically singular.
    pub fn new(nx: usize, ny: usize, len: usize, distinct: usize, seed: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let steps = (0..distinct.clamp(1, len.max(1)))
            .map(|_| StepMatrices {
                f: gauss(&mut rng, nx, nx).qr().q() * 0.99,
                u: DVector::from_fn(nx, |_, _| rng.sample(StandardNormal)),
                q: gram(&mut rng, nx),
                h: gauss(&mut rng, ny, nx),
                d: DVector::from_fn(ny, |_, _| rng.sample(StandardNormal)),
                r: gram(&mut rng, ny) + DMatrix::identity(ny, ny) * 1e-2,
            })
            .collect();
        let prior = Prior {
            x0: DVector::from_fn(nx, |_, _| rng.sample(StandardNormal)),
            p0: gram(&mut rng, nx) + DMatrix::identity(nx, nx) * 1e-2,
        };
        PaperModel { steps, prior, len }
    }
}

impl StateSpace for PaperModel {
    fn nx(&self) -> usize {
        self.steps[0].f.nrows()
    }
    fn ny(&self) -> usize {
        self.steps[0].h.nrows()
    }
    fn transition(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let s = &self.steps[k % self.steps.len()];
        (&s.f, &s.u, &s.q)
    }
    fn observation(&self, k: usize) -> (&DMatrix<f64>, &DVector<f64>, &DMatrix<f64>) {
        let s = &self.steps[k % self.steps.len()];
        (&s.h, &s.d, &s.r)
    }
    fn prior(&self) -> &Prior {
        &self.prior
    }
    fn steps_covered(&self) -> Option<usize> {
        Some(self.len)
    }
}
