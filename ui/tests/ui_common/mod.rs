//! Shared by the ui_* tests: fixed synthetic streams and whole-screen rendering.
#![allow(dead_code)]

use baro_telemetry::control::Command;
use baro_ui::action::{Control, NoControl};
use baro_ui::keymap::Keymap;
use baro_ui::layout::Layout;
use baro_ui::panels::Ctx;
use baro_ui::screen::Screen;
use baro_ui::state::Meta;
use baro_ui::synthetic::{self, Synth, SynthConfig};
use baro_ui::theme::{ColorDepth, Theme};
use baro_ui::view::UiState;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// A small, quiet run: 16 workgroups, 2 layers, no trap, no failures.
pub fn clean() -> SynthConfig {
    SynthConfig {
        grid: 16,
        layers: 2,
        tail_wg: None,
        fail_every: None,
        near_tie_pos: None,
        mismatch_at: None,
        ..Default::default()
    }
}

/// State after `n` passes of `cfg` with the default layout.
pub fn state(cfg: SynthConfig, n: u64) -> (UiState, Layout) {
    let layout = Layout::default_preset();
    let mut s = Synth::new(cfg);
    let meta = synthetic::meta(s.details());
    let mut st = baro_ui::app::new_state(meta, &layout);
    for m in s.stream(n) {
        st.live.ingest(m);
    }
    (st, layout)
}

/// State with a custom decoder.
pub fn state_with(cfg: SynthConfig, n: u64, meta: Meta) -> UiState {
    let layout = Layout::default_preset();
    let mut s = Synth::new(cfg);
    let mut st = baro_ui::app::new_state(meta, &layout);
    for m in s.stream(n) {
        st.live.ingest(m);
    }
    st
}

/// The whole screen at w×h, no colour (so stage kinds show as letters).
pub fn render(st: &mut UiState, layout: &Layout, w: u16, h: u16) -> Terminal<TestBackend> {
    render_theme(st, layout, w, h, Theme::new(ColorDepth::None, false))
}

/// The whole screen with a theme.
pub fn render_theme(
    st: &mut UiState,
    layout: &Layout,
    w: u16,
    h: u16,
    theme: Theme,
) -> Terminal<TestBackend> {
    st.prepare();
    let keys = Keymap::with_overrides(&layout.keys).unwrap();
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let ctx = Ctx {
        s: st,
        theme: &theme,
        keys: &keys,
    };
    let screen = Screen { ctx: &ctx, layout };
    term.draw(|f| f.render_widget(&screen, f.area())).unwrap();
    term
}

/// The screen as text lines.
pub fn lines(term: &Terminal<TestBackend>) -> Vec<String> {
    let buf = term.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

/// A control that records what it was asked.
#[derive(Default)]
pub struct Recorder(pub std::cell::RefCell<Vec<String>>);

impl Control for Recorder {
    fn send(&self, c: Command) {
        let asked = match c {
            Command::SetDispatch(d) => format!("dispatch {d}"),
            c => c.to_string(),
        };
        self.0.borrow_mut().push(asked);
    }
}

/// No control.
pub fn none() -> NoControl {
    NoControl
}
