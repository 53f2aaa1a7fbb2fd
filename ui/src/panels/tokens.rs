//! Tokens: the text as it decodes. A token the live reference has still to judge is drawn
//! dim and underlined (a style, never a glyph: a marker between a word's pieces would split
//! it); a judged match is plain text; a near-tie, mismatch or non-finite token is coloured and
//! prefixed by the verdict's glyph; the first divergence shows both tokens and the margin.
//! Lines wrap between words (a token that starts with a space or follows a newline starts
//! one), not inside them. The title counts the verdicts of the tokens kept, so the outcome
//! reads once it is known. Without a vocabulary the tokens are ids, space-separated, under a
//! line that says so. Text is sanitised at ingest; widths are measured.
//!
//! ```text
//! ┌ tokens · 112 ✓ match · 8 pending (underlined) · 1 ≈ near-tie ──────┐
//! │≈ first divergence at pass 120: gpu " cat" ref " sat" margin 4.0e-4 │
//! │ the cat sat on a warm mat. It was happy ≈[ cat| sat] and …         │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use baro_telemetry::Verdict;

use super::Ctx;
use crate::state::{Data, TokenCell};
use crate::text::{put, verdict_name, width};
use crate::theme::{Theme, Tone};
use crate::view::PanelId;

/// What the panel says above token ids when no label was given.
pub const IDS: &str = "token ids (no vocabulary)";

/// The tokens panel.
pub struct Tokens<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

/// The title: the verdict counts over the tokens kept (only those present).
pub fn title(d: &Data, t: &Theme) -> String {
    let g = &t.glyphs.verdict;
    let (mut counts, mut pending, mut unjudged) = ([0usize; 5], 0usize, 0usize);
    for c in &d.tokens {
        match c.verdict {
            Some(v) => counts[v as usize] += 1,
            None if c.pending => pending += 1,
            None => unjudged += 1,
        }
    }
    let mut parts = vec!["tokens".to_string()];
    for (i, v) in [
        Verdict::Match,
        Verdict::NearTie,
        Verdict::Mismatch,
        Verdict::NonFinite,
        Verdict::Uncompared,
    ]
    .into_iter()
    .enumerate()
    {
        if counts[v as usize] > 0 {
            parts.push(format!(
                "{} {} {}",
                counts[v as usize],
                g[i],
                verdict_name(v)
            ));
        }
    }
    if pending > 0 {
        parts.push(format!("{pending} pending (underlined)"));
    }
    if unjudged > 0 {
        parts.push(format!("{unjudged} not checked"));
    }
    if d.tokens.is_empty() {
        parts.push("none yet".into());
    }
    parts.join(" · ")
}

/// What one token draws: its text, or for a failed or near-tie verdict the glyph first, or at
/// the first divergence `≈[gpu|ref]`; a restart is marked ` | `; ids get a separating space.
fn piece(d: &Data, t: &Theme, c: &TokenCell) -> String {
    let nl = |x: &str| {
        if t.glyphs.newline == "↵" {
            x.to_string()
        } else {
            x.replace('↵', t.glyphs.newline)
        }
    };
    let mut p = String::new();
    if c.restart {
        p.push_str(" | ");
    } else if d.meta.decoder.is_none() {
        p.push(' ');
    }
    match (
        c.verdict,
        d.divergence.as_ref().filter(|dv| dv.pass == c.pass),
    ) {
        (_, Some(dv)) => p.push_str(&format!(
            "{}[{}|{}]",
            t.verdict(Some(dv.verdict)).0,
            nl(&dv.gpu),
            nl(&dv.reference)
        )),
        (Some(v @ (Verdict::NearTie | Verdict::Mismatch | Verdict::NonFinite)), _) => {
            p.push_str(t.verdict(Some(v)).0);
            p.push_str(&nl(&c.text));
        }
        _ => p.push_str(&nl(&c.text)),
    }
    p
}

/// How one token is drawn.
fn style(d: &Data, t: &Theme, c: &TokenCell) -> Style {
    if d.divergence.as_ref().is_some_and(|dv| dv.pass == c.pass) {
        let tone = t.verdict(c.verdict).1;
        return t.fg(tone).add_modifier(Modifier::REVERSED | Modifier::BOLD);
    }
    match c.verdict {
        Some(Verdict::Match) => Style::default(),
        Some(v) => t.fg(t.verdict(Some(v)).1),
        None if c.pending => t.fg(Tone::Dim).add_modifier(Modifier::UNDERLINED),
        None => Style::default(),
    }
}

