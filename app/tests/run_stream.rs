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

/// Per frame line, the attribution warnings its own stage timings call for: a level's last
/// stage whose charged − busy is at least 5 µs and a fifth of busy (the dashboard's rule).
fn expected_tails(start: &serde_json::Value, frame: &serde_json::Value) -> Vec<u64> {
    let mut want = vec![];
    for lv in start["levels"].as_array().expect("levels") {
        let Some(last) = lv["stages"].as_array().and_then(|s| s.last()) else {
            continue;
        };
        let stages = frame["stages"].as_array().expect("stages");
        let Some(t) = stages.iter().find(|t| &t["stage"] == last) else {
            continue;
        };
        let (b, c) = (
            t["busy_ns"].as_u64().unwrap(),
            t["charged_ns"].as_u64().unwrap(),
        );
        let tail = c.saturating_sub(b);
        if tail >= 5_000 && tail as f64 >= 0.2 * b as f64 {
            want.push(last.as_u64().unwrap());
        }
    }
    want.sort_unstable();
    want
}

#[test]
fn run_json_frames_carry_exactly_the_attribution_warnings_their_stage_timings_call_for() {
    if !has_vulkan() {
        return;
    }
    for dispatch in ["mega", "multi"] {
        let o = baro(&["run", "--json", "--passes", "2", "--dispatch", dispatch]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect();
        let start = &lines[0];
        let grid = start["grid"].as_u64().unwrap();
        let frames: Vec<&serde_json::Value> =
            lines.iter().filter(|v| v["type"] == "frame").collect();
        assert_eq!(frames.len(), 2);
        for f in frames {
            let a = f["attribution"]
                .as_array()
                .expect("attribution on every frame");
            let mut got: Vec<u64> = a
                .iter()
                .filter(|w| w["kind"] == "tail")
                .map(|w| w["stage"].as_u64().unwrap())
                .collect();
            got.sort_unstable();
            assert_eq!(got, expected_tails(start, f), "{dispatch}: {a:?}");
            for w in a.iter().filter(|w| w["kind"] == "tail") {
                // The last arriver comes from the barrier stamps: mega mode has them (spans
                // left out of the line, not out of the analysis), multi mode has no barriers.
                match dispatch {
                    "mega" => assert!(w["last_arriver"].as_u64().is_some_and(|x| x < grid), "{w}"),
                    _ => assert!(w["last_arriver"].is_null(), "{w}"),
                }
            }
        }
    }
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

/// Every object key in `v` (nested too), with the path where it was first seen.
fn keys_of(
    v: &serde_json::Value,
    path: &str,
    out: &mut std::collections::BTreeMap<String, String>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.entry(k.clone()).or_insert_with(|| path.to_string());
                keys_of(x, &format!("{path}.{k}"), out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys_of(x, path, out)),
        _ => {}
    }
}

/// The names docs/stream.md documents: identifiers inside `backtick` spans of its prose, and
/// the keys of the JSON inside its code blocks.
fn documented_names(doc: &str) -> std::collections::BTreeSet<String> {
    let ident = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let mut names = std::collections::BTreeSet::new();
    for (i, part) in doc.split("```").enumerate() {
        if i % 2 == 1 {
            // A code block: its JSON keys ("key":).
            for piece in part.split('"').collect::<Vec<_>>().windows(2) {
                if piece[1].trim_start().starts_with(':') {
                    names.extend(ident(piece[0]));
                }
            }
        } else {
            for span in part.split('`').skip(1).step_by(2) {
                names.extend(ident(span));
            }
        }
    }
    names
}

#[test]
fn docs_stream_md_names_every_key_run_json_writes() {
    if !has_vulkan() {
        return;
    }
    // Mega with spans, a read-ahead budget, an idle wait and the reference: the keys of
    // every line kind.
    let o = baro(&[
        "run",
        "--json",
        "--passes",
        "3",
        "--spans",
        "--prefetch-mib",
        "1",
        "--idle-wait-ns",
        "1500",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut keys = std::collections::BTreeMap::new();
    let mut kinds = std::collections::BTreeSet::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        let kind = v["type"].as_str().expect("type").to_string();
        keys_of(&v, &kind, &mut keys);
        kinds.insert(kind);
    }
    // (`prefetched_bytes` stays 0, so absent, here: stories260K's attention levels keep both
    // of lavapipe's workgroups busy.)
    for must in [
        "start",
        "frame",
        "end",
        "correctness",
        "prefetch_mib",
        "idle_wait_ns",
    ] {
        assert!(
            kinds.contains(must) || keys.contains_key(must),
            "the run wrote no {must}: {kinds:?}"
        );
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/stream.md"))
        .expect("docs/stream.md");
    let names = documented_names(&doc);
    let missing: Vec<String> = keys
        .iter()
        .filter(|(k, _)| !names.contains(*k))
        .map(|(k, at)| format!("{k} (in {at})"))
        .chain(
            kinds
                .iter()
                .filter(|k| !names.contains(*k))
                .map(|k| format!("line type {k}")),
        )
        .collect();
    assert!(
        missing.is_empty(),
        "docs/stream.md does not name what `run --json` writes: {missing:?}"
    );
}
