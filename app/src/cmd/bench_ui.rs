//! `baro-top bench ui`: what the dashboard costs.
//!
//! Without `--live`: ingest and render of the dashboard on synthetic telemetry (baro-ui's
//! [`crate::ui::bench`], the same code as `cargo bench -p baro-ui --bench ui`), p50/p99/max
//! render ms per terminal size and ingest spans/s.
//!
//! With `--live`: a live decode session, alternating (ABBA order, `--rounds` rounds of
//! `--seconds` per arm) between the dashboard ingesting every frame and rendering at `--fps`
//! into an off-screen backend, and no dashboard (frames drained and dropped). Per arm: tokens
//! per second (from the pass numbers and arrival times of the frames received; the sink is
//! lossy, so a slow consumer cannot hide passes) and the share of one core the UI thread used
//! (its CPU time over wall time). This answers "does the dashboard slow the decode".

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use baro_engine::session::{Check, SessionBuilder, SinkKind};
use baro_engine::telemetry::Telemetry;
use clap::Args;
use crossbeam_channel::RecvTimeoutError;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::args::{DispatchArg, GpuArgs, ModelArgs};
use crate::ui::bench::{self, thread_cpu_ms, Config};

/// `baro-top bench ui` options.
#[derive(Args, Debug)]
pub struct UiBenchArgs {
    /// Terminal size COLSxROWS, repeatable [default: 200x60 and 400x100; with --live one
    /// size, the off-screen terminal, default 200x60].
    #[arg(long = "size", value_name = "WxH", value_parser = parse_size)]
    pub sizes: Vec<(u16, u16)>,
    /// Frames rendered per size, each after a new pass (and as many unchanged redraws), at
    /// least 1 [default: 120].
    #[arg(long, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub frames: Option<u64>,
    /// Workgroups of the synthetic grid, 1..=4096 [default: 1000].
    #[arg(long, value_parser = crate::validate::synthetic_grid, allow_negative_numbers = true)]
    pub workgroups: Option<u32>,
    /// Stages of the synthetic program, at least 9; rounded up to whole layers (7 stages
    /// each, plus head and argmax) [default: 198].
    #[arg(long, value_parser = parse_stages, allow_negative_numbers = true)]
    pub stages: Option<u32>,
    /// Measure on a live decode session instead: dashboard vs no dashboard, alternating.
    #[arg(long)]
    pub live: bool,
    /// --live: seconds per arm and round, > 0 and at most 600 [default: 3].
    #[arg(long, value_parser = parse_seconds, allow_negative_numbers = true)]
    pub seconds: Option<f64>,
    /// --live: rounds (each runs both arms; the order alternates), at least 1 [default: 4].
    #[arg(long, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub rounds: Option<u64>,
    /// --live: dashboard redraws per second, 1..=240 [default: 30].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=240))]
    pub fps: Option<u32>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// --live: dispatch mode [default: mega].
    #[arg(long, value_enum)]
    pub dispatch: Option<DispatchArg>,
    /// --live: which passes the shadow CPU reference judges: auto, all, off, or N [default:
    /// auto, as `live`].
    #[arg(long, value_parser = crate::validate::check)]
    pub check: Option<Check>,
    /// --live: turn the in-kernel event ring off (no spans: the flame chart is empty).
    #[arg(long)]
    pub no_instrument: bool,
    /// --live: positions in the KV cache [default: 256, or the model's context if shorter].
    #[arg(long, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
    /// --live: allow a CPU device (lavapipe); the decode then competes with the UI for cores.
    #[arg(long)]
    pub allow_cpu: bool,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// `--size`: `COLSxROWS`, each 1..=1000.
fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let bad =
        || format!("{s:?} is not a terminal size: want COLSxROWS, e.g. 200x60, each 1..=1000");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u16, u16) = (
        w.trim().parse().map_err(|_| bad())?,
        h.trim().parse().map_err(|_| bad())?,
    );
    if !(1..=1000).contains(&w) || !(1..=1000).contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

/// `--stages`: at least one layer's worth (9).
fn parse_stages(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (9..=100_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: the synthetic program has 7 stages per layer plus head and argmax, so 9..=100000"
        )),
    }
}

