//! Help (`?`, `F1`): a full-screen, scrollable page like htop's and bottom's. Every key in
//! force (from the keymap, so remaps show), grouped in sections, the replay keys in their own;
//! then the keys of the help itself, the seek prompt, the mouse and the legend (stage-kind
//! colours, verdict glyphs). Lines wider than the screen wrap under their text, so nothing
//! is cut at any width; what does not fit in height scrolls.
//!
//! ```text
//! ┌ help · keys · ↑↓ PgUp PgDn scroll · ? Esc q close ───────────────┐
//! │general                                                           │
//! │  q/Esc/Ctrl-c  quit (restores the terminal)                      │
//! │  …                                                               │
//! │lines 1-21 of 64 · ↓ more                                         │
//! └──────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The content is a pure function of the keymap, theme and width ([`content`]), so the event
//! loop can bound the scroll with exactly what is drawn ([`max_scroll`]).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use baro_telemetry::StageKind;

use super::Ctx;
use crate::action::Action;
use crate::keymap::{Keymap, DEFAULTS, REPLAY_KEYS};
use crate::text::{put, width};
use crate::theme::{kind_letter, Theme, Tone};

/// The title, kept short enough for 80 columns.
pub const TITLE: &str = "help · keys · ↑↓ PgUp PgDn scroll · ? Esc q close";

/// The sections of bindings, in order. Every action of [`DEFAULTS`] is in exactly one.
pub const SECTIONS: &[(&str, &[Action])] = &[
    (
        "general",
        &[
            Action::Quit,
            Action::Help,
            Action::Freeze,
            Action::PauseResume,
            Action::Step,
            Action::SwitchDispatch,
            Action::Record,
        ],
    ),
    (
        "panels",
        &[
            Action::Expand,
            Action::FocusNext,
            Action::FocusPrev,
            Action::Left,
            Action::Right,
            Action::Up,
            Action::Down,
        ],
    ),
    (
        "flame chart",
        &[
            Action::ZoomIn,
            Action::ZoomOut,
            Action::PanLeft,
            Action::PanRight,
            Action::ZoomReset,
            Action::PickLatest,
            Action::PickSlowest,
            Action::Pin,
            Action::GroupToggle,
        ],
    ),
    (
        "stage table and statistics",
        &[
            Action::Sort,
            Action::SortReverse,
            Action::ByKind,
            Action::Scope,
            Action::RangeStart,
            Action::RangeEnd,
        ],
    ),
    (
        "replay (baro-top replay FILE)",
        &[Action::Seek, Action::SeekSlowest, Action::Restart],
    ),
];

/// Fixed lines after the bindings: (section, [(keys, what)]).
const FIXED: &[(&str, &[(&str, &str)])] = &[
    (
        "seek prompt (replay)",
        &[
            ("0-9", "pass number"),
            ("Backspace", "delete a digit"),
            ("Enter", "seek to the pass"),
            ("Esc", "cancel"),
        ],
    ),
    (
        "this help",
        &[
            ("Up/Down j/k", "scroll a line (also the mouse wheel)"),
            ("PgUp/PgDn", "scroll a page"),
            ("Home/End", "top / bottom"),
            ("?/Esc/q/F1", "close (so does any other key, or a click)"),
            ("Ctrl-c", "quit, always"),
        ],
    ),
    (
        "mouse",
        &[
            ("click", "a footer key runs it; a panel takes the focus"),
            (
                "click",
                "flame chart: moves the cursor; passes strip: pins that pass",
            ),
            (
                "wheel",
                "flame chart: zoom at the pointer; other panels: up / down",
            ),
        ],
    ),
];

/// Width of the key column.
const KEYW: usize = 14;

/// One line of the help: text and style.
pub type Line = (String, Style);

/// The keys of `a` as this session binds them; for an action this session leaves unbound
/// (the replay keys in a live run, `record` in a replay), its keys where it is bound and why
/// they do nothing here.
fn keys_and_note(keys: &Keymap, a: Action) -> (String, &'static str) {
    if keys.bound(a) {
        return (keys.keys_of(a), "");
    }
    let name = a.name();
    if let Some((_, ks)) = REPLAY_KEYS.iter().find(|(n, _)| *n == name) {
        if !ks.is_empty() {
            return (ks.join("/"), " (replay only)");
        }
    }
    match DEFAULTS.iter().find(|b| b.action == a) {
        Some(b) if !b.keys.is_empty() => (b.keys.join("/"), " (live only)"),
        _ => ("—".into(), " (unbound)"),
    }
}

