//! What the state makes of a telemetry stream: the scenario → warnings/log/counters table.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use baro_ui::layout::Layout;
use baro_ui::state::Severity;
use baro_ui::synthetic::SynthConfig;
use baro_ui::theme::{ColorDepth, Theme};

#[test]
fn clean_run_has_no_warnings_no_errors_and_no_attribution_gaps() {
    let (mut st, _) = state(clean(), 50);
    st.prepare();
    assert!(
        st.derived.attribution.is_empty(),
        "{:?}",
        st.derived.attribution
    );
    assert!(st.live.log.iter().all(|e| e.sev == Severity::Info));
    assert_eq!(
        (st.live.failed, st.live.mismatched, st.live.dropped),
        (0, 0, 0)
    );
}

#[test]
fn level_tail_trap_is_charged_to_the_closing_stage_and_names_the_workgroup() {
    let (mut st, _) = state(
        SynthConfig {
            tail_wg: Some(5),
            ..clean()
        },
        50,
    );
    st.prepare();
    let a = &st.derived.attribution;
    assert!(a[0].starts_with("workgroup 5 arrived last at "), "{a:?}");
    let ffn = a
        .iter()
        .find(|l| l.starts_with("ffn_up.l1 charged "))
        .unwrap();
    assert!(
        ffn.contains("is level 8's tail, waiting for workgroup 5"),
        "{ffn}"
    );
    // Only the stages that close a trapped level are named.
    assert!(a.iter().skip(1).all(|l| l.starts_with("ffn_")), "{a:?}");
}

#[test]
fn a_tail_that_is_a_few_workgroups_work_names_the_slowest_workgroups_busy() {
    use baro_ui::synthetic::Synth;
    let mut synth = Synth::new(clean());
    let meta = baro_ui::synthetic::meta(synth.details());
    let d = synth.details().clone();
    let attn = d
        .stages
        .iter()
        .position(|s| s.name.as_ref() == "attn.l1")
        .expect("an attention stage") as u32;
    let mut st = baro_ui::app::new_state(meta, &Layout::default_preset());
    for mut m in synth.stream(50) {
        // The attention as round 30's recording has it: units on a few workgroups (the
        // slowest 11 µs), the grid's mean 2 µs, the level 13 µs.
        if let baro_telemetry::Telemetry::Frame(f) = &mut m {
            for t in f.stages.iter_mut().filter(|t| t.stage == attn) {
                (t.busy_ns, t.max_busy_ns, t.charged_ns) = (2_000, 11_000, 13_000);
            }
        }
        st.live.ingest(m);
    }
    st.prepare();
    let a = &st.derived.attribution;
    let line = a
        .iter()
        .find(|l| l.starts_with("attn.l1 charged "))
        .unwrap_or_else(|| panic!("no attention warning: {a:?}"));
    assert!(
        line.starts_with(
            "attn.l1 charged 13 µs, busy 2 µs (slowest workgroup 11 µs): 11 µs is level "
        ),
        "{line}"
    );
    // Where the slowest workgroup is not far above the mean, the warning says nothing of it.
    let (mut trap, _) = state(
        SynthConfig {
            tail_wg: Some(5),
            ..clean()
        },
        50,
    );
    trap.prepare();
    let ffn = trap
        .derived
        .attribution
        .iter()
        .find(|l| l.starts_with("ffn_up.l1 "));
    assert!(
        ffn.is_some_and(|l| !l.contains("slowest")),
        "{:?}",
        trap.derived.attribution
    );
}

#[test]
fn failing_pass_is_counted_and_logged_with_its_decoded_line() {
    let (st, _) = state(
        SynthConfig {
            fail_every: Some(10),
            ..clean()
        },
        25,
    );
    assert_eq!(st.live.failed, 2);
    let errors: Vec<_> = st
        .live
        .log
        .iter()
        .filter(|e| e.sev == Severity::Error)
        .collect();
    assert!(
        errors.iter().any(|e| e.pass == Some(9)
            && e.text
                .starts_with("fail-word 0x00000201 FAIL barrier-timeout+output-poisoned")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.text.starts_with("poison:")));
    assert_eq!(st.live.last_fail.as_ref().unwrap().0, 19);
    assert!(st.live.passes.iter().filter(|p| p.failed).count() == 2);
}

