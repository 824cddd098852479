//! The subcommands, one file each, and what they share: device choice, precision,
//! progress display, exit statuses.

pub mod bench;
pub mod demo;
mod demo_tracking;
pub mod estimate;
pub mod eval;
pub mod hmm;
pub mod loglik;
mod nonlinear;
pub mod pf;
mod plot;
pub mod retrodict;
pub mod simulate;
pub mod simulate_frames;
pub mod tbd;
pub mod tbd_eval;
pub mod track;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kestrel::Device;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// A usage or input error found by the command line itself (exit status 2).
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// An error that exits with status 2.
pub fn bad(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// 2 for bad input or usage, 1 for anything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(k) = cause.downcast_ref::<kestrel::Error>() {
            return if k.is_bad_input() { 2 } else { 1 };
        }
        if cause.is::<BadInput>() {
            return 2;
        }
    }
    1
}

/// The error and its causes on one line, leaving out a cause whose text the message
/// already holds (library errors name their source themselves).
pub fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !msg.contains(&c) {
            if !msg.is_empty() {
                msg += ": ";
            }
            msg += &c;
        }
    }
    msg
}

/// Floating-point precision of a run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F64,
    F32,
}

impl Precision {
    /// The default of a device: f64 on the CPU, f32 on a GPU.
    pub fn default_for(device: Device) -> Precision {
        match device {
            Device::Cpu => Precision::F64,
            _ => Precision::F32,
        }
    }
}

/// Resolves `--device`: `auto` notes what it chose and why (a `device:` line after
/// success, or at once with `--verbose`).
pub fn choose_device(s: &str) -> anyhow::Result<Device> {
    if s == "auto" {
        let choice = Device::auto();
        let d = choice.device;
        match choice.why_not_gpu {
            Some(w) => note(format!("device: {d} (auto: no usable CUDA GPU: {w})")),
            None => note(format!("device: {d} (auto: a CUDA GPU is available)")),
        }
        return Ok(d);
    }
    // A GPU asked for by name and missing is a usage error of the command line (the
    // library reports it as an unavailable device, which a program may fall back from).
    Device::parse(s).map_err(|e| match e {
        kestrel::Error::DeviceUnavailable(why) => bad(format!("--device {s}: {why}")),
        other => other.into(),
    })
}

/// Loads a linear-Gaussian model file; a file of another family is refused with the
/// commands that read it (`kestrel::model::family`).
pub fn load_linear_model(path: &std::path::Path) -> anyhow::Result<kestrel::Model> {
    Ok(kestrel::model::load_model(path)?)
}

/// Loads a linear-Gaussian model file of any form, the time-varying one (per-step
/// matrices from an `.npz`) included; a nonlinear kind is refused as by
/// [`load_linear_model`].
pub fn load_any_linear_model(
    path: &std::path::Path,
) -> anyhow::Result<kestrel::model::LinearModel> {
    kestrel::model::load_linear_model(path).map_err(|e| {
        let msg = e.to_string();
        if msg.contains("for the particle filter") {
            anyhow::Error::new(e).context(format!("{msg}: run it with `kestrel pf`"))
        } else {
            e.into()
        }
    })
}

/// The measurements of `input` for `model` (read from the file at `model_path`): their
/// components checked against the model's, and a time-varying model's steps against theirs.
pub fn read_for_model<T: kestrel::Real>(
    input: &std::path::Path,
    model_path: &std::path::Path,
    model: &kestrel::model::LinearModel,
) -> anyhow::Result<kestrel::Measurements<T>> {
    let z: kestrel::Measurements<T> = kestrel::io::read_measurements(input)?;
    kestrel::io::check_measurement_dim(input, &z, model.ny())?;
    check_model_steps(
        model_path,
        model,
        &format!("{} has", input.display()),
        z.steps(),
    )?;
    Ok(z)
}

/// A time-varying model must have matrices for every step of the data: an error naming
/// the model file, its `.npz`, and both counts otherwise (`data` says who has the steps:
/// "Z.npy has", "--steps asks for").
pub fn check_model_steps(
    model_path: &std::path::Path,
    model: &kestrel::model::LinearModel,
    data: &str,
    steps: usize,
) -> anyhow::Result<()> {
    if let kestrel::model::LinearModel::Varying { model: m, file } = model {
        if m.len() < steps {
            return Err(bad(format!(
                "{}: the time-varying model's {} has matrices for {} (arrays F, Q, H, R of shape [{}, ..]), {data} {}",
                model_path.display(),
                file.display(),
                plural(m.len(), "step"),
                m.len(),
                plural(steps, "step")
            )));
        }
    }
    Ok(())
}

