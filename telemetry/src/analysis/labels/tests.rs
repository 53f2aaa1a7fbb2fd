use super::*;
use crate::spans::StageTiming;

fn pass(gpu_us: u64) -> Frame {
    Frame {
        gpu_ns: Some(gpu_us * 1000),
        wall_ns: gpu_us * 1000 + 100_000,
        ..Default::default()
    }
}

fn modes(c: &mut PowerModeClassifier, gpu_us: &[u64]) -> Vec<PowerMode> {
    gpu_us
        .iter()
        .map(|&g| c.classify(&pass(g), None).mode)
        .collect()
}

use PowerMode::{Fast as F, Slow as S, Unknown as U};

#[test]
fn warmup_passes_are_unknown_then_fast_against_the_baseline() {
    let mut c = PowerModeClassifier::new(ModeConfig::default());
    let m = modes(&mut c, &[5000, 5100, 4900, 5000, 5050, 5020, 4990]);
    assert_eq!(m, [U, U, U, U, U, F, F]);
}

#[test]
fn leaving_a_mode_takes_switch_after_passes_and_the_passes_before_are_unknown() {
    let mut c = PowerModeClassifier::new(ModeConfig::default())
        .with_baseline(Indicator::GpuTime, 5_000_000);
    let m = modes(
        &mut c,
        &[5000, 10000, 10000, 10000, 10000, 5000, 5000, 5000],
    );
    assert_eq!(m, [F, U, U, S, S, U, U, F]);
}

#[test]
fn a_single_outlier_does_not_switch_and_is_unknown() {
    let mut c = PowerModeClassifier::new(ModeConfig::default())
        .with_baseline(Indicator::GpuTime, 5_000_000);
    let m = modes(&mut c, &[5000, 12000, 5000, 5000]);
    assert_eq!(m, [F, U, F, F]);
    assert_eq!(c.held(), F);
}

#[test]
fn a_pass_in_the_band_keeps_the_held_mode() {
    let mut c = PowerModeClassifier::new(ModeConfig::default())
        .with_baseline(Indicator::GpuTime, 5_000_000);
    // 1.4× is between fast_ratio 1.25 and slow_ratio 1.5.
    assert_eq!(modes(&mut c, &[5000, 7000, 7000]), [F, F, F]);
}

#[test]
fn a_low_clock_labels_warmup_passes_slow_and_a_full_clock_fast() {
    let mut c = PowerModeClassifier::new(ModeConfig::default());
    let low = Some(ClockHint {
        sm_mhz: 345,
        max_sm_mhz: 1980,
    });
    let d = c.classify(&pass(25000), low);
    assert_eq!((d.mode, d.ratio, d.clock_agrees), (S, None, None));
    let full = Some(ClockHint {
        sm_mhz: 1980,
        max_sm_mhz: 1980,
    });
    // Switching needs switch_after votes, as for latency.
    let m: Vec<_> = (0..3).map(|_| c.classify(&pass(5000), full).mode).collect();
    assert_eq!(m, [U, U, F]);
}

#[test]
fn latency_wins_over_a_disagreeing_clock_and_says_so() {
    let mut c = PowerModeClassifier::new(ModeConfig::default())
        .with_baseline(Indicator::GpuTime, 5_000_000);
    let d = c.classify(
        &pass(5000),
        Some(ClockHint {
            sm_mhz: 500,
            max_sm_mhz: 1980,
        }),
    );
    assert_eq!((d.mode, d.clock_agrees), (F, Some(false)));
}

#[test]
fn the_indicator_is_the_non_attention_busy_time_and_ignores_time_slicing() {
    let run: RunDetails = serde_json::from_str(
        r#"{"schema_version":1,"device":"d","driver":"v","device_kind":"discrete",
        "model":"m","dispatch":"mega","grid":1,"wg_size":64,"instrumented":true,
        "stages":[{"id":0,"name":"q.l0","level":0,"kind":"q","rows":1,"units":1},
                  {"id":1,"name":"attn.l0","level":1,"kind":"attn","rows":1,"units":1}],
        "levels":[{"index":0,"name":"a","stages":[0]},{"index":1,"name":"b","stages":[1]}]}"#,
    )
    .unwrap();
    let c = PowerModeClassifier::for_run(ModeConfig::default(), &run);
    let st = |id: u32, busy: u64| StageTiming {
        stage: id,
        name: "x".into(),
        level: id,
        busy_ns: busy,
        charged_ns: busy,
        max_busy_ns: busy,
    };
    let f = Frame {
        gpu_ns: Some(7_100_000),
        stages: vec![st(0, 1000), st(1, 50_000)],
        ..Default::default()
    };
    assert_eq!(c.indicator(&f), Some((Indicator::StageBusy, 1000)));
    let torn = Frame { torn: true, ..f };
    assert_eq!(c.indicator(&torn), Some((Indicator::GpuTime, 7_100_000)));
}

