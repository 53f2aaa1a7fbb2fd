//! `cargo bench -p baro-top --bench ui`: the dashboard's budget with synthetic telemetry of
//! 1,000 workgroups × ~200 stages per pass: ingest into the UI state (target ≥ 1 M spans/s on
//! one core) and whole-frame render p99 (target ≤ 16 ms) at 200×60 and 400×100.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use baro_telemetry::Telemetry;
use baro_top_ui::keymap::Keymap;
use baro_top_ui::layout::Layout;
use baro_top_ui::panels::Ctx;
use baro_top_ui::screen::Screen;
use baro_top_ui::synthetic::{self, Synth, SynthConfig};
use baro_top_ui::theme::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// CPU time of this thread, ms: the machine is shared, and the budget is per core.
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn main() {
    let cfg = SynthConfig {
        grid: 1000,
        layers: 28,
        fail_every: Some(50),
        rate_hz: 0.0,
        ..Default::default()
    };
    let mut synth = Synth::new(cfg);
    let details = synth.details().clone();
    let t = Instant::now();
    let frames: Vec<_> = (0..24).map(|_| synth.frame()).collect();
    let spans_per = frames[0].spans.stages() as u64 * frames[0].spans.grid() as u64;
    println!(
        "synthetic: {} stages × 1000 wg = {spans_per} spans/pass ({:.1} ms to generate each)",
        details.stages.len(),
        t.elapsed().as_secs_f64() * 1e3 / 24.0
    );

    let layout = Layout::default_preset();
    let mut st = baro_top_ui::app::new_state(synthetic::meta(&details), &layout);
    st.live.ingest(Telemetry::Start(details));
    // Ingest: clones made outside the timed part.
    let (mut spans, mut secs) = (0u64, 0f64);
    for _round in 0..5 {
        let batch: Vec<_> = frames
            .iter()
            .map(|f| Telemetry::Frame(Box::new(f.clone())))
            .collect();
        let t = cpu_ms();
        for m in batch {
            st.live.ingest(m);
        }
        secs += (cpu_ms() - t) / 1e3;
        spans += spans_per * frames.len() as u64;
    }
    println!(
        "ingest (thread CPU time, one core): {:.1} M spans/s ({:.3} ms per pass)",
        spans as f64 / secs / 1e6,
        secs * 1e3 / (5.0 * frames.len() as f64)
    );

    let keys = Keymap::default();
    let theme = Theme::default();
    if std::env::var_os("BARO_BENCH_PANELS").is_some() {
        st.prepare();
        per_panel(&st, &theme, &keys);
    }
    for (w, h) in [(200u16, 60u16), (400, 100)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut times = vec![];
        let mut prep = vec![];
        let mut wall = vec![];
        for i in 0..120 {
            // A new pass before every frame: the derived rows are recomputed each time.
            st.live
                .ingest(Telemetry::Frame(Box::new(frames[i % frames.len()].clone())));
            let (t, c) = (Instant::now(), cpu_ms());
            st.prepare();
            prep.push(cpu_ms() - c);
            let ctx = Ctx {
                s: &st,
                theme: &theme,
                keys: &keys,
            };
            let screen = Screen {
                ctx: &ctx,
                layout: &layout,
            };
            term.draw(|f| f.render_widget(&screen, f.area())).unwrap();
            times.push(cpu_ms() - c);
            wall.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        wall.sort_by(f64::total_cmp);
        prep.sort_by(f64::total_cmp);
        println!(
            "  of which prepare (derived rows): p50 {:.2} ms p99 {:.2} ms",
            prep[prep.len() / 2],
            prep[prep.len() * 99 / 100]
        );
        let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        let pw = |q: f64| wall[((wall.len() - 1) as f64 * q) as usize];
        println!(
            "  wall time on this (shared) machine: p50 {:.2} ms p99 {:.2} ms",
            pw(0.5),
            pw(0.99)
        );
        println!(
            "render {w}×{h} (thread CPU time): p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
            p(0.5),
            p(0.99),
            p(1.0)
        );
    }
}

#[allow(dead_code)]
fn per_panel(st: &baro_top_ui::view::UiState, theme: &Theme, keys: &Keymap) {
    use baro_top_ui::panels::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::Widget;
    let ctx = Ctx { s: st, theme, keys };
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
