//! The model file of the particle filter: every kind `kestrel filter` accepts (explicit
//! linear-Gaussian and the builders), read by `crate::model`, plus the nonlinear kinds:
//!
//! ```toml
//! [model]
//! kind = "range-only"          # or bearings-only, range-bearing, stochastic-volatility, custom
//! dt = 1.0                     # constant-velocity kinds: step length
//! q = 0.1                      #   white-noise acceleration spectral density
//! sensors = [[0.0, 0.0], [100.0, 40.0]]   # range-only / bearings-only: positions
//! r = 1.0                      #   variance of each range (bearing: radians^2)
//! # range-bearing: radar = [x, y], r_range, r_bearing
//! # stochastic-volatility: mu, phi, sigma (no [prior]: the stationary law)
//! # custom: source = "my_model.cu", nx, ny (GPU only)
//! [prior]
//! x0 = [10.0, 1.0, 50.0, 0.0]
//! P0 = [[...]]                 # or p0 = s (s I)
//! ```
//!
//! A key that does not apply to the kind is an error naming it.

use super::models::{ConstantVelocity, GaussianPrior, PfKind, PfModel};
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};
use std::path::Path;

const LINEAR_KINDS: [&str; 6] = ["explicit", "cv", "ca", "random-walk", "rw", "ar"];

/// The kinds the particle filter accepts, for messages.
pub const KINDS: &str = "explicit, cv, ca, random-walk, ar, range-only, bearings-only, range-bearing, stochastic-volatility or custom";

fn err(origin: &Path, msg: impl Into<String>) -> Error {
    Error::ModelFile {
        path: origin.to_path_buf(),
        msg: msg.into(),
    }
}

struct Section<'a> {
    table: &'a toml::Table,
    origin: &'a Path,
    name: &'static str,
}

impl Section<'_> {
    fn check_keys(&self, allowed: &[&str], kind: &str) -> Result<()> {
        let mut extra: Vec<&str> = self
            .table
            .keys()
            .map(|k| k.as_str())
            .filter(|k| !allowed.contains(k))
            .collect();
        extra.sort_unstable();
        if !extra.is_empty() {
            return Err(err(
                self.origin,
                format!(
                    "[{}]: key{} {} do{} not apply to kind = \"{kind}\" (its keys: {})",
                    self.name,
                    if extra.len() > 1 { "s" } else { "" },
                    extra.join(", "),
                    if extra.len() > 1 { "" } else { "es" },
                    allowed.join(", ")
                ),
            ));
        }
        Ok(())
    }

    fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.table.get(key) {
            None => Ok(None),
            Some(v) => {
                let x = match v {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(i) => *i as f64,
                    _ => return Err(err(self.origin, format!("{key}: expected a number"))),
                };
                if !x.is_finite() {
                    return Err(err(self.origin, format!("{key}: must be finite, got {x}")));
                }
                Ok(Some(x))
            }
        }
    }

    fn required(&self, key: &str, kind: &str) -> Result<f64> {
        self.number(key)?.ok_or_else(|| {
            err(
                self.origin,
                format!("{key}: missing (required for kind = \"{kind}\")"),
            )
        })
    }

    fn positive(&self, key: &str, kind: &str) -> Result<f64> {
        let v = self.required(key, kind)?;
        if !(v > 0.0) {
            return Err(err(
                self.origin,
                format!("{key}: must be positive, got {v}"),
            ));
        }
        Ok(v)
    }

    fn vector(&self, key: &str) -> Result<Option<Vec<f64>>> {
        let Some(v) = self.table.get(key) else {
            return Ok(None);
        };
        let a = v
            .as_array()
            .ok_or_else(|| err(self.origin, format!("{key}: expected an array of numbers")))?;
        let mut out = Vec::with_capacity(a.len());
        for (i, x) in a.iter().enumerate() {
            let x = match x {
                toml::Value::Float(f) => *f,
                toml::Value::Integer(i) => *i as f64,
                _ => return Err(err(self.origin, format!("{key}[{i}]: expected a number"))),
            };
            if !x.is_finite() {
                return Err(err(
                    self.origin,
                    format!("{key}[{i}]: must be finite, got {x}"),
                ));
            }
            out.push(x);
        }
        Ok(Some(out))
    }

    fn matrix(&self, key: &str) -> Result<Option<Vec<Vec<f64>>>> {
        let Some(v) = self.table.get(key) else {
            return Ok(None);
        };
        let rows = v
            .as_array()
            .ok_or_else(|| err(self.origin, format!("{key}: expected an array of rows")))?;
        let mut out = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let sub = toml::Table::from_iter([(format!("{key}[{i}]"), r.clone())]);
            let s = Section {
                table: &sub,
                origin: self.origin,
                name: self.name,
            };
            out.push(s.vector(&format!("{key}[{i}]"))?.unwrap_or_default());
        }
        Ok(Some(out))
    }

    fn positions(&self, key: &str, kind: &str) -> Result<Vec<[f64; 2]>> {
        let m = self.matrix(key)?.ok_or_else(|| {
            err(
                self.origin,
                format!("{key}: missing (required for kind = \"{kind}\": positions [[x, y], ...])"),
            )
        })?;
        if m.is_empty() {
            return Err(err(self.origin, format!("{key}: no sensors given")));
        }
        m.iter()
            .enumerate()
            .map(|(i, r)| match r.as_slice() {
                [x, y] => Ok([*x, *y]),
                _ => Err(err(
                    self.origin,
                    format!("{key}[{i}]: a position has 2 coordinates, got {}", r.len()),
                )),
            })
            .collect()
    }
}

