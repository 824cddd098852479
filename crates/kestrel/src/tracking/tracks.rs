//! The live tracks after a scan, as the track files and the metrics read them: the CPU
//! [`Tracker`] itself, or a host copy ([`Tracks`]) such as the GPU tracker downloads.

use super::{Status, Tracker};

/// Live tracks: identity, status, mean and covariance of each, in the tracker's order.
pub trait TrackSet {
    /// Live tracks.
    fn len(&self) -> usize;
    /// True without live tracks.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The identity of track `i`.
    fn id(&self, i: usize) -> u64;
    /// The status of track `i`.
    fn status(&self, i: usize) -> Status;
    /// The mean of track `i`, `nx` values.
    fn mean(&self, i: usize) -> &[f64];
    /// The covariance of track `i`, `nx x nx` row-major.
    fn cov(&self, i: usize) -> &[f64];
    /// The mode probabilities of track `i` (an IMM's tracks only).
    fn mode_probs(&self, _i: usize) -> Option<&[f64]> {
        None
    }
}

impl TrackSet for Tracker {
    fn len(&self) -> usize {
        Tracker::len(self)
    }
    fn id(&self, i: usize) -> u64 {
        Tracker::id(self, i)
    }
    fn status(&self, i: usize) -> Status {
        Tracker::status(self, i)
    }
    fn mean(&self, i: usize) -> &[f64] {
        Tracker::mean(self, i)
    }
    fn cov(&self, i: usize) -> &[f64] {
        Tracker::cov(self, i)
    }
    fn mode_probs(&self, i: usize) -> Option<&[f64]> {
        Tracker::mode_probs(self, i)
    }
}

/// A host copy of the live tracks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracks {
    /// State size.
    pub nx: usize,
    /// Identities.
    pub id: Vec<u64>,
    /// Statuses.
    pub status: Vec<Status>,
    /// Means, `[n][nx]`.
    pub mean: Vec<f64>,
    /// Covariances, `[n][nx][nx]` row-major.
    pub cov: Vec<f64>,
}

impl Tracks {
    /// A copy of `t`'s live tracks.
    pub fn of(t: &impl TrackSet, nx: usize) -> Tracks {
        let n = t.len();
        let mut out = Tracks {
            nx,
            id: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            mean: Vec::with_capacity(n * nx),
            cov: Vec::with_capacity(n * nx * nx),
        };
        for i in 0..n {
            out.id.push(t.id(i));
            out.status.push(t.status(i));
            out.mean.extend_from_slice(t.mean(i));
            out.cov.extend_from_slice(t.cov(i));
        }
        out
    }
}

impl TrackSet for Tracks {
    fn len(&self) -> usize {
        self.id.len()
    }
    fn id(&self, i: usize) -> u64 {
        self.id[i]
    }
    fn status(&self, i: usize) -> Status {
        self.status[i]
    }
    fn mean(&self, i: usize) -> &[f64] {
        &self.mean[i * self.nx..(i + 1) * self.nx]
    }
    fn cov(&self, i: usize) -> &[f64] {
        let n2 = self.nx * self.nx;
        &self.cov[i * n2..(i + 1) * n2]
    }
}

/// Checks a scan's tracks before they are written: a NaN anywhere or an infinite mean is
/// [`Error::NonFinite`](crate::Error::NonFinite) naming `what` (the output), the track
/// and `step`; an infinite covariance entry with finite means (an unstable model
/// coasting) is kept, with a warning ([`crate::error::warn`]) the first time `warned`
/// sees one.
pub fn check_finite(
    tracks: &dyn TrackSet,
    what: &str,
    step: i64,
    warned: &mut bool,
) -> crate::Result<()> {
    for i in 0..tracks.len() {
        let (m, p) = (tracks.mean(i), tracks.cov(i));
        let bad = m
            .iter()
            .position(|v| !v.is_finite())
            .map(|j| format!("mean x{j} is {}", m[j]))
            .or_else(|| {
                p.iter()
                    .position(|v| v.is_nan())
                    .map(|j| format!("covariance entry {j} is NaN"))
            });
        if let Some(msg) = bad {
            return Err(crate::Error::NonFinite {
                what: what.to_string(),
                track: tracks.id(i) as usize,
                step: step.max(0) as usize,
                msg: format!("{msg}: the recursion broke down numerically"),
            });
        }
        if p.iter().any(|v| v.is_infinite()) && !*warned {
            *warned = true;
            crate::error::warn(format!(
                "{what}: track {}, step {step}: a covariance entry is infinite (an unstable model coasting); the means are finite",
                tracks.id(i)
            ));
        }
    }
    Ok(())
}
