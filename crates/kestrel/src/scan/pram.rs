//! The simulated PRAM of Sarkka & Garcia-Fernandez, Section II-A and V-D: run a scan
//! algorithm and count operator applications per parallel step. `work` is their total,
//! `span` the number of steps with at least one application (unlimited processors), and
//! `time(P) = sum over steps of ceil(ops / P)` the steps taken by `P` processors.

use super::algorithms::{chunked, scan_in_place, Exec};
use super::{AssocOp, ScanAlgorithm};

/// Operator applications per parallel step, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelLog {
    /// Operator applications of each parallel step.
    pub levels: Vec<usize>,
}

impl LevelLog {
    /// Records a parallel step of `ops` applications.
    pub fn push(&mut self, ops: usize) {
        self.levels.push(ops);
    }
}

/// Work, span and time on `P` processors of one scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "io", derive(serde::Serialize))]
pub struct PramCount {
    /// Operator applications in all.
    pub work: u64,
    /// Parallel steps with unbounded processors.
    pub span: u64,
    /// `P`.
    pub processors: u64,
    /// Steps on `P` processors (each level takes `ceil(ops / P)`).
    pub time: u64,
}

impl LevelLog {
    /// The counts for `p` processors.
    pub fn count(&self, p: usize) -> PramCount {
        let p = p.max(1) as u64;
        PramCount {
            work: self.levels.iter().map(|&m| m as u64).sum(),
            span: self.levels.iter().filter(|&&m| m > 0).count() as u64,
            processors: p,
            time: self.levels.iter().map(|&m| (m as u64).div_ceil(p)).sum(),
        }
    }
}

/// Affine maps `x -> a x + b` on wrapping `u64`, composed left to right: an exact,
/// non-commutative associative operator with identity `(1, 0)`, cheap enough to count
/// scans of millions of elements (and to test the algorithms bit for bit).
pub struct AffineU64;

impl AssocOp for AffineU64 {
    type Scalar = u64;
    type Scratch = ();
    fn elem_len(&self) -> usize {
        2
    }
    fn scratch(&self) {}
    fn identity(&self, out: &mut [u64]) {
        out[0] = 1;
        out[1] = 0;
    }
    #[inline]
    fn combine(&self, a: &[u64], b: &[u64], out: &mut [u64], _: &mut ()) {
        // First a, then b: x -> b0 (a0 x + a1) + b1.
        out[0] = b[0].wrapping_mul(a[0]);
        out[1] = b[0].wrapping_mul(a[1]).wrapping_add(b[1]);
    }
}

/// Counts a scan of `t` elements by `alg` on a PRAM with `p` processors. The chunked
/// default ([`ScanAlgorithm::Fastest`]) is counted with one chunk per processor.
pub fn pram_count(alg: ScanAlgorithm, t: usize, p: usize) -> PramCount {
    let mut data: Vec<u64> = (0..t as u64).flat_map(|i| [2 * i + 1, i]).collect();
    let mut log = LevelLog::default();
    match alg {
        ScanAlgorithm::Fastest => chunked(
            &AffineU64,
            &mut data,
            p.max(1),
            Exec::Serial,
            Some(&mut log),
        ),
        _ => scan_in_place(&AffineU64, &mut data, alg, Exec::Serial, Some(&mut log)),
    }
    log.count(p)
}