fn prior_of(
    p: Option<&toml::Table>,
    origin: &Path,
    nx: usize,
    kind: &str,
) -> Result<GaussianPrior> {
    let Some(t) = p else {
        return Err(err(
            origin,
            format!("[prior]: missing (kind = \"{kind}\" needs x0 and P0 or p0)"),
        ));
    };
    let s = Section {
        table: t,
        origin,
        name: "prior",
    };
    s.check_keys(&["x0", "P0", "p0"], kind)?;
    if let Some(msg) =
        crate::model::family::conflict(("P0", t.contains_key("P0")), ("p0", t.contains_key("p0")))
    {
        return Err(err(origin, format!("[prior]: {msg}")));
    }
    let x0 = s
        .vector("x0")?
        .ok_or_else(|| err(origin, "x0: missing ([prior])"))?;
    if x0.len() != nx {
        return Err(err(
            origin,
            format!(
                "x0: has {} entries, the state of kind = \"{kind}\" has {nx}",
                x0.len()
            ),
        ));
    }
    let p0 = match (s.matrix("P0")?, s.number("p0")?) {
        (Some(rows), _) => {
            if rows.len() != nx || rows.iter().any(|r| r.len() != nx) {
                return Err(err(origin, format!("P0: must be {nx} x {nx}")));
            }
            DMatrix::from_fn(nx, nx, |i, j| rows[i][j])
        }
        (None, Some(v)) if v > 0.0 => DMatrix::identity(nx, nx) * v,
        (None, Some(v)) => return Err(err(origin, format!("p0: must be positive, got {v}"))),
        (None, None) => return Err(err(origin, "P0: missing ([prior]: P0 or p0)")),
    };
    if (&p0 - p0.transpose()).amax() > 1e-9 * p0.amax().max(1.0) {
        return Err(err(origin, "P0: is not symmetric"));
    }
    GaussianPrior::new(&DVector::from_vec(x0), &p0).map_err(|e| err(origin, e.to_string()))
}