#[test]
fn offline_classification_sees_a_slow_start_without_clocks() {
    let cfg = ModeConfig::default();
    let mut frames: Vec<Frame> = (0..8).map(|_| pass(23000)).collect();
    frames.extend((0..24).map(|_| pass(5000)));
    let m = classify_offline(&cfg, None, &frames, &[]);
    assert!(m[..8].iter().all(|&x| x == S), "{m:?}");
    assert_eq!(m[8..10], [U, U]);
    assert!(m[10..].iter().all(|&x| x == F), "{m:?}");
    assert_eq!(ModeTally::of(m).to_string(), "22 fast, 8 slow, 2 unknown");
}

#[test]
fn time_sliced_when_gpu_time_far_exceeds_the_stamped_extent() {
    let mut f = pass(7100);
    f.dispatch_ns = vec![1_000_000, 600_000];
    let c = ContentionLabeler::default().label(&f, &SensorState::default());
    assert_eq!(c.unaccounted_ns, Some(5_500_000));
    assert!(c.gpu_time_sliced);
    assert_eq!(c.summary(), "unaccounted 5.5 ms of 7.1 ms: time-sliced");
    f.gpu_ns = Some(1_650_000);
    let c = ContentionLabeler::default().label(&f, &SensorState::default());
    assert!(c.is_quiet(), "{c:?}");
    assert_eq!(c.unaccounted_ns, Some(50_000));
}

#[test]
fn accounted_time_is_the_extent_of_the_spans() {
    let mut f = pass(100);
    let mut s = crate::Spans::new(2, 2, 1);
    s.set_span(0, 0, 0, 1000);
    s.set_span(0, 1, 10, 3000);
    s.set_barrier(0, 0, 1000, 3500);
    s.set_barrier(0, 1, 3000, 3400);
    s.set_span(1, 0, 3600, 9000);
    f.spans = s;
    assert_eq!(accounted_ns(&f), Some(9000));
    assert_eq!(accounted_ns(&Frame::default()), None);
}

#[test]
fn stale_samples_are_not_used() {
    let mut st = SensorState::default();
    st.observe(&SensorSample {
        host_ns: 1_000,
        reading: SensorReading::CpuBusy { fraction: 0.97 },
    });
    let mut f = Frame {
        host_start_ns: Some(1_000 + 500_000_000),
        ..Default::default()
    };
    let l = ContentionLabeler::default();
    assert_eq!(l.label(&f, &st).summary(), "CPU 97% busy");
    f.host_start_ns = Some(1_000 + 3_000_000_000);
    assert!(l.label(&f, &st).is_quiet());
}

#[test]
fn our_own_lock_is_not_contention_anothers_is() {
    let mut st = SensorState::default();
    let holder = LockHolder {
        pid: 7,
        command: "baro-top bench".into(),
        since_unix_ms: 0,
    };
    st.observe(&SensorSample {
        host_ns: 0,
        reading: SensorReading::HostLock {
            holder: Some(holder.clone()),
            ours: true,
        },
    });
    let l = ContentionLabeler::default();
    assert!(l.label(&Frame::default(), &st).is_quiet());
    st.observe(&SensorSample {
        host_ns: 0,
        reading: SensorReading::HostLock {
            holder: Some(holder),
            ours: false,
        },
    });
    assert_eq!(
        l.label(&Frame::default(), &st).summary(),
        "another timing run holds the GPU lock: pid 7 (baro-top bench)"
    );
}

fn clocked(c: &mut PowerModeClassifier, gpu_us: u64, sm_mhz: u32, n: usize) -> Vec<PowerMode> {
    let hint = ClockHint {
        sm_mhz,
        max_sm_mhz: 1980,
    };
    (0..n)
        .map(|_| c.classify(&pass(gpu_us), Some(hint)).mode)
        .collect()
}