#[test]
fn mismatch_records_the_first_divergence_with_both_tokens_and_the_margin() {
    let (st, _) = state(
        SynthConfig {
            mismatch_at: Some(7),
            ..clean()
        },
        12,
    );
    let d = st.live.divergence.as_ref().unwrap();
    assert_eq!(d.pass, 7);
    assert_ne!(d.gpu, d.reference);
    assert_eq!(d.margin, Some(0.25));
    assert_eq!(st.live.mismatched, 1);
    assert!(st
        .live
        .tokens
        .iter()
        .filter(|t| t.pass > 7)
        .all(|t| t.verdict == Some(baro_telemetry::Verdict::Uncompared)));
}

#[test]
fn dropped_frames_are_logged_as_a_warning() {
    let (mut st, _) = state(clean(), 3);
    let mut f = baro_ui::synthetic::Synth::new(clean()).frame();
    f.pass = 3;
    f.dropped = 17;
    st.live
        .ingest(baro_telemetry::Telemetry::Frame(Box::new(f)));
    assert_eq!(st.live.dropped, 17);
    assert!(st
        .live
        .log
        .iter()
        .any(|e| e.sev == Severity::Warn && e.text.starts_with("dropped frames: 17")));
}

#[test]
fn ascii_theme_draws_no_box_or_block_glyphs() {
    let (mut st, layout) = state(
        SynthConfig {
            tail_wg: Some(5),
            ..clean()
        },
        30,
    );
    let term = render_theme(
        &mut st,
        &layout,
        200,
        60,
        Theme::new(ColorDepth::TrueColor, true),
    );
    let text = lines(&term).concat();
    for g in ['─', '│', '┌', '█', '░', '▁', '↵', '⚠', '✓', '✗'] {
        assert!(!text.contains(g), "{g} drawn in --ascii");
    }
    assert!(text.contains("+ flame"), "ASCII borders");
}

#[test]
fn a_start_that_carries_stage_weight_bytes_gives_the_stage_table_its_bytes_and_an_old_one_keeps_the_producers(
) {
    use baro_ui::state::{Data, Meta};
    use baro_ui::synthetic::Synth;
    let synth = Synth::new(clean());
    let mut d = synth.details().clone();
    // A recording made before the field existed: no bytes in its Start.
    for s in &mut d.stages {
        s.weight_bytes = 0;
    }
    let producer = Meta {
        weight_bytes: vec![7; d.stages.len()],
        ..Default::default()
    };
    let mut old = Data::new(producer.clone());
    old.ingest(baro_telemetry::Telemetry::Start(d.clone()));
    assert_eq!(old.meta.weight_bytes, producer.weight_bytes);
    // The engine's Start says what each stage streams: that wins, replays included.
    for (i, s) in d.stages.iter_mut().enumerate() {
        s.weight_bytes = 1000 + i as u64;
    }
    let mut new = Data::new(Meta::default());
    new.ingest(baro_telemetry::Telemetry::Start(d.clone()));
    let want: Vec<u64> = (0..d.stages.len() as u64).map(|i| 1000 + i).collect();
    assert_eq!(new.meta.weight_bytes, want);
}

