//! The one event/action loop: telemetry in (ingested into the state), terminal events in
//! (mapped to actions through the keymap or the screen's geometry), a redraw only when
//! something changed, capped at `--fps`, and while frozen only for the header's `live N`.
//! Plus the headless path: with stdout not a terminal, one line per pass (like `top -b`).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_telemetry::Telemetry;
use crossbeam_channel::{select, Receiver};
use ratatui::crossterm::event::{
    self, Event, KeyCode, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use crate::action::{Action, Control};
use crate::keymap::Keymap;
use crate::layout::Layout;
use crate::panels::{flame, navigator, Ctx};
use crate::screen::{Hits, Screen};
use crate::state::{Data, Meta};
use crate::theme::Theme;
use crate::view::{wheel, PanelId, UiState};

/// Dashboard options.
pub struct Options {
    /// Layout (and key overrides).
    pub layout: Layout,
    /// Redraws per second at most.
    pub fps: u32,
    /// Theme (colour depth, glyphs).
    pub theme: Theme,
}

/// A new state for a layout.
pub fn new_state(meta: Meta, layout: &Layout) -> UiState {
    UiState::new(Data::new(meta), layout.panels())
}

/// Apply one terminal event. Returns whether anything changed.
pub fn handle_event(
    s: &mut UiState,
    keys: &Keymap,
    hits: &Hits,
    ev: &Event,
    ctl: &dyn Control,
) -> bool {
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release && s.view.prompt.is_some() => {
            prompt_key(s, k, ctl)
        }
        Event::Key(k) if k.kind != KeyEventKind::Release && s.view.help => {
            help_key(s, k, hits, ctl)
        }
        Event::Key(k) if k.kind != KeyEventKind::Release => match keys.action(k) {
            Some(a) => {
                s.apply(a, ctl);
                true
            }
            None => false,
        },
        Event::Mouse(m) => {
            let at = Position::new(m.column, m.row);
            match m.kind {
                MouseEventKind::Down(MouseButton::Left) => {
                    if s.view.help {
                        s.apply(Action::Help, ctl);
                        return true;
                    }
                    if let Some((a, _)) = hits.keys.iter().find(|(_, r)| r.contains(at)) {
                        s.apply(*a, ctl);
                        return true;
                    }
                    let Some(&(id, r)) = hits.panels.iter().find(|(_, r)| r.contains(at)) else {
                        return false;
                    };
                    s.view.focus = id;
                    s.view.generation += 1;
                    if id == PanelId::Flame {
                        let p = flame::plot(r);
                        if p.contains(at) {
                            s.view.cursor = (frac(s, p, m.column), m.row - p.y);
                        }
                    } else if id == PanelId::Navigator {
                        let theme = Theme::default();
                        let ctx = Ctx {
                            s,
                            theme: &theme,
                            keys,
                        };
                        if let Some(pass) = navigator::pass_at(&ctx, navigator::plot(r), m.column) {
                            if s.shown().frame_by_pass(pass).is_some() {
                                s.pin(pass);
                            }
                        }
                    }
                    true
                }
                MouseEventKind::ScrollUp | MouseEventKind::ScrollDown if s.view.help => {
                    let d = if m.kind == MouseEventKind::ScrollUp {
                        -3
                    } else {
                        3
                    };
                    scroll_help(s, hits, d)
                }
                MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                    let up = m.kind == MouseEventKind::ScrollUp;
                    match hits.panels.iter().find(|(_, r)| r.contains(at)) {
                        Some(&(PanelId::Flame, r)) => {
                            let p = flame::plot(r);
                            let f = frac(s, p, m.column.clamp(p.x, p.right().saturating_sub(1)));
                            wheel(&mut s.view, up, f);
                        }
                        Some(&(id, _)) => {
                            s.view.focus = id;
                            s.apply(if up { Action::Up } else { Action::Down }, ctl);
                        }
                        None => return false,
                    }
                    true
                }
                _ => false,
            }
        }
        Event::Resize(..) => true,
        _ => false,
    }
}

