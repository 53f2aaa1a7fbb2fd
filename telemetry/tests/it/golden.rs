//! The wire format of one frame, pinned: `tests/golden/frame_v1.json` is the pretty-printed
//! JSON of the frame built here. A schema change fails this test and shows as a diff of that
//! file; regenerate it with `BLESS=1 cargo test -p baro-telemetry --test it golden::` (then run
//! once more without it: the read-back test may race the rewrite) and bump `SCHEMA_VERSION`
//! if an old reader could misread the new form.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use baro_telemetry::fail::bits;
use baro_telemetry::{
    CheckState, Contention, ContentionReason, FailReport, FailWord, Frame, GpuClient, Judge,
    PowerMode, RingLayout, RunDetails, Spans, Telemetry, SCHEMA_VERSION,
};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/frame_v1.json")
}

/// The run of the golden frame: G = 2, levels `qkv.l0` (q, k) and `attn.l0` (attn).
fn details() -> RunDetails {
    let start = r#"{"type":"start","schema_version":1,"device":"llvmpipe (LLVM 15.0.6, 256 bits)",
        "driver":"llvmpipe Mesa 22.3.6","device_kind":"cpu","model":"stories260K","dispatch":"mega",
        "grid":2,"wg_size":64,"instrumented":true,
        "stages":[{"id":0,"name":"q.l0","level":0,"kind":"q","rows":64,"units":32},
                  {"id":1,"name":"k.l0","level":0,"kind":"k","rows":32,"units":16},
                  {"id":2,"name":"attn.l0","level":1,"kind":"attn","rows":0,"units":8}],
        "levels":[{"index":0,"name":"qkv.l0","stages":[0,1]},
                  {"index":1,"name":"attn.l0","stages":[2]}]}"#;
    match Telemetry::from_json_line(start).unwrap() {
        Telemetry::Start(d) => d,
        other => panic!("not a start line: {other:?}"),
    }
}

/// A ring frame for `details()` at pass 41: wg 1 is slow on q; attn ran on both workgroups.
fn ring_words(layout: RingLayout) -> Vec<u32> {
    let mut w = vec![0u32; layout.frame_words()];
    w[0] = 42; // sequence = pass_id + 1
    w[1] = 41;
    w[2] = 2;
    let t0: u64 = 0x0000_0001_0000_1000;
    let mut put = |at: usize, a: u64, b: u64| {
        let (a, b) = (t0 + a, t0 + b);
        w[at..at + 4].copy_from_slice(&[a as u32, (a >> 32) as u32, b as u32, (b >> 32) as u32]);
    };
    put(layout.stage_record(0, 0), 0, 1_000);
    put(layout.stage_record(0, 1), 40, 4_000);
    put(layout.stage_record(1, 0), 1_000, 1_500);
    put(layout.stage_record(1, 1), 4_000, 4_600);
    put(layout.stage_record(2, 0), 6_300, 9_000);
    put(layout.stage_record(2, 1), 6_310, 8_800);
    put(layout.barrier_record(0, 0), 1_500, 6_200);
    put(layout.barrier_record(0, 1), 4_600, 6_260);
    w
}

/// The golden frame: decoded from the ring, a poisoned output at level 0, judged against a
/// reference at a near-tie.
fn golden_frame() -> Frame {
    let d = details();
    let decoded = d
        .ring_layout()
        .decode(&ring_words(d.ring_layout()), 42, true)
        .unwrap();
    let word = FailWord {
        bits: bits::TIMEOUT | bits::POISONED,
        first: bits::TIMEOUT,
        level: Some(0),
        seen: 1,
        wg: 1,
        resident: 2,
        started: 2,
        arrivals: 1,
        grid: 2,
    };
    let mut judge = Judge::default();
    let correctness = judge.judge(41, 7, None, &[0.5, 1.0, -3.0, 0.25, 2.0, 1.75, 0.0, 1.9995]);
    Frame {
        pass: 41,
        pos: 41,
        token: 345,
        next: 7,
        wall_ns: 250_277_803,
        gpu_ns: Some(250_003_195),
        fail: FailReport::new(word, |l| d.level_name(l)),
        torn: false,
        dropped: 3,
        host_start_ns: Some(1_733_000_000_123),
        timestamp_start_ns: Some(98_765_000),
        device_start_ns: Some(decoded.device_start_ns),
        stages: decoded.spans.stage_timings(&d.stages, &d.levels, &[]),
        barriers: decoded.spans.barrier_timings(),
        dispatch_ns: vec![],
        prefetched_bytes: 0,
        correctness: Some(correctness),
        check: CheckState::Checked,
        check_lag: 2,
        mode: PowerMode::Fast,
        contention: Contention {
            gpu_clients: 1,
            cpu_busy: Some(0.125),
            gpu_time_sliced: false,
            unaccounted_ns: Some(249_994_195),
            reasons: vec![ContentionReason::GpuClients {
                count: 1,
                clients: vec![GpuClient {
                    pid: 4242,
                    name: "python".into(),
                    gpu_memory_bytes: Some(512 << 20),
                }],
            }],
        },
        spans: decoded.spans,
    }
}

