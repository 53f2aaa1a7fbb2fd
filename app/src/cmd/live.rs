//! `baro-top live`: the dashboard on a live decode session (or, with `--synthetic`, on
//! generated telemetry). The session decodes until quit (the sequence restarts when the
//! context is full: the engine does that), a lossy sink feeds the dashboard, the keys steer
//! the session through [`SessionControl`] (every reply or error goes to the dashboard's log),
//! and `--metrics ADDR` serves a second lossy sink. With stdout not a terminal it prints one
//! line per pass instead (said once on stderr). The exit status comes from the engine's
//! outcome: 0 clean, 1 a failed pass or verdict, 2 an error.

use std::process::ExitCode;
use std::sync::Arc;

use crate::ui;
use anyhow::Context;
use baro_engine::model::Model;
use baro_engine::session::{Check, Command, Outcome, Reply, Session, SessionBuilder, SinkKind};
use baro_engine::telemetry::{control, EndReason, Telemetry};
use clap::Args;
use crossbeam_channel::{unbounded, Receiver, Sender};
use ui::action::{Control, Note};
use ui::state::{Meta, Severity};

use crate::args::{DispatchArg, GpuArgs, ModelArgs, SessionArgs};

/// `baro-top live` options.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// Feed the dashboard from the synthetic producer (no GPU, no model).
    #[arg(long)]
    pub synthetic: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Dispatch mode at the start [default: mega]; `m` switches it live.
    #[arg(long, value_enum, alias = "mode")]
    pub dispatch: Option<DispatchArg>,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Layout preset name (default, flame, compact) or a layout file path.
    #[arg(long, default_value = "default")]
    pub layout: String,
    /// Redraws per second at most, 1..=240.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=240))]
    pub fps: u32,
    /// Draw with ASCII only (no braille, block or box glyphs).
    #[arg(long)]
    pub ascii: bool,
    /// Also serve Prometheus/OpenMetrics metrics of the session on this IP:PORT (port 0: any
    /// free port, printed at start).
    #[arg(long, value_name = "ADDR", value_parser = crate::validate::addr)]
    pub metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Which passes the shadow CPU reference judges: auto, all, off, or N (the first N
    /// positions of every sequence) [default: auto].
    #[arg(long, value_parser = crate::validate::check)]
    pub check: Option<baro_engine::session::Check>,
    /// Turn the in-kernel event ring off (stage timings and the flame chart disappear; the
    /// fail word stays).
    #[arg(long)]
    pub no_instrument: bool,
    /// Synthetic: passes per second, 0.1..=10000 [default: 60].
    #[arg(long, value_parser = crate::validate::rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Stop after N passes (default: decode until quit).
    #[arg(long, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub passes: Option<u64>,
    /// Where `r` writes recordings (`baro-<UTC yyyymmdd-hhmmss>.baro`) [default: the current
    /// directory]; checked for writing at startup.
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<std::path::PathBuf>,
    /// Test hook (not for use): the producer panics after forwarding N passes, 1..=1,000,000,
    /// so a test can see a producer panic restore the terminal, finish a recording and exit
    /// 101.
    #[arg(long, hide = true, value_parser = crate::validate::inject_panic_after)]
    pub inject_producer_panic: Option<u64>,
}

/// Unread messages a dashboard or metrics sink holds before frames are dropped for it.
const SINK_CAPACITY: usize = 256;

/// Steers a running [`Session`] from the dashboard. Requests go to a worker thread that sends
/// each command and waits for its reply (a command may take a pass, a rebuild much longer),
/// so the UI never blocks; each reply or error comes back as a [`Note`] for the log.
pub struct SessionControl<'s> {
    session: &'s Session,
    tx: Sender<Command>,
    notes: Receiver<Note>,
    note_tx: Sender<Note>,
    recorder: Option<super::live_record::LiveRecorder>,
}

