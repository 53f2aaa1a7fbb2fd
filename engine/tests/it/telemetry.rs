//! The event ring and the telemetry stream, on the Vulkan device (lavapipe in CI).

use std::time::Duration;

use crate::common::{device, device_alone};
use baro_engine::model::Model;
use baro_engine::session::{Check, SessionBuilder, SinkKind};
use baro_engine::telemetry::{EndReason, Frame, RunDetails, Telemetry};
use baro_engine::vulkan::program::StageKind;
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};

fn frames(
    dispatch: Dispatch,
    slow: Option<StageKind>,
    passes: usize,
) -> (RunDetails, Vec<Frame>, VulkanDecoder) {
    let (ctx, _turn) = device().expect("device");
    let model = Model::embedded().expect("model");
    let opts = DecoderOptions {
        dispatch,
        instrument: true,
        max_seq: passes,
        test_slow_kind: slow,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx, &model, opts).expect("decoder");
    let details = dec.run_details(&model.source);
    let mut out = vec![];
    let mut tok = model.tokenizer.bos_id();
    for pos in 0..passes {
        let p = dec.step(tok, pos).expect("pass");
        assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
        let f = dec.frame(&details, pos as u64, pos, tok, p.argmax, &p);
        tok = p.argmax;
        out.push(f);
    }
    (details, out, dec)
}

#[test]
fn every_workgroup_is_present_in_every_level_of_every_frame_and_stamps_are_monotonic() {
    for mode in [Dispatch::Mega, Dispatch::Multi] {
        let (d, fs, dec) = frames(mode, None, 6);
        for f in &fs {
            assert!(!f.torn, "{} pass {} torn", mode.name(), f.pass);
            for st in &d.stages {
                let single =
                    mode == Dispatch::Mega && st.kind == baro_engine::telemetry::StageKind::Argmax;
                let wgs: Vec<u32> = f
                    .spans
                    .iter()
                    .filter(|s| s.stage == st.id)
                    .map(|s| s.wg)
                    .collect();
                let want = if single { 1 } else { dec.grid as usize };
                assert_eq!(
                    wgs.len(),
                    want,
                    "{} pass {} stage {}: workgroups {wgs:?}",
                    mode.name(),
                    f.pass,
                    st.name
                );
            }
            // Within a workgroup, stages run in program order without overlap.
            for wg in 0..dec.grid {
                let mut last_end = 0;
                for s in f.spans.iter().filter(|s| s.wg == wg) {
                    assert!(
                        s.start_ns <= s.end_ns,
                        "{} pass {} {}: start after end",
                        mode.name(),
                        f.pass,
                        d.stages[s.stage as usize].name
                    );
                    assert!(
                        s.start_ns >= last_end,
                        "{} pass {} wg {wg} {}: starts before the previous stage ended",
                        mode.name(),
                        f.pass,
                        d.stages[s.stage as usize].name
                    );
                    last_end = s.end_ns;
                }
            }
            if mode == Dispatch::Mega {
                assert_eq!(
                    f.barriers.len(),
                    d.levels.len() - 1,
                    "one barrier per level boundary"
                );
            } else {
                assert_eq!(
                    f.dispatch_ns.len(),
                    d.stages.len(),
                    "one timestamp pair per dispatch"
                );
            }
        }
    }
}

#[test]
fn every_stamp_lies_inside_its_pass_gpu_timestamp_window_after_calibration() {
    let (ctx, _turn) = device_alone().expect("device");
    let model = Model::embedded().expect("model");
    let opts = DecoderOptions {
        dispatch: Dispatch::Mega,
        instrument: true,
        max_seq: 8,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx, &model, opts).expect("decoder");
    let Some(cal) = dec.calibrate(16).expect("calibration ran") else {
        eprintln!("device has no shader clock: nothing to calibrate (fallback documented in telemetry.rs)");
        return;
    };
    // Tolerance: the calibration's own window (half-width) plus 20 µs for the two clocks'
    // read granularity and the timestamp's pipeline-stage placement (TOP/BOTTOM_OF_PIPE).
    let tol = cal.uncertainty_ns as i64 + 20_000;
    let mut tok = model.tokenizer.bos_id();
    for pos in 0..8 {
        let p = dec.step(tok, pos).expect("pass");
        tok = p.argmax;
        let (t0, t1) = dec.last_pass_window().expect("timestamps");
        let words = dec.last_frame().expect("frame");
        let mut n = 0;
        for rec in words[4..].chunks_exact(2) {
            if rec[0] == 0 && rec[1] == 0 {
                continue;
            }
            n += 1;
            // In the timestamp domain, relative to the pass start, in wrapping 32-bit ns.
            let ts_lo = (rec[0] as i64 + cal.offset_ns) as u32;
            let rel = ts_lo.wrapping_sub(t0 as u32) as i32 as i64;
            assert!(
                rel >= -tol && rel <= (t1 - t0) as i64 + tol,
                "pass {pos}: stamp {rel} ns outside [0, {}] ± {tol}",
                t1 - t0
            );
        }
        assert!(n > 0, "no stamps");
    }
}

