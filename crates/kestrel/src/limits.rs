//! The one size check for every size that comes from input: dimensions, tracks x steps
//! x values, particles, frames.
//!
//! Sizes are multiplied with checked arithmetic (in `u128`, so that an overflow is a
//! size too large, never a wrapped small one), then compared, before anything is
//! allocated, with the memory this machine has available (`MemAvailable` on Linux; the
//! environment variable `KESTREL_MAX_MEMORY`, in bytes, sets a lower bound of one's
//! own). A request beyond it is an [`Error::TooLarge`]: `... would need N GB, ...`
//! (exit status 2). Allocations then go through `try_reserve`, so that an allocator
//! refusal is the same error rather than an abort.
//!
//! ```
//! # fn main() -> kestrel::Result<()> {
//! use kestrel::limits::{self, Size};
//! let n = limits::elements("simulated truth", &[Size("tracks", 1000), Size("steps", 100), Size("nx", 4)])?;
//! limits::check_bytes("simulate", n as u128 * 8)?;
//! let v: Vec<f64> = limits::filled("simulated truth", n, 0.0)?;
//! # assert_eq!(v.len(), 400_000); Ok(()) }
//! ```

use crate::error::{Error, Result};

/// The largest state or measurement dimension a model may have. Every step costs
/// O(nx^3); at 256 one step of one track is a few tens of milliseconds, and the dense
/// matrices of a model stay under a megabyte each.
pub const MAX_DIM: usize = 256;

/// A named factor of a size (`Size("tracks", b)`), for the message.
#[derive(Clone, Copy, Debug)]
pub struct Size(pub &'static str, pub usize);

fn describe(factors: &[Size]) -> String {
    factors
        .iter()
        .map(|Size(n, v)| format!("{v} {n}"))
        .collect::<Vec<_>>()
        .join(" x ")
}

/// The product of `factors` as a count of elements, or a [`Error::TooLarge`] naming
/// them when it does not fit in memory at all.
pub fn elements(what: &str, factors: &[Size]) -> Result<usize> {
    let mut n: u128 = 1;
    for Size(_, v) in factors {
        n = n.saturating_mul(*v as u128);
    }
    if n > usize::MAX as u128 / 8 {
        return Err(Error::TooLarge {
            what: format!("{what} ({})", describe(factors)),
            bytes: n.saturating_mul(8),
            limit: "more than any machine can address".into(),
        });
    }
    Ok(n as usize)
}

/// Checks the dimension `field` of a model against [`MAX_DIM`].
pub fn check_dim(field: &str, n: usize) -> Result<()> {
    if n > MAX_DIM {
        return Err(Error::model(
            field,
            format!("dimension {n} is beyond the limit of {MAX_DIM}"),
        ));
    }
    Ok(())
}

/// Memory available to this process in bytes: `MemAvailable` (Linux), lowered by
/// `KESTREL_MAX_MEMORY` when set. `None` when unknown (no limit is then applied
/// beyond the allocator's own).
pub fn available_memory() -> Option<u128> {
    let env = std::env::var("KESTREL_MAX_MEMORY")
        .ok()
        .and_then(|v| v.trim().parse::<u128>().ok());
    let sys = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u128>().ok())
            .map(|kb| kb * 1024)
    });
    match (env, sys) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Checks that `bytes` (everything a job is about to allocate) fits in the memory
/// available; `what` names the job and its sizes in the message.
pub fn check_bytes(what: &str, bytes: u128) -> Result<()> {
    if bytes > isize::MAX as u128 {
        return Err(Error::TooLarge {
            what: what.to_string(),
            bytes,
            limit: "more than any machine can address".into(),
        });
    }
    if let Some(avail) = available_memory() {
        if bytes > avail {
            return Err(Error::TooLarge {
                what: what.to_string(),
                bytes,
                limit: format!(
                    "more than the {:.1} GB of memory available",
                    avail as f64 / 1e9
                ),
            });
        }
    }
    Ok(())
}

/// Space free for this process on the file system that holds `dir` (`statvfs`), if
/// known.
pub fn free_disk(dir: &std::path::Path) -> Option<u128> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a NUL-terminated path and `st` a zeroed statvfs that the call
        // fills.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some(st.f_bavail as u128 * st.f_frsize as u128)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Checks, before writing, that an output of `bytes` fits in the free space of the file
/// system it goes to (a streamed output whose size comes from input).
pub fn check_disk(output: &std::path::Path, bytes: u128) -> Result<()> {
    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if let Some(free) = free_disk(dir) {
        if bytes > free {
            return Err(Error::TooLarge {
                what: output.display().to_string(),
                bytes,
                limit: format!(
                    "more than the {:.1} GB free on its file system",
                    free as f64 / 1e9
                ),
            });
        }
    }
    Ok(())
}

/// Bytes of `factors` elements of `elem` bytes each, checked against the available
/// memory; returns the element count.
pub fn check(what: &str, factors: &[Size], elem: usize) -> Result<usize> {
    let n = elements(what, factors)?;
    check_bytes(
        &format!("{what} ({})", describe(factors)),
        n as u128 * elem as u128,
    )?;
    Ok(n)
}

/// A number as an error message quotes it: as typed when short, in scientific notation
/// with 6 digits when long (never 300 digits of a huge float).
pub fn short(v: f64) -> String {
    let plain = format!("{v}");
    let sci = format!("{v:e}");
    if plain.len() <= 16 {
        plain
    } else if sci.len() <= 14 {
        sci
    } else {
        format!("{v:.6e}")
    }
}