impl<'s> SessionControl<'s> {
    /// A control for `session` and its worker, on `scope`. The worker ends when the control
    /// is dropped (after the command in flight).
    pub fn new<'scope>(
        session: &'s Session,
        scope: &'scope std::thread::Scope<'scope, '_>,
    ) -> anyhow::Result<SessionControl<'s>>
    where
        's: 'scope,
    {
        let (tx, rx) = unbounded::<Command>();
        let (ntx, notes) = unbounded::<Note>();
        let note_tx = ntx.clone();
        std::thread::Builder::new()
            .name("baro-control".into())
            .spawn_scoped(scope, move || {
                for cmd in rx {
                    let what = describe(&cmd);
                    let r = session.command(cmd);
                    if ntx.send(note_of(&what, r)).is_err() {
                        break;
                    }
                }
            })
            .context("starting the control thread")?;
        Ok(SessionControl {
            session,
            tx,
            notes,
            note_tx,
            recorder: None,
        })
    }

    /// Let `r` record the session to files in `dir` (their outcome goes to the log).
    pub fn with_recorder(mut self, dir: std::path::PathBuf, quant: Option<String>) -> Self {
        self.recorder = Some(super::live_record::LiveRecorder::new(
            dir,
            quant,
            self.note_tx.clone(),
        ));
        self
    }

    /// The recordings' writers (joined once the session has ended).
    pub fn into_writers(self) -> Option<super::live_record::Writers> {
        self.recorder.map(|r| r.into_writers())
    }

    fn to_worker(&self, cmd: Command) {
        // The worker lives as long as this control; a send fails only if it panicked.
        let _ = self.tx.send(cmd);
    }
}

impl Control for SessionControl<'_> {
    fn send(&self, c: control::Command) {
        match c {
            // Directly, not through the worker: a rebuild in flight must not delay quitting.
            control::Command::Stop => self.session.stop(),
            c => match Command::try_from(c) {
                Ok(cmd) => self.to_worker(cmd),
                Err(c) => {
                    let _ = self.note_tx.send(Note {
                        sev: Severity::Warn,
                        text: format!("{c}: only a replay can do that (baro-top replay FILE)"),
                    });
                }
            },
        }
    }
    fn notes(&self) -> Option<Receiver<Note>> {
        Some(self.notes.clone())
    }
    fn toggle_record(&self) -> bool {
        match &self.recorder {
            Some(r) => {
                r.toggle(self.session);
                true
            }
            None => false,
        }
    }
    fn recording(&self) -> Option<ui::action::RecStatus> {
        self.recorder.as_ref().and_then(|r| r.status())
    }
}

/// What a command asks, for its log line.
fn describe(c: &Command) -> String {
    match c {
        Command::Pause => "pause".into(),
        Command::Resume => "resume".into(),
        Command::Step => "step".into(),
        Command::Stop => "stop".into(),
        Command::SetDispatch(d) => format!("switching dispatch to {d}"),
        Command::SetGrid(g) => format!(
            "changing the grid to {}",
            g.map_or("the default".into(), |g| g.to_string())
        ),
        Command::Restart => "restart".into(),
        Command::LoadModel(m) => format!("loading {}", m.source),
    }
}

/// The log line of a command's reply or error.
pub fn note_of(what: &str, r: baro_engine::Result<Reply>) -> Note {
    let info = |text: String| Note {
        sev: Severity::Info,
        text,
    };
    match r {
        Ok(Reply::Paused { passes }) => info(format!("paused after {passes} passes")),
        Ok(Reply::Resumed) => info("resumed".into()),
        Ok(Reply::Stepped { pass }) => info(format!("stepped: pass {pass}")),
        Ok(Reply::Stopping) => info("stopping".into()),
        Ok(Reply::Rebuilt(d)) => info(format!(
            "dispatch switched to {} (grid {} x {} lanes); the sequence restarts",
            d.dispatch, d.grid, d.wg_size
        )),
        Ok(Reply::Restarted { next_pass }) => {
            info(format!("sequence restarts at pass {next_pass}"))
        }
        Err(e) => Note {
            sev: Severity::Error,
            text: format!("{what} failed: {e}"),
        },
    }
}

/// The exit status of a run: 0 clean, 1 a failed pass or verdict, 2 an engine error.
pub fn exit_code(o: &Outcome) -> u8 {
    match o.reason {
        EndReason::Error { .. } | EndReason::DeviceLost => 2,
        // The dashboard or the pipe went away: the run ended as its user asked.
        EndReason::ConsumerGone if o.failed_passes == 0 && o.failed_checks == 0 => 0,
        _ if o.clean() => 0,
        _ => 1,
    }
}

