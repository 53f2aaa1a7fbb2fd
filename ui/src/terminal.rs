//! The terminal, restored exactly once: raw mode, alternate screen, mouse capture and
//! bracketed paste are undone on quit, on error (the guard's `Drop`), on every catchable
//! signal that would end the process ([`ENDING`]: INT, TERM, HUP, QUIT, USR1, USR2, ALRM, …:
//! a flag the event loop polls, so it leaves through the same path and finishes any
//! recording), and on a panic in any thread (a hook that restores first, lets the previous
//! hook print the message on the normal screen, then raises the same flag so the process
//! ends instead of drawing on).
//!
//! The signal path is the process's one ([`install_signals`], [`caught`]): `record` uses it
//! too, to finish its file on Ctrl-C. The exit status after a signal is 128 + its number
//! (130 for INT, 143 for TERM; [`exit_status`]), 101 after a panic.
//! Output goes through a buffered writer and every frame is one synchronized update, so
//! nothing flickers in tmux or over SSH.

use std::io::{self, BufWriter, Stdout, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, BeginSynchronizedUpdate, EndSynchronizedUpdate,
    EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute, queue};
use ratatui::Terminal;

/// The backend the dashboard draws to.
pub type Term = Terminal<CrosstermBackend<BufWriter<Stdout>>>;

/// Set while the terminal is in dashboard mode; cleared by the one restore that runs.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The catchable signals whose default action ends the process (SIGPIPE stays ignored, as
/// Rust sets it; KILL and STOP cannot be caught; SEGV, ILL, FPE and BUS are faults).
pub const ENDING: &[i32] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGPWR,
    libc::SIGIO,
    libc::SIGSTKFLT,
];

/// What [`caught`] says after a panic in any thread.
pub const PANICKED: i32 = -1;

/// The first signal caught (0: none; [`PANICKED`] as usize::MAX).
fn caught_cell() -> &'static Arc<AtomicUsize> {
    static CELL: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    CELL.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// Armed by [`second_signal_ends`]: a further signal then takes its default action.
fn second_cell() -> &'static Arc<AtomicBool> {
    static CELL: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    CELL.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Catch every signal of [`ENDING`] into a flag ([`caught`]) and install the panic hook
/// (restore the terminal, print, raise the flag). Idempotent.
pub fn install_signals() -> io::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for &sig in ENDING {
            // Order matters: the default action is checked before this signal arms it.
            // (signal-hook emulates the default of the signals it knows; PWR and STKFLT are
            // only caught.)
            let second = match signal_hook::low_level::signal_name(sig) {
                Some(_) => {
                    signal_hook::flag::register_conditional_default(sig, second_cell().clone())
                        .map(|_| ())
                }
                None => Ok(()),
            };
            second
                .and_then(|()| {
                    let cell = caught_cell().clone();
                    // SAFETY: the action only does atomic operations (async-signal-safe).
                    unsafe {
                        signal_hook::low_level::register(sig, move || {
                            let _ = cell.compare_exchange(
                                0,
                                sig as usize,
                                Ordering::SeqCst,
                                Ordering::SeqCst,
                            );
                        })
                    }
                })
                .map_err(|e| format!("catching signal {sig}: {e}"))?;
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
            let _ =
                caught_cell().compare_exchange(0, usize::MAX, Ordering::SeqCst, Ordering::SeqCst);
        }));
        Ok(())
    })
    .clone()
    .map_err(io::Error::other)
}

/// The first signal caught since [`install_signals`] (its number), [`PANICKED`] after a
/// panic in any thread, `None` if neither.
pub fn caught() -> Option<i32> {
    match caught_cell().load(Ordering::SeqCst) {
        0 => None,
        usize::MAX => Some(PANICKED),
        s => Some(s as i32),
    }
}

/// From now on a second signal ends the process at once (its default action): for a
/// command that is finishing its work after the first (`record` writing its footer), so a
/// user who presses Ctrl-C twice is obeyed. The dashboard never arms it: it must restore
/// the terminal, which only its own loop does.
pub fn second_signal_ends() {
    second_cell().store(true, Ordering::SeqCst);
}

/// The exit status after [`caught`] said `c`: 128 + the signal's number, 101 after a panic.
pub fn exit_status(c: i32) -> u8 {
    if c == PANICKED {
        101
    } else {
        (128 + c).clamp(0, 255) as u8
    }
}

/// Undo raw mode, the alternate screen and mouse capture, once (later calls do nothing).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(
            out,
            EndSynchronizedUpdate,
            DisableBracketedPaste,
            DisableMouseCapture,
            LeaveAlternateScreen,
            cursor::Show
        );
        let _ = disable_raw_mode();
        let _ = out.flush();
    }
}

/// Owns dashboard mode; dropping it restores the terminal.
pub struct Guard {
    /// The terminal.
    pub term: Term,
}

impl Guard {
    /// Enter dashboard mode (after installing the signal flags and the panic hook).
    pub fn enter() -> io::Result<Guard> {
        install_signals()?;
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = BufWriter::with_capacity(1 << 16, io::stdout());
        execute!(
            out,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste,
            cursor::Hide
        )?;
        let term = Terminal::new(CrosstermBackend::new(out))?;
        Ok(Guard { term })
    }

    /// Whether the dashboard must end now: a signal was caught or a thread panicked.
    pub fn must_end(&self) -> bool {
        caught().is_some()
    }

    /// Draw one frame as a single synchronized update, flushed once.
    pub fn draw(&mut self, f: impl FnOnce(&mut ratatui::Frame)) -> io::Result<()> {
        queue!(self.term.backend_mut(), BeginSynchronizedUpdate)?;
        self.term.draw(f)?;
        queue!(self.term.backend_mut(), EndSynchronizedUpdate)?;
        self.term.backend_mut().flush()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.term.backend_mut().flush();
        restore();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_any_thread_raises_the_flag_that_ends_the_dashboard() {
        install_signals().unwrap();
        assert_eq!(caught(), None);
        let _ = std::thread::spawn(|| panic!("a producer panics")).join();
        assert_eq!(caught(), Some(PANICKED));
        assert_eq!(exit_status(PANICKED), 101);
        assert_eq!(exit_status(libc::SIGINT), 130);
        assert_eq!(exit_status(libc::SIGTERM), 143);
    }
}
