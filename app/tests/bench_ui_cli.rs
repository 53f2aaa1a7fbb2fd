//! `baro-top bench ui`: the synthetic measurement prints one row of numbers per terminal
//! size; bad sizes and misplaced flags are refused naming the flag; `--live` on lavapipe
//! reports tok/s for both arms (dashboard and headless).
//!
//! In CI (`CI` set) a missing Vulkan device fails; outside CI `BARO_SKIP_VULKAN` skips with
//! a printed reason.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .env("LP_NUM_THREADS", "2")
        .args(args)
        .output()
        .unwrap()
}

fn has_vulkan() -> bool {
    let ok = baro(&["devices"]).status.success();
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !ok {
        if in_ci || std::env::var_os("BARO_SKIP_VULKAN").is_none() {
            panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1; outside CI, BARO_SKIP_VULKAN=1 skips)");
        }
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device");
    }
    ok
}

fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter_map(|w| w.trim_end_matches('%').parse().ok())
        .collect()
}

#[test]
fn bench_ui_prints_a_row_of_render_numbers_per_size_and_the_ingest_rate() {
    let o = baro(&[
        "bench", "ui", "--frames", "5", "--size", "80x24", "--size", "100x30",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for size in ["80x24", "100x30"] {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size))
            .unwrap_or_else(|| panic!("no row for {size}:\n{out}"));
        let n = numbers(row);
        assert_eq!(n.len(), 7, "p50 p99 max wall prep redraw×2: {row}");
        assert!(
            n[0] > 0.0 && n[0] <= n[1] && n[1] <= n[2],
            "p50 ≤ p99 ≤ max: {row}"
        );
    }
    let ingest = out.lines().find(|l| l.starts_with("ingest")).unwrap();
    let rate: f64 = ingest.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(rate > 0.0 && ingest.contains("M spans/s"), "{ingest}");
}

#[test]
fn bench_ui_refuses_a_zero_or_malformed_size_naming_the_flag() {
    for bad in ["0x0", "abc", "80x", "80x24x2"] {
        let o = baro(&["bench", "ui", "--size", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--size") && err.contains(bad), "{bad}: {err}");
        assert!(o.stdout.is_empty(), "{bad}: nothing measured");
    }
}

#[test]
fn bench_ui_refuses_live_flags_without_live_and_synthetic_flags_with_it() {
    let o = baro(&["bench", "ui", "--seconds", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--seconds applies to `bench ui --live` only"),
        "{err}"
    );
    let o = baro(&["bench", "ui", "--live", "--frames", "3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--frames does not apply to `bench ui --live`"),
        "{err}"
    );
}

#[test]
fn bench_ui_live_on_lavapipe_reports_tokens_per_second_for_both_arms() {
    if !has_vulkan() {
        return;
    }
    // Every arm, the 1 s warm-up included, needs two frames to arrive within it. With the
    // default chain (16 passes a submission) frames come in bursts of 16, which a loaded
    // lavapipe machine can take longer than 1 s to decode: one pass a submission, and 3 s
    // (the default) per measured arm.
    let o = baro(&[
        "bench",
        "ui",
        "--live",
        "--chain",
        "1",
        "--seconds",
        "3",
        "--rounds",
        "1",
        "--allow-cpu",
        "--size",
        "120x40",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains("stories260K") && err.contains("120x40"),
        "{err}"
    );
    for arm in ["dashboard", "headless"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(arm))
            .unwrap_or_else(|| panic!("no {arm} row:\n{out}"));
        let n = numbers(row);
        assert!(n[0] > 0.0, "{arm} median tok/s must be > 0: {row}");
    }
    let dash = numbers(out.lines().find(|l| l.starts_with("dashboard")).unwrap());
    assert!(dash[4] > 0.0, "the dashboard arm drew frames: {out}");
    assert!(
        out.contains("ratio dashboard/headless of median tok/s: "),
        "{out}"
    );
}
