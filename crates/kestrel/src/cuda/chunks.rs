//! The out-of-core pipeline of a "map over independent items" family: items (tracks,
//! filters, frames) are processed in chunks that fit a memory budget. When the whole
//! batch fits, one buffer set does it in one go; otherwise two buffer sets on two
//! streams alternate, so that one chunk's copies overlap the other chunk's kernels.
//!
//! The family owns its buffer set (a "slot") and says how to start a chunk on a slot
//! (`enqueue`: upload, launch) and how to finish it (`finish`: download, check); this
//! module plans the chunks and drives the slots in the overlapping order.

use super::gpu::{ck, Gpu};
use crate::error::Result;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// A family's buffer set for one chunk, with the stream its work goes to.
pub(crate) trait ChunkSlot {
    fn stream(&self) -> &CudaStream;
}

/// `(items per chunk, number of slots)`: one slot holding every item when `items` of
/// `bytes_per_item` fit in `budget` bytes, else two slots of a chunk each (at least one
/// item per chunk; at most `max_chunk` items).
pub(crate) fn plan(
    items: usize,
    bytes_per_item: usize,
    budget: usize,
    max_chunk: usize,
) -> (usize, usize) {
    let fit = |slots: usize| (budget / (slots * bytes_per_item.max(1))).clamp(1, items.max(1));
    let (cap, n) = if fit(1) >= items {
        (items.max(1), 1)
    } else {
        (fit(2), 2)
    };
    (cap.min(max_chunk.max(1)), n)
}

/// `n` streams on `gpu`: its default stream first, then new ones.
pub(crate) fn streams(gpu: &Gpu, n: usize) -> Result<Vec<Arc<CudaStream>>> {
    (0..n)
        .map(|i| {
            if i == 0 {
                Ok(gpu.stream.clone())
            } else {
                ck(gpu.ctx.new_stream(), "creating a stream")
            }
        })
        .collect()
}

/// Runs `enqueue` then `finish` over chunks `(first item, items)` of at most `cap`
/// items, alternating `slots`: chunk i+1 is enqueued before chunk i is finished. On
/// failure every slot's stream is waited for before returning (so buffers can be freed).
pub(crate) fn drive<S: ChunkSlot>(
    items: usize,
    cap: usize,
    slots: &[S],
    mut enqueue: impl FnMut(&S, usize, usize) -> Result<()>,
    mut finish: impl FnMut(&S, usize, usize) -> Result<()>,
) -> Result<()> {
    let chunks: Vec<(usize, usize)> = (0..items)
        .step_by(cap.max(1))
        .map(|b0| (b0, cap.min(items - b0)))
        .collect();
    let ns = slots.len();
    let mut run = || -> Result<()> {
        for (i, &(b0, nb)) in chunks.iter().enumerate() {
            enqueue(&slots[i % ns], b0, nb)?;
            if ns == 1 {
                finish(&slots[0], b0, nb)?;
            } else if i >= 1 {
                let (p0, pn) = chunks[i - 1];
                finish(&slots[(i - 1) % ns], p0, pn)?;
            }
        }
        if ns > 1 {
            if let Some(&(b0, nb)) = chunks.last() {
                finish(&slots[(chunks.len() - 1) % ns], b0, nb)?;
            }
        }
        Ok(())
    };
    let r = run();
    if r.is_err() {
        for s in slots {
            let _ = s.stream().synchronize();
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_fit_the_budget() {
        // Everything fits: one slot with every item.
        assert_eq!(plan(100, 10, 1000, usize::MAX), (100, 1));
        // Two slots of 25 items each fit 1000 bytes at 20 bytes an item.
        assert_eq!(plan(100, 20, 1000, usize::MAX), (25, 2));
        // Never fewer than one item, never more than the cap.
        assert_eq!(plan(100, 10_000, 1000, usize::MAX), (1, 2));
        assert_eq!(plan(100, 10, 1000, 7), (7, 1));
        assert_eq!(plan(0, 10, 1000, usize::MAX), (1, 1));
    }
}
