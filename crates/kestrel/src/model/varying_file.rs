//! The time-varying model file (Sarkka & Garcia-Fernandez's experimental class): per-step
//! matrices from an `.npz` beside the TOML.
//!
//! ```toml
//! [model]
//! kind = "time-varying"
//! file = "steps.npz"     # relative to this file
//! [prior]
//! x0 = [0.0, 0.0]
//! P0 = [[1.0, 0.0], [0.0, 1.0]]   # or p0 = 1.0 (P0 = p0 I)
//! ```
//!
//! The `.npz` holds `F [T, nx, nx]`, `Q [T, nx, nx]`, `H [T, ny, nx]`, `R [T, ny, ny]`
//! and optionally `u [T, nx]`, `d [T, ny]` (zeros when absent), f64 or f32. Entry `k` is
//! the transition into step `k` and the measurement model of step `k`, as in
//! [`TimeVaryingModel`]: `F[0]`, `Q[0]` and `u[0]` are never used (they must still be
//! finite, and `Q[0]` positive semi-definite: zeros will do).

use super::file::{in_file, matrix, PriorSection};
use super::{LinearModel, Prior, StepMatrices, TimeVaryingModel};
use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};
use std::path::Path;

const NEEDED: &str =
    "F [T, nx, nx], Q [T, nx, nx], H [T, ny, nx], R [T, ny, ny] (optional u [T, nx], d [T, ny])";