/// `--seconds`: a finite number in (0, 600].
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 600.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds above 0 and at most 600"
        )),
    }
}

pub fn run(a: UiBenchArgs) -> anyhow::Result<ExitCode> {
    if a.live {
        live(a)
    } else {
        synthetic(a)
    }
}

/// Flags of `--live` given without it, or flags of the synthetic measurement given with it.
fn misplaced(a: &UiBenchArgs) -> Vec<&'static str> {
    let live_only = [
        ("--seconds", a.seconds.is_some()),
        ("--rounds", a.rounds.is_some()),
        ("--fps", a.fps.is_some()),
        ("--model", a.model.model.is_some()),
        ("--tokenizer", a.model.tokenizer.is_some()),
        ("--dispatch", a.dispatch.is_some()),
        ("--check", a.check.is_some()),
        ("--no-instrument", a.no_instrument),
        ("--ctx", a.ctx.is_some()),
        ("--allow-cpu", a.allow_cpu),
    ];
    let synthetic_only = [
        ("--frames", a.frames.is_some()),
        ("--workgroups", a.workgroups.is_some()),
        ("--stages", a.stages.is_some()),
    ];
    let mut v: Vec<&'static str> = if a.live {
        synthetic_only.iter()
    } else {
        live_only.iter()
    }
    .filter_map(|&(f, g)| g.then_some(f))
    .collect();
    if !a.live {
        v.extend(a.gpu.given());
    }
    v
}

