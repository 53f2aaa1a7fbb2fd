use super::*;
use crate::synth::{synthetic_frame, synthetic_run};

/// 4 workgroups, stages `q.l0 k.l0 | v.l0 attn.l0` in two levels.
fn run() -> RunDetails {
    synthetic_run(4, 4, 2)
}

/// Every workgroup works 10 µs per stage; `late` = (workgroup, extra ns) on `k.l0`, the last
/// stage of level 0; level 0's barrier releases 1 µs after the last arrival.
fn pass(run: &RunDetails, late: Option<(u32, u32)>) -> Frame {
    let mut f = synthetic_frame(run, 0, 1);
    let mut s = Spans::new(4, 4, 2);
    let mut arrive = [0u32; 4];
    for w in 0..4 {
        let extra = late.filter(|l| l.0 == w).map_or(0, |l| l.1);
        s.set_span(0, w, 0, 10_000);
        s.set_span(1, w, 10_000, 20_000 + extra);
        arrive[w as usize] = 20_000 + extra;
    }
    let exit = arrive.iter().copied().max().unwrap_or(0) + 1_000;
    for w in 0..4 {
        s.set_barrier(0, w, arrive[w as usize], exit);
        s.set_span(2, w, exit, exit + 10_000);
        s.set_span(3, w, exit + 10_000, exit + 20_000);
    }
    f.stages = s.stage_timings(&run.stages, &run.levels, &[]);
    f.barriers = s.barrier_timings();
    f.spans = s;
    f
}

#[test]
fn a_late_workgroup_makes_the_levels_last_stage_carry_its_tail_and_is_named() {
    let r = run();
    let w = frame_warnings(&r, &pass(&r, Some((2, 15_000))));
    let want = TailWarning {
        stage: 1,
        name: "k.l0".into(),
        level: 0,
        charged_ns: 26_000,
        busy_ns: 13_750,
        tail_ns: 12_250,
        slowest_ns: None,
        last_arriver: Some(2),
    };
    assert_eq!(w, vec![AttributionWarning::Tail(want)]);
    assert_eq!(
        w[0].to_string(),
        "k.l0 charged 26 µs, busy 14 µs: 12 µs is level 0's tail, waiting for workgroup 2"
    );
}

#[test]
fn a_pass_whose_barrier_wait_is_below_the_thresholds_has_no_warning() {
    let r = run();
    assert_eq!(frame_warnings(&r, &pass(&r, None)), vec![]);
    // 4 µs late: the mean tail (4.0 µs) is below GAP_MIN_NS.
    assert_eq!(frame_warnings(&r, &pass(&r, Some((1, 4_000)))), vec![]);
}

#[test]
fn a_frame_without_stage_timings_has_no_warning() {
    let r = run();
    let mut f = pass(&r, Some((2, 15_000)));
    f.stages.clear();
    assert_eq!(frame_warnings(&r, &f), vec![]);
}

#[test]
fn a_tail_that_is_one_workgroups_work_carries_the_slowest_workgroups_busy() {
    let r = run();
    let w = frame_warnings(&r, &pass(&r, Some((3, 30_000))));
    let t = w[0].tail().expect("a tail warning");
    assert_eq!((t.busy_ns, t.slowest_ns), (17_500, Some(40_000)));
    assert_eq!(
        w[0].to_string(),
        "k.l0 charged 41 µs, busy 18 µs (slowest workgroup 40 µs): 24 µs is level 0's tail, \
         waiting for workgroup 3"
    );
}

#[test]
fn without_barrier_stamps_the_tail_is_still_named_but_no_workgroup() {
    let r = run();
    let mut f = pass(&r, Some((2, 15_000)));
    f.spans = Spans::default();
    let w = frame_warnings(&r, &f);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].tail().map(|t| t.last_arriver), Some(None));
    assert!(w[0].to_string().ends_with("is level 0's tail"), "{}", w[0]);
}

#[test]
fn tails_are_ordered_largest_first_and_only_for_each_levels_last_stage() {
    let r = run();
    let cost = |s: StageId| {
        Some(StageCost {
            busy_ns: 10_000,
            charged_ns: [90_000, 30_000, 20_000, 60_000][s as usize],
            slowest_ns: None,
        })
    };
    let t = tails(&r, cost, |_| None);
    let names: Vec<&str> = t.iter().map(|t| &*t.name).collect();
    assert_eq!(names, ["attn.l0", "k.l0"]);
}

#[test]
fn the_last_arriver_is_the_latest_stamp_the_lowest_workgroup_among_equals() {
    let mut s = Spans::new(3, 1, 3);
    s.set_barrier(0, 0, 50, 60);
    s.set_barrier(0, 1, 70, 80);
    s.set_barrier(0, 2, 70, 80);
    s.set_barrier(1, 2, 10, 20);
    assert_eq!(last_arrivers(&s), vec![Some(1), Some(2), None]);
}

