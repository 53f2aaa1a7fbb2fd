//! Warnings and log: fail words with their decoded line, residency, poison, watchdog, torn
//! and dropped frames, engine errors, the end of the run. Quiet for a clean run (one green
//! line); a bad one is impossible to miss (bold, the error glyph, the count in the title).
//!
//! ```text
//! ┌ log · 2 errors ───────────────────────────────────────────────────────┐
//! │✗ #999 fail-word 0x00000201 FAIL barrier-timeout+output-poisoned at …  │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Widget;

use super::Ctx;
use crate::state::Severity;
use crate::text::put;
use crate::theme::Tone;
use crate::view::PanelId;

/// The log panel.
pub struct Log<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Log<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let d = s.shown();
        let errors = d.log.iter().filter(|e| e.sev == Severity::Error).count();
        let warns = d.log.iter().filter(|e| e.sev == Severity::Warn).count();
        let title = format!("log · {errors} errors · {warns} warnings");
        let inner = super::frame(buf, area, &title, s.view.focus == PanelId::Log, t);
        if inner.height == 0 {
            return;
        }
        let mut y = inner.y;
        if errors == 0 && warns == 0 {
            let q = format!(
                "{} {} passes, fail word clean, tokens: {}",
                t.glyphs.ok,
                d.frames,
                d.summary.tokens()
            );
            put(buf, inner, inner.x, y, &q, t.fg(Tone::Good));
            y += 1;
        }
        let room = inner.bottom().saturating_sub(y) as usize;
        let skip = d.log.len().saturating_sub(room);
        for e in d.log.iter().skip(skip) {
            let (g, st) = match e.sev {
                Severity::Error => (t.glyphs.bad, t.fg(Tone::Bad).add_modifier(Modifier::BOLD)),
                Severity::Warn => (t.glyphs.warn, t.fg(Tone::Warn)),
                Severity::Info => ("·", t.fg(Tone::Dim)),
            };
            let pass = e.pass.map_or(String::new(), |p| format!("#{p} "));
            // The count first: a narrow panel clips the end of the line.
            let times = if e.count > 1 {
                format!("×{} ", e.count)
            } else {
                String::new()
            };
            let line = format!("{g} {times}{pass}{}", e.text);
            put(buf, inner, inner.x, y, &line, st);
            y += 1;
        }
    }
}