fn synthetic(a: UiBenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(f) = misplaced(&a).first() {
        bail!("{f} applies to `bench ui --live` only (the synthetic measurement has no model or device)");
    }
    let mut cfg = Config::default();
    if !a.sizes.is_empty() {
        cfg.sizes = a.sizes.clone();
    }
    if let Some(n) = a.frames {
        cfg.frames = usize::try_from(n).context("--frames")?;
    }
    if let Some(w) = a.workgroups {
        cfg.workgroups = w;
    }
    if let Some(s) = a.stages {
        cfg.layers = bench::layers_for(s);
        let got = bench::stages_of(cfg.layers);
        if got != s {
            note!("bench ui: --stages {s} rounded up to {got} (whole layers of 7 stages, plus head and argmax)");
        }
    }
    let pairs = u64::from(cfg.workgroups) * bench::stages_of(cfg.layers) as u64;
    if pairs > baro_telemetry::recording::MAX_SPAN_PAIRS {
        bail!(
            "--workgroups {} × {} stages = {pairs} spans a pass: more than the {} a pass may hold (a recording's limit)",
            cfg.workgroups,
            bench::stages_of(cfg.layers),
            baro_telemetry::recording::MAX_SPAN_PAIRS
        );
    }
    let report = bench::run(&cfg);
    for l in report.lines() {
        outln!("{l}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Which arm is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arm {
    Dashboard,
    Headless,
}

/// One arm's run of `--seconds`.
#[derive(Clone, Copy, Debug)]
struct ArmRun {
    tok_s: f64,
    cpu_share: f64,
    draws: u64,
}

fn live(a: UiBenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(f) = misplaced(&a).first() {
        bail!("{f} does not apply to `bench ui --live` (it measures a live session, not synthetic telemetry)");
    }
    if a.sizes.len() > 1 {
        bail!("--size: `bench ui --live` renders one off-screen terminal; give --size once");
    }
    let size = a.sizes.first().copied().unwrap_or((200, 60));
    let secs = a.seconds.unwrap_or(3.0);
    let rounds = a.rounds.unwrap_or(4);
    let fps = a.fps.unwrap_or(30);
    let model = super::load_model(&a.model)?;
    let positions = crate::args::positions(a.ctx, model.config.seq_len)?;
    let dev = super::open_gpu(&a.gpu)?;
    if dev.info().kind.is_cpu() && !a.allow_cpu {
        bail!("{} is a CPU device: its decode competes with the dashboard for the same cores (pass --allow-cpu to measure it anyway)", dev.info().name);
    }
    let dispatch = a.dispatch.unwrap_or(DispatchArg::Mega).dispatch();
    let quant = super::live::quant_name(&model);
    let decoder = super::live::token_decoder(&model);
    let source = model.source.clone();
    let mut dopts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    dopts.instrument = !a.no_instrument;
    let mut b = SessionBuilder::new(&dev, model, dopts)
        .check(a.check.unwrap_or(Check::Auto))
        .stop_on_fail(false);
    let rx = b.subscribe(SinkKind::Lossy { capacity: 256 });
    let session = b.spawn().context("starting the decode session")?;
    let result = (|| -> anyhow::Result<Vec<(Arm, ArmRun)>> {
        // The first message is the run's Start: the stage list for the dashboard's meta.
        let start = rx
            .recv_timeout(Duration::from_secs(60))
            .context("no Start message from the session within 60 s")?;
        let Telemetry::Start(details) = &start else {
            bail!("the session's first message was not its Start");
        };
        let meta = crate::ui::state::Meta {
            quant: Some(quant),
            peak_bytes_per_s: None,
            weight_bytes: details.stages.iter().map(|s| s.weight_bytes).collect(),
            decoder: Some(decoder),
            ..Default::default()
        };
        note!(
            "bench ui --live: {source}, {}, {} grid {}, dashboard {}x{} at {fps} fps off-screen; {rounds} rounds x 2 arms x {secs} s (order alternates)",
            details.device, details.dispatch, details.grid, size.0, size.1
        );
        let layout = crate::ui::layout::Layout::default_preset();
        let keys = crate::ui::keymap::Keymap::default();
        let theme = crate::ui::theme::Theme::default();
        let mut st = crate::ui::app::new_state(meta, &layout);
        st.live.ingest(start);
        let mut term = match Terminal::new(TestBackend::new(size.0, size.1)) {
            Ok(t) => t,
            Err(e) => match e {},
        };
        let mut m = Measure {
            rx: &rx,
            st: &mut st,
            term: &mut term,
            layout: &layout,
            keys: &keys,
            theme: &theme,
            period: Duration::from_secs_f64(1.0 / fps as f64),
        };
        // Warm-up: the first passes (pipeline caches, clocks) are not measured. It lasts
        // until a second pass has arrived and `min(--seconds, 1 s)` has passed, however
        // slow the device: only a session that sends no second pass in 60 s fails here.
        m.warm_up(
            Duration::from_secs_f64(secs.min(1.0)),
            Duration::from_secs(60),
        )?;
        let mut runs = vec![];
        for r in 0..rounds {
            let order = if r % 2 == 0 {
                [Arm::Dashboard, Arm::Headless]
            } else {
                [Arm::Headless, Arm::Dashboard]
            };
            for arm in order {
                runs.push((arm, m.arm(arm, Duration::from_secs_f64(secs))?));
            }
        }
        Ok(runs)
    })();
    session.stop();
    let outcome = session.wait().context("decode session")?;
    let runs = result?;
    print_live(&runs)?;
    if outcome.failed_passes > 0 || outcome.failed_checks > 0 {
        note!(
            "bench ui --live: {} failed passes, {} of {} checked passes failed against the CPU reference",
            outcome.failed_passes,
            outcome.failed_checks,
            outcome.checked
        );
    }
    Ok(ExitCode::from(super::live::exit_code(&outcome)))
}

/// The live measurement's state.
struct Measure<'a> {
    rx: &'a crossbeam_channel::Receiver<Telemetry>,
    st: &'a mut crate::ui::view::UiState,
    term: &'a mut Terminal<TestBackend>,
    layout: &'a crate::ui::layout::Layout,
    keys: &'a crate::ui::keymap::Keymap,
    theme: &'a crate::ui::theme::Theme,
    period: Duration,
}

impl Measure<'_> {
    /// Feed the dashboard until `min` has passed and two passes have arrived; an error only
    /// when two passes do not arrive within `limit`, or the session ends.
    fn warm_up(&mut self, min: Duration, limit: Duration) -> anyhow::Result<()> {
        let t0 = Instant::now();
        let mut passes = 0u32;
        while passes < 2 || t0.elapsed() < min {
            let left = limit.saturating_sub(t0.elapsed());
            if left.is_zero() {
                bail!(
                    "the warm-up saw {passes} of 2 passes in {:.0} s: the decode is not running",
                    limit.as_secs_f64()
                );
            }
            match self.rx.recv_timeout(left) {
                Ok(Telemetry::End { reason, .. }) => {
                    bail!("the decode session ended during the warm-up: {reason}")
                }
                Ok(t) => {
                    passes += u32::from(matches!(t, Telemetry::Frame(_)));
                    self.st.live.ingest(t);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("the decode session's telemetry stopped during the warm-up")
                }
            }
        }
        Ok(())
    }

    /// Run one arm for `len`: receive every message; the dashboard arm ingests it and
    /// redraws at most every `period` when something arrived, the headless arm drops frames.
    fn arm(&mut self, arm: Arm, len: Duration) -> anyhow::Result<ArmRun> {
        let dash = arm == Arm::Dashboard;
        let t0 = Instant::now();
        let c0 = thread_cpu_ms();
        let end = t0 + len;
        let mut next_draw = t0;
        let mut dirty = false;
        // (pass, arrival) of the first and last frame received.
        let mut first: Option<(u64, Instant)> = None;
        let mut last: Option<(u64, Instant)> = None;
        let mut draws = 0u64;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            let until = if dash && dirty {
                next_draw.min(end)
            } else {
                end
            };
            match self.rx.recv_timeout(until.saturating_duration_since(now)) {
                Ok(Telemetry::Frame(f)) => {
                    let at = Instant::now();
                    first.get_or_insert((f.pass, at));
                    last = Some((f.pass, at));
                    if dash {
                        self.st.live.ingest(Telemetry::Frame(f));
                        dirty = true;
                    }
                }
                Ok(Telemetry::End { reason, .. }) => {
                    bail!("the decode session ended during the measurement: {reason}")
                }
                Ok(other) => {
                    self.st.live.ingest(other);
                    dirty |= dash;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("the decode session's telemetry stopped during the measurement")
                }
            }
            if dash && dirty && Instant::now() >= next_draw {
                self.st.prepare();
                bench::draw(self.term, self.st, self.theme, self.keys, self.layout);
                draws += 1;
                dirty = false;
                next_draw = (next_draw + self.period).max(Instant::now());
            }
        }
        let wall = t0.elapsed().as_secs_f64() * 1e3;
        let cpu = thread_cpu_ms() - c0;
        let tok_s = match (first, last) {
            (Some((p0, t0)), Some((p1, t1))) if p1 > p0 && t1 > t0 => {
                (p1 - p0) as f64 / (t1 - t0).as_secs_f64()
            }
            _ => bail!(
                "fewer than two passes arrived in {:.1} s ({arm:?} arm): nothing to measure; give more --seconds",
                len.as_secs_f64()
            ),
        };
        Ok(ArmRun {
            tok_s,
            cpu_share: cpu / wall,
            draws,
        })
    }
}

