//! The associative scan engine: all-prefix-sums of elements under an associative
//! operator with a two-sided identity, by the algorithms compared by Sarkka &
//! Garcia-Fernandez, *On the Performance of Prefix-Sum Parallel Kalman Filters and
//! Smoothers on GPUs*, Section II (Algorithms 1-4), plus a chunked reduce-then-scan.
//!
//! Elements live in one flat buffer ([`Elements`]), `elem_len` scalars each, so that no
//! combine allocates; an operator ([`AssocOp`]) reads two element slices and writes a
//! third, using a per-task scratch space it makes once.
//!
//! The forward scan gives `s_k = a_1 ⊗ ... ⊗ a_k`; the reverse scan gives
//! `s̄_k = a_k ⊗ ... ⊗ a_T` (Section II-B). Any length is accepted: algorithms that need a
//! power of two either pad with the identity or skip the operations that would only touch
//! the padding (equivalent, since they never feed an earlier index).

mod algorithms;
mod pram;

pub use algorithms::{scan_in_place, Exec};
#[doc(hidden)]
pub use pram::{pram_count, AffineU64, LevelLog, PramCount};

use std::str::FromStr;

/// An associative operator with a two-sided identity over elements of `elem_len()`
/// scalars: `combine(a, b)` is `a ⊗ b` with `a` the earlier element.
pub trait AssocOp: Sync {
    /// The scalar the elements are made of.
    type Scalar: Copy + Default + Send + Sync;
    /// Per-task scratch space (made once per task, reused by every combine).
    type Scratch: Send;
    /// Scalars per element.
    fn elem_len(&self) -> usize;
    /// A fresh scratch space.
    fn scratch(&self) -> Self::Scratch;
    /// Writes the identity `e` (`e ⊗ a = a ⊗ e = a`) into `out`.
    fn identity(&self, out: &mut [Self::Scalar]);
    /// Writes `a ⊗ b` into `out` (`out` aliases neither input).
    fn combine(
        &self,
        a: &[Self::Scalar],
        b: &[Self::Scalar],
        out: &mut [Self::Scalar],
        scratch: &mut Self::Scratch,
    );
}

/// The same operator with its arguments swapped: `a ⊗' b = b ⊗ a`. A reverse scan is a
/// forward scan of the reversed sequence under this operator.
pub struct Flipped<'a, O>(pub &'a O);

impl<O: AssocOp> AssocOp for Flipped<'_, O> {
    type Scalar = O::Scalar;
    type Scratch = O::Scratch;
    fn elem_len(&self) -> usize {
        self.0.elem_len()
    }
    fn scratch(&self) -> O::Scratch {
        self.0.scratch()
    }
    fn identity(&self, out: &mut [O::Scalar]) {
        self.0.identity(out)
    }
    #[inline]
    fn combine(&self, a: &[O::Scalar], b: &[O::Scalar], out: &mut [O::Scalar], s: &mut O::Scratch) {
        self.0.combine(b, a, out, s)
    }
}

/// `n` elements of `len` scalars each, in one flat buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Elements<S> {
    /// Scalars per element.
    pub len: usize,
    /// The elements one after another.
    pub data: Vec<S>,
}

impl<S: Copy> Elements<S> {
    /// `n` copies of `fill` (an element of `len` scalars).
    pub fn filled(n: usize, fill: &[S]) -> Self {
        let mut data = Vec::with_capacity(n * fill.len());
        for _ in 0..n {
            data.extend_from_slice(fill);
        }
        Elements {
            len: fill.len(),
            data,
        }
    }

    /// How many elements.
    pub fn count(&self) -> usize {
        self.data.len().checked_div(self.len).unwrap_or(0)
    }

    #[inline]
    /// Element `i`.
    pub fn get(&self, i: usize) -> &[S] {
        &self.data[i * self.len..(i + 1) * self.len]
    }

    #[inline]
    /// Element `i`, mutable.
    pub fn get_mut(&mut self, i: usize) -> &mut [S] {
        &mut self.data[i * self.len..(i + 1) * self.len]
    }
}

