//! Text that came from outside (token text: a model can emit anything) made safe to draw, and
//! small drawing helpers that never write outside their area.
//!
//! Sanitising strips every control character, ANSI/VT escape sequence (CSI, OSC, DCS, single
//! ESC pairs, C1 controls), bidi overrides and zero-width characters; a newline becomes a
//! visible glyph. Widths are measured with `unicode-width`, so wide characters and emoji
//! take the cells they really take.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use unicode_width::UnicodeWidthChar;

/// Token text in stream order: a token that ends inside a UTF-8 character (a byte token, a
/// byte-level BPE piece of an emoji or a CJK character) shows nothing, and the token that
/// completes the character shows all of it — never U+FFFD for a character the model did
/// produce. The stream starts again where the sequence restarts (position 0) and after a
/// pass this consumer never saw (a dropped frame), so bytes are only joined across
/// consecutive passes.
#[derive(Clone, Debug, Default)]
pub struct TokenStream {
    utf8: baro_telemetry::utf8::StreamDecoder,
    next_pass: Option<u64>,
}

impl TokenStream {
    /// The text that token `id` (produced by pass `pass` at position `pos`) adds; `d` gives a
    /// token's bytes (a [`crate::state::Decoder`]).
    pub fn push(&mut self, d: &dyn Fn(u32) -> Vec<u8>, pass: u64, pos: u32, id: u32) -> String {
        if pos == 0 || self.next_pass != Some(pass) {
            self.utf8 = baro_telemetry::utf8::StreamDecoder::new();
        }
        self.next_pass = Some(pass + 1);
        let mut s = String::new();
        self.utf8.push(&d(id), &mut s);
        s
    }
}

/// `s` with escape sequences and control characters removed; `\n` → `newline`, `\t` → space.
pub fn sanitize(s: &str, newline: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' => out.push_str(newline),
            '\t' => out.push(' '),
            '\u{1b}' => match it.next() {
                // CSI: parameters then one final byte in @..~.
                Some('[') => skip_until(&mut it, |c| ('@'..='~').contains(&c)),
                // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut it),
                _ => {}
            },
            '\u{9b}' => skip_until(&mut it, |c| ('@'..='~').contains(&c)),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            c if c.is_control() => {}
            // Bidi embeddings/overrides/isolates and zero-width joiners or marks.
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' => {}
            '\u{feff}' => {}
            c => {
                if c.width().is_some_and(|w| w > 0) {
                    out.push(c);
                }
            }
        }
    }
    out
}

fn skip_until(it: &mut impl Iterator<Item = char>, end: impl Fn(char) -> bool) {
    for c in it.by_ref() {
        if end(c) {
            break;
        }
    }
}

fn skip_string(it: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = it.next() {
        if c == '\u{7}' || c == '\u{9c}' {
            break;
        }
        if c == '\u{1b}' {
            if it.peek() == Some(&'\\') {
                it.next();
            }
            break;
        }
    }
}

/// Display width of (already sanitised) text.
pub fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Write `s` at (`x`, `y`) clipped to `area` (and the buffer). Returns the x after the text.
pub fn put(buf: &mut Buffer, area: Rect, x: u16, y: u16, s: &str, style: Style) -> u16 {
    let area = area.intersection(buf.area);
    if y < area.top() || y >= area.bottom() || x < area.left() || x >= area.right() {
        return x;
    }
    let max = (area.right() - x) as usize;
    buf.set_stringn(x, y, s, max, style).0
}

/// Fill one cell (if inside `area` and the buffer).
pub fn cell(buf: &mut Buffer, area: Rect, x: u16, y: u16, sym: &str, style: Style) {
    let area = area.intersection(buf.area);
    if x >= area.left() && x < area.right() && y >= area.top() && y < area.bottom() {
        if let Some(c) = buf.cell_mut((x, y)) {
            c.set_symbol(sym).set_style(style);
        }
    }
}

/// Human duration from ns: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn dur(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.2} s", f / 1e9)
    }
}

/// [`dur`], or `—` for 0 (no pass to take a percentile of: a time is never 0 ns).
pub fn dur_or_dash(ns: u64) -> String {
    if ns == 0 {
        "—".into()
    } else {
        dur(ns)
    }
}

