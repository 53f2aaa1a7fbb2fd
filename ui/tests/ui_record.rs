//! Recording from the dashboard: the `r` key (remappable, in the help, unbound in a replay),
//! what a producer that cannot record answers, and the header's `REC file size` badge.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use std::cell::RefCell;
use std::collections::BTreeMap;

use baro_ui::action::{Action, Control, NoControl, RecStatus};
use baro_ui::app::{handle_event, poll_status};
use baro_ui::keymap::Keymap;
use baro_ui::screen::Hits;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

/// A producer that can record: `r` toggles its recording.
#[derive(Default)]
struct Rec {
    asked: RefCell<u32>,
    status: RefCell<Option<RecStatus>>,
}

impl Control for Rec {
    fn send(&self, _: baro_telemetry::control::Command) {}
    fn toggle_record(&self) -> bool {
        *self.asked.borrow_mut() += 1;
        true
    }
    fn recording(&self) -> Option<RecStatus> {
        self.status.borrow().clone()
    }
}

fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

#[test]
fn r_is_the_record_action_and_asks_the_producer_to_toggle_recording() {
    let k = Keymap::default();
    let e = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE);
    assert_eq!(k.action(&e), Some(Action::Record));
    let (mut st, _) = state(clean(), 2);
    let ctl = Rec::default();
    assert!(handle_event(
        &mut st,
        &k,
        &Hits::default(),
        &key(KeyCode::Char('r')),
        &ctl
    ));
    assert!(handle_event(
        &mut st,
        &k,
        &Hits::default(),
        &key(KeyCode::Char('r')),
        &ctl
    ));
    assert_eq!(*ctl.asked.borrow(), 2, "start, then stop");
}

#[test]
fn v_now_reverses_the_stage_sort() {
    let k = Keymap::default();
    let e = KeyEvent::new(KeyCode::Char('v'), KeyModifiers::NONE);
    assert_eq!(k.action(&e), Some(Action::SortReverse));
}

#[test]
fn r_on_a_producer_that_cannot_record_says_so_in_the_log() {
    let (mut st, _) = state(clean(), 2);
    handle_event(
        &mut st,
        &Keymap::default(),
        &Hits::default(),
        &key(KeyCode::Char('r')),
        &NoControl,
    );
    assert!(
        st.live
            .log
            .iter()
            .any(|l| l.text.contains("only a live session can be recorded")),
        "{:?}",
        st.live.log
    );
}

#[test]
fn record_is_remappable_and_the_help_overlay_shows_its_key() {
    let mut o = BTreeMap::new();
    o.insert("record".to_string(), vec!["F5".to_string()]);
    let k = Keymap::with_overrides(&o).unwrap();
    let r = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE);
    assert_eq!(k.action(&r), None);
    assert_eq!(
        k.action(&KeyEvent::new(KeyCode::F(5), KeyModifiers::NONE)),
        Some(Action::Record)
    );
    let (mut st, mut layout) = state(clean(), 2);
    layout.keys = o;
    st.view.help = true;
    let text = lines(&render(&mut st, &layout, 160, 60)).join("\n");
    let line = text
        .lines()
        .find(|l| l.contains("start / stop recording"))
        .unwrap_or_else(|| panic!("no record line in the help:\n{text}"));
    assert!(line.contains("F5"), "{line}");
}

#[test]
fn a_replay_leaves_record_unbound() {
    let k = Keymap::for_replay(&BTreeMap::new()).unwrap();
    assert!(!k.bound(Action::Record));
    assert!(Keymap::default().bound(Action::Record));
}

#[test]
fn the_header_shows_rec_file_and_size_while_recording_and_not_after() {
    let (mut st, layout) = state(clean(), 3);
    let ctl = Rec::default();
    *ctl.status.borrow_mut() = Some(RecStatus {
        file: "./baro-20261130-123456.baro".into(),
        bytes: 3 << 20,
    });
    assert!(
        poll_status(&mut st, &ctl),
        "a new recording changes the view"
    );
    let head = lines(&render(&mut st, &layout, 240, 40))[..3].join("\n");
    assert!(
        head.contains("REC ./baro-20261130-123456.baro 3.0 MiB"),
        "{head}"
    );
    ctl.status.borrow_mut().as_mut().unwrap().bytes = 5 << 20;
    assert!(poll_status(&mut st, &ctl), "the size updates");
    let head = lines(&render(&mut st, &layout, 240, 40))[..3].join("\n");
    assert!(head.contains("5.0 MiB"), "{head}");
    *ctl.status.borrow_mut() = None;
    assert!(poll_status(&mut st, &ctl));
    let head = lines(&render(&mut st, &layout, 240, 40))[..3].join("\n");
    assert!(!head.contains("REC "), "{head}");
    assert!(head.contains("rec —"), "{head}");
}
