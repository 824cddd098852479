//! The TOML model file: the explicit form of the design contract, and builder forms.
//!
//! ```toml
//! [model]
//! F = [[1.0, 1.0], [0.0, 1.0]]
//! Q = [[0.3, 0.5], [0.5, 1.0]]
//! H = [[1.0, 0.0]]
//! R = [[1.0]]
//! u = [0.0, 0.0]        # optional
//! d = [0.0]             # optional
//! [prior]
//! x0 = [0.0, 0.0]
//! P0 = [[10.0, 0.0], [0.0, 10.0]]
//! ```
//!
//! Builder form: `[model] kind = "cv" | "ca" | "random-walk" | "ar"` with `dims`, `dt`,
//! `q`, `r` (and `coeffs` for `ar`); `[prior]` is optional there (`x0` defaults to zeros,
//! `P0` to `p0 I`, `p0` default 1).
//!
//! Any form may say `prior = "stationary"` in `[model]`: the prior is then the stationary
//! law of the state (`P0` from the discrete Lyapunov equation, see
//! [`Model::with_stationary_prior`]); `F` must be stable and `[prior]` must be absent.

use super::{builders, LinearModel, Model, Prior};
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRoot {
    model: ModelSection,
    prior: Option<PriorSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelSection {
    kind: Option<String>,
    #[serde(rename = "F")]
    f: Option<Vec<Vec<f64>>>,
    #[serde(rename = "Q")]
    qm: Option<Vec<Vec<f64>>>,
    #[serde(rename = "H")]
    h: Option<Vec<Vec<f64>>>,
    #[serde(rename = "R")]
    rm: Option<Vec<Vec<f64>>>,
    u: Option<Vec<f64>>,
    d: Option<Vec<f64>>,
    dims: Option<usize>,
    dt: Option<f64>,
    q: Option<f64>,
    r: Option<f64>,
    coeffs: Option<Vec<f64>>,
    prior: Option<String>,
    file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PriorSection {
    pub(super) x0: Option<Vec<f64>>,
    #[serde(rename = "P0")]
    pub(super) p0m: Option<Vec<Vec<f64>>>,
    pub(super) p0: Option<f64>,
}

pub(super) fn matrix(field: &str, rows: &[Vec<f64>]) -> Result<DMatrix<f64>> {
    let nr = rows.len();
    if nr == 0 {
        return Err(Error::model(field, "empty matrix"));
    }
    let nc = rows[0].len();
    if nc == 0 {
        return Err(Error::model(field, "row 0 is empty"));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.len() != nc {
            return Err(Error::model(
                field,
                format!("row {i} has {} entries, row 0 has {nc}", r.len()),
            ));
        }
    }
    Ok(DMatrix::from_fn(nr, nc, |i, j| rows[i][j]))
}

/// `P0` and `p0` together: an error ([`super::family::conflict`]).
fn prior_conflicts(p: &PriorSection) -> Result<()> {
    match super::family::conflict(("P0", p.p0m.is_some()), ("p0", p.p0.is_some())) {
        Some(msg) => Err(Error::model("[prior]", msg)),
        None => Ok(()),
    }
}

fn required<'a, T>(field: &str, v: &'a Option<T>, kind: &str) -> Result<&'a T> {
    v.as_ref()
        .ok_or_else(|| Error::model(field, format!("missing (required for kind = \"{kind}\")")))
}

