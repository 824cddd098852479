//! The CSV long form: `track,t,v0,v1,...`, one row per track and step.
//!
//! Reading memory-maps the file and parses pieces of it on all cores (the `csv` crate's
//! `ByteRecord`, no allocation per field); the order of rows (tracks `0..B-1`, steps
//! `0..T-1` of each track, no gaps, the same `T` for every track) is checked across
//! pieces afterwards. Writing formats pieces of tracks on all cores with the shortest
//! representation that reads back to the same value.

use super::parse_error;
use crate::data::{Estimates, Measurements};
use crate::error::{Error, Result};
use crate::linalg::Real;
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

/// Where a row sits: its line in the file (1-based), track and step.
#[derive(Clone, Copy, Debug)]
struct Key {
    line: usize,
    track: usize,
    t: usize,
}

/// What a piece of the file holds: its values in row order, its first and last row, and
/// the last row of each track that ends inside the piece. Lines are counted from the
/// start of the piece until [`Piece::shift`] makes them absolute.
struct Piece<T> {
    values: Vec<T>,
    rows: usize,
    newlines: usize,
    first: Option<Key>,
    last: Option<Key>,
    ends: Vec<Key>,
}

impl<T> Piece<T> {
    fn shift(&mut self, by: usize) {
        for k in self
            .first
            .iter_mut()
            .chain(self.last.iter_mut())
            .chain(self.ends.iter_mut())
        {
            k.line += by;
        }
    }
}

/// Checks that row `b` may follow row `a`: the next step of the same track, or step 0 of
/// the next track. Records `a` in `ends` when a track ends.
fn follows(a: Key, b: Key, ends: &mut Vec<Key>) -> std::result::Result<(), (usize, String)> {
    if b.track == a.track {
        if b.t == a.t + 1 {
            return Ok(());
        }
        let what = if b.t <= a.t {
            format!("step {} repeated or out of order (after step {})", b.t, a.t)
        } else if b.t == a.t + 2 {
            format!(
                "gap in steps: step {} is missing (step {} follows step {})",
                a.t + 1,
                b.t,
                a.t
            )
        } else {
            format!(
                "gap in steps: steps {}..{} are missing (step {} follows step {})",
                a.t + 1,
                b.t - 1,
                b.t,
                a.t
            )
        };
        return Err((b.line, format!("track {}: {what}", b.track)));
    }
    if b.track == a.track + 1 {
        if b.t != 0 {
            return Err((
                b.line,
                format!("track {} starts at step {}, expected step 0", b.track, b.t),
            ));
        }
        ends.push(a);
        return Ok(());
    }
    Err((
        b.line,
        format!(
            "track {} follows track {}: tracks must be numbered 0..B-1 and appear in order",
            b.track, a.track
        ),
    ))
}

fn parse_index(field: &[u8]) -> Option<usize> {
    let f = field.trim_ascii();
    if f.is_empty() || f.len() > 18 {
        return None;
    }
    f.iter().try_fold(0usize, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as usize)
    })
}

/// Parses one measurement component: empty or `NaN` is missing; infinities are rejected.
fn parse_value<T: Real>(field: &[u8]) -> std::result::Result<T, String> {
    let f = field.trim_ascii();
    if f.is_empty() {
        return Ok(T::nan());
    }
    let s = std::str::from_utf8(f).map_err(|_| "not valid UTF-8".to_string())?;
    match s.parse::<T>() {
        Ok(v) if v.is_finite_value() || v.is_nan_value() => Ok(v),
        Ok(_) => Err(format!(
            "infinite value \"{s}\" (a missing value is empty or NaN)"
        )),
        Err(_) => Err(format!("malformed number \"{s}\"")),
    }
}