/// A key while the help is open: the scroll keys scroll it (whatever the keymap binds them
/// to), Ctrl-c quits (always), any other key closes it. Returns whether anything changed.
fn help_key(s: &mut UiState, k: &event::KeyEvent, hits: &Hits, ctl: &dyn Control) -> bool {
    let page = hits.help.map_or(1, |(_, p)| p as i32);
    let d = match k.code {
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
            s.view.help = false;
            s.apply(Action::Quit, ctl);
            return true;
        }
        KeyCode::Up | KeyCode::Char('k') => -1,
        KeyCode::Down | KeyCode::Char('j') => 1,
        KeyCode::PageUp => -page,
        KeyCode::PageDown => page,
        KeyCode::Home => i32::MIN / 2,
        KeyCode::End => i32::MAX / 2,
        _ => {
            s.view.help = false;
            s.view.generation += 1;
            return true;
        }
    };
    scroll_help(s, hits, d)
}

/// Move the help by `d` lines, within what the screen last drawn holds.
fn scroll_help(s: &mut UiState, hits: &Hits, d: i32) -> bool {
    let max = hits.help.map_or(u16::MAX, |(m, _)| m);
    let now = s.view.help_scroll.min(max);
    let to = (now as i32).saturating_add(d).clamp(0, max as i32) as u16;
    if to == s.view.help_scroll {
        return false;
    }
    s.view.help_scroll = to;
    s.view.generation += 1;
    true
}

/// A key while the seek prompt is open: digits, Backspace, Enter (seek), Esc (cancel);
/// Ctrl-c still quits. Returns whether anything changed.
fn prompt_key(s: &mut UiState, k: &event::KeyEvent, ctl: &dyn Control) -> bool {
    let Some(p) = s.view.prompt.as_mut() else {
        return false;
    };
    match k.code {
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
            s.view.prompt = None;
            s.apply(Action::Quit, ctl);
        }
        KeyCode::Char(c) if c.is_ascii_digit() && p.len() < 19 => p.push(c),
        KeyCode::Backspace => {
            p.pop();
        }
        KeyCode::Enter => {
            if let Ok(pass) = p.parse::<u64>() {
                ctl.seek(pass);
            }
            s.view.prompt = None;
        }
        KeyCode::Esc => s.view.prompt = None,
        _ => return false,
    }
    s.view.generation += 1;
    true
}

/// Take the producer's status (banner, position, notes) into the state. Returns whether
/// anything changed.
pub fn poll_status(s: &mut UiState, ctl: &dyn Control) -> bool {
    let rec = ctl.recording();
    let recording = rec != s.view.recording;
    if recording {
        s.view.recording = rec;
        s.view.generation += 1;
    }
    let Some(mut st) = ctl.status() else {
        return recording;
    };
    let notes = std::mem::take(&mut st.notes);
    for n in &notes {
        s.live.note(crate::state::Severity::Warn, n.clone());
    }
    let changed = !notes.is_empty() || s.view.producer.as_ref() != Some(&st);
    if changed {
        s.view.producer = Some(st);
        s.view.generation += 1;
    }
    changed || recording
}

/// Time fraction of the pass at column `x` of the flame plot.
fn frac(s: &UiState, p: Rect, x: u16) -> f64 {
    let rel = (x.saturating_sub(p.x) as f64 + 0.5) / p.width.max(1) as f64;
    (s.view.zoom.0 + rel * s.view.zoom.1).clamp(0.0, 1.0)
}