/// Keys of `[model]` that the form `kind` does not read are an error, named, rather than
/// silently ignored (an explicit `F` beside `kind = "cv"` would otherwise not be used).
fn reject_foreign_keys(m: &ModelSection) -> Result<()> {
    let present: [(&str, bool); 12] = [
        ("F", m.f.is_some()),
        ("Q", m.qm.is_some()),
        ("H", m.h.is_some()),
        ("R", m.rm.is_some()),
        ("u", m.u.is_some()),
        ("d", m.d.is_some()),
        ("dims", m.dims.is_some()),
        ("dt", m.dt.is_some()),
        ("q", m.q.is_some()),
        ("r", m.r.is_some()),
        ("coeffs", m.coeffs.is_some()),
        ("file", m.file.is_some()),
    ];
    let kind = m.kind.as_deref().unwrap_or("explicit");
    let allowed: &[&str] = match kind {
        "explicit" => &["F", "Q", "H", "R", "u", "d"],
        "cv" | "ca" => &["dims", "dt", "q", "r"],
        "random-walk" | "rw" => &["dims", "q", "r"],
        "ar" => &["coeffs", "q", "r"],
        "time-varying" => &["file"],
        // An unknown kind is reported by the caller.
        _ => return Ok(()),
    };
    let foreign: Vec<&str> = present
        .iter()
        .filter(|(k, on)| *on && !allowed.contains(k))
        .map(|(k, _)| *k)
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    let form = if kind == "explicit" {
        "the explicit form (F, Q, H, R, u, d)".to_string()
    } else {
        format!("kind = \"{kind}\" (which reads {})", allowed.join(", "))
    };
    Err(Error::model(
        foreign.join(", "),
        format!("not used by {form}; remove it or choose the form that uses it"),
    ))
}

fn from_root(mut root: FileRoot) -> Result<Model> {
    if root.model.kind.as_deref() == Some("time-varying") {
        return Err(Error::model(
            "kind",
            "kind = \"time-varying\" (per-step matrices from a file) is not taken here, which needs a time-invariant model (time-varying files are read by kestrel filter, smooth, loglik, retrodict and simulate, Python's KalmanFilter.from_toml and the library's model::load_linear_model)",
        ));
    }
    match root.model.prior.take().as_deref() {
        None => {}
        Some("stationary") => {
            if root.prior.is_some() {
                return Err(Error::model(
                    "prior",
                    "prior = \"stationary\" and a [prior] section: give one or the other",
                ));
            }
            // The builders need a prior to start from; it is replaced here.
            let needs_prior = matches!(root.model.kind.as_deref(), None | Some("explicit"));
            if needs_prior {
                let nx = root.model.f.as_ref().map_or(0, |f| f.len());
                root.prior = Some(PriorSection {
                    x0: Some(vec![0.0; nx]),
                    p0m: None,
                    p0: Some(1.0),
                });
            }
            return from_root(root)?.with_stationary_prior();
        }
        Some(other) => {
            return Err(Error::model(
                "prior",
                format!("unknown prior \"{other}\" (the only named prior is \"stationary\")"),
            ))
        }
    }
    let m = root.model;
    let p = root.prior;
    reject_foreign_keys(&m)?;
    let model = match m.kind.as_deref() {
        None | Some("explicit") => {
            let need = |field: &str, v: &Option<Vec<Vec<f64>>>| -> Result<DMatrix<f64>> {
                matrix(
                    field,
                    v.as_ref().ok_or_else(|| Error::model(field, "missing"))?,
                )
            };
            let f = need("F", &m.f)?;
            let q = need("Q", &m.qm)?;
            let h = need("H", &m.h)?;
            let r = need("R", &m.rm)?;
            let nx = f.nrows();
            let ny = h.nrows();
            let u =
                m.u.map(DVector::from_vec)
                    .unwrap_or_else(|| DVector::zeros(nx));
            let d =
                m.d.map(DVector::from_vec)
                    .unwrap_or_else(|| DVector::zeros(ny));
            let p = p.ok_or_else(|| Error::model("prior", "missing [prior] section"))?;
            prior_conflicts(&p)?;
            let x0 = DVector::from_vec(p.x0.ok_or_else(|| Error::model("x0", "missing"))?);
            let p0 = match (&p.p0m, p.p0) {
                (Some(rows), _) => matrix("P0", rows)?,
                (None, Some(s)) => DMatrix::identity(nx, nx) * s,
                (None, None) => return Err(Error::model("P0", "missing")),
            };
            let model = Model {
                f,
                q,
                h,
                r,
                u,
                d,
                prior: Prior { x0, p0 },
            };
            model.validate()?;
            return Ok(model);
        }
        Some(kind @ ("cv" | "ca")) => {
            let dims = *required("dims", &m.dims, kind)?;
            let dt = m.dt.unwrap_or(1.0);
            let q = *required("q", &m.q, kind)?;
            let r = *required("r", &m.r, kind)?;
            let p0 = p.as_ref().and_then(|p| p.p0).unwrap_or(1.0);
            if kind == "cv" {
                builders::constant_velocity(dims, dt, q, r, p0)?
            } else {
                builders::constant_acceleration(dims, dt, q, r, p0)?
            }
        }
        Some(kind @ ("random-walk" | "rw")) => {
            let dims = m.dims.unwrap_or(1);
            let q = *required("q", &m.q, kind)?;
            let r = *required("r", &m.r, kind)?;
            let p0 = p.as_ref().and_then(|p| p.p0).unwrap_or(1.0);
            builders::random_walk(dims, q, r, p0)?
        }
        Some(kind @ "ar") => {
            let coeffs = required("coeffs", &m.coeffs, kind)?;
            let q = *required("q", &m.q, kind)?;
            let r = *required("r", &m.r, kind)?;
            let p0 = p.as_ref().and_then(|p| p.p0).unwrap_or(1.0);
            builders::ar(coeffs, q, r, p0)?
        }
        Some(other @ ("range-only" | "bearings-only" | "range-bearing" | "stochastic-volatility" | "custom")) => {
            return Err(Error::model(
                "kind",
                format!(
                    "kind = \"{other}\" is a nonlinear model for the particle filter; this method needs a linear-Gaussian model (explicit, cv, ca, random-walk or ar)"
                ),
            ))
        }
        Some(other) => {
            return Err(Error::model(
                "kind",
                format!(
                    "unknown model kind \"{other}\" (expected explicit, cv, ca, random-walk, ar or time-varying)"
                ),
            ))
        }
    };
    // Builder forms: an explicit prior overrides the default one.
    let nx = model.nx();
    let Some(p) = p else { return Ok(model) };
    prior_conflicts(&p)?;
    let x0 =
        p.x0.map(DVector::from_vec)
            .unwrap_or_else(|| DVector::zeros(nx));
    let p0 = match (&p.p0m, p.p0) {
        (Some(rows), _) => matrix("P0", rows)?,
        _ => model.prior.p0.clone(),
    };
    model.with_prior(x0, p0)
}