fn fail(path: &Path, msg: impl Into<String>) -> Error {
    Error::ModelFile {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

fn shape_str(s: &[usize]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Reads the time-varying model of the TOML `origin` whose `[model] file` is `file` and
/// whose `[prior]` is `prior`.
pub(super) fn load(origin: &Path, file: &str, prior: PriorSection) -> Result<LinearModel> {
    let path = origin
        .parent()
        .map_or_else(|| Path::new(file).to_path_buf(), |dir| dir.join(file));
    if file.is_empty() {
        return Err(in_file(Error::model("file", "empty path"), origin));
    }
    let arrays = crate::io::read_npz_arrays_f64(&path).map_err(|e| match e {
        Error::Io { source, .. } => fail(
            &path,
            format!(
                "cannot read the per-step matrices named by {} (file = \"{file}\"): {source}",
                origin.display()
            ),
        ),
        other => other,
    })?;
    let names = ["F", "Q", "H", "R", "u", "d"];
    if let Some((bad, _, _)) = arrays.iter().find(|(n, _, _)| !names.contains(&n.as_str())) {
        return Err(fail(
            &path,
            format!("array {bad} is not a model array (a time-varying model file holds {NEEDED})"),
        ));
    }
    let get = |name: &str| arrays.iter().find(|(n, _, _)| n == name);
    let held = || {
        let v: Vec<String> = arrays
            .iter()
            .map(|(n, s, _)| format!("{n} {}", shape_str(s)))
            .collect();
        if v.is_empty() {
            "no arrays".to_string()
        } else {
            v.join(", ")
        }
    };
    let need = |name: &str| {
        get(name).ok_or_else(|| {
            fail(
                &path,
                format!(
                    "array {name} is missing (a time-varying model file holds {NEEDED}; this one holds {})",
                    held()
                ),
            )
        })
    };
    let (_, fs, f) = need("F")?;
    if fs.len() != 3 || fs[1] != fs[2] || fs[1] == 0 {
        return Err(fail(
            &path,
            format!("array F has shape {}, expected [T, nx, nx]", shape_str(fs)),
        ));
    }
    let (t, nx) = (fs[0], fs[1]);
    if t == 0 {
        return Err(fail(&path, "array F has 0 steps (shape [0, nx, nx])"));
    }
    let (_, hs, h) = need("H")?;
    if hs.len() != 3 || hs[0] != t || hs[2] != nx || hs[1] == 0 {
        return Err(fail(
            &path,
            format!(
                "array H has shape {}, expected [T, ny, nx] = [{t}, ny, {nx}] (T and nx from F's shape {})",
                shape_str(hs),
                shape_str(fs)
            ),
        ));
    }
    let ny = hs[1];
    let from = |n: &str| -> String {
        if n == "nx" {
            format!("T and nx from F's shape {}", shape_str(fs))
        } else {
            format!(
                "T from F's shape {}, ny from H's shape {}",
                shape_str(fs),
                shape_str(hs)
            )
        }
    };
    type Array = (String, Vec<usize>, Vec<f64>);
    let check = |a: &Array, want: &[usize], dims: &str, by: &str| -> Result<()> {
        let (name, s, _) = a;
        if s.as_slice() != want {
            return Err(fail(
                &path,
                format!(
                    "array {name} has shape {}, expected {dims} = {} ({})",
                    shape_str(s),
                    shape_str(want),
                    from(by)
                ),
            ));
        }
        Ok(())
    };
    let (qa, ra) = (need("Q")?, need("R")?);
    check(qa, &[t, nx, nx], "[T, nx, nx]", "nx")?;
    check(ra, &[t, ny, ny], "[T, ny, ny]", "ny")?;
    let (q, r) = (&qa.2, &ra.2);
    let u = get("u");
    let d = get("d");
    if let Some(a) = u {
        check(a, &[t, nx], "[T, nx]", "nx")?;
    }
    if let Some(a) = d {
        check(a, &[t, ny], "[T, ny]", "ny")?;
    }
    let (u, d) = (u.map(|a| &a.2), d.map(|a| &a.2));
    // Non-finite entries, named by array, step and position (row-major).
    for (name, v, per, cols, matrix) in [
        ("F", Some(f), nx * nx, nx, true),
        ("Q", Some(q), nx * nx, nx, true),
        ("H", Some(h), ny * nx, nx, true),
        ("R", Some(r), ny * ny, ny, true),
        ("u", u, nx, nx, false),
        ("d", d, ny, ny, false),
    ] {
        let Some(v) = v else { continue };
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            let (k, j) = (i / per, i % per);
            let at = if !matrix {
                format!("[{k}][{j}]")
            } else {
                format!("[{k}][{}][{}]", j / cols, j % cols)
            };
            return Err(fail(
                &path,
                format!(
                    "array {name}: entry {at} (step {k}) is not finite ({})",
                    v[i]
                ),
            ));
        }
    }
    let prior = prior_of(prior, nx).map_err(|e| in_file(e, origin))?;
    super::validate::validate_prior(nx, &prior).map_err(|e| in_file(e, origin))?;
    let steps = (0..t)
        .map(|k| StepMatrices {
            f: DMatrix::from_row_slice(nx, nx, &f[k * nx * nx..(k + 1) * nx * nx]),
            u: u.map_or_else(
                || DVector::zeros(nx),
                |u| DVector::from_column_slice(&u[k * nx..(k + 1) * nx]),
            ),
            q: DMatrix::from_row_slice(nx, nx, &q[k * nx * nx..(k + 1) * nx * nx]),
            h: DMatrix::from_row_slice(ny, nx, &h[k * ny * nx..(k + 1) * ny * nx]),
            d: d.map_or_else(
                || DVector::zeros(ny),
                |d| DVector::from_column_slice(&d[k * ny..(k + 1) * ny]),
            ),
            r: DMatrix::from_row_slice(ny, ny, &r[k * ny * ny..(k + 1) * ny * ny]),
        })
        .collect();
    let model = TimeVaryingModel::new(steps, prior).map_err(|e| match e {
        Error::Model { field, msg } => fail(&path, format!("{field}: {msg}")),
        other => other,
    })?;
    Ok(LinearModel::Varying { model, file: path })
}

fn prior_of(p: PriorSection, nx: usize) -> Result<Prior> {
    let x0 = DVector::from_vec(p.x0.ok_or_else(|| Error::model("x0", "missing"))?);
    let p0 = match (&p.p0m, p.p0) {
        (Some(_), Some(_)) => return Err(Error::model("P0", "P0 and p0 both given: give one")),
        (Some(rows), None) => matrix("P0", rows)?,
        (None, Some(s)) => DMatrix::identity(nx, nx) * s,
        (None, None) => return Err(Error::model("P0", "missing (P0, or p0 for p0 I)")),
    };
    Ok(Prior { x0, p0 })
}

/// Whether the TOML text declares `[model] kind = "time-varying"` (false when it does not
/// parse: the readers report that).
pub fn is_time_varying_text(text: &str) -> bool {
    text.parse::<toml::Table>().is_ok_and(|root| {
        root.get("model")
            .and_then(|m| m.get("kind"))
            .and_then(|k| k.as_str())
            == Some("time-varying")
    })
}

/// Writes `m` as a time-varying model file: the per-step matrices to `npz` (f64 arrays
/// `F, Q, H, R, u, d`), and the TOML `toml` naming it by its path relative to the TOML's
/// directory when it lies there or below (else as given) with the prior. Reading the TOML
/// back with [`super::load_linear_model`] gives `m` exactly.
pub fn save_time_varying_model(m: &TimeVaryingModel, toml: &Path, npz: &Path) -> Result<()> {
    use super::StateSpace;
    let (t, nx, ny) = (m.len(), m.nx(), m.ny());
    let rows = |a: &DMatrix<f64>, out: &mut Vec<f64>| {
        for i in 0..a.nrows() {
            for j in 0..a.ncols() {
                out.push(a[(i, j)]);
            }
        }
    };
    let (mut f, mut q, mut h, mut r, mut u, mut d) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for s in m.steps() {
        rows(&s.f, &mut f);
        rows(&s.q, &mut q);
        rows(&s.h, &mut h);
        rows(&s.r, &mut r);
        u.extend(s.u.iter());
        d.extend(s.d.iter());
    }
    crate::io::write_npz_arrays(
        npz,
        &[
            ("F", &[t, nx, nx], &f),
            ("Q", &[t, nx, nx], &q),
            ("H", &[t, ny, nx], &h),
            ("R", &[t, ny, ny], &r),
            ("u", &[t, nx], &u),
            ("d", &[t, ny], &d),
        ],
    )?;
    let dir = toml.parent().unwrap_or(Path::new(""));
    let name = npz.strip_prefix(dir).unwrap_or(npz);
    let mut model = toml::Table::new();
    model.insert("kind".into(), "time-varying".into());
    model.insert("file".into(), name.to_string_lossy().into_owned().into());
    let p = m.prior();
    let mut prior = toml::Table::new();
    prior.insert(
        "x0".into(),
        toml::Value::Array(p.x0.iter().map(|v| toml::Value::Float(*v)).collect()),
    );
    prior.insert(
        "P0".into(),
        toml::Value::Array(
            (0..nx)
                .map(|i| {
                    toml::Value::Array((0..nx).map(|j| toml::Value::Float(p.p0[(i, j)])).collect())
                })
                .collect(),
        ),
    );
    let mut root = toml::Table::new();
    root.insert("model".into(), toml::Value::Table(model));
    root.insert("prior".into(), toml::Value::Table(prior));
    let text = toml::to_string(&root).expect("a table of strings and floats always serialises");
    crate::io::write_atomic(toml, |w| {
        use std::io::Write;
        w.write_all(text.as_bytes())
    })
}
