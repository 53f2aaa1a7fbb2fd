//! Flame chart: one pass as a timeline, a row per workgroup (zoomed out: bands of
//! workgroups per row) or, toggled, a row per stage; spans coloured by stage kind (a letter
//! per kind without colour), barrier waits drawn as waits, level boundaries ticked on the
//! ruler, a cursor that names the span under it. Zoomed out, rows are bands of consecutive
//! workgroups, not SMs: the telemetry carries no SM id (a workgroup's SM is not observable
//! from the shader portably), and a persistent grid of one workgroup per SM makes a band of
//! workgroups the nearest stand-in.
//!
//! ```text
//! ┌ flame · pass 812 latest · 132 wg, 17/row · 0–1.55 ms ──────────────┐
//! │      ┊    ┊  ┊     ┊    ▼   ┊     ┊                                 │ ruler: levels, cursor
//! │0-16  ███▓▓███░░██████░░████████░░███                                │
//! │17-33 ███▓▓███░░███████░████████░░███                                │
//! │ffn_up.l3 · wg 97 · start 812.3 µs · 33.5 µs                         │ span under the cursor
//! └─────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use std::sync::Arc;

use baro_telemetry::spans::MISSING;
use baro_telemetry::{Frame, StageKind};

use super::Ctx;
use crate::flame_cache::{Extents, Key, Scratch};
use crate::state::Geometry;
use crate::text::{cell, dur, put};
use crate::theme::{Theme, Tone};
use crate::view::{PanelId, Pick, View};

/// The flame chart panel.
pub struct Flame<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

const GUTTER: u16 = 8;
/// [`kind_letter`] as strings, by kind code (no allocation per cell).
const LETTERS: [&str; 9] = ["q", "k", "v", "a", "o", "f", "d", "h", "x"];
const WAIT: usize = StageKind::ALL.len();

/// The plot (cells that map to time) inside the panel's area.
pub fn plot(area: Rect) -> Rect {
    let inner = Rect::new(
        area.x.saturating_add(1),
        area.y.saturating_add(1),
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    let g = GUTTER.min(inner.width / 3);
    Rect::new(
        inner.x + g,
        inner.y.saturating_add(1),
        inner.width - g,
        inner.height.saturating_sub(2),
    )
}

/// Rows: (label, workgroups lo..hi) when by workgroup, or stage ids when by stage.
fn rows(f: &Frame, by_stage: bool, n: u16) -> Vec<(String, u32, u32)> {
    let g = f.spans.grid();
    if by_stage {
        return (0..f.spans.stages())
            .map(|s| (String::new(), s, s + 1))
            .collect();
    }
    let n = (n as u32).max(1);
    let band = g.div_ceil(n).max(1);
    (0..g.div_ceil(band))
        .map(|r| {
            let (lo, hi) = (r * band, ((r + 1) * band).min(g));
            let label = if hi - lo == 1 {
                format!("wg {lo}")
            } else {
                format!("{lo}-{}", hi - 1)
            };
            (label, lo, hi)
        })
        .collect()
}

/// A raster cell with too little work in it to draw (a level tick or a space).
const BLANK: u8 = u8::MAX;
/// Coverage slots per cell: one per stage kind, the last for barrier waits.
const SLOTS: usize = WAIT + 1;

/// One raster row's coverage being summed: partial columns in ns (`part`) and whole columns
/// as +1/-1 counts (`full`, prefix-summed afterwards), [`SLOTS`] per column.
struct Row<'a> {
    part: &'a mut Vec<u32>,
    full: &'a mut Vec<i32>,
    bounds: &'a [u64],
    t0: u64,
    t1: u64,
    mul: u64,
    last: usize,
}

impl Row<'_> {
    /// Add the interval `a..b` (ns from the pass start) to slot `k`.
    #[inline(always)]
    fn add(&mut self, a: u32, b: u32, k: usize) {
        let (a, b) = ((a as u64).max(self.t0), (b as u64).min(self.t1));
        if b <= a {
            return;
        }
        let ca = (((a - self.t0) * self.mul) >> 32).min(self.last as u64) as usize;
        let cb = (((b - 1 - self.t0) * self.mul) >> 32).min(self.last as u64) as usize;
        if ca == cb {
            let p = &mut self.part[ca * SLOTS + k];
            *p = p.saturating_add((b - a) as u32);
            return;
        }
        let bounds = self.bounds;
        let over = |c: usize| b.min(bounds[c + 1]).saturating_sub(a.max(bounds[c])) as u32;
        let p = &mut self.part[ca * SLOTS + k];
        *p = p.saturating_add(over(ca));
        let p = &mut self.part[cb * SLOTS + k];
        *p = p.saturating_add(over(cb));
        if cb > ca + 1 {
            self.full[(ca + 1) * SLOTS + k] += 1;
            self.full[cb * SLOTS + k] -= 1;
        }
    }
}