/// Parses a model from TOML text; errors name the source as `<string>`.
///
/// ```
/// let m = kestrel::model::model_from_str(r#"
///     [model]
///     kind = "cv"
///     dims = 2
///     dt = 1.0
///     q = 0.5
///     r = 4.0
/// "#)?;
/// assert_eq!((m.nx(), m.ny()), (4, 2));
/// # Ok::<(), kestrel::Error>(())
/// ```
pub fn model_from_str(text: &str) -> Result<Model> {
    model_from_toml(text, Path::new("<string>"))
}

/// Parses a model from TOML text. `origin` names the source in error messages.
pub fn model_from_toml(text: &str, origin: &Path) -> Result<Model> {
    let root = parse_root(text, origin)?;
    from_root(root).map_err(|e| in_file(e, origin))
}

/// Parses a linear-Gaussian model of any form from TOML text, the time-varying one
/// included (its `file` is read relative to the directory of `origin`). `origin` names
/// the source in error messages.
pub fn linear_model_from_toml(text: &str, origin: &Path) -> Result<LinearModel> {
    let mut root = parse_root(text, origin)?;
    if root.model.kind.as_deref() != Some("time-varying") {
        return from_root(root)
            .map(LinearModel::Invariant)
            .map_err(|e| in_file(e, origin));
    }
    reject_foreign_keys(&root.model).map_err(|e| in_file(e, origin))?;
    if root.model.prior.is_some() {
        return Err(in_file(
            Error::model(
                "prior",
                "a time-varying model has no stationary law: give [prior] x0 and P0",
            ),
            origin,
        ));
    }
    let file = root.model.file.take().ok_or_else(|| {
        in_file(
            Error::model(
                "file",
                "missing (required for kind = \"time-varying\": the .npz of F, Q, H, R per step)",
            ),
            origin,
        )
    })?;
    let prior = root.prior.take().ok_or_else(|| {
        in_file(
            Error::model("prior", "missing [prior] section (x0 and P0)"),
            origin,
        )
    })?;
    super::varying_file::load(origin, &file, prior)
}

