//! The tracking files: detections (`t,z0,z1,...` CSV or `[N, 1+ny]` NPY), truth
//! (`t,id,x0,x1,...`) and tracks (`t,track,status,x0..,P00..`). Readers name the file and
//! line of anything malformed; writers go through [`crate::io::write_atomic`].

use crate::error::{Error, Result};
use crate::io::{parse_error, Format};
use std::io::Write;
use std::path::Path;

/// Detections without identities, in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Detections {
    /// Components per detection.
    pub ny: usize,
    /// Time of each detection (a step index, or seconds).
    pub t: Vec<f64>,
    /// `t.len() x ny`, row-major.
    pub z: Vec<f64>,
}

impl Detections {
    /// Number of detections.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    /// True without detections.
    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }
}

/// Detections grouped into scans: scan `k` holds rows `starts[k]..starts[k + 1]` and is
/// step `first + k`. Steps without detections are scans too (every track misses).
#[derive(Clone, Debug, PartialEq)]
pub struct Scans {
    /// The step of scan 0.
    pub first: i64,
    /// Row ranges: `starts.len()` is one more than the number of scans.
    pub starts: Vec<usize>,
}

impl Scans {
    /// Number of scans.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// True without scans.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The detection rows of scan `k`.
    pub fn rows(&self, k: usize) -> std::ops::Range<usize> {
        self.starts[k]..self.starts[k + 1]
    }
}

/// Most scans a run may span (a guard against a time column in the wrong unit).
pub const MAX_SCANS: i64 = 100_000_000;

/// Groups detections into scans. Times must not decrease; without `dt` they must be
/// integers (steps), with `dt` they are seconds and must be multiples of `dt` (to 1e-6
/// of a step). `path` names the file in errors (rows are reported as CSV lines).
pub fn scans(det: &Detections, dt: Option<f64>, path: &Path) -> Result<Scans> {
    let mut steps = Vec::with_capacity(det.len());
    for (i, &t) in det.t.iter().enumerate() {
        let line = Some(i + 2);
        let s = match dt {
            None => t,
            Some(dt) => t / dt,
        };
        let k = s.round();
        if (s - k).abs() > 1e-6 || k.abs() > 9.0e15 {
            let what = match dt {
                None => format!("t = {t} is not an integer step (give --dt for times in seconds)"),
                Some(dt) => format!("t = {t} is not a multiple of --dt {dt}"),
            };
            return Err(parse_error(path, line, what));
        }
        let k = k as i64;
        if let Some(&prev) = steps.last() {
            if k < prev {
                return Err(parse_error(
                    path,
                    line,
                    format!(
                        "times go backwards: t = {t} after t = {} (detections must be in time order)",
                        det.t[i - 1]
                    ),
                ));
            }
        }
        steps.push(k);
    }
    let Some((&first, &last)) = steps.first().zip(steps.last()) else {
        return Ok(Scans {
            first: 0,
            starts: vec![0],
        });
    };
    let span = last - first + 1;
    if span > MAX_SCANS {
        return Err(parse_error(
            path,
            None,
            format!(
                "the times span {span} steps (more than {MAX_SCANS}); check the time unit and --dt"
            ),
        ));
    }
    let mut starts = Vec::with_capacity(span as usize + 1);
    let mut row = 0;
    for k in first..=last {
        starts.push(row);
        while row < steps.len() && steps[row] == k {
            row += 1;
        }
    }
    starts.push(row);
    Ok(Scans { first, starts })
}

fn split(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| f.trim())
}

/// The one key of a time: `-0` and `0` are the same step (adding `+0.0` turns `-0.0`
/// into `0.0` and leaves every other value as it is), for every reader of a time column
/// and for [`super::metrics::frames`].
pub fn time_key(t: f64) -> f64 {
    t + 0.0
}

fn number(path: &Path, line: usize, name: &str, f: &str) -> Result<f64> {
    let v: f64 = f.parse().map_err(|_| {
        parse_error(
            path,
            Some(line),
            format!("{name}: cannot read '{f}' as a number"),
        )
    })?;
    if !v.is_finite() {
        return Err(parse_error(
            path,
            Some(line),
            format!("{name}: value {f} is not finite"),
        ));
    }
    Ok(v)
}

/// Checks a header `fixed..., {prefix}0, {prefix}1, ...` and returns how many numbered
/// columns follow the fixed ones (columns after them, such as `P00`, are allowed when
/// `rest_ok`).
fn header(path: &Path, line: &str, fixed: &[&str], prefix: char, rest_ok: bool) -> Result<usize> {
    let names: Vec<&str> = split(line).collect();
    let expect = || {
        format!(
            "header must be {}{prefix}0,{prefix}1,... (found '{}')",
            fixed.iter().map(|f| format!("{f},")).collect::<String>(),
            line.trim()
        )
    };
    if names.len() < fixed.len() || names[..fixed.len()] != *fixed {
        return Err(parse_error(path, Some(1), expect()));
    }
    let mut n = 0;
    for name in &names[fixed.len()..] {
        if *name == format!("{prefix}{n}") {
            n += 1;
        } else if rest_ok && n > 0 {
            break;
        } else {
            return Err(parse_error(path, Some(1), expect()));
        }
    }
    if n == 0 {
        return Err(parse_error(path, Some(1), expect()));
    }
    Ok(n)
}

