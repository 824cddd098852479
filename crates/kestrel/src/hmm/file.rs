//! Model files:
//!
//! ```toml
//! [hmm]
//! transition = [[0.9, 0.1], [0.2, 0.8]]   # K x K, row = from, rows sum to 1
//! initial = [0.5, 0.5]                    # K: step 0 before observation 0
//! [hmm.emission]
//! kind = "categorical"                    # or "gaussian"
//! probs = [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]   # K x M (categorical)
//! # means = [[0.0], [3.0]]                # K x ny (gaussian)
//! # covs = [[[1.0]], [[2.0]]]             # K x ny x ny (gaussian)
//! ```

use super::{Emission, HiddenMarkovModel};
use crate::error::{Error, Result};
use std::path::Path;

fn err(origin: &Path, msg: impl Into<String>) -> Error {
    Error::ModelFile {
        path: origin.to_path_buf(),
        msg: msg.into(),
    }
}

fn number(v: &toml::Value, key: &str, origin: &Path) -> Result<f64> {
    match v {
        toml::Value::Float(f) => Ok(*f),
        toml::Value::Integer(i) => Ok(*i as f64),
        _ => Err(err(origin, format!("{key}: expected a number, found {v}"))),
    }
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

/// Rows of numbers, all of one length: (rows, columns, row-major values).
fn matrix(v: &toml::Value, key: &str, origin: &Path) -> Result<(usize, usize, Vec<f64>)> {
    let rows = v
        .as_array()
        .ok_or_else(|| err(origin, format!("{key}: expected an array of rows")))?;
    let mut out = Vec::new();
    let mut cols = None;
    for (i, r) in rows.iter().enumerate() {
        let row = vector(r, &format!("{key}[{i}]"), origin)?;
        match cols {
            None => cols = Some(row.len()),
            Some(c) if c != row.len() => {
                return Err(err(
                    origin,
                    format!("{key}[{i}]: has {} entries, row 0 has {c}", row.len()),
                ))
            }
            _ => {}
        }
        out.extend(row);
    }
    Ok((rows.len(), cols.unwrap_or(0), out))
}

fn table<'a>(v: &'a toml::Value, key: &str, origin: &Path) -> Result<&'a toml::Table> {
    v.as_table()
        .ok_or_else(|| err(origin, format!("[{key}]: expected a table")))
}

fn check_keys(t: &toml::Table, prefix: &str, allowed: &[&str], origin: &Path) -> Result<()> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                origin,
                format!("{prefix}{k}: unknown key (expected {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn required<'a>(
    t: &'a toml::Table,
    key: &str,
    what: &str,
    origin: &Path,
) -> Result<&'a toml::Value> {
    t.get(key)
        .ok_or_else(|| err(origin, format!("{key}: missing ({what})")))
}

/// Parses a hidden Markov model from TOML text; `origin` names it in messages.
pub fn hmm_from_toml(text: &str, origin: &Path) -> Result<HiddenMarkovModel> {
    if let Some(msg) = crate::model::family::foreign(text, crate::model::family::Family::Hmm) {
        return Err(err(origin, msg));
    }
    let root: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(origin, e.to_string().trim_end().replace('\n', " ")))?;
    check_keys(&root, "[", &["hmm"], origin).map_err(|_| {
        let k = root
            .keys()
            .find(|k| *k != "hmm")
            .cloned()
            .unwrap_or_default();
        err(origin, format!("[{k}]: unknown section (expected [hmm])"))
    })?;
    let hmm = table(
        root.get("hmm")
            .ok_or_else(|| err(origin, "[hmm]: missing"))?,
        "hmm",
        origin,
    )?;
    check_keys(hmm, "hmm.", &["transition", "initial", "emission"], origin)?;
    let (r, c, transition) = matrix(
        required(hmm, "transition", "K x K, row = from", origin)
            .map_err(|_| err(origin, "hmm.transition: missing (K x K, row = from)"))?,
        "hmm.transition",
        origin,
    )?;
    let initial = vector(
        hmm.get("initial").ok_or_else(|| {
            err(
                origin,
                "hmm.initial: missing (K probabilities, step 0 before observation 0)",
            )
        })?,
        "hmm.initial",
        origin,
    )?;
    let k = initial.len();
    if r != k || c != k {
        return Err(err(
            origin,
            format!(
                "hmm.transition: is {r} x {c}, expected {k} x {k} (hmm.initial has {k} states)"
            ),
        ));
    }
    let em = table(
        hmm.get("emission")
            .ok_or_else(|| err(origin, "[hmm.emission]: missing"))?,
        "hmm.emission",
        origin,
    )?;
    let kind = em
        .get("kind")
        .ok_or_else(|| {
            err(
                origin,
                "hmm.emission.kind: missing (categorical or gaussian)",
            )
        })?
        .as_str()
        .ok_or_else(|| {
            err(
                origin,
                "hmm.emission.kind: expected a string (categorical or gaussian)",
            )
        })?;
    let emission = match kind {
        "categorical" => {
            check_keys(em, "hmm.emission.", &["kind", "probs"], origin)?;
            let (r, m, probs) = matrix(
                em.get("probs")
                    .ok_or_else(|| err(origin, "hmm.emission.probs: missing (K x M)"))?,
                "hmm.emission.probs",
                origin,
            )?;
            if r != k || m == 0 {
                return Err(err(
                    origin,
                    format!(
                        "hmm.emission.probs: is {r} x {m}, expected {k} x M with M >= 1 symbols"
                    ),
                ));
            }
            Emission::Categorical { symbols: m, probs }
        }
        "gaussian" => {
            check_keys(em, "hmm.emission.", &["kind", "means", "covs"], origin)?;
            let (r, ny, means) = matrix(
                em.get("means")
                    .ok_or_else(|| err(origin, "hmm.emission.means: missing (K x ny)"))?,
                "hmm.emission.means",
                origin,
            )?;
            if r != k || ny == 0 {
                return Err(err(
                    origin,
                    format!("hmm.emission.means: is {r} x {ny}, expected {k} x ny with ny >= 1"),
                ));
            }
            let cv = em
                .get("covs")
                .ok_or_else(|| err(origin, "hmm.emission.covs: missing (K x ny x ny)"))?
                .as_array()
                .ok_or_else(|| err(origin, "hmm.emission.covs: expected K matrices"))?;
            if cv.len() != k {
                return Err(err(
                    origin,
                    format!("hmm.emission.covs: has {} matrices, expected {k}", cv.len()),
                ));
            }
            let mut covs = Vec::with_capacity(k * ny * ny);
            for (s, m) in cv.iter().enumerate() {
                let key = format!("hmm.emission.covs[{s}]");
                let (a, b, v) = matrix(m, &key, origin)?;
                if a != ny || b != ny {
                    return Err(err(
                        origin,
                        format!("{key}: is {a} x {b}, expected {ny} x {ny}"),
                    ));
                }
                covs.extend(v);
            }
            Emission::Gaussian { ny, means, covs }
        }
        other => {
            return Err(err(
                origin,
                format!(
                "hmm.emission.kind: unknown kind \"{other}\" (expected categorical or gaussian)"
            ),
            ))
        }
    };
    HiddenMarkovModel::new(transition, initial, emission).map_err(|e| match e {
        Error::Model { field, msg } => err(origin, format!("hmm.{field}: {msg}")),
        other => other,
    })
}

/// Reads a hidden Markov model file.
pub fn load_hmm(path: &Path) -> Result<HiddenMarkovModel> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    hmm_from_toml(&text, path)
}
