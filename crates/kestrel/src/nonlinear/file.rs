//! The model file forms of the nonlinear family.
//!
//! ```toml
//! [model]
//! kind = "nonlinear"
//! states = ["a", "w"]                         # default x0 .. x{n-1} (n = len(f))
//! f = ["a + w * dt", "w - g * sin(a) * dt"]   # the state at k from the state at k-1
//! h = ["sin(a)"]
//! Q = [[1e-6, 5e-5], [5e-5, 1e-2]]
//! R = [[0.1]]
//! constants = { dt = 0.01, g = 9.81 }         # names usable in f and h
//! angles = []                                 # measurement components that are angles
//! [prior]
//! x0 = [1.5, 0.0]
//! P0 = [[0.1, 0.0], [0.0, 0.1]]               # or p0 = s (s I)
//! [filter]                                    # optional
//! kind = "ukf"                                # kf, ekf, ukf, ckf, iekf
//! alpha = 1.0                                 # UKF (defaults 1, 0, 3 - n)
//! beta = 0.0
//! kappa = 1.0
//! iterations = 10                             # IEKF / iterated smoothers
//! ```
//!
//! Other `[model]` kinds: `"ct"` (coordinated turn: `dt`, `q`, and `omega` for a known
//! turn rate or `q_omega` to estimate it as a fifth state; `measure = "position"` with
//! `r`, or `"range-bearing"` with `radar = [x, y]`, `r_range`, `r_bearing`); the particle
//! filter's `range-only`, `bearings-only`, `range-bearing` (see `particle/file.rs`); and
//! every linear kind of `model/file.rs` (explicit, cv, ca, random-walk, ar).
//!
//! IMM: instead of `[model]`,
//!
//! ```toml
//! [imm]
//! transition = [[0.95, 0.05], [0.05, 0.95]]   # row = from mode
//! initial = [0.5, 0.5]
//! [[imm.mode]]                                 # each a [model] table of any kind above
//! kind = "ct"
//! ...
//! [prior]                                      # one for all modes
//! ```

use super::models::{Measure, NonlinearModel, TurnRate};
use super::{FilterKind, ImmModel, NonlinearOptions, NonlinearProblem};
use crate::error::{Error, Result};
use crate::model::{Model, Prior};
use nalgebra::{DMatrix, DVector};
use std::path::Path;

const LINEAR_KINDS: [&str; 6] = ["explicit", "cv", "ca", "random-walk", "rw", "ar"];
const PF_KINDS: [&str; 3] = ["range-only", "bearings-only", "range-bearing"];
/// Every `[model]` kind of the family, for messages.
pub const KINDS: &str =
    "nonlinear, ct, range-only, bearings-only, range-bearing, explicit, cv, ca, random-walk or ar";

/// The filter a model file or the command line asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterChoice {
    /// The linear Kalman filter (linear models only).
    Kf,
    /// A nonlinear Gaussian filter.
    Gaussian(FilterKind),
}

impl FilterChoice {
    /// From its name (`kf`, `ekf`, `ukf`, `ckf`, `iekf`).
    pub fn parse(s: &str) -> Option<Self> {
        if s == "kf" {
            Some(FilterChoice::Kf)
        } else {
            FilterKind::parse(s).map(FilterChoice::Gaussian)
        }
    }
}

/// A nonlinear model file, read.
#[derive(Clone, Debug)]
pub struct NonlinearFile {
    /// The model (or IMM).
    pub problem: NonlinearProblem,
    /// The options of its `[filter]` table (defaults where absent).
    pub options: NonlinearOptions,
    /// The filter its `[filter]` table names, if any.
    pub filter: Option<FilterChoice>,
    /// The linear model, when `[model]` is of a linear kind (the Kalman filter runs it).
    pub linear: Option<Model>,
}

fn err(origin: &Path, msg: impl Into<String>) -> Error {
    Error::ModelFile {
        path: origin.to_path_buf(),
        msg: msg.into(),
    }
}