/// The components of a detections header: `t` and then `z0,z1,..` or names of the
/// measured quantities (radar plots: `t,range,bearing`).
fn detection_header(path: &Path, line: &str) -> Result<usize> {
    let names: Vec<&str> = split(line).collect();
    let fail = |why: &str| {
        parse_error(
            path,
            Some(1),
            format!(
                "header must be t,z0,z1,... or t and the measured quantities' names, such as t,range,bearing ({why}; found '{}')",
                line.trim()
            ),
        )
    };
    if names.first() != Some(&"t") {
        return Err(fail("the first column is t"));
    }
    let rest = &names[1..];
    if rest.is_empty() {
        return Err(fail("no measured component"));
    }
    for (i, n) in rest.iter().enumerate() {
        if n.is_empty() || n.parse::<f64>().is_ok() {
            return Err(fail(&format!("column {} has no name", i + 2)));
        }
        if rest[..i].contains(n) || *n == "t" {
            return Err(fail(&format!("'{n}' is named twice")));
        }
    }
    Ok(rest.len())
}

fn read_text(path: &Path, what: &str) -> Result<String> {
    let map = crate::io::map_file(path, what)?;
    std::str::from_utf8(&map)
        .map(str::to_owned)
        .map_err(|e| parse_error(path, None, format!("not UTF-8 text: {e}")))
}

/// Reads detections from `.csv` (`t,z0,..`) or `.npy` (`[N, 1 + ny]`, f64 or f32).
pub fn read_detections(path: &Path) -> Result<Detections> {
    match Format::of(path, &[Format::Csv, Format::Npy])? {
        Format::Csv => {
            let text = read_text(path, "detections t,z0,z1,... (or t,range,bearing)")?;
            let mut lines = text.lines();
            let head = lines.next().unwrap_or_default();
            let ny = detection_header(path, head)?;
            let names: Vec<&str> = split(head).skip(1).collect();
            let mut d = Detections {
                ny,
                ..Default::default()
            };
            for (i, l) in lines.enumerate() {
                let line = i + 2;
                if l.trim().is_empty() {
                    continue;
                }
                let f: Vec<&str> = split(l).collect();
                if f.len() != 1 + ny {
                    return Err(parse_error(
                        path,
                        Some(line),
                        format!(
                            "{} fields, the header has {} ({})",
                            f.len(),
                            1 + ny,
                            head.trim()
                        ),
                    ));
                }
                d.t.push(time_key(number(path, line, "t", f[0])?));
                for (name, s) in names.iter().zip(&f[1..]) {
                    d.z.push(number(path, line, name, s)?);
                }
            }
            Ok(d)
        }
        _ => {
            let (shape, v) = crate::io::read_npy_array(path)?;
            if shape.len() != 2 || shape[1] < 2 {
                return Err(parse_error(
                    path,
                    None,
                    format!("expected a 2-D array [N, 1 + ny] (t, z0, ..), found shape {shape:?}"),
                ));
            }
            let (n, w) = (shape[0], shape[1]);
            let mut d = Detections {
                ny: w - 1,
                t: Vec::with_capacity(n),
                z: Vec::with_capacity(n * (w - 1)),
            };
            for (i, row) in v.chunks(w).enumerate() {
                if let Some(j) = row.iter().position(|x| !x.is_finite()) {
                    return Err(parse_error(
                        path,
                        None,
                        format!("row {i}, column {j}: value {} is not finite", row[j]),
                    ));
                }
                d.t.push(time_key(row[0]));
                d.z.extend_from_slice(&row[1..]);
            }
            Ok(d)
        }
    }
}

/// Labelled points over time: truth (`t,id,x0,..`) or tracks (`t,track,status,x0,..`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labelled {
    /// Components per point.
    pub n: usize,
    /// Time of each point.
    pub t: Vec<f64>,
    /// Identity of each point (truth id or track number).
    pub id: Vec<u64>,
    /// Tracks: whether the row's status is `confirmed`; truth: all true.
    pub confirmed: Vec<bool>,
    /// `t.len() x n`.
    pub x: Vec<f64>,
}

