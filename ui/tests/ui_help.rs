//! The help page (`?`): full screen at 80×24 and 200×60, every key of the session in it
//! (the replay keys in their own section), nothing cut, scrolled to the end with the keys a
//! user tries first, closed by `?`, `Esc` or `q` without quitting; and a footer that keeps
//! `q` and `?` at any width, even below the layout's minimum.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use std::collections::BTreeMap;

use baro_ui::app::handle_event;
use baro_ui::keymap::{Keymap, DEFAULTS};
use baro_ui::layout::Layout;
use baro_ui::panels::Ctx;
use baro_ui::screen::{Hits, Screen};
use baro_ui::theme::{ColorDepth, Theme};
use baro_ui::view::UiState;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::Terminal;

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

/// Draw with `keys`; returns the screen's lines and the geometry drawn.
fn draw(st: &mut UiState, keys: &Keymap, layout: &Layout, w: u16, h: u16) -> (Vec<String>, Hits) {
    st.prepare();
    let theme = Theme::new(ColorDepth::None, false);
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let ctx = Ctx {
        s: st,
        theme: &theme,
        keys,
    };
    let screen = Screen { ctx: &ctx, layout };
    let hits = screen.hits(Rect::new(0, 0, w, h));
    term.draw(|f| f.render_widget(&screen, f.area())).unwrap();
    (lines(&term), hits)
}

fn key(st: &mut UiState, keys: &Keymap, hits: &Hits, c: KeyCode) -> bool {
    let ev = Event::Key(KeyEvent::new(c, KeyModifiers::NONE));
    handle_event(st, keys, hits, &ev, &none())
}

/// Open the help, then read it page by page with `step` until it stops moving; every text
/// row seen, in order, without repeats.
fn read_all(keys: &Keymap, w: u16, h: u16, step: KeyCode) -> (Vec<String>, Vec<Vec<String>>) {
    let (mut st, layout) = state(clean(), 5);
    let (_, hits) = draw(&mut st, keys, &layout, w, h);
    key(&mut st, keys, &hits, KeyCode::Char('?'));
    assert!(st.view.help);
    let mut seen: Vec<String> = vec![];
    let mut screens = vec![];
    for _ in 0..500 {
        let (screen, hits) = draw(&mut st, keys, &layout, w, h);
        let top = st.view.help_scroll as usize;
        // Rows 1..h-2 are text; the last inner row is the position line.
        let text: Vec<String> = screen[1..h as usize - 2]
            .iter()
            .map(|l| {
                let inner: String = l.chars().skip(1).take(w as usize - 2).collect();
                inner.trim_end().to_string()
            })
            .collect();
        for (i, l) in text.iter().enumerate() {
            if top + i >= seen.len() {
                seen.push(l.clone());
            }
        }
        screens.push(screen);
        if !key(&mut st, keys, &hits, step) {
            break;
        }
    }
    (seen, screens)
}

