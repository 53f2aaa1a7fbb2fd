//! `diff` compares within one power mode: it tallies each recording's passes per mode, takes
//! the medians over the common mode's passes only (saying which and how many were
//! excluded), and gives no Δ when no mode is common. Synthetic recordings where one has slow
//! passes (stage busy ×2, as the slow power state costs latency-bound stages).

#![allow(clippy::unwrap_used)]

use std::io::Cursor;

use baro_telemetry::recording::diff::{self, Compared};
use baro_telemetry::recording::{Reader, RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Frame, PowerMode, RunDetails, StageKind, Telemetry};

/// A recording of `passes` synthetic frames, each passed through `edit`.
fn recording(run: &RunDetails, passes: u64, mut edit: impl FnMut(&mut Frame)) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), &RecordingHeader::new(run.clone(), "test")).unwrap();
    w.write(&Telemetry::Start(run.clone())).unwrap();
    for p in 0..passes {
        let mut f = synthetic_frame(run, p, 3);
        if p % 8 == 7 {
            // The synthetic producer makes every 8th pass 1.8× slower and labels it slow;
            // undo both, so the recording's modes are the test's alone.
            scale_busy(&mut f, 5.0 / 9.0);
            f.mode = PowerMode::Fast;
        }
        edit(&mut f);
        w.write(&Telemetry::Frame(Box::new(f))).unwrap();
    }
    w.finish().unwrap()
}

fn compare(a: &[u8], b: &[u8]) -> diff::DiffReport {
    diff::compare(
        &mut Reader::new(Cursor::new(a)).unwrap(),
        &mut Reader::new(Cursor::new(b)).unwrap(),
    )
    .unwrap()
}

/// Every stage's busy time ×`k`.
fn scale_busy(f: &mut Frame, k: f64) {
    for s in &mut f.stages {
        s.busy_ns = (s.busy_ns as f64 * k) as u64;
    }
}

#[test]
fn diff_excludes_the_slow_start_of_a_and_compares_fast_passes_only_saying_how_many() {
    let run = synthetic_run(4, 16, 7);
    // A: the first 12 passes in the slow mode (busy ×2), then 36 fast ones (the first two
    // of those unknown: the classifier's hysteresis).
    let a = recording(&run, 48, |f| {
        if f.pass < 12 {
            scale_busy(f, 2.0);
        }
    });
    // B: all fast, 10% slower on every kind.
    let b = recording(&run, 48, |f| scale_busy(f, 1.1));
    let d = compare(&a, &b);
    assert_eq!(
        (d.a.modes.fast, d.a.modes.slow, d.a.modes.unknown),
        (34, 12, 2),
        "{:?}",
        d.a.modes
    );
    assert_eq!((d.b.modes.fast, d.b.modes.slow), (48, 0), "{:?}", d.b.modes);
    assert_eq!(
        d.compared,
        Compared::Mode {
            mode: PowerMode::Fast,
            a_excluded: 14,
            b_excluded: 0
        }
    );
    // Over fast passes only, B is +10% on every kind (a mixed median would be skewed).
    for k in d.kinds.iter().filter(|k| k.kind != StageKind::Attn) {
        let p = d.busy_delta_pct(k).unwrap();
        assert!((p - 10.0).abs() < 2.5, "{:?}: {p:+.1}%", k.kind);
    }
    let table = d.to_string();
    assert!(
        table.contains("48 passes: 34 fast, 12 slow, 2 unknown"),
        "{table}"
    );
    assert!(
        table.contains("compared: fast passes only (14 of A and 0 of B in other modes excluded)"),
        "{table}"
    );
}

#[test]
fn diff_with_no_common_power_mode_says_not_comparable_and_prints_no_delta() {
    let run = synthetic_run(4, 16, 7);
    // A: every pass labelled slow live (the labeler saw low clocks); B: all fast.
    let a = recording(&run, 20, |f| {
        f.mode = PowerMode::Slow;
        scale_busy(f, 2.0);
    });
    let b = recording(&run, 20, |_| {});
    let d = compare(&a, &b);
    assert_eq!(d.a.modes.slow, 20);
    assert_eq!(d.b.modes.fast, 20);
    assert_eq!(d.compared, Compared::Incomparable);
    assert!(d.kinds.iter().all(|k| d.busy_delta_pct(k).is_none()
        && d.charged_delta_pct(k).is_none()
        && k.a_busy_ns.is_some()));
    let table = d.to_string();
    assert!(
        table.contains("compared: NOT COMPARABLE: no power mode is common to A (0 fast, 20 slow, 0 unknown) and B (20 fast, 0 slow, 0 unknown)"),
        "{table}"
    );
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| {
            StageKind::ALL
                .iter()
                .any(|k| l.split_whitespace().next() == Some(k.name()))
        })
        .collect();
    assert_eq!(rows.len(), d.kinds.len(), "{table}");
    assert!(rows.iter().all(|r| !r.contains('%')), "{table}");
}