fn read_labelled(path: &Path, tracks: bool) -> Result<Labelled> {
    let what = if tracks {
        "tracks t,track,status,x0,..,P00,.."
    } else {
        "truth t,id,x0,x1,..."
    };
    let text = read_text(path, what)?;
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    let fixed: &[&str] = if tracks {
        &["t", "track", "status"]
    } else {
        &["t", "id"]
    };
    let n = header(path, head, fixed, 'x', tracks)?;
    let width = split(head).count();
    let mut out = Labelled {
        n,
        ..Default::default()
    };
    for (i, l) in lines.enumerate() {
        let line = i + 2;
        if l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = split(l).collect();
        if f.len() != width {
            return Err(parse_error(
                path,
                Some(line),
                format!("{} fields, the header has {width}", f.len()),
            ));
        }
        out.t.push(time_key(number(path, line, "t", f[0])?));
        let id: u64 = f[1].parse().map_err(|_| {
            parse_error(
                path,
                Some(line),
                format!("{}: '{}' is not a non-negative integer", fixed[1], f[1]),
            )
        })?;
        out.id.push(id);
        let first = fixed.len();
        if tracks {
            let c = match f[2] {
                "confirmed" => true,
                "tentative" => false,
                s => {
                    return Err(parse_error(
                        path,
                        Some(line),
                        format!("status: '{s}' (expected tentative or confirmed)"),
                    ))
                }
            };
            out.confirmed.push(c);
        } else {
            out.confirmed.push(true);
        }
        for j in 0..n {
            out.x
                .push(number(path, line, &format!("x{j}"), f[first + j])?);
        }
    }
    Ok(out)
}

/// Reads a truth file `t,id,x0,x1,...`.
pub fn read_truth(path: &Path) -> Result<Labelled> {
    Format::of(path, &[Format::Csv])?;
    read_labelled(path, false)
}

/// Reads a tracks file `t,track,status,x0,..,P..` (the covariance columns are skipped).
pub fn read_tracks(path: &Path) -> Result<Labelled> {
    Format::of(path, &[Format::Csv])?;
    read_labelled(path, true)
}

/// Writes a number the shortest way that reads back exactly.
pub(crate) fn put(w: &mut impl Write, v: f64) -> std::io::Result<()> {
    if v == v.trunc() && v.abs() < 1e15 {
        write!(w, "{}", v as i64)
    } else {
        w.write_all(ryu::Buffer::new().format(v).as_bytes())
    }
}

/// Writes detections as `t,z0,..` (`.csv`) or `[N, 1 + ny]` (`.npy`).
pub fn write_detections(path: &Path, d: &Detections) -> Result<()> {
    match Format::of(path, &[Format::Csv, Format::Npy])? {
        Format::Csv => crate::io::write_atomic(path, |w| {
            w.write_all(b"t")?;
            for j in 0..d.ny {
                write!(w, ",z{j}")?;
            }
            w.write_all(b"\n")?;
            for (i, &t) in d.t.iter().enumerate() {
                put(w, t)?;
                for &v in &d.z[i * d.ny..(i + 1) * d.ny] {
                    w.write_all(b",")?;
                    put(w, v)?;
                }
                w.write_all(b"\n")?;
            }
            Ok(())
        }),
        _ => {
            let mut a = Vec::with_capacity(d.len() * (1 + d.ny));
            for (i, &t) in d.t.iter().enumerate() {
                a.push(t);
                a.extend_from_slice(&d.z[i * d.ny..(i + 1) * d.ny]);
            }
            crate::io::write_npy_array(path, &[d.len(), 1 + d.ny], &a)
        }
    }
}

/// Writes truth as `t,id,x0,x1,...` (CSV).
pub fn write_truth(path: &Path, truth: &Labelled) -> Result<()> {
    if Format::of(path, &[Format::Csv])? != Format::Csv {
        return Err(Error::input("truth is written as CSV"));
    }
    crate::io::write_atomic(path, |w| {
        w.write_all(b"t,id")?;
        for j in 0..truth.n {
            write!(w, ",x{j}")?;
        }
        w.write_all(b"\n")?;
        for i in 0..truth.t.len() {
            put(w, truth.t[i])?;
            write!(w, ",{}", truth.id[i])?;
            for &v in &truth.x[i * truth.n..(i + 1) * truth.n] {
                w.write_all(b",")?;
                put(w, v)?;
            }
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// The header of a tracks file for states of `nx` components.
pub fn tracks_header(nx: usize) -> String {
    let mut h = String::from("t,track,status");
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
    h
}

/// The header of a tracks file of an IMM tracker: [`tracks_header`] and the `r` mode
/// probabilities `p0,p1,..`.
pub fn tracks_header_modes(nx: usize, r: usize) -> String {
    let mut h = tracks_header(nx);
    if r > 1 {
        for j in 0..r {
            h += &format!(",p{j}");
        }
    }
    h
}

/// Writes one scan's live tracks as rows `t,track,status,x..,P..` (see [`tracks_header`]),
/// and an IMM's mode probabilities `p..` after them ([`tracks_header_modes`]).
pub fn write_tracks_scan(
    w: &mut impl Write,
    t: f64,
    tracker: &(impl super::TrackSet + ?Sized),
) -> std::io::Result<()> {
    for i in 0..tracker.len() {
        put(w, t)?;
        write!(w, ",{},{}", tracker.id(i), tracker.status(i).name())?;
        let probs = tracker.mode_probs(i).unwrap_or(&[]);
        for &v in tracker.mean(i).iter().chain(tracker.cov(i)).chain(probs) {
            w.write_all(b",")?;
            put(w, v)?;
        }
        w.write_all(b"\n")?;
    }
    Ok(())
}
