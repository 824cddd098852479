//! The one way kestrel writes a file: never a partial output, never a clobbered input,
//! never a temporary file left behind.
//!
//! # Use
//!
//! One output file: every writer of [`crate::io`] (`write_measurements`,
//! `write_estimates`, `write_array`, ...) and [`write_atomic`] for any other content
//! already go through this module; nothing more to do.
//!
//! A command that reads files and writes one or more outputs declares them all first,
//! before any work, then writes, then commits:
//!
//! ```no_run
//! # fn main() -> kestrel::Result<()> {
//! # use std::path::Path;
//! # let (model, input, output, truth) = (Path::new("m.toml"), Path::new("z.csv"), Path::new("o.npz"), Path::new("x.csv"));
//! let outputs = kestrel::io::Outputs::plan(&[model, input], &[output, truth])?;
//! // ... the work; then the usual writers, one call per output:
//! // kestrel::io::write_estimates(output, &est)?;
//! outputs.commit()?;
//! # Ok(()) }
//! ```
//!
//! [`Outputs::plan`] refuses, with an input error (exit status 2), an output whose
//! directory does not exist, that is a directory, that is one of the inputs (same
//! canonical path or same device and inode: `./sub/../z.csv`, hard and symbolic links),
//! or that is named twice. While the plan is open, a write to one of its outputs goes to
//! a temporary file and stays there; [`Outputs::commit`] renames them all into place
//! only when every one was written. Dropping the plan (an error, a `?`) removes the
//! temporaries and leaves every pre-existing file as it was.
//!
//! # Guarantees
//!
//! - Temporary files are created exclusively (`O_EXCL`) with an unpredictable name in
//!   the output's directory (the `tempfile` crate), so a planted symbolic link is never
//!   followed; the name is short, so an output name of 255 bytes works.
//! - A failure while writing is an [`Error::Write`] naming the output (exit status 1:
//!   a full disk is not bad input); the temporary is removed.
//! - A writer whose archive finishes itself on drop (a `zip::ZipWriter`) is wrapped in
//!   a [`Latch`], so that a write error is returned once, without the writer's own
//!   messages on stderr.
//! - After [`remove_temporaries_on_signals`], SIGINT, SIGTERM and SIGHUP remove every
//!   temporary file and end the process with status 130, 143 or 129.
//! - Durability: with [`set_fsync`]`(true)` (the CLI's `--fsync`), the file is flushed to
//!   the disk (`fsync`) before the rename, and its directory before and after, so that the
//!   output survives a power loss. Without it the output is complete and atomic with
//!   respect to other processes and crashes of kestrel, but a power loss shortly after
//!   the run may lose it. Measured cost on the 2-core development VM (virtio disk,
//!   loaded): about 60 ms per small output and 2-7 s per 320 MB written.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

/// The buffered temporary file a writer fills.
pub type Sink = BufWriter<File>;

static FSYNC: AtomicBool = AtomicBool::new(false);

/// Makes every later output durable: the file and its directory are flushed to the disk
/// before and after the rename (see the module documentation for the cost).
pub fn set_fsync(on: bool) {
    FSYNC.store(on, Ordering::Relaxed);
}

/// Whether outputs are flushed to the disk (see [`set_fsync`]).
pub fn fsync_enabled() -> bool {
    FSYNC.load(Ordering::Relaxed)
}

/// Where a path lives: its directory's canonical path and its file name. Two spellings
/// of one output (`o.csv`, `./sub/../o.csv`) have the same key, whether or not the file
/// exists yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    dir: PathBuf,
    name: std::ffi::OsString,
}

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn input_error(path: &Path, msg: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line: None,
        msg: msg.into(),
    }
}

