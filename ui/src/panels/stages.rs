//! Stage table: per stage (or per kind summed over layers) busy and charged percentiles,
//! share of the pass, effective bandwidth over busy time against the device's peak, and over
//! charged time (the stage's wall); sortable.
//!
//! ```text
//! ┌ stages · window 256 passes · sort busy↓ ──────────────────────────────────────┐
//! │  stage       busy p50   p90   p99  p99.9   max │ chg p50   p99 │ share   GB/s  peak chg GB/s │
//! │█ ffn_up.l3     25.0µs …                         │  33.5µs ⚠     │  2.1%  2811   65%     2098 │
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use super::{ralign, Ctx};
use crate::text::{clip, dur, put};
use crate::theme::{kind_letter, Tone};
use crate::view::{PanelId, Scope, SortCol, GAP_MIN_FRAC, GAP_MIN_NS};

/// The stage table panel.
pub struct Stages<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

/// The scope as words.
pub fn scope_name(s: Scope, passes: u64) -> String {
    match s {
        Scope::All => format!("all {passes} passes"),
        Scope::Window => format!("window {passes} passes"),
        Scope::Range(lo, hi) => format!("passes {lo}–{hi} ({passes})"),
    }
}

impl Widget for &Stages<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let v = &s.view;
        let focused = v.focus == PanelId::Stages;
        let sort = match v.sort.0 {
            SortCol::Order => "order",
            SortCol::Busy => "busy",
            SortCol::Charged => "charged",
            SortCol::Gap => "charged−busy",
            SortCol::P99 => "busy p99",
        };
        let dir = if v.sort.1 { "↓" } else { "↑" };
        let title = format!(
            "{} · {} · sort {sort}{dir}",
            if v.by_kind { "stage kinds" } else { "stages" },
            scope_name(v.scope, s.derived.passes)
        );
        let inner = super::frame(buf, area, &title, focused, t);
        if inner.height == 0 {
            return;
        }
        let peak = s.shown().meta.peak_bytes_per_s;
        // Columns: name, then numbers dropped from the right when narrow.
        let cols: [(&str, usize); 12] = [
            ("busy p50", 9),
            ("p90", 9),
            ("p99", 9),
            ("p99.9", 9),
            ("max", 9),
            ("chg p50", 10),
            ("chg p99", 9),
            ("max", 9),
            ("share", 7),
            ("GB/s", 7),
            ("peak", 5),
            ("chg GB/s", 9),
        ];
        let name_w = 14usize;
        let avail = (inner.width as usize).saturating_sub(name_w + 2);
        let mut shown = 0;
        let mut used = 0;
        for (_, w) in cols {
            if used + w > avail {
                break;
            }
            used += w;
            shown += 1;
        }
        let mut hdr = format!("  {:<name_w$}", "stage");
        for (h, w) in cols.iter().take(shown) {
            hdr.push_str(&ralign(h, *w));
        }
        put(buf, inner, inner.x, inner.y, &hdr, t.fg(Tone::Dim));
        let rows = &s.derived.stages;
        let body = inner.height.saturating_sub(1) as usize;
        let sel = v.row.min(rows.len().saturating_sub(1));
        let first = sel.saturating_sub(body.saturating_sub(1));
        for (i, r) in rows.iter().enumerate().skip(first).take(body) {
            let y = inner.y + 1 + (i - first) as u16;
            let sym = if t.colored() {
                t.glyphs.work.to_string()
            } else {
                kind_letter(r.kind).to_string()
            };
            let mut x = put(buf, inner, inner.x, y, &sym, t.fg(Tone::Kind(r.kind)));
            let rst = if focused && i == sel {
                t.selected()
            } else {
                Default::default()
            };
            x = put(
                buf,
                inner,
                x + 1,
                y,
                &format!("{:<name_w$}", clip(&r.name, name_w)),
                rst,
            );
            let gap = r.charged.p50.saturating_sub(r.busy.p50);
            let warn = gap >= GAP_MIN_NS && gap as f64 >= GAP_MIN_FRAC * r.busy.p50 as f64;
            let cells = [
                (dur(r.busy.p50), Tone::Accent),
                (dur(r.busy.p90), Tone::Dim),
                (dur(r.busy.p99), Tone::Dim),
                (dur(r.busy.p999), Tone::Dim),
                (dur(r.busy.max), Tone::Dim),
                (
                    if warn {
                        format!("{}{}", t.glyphs.warn, dur(r.charged.p50))
                    } else {
                        dur(r.charged.p50)
                    },
                    if warn { Tone::Warn } else { Tone::Dim },
                ),
                (dur(r.charged.p99), Tone::Dim),
                (dur(r.charged.max), Tone::Dim),
                (format!("{:.1}%", r.share * 100.0), Tone::Dim),
                (
                    r.bw.map_or("—".into(), |b| format!("{:.0}", b / 1e9)),
                    Tone::Dim,
                ),
                (
                    match (r.bw, peak) {
                        (Some(b), Some(p)) if p > 0.0 => format!("{:.0}%", b / p * 100.0),
                        _ => "—".into(),
                    },
                    Tone::Dim,
                ),
                (
                    r.bw_charged
                        .map_or("—".into(), |b| format!("{:.0}", b / 1e9)),
                    Tone::Dim,
                ),
            ];
            for (j, (txt, tone)) in cells.iter().enumerate().take(shown) {
                let st = if *tone == Tone::Dim {
                    Default::default()
                } else {
                    t.fg(*tone)
                };
                x = put(buf, inner, x, y, &ralign(txt, cols[j].1), st);
            }
        }
        if rows.is_empty() {
            put(
                buf,
                inner,
                inner.x,
                inner.y + 1,
                "no stage timings yet",
                t.fg(Tone::Dim),
            );
        }
    }
}