/// An error of the model layer, as a model-file error prefixed with where (`imm.mode[1].`).
fn within(origin: &Path, prefix: &str, e: Error) -> Error {
    match e {
        Error::Model { field, msg } => err(origin, format!("{prefix}{field}: {msg}")),
        Error::ModelFile { msg, .. } => err(origin, format!("{prefix}{msg}")),
        other => other,
    }
}

fn number(v: &toml::Value, key: &str, origin: &Path) -> Result<f64> {
    let x = match v {
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        _ => return Err(err(origin, format!("{key}: expected a number"))),
    };
    if !x.is_finite() {
        return Err(err(origin, format!("{key}: must be finite, got {x}")));
    }
    Ok(x)
}

fn vector(v: &toml::Value, key: &str, origin: &Path) -> Result<Vec<f64>> {
    let a = v
        .as_array()
        .ok_or_else(|| err(origin, format!("{key}: expected an array of numbers")))?;
    a.iter()
        .enumerate()
        .map(|(i, x)| number(x, &format!("{key}[{i}]"), origin))
        .collect()
}

fn matrix(v: &toml::Value, key: &str, origin: &Path) -> Result<DMatrix<f64>> {
    let rows = v
        .as_array()
        .ok_or_else(|| err(origin, format!("{key}: expected an array of rows")))?;
    let rows: Vec<Vec<f64>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| vector(r, &format!("{key}[{i}]"), origin))
        .collect::<Result<_>>()?;
    let nc = rows.first().map_or(0, |r| r.len());
    if rows.is_empty() || nc == 0 {
        return Err(err(origin, format!("{key}: empty matrix")));
    }
    if let Some(i) = rows.iter().position(|r| r.len() != nc) {
        return Err(err(
            origin,
            format!(
                "{key}: row {i} has {} entries, row 0 has {nc}",
                rows[i].len()
            ),
        ));
    }
    Ok(DMatrix::from_fn(rows.len(), nc, |i, j| rows[i][j]))
}

fn strings(v: &toml::Value, key: &str, origin: &Path) -> Result<Vec<String>> {
    let a = v
        .as_array()
        .ok_or_else(|| err(origin, format!("{key}: expected an array of strings")))?;
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_str()
                .map(String::from)
                .ok_or_else(|| err(origin, format!("{key}[{i}]: expected a string")))
        })
        .collect()
}

struct Table<'a> {
    t: &'a toml::Table,
    origin: &'a Path,
    /// `model.` or `imm.mode[1].`, for messages.
    prefix: String,
}

impl Table<'_> {
    fn key(&self, k: &str) -> String {
        format!("{}{k}", self.prefix)
    }
    fn check_keys(&self, allowed: &[&str], kind: &str) -> Result<()> {
        let mut extra: Vec<&str> = self
            .t
            .keys()
            .map(|k| k.as_str())
            .filter(|k| !allowed.contains(k))
            .collect();
        extra.sort_unstable();
        if extra.is_empty() {
            return Ok(());
        }
        Err(err(
            self.origin,
            format!(
                "{}: key{} {} do{} not apply to kind = \"{kind}\" (its keys: {})",
                self.prefix.trim_end_matches('.'),
                if extra.len() > 1 { "s" } else { "" },
                extra.join(", "),
                if extra.len() > 1 { "" } else { "es" },
                allowed.join(", ")
            ),
        ))
    }
    fn get(&self, k: &str) -> Option<&toml::Value> {
        self.t.get(k)
    }
    fn required(&self, k: &str, kind: &str) -> Result<&toml::Value> {
        self.get(k).ok_or_else(|| {
            err(
                self.origin,
                format!("{}: missing (required for kind = \"{kind}\")", self.key(k)),
            )
        })
    }
    fn num(&self, k: &str) -> Result<Option<f64>> {
        self.get(k)
            .map(|v| number(v, &self.key(k), self.origin))
            .transpose()
    }
    fn positive(&self, k: &str, kind: &str) -> Result<f64> {
        let v = number(self.required(k, kind)?, &self.key(k), self.origin)?;
        if !(v > 0.0) {
            return Err(err(
                self.origin,
                format!("{}: must be positive, got {v}", self.key(k)),
            ));
        }
        Ok(v)
    }
    fn non_negative(&self, k: &str, kind: &str) -> Result<f64> {
        let v = number(self.required(k, kind)?, &self.key(k), self.origin)?;
        if !(v >= 0.0) {
            return Err(err(
                self.origin,
                format!("{}: must be non-negative, got {v}", self.key(k)),
            ));
        }
        Ok(v)
    }
}