fn key_of(path: &Path) -> Result<Key> {
    let name = match path.file_name() {
        Some(n) if !path.as_os_str().to_string_lossy().ends_with('/') => n.to_os_string(),
        _ => return Err(input_error(path, "names a directory, not an output file")),
    };
    let dir = dir_of(path);
    let dir = dir.canonicalize().map_err(|e| {
        input_error(
            path,
            format!(
                "the output's directory {} cannot be used: {e}",
                dir.display()
            ),
        )
    })?;
    if !dir.is_dir() {
        return Err(input_error(
            path,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(Key { dir, name })
}

/// Device and inode of an existing file (following symbolic links).
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(path: &Path) -> Option<(u64, u64)> {
    let _ = path;
    None
}

/// A temporary file, removed when dropped, and on a signal while it exists.
struct Temp {
    path: Option<tempfile::TempPath>,
    slot: Option<usize>,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            signals::release(s);
        }
        // Dropping the `TempPath` removes the file.
        self.path.take();
    }
}

impl Temp {
    fn create(target: &Path) -> std::io::Result<(File, Temp)> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A short, recognisable prefix: the temporary's name must fit in 255 bytes
        // whatever the output's name.
        let mut cut = name.len().min(24);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let prefix = format!(".{}.", &name[..cut]);
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp").rand_bytes(10);
        // The path is registered for the signal handler before the file exists, so a
        // signal between the two cannot leave the temporary behind (the handler then
        // unlinks a name not yet created, which is harmless). A name taken already is
        // released and the builder tries another.
        let mut slot = None;
        let f = b.make_in(dir_of(target), |path| {
            let s = signals::hold(path);
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(true).create_new(true);
            // The output gets the mode of any new file (0666 less the umask), not the
            // 0600 of a temporary file.
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o666);
            }
            match o.open(path) {
                Ok(f) => {
                    slot = s;
                    Ok(f)
                }
                Err(e) => {
                    if let Some(s) = s {
                        signals::release(s);
                    }
                    Err(e)
                }
            }
        })?;
        let (file, path) = f.into_parts();
        Ok((
            file,
            Temp {
                path: Some(path),
                slot,
            },
        ))
    }

    /// Renames the temporary onto `target`, with the directory flushed before and after
    /// under `--fsync`. On failure the temporary is removed.
    fn persist(mut self, target: &Path) -> Result<()> {
        let sync_dir = || -> Result<()> {
            if fsync_enabled() {
                File::open(dir_of(target))
                    .and_then(|d| d.sync_all())
                    .map_err(|e| Error::write(target, e))?;
            }
            Ok(())
        };
        sync_dir()?;
        let Some(tp) = self.path.take() else {
            return Ok(());
        };
        // `self` still holds the signal slot until the rename is done; its drop releases it.
        tp.persist(target)
            .map_err(|e| Error::write(target, e.error))?;
        drop(self);
        sync_dir()
    }
}

/// A write target that remembers its first error and then accepts and discards
/// everything, so that a writer which finishes itself on drop (the zip archive of an
/// NPZ) neither reports the failure a second time nor writes further.
pub struct Latch<W> {
    inner: W,
    error: Option<std::io::Error>,
    pos: u64,
}

impl<W> Latch<W> {
    /// Wraps `inner`; nothing is latched yet.
    pub fn new(inner: W) -> Self {
        Latch {
            inner,
            error: None,
            pos: 0,
        }
    }

    /// The first error seen, if any.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    fn fail(&mut self, e: std::io::Error) -> std::io::Error {
        let copy = std::io::Error::new(e.kind(), e.to_string());
        self.error.get_or_insert(e);
        copy
    }
}

impl<W: Write> Write for Latch<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        self.inner.flush().map_err(|e| self.fail(e))
    }
}

