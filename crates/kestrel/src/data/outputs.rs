//! Output selection: which estimates a run returns and a file holds. A user who filters
//! 10^6 tracks for their means does not need the 10^6 x T x nx x nx covariances copied
//! off the GPU, kept in memory and written to disk.

use super::Estimates;
use crate::error::{Error, Result};
use crate::linalg::Real;
use rayon::prelude::*;

/// How much of each covariance to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CovOutput {
    /// The full `nx x nx` matrix (row-major).
    #[default]
    Full,
    /// Its diagonal only (the variances), `nx` values a step.
    Diag,
    /// None.
    None,
}

impl CovOutput {
    /// Whether any of the covariance is kept.
    pub fn wanted(self) -> bool {
        self != CovOutput::None
    }
}

/// Which estimates to keep. An output that is not kept is an empty vector in
/// [`Estimates`] (its `loglik` is `None`); a diagonal covariance holds `nx` values a
/// step ([`Estimates::cov_output`] tells which form a value holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outputs {
    /// The means `[B][T][nx]`.
    pub mean: bool,
    /// The covariances `[B][T][nx][nx]`, their diagonals `[B][T][nx]`, or none.
    pub cov: CovOutput,
    /// The per-step log-likelihoods `[B][T]` (filters only).
    pub loglik: bool,
}

impl Default for Outputs {
    fn default() -> Self {
        Outputs::ALL
    }
}

impl Outputs {
    /// Everything: means, full covariances, log-likelihoods.
    pub const ALL: Outputs = Outputs {
        mean: true,
        cov: CovOutput::Full,
        loglik: true,
    };

    /// Parses a comma-separated list of `mean`, `cov` (full), `diag` (the covariances'
    /// diagonals), `loglik`; `all` is every output. At least one, each at most once,
    /// `cov` and `diag` not both.
    pub fn parse(s: &str) -> Result<Outputs> {
        let bad = |msg: String| Error::Input { msg };
        let mut o = Outputs {
            mean: false,
            cov: CovOutput::None,
            loglik: false,
        };
        let mut any = false;
        for item in s.split(',').map(str::trim) {
            let dup = match item {
                "all" => {
                    let was = any;
                    o = Outputs::ALL;
                    was
                }
                "mean" => std::mem::replace(&mut o.mean, true),
                "loglik" => std::mem::replace(&mut o.loglik, true),
                "cov" | "diag" => {
                    let was = o.cov.wanted();
                    o.cov = if item == "cov" {
                        CovOutput::Full
                    } else {
                        CovOutput::Diag
                    };
                    was
                }
                "" => return Err(bad(format!("outputs \"{s}\": an empty item"))),
                other => {
                    return Err(bad(format!(
                        "outputs: unknown output \"{}\" (expected mean, cov, diag, loglik or all)",
                        other.escape_debug()
                    )))
                }
            };
            if dup {
                return Err(bad(format!(
                    "outputs \"{s}\": \"{item}\" is named twice (or cov and diag together)"
                )));
            }
            any = true;
        }
        Ok(o)
    }

    /// Whether this keeps everything in full.
    pub fn is_all(&self) -> bool {
        *self == Outputs::ALL
    }

    /// Drops what is not kept from `est` and reduces covariances to their diagonals
    /// when asked (in parallel over tracks).
    pub fn apply<T: Real>(&self, est: &mut Estimates<T>) {
        if !self.mean {
            est.mean = Vec::new();
        }
        if !self.loglik {
            est.loglik = None;
        }
        match self.cov {
            CovOutput::Full => {}
            CovOutput::None => est.cov = Vec::new(),
            CovOutput::Diag => {
                let nx = est.nx;
                if nx > 1 && est.cov.len() == est.tracks * est.steps * nx * nx {
                    let mut d = vec![T::zero(); est.tracks * est.steps * nx];
                    d.par_chunks_mut(nx)
                        .zip(est.cov.par_chunks(nx * nx))
                        .for_each(|(d, c)| {
                            for i in 0..nx {
                                d[i] = c[i * nx + i];
                            }
                        });
                    est.cov = d;
                }
            }
        }
    }
}

impl<T> Estimates<T> {
    /// The form of the covariances held: full, diagonal, or none (see [`Outputs`]).
    /// With `nx = 1` the two forms are the same and `Full` is returned.
    pub fn cov_output(&self) -> CovOutput {
        let n = self.tracks * self.steps * self.nx;
        if self.cov.is_empty() && n > 0 {
            CovOutput::None
        } else if self.nx > 1 && self.cov.len() == n {
            CovOutput::Diag
        } else {
            CovOutput::Full
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_refuses_nonsense() {
        assert_eq!(Outputs::parse("mean,cov,loglik").unwrap(), Outputs::ALL);
        assert_eq!(Outputs::parse("all").unwrap(), Outputs::ALL);
        let o = Outputs::parse("mean, diag").unwrap();
        assert!(o.mean && !o.loglik && o.cov == CovOutput::Diag);
        let o = Outputs::parse("loglik").unwrap();
        assert!(!o.mean && !o.cov.wanted() && o.loglik);
        for bad in [
            "",
            "mean,",
            "mean,mean",
            "cov,diag",
            "means",
            "mean,all",
            "x\ny",
        ] {
            let e = Outputs::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn apply_keeps_exactly_what_was_asked() {
        let (b, t, nx) = (3, 4, 2);
        let mut e = Estimates::<f64>::nan(b, t, nx, true);
        for (i, v) in e.cov.iter_mut().enumerate() {
            *v = i as f64;
        }
        e.mean.fill(1.0);
        let full = e.clone();
        assert_eq!(full.cov_output(), CovOutput::Full);
        Outputs::parse("diag,loglik").unwrap().apply(&mut e);
        assert!(e.mean.is_empty() && e.loglik.is_some());
        assert_eq!(e.cov_output(), CovOutput::Diag);
        for k in 0..b * t {
            for i in 0..nx {
                assert_eq!(e.cov[k * nx + i], full.cov[k * nx * nx + i * nx + i]);
            }
        }
        let mut m = full.clone();
        Outputs::parse("mean").unwrap().apply(&mut m);
        assert_eq!(m.mean, full.mean);
        assert!(m.loglik.is_none() && m.cov_output() == CovOutput::None);
    }
}
