//! The scan algorithms of Sarkka & Garcia-Fernandez, Section II, on a flat element
//! buffer, level by level; each level's operations are independent and run on the rayon
//! pool when there are enough of them. Indices below are 0-based (the paper's are 1-based).

use super::{AssocOp, LevelLog, ScanAlgorithm};
use rayon::prelude::*;

/// How a scan's levels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exec {
    /// On the calling thread (used when many sequences are scanned at once).
    Serial,
    /// Each level's operations spread over the rayon pool.
    Rayon,
}

/// Levels with fewer operations than this run serially even under [`Exec::Rayon`].
const PAR_MIN_OPS: usize = 32;

/// A task's scratch: the operator's own and two element buffers.
struct Task<O: AssocOp> {
    s: O::Scratch,
    tmp: Vec<O::Scalar>,
    tmp2: Vec<O::Scalar>,
}

impl<O: AssocOp> Task<O> {
    fn new(op: &O) -> Self {
        let n = op.elem_len();
        Task {
            s: op.scratch(),
            tmp: vec![O::Scalar::default(); n],
            tmp2: vec![O::Scalar::default(); n],
        }
    }

    /// `b <- a ⊗ b`.
    #[inline]
    fn right(&mut self, op: &O, a: &[O::Scalar], b: &mut [O::Scalar]) {
        op.combine(a, b, &mut self.tmp, &mut self.s);
        b.copy_from_slice(&self.tmp);
    }

    /// `a <- a ⊗ b`.
    #[inline]
    fn left(&mut self, op: &O, a: &mut [O::Scalar], b: &[O::Scalar]) {
        op.combine(a, b, &mut self.tmp, &mut self.s);
        a.copy_from_slice(&self.tmp);
    }
}

fn identity_vec<O: AssocOp>(op: &O) -> Vec<O::Scalar> {
    let mut v = vec![O::Scalar::default(); op.elem_len()];
    op.identity(&mut v);
    v
}

/// Runs `f` on each block of `block` scalars of `data` (the last may be shorter), in
/// parallel when `exec` says so and there are at least [`PAR_MIN_OPS`] blocks; returns the
/// number of operator applications `f` reports.
fn blocks<O, F>(op: &O, data: &mut [O::Scalar], block: usize, exec: Exec, f: F) -> usize
where
    O: AssocOp,
    F: Fn(&mut Task<O>, &mut [O::Scalar]) -> usize + Sync + Send,
{
    if data.is_empty() {
        return 0;
    }
    let nblocks = data.len().div_ceil(block);
    if exec == Exec::Rayon && nblocks >= PAR_MIN_OPS {
        data.par_chunks_mut(block)
            .with_min_len(8)
            .map_init(|| Task::new(op), |t, ch| f(t, ch))
            .sum()
    } else {
        let mut t = Task::new(op);
        data.chunks_mut(block).map(|ch| f(&mut t, ch)).sum()
    }
}

/// Runs `work` on each element of `dst` with its index, in parallel when `exec` says so
/// and there are at least [`PAR_MIN_OPS`] elements; returns the number of operator
/// applications `work` reports.
fn elements<O, F>(op: &O, dst: &mut [O::Scalar], exec: Exec, work: F) -> usize
where
    O: AssocOp,
    F: Fn(&mut Task<O>, (usize, &mut [O::Scalar])) -> usize + Sync + Send,
{
    let len = op.elem_len();
    if exec == Exec::Rayon && dst.len() / len >= PAR_MIN_OPS {
        dst.par_chunks_mut(len)
            .enumerate()
            .with_min_len(64)
            .map_init(|| Task::new(op), work)
            .sum()
    } else {
        let mut t = Task::new(op);
        dst.chunks_mut(len)
            .enumerate()
            .map(|x| work(&mut t, x))
            .sum()
    }
}

fn log_level(log: &mut Option<&mut LevelLog>, ops: usize) {
    if let Some(l) = log.as_deref_mut() {
        l.push(ops);
    }
}

/// `ceil(log2 n)` for `n >= 1`.
fn ceil_log2(n: usize) -> u32 {
    n.next_power_of_two().trailing_zeros()
}

