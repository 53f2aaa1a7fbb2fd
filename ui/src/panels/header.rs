//! Header: what runs where, how fast, and whether it is correct.
//!
//! ```text
//! baro-top │ FROZEN at pass 812 · live 977 │ NVIDIA H200 · driver 580.159.04 │ llama-1b Q4_0 │ mega │ …
//! ✓ fail-word clean │ 640 tok/s (median of 256 passes) ▂▃▅▇▆ │ pass p50 1.55 ms │ … │ power fast (120 fast 3 slow
//! 5 ?) │ contended: 1 GPU client · 12/128 │ lock held by pid 4242 (baro-top bench) │ rec — │ HBM 0.43 TB/s 9% of 4.80
//! ✗ 3 failed passes: last #707 fail-word 0x00000201 FAIL barrier-timeout+output-poisoned …
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Widget;

use super::Ctx;
use crate::text::{dur_or_dash, put};
use crate::theme::Tone;
use crate::view::UiState;

/// The header panel.
pub struct Header<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
}

impl Widget for &Header<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        self.identity(area, buf);
        if area.height < 2 {
            return;
        }
        self.status(area, buf);
        if area.height < 3 {
            return;
        }
        producer(self.ctx, area, buf);
        self.last_fail(area, buf);
    }
}

impl Header<'_> {
    /// The separator between segments.
    fn sep(&self) -> String {
        format!(" {} ", self.ctx.theme.glyphs.border[5])
    }

    /// Line 1: identity and badges.
    fn identity(&self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let live = &s.live;
        let d = s.shown();
        let sep = self.sep();
        let dim = t.fg(Tone::Dim);
        let mut x = put(
            buf,
            area,
            area.x,
            area.y,
            "baro-top",
            t.fg(Tone::Accent).add_modifier(Modifier::BOLD),
        );
        let mut seg = |x: &mut u16, s: &str, st| {
            *x = put(buf, area, *x, area.y, &sep, dim);
            *x = put(buf, area, *x, area.y, s, st);
        };
        // What the display is doing comes first, so a narrow terminal still shows it.
        if s.frozen.is_some() {
            let at = d.passes.back().map_or(0, |p| p.pass);
            let now = live.passes.back().map_or(0, |p| p.pass);
            seg(
                &mut x,
                &format!("FROZEN at pass {at} · live {now}"),
                t.fg(Tone::Warn)
                    .add_modifier(Modifier::REVERSED | Modifier::BOLD),
            );
        }
        if s.view.paused {
            seg(
                &mut x,
                "PAUSED",
                t.fg(Tone::Warn).add_modifier(Modifier::BOLD),
            );
        }
        match &d.run {
            Some(r) => {
                let quant = d
                    .meta
                    .quant
                    .as_deref()
                    .map(|q| format!(" {q}"))
                    .unwrap_or_default();
                let dispatch = d.dispatch.unwrap_or(r.dispatch);
                seg(
                    &mut x,
                    &crate::text::device_label(&r.device, &r.driver),
                    Default::default(),
                );
                seg(&mut x, &format!("{}{quant}", r.model), Default::default());
                seg(&mut x, &format!("{dispatch}"), t.fg(Tone::Accent));
                seg(
                    &mut x,
                    &format!("grid {}×{}", r.grid, r.wg_size),
                    Default::default(),
                );
                // Off the reference path: say so where every screen shows it.
                for l in r.path_labels() {
                    seg(&mut x, &l, t.fg(Tone::Warn));
                }
            }
            None => seg(&mut x, "waiting for the telemetry stream…", dim),
        }
        if let Some(e) = &live.end {
            seg(&mut x, &format!("ENDED: {e}"), t.fg(Tone::Warn));
        }
    }

    /// Line 2: correctness first (it must survive a narrow terminal), then speed, pass time,
    /// lag, drops; room for power/contention/rec.
    fn status(&self, area: Rect, buf: &mut Buffer) {
        let (s, t) = (self.ctx.s, self.ctx.theme);
        let live = &s.live;
        let d = s.shown();
        let sep = self.sep();
        let dim = t.fg(Tone::Dim);
        let y = area.y + 1;
        let (status, st) = if live.failed == 0 && live.mismatched == 0 {
            (format!("{} fail-word clean", t.glyphs.ok), t.fg(Tone::Good))
        } else {
            let txt = format!(
                "{} {} failed passes, {} wrong tokens",
                t.glyphs.bad, live.failed, live.mismatched
            );
            (
                txt,
                t.fg(Tone::Bad)
                    .add_modifier(Modifier::BOLD | Modifier::REVERSED),
            )
        };
        let x = put(buf, area, area.x, y, &status, st);
        let x = put(buf, area, x, y, &sep, dim);
        // One number, its window named: the median over the newest passes.
        let (med, n) = d.tok_s();
        let tok = match med {
            Some(v) => format!("{v:.0} tok/s (median of {n} passes) "),
            None => "— tok/s ".into(),
        };
        let mut x = put(buf, area, x, y, &tok, Default::default());
        let rates: Vec<f64> = d
            .passes
            .iter()
            .rev()
            .take(24)
            .rev()
            .map(|p| {
                if p.wall_ns > 0 {
                    1e9 / p.wall_ns as f64
                } else {
                    0.0
                }
            })
            .collect();
        let (lo, hi) = rates
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), &v| (a.min(v), b.max(v)));
        for r in &rates {
            let lvl = if hi > lo {
                1 + ((r - lo) / (hi - lo) * 7.0) as usize
            } else {
                4
            };
            x = put(
                buf,
                area,
                x,
                y,
                t.glyphs.bars[lvl.min(8)],
                t.fg(Tone::Accent),
            );
        }
        let mut seg = |x: &mut u16, s: &str, st| {
            *x = put(buf, area, *x, y, &sep, dim);
            *x = put(buf, area, *x, y, s, st);
        };
        let p = &s.derived.pass;
        seg(
            &mut x,
            &format!("pass p50 {} p99 {}", dur_or_dash(p.p50), dur_or_dash(p.p99)),
            Default::default(),
        );
        seg(
            &mut x,
            &format!("ref lag {}", live.ref_lag),
            if live.ref_lag > 8 {
                t.fg(Tone::Warn)
            } else {
                Default::default()
            },
        );
        let dst = if live.dropped > 0 {
            t.fg(Tone::Warn)
        } else {
            Default::default()
        };
        seg(&mut x, &format!("dropped ui {}", live.dropped), dst);
        for (text, tone) in disturbance(d) {
            seg(&mut x, &text, t.fg(tone));
        }
        match &s.view.recording {
            Some(r) => {
                let st = t.fg(Tone::Bad).add_modifier(Modifier::BOLD);
                seg(&mut x, &rec_badge(r), st);
            }
            None => seg(&mut x, "rec —", dim),
        }
        // Last (the disturbance labels and the recording come first where the width is
        // short): the weights over the median pass against the memory's roofline, a GPU's
        // only (a CPU device's "bandwidth" says nothing about a GPU).
        if let Some(txt) = roofline(d, p.p50) {
            seg(&mut x, &txt, Default::default());
        }
    }

    /// Line 3: the last fail line, impossible to miss; quiet when clean.
    fn last_fail(&self, area: Rect, buf: &mut Buffer) {
        let t = self.ctx.theme;
        let live = &self.ctx.s.live;
        if let Some((pass, line)) = &live.last_fail {
            let txt = format!("{} pass {pass}: {line}", t.glyphs.bad);
            let st = t.fg(Tone::Bad).add_modifier(Modifier::BOLD);
            put(buf, area, area.x, area.y + 2, &txt, st);
        } else if let Some(dv) = &live.divergence {
            let (g, tone) = t.verdict(Some(dv.verdict));
            let txt = format!(
                "{g} tokens diverged from the reference at pass {} ({})",
                dv.pass,
                crate::text::verdict_name(dv.verdict)
            );
            put(
                buf,
                area,
                area.x,
                area.y + 2,
                &txt,
                t.fg(tone).add_modifier(Modifier::BOLD),
            );
        }
    }
}