/// Run the dashboard until quit, a signal, or an error; the terminal is restored on every
/// way out.
pub fn run(
    rx: Receiver<Telemetry>,
    ctl: &dyn Control,
    meta: Meta,
    opts: Options,
) -> anyhow::Result<()> {
    let keys = if ctl.seekable() {
        Keymap::for_replay(&opts.layout.keys)
    } else {
        Keymap::with_overrides(&opts.layout.keys)
    }
    .map_err(anyhow::Error::msg)?;
    let mut s = new_state(meta, &opts.layout);
    let mut g = crate::terminal::Guard::enter()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (etx, erx) = crossbeam_channel::bounded::<Event>(256);
    let input = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("baro-input".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match event::poll(Duration::from_millis(50)) {
                        Ok(true) => match event::read() {
                            Ok(e) => {
                                if etx.send(e).is_err() {
                                    break;
                                }
                            }
                            Err(_) => break,
                        },
                        Ok(false) => {}
                        Err(_) => break,
                    }
                }
            })?
    };
    let period = Duration::from_secs_f64(1.0 / opts.fps.clamp(1, 240) as f64);
    let mut rx = rx;
    let mut notes = ctl.notes().unwrap_or_else(crossbeam_channel::never);
    let mut dirty = true;
    let mut last = Instant::now() - period;
    let mut hits = Hits::default();
    let mut in_burst = false;
    let mut behind = false;
    let result = loop {
        if g.must_end() || s.view.quit {
            break Ok(());
        }
        let wait = if dirty {
            (last + period).saturating_duration_since(Instant::now())
        } else {
            Duration::from_millis(250)
        };
        select! {
            recv(rx) -> m => match m {
                Ok(m) => {
                    s.live.ingest(m);
                    for m in rx.try_iter().take(4096) {
                        s.live.ingest(m);
                    }
                    dirty |= s.frozen.is_none();
                    behind |= s.frozen.is_some();
                }
                Err(_) => rx = crossbeam_channel::never(),
            },
            recv(notes) -> n => match n {
                Ok(n) => {
                    s.live.note(n.sev, n.text);
                    dirty |= s.frozen.is_none();
                }
                Err(_) => notes = crossbeam_channel::never(),
            },
            recv(erx) -> e => if let Ok(e) = e {
                let batch: Vec<Event> = std::iter::once(e)
                    .chain(erx.try_iter().take(MAX_EVENTS_PER_TURN - 1))
                    .collect();
                dirty |= handle_batch(&mut s, &keys, &hits, &batch, ctl, &mut in_burst);
            },
            default(wait) => {}
        }
        dirty |= poll_status(&mut s, ctl);
        // Frozen, the panels hold still but the header's `live N` follows the stream: a
        // redraw for it at most every FROZEN_REDRAW.
        if behind && last.elapsed() >= FROZEN_REDRAW {
            dirty = true;
        }
        if dirty && Instant::now() >= last + period {
            s.prepare();
            let ctx = Ctx {
                s: &s,
                theme: &opts.theme,
                keys: &keys,
            };
            let screen = Screen {
                ctx: &ctx,
                layout: &opts.layout,
            };
            let mut drawn = Hits::default();
            if let Err(e) = g.draw(|f| {
                drawn = screen.hits(f.area());
                f.render_widget(&screen, f.area());
            }) {
                break Err(e.into());
            }
            hits = drawn;
            dirty = false;
            behind = false;
            last = Instant::now();
        }
    };
    ctl.stop();
    stop.store(true, Ordering::Relaxed);
    drop(g);
    let _ = input.join();
    if crate::terminal::caught() == Some(crate::terminal::PANICKED) {
        anyhow::bail!("a thread panicked (its message is above): the dashboard ended");
    }
    // Back on the normal screen: what the run added up to stays in the scrollback.
    if result.is_ok() {
        println!("{}", s.live.summary.line());
    }
    result
}

/// Terminal events taken in one turn of the loop at most: input stays bounded per turn
/// whatever arrives (the input thread waits while the channel is full).
pub const MAX_EVENTS_PER_TURN: usize = 64;

/// Key presses in one turn above which they are a burst (a paste the terminal did not
/// bracket, a stuck key), not typing: its keys are dropped, and said so once in the log.
pub const MAX_KEYS_PER_TURN: usize = 16;

