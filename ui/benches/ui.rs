//! `cargo bench -p baro-ui --bench ui`: the dashboard's budget with synthetic telemetry of
//! 1,000 workgroups × ~200 stages per pass: ingest into the UI state (target ≥ 1 M spans/s on
//! one core) and whole-frame render p99 (target ≤ 16 ms) at 200×60 and 400×100. The
//! measuring code is the UI library's [`baro_ui::bench`], shared with
//! `baro-top bench ui`; `BARO_BENCH_PANELS=1` adds a per-panel breakdown at 200×40.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use baro_telemetry::Telemetry;
use baro_ui::bench::{self, Config};
use baro_ui::keymap::Keymap;
use baro_ui::layout::Layout;
use baro_ui::synthetic::{self, Synth, SynthConfig};
use baro_ui::theme::Theme;

fn main() {
    let report = bench::run(&Config::default());
    for l in report.lines() {
        println!("{l}");
    }
    if std::env::var_os("BARO_BENCH_PANELS").is_some() {
        per_panel();
    }
}

/// Each panel drawn alone at 200×40 (ten draws each, the flame raster cached after the
/// first), wall time.
fn per_panel() {
    use baro_ui::panels::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::Widget;
    let cfg = SynthConfig {
        grid: 1000,
        layers: 28,
        rate_hz: 0.0,
        ..Default::default()
    };
    let mut synth = Synth::new(cfg);
    let details = synth.details().clone();
    let layout = Layout::default_preset();
    let mut st = baro_ui::app::new_state(synthetic::meta(&details), &layout);
    st.live.ingest(Telemetry::Start(details));
    for _ in 0..8 {
        st.live.ingest(Telemetry::Frame(Box::new(synth.frame())));
    }
    st.prepare();
    let (theme, keys) = (Theme::default(), Keymap::default());
    let ctx = Ctx {
        s: &st,
        theme: &theme,
        keys: &keys,
    };
    let area = Rect::new(0, 0, 200, 40);
    let time = |name: &str, f: &dyn Fn(&mut Buffer)| {
        let mut buf = Buffer::empty(area);
        let t = Instant::now();
        for _ in 0..10 {
            f(&mut buf);
        }
        println!(
            "  panel {name}: {:.2} ms",
            t.elapsed().as_secs_f64() * 100.0
        );
    };
    time("header", &|b| header::Header { ctx: &ctx }.render(area, b));
    time("navigator", &|b| {
        navigator::Navigator { ctx: &ctx }.render(area, b)
    });
    time("flame", &|b| flame::Flame { ctx: &ctx }.render(area, b));
    time("stages", &|b| stages::Stages { ctx: &ctx }.render(area, b));
    time("barriers", &|b| {
        barriers::Barriers { ctx: &ctx }.render(area, b)
    });
    time("attribution", &|b| {
        attribution::Attribution { ctx: &ctx }.render(area, b)
    });
    time("tokens", &|b| tokens::Tokens { ctx: &ctx }.render(area, b));
    time("log", &|b| log::Log { ctx: &ctx }.render(area, b));
}
