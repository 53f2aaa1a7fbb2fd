//! Attribution warnings: where a stage's charged time exceeds its busy time (the level's
//! tail, charged to the stage that closes it), with numbers, and the workgroup that is
//! consistently last to arrive. Quiet when charged ≈ busy. Busy is the grid's mean: where
//! the slowest workgroup's busy is over twice it, the warning gives that too (the stage's work
//! sits on a few workgroups, as the attention's units do, and its "tail" is their work).
//!
//! ```text
//! ┌ attribution · 2 warnings ─────────────────────────────────────────────────────┐
//! │⚠ workgroup 97 arrived last at 80 of 81 barriers (99%) over the last 256 passes │
//! │⚠ ffn_up.l3 charged 33 µs, busy 25 µs: 8 µs is level 18's tail, waiting for … │
//! │⚠ attn.l0 charged 19 µs, busy 5 µs (slowest workgroup 18 µs): 14 µs is level … │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use super::Ctx;
use crate::text::put;
use crate::theme::Tone;
use crate::view::{PanelId, GAP_MIN_FRAC, GAP_MIN_NS};

/// The attribution panel.
pub struct Attribution<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Attribution<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let w = &s.derived.attribution;
        let title = format!("attribution · {} warnings", w.len());
        let inner = super::frame(buf, area, &title, s.view.focus == PanelId::Attribution, t);
        if inner.height == 0 {
            return;
        }
        if w.is_empty() {
            let q = format!(
                "{} charged ≈ busy everywhere (threshold {} µs and {:.0}%)",
                t.glyphs.ok,
                GAP_MIN_NS / 1000,
                GAP_MIN_FRAC * 100.0
            );
            put(buf, inner, inner.x, inner.y, &q, t.fg(Tone::Good));
            return;
        }
        let skip = s.view.row.min(w.len().saturating_sub(1));
        let skip = if s.view.focus == PanelId::Attribution {
            skip
        } else {
            0
        };
        for (i, line) in w.iter().skip(skip).take(inner.height as usize).enumerate() {
            let y = inner.y + i as u16;
            let x = put(buf, inner, inner.x, y, t.glyphs.warn, t.fg(Tone::Warn));
            put(buf, inner, x + 1, y, line, Default::default());
        }
    }
}
