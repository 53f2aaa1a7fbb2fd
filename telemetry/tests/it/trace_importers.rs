//! Every shipped recording's trace exports, read back by real importers: the JSON by
//! speedscope's own Trace Event importer (npm `speedscope`, run under node), the protobuf by
//! Perfetto's own generated Python protos (PyPI `perfetto`'s `perfetto_trace_pb2`). Both
//! must agree with each other and with the recording, and the default export of every
//! recording must load (under 100 MB).
//!
//! scripts/test.sh installs the tools (telemetry/tests/importers: `npm ci` there and a Python
//! venv in `.venv` there). Where a tool is missing these tests fail under CI=true and skip
//! with a note otherwise.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

use baro_telemetry::recording::{export, Reader};

fn importers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/importers")
}

fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("recordings/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "baro"))
        .collect();
    v.sort();
    assert!(v.len() >= 2, "shipped recordings in {}", dir.display());
    v
}

/// A tool the test needs: present, or a failure in CI and a skip (None) elsewhere.
fn tool(what: &str, ok: bool) -> Option<()> {
    if ok {
        return Some(());
    }
    let msg = format!(
        "{what} is missing: run scripts/test.sh (it installs it into {})",
        importers_dir().display()
    );
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

fn python() -> Option<PathBuf> {
    let py = std::env::var_os("BARO_IMPORTERS_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| importers_dir().join(".venv/bin/python"));
    let ok = Command::new(&py)
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    tool("Python with the perfetto and protobuf packages", ok).map(|()| py)
}

fn node() -> Option<()> {
    let ok = importers_dir()
        .join("node_modules/speedscope/package.json")
        .exists()
        && Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    tool("node with npm speedscope", ok)
}

struct Exported {
    name: String,
    /// Per pass with spans in the recording, the stages any workgroup ran (grid slices).
    grid_stages: u64,
    survey: export::Survey,
    json: PathBuf,
    proto: PathBuf,
    json_stats: export::ExportStats,
    proto_stats: export::ExportStats,
    run: baro_telemetry::RunDetails,
}

/// Default-option JSON and protobuf exports of every shipped recording, made once per test
/// process (the tests share them).
fn exports() -> &'static [Exported] {
    static ALL: std::sync::OnceLock<Vec<Exported>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| export_all(&tmp("exports")))
}

fn export_all(dir: &Path) -> Vec<Exported> {
    std::fs::create_dir_all(dir).expect("tmp dir");
    recordings()
        .iter()
        .map(|rec| {
            let bytes = std::fs::read(rec).expect("recording");
            let open = || Reader::new(Cursor::new(&bytes)).expect("reader");
            let survey = export::survey(&mut open(), None);
            let opts = export::TraceOptions::default().resolve(&survey);
            let name = rec
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            let json = dir.join(format!("{name}.json"));
            let proto = dir.join(format!("{name}.pftrace"));
            let json_stats = export::json_trace(
                &mut open(),
                std::fs::File::create(&json).expect("create"),
                &opts,
            )
            .expect("json export");
            let proto_stats = export::proto_trace(
                &mut open(),
                std::fs::File::create(&proto).expect("create"),
                &opts,
            )
            .expect("proto export");
            let grid_stages = open()
                .filter_map(|m| match m {
                    Ok(baro_telemetry::Telemetry::Frame(f)) => Some(
                        (0..f.spans.stages())
                            .filter(|&s| (0..f.spans.grid()).any(|w| f.spans.span(s, w).is_some()))
                            .count() as u64,
                    ),
                    _ => None,
                })
                .sum();
            Exported {
                name,
                grid_stages,
                survey,
                json,
                proto,
                json_stats,
                proto_stats,
                run: open().header().run.clone(),
            }
        })
        .collect()
}

/// Where the exports go: cargo's per-target scratch directory (overwritten by the next run).
fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("trace_importers")
        .join(name)
}