/// The pass's weight stream over the median pass time, and its share of the device's peak
/// where known: `HBM 2.04 TB/s 42% of 4.80` (`HBM 2.04 TB/s` without a peak); `None` on a
/// CPU device, before a pass, or without the stages' weight bytes.
pub fn roofline(d: &crate::state::Data, p50_ns: u64) -> Option<String> {
    let bytes = (d.meta.weight_bytes.iter()).fold(0, |a: u64, &b| a.saturating_add(b));
    if d.on_cpu() || bytes == 0 || p50_ns == 0 {
        return None;
    }
    let rate = bytes as f64 * 1e9 / p50_ns as f64;
    Some(match d.meta.peak_bytes_per_s {
        Some(peak) if peak > 0.0 => format!(
            "HBM {:.2} TB/s {:.0}% of {:.2}",
            rate / 1e12,
            rate / peak * 100.0,
            peak / 1e12
        ),
        _ => format!("HBM {:.2} TB/s", rate / 1e12),
    })
}

/// The header's recording badge: `REC file 12.3 MiB`.
pub fn rec_badge(r: &crate::action::RecStatus) -> String {
    let b = r.bytes as f64;
    let size = if b >= (1 << 20) as f64 {
        format!("{:.1} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    };
    format!("REC {} {size}", r.file)
}

/// The power mode and contention of the newest pass with their counts over the window (`n/a
/// (CPU device)` on a CPU device), and another timing run holding the GPU's lock: `power fast (120 fast 3 slow 5 ?)`,
/// `contended: CPU 75% busy · 12/128`, `lock held by pid 4242 (baro-top bench)`.
pub fn disturbance(d: &crate::state::Data) -> Vec<(String, Tone)> {
    use baro_telemetry::labels::mode_name;
    use baro_telemetry::PowerMode;
    let dist = &d.disturbance;
    let n = d.disturbance_counts();
    let mut v = Vec::with_capacity(3);
    if d.on_cpu() {
        // A CPU device has no power states and no GPU to share.
        v.push(("power n/a (CPU device)".into(), Tone::Dim));
        v.push(("contention n/a (CPU device)".into(), Tone::Dim));
        return v;
    }
    let tone = match dist.mode {
        PowerMode::Fast => Tone::Good,
        PowerMode::Slow => Tone::Warn,
        PowerMode::Unknown => Tone::Dim,
    };
    v.push((
        format!(
            "power {} ({} fast {} slow {} ?)",
            mode_name(dist.mode),
            n.fast,
            n.slow,
            n.unknown
        ),
        tone,
    ));
    let c = &dist.contention;
    let counts = format!("{}/{}", n.contended, n.passes);
    v.push(if c.is_quiet() {
        let tone = if n.contended > 0 {
            Tone::Warn
        } else {
            Tone::Good
        };
        (format!("quiet · contended {counts}"), tone)
    } else {
        let mut why: Vec<String> = c.reasons.iter().map(short_reason).collect();
        if why.is_empty() {
            why.push("busy".into());
        }
        (
            format!("contended: {} · {counts}", why.join(", ")),
            Tone::Warn,
        )
    });
    if let Some(h) = &dist.lock_holder {
        let mut cmd: String = h.command.chars().take(40).collect();
        if cmd.len() < h.command.len() {
            cmd.push('…');
        }
        v.push((format!("lock held by pid {} ({cmd})", h.pid), Tone::Warn));
    }
    v
}

/// A contention reason in a few words (the log has the whole sentence).
fn short_reason(r: &baro_telemetry::ContentionReason) -> String {
    use baro_telemetry::ContentionReason as R;
    match r {
        R::GpuClients { count, .. } => {
            format!("{count} GPU client{}", if *count == 1 { "" } else { "s" })
        }
        R::CpuBusy { fraction } => format!("CPU {:.0}% busy", fraction * 100.0),
        R::TimeSliced { .. } => "time-sliced".into(),
        R::HostLock { holder } => format!("lock pid {}", holder.pid),
    }
}

/// Header lines the producer adds under the usual three at `width` columns: its banner
/// (each line wrapped, see [`banner_rows`]), then a position bar.
pub fn producer_lines(s: &UiState, width: u16) -> u16 {
    s.view
        .producer
        .as_ref()
        .map_or(0, |p| banner_rows(&p.banner, width).len() as u16 + 1)
}

/// Most rows one banner line after the first may take.
const BANNER_WRAP: usize = 3;

/// The banner as drawn at `width` columns, each line word-wrapped into at most
/// [`BANNER_WRAP`] rows so a narrow terminal keeps it whole: the first line (`REPLAY of …`,
/// its rows marked `true`, drawn in reverse video), then the later ones (why it is not
/// live, what to do).
pub fn banner_rows(banner: &[String], width: u16) -> Vec<(bool, String)> {
    let w = (width as usize).max(20);
    let mut out = vec![];
    for (i, line) in banner.iter().enumerate() {
        let mut rows: Vec<String> = vec![];
        let mut cur = String::new();
        for word in line.split(' ') {
            if !cur.is_empty() && crate::text::width(&cur) + 1 + crate::text::width(word) > w {
                rows.push(std::mem::take(&mut cur));
            } else if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        rows.push(cur);
        out.extend(rows.into_iter().take(BANNER_WRAP).map(|r| (i == 0, r)));
    }
    out
}

/// The producer's banner (reverse video: a replay must never pass for a live run) and the
/// position bar `pass k of N ▕████░░░░▏ speed 1×`.
fn producer(ctx: &Ctx, area: Rect, buf: &mut Buffer) {
    let (s, t) = (ctx.s, ctx.theme);
    let Some(p) = &s.view.producer else {
        return;
    };
    let mut y = area.y + 3;
    let warn = t.fg(Tone::Warn).add_modifier(Modifier::BOLD);
    for (first, line) in banner_rows(&p.banner, area.width) {
        if y >= area.bottom() {
            return;
        }
        let st = if first {
            warn.add_modifier(Modifier::REVERSED)
        } else {
            warn
        };
        put(buf, area, area.x, y, &line, st);
        y += 1;
    }
    if y >= area.bottom() {
        return;
    }
    let pass = p.pass.map_or("—".into(), |v| v.to_string());
    let total = p.total.map_or("?".into(), |v| v.to_string());
    let k = p.position.unwrap_or(0);
    let label = format!("pass {pass} · {k} of {total} ");
    let mut x = put(buf, area, area.x, y, &label, Default::default());
    let speed = if p.speed > 0.0 {
        format!(" speed {}×", p.speed)
    } else {
        " speed max".into()
    };
    // The bar gives way so the speed stays on screen: 40 cells where they fit, down to 8.
    let room = (area.width as usize)
        .saturating_sub(crate::text::width(&label) + 2 + crate::text::width(&speed));
    let w = room.clamp(8, 40) as u64;
    let filled = match p.total {
        Some(n) if n > 0 => (k.min(n) * w / n) as usize,
        _ => 0,
    };
    let (full, empty) = (t.glyphs.bars[8], t.glyphs.wait);
    let bar = full.repeat(filled) + &empty.repeat(w as usize - filled);
    x = put(buf, area, x, y, &format!("[{bar}]"), t.fg(Tone::Accent));
    let keys = ctx.keys;
    let hint = format!(
        "{speed} · {} seek · {} slowest · {} restart · {} pause · {} step",
        keys.first_key(crate::action::Action::Seek)
            .unwrap_or_default(),
        keys.first_key(crate::action::Action::SeekSlowest)
            .unwrap_or_default(),
        keys.first_key(crate::action::Action::Restart)
            .unwrap_or_default(),
        keys.first_key(crate::action::Action::PauseResume)
            .unwrap_or_default(),
        keys.first_key(crate::action::Action::Step)
            .unwrap_or_default(),
    );
    put(buf, area, x, y, &hint, t.fg(Tone::Dim));
}
