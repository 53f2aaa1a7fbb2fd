//! A device that never finishes a pass must not hang the process: after the watchdog the
//! device is abandoned (nothing waits for it) and baro-top exits within seconds, with the
//! watchdog named. On lavapipe a multi-mode pass over 65,535 workgroups takes far longer than
//! the watchdog given here, which makes it a hang from the host's point of view.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Run baro-top with `args`; returns (exit code, every output line, seconds from the first
/// line naming the watchdog to the exit).
fn run_until_exit(args: &[&str]) -> (Option<i32>, Vec<String>, Option<f64>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .env(
            "LP_NUM_THREADS",
            std::env::var("LP_NUM_THREADS").unwrap_or("2".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top starts");
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let readers: Vec<_> = [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ]
    .into_iter()
    .map(|r| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send((Instant::now(), line));
            }
        })
    })
    .collect();
    drop(tx);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("baro-top {args:?} still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let exited = Instant::now();
    for r in readers {
        r.join().expect("reader");
    }
    let lines: Vec<(Instant, String)> = rx.into_iter().collect();
    let first_watchdog = lines
        .iter()
        .find(|(_, l)| l.contains("watchdog"))
        .map(|(t, _)| exited.duration_since(*t).as_secs_f64());
    (
        status.code(),
        lines.into_iter().map(|(_, l)| l).collect(),
        first_watchdog,
    )
}

fn skip_without_vulkan() -> bool {
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    !in_ci && std::env::var_os("BARO_SKIP_VULKAN").is_some()
}

#[test]
fn a_pass_past_the_watchdog_ends_generate_within_5_s_naming_the_watchdog() {
    if skip_without_vulkan() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set)");
        return;
    }
    let (code, lines, after) = run_until_exit(&[
        "generate",
        "--backend",
        "vulkan",
        "--mode",
        "multi",
        "--grid",
        "65535",
        "-n",
        "5",
        "--watchdog-ms",
        "1500",
    ]);
    let all = lines.join("\n");
    assert_eq!(code, Some(2), "an abandoned device is an error:\n{all}");
    assert!(
        all.contains("fail-word 0x00000400 FAIL watchdog"),
        "the pass's fail word names the watchdog:\n{all}"
    );
    let after = after.expect("a line names the watchdog");
    assert!(
        after < 5.0,
        "exited {after:.1} s after the watchdog:\n{all}"
    );
}

#[test]
fn a_gate_whose_pass_misses_the_watchdog_is_refused_within_5_s() {
    if skip_without_vulkan() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set)");
        return;
    }
    let (code, lines, after) = run_until_exit(&[
        "gate",
        "--modes",
        "multi",
        "--grid",
        "65535",
        "--steps",
        "3",
        "--watchdog-ms",
        "1500",
    ]);
    let all = lines.join("\n");
    assert!(
        matches!(code, Some(1) | Some(2)),
        "a hung gate is refused, not passed:\n{all}"
    );
    assert!(!all.contains("GATE                         PASS"), "{all}");
    let after = after.expect("a line names the watchdog");
    assert!(
        after < 5.0,
        "exited {after:.1} s after the watchdog:\n{all}"
    );
}
