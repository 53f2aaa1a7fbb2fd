//! The dashboard shows disturbance: the header carries the newest pass's power mode and
//! contention with counts over the window and another timing run holding the GPU's lock; the
//! log explains each with the reason text and the sensor readings.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use baro_telemetry::{
    Contention, ContentionReason, GpuClient, LockHolder, PowerMode, SensorReading, SensorSample,
    Telemetry,
};
use baro_ui::layout::Layout;
use baro_ui::state::Severity;
use baro_ui::synthetic::Synth;
use baro_ui::view::UiState;

/// A state after `quiet` fast, quiet passes; the synthetic producer for more.
fn quiet_run(quiet: u64) -> (UiState, Layout, Synth) {
    let layout = Layout::default_preset();
    let mut s = Synth::new(clean());
    let meta = baro_ui::synthetic::meta(s.details());
    let mut st = baro_ui::app::new_state(meta, &layout);
    for m in s.stream(quiet) {
        st.live.ingest(m);
    }
    (st, layout, s)
}

fn sensor(st: &mut UiState, reading: SensorReading) {
    st.live.ingest(Telemetry::Sensor(SensorSample {
        host_ns: 0,
        reading,
    }));
}

/// The header's second line at 240 columns (wide enough for every segment).
fn header_line(st: &mut UiState, layout: &Layout) -> String {
    lines(&render(st, layout, 240, 60))[1].clone()
}

fn shared_and_sliced() -> Contention {
    Contention {
        gpu_clients: 2,
        unaccounted_ns: Some(5_500_000),
        gpu_time_sliced: true,
        reasons: vec![
            ContentionReason::GpuClients {
                count: 2,
                clients: vec![
                    GpuClient {
                        pid: 4242,
                        name: "python".into(),
                        gpu_memory_bytes: Some(512 << 20),
                    },
                    GpuClient {
                        pid: 77,
                        name: "Xorg".into(),
                        gpu_memory_bytes: None,
                    },
                ],
            },
            ContentionReason::TimeSliced {
                unaccounted_ns: 5_500_000,
                gpu_ns: 7_100_000,
            },
        ],
        ..Default::default()
    }
}

#[test]
fn header_shows_fast_mode_quiet_and_zero_contended_over_the_window_for_a_clean_run() {
    let (mut st, layout, _) = quiet_run(20);
    let h = header_line(&mut st, &layout);
    assert!(h.contains("power fast (20 fast 0 slow 0 ?)"), "{h}");
    assert!(h.contains("quiet · contended 0/20"), "{h}");
    assert!(!h.contains("lock held"), "{h}");
    assert!(st.live.log.iter().all(|e| e.sev == Severity::Info));
}

#[test]
fn contended_slow_passes_show_short_reasons_and_counts_and_the_log_explains_them_with_nvml_readings(
) {
    let (mut st, layout, mut synth) = quiet_run(10);
    sensor(
        &mut st,
        SensorReading::GpuClocks {
            sm_mhz: 1410,
            mem_mhz: Some(2619),
            max_sm_mhz: Some(1980),
            pstate: Some(2),
        },
    );
    for _ in 0..5 {
        let mut f = synth.frame();
        f.mode = PowerMode::Slow;
        f.contention = shared_and_sliced();
        st.live.ingest(Telemetry::Frame(Box::new(f)));
    }
    let h = header_line(&mut st, &layout);
    assert!(h.contains("power slow (10 fast 5 slow 0 ?)"), "{h}");
    assert!(
        h.contains("contended: 2 GPU clients, time-sliced · 5/15"),
        "{h}"
    );
    let warns: Vec<&str> = st
        .live
        .log
        .iter()
        .filter(|e| e.sev == Severity::Warn)
        .map(|e| e.text.as_str())
        .collect();
    assert!(
        warns.contains(&"power mode fast → slow (SM clock 1410 of 1980 MHz)"),
        "{warns:?}"
    );
    // Said once when it starts (not once a pass), with the whole reason text.
    let contended: Vec<&&str> = warns
        .iter()
        .filter(|w| w.starts_with("contended: "))
        .collect();
    assert_eq!(
        contended,
        [
            &"contended: 2 other GPU processes: pid 4242 python (512 MiB), pid 77 Xorg; \
           unaccounted 5.5 ms of 7.1 ms: time-sliced (SM clock 1410 of 1980 MHz)"
        ],
        "{warns:?}"
    );
    // Quiet again: said, and the header follows the newest pass.
    let f = synth.frame();
    st.live.ingest(Telemetry::Frame(Box::new(f)));
    assert_eq!(st.live.log.back().unwrap().text, "quiet again");
    let h = header_line(&mut st, &layout);
    assert!(h.contains("quiet · contended 5/16"), "{h}");
}

#[test]
fn another_process_holding_the_host_lock_is_shown_in_the_header_and_explained_in_the_log() {
    let (mut st, layout, _) = quiet_run(5);
    let holder = LockHolder {
        pid: 4242,
        command: "baro-top bench -m llama-1b.gguf".into(),
        since_unix_ms: 0,
    };
    // This process's own lock is not a disturbance.
    sensor(
        &mut st,
        SensorReading::HostLock {
            holder: Some(holder.clone()),
            ours: true,
        },
    );
    assert!(!header_line(&mut st, &layout).contains("lock held"));
    sensor(
        &mut st,
        SensorReading::HostLock {
            holder: Some(holder),
            ours: false,
        },
    );
    let h = header_line(&mut st, &layout);
    assert!(
        h.contains("lock held by pid 4242 (baro-top bench -m llama-1b.gguf)"),
        "{h}"
    );
    let last = st.live.log.back().unwrap();
    assert_eq!(last.sev, Severity::Warn);
    assert!(
        last.text.starts_with(
            "another timing run holds this GPU's host lock: pid 4242 (baro-top bench -m llama-1b.gguf)"
        ),
        "{}",
        last.text
    );
    sensor(
        &mut st,
        SensorReading::HostLock {
            holder: None,
            ours: false,
        },
    );
    assert!(!header_line(&mut st, &layout).contains("lock held"));
    assert_eq!(
        st.live.log.back().unwrap().text,
        "the GPU's host lock is free"
    );
}

