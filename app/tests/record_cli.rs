//! `baro-top record` on the Vulkan device (lavapipe in CI): the file replays to the run's
//! messages, and bad arguments are refused before anything is written.

use std::process::{Command, Output};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .env(
            "LP_NUM_THREADS",
            std::env::var("LP_NUM_THREADS").unwrap_or("2".into()),
        )
        .output()
        .expect("baro-top runs")
}

fn skip_without_vulkan() -> bool {
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    !in_ci && std::env::var_os("BARO_SKIP_VULKAN").is_some()
}

#[test]
fn a_recording_replays_as_start_then_every_pass_then_end_with_spans_kept_every_nth_pass() {
    if skip_without_vulkan() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("baro-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let f = dir.join("r.baro");
    let fs = f.to_str().expect("utf-8");
    let o = baro(&["record", "-o", fs, "--passes", "6", "--spans-every", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = baro(&["replay", fs, "--headless", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        lines.first().map(|v| v["type"].clone()),
        Some("start".into())
    );
    assert_eq!(lines.last().map(|v| v["type"].clone()), Some("end".into()));
    let frames: Vec<&serde_json::Value> = lines.iter().filter(|v| v["type"] == "frame").collect();
    assert_eq!(frames.len(), 6);
    for fr in &frames {
        assert_eq!(fr["fail_word"], "0x00000000", "{fr}");
        let pass = fr["pass"].as_u64().expect("pass");
        assert_eq!(
            fr.get("spans").is_some(),
            pass % 3 == 0,
            "pass {pass}: spans kept one pass in 3"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_refuses_a_directory_and_a_zero_span_interval_before_writing() {
    let dir = std::env::temp_dir();
    let o = baro(&[
        "record",
        "-o",
        dir.to_str().expect("utf-8"),
        "--passes",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory"));
    let o = baro(&["record", "-o", "/tmp/x.baro", "--spans-every", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--spans-every"));
}

#[test]
fn record_check_off_records_frames_without_reference_checks_and_a_bad_check_is_refused() {
    if skip_without_vulkan() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("baro-record-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let f = dir.join("r.baro");
    let fs = f.to_str().expect("utf-8");
    let o = baro(&["record", "-o", fs, "--passes", "3", "--check", "bogus"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--check") && e.contains("bogus"), "{e}");
    assert!(!f.exists(), "nothing written");
    let o = baro(&["record", "-o", fs, "--passes", "3", "--check", "off"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("writer backlog at most"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = baro(&["replay", fs, "--headless", "--json"]);
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|v| v["type"] == "frame")
        .collect();
    assert_eq!(frames.len(), 3);
    for fr in &frames {
        assert_eq!(fr["check"], "off", "{fr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn diff_refuses_recordings_of_two_k_quant_mixes_that_share_a_path_and_a_classifier_type() {
    // A Q4_K_M and a Q5_K_M file at the same path (a user re-quantising in place) share the
    // model name and the Q6_K classifier: the recordings' weights label (the layer matrices'
    // types) is what tells `diff` they are different weights.
    if skip_without_vulkan() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("baro-record-mix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let model = dir.join("m.gguf");
    let ms = model.to_str().expect("utf-8");
    let mut outs = vec![];
    for q in ["q4_k_m", "q5_k_m"] {
        let o = baro(&[
            "model", "gen", "--shape", "tiny", "--dim", "256", "--hidden", "256", "--quant", q,
            "-o", ms,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let f = dir.join(format!("{q}.baro"));
        let fs = f.to_str().expect("utf-8").to_string();
        let o = baro(&[
            "record", "-m", ms, "-o", &fs, "--passes", "2", "--check", "off",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        outs.push(fs);
    }
    let o = baro(&["diff", &outs[0], &outs[1]]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let line = e
        .lines()
        .find(|l| l.contains("weights differ"))
        .unwrap_or_else(|| panic!("no `weights differ` in: {e}"));
    let (a, b) = line
        .split_once("weights differ (A ")
        .and_then(|(_, r)| r.split_once(", B "))
        .expect("A and B labels");
    assert!(a.contains("q4_k") && !a.contains("q5_k"), "{line}");
    assert!(b.starts_with("q5_k") || b.contains("+q5_k"), "{line}");
    assert!(
        !e.contains("models differ"),
        "same path, same model name: {e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