impl<W: Seek> Seek for Latch<W> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        if self.error.is_some() {
            return Ok(self.pos);
        }
        match self.inner.seek(to) {
            Ok(p) => {
                self.pos = p;
                Ok(p)
            }
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// An output declared by [`Outputs::plan`]: its key, and its temporary once written.
struct Planned {
    plan: u64,
    path: PathBuf,
    key: Key,
    temp: Option<(Temp, File)>,
}

/// The outputs of every open plan.
static PLAN: Mutex<Vec<Planned>> = Mutex::new(Vec::new());
static NEXT_PLAN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn plan_lock() -> std::sync::MutexGuard<'static, Vec<Planned>> {
    PLAN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The outputs of one run, written all or none. See the module documentation.
#[must_use = "outputs are renamed into place only by `commit`"]
pub struct Outputs {
    id: u64,
}

impl Outputs {
    /// Checks the run's outputs against its inputs and each other, and opens the plan:
    /// until [`Outputs::commit`], writes to these outputs stay in temporary files.
    pub fn plan(inputs: &[&Path], outputs: &[&Path]) -> Result<Outputs> {
        check_paths(inputs, outputs)?;
        let id = NEXT_PLAN.fetch_add(1, Ordering::Relaxed);
        let mut plan = plan_lock();
        for o in outputs {
            let key = key_of(o)?;
            if plan.iter().any(|p| p.key == key) {
                return Err(input_error(o, "is already an output of this run"));
            }
            plan.push(Planned {
                plan: id,
                path: o.to_path_buf(),
                key,
                temp: None,
            });
        }
        Ok(Outputs { id })
    }

    /// Renames every written output into place (flushing them to the disk first with
    /// `--fsync`). An output that was declared but never written is left alone.
    pub fn commit(self) -> Result<()> {
        let items = self.take();
        let mut staged = Vec::new();
        for p in items {
            if let Some((temp, file)) = p.temp {
                staged.push((p.path, temp, file));
            }
        }
        if fsync_enabled() {
            for (path, _, file) in &staged {
                file.sync_all().map_err(|e| Error::write(path, e))?;
            }
        }
        for (path, temp, file) in staged {
            drop(file);
            temp.persist(&path)?;
        }
        Ok(())
    }
}

impl Outputs {
    fn take(&self) -> Vec<Planned> {
        let mut plan = plan_lock();
        let (mine, rest): (Vec<Planned>, Vec<Planned>) =
            plan.drain(..).partition(|p| p.plan == self.id);
        *plan = rest;
        mine
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        // Without a commit every temporary goes (dropping a `Temp` removes its file).
        drop(self.take());
    }
}

/// Checks, before any work, that the outputs can be written and clobber nothing the run
/// reads: each output's directory exists, no output is a directory, no output is an
/// input (canonical path, or device and inode), and no output is named twice. Errors are
/// input errors (exit status 2).
pub fn check_paths(inputs: &[&Path], outputs: &[&Path]) -> Result<()> {
    let files = input_files(inputs);
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let inputs = inputs.as_slice();
    let mut keys: Vec<(Key, &Path)> = Vec::new();
    for o in outputs {
        let k = key_of(o)?;
        let full = k.dir.join(&k.name);
        if full.is_dir() {
            return Err(input_error(o, "is a directory, not an output file"));
        }
        if let Some((_, first)) = keys.iter().find(|(q, _)| *q == k) {
            return Err(input_error(
                o,
                format!(
                    "named as two outputs ({} and {}): each output needs its own file",
                    first.display(),
                    o.display()
                ),
            ));
        }
        let id = identity(o);
        if let Some(i) = inputs.iter().find(|i| {
            let same_id = id.is_some() && identity(i) == id;
            let same_path = key_of(i).map(|q| q == k).unwrap_or(false);
            same_id || same_path
        }) {
            return Err(input_error(
                o,
                format!(
                    "the output is the input {}: refusing to overwrite an input",
                    i.display()
                ),
            ));
        }
        if let Some((_, other)) = keys.iter().find(|(_, p)| id.is_some() && identity(p) == id) {
            return Err(input_error(
                o,
                format!(
                    "the same file as the output {} (a link): each output needs its own file",
                    other.display()
                ),
            ));
        }
        keys.push((k, o));
    }
    Ok(())
}

/// Every input file the run reads: an input that is a directory (a directory of frames)
/// stands for itself and for each entry in it, so that an output is compared with
/// every file the run will read.
fn input_files(inputs: &[&Path]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for i in inputs {
        out.push(i.to_path_buf());
        if i.is_dir() {
            if let Ok(rd) = std::fs::read_dir(i) {
                out.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    out
}

/// Writes `path` through a temporary file in the same directory and renames it into
/// place, so that a failure never leaves a partial output behind; on failure the
/// temporary file is removed. When `path` belongs to an open [`Outputs`] plan, the
/// temporary waits for [`Outputs::commit`] instead.
pub fn write_atomic<F>(path: &Path, write: F) -> Result<()>
where
    F: FnOnce(&mut Sink) -> std::io::Result<()>,
{
    let key = key_of(path)?;
    if key.dir.join(&key.name).is_dir() {
        return Err(input_error(path, "is a directory, not an output file"));
    }
    let (file, temp) = Temp::create(path).map_err(|e| Error::write(path, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w).map_err(|e| Error::write(path, e))?;
    w.flush().map_err(|e| Error::write(path, e))?;
    let file = w
        .into_inner()
        .map_err(|e| Error::write(path, e.into_error()))?;
    {
        let mut plan = plan_lock();
        if let Some(p) = plan.iter_mut().find(|p| p.key == key) {
            p.temp = Some((temp, file));
            return Ok(());
        }
    }
    if fsync_enabled() {
        file.sync_all().map_err(|e| Error::write(path, e))?;
    }
    drop(file);
    temp.persist(path)
}

/// Removes every temporary file of this module when SIGINT, SIGTERM or SIGHUP arrives,
/// then ends the process with status 128 + the signal (130, 143, 129). For programs
/// (the CLI); a library user with signal handlers of its own leaves this alone.
pub fn remove_temporaries_on_signals() {
    signals::install();
}

#[cfg(not(unix))]
mod signals {
    pub(super) fn hold(_: &std::path::Path) -> Option<usize> {
        None
    }
    pub(super) fn release(_: usize) {}
    pub(super) fn install() {}
}

/// Async-signal-safe bookkeeping of the temporaries: a fixed table of C strings that the
/// handler takes (atomic swap, so the handler and the owner never both free one) and
/// unlinks.
#[cfg(unix)]
mod signals {
    use super::*;
    use std::ffi::CString;

    const SLOTS: usize = 256;
    static TABLE: [AtomicPtr<libc::c_char>; SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

    /// Registers `path`; `None` when the table is full (the file is then still removed
    /// on every ordinary exit, only not on a signal).
    pub(super) fn hold(path: &Path) -> Option<usize> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes()).ok()?;
        let raw = c.into_raw();
        for (i, s) in TABLE.iter().enumerate() {
            if s.compare_exchange(
                std::ptr::null_mut(),
                raw,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
            {
                return Some(i);
            }
        }
        // SAFETY: `raw` came from `CString::into_raw` just above and was not stored.
        drop(unsafe { CString::from_raw(raw) });
        None
    }

    pub(super) fn release(slot: usize) {
        let p = TABLE[slot].swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: every non-null entry came from `CString::into_raw` in `hold`, and
            // the swap made this call its only owner.
            drop(unsafe { CString::from_raw(p) });
        }
    }

    extern "C" fn on_signal(sig: libc::c_int) {
        for s in TABLE.iter() {
            let p = s.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: `p` is a NUL-terminated path owned by the table; unlink and
                // _exit are async-signal-safe. The string is leaked: the process ends.
                unsafe {
                    libc::unlink(p);
                }
            }
        }
        // SAFETY: ends the process at once, as the default action of the signal would.
        unsafe { libc::_exit(128 + sig) }
    }

    pub(super) fn install() {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a plain sigaction with a handler that only calls async-signal-safe
            // functions; the struct is zeroed, then the fields that matter are set.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = 0;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