/// A run off the f32 reference path (an f16 KV cache) says so in the header and the log; an
/// f32 run (the reference) shows no KV segment.
#[test]
fn an_f16_kv_run_is_labelled_in_the_header_and_the_log_and_an_f32_run_is_not() {
    let layout = Layout::default_preset();
    for kv in [baro_telemetry::KvType::F32, baro_telemetry::KvType::F16] {
        let mut s = Synth::new(clean());
        let meta = baro_ui::synthetic::meta(s.details());
        let mut st = baro_ui::app::new_state(meta, &layout);
        for mut m in s.stream(5) {
            if let Telemetry::Start(d) = &mut m {
                d.kv = kv;
            }
            st.live.ingest(m);
        }
        // The header's first line: device, model, dispatch, grid, and the KV type off f32.
        let header = lines(&render(&mut st, &layout, 240, 60))[0].clone();
        let logged = st.live.log.iter().any(|e| e.text.contains("kv f16"));
        if kv.is_f32() {
            assert!(!header.contains("kv "), "{header}");
            assert!(!logged);
        } else {
            assert!(header.contains("kv f16"), "{header}");
            assert!(logged, "the run's log line names the KV type");
        }
    }
}

#[test]
fn the_log_names_each_pipelines_registers_and_warns_when_the_compiler_spilled() {
    use baro_telemetry::{PipelineStat, PipelineStats, StatValue};
    let layout = Layout::default_preset();
    let stats = |name: &str, spill: u64| PipelineStats {
        pipeline: name.into(),
        executable: "compute".into(),
        subgroup_size: 32,
        stats: vec![
            PipelineStat {
                name: "Register Count".into(),
                value: StatValue::U64(64),
            },
            PipelineStat {
                name: "Spill bytes".into(),
                value: StatValue::U64(spill),
            },
        ],
    };
    let mut s = Synth::new(clean());
    let meta = baro_ui::synthetic::meta(s.details());
    let mut st = baro_ui::app::new_state(meta, &layout);
    for mut m in s.stream(3) {
        if let Telemetry::Start(d) = &mut m {
            d.pipelines = vec![stats("decode", 96), stats("decode (unstamped)", 0)];
        }
        st.live.ingest(m);
    }
    let line = |name: &str| {
        st.live
            .log
            .iter()
            .find(|e| e.text.starts_with(&format!("pipeline {name}:")))
            .unwrap_or_else(|| panic!("no log line for pipeline {name}"))
    };
    let stamped = line("decode");
    assert!(
        stamped.text.contains("64 registers/lane, spills 96") && stamped.text.contains("spilled"),
        "{}",
        stamped.text
    );
    assert_eq!(stamped.sev, Severity::Warn);
    let plain = line("decode (unstamped)");
    assert!(!plain.text.contains("spilled"), "{}", plain.text);
    assert_eq!(plain.sev, Severity::Info);
}

#[test]
fn the_header_ends_with_the_weights_over_the_median_pass_against_the_peak() {
    let (mut st, layout, s) = quiet_run(20);
    let h = lines(&render(&mut st, &layout, 400, 60))[1].clone();
    // The synthetic run's weight bytes over its median pass time, against its 4.3 TB/s.
    let bytes: u64 = s
        .details()
        .stages
        .iter()
        .map(|t| t.weight_bytes)
        .sum::<u64>()
        .max(
            baro_ui::synthetic::meta(s.details())
                .weight_bytes
                .iter()
                .sum(),
        );
    assert!(bytes > 0, "the synthetic run streams weights");
    let p50 = st.derived.pass.p50;
    let rate = bytes as f64 * 1e9 / p50 as f64;
    let want = format!(
        "HBM {:.2} TB/s {:.0}% of 4.30",
        rate / 1e12,
        rate / 4.3e12 * 100.0
    );
    assert!(h.trim_end().ends_with(&want), "{h}\nwant {want}");
    let i = h.find("rec —").expect("the recording badge");
    assert!(h.find("HBM").is_some_and(|j| j > i), "after the badge: {h}");
}

#[test]
fn the_stage_table_shows_each_stages_weights_over_its_charged_time_beside_its_busy_rate() {
    let (mut st, layout, s) = quiet_run(20);
    let screen = lines(&render(&mut st, &layout, 400, 60)).join("\n");
    assert!(screen.contains("chg GB/s"), "{screen}");
    let bytes = baro_ui::synthetic::meta(s.details()).weight_bytes;
    let rows = &st.derived.stages;
    assert!(!rows.is_empty());
    let mut with_bytes = 0;
    for r in rows {
        let b = bytes.get(r.order).copied().unwrap_or(0);
        if b == 0 {
            assert_eq!(r.bw_charged, None, "{}: no weights, no rate", r.name);
            continue;
        }
        with_bytes += 1;
        let want = b as f64 * 1e9 / r.charged.p50 as f64;
        let got = r.bw_charged.expect("a rate");
        assert!(
            (got - want).abs() <= want * 1e-12,
            "{}: {got} vs {want}",
            r.name
        );
        // Charged holds busy, so its rate is never above the busy one.
        assert!(
            got <= r.bw.expect("a busy rate") * (1.0 + 1e-12),
            "{}",
            r.name
        );
    }
    assert!(with_bytes > 0, "the synthetic run streams weights");
}