fn prior_of(p: Option<&toml::Value>, origin: &Path, nx: usize) -> Result<Prior> {
    let Some(p) = p else {
        return Err(err(origin, "[prior]: missing (x0 and P0 or p0)"));
    };
    let t = p
        .as_table()
        .ok_or_else(|| err(origin, "[prior]: expected a table"))?;
    let tb = Table {
        t,
        origin,
        prefix: "prior.".into(),
    };
    tb.check_keys(&["x0", "P0", "p0"], "prior")
        .map_err(|_| err(origin, "[prior]: only x0 and P0 or p0 apply"))?;
    let x0 = match t.get("x0") {
        Some(v) => vector(v, "x0", origin)?,
        None => return Err(err(origin, "x0: missing ([prior])")),
    };
    if x0.len() != nx {
        return Err(err(
            origin,
            format!("x0: has {} entries, the state has {nx}", x0.len()),
        ));
    }
    let p0 = match (t.get("P0"), t.get("p0")) {
        (Some(m), None) => matrix(m, "P0", origin)?,
        (None, Some(v)) => {
            let s = number(v, "p0", origin)?;
            if !(s > 0.0) {
                return Err(err(origin, format!("p0: must be positive, got {s}")));
            }
            DMatrix::identity(nx, nx) * s
        }
        (Some(_), Some(_)) => {
            let msg = crate::model::family::conflict(("P0", true), ("p0", true));
            return Err(err(origin, format!("[prior]: {}", msg.unwrap_or_default())));
        }
        (None, None) => return Err(err(origin, "P0: missing ([prior]: P0 or p0)")),
    };
    Ok(Prior {
        x0: DVector::from_vec(x0),
        p0,
    })
}