static VERBOSE: AtomicBool = AtomicBool::new(false);
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// `--verbose`: notes are printed as they come.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// A line for stderr that is not an error (the device chosen): printed after success,
/// so that a failure prints its `error:` line alone; at once with `--verbose`.
pub fn note(line: String) {
    if VERBOSE.load(Ordering::Relaxed) {
        errln!("{}", one_line(&line));
    } else {
        NOTES.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
}

/// Prints the notes held back and the library's warnings (`warning: ...`), after
/// success.
pub fn print_notes() {
    let notes = std::mem::take(&mut *NOTES.lock().unwrap_or_else(|p| p.into_inner()));
    for n in notes {
        errln!("{}", one_line(&n));
    }
    for w in kestrel::error::take_warnings() {
        errln!("warning: {}", one_line(&w));
    }
}

/// The longest error line printed, in characters (a path or a field is cut beyond it).
const MAX_LINE: usize = 600;

/// "1 track", "3 tracks": a count and its noun, in plain English (the library's).
pub use kestrel::data::plural;

/// The name a user types for an option's value (`gnn`, `f32`, `gaussian`): what the
/// command line prints back, never the Rust spelling.
pub fn value_name<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// `text` as one printable line: control characters escaped (`\r`, `\n`, `\0`,
/// `\xNN`), and cut to a few hundred characters.
pub fn one_line(text: &str) -> String {
    let text = &short_numbers(text);
    let mut out = String::with_capacity(text.len().min(MAX_LINE + 16));
    for (n, c) in text.chars().enumerate() {
        if n >= MAX_LINE {
            out += &format!("... ({} more characters)", text.chars().count() - n);
            break;
        }
        match c {
            '\n' => out += "\\n",
            '\r' => out += "\\r",
            '\t' => out += "\\t",
            '\0' => out += "\\0",
            c if c.is_control() => out += &format!("\\x{:02x}", c as u32),
            c => out.push(c),
        }
    }
    out
}

/// Every number in `text` written with more than 20 digits (a huge float printed in
/// full: 300 digits for 1e300) quoted short, as `kestrel::limits::short` writes values:
/// the net under every error line, whichever check wrote the number.
fn short_numbers(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                j += 1;
            }
            let digits = b[i..j].iter().filter(|c| c.is_ascii_digit()).count();
            if digits > 20 {
                if let Ok(v) = text[i..j].parse::<f64>() {
                    out += &kestrel::limits::short(v);
                    i = j;
                    continue;
                }
            }
            out += &text[i..j];
            i = j;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// A command-line parsing error as one `error:` line (clap's usage and tips left out),
/// exit status 2; `--help` and `--version` print as usual and exit 0.
pub fn usage_error(e: clap::Error, commands: &[String]) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            out!("{}", e.render());
            return std::process::ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            errln!(
                "error: no command given (one of {}; `kestrel --help` says more)",
                commands.join(", ")
            );
            return std::process::ExitCode::from(2);
        }
        _ => {}
    }
    // clap's message is its first paragraph (a list of missing arguments continues on
    // indented lines); the usage and tip paragraphs after it are left out.
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let msg = first.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    errln!("error: {}", one_line(msg));
    std::process::ExitCode::from(2)
}

/// `n` target-steps in `secs` seconds, as a rate.
pub fn rate(n: usize, secs: f64) -> String {
    format!("{:.3e} target-steps/s", n as f64 / secs.max(1e-12))
}

/// A progress display on stderr (a spinner with the phase, or a bar over tracks) that
/// appears only once the job has run for a second, and never when stderr is not a
/// terminal.
pub struct Progress {
    bar: ProgressBar,
    reveal: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

fn style(template: &str) -> ProgressStyle {
    // The templates are constants known to be valid.
    ProgressStyle::with_template(template)
        .expect("a valid progress template")
        .progress_chars("=> ")
}

impl Progress {
    /// Starts with a spinner showing `msg`.
    pub fn new(msg: &'static str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        bar.set_style(style("{spinner} {msg} {elapsed}"));
        bar.set_message(msg);
        let (tx, rx) = mpsc::channel::<()>();
        let shown = bar.clone();
        let handle = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(1)) == Err(mpsc::RecvTimeoutError::Timeout) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(100));
            }
        });
        Progress {
            bar,
            reveal: Some((tx, handle)),
        }
    }

    /// A phase without a count: a spinner and the elapsed time.
    pub fn phase(&self, msg: &'static str) {
        self.bar.set_style(style("{spinner} {msg} {elapsed}"));
        self.bar.set_message(msg);
    }

    /// A phase over `tracks` tracks, advanced with [`Progress::inc`].
    pub fn tracks(&self, msg: &'static str, tracks: usize) {
        self.count(msg, tracks, "tracks");
    }

    /// A phase over `len` units (`tracks`, `scans`, `frames`), advanced with
    /// [`Progress::inc`]: the fraction done, the time spent and the time left.
    pub fn count(&self, msg: &'static str, len: usize, unit: &str) {
        self.bar.set_style(style(&format!(
            "{{spinner}} {{msg}} [{{bar:32}}] {{pos}}/{{len}} {unit} ({{percent}}%)  {{elapsed}} < {{eta}}"
        )));
        self.bar.set_length(len as u64);
        self.bar.set_position(0);
        self.bar.set_message(msg);
    }

    pub fn inc(&self, n: usize) {
        self.bar.inc(n as u64);
    }

    /// Removes the display.
    pub fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if let Some((tx, handle)) = self.reveal.take() {
            drop(tx);
            let _ = handle.join();
        }
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.close();
    }
}