/// Parses a particle-filter model from TOML text; `origin` names it in messages and
/// locates a custom model's `source`.
pub fn pf_model_from_toml(text: &str, origin: &Path) -> Result<PfModel> {
    if let Some(msg) = crate::model::family::foreign(text, crate::model::family::Family::Particle) {
        return Err(err(origin, msg));
    }
    let root: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(origin, e.to_string().trim_end().replace('\n', " ")))?;
    let model = root
        .get("model")
        .and_then(|m| m.as_table())
        .ok_or_else(|| err(origin, "[model]: missing"))?;
    let kind = match model.get("kind") {
        None => "explicit",
        Some(toml::Value::String(s)) => s.as_str(),
        Some(_) => return Err(err(origin, "kind: expected a string")),
    };
    if LINEAR_KINDS.contains(&kind) {
        let m = crate::model::model_from_toml(text, origin)?;
        return PfModel::linear(&m).map_err(|e| err(origin, e.to_string()));
    }
    for k in root.keys() {
        if k != "model" && k != "prior" {
            return Err(err(
                origin,
                format!("[{k}]: unknown section (expected [model] and [prior])"),
            ));
        }
    }
    let prior = root.get("prior").and_then(|p| p.as_table());
    let s = Section {
        table: model,
        origin,
        name: "model",
    };
    let cv = |s: &Section| -> Result<ConstantVelocity> {
        let dt = s.number("dt")?.unwrap_or(1.0);
        if !(dt > 0.0) {
            return Err(err(origin, format!("dt: must be positive, got {dt}")));
        }
        let q = s.required("q", kind)?;
        if !(q >= 0.0) {
            return Err(err(origin, format!("q: must be non-negative, got {q}")));
        }
        Ok(ConstantVelocity { dt, q })
    };
    let kind_v = match kind {
        "range-only" | "bearings-only" => {
            s.check_keys(&["kind", "dt", "q", "sensors", "r"], kind)?;
            let cv = cv(&s)?;
            let sensors = s.positions("sensors", kind)?;
            let r = s.positive("r", kind)?;
            if kind == "range-only" {
                PfKind::RangeOnly { cv, sensors, r }
            } else {
                PfKind::BearingsOnly { cv, sensors, r }
            }
        }
        "range-bearing" => {
            s.check_keys(&["kind", "dt", "q", "radar", "r_range", "r_bearing"], kind)?;
            let cv = cv(&s)?;
            let radar = match s.vector("radar")? {
                None => [0.0, 0.0],
                Some(v) if v.len() == 2 => [v[0], v[1]],
                Some(v) => {
                    return Err(err(
                        origin,
                        format!("radar: a position has 2 coordinates, got {}", v.len()),
                    ))
                }
            };
            PfKind::RangeBearing {
                cv,
                radar,
                r_range: s.positive("r_range", kind)?,
                r_bearing: s.positive("r_bearing", kind)?,
            }
        }
        "stochastic-volatility" => {
            s.check_keys(&["kind", "mu", "phi", "sigma"], kind)?;
            if prior.is_some() {
                return Err(err(
                    origin,
                    "[prior]: does not apply to kind = \"stochastic-volatility\" (its prior is the stationary law N(mu, sigma^2 / (1 - phi^2)))",
                ));
            }
            let mu = s.required("mu", kind)?;
            let phi = s.required("phi", kind)?;
            if !(phi.abs() < 1.0) {
                return Err(err(
                    origin,
                    format!("phi: must be in (-1, 1) (a stationary process), got {phi}"),
                ));
            }
            let sigma = s.positive("sigma", kind)?;
            return Ok(PfModel {
                kind: PfKind::StochasticVolatility { mu, phi, sigma },
                prior: None,
            });
        }
        "custom" => {
            s.check_keys(&["kind", "source", "nx", "ny"], kind)?;
            let src = match model.get("source") {
                Some(toml::Value::String(p)) => p.clone(),
                Some(_) => return Err(err(origin, "source: expected a file name")),
                None => {
                    return Err(err(
                        origin,
                        "source: missing (kind = \"custom\" needs a CUDA C++ file)",
                    ))
                }
            };
            let size = |key: &str| -> Result<usize> {
                match model.get(key) {
                    Some(toml::Value::Integer(i)) if (1..=64).contains(i) => Ok(*i as usize),
                    Some(_) => Err(err(
                        origin,
                        format!("{key}: must be a whole number from 1 to 64"),
                    )),
                    None => Err(err(
                        origin,
                        format!("{key}: missing (required for kind = \"custom\")"),
                    )),
                }
            };
            let (nx, ny) = (size("nx")?, size("ny")?);
            let path = origin.parent().unwrap_or(Path::new(".")).join(&src);
            let source = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            let prior = prior_of(prior, origin, nx, kind)?;
            return Ok(PfModel {
                kind: PfKind::Custom {
                    source,
                    origin: path,
                    nx,
                    ny,
                },
                prior: Some(prior),
            });
        }
        other => {
            return Err(err(
                origin,
                format!("kind: unknown model kind \"{other}\" (expected {KINDS})"),
            ))
        }
    };
    let prior = prior_of(prior, origin, 4, kind)?;
    Ok(PfModel {
        kind: kind_v,
        prior: Some(prior),
    })
}

/// Reads a particle-filter model file.
pub fn load_pf_model(path: &Path) -> Result<PfModel> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    pf_model_from_toml(&text, path)
}
