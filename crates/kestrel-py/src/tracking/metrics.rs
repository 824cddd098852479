//! `kestrel eval` over arrays: GOSPA, OSPA and CLEAR MOT per step and averaged, with
//! the command's series, summary line and messages.

use super::{bad, f64_array, u64_array};
use crate::arrays::{c_slice, matrix, owned};
use crate::run_detached;
use kestrel::tracking::files::Labelled;
use kestrel::tracking::metrics::{clear_mot, frames, gospa_over_time, ospa, Frame};
use kestrel::tracking::Assignment;
use kestrel::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn check_metric_args(c: f64, p: f64, switching: f64) -> PyResult<()> {
    kestrel::tracking::metrics::check_params("", c, p, switching).map_err(crate::to_py)
}

/// Per-step columns (named as `kestrel eval --output`'s header) and the summary line
/// the command prints.
struct Evaluation {
    columns: Vec<(&'static str, Vec<f64>)>,
    totals: Vec<(&'static str, f64)>,
    summary: String,
}

/// `kestrel eval`'s `evaluate`: the same series and the same summary text.
fn evaluate(frames: &[Frame], dim: usize, metric: &str, c: f64, p: f64, gamma: f64) -> Evaluation {
    let n = frames.len().max(1) as f64;
    let t: Vec<f64> = frames.iter().map(|f| f.t).collect();
    match metric {
        "gospa" => {
            let g = gospa_over_time(frames, dim, c, p, gamma);
            let col = |f: fn(&kestrel::tracking::metrics::Gospa) -> f64| -> Vec<f64> {
                g.iter().map(f).collect()
            };
            let cols = vec![
                ("t", t),
                ("gospa", col(|s| s.total)),
                ("localisation", col(|s| s.localisation)),
                ("missed", col(|s| s.missed)),
                ("false", col(|s| s.false_tracks)),
                ("switching", col(|s| s.switching)),
                ("switches", col(|s| s.switches)),
            ];
            let mean = |k: usize| cols[k].1.iter().sum::<f64>() / n;
            let summary = format!(
                "mean GOSPA {:.4} (c {c}, p {p}, gamma {gamma}; mean parts, p-th powers: localisation {:.4}, missed {:.4}, false {:.4}, switching {:.4}; {} switches) over {} steps",
                mean(1),
                mean(2),
                mean(3),
                mean(4),
                mean(5),
                cols[6].1.iter().sum::<f64>(),
                frames.len()
            );
            Evaluation {
                totals: vec![("mean", mean(1))],
                columns: cols,
                summary,
            }
        }
        "ospa" => {
            let mut s = Assignment::new();
            let v: Vec<f64> = frames
                .iter()
                .map(|f| ospa(&f.truth, &f.tracks, dim, c, p, &mut s))
                .collect();
            let mean = v.iter().sum::<f64>() / n;
            Evaluation {
                summary: format!(
                    "mean OSPA {mean:.4} (c {c}, p {p}) over {} steps",
                    frames.len()
                ),
                totals: vec![("mean", mean)],
                columns: vec![("t", t), ("ospa", v)],
            }
        }
        _ => {
            let (steps, sum) = clear_mot(frames, dim, c);
            let col = |f: &dyn Fn(&kestrel::tracking::metrics::MotStep) -> f64| -> Vec<f64> {
                steps.iter().map(f).collect()
            };
            let cols = vec![
                ("t", t),
                ("truths", col(&|s| s.truths as f64)),
                ("matches", col(&|s| s.matches as f64)),
                ("misses", col(&|s| s.misses as f64)),
                ("false", col(&|s| s.false_tracks as f64)),
                ("switches", col(&|s| s.switches as f64)),
                (
                    "distance",
                    col(&|s| {
                        if s.matches > 0 {
                            s.distance / s.matches as f64
                        } else {
                            f64::NAN
                        }
                    }),
                ),
            ];
            Evaluation {
                summary: format!(
                    "MOTA {:.4}  MOTP {:.4} (threshold {c})  truths {}  matches {}  misses {}  false {}  ID switches {}  over {} steps",
                    sum.mota,
                    sum.motp,
                    sum.truths,
                    sum.matches,
                    sum.misses,
                    sum.false_tracks,
                    sum.switches,
                    frames.len()
                ),
                totals: vec![
                    ("mota", sum.mota),
                    ("motp", sum.motp),
                    ("total_truths", sum.truths as f64),
                    ("total_matches", sum.matches as f64),
                    ("total_misses", sum.misses as f64),
                    ("total_false", sum.false_tracks as f64),
                    ("total_switches", sum.switches as f64),
                ],
                columns: cols,
            }
        }
    }
}

fn metric_name(metric: &str) -> PyResult<&'static str> {
    match metric {
        "gospa" => Ok("gospa"),
        "ospa" => Ok("ospa"),
        "mot" => Ok("mot"),
        m => Err(bad(format!(
            "metric: unknown metric \"{}\" (expected gospa, ospa or mot)",
            m.escape_debug()
        ))),
    }
}

fn evaluation_dict<'py>(py: Python<'py>, e: Evaluation) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (k, v) in e.columns {
        let n = v.len();
        out.set_item(k, owned(py, v, &[n])?)?;
    }
    for (k, v) in e.totals {
        out.set_item(k, v)?;
    }
    out.set_item("summary", e.summary)?;
    Ok(out)
}

