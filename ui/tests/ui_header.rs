//! The header's numbers a newcomer reads first: one throughput number with its window
//! named, `—` (never `0 ns`) where there is no pass to take a percentile of, and the device
//! and driver each named once.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use baro_ui::view::Scope;

#[test]
fn no_pass_in_scope_shows_a_dash_not_zero_ns() {
    let (mut st, layout) = state(clean(), 10);
    // A range over passes that are not there: nothing to take a p50 of.
    st.view.scope = Scope::Range(1_000, 1_001);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = lines(&render(&mut st, &layout, w, h)).join("\n");
        assert!(
            !text.contains("p50 0 ns") && !text.contains("p99 0 ns"),
            "{w}×{h}:\n{text}"
        );
        if w == 200 {
            assert!(text.contains("pass p50 — p99 —"), "{text}");
        }
        assert!(text.contains("p50 — p99 — · retained"), "{w}×{h}:\n{text}");
    }
}

#[test]
fn one_throughput_number_names_its_window_and_the_device_is_named_once() {
    let (mut st, layout) = state(clean(), 10);
    let text = lines(&render(&mut st, &layout, 200, 60)).join("\n");
    let head = text.lines().take(2).collect::<Vec<_>>().join("\n");
    assert!(head.contains(" tok/s (median of 10 passes) "), "{head}");
    assert_eq!(head.matches("tok/s").count(), 1, "{head}");
    assert!(!head.contains("med "), "{head}");
    assert!(
        head.contains("Synthetic GPU (no device) · driver 1.0 │"),
        "{head}"
    );
    assert_eq!(head.matches("ynthetic GPU").count(), 1, "{head}");
}