#[test]
fn a_deliberately_slowed_stage_shows_up_as_its_own_busy_time() {
    let busy = |fs: &[Frame], kind: &str| -> f64 {
        let mut v: Vec<u64> = fs
            .iter()
            .flat_map(|f| {
                f.stages
                    .iter()
                    .filter(|s| s.name.split('.').next() == Some(kind))
                    .map(|s| s.busy_ns)
            })
            .collect();
        // The lower quartile: outside load only ever adds time (a lavapipe thread descheduled
        // for a scheduler tick adds milliseconds to one sample), so the low end of the
        // samples is the stage's own cost.
        v.sort_unstable();
        v[v.len() / 4] as f64
    };
    // Passes per decoder: the head stage runs once a pass, so this is its sample count.
    const PASSES: usize = 24;
    // The two decoders take turns pass by pass, so load from outside (other tests, other
    // processes on a 2-core CI machine) falls on both alike rather than on one run.
    let (base, slow) = {
        let (ctx, _turn) = device_alone().expect("device");
        let model = Model::embedded().expect("model");
        let dec = |slow| {
            let opts = DecoderOptions {
                dispatch: Dispatch::Mega,
                instrument: true,
                max_seq: PASSES,
                test_slow_kind: slow,
                ..Default::default()
            };
            VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder")
        };
        let mut decs = [dec(None), dec(Some(StageKind::V))];
        let details: Vec<RunDetails> = decs.iter().map(|d| d.run_details("m")).collect();
        let mut out: [Vec<Frame>; 2] = [vec![], vec![]];
        let mut tok = [model.tokenizer.bos_id(); 2];
        for pos in 0..PASSES {
            for i in 0..2 {
                let p = decs[i].step(tok[i], pos).expect("pass");
                assert!(p.fail.ok(), "{}", p.fail.line(|l| decs[i].level_name(l)));
                let f = decs[i].frame(&details[i], pos as u64, pos, tok[i], p.argmax, &p);
                tok[i] = p.argmax;
                out[i].push(f);
            }
        }
        let [b, s] = out;
        (b, s)
    };
    // Machine-wide drift (CPU clocks, other load) scales every stage alike: estimate it as
    // the median slow/base ratio of the stages that were not slowed, and look for what is
    // left over.
    let others = ["q", "k", "attn", "wo", "ffn_up", "ffn_down", "head"];
    let mut ratios: Vec<f64> = others
        .iter()
        .map(|k| busy(&slow, k) / busy(&base, k))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let scale = ratios[ratios.len() / 2];
    let excess = |kind: &str| busy(&slow, kind) - scale * busy(&base, kind);
    let dv = excess("v");
    assert!(
        dv > 5_000.0,
        "v stages got only {dv} ns slower (drift scale {scale:.3})"
    );
    for kind in others {
        let d = excess(kind);
        eprintln!("{kind}: {d} ns (v: {dv} ns, scale {scale:.3})");
        // A leak would move another stage by about dv.
        assert!(
            d < dv / 2.0,
            "{kind} grew by {d} ns beyond the drift (scale {scale:.3}) while v grew by {dv} ns: the slowdown leaked"
        );
    }
}

