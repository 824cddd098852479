//! Cooperative cancellation of long calls: one flag that the long loops poll (per
//! track or group of tracks, per particle-filter step, per tracker scan, per frame), so
//! that a caller can stop a call from another thread within a fraction of a second.
//!
//! The Python package sets it when Ctrl-C arrives while a call runs without the GIL
//! (`kestrel._kestrel`'s `run_detached`), and clears it once that call has returned. A
//! cancelled call returns [`Error::Cancelled`]; the outputs it was writing are its own
//! buffers, dropped with it, so nothing partial is left. The command line never sets it
//! (it ends the process on SIGINT). Tested from Python (`python/tests/test_reliability.py`):
//! a unit test here would cancel the other tests of its binary.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every running call to stop at its next check.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Lets calls run again (after the cancelled ones have returned).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// True while a cancellation is asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// The check a long loop makes: [`Error::Cancelled`] once a cancellation is asked for.
#[inline]
pub fn check() -> Result<()> {
    if requested() {
        Err(Error::Cancelled)
    } else {
        Ok(())
    }
}
