//! Whole screens from fixed synthetic telemetry, as insta snapshots, at 80×24 and 200×60:
//! a clean run, a failing pass, a level-tail trap, a token mismatch.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use baro_ui::layout::Layout;
use baro_ui::synthetic::SynthConfig;

fn snap(name: &str, cfg: SynthConfig, passes: u64) {
    let (mut st, layout) = state(cfg, passes);
    for (w, h, l) in [
        (80, 24, Layout::load("compact").unwrap()),
        (200, 60, layout),
    ] {
        let term = render(&mut st, &l, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), term.backend());
    }
}

#[test]
fn clean_run_is_quiet() {
    snap("clean", clean(), 40);
}

#[test]
fn failing_pass_is_impossible_to_miss() {
    snap(
        "failing",
        SynthConfig {
            fail_every: Some(30),
            ..clean()
        },
        40,
    );
}

#[test]
fn level_tail_trap_names_stage_level_and_workgroup() {
    snap(
        "tail_trap",
        SynthConfig {
            tail_wg: Some(5),
            ..clean()
        },
        40,
    );
}

#[test]
fn mismatch_marks_the_first_divergence() {
    snap(
        "mismatch",
        SynthConfig {
            mismatch_at: Some(25),
            ..clean()
        },
        40,
    );
}
