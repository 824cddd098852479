//! Writing the long form: rows formatted on all cores, numbers in their shortest
//! round-trip form (Ryu), the file written atomically.

use crate::data::CovOutput;
use crate::data::Estimates;
use crate::error::Result;
use crate::linalg::Real;
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

/// Appends the shortest representation of `v` that parses back to the same value (Ryu,
/// Adams 2018), in the precision of `T`; NaN is written `NaN`.
#[inline]
pub(crate) fn push_value<T: Real>(buf: &mut Vec<u8>, v: T) {
    let mut r = ryu::Buffer::new();
    let s = if T::NAME == "f32" {
        r.format(v.to_f64() as f32)
    } else {
        r.format(v.to_f64())
    };
    buf.extend_from_slice(s.as_bytes());
}

/// Appends the decimal digits of `n`.
#[inline]
fn push_index(buf: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Formats tracks `b0..b1` into `buf`: one row per track and step, `per_row` writing the
/// values after `track,t`.
fn format_rows(
    buf: &mut Vec<u8>,
    b0: usize,
    b1: usize,
    steps: usize,
    mut per_row: impl FnMut(&mut Vec<u8>, usize, usize),
) {
    for b in b0..b1 {
        for k in 0..steps {
            push_index(buf, b);
            buf.push(b',');
            push_index(buf, k);
            per_row(buf, b, k);
            buf.push(b'\n');
        }
    }
}

/// Formats the rows of all tracks in parallel pieces and writes them in order after
/// `header`, atomically; `tick` hears how many tracks each group wrote.
fn write_rows<F>(
    path: &Path,
    header: String,
    tracks: usize,
    steps: usize,
    per_row: F,
    tick: &(dyn Fn(usize) + Sync),
) -> Result<()>
where
    F: Fn(&mut Vec<u8>, usize, usize) + Sync,
{
    // About 4 MB of text per piece and a few pieces per thread in flight at a time.
    let per_track = steps.max(1) * 256;
    let piece = ((4 << 20) / per_track).clamp(1, tracks.max(1));
    let group = piece * rayon::current_num_threads() * 2;
    crate::io::write_atomic(path, |w| {
        w.write_all(header.as_bytes())?;
        let mut g0 = 0;
        while g0 < tracks {
            let g1 = (g0 + group).min(tracks);
            let bufs: Vec<Vec<u8>> = (g0..g1)
                .step_by(piece)
                .collect::<Vec<_>>()
                .into_par_iter()
                .map(|b0| {
                    let mut buf = Vec::with_capacity(4 << 20);
                    format_rows(&mut buf, b0, (b0 + piece).min(g1), steps, &per_row);
                    buf
                })
                .collect();
            for b in bufs {
                w.write_all(&b)?;
            }
            tick(g1 - g0);
            g0 = g1;
        }
        Ok(())
    })
}

/// Writes `[tracks][steps][n]` values in the long form with columns `{prefix}0..`.
pub(crate) fn write_series<T: Real>(
    path: &Path,
    tracks: usize,
    steps: usize,
    n: usize,
    data: &[T],
    prefix: char,
) -> Result<()> {
    let mut header = String::from("track,t");
    for j in 0..n {
        header += &format!(",{prefix}{j}");
    }
    header.push('\n');
    write_rows(
        path,
        header,
        tracks,
        steps,
        |buf, b, k| {
            let o = (b * steps + k) * n;
            for &v in &data[o..o + n] {
                buf.push(b',');
                push_value(buf, v);
            }
        },
        &|_| {},
    )
}

/// Writes one value per track and step, `[tracks][steps]`, with columns `track,t,{column}`.
pub(crate) fn write_per_step<T: Real>(
    path: &Path,
    tracks: usize,
    steps: usize,
    data: &[T],
    column: &str,
) -> Result<()> {
    write_rows(
        path,
        format!("track,t,{column}\n"),
        tracks,
        steps,
        |buf, b, k| {
            buf.push(b',');
            push_value(buf, data[b * steps + k]);
        },
        &|_| {},
    )
}

/// The CSV header of estimates: `track,t,x0..,P00..` (`P{i}_{j}` when `nx > 10`), and
/// `loglik` when present.
pub(crate) fn estimates_header(nx: usize, mean: bool, cov: CovOutput, loglik: bool) -> String {
    let mut h = String::from("track,t");
    if mean {
        for i in 0..nx {
            h += &format!(",x{i}");
        }
    }
    let name = |i: usize, j: usize| {
        if nx > 10 {
            format!(",P{i}_{j}")
        } else {
            format!(",P{i}{j}")
        }
    };
    match cov {
        CovOutput::Full => {
            for i in 0..nx {
                for j in 0..nx {
                    h += &name(i, j);
                }
            }
        }
        CovOutput::Diag => {
            for i in 0..nx {
                h += &name(i, i);
            }
        }
        CovOutput::None => {}
    }
    if loglik {
        h += ",loglik";
    }
    h.push('\n');
    h
}

/// Writes estimates: means, full row-major covariances (or their diagonals), and the
/// log-likelihood column, each when the estimates carry it ([`crate::data::Outputs`]).
pub(crate) fn write_estimates<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    tick: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    write_estimates_with_columns(path, est, &[], tick)
}

/// [`write_estimates`] with more per-step columns after `loglik`.
pub(crate) fn write_estimates_with_columns<T: Real>(
    path: &Path,
    est: &Estimates<T>,
    columns: &[(&str, &[T])],
    tick: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    let cov = est.cov_output();
    let mean = !est.mean.is_empty();
    let mut header = estimates_header(est.nx, mean, cov, est.loglik.is_some());
    header.pop();
    for (name, _) in columns {
        header.push(',');
        header += name;
    }
    header.push('\n');
    let (nx, steps) = (est.nx, est.steps);
    let per_cov = match cov {
        CovOutput::Full => nx * nx,
        CovOutput::Diag => nx,
        CovOutput::None => 0,
    };
    write_rows(
        path,
        header,
        est.tracks,
        est.steps,
        |buf, b, k| {
            let i = b * steps + k;
            let m = if mean {
                &est.mean[i * nx..(i + 1) * nx]
            } else {
                &[][..]
            };
            let c = &est.cov[i * per_cov..(i + 1) * per_cov];
            for &v in m.iter().chain(c) {
                buf.push(b',');
                push_value(buf, v);
            }
            if let Some(ll) = &est.loglik {
                buf.push(b',');
                push_value(buf, ll[b * est.steps + k]);
            }
            for (_, v) in columns {
                buf.push(b',');
                push_value(buf, v[b * est.steps + k]);
            }
        },
        tick,
    )
}