/// Whether a token starts a word (a line may break before it).
fn starts_word(c: &TokenCell, piece: &str, prev: Option<&str>, newline: &str) -> bool {
    c.restart
        || piece.starts_with(' ')
        || prev.is_none_or(|p| p.ends_with(newline) || p.ends_with(' '))
}

/// Lines of token indices from `start` on, `w` columns wide: breaks between words where a
/// word fits on a line, between tokens where one does not.
pub fn wrap(pieces: &[(usize, String, usize, bool)], w: usize) -> Vec<Vec<usize>> {
    let mut lines: Vec<Vec<usize>> = vec![vec![]];
    let mut used = 0;
    let mut i = 0;
    while i < pieces.len() {
        // The word: this token and the following ones that do not start a word.
        let mut j = i + 1;
        while j < pieces.len() && !pieces[j].3 {
            j += 1;
        }
        let ww: usize = pieces[i..j].iter().map(|p| p.2).sum();
        if used > 0 && used + ww > w && ww <= w {
            lines.push(vec![]);
            used = 0;
        }
        for p in &pieces[i..j] {
            let pw = p.2.min(w);
            if used > 0 && used + pw > w {
                lines.push(vec![]);
                used = 0;
            }
            used += pw;
            if let Some(l) = lines.last_mut() {
                l.push(p.0);
            }
        }
        i = j;
    }
    lines
}

impl Widget for &Tokens<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let d = s.shown();
        let inner = super::frame(buf, area, &title(d, t), s.view.focus == PanelId::Tokens, t);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let mut top = inner.y;
        if d.meta.decoder.is_none() {
            // Inside, not in the title: a narrow panel clips its title.
            let label = d.meta.ids_label.as_deref().unwrap_or(IDS);
            put(buf, inner, inner.x, top, label, t.fg(Tone::Dim));
            top += 1;
        }
        if let Some(dv) = &d.divergence {
            let (glyph, tone) = t.verdict(Some(dv.verdict));
            let m = dv.margin.map_or("—".into(), |m| format!("{m:.1e}"));
            let txt = format!(
                "{glyph} first divergence at pass {}: gpu {:?} ref {:?} margin {m} ({})",
                dv.pass,
                dv.gpu,
                dv.reference,
                verdict_name(dv.verdict)
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
        let w = inner.width as usize;
        // A tail of tokens that surely covers h lines (a line wastes less than a word's
        // width; words are counted at their width plus a line's slack).
        let budget = w * h * 2;
        let mut start = d.tokens.len();
        let mut acc = 0;
        while start > 0 && acc < budget {
            start -= 1;
            acc += width(&piece(d, t, &d.tokens[start])).max(1);
        }
        let mut pieces = Vec::with_capacity(d.tokens.len() - start);
        let mut prev: Option<String> = None;
        for i in start..d.tokens.len() {
            let c = &d.tokens[i];
            let p = piece(d, t, c);
            let sw = starts_word(c, &p, prev.as_deref(), t.glyphs.newline);
            let pw = width(&p);
            pieces.push((i, p.clone(), pw, sw));
            prev = Some(p);
        }
        let lines = wrap(&pieces, w);
        let skip = lines.len().saturating_sub(h);
        for (li, l) in lines.iter().skip(skip).enumerate() {
            let y = top + li as u16;
            let mut x = inner.x;
            for &i in l {
                let c = &d.tokens[i];
                let p = &pieces[i - start].1;
                // A line never starts with the space that separated it from the last word.
                let p = if x == inner.x && !c.restart {
                    p.strip_prefix(' ').unwrap_or(p)
                } else {
                    p
                };
                x = put(buf, inner, x, y, p, style(d, t, c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(words: &[&str]) -> Vec<(usize, String, usize, bool)> {
        words
            .iter()
            .enumerate()
            .map(|(i, w)| (i, w.to_string(), width(w), i == 0 || w.starts_with(' ')))
            .collect()
    }

    #[test]
    fn wrapping_breaks_between_words_not_inside_them() {
        // " let" "'" "s" " go" " to": at width 8, " let's" (6) then " go to" (6).
        let p = pieces(&[" let", "'", "s", " go", " to"]);
        assert_eq!(wrap(&p, 8), vec![vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn a_word_wider_than_the_line_breaks_between_its_tokens() {
        let p = pieces(&[" abcd", "efgh", "ijkl"]);
        assert_eq!(wrap(&p, 9), vec![vec![0, 1], vec![2]]);
    }
}
