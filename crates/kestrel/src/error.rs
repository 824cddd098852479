//! Typed errors of the library. Every variant says what went wrong and where
//! (file, line, field, track, step), so the command line can print it as one
//! `error:` line without adding context of its own.

use std::path::PathBuf;

/// The library's error type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model is malformed: wrong shapes, non-finite entries, a covariance that is
    /// not symmetric positive (semi-)definite. `field` names the matrix (`F`, `Q`, `R`, ...).
    #[error("model: {field}: {msg}")]
    Model { field: String, msg: String },

    /// The model file could not be parsed.
    #[error("{}: {msg}", path.display())]
    ModelFile { path: PathBuf, msg: String },

    /// Measurements or other inputs do not fit the model or each other.
    #[error("{msg}")]
    Input { msg: String },

    /// A data file is malformed. `line` is 1-based when known.
    #[error("{}{}: {msg}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        msg: String,
    },

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A covariance lost positive definiteness during the recursion.
    #[error("track {track}, step {step}: {what} is not positive definite")]
    NotPositiveDefinite {
        track: usize,
        step: usize,
        what: &'static str,
    },

    /// The requested device or method is not available on this machine or build.
    #[error("{0}")]
    Unsupported(String),

    /// A failure inside the CUDA backend (driver, NVRTC, a kernel launch).
    #[error("cuda: {0}")]
    Cuda(String),
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
                | Error::Io { .. }
                | Error::Unsupported(_)
        )
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

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