#[test]
fn diff_lists_a_tail_charged_to_a_levels_closing_stage_on_the_side_that_has_it_only() {
    let run = synthetic_run(4, 16, 7);
    let closing = *run.levels[2].stages.last().unwrap();
    let a = recording(&run, 24, |_| {});
    // B: the stage that closes level 2 is charged 60 µs over its own work on every pass.
    let b = recording(&run, 24, |f| {
        for t in f.stages.iter_mut().filter(|t| t.stage == closing) {
            t.charged_ns = t.busy_ns + 60_000;
        }
    });
    let d = compare(&a, &b);
    let tail_of = |w: &[baro_telemetry::analysis::AttributionWarning]| {
        w.iter()
            .filter_map(|w| w.tail())
            .find(|t| t.stage == closing)
            .cloned()
    };
    let t = tail_of(&d.b_attribution).expect("B's tail is listed");
    assert_eq!((t.level, t.tail_ns), (2, 60_000));
    assert_eq!(tail_of(&d.a_attribution), None, "{:?}", d.a_attribution);
    let table = d.to_string();
    assert!(
        table.contains(&format!("  B: {t}")),
        "the table prints B's warning as the dashboard does: {table}"
    );
    let json = d.to_json();
    let listed = json["attribution"]["b"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|w| w["kind"] == "tail" && w["stage"] == closing && w["tail_ns"] == 60_000),
        "{json}"
    );
}

/// A recording like [`recording`] whose header names the weights `quant`.
fn recording_of(run: &RunDetails, quant: &str) -> Vec<u8> {
    let mut h = RecordingHeader::new(run.clone(), "test");
    h.quant = Some(quant.to_string());
    let mut w = Writer::new(Vec::new(), &h).unwrap();
    w.write(&Telemetry::Start(run.clone())).unwrap();
    for p in 0..4 {
        w.write(&Telemetry::Frame(Box::new(synthetic_frame(run, p, 3))))
            .unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn diff_names_differing_weights_and_says_when_one_label_may_be_an_older_classifier_only_one() {
    let run = synthetic_run(4, 16, 7);
    let weights = |a: &str, b: &str| -> Vec<String> {
        compare(&recording_of(&run, a), &recording_of(&run, b))
            .mismatch()
            .into_iter()
            .filter(|m| m.starts_with("weights differ"))
            .collect()
    };
    assert!(weights("q4_k+q6_k", "q4_k+q6_k").is_empty());
    // Two K-quant mixes sharing the Q6_K classifier: different weights, said plainly.
    let m = weights("q4_k+q6_k", "q5_k+q6_k");
    assert_eq!(m, ["weights differ (A q4_k+q6_k, B q5_k+q6_k)"]);
    // An older `record`'s label (the classifier's type) against the layer types: still a
    // mismatch, with the reason it may be the same file.
    for (a, b) in [("q6_k", "q4_k+q6_k"), ("q4_k+q6_k", "q6_k")] {
        let m = weights(a, b);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains("older recording's label"), "{m:?}");
    }
    // A lone type outside the other's set is just different weights.
    let m = weights("q8_0", "q4_k+q6_k");
    assert_eq!(m, ["weights differ (A q8_0, B q4_k+q6_k)"]);
}

/// Stage times near `u64::MAX` (a damaged or crafted recording): each kind's per-pass sum
/// and the median over passes saturate at `u64::MAX` (never below any one stage's time), so
/// the damaged side reads as the slowest there is, with B faster on every kind; they do not
/// wrap round to a few ns (a release build: B "slower" by millions of %) or panic (an
/// overflow-checked build), and the table's µs do not wrap to 0.
#[test]
fn diff_of_passes_with_near_max_stage_times_saturates_sums_and_medians_monotone() {
    let run = synthetic_run(4, 16, 7);
    let big = (1u64 << 63) + 10;
    // 4 passes: an even count, so the median is the mean of the middle two.
    let a = recording(&run, 4, |f| {
        for s in &mut f.stages {
            (s.busy_ns, s.charged_ns, s.max_busy_ns) = (big, u64::MAX, big);
        }
    });
    let b = recording(&run, 4, |_| {});
    let d = compare(&a, &b);
    assert!(!d.kinds.is_empty());
    for k in &d.kinds {
        let stages = run.stages.iter().filter(|s| s.kind == k.kind).count();
        // Two stages of a kind: 2 × (2⁶³ + 10) saturates (it wraps to 20 ns); one stage: its
        // own time (the median of two equal passes, not their wrapped sum over 2).
        let want = if stages > 1 { u64::MAX } else { big };
        assert_eq!(k.a_busy_ns, Some(want), "{:?}: {stages} stages", k.kind);
        assert_eq!(k.a_charged_ns, Some(u64::MAX), "{:?}", k.kind);
        assert!(k.b_busy_ns.unwrap() < want, "{k:?}");
        if let Some(p) = d.busy_delta_pct(k) {
            assert!(p < 0.0, "{:?}: B {p:+.1}% against a saturated A", k.kind);
        }
    }
    let text = d.to_string();
    assert!(!text.contains(" 0 µs"), "{text}");
    // A tail warning's charged time, in whole µs: u64::MAX / 1000 (it wraps to 0).
    let saturated = format!("{} µs", u64::MAX / 1000);
    assert!(text.contains(&saturated), "{text}");
}
