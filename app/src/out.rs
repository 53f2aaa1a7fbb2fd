//! Everything the binary prints goes through here.
//!
//! The rule for a closed pipe, on stdout or stderr: the reader has stopped reading, which is a
//! normal way to end (`baro-top gate | head -1`). The process then exits at once with status 0,
//! prints nothing more, and removes the temporary files it was writing (the writers in
//! [`crate::files`] list them here: [`track_temporary`]), so no subcommand panics, reports "Broken pipe" or leaves a `.partial`
//! behind. Other write errors on stdout are returned to the caller; on stderr (diagnostics,
//! best effort) they are ignored.
//!
//! A command whose exit status is a verdict (`gate`: 0 only if every pass is clean) calls
//! [`verdict_outlives_the_reader`] first: there a closed pipe only silences the output, and the
//! command runs on to its verdict and exits with it. Exiting 0 at the first closed pipe would
//! make `set -o pipefail; baro-top gate | head -1` pass a gate that refuses (and cut a
//! `record -o FILE` whose diagnostics' reader went: the quiet exit removes the file).
//!
//! Use [`outln!`] for stdout and [`note!`] for stderr instead of `println!` /
//! `eprintln!` (which panic on a closed pipe), and [`Stdout`] where a `Write` is needed.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Set by [`verdict_outlives_the_reader`]: a closed pipe silences the output instead of
/// ending the process.
static VERDICT: AtomicBool = AtomicBool::new(false);

/// This command's exit status is a verdict: from here on, a closed pipe (stdout or stderr)
/// silences what would be printed there, and the command runs on to its verdict.
pub fn verdict_outlives_the_reader() {
    VERDICT.store(true, Ordering::Relaxed);
}

/// Temporary files being written now, removed by a quiet exit ([`reader_gone`],
/// [`device_abandoned`]): what must not outlive the process.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// `path` is a temporary file being written: a quiet exit removes it.
pub fn track_temporary(path: &Path) {
    temporaries().push(path.to_path_buf());
}

/// `path` was renamed into place or removed: a quiet exit leaves it alone.
pub fn untrack_temporary(path: &Path) {
    temporaries().retain(|p| p != path);
}

/// Remove every temporary file still being written (the process is about to exit).
fn remove_temporaries() {
    for p in temporaries().drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

/// Exit now, quietly, with status 0: the reader closed the pipe.
///
/// `_exit`, not `std::process::exit`: other threads may be inside the Vulkan driver (the
/// session's decode thread), and running the C library's exit handlers (the driver's static
/// destructors) under them crashes the process. What must not outlive us, the temporary
/// files, is removed first; stdout has no reader to flush to.
pub fn reader_gone() -> ! {
    remove_temporaries();
    // SAFETY: _exit only ends the process; it touches no Rust state.
    unsafe { libc::_exit(0) }
}

/// Exit now with `code` after a device missed its watchdog: flush what was printed, remove
/// temporary files, and leave with `_exit`, since the driver's exit handlers may wait for the
/// hung device (NVIDIA) or join pool threads still running the hung dispatch (lavapipe).
pub fn device_abandoned(code: u8) -> ! {
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    remove_temporaries();
    // SAFETY: _exit only ends the process; it touches no Rust state.
    unsafe { libc::_exit(code as i32) }
}

/// Whether `e` (or an error it wraps) is a write into a pipe whose reader has gone.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io =
            c.downcast_ref::<io::Error>().or_else(|| match c
                .downcast_ref::<baro_telemetry::recording::RecordingError>(
            ) {
                Some(baro_telemetry::recording::RecordingError::Io(e)) => Some(e),
                _ => None,
            });
        io.is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// A write's result, where a closed pipe ends the process quietly ([`reader_gone`]) or, for
/// a verdict ([`verdict_outlives_the_reader`]), counts as written (`silenced`: what the
/// write would have returned) so that the command runs on.
fn check<T>(r: io::Result<T>, silenced: T) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            if VERDICT.load(Ordering::Relaxed) {
                Ok(silenced)
            } else {
                reader_gone()
            }
        }
        other => other,
    }
}

