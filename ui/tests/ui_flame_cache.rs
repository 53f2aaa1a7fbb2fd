//! The flame chart's cache: a redraw with nothing changed reuses the raster of the pass; a new
//! pass, zoom, resize or grouping change rasterises exactly once; what is drawn from the
//! cache is what a fresh raster draws.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use baro_telemetry::Telemetry;
use baro_ui::action::{Action, NoControl};
use baro_ui::synthetic::{self, Synth};

fn synth_state(n: u64) -> (Synth, baro_ui::view::UiState, baro_ui::layout::Layout) {
    let layout = baro_ui::layout::Layout::default_preset();
    let mut s = Synth::new(clean());
    let mut st = baro_ui::app::new_state(synthetic::meta(s.details()), &layout);
    for m in s.stream(n) {
        st.live.ingest(m);
    }
    (s, st, layout)
}

#[test]
fn a_redraw_with_nothing_changed_or_a_cursor_move_reuses_the_flame_raster() {
    let (_, mut st, layout) = synth_state(5);
    let first = lines(&render(&mut st, &layout, 120, 40));
    let n = st.flame.rasterised();
    assert_eq!(n, 1, "the first draw rasterises the pass once");
    let again = lines(&render(&mut st, &layout, 120, 40));
    assert_eq!(
        st.flame.rasterised(),
        n,
        "an unchanged redraw rasterised again"
    );
    assert_eq!(first, again);
    st.apply(Action::Right, &NoControl);
    st.apply(Action::Down, &NoControl);
    let moved = lines(&render(&mut st, &layout, 120, 40));
    assert_eq!(st.flame.rasterised(), n, "a cursor move rasterised again");
    assert_ne!(first, moved, "the cursor move must still show");
}

#[test]
fn a_new_pass_zoom_resize_or_grouping_rasterises_exactly_once_each() {
    let (mut s, mut st, layout) = synth_state(5);
    render(&mut st, &layout, 120, 40);
    let mut n = st.flame.rasterised();
    let mut twice = |st: &mut baro_ui::view::UiState, w: u16, h: u16, what: &str| {
        render(st, &layout, w, h);
        render(st, &layout, w, h);
        assert_eq!(
            st.flame.rasterised(),
            n + 1,
            "{what}: not exactly one raster"
        );
        n += 1;
    };
    st.live.ingest(Telemetry::Frame(Box::new(s.frame())));
    twice(&mut st, 120, 40, "new pass");
    st.apply(Action::ZoomIn, &NoControl);
    twice(&mut st, 120, 40, "zoom in");
    st.apply(Action::PanRight, &NoControl);
    twice(&mut st, 120, 40, "pan");
    twice(&mut st, 160, 50, "resize");
    st.apply(Action::GroupToggle, &NoControl);
    twice(&mut st, 160, 50, "group by stage");
}

#[test]
fn the_screen_drawn_from_the_cache_equals_a_fresh_states_after_zooming_back() {
    let (_, mut st, layout) = synth_state(6);
    let before = lines(&render(&mut st, &layout, 140, 45));
    for a in [Action::ZoomIn, Action::ZoomIn, Action::GroupToggle] {
        st.apply(a, &NoControl);
        render(&mut st, &layout, 140, 45);
    }
    st.apply(Action::GroupToggle, &NoControl);
    st.apply(Action::ZoomReset, &NoControl);
    let back = lines(&render(&mut st, &layout, 140, 45));
    let (_, mut fresh, _) = synth_state(6);
    let fresh = lines(&render(&mut fresh, &layout, 140, 45));
    assert_eq!(back, fresh);
    assert_eq!(before, fresh);
}