/// Reads a linear-Gaussian model file of any form, the time-varying one included.
pub fn load_linear_model(path: impl AsRef<Path>) -> Result<LinearModel> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    linear_model_from_toml(&text, path)
}

/// A field error of the model as an error of the file `origin`.
pub(super) fn in_file(e: Error, origin: &Path) -> Error {
    match e {
        Error::Model { field, msg } => Error::ModelFile {
            path: origin.to_path_buf(),
            msg: format!("{field}: {msg}"),
        },
        other => other,
    }
}

fn parse_root(text: &str, origin: &Path) -> Result<FileRoot> {
    if let Some(msg) = super::family::foreign(text, super::family::Family::Linear) {
        return Err(Error::ModelFile {
            path: origin.to_path_buf(),
            msg,
        });
    }
    toml::from_str(text).map_err(|e| {
        // The parser's own message without its multi-line source excerpt.
        let at = e.span().map(|s| {
            let before = &text.as_bytes()[..s.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let start = before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let col = before.len() - start + 1;
            let rest = &text.as_bytes()[start..];
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let source = crate::io::excerpt(rest[..end].trim_ascii());
            format!("line {line}, column {col} (`{source}`): ")
        });
        Error::ModelFile {
            path: origin.to_path_buf(),
            msg: format!(
                "{}{}",
                at.unwrap_or_default(),
                e.message().trim_end().replace('\n', " ")
            ),
        }
    })
}

/// Reads a model file.
pub fn load_model(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    model_from_toml(&text, path)
}

fn rows_of(m: &DMatrix<f64>) -> toml::Value {
    toml::Value::Array(
        (0..m.nrows())
            .map(|i| {
                toml::Value::Array(
                    (0..m.ncols())
                        .map(|j| toml::Value::Float(m[(i, j)]))
                        .collect(),
                )
            })
            .collect(),
    )
}

fn vec_of(v: &DVector<f64>) -> toml::Value {
    toml::Value::Array(v.iter().map(|x| toml::Value::Float(*x)).collect())
}

/// Renders a model in the explicit TOML form (numbers round-trip exactly).
pub fn model_to_toml(m: &Model) -> String {
    let mut model = toml::Table::new();
    model.insert("F".into(), rows_of(&m.f));
    model.insert("Q".into(), rows_of(&m.q));
    model.insert("H".into(), rows_of(&m.h));
    model.insert("R".into(), rows_of(&m.r));
    model.insert("u".into(), vec_of(&m.u));
    model.insert("d".into(), vec_of(&m.d));
    let mut prior = toml::Table::new();
    prior.insert("x0".into(), vec_of(&m.prior.x0));
    prior.insert("P0".into(), rows_of(&m.prior.p0));
    let mut root = toml::Table::new();
    root.insert("model".into(), toml::Value::Table(model));
    root.insert("prior".into(), toml::Value::Table(prior));
    toml::to_string(&root).expect("a table of floats always serialises")
}

/// Writes a model file in the explicit form (temporary file, then rename).
pub fn save_model(m: &Model, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    crate::io::write_atomic(path, |w| {
        use std::io::Write;
        w.write_all(model_to_toml(m).as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPLICIT: &str = r#"
[model]
F = [[1.0, 1.0], [0.0, 1.0]]
Q = [[0.3, 0.5], [0.5, 1.0]]
H = [[1.0, 0.0]]
R = [[1.0]]
u = [0.0, 0.1]
[prior]
x0 = [0.0, 0.0]
P0 = [[10.0, 0.0], [0.0, 10.0]]
"#;

    #[test]
    fn explicit_round_trip() {
        let m = model_from_toml(EXPLICIT, Path::new("m.toml")).unwrap();
        assert_eq!(m.u[1], 0.1);
        assert_eq!(m.d.len(), 1);
        let back = model_from_toml(&model_to_toml(&m), Path::new("x")).unwrap();
        assert_eq!(m, back);
    }

    #[test]
    fn builder_form() {
        let m = model_from_toml(
            "[model]\nkind = \"cv\"\ndims = 2\ndt = 0.5\nq = 1.0\nr = 4.0\n[prior]\np0 = 100.0\n",
            Path::new("m.toml"),
        )
        .unwrap();
        assert_eq!((m.nx(), m.ny()), (4, 2));
        assert_eq!(m.prior.p0[(3, 3)], 100.0);
    }

    #[test]
    fn stationary_prior() {
        let text = "[model]\nkind = \"ar\"\ncoeffs = [0.5, 0.2]\nq = 1.0\nr = 0.1\nprior = \"stationary\"\n";
        let m = model_from_toml(text, Path::new("m.toml")).unwrap();
        let resid = &m.f * &m.prior.p0 * m.f.transpose() + &m.q - &m.prior.p0;
        assert!(resid.amax() < 1e-12, "{resid}");
        let explicit = "[model]\nF = [[0.9]]\nQ = [[1.0]]\nH = [[1.0]]\nR = [[1.0]]\nu = [0.1]\nprior = \"stationary\"\n";
        let m = model_from_toml(explicit, Path::new("m.toml")).unwrap();
        assert!((m.prior.p0[(0, 0)] - 1.0 / 0.19).abs() < 1e-12);
        assert!((m.prior.x0[0] - 1.0).abs() < 1e-12);
        let e = model_from_toml(&text.replace("0.5, 0.2", "1.0, 0.2"), Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml") && e.contains("stable"), "{e}");
        let e = model_from_toml(&text.replace("stationary", "flat"), Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown prior"), "{e}");
    }

    #[test]
    fn keys_of_the_other_form_are_refused_by_name() {
        let cases = [
            (
                "[model]\nkind = \"cv\"\ndims = 2\nq = 1.0\nr = 1.0\nF = [[1.0]]\n",
                "F",
            ),
            (
                "[model]\nkind = \"cv\"\ndims = 1\nq = 1.0\nr = 1.0\ncoeffs = [0.5]\n",
                "coeffs",
            ),
            (
                "[model]\nkind = \"ar\"\ncoeffs = [0.5]\nq = 1.0\nr = 1.0\ndims = 3\n",
                "dims",
            ),
            (
                &EXPLICIT.replace("u = [0.0, 0.1]", "q = 2.0\ndt = 0.1"),
                "dt, q",
            ),
        ];
        for (text, key) in cases {
            let e = model_from_toml(text, Path::new("m.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains("not used by"), "{e}");
        }
    }

    #[test]
    fn huge_dimensions_are_refused_before_allocating() {
        for dims in ["300", "4294967296", "18446744073709551615"] {
            let text =
                format!("[model]\nkind = \"random-walk\"\ndims = {dims}\nq = 1.0\nr = 1.0\n");
            let e = model_from_toml(&text, Path::new("m.toml")).unwrap_err();
            assert!(e.to_string().contains("dims"), "{e}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let bad = EXPLICIT.replace("R = [[1.0]]", "R = [[-1.0]]");
        let e = model_from_toml(&bad, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.toml") && e.contains("R:") && e.contains("positive definite"),
            "{e}"
        );
        let bad = EXPLICIT.replace(
            "F = [[1.0, 1.0], [0.0, 1.0]]",
            "F = [[1.0, nan], [0.0, 1.0]]",
        );
        let e = model_from_toml(&bad, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("F:") && e.contains("not finite"), "{e}");
        let bad = EXPLICIT.replace("H = [[1.0, 0.0]]", "H = [[1.0, 0.0, 2.0]]");
        let e = model_from_toml(&bad, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("H:") && e.contains("expected 1x2"), "{e}");
        let bad = EXPLICIT.replace(
            "Q = [[0.3, 0.5], [0.5, 1.0]]",
            "Q = [[0.3, 0.5], [0.4, 1.0]]",
        );
        let e = model_from_toml(&bad, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Q:") && e.contains("symmetric"), "{e}");
        let e = model_from_toml("[model]\nF = 3\n", Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml"), "{e}");
    }
}
