//! Scenario fixtures: "this stream of frames and sensor samples produces these labels and
//! these warnings", one TOML file per situation in `tests/scenarios/`.
//!
//! # Fixture format
//!
//! ```toml
//! description = "what the situation is"
//!
//! [[step]]                       # a sensor sample, stamped at the current host time
//! sensor = { cpu_busy = 0.97 }   # or gpu_clients = [{ pid = 1, name = "x", mib = 512 }],
//!                                # sm_mhz = 345, max_sm_mhz = 1980, source_off = "nvml", reason = "…"
//!
//! [[step]]                       # `repeat` passes, each advancing the host time by its gpu time
//! pass = { gpu_us = 5000, busy_us = 4800, work_us = 4900 }
//! repeat = 3
//! mode = "fast"                  # each pass's expected mode
//! reasons = []                   # each pass's expected contention reasons (empty: quiet)
//!
//! warnings = ["pass 8: power mode slow → fast"]   # top level: every warning, in order
//! ```
//!
//! A pass has one stage (busy `busy_us`, charged `work_us`: the work the pass accounts for)
//! and `gpu_us` of GPU time; `gap_ms` on a step advances the host time before it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use baro_telemetry::labels::{mode_name, PassLabeler};
use baro_telemetry::{Frame, GpuClient, PowerMode, SensorReading, SensorSample, StageTiming};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    description: String,
    #[serde(default)]
    warnings: Vec<String>,
    step: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    #[serde(default)]
    gap_ms: u64,
    sensor: Option<Sensor>,
    pass: Option<Pass>,
    #[serde(default = "one")]
    repeat: u32,
    mode: Option<String>,
    reasons: Option<Vec<String>>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sensor {
    cpu_busy: Option<f32>,
    gpu_clients: Option<Vec<Client>>,
    sm_mhz: Option<u32>,
    max_sm_mhz: Option<u32>,
    source_off: Option<String>,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Client {
    pid: u32,
    name: String,
    mib: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct Pass {
    gpu_us: u64,
    busy_us: u64,
    work_us: u64,
}

fn readings(s: &Sensor) -> Vec<SensorReading> {
    let mut r = Vec::new();
    if let Some(f) = s.cpu_busy {
        r.push(SensorReading::CpuBusy { fraction: f });
    }
    if let Some(c) = &s.gpu_clients {
        r.push(SensorReading::GpuClients {
            count: c.len() as u32,
            clients: c
                .iter()
                .map(|c| GpuClient {
                    pid: c.pid,
                    name: c.name.clone(),
                    gpu_memory_bytes: c.mib.map(|m| m << 20),
                })
                .collect(),
        });
    }
    if let Some(sm) = s.sm_mhz {
        r.push(SensorReading::GpuClocks {
            sm_mhz: sm,
            mem_mhz: None,
            max_sm_mhz: s.max_sm_mhz,
            pstate: None,
        });
    }
    if let Some(src) = &s.source_off {
        r.push(SensorReading::SourceOff {
            source: src.clone(),
            reason: s.reason.clone().unwrap_or_default(),
        });
    }
    assert!(!r.is_empty(), "a sensor step reads nothing");
    r
}

fn frame(pass: u64, p: Pass, host_ns: u64) -> Frame {
    Frame {
        pass,
        pos: pass as u32,
        wall_ns: p.gpu_us * 1000 + 80_000,
        gpu_ns: Some(p.gpu_us * 1000),
        host_start_ns: Some(host_ns),
        stages: vec![StageTiming {
            stage: 0,
            name: "q.l0".into(),
            level: 0,
            busy_ns: p.busy_us * 1000,
            charged_ns: p.work_us * 1000,
            max_busy_ns: p.busy_us * 1000,
        }],
        ..Default::default()
    }
}

fn parse_mode(s: &str) -> PowerMode {
    serde_json::from_value(serde_json::Value::String(s.into()))
        .unwrap_or_else(|e| panic!("mode {s:?}: {e}"))
}

/// Run a scenario; every mismatch is collected, so a failure shows the whole story.
fn run(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let sc: Scenario = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!sc.description.is_empty());
    let mut labeler = PassLabeler::new(
        baro_telemetry::labels::PowerModeClassifier::new(Default::default()),
        Default::default(),
    );
    let mut host_ns = 1_000_000_000u64;
    let mut pass = 0u64;
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for (i, step) in sc.step.iter().enumerate() {
        host_ns += step.gap_ms * 1_000_000;
        if let Some(s) = &step.sensor {
            for reading in readings(s) {
                let sample = SensorSample { host_ns, reading };
                warnings.extend(labeler.observe(&sample).map(|w| w.to_string()));
            }
        }
        let Some(p) = step.pass else {
            assert!(step.mode.is_none() && step.reasons.is_none(), "step {i}");
            continue;
        };
        for _ in 0..step.repeat {
            let mut f = frame(pass, p, host_ns);
            warnings.extend(labeler.label(&mut f).iter().map(|w| w.to_string()));
            if let Some(m) = &step.mode {
                if f.mode != parse_mode(m) {
                    errors.push(format!(
                        "pass {pass} (step {i}): mode {} want {m}",
                        mode_name(f.mode)
                    ));
                }
            }
            if let Some(want) = &step.reasons {
                let got: Vec<String> = f.contention.reasons.iter().map(|r| r.to_string()).collect();
                if &got != want {
                    errors.push(format!(
                        "pass {pass} (step {i}): reasons {got:?} want {want:?}"
                    ));
                }
                if want.is_empty() != f.contention.is_quiet() {
                    errors.push(format!("pass {pass} (step {i}): quiet disagrees"));
                }
            }
            host_ns += p.gpu_us * 1000 + 100_000;
            pass += 1;
        }
    }
    if warnings != sc.warnings {
        errors.push(format!("warnings {warnings:#?}\nwant {:#?}", sc.warnings));
    }
    assert!(
        errors.is_empty(),
        "{}:\n{}",
        path.display(),
        errors.join("\n")
    );
}

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scenarios")
        .join(format!("{name}.toml"))
}

#[test]
fn quiet_run_is_fast_after_warmup_and_never_contended() {
    run(&scenario("quiet"));
}

#[test]
fn cold_start_is_slow_while_clocks_ramp_then_fast() {
    run(&scenario("cold_start"));
}

#[test]
fn a_cold_start_is_slow_from_a_clock_sample_that_comes_after_the_warmup() {
    run(&scenario("late_clock_cold_start"));
}

#[test]
fn a_slow_sample_is_stale_for_passes_far_faster_than_those_it_called_slow() {
    run(&scenario("ramp_within_one_sample"));
}

#[test]
fn mode_switch_mid_run_is_labelled_after_the_hysteresis_both_ways() {
    run(&scenario("mode_switch"));
}

#[test]
fn busy_cpu_labels_passes_contended_while_it_lasts() {
    run(&scenario("busy_cpu"));
}

#[test]
fn foreign_gpu_client_is_named_in_the_label() {
    run(&scenario("foreign_gpu_client"));
}

#[test]
fn time_sliced_pass_is_contended_not_slow() {
    run(&scenario("time_sliced"));
}

#[test]
fn every_fixture_has_a_test() {
    let mut names: Vec<String> = std::fs::read_dir(scenario("x").parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let src = include_str!("scenarios.rs");
    for n in names {
        let stem = n.trim_end_matches(".toml");
        assert!(
            src.contains(&format!("scenario(\"{stem}\")")),
            "fixture {n} is not run by any test"
        );
    }
}
