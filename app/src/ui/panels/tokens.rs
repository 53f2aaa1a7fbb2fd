//! Tokens: the text as it decodes, each token coloured by its verdict (and, where it is not
//! a plain match, prefixed by the verdict's glyph), the first divergence marked with both
//! tokens and the margin. Text is sanitised at ingest; widths are measured.
//!
//! ```text
//! ┌ tokens · pos 112 · ✓ match ≈ near-tie ✗ mismatch … pending ┐
//! │≈ first divergence at pass 120: gpu " cat" ref " sat" margin 4.0e-4 │
//! │ the cat sat on a warm mat. It was happy ≈[ cat| sat] and …  │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Widget;

use baro_telemetry::Verdict;

use super::Ctx;
use crate::text::{put, width};
use crate::view::PanelId;

/// The tokens panel.
pub struct Tokens<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Tokens<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let d = s.shown();
        let g = &t.glyphs.verdict;
        let title = format!(
            "tokens · {} match {} near-tie {} mismatch {} pending",
            g[0], g[1], g[2], g[5]
        );
        let inner = super::frame(buf, area, &title, s.view.focus == PanelId::Tokens, t);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let mut top = inner.y;
        if let Some(dv) = &d.divergence {
            let (glyph, tone) = t.verdict(Some(dv.verdict));
            let m = dv.margin.map_or("—".into(), |m| format!("{m:.1e}"));
            let txt = format!(
                "{glyph} first divergence at pass {}: gpu {:?} ref {:?} margin {m}",
                dv.pass, dv.gpu, dv.reference
            );
            put(
                buf,
                inner,
                inner.x,
                top,
                &txt,
                t.fg(tone).add_modifier(Modifier::BOLD),
            );
            top += 1;
        }
        let h = inner.bottom().saturating_sub(top) as usize;
        if h == 0 {
            return;
        }
        // Lay out from the newest token backwards: which tokens fit in h lines of width w.
        let w = inner.width as usize;
        // Text is stored with a Unicode newline mark; ASCII themes spell it their way.
        let nl = |x: &str| {
            if t.glyphs.newline == "↵" {
                x.to_string()
            } else {
                x.replace('↵', t.glyphs.newline)
            }
        };
        let piece = |c: &crate::state::TokenCell| -> String {
            let div = d.divergence.as_ref().filter(|dv| dv.pass == c.pass);
            let mut p = String::new();
            if c.restart {
                p.push_str(" | ");
            }
            match (c.verdict, div) {
                (_, Some(dv)) => p.push_str(&format!(
                    "{}[{}|{}]",
                    t.verdict(Some(dv.verdict)).0,
                    nl(&dv.gpu),
                    nl(&dv.reference)
                )),
                (Some(Verdict::Match | Verdict::Uncompared), _) => p.push_str(&nl(&c.text)),
                (v, _) => {
                    p.push_str(t.verdict(v).0);
                    p.push_str(&nl(&c.text));
                }
            }
            p
        };
        let mut lines: Vec<Vec<usize>> = vec![vec![]];
        let mut used = 0;
        let mut start = d.tokens.len();
        // Forward layout over a tail that surely covers h lines.
        let budget = w * h;
        let mut acc = 0;
        while start > 0 && acc < budget {
            start -= 1;
            acc += width(&piece(&d.tokens[start])).max(1);
        }
        for i in start..d.tokens.len() {
            let pw = width(&piece(&d.tokens[i])).min(w);
            if used + pw > w {
                lines.push(vec![]);
                used = 0;
            }
            used += pw;
            if let Some(l) = lines.last_mut() {
                l.push(i);
            }
        }
        let skip = lines.len().saturating_sub(h);
        for (li, l) in lines.iter().skip(skip).enumerate() {
            let y = top + li as u16;
            let mut x = inner.x;
            for &i in l {
                let c = &d.tokens[i];
                let (_, tone) = t.verdict(c.verdict);
                let mut st = t.fg(tone);
                if d.divergence.as_ref().is_some_and(|dv| dv.pass == c.pass) {
                    st = st.add_modifier(Modifier::REVERSED | Modifier::BOLD);
                }
                if c.verdict == Some(Verdict::Match) {
                    st = Default::default();
                }
                x = put(buf, inner, x, y, &piece(c), st);
            }
        }
    }
}
