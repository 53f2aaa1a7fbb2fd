//! The dashboard's cost on synthetic telemetry, shared by `cargo bench -p baro-ui --bench
//! ui` and `baro-top bench ui`: ingest rate into the UI state (spans/s on one core) and the
//! whole-frame render time per terminal size, both a frame after a new pass (prepare + draw,
//! the live case) and a redraw with nothing changed (what the caches make cheap). Times are
//! this thread's CPU time ([`thread_cpu_ms`]): the machine may be shared, and the budget
//! (render p99 ≤ 16 ms) is per core; wall time is reported next to it.

use std::time::Instant;

use baro_telemetry::Telemetry;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::keymap::Keymap;
use crate::layout::Layout;
use crate::panels::Ctx;
use crate::screen::Screen;
use crate::synthetic::{self, Synth, SynthConfig};
use crate::theme::Theme;
use crate::view::UiState;

/// CPU time this thread has used, ms (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Terminal sizes (columns, rows).
    pub sizes: Vec<(u16, u16)>,
    /// Frames rendered per size (each after a new pass), and as many redraws.
    pub frames: usize,
    /// Workgroups of the synthetic grid.
    pub workgroups: u32,
    /// Transformer layers of the synthetic program (7 stages each, plus head and argmax).
    pub layers: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sizes: vec![(200, 60), (400, 100)],
            frames: 120,
            workgroups: 1000,
            layers: 28,
        }
    }
}

/// Stages of the synthetic program with `layers` layers.
pub fn stages_of(layers: u32) -> u32 {
    7 * layers + 2
}

/// Layers whose program has at least `stages` stages (at least one layer).
pub fn layers_for(stages: u32) -> u32 {
    stages.saturating_sub(2).div_ceil(7).max(1)
}

/// p50, p99 and max of a sample, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank below).
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// Of `v` (NaN-free; empty gives zeros).
    pub fn of(v: &[f64]) -> Spread {
        if v.is_empty() {
            return Spread {
                p50: 0.0,
                p99: 0.0,
                max: 0.0,
            };
        }
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
        Spread {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// One terminal size's results.
#[derive(Clone, Debug)]
pub struct SizeResult {
    /// Columns, rows.
    pub size: (u16, u16),
    /// Prepare + draw after a new pass, thread CPU ms.
    pub render: Spread,
    /// The same, wall ms.
    pub render_wall: Spread,
    /// Of which prepare (derived rows), thread CPU ms.
    pub prepare: Spread,
    /// A redraw with nothing changed, thread CPU ms.
    pub redraw: Spread,
}

/// Everything measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Stages of the synthetic program.
    pub stages: u32,
    /// Workgroups.
    pub workgroups: u32,
    /// Spans per pass (stages × workgroups).
    pub spans_per_pass: u64,
    /// Ingest rate, spans per second of thread CPU time.
    pub ingest_spans_per_s: f64,
    /// Ingest time per pass, thread CPU ms.
    pub ingest_ms_per_pass: f64,
    /// Per size.
    pub sizes: Vec<SizeResult>,
}

impl Report {
    /// The report as lines of text: a header, ingest, then one table row per size.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!(
                "synthetic telemetry: {} stages x {} workgroups = {} spans/pass",
                self.stages, self.workgroups, self.spans_per_pass
            ),
            format!(
                "ingest (thread CPU time): {:.1} M spans/s ({:.3} ms per pass)",
                self.ingest_spans_per_s / 1e6,
                self.ingest_ms_per_pass
            ),
            "render = prepare + draw after a new pass; redraw = nothing changed; ms of thread CPU time (wall p50 beside)".into(),
            format!(
                "{:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10}",
                "size", "p50", "p99", "max", "wall p50", "prep p99", "redraw p50", "redraw p99"
            ),
        ];
        for s in &self.sizes {
            out.push(format!(
                "{:>9} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>10.2} {:>10.2}",
                format!("{}x{}", s.size.0, s.size.1),
                s.render.p50,
                s.render.p99,
                s.render.max,
                s.render_wall.p50,
                s.prepare.p99,
                s.redraw.p50,
                s.redraw.p99
            ));
        }
        out
    }
}