/// stdout as a `Write` that ends the process quietly when the reader has gone.
pub struct Stdout(io::StdoutLock<'static>);

impl Stdout {
    /// Lock stdout.
    pub fn lock() -> Self {
        Stdout(io::stdout().lock())
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        check(self.0.write(buf), buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        check(self.0.write_all(buf), ())
    }
    fn flush(&mut self) -> io::Result<()> {
        check(self.0.flush(), ())
    }
}

/// Write formatted text to stdout (see the module doc for a closed pipe). The text is
/// [`clean`]ed, as on stderr: `outln!` prints human-readable lines that quote strings from
/// files (a GGUF's name and tensor names, device names); bytes that are data (a CSV, a
/// recording, generated text) go through [`Stdout`] or [`TerminalSafe`] instead.
pub fn stdout_fmt(args: std::fmt::Arguments<'_>) -> io::Result<()> {
    let text = clean(&args.to_string());
    let mut o = Stdout::lock();
    // Named: "No space left on device" alone does not say which file (`>/dev/full`).
    o.write_all(text.as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("writing to stdout: {e}")))
}

/// A writer of raw bytes from a file (a vocabulary's pieces: generated text, `tokenize`)
/// that, when its output is a terminal, shows control bytes as `\xNN` (C0, DEL, and C1 as
/// UTF-8 `c2 80..9f`) so that no escape sequence reaches the terminal; `\n` and `\t` pass.
/// Into a pipe or a file the bytes pass unchanged.
pub struct TerminalSafe<W: Write> {
    out: W,
    tty: bool,
    /// A trailing `0xc2` held until the next byte says whether it starts a C1 control.
    held: bool,
}

impl<W: Write> TerminalSafe<W> {
    /// Wrap `out`; `tty`: whether it is a terminal.
    pub fn new(out: W, tty: bool) -> Self {
        TerminalSafe {
            out,
            tty,
            held: false,
        }
    }

    fn escaped(&mut self, b: u8) -> io::Result<()> {
        write!(self.out, "\\x{b:02x}")
    }
}

impl<W: Write> Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.tty {
            return self.out.write(buf);
        }
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            if self.held {
                self.held = false;
                if (0x80..=0x9f).contains(&b) {
                    self.escaped(0xc2)?;
                    self.escaped(b)?;
                } else {
                    self.out.write_all(&[0xc2])?;
                    if b == 0xc2 {
                        self.held = true;
                    } else if is_control(b) {
                        self.escaped(b)?;
                    } else {
                        self.out.write_all(&[b])?;
                    }
                }
                start = i + 1;
                continue;
            }
            if b == 0xc2 || is_control(b) {
                self.out.write_all(&buf[start..i])?;
                if b == 0xc2 {
                    self.held = true;
                } else {
                    self.escaped(b)?;
                }
                start = i + 1;
            }
        }
        self.out.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> Drop for TerminalSafe<W> {
    fn drop(&mut self) {
        if self.held {
            let _ = self.out.write_all(&[0xc2]);
        }
        let _ = self.out.flush();
    }
}

fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f
}

/// Write formatted text to stderr: a closed pipe ends the process quietly, other errors are
/// ignored (diagnostics must never turn into a failure of their own). The text is
/// [`clean`]ed: diagnostics quote file names, recordings' device and model strings and
/// error messages, any of which may carry escape sequences; none reaches the terminal.
pub fn stderr_fmt(args: std::fmt::Arguments<'_>) {
    let text = clean(&args.to_string());
    let mut e = io::stderr().lock();
    let _ = check(e.write_all(text.as_bytes()).and_then(|()| e.flush()), ());
}

/// `s` with escape sequences and control characters removed (as the dashboard draws text
/// from files: [`crate::ui::text::sanitize`]), line breaks and a leading `\r` kept.
pub fn clean(s: &str) -> String {
    let (cr, body) = match s.strip_prefix('\r') {
        Some(rest) => ("\r", rest),
        None => ("", s),
    };
    let mut out = String::with_capacity(s.len());
    out.push_str(cr);
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&crate::ui::text::sanitize(line, " "));
    }
    out
}

/// Whether stderr is a terminal (`\r` progress lines only then).
pub fn stderr_is_terminal() -> bool {
    io::stderr().is_terminal()
}

/// `println!` to stdout; evaluates to `std::io::Result<()>`.
macro_rules! outln {
    () => { $crate::out::stdout_fmt(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::stdout_fmt(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprintln!` that never panics (see [`stderr_fmt`]).
macro_rules! note {
    () => { $crate::out::stderr_fmt(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::stderr_fmt(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics (see [`stderr_fmt`]).
macro_rules! note_raw {
    ($($t:tt)*) => { $crate::out::stderr_fmt(format_args!($($t)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(tty: bool, chunks: &[&[u8]]) -> Vec<u8> {
        let mut v = vec![];
        {
            let mut w = TerminalSafe::new(&mut v, tty);
            for c in chunks {
                w.write_all(c).expect("write");
            }
        }
        v
    }

    #[test]
    fn terminal_safe_shows_c0_and_c1_controls_on_a_terminal_even_split_across_writes() {
        let evil: &[&[u8]] = &[b"a\x1b]0;t\x07b\xc2", b"\x9b2J\tc\n\xc2\xa9"];
        assert_eq!(
            through(true, evil),
            b"a\\x1b]0;t\\x07b\\xc2\\x9b2J\tc\n\xc2\xa9".to_vec()
        );
    }

    #[test]
    fn terminal_safe_passes_every_byte_into_a_pipe() {
        let evil: &[&[u8]] = &[b"a\x1b]0;t\x07b\xc2", b"\x9b2J"];
        assert_eq!(through(false, evil), evil.concat());
    }
}