#[test]
fn a_clock_in_the_slow_band_still_calls_slow_after_a_deep_cold_start() {
    // The stale rule compares a pass with the passes of the same sample only: 4.1 ms passes
    // at 345 MHz must not make a 1,100 MHz sample stale for passes 1.35x the fast baseline.
    let mut c = PowerModeClassifier::new(ModeConfig::default());
    clocked(&mut c, 4100, 345, 10);
    assert!(clocked(&mut c, 810, 1980, 40).ends_with(&[F, F, F]));
    assert_eq!(clocked(&mut c, 1090, 1100, 5), [U, U, S, S, S]);
}

#[test]
fn a_baseline_that_clocked_passes_fed_survives_a_slow_sample() {
    // One pass without a hint (a late first sample, a failed read) must not make 200 clocked
    // passes' baseline disposable.
    let mut c = PowerModeClassifier::new(ModeConfig::default());
    c.classify(&pass(1000), None);
    clocked(&mut c, 1000, 1980, 200);
    assert_eq!(clocked(&mut c, 1600, 1100, 5), [U, U, S, S, S]);
    assert_eq!(clocked(&mut c, 1450, 1400, 12), [S; 12]);
}

#[test]
fn a_discarded_baseline_takes_the_held_mode_with_it() {
    // Labels as if the sample had come first: the passes under the low clock are slow from
    // it on, not held fast by the baseline it discarded.
    let mut c = PowerModeClassifier::new(ModeConfig::default());
    assert_eq!(modes(&mut c, &[3300; 8]), [U, U, U, U, U, F, F, F]);
    assert_eq!(clocked(&mut c, 3310, 405, 1), [S]);
    assert_eq!(clocked(&mut c, 2000, 405, 1), [S]);
}

/// Stage, dispatch or charged times near `u64::MAX` (a damaged or crafted recording): the
/// indicator and the accounted time saturate at `u64::MAX` (never below any one part), so the
/// pass reads as the longest there is, not wrapped round to a few ns (release) or a panic
/// (overflow-checked builds); a time-sliced verdict is not invented from a wrapped sum.
#[test]
fn indicator_and_accounted_time_of_near_max_times_saturate_monotone_instead_of_wrapping() {
    let big = (1u64 << 63) + 10;
    let st = |id: u32, ns: u64| StageTiming {
        stage: id,
        name: "x".into(),
        level: 0,
        busy_ns: ns,
        charged_ns: ns,
        max_busy_ns: ns,
    };
    let c = PowerModeClassifier::new(ModeConfig::default());
    // Wrapping, 2 × (2⁶³ + 10) is 20 ns; 2⁶³ + 10 plus 5 saturates too, never below 2⁶³.
    for stages in [
        vec![st(0, big), st(1, big)],
        vec![st(0, big), st(1, 5), st(2, big)],
        vec![st(0, u64::MAX), st(1, u64::MAX), st(2, 1)],
    ] {
        let f = Frame {
            gpu_ns: Some(1_000_000),
            stages: stages.clone(),
            ..Default::default()
        };
        assert_eq!(
            c.indicator(&f),
            Some((Indicator::StageBusy, u64::MAX)),
            "{stages:?}"
        );
        assert_eq!(accounted_ns(&f), Some(u64::MAX), "{stages:?}");
        assert_eq!(f.busy_ns(), u64::MAX, "{stages:?}");
        // Accounted for all its GPU time: not time-sliced.
        let l = ContentionLabeler::default().label(&f, &SensorState::default());
        assert_eq!(l.unaccounted_ns, Some(0), "{stages:?}");
        assert!(!l.gpu_time_sliced, "{l:?}");
    }
    // One stage alone is its own time; adding a stage never lowers the sum.
    let mut f = Frame {
        stages: vec![st(0, big)],
        ..Default::default()
    };
    let mut last = 0;
    for add in [1, big, u64::MAX] {
        let (_, x) = c.indicator(&f).unwrap();
        assert!(x >= last, "{x} < {last}");
        last = x;
        f.stages.push(st(f.stages.len() as u32, add));
    }
    assert_eq!(last, u64::MAX);
    // Dispatch times (multi): the same rule.
    let f = Frame {
        gpu_ns: Some(1_000_000),
        dispatch_ns: vec![big, big],
        ..Default::default()
    };
    assert_eq!(accounted_ns(&f), Some(u64::MAX));
    // The barrier wait the headless dashboard prints: the same rule.
    let b = crate::spans::BarrierTiming {
        level: 0,
        arrival_spread_ns: big,
        release_ns: big,
        exit_spread_ns: 0,
    };
    let f = Frame {
        barriers: vec![b.clone(), b],
        ..Default::default()
    };
    assert_eq!(f.barrier_ns(), u64::MAX);
}