/// Direction of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `s_k = a_1 ⊗ ... ⊗ a_k`.
    Forward,
    /// `s̄_k = a_k ⊗ ... ⊗ a_T`.
    Reverse,
}

/// Reverses the order of the elements of a flat buffer in place.
pub fn reverse_elements<S>(data: &mut [S], len: usize) {
    let n = data.len() / len.max(1);
    for i in 0..n / 2 {
        let j = n - 1 - i;
        let (head, tail) = data.split_at_mut(j * len);
        head[i * len..(i + 1) * len].swap_with_slice(&mut tail[..len]);
    }
}

/// Scans `data` (whole elements of `op.elem_len()` scalars) in place, in `dir`, with
/// `alg`, serially or on the rayon pool.
pub fn scan<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    alg: ScanAlgorithm,
    dir: Direction,
    exec: Exec,
) {
    match dir {
        Direction::Forward => scan_in_place(op, data, alg, exec, None),
        Direction::Reverse => {
            let len = op.elem_len();
            reverse_elements(data, len);
            scan_in_place(&Flipped(op), data, alg, exec, None);
            reverse_elements(data, len);
        }
    }
}

/// Scan algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScanAlgorithm {
    /// The left fold, one element after the other.
    Sequential,
    /// Hillis & Steele (the paper's Algorithm 1): `O(T log T)` work, `log T` levels.
    HillisSteele,
    /// Blelloch (Algorithm 2): up-sweep, down-sweep (exclusive), inclusive fix-up.
    Blelloch,
    /// In-place Ladner-Fischer circuit (Algorithm 3).
    LadnerFischer,
    /// Sengupta et al.'s hybrid (Algorithm 4) with its parameter N: reduce levels down to
    /// about N elements, Hillis-Steele there, then down-sweep.
    Sengupta(usize),
    /// The fastest available on the device (the default). On the CPU: a chunked
    /// reduce-then-scan, one chunk per task (about `2T` combines).
    #[default]
    Fastest,
}

impl ScanAlgorithm {
    /// Every algorithm, with the paper's two Sengupta settings (N = 1 and N = 15000).
    pub fn all() -> [ScanAlgorithm; 7] {
        [
            ScanAlgorithm::Sequential,
            ScanAlgorithm::HillisSteele,
            ScanAlgorithm::Blelloch,
            ScanAlgorithm::LadnerFischer,
            ScanAlgorithm::Sengupta(1),
            ScanAlgorithm::Sengupta(15000),
            ScanAlgorithm::Fastest,
        ]
    }

    /// The name `FromStr` accepts.
    pub fn name(&self) -> String {
        match self {
            ScanAlgorithm::Sequential => "sequential".into(),
            ScanAlgorithm::HillisSteele => "hillis-steele".into(),
            ScanAlgorithm::Blelloch => "blelloch".into(),
            ScanAlgorithm::LadnerFischer => "ladner-fischer".into(),
            ScanAlgorithm::Sengupta(n) => format!("sengupta:{n}"),
            ScanAlgorithm::Fastest => "fastest".into(),
        }
    }
}

impl FromStr for ScanAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "sequential" => ScanAlgorithm::Sequential,
            "hillis-steele" => ScanAlgorithm::HillisSteele,
            "blelloch" => ScanAlgorithm::Blelloch,
            "ladner-fischer" => ScanAlgorithm::LadnerFischer,
            "fastest" | "default" => ScanAlgorithm::Fastest,
            _ => match s.strip_prefix("sengupta") {
                Some("") => ScanAlgorithm::Sengupta(256),
                Some(n) => ScanAlgorithm::Sengupta(
                    n.trim_start_matches([':', '=']).parse().map_err(|_| format!("bad Sengupta parameter in \"{s}\""))?,
                ),
                None => return Err(format!(
                    "unknown scan algorithm \"{s}\" (expected sequential, hillis-steele, blelloch, ladner-fischer, sengupta[:N] or fastest)"
                )),
            },
        })
    }
}

#[cfg(test)]
mod tests;