/// One `[model]`-like table (the root's, or an IMM mode's) as a nonlinear model; the
/// linear model too when the kind is linear.
fn model_of(
    tb: &Table<'_>,
    prior: Option<&toml::Value>,
) -> Result<(NonlinearModel, Option<Model>)> {
    let origin = tb.origin;
    let kind = match tb.get("kind") {
        None => "explicit",
        Some(toml::Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(err(
                origin,
                format!("{}: expected a string", tb.key("kind")),
            ))
        }
    };
    let fail = |e: Error| within(origin, &tb.prefix, e);
    match kind {
        "nonlinear" => {
            tb.check_keys(
                &["kind", "states", "f", "h", "Q", "R", "constants", "angles"],
                kind,
            )?;
            let f = strings(tb.required("f", kind)?, &tb.key("f"), origin)?;
            let h = strings(tb.required("h", kind)?, &tb.key("h"), origin)?;
            let states = match tb.get("states") {
                Some(v) => strings(v, &tb.key("states"), origin)?,
                None => (0..f.len()).map(|i| format!("x{i}")).collect(),
            };
            let q = matrix(tb.required("Q", kind)?, &tb.key("Q"), origin)?;
            let r = matrix(tb.required("R", kind)?, &tb.key("R"), origin)?;
            let mut constants = Vec::new();
            if let Some(c) = tb.get("constants") {
                let c = c.as_table().ok_or_else(|| {
                    err(
                        origin,
                        format!(
                            "{}: expected a table {{ name = value, ... }}",
                            tb.key("constants")
                        ),
                    )
                })?;
                for (k, v) in c {
                    constants.push((
                        k.clone(),
                        number(v, &tb.key(&format!("constants.{k}")), origin)?,
                    ));
                }
            }
            let angles = match tb.get("angles") {
                None => vec![],
                Some(v) => {
                    let a = v.as_array().ok_or_else(|| {
                        err(
                            origin,
                            format!("{}: expected an array of indices", tb.key("angles")),
                        )
                    })?;
                    a.iter()
                        .enumerate()
                        .map(|(i, x)| match x.as_integer() {
                            Some(i) if i >= 0 => Ok(i as usize),
                            _ => Err(err(
                                origin,
                                format!(
                                    "{}[{i}]: expected the index (from 0) of a measurement component",
                                    tb.key("angles")
                                ),
                            )),
                        })
                        .collect::<Result<_>>()?
                }
            };
            if states.len() != f.len() {
                return Err(err(
                    origin,
                    format!(
                        "{}: {} expressions for {} states",
                        tb.key("f"),
                        f.len(),
                        states.len()
                    ),
                ));
            }
            let prior = prior_of(prior, origin, states.len())?;
            let m =
                NonlinearModel::from_expressions(&states, &f, &h, q, r, &constants, &angles, prior)
                    .map_err(fail)?;
            Ok((m, None))
        }
        "ct" => {
            tb.check_keys(
                &[
                    "kind",
                    "dt",
                    "q",
                    "omega",
                    "q_omega",
                    "measure",
                    "r",
                    "radar",
                    "r_range",
                    "r_bearing",
                ],
                kind,
            )?;
            let dt = tb.num("dt")?.unwrap_or(1.0);
            let q = tb.non_negative("q", kind)?;
            let turn = match (tb.num("omega")?, tb.get("q_omega")) {
                (Some(w), None) => TurnRate::Known(w),
                (None, Some(_)) => TurnRate::Estimated {
                    q_omega: tb.non_negative("q_omega", kind)?,
                },
                (None, None) => TurnRate::Known(0.0),
                (Some(_), Some(_)) => {
                    return Err(err(
                        origin,
                        format!(
                            "{}: give omega (a known turn rate) or q_omega (estimated), not both",
                            tb.prefix.trim_end_matches('.')
                        ),
                    ))
                }
            };
            let measure = match tb.get("measure").map(|v| v.as_str()) {
                None | Some(Some("position")) => {
                    for k in ["radar", "r_range", "r_bearing"] {
                        if tb.get(k).is_some() {
                            return Err(err(
                                origin,
                                format!("{}: applies to measure = \"range-bearing\"", tb.key(k)),
                            ));
                        }
                    }
                    Measure::Position {
                        r: tb.positive("r", kind)?,
                    }
                }
                Some(Some("range-bearing")) => {
                    if tb.get("r").is_some() {
                        return Err(err(origin, format!("{}: applies to measure = \"position\" (range-bearing has r_range, r_bearing)", tb.key("r"))));
                    }
                    let radar = match tb.get("radar") {
                        None => [0.0, 0.0],
                        Some(v) => match vector(v, &tb.key("radar"), origin)?.as_slice() {
                            [x, y] => [*x, *y],
                            v => {
                                return Err(err(
                                    origin,
                                    format!(
                                        "{}: a position has 2 coordinates, got {}",
                                        tb.key("radar"),
                                        v.len()
                                    ),
                                ))
                            }
                        },
                    };
                    Measure::RangeBearing {
                        radar,
                        r_range: tb.positive("r_range", kind)?,
                        r_bearing: tb.positive("r_bearing", kind)?,
                    }
                }
                _ => {
                    return Err(err(
                        origin,
                        format!(
                            "{}: expected \"position\" or \"range-bearing\"",
                            tb.key("measure")
                        ),
                    ))
                }
            };
            let nx = if matches!(turn, TurnRate::Estimated { .. }) {
                5
            } else {
                4
            };
            let prior = prior_of(prior, origin, nx)?;
            let m = NonlinearModel::coordinated_turn(dt, q, turn, &measure, prior).map_err(fail)?;
            Ok((m, None))
        }
        k if PF_KINDS.contains(&k) || LINEAR_KINDS.contains(&k) => {
            // Read by the particle filter's and the linear model's own parsers, from a
            // document of this table and the prior alone.
            let mut doc = toml::Table::new();
            doc.insert("model".into(), toml::Value::Table(tb.t.clone()));
            if let Some(p) = prior {
                doc.insert("prior".into(), p.clone());
            }
            let text = toml::to_string(&doc).map_err(|e| err(origin, e.to_string()))?;
            if LINEAR_KINDS.contains(&k) {
                let lin = crate::model::model_from_toml(&text, origin).map_err(fail)?;
                let m = NonlinearModel::from_linear(&lin).map_err(fail)?;
                Ok((m, Some(lin)))
            } else {
                let pf = crate::particle::pf_model_from_toml(&text, origin).map_err(fail)?;
                Ok((NonlinearModel::from_pf(&pf).map_err(fail)?, None))
            }
        }
        other => Err(err(
            origin,
            format!(
                "{}: unknown model kind \"{other}\" (expected {KINDS})",
                tb.key("kind")
            ),
        )),
    }
}