/// Whether `ev` quits: Ctrl-c always, the quit keys where neither the seek prompt nor the
/// help takes them (`q` and `Esc` close the help).
fn quits(s: &UiState, keys: &Keymap, ev: &Event) -> bool {
    let Event::Key(k) = ev else {
        return false;
    };
    if k.kind == KeyEventKind::Release {
        return false;
    }
    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
    ctrl_c || (s.view.prompt.is_none() && !s.view.help && keys.action(k) == Some(Action::Quit))
}

/// While frozen, how often the header's `live N` is brought up to date.
const FROZEN_REDRAW: Duration = Duration::from_millis(500);

/// Apply one turn's events: a quit among them wins at once, whatever is queued before it; a
/// bracketed paste is one event, ignored (and logged); a burst of more than
/// [`MAX_KEYS_PER_TURN`] keys is dropped (logged once while `in_burst` says it goes on),
/// its mouse and resize events kept. Returns whether anything changed.
pub fn handle_batch(
    s: &mut UiState,
    keys: &Keymap,
    hits: &Hits,
    batch: &[Event],
    ctl: &dyn Control,
    in_burst: &mut bool,
) -> bool {
    if batch.iter().any(|e| quits(s, keys, e)) {
        s.view.prompt = None;
        s.apply(Action::Quit, ctl);
        return true;
    }
    let presses = batch
        .iter()
        .filter(|e| matches!(e, Event::Key(k) if k.kind != KeyEventKind::Release))
        .count();
    let burst = presses > MAX_KEYS_PER_TURN;
    let mut changed = false;
    let first = burst && !*in_burst;
    *in_burst = burst;
    if first {
        s.live.note(
            crate::state::Severity::Warn,
            format!("ignored a burst of {presses}+ keys (a paste?): the dashboard takes keys one at a time"),
        );
        changed = true;
    }
    for e in batch {
        match e {
            Event::Key(_) if burst => {}
            Event::Paste(text) => {
                s.live.note(
                    crate::state::Severity::Warn,
                    format!(
                        "ignored a paste of {} bytes: the dashboard takes keys, not text",
                        text.len()
                    ),
                );
                changed = true;
            }
            e => changed |= handle_event(s, keys, hits, e, ctl),
        }
    }
    changed
}

/// Print headless lines ([`crate::headless`]) until the stream ends (or stdout closes),
/// then the summary line.
pub fn headless(
    rx: Receiver<Telemetry>,
    ctl: &dyn Control,
    decoder: Option<crate::state::Decoder>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let notes = |ctl: &dyn Control| {
        for n in ctl.status().map(|s| s.notes).unwrap_or_default() {
            eprintln!("baro-top: {}", crate::text::sanitize(&n, " "));
        }
    };
    let mut p = crate::headless::Printer::new(decoder);
    let write = |out: &mut dyn Write, lines: Vec<String>| {
        lines
            .iter()
            // The run's strings (device, model, driver, fail line, token text) came from a
            // file or a driver: no escape sequence of theirs reaches the terminal.
            .try_for_each(|l| writeln!(out, "{}", crate::text::sanitize(l, " ")))
            .and_then(|_| out.flush())
    };
    for m in rx {
        notes(ctl);
        if write(out, p.push(m)).is_err() {
            ctl.stop();
            return Ok(());
        }
    }
    notes(ctl);
    let _ = write(out, p.finish());
    Ok(())
}

/// The dashboard on a terminal, headless lines otherwise (said once on stderr).
pub fn run_or_headless(
    rx: Receiver<Telemetry>,
    ctl: &dyn Control,
    meta: Meta,
    opts: Options,
) -> anyhow::Result<()> {
    if std::io::stdout().is_terminal() {
        run(rx, ctl, meta, opts)
    } else {
        eprintln!("baro-top: stdout is not a terminal: printing one line per pass instead of the dashboard (like top -b)");
        headless(rx, ctl, meta.decoder, &mut std::io::stdout().lock())
    }
}
