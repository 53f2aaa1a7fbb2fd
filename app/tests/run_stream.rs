//! `run` as the telemetry stream's consumer: `--json` is the stream itself, and the exit
//! status is the engine's outcome. Also: the app reaches the GPU only through the engine's
//! device, session, gate and bench APIs.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .env("LP_NUM_THREADS", "2")
        .output()
        .expect("baro-top runs")
}

fn has_vulkan() -> bool {
    let ok = baro(&["devices"]).status.success();
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !ok && (in_ci || std::env::var_os("BARO_SKIP_VULKAN").is_none()) {
        panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)");
    }
    ok
}

#[test]
fn run_json_is_the_stream_start_first_then_frames_with_the_old_fields_then_end() {
    if !has_vulkan() {
        return;
    }
    let o = baro(&["run", "--json", "--passes", "3", "--dispatch", "multi"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let types: Vec<&str> = lines
        .iter()
        .map(|v| v["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types.first(), Some(&"start"), "{types:?}");
    assert_eq!(types.last(), Some(&"end"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "frame").count(), 3);
    assert_eq!(lines[0]["dispatch"], "multi");
    for (i, f) in lines.iter().filter(|v| v["type"] == "frame").enumerate() {
        assert_eq!(f["pass"], i as u64);
        for key in [
            "pos",
            "token",
            "next",
            "wall_ns",
            "gpu_ns",
            "fail",
            "torn",
            "dropped",
            "host_start_ns",
            "stages",
            "barriers",
            "fail_detail",
            "check",
        ] {
            assert!(f.get(key).is_some(), "frame line lacks {key}: {f}");
        }
        assert_eq!(f["fail_word"], "0x00000000", "{f}");
        assert!(f.get("spans").is_none(), "spans only with --spans");
    }
    assert_eq!(lines.last().expect("end")["reason"], "completed");
}

#[test]
fn run_json_carries_compiler_statistics_for_both_pipelines_exactly_when_devices_says_the_driver_reports_them(
) {
    if !has_vulkan() {
        return;
    }
    let d = baro(&["devices"]);
    let listing = String::from_utf8_lossy(&d.stdout);
    let line = listing
        .lines()
        .find(|l| l.trim_start().starts_with("compiler stats"))
        .unwrap_or_else(|| {
            panic!("devices names whether the driver reports registers:\n{listing}")
        });
    let reports = line.contains("yes (VK_KHR_pipeline_executable_properties");
    assert!(reports || line.contains("no ("), "{line}");
    let o = baro(&["run", "--json", "--passes", "2", "--ring-every", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let start: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    let names: Vec<&str> = start["pipelines"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["pipeline"].as_str()).collect())
        .unwrap_or_default();
    if reports {
        assert_eq!(names, ["decode", "decode (unstamped)"], "{start}");
        assert!(start["pipelines"][0]["stats"]
            .as_array()
            .is_some_and(|s| !s.is_empty()));
    } else {
        assert!(start.get("pipelines").is_none(), "{start}");
    }
}

#[test]
fn run_exits_non_zero_when_a_pass_fails_and_says_why() {
    if !has_vulkan() {
        return;
    }
    // Four workgroups on two lavapipe threads cannot be co-resident: the barrier times out.
    let o = baro(&[
        "run",
        "--headless",
        "--passes",
        "4",
        "--dispatch",
        "mega",
        "--grid",
        "4",
        "--spin-timeout-ms",
        "100",
    ]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    if !err.contains("llvmpipe") {
        return; // a real GPU keeps 4 workgroups resident
    }
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains(" FAIL "), "{out}");
    assert!(err.contains("pass 0 failed"), "{err}");
}

#[test]
fn run_refuses_both_dispatch_styles_at_once() {
    let o = baro(&["run", "--dispatch", "both"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--dispatch"));
}

#[test]
fn the_app_reaches_the_gpu_only_through_the_engine_apis() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![dir];
    let mut offenders = vec![];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("src dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source");
                if text.contains("baro_engine::vulkan") {
                    offenders.push(p.display().to_string());
                }
            }
        }
    }
    assert!(offenders.is_empty(), "vulkan:: types used in {offenders:?}");
}