/// Points of `dim` components with identities, in consecutive groups of `counts`.
struct Points {
    counts: Vec<usize>,
    x: Vec<f64>,
    ids: Vec<u64>,
}

fn points(
    counts: Vec<usize>,
    x: &Bound<'_, PyAny>,
    ids: &Bound<'_, PyAny>,
    what: &str,
    dim: usize,
) -> PyResult<Points> {
    let xg = f64_array(x, what)?;
    let (xs, xv) = c_slice(&xg, what, 2)?;
    let ig = u64_array(ids, what)?;
    let (is, iv) = c_slice(&ig, what, 1)?;
    let total: usize = counts.iter().sum();
    if xs[0] != total || is[0] != total || (total > 0 && xs[1] != dim) {
        return Err(bad(format!(
            "{what}: {total} points of {dim} components expected, got shape {xs:?} and {} ids",
            is[0]
        )));
    }
    Ok(Points {
        counts,
        x: xv.to_vec(),
        ids: iv.to_vec(),
    })
}

/// A metric over steps of points: `truth` and `est` are `[sum counts, dim]` arrays, one
/// group of `counts[k]` rows a step, with identities; `t` the steps' times.
#[pyfunction]
#[pyo3(signature = (metric, t, dim, truth_counts, truth, truth_ids, est_counts, est, est_ids, c=10.0, p=2.0, switching=0.0))]
#[allow(clippy::too_many_arguments)]
pub fn metric_steps<'py>(
    py: Python<'py>,
    metric: &str,
    t: Vec<f64>,
    dim: usize,
    truth_counts: Vec<usize>,
    truth: &Bound<'py, PyAny>,
    truth_ids: &Bound<'py, PyAny>,
    est_counts: Vec<usize>,
    est: &Bound<'py, PyAny>,
    est_ids: &Bound<'py, PyAny>,
    c: f64,
    p: f64,
    switching: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let metric = metric_name(metric)?;
    check_metric_args(c, p, switching)?;
    if truth_counts.len() != t.len() || est_counts.len() != t.len() {
        return Err(bad(format!(
            "truth and estimates: {} and {} steps, expected {}",
            truth_counts.len(),
            est_counts.len(),
            t.len()
        )));
    }
    let a = points(truth_counts, truth, truth_ids, "truth", dim)?;
    let b = points(est_counts, est, est_ids, "estimates", dim)?;
    let e = run_detached(py, || {
        let mut fr = Vec::with_capacity(t.len());
        let (mut ia, mut ib) = (0usize, 0usize);
        for (k, &tk) in t.iter().enumerate() {
            let (na, nb) = (a.counts[k], b.counts[k]);
            fr.push(Frame {
                t: tk,
                truth_ids: a.ids[ia..ia + na].to_vec(),
                truth: a.x[ia * dim..(ia + na) * dim].to_vec(),
                track_ids: b.ids[ib..ib + nb].to_vec(),
                tracks: b.x[ib * dim..(ib + nb) * dim].to_vec(),
            });
            ia += na;
            ib += nb;
        }
        Ok(evaluate(&fr, dim.max(1), metric, c, p, switching))
    })?;
    evaluation_dict(py, e)
}