/// Scans `data` forward in place with `alg`. `log`, when given, receives the number of
/// operator applications of each parallel step (for the PRAM counts).
pub fn scan_in_place<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    alg: ScanAlgorithm,
    exec: Exec,
    log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    assert!(
        len > 0 && data.len() % len == 0,
        "scan buffer holds whole elements"
    );
    if data.len() <= len {
        return;
    }
    match alg {
        ScanAlgorithm::Sequential => sequential(op, data, log),
        ScanAlgorithm::HillisSteele => hillis_steele(op, data, exec, log),
        ScanAlgorithm::Blelloch => blelloch(op, data, exec, log),
        ScanAlgorithm::LadnerFischer => ladner_fischer(op, data, exec, log),
        ScanAlgorithm::Sengupta(n) => sengupta(op, data, n.max(1), exec, log),
        ScanAlgorithm::Fastest => {
            let chunks = match exec {
                Exec::Serial => 1,
                Exec::Rayon => 4 * rayon::current_num_threads(),
            };
            chunked(op, data, chunks, exec, log)
        }
    }
}

/// The left fold: `a_i <- a_{i-1} ⊗ a_i`.
fn sequential<O: AssocOp>(op: &O, data: &mut [O::Scalar], mut log: Option<&mut LevelLog>) {
    let len = op.elem_len();
    let n = data.len() / len;
    let mut t = Task::new(op);
    for i in 1..n {
        let (h, tl) = data.split_at_mut(i * len);
        t.right(op, &h[(i - 1) * len..], &mut tl[..len]);
        log_level(&mut log, 1);
    }
}

/// Algorithm 1 (Hillis & Steele), double-buffered: at level d, `a_j <- a_{j-2^d} ⊗ a_j` for
/// every `j >= 2^d`, all reading the previous level.
fn hillis_steele<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    exec: Exec,
    mut log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    let mut other = data.to_vec();
    let mut in_data = true;
    let mut s = 1;
    while s < n {
        let (src, dst): (&[O::Scalar], &mut [O::Scalar]) = if in_data {
            (&*data, &mut other[..])
        } else {
            (&other[..], &mut *data)
        };
        dst[..s * len].copy_from_slice(&src[..s * len]);
        let ops = hs_level(op, src, &mut dst[s * len..], s, exec);
        log_level(&mut log, ops);
        in_data = !in_data;
        s *= 2;
    }
    if !in_data {
        data.copy_from_slice(&other);
    }
}

/// One Hillis-Steele level: `dst[j - s] = src[j - s] ⊗ src[j]` for `j` in `s..n`.
fn hs_level<O: AssocOp>(
    op: &O,
    src: &[O::Scalar],
    dst: &mut [O::Scalar],
    s: usize,
    exec: Exec,
) -> usize {
    let len = op.elem_len();
    let work = |t: &mut Task<O>, (i, out): (usize, &mut [O::Scalar])| {
        let j = i + s;
        op.combine(
            &src[(j - s) * len..(j - s + 1) * len],
            &src[j * len..(j + 1) * len],
            out,
            &mut t.s,
        );
        1usize
    };
    elements(op, dst, exec, work)
}

/// The up-sweep shared by Algorithms 2 and 3: at level d, in each block of `2^{d+1}`
/// elements, `a_k <- a_j ⊗ a_k` with `j` the block's middle-1 and `k` its last element;
/// blocks cut short by the end of the data are skipped (as if padded with the identity).
fn up_sweep<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    exec: Exec,
    log: &mut Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    for d in 0..ceil_log2(n) {
        let s = 1usize << d;
        let bs = 2 * s;
        let ops = blocks(op, data, bs * len, exec, |t, blk| {
            if blk.len() < bs * len {
                return 0;
            }
            let (h, tl) = blk.split_at_mut((bs - 1) * len);
            t.right(op, &h[(s - 1) * len..s * len], tl);
            1
        });
        log_level(log, ops);
    }
}

/// Algorithm 3, the in-place Ladner-Fischer circuit: up-sweep, then at level d
/// `a_{i+2^d} <- a_i ⊗ a_{i+2^d}` for `i = 2^{d+1}, 2*2^{d+1}, ...` (1-based).
fn ladner_fischer<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    exec: Exec,
    mut log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    up_sweep(op, data, exec, &mut log);
    for d in (0..ceil_log2(n)).rev() {
        let s = 1usize << d;
        let bs = 2 * s;
        if bs > n {
            continue;
        }
        // Blocks start at the last element of each full block of the up-sweep.
        let ops = blocks(op, &mut data[(bs - 1) * len..], bs * len, exec, |t, blk| {
            if blk.len() <= s * len {
                return 0;
            }
            let (h, tl) = blk.split_at_mut(s * len);
            t.right(op, &h[..len], &mut tl[..len]);
            1
        });
        log_level(&mut log, ops);
    }
}

