//! The CSV long form: `track,t,v0,v1,...`, one row per track and step.
//!
//! Reading memory-maps the file, cuts it into pieces at line ends and parses the pieces
//! on all cores: a piece without quotes is split on commas and line ends in one pass
//! over its bytes; a piece with quotes goes through the `csv` crate's `ByteRecord`
//! (a quoted field may not span lines). No allocation per field. The order of rows
//! (tracks `0..B-1`, steps `0..T-1` of each track, no gaps, the same `T` for every
//! track) is checked within and across pieces. Writing is in [`write`].

use super::parse_error;
use crate::data::Measurements;
use crate::error::Result;
use crate::linalg::Real;
use rayon::prelude::*;
use std::path::Path;

mod delimiters;
mod write;

pub(super) use delimiters::Delimiters;
#[cfg(test)]
pub(super) use write::push_value;

pub(super) use write::{
    write_estimates, write_estimates_with_columns, write_per_step, write_series,
};

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

/// Powers of ten exactly representable in f64 (`5^22 < 2^53`).
const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
/// Powers of ten exactly representable in f32 (`5^10 < 2^24`).
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Clinger's fast path (W. D. Clinger, "How to read floating point numbers accurately",
/// PLDI 1990): a decimal `[-+]ddd.ddd` with at most 15 digits (7 for f32) has an integer
/// mantissa and a power of ten that are both exact in the target precision, so one
/// correctly rounded division gives the correctly rounded value. `None` for anything
/// else (more digits, exponents, NaN), which the standard parser then takes.
#[inline]
pub(super) fn parse_short<T: Real>(f: &[u8]) -> Option<T> {
    let f64_path = T::NAME == "f64";
    let (max_digits, max_frac) = if f64_path { (15, 22) } else { (7, 10) };
    let (neg, digits) = match f.first()? {
        b'-' => (true, &f[1..]),
        b'+' => (false, &f[1..]),
        _ => (false, f),
    };
    let (mut m, mut n, mut frac, mut dot) = (0u64, 0usize, 0usize, false);
    for &c in digits {
        if c.is_ascii_digit() {
            n += 1;
            if n > max_digits {
                return None;
            }
            m = m * 10 + (c - b'0') as u64;
            frac += dot as usize;
        } else if c == b'.' && !dot {
            dot = true;
        } else {
            return None;
        }
    }
    if n == 0 || frac > max_frac {
        return None;
    }
    let v = if f64_path {
        T::of(m as f64 / POW10_F64[frac])
    } else {
        T::of((m as f32 / POW10_F32[frac]) as f64)
    };
    Some(if neg { -v } else { v })
}

/// Parses one measurement component: empty or `NaN` is missing; infinities are rejected.
fn parse_value<T: Real>(field: &[u8]) -> std::result::Result<T, String> {
    let f = field.trim_ascii();
    if f.is_empty() {
        return Ok(T::nan());
    }
    if let Some(v) = parse_short(f) {
        return Ok(v);
    }
    if !f.is_ascii() {
        return Err(format!("malformed number \"{}\"", super::excerpt(f)));
    }
    // SAFETY: ASCII bytes are valid UTF-8 (checked just above); this skips a second
    // validation pass on the hot path of large files.
    let s = unsafe { std::str::from_utf8_unchecked(f) };
    match s.parse::<T>() {
        Ok(v) if v.is_finite_value() || v.is_nan_value() => Ok(v),
        Ok(_) if s.parse::<f64>().is_ok_and(f64::is_finite) => Err(format!(
            "value \"{}\" does not fit in {} (largest magnitude {:e})",
            super::excerpt(f),
            T::NAME,
            if T::NAME == "f32" {
                f32::MAX as f64
            } else {
                f64::MAX
            }
        )),
        Ok(_) => Err(format!(
            "infinite value \"{}\" (a missing value is empty or NaN)",
            super::excerpt(f)
        )),
        Err(_) => Err(format!("malformed number \"{}\"", super::excerpt(f))),
    }
}

