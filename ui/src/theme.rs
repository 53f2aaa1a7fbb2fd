//! Colours and glyphs: the one place the dashboard's look is decided.
//!
//! # Stage-kind colours
//!
//! | kind       | truecolour | 256 | 16           | no colour (letter) |
//! |------------|------------|-----|--------------|--------------------|
//! | `q`        | #5fafff    | 75  | light blue   | `q` |
//! | `k`        | #5fd7d7    | 80  | light cyan   | `k` |
//! | `v`        | #87d787    | 114 | light green  | `v` |
//! | `attn`     | #ffaf00    | 214 | yellow       | `a` |
//! | `wo`       | #d787ff    | 177 | light magenta| `o` |
//! | `ffn_up`   | #ff8787    | 210 | light red    | `f` |
//! | `ffn_down` | #d7af87    | 180 | red          | `d` |
//! | `head`     | #afafff    | 147 | blue         | `h` |
//! | `argmax`   | #ffffff    | 231 | white        | `x` |
//! | barrier wait | #4e4e4e  | 239 | dark gray    | `.` (`░` without `--ascii`) |
//!
//! Verdicts and warnings always carry a glyph as well as a colour (see [`Glyphs`]), so
//! nothing depends on colour alone. Colour depth degrades truecolour → 256 → 16 → none
//! ([`ColorDepth::detect`]); `NO_COLOR` turns colour off, never the UI.

use baro_telemetry::{StageKind, Verdict};
use ratatui::style::{Color, Modifier, Style};

/// How many colours the terminal shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorDepth {
    /// 24-bit.
    TrueColor,
    /// xterm 256.
    Ansi256,
    /// The 16 named colours.
    Ansi16,
    /// No colour at all (`NO_COLOR`, `TERM=dumb`).
    None,
}

impl ColorDepth {
    /// From the environment: `NO_COLOR` (non-empty) → none; `TERM=dumb` → none;
    /// `COLORTERM=truecolor|24bit` → truecolour; `TERM=*256color*` → 256; else 16.
    pub fn detect(get: impl Fn(&str) -> Option<String>) -> Self {
        if get("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return ColorDepth::None;
        }
        let term = get("TERM").unwrap_or_default();
        if term == "dumb" {
            return ColorDepth::None;
        }
        let ct = get("COLORTERM").unwrap_or_default();
        if ct == "truecolor" || ct == "24bit" {
            ColorDepth::TrueColor
        } else if term.contains("256") {
            ColorDepth::Ansi256
        } else {
            ColorDepth::Ansi16
        }
    }
}

/// Semantic colours, each given at every depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// A stage kind.
    Kind(StageKind),
    /// Barrier wait.
    Wait,
    /// Good (match, PASS).
    Good,
    /// Attention (near-tie, attribution warning).
    Warn,
    /// Bad (mismatch, fail word).
    Bad,
    /// Pending / secondary text.
    Dim,
    /// Focus and highlights.
    Accent,
}

/// (truecolour, 256, 16) for a tone.
fn palette(t: Tone) -> ((u8, u8, u8), u8, Color) {
    use StageKind as K;
    match t {
        Tone::Kind(K::Q) => ((0x5f, 0xaf, 0xff), 75, Color::LightBlue),
        Tone::Kind(K::K) => ((0x5f, 0xd7, 0xd7), 80, Color::LightCyan),
        Tone::Kind(K::V) => ((0x87, 0xd7, 0x87), 114, Color::LightGreen),
        Tone::Kind(K::Attn) => ((0xff, 0xaf, 0x00), 214, Color::Yellow),
        Tone::Kind(K::Wo) => ((0xd7, 0x87, 0xff), 177, Color::LightMagenta),
        Tone::Kind(K::Ffn) => ((0xff, 0x87, 0x87), 210, Color::LightRed),
        Tone::Kind(K::Down) => ((0xd7, 0xaf, 0x87), 180, Color::Red),
        Tone::Kind(K::Head) => ((0xaf, 0xaf, 0xff), 147, Color::Blue),
        Tone::Kind(K::Argmax) => ((0xff, 0xff, 0xff), 231, Color::White),
        Tone::Wait => ((0x4e, 0x4e, 0x4e), 239, Color::DarkGray),
        Tone::Good => ((0x5f, 0xd7, 0x5f), 77, Color::Green),
        Tone::Warn => ((0xff, 0xd7, 0x00), 220, Color::Yellow),
        Tone::Bad => ((0xff, 0x50, 0x50), 203, Color::LightRed),
        Tone::Dim => ((0x8a, 0x8a, 0x8a), 245, Color::DarkGray),
        Tone::Accent => ((0x00, 0xd7, 0xff), 45, Color::Cyan),
    }
}

/// The letter a stage kind is drawn with when colour is off.
pub fn kind_letter(k: StageKind) -> char {
    match k {
        StageKind::Q => 'q',
        StageKind::K => 'k',
        StageKind::V => 'v',
        StageKind::Attn => 'a',
        StageKind::Wo => 'o',
        StageKind::Ffn => 'f',
        StageKind::Down => 'd',
        StageKind::Head => 'h',
        StageKind::Argmax => 'x',
    }
}