#[test]
fn frame_serialises_exactly_as_the_golden_file() {
    let got =
        serde_json::to_string_pretty(&Telemetry::Frame(Box::new(golden_frame()))).unwrap() + "\n";
    let path = golden_path();
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "the frame schema changed: diff {} against\n{got}\n(BLESS=1 rewrites it; bump SCHEMA_VERSION if old readers would misread it)",
        path.display()
    );
}

#[test]
fn golden_file_reads_back_to_the_same_frame() {
    let text = std::fs::read_to_string(golden_path()).unwrap();
    let t: Telemetry = serde_json::from_str(&text).unwrap();
    assert_eq!(t, Telemetry::Frame(Box::new(golden_frame())));
}

#[test]
fn golden_file_is_schema_version_1() {
    // The file name carries the version: a new version gets a new golden file, and the old
    // one keeps being read.
    assert_eq!(SCHEMA_VERSION, 1);
}

#[test]
fn frame_line_keeps_every_field_run_json_has_always_printed() {
    let line = Telemetry::Frame(Box::new(golden_frame()))
        .to_json_line()
        .unwrap();
    assert!(line.starts_with(r#"{"type":"frame","pass":41,"pos":41,"token":345,"next":7,"#));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let o = v.as_object().unwrap();
    for key in [
        "pass",
        "pos",
        "token",
        "next",
        "wall_ns",
        "gpu_ns",
        "fail_word",
        "fail",
        "torn",
        "dropped",
        "host_start_ns",
        "stages",
        "barriers",
    ] {
        assert!(o.contains_key(key), "missing {key}: {line}");
    }
    assert_eq!(o["fail_word"], "0x00000201");
    assert_eq!(
        o["fail"],
        "fail-word 0x00000201 FAIL barrier-timeout+output-poisoned at level 0 (qkv.l0) \
         arrivals 1/2 seen by wg 1 resident 2/2 started 2 arrivals 1"
    );
    assert_eq!(o["fail_detail"]["level"], 0);
    let stage = &o["stages"][0];
    for key in ["name", "level", "busy_ns", "charged_ns", "max_busy_ns"] {
        assert!(stage.get(key).is_some(), "stage lacks {key}: {stage}");
    }
    let barrier = &o["barriers"][0];
    for key in ["level", "arrival_spread_ns", "release_ns", "exit_spread_ns"] {
        assert!(barrier.get(key).is_some(), "barrier lacks {key}: {barrier}");
    }
}

#[test]
fn golden_frame_timings_follow_the_busy_and_charged_definitions() {
    let f = golden_frame();
    let q = &f.stages[0];
    // q: wg0 0..1000, wg1 40..4000 (offsets from the earliest start).
    assert_eq!((&*q.name, q.busy_ns, q.max_busy_ns), ("q.l0", 2_480, 3_960));
    // k closes qkv.l0: wg0 1000 -> exit 6200, wg1 4000 -> exit 6260.
    assert_eq!((f.stages[1].busy_ns, f.stages[1].charged_ns), (550, 3_730));
    assert_eq!(f.barriers.len(), 1);
    assert_eq!(
        (
            f.barriers[0].arrival_spread_ns,
            f.barriers[0].release_ns,
            f.barriers[0].exit_spread_ns
        ),
        (3_100, 1_600, 60)
    );
    assert_eq!(f.device_start_ns, Some(0x0000_0001_0000_1000));
    assert_eq!(f.spans.iter().count(), 6);
    assert!(Spans::default().is_empty());
}