/// `keys` right-aligned in the key column, then `what`, wrapped to `w` columns under the
/// text (a key column wider than its slot pushes the text to the next line).
fn entry(out: &mut Vec<Line>, w: usize, keys: &str, what: &str, style: Style) {
    let w = w.max(KEYW + 8);
    let kw = width(keys);
    let mut first = if kw <= KEYW {
        format!("{}{keys}  ", " ".repeat(KEYW - kw))
    } else {
        out.push((format!("  {keys}"), style));
        " ".repeat(KEYW + 2)
    };
    let indent = " ".repeat(KEYW + 2);
    let mut line = std::mem::take(&mut first);
    let mut empty = true;
    for word in what.split(' ') {
        let ww = width(word);
        if !empty && width(&line) + 1 + ww > w {
            out.push((std::mem::replace(&mut line, indent.clone()), style));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push((line, style));
}

/// Words joined with spaces, wrapped to `w` columns (continuations indented by two).
fn para(out: &mut Vec<Line>, w: usize, words: &[(String, Style)]) {
    let w = w.max(8);
    let mut line = String::new();
    let mut style = Style::default();
    for (word, st) in words {
        if !line.is_empty() && width(&line) + 1 + width(word) > w {
            out.push((std::mem::replace(&mut line, "  ".into()), style));
        }
        if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        style = *st;
    }
    if !line.trim().is_empty() {
        out.push((line, style));
    }
}

/// Every line of the help at `w` columns of text.
pub fn content(keys: &Keymap, t: &Theme, w: u16) -> Vec<Line> {
    let w = w as usize;
    let head = t.fg(Tone::Accent).add_modifier(Modifier::BOLD);
    let dim = t.fg(Tone::Dim);
    let mut out: Vec<Line> = vec![];
    para(
        &mut out,
        w,
        &"keys in force in this session; remap them in [keys] of the layout file"
            .split(' ')
            .map(|s| (s.to_string(), dim))
            .collect::<Vec<_>>(),
    );
    for (title, actions) in SECTIONS {
        out.push((String::new(), Style::default()));
        out.push((title.to_string(), head));
        for a in *actions {
            let help = DEFAULTS
                .iter()
                .find(|b| b.action == *a)
                .map_or("", |b| b.help);
            let (k, mut note) = keys_and_note(keys, *a);
            let style = if note.is_empty() {
                Style::default()
            } else {
                dim
            };
            // "replay: …" and "live: …" already say where the key works.
            if help.starts_with("replay:") || help.starts_with("live:") {
                note = "";
            }
            entry(&mut out, w, &k, &format!("{help}{note}"), style);
        }
    }
    for (title, rows) in FIXED {
        out.push((String::new(), Style::default()));
        out.push((title.to_string(), head));
        for (k, what) in *rows {
            entry(&mut out, w, k, what, Style::default());
        }
    }
    out.push((String::new(), Style::default()));
    out.push(("legend".into(), head));
    let mut kinds = vec![("stage kinds:".to_string(), dim)];
    for k in StageKind::ALL {
        let sym = if t.colored() {
            t.glyphs.work.to_string()
        } else {
            kind_letter(k).to_string()
        };
        kinds.push((format!("{sym} {}", k.name()), Style::default()));
    }
    kinds.push((format!("{} wait", t.glyphs.wait), Style::default()));
    para(&mut out, w, &kinds);
    let g = &t.glyphs.verdict;
    let names = [
        "match",
        "near-tie",
        "mismatch",
        "non-finite",
        "uncompared",
        "pending",
    ];
    let mut v = vec![("tokens:".to_string(), dim)];
    v.extend(
        names
            .iter()
            .zip(g.iter())
            .map(|(n, g)| (format!("{g} {n}"), Style::default())),
    );
    para(&mut out, w, &v);
    out
}

/// The text area inside the help's frame at `area`: (text rect, rows of text shown; the
/// last row of the frame's inside is the position line).
fn text_area(area: Rect) -> (Rect, u16) {
    let inner = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    let rows = inner.height.saturating_sub(1);
    (Rect::new(inner.x, inner.y, inner.width, rows), rows)
}

/// The largest useful scroll offset, and the rows of a page, for the help drawn in `area`.
pub fn max_scroll(keys: &Keymap, t: &Theme, area: Rect) -> (u16, u16) {
    let (text, rows) = text_area(area);
    let n = content(keys, t, text.width).len() as u16;
    (n.saturating_sub(rows), rows.max(1))
}

/// The help page.
pub struct Help<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Help<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.ctx.theme;
        for y in area.top()..area.bottom() {
            for x in area.left()..area.right() {
                crate::text::cell(buf, area, x, y, " ", Style::default());
            }
        }
        super::frame(buf, area, TITLE, true, t);
        let (text, rows) = text_area(area);
        if rows == 0 {
            return;
        }
        let lines = content(self.ctx.keys, t, text.width);
        let max = (lines.len() as u16).saturating_sub(rows);
        let top = self.ctx.s.view.help_scroll.min(max);
        for (i, (l, st)) in lines
            .iter()
            .skip(top as usize)
            .take(rows as usize)
            .enumerate()
        {
            put(buf, text, text.x, text.y + i as u16, l, *st);
        }
        let last = (top + rows).min(lines.len() as u16);
        let more = match (top > 0, last < lines.len() as u16) {
            (true, true) => " · ↑↓ more",
            (false, true) => " · ↓ more",
            (true, false) => " · ↑ more",
            (false, false) => "",
        };
        let pos = format!("lines {}-{last} of {}{more}", top + 1, lines.len());
        let y = text.bottom();
        put(
            buf,
            Rect::new(text.x, y, text.width, 1),
            text.x,
            y,
            &pos,
            t.fg(Tone::Dim),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_in_exactly_one_section() {
        for b in DEFAULTS {
            let n = SECTIONS
                .iter()
                .filter(|(_, acts)| acts.contains(&b.action))
                .count();
            assert_eq!(n, 1, "{:?} in {n} sections", b.action);
        }
    }

    #[test]
    fn no_line_is_wider_than_the_text_area() {
        let t = Theme::default();
        for w in [40u16, 78, 198] {
            for keys in [
                Keymap::default(),
                Keymap::for_replay(&Default::default()).unwrap_or_default(),
            ] {
                for (l, _) in content(&keys, &t, w) {
                    assert!(width(&l) <= w as usize, "{w}: {l:?}");
                }
            }
        }
    }
}
