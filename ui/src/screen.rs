//! The whole screen: header, the layout's panels (or the focused one expanded), the
//! clickable key-hint footer, the full-screen help; "need W×H" below the layout's minimum
//! (with the footer's `q` and `?`, which stay at any width). The
//! geometry ([`Screen::hits`]) is a pure function of the size, layout and view, so the event
//! loop maps mouse clicks with exactly what was drawn.
//!
//! ```text
//! header (3 lines)
//! rows of panels from the layout (navigator / flame+stages / barriers+attribution / …)
//! footer: q quit  ? help  f freeze  Space pause  . step  m mode  e expand  Tab focus
//! ```

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Widget;

use crate::action::Action;
use crate::layout::Layout;
use crate::panels::{self, Ctx};
use crate::text::{put, width};
use crate::theme::Tone;
use crate::view::PanelId;

/// Actions shown in the footer, clickable.
pub const FOOTER: [(Action, &str); 12] = [
    (Action::Quit, "quit"),
    (Action::Help, "help"),
    (Action::Freeze, "freeze"),
    (Action::PauseResume, "pause"),
    (Action::Step, "step"),
    (Action::SwitchDispatch, "mode"),
    (Action::Expand, "expand"),
    (Action::FocusNext, "focus"),
    (Action::ZoomIn, "zoom"),
    (Action::ZoomOut, "out"),
    (Action::GroupToggle, "group"),
    (Action::Sort, "sort"),
];

/// Where things are on screen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hits {
    /// Panels with their areas.
    pub panels: Vec<(PanelId, Rect)>,
    /// Footer keys with their areas.
    pub keys: Vec<(Action, Rect)>,
    /// Too small: nothing but the size message (and `q`, `?`).
    pub too_small: bool,
    /// With the help open: its largest scroll offset and the rows of a page.
    pub help: Option<(u16, u16)>,
}

/// The screen.
pub struct Screen<'a> {
    /// Context.
    pub ctx: &'a Ctx<'a>,
    /// Layout.
    pub layout: &'a Layout,
}

impl Screen<'_> {
    /// Geometry for `area`.
    pub fn hits(&self, area: Rect) -> Hits {
        let help = self
            .ctx
            .s
            .view
            .help
            .then(|| panels::help::max_scroll(self.ctx.keys, self.ctx.theme, area));
        let (mw, mh) = self.layout.min;
        let footer_y = area.bottom().saturating_sub(1);
        if area.width < mw || area.height < mh {
            return Hits {
                too_small: true,
                // One row holds only the size message.
                keys: if area.height >= 2 {
                    self.footer(area, footer_y, 2)
                } else {
                    vec![]
                },
                help,
                ..Default::default()
            };
        }
        let hh = (3 + panels::header::producer_lines(self.ctx.s, area.width))
            .min(area.height.saturating_sub(2));
        let header = Rect::new(area.x, area.y, area.width, hh);
        let body = Rect::new(area.x, area.y + hh, area.width, area.height - hh - 1);
        let v = &self.ctx.s.view;
        let mut panels = vec![(PanelId::Header, header)];
        if v.expanded && v.focus != PanelId::Header {
            panels.push((v.focus, body));
        } else {
            panels.extend(self.layout.place(body));
        }
        Hits {
            panels,
            keys: self.footer(area, footer_y, FOOTER.len()),
            too_small: false,
            help,
        }
    }

    /// The first `n` footer keys laid out on row `y`. `q` and `?` come first and always stay:
    /// where their labels do not fit, the keys alone do (a one-cell rect per key).
    fn footer(&self, area: Rect, y: u16, n: usize) -> Vec<(Action, Rect)> {
        let present: Vec<(Action, String, &str)> = FOOTER
            .iter()
            .take(n)
            .filter_map(|(a, label)| Some((*a, self.ctx.keys.first_key(*a)?, *label)))
            .collect();
        let full = |k: &str, l: &str| (width(k) + 1 + width(l)) as u16;
        let kept = |a: Action| matches!(a, Action::Quit | Action::Help);
        // Labels of q and ? fit (with two spaces after each)?
        let need: u16 = present
            .iter()
            .filter(|(a, ..)| kept(*a))
            .map(|(_, k, l)| full(k, l) + 2)
            .sum();
        let labels = need <= area.width + 2;
        let mut keys = vec![];
        if area.height == 0 {
            return keys;
        }
        let mut x = area.x;
        for (a, k, l) in &present {
            if !labels && !kept(*a) {
                break;
            }
            let w = if labels { full(k, l) } else { width(k) as u16 };
            if x + w > area.right() {
                break;
            }
            keys.push((*a, Rect::new(x, y, w, 1)));
            x += w + if labels { 2 } else { 1 };
        }
        keys
    }
}

impl Widget for &Screen<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (ctx, t) = (self.ctx, self.ctx.theme);
        let hits = self.hits(area);
        if hits.too_small {
            let (mw, mh) = self.layout.min;
            let msg = format!("need {mw}×{mh}");
            let x = area.x + area.width.saturating_sub(width(&msg) as u16) / 2;
            put(
                buf,
                area,
                x,
                // Above the footer row (when there is one).
                area.y + area.height.saturating_sub(1) / 2,
                &msg,
                t.fg(Tone::Warn),
            );
        } else {
            self.panels(&hits, buf);
        }
        self.footer_draw(&hits, area, buf);
        if ctx.s.view.help {
            panels::help::Help { ctx }.render(area, buf);
        }
    }
}

impl Screen<'_> {
    fn panels(&self, hits: &Hits, buf: &mut Buffer) {
        let ctx = self.ctx;
        for (id, r) in &hits.panels {
            match id {
                PanelId::Header => panels::header::Header { ctx }.render(*r, buf),
                PanelId::Navigator => panels::navigator::Navigator { ctx }.render(*r, buf),
                PanelId::Flame => panels::flame::Flame { ctx }.render(*r, buf),
                PanelId::Stages => panels::stages::Stages { ctx }.render(*r, buf),
                PanelId::Barriers => panels::barriers::Barriers { ctx }.render(*r, buf),
                PanelId::Attribution => panels::attribution::Attribution { ctx }.render(*r, buf),
                PanelId::Tokens => panels::tokens::Tokens { ctx }.render(*r, buf),
                PanelId::Log => panels::log::Log { ctx }.render(*r, buf),
            }
        }
    }

    fn footer_draw(&self, hits: &Hits, area: Rect, buf: &mut Buffer) {
        let (ctx, t) = (self.ctx, self.ctx.theme);
        if let Some(p) = &ctx.s.view.prompt {
            let y = area.bottom() - 1;
            let txt = format!("seek to pass: {p}_   (Enter seeks, Esc cancels)");
            put(
                buf,
                area,
                area.x,
                y,
                &txt,
                t.fg(Tone::Accent).add_modifier(Modifier::BOLD),
            );
        }
        for (a, r) in hits.keys.iter().filter(|_| ctx.s.view.prompt.is_none()) {
            let k = ctx.keys.first_key(*a).unwrap_or_default();
            let label = FOOTER.iter().find(|f| f.0 == *a).map_or("", |f| f.1);
            let x = put(
                buf,
                *r,
                r.x,
                r.y,
                &k,
                t.fg(Tone::Accent)
                    .add_modifier(Modifier::BOLD | Modifier::REVERSED),
            );
            put(buf, *r, x + 1, r.y, label, Default::default());
        }
    }
}