/// A device and its driver, each said once: `NVIDIA H200 · driver 580.159.04` for device
/// `NVIDIA H200` and driver `NVIDIA 580.159.04`. A driver string that starts with the
/// device's first word (the vendor, or `llvmpipe`) loses it, and its parenthesised parts the
/// device already names go (`llvmpipe (LLVM 15.0.6, 256 bits) · driver Mesa 22.3.6`).
pub fn device_label(device: &str, driver: &str) -> String {
    let mut drv = driver.trim();
    if let Some(first) = device.split_whitespace().next() {
        let n = first.len();
        if drv.len() >= n
            && drv.is_char_boundary(n)
            && drv[..n].eq_ignore_ascii_case(first)
            && drv[n..].starts_with(' ')
        {
            drv = drv[n..].trim_start();
        }
    }
    let mut out = String::new();
    let mut rest = drv;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')').map(|c| open + c) else {
            break;
        };
        let inner = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        if !device.contains(inner) {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    let drv = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if drv.is_empty() || device.contains(&drv) {
        device.to_string()
    } else {
        format!("{device} · driver {drv}")
    }
}

/// A duration in the headless unit: `62.940 ms`.
pub fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Whole microseconds: `378 µs` (the attribution warnings' unit).
pub fn us(ns: u64) -> String {
    format!("{} µs", ns.saturating_add(500) / 1000)
}

/// A verdict as the screen and the headless lines name it (`near-tie`, never `NearTie`).
pub fn verdict_name(v: baro_telemetry::Verdict) -> &'static str {
    use baro_telemetry::Verdict as V;
    match v {
        V::Match => "match",
        V::NearTie => "near-tie",
        V::Mismatch => "mismatch",
        V::NonFinite => "non-finite",
        V::Uncompared => "uncompared",
    }
}

/// `s` cut to at most `w` display columns.
pub fn clip(s: &str, w: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw > w {
            break;
        }
        used += cw;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_stripped() {
        let s =
            "a\u{1b}[31mred\u{1b}[0m\u{1b}]0;title\u{7}b\u{1b}Pq#0\u{1b}\\c\u{9b}2Jd\u{0}\u{7f}\r";
        assert_eq!(sanitize(s, "↵"), "aredbcd");
    }

    #[test]
    fn newline_becomes_visible_and_bidi_overrides_vanish() {
        assert_eq!(sanitize("x\ny\u{202e}z\u{200b}", "↵"), "x↵yz");
    }

    #[test]
    fn wide_characters_are_measured() {
        assert_eq!(width(&sanitize("日本🦀", "")), 6);
        assert_eq!(clip("日本語", 5), "日本");
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(dur(850), "850 ns");
        assert_eq!(dur(12_345), "12.3 µs");
        assert_eq!(dur(4_560_000), "4.56 ms");
        assert_eq!(us(377_600), "378 µs");
    }

    #[test]
    fn a_device_and_its_driver_are_each_said_once() {
        for (dev, drv, want) in [
            (
                "NVIDIA H200",
                "NVIDIA 580.159.04",
                "NVIDIA H200 · driver 580.159.04",
            ),
            (
                "llvmpipe (LLVM 15.0.6, 256 bits)",
                "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)",
                "llvmpipe (LLVM 15.0.6, 256 bits) · driver Mesa 22.3.6",
            ),
            (
                "Synthetic GPU (no device)",
                "synthetic 1.0",
                "Synthetic GPU (no device) · driver 1.0",
            ),
            ("synthetic", "synthetic", "synthetic"),
            ("AMD Radeon", "", "AMD Radeon"),
            ("Ärger GPU", "Ärger 2.1", "Ärger GPU · driver 2.1"),
            ("Ärger GPU", "Ä", "Ärger GPU"),
        ] {
            assert_eq!(device_label(dev, drv), want);
        }
    }

    #[test]
    fn a_zero_percentile_is_a_dash() {
        assert_eq!(dur_or_dash(0), "—");
        assert_eq!(dur_or_dash(1_500), "1.5 µs");
    }
}