/// Cell codes per visible row × column: the dominant stage kind's code, [`WAIT`] for a
/// barrier wait, or [`BLANK`] where the row's workgroups were busy less than a quarter of
/// the column. Row by row, so the row's coverage sums stay in the L1 cache (a 400-column row
/// is 16 KiB); per row one pass over the spans that can reach the window (stages outside it
/// are skipped by their extents). A span adds its partial first and last columns directly
/// and its whole columns to a difference array, so the cost is spans + cells, never
/// spans × columns.
#[allow(clippy::too_many_arguments)]
fn raster(
    f: &Frame,
    ext: &Extents,
    scratch: &mut Scratch,
    kinds: &[StageKind],
    by_stage: bool,
    band: u32,
    scroll: usize,
    nrows: usize,
    (t0, t1): (u64, u64),
    cols: usize,
) -> Vec<u8> {
    let sp = &f.spans;
    let g = sp.grid() as usize;
    let band = band.max(1) as usize;
    let span = (t1 - t0).max(1);
    let bounds: Vec<u64> = (0..=cols as u64)
        .map(|c| t0 + c * span / cols as u64)
        .collect();
    // Column of an offset d < span: (d * mul) >> 32, a multiplication, not a division (this
    // runs for every span in the window); d * mul < cols * 2^32, no overflow.
    let mul = ((cols as u64) << 32) / span;
    let ns_per_col = span as f64 / cols as f64;
    let hits = |(lo, hi): (u32, u32)| lo <= hi && (hi as u64) > t0 && (lo as u64) < t1;
    let stages: Vec<(u32, usize)> = (0..sp.stages())
        .filter(|&st| hits(ext.stage[st as usize]))
        .map(|st| (st, kinds.get(st as usize).map_or(0, |k| k.code() as usize)))
        .collect();
    let levels: Vec<u32> = (0..sp.levels())
        .filter(|&l| !by_stage && hits(ext.level[l as usize]))
        .collect();
    // One row's partial columns, ns, and whole columns as +1/-1 counts (prefix-summed).
    let Scratch { part, full } = scratch;
    let mut out = vec![BLANK; nrows * cols];
    for row in 0..nrows {
        let r = row + scroll;
        part.clear();
        part.resize(cols * SLOTS, 0);
        full.clear();
        full.resize((cols + 1) * SLOTS, 0);
        let mut acc = Row {
            part,
            full,
            bounds: &bounds,
            t0,
            t1,
            mul,
            last: cols - 1,
        };
        let wgs = if by_stage {
            0..g
        } else {
            (r * band).min(g)..((r + 1) * band).min(g)
        };
        let one;
        let row_stages: &[(u32, usize)] = if by_stage {
            one = stages.iter().find(|&&(st, _)| st as usize == r).copied();
            one.as_slice()
        } else {
            &stages
        };
        for &(st, k) in row_stages {
            let Some((s, e)) = sp.stage_stamps(st) else {
                continue;
            };
            for (&a, &b) in s[wgs.clone()].iter().zip(&e[wgs.clone()]) {
                if a != MISSING && b != MISSING {
                    acc.add(a, b, k);
                }
            }
        }
        for &l in &levels {
            let Some((s, e)) = sp.level_stamps(l) else {
                continue;
            };
            for (&a, &b) in s[wgs.clone()].iter().zip(&e[wgs.clone()]) {
                if a != MISSING && b != MISSING {
                    acc.add(a, b, WAIT);
                }
            }
        }
        let n = wgs.len().max(1);
        let Row { part, full, .. } = acc;
        let min_used = 0.25 * n as f64 * if by_stage { 0.1 } else { 1.0 } * ns_per_col;
        let mut run = [0i64; SLOTS];
        for (c, code) in out[row * cols..(row + 1) * cols].iter_mut().enumerate() {
            let width = bounds[c + 1] - bounds[c];
            let (mut best, mut used) = ((0usize, 0u32), 0f64);
            for (k, run) in run.iter_mut().enumerate() {
                *run += full[c * SLOTS + k] as i64;
                let whole = ((*run).max(0).unsigned_abs() * width).min(u32::MAX as u64) as u32;
                let v = part[c * SLOTS + k].saturating_add(whole);
                used += v as f64;
                if v > best.1 {
                    best = (k, v);
                }
            }
            if used >= min_used && best.1 > 0 {
                *code = best.0 as u8;
            }
        }
    }
    out
}

