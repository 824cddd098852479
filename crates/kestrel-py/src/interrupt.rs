//! Ctrl-C during a long call: Python runs its SIGINT handler only between bytecodes of
//! the main thread, never while a call runs without the GIL, so a long kestrel call
//! would ignore Ctrl-C until it ends.
//!
//! While calls run, a C-level SIGINT handler of our own stands in for Python's: it
//! only sets the library's cancellation flag (`kestrel::cancel`, async-signal-safe
//! atomics), which the long loops poll. When the last running call returns, Python's
//! handler is put back, the flag cleared, and the interrupt handed to Python
//! (`PyErr_SetInterrupt`), so that its own handler runs: `KeyboardInterrupt` by
//! default. A handler set to SIG_IGN or SIG_DFL is left alone (Ctrl-C then does what
//! the program asked for).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Ctrl-C arrived while our handler stood in.
static SEEN: AtomicBool = AtomicBool::new(false);

struct Installed {
    /// Calls running with our handler in place.
    depth: usize,
    /// The handler to put back when the last returns.
    old: Option<libc::sigaction>,
}

// SAFETY: `sigaction` is plain data (a handler address, a mask and flags).
unsafe impl Send for Installed {}

static STATE: Mutex<Installed> = Mutex::new(Installed {
    depth: 0,
    old: None,
});

extern "C" fn on_sigint(_: libc::c_int) {
    SEEN.store(true, Ordering::SeqCst);
    kestrel::cancel::request();
}

/// Our handler in place for the duration of one call.
pub(crate) struct Guard {
    armed: bool,
}

/// Puts our handler in place (the first of concurrent calls does; the others count).
pub(crate) fn arm() -> Guard {
    let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if st.depth == 0 {
        // SAFETY: reading and setting the disposition of SIGINT with zeroed, then
        // filled, sigaction structures; the handler only stores to atomics.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) != 0 {
                return Guard { armed: false };
            }
            if old.sa_sigaction == libc::SIG_IGN || old.sa_sigaction == libc::SIG_DFL {
                return Guard { armed: false };
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut new.sa_mask);
            new.sa_flags = libc::SA_RESTART;
            if libc::sigaction(libc::SIGINT, &new, std::ptr::null_mut()) != 0 {
                return Guard { armed: false };
            }
            st.old = Some(old);
        }
    }
    st.depth += 1;
    Guard { armed: true }
}

impl Guard {
    /// Ends the call's watch: true when Ctrl-C arrived while it ran (then handed to
    /// Python once the last running call ends).
    pub(crate) fn finish(mut self) -> bool {
        let seen = SEEN.load(Ordering::SeqCst);
        self.disarm();
        seen
    }

    fn disarm(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
        st.depth -= 1;
        if st.depth > 0 {
            return;
        }
        if let Some(old) = st.old.take() {
            // SAFETY: putting back the disposition read in `arm`.
            unsafe {
                libc::sigaction(libc::SIGINT, &old, std::ptr::null_mut());
            }
        }
        kestrel::cancel::clear();
        if SEEN.swap(false, Ordering::SeqCst) {
            // SAFETY: async-signal-safe and callable without the GIL: marks SIGINT as
            // arrived for Python, whose handler runs at the next signal check.
            unsafe {
                pyo3::ffi::PyErr_SetInterrupt();
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.disarm();
    }
}