#[test]
fn the_dispatch_is_the_starts_not_guessed_from_the_frames_dispatch_times() {
    use baro_telemetry::{Dispatch, Telemetry};
    use baro_ui::synthetic::Synth;
    // A multi-dispatch run whose frames carry no per-dispatch times (a producer without
    // them, or times not taken), and a megakernel run whose frames do carry some: each shows
    // the dispatch its Start says.
    for (dispatch, times) in [(Dispatch::Multi, false), (Dispatch::Mega, true)] {
        let layout = Layout::default_preset();
        let mut s = Synth::new(SynthConfig {
            dispatch,
            ..clean()
        });
        let mut st = baro_ui::app::new_state(baro_ui::synthetic::meta(s.details()), &layout);
        for mut m in s.stream(20) {
            if let Telemetry::Frame(f) = &mut m {
                f.dispatch_ns = if times {
                    vec![1_000; f.stages.len()]
                } else {
                    vec![]
                };
            }
            st.live.ingest(m);
        }
        assert_eq!(st.live.dispatch, Some(dispatch), "{dispatch}");
        assert!(
            !st.live
                .log
                .iter()
                .any(|e| e.text.contains("dispatch is now")),
            "{dispatch}: no switch was announced"
        );
        let term = render(&mut st, &layout, 140, 40);
        let screen = lines(&term);
        let header = screen
            .iter()
            .find(|l| l.contains("Synthetic GPU"))
            .expect("the header's first line");
        let other = if times { "multi" } else { "mega" };
        assert!(
            header.contains(&format!(" {dispatch} ")) && !header.contains(other),
            "{dispatch}: {header}"
        );
    }
}

#[test]
fn switching_the_synthetic_producers_dispatch_sends_a_new_start_that_the_dashboard_follows() {
    use baro_telemetry::{Dispatch, Telemetry};
    use baro_ui::action::Control;
    use baro_ui::synthetic::{meta, spawn, Synth};
    use std::time::{Duration, Instant};
    let (rx, ctl, h) = spawn(SynthConfig {
        rate_hz: 500.0,
        ..clean()
    });
    let layout = Layout::default_preset();
    let mut st = baro_ui::app::new_state(meta(Synth::new(clean()).details()), &layout);
    let until = Instant::now() + Duration::from_secs(30);
    let next = || {
        rx.recv_deadline(until)
            .expect("the producer's next message")
    };
    // The run's Start and a few megakernel passes.
    let mut frames = 0;
    while frames < 3 {
        let m = next();
        if let Telemetry::Start(d) = &m {
            assert_eq!(d.dispatch, Dispatch::Mega);
        }
        frames += matches!(m, Telemetry::Frame(_)) as u32;
        st.live.ingest(m);
    }
    ctl.set_dispatch(Dispatch::Multi);
    // As the live session does on a rebuild: a new Start before the first multi pass.
    loop {
        let m = next();
        if let Telemetry::Frame(f) = &m {
            assert!(f.dispatch_ns.is_empty(), "a multi pass before its Start");
        }
        let start = matches!(&m, Telemetry::Start(d) if d.dispatch == Dispatch::Multi);
        st.live.ingest(m);
        if start {
            break;
        }
    }
    assert_eq!(st.live.dispatch, Some(Dispatch::Multi));
    assert!(
        st.live
            .log
            .iter()
            .any(|e| e.text == "dispatch is now multi"),
        "{:?}",
        st.live.log.iter().map(|e| &e.text).collect::<Vec<_>>()
    );
    let m = loop {
        if let Telemetry::Frame(f) = next() {
            break f;
        }
    };
    assert!(!m.dispatch_ns.is_empty(), "the passes after it are multi");
    ctl.stop();
    drop(rx);
    h.join().expect("producer thread");
}

#[test]
fn a_run_whose_device_clock_is_off_says_why_first_in_its_attribution() {
    use baro_telemetry::Telemetry;
    let layout = Layout::default_preset();
    let mut s = baro_ui::synthetic::Synth::new(clean());
    let meta = baro_ui::synthetic::meta(s.details());
    let mut st = baro_ui::app::new_state(meta, &layout);
    let why = "the device clock ticks at 100.0 MHz (±0.0), not once a ns: it is off, so no stage or barrier times (nor a pass loop's per-pass GPU times)";
    for mut m in s.stream(20) {
        if let Telemetry::Start(d) = &mut m {
            d.device_clock_off = Some(why.into());
        }
        st.live.ingest(m);
    }
    st.prepare();
    assert_eq!(
        st.derived.attribution.first().map(String::as_str),
        Some(why),
        "{:?}",
        st.derived.attribution
    );
}