fn options_of(
    f: Option<&toml::Value>,
    origin: &Path,
) -> Result<(NonlinearOptions, Option<FilterChoice>)> {
    let mut o = NonlinearOptions::default();
    let Some(f) = f else {
        return Ok((o, None));
    };
    let t = f
        .as_table()
        .ok_or_else(|| err(origin, "[filter]: expected a table"))?;
    let tb = Table {
        t,
        origin,
        prefix: "filter.".into(),
    };
    tb.check_keys(&["kind", "alpha", "beta", "kappa", "iterations"], "filter")
        .map_err(|_| {
            let mut keys: Vec<&str> = t.keys().map(|k| k.as_str()).collect();
            keys.retain(|k| !["kind", "alpha", "beta", "kappa", "iterations"].contains(k));
            err(
                origin,
                format!(
                    "[filter]: unknown key {} (its keys: kind, alpha, beta, kappa, iterations)",
                    keys.join(", ")
                ),
            )
        })?;
    let choice = match t.get("kind") {
        None => None,
        Some(v) => {
            let s = v.as_str().unwrap_or("");
            Some(FilterChoice::parse(s).ok_or_else(|| {
                err(
                    origin,
                    format!("filter.kind: expected kf, {}, got {v}", FilterKind::NAMES),
                )
            })?)
        }
    };
    if let Some(FilterChoice::Gaussian(k)) = choice {
        o.kind = k;
    }
    if let Some(a) = tb.num("alpha")? {
        if !(a > 0.0) {
            return Err(err(
                origin,
                format!("filter.alpha: must be positive, got {a}"),
            ));
        }
        o.alpha = a;
    }
    if let Some(b) = tb.num("beta")? {
        o.beta = b;
    }
    if let Some(k) = tb.num("kappa")? {
        o.kappa = Some(k);
    }
    if let Some(v) = t.get("iterations") {
        match v.as_integer() {
            Some(i) if (1..=10_000).contains(&i) => o.iterations = i as usize,
            _ => {
                return Err(err(
                    origin,
                    format!("filter.iterations: must be a whole number from 1 to 10000, got {v}"),
                ))
            }
        }
    }
    Ok((o, choice))
}

