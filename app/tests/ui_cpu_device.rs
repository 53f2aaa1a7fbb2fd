//! Power-mode and contention labels where they mean something: on a CPU device (lavapipe) the
//! header says `n/a (CPU device)` and the log stays quiet about them; on a GPU a mode switch
//! is logged once the new mode has held a few passes (a one-pass flicker is not), and a
//! warning that repeats folds into one counted line. Plus the shipped lavapipe recording in
//! tmux at 80×24 and 200×60: no power-mode or contention noise on screen.
#![allow(clippy::unwrap_used)]

mod tmux_common;
// The dashboard tests' helpers, shared with baro-ui's tests (this test also runs the binary).
#[path = "../../ui/tests/ui_common/mod.rs"]
mod ui_common;

use std::time::Duration;

use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Contention, DeviceKind, PowerMode, Telemetry};
use baro_ui::layout::Layout;
use baro_ui::state::{Meta, DEBOUNCE};
use baro_ui::view::UiState;

/// A run on `kind` whose passes have the given modes, each contended every other pass.
fn run(kind: DeviceKind, modes: &[PowerMode], torn: bool) -> UiState {
    let layout = Layout::default_preset();
    let mut d = synthetic_run(8, 12, 4);
    d.device_kind = kind;
    let mut s = baro_ui::app::new_state(Meta::default(), &layout);
    s.live.ingest(Telemetry::Start(d.clone()));
    for (p, m) in modes.iter().enumerate() {
        let mut f = synthetic_frame(&d, p as u64, 2);
        f.mode = *m;
        f.fail.word.bits = 0;
        f.fail.line = "fail-word 0x00000000 PASS".into();
        f.torn = torn;
        f.contention = if p % 2 == 1 {
            Contention {
                cpu_busy: Some(0.9),
                ..Default::default()
            }
        } else {
            Contention::default()
        };
        s.live.ingest(Telemetry::Frame(Box::new(f)));
    }
    s
}

fn log(s: &UiState) -> Vec<String> {
    s.live.log.iter().map(|e| e.text.clone()).collect()
}

#[test]
fn a_cpu_device_says_n_a_for_power_and_contention_and_logs_neither() {
    use PowerMode::{Fast, Slow};
    let mut s = run(
        DeviceKind::Cpu,
        &[Slow, Fast, Slow, Slow, Slow, Fast, Fast, Fast],
        false,
    );
    let l = log(&s);
    assert!(
        !l.iter()
            .any(|t| t.contains("power mode") || t.contains("contended") || t.contains("quiet")),
        "{l:?}"
    );
    let layout = Layout::default_preset();
    let header = ui_common::lines(&ui_common::render(&mut s, &layout, 240, 60))[1].clone();
    assert!(
        header.contains("power n/a (CPU device)") && header.contains("contention n/a (CPU device)"),
        "{header}"
    );
}

#[test]
fn a_gpu_mode_switch_is_logged_once_it_holds_and_a_flicker_is_not() {
    use PowerMode::{Fast, Slow};
    // Fast taken (it held DEBOUNCE passes), then a one-pass slow flicker.
    let mut modes = vec![Fast; DEBOUNCE as usize];
    modes.extend([Slow, Fast, Fast]);
    let flicker = run(DeviceKind::Discrete, &modes, false);
    assert!(
        !log(&flicker).iter().any(|t| t.contains("power mode")),
        "{:?}",
        log(&flicker)
    );
    modes.extend(std::iter::repeat_n(Slow, DEBOUNCE as usize));
    let held = run(DeviceKind::Discrete, &modes, false);
    let switches: Vec<String> = log(&held)
        .into_iter()
        .filter(|t| t.contains("power mode"))
        .collect();
    assert_eq!(switches, ["power mode fast → slow"], "{:?}", log(&held));
}

#[test]
fn a_repeated_per_pass_warning_folds_into_one_counted_line() {
    let s = run(DeviceKind::Discrete, &[PowerMode::Fast; 40], true);
    let torn: Vec<_> = s
        .live
        .log
        .iter()
        .filter(|e| e.text.starts_with("torn ring frame"))
        .collect();
    assert_eq!(torn.len(), 1, "{:?}", s.live.log);
    assert_eq!(torn[0].count, 40);
    assert_eq!(torn[0].pass, Some(39));
    // Contention that comes and goes every pass: one line each way, counted.
    let contended: Vec<_> = s
        .live
        .log
        .iter()
        .filter(|e| e.text.starts_with("contended") || e.text == "quiet again")
        .collect();
    assert_eq!(contended.len(), 2, "{:?}", s.live.log);
    assert_eq!(contended.iter().map(|e| e.count).sum::<u64>(), 39);
    let mut s = s;
    let layout = Layout::default_preset();
    let screen = ui_common::lines(&ui_common::render(&mut s, &layout, 200, 60)).join("\n");
    assert!(screen.contains("⚠ ×40 #39 torn ring frame"), "{screen}");
}

#[test]
fn the_lavapipe_recording_in_tmux_shows_no_power_or_contention_noise() {
    if !tmux_common::have_tmux() {
        return;
    }
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recordings/lavapipe-stories260k.baro");
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let s = tmux_common::Session::sized(
            &format!("cpu{w}"),
            &format!("{} replay {} --speed 0", tmux_common::BIN, f.display()),
            &[],
            (w, h),
        );
        let pane = s.wait_for(&["200 of 200"], Duration::from_secs(60));
        for noise in ["slow power mode", "power mode", "contended:", "quiet again"] {
            assert!(
                !pane.contains(noise),
                "{w}×{h}: {noise:?} on screen:\n{pane}"
            );
        }
        if w == 200 {
            assert!(pane.contains("power n/a (CPU device)"), "{pane}");
        }
        s.key("q");
        assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
    }
}
