//! The tracker's options as a caller gives them (the command line's flags, the Python
//! package's keywords), checked in one place and in one order: every message names the
//! option the way its caller spells it.

use super::files::Detections;
use super::{Assoc, JpdaMarginals, TrackerConfig};
use crate::error::{Error, Result};

/// The options of `kestrel track` (and `kestrel.track`), before their checks.
#[derive(Clone, Debug)]
pub struct TrackerOptions {
    /// GNN or JPDA.
    pub assoc: Assoc,
    /// JPDA's marginals (only with JPDA).
    pub marginals: Option<JpdaMarginals>,
    /// Gate probability, in (0, 1).
    pub gate: f64,
    /// Detection probability, in (0, 1].
    pub pd: f64,
    /// Confirmation rule `M/N`.
    pub confirm: String,
    /// Misses before a confirmed track is deleted (at least 1).
    pub delete: u32,
    /// Misses before a tentative track is deleted (at least 1; None: the rule of `M/N`).
    pub delete_tentative: Option<u32>,
    /// Largest position variance kept (positive; None: no bound).
    pub max_variance: Option<f64>,
}

impl TrackerOptions {
    /// The configuration with clutter density `clutter`, after the checks; `name` spells
    /// an option's name (`gate`, `jpda-marginals`, ...) as the caller's user writes it
    /// (`--gate`, or `jpda_marginals`).
    pub fn config(&self, clutter: f64, name: impl Fn(&str) -> String) -> Result<TrackerConfig> {
        let bad = |msg: String| Err(Error::input(msg));
        if !(self.gate > 0.0 && self.gate < 1.0) {
            return bad(format!(
                "{} must be a probability in (0, 1), got {}",
                name("gate"),
                self.gate
            ));
        }
        if !(self.pd > 0.0 && self.pd <= 1.0) {
            return bad(format!("{} must be in (0, 1], got {}", name("pd"), self.pd));
        }
        if !(clutter > 0.0 && clutter.is_finite()) {
            return bad(format!(
                "{} must be a positive, finite density, got {clutter}",
                name("clutter")
            ));
        }
        if self.delete == 0 {
            return bad(format!("{} must be at least 1", name("delete")));
        }
        if self.marginals.is_some() && self.assoc != Assoc::Jpda {
            return bad(format!(
                "{} applies to {} jpda only",
                name("jpda-marginals"),
                name("assoc")
            ));
        }
        if self.delete_tentative == Some(0) {
            return bad(format!("{} must be at least 1", name("delete-tentative")));
        }
        let max_variance = self.max_variance.unwrap_or(f64::INFINITY);
        if !(max_variance > 0.0) {
            return bad(format!(
                "{} must be positive, got {max_variance}",
                name("max-variance")
            ));
        }
        Ok(TrackerConfig::default()
            .with_assoc(self.assoc)
            .with_marginals(self.marginals.unwrap_or(JpdaMarginals::Auto))
            .with_gate(self.gate)
            .with_pd(self.pd)
            .with_clutter(clutter)
            .with_confirm(parse_confirm(&self.confirm, &name("confirm"))?)
            .with_delete(self.delete)
            .with_delete_tentative(self.delete_tentative.unwrap_or(u32::MAX))
            .with_max_variance(max_variance))
    }
}

/// Parses a confirmation rule `M/N` (1 <= M <= N); `name` is the option's name in errors.
pub fn parse_confirm(s: &str, name: &str) -> Result<(u32, u32)> {
    let parsed = s
        .split_once('/')
        .and_then(|(m, n)| Some((m.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)));
    match parsed {
        Some((m, n)) if m >= 1 && m <= n => Ok((m, n)),
        Some((m, n)) => Err(Error::input(format!(
            "{name} {m}/{n}: M/N needs 1 <= M <= N"
        ))),
        None => Err(Error::input(format!(
            "{name} '{s}': expected M/N, such as 2/3"
        ))),
    }
}

/// The default clutter density: detections per scan over the volume of the detections'
/// bounding box.
pub fn estimate_clutter(d: &Detections, scans: usize) -> f64 {
    let ny = d.ny;
    let mut vol = 1.0;
    for a in 0..ny {
        let (lo, hi) =
            d.z.chunks(ny)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), r| {
                    (l.min(r[a]), h.max(r[a]))
                });
        vol *= (hi - lo).max(1e-9);
    }
    (d.len() as f64 / scans.max(1) as f64 / vol).max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> TrackerOptions {
        TrackerOptions {
            assoc: Assoc::Gnn,
            marginals: None,
            gate: 0.99,
            pd: 0.9,
            confirm: "2/3".into(),
            delete: 3,
            delete_tentative: None,
            max_variance: None,
        }
    }

    fn refused(o: &TrackerOptions, clutter: f64) -> String {
        match o.config(clutter, |n| format!("--{n}")) {
            Err(Error::Input { msg }) => msg,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn every_check_names_the_option_as_the_caller_spells_it() {
        let c = opts().config(1e-5, |n| format!("--{n}")).unwrap();
        assert_eq!((c.confirm, c.delete, c.gate), ((2, 3), 3, 0.99));
        let with = |f: &dyn Fn(&mut TrackerOptions)| {
            let mut o = opts();
            f(&mut o);
            o
        };
        let cases: [(TrackerOptions, f64, &str); 8] = [
            (
                with(&|o| o.gate = 1.0),
                1e-5,
                "--gate must be a probability in (0, 1), got 1",
            ),
            (with(&|o| o.pd = 0.0), 1e-5, "--pd must be in (0, 1], got 0"),
            (
                opts(),
                f64::INFINITY,
                "--clutter must be a positive, finite density, got inf",
            ),
            (with(&|o| o.delete = 0), 1e-5, "--delete must be at least 1"),
            (
                with(&|o| o.marginals = Some(JpdaMarginals::Lbp)),
                1e-5,
                "--jpda-marginals applies to --assoc jpda only",
            ),
            (
                with(&|o| o.delete_tentative = Some(0)),
                1e-5,
                "--delete-tentative must be at least 1",
            ),
            (
                with(&|o| o.max_variance = Some(-1.0)),
                1e-5,
                "--max-variance must be positive, got -1",
            ),
            (
                with(&|o| o.confirm = "3/2".into()),
                1e-5,
                "--confirm 3/2: M/N needs 1 <= M <= N",
            ),
        ];
        for (o, clutter, msg) in &cases {
            assert_eq!(refused(o, *clutter), *msg);
        }
        let py = with(&|o| o.marginals = Some(JpdaMarginals::Auto));
        match py.config(1e-5, |n| n.replace('-', "_")) {
            Err(Error::Input { msg }) => {
                assert_eq!(msg, "jpda_marginals applies to assoc jpda only")
            }
            other => panic!("expected an input error, got {other:?}"),
        }
        assert!(parse_confirm("2", "confirm")
            .unwrap_err()
            .to_string()
            .contains("confirm '2': expected M/N"));
    }

    #[test]
    fn a_jpda_tracker_starts_empty_on_the_cpu() {
        let model = crate::model::constant_velocity(2, 1.0, 1.0, 25.0, 100.0).unwrap();
        let cfg = TrackerConfig::default().with_assoc(Assoc::Jpda);
        let t = super::super::DeviceTracker::new(&model, cfg, crate::Device::Cpu).unwrap();
        assert_eq!(t.device(), crate::Device::Cpu);
        assert!(t.is_empty() && t.tracks().unwrap().is_empty());
    }
}