/// Algorithm 2 (Blelloch): up-sweep, the last element set to the identity, down-sweep to
/// the exclusive scan (`t = a_j; a_j = a_k; a_k = a_k ⊗ t`), then the inclusive fix-up
/// `a_i <- a_i ⊗ b_i` with the input `b`. Pads with the identity to a power of two.
fn blelloch<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    exec: Exec,
    mut log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    let p = n.next_power_of_two();
    let id = identity_vec(op);
    let mut a = Vec::with_capacity(p * len);
    a.extend_from_slice(data);
    for _ in n..p {
        a.extend_from_slice(&id);
    }
    let b = a.clone();
    up_sweep(op, &mut a, exec, &mut log);
    a[(p - 1) * len..].copy_from_slice(&id);
    for d in (0..ceil_log2(p)).rev() {
        let s = 1usize << d;
        let bs = 2 * s;
        let ops = blocks(op, &mut a, bs * len, exec, |t, blk| {
            let (h, tl) = blk.split_at_mut((bs - 1) * len);
            let aj = &mut h[(s - 1) * len..s * len];
            t.tmp2.copy_from_slice(aj);
            aj.copy_from_slice(tl);
            op.combine(tl, &t.tmp2, &mut t.tmp, &mut t.s);
            tl.copy_from_slice(&t.tmp);
            1
        });
        log_level(&mut log, ops);
    }
    // Fix-up: one operation per element, all independent.
    let fix = |t: &mut Task<O>, (ai, bi): (&mut [O::Scalar], &[O::Scalar])| {
        t.left(op, ai, bi);
        1usize
    };
    let ops: usize = if exec == Exec::Rayon && p >= PAR_MIN_OPS {
        a.par_chunks_mut(len)
            .zip(b.par_chunks(len))
            .with_min_len(64)
            .map_init(|| Task::new(op), fix)
            .sum()
    } else {
        let mut t = Task::new(op);
        a.chunks_mut(len)
            .zip(b.chunks(len))
            .map(|x| fix(&mut t, x))
            .sum()
    };
    log_level(&mut log, ops);
    data.copy_from_slice(&a[..n * len]);
}

/// Algorithm 4 (Sengupta et al.): reduce pairs level by level until about `big_n`
/// elements remain (`d* = floor(log2(T/N))`), Hillis-Steele on that level, then the
/// down-sweep: odd positions (1-based) `a^(d)_i <- a^(d+1)_{(i-1)/2} ⊗ a^(d)_i`, even ones
/// `a^(d)_i <- a^(d+1)_{i/2}`. An odd-length level's last element is carried up unpaired
/// (paired with the identity padding).
fn sengupta<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    big_n: usize,
    exec: Exec,
    mut log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    let mut dstar = 0;
    while big_n.checked_shl(dstar + 1).is_some_and(|m| m <= n) {
        dstar += 1;
    }
    let mut levels: Vec<Vec<O::Scalar>> = Vec::with_capacity(dstar as usize);
    for d in 0..dstar as usize {
        let src: &[O::Scalar] = if d == 0 { data } else { &levels[d - 1] };
        let m_src = src.len() / len;
        let mut dst = vec![O::Scalar::default(); m_src.div_ceil(2) * len];
        let work = |t: &mut Task<O>, (i, out): (usize, &mut [O::Scalar])| {
            let l = 2 * i;
            if l + 1 < m_src {
                op.combine(
                    &src[l * len..(l + 1) * len],
                    &src[(l + 1) * len..(l + 2) * len],
                    out,
                    &mut t.s,
                );
                1usize
            } else {
                out.copy_from_slice(&src[l * len..(l + 1) * len]);
                0
            }
        };
        let ops = elements(op, &mut dst, exec, work);
        log_level(&mut log, ops);
        levels.push(dst);
    }
    match levels.last_mut() {
        Some(top) => hillis_steele(op, top, exec, log.as_deref_mut()),
        None => hillis_steele(op, data, exec, log.as_deref_mut()),
    }
    for d in (0..dstar as usize).rev() {
        let (lower, upper) = levels.split_at_mut(d);
        let src: &[O::Scalar] = &upper[0];
        let dst: &mut [O::Scalar] = if d == 0 {
            &mut *data
        } else {
            &mut lower[d - 1]
        };
        let work = |t: &mut Task<O>, (m, out): (usize, &mut [O::Scalar])| {
            if m == 0 {
                0usize
            } else if m % 2 == 1 {
                let p = (m - 1) / 2;
                out.copy_from_slice(&src[p * len..(p + 1) * len]);
                0
            } else {
                let p = m / 2 - 1;
                t.right(op, &src[p * len..(p + 1) * len], out);
                1
            }
        };
        let ops = elements(op, dst, exec, work);
        log_level(&mut log, ops);
    }
}