/// The weights' quantisation: the types of the layer matrices (`Q4_0`, or `Q4_0+Q6_K` when
/// mixed), else the embedding's.
pub(crate) fn quant_name(m: &Model) -> String {
    let mut names: Vec<String> = vec![];
    for l in &m.weights.layers {
        for t in [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down] {
            let n = t.ty.to_string();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    if names.is_empty() {
        names.push(m.weights.token_embd.ty.to_string());
    }
    names.join("+")
}

/// Token id → its bytes, as run.c's decode gives them (mid-sequence: leading spaces kept). A
/// GGUF vocabulary's token gives its UTF-8 bytes (byte-level BPE and `<0xXX>` bytes decoded,
/// control tokens empty), which may be part of a character: the tokens panel and the
/// headless lines join them in stream order (`ui::text::TokenStream`).
pub(crate) fn token_decoder(m: &Model) -> ui::state::Decoder {
    let tok = m.tokenizer.clone();
    let prev = tok.eos_id();
    Arc::new(move |id| {
        if tok.is_llama_cpp() {
            return tok.decode(prev, id).to_vec();
        }
        baro_engine::tokenizer::printable(tok.decode(prev, id))
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    })
}

/// Passes per second of `live --synthetic` and `serve --synthetic` without `--rate`.
pub const SYNTHETIC_RATE: f64 = 60.0;

/// Flags that only the synthetic producer honours (refused on the engine).
fn synthetic_only(a: &LiveArgs) -> Vec<&'static str> {
    [("--rate", a.rate.is_some())]
        .into_iter()
        .filter_map(|(f, g)| g.then_some(f))
        .collect()
}

/// Flags that only the engine honours (refused with `--synthetic`).
fn engine_only(a: &LiveArgs) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = [
        ("--model", a.model.model.is_some()),
        ("--tokenizer", a.model.tokenizer.is_some()),
        ("--metrics", a.metrics.is_some()),
    ]
    .into_iter()
    .chain(a.session.given())
    .chain([
        ("--check", a.check.is_some()),
        ("--no-instrument", a.no_instrument),
        ("--record-dir", a.record_dir.is_some()),
    ])
    .filter_map(|(f, g)| g.then_some(f))
    .collect();
    v.extend(a.gpu.given().into_iter().filter(|f| *f != "--grid"));
    v
}

fn dashboard_options(a: &LiveArgs) -> anyhow::Result<ui::app::Options> {
    let layout = ui::layout::Layout::load(&a.layout)?;
    let depth = ui::theme::ColorDepth::detect(|k| std::env::var(k).ok());
    Ok(ui::app::Options {
        layout,
        fps: a.fps,
        theme: ui::theme::Theme::new(depth, a.ascii),
    })
}

/// Test hook (`--inject-producer-panic N`): a thread between the producer and the dashboard
/// that forwards `n` frames and then panics, as a producer with a bug would.
fn panicking_relay(
    rx: crossbeam_channel::Receiver<baro_telemetry::Telemetry>,
    n: u64,
) -> (
    crossbeam_channel::Receiver<baro_telemetry::Telemetry>,
    std::thread::JoinHandle<()>,
) {
    let (tx, out) = crossbeam_channel::bounded(rx.capacity().unwrap_or(256).max(1));
    let h = std::thread::Builder::new()
        .name("baro-producer-relay".into())
        .spawn(move || {
            let mut frames = 0;
            for m in rx {
                if matches!(m, baro_telemetry::Telemetry::Frame(_)) {
                    frames += 1;
                }
                if tx.send(m).is_err() {
                    return;
                }
                if frames >= n {
                    panic!("--inject-producer-panic: the producer panics after {n} passes");
                }
            }
        })
        .unwrap_or_else(|e| panic!("cannot start the relay thread: {e}"));
    (out, h)
}

/// `baro-top live --synthetic`: the dashboard on generated telemetry, no GPU.
pub fn synthetic(a: LiveArgs) -> anyhow::Result<ExitCode> {
    use ui::synthetic::{self, Synth, SynthConfig};
    if let Some(f) = engine_only(&a).first() {
        match *f {
            "--model" => anyhow::bail!(
                "--model is not honoured with --synthetic (the synthetic producer has no model)"
            ),
            "--metrics" => anyhow::bail!(
                "--metrics is not honoured with --synthetic: use `baro-top serve --metrics ADDR --synthetic`"
            ),
            f => anyhow::bail!(
                "{f} is not honoured with --synthetic (it applies to the live engine only)"
            ),
        }
    }
    if let Some(g) = a
        .gpu
        .grid
        .filter(|&g| g > crate::validate::MAX_SYNTHETIC_GRID)
    {
        anyhow::bail!(
            "--grid {g} with --synthetic: the synthetic producer draws at most {} workgroups (each pass holds every workgroup's spans)",
            crate::validate::MAX_SYNTHETIC_GRID
        );
    }
    let opts = dashboard_options(&a)?;
    let cfg = SynthConfig {
        grid: a.gpu.grid.unwrap_or(132),
        dispatch: a.dispatch.unwrap_or(DispatchArg::Mega).dispatch(),
        rate_hz: a.rate.unwrap_or(SYNTHETIC_RATE),
        passes: a.passes,
        ..Default::default()
    };
    let meta = synthetic::meta(Synth::new(cfg.clone()).details());
    let (rx, ctl, producer) = synthetic::spawn(cfg);
    let (rx, relay) = match a.inject_producer_panic {
        Some(n) => {
            let (rx, h) = panicking_relay(rx, n);
            (rx, Some(h))
        }
        None => (rx, None),
    };
    let r = ui::app::run_or_headless(rx, &ctl, meta, opts);
    let _ = producer.join();
    if let Some(h) = relay {
        let _ = h.join();
    }
    r.map(|()| ExitCode::SUCCESS)
}

