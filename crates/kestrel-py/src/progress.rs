//! `progress=True`: a bar on stderr with the fraction done and the time left.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::Write;

/// Standard error as a line that redraws itself with a carriage return, as tqdm does:
/// shown in terminals, notebooks and logs alike (indicatif's own stderr target hides
/// itself when stderr is not a terminal, and a bar asked for should show).
#[derive(Debug)]
struct Stderr;

impl TermLike for Stderr {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        write!(std::io::stderr(), "\r{s}")
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        write!(std::io::stderr(), "{s}")
    }
    fn clear_line(&self) -> std::io::Result<()> {
        write!(std::io::stderr(), "\r")
    }
    fn flush(&self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// A progress bar over `len` units of work named `unit`, or nothing when not asked for.
pub struct Bar(Option<ProgressBar>);

impl Bar {
    pub fn new(on: bool, what: &str, len: u64, unit: &str) -> Bar {
        if !on {
            return Bar(None);
        }
        let b = ProgressBar::with_draw_target(
            Some(len),
            ProgressDrawTarget::term_like_with_hz(Box::new(Stderr), 4),
        );
        let style = ProgressStyle::with_template(&format!(
            "{{msg}} {{wide_bar}} {{pos}}/{{len}} {unit} ({{percent}}%) [{{elapsed_precise}} < {{eta_precise}}]"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        b.set_style(style);
        b.set_message(what.to_string());
        Bar(Some(b))
    }

    pub fn on(&self) -> bool {
        self.0.is_some()
    }

    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish();
            eprintln!();
        }
    }
}

/// Splits `n` items into about 100 chunks of at least `min` items (the unit of work
/// between two updates of the bar): `(start, len)` pairs.
pub fn chunks(n: usize, min: usize) -> Vec<(usize, usize)> {
    let size = n.div_ceil(100).max(min).max(1);
    (0..n).step_by(size).map(|s| (s, size.min(n - s))).collect()
}
