//! Motion vectors (pixels per frame) and the bilinear sampling convention.
//!
//! *Convention.* Pixel `(x, y)` has its centre at integer coordinates; `x` counts
//! columns, `y` rows, both from 0 at the top-left. A value at a fractional position
//! `(x + sx, y + sy)` is the bilinear blend of the four surrounding pixel centres,
//!
//! ```text
//! ix = floor(sx), fx = sx - ix, iy = floor(sy), fy = sy - iy
//! v = (1 - fy) [(1 - fx) I(y+iy, x+ix) + fx I(y+iy, x+ix+1)]
//!   +      fy  [(1 - fx) I(y+iy+1, x+ix) + fx I(y+iy+1, x+ix+1)]
//! ```
//!
//! in exactly this order of operations (every path, CPU and GPU, uses it), where a tap
//! outside the frame reads 0. For integer shifts the blend is the plain lookup.

use crate::error::{Error, Result};

/// One motion hypothesis: the target moves `(vx, vy)` pixels per frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Motion {
    /// Pixels per frame along x.
    pub vx: f32,
    /// Pixels per frame along y.
    pub vy: f32,
}

impl Motion {
    /// The motion `(vx, vy)`.
    pub fn new(vx: f32, vy: f32) -> Motion {
        Motion { vx, vy }
    }

    /// Both components whole numbers (the sampling is a plain lookup).
    pub fn is_integer(&self) -> bool {
        self.vx.fract() == 0.0 && self.vy.fract() == 0.0
    }

    /// The largest component magnitude, in pixels per frame.
    pub fn reach(&self) -> f32 {
        self.vx.abs().max(self.vy.abs())
    }
}

/// The bilinear taps of a shift `s` along one axis: the integer offset of the first tap
/// and the weights of the two taps, `(i, 1 - f, f)`.
#[inline]
pub fn taps(s: f32) -> (i64, f32, f32) {
    let i = s.floor();
    let f = s - i;
    (i as i64, 1.0 - f, f)
}

/// Parses `"vx:vy,vx:vy,..."`.
pub fn parse_velocities(s: &str) -> Result<Vec<Motion>> {
    let mut out = Vec::new();
    for (i, item) in s.split(',').enumerate() {
        let item = item.trim();
        let bad = |why: &str| {
            Error::input(format!(
                "--velocities: item {} \"{item}\": {why} (expected \"vx:vy,...\", e.g. \"1:0,0:1,-0.5:0.5\")",
                i + 1
            ))
        };
        let (a, b) = item.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let vx: f32 = a.trim().parse().map_err(|_| bad("vx is not a number"))?;
        let vy: f32 = b.trim().parse().map_err(|_| bad("vy is not a number"))?;
        if !vx.is_finite() || !vy.is_finite() {
            return Err(bad("not finite"));
        }
        out.push(Motion::new(vx, vy));
    }
    if out.is_empty() {
        return Err(Error::input("--velocities: no motion vectors"));
    }
    Ok(out)
}

/// `directions` vectors evenly spaced in angle (the first along +x) for each speed in
/// `speeds`; a speed of 0 gives the single vector (0, 0). Components within 1e-6 of a
/// whole number are rounded to it, so that the axis directions are exact lookups.
/// `--speeds 0,1 --directions 12` gives the 13 vectors of the benchmark setting.
pub fn speeds_directions(speeds: &[f32], directions: usize) -> Result<Vec<Motion>> {
    if directions == 0 {
        return Err(Error::input("--directions must be at least 1"));
    }
    if speeds.is_empty() {
        return Err(Error::input("--speeds: no speeds"));
    }
    let snap = |v: f64| {
        let r = v.round();
        if (v - r).abs() < 1e-6 {
            r as f32
        } else {
            v as f32
        }
    };
    let mut out: Vec<Motion> = Vec::new();
    for &s in speeds {
        if !(s >= 0.0) || !s.is_finite() {
            return Err(Error::input(format!(
                "--speeds: {s} is not a finite speed >= 0"
            )));
        }
        if s == 0.0 {
            if !out.contains(&Motion::new(0.0, 0.0)) {
                out.push(Motion::new(0.0, 0.0));
            }
            continue;
        }
        for d in 0..directions {
            let a = std::f64::consts::TAU * d as f64 / directions as f64;
            out.push(Motion::new(
                snap(s as f64 * a.cos()),
                snap(s as f64 * a.sin()),
            ));
        }
    }
    Ok(out)
}

/// Checks a motion set against a frame of `h x w` pixels: at least one vector, at most
/// 65,535 (the arg-max is stored as u16), none that crosses the whole frame in one frame.
pub fn check_motions(motions: &[Motion], h: usize, w: usize) -> Result<()> {
    if motions.is_empty() {
        return Err(Error::input("no motion vectors"));
    }
    if motions.len() > u16::MAX as usize {
        return Err(Error::input(format!(
            "{} motion vectors (at most {})",
            motions.len(),
            u16::MAX
        )));
    }
    for (i, m) in motions.iter().enumerate() {
        if !(m.vx.abs() < w as f32) || !(m.vy.abs() < h as f32) {
            return Err(Error::input(format!(
                "motion vector {i} ({}, {}) is larger than the {w} x {h} frame (|vx| < width and |vy| < height)",
                m.vx, m.vy
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirteen_vectors() {
        let m = speeds_directions(&[0.0, 1.0], 12).unwrap();
        assert_eq!(m.len(), 13);
        assert_eq!(m[0], Motion::new(0.0, 0.0));
        assert_eq!(m[1], Motion::new(1.0, 0.0));
        assert_eq!(m[4], Motion::new(0.0, 1.0));
        assert!((m[2].vx - 0.866_025_4).abs() < 1e-6 && (m[2].vy - 0.5).abs() < 1e-6);
    }

    #[test]
    fn parse() {
        let m = parse_velocities("1:0, -0.5:2").unwrap();
        assert_eq!(m, vec![Motion::new(1.0, 0.0), Motion::new(-0.5, 2.0)]);
        assert!(parse_velocities("1").is_err());
        assert!(parse_velocities("a:1").is_err());
        assert!(parse_velocities("").is_err());
    }

    #[test]
    fn taps_of_negative_shift() {
        assert_eq!(taps(-1.25), (-2, 0.25, 0.75));
        assert_eq!(taps(2.0), (2, 1.0, 0.0));
    }
}
