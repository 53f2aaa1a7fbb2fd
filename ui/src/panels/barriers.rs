//! Barriers: per level arrival spread, release and exit spread (p50/p99), the number of
//! levels and their share of the pass; worst arrival spread first.
//!
//! ```text
//! ┌ barriers · 81 levels · waits 12.3% of the pass · worst first ───┐
//! │ level          arrive p50   p99  release p50  p99  exit p50  p99│
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use super::{ralign, Ctx};
use crate::text::{clip, dur, put};
use crate::theme::Tone;
use crate::view::PanelId;

/// The barriers panel.
pub struct Barriers<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Barriers<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let d = &s.derived;
        let title = format!(
            "barriers · {} levels · waits {:.1}% of the pass · worst first",
            d.barriers.len(),
            d.barrier_share * 100.0
        );
        let inner = super::frame(buf, area, &title, s.view.focus == PanelId::Barriers, t);
        if inner.height == 0 {
            return;
        }
        if d.barriers.is_empty() {
            put(
                buf,
                inner,
                inner.x,
                inner.y,
                "no grid barriers (multi dispatch, or no pass yet)",
                t.fg(Tone::Dim),
            );
            return;
        }
        let hdr = [
            "arr p50", "arr p99", "rel p50", "rel p99", "exit p50", "exit p99",
        ];
        let mut line = format!("{:<14}", "level");
        for h in hdr {
            line.push_str(&ralign(h, 10));
        }
        put(buf, inner, inner.x, inner.y, &line, t.fg(Tone::Dim));
        let mut rows: Vec<_> = d.barriers.iter().collect();
        rows.sort_by(|a, b| b.p[0].p50.cmp(&a.p[0].p50).then(a.level.cmp(&b.level)));
        for (i, r) in rows
            .iter()
            .take(inner.height.saturating_sub(1) as usize)
            .enumerate()
        {
            let y = inner.y + 1 + i as u16;
            let mut x = put(
                buf,
                inner,
                inner.x,
                y,
                &format!("{:<14}", clip(&r.name, 13)),
                Default::default(),
            );
            for p in &r.p {
                x = put(
                    buf,
                    inner,
                    x,
                    y,
                    &ralign(&dur(p.p50), 10),
                    Default::default(),
                );
                x = put(buf, inner, x, y, &ralign(&dur(p.p99), 10), t.fg(Tone::Dim));
            }
        }
    }
}
