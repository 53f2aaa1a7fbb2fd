//! One module per panel, each `impl Widget for &Panel`. Panels read [`Ctx`] (state, theme,
//! keymap) and draw; they never change state. Every write is clipped to the panel's area, so
//! any size down to 1×1 draws something or nothing, never panics.

pub mod attribution;
pub mod barriers;
pub mod flame;
pub mod header;
pub mod help;
pub mod log;
pub mod navigator;
pub mod stages;
pub mod tokens;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;

use crate::keymap::Keymap;
use crate::text::{clip, put};
use crate::theme::{Theme, Tone};
use crate::view::UiState;

/// What every panel reads.
pub struct Ctx<'a> {
    /// State (derived rows prepared).
    pub s: &'a UiState,
    /// Colours and glyphs.
    pub theme: &'a Theme,
    /// Key bindings (help, footer).
    pub keys: &'a Keymap,
}

/// Draw a bordered box titled `title` (highlighted when `focused`) and return its inside.
pub fn frame(buf: &mut Buffer, area: Rect, title: &str, focused: bool, t: &Theme) -> Rect {
    if area.width < 2 || area.height < 2 {
        return Rect::new(area.x, area.y, 0, 0);
    }
    let g = &t.glyphs.border;
    let st = if focused {
        t.fg(Tone::Accent)
    } else {
        t.fg(Tone::Dim)
    };
    let (x0, y0, x1, y1) = (area.x, area.y, area.right() - 1, area.bottom() - 1);
    for x in x0 + 1..x1 {
        crate::text::cell(buf, area, x, y0, g[4], st);
        crate::text::cell(buf, area, x, y1, g[4], st);
    }
    for y in y0 + 1..y1 {
        crate::text::cell(buf, area, x0, y, g[5], st);
        crate::text::cell(buf, area, x1, y, g[5], st);
    }
    crate::text::cell(buf, area, x0, y0, g[0], st);
    crate::text::cell(buf, area, x1, y0, g[1], st);
    crate::text::cell(buf, area, x0, y1, g[2], st);
    crate::text::cell(buf, area, x1, y1, g[3], st);
    let tst = if focused {
        st.add_modifier(Modifier::BOLD | Modifier::REVERSED)
    } else {
        st.add_modifier(Modifier::BOLD)
    };
    let title = clip(&format!(" {title} "), area.width.saturating_sub(4) as usize);
    put(buf, area, x0 + 1, y0, &title, tst);
    Rect::new(x0 + 1, y0 + 1, area.width - 2, area.height - 2)
}

/// Right-align `s` in `w` columns.
pub fn ralign(s: &str, w: usize) -> String {
    let n = crate::text::width(s);
    if n >= w {
        clip(s, w)
    } else {
        format!("{}{s}", " ".repeat(w - n))
    }
}
