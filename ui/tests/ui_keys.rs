//! Key and mouse handling on the action layer: what each key does to the view state and
//! which requests reach the producer's `Control`.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use std::collections::BTreeMap;

use baro_ui::action::Action;
use baro_ui::app::handle_event;
use baro_ui::keymap::Keymap;
use baro_ui::panels::Ctx;
use baro_ui::screen::{Hits, Screen};
use baro_ui::synthetic::Synth;
use baro_ui::theme::Theme;
use baro_ui::view::{PanelId, Pick, Scope};
use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

fn press(st: &mut baro_ui::view::UiState, keys: &Keymap, ctl: &Recorder, c: KeyCode) -> bool {
    handle_event(st, keys, &Hits::default(), &key(c), ctl)
}

#[test]
fn q_quits_and_stops_the_producer() {
    let (mut st, _) = state(clean(), 3);
    let ctl = Recorder::default();
    assert!(press(&mut st, &Keymap::default(), &ctl, KeyCode::Char('q')));
    assert!(st.view.quit);
    assert_eq!(*ctl.0.borrow(), ["stop"]);
}

#[test]
fn esc_and_ctrl_c_quit_too() {
    let (mut st, _) = state(clean(), 1);
    let ctl = Recorder::default();
    handle_event(
        &mut st,
        &Keymap::default(),
        &Hits::default(),
        &Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        &ctl,
    );
    assert!(st.view.quit);
    let (mut st, _) = state(clean(), 1);
    press(&mut st, &Keymap::default(), &ctl, KeyCode::Esc);
    assert!(st.view.quit);
}

#[test]
fn space_pauses_then_resumes_and_dot_steps_one_pass() {
    let (mut st, _) = state(clean(), 3);
    let (ctl, k) = (Recorder::default(), Keymap::default());
    press(&mut st, &k, &ctl, KeyCode::Char(' '));
    assert!(st.view.paused);
    press(&mut st, &k, &ctl, KeyCode::Char(' '));
    assert!(!st.view.paused);
    press(&mut st, &k, &ctl, KeyCode::Char('.'));
    assert!(st.view.paused, "stepping pauses first");
    assert_eq!(*ctl.0.borrow(), ["pause", "resume", "pause", "step"]);
}

#[test]
fn m_asks_for_the_other_dispatch_mode() {
    let (mut st, _) = state(clean(), 3);
    let ctl = Recorder::default();
    press(&mut st, &Keymap::default(), &ctl, KeyCode::Char('m'));
    assert_eq!(*ctl.0.borrow(), ["dispatch multi"]);
}

#[test]
fn f_freezes_the_display_while_ingest_goes_on() {
    let cfg = clean();
    let mut synth = Synth::new(cfg.clone());
    let (mut st, layout) = state(cfg, 0);
    for m in synth.stream(5) {
        st.live.ingest(m);
    }
    let ctl = Recorder::default();
    press(&mut st, &Keymap::default(), &ctl, KeyCode::Char('f'));
    for _ in 0..7 {
        st.live
            .ingest(baro_telemetry::Telemetry::Frame(Box::new(synth.frame())));
    }
    assert_eq!(st.live.frames, 12, "counters keep rising underneath");
    assert_eq!(st.shown().frames, 5, "the screen shows the snapshot");
    let text = lines(&render(&mut st, &layout, 200, 60)).concat();
    assert!(text.contains("FROZEN at pass 4 · live 11"), "{text}");
    press(&mut st, &Keymap::default(), &ctl, KeyCode::Char('f'));
    assert_eq!(st.shown().frames, 12);
}

#[test]
fn tab_cycles_focus_through_the_layouts_panels() {
    let (mut st, _) = state(clean(), 1);
    let (ctl, k) = (Recorder::default(), Keymap::default());
    assert_eq!(st.view.focus, PanelId::Flame);
    let order: Vec<PanelId> = (0..8)
        .map(|_| {
            press(&mut st, &k, &ctl, KeyCode::Tab);
            st.view.focus
        })
        .collect();
    use PanelId::*;
    assert_eq!(
        order,
        [
            Stages,
            Barriers,
            Attribution,
            Tokens,
            Log,
            Header,
            Navigator,
            Flame
        ]
    );
    press(&mut st, &k, &ctl, KeyCode::BackTab);
    assert_eq!(st.view.focus, Navigator);
}

#[test]
fn zoom_and_selection_survive_a_live_refresh() {
    let cfg = clean();
    let mut synth = Synth::new(cfg.clone());
    let (mut st, _) = state(cfg, 0);
    for m in synth.stream(3) {
        st.live.ingest(m);
    }
    let (ctl, k) = (Recorder::default(), Keymap::default());
    press(&mut st, &k, &ctl, KeyCode::Char('+'));
    press(&mut st, &k, &ctl, KeyCode::Char('+'));
    press(&mut st, &k, &ctl, KeyCode::Down);
    let (zoom, cursor) = (st.view.zoom, st.view.cursor);
    assert!((zoom.1 - 0.25).abs() < 1e-9, "{zoom:?}");
    st.live
        .ingest(baro_telemetry::Telemetry::Frame(Box::new(synth.frame())));
    assert_eq!((st.view.zoom, st.view.cursor), (zoom, cursor));
    press(&mut st, &k, &ctl, KeyCode::Char('0'));
    assert_eq!(st.view.zoom, (0.0, 1.0));
    for _ in 0..40 {
        press(&mut st, &k, &ctl, KeyCode::Char('-'));
        press(&mut st, &k, &ctl, KeyCode::Char('>'));
    }
    assert!(st.view.zoom.0 >= 0.0 && st.view.zoom.0 + st.view.zoom.1 <= 1.0 + 1e-9);
}

