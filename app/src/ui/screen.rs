//! The whole screen: header, the layout's panels (or the focused one expanded), the
//! clickable key-hint footer, the help overlay; "need W×H" below the layout's minimum. The
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
    /// Too small: nothing but the size message.
    pub too_small: bool,
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
        let (mw, mh) = self.layout.min;
        if area.width < mw || area.height < mh {
            return Hits {
                too_small: true,
                ..Default::default()
            };
        }
        let hh =
            (3 + panels::header::producer_lines(self.ctx.s)).min(area.height.saturating_sub(2));
        let header = Rect::new(area.x, area.y, area.width, hh);
        let body = Rect::new(area.x, area.y + hh, area.width, area.height - hh - 1);
        let footer_y = area.bottom() - 1;
        let v = &self.ctx.s.view;
        let mut panels = vec![(PanelId::Header, header)];
        if v.expanded && v.focus != PanelId::Header {
            panels.push((v.focus, body));
        } else {
            panels.extend(self.layout.place(body));
        }
        let mut keys = vec![];
        let mut x = area.x;
        for (a, label) in FOOTER {
            let Some(k) = self.ctx.keys.first_key(a) else {
                continue;
            };
            let w = (width(&k) + 1 + width(label)) as u16;
            if x + w > area.right() {
                break;
            }
            keys.push((a, Rect::new(x, footer_y, w, 1)));
            x += w + 2;
        }
        Hits {
            panels,
            keys,
            too_small: false,
        }
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
                area.y + area.height / 2,
                &msg,
                t.fg(Tone::Warn),
            );
            return;
        }
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
        if ctx.s.view.help {
            panels::help::Help { ctx }.render(area, buf);
        }
    }
}