#[test]
fn a_straggler_needs_a_quarter_of_the_barriers_and_three_times_its_share() {
    let s = straggler(&[1, 9, 2, 0, 0, 0, 0, 0], 12, 8, 3).expect("workgroup 1: 9 of 12");
    assert_eq!(
        s.to_string(),
        "workgroup 1 arrived last at 9 of 12 barriers (75%) over the last 3 passes"
    );
    // Among 4 its fair share is 3: 9 is not more than three times it.
    assert_eq!(
        straggler(&[3, 9, 0, 0], 12, 4, 3).map(|s| s.workgroup),
        None
    );
    assert_eq!(straggler(&[12], 12, 1, 3), None);
    assert_eq!(straggler(&[], 0, 0, 0), None);
}

#[test]
fn one_pass_names_a_straggler_only_over_enough_barriers() {
    let r = synthetic_run(8, 20, 10);
    let mut f = synthetic_frame(&r, 0, 1);
    // Workgroup 5 arrives last at every one of `n` barriers.
    let late_at = |n: u32| {
        let mut s = Spans::new(8, 20, 40);
        for l in 0..n {
            for w in 0..8 {
                s.set_barrier(l, w, if w == 5 { 900 } else { 100 + w }, 1_000);
            }
        }
        s
    };
    f.spans = late_at(STRAGGLER_MIN_BARRIERS);
    let want = Straggler {
        workgroup: 5,
        last_at: 32,
        barriers: 32,
        passes: 1,
    };
    assert_eq!(
        frame_warnings(&r, &f).first(),
        Some(&AttributionWarning::Straggler(want))
    );
    // One barrier fewer: no pattern yet.
    f.spans = late_at(STRAGGLER_MIN_BARRIERS - 1);
    let w = frame_warnings(&r, &f);
    assert!(
        !w.iter()
            .any(|w| matches!(w, AttributionWarning::Straggler(_))),
        "{w:?}"
    );
}

#[test]
fn a_frame_json_line_carries_its_warnings_as_structured_fields_and_reads_back() {
    let r = run();
    let mut j = JsonLines::new();
    let start = j.line(Telemetry::Start(r.clone()), false).expect("json");
    assert!(!start.contains("attribution"), "{start}");
    let f = pass(&r, Some((2, 15_000)));
    let line = j
        .line(Telemetry::Frame(Box::new(f.clone())), false)
        .expect("json");
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
    assert_eq!(
        v["attribution"],
        serde_json::json!([{"kind":"tail","stage":1,"name":"k.l0","level":0,
            "charged_ns":26000,"busy_ns":13750,"tail_ns":12250,"slowest_ns":null,
            "last_arriver":2}])
    );
    assert!(v.get("spans").is_none(), "spans left out: {line}");
    // Readers of the stream ignore the added field.
    let mut plain = f.clone();
    plain.spans = Spans::default();
    assert_eq!(
        Telemetry::from_json_line(&line).expect("reads back"),
        Telemetry::Frame(Box::new(plain))
    );
    let clean = j
        .line(Telemetry::Frame(Box::new(pass(&r, None))), true)
        .expect("json");
    let v: serde_json::Value = serde_json::from_str(&clean).expect("one JSON object");
    assert_eq!(v["attribution"], serde_json::json!([]), "{clean}");
    // The bandwidth beside it: the stages' weight bytes over the GPU time, or null.
    assert_eq!(
        v.get("bandwidth")
            .map(|b| b.is_null() || b["weight_bytes"].is_u64()),
        Some(true),
        "{clean}"
    );
}

#[test]
fn frame_lines_before_a_start_have_an_empty_attribution() {
    let r = run();
    let line = JsonLines::new()
        .line(
            Telemetry::Frame(Box::new(pass(&r, Some((2, 15_000))))),
            true,
        )
        .expect("json");
    assert!(
        line.ends_with(",\"attribution\":[],\"bandwidth\":null}"),
        "{line}"
    );
}

#[test]
fn the_allocation_free_tail_stages_are_the_tails_frame_warnings_names() {
    let r = synthetic_run(8, 40, 12);
    for p in 0..16 {
        let mut f = synthetic_frame(&r, p, 9);
        // Every third closing stage charged 30 µs over its work.
        for lv in r.levels.iter().step_by(3) {
            let last = *lv.stages.last().unwrap();
            for t in f.stages.iter_mut().filter(|t| t.stage == last) {
                t.charged_ns = t.busy_ns + 30_000;
            }
        }
        let mut named: Vec<StageId> = frame_warnings(&r, &f)
            .iter()
            .filter_map(|w| w.tail().map(|t| t.stage))
            .collect();
        named.sort_unstable();
        let counted: Vec<StageId> = frame_tail_stages(&r, &f).map(|t| t.stage).collect();
        assert_eq!(counted, named, "pass {p}");
        assert!(counted.len() >= 4, "{counted:?}");
    }
}