fn parse_piece<T: Real>(
    bytes: &[u8],
    ny: usize,
    prefix: char,
) -> std::result::Result<Piece<T>, (usize, String)> {
    let newlines = bytes.iter().filter(|&&c| c == b'\n').count();
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rec = ::csv::ByteRecord::new();
    let mut piece = Piece {
        values: Vec::with_capacity(bytes.len() / (8 + 8 * ny) * ny + ny),
        rows: 0,
        newlines,
        first: None,
        last: None,
        ends: Vec::new(),
    };
    let width = 2 + ny;
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map(|p| p.line() as usize).unwrap_or(1);
                return Err((line, format!("unreadable CSV: {e}")));
            }
        }
        // A record always has a position when read from a reader (csv docs).
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(1);
        if rec.len() != width {
            return Err((
                line,
                format!(
                    "expected {width} fields (track,t,{prefix}0..{prefix}{}), found {}",
                    ny - 1,
                    rec.len()
                ),
            ));
        }
        let track = parse_index(&rec[0]).ok_or_else(|| {
            (
                line,
                format!(
                    "field track (column 1): invalid track index \"{}\"",
                    String::from_utf8_lossy(&rec[0])
                ),
            )
        })?;
        let t = parse_index(&rec[1]).ok_or_else(|| {
            (
                line,
                format!(
                    "field t (column 2), track {track}: invalid step \"{}\"",
                    String::from_utf8_lossy(&rec[1])
                ),
            )
        })?;
        for j in 0..ny {
            let v = parse_value::<T>(&rec[2 + j]).map_err(|m| {
                (
                    line,
                    format!(
                        "field {prefix}{j} (column {}), track {track}, step {t}: {m}",
                        j + 3
                    ),
                )
            })?;
            piece.values.push(v);
        }
        let key = Key { line, track, t };
        if let Some(prev) = piece.last {
            follows(prev, key, &mut piece.ends)?;
        } else {
            piece.first = Some(key);
        }
        piece.last = Some(key);
        piece.rows += 1;
    }
    Ok(piece)
}

/// Splits `body` into about `n` pieces that end at line ends.
fn split_lines(body: &[u8], n: usize) -> Vec<&[u8]> {
    let size = (body.len() / n.max(1)).max(1 << 20);
    let mut out = Vec::new();
    let mut rest = body;
    while rest.len() > size {
        match rest[size..].iter().position(|&c| c == b'\n') {
            Some(p) => {
                let (a, b) = rest.split_at(size + p + 1);
                out.push(a);
                rest = b;
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

/// Checks the header `track,t,{prefix}0,...` and returns the number of value columns.
fn parse_header(path: &Path, line: &[u8], prefix: char) -> Result<usize> {
    let text = String::from_utf8_lossy(line);
    let text = text
        .trim_start_matches('\u{feff}')
        .trim_end_matches(['\r', '\n']);
    let names: Vec<&str> = text.split(',').map(str::trim).collect();
    let ok = names.len() >= 3
        && names[0] == "track"
        && names[1] == "t"
        && names[2..]
            .iter()
            .enumerate()
            .all(|(j, n)| *n == format!("{prefix}{j}"));
    if !ok {
        return Err(parse_error(
            path,
            Some(1),
            format!("header must be \"track,t,{prefix}0,{prefix}1,...\", found \"{text}\""),
        ));
    }
    Ok(names.len() - 2)
}

/// Reads measurements in the long form.
pub(super) fn read_measurements<T: Real>(path: &Path) -> Result<Measurements<T>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Err(parse_error(
            path,
            None,
            "empty file (expected a header \"track,t,z0,...\")",
        ));
    }
    // SAFETY: the map is only read, and only while this function runs; the file is
    // opened read-only. Another process truncating it meanwhile is outside what any
    // reader can defend against (as with every memory-mapped reader).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let bytes: &[u8] = &map;
    let nl = bytes
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(bytes.len());
    let ny = parse_header(path, &bytes[..nl], 'z')?;
    let body = &bytes[(nl + 1).min(bytes.len())..];

    let chunks = split_lines(body, rayon::current_num_threads() * 4);
    let results: Vec<_> = chunks
        .par_iter()
        .map(|c| parse_piece::<T>(c, ny, 'z'))
        .collect();

    // Lines: the header is line 1, the body starts on line 2.
    let mut offset = 1;
    let mut pieces = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Ok(mut p) => {
                p.shift(offset);
                offset += p.newlines;
                pieces.push(p);
            }
            Err((line, msg)) => return Err(parse_error(path, Some(line + offset), msg)),
        }
    }
    let err = |line: usize, msg: String| parse_error(path, Some(line), msg);

    let mut ends = Vec::new();
    let mut prev: Option<Key> = None;
    let mut first: Option<Key> = None;
    for p in &pieces {
        if let (Some(a), Some(b)) = (prev, p.first) {
            follows(a, b, &mut ends).map_err(|(l, m)| err(l, m))?;
        }
        ends.extend_from_slice(&p.ends);
        first = first.or(p.first);
        prev = p.last.or(prev);
    }
    let (Some(first), Some(last)) = (first, prev) else {
        return Err(parse_error(path, None, "no measurements (only a header)"));
    };
    if first.track != 0 {
        return Err(err(
            first.line,
            format!("the first row is track {}, expected track 0", first.track),
        ));
    }
    if first.t != 0 {
        return Err(err(
            first.line,
            format!("track 0 starts at step {}, expected step 0", first.t),
        ));
    }
    let steps = ends.first().unwrap_or(&last).t + 1;
    for e in ends.iter().chain(std::iter::once(&last)) {
        if e.t + 1 != steps {
            return Err(err(
                e.line,
                format!(
                    "track {} ends at step {} but track 0 has {steps} steps (0..{}); every track needs the same steps",
                    e.track,
                    e.t,
                    steps - 1
                ),
            ));
        }
    }
    let tracks = last.track + 1;
    let total: usize = pieces.iter().map(|p| p.values.len()).sum();
    let mut data = Vec::with_capacity(total);
    for p in pieces {
        data.extend_from_slice(&p.values);
    }
    Measurements::new(tracks, steps, ny, data)
}

