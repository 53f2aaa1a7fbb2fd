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
//! (130 for INT, 143 for TERM; [`exit_status`]), 101 after a panic. The faults and aborts
//! ([`FATAL`]: SEGV, BUS, ILL, FPE, ABRT) cannot take that path: [`install_fatal`]'s handler
//! restores the terminal with async-signal-safe calls, names the signal, and lets it end the
//! process.
//! Output goes through a buffered writer and every frame is one synchronized update, so
//! nothing flickers in tmux or over SSH.

use std::io::{self, BufWriter, Stdout, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
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

/// The faults and aborts that end the process with no chance to run its own code after them
/// (SEGV, BUS, ILL, FPE, ABRT): a Vulkan driver that crashes compiling a pipeline, an abort
/// inside a library. [`install_fatal`] restores the terminal and names the signal before the
/// process dies by it.
pub const FATAL: &[i32] = &[
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// The terminal's modes as they were before raw mode, for the fatal-signal handler (it cannot
/// take crossterm's lock): the tty's descriptor (-1: none saved) and its termios, written
/// once before raw mode is entered.
static SAVED_FD: AtomicI32 = AtomicI32::new(-1);
static SAVED_TERMIOS: OnceLock<libc::termios> = OnceLock::new();
/// The actions [`FATAL`]'s signals had before [`install_fatal`] (Rust's own stack-overflow
/// reporter for SEGV and BUS), in [`FATAL`]'s order.
static PREV_FATAL: OnceLock<Vec<libc::sigaction>> = OnceLock::new();
/// Set by the first fatal signal's message: a second one (an abort after a stack overflow
/// was reported) prints nothing more.
static FATAL_SAID: AtomicBool = AtomicBool::new(false);

/// What the dashboard's restore writes, as one constant (crossterm's sequences for
/// `EndSynchronizedUpdate`, `DisableBracketedPaste`, `DisableMouseCapture`,
/// `LeaveAlternateScreen`, `cursor::Show`), for a handler that may only `write`.
const RESTORE_SEQ: &[u8] =
    b"\x1b[?2026l\x1b[?2004l\x1b[?1006l\x1b[?1015l\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b[?1049l\x1b[?25h";

/// Save the tty's modes for [`install_fatal`]'s handler: the descriptor crossterm's raw mode
/// changes (stdin when it is a terminal, else /dev/tty, kept open).
fn save_tty_modes() {
    if SAVED_TERMIOS.get().is_some() {
        return;
    }
    // SAFETY: isatty/open/tcgetattr on a descriptor we own or stdin, into a zeroed termios.
    unsafe {
        let fd = if libc::isatty(0) == 1 {
            0
        } else {
            libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC)
        };
        if fd < 0 {
            return;
        }
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) == 0 && SAVED_TERMIOS.set(t).is_ok() {
            SAVED_FD.store(fd, Ordering::SeqCst);
        } else if fd != 0 {
            libc::close(fd);
        }
    }
}

/// `write` all of `b` to `fd`, retrying short writes (async-signal-safe).
fn write_all_raw(fd: i32, mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: write(2) from a live slice.
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

/// The fatal signal's name.
fn fatal_name(sig: i32) -> &'static [u8] {
    match sig {
        libc::SIGSEGV => b"SIGSEGV",
        libc::SIGBUS => b"SIGBUS",
        libc::SIGILL => b"SIGILL",
        libc::SIGFPE => b"SIGFPE",
        libc::SIGABRT => b"SIGABRT",
        _ => b"?",
    }
}