/// Parses a nonlinear model file from TOML text; `origin` names it in messages.
pub fn nonlinear_from_toml(text: &str, origin: &Path) -> Result<NonlinearFile> {
    if let Some(msg) = crate::model::family::foreign(text, crate::model::family::Family::Gaussian) {
        return Err(err(origin, msg));
    }
    let root: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(origin, e.to_string().trim_end().replace('\n', " ")))?;
    for k in root.keys() {
        if !["model", "prior", "filter", "imm"].contains(&k.as_str()) {
            return Err(err(
                origin,
                format!("[{k}]: unknown section (expected [model] or [imm], [prior], [filter])"),
            ));
        }
    }
    let (options, filter) = options_of(root.get("filter"), origin)?;
    let prior = root.get("prior");
    match (root.get("model"), root.get("imm")) {
        (Some(_), Some(_)) => Err(err(
            origin,
            "[model] and [imm]: give one (an IMM's modes are [[imm.mode]] tables)",
        )),
        (None, None) => Err(err(origin, "[model]: missing")),
        (Some(m), None) => {
            let t = m
                .as_table()
                .ok_or_else(|| err(origin, "[model]: expected a table"))?;
            let tb = Table {
                t,
                origin,
                prefix: "model.".into(),
            };
            let (model, linear) = model_of(&tb, prior)?;
            Ok(NonlinearFile {
                problem: NonlinearProblem::Single(model),
                options,
                filter,
                linear,
            })
        }
        (None, Some(imm)) => {
            let t = imm
                .as_table()
                .ok_or_else(|| err(origin, "[imm]: expected a table"))?;
            for k in t.keys() {
                if !["transition", "initial", "mode"].contains(&k.as_str()) {
                    return Err(err(
                        origin,
                        format!("imm.{k}: unknown key (expected transition, initial and [[imm.mode]] tables)"),
                    ));
                }
            }
            let modes = t
                .get("mode")
                .and_then(|m| m.as_array())
                .ok_or_else(|| err(origin, "[[imm.mode]]: missing (one table per mode)"))?;
            let transition = matrix(
                t.get("transition").ok_or_else(|| {
                    err(origin, "imm.transition: missing (r x r, row = from mode)")
                })?,
                "imm.transition",
                origin,
            )?;
            let initial = match t.get("initial") {
                Some(v) => DVector::from_vec(vector(v, "imm.initial", origin)?),
                None => DVector::from_element(modes.len(), 1.0 / modes.len().max(1) as f64),
            };
            let mut ms = Vec::new();
            for (j, m) in modes.iter().enumerate() {
                let mt = m
                    .as_table()
                    .ok_or_else(|| err(origin, format!("imm.mode[{j}]: expected a table")))?;
                let tb = Table {
                    t: mt,
                    origin,
                    prefix: format!("imm.mode[{j}]."),
                };
                ms.push(model_of(&tb, prior)?.0);
            }
            let prior = prior_of(prior, origin, ms.first().map_or(0, |m| m.nx()))?;
            let imm = ImmModel::new(ms, transition, initial, prior)
                .map_err(|e| within(origin, "imm.", e))?;
            if filter == Some(FilterChoice::Kf) {
                return Err(err(
                    origin,
                    "filter.kind: kf does not run an IMM (use ekf, ukf, ckf or iekf)",
                ));
            }
            Ok(NonlinearFile {
                problem: NonlinearProblem::Imm(imm),
                options,
                filter,
                linear: None,
            })
        }
    }
}

/// Reads a nonlinear model file.
pub fn load_nonlinear(path: &Path) -> Result<NonlinearFile> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    nonlinear_from_toml(&text, path)
}

/// Whether `text` is a model file that only this family's reader reads (the particle
/// filter's does not): the expression and coordinated-turn kinds, an `[imm]`, or any
/// file with a `[filter]` table.
pub fn is_gaussian_only_text(text: &str) -> bool {
    if !is_nonlinear_text(text) {
        return false;
    }
    let Ok(root) = text.parse::<toml::Table>() else {
        return false;
    };
    let kind = root
        .get("model")
        .and_then(|m| m.get("kind"))
        .and_then(|k| k.as_str());
    root.contains_key("filter")
        || root.contains_key("imm")
        || matches!(kind, Some("nonlinear" | "ct"))
}

/// True when the model file at `text` needs this family (its `[model]` kind is not linear,
/// or it has `[imm]` or `[filter]`): the command line's switch between the families.
pub fn is_nonlinear_text(text: &str) -> bool {
    let Ok(root) = text.parse::<toml::Table>() else {
        return false;
    };
    if root.contains_key("imm") || root.contains_key("filter") {
        return true;
    }
    match root
        .get("model")
        .and_then(|m| m.get("kind"))
        .and_then(|k| k.as_str())
    {
        // A time-varying linear model is the Kalman family's (model::load_linear_model).
        Some(k) => !LINEAR_KINDS.contains(&k) && k != "time-varying",
        None => false,
    }
}