#[test]
fn a_consumer_that_stops_reading_drops_frames_and_decoding_goes_on() {
    let (ctx, _turn) = device().expect("device");
    let model = Model::embedded().expect("model");
    let opts = DecoderOptions {
        dispatch: Dispatch::Multi,
        instrument: true,
        max_seq: 64,
        ..Default::default()
    };
    let mut b = SessionBuilder::new(&ctx.into(), model, opts)
        .passes(Some(24))
        .check(Check::Off);
    let rx = b.subscribe(SinkKind::Lossy { capacity: 4 });
    let session = b.spawn().expect("session");
    // Read nothing until the engine is done.
    let outcome = session.wait().expect("engine ran to the end");
    assert_eq!(outcome.reason, EndReason::Completed);
    assert_eq!(outcome.passes, 24);
    let got: Vec<Telemetry> = rx.try_iter().collect();
    assert!(
        matches!(got.first(), Some(Telemetry::Start(_))),
        "Start comes first"
    );
    let frames = got
        .iter()
        .filter(|t| matches!(t, Telemetry::Frame(_)))
        .count();
    assert!(
        frames <= 4,
        "a full sink holds at most its capacity, got {frames}"
    );
    match got.last() {
        Some(Telemetry::End { dropped, .. }) => {
            assert_eq!(
                *dropped,
                24 - frames as u64,
                "the End counts this sink's drops"
            )
        }
        other => panic!("End comes last, got {other:?}"),
    }
}

#[test]
fn host_clock_drift_is_measured_between_correlations() {
    let (ctx, _turn) = device_alone().expect("device");
    let Some(a) = ctx.host_correlation() else {
        eprintln!(
            "{}: no calibrated timestamps; frames carry no host time",
            ctx.info.name
        );
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    let b = ctx.host_correlation().expect("second correlation");
    assert!(
        b.host_ns > a.host_ns && b.device_ns > a.device_ns,
        "{a:?} {b:?}"
    );
    let mut hc = baro_engine::telemetry::HostClock::default();
    assert_eq!(hc.add(a.device_ns, a.host_ns), None);
    let drift = hc.add(b.device_ns, b.host_ns).expect("drift");
    // Two clocks on one machine: far below 1000 ppm (lavapipe reads the host clock itself).
    assert!(drift.abs() < 1000.0, "drift {drift} ppm");
    let mid = a.device_ns + (b.device_ns - a.device_ns) / 2;
    let host_mid = hc.host_ns(mid).expect("mapped");
    assert!(host_mid > a.host_ns && host_mid < b.host_ns);
}

#[test]
fn the_frame_read_in_place_from_the_mapped_readback_equals_one_read_from_copied_words() {
    // `frame` decodes the ring where the readback buffer is mapped, level by level with the
    // timings; the words copied out (`last_frame`) decoded, then swept, must give the same
    // spans and timings, in both dispatch styles.
    for mode in [Dispatch::Mega, Dispatch::Multi] {
        let (ctx, _turn) = device().expect("device");
        let model = Model::embedded().expect("model");
        let opts = DecoderOptions {
            dispatch: mode,
            instrument: true,
            max_seq: 4,
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx, &model, opts).expect("decoder");
        if !dec.has_clock() {
            eprintln!("device has no shader clock: no stamps to compare");
            return;
        }
        let details = dec.run_details(&model.source);
        let mut tok = model.tokenizer.bos_id();
        for pos in 0..4 {
            let p = dec.step(tok, pos).expect("pass");
            let f = dec.frame(&details, pos as u64, pos, tok, p.argmax, &p);
            let words = dec.last_frame().expect("instrumented");
            let mega = mode == Dispatch::Mega;
            let d = details
                .ring_layout()
                .decode(&words, pos as u32 + 1, mega)
                .expect("a complete frame");
            assert!(!f.torn);
            assert_eq!(f.spans, d.spans, "{} pass {pos}", mode.name());
            assert_eq!(f.device_start_ns, Some(d.device_start_ns));
            let disp: &[u64] = if mega { &[] } else { &p.dispatch_ns };
            assert_eq!(
                f.stages,
                d.spans
                    .stage_timings(&details.stages, &details.levels, disp)
            );
            assert_eq!(f.barriers, d.spans.barrier_timings());
            assert_eq!(f.barriers.is_empty(), !mega);
            tok = p.argmax;
        }
    }
}