/// Appends the shortest representation of `v` that parses back to the same value.
#[inline]
fn push_value<T: Real>(buf: &mut Vec<u8>, v: T) {
    // Writing into a Vec<u8> cannot fail.
    let _ = write!(buf, "{v}");
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
    let itoa = |buf: &mut Vec<u8>, n: usize| {
        let _ = write!(buf, "{n}");
    };
    for b in b0..b1 {
        for k in 0..steps {
            itoa(buf, b);
            buf.push(b',');
            itoa(buf, k);
            per_row(buf, b, k);
            buf.push(b'\n');
        }
    }
}

/// Formats the rows of all tracks in parallel pieces and writes them in order after
/// `header`, atomically.
fn write_rows<F>(path: &Path, header: String, tracks: usize, steps: usize, per_row: F) -> Result<()>
where
    F: Fn(&mut Vec<u8>, usize, usize) + Sync,
{
    // About 4 MB of text per piece and a few pieces per thread in flight at a time.
    let per_track = steps.max(1) * 256;
    let piece = ((4 << 20) / per_track).clamp(1, tracks.max(1));
    let group = piece * rayon::current_num_threads() * 2;
    super::write_atomic(path, |w| {
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
            g0 = g1;
        }
        Ok(())
    })
}

/// Writes `[tracks][steps][n]` values in the long form with columns `{prefix}0..`.
pub(super) fn write_series<T: Real>(
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
    write_rows(path, header, tracks, steps, |buf, b, k| {
        let o = (b * steps + k) * n;
        for &v in &data[o..o + n] {
            buf.push(b',');
            push_value(buf, v);
        }
    })
}

/// The CSV header of estimates: `track,t,x0..,P00..` (`P{i}_{j}` when `nx > 10`), and
/// `loglik` when present.
pub(super) fn estimates_header(nx: usize, loglik: bool) -> String {
    let mut h = String::from("track,t");
    for i in 0..nx {
        h += &format!(",x{i}");
    }
    for i in 0..nx {
        for j in 0..nx {
            if nx > 10 {
                h += &format!(",P{i}_{j}");
            } else {
                h += &format!(",P{i}{j}");
            }
        }
    }
    if loglik {
        h += ",loglik";
    }
    h.push('\n');
    h
}

/// Writes estimates: means, full row-major covariances, and the log-likelihood column
/// when the estimates carry one.
pub(super) fn write_estimates<T: Real>(path: &Path, est: &Estimates<T>) -> Result<()> {
    let header = estimates_header(est.nx, est.loglik.is_some());
    write_rows(path, header, est.tracks, est.steps, |buf, b, k| {
        for &v in est.mean_at(b, k).iter().chain(est.cov_at(b, k)) {
            buf.push(b',');
            push_value(buf, v);
        }
        if let Some(ll) = &est.loglik {
            buf.push(b',');
            push_value(buf, ll[b * est.steps + k]);
        }
    })
}