/// Chunked scan-then-propagate: each of `chunks` chunks is scanned sequentially (in
/// parallel across chunks), the chunk totals are scanned by the Ladner-Fischer circuit,
/// and each later chunk is fixed up with the total before it. About `2T` operations and
/// `2T/chunks + 2 log(chunks)` steps: the least work of the parallel algorithms, hence the
/// default on a CPU with few cores (and the shape of a GPU's block-local scan).
pub(super) fn chunked<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    chunks: usize,
    exec: Exec,
    mut log: Option<&mut LevelLog>,
) {
    let len = op.elem_len();
    let n = data.len() / len;
    let cs = n.div_ceil(chunks.clamp(1, n));
    let nc = n.div_ceil(cs);
    let scan_chunk = |t: &mut Task<O>, blk: &mut [O::Scalar]| {
        let m = blk.len() / len;
        for i in 1..m {
            let (h, tl) = blk.split_at_mut(i * len);
            t.right(op, &h[(i - 1) * len..], &mut tl[..len]);
        }
        m - 1
    };
    blocks(op, data, cs * len, exec, scan_chunk);
    if let Some(l) = log.as_deref_mut() {
        for i in 1..cs {
            l.push(
                (0..nc)
                    .filter(|c| ((c + 1) * cs).min(n) - c * cs > i)
                    .count(),
            );
        }
    }
    // Chunk totals, made global by the Ladner-Fischer circuit (logged as its levels), so
    // that `P` processors take `2T/P + 2 log P` steps.
    let mut carry: Vec<O::Scalar> = Vec::with_capacity(nc * len);
    for c in 0..nc {
        let last = ((c + 1) * cs).min(n) - 1;
        carry.extend_from_slice(&data[last * len..(last + 1) * len]);
    }
    ladner_fischer(op, &mut carry, Exec::Serial, log.as_deref_mut());
    if nc > 1 {
        fix_chunks(op, &mut data[cs * len..], cs, &carry, exec);
    }
    if let Some(l) = log {
        for i in 0..cs.saturating_sub(1) {
            l.push(
                (1..nc)
                    .filter(|c| ((c + 1) * cs).min(n) - c * cs - 1 > i)
                    .count(),
            );
        }
    }
}

/// The fix-up of [`chunked`]: element `i` of chunk `c + 1` becomes `carry[c] ⊗ a_i`, its
/// last element `carry[c + 1]`.
fn fix_chunks<O: AssocOp>(
    op: &O,
    data: &mut [O::Scalar],
    cs: usize,
    carry: &[O::Scalar],
    exec: Exec,
) {
    let len = op.elem_len();
    let work = |t: &mut Task<O>, (c, blk): (usize, &mut [O::Scalar])| {
        let m = blk.len() / len;
        let pre = &carry[c * len..(c + 1) * len];
        for i in 0..m - 1 {
            t.right(op, pre, &mut blk[i * len..(i + 1) * len]);
        }
        blk[(m - 1) * len..].copy_from_slice(&carry[(c + 1) * len..(c + 2) * len]);
    };
    if exec == Exec::Rayon {
        data.par_chunks_mut(cs * len)
            .enumerate()
            .for_each_init(|| Task::new(op), work);
    } else {
        let mut t = Task::new(op);
        data.chunks_mut(cs * len)
            .enumerate()
            .for_each(|x| work(&mut t, x));
    }
}