#[test]
fn pin_keeps_the_pass_and_latest_follows_again() {
    let cfg = clean();
    let mut synth = Synth::new(cfg.clone());
    let (mut st, _) = state(cfg, 0);
    for m in synth.stream(3) {
        st.live.ingest(m);
    }
    let (ctl, k) = (Recorder::default(), Keymap::default());
    press(&mut st, &k, &ctl, KeyCode::Char('p'));
    assert_eq!(st.view.pick, Pick::Pass(2));
    for _ in 0..20 {
        st.live
            .ingest(baro_telemetry::Telemetry::Frame(Box::new(synth.frame())));
    }
    assert_eq!(
        st.flame_frame().unwrap().pass,
        2,
        "a pinned pass outlives the recent ring"
    );
    press(&mut st, &k, &ctl, KeyCode::Char('L'));
    assert_eq!(st.flame_frame().unwrap().pass, 22);
    press(&mut st, &k, &ctl, KeyCode::Char('S'));
    assert_eq!(st.view.pick, Pick::Slowest);
}

#[test]
fn w_cycles_scope_and_brackets_set_the_range() {
    let (mut st, _) = state(clean(), 10);
    let (ctl, k) = (Recorder::default(), Keymap::default());
    assert_eq!(st.view.scope, Scope::Window);
    press(&mut st, &k, &ctl, KeyCode::Char('w'));
    assert!(matches!(st.view.scope, Scope::Range(_, 9)));
    press(&mut st, &k, &ctl, KeyCode::Char('w'));
    assert_eq!(st.view.scope, Scope::All);
    press(&mut st, &k, &ctl, KeyCode::Char(']'));
    assert_eq!(st.view.scope, Scope::Range(9, 9));
    st.prepare();
    assert_eq!(st.derived.passes, 1);
}

#[test]
fn a_remapped_key_replaces_the_default_and_help_shows_it() {
    let mut o = BTreeMap::new();
    o.insert("freeze".to_string(), vec!["z".to_string()]);
    let k = Keymap::with_overrides(&o).unwrap();
    let (mut st, _) = state(clean(), 2);
    let ctl = Recorder::default();
    assert!(!press(&mut st, &k, &ctl, KeyCode::Char('f')));
    assert!(st.frozen.is_none());
    press(&mut st, &k, &ctl, KeyCode::Char('z'));
    assert!(st.frozen.is_some());
    assert_eq!(k.keys_of(Action::Freeze), "z");
    assert!(Keymap::with_overrides(&BTreeMap::from([("nope".to_string(), vec![])])).is_err());
}

#[test]
fn clicking_a_footer_key_runs_its_action_and_a_panel_takes_focus() {
    let (mut st, layout) = state(clean(), 3);
    let keys = Keymap::default();
    let theme = Theme::default();
    let hits = {
        st.prepare();
        let ctx = Ctx {
            s: &st,
            theme: &theme,
            keys: &keys,
        };
        Screen {
            ctx: &ctx,
            layout: &layout,
        }
        .hits(Rect::new(0, 0, 200, 60))
    };
    let ctl = Recorder::default();
    let click = |x, y| {
        Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        })
    };
    let help = hits
        .keys
        .iter()
        .find(|(a, _)| *a == Action::Help)
        .unwrap()
        .1;
    handle_event(&mut st, &keys, &hits, &click(help.x, help.y), &ctl);
    assert!(st.view.help);
    handle_event(&mut st, &keys, &hits, &click(0, 0), &ctl);
    assert!(!st.view.help, "a click closes the help");
    let log = hits
        .panels
        .iter()
        .find(|(p, _)| *p == PanelId::Log)
        .unwrap()
        .1;
    handle_event(&mut st, &keys, &hits, &click(log.x + 2, log.y + 2), &ctl);
    assert_eq!(st.view.focus, PanelId::Log);
    let flame = hits
        .panels
        .iter()
        .find(|(p, _)| *p == PanelId::Flame)
        .unwrap()
        .1;
    let wheel = Event::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        column: flame.x + flame.width / 2,
        row: flame.y + 3,
        modifiers: KeyModifiers::NONE,
    });
    handle_event(&mut st, &keys, &hits, &wheel, &ctl);
    assert!(
        (st.view.zoom.1 - 0.5).abs() < 1e-9,
        "the wheel zooms the flame chart"
    );
}

#[test]
fn any_key_closes_the_help_overlay_first() {
    let (mut st, _) = state(clean(), 1);
    let (ctl, k) = (Recorder::default(), Keymap::default());
    press(&mut st, &k, &ctl, KeyCode::Char('?'));
    assert!(st.view.help);
    press(&mut st, &k, &ctl, KeyCode::Char('g'));
    assert!(!st.view.help && !st.view.by_stage);
}

#[test]
fn esc_closes_the_help_instead_of_quitting() {
    let (mut st, _) = state(clean(), 1);
    let (ctl, k) = (Recorder::default(), Keymap::default());
    press(&mut st, &k, &ctl, KeyCode::Char('?'));
    press(&mut st, &k, &ctl, KeyCode::Esc);
    assert!(!st.view.help && !st.view.quit);
    press(&mut st, &k, &ctl, KeyCode::Esc);
    assert!(st.view.quit);
}