fn print_live(runs: &[(Arm, ArmRun)]) -> anyhow::Result<()> {
    let runs_of = |arm: Arm| runs.iter().filter(|r| r.0 == arm).count();
    outln!(
        "{:<10} {:>12} {:>9} {:>9} {:>14} {:>8} {:>5}",
        "arm",
        "median tok/s",
        "min",
        "max",
        "UI thread CPU",
        "draws",
        "runs"
    )?;
    let mut meds = vec![];
    for (arm, name) in [(Arm::Dashboard, "dashboard"), (Arm::Headless, "headless")] {
        let of = |f: fn(&ArmRun) -> f64| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.0 == arm)
                .map(|r| f(&r.1))
                .collect()
        };
        let tok = bench::Spread::of(&of(|r| r.tok_s));
        let lo = of(|r| r.tok_s).into_iter().fold(f64::INFINITY, f64::min);
        let cpu = bench::Spread::of(&of(|r| r.cpu_share));
        let draws: f64 = of(|r| r.draws as f64).iter().sum();
        meds.push(tok.p50);
        outln!(
            "{:<10} {:>12.1} {:>9.1} {:>9.1} {:>13.1}% {:>8} {:>5}",
            name,
            tok.p50,
            lo,
            tok.max,
            cpu.p50 * 100.0,
            draws,
            runs_of(arm)
        )?;
    }
    outln!(
        "ratio dashboard/headless of median tok/s: {:.3}",
        meds[0] / meds[1]
    )?;
    Ok(())
}
