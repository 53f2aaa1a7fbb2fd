//! Pass navigator: one column per pass (newest right), bar height = pass duration, failed
//! passes in the bad colour, the flame chart's pass highlighted; click a retained pass to
//! pin it.
//!
//! ```text
//! passes · #812 latest · p50 1.55 ms p99 1.71 ms · ← → pick (retained: 9)
//! ▃▃▄▃▃▇▃▃▃▃▃▃▄▃▃▃▃█▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃▃
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Widget;

use super::Ctx;
use crate::text::{cell, put};
use crate::theme::Tone;
use crate::view::{PanelId, Pick};

/// The navigator panel.
pub struct Navigator<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

/// The bars' area inside the panel's area.
pub fn plot(area: Rect) -> Rect {
    Rect::new(
        area.x,
        area.y.saturating_add(1),
        area.width,
        area.height.saturating_sub(1),
    )
}

/// The pass drawn at column `x` of `plot` (newest at the right edge).
pub fn pass_at(ctx: &Ctx, plot: Rect, x: u16) -> Option<u64> {
    let d = ctx.s.shown();
    let n = d.passes.len().min(plot.width as usize);
    let first = plot.right().checked_sub(n as u16)?;
    let i = x.checked_sub(first)? as usize;
    d.passes
        .iter()
        .skip(d.passes.len() - n)
        .nth(i)
        .map(|p| p.pass)
}

impl Widget for &Navigator<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let d = s.shown();
        let shown = s.flame_frame().map(|f| f.pass);
        let how = match s.view.pick {
            Pick::Latest => "latest",
            Pick::Slowest => "slowest",
            Pick::Pass(_) => "pinned",
        };
        let focused = s.view.focus == PanelId::Navigator;
        let title = format!(
            "passes · #{} {how} · p50 {} p99 {} · retained {}",
            shown.map_or("—".into(), |p| p.to_string()),
            crate::text::dur_or_dash(s.derived.pass.p50),
            crate::text::dur_or_dash(s.derived.pass.p99),
            d.retained().len()
        );
        let st = if focused {
            t.fg(Tone::Accent).add_modifier(Modifier::REVERSED)
        } else {
            t.fg(Tone::Accent)
        };
        put(buf, area, area.x, area.y, &title, st);
        let plot = plot(area);
        if plot.width == 0 || plot.height == 0 {
            return;
        }
        let n = d.passes.len().min(plot.width as usize);
        let passes: Vec<_> = d.passes.iter().skip(d.passes.len() - n).collect();
        // Bars from 90 % of the fastest pass up, so small differences show.
        let hi = passes.iter().map(|p| p.dur_ns).max().unwrap_or(1).max(1);
        let lo = passes.iter().map(|p| p.dur_ns).min().unwrap_or(0) / 10 * 9;
        let levels = plot.height as u64 * 8;
        let retained = d.retained();
        let x0 = plot.right() - n as u16;
        for (i, p) in passes.iter().enumerate() {
            let x = x0 + i as u16;
            let h = ((p.dur_ns - lo) * levels).div_ceil((hi - lo).max(1)).max(1);
            let tone = if p.failed {
                Tone::Bad
            } else if retained.contains(&p.pass) {
                Tone::Accent
            } else {
                Tone::Dim
            };
            let mut st = t.fg(tone);
            if Some(p.pass) == shown {
                st = st.add_modifier(Modifier::REVERSED);
            }
            for row in 0..plot.height {
                let y = plot.bottom() - 1 - row;
                let fill = h.saturating_sub(row as u64 * 8).min(8) as usize;
                let sym = if p.failed && fill == 0 && row == 0 {
                    t.glyphs.bad
                } else {
                    t.glyphs.bars[fill]
                };
                let sym = if Some(p.pass) == shown && fill == 0 {
                    t.glyphs.bars[1]
                } else {
                    sym
                };
                cell(buf, plot, x, y, sym, st);
            }
        }
    }
}