#[test]
fn the_help_fills_the_screen_and_shows_every_key_unclipped_when_scrolled() {
    for keys in [
        Keymap::default(),
        Keymap::for_replay(&BTreeMap::new()).unwrap(),
    ] {
        for (w, h) in SIZES {
            for step in [KeyCode::Down, KeyCode::Char('j'), KeyCode::PageDown] {
                let (seen, screens) = read_all(&keys, w, h, step);
                let all = seen.join("\n");
                let first = &screens[0];
                assert!(first[0].starts_with("┌ help · keys"), "{w}×{h}: {first:#?}");
                assert!(first[0].ends_with('┐') && first[h as usize - 1].ends_with('┘'));
                // Full screen: nothing of the dashboard shows through.
                assert!(!first.iter().any(|l| l.contains("┌ flame")), "{first:#?}");
                for b in DEFAULTS {
                    assert!(
                        all.contains(b.help),
                        "{w}×{h} {step:?}: no {:?} in\n{all}",
                        b.help
                    );
                }
                for section in ["replay (baro-top replay FILE)", "this help", "legend"] {
                    assert!(all.lines().any(|l| l == section), "{section}:\n{all}");
                }
                // The replay keys say which keys they are, bound here or not.
                let seek = all.lines().find(|l| l.contains("seek to a pass")).unwrap();
                assert!(seek.trim_start().starts_with("g "), "{seek}");
                // The last line is reached, and the position line says so.
                assert!(all.lines().last().unwrap().contains("pending"), "{all}");
                let last = &screens.last().unwrap()[h as usize - 2];
                let n = seen.len();
                assert!(last.contains(&format!("of {n}")), "{last}");
                assert!(!last.contains("↓"), "{last}");
                // Nothing cut: no text touches the right border.
                for s in &screens {
                    for l in &s[1..h as usize - 1] {
                        let chars: Vec<char> = l.chars().collect();
                        assert_eq!(chars[w as usize - 2], ' ', "{w}×{h}: {l:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_live_session_lists_the_replay_keys_and_a_replay_the_record_key() {
    let (seen, _) = read_all(&Keymap::default(), 200, 60, KeyCode::PageDown);
    let all = seen.join("\n");
    for (k, what) in [
        ("g", "seek to a pass"),
        ("Z", "jump to the slowest pass"),
        ("R", "restart from the first pass"),
    ] {
        let l = all.lines().find(|l| l.contains(what)).unwrap();
        assert!(l.trim_start().starts_with(&format!("{k} ")), "{l}");
        assert!(l.contains("replay: "), "{l}");
    }
    let rec = all.lines().find(|l| l.contains("recording")).unwrap();
    assert!(!rec.contains("only"), "{rec}");
    let (seen, _) = read_all(
        &Keymap::for_replay(&BTreeMap::new()).unwrap(),
        200,
        60,
        KeyCode::PageDown,
    );
    let all = seen.join("\n");
    let rec = all.lines().find(|l| l.contains("recording")).unwrap();
    assert!(
        rec.trim_start().starts_with("r ") && rec.contains("live: "),
        "{rec}"
    );
}

#[test]
fn home_end_and_pgup_move_within_bounds_and_q_esc_or_question_mark_close_without_quitting() {
    let keys = Keymap::default();
    for close in [KeyCode::Char('q'), KeyCode::Esc, KeyCode::Char('?')] {
        let (mut st, layout) = state(clean(), 5);
        let (_, hits) = draw(&mut st, &keys, &layout, 80, 24);
        key(&mut st, &keys, &hits, KeyCode::Char('?'));
        let (_, hits) = draw(&mut st, &keys, &layout, 80, 24);
        let (max, page) = hits.help.unwrap();
        assert!(max > 0, "80×24 needs scrolling");
        key(&mut st, &keys, &hits, KeyCode::End);
        assert_eq!(st.view.help_scroll, max);
        assert!(!key(&mut st, &keys, &hits, KeyCode::Down), "at the end");
        key(&mut st, &keys, &hits, KeyCode::PageUp);
        assert_eq!(st.view.help_scroll, max.saturating_sub(page));
        key(&mut st, &keys, &hits, KeyCode::Home);
        assert_eq!(st.view.help_scroll, 0);
        assert!(
            !key(&mut st, &keys, &hits, KeyCode::Char('k')),
            "at the top"
        );
        key(&mut st, &keys, &hits, KeyCode::End);
        key(&mut st, &keys, &hits, close);
        assert!(!st.view.help && !st.view.quit, "{close:?}");
        // Opened again, it starts at the top.
        key(&mut st, &keys, &hits, KeyCode::Char('?'));
        assert_eq!(st.view.help_scroll, 0);
    }
}

#[test]
fn the_footer_keeps_q_and_help_at_every_width_even_below_the_minimum() {
    let keys = Keymap::default();
    let (mut st, _) = state(clean(), 5);
    let layout = Layout::load("compact").unwrap();
    for w in [4u16, 8, 14, 20, 39, 40, 60, 79, 80, 120, 200] {
        for h in [6u16, 24] {
            let (screen, hits) = draw(&mut st, &keys, &layout, w, h);
            let foot = screen.last().unwrap();
            let has = |a| hits.keys.iter().any(|(x, _)| *x == a);
            use baro_ui::action::Action::{Help, Quit};
            assert!(has(Quit) && has(Help), "{w}×{h}: {foot:?}");
            assert!(foot.starts_with('q'), "{w}×{h}: {foot:?}");
            assert!(foot.contains('?'), "{w}×{h}: {foot:?}");
            if w >= 14 {
                assert!(foot.starts_with("q quit  ? help"), "{w}×{h}: {foot:?}");
            }
        }
    }
}

#[test]
fn help_snapshots() {
    let keys = Keymap::default();
    for (w, h) in SIZES {
        let (mut st, layout) = state(clean(), 5);
        st.view.help = true;
        let (screen, _) = draw(&mut st, &keys, &layout, w, h);
        insta::assert_snapshot!(format!("help_{w}x{h}"), screen.join("\n"));
    }
}

#[test]
fn in_the_event_loop_q_and_esc_close_the_help_and_only_ctrl_c_quits_from_it() {
    use baro_ui::app::handle_batch;
    let keys = Keymap::default();
    for (k, m, quits) in [
        (KeyCode::Char('q'), KeyModifiers::NONE, false),
        (KeyCode::Esc, KeyModifiers::NONE, false),
        (KeyCode::Char('c'), KeyModifiers::CONTROL, true),
    ] {
        let (mut st, _) = state(clean(), 2);
        st.view.help = true;
        let ev = [Event::Key(KeyEvent::new(k, m))];
        handle_batch(&mut st, &keys, &Hits::default(), &ev, &none(), &mut false);
        assert_eq!(st.view.quit, quits, "{k:?}");
        assert!(!st.view.help || quits, "{k:?} closes the help");
        // With the help closed, q quits as ever.
        let (mut st, _) = state(clean(), 2);
        handle_batch(&mut st, &keys, &Hits::default(), &ev, &none(), &mut false);
        assert!(st.view.quit, "{k:?}");
    }
}