/// Distinct passes generated up front and cycled through (generating one costs more than
/// drawing it).
const DISTINCT: usize = 24;

/// Measure the dashboard (default layout and theme) on synthetic telemetry.
pub fn run(cfg: &Config) -> Report {
    let synth_cfg = SynthConfig {
        grid: cfg.workgroups.max(1),
        layers: cfg.layers.max(1),
        fail_every: Some(50),
        rate_hz: 0.0,
        ..Default::default()
    };
    let mut synth = Synth::new(synth_cfg);
    let details = synth.details().clone();
    let frames: Vec<_> = (0..DISTINCT.min(cfg.frames.max(1)))
        .map(|_| synth.frame())
        .collect();
    let spans_per = frames[0].spans.stages() as u64 * frames[0].spans.grid() as u64;

    let layout = Layout::default_preset();
    let mut st = crate::app::new_state(synthetic::meta(&details), &layout);
    st.live.ingest(Telemetry::Start(details.clone()));
    // Ingest: the messages are cloned outside the timed part.
    let (mut spans, mut ms) = (0u64, 0f64);
    let rounds = 5;
    for _ in 0..rounds {
        let batch: Vec<_> = frames
            .iter()
            .map(|f| Telemetry::Frame(Box::new(f.clone())))
            .collect();
        let t = thread_cpu_ms();
        for m in batch {
            st.live.ingest(m);
        }
        ms += thread_cpu_ms() - t;
        spans += spans_per * frames.len() as u64;
    }

    let keys = Keymap::default();
    let theme = Theme::default();
    let mut sizes = vec![];
    for &(w, h) in &cfg.sizes {
        let mut term = match Terminal::new(TestBackend::new(w, h)) {
            Ok(t) => t,
            Err(e) => match e {},
        };
        let (mut cpu, mut wall, mut prep, mut redraw) = (vec![], vec![], vec![], vec![]);
        for i in 0..cfg.frames {
            let next = frames[i % frames.len()].clone();
            st.live.ingest(Telemetry::Frame(Box::new(next)));
            let (t, c) = (Instant::now(), thread_cpu_ms());
            st.prepare();
            prep.push(thread_cpu_ms() - c);
            draw(&mut term, &st, &theme, &keys, &layout);
            cpu.push(thread_cpu_ms() - c);
            wall.push(t.elapsed().as_secs_f64() * 1e3);
            let c = thread_cpu_ms();
            st.prepare();
            draw(&mut term, &st, &theme, &keys, &layout);
            redraw.push(thread_cpu_ms() - c);
        }
        sizes.push(SizeResult {
            size: (w, h),
            render: Spread::of(&cpu),
            render_wall: Spread::of(&wall),
            prepare: Spread::of(&prep),
            redraw: Spread::of(&redraw),
        });
    }
    Report {
        stages: details.stages.len() as u32,
        workgroups: details.grid,
        spans_per_pass: spans_per,
        ingest_spans_per_s: spans as f64 / (ms / 1e3).max(1e-9),
        ingest_ms_per_pass: ms / (rounds * frames.len()) as f64,
        sizes,
    }
}

/// Draw the whole screen once into `term`.
pub fn draw(
    term: &mut Terminal<TestBackend>,
    st: &UiState,
    theme: &Theme,
    keys: &Keymap,
    layout: &Layout,
) {
    let ctx = Ctx { s: st, theme, keys };
    let screen = Screen { ctx: &ctx, layout };
    // The test backend cannot fail.
    if let Err(e) = term.draw(|f| f.render_widget(&screen, f.area())) {
        match e {}
    }
}