/// One end of an allowed range: included (`In`) or excluded (`Ex`).
#[derive(Clone, Copy, Debug)]
pub enum End {
    /// The end itself is allowed.
    In(f64),
    /// Values up to the end, not the end itself.
    Ex(f64),
}

impl End {
    fn show(self, left: bool) -> String {
        match (self, left) {
            (End::In(v), true) => format!("[{}", short(v)),
            (End::Ex(v), true) => format!("({}", short(v)),
            (End::In(v), false) => format!("{}]", short(v)),
            (End::Ex(v), false) => format!("{})", short(v)),
        }
    }
}

/// The one range check of numeric options and model parameters: `v` must be a number
/// in the range `lo .. hi` (NaN never is), else an input error (exit status 2) naming
/// `name`, the range and the value quoted short. The ranges are chosen so that nothing
/// derived from the value (`c^p`, an amplitude `10^(dB/20)` in f32, a sampling range
/// `2A`) overflows, wraps or silently turns a feature off.
pub fn range(name: &str, v: f64, lo: End, hi: End) -> Result<f64> {
    let above = match lo {
        End::In(l) => v >= l,
        End::Ex(l) => v > l,
    };
    let below = match hi {
        End::In(h) => v <= h,
        End::Ex(h) => v < h,
    };
    if above && below {
        return Ok(v);
    }
    Err(Error::input(format!(
        "{name} must lie in {}, {}, got {}",
        lo.show(true),
        hi.show(false),
        short(v)
    )))
}

/// [`range`] for a count (particles, a radius in pixels, frames): `lo ..= hi`.
pub fn count(name: &str, v: u64, lo: u64, hi: u64) -> Result<usize> {
    if v < lo && hi == u64::MAX {
        // No upper bound worth naming: the wording of the other entry points.
        return Err(Error::input(format!(
            "{name} must be at least {lo} (got {v})"
        )));
    }
    if v < lo || v > hi || usize::try_from(v).is_err() {
        return Err(Error::input(format!(
            "{name} must be at least {lo} and at most {hi}, got {v}"
        )));
    }
    Ok(v as usize)
}

/// Bounds the work of a job before it starts: the product of `factors` (elementary
/// operations: cell updates, comparisons, proposals) must stay within `budget`, else an
/// input error naming the job, its factors and `advice` (what to change).
pub fn work(what: &str, factors: &[Size], budget: u128, advice: &str) -> Result<()> {
    let mut n: u128 = 1;
    for Size(_, v) in factors {
        n = n.saturating_mul(*v as u128);
    }
    if n > budget {
        return Err(Error::input(format!(
            "{what} would take about {:.1e} operations ({}), more than the limit of {:.0e}: {advice}",
            n as f64,
            describe(factors),
            budget as f64
        )));
    }
    Ok(())
}

/// A vector of `n` copies of `value`, allocated with `try_reserve`: an allocator
/// refusal is a [`Error::TooLarge`], not an abort.
pub fn filled<T: Clone>(what: &str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::TooLarge {
        what: what.to_string(),
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
        limit: "more than the allocator could give".into(),
    })?;
    v.resize(n, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_sizes_are_errors_not_wrapped() {
        let e = elements("x", &[Size("tracks", 1 << 32), Size("steps", 1 << 32)]).unwrap_err();
        assert!(e.to_string().contains("would need"), "{e}");
        let e = elements(
            "x",
            &[Size("tracks", usize::MAX), Size("steps", usize::MAX)],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tracks") && e.contains("GB"), "{e}");
        assert_eq!(elements("x", &[Size("a", 3), Size("b", 5)]).unwrap(), 15);
    }

    #[test]
    fn more_than_the_memory_is_refused_before_allocating() {
        let e = check(
            "simulate",
            &[Size("tracks", 1_000_000_000_000), Size("steps", 10)],
            8,
        )
        .unwrap_err();
        assert!(e.is_bad_input());
        let msg = e.to_string();
        assert!(msg.contains("would need 80000 GB"), "{msg}");
        assert!(check("small", &[Size("tracks", 10)], 8).is_ok());
    }

    #[test]
    fn an_output_beyond_the_free_disk_is_refused() {
        let dir = std::env::temp_dir();
        let free = free_disk(&dir).expect("statvfs of the temporary directory");
        let out = dir.join("o.npy");
        assert!(check_disk(&out, free / 2).is_ok());
        let e = check_disk(&out, free + (1 << 40)).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("free on its file system"), "{e}");
    }

    #[test]
    fn ranges_quote_values_short_and_refuse_nan() {
        assert_eq!(range("x", 0.5, End::Ex(0.0), End::In(1.0)).unwrap(), 0.5);
        let e = range("--c", 1e300, End::Ex(0.0), End::In(1e100))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--c must lie in (0, 1e100], got 1e300");
        assert_eq!(short(1.0 / 3.0 * 1e300), "3.333333e299");
        assert_eq!(short(-0.25), "-0.25");
        assert!(range("x", f64::NAN, End::In(0.0), End::In(1.0)).is_err());
        assert!(range("x", 0.0, End::Ex(0.0), End::In(1.0)).is_err());
        assert!(count("--nms", 5, 0, 4).unwrap_err().is_bad_input());
        let e = work(
            "w",
            &[Size("a", 1 << 40), Size("b", 1 << 40)],
            1 << 30,
            "less",
        );
        assert!(e.unwrap_err().to_string().contains("less"));
    }

    #[test]
    fn dimensions_are_bounded() {
        assert!(check_dim("dims", MAX_DIM).is_ok());
        assert!(check_dim("dims", MAX_DIM + 1).is_err());
    }
}