/// `baro-top live`: the dashboard on a live decode session.
pub fn run(a: LiveArgs) -> anyhow::Result<ExitCode> {
    if let Some(f) = synthetic_only(&a).first() {
        anyhow::bail!(
            "{f} is only honoured with --synthetic (the engine decodes as fast as it can)"
        );
    }
    let opts = dashboard_options(&a)?;
    let record_dir = a.record_dir.clone().unwrap_or_else(|| ".".into());
    super::live_record::check_dir(&record_dir)?;
    let model = super::load_model(&a.model)?;
    let positions = a.session.positions(model.config.seq_len)?;
    let (temp, topp) = a.session.temp_topp();
    let seed = crate::validate::resolve_seed(a.session.seed_or_default());
    if a.session.seed == Some(0) && temp > 0.0 {
        note!("live: seed 0 = the current time: seed {seed} (pass -s {seed} to repeat this run)");
    }
    let dev = super::open_gpu(&a.gpu)?;
    let dispatch = a.dispatch.unwrap_or(DispatchArg::Mega).dispatch();
    let quant = quant_name(&model);
    let decoder = token_decoder(&model);
    let mut dopts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    dopts.instrument = !a.no_instrument;
    let mut b = SessionBuilder::new(&dev, model, dopts)
        .passes(a.passes)
        .prompt(a.session.prompt_bytes())
        .sampling(temp, topp, seed)
        .check(a.check.unwrap_or(Check::Auto))
        // A monitor keeps decoding after a failed pass (shown, logged, and counted in the
        // exit status); the sequence restarts.
        .stop_on_fail(false)
        // Not a timing run: no lock taken, but a timing run holding it is shown.
        .host_lock(
            baro_engine::sensors::host_lock::lock_path(
                &baro_engine::sensors::host_lock::default_dir(),
                &dev.info().name,
            ),
            None,
        );
    let rx = b.subscribe(SinkKind::Lossy {
        capacity: SINK_CAPACITY,
    });
    let metrics_rx = a.metrics.map(|_| {
        b.subscribe(SinkKind::Lossy {
            capacity: SINK_CAPACITY,
        })
    });
    let session = b.spawn().context("starting the decode session")?;
    let (rx, relay) = match a.inject_producer_panic {
        Some(n) => {
            let (rx, h) = panicking_relay(rx, n);
            (rx, Some(h))
        }
        None => (rx, None),
    };
    let server = match (a.metrics, metrics_rx) {
        (Some(addr), Some(mrx)) => {
            let s = crate::metrics::serve(addr, mrx)?;
            note!("live: metrics on http://{}/metrics", s.local_addr());
            Some(s)
        }
        _ => None,
    };
    // The run's stage list (a late sink gets the current Start at once).
    let details = match session
        .subscribe(SinkKind::Lossy { capacity: 1 })
        .recv_timeout(std::time::Duration::from_secs(5))
    {
        Ok(Telemetry::Start(d)) => Some(d),
        _ => None,
    };
    let meta = Meta {
        quant: Some(quant.clone()),
        peak_bytes_per_s: None,
        weight_bytes: details.as_ref().map_or(vec![], |d| {
            d.stages.iter().map(|s| s.weight_bytes).collect()
        }),
        decoder: Some(decoder),
        ..Default::default()
    };
    let (shown, writers) = std::thread::scope(|scope| {
        let ctl = match SessionControl::new(&session, scope) {
            Ok(c) => c.with_recorder(record_dir, Some(quant)),
            Err(e) => return (Err(e), None),
        };
        let r = ui::app::run_or_headless(rx, &ctl, meta, opts);
        if r.is_err() {
            ctl.stop();
        }
        (r, ctl.into_writers())
    });
    // Whatever happened to the display, the session is stopped (if it has not ended) and
    // waited for: the exit status is the engine's.
    session.stop();
    let outcome = session.wait().context("decode session")?;
    drop(server);
    if let Some(h) = relay {
        let _ = h.join();
    }
    // A recording still running takes everything up to the session's End, then its footer.
    for r in writers.map(|w| w.join()).unwrap_or_default() {
        match r {
            Ok(s) => note!("live: {}", s.line()),
            Err(e) => note!("live: {e:#}"),
        }
    }
    shown?;
    if outcome.failed_passes > 0 || outcome.failed_checks > 0 {
        note!(
            "live: {} failed passes, {} of {} checked passes failed against the CPU reference",
            outcome.failed_passes,
            outcome.failed_checks,
            outcome.checked
        );
    }
    if !matches!(
        outcome.reason,
        EndReason::Completed | EndReason::Stopped | EndReason::ConsumerGone
    ) {
        note!("live: the run ended: {}", outcome.reason);
    }
    Ok(ExitCode::from(exit_code(&outcome)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baro_engine::device::{DecoderOptions, Device};
    use baro_engine::telemetry::Dispatch;
    use baro_telemetry::recording::Reader;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    fn outcome(reason: EndReason, failed_passes: u64, failed_checks: u64) -> Outcome {
        Outcome {
            reason,
            passes: 10,
            failed_passes,
            failed_checks,
            checked: 10,
        }
    }

    #[test]
    fn exit_status_is_0_clean_1_failed_pass_or_verdict_2_engine_error() {
        assert_eq!(exit_code(&outcome(EndReason::Stopped, 0, 0)), 0);
        assert_eq!(exit_code(&outcome(EndReason::Completed, 0, 0)), 0);
        assert_eq!(exit_code(&outcome(EndReason::ConsumerGone, 0, 0)), 0);
        assert_eq!(exit_code(&outcome(EndReason::Stopped, 1, 0)), 1);
        assert_eq!(exit_code(&outcome(EndReason::Stopped, 0, 1)), 1);
        assert_eq!(exit_code(&outcome(EndReason::ConsumerGone, 0, 2)), 1);
        assert_eq!(exit_code(&outcome(EndReason::Watchdog, 1, 0)), 1);
        let err = EndReason::Error {
            message: "x".into(),
        };
        assert_eq!(exit_code(&outcome(err, 0, 0)), 2);
        assert_eq!(exit_code(&outcome(EndReason::DeviceLost, 0, 0)), 2);
    }

    #[test]
    fn a_commands_error_is_an_error_line_naming_the_request() {
        let what = describe(&Command::SetDispatch(Dispatch::Multi));
        let n = note_of(
            &what,
            Err(baro_engine::Error::EngineThread(
                "the session has ended".into(),
            )),
        );
        assert_eq!(n.sev, Severity::Error);
        assert!(
            n.text.starts_with("switching dispatch to multi failed: ")
                && n.text.contains("the session has ended"),
            "{}",
            n.text
        );
        let n = note_of("pause", Ok(Reply::Paused { passes: 7 }));
        assert_eq!(
            (n.sev, n.text.as_str()),
            (Severity::Info, "paused after 7 passes")
        );
    }

    #[test]
    fn the_embedded_models_meta_names_its_quant_and_decodes_tokens_with_spaces() {
        let m = Model::embedded().unwrap();
        assert_eq!(quant_name(&m), "f32");
        let d = token_decoder(&m);
        let once = m.tokenizer.encode(b"Once upon", false, false);
        let text: String = once
            .iter()
            .map(|&t| String::from_utf8_lossy(&d(t)).into_owned())
            .collect();
        assert_eq!(text.trim_start(), "Once upon");
    }

    // `r` on a live session: SessionControl with the recorder of `live_record`.

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("baro-live-rec-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Wait for `n` frames on `rx` (other messages skipped).
    fn frames(rx: &Receiver<Telemetry>, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut got = 0;
        while got < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Telemetry::Frame(_) = rx.recv_timeout(left).expect("frames keep coming") {
                got += 1;
            }
        }
    }

    /// Wait for `n` frames on the UI sink `rx` that the recording started just before also
    /// gets. The session emits each message to every sink under one lock, and a recording
    /// subscribes under it too: once `toggle_record` has returned, what the UI sink already
    /// holds was emitted before the recording existed (dropped here), and every frame after
    /// it goes to the recording as well. Counting the UI's backlog instead would let a slow
    /// test thread stop a recording that has no frame yet.
    fn frames_recorded(rx: &Receiver<Telemetry>, n: usize) {
        rx.try_iter().for_each(drop);
        frames(rx, n);
    }

    fn session(dev: &Device) -> (Session, Receiver<Telemetry>) {
        let model = Model::embedded().unwrap();
        let o = DecoderOptions {
            dispatch: Dispatch::Mega,
            instrument: true,
            max_seq: 32,
            ..Default::default()
        };
        let mut b = SessionBuilder::new(dev, model, o)
            .check(Check::Off)
            .stop_on_fail(false);
        let ui = b.subscribe(SinkKind::Lossy { capacity: 1 << 16 });
        (b.spawn().unwrap(), ui)
    }

    #[test]
    fn r_records_the_live_session_until_r_again_and_the_file_replays_its_frames_and_run() {
        let dev = Device::open(None).expect("a Vulkan device (lavapipe in CI)");
        let dir = temp_dir("toggle");
        let (s, ui) = session(&dev);
        let start = match ui.recv_timeout(Duration::from_secs(60)).unwrap() {
            Telemetry::Start(d) => d,
            other => panic!("first message {other:?}"),
        };
        let (summary, shown) = std::thread::scope(|scope| {
            let ctl = SessionControl::new(&s, scope)
                .unwrap()
                .with_recorder(dir.clone(), Some("f32".into()));
            assert!(ctl.recording().is_none());
            assert!(ctl.toggle_record());
            let shown = ctl.recording().expect("recording");
            frames_recorded(&ui, 5);
            assert!(ctl.toggle_record());
            assert!(ctl.recording().is_none(), "stopped");
            let notes = ctl.notes().unwrap();
            let mut w = ctl.into_writers().unwrap().join();
            assert_eq!(w.len(), 1);
            let sum = w.remove(0).unwrap();
            let texts: Vec<String> = notes.try_iter().map(|n| n.text).collect();
            assert!(
                texts.iter().any(|t| t.starts_with("recording to "))
                    && texts
                        .iter()
                        .any(|t| t == &sum.line() && t.contains(" passes")),
                "{texts:?}"
            );
            (sum, shown)
        });
        s.stop();
        s.wait().unwrap();
        assert!(summary.passes >= 1, "{summary:?}");
        assert_eq!(shown.file, summary.path.display().to_string());
        let name = summary
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            name.starts_with("baro-") && name.ends_with(".baro"),
            "{name}"
        );
        let mut r = Reader::open(&summary.path).unwrap();
        assert_eq!(r.header().run, start, "the run details");
        assert_eq!(r.header().quant.as_deref(), Some("f32"));
        let msgs: Vec<Telemetry> = r.by_ref().map(|m| m.unwrap()).collect();
        assert!(r.finished(), "the footer was written");
        let n = msgs
            .iter()
            .filter(|m| matches!(m, Telemetry::Frame(_)))
            .count();
        assert_eq!(n as u64, summary.passes);
        assert!(matches!(msgs[0], Telemetry::Start(_)));
        assert_eq!(
            summary.bytes,
            std::fs::metadata(&summary.path).unwrap().len()
        );
    }

    #[test]
    fn quitting_while_recording_finishes_the_file_up_to_the_sessions_end() {
        let dev = Device::open(None).expect("a Vulkan device (lavapipe in CI)");
        let dir = temp_dir("quit");
        let (s, ui) = session(&dev);
        let writers = std::thread::scope(|scope| {
            let ctl = SessionControl::new(&s, scope)
                .unwrap()
                .with_recorder(dir.clone(), None);
            assert!(ctl.toggle_record());
            frames_recorded(&ui, 3);
            // What quitting does: stop the session while the recording runs.
            ctl.stop();
            ctl.into_writers().unwrap()
        });
        let outcome = s.wait().unwrap();
        let sum = writers.join().remove(0).unwrap();
        let mut r = Reader::open(&sum.path).unwrap();
        let msgs: Vec<Telemetry> = r.by_ref().map(|m| m.unwrap()).collect();
        assert!(r.finished(), "the footer was written");
        match msgs.last() {
            Some(Telemetry::End { passes, .. }) => assert_eq!(*passes, outcome.passes),
            other => panic!("last message {other:?}"),
        }
        assert!(sum.passes >= 3, "{sum:?}");
    }
}