impl<T: Real> Piece<T> {
    /// Takes field `j` of the row on `line`; `row` holds the row's track and step once
    /// read. Fields beyond the expected `2 + ny` are counted by [`Piece::end_row`].
    #[inline]
    fn field(
        &mut self,
        line: usize,
        j: usize,
        f: &[u8],
        row: &mut (usize, usize),
        ny: usize,
        prefix: char,
    ) -> std::result::Result<(), (usize, String)> {
        let text = super::excerpt;
        match j {
            0 => {
                row.0 = parse_index(f).ok_or_else(|| {
                    let msg = format!(
                        "field track (column 1): invalid track index \"{}\"",
                        text(f)
                    );
                    (line, msg)
                })?
            }
            1 => {
                row.1 = parse_index(f).ok_or_else(|| {
                    let msg = format!(
                        "field t (column 2), track {}: invalid step \"{}\"",
                        row.0,
                        text(f)
                    );
                    (line, msg)
                })?
            }
            _ if j < 2 + ny => {
                let v = parse_value::<T>(f).map_err(|m| {
                    let (track, t) = *row;
                    let msg = format!(
                        "field {prefix}{} (column {}), track {track}, step {t}: {m}",
                        j - 2,
                        j + 1
                    );
                    (line, msg)
                })?;
                self.values.push(v);
            }
            _ => {}
        }
        Ok(())
    }

    /// Closes the row on `line` that had `fields` fields.
    fn end_row(
        &mut self,
        line: usize,
        fields: usize,
        (track, t): (usize, usize),
        ny: usize,
        prefix: char,
    ) -> std::result::Result<(), (usize, String)> {
        let width = 2 + ny;
        if fields != width {
            let names = format!("track,t,{prefix}0..{prefix}{}", ny - 1);
            return Err((
                line,
                format!("expected {width} fields ({names}), found {fields}"),
            ));
        }
        let key = Key { line, track, t };
        if let Some(prev) = self.last {
            follows(prev, key, &mut self.ends)?;
        } else {
            self.first = Some(key);
        }
        self.last = Some(key);
        Ok(())
    }
}

/// Parses a piece of whole lines. Pieces without quotes (the files this crate writes,
/// and most others) are parsed field by field in one pass over the bytes, which is
/// several times faster than a general CSV reader; a piece with quotes goes through the
/// `csv` crate.
fn parse_piece<T: Real>(
    bytes: &[u8],
    ny: usize,
    prefix: char,
) -> std::result::Result<Piece<T>, (usize, String)> {
    let mut piece = Piece {
        values: Vec::with_capacity(bytes.len() / (8 + 8 * ny) * ny + ny),
        newlines: 0,
        first: None,
        last: None,
        ends: Vec::new(),
    };
    let mut row = (0, 0);
    if !bytes.contains(&b'"') {
        // A comma ends a field, a line end ends a row. Blank lines are skipped, as a CSV
        // reader does; a `\r` before a line end is trimmed with its field.
        let (mut start, mut line, mut j) = (0, 1, 0);
        for i in Delimiters::new(bytes) {
            let c = bytes[i];
            let f = &bytes[start..i];
            start = i + 1;
            if c == b'\n' && j == 0 && f.trim_ascii().is_empty() {
                line += 1;
                continue;
            }
            piece.field(line, j, f, &mut row, ny, prefix)?;
            j += 1;
            if c == b'\n' {
                piece.end_row(line, j, row, ny, prefix)?;
                j = 0;
                line += 1;
            }
        }
        piece.newlines = line - 1;
        let f = &bytes[start..];
        if j > 0 || !f.trim_ascii().is_empty() {
            piece.field(line, j, f, &mut row, ny, prefix)?;
            piece.end_row(line, j + 1, row, ny, prefix)?;
        }
        return Ok(piece);
    }
    piece.newlines = bytes.iter().filter(|&&c| c == b'\n').count();
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rec = ::csv::ByteRecord::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map(|p| p.line() as usize).unwrap_or(1);
                return Err((line, format!("unreadable CSV: {e}")));
            }
        }
        // A record read from a reader always has a position (csv docs).
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(1);
        for (j, f) in rec.iter().enumerate() {
            piece.field(line, j, f, &mut row, ny, prefix)?;
        }
        piece.end_row(line, rec.len(), row, ny, prefix)?;
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
    let names: Vec<&str> = text
        .split(',')
        .map(|n| n.trim().trim_matches('"'))
        .collect();
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
            format!(
                "header must be \"track,t,{prefix}0,{prefix}1,...\", found \"{}\"",
                super::excerpt(text.as_bytes())
            ),
        ));
    }
    Ok(names.len() - 2)
}

/// Reads measurements in the long form.
pub(super) fn read_measurements<T: Real>(path: &Path) -> Result<Measurements<T>> {
    let map = super::map_file(path, "a header \"track,t,z0,...\"")?;
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
