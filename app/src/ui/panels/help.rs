//! Help overlay (`?`): the key bindings in force (from the keymap, so remaps show), the
//! stage-kind colours and the verdict glyphs. Clicking anywhere closes it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use baro_telemetry::StageKind;

use super::Ctx;
use crate::keymap::DEFAULTS;
use crate::text::put;
use crate::theme::{kind_letter, Tone};

/// The help overlay.
pub struct Help<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Help<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.ctx.theme;
        let w = area.width.min(110);
        let shown: Vec<_> = DEFAULTS
            .iter()
            .filter(|b| self.ctx.keys.bound(b.action))
            .collect();
        let h = area.height.min(shown.len() as u16 + 6);
        let r = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        for y in r.top()..r.bottom() {
            for x in r.left()..r.right() {
                crate::text::cell(buf, r, x, y, " ", Default::default());
            }
        }
        let inner = super::frame(
            buf,
            r,
            "help · keys (remap in [keys] of the layout file) · ? closes",
            true,
            t,
        );
        let mut y = inner.y;
        let half = shown.len().div_ceil(2);
        let colw = inner.width / 2;
        for (i, b) in shown.iter().enumerate() {
            let (col, row) = (i / half, i % half);
            let x = inner.x + col as u16 * colw;
            let line = format!("{:>10} {}", self.ctx.keys.keys_of(b.action), b.help);
            put(
                buf,
                Rect::new(x, inner.y, colw, inner.height),
                x,
                inner.y + row as u16,
                &line,
                Default::default(),
            );
        }
        y += half as u16 + 1;
        let mut x = put(buf, inner, inner.x, y, "kinds: ", t.fg(Tone::Dim));
        for k in StageKind::ALL {
            let sym = if t.colored() {
                t.glyphs.work.to_string()
            } else {
                kind_letter(k).to_string()
            };
            x = put(buf, inner, x, y, &sym, t.fg(Tone::Kind(k)));
            x = put(
                buf,
                inner,
                x,
                y,
                &format!("{} ", k.name()),
                Default::default(),
            );
        }
        x = put(buf, inner, x, y, t.glyphs.wait, t.fg(Tone::Wait));
        put(buf, inner, x, y, "wait", Default::default());
        let g = &t.glyphs.verdict;
        let v = format!(
            "tokens: {} match {} near-tie {} mismatch {} non-finite {} uncompared {} pending",
            g[0], g[1], g[2], g[3], g[4], g[5]
        );
        put(buf, inner, inner.x, y + 1, &v, Default::default());
    }
}
