//! The GPU tracker's device buffers: those of one scan's work, which grow to what a scan
//! needs and are kept between scans ([`Grow`]), and one set of track buffers ([`Set`]);
//! the tracker compacts each scan's survivors and births from one set into the other.

use crate::cuda::{ck, Buffer, DevBuf, Gpu};
use crate::error::Result;
use cudarc::driver::result as cu;
use cudarc::driver::CudaStream;

/// A device buffer that grows (never shrinks) to what a scan needs.
pub(super) struct Grow<T> {
    pub buf: DevBuf<T>,
    what: &'static str,
}

impl<T> Grow<T> {
    pub(super) fn new(gpu: &Gpu, what: &'static str) -> Result<Self> {
        Ok(Grow {
            buf: DevBuf::new(gpu, 1, what)?,
            what,
        })
    }

    /// Room for `len` values (the old contents are not kept).
    pub(super) fn ensure(&mut self, gpu: &Gpu, len: usize) -> Result<()> {
        if self.buf.len() < len {
            // At least half again, so that a growing scenario reallocates rarely.
            let len = len.max(self.buf.len() + self.buf.len() / 2);
            self.buf = DevBuf::new(gpu, len, self.what)?;
        }
        Ok(())
    }
}

impl<T> Buffer for Grow<T> {
    fn address(&self, _: &CudaStream) -> u64 {
        self.buf.ptr()
    }
}

/// One set of track buffers, `cap` tracks.
pub(super) struct Set {
    pub cap: usize,
    pub x: DevBuf<f64>,
    pub p: DevBuf<f64>,
    pub id: DevBuf<u64>,
    pub status: DevBuf<u8>,
    pub age: DevBuf<u32>,
    pub hits: DevBuf<u32>,
    pub misses: DevBuf<u32>,
}

impl Set {
    pub(super) fn new(gpu: &Gpu, cap: usize, nx: usize) -> Result<Set> {
        let np = nx * (nx + 1) / 2;
        Ok(Set {
            cap,
            x: DevBuf::new(gpu, cap * nx, "track means")?,
            p: DevBuf::new(gpu, cap * np, "track covariances")?,
            id: DevBuf::new(gpu, cap, "track identities")?,
            status: DevBuf::new(gpu, cap, "track statuses")?,
            age: DevBuf::new(gpu, cap, "track ages")?,
            hits: DevBuf::new(gpu, cap, "track hits")?,
            misses: DevBuf::new(gpu, cap, "track misses")?,
        })
    }
}

pub(super) fn memset(
    stream: &CudaStream,
    ptr: u64,
    byte: u8,
    bytes: usize,
    what: &str,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the callers pass ranges inside their allocations.
    ck(
        unsafe { cu::memset_d8_async(ptr, byte, bytes, stream.cu_stream()) },
        what,
    )
}
