//! The attribution warnings (telemetry::analysis) reach every consumer, not only the
//! dashboard: `replay --headless --json` (the lines `run --json` prints), `diff`, `export`.
//! Recordings are the dashboard's synthetic runs (no GPU): one with a workgroup caught in the
//! level-tail trap, one without.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::{EndReason, Telemetry};
use baro_ui::synthetic::{Synth, SynthConfig};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-attr-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// 16 workgroups, 2 layers; `tail_wg` caught in the trap (30 % slower on ffn_up/ffn_down).
fn config(tail_wg: Option<u32>) -> SynthConfig {
    SynthConfig {
        grid: 16,
        layers: 2,
        tail_wg,
        fail_every: None,
        near_tie_pos: None,
        mismatch_at: None,
        ..Default::default()
    }
}

/// A finished recording of `passes` passes of `cfg`.
fn record(path: &Path, cfg: SynthConfig, passes: u64) {
    let mut s = Synth::new(cfg);
    let header = RecordingHeader::new(s.details().clone(), "test");
    let mut w = Writer::create(path, &header).expect("writer");
    for m in s.stream(passes) {
        w.write(&m).expect("write");
    }
    w.write(&Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .expect("write");
    w.finish().expect("finish");
}

/// The `attribution` arrays of `replay --headless --json`'s frame lines.
fn replayed_attribution(file: &Path) -> Vec<serde_json::Value> {
    let o = baro(&[
        "replay",
        file.to_str().expect("utf-8"),
        "--headless",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("one JSON object"))
        .filter(|v| v["type"] == "frame")
        .map(|v| v["attribution"].clone())
        .collect()
}

#[test]
fn replay_json_names_the_trapped_workgroup_as_the_last_arriver_on_every_pass() {
    let d = tmpdir("trap-json");
    let f = d.join("trap.baro");
    record(&f, config(Some(5)), 20);
    let passes = replayed_attribution(&f);
    assert_eq!(passes.len(), 20);
    for a in &passes {
        let a = a.as_array().expect("a list per frame");
        let ffn = a
            .iter()
            .find(|w| w["name"] == "ffn_up.l1")
            .unwrap_or_else(|| panic!("no ffn_up.l1 tail: {a:?}"));
        assert_eq!(
            (&ffn["kind"], &ffn["level"], &ffn["last_arriver"]),
            (&"tail".into(), &8.into(), &5.into()),
            "{ffn}"
        );
        let (c, b, t) = (&ffn["charged_ns"], &ffn["busy_ns"], &ffn["tail_ns"]);
        assert_eq!(
            c.as_u64().zip(b.as_u64()).map(|(c, b)| c - b),
            t.as_u64(),
            "{ffn}"
        );
        // Only the stages that close a trapped level are named.
        assert!(
            a.iter()
                .all(|w| w["name"].as_str().is_some_and(|n| n.starts_with("ffn_"))),
            "{a:?}"
        );
    }
}

#[test]
fn replay_json_of_a_run_without_a_trap_has_an_empty_attribution_on_every_pass() {
    let d = tmpdir("clean-json");
    let f = d.join("clean.baro");
    record(&f, config(None), 20);
    let passes = replayed_attribution(&f);
    assert_eq!(passes.len(), 20);
    assert!(
        passes.iter().all(|a| a == &serde_json::json!([])),
        "{passes:?}"
    );
}

#[test]
fn diff_lists_the_trapped_sides_warnings_and_none_for_the_clean_side_in_text_and_json() {
    let d = tmpdir("diff");
    let (trap, clean) = (d.join("trap.baro"), d.join("clean.baro"));
    record(&trap, config(Some(5)), 20);
    record(&clean, config(None), 20);
    let (c, t) = (
        clean.to_str().expect("utf-8"),
        trap.to_str().expect("utf-8"),
    );
    let o = baro(&["diff", c, t]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("attribution A: none"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("  B: ffn_up.l1 charged ")
                && l.ends_with("is level 8's tail, waiting for workgroup 5")),
        "{text}"
    );
    let o = baro(&["diff", c, t, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["attribution"]["a"], serde_json::json!([]), "{v}");
    let b = v["attribution"]["b"].as_array().expect("B's warnings");
    assert!(
        b.iter()
            .any(|w| w["name"] == "ffn_up.l1" && w["last_arriver"] == 5),
        "{b:?}"
    );
}

/// Per pass slice of `export --perfetto`'s trace: (`attribution_warnings`, `attribution`).
fn exported_attribution(file: &Path) -> Vec<(u64, Option<String>)> {
    let out = file.with_extension("json");
    let o = baro(&[
        "export",
        file.to_str().expect("utf-8"),
        "--perfetto",
        out.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the trace")).expect("JSON");
    v["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] == "B" && e["name"].as_str().is_some_and(|n| n.starts_with("pass ")))
        .map(|e| {
            let a = &e["args"];
            let n = a["attribution_warnings"]
                .as_u64()
                .expect("a count on every pass");
            (n, a["attribution"].as_str().map(str::to_string))
        })
        .collect()
}

#[test]
fn export_pass_slices_name_the_trapped_workgroup_and_carry_none_for_a_clean_run() {
    let d = tmpdir("export");
    let (trap, clean) = (d.join("trap.baro"), d.join("clean.baro"));
    record(&trap, config(Some(5)), 12);
    record(&clean, config(None), 12);
    let t = exported_attribution(&trap);
    assert_eq!(t.len(), 12);
    for (n, text) in &t {
        let text = text.as_deref().unwrap_or_default();
        assert!(
            *n >= 1 && text.contains("waiting for workgroup 5"),
            "{n} {text}"
        );
    }
    let c = exported_attribution(&clean);
    assert_eq!(c, vec![(0, None); 12]);
}
