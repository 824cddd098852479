//! Typed errors of the library. Every variant says what went wrong and where
//! (file, line, field, track, step), so the command line can print it as one
//! `error:` line without adding context of its own.

use std::path::PathBuf;

/// The library's error type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model is malformed: wrong shapes, non-finite entries, a covariance that is
    /// not symmetric positive (semi-)definite. `field` names the matrix (`F`, `Q`, `R`, ...).
    #[error("model: {field}: {msg}")]
    Model {
        /// The matrix or entry at fault (`F`, `Q`, `R`, `P0`, ...).
        field: String,
        /// What is wrong with it.
        msg: String,
    },

    /// The model file could not be parsed.
    #[error("{}: {msg}", path.display())]
    ModelFile {
        /// The model file.
        path: PathBuf,
        /// What is wrong (with the key or line where known).
        msg: String,
    },

    /// Measurements or other inputs do not fit the model or each other.
    #[error("{msg}")]
    Input {
        /// What does not fit, naming the sizes or values involved.
        msg: String,
    },

    /// A data file is malformed. `line` is 1-based when known.
    #[error("{}{}: {msg}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line, when known.
        line: Option<usize>,
        /// What is malformed.
        msg: String,
    },

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// An output could not be written (a full disk, a lost device): not the input's
    /// fault, so the CLI exits 1.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// A size asked for by the input (tracks x steps x dimension, particles, frames) is
    /// beyond what this machine can hold, or overflows; found before allocating.
    #[error("{what} would need {} GB, {limit}", gb(*.bytes))]
    TooLarge {
        /// What would be allocated.
        what: String,
        /// The bytes it would need (saturated at `u128::MAX` on overflow).
        bytes: u128,
        /// The limit it exceeds, in words (the machine's memory, an address space, ...).
        limit: String,
    },

    /// A result is not finite (NaN or infinite) where it must be: the recursion broke
    /// down numerically. Names the output, track and step.
    #[error("{what}: track {track}, step {step}: {msg}")]
    NonFinite {
        /// The output (filtered mean, log-likelihood, ...).
        what: String,
        /// The track (0-based).
        track: usize,
        /// The step (0-based).
        step: usize,
        /// What was found.
        msg: String,
    },

    /// A covariance lost positive definiteness during the recursion.
    #[error("track {track}, step {step}: {what} is not positive definite")]
    NotPositiveDefinite {
        /// The track (0-based).
        track: usize,
        /// The step (0-based).
        step: usize,
        /// The matrix (the innovation covariance `S`, the predicted `P`, ...).
        what: &'static str,
    },

    /// The requested device or method is not available on this machine or build.
    #[error("{0}")]
    Unsupported(String),

    /// The device asked for is not usable on this machine (no CUDA driver, no such GPU,
    /// a build without the `cuda` feature). Not the caller's input: a program may fall
    /// back to the CPU.
    #[error("{0}")]
    DeviceUnavailable(String),

    /// A failure inside the CUDA backend (driver, NVRTC, a kernel launch).
    #[error("cuda: {0}")]
    Cuda(String),

    /// The call was cancelled ([`crate::cancel`]: Ctrl-C in Python).
    #[error("interrupted")]
    Cancelled,
}

impl Error {
    /// True when the error is the caller's fault (bad input or usage): the CLI exits 2.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::Model { .. }
                | Error::ModelFile { .. }
                | Error::Input { .. }
                | Error::Parse { .. }
                | Error::Unsupported(_)
                | Error::TooLarge { .. }
        ) || matches!(self, Error::Io { source, .. } if read_failure_is_bad_input(source))
    }

    pub(crate) fn model(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Model {
            field: field.into(),
            msg: msg.into(),
        }
    }

    pub(crate) fn input(msg: impl Into<String>) -> Self {
        Error::Input { msg: msg.into() }
    }

    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Write {
            path: path.into(),
            source,
        }
    }

    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// A failure to read an input is the input's fault (a file missing, unreadable to this
/// user, a directory, malformed) unless the device or the machine failed: an I/O error
/// of the device (EIO), no memory, an interrupted or timed-out read.
fn read_failure_is_bad_input(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    let machine = matches!(
        e.kind(),
        ErrorKind::OutOfMemory | ErrorKind::Interrupted | ErrorKind::TimedOut
    );
    #[cfg(unix)]
    let machine = machine || e.raw_os_error() == Some(libc::EIO);
    !machine
}

/// Bytes in GB (10^9), with enough digits to tell sizes apart.
fn gb(bytes: u128) -> String {
    let g = bytes as f64 / 1e9;
    if g >= 100.0 {
        format!("{g:.0}")
    } else if g >= 0.1 {
        format!("{g:.1}")
    } else {
        format!("{g:.3}")
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Records a warning: something the caller should know that is not an error (a variance
/// that is legitimately infinite, inputs large enough to cost f32 accuracy). The library
/// never prints; a program collects them with [`take_warnings`] (the CLI prints them as
/// `warning:` lines after success).
pub fn warn(msg: impl Into<String>) {
    WARNINGS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(msg.into());
}

/// The warnings recorded since the last call, oldest first.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *WARNINGS.lock().unwrap_or_else(|p| p.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_failure_is_bad_input_unless_the_machine_failed() {
        let io = |e: std::io::Error| Error::Io {
            path: "z.csv".into(),
            source: e,
        };
        use std::io::ErrorKind;
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::IsADirectory,
            ErrorKind::InvalidData,
            ErrorKind::UnexpectedEof,
        ] {
            assert!(io(kind.into()).is_bad_input(), "{kind:?}");
        }
        assert!(!io(ErrorKind::OutOfMemory.into()).is_bad_input());
        #[cfg(unix)]
        assert!(!io(std::io::Error::from_raw_os_error(libc::EIO)).is_bad_input());
        // A failed write is never the input's fault.
        assert!(!Error::Write {
            path: "o.csv".into(),
            source: ErrorKind::NotFound.into()
        }
        .is_bad_input());
    }
}