/// `kestrel eval` on arrays: truth rows `truth_t`, `truth_id`, `truth_x` [M, n] and track
/// rows `track_t`, `track_id`, `track_confirmed`, `track_x` [R, n] (the files' columns);
/// `h` [d, n] compares `H x` instead of whole states.
#[pyfunction]
#[pyo3(signature = (metric, truth_t, truth_id, truth_x, track_t, track_id, track_confirmed, track_x, h=None, all_tracks=false, c=10.0, p=2.0, switching=0.0))]
#[allow(clippy::too_many_arguments)]
pub fn metric_labelled<'py>(
    py: Python<'py>,
    metric: &str,
    truth_t: Vec<f64>,
    truth_id: Vec<u64>,
    truth_x: &Bound<'py, PyAny>,
    track_t: Vec<f64>,
    track_id: Vec<u64>,
    track_confirmed: Vec<bool>,
    track_x: &Bound<'py, PyAny>,
    h: Option<&Bound<'py, PyAny>>,
    all_tracks: bool,
    c: f64,
    p: f64,
    switching: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let metric = metric_name(metric)?;
    check_metric_args(c, p, switching)?;
    let labelled = |t: Vec<f64>,
                    id: Vec<u64>,
                    confirmed: Vec<bool>,
                    x: &Bound<'py, PyAny>,
                    what: &str|
     -> PyResult<Labelled> {
        let g = f64_array(x, what)?;
        let (s, v) = c_slice(&g, what, 2)?;
        if s[0] != t.len() || s[0] != id.len() || s[0] != confirmed.len() {
            return Err(bad(format!(
                "{what}: {} rows of states, {} times, {} identities",
                s[0],
                t.len(),
                id.len()
            )));
        }
        if let Some(i) = t.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!("{what}: t[{i}] = {} is not finite", t[i])));
        }
        if let Some(i) = v.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "{what}: x[{}, {}] = {} is not finite",
                i / s[1].max(1),
                i % s[1].max(1),
                v[i]
            )));
        }
        Ok(Labelled {
            n: s[1],
            t,
            id,
            confirmed,
            x: v.to_vec(),
        })
    };
    let nt = truth_t.len();
    let truth = labelled(truth_t, truth_id, vec![true; nt], truth_x, "truth")?;
    let tracks = labelled(track_t, track_id, track_confirmed, track_x, "tracks")?;
    let h = h
        .map(|h| {
            matrix(h, "H").map(|m| {
                let v: Vec<f64> = (0..m.nrows())
                    .flat_map(|i| (0..m.ncols()).map(move |j| (i, j)))
                    .map(|(i, j)| m[(i, j)])
                    .collect();
                (v, m.nrows())
            })
        })
        .transpose()?;
    let e = run_detached(py, || {
        let (fr, dim) = frames(
            &truth,
            &tracks,
            h.as_ref().map(|(h, d)| (h.as_slice(), *d)),
            all_tracks,
        )
        .map_err(|e| match e {
            Error::Input { msg } => Error::Input {
                msg: msg.replace("--model", "model"),
            },
            e => e,
        })?;
        if fr.is_empty() {
            return Err(Error::Input {
                msg: "truth and tracks hold no rows to compare".into(),
            });
        }
        Ok(evaluate(&fr, dim, metric, c, p, switching))
    })?;
    evaluation_dict(py, e)
}