fn json_lines(out: std::process::Output, what: &str) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Slices per track name, from the protobuf checker's report.
fn proto_slices(report: &serde_json::Value) -> BTreeMap<String, u64> {
    report["tracks"]
        .as_array()
        .expect("tracks")
        .iter()
        .filter(|t| t["slices"].as_u64().unwrap_or(0) > 0)
        .map(|t| {
            (
                t["name"].as_str().expect("name").to_string(),
                t["slices"].as_u64().expect("slices"),
            )
        })
        .collect()
}

#[test]
fn every_shipped_recording_exports_a_pftrace_that_perfettos_own_protos_read_back_as_the_recording()
{
    let Some(py) = python() else { return };
    let all = exports();
    let mut cmd = Command::new(&py);
    cmd.arg(importers_dir().join("perfetto_check.py"));
    cmd.args(all.iter().map(|e| &e.proto));
    let reports = json_lines(cmd.output().expect("python runs"), "perfetto_check.py");
    assert_eq!(reports.len(), all.len());
    for (e, r) in all.iter().zip(&reports) {
        let n = &e.name;
        assert_eq!(r["problem_count"], 0, "{n}: {}", r["problems"]);
        let tracks = r["tracks"].as_array().expect("tracks");
        let by_name = |name: &str| tracks.iter().find(|t| t["name"] == name);
        // One process: the run's, ordering its children explicitly.
        let process = &tracks[0];
        assert_eq!(process["uuid"], 1, "{n}");
        assert_eq!(
            process["name"],
            format!("baro-top: {} on {}", e.run.model, e.run.device),
            "{n}"
        );
        assert_eq!(process["explicit_order"], true, "{n}");
        assert!(tracks[1..].iter().all(|t| t["parent"] == 1), "{n}");
        // A slice per pass, and every kept workgroup span as a slice on its workgroup's track.
        let passes = by_name("passes").expect("passes track");
        assert_eq!(passes["slices"].as_u64(), Some(e.survey.passes), "{n}");
        assert_eq!(passes["max_depth"], 1, "{n}");
        let wg: Vec<&serde_json::Value> = tracks
            .iter()
            .filter(|t| t["name"].as_str().is_some_and(|s| s.starts_with("wg ")))
            .collect();
        let wg_slices: u64 = wg.iter().map(|t| t["slices"].as_u64().unwrap_or(0)).sum();
        assert_eq!(wg_slices, e.proto_stats.sampling.spans_kept, "{n}");
        assert!(wg.iter().all(|t| t["max_depth"] == 1), "{n}: siblings only");
        // Stage and wait names are the run's own; the grid has a slice per stage that any
        // workgroup ran in each pass with spans.
        let stage_names: std::collections::BTreeSet<String> =
            e.run.stages.iter().map(|s| s.name.to_string()).collect();
        let wait_names: std::collections::BTreeSet<String> = e
            .run
            .levels
            .iter()
            .map(|l| format!("wait {}", l.name))
            .collect();
        for name in r["wg_names"].as_array().expect("wg names") {
            let name = name.as_str().expect("name");
            assert!(
                stage_names.contains(name) || wait_names.contains(name),
                "{n}: {name}"
            );
        }
        for name in r["grid_names"].as_array().expect("grid names") {
            assert!(
                stage_names.contains(name.as_str().expect("name")),
                "{n}: {name}"
            );
        }
        let grid: u64 = tracks
            .iter()
            .filter(|t| t["name"].as_str().is_some_and(|s| s.starts_with("grid ")))
            .map(|t| t["slices"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(grid, e.grid_stages, "{n}");
        // Sibling order: passes, power mode, counters, grid lanes, workgroups by number.
        let rank = |t: &serde_json::Value| t["rank"].as_i64().expect("rank");
        let mut ordered: Vec<&serde_json::Value> = tracks[1..].iter().collect();
        ordered.sort_by_key(|t| rank(t));
        assert_eq!(ordered[0]["name"], "passes", "{n}");
        let wg_order: Vec<u64> = ordered
            .iter()
            .filter_map(|t| t["name"].as_str()?.strip_prefix("wg ")?.parse().ok())
            .collect();
        assert!(
            wg_order.windows(2).all(|w| w[0] < w[1]),
            "{n}: {wg_order:?}"
        );
        // Counters: one tok/s sample per pass with a wall time.
        let toks = by_name("decode tok/s").expect("tok/s counter");
        assert_eq!(toks["counter_unit"], "tok/s", "{n}");
        assert!(toks["counter_samples"].as_u64().unwrap_or(0) > 0, "{n}");
        // The pass slice carries the pass's details.
        let args = r["pass_annotations"].as_array().expect("pass annotations");
        for k in ["pass", "token", "wall_ns", "fail_word", "mode", "spans"] {
            assert!(args.iter().any(|a| a == k), "{n}: {k} in {args:?}");
        }
    }
}

#[test]
fn every_shipped_recording_exports_json_that_speedscope_imports_with_no_warning_and_no_frame_left_open(
) {
    let Some(py) = python() else { return };
    let Some(()) = node() else { return };
    let all = exports();
    let mut cmd = Command::new("node");
    cmd.arg(importers_dir().join("speedscope_check.mjs"));
    cmd.args(all.iter().map(|e| &e.json));
    let ss = json_lines(cmd.output().expect("node runs"), "speedscope_check.mjs");
    let mut cmd = Command::new(&py);
    cmd.arg(importers_dir().join("perfetto_check.py"));
    cmd.args(all.iter().map(|e| &e.proto));
    let pf = json_lines(cmd.output().expect("python runs"), "perfetto_check.py");
    for ((e, s), p) in all.iter().zip(&ss).zip(&pf) {
        let n = &e.name;
        assert_eq!(s["imported"], true, "{n}");
        assert_eq!(s["tried_to_end"], 0, "{n}: {}", s["warnings"]);
        assert_eq!(s["left_open"], 0, "{n}: {}", s["warnings"]);
        assert_eq!(s["warning_count"], 0, "{n}: {}", s["warnings"]);
        // Nothing nests in speedscope: no pass inside another, no stage inside a stage.
        let profiles = s["profiles"].as_array().expect("profiles");
        assert!(
            profiles.iter().all(|p| p["max_depth"] == 1),
            "{n}: {profiles:?}"
        );
        // speedscope sees the same slices per track as Perfetto's protos do in the .pftrace.
        let calls: BTreeMap<String, u64> = profiles
            .iter()
            .map(|p| {
                let name = p["name"].as_str().expect("name");
                // "PROCESS (pid 1), THREAD (tid T)"
                let thread = name
                    .rsplit_once(" (tid ")
                    .and_then(|(a, _)| a.split_once("(pid 1), "))
                    .map_or(name, |(_, t)| t);
                (thread.to_string(), p["calls"].as_u64().expect("calls"))
            })
            .collect();
        assert_eq!(calls, proto_slices(p), "{n}");
        assert_eq!(e.json_stats.events, e.proto_stats.events, "{n}");
    }
}

#[test]
fn every_shipped_recording_exports_under_100_mb_by_default_and_says_what_it_left_out() {
    let all = exports();
    let mb = |p: &Path| std::fs::metadata(p).expect("size").len() as f64 / 1e6;
    for e in all {
        let (j, p) = (mb(&e.json), mb(&e.proto));
        eprintln!("{}: json {j:.1} MB, pftrace {p:.1} MB", e.name);
        assert!(j < 100.0, "{}: {j:.1} MB of JSON", e.name);
        assert!(p < j, "{}: the protobuf ({p:.1} MB) is smaller", e.name);
        let s = &e.json_stats.sampling;
        assert!(s.spans_kept <= export::DEFAULT_SPAN_BUDGET, "{}", e.name);
        // What was left out is said, in numbers that add up.
        match e.json_stats.left_out() {
            Some(l) => {
                assert!(s.spans_kept < s.spans_total, "{}", e.name);
                assert!(
                    l.contains(&(s.spans_total - s.spans_kept).to_string()),
                    "{l}"
                );
            }
            None => assert_eq!(s.spans_kept, s.spans_total, "{}", e.name),
        }
    }
}
