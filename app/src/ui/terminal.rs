//! The terminal, restored exactly once: raw mode, alternate screen and mouse capture are
//! undone on quit, on error (the guard's `Drop`), on SIGTERM/SIGHUP (a flag the event loop
//! polls, so it leaves through the same path), and on panic (a hook that restores first and
//! only then lets the previous hook print the message, so it lands on the normal screen).
//! Output goes through a buffered writer and every frame is one synchronized update, so
//! nothing flickers in tmux or over SSH.

use std::io::{self, BufWriter, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
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

/// Undo raw mode, the alternate screen and mouse capture, once (later calls do nothing).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(
            out,
            EndSynchronizedUpdate,
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
    /// Set by SIGTERM or SIGHUP.
    pub signalled: Arc<AtomicBool>,
    /// The terminal.
    pub term: Term,
}

impl Guard {
    /// Enter dashboard mode (and install the panic hook and signal flags).
    pub fn enter() -> io::Result<Guard> {
        let signalled = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
            signal_hook::flag::register(sig, signalled.clone())?;
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = BufWriter::with_capacity(1 << 16, io::stdout());
        execute!(out, EnterAlternateScreen, EnableMouseCapture, cursor::Hide)?;
        let term = Terminal::new(CrosstermBackend::new(out))?;
        Ok(Guard { signalled, term })
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