/// The line a fatal signal prints on stderr, into `buf` (no allocation: a signal handler's).
/// `sender`: the pid of the process that sent it, where one did (`kill`), else it is the
/// process's own fault or abort.
fn fatal_message(buf: &mut [u8; 256], sig: i32, sender: Option<i32>, restored: bool) -> usize {
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    put(b"\nbaro-top: fatal signal ");
    put(fatal_name(sig));
    match sender {
        Some(pid) => {
            put(b" sent by pid ");
            let mut digits = [0u8; 12];
            let mut i = digits.len();
            let mut v = pid.unsigned_abs();
            loop {
                i -= 1;
                digits[i] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            put(&digits[i..]);
        }
        None if sig == libc::SIGABRT => put(b" (an abort in baro-top or a library it calls)"),
        None => put(
            b" (a crash: in the Vulkan driver if it came during a GPU call such as compiling a pipeline, else in baro-top)",
        ),
    }
    if restored {
        put(b"; the terminal was restored");
    }
    put(b"\n");
    n
}

extern "C" fn on_fatal(sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // Only async-signal-safe calls below: atomics, write, tcsetattr, sigaction, raise.
    let restored = ACTIVE.swap(false, Ordering::SeqCst);
    if restored {
        write_all_raw(1, RESTORE_SEQ);
        let fd = SAVED_FD.load(Ordering::SeqCst);
        if let (true, Some(t)) = (fd >= 0, SAVED_TERMIOS.get()) {
            // SAFETY: the saved modes of the descriptor raw mode changed.
            unsafe { libc::tcsetattr(fd, libc::TCSANOW, t) };
        }
    }
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let (code, pid) = unsafe { ((*info).si_code, (*info).si_pid()) };
    // si_code <= 0: sent by a process (kill, tgkill, sigqueue, abort's raise), not a fault.
    let sent = code <= 0;
    if !FATAL_SAID.swap(true, Ordering::SeqCst) {
        let mut buf = [0u8; 256];
        let sender = (sent && pid != 0 && pid != std::process::id() as i32).then_some(pid);
        let n = fatal_message(&mut buf, sig, sender, restored);
        write_all_raw(2, &buf[..n]);
    }
    let prev = FATAL
        .iter()
        .position(|&s| s == sig)
        .and_then(|i| PREV_FATAL.get().and_then(|p| p.get(i)));
    // SAFETY: sigaction/raise with a valid action.
    unsafe {
        match prev {
            // A fault with a previous handler (Rust's stack-overflow reporter): put it back and
            // return, so the faulting instruction runs again and that handler sees it.
            Some(p) if !sent && p.sa_sigaction > libc::SIG_IGN => {
                libc::sigaction(sig, p, std::ptr::null_mut());
            }
            // Otherwise die by the signal: its default action, raised now and delivered when
            // this handler returns (it is blocked while the handler runs).
            _ => {
                let mut d: libc::sigaction = std::mem::zeroed();
                d.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &d, std::ptr::null_mut());
                libc::raise(sig);
            }
        }
    }
}

/// Catch [`FATAL`]'s signals for the whole process: restore the terminal if the dashboard has
/// it, print which signal and whether it was a fault or sent by another process, then die by
/// the same signal (exit status 128 + it in a shell; a fault still dumps core where the
/// system does, and Rust's stack-overflow message still prints). Idempotent.
pub fn install_fatal() -> io::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut prev = Vec::with_capacity(FATAL.len());
        for &sig in FATAL {
            // SAFETY: a zeroed sigaction read back from the kernel.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: query only.
            if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
                return Err(format!(
                    "reading signal {sig}'s action: {}",
                    io::Error::last_os_error()
                ));
            }
            prev.push(old);
        }
        let _ = PREV_FATAL.set(prev);
        for &sig in FATAL {
            // SAFETY: an SA_SIGINFO handler that only makes async-signal-safe calls, on the
            // alternate stack where the thread has one (a stack overflow's SEGV).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_fatal
                    as extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void)
                    as libc::sighandler_t;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(format!(
                        "catching signal {sig}: {}",
                        io::Error::last_os_error()
                    ));
                }
            }
        }
        Ok(())
    })
    .clone()
    .map_err(io::Error::other)
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
        install_fatal()?;
        save_tty_modes();
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
    fn the_fatal_handlers_restore_sequence_is_what_crossterms_restore_writes() {
        let mut v: Vec<u8> = Vec::new();
        execute!(
            v,
            EndSynchronizedUpdate,
            DisableBracketedPaste,
            DisableMouseCapture,
            LeaveAlternateScreen,
            cursor::Show
        )
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&v),
            String::from_utf8_lossy(RESTORE_SEQ)
        );
    }

    #[test]
    fn a_fatal_signals_message_names_it_and_its_sender_or_its_cause() {
        let mut buf = [0u8; 256];
        let n = fatal_message(&mut buf, libc::SIGSEGV, Some(4242), true);
        assert_eq!(
            std::str::from_utf8(&buf[..n]).unwrap(),
            "\nbaro-top: fatal signal SIGSEGV sent by pid 4242; the terminal was restored\n"
        );
        let n = fatal_message(&mut buf, libc::SIGBUS, None, false);
        let m = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(
            m.starts_with("\nbaro-top: fatal signal SIGBUS (a crash: in the Vulkan driver"),
            "{m}"
        );
        assert!(!m.contains("restored"), "{m}");
        let n = fatal_message(&mut buf, libc::SIGABRT, None, false);
        assert!(std::str::from_utf8(&buf[..n])
            .unwrap()
            .contains("SIGABRT (an abort"));
    }

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
