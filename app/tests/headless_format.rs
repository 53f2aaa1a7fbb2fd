//! One headless line format across `run`, `replay --headless` and `live` / `replay FILE` off a
//! terminal: the same fields, every time in `ms` with three decimals, a pass line carrying
//! its verdict once the reference has sent it, an `end:` line and a closing `summary:` line
//! (tok/s, verdict counts, the fail word's tally). `run --help` advertises no `--headless`
//! (it has none: `run` is always headless).
//!
//! The `run` test needs a Vulkan device (lavapipe): in CI a missing one fails; outside CI
//! `BARO_SKIP_VULKAN` skips it with a printed reason.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use baro_telemetry::fail::bits;
use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{CheckState, Correctness, EndReason, Telemetry, Verdict};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .env("LP_NUM_THREADS", "2")
        .args(args)
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-headless-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Every pass line in the one format: `pass N pos N tok N -> N … gpu X wall X … | fail-word`,
/// every number before `ms` with exactly three decimals and no other time unit.
fn assert_format(text: &str, passes: usize) {
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("start: "), "{text}");
    let pass: Vec<&&str> = lines.iter().filter(|l| l.starts_with("pass ")).collect();
    assert_eq!(pass.len(), passes, "{text}");
    for (i, l) in pass.iter().enumerate() {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(&w[..3], &["pass", &i.to_string(), "pos"], "{l}");
        assert_eq!(w[4], "tok", "{l}");
        assert_eq!(w[6], "->", "{l}");
        assert!(l.contains(" gpu ") && l.contains(" wall "), "{l}");
        assert!(l.contains(" | fail-word 0x"), "{l}");
        for (k, t) in w.iter().enumerate() {
            assert!(
                !t.ends_with("us") && !t.ends_with("µs") && *t != "ns",
                "a time not in ms in {l}"
            );
            if *t == "ms" {
                let v = w[k - 1];
                let dec = v.split_once('.').map(|(_, d)| d.len());
                assert!(dec == Some(3) && v.parse::<f64>().is_ok(), "{v:?} in {l}");
            }
        }
    }
    let n = lines.len();
    assert!(lines[n - 2].starts_with("end: "), "{text}");
    assert!(
        lines[n - 1].starts_with(&format!("summary: {passes} passes, ")),
        "{text}"
    );
    assert!(lines[n - 1].contains(" tok/s ("), "{text}");
}

/// A recording whose verdicts arrive late (pass 1's a mismatch, after pass 2's frame), one
/// pass failing two fail-word bits and one pass the reference skips.
fn recording(path: &Path) {
    let run = synthetic_run(8, 12, 4);
    let mut w = Writer::create(path, &RecordingHeader::new(run.clone(), "test")).unwrap();
    w.write(&Telemetry::Start(run.clone())).unwrap();
    let verdict = |v: Verdict, pass: u64| Telemetry::Correctness {
        pass,
        correctness: Correctness {
            gpu_token: 7,
            reference: Some(9),
            runner_up: Some(7),
            margin: Some(0.5),
            verdict: v,
            first_divergence: (v != Verdict::Match).then_some(pass),
        },
    };
    for p in 0..4u64 {
        let mut f = synthetic_frame(&run, p, 3);
        f.correctness = None;
        f.check = if p == 3 {
            CheckState::Skipped
        } else {
            CheckState::Pending
        };
        f.fail.word.bits = if p == 2 {
            bits::TIMEOUT | bits::POISONED
        } else {
            0
        };
        w.write(&Telemetry::Frame(Box::new(f))).unwrap();
        if p == 2 {
            w.write(&verdict(Verdict::Match, 0)).unwrap();
            w.write(&verdict(Verdict::Mismatch, 1)).unwrap();
            w.write(&verdict(Verdict::Match, 2)).unwrap();
        }
    }
    w.write(&Telemetry::End {
        passes: 4,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .unwrap();
    w.finish().unwrap();
}

#[test]
fn replay_headless_lines_carry_late_verdicts_and_end_with_the_summary_tally() {
    let f = tmp("late.baro");
    recording(&f);
    let o = baro(&["replay", "--headless", f.to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "a failed pass: {text}");
    assert_format(&text, 4);
    let pass = |n: usize| {
        text.lines()
            .filter(|l| l.starts_with("pass "))
            .nth(n)
            .unwrap()
    };
    assert!(pass(0).contains(" ref match |"), "{text}");
    assert!(
        pass(1).contains(" ref mismatch (reference 9, runner-up 7, margin 5.00e-1"),
        "{text}"
    );
    assert!(pass(3).contains(" ref skipped |"), "{text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("| tokens: 2 match, 1 mismatch, 1 not checked |"),
        "{summary}"
    );
    assert!(
        summary.contains("| fail word: 1 failed of 4 (barrier-timeout ×1, output-poisoned ×1)"),
        "{summary}"
    );
}

#[test]
fn replay_off_a_terminal_and_live_synthetic_print_the_same_format() {
    let f = tmp("same.baro");
    recording(&f);
    // `replay FILE` with stdout a pipe: the dashboard's headless path.
    let o = baro(&["replay", f.to_str().unwrap()]);
    let a = out(&o);
    assert_format(&a, 4);
    let b = out(&baro(&["replay", "--headless", f.to_str().unwrap()]));
    assert_eq!(a, b, "replay off a terminal and replay --headless differ");
    let o = baro(&["live", "--synthetic", "--passes", "6", "--rate", "1000"]);
    assert_eq!(o.status.code(), Some(0));
    assert_format(&out(&o), 6);
}

#[test]
fn replay_headless_json_keeps_stdout_json_and_puts_the_summary_on_stderr() {
    let f = tmp("json.baro");
    recording(&f);
    let o = baro(&["replay", "--headless", "--json", f.to_str().unwrap()]);
    for l in out(&o).lines() {
        assert!(l.starts_with('{'), "not JSON: {l}");
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("summary: 4 passes, "), "{err}");
    assert!(
        err.contains("tokens: 2 match, 1 mismatch, 1 not checked"),
        "{err}"
    );
}

#[test]
fn run_prints_the_shared_format_with_verdicts_and_a_summary() {
    let ok = baro(&["devices"]).status.success();
    if !ok {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
        if ci || std::env::var_os("BARO_SKIP_VULKAN").is_none() {
            panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1; outside CI, BARO_SKIP_VULKAN=1 skips)");
        }
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device");
        return;
    }
    let o = baro(&["run", "--passes", "6", "--check", "all"]);
    let text = out(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_format(&text, 6);
    // Each line waited for its verdict: none says pending.
    for l in text.lines().filter(|l| l.starts_with("pass ")) {
        assert!(l.contains(" ref match |"), "{l}");
    }
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("| tokens: 6 match | fail word: 6 clean | end: completed"),
        "{summary}"
    );
}

#[test]
fn run_help_advertises_no_headless_flag() {
    let o = baro(&["run", "--help"]);
    let help = out(&o);
    assert!(o.status.success());
    assert!(!help.contains("--headless"), "{help}");
    let o = baro(&["run", "--headless"]);
    assert_eq!(o.status.code(), Some(2), "refused as unknown");
}
