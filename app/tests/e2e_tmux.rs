//! End to end in a real terminal (tmux): `baro-top replay FILE` and `baro-top` with no Vulkan
//! driver open the dashboard with the REPLAY banner; `?` shows the help; `q` exits 0 and
//! leaves the alternate screen. Plus the same two without a terminal: headless lines said
//! once, and exit 2 with the lavapipe advice. In CI (CI=true) a missing tmux fails.

mod tmux_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tmux_common::{have_tmux, tmp, Session, BIN};

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{EndReason, Telemetry};

const NO_DRIVER: [(&str, &str); 2] = [
    ("VK_DRIVER_FILES", "/nonexistent.json"),
    ("VK_ICD_FILENAMES", "/nonexistent.json"),
];
const PANELS: [&str; 7] = [
    "passes ·",
    "flame ·",
    "stages ·",
    "barriers ·",
    "attribution ·",
    "tokens ·",
    "log ·",
];

/// A synthetic recording (synthetic model name: the replay decodes its tokens as words).
fn recording(path: &Path) {
    let run = synthetic_run(8, 16, 6);
    let mut w = Writer::create(path, &RecordingHeader::new(run.clone(), "e2e")).expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("start");
    for p in 0..64 {
        w.write(&Telemetry::Frame(Box::new(synthetic_frame(&run, p, 5))))
            .expect("frame");
    }
    w.write(&Telemetry::End {
        passes: 64,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .expect("end");
    w.finish().expect("finish");
}

#[test]
fn replay_in_tmux_shows_every_panel_banner_help_and_quits_cleanly() {
    if !have_tmux() {
        return;
    }
    let f = tmp("e2e.baro");
    recording(&f);
    let s = Session::start(
        "replay",
        &format!("{BIN} replay {} --speed 0", f.display()),
        &[],
    );
    // Decoded token text: synthetic recordings decode to the synthetic words.
    // Wait for the end of the replay: " the" alone also matches "waiting for the telemetry
    // stream" on the first frame drawn, which raced the assertions below.
    let pane = s.wait_for(&["tokens ·", "64 of 64"], Duration::from_secs(60));
    for p in PANELS {
        assert!(pane.contains(p), "no panel {p:?}:\n{pane}");
    }
    assert!(pane.contains("SYNTHETIC REPLAY of "), "no banner:\n{pane}");
    assert!(
        pane.contains("not measurements; recorded on synthetic,"),
        "{pane}"
    );
    assert!(pane.contains("64 of 64"), "position bar:\n{pane}");
    assert_eq!(
        s.t(&["display", "-p", "-t", "0", "#{alternate_on}"]).trim(),
        "1"
    );
    s.t(&["send-keys", "-t", "0", "?"]);
    s.wait_for(
        &["help · keys", "replay: seek to a pass"],
        Duration::from_secs(30),
    );
    s.t(&["send-keys", "-t", "0", "Escape"]);
    // Escape closes the help; only then q. Sent at once, both bytes can reach the app in one
    // read, which the terminal parser takes for Alt-q: with the help open, a key that only
    // closes it, and baro-top would never see the q.
    s.wait_gone(&["help · keys"], Duration::from_secs(30));
    s.t(&["send-keys", "-t", "0", "q"]);
    assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
    // Left the alternate screen, and with it the dashboard (both once tmux has caught up
    // with the pane's last output).
    s.wait_alternate("0", Duration::from_secs(30));
    s.wait_gone(&["REPLAY of "], Duration::from_secs(30));
}

#[test]
fn no_vulkan_driver_in_tmux_replays_the_embedded_recording_with_banner_and_advice() {
    if !have_tmux() {
        return;
    }
    let s = Session::start("nodev", BIN, &NO_DRIVER);
    let pane = s.wait_for(
        &["REPLAY of the embedded recordings/", "NOT LIVE"],
        Duration::from_secs(60),
    );
    assert!(
        pane.contains("sudo apt-get install mesa-vulkan-drivers libvulkan1"),
        "{pane}"
    );
    s.t(&["send-keys", "-t", "0", "q"]);
    assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
}

#[test]
fn no_vulkan_driver_without_a_terminal_exits_2_with_the_lavapipe_advice() {
    let o = Command::new(BIN)
        .envs(NO_DRIVER)
        .output()
        .expect("baro-top runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty());
    assert!(
        err.contains("sudo apt-get install mesa-vulkan-drivers libvulkan1"),
        "{err}"
    );
}

#[test]
fn replay_without_a_terminal_prints_headless_lines_and_says_so_once() {
    let f = tmp("headless.baro");
    recording(&f);
    let o = Command::new(BIN)
        .args(["replay", f.to_str().expect("utf-8 path")])
        .output()
        .expect("baro-top runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("stdout is not a terminal").count(), 1, "{err}");
    assert!(out.starts_with("start: "), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("pass ")).count(), 64);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[lines.len() - 2].starts_with("end: 64 passes"),
        "{out}"
    );
    assert!(
        lines[lines.len() - 1].starts_with("summary: 64 passes"),
        "{out}"
    );
}

#[test]
fn replay_at_80x24_wraps_the_banner_whole_and_keeps_the_speed_on_the_position_line() {
    if !have_tmux() {
        return;
    }
    // The shipped H200 recording: its banner is 117 columns, past 80.
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../recordings/h200-llama1b-mega.baro"
    );
    let s = Session::sized(
        "replay80",
        &format!("{BIN} replay {f} --speed 0"),
        &[],
        (80, 24),
    );
    let pane = s.wait_for(&["120 of 120"], Duration::from_secs(60));
    assert!(
        pane.contains("REPLAY of ") && pane.contains("commit 1537da5240e8)"),
        "the banner is cut at 80 columns:\n{pane}"
    );
    let pos = pane
        .lines()
        .find(|l| l.contains("120 of 120"))
        .unwrap_or_default();
    assert!(pos.contains(" speed max"), "speed off screen: {pos:?}");
    s.t(&["send-keys", "-t", "0", "q"]);
    assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
}