/// Glyph set: Unicode, or plain ASCII (`--ascii`: no braille, block or box glyphs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Glyphs {
    /// Borders: top-left, top-right, bottom-left, bottom-right, horizontal, vertical.
    pub border: [&'static str; 6],
    /// Sparkline / bar levels, lowest first (index 0 = empty).
    pub bars: [&'static str; 9],
    /// Work cell in the flame chart (colour on).
    pub work: &'static str,
    /// Barrier wait cell.
    pub wait: &'static str,
    /// Level boundary tick.
    pub level: &'static str,
    /// Cursor column marker.
    pub cursor: &'static str,
    /// Verdict glyphs: match, near-tie, mismatch, non-finite, uncompared, pending.
    pub verdict: [&'static str; 6],
    /// Warning / error / ok glyphs.
    pub warn: &'static str,
    /// Error glyph.
    pub bad: &'static str,
    /// Ok glyph.
    pub ok: &'static str,
    /// Newline inside token text.
    pub newline: &'static str,
}

/// Unicode glyphs.
pub const UNICODE: Glyphs = Glyphs {
    border: ["┌", "┐", "└", "┘", "─", "│"],
    bars: [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"],
    work: "█",
    wait: "░",
    level: "┊",
    cursor: "▼",
    verdict: ["✓", "≈", "✗", "!", "·", "…"],
    warn: "⚠",
    bad: "✗",
    ok: "✓",
    newline: "↵",
};

/// ASCII glyphs.
pub const ASCII: Glyphs = Glyphs {
    border: ["+", "+", "+", "+", "-", "|"],
    bars: [" ", ".", ".", ":", ":", "=", "=", "#", "#"],
    work: "#",
    wait: ".",
    level: ":",
    cursor: "v",
    verdict: ["+", "~", "X", "!", ".", "?"],
    warn: "!",
    bad: "X",
    ok: "+",
    newline: "\\n",
};

/// Colour depth plus glyphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Colour depth.
    pub depth: ColorDepth,
    /// Glyphs.
    pub glyphs: Glyphs,
}

impl Default for Theme {
    fn default() -> Self {
        Theme {
            depth: ColorDepth::TrueColor,
            glyphs: UNICODE,
        }
    }
}

impl Theme {
    /// A theme at `depth`, ASCII glyphs when `ascii`.
    pub fn new(depth: ColorDepth, ascii: bool) -> Self {
        Theme {
            depth,
            glyphs: if ascii { ASCII } else { UNICODE },
        }
    }

    /// Whether colour is on.
    pub fn colored(&self) -> bool {
        self.depth != ColorDepth::None
    }

    /// The colour of a tone at this depth (`None` when colour is off).
    pub fn color(&self, t: Tone) -> Option<Color> {
        let (rgb, idx, named) = palette(t);
        match self.depth {
            ColorDepth::TrueColor => Some(Color::Rgb(rgb.0, rgb.1, rgb.2)),
            ColorDepth::Ansi256 => Some(Color::Indexed(idx)),
            ColorDepth::Ansi16 => Some(named),
            ColorDepth::None => None,
        }
    }

    /// Foreground style of a tone; without colour, `Bad` and `Accent` stay visible as bold /
    /// reversed text.
    pub fn fg(&self, t: Tone) -> Style {
        match self.color(t) {
            Some(c) => Style::new().fg(c),
            None => match t {
                Tone::Bad | Tone::Warn => Style::new().add_modifier(Modifier::BOLD),
                _ => Style::new(),
            },
        }
    }

    /// Style for focus/selection (reversed works at every depth).
    pub fn selected(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    /// Glyph and tone for a verdict (`None` = pending).
    pub fn verdict(&self, v: Option<Verdict>) -> (&'static str, Tone) {
        let g = &self.glyphs.verdict;
        match v {
            Some(Verdict::Match) => (g[0], Tone::Good),
            Some(Verdict::NearTie) => (g[1], Tone::Warn),
            Some(Verdict::Mismatch) => (g[2], Tone::Bad),
            Some(Verdict::NonFinite) => (g[3], Tone::Bad),
            Some(Verdict::Uncompared) => (g[4], Tone::Dim),
            None => (g[5], Tone::Dim),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn depth_degrades_from_truecolor_to_none_and_no_color_wins() {
        let d = ColorDepth::detect;
        assert_eq!(d(env(&[("COLORTERM", "truecolor")])), ColorDepth::TrueColor);
        assert_eq!(d(env(&[("TERM", "xterm-256color")])), ColorDepth::Ansi256);
        assert_eq!(d(env(&[("TERM", "xterm")])), ColorDepth::Ansi16);
        assert_eq!(d(env(&[("TERM", "dumb")])), ColorDepth::None);
        let all = [("COLORTERM", "truecolor"), ("NO_COLOR", "1")];
        assert_eq!(d(env(&all)), ColorDepth::None);
        assert_eq!(
            d(env(&[("NO_COLOR", ""), ("TERM", "xterm")])),
            ColorDepth::Ansi16
        );
    }

    #[test]
    fn no_colour_theme_has_no_colours_but_keeps_verdict_glyphs() {
        let t = Theme::new(ColorDepth::None, true);
        assert_eq!(t.color(Tone::Bad), None);
        assert_eq!(t.verdict(Some(Verdict::Mismatch)).0, "X");
        assert_ne!(t.verdict(Some(Verdict::Match)).0, t.verdict(None).0);
    }
}