/// What is under time `t` on a row: (label, start, duration).
fn under(ctx: &Ctx, f: &Frame, row: &(String, u32, u32), by_stage: bool, t: u32) -> Option<String> {
    let sp = &f.spans;
    let run = ctx.s.shown().run.as_ref()?;
    let name = |s: u32| {
        run.stages
            .get(s as usize)
            .map_or("?".into(), |d| d.name.to_string())
    };
    let (stages, wgs): (Vec<u32>, Vec<u32>) = if by_stage {
        (vec![row.1], (0..sp.grid()).collect())
    } else {
        ((0..sp.stages()).collect(), (row.1..row.2).collect())
    };
    for &w in &wgs {
        for &s in &stages {
            if let Some((a, b)) = sp.span(s, w) {
                if a <= t && t < b {
                    return Some(format!(
                        "{} · wg {w} · start {} · {}",
                        name(s),
                        dur(a as u64),
                        dur((b - a) as u64)
                    ));
                }
            }
        }
    }
    for &w in &wgs {
        for l in 0..sp.levels() {
            if let (Some(a), Some(e)) = (sp.arrive(l, w), sp.exit(l, w)) {
                if a <= t && t < e {
                    return Some(format!(
                        "barrier wait after {} · wg {w} · {}",
                        run.level_name(l),
                        dur((e - a) as u64)
                    ));
                }
            }
        }
    }
    None
}

/// The panel's title: the pass and how it was picked, the rows' grouping, the window.
fn title(
    v: &View,
    f: &Frame,
    rows: &[(String, u32, u32)],
    (t0, t1): (u64, u64),
    total: u64,
) -> String {
    let how = match v.pick {
        Pick::Latest => "latest",
        Pick::Slowest => "slowest",
        Pick::Pass(_) => "pinned",
    };
    let grouping = if v.by_stage {
        format!("{} stages", rows.len())
    } else {
        let band = rows.first().map_or(1, |r| r.2 - r.1);
        format!("{} wg, {band}/row", f.spans.grid())
    };
    format!(
        "flame · pass {} {how} · {grouping} · {}–{} of {}",
        f.pass,
        dur(t0),
        dur(t1),
        dur(total)
    )
}

/// The ruler's level boundaries (the first exit of each of `levels` barriers) drawn at
/// `ruler_y` above `plot`; their columns.
fn level_ticks(
    buf: &mut Buffer,
    plot: Rect,
    ruler_y: u16,
    geom: &Geometry,
    levels: u32,
    col_of: impl Fn(u64) -> f64,
    t: &Theme,
) -> Vec<u16> {
    let cols = plot.width as usize;
    let mut level_cols = vec![];
    for l in 0..levels {
        let first = geom
            .level_exit
            .get(l as usize)
            .copied()
            .filter(|&e| e != u32::MAX);
        if let Some(e) = first {
            let c = col_of(e as u64);
            if c >= 0.0 && c < cols as f64 {
                level_cols.push(c as u16);
                cell(
                    buf,
                    plot.union(Rect::new(plot.x, ruler_y, 1, 1)),
                    plot.x + c as u16,
                    ruler_y,
                    t.glyphs.level,
                    t.fg(Tone::Dim),
                );
            }
        }
    }
    level_cols
}

/// A raster cell's style and symbol: blank (a level tick where `tick`), a barrier wait, or
/// the dominant stage kind (its letter without colour).
fn glyph(t: &Theme, code: u8, tick: bool) -> (Style, &'static str) {
    let k = code as usize;
    if code == BLANK {
        let sym = if tick { t.glyphs.level } else { " " };
        (t.fg(Tone::Dim), sym)
    } else if k == WAIT {
        (t.fg(Tone::Wait), t.glyphs.wait)
    } else {
        let kind = StageKind::ALL[k];
        let sym = if t.colored() {
            t.glyphs.work
        } else {
            LETTERS[k]
        };
        (t.fg(Tone::Kind(kind)), sym)
    }
}

impl Widget for &Flame<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let v = &s.view;
        let focused = v.focus == PanelId::Flame;
        let Some(f) = s.flame_frame() else {
            let inner = super::frame(buf, area, "flame · no pass with spans yet", focused, t);
            put(
                buf,
                inner,
                inner.x,
                inner.y,
                "waiting for an instrumented pass…",
                t.fg(Tone::Dim),
            );
            return;
        };
        let geom = s.shown().geometry_of(f);
        let total = geom.extent;
        let (t0, t1) = (
            (v.zoom.0 * total as f64) as u64,
            ((v.zoom.0 + v.zoom.1) * total as f64) as u64,
        );
        let plot = plot(area);
        let rows = rows(f, v.by_stage, plot.height);
        let title = title(v, f, &rows, (t0, t1), total);
        let inner = super::frame(buf, area, &title, focused, t);
        if plot.width == 0 || plot.height == 0 || t1 <= t0 {
            return;
        }
        let cols = plot.width as usize;
        let ns_per_col = (t1 - t0) as f64 / cols as f64;
        let col_of = |ns: u64| -> f64 { (ns as f64 - t0 as f64) / ns_per_col };

        // Ruler: level boundaries (first exit of each barrier) and the cursor.
        let ruler_y = inner.y;
        let level_cols = level_ticks(buf, plot, ruler_y, &geom, f.spans.levels(), col_of, t);
        let ccol = (((v.cursor.0 - v.zoom.0) / v.zoom.1) * cols as f64)
            .clamp(0.0, cols as f64 - 1.0) as u16;
        cell(
            buf,
            inner,
            plot.x + ccol,
            ruler_y,
            t.glyphs.cursor,
            t.fg(Tone::Accent),
        );
        let crow = (v.cursor.1 as usize).min(rows.len().saturating_sub(1));
        let scroll = crow.saturating_sub(plot.height as usize - 1);

        let nrows = (plot.height as usize).min(rows.len().saturating_sub(scroll));
        let band = rows.first().map_or(1, |r| (r.2 - r.1).max(1));
        let key = Key {
            frame: Arc::as_ptr(f) as usize,
            pass: f.pass,
            kinds: (s.shown().kinds.as_ptr() as usize, s.shown().kinds.len()),
            window: (t0, t1),
            cols,
            scroll,
            nrows,
            by_stage: v.by_stage,
            band,
        };
        let raster = s.flame.raster(f, key, |ext, scratch| {
            raster(
                f,
                ext,
                scratch,
                &s.shown().kinds,
                v.by_stage,
                band,
                scroll,
                nrows,
                (t0, t1),
                cols,
            )
        });
        for (ri, row) in rows.iter().enumerate().skip(scroll).take(nrows) {
            let y = plot.y + (ri - scroll) as u16;
            let codes = &raster[(ri - scroll) * cols..(ri - scroll + 1) * cols];
            let label = if v.by_stage {
                s.shown()
                    .run
                    .as_ref()
                    .and_then(|r| r.stages.get(row.1 as usize))
                    .map_or(String::new(), |d| d.name.to_string())
            } else {
                row.0.clone()
            };
            let lst = if ri == crow && focused {
                t.selected()
            } else {
                t.fg(Tone::Dim)
            };
            put(
                buf,
                Rect::new(inner.x, y, plot.x - inner.x, 1),
                inner.x,
                y,
                &label,
                lst,
            );
            for (i, &code) in codes.iter().enumerate() {
                let x = plot.x + i as u16;
                let (mut st, sym) = glyph(t, code, level_cols.contains(&(i as u16)));
                if ri == crow && i as u16 == ccol {
                    st = st.add_modifier(Modifier::REVERSED);
                }
                cell(buf, plot, x, y, sym, st);
            }
        }
        // What is under the cursor.
        let tcur = (t0 as f64 + (ccol as f64 + 0.5) * ns_per_col) as u32;
        let info = rows
            .get(crow)
            .and_then(|r| under(self.ctx, f, r, v.by_stage, tcur))
            .unwrap_or_else(|| format!("idle at {}", dur(tcur as u64)));
        let y = inner.bottom().saturating_sub(1);
        put(
            buf,
            inner,
            inner.x,
            y,
            &format!("{} {info}", t.glyphs.cursor),
            t.fg(Tone::Accent),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::theme::kind_letter;

    #[test]
    fn letters_match_the_theme_table() {
        for k in StageKind::ALL {
            assert_eq!(LETTERS[k.code() as usize], kind_letter(k).to_string());
        }
    }
}
