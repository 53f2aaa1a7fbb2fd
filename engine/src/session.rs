//! A live decode session on its own named thread (`baro-engine`): decodes pass after pass on
//! the GPU, takes commands, and streams [`Telemetry`] to any number of sinks.
//!
//! # Life cycle
//!
//! [`SessionBuilder::spawn`] starts the thread and waits until the decoder is built: a model
//! that cannot be built fails `spawn` with its error. Every way the thread ends sends `End`
//! with its [`EndReason`] to every sink, and [`Session::wait`] returns the run's [`Outcome`]
//! (the exit status comes from the engine, not from what a consumer happened to receive).
//!
//! # Commands
//!
//! [`Session::command`] sends a [`Command`] and waits for its [`Reply`]. Commands are taken
//! between passes, so each is honoured within one pass (a pass is bounded by the decoder's
//! watchdog): pause, resume, step one pass, stop, switch the dispatch style, change the grid,
//! restart the sequence, load another model. A rebuild (dispatch, grid, model) that fails
//! leaves the running decoder in place and returns the error; one that succeeds sends a new
//! `Start` and restarts the sequence at position 0 (pass numbers keep counting).
//!
//! # Sinks
//!
//! [`Session::subscribe`] adds a sink at any time; a late sink gets the current `Start` first.
//! A [`SinkKind::Lossy`] sink (a UI) holds at most `capacity` messages: beyond that ordinary
//! frames are dropped for that sink alone and counted (`Frame::dropped`, `End::dropped` are
//! that sink's counts). A [`SinkKind::Lossless`] sink (a recorder) gets everything. For every
//! sink, messages for which [`Telemetry::must_deliver`] holds (start, end, a failed frame, a
//! failing verdict) are never dropped. The engine never blocks on a sink: channels are
//! unbounded underneath and the lossy capacity is enforced by the engine; a sink whose
//! receiver is gone is removed. When every sink that was ever added is gone the run ends
//! ([`EndReason::ConsumerGone`]).
//!
//! # Live correctness
//!
//! A shadow CPU reference (`baro-shadow` thread, [`crate::reference::CpuDecoder`]) follows the
//! GPU's token stream: for every pass in its [`CheckPlan`] the engine sends it (pass,
//! position, input token, GPU argmax); it judges the GPU's token with [`Judge`] (the gate's
//! rule) and the engine forwards each verdict as a `Telemetry::Correctness` message. Frames go
//! out without waiting for it: `check` says `pending` (a verdict follows), `skipped` (outside
//! the plan, or a failed pass) or `off`, and `check_lag` how many passes the reference is
//! behind. The token comparison restarts with every sequence (position 0). Models whose f32
//! weights exceed [`AUTO_CHECK_ALL_BYTES`] are checked on a prefix of every sequence by
//! default ([`Check::Auto`]), and `Start` says so (`RunDetails::check`).
//!
//! Decoding follows run.c's loop (prompt forced, then argmax or the seeded sampler). When the
//! context is full, the sequence restarts from the prompt: a live monitor keeps running.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use baro_telemetry::{
    CheckPlan, CheckState, ClockSync, Correctness, EndReason, HostClock, Judge, LockHolder,
    RunDetails, Telemetry,
};
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};

use crate::model::Model;
use crate::reference::CpuDecoder;
use crate::sampler::Sampler;
use crate::vulkan::{fail, DecoderOptions, Dispatch, GpuContext, VulkanDecoder};
use crate::{Error, ErrorKind, Result};

/// Passes between clock re-calibrations (drift tracking).
const RESYNC_EVERY: u64 = 256;
/// [`Check::Auto`] checks every pass of models whose weights, as f32, are at most this many
/// bytes (the f32 reference keeps up with the GPU on a small CPU), and a prefix of every
/// sequence above it.
pub const AUTO_CHECK_ALL_BYTES: u64 = 256 << 20;
/// Positions per sequence [`Check::Auto`] checks on a model above [`AUTO_CHECK_ALL_BYTES`].
pub const AUTO_CHECK_PREFIX: u32 = 8;
/// What a rebuild command (dispatch, grid, model) may take beyond one pass: uploading the
/// weights and compiling the pipeline (llvmpipe compiles at the first dispatch, which the
/// decoder does under a 600 s bound).
const REBUILD_ALLOWANCE: Duration = Duration::from_secs(600);

/// A command to a running session.
#[derive(Clone)]
pub enum Command {
    /// Stop decoding after the current pass (frames stop until resume or step).
    Pause,
    /// Decode continuously again.
    Resume,
    /// Run exactly one pass, then stay paused; the reply names the pass.
    Step,
    /// End the run ([`EndReason::Stopped`]).
    Stop,
    /// Rebuild the decoder with another dispatch style.
    SetDispatch(Dispatch),
    /// Rebuild the decoder with another grid (`None`: the device's default).
    SetGrid(Option<u32>),
    /// Restart the sequence at position 0 with the prompt.
    Restart,
    /// Rebuild the decoder (and the shadow reference) for another model.
    LoadModel(Box<Model>),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Pause => f.write_str("Pause"),
            Command::Resume => f.write_str("Resume"),
            Command::Step => f.write_str("Step"),
            Command::Stop => f.write_str("Stop"),
            Command::SetDispatch(d) => write!(f, "SetDispatch({d})"),
            Command::SetGrid(g) => write!(f, "SetGrid({g:?})"),
            Command::Restart => f.write_str("Restart"),
            Command::LoadModel(m) => write!(f, "LoadModel({})", m.source),
        }
    }
}

/// What a command did.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Paused; `passes` passes have run (the next frame, after resume or step, is that pass).
    Paused {
        /// Passes run so far.
        passes: u64,
    },
    /// Decoding again.
    Resumed,
    /// One pass ran: this one (its frame went out before the reply).
    Stepped {
        /// The pass number.
        pass: u64,
    },
    /// The run is ending; `End` follows.
    Stopping,
    /// The decoder was rebuilt; this `Start` went out and the next frame begins a sequence.
    Rebuilt(Box<RunDetails>),
    /// The sequence restarts with the next pass.
    Restarted {
        /// The next pass number.
        next_pass: u64,
    },
}

/// How a sink takes messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkKind {
    /// A UI: ordinary frames beyond `capacity` unread messages are dropped and counted.
    Lossy {
        /// Unread messages held at most (must-deliver messages may exceed it).
        capacity: usize,
    },
    /// A recorder: every message.
    Lossless,
}

/// Which passes the shadow reference checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// No shadow reference.
    Off,
    /// Every pass for models up to [`AUTO_CHECK_ALL_BYTES`] of f32 weights, else the first
    /// [`AUTO_CHECK_PREFIX`] positions of every sequence.
    Auto,
    /// This plan.
    Plan(CheckPlan),
}

/// How a run went, from the engine: the process's exit status should come from here.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Why it ended.
    pub reason: EndReason,
    /// Passes run.
    pub passes: u64,
    /// Passes whose fail word fired.
    pub failed_passes: u64,
    /// Verdicts that failed (mismatch or non-finite).
    pub failed_checks: u64,
    /// Verdicts received.
    pub checked: u64,
}

impl Outcome {
    /// The run ended as asked and nothing failed.
    pub fn clean(&self) -> bool {
        self.reason.is_success() && self.failed_passes == 0 && self.failed_checks == 0
    }
}

/// Hook applied to the shadow reference's logits before judging (tests force a mismatch or a
/// near-tie with it): `(pass, position, logits)`.
pub type ReferenceHook = Arc<dyn Fn(u64, usize, &mut [f32]) + Send + Sync>;

/// Builds a [`Session`].
pub struct SessionBuilder {
    model: Model,
    ctx: Arc<GpuContext>,
    opts: DecoderOptions,
    passes: Option<u64>,
    prompt: Vec<u8>,
    temperature: f32,
    topp: f32,
    seed: u64,
    stop_on_fail: bool,
    start_paused: bool,
    check: Check,
    near_tie: f32,
    reference_hook: Option<ReferenceHook>,
    sinks: Vec<(SinkKind, Sender<Telemetry>)>,
    host_lock: Option<(PathBuf, Option<LockHolder>)>,
}

impl SessionBuilder {
    /// A session decoding `model` on `device` with `opts`.
    pub fn new(device: &crate::device::Device, model: Model, opts: DecoderOptions) -> Self {
        SessionBuilder {
            model,
            ctx: device.context().clone(),
            opts,
            passes: None,
            prompt: vec![],
            temperature: 0.0,
            topp: 0.9,
            seed: 1,
            stop_on_fail: true,
            start_paused: false,
            check: Check::Auto,
            near_tie: baro_telemetry::judge::NEAR_TIE,
            reference_hook: None,
            sinks: vec![],
            host_lock: None,
        }
    }
    /// Watch this GPU's host lock file: the sensors report its holder, and every pass run
    /// while another process holds it is labelled contended, naming the holder. `holder` is
    /// who held it when the caller looked (a `--no-wait` run): it labels the first passes,
    /// before the sensor thread's first sample; `None` where the caller holds it or did not
    /// look.
    pub fn host_lock(mut self, path: PathBuf, holder: Option<LockHolder>) -> Self {
        self.host_lock = Some((path, holder));
        self
    }
    /// Stop after this many passes (default: until stopped).
    pub fn passes(mut self, n: Option<u64>) -> Self {
        self.passes = n;
        self
    }
    /// Prompt text.
    pub fn prompt(mut self, p: &[u8]) -> Self {
        self.prompt = p.to_vec();
        self
    }
    /// Sampler settings (temperature 0 = greedy).
    pub fn sampling(mut self, temperature: f32, topp: f32, seed: u64) -> Self {
        self.temperature = temperature;
        self.topp = topp;
        self.seed = seed;
        self
    }
    /// Whether a failed pass ends the session (default true).
    pub fn stop_on_fail(mut self, s: bool) -> Self {
        self.stop_on_fail = s;
        self
    }
    /// Start paused: no pass runs until resume or step.
    pub fn start_paused(mut self, p: bool) -> Self {
        self.start_paused = p;
        self
    }
    /// Which passes the shadow reference checks (default [`Check::Auto`]).
    pub fn check(mut self, c: Check) -> Self {
        self.check = c;
        self
    }
    /// Near-tie threshold of the live judge (default the gate's, 1e-3).
    pub fn near_tie(mut self, t: f32) -> Self {
        self.near_tie = t;
        self
    }
    /// Test hook: perturb the reference logits before they are judged.
    #[doc(hidden)]
    pub fn reference_hook(mut self, h: ReferenceHook) -> Self {
        self.reference_hook = Some(h);
        self
    }
    /// A sink that exists before the first message (it sees `Start` like any other sink).
    pub fn subscribe(&mut self, kind: SinkKind) -> Receiver<Telemetry> {
        let (tx, rx) = unbounded();
        self.sinks.push((kind, tx));
        rx
    }

    /// The plan [`Check`] resolves to for `model`.
    fn plan(&self, model: &Model) -> Option<CheckPlan> {
        match self.check {
            Check::Off => None,
            Check::Plan(p) => Some(p),
            Check::Auto => {
                let f32_bytes: u64 = model
                    .weights
                    .tensors()
                    .iter()
                    .map(|t| (t.rows * t.cols * 4) as u64)
                    .sum();
                Some(if f32_bytes <= AUTO_CHECK_ALL_BYTES {
                    CheckPlan::All
                } else {
                    CheckPlan::Prefix {
                        positions: AUTO_CHECK_PREFIX,
                    }
                })
            }
        }
    }

    /// Build the decoder on the engine thread `baro-engine` and start decoding. Returns once
    /// the decoder is built; its error is returned here.
    pub fn spawn(mut self) -> Result<Session> {
        let shared = Arc::new(Shared::default());
        {
            let mut s = shared.lock();
            for (kind, tx) in self.sinks.drain(..) {
                s.add(kind, tx);
            }
        }
        let (cmd_tx, cmd_rx) = unbounded::<(Command, Sender<Result<Reply>>)>();
        let (ready_tx, ready_rx) = bounded::<Result<()>>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let budget = Arc::new(AtomicU64::new(0));
        let (sh, st, bu) = (shared.clone(), stop.clone(), budget.clone());
        let join = std::thread::Builder::new()
            .name("baro-engine".into())
            .spawn(move || Engine::run(self, ready_tx, cmd_rx, sh, st, bu))
            .map_err(|e| Error::EngineThread(format!("spawning the engine thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Session {
                cmd_tx,
                shared,
                stop,
                budget,
                join: Some(join),
            }),
            Ok(Err(e)) => {
                let _ = join.join();
                Err(e)
            }
            Err(_) => {
                let why = match join.join() {
                    Err(_) => "the engine thread panicked while building the decoder",
                    Ok(_) => "the engine thread ended before it was ready",
                };
                Err(Error::EngineThread(why.into()))
            }
        }
    }
}

/// A running session. Dropping it stops the run within one pass (plus the watchdog when that
/// pass hangs) and waits for the engine thread; it never waits on a hung device.
pub struct Session {
    cmd_tx: Sender<(Command, Sender<Result<Reply>>)>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    /// One pass plus the watchdog, ns (written by the engine thread).
    budget: Arc<AtomicU64>,
    join: Option<JoinHandle<Outcome>>,
}

impl Session {
    /// Add a sink. A sink added after the start gets the current `Start` first (and, once the
    /// run has ended, its `End`).
    pub fn subscribe(&self, kind: SinkKind) -> Receiver<Telemetry> {
        let (tx, rx) = unbounded();
        self.shared.lock().add(kind, tx);
        rx
    }

    /// One pass plus the watchdog: how long a plain command may take to be answered.
    pub fn pass_budget(&self) -> Duration {
        Duration::from_nanos(self.budget.load(Ordering::Relaxed))
    }

    /// Send a command and wait for its reply (at most one pass plus the watchdog; rebuilds
    /// may also take the decoder's build time).
    pub fn command(&self, cmd: Command) -> Result<Reply> {
        let rebuild = matches!(
            cmd,
            Command::SetDispatch(_) | Command::SetGrid(_) | Command::LoadModel(_)
        );
        if matches!(cmd, Command::Stop) {
            self.stop.store(true, Ordering::SeqCst);
        }
        let (tx, rx) = bounded(1);
        self.cmd_tx
            .send((cmd, tx))
            .map_err(|_| Error::EngineThread("the session has ended".into()))?;
        let limit = self.pass_budget()
            + if rebuild {
                REBUILD_ALLOWANCE
            } else {
                Duration::ZERO
            };
        match rx.recv_timeout(limit) {
            Ok(r) => r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(Error::EngineThread(format!(
                "no reply within {:.1} s (one pass plus the watchdog)",
                limit.as_secs_f64()
            ))),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(Error::EngineThread(
                "the session ended before replying".into(),
            )),
        }
    }

    /// Ask the engine to stop after the current pass (no reply awaited).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let (tx, _rx) = bounded(1);
        let _ = self.cmd_tx.send((Command::Stop, tx));
    }

    /// Whether the run has ended (the engine thread is done): [`Session::wait`] will not block.
    pub fn is_finished(&self) -> bool {
        self.join.as_ref().is_none_or(|j| j.is_finished())
    }

    /// Wait for the run to end and return its outcome.
    pub fn wait(mut self) -> Result<Outcome> {
        match self.join.take().map(|j| j.join()) {
            Some(Ok(o)) => Ok(o),
            Some(Err(_)) => Err(Error::EngineThread("the engine thread panicked".into())),
            None => Err(Error::EngineThread("already waited for".into())),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            self.stop();
            // Bounded: the engine checks the stop flag between passes, a pass is bounded by
            // its watchdog, the shadow reference is cancelled rather than awaited, and a hung
            // device is never waited on.
            let _ = j.join();
        }
    }
}

/// The sinks, and what a late sink must see first.
#[derive(Default)]
struct Shared {
    inner: Mutex<Sinks>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Sinks> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct Sinks {
    list: Vec<Sink>,
    ever: bool,
    start: Option<RunDetails>,
    end: Option<(u64, EndReason)>,
}

struct Sink {
    tx: Sender<Telemetry>,
    kind: SinkKind,
    dropped: u64,
}

impl Sinks {
    fn add(&mut self, kind: SinkKind, tx: Sender<Telemetry>) {
        self.ever = true;
        if let Some(d) = &self.start {
            let _ = tx.send(Telemetry::Start(d.clone()));
        }
        if let Some((passes, reason)) = &self.end {
            let _ = tx.send(Telemetry::End {
                passes: *passes,
                dropped: 0,
                reason: reason.clone(),
            });
            return;
        }
        self.list.push(Sink {
            tx,
            kind,
            dropped: 0,
        });
    }

    /// Send `msg` to every sink (module doc: lossy capacity, must-deliver, gone sinks).
    /// Returns false when every sink that was ever added is gone.
    fn emit(&mut self, msg: &Telemetry) -> bool {
        match msg {
            Telemetry::Start(d) => self.start = Some(d.clone()),
            Telemetry::End { passes, reason, .. } => self.end = Some((*passes, reason.clone())),
            _ => {}
        }
        let must = msg.must_deliver();
        self.list.retain_mut(|s| {
            if let SinkKind::Lossy { capacity } = s.kind {
                if !must && s.tx.len() >= capacity {
                    if matches!(msg, Telemetry::Frame(_)) {
                        s.dropped += 1;
                    }
                    return true;
                }
            }
            let m = match msg {
                Telemetry::Frame(f) => {
                    let mut f = f.clone();
                    f.dropped = s.dropped;
                    Telemetry::Frame(f)
                }
                Telemetry::End { passes, reason, .. } => Telemetry::End {
                    passes: *passes,
                    dropped: s.dropped,
                    reason: reason.clone(),
                },
                other => other.clone(),
            };
            s.tx.send(m).is_ok()
        });
        if matches!(msg, Telemetry::End { .. }) {
            // End is the last message: close every sink, so a consumer's iteration ends.
            self.list.clear();
            return true;
        }
        !(self.ever && self.list.is_empty())
    }
}

/// Work for the shadow reference.
enum ToShadow {
    /// Judge the GPU's `gpu_token` for `token` at `pos`.
    Pass {
        pass: u64,
        pos: usize,
        token: u32,
        gpu_token: u32,
    },
    /// Follow another model from now on.
    Model(Box<Model>),
}

/// The shadow reference's thread: the CPU reference, in order, one pass at a time.
struct Shadow {
    tx: Sender<ToShadow>,
    rx: Receiver<(u64, Correctness)>,
    cancel: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
    sent: u64,
    received: u64,
}

impl Shadow {
    fn spawn(
        model: Model,
        max_seq: usize,
        near_tie: f32,
        hook: Option<ReferenceHook>,
    ) -> Result<Shadow> {
        let (tx, jobs) = unbounded::<ToShadow>();
        let (out, rx) = unbounded();
        let cancel = Arc::new(AtomicBool::new(false));
        let c2 = cancel.clone();
        let join = std::thread::Builder::new()
            .name("baro-shadow".into())
            .spawn(move || shadow_main(model, max_seq, near_tie, hook, jobs, out, c2))
            .map_err(|e| Error::EngineThread(format!("spawning the shadow reference: {e}")))?;
        Ok(Shadow {
            tx,
            rx,
            cancel,
            join: Some(join),
            sent: 0,
            received: 0,
        })
    }

    fn lag(&self) -> u64 {
        self.sent - self.received
    }
}

fn shadow_main(
    mut model: Model,
    max_seq: usize,
    near_tie: f32,
    hook: Option<ReferenceHook>,
    jobs: Receiver<ToShadow>,
    out: Sender<(u64, Correctness)>,
    cancel: Arc<AtomicBool>,
) {
    loop {
        let next: Box<Model> = {
            let mut cpu = CpuDecoder::new(&model.config, &model.weights, max_seq);
            let mut judge = Judge::new(near_tie);
            let vocab = model.config.vocab_size as u32;
            loop {
                let job = match jobs.recv() {
                    Ok(j) => j,
                    Err(_) => return,
                };
                match job {
                    ToShadow::Model(m) => break m,
                    ToShadow::Pass {
                        pass,
                        pos,
                        token,
                        gpu_token,
                    } => {
                        if cancel.load(Ordering::Relaxed) {
                            return;
                        }
                        // Every sequence is compared from its start.
                        if pos == 0 {
                            judge = Judge::new(near_tie);
                        }
                        if pos >= cpu.max_seq() || token >= vocab {
                            // Not reachable from the engine (it checks both); skip quietly.
                            continue;
                        }
                        let logits = cpu.forward(token, pos);
                        if let Some(h) = &hook {
                            h(pass, pos, logits);
                        }
                        let c = judge.judge(pass, gpu_token, None, logits);
                        if out.send((pass, c)).is_err() {
                            return;
                        }
                    }
                }
            }
        };
        model = *next;
    }
}

/// The engine thread's state.
struct Engine {
    b: SessionBuilder,
    dec: VulkanDecoder,
    details: RunDetails,
    plan: Option<CheckPlan>,
    shadow: Option<Shadow>,
    shared: Arc<Shared>,
    budget: Arc<AtomicU64>,
    prompt: Vec<u32>,
    sampler: Sampler,
    host_clock: HostClock,
    /// Passes run.
    n: u64,
    pos: usize,
    token: u32,
    failed_passes: u64,
    failed_checks: u64,
    checked: u64,
    /// The sensor thread (CPU busy, other GPU clients, clocks; low rate) and its samples.
    _sensors: Option<crate::sensors::SensorThread>,
    sensor_rx: Receiver<baro_telemetry::SensorSample>,
    /// Labels every pass with its power mode and contention (telemetry crate's rules).
    labeler: baro_telemetry::labels::PassLabeler,
}

/// What the loop does next.
enum Flow {
    Go,
    End(EndReason),
}

impl Engine {
    fn run(
        b: SessionBuilder,
        ready: Sender<Result<()>>,
        cmds: Receiver<(Command, Sender<Result<Reply>>)>,
        shared: Arc<Shared>,
        stop: Arc<AtomicBool>,
        budget: Arc<AtomicU64>,
    ) -> Outcome {
        let mut e = match Engine::new(b, shared.clone(), budget) {
            Ok(e) => e,
            Err(err) => {
                let reason = reason_of(&err);
                // Sinks added to the builder learn why there is no run.
                shared.lock().emit(&Telemetry::End {
                    passes: 0,
                    dropped: 0,
                    reason: reason.clone(),
                });
                let _ = ready.send(Err(err));
                return Outcome {
                    reason,
                    passes: 0,
                    failed_passes: 0,
                    failed_checks: 0,
                    checked: 0,
                };
            }
        };
        let _ = ready.send(Ok(()));
        // A panic in the loop still ends the run with an End (the decoder's Drop runs in
        // finish as usual).
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.main_loop(&cmds, &stop)));
        let reason = match r {
            Ok(Ok(r)) => r,
            Ok(Err(err)) => reason_of(&err),
            Err(_) => EndReason::Error {
                message: "the engine thread panicked".into(),
            },
        };
        e.finish(reason, &stop, &cmds)
    }

    fn new(b: SessionBuilder, shared: Arc<Shared>, budget: Arc<AtomicU64>) -> Result<Engine> {
        let dec = VulkanDecoder::new(b.ctx.clone(), &b.model, b.opts.clone())?;
        let plan = b.plan(&b.model);
        let mut details = dec.run_details(&b.model.source);
        details.check = plan;
        let shadow = match plan {
            Some(_) => Some(Shadow::spawn(
                b.model.clone(),
                crate::generate::Decode::max_seq(&dec),
                b.near_tie,
                b.reference_hook.clone(),
            )?),
            None => None,
        };
        let prompt = b.model.tokenizer.encode(&b.prompt, true, false);
        let sampler = Sampler::new(b.model.config.vocab_size, b.temperature, b.topp, b.seed);
        budget.store(dec.watchdog().as_nanos() as u64, Ordering::Relaxed);
        let token = prompt[0];
        let (sensor_tx, sensor_rx) = unbounded();
        let lock_path = b.host_lock.as_ref().map(|(p, _)| p.clone());
        let sensors = spawn_sensors(&b.ctx, lock_path, sensor_tx);
        let mut labeler = baro_telemetry::labels::PassLabeler::for_run(&details);
        labeler.sensors.lock_holder = b.host_lock.as_ref().and_then(|(_, h)| h.clone());
        let mut e = Engine {
            b,
            dec,
            details,
            plan,
            shadow,
            shared,
            budget,
            prompt,
            sampler,
            host_clock: HostClock::default(),
            n: 0,
            pos: 0,
            token,
            failed_passes: 0,
            failed_checks: 0,
            checked: 0,
            _sensors: sensors,
            sensor_rx,
            labeler,
        };
        e.emit(&Telemetry::Start(e.details.clone()));
        let c = e.sync(0)?;
        e.emit(&Telemetry::Clock(c));
        Ok(e)
    }

    fn emit(&self, msg: &Telemetry) -> bool {
        self.shared.lock().emit(msg)
    }

    fn sync(&mut self, at_pass: u64) -> Result<ClockSync> {
        let cal = self.dec.calibrate(8)?;
        let corr = self.dec.context().host_correlation();
        let drift_ppm = corr.and_then(|c| self.host_clock.add(c.device_ns, c.host_ns));
        Ok(ClockSync {
            at_pass,
            shader_offset_ns: cal.map(|c| c.offset_ns),
            shader_uncertainty_ns: cal.map(|c| c.uncertainty_ns),
            host_offset_ns: corr.map(|c| c.host_ns as i64 - c.device_ns as i64),
            host_deviation_ns: corr.map(|c| c.max_deviation_ns),
            drift_ppm,
        })
    }

    /// Forward the shadow's verdicts that are ready.
    fn drain_shadow(&mut self) -> bool {
        let mut alive = true;
        let Some(sh) = self.shadow.as_mut() else {
            return true;
        };
        let got: Vec<(u64, Correctness)> = sh.rx.try_iter().collect();
        sh.received += got.len() as u64;
        for (pass, c) in got {
            self.checked += 1;
            if c.verdict.is_failure() {
                self.failed_checks += 1;
            }
            alive &= self.emit(&Telemetry::Correctness {
                pass,
                correctness: c,
            });
        }
        alive
    }

    fn main_loop(
        &mut self,
        cmds: &Receiver<(Command, Sender<Result<Reply>>)>,
        stop: &AtomicBool,
    ) -> Result<EndReason> {
        let mut paused = self.b.start_paused;
        // A step in progress: its reply goes out after its pass.
        let mut step: Option<Sender<Result<Reply>>> = None;
        loop {
            if !self.drain_shadow() {
                return Ok(EndReason::ConsumerGone);
            }
            if stop.load(Ordering::SeqCst) {
                return Ok(EndReason::Stopped);
            }
            if self.b.passes.is_some_and(|p| self.n >= p) {
                return Ok(EndReason::Completed);
            }
            // Commands: wait for one while paused (waking for the shadow's verdicts), else
            // take what is there.
            let next = if paused && step.is_none() {
                let shadow_rx = self.shadow.as_ref().map(|s| s.rx.clone());
                let never = crossbeam_channel::never();
                let srx = shadow_rx.as_ref().unwrap_or(&never);
                select! {
                    recv(cmds) -> c => match c {
                        Ok(c) => Some(c),
                        // Every handle is gone: nobody can resume this run.
                        Err(_) => return Ok(EndReason::Stopped),
                    },
                    recv(srx) -> r => {
                        if let (Ok(r), Some(sh)) = (r, self.shadow.as_mut()) {
                            // Put it through the usual path.
                            sh.received += 1;
                            self.checked += 1;
                            if r.1.verdict.is_failure() {
                                self.failed_checks += 1;
                            }
                            if !self.emit(&Telemetry::Correctness { pass: r.0, correctness: r.1 }) {
                                return Ok(EndReason::ConsumerGone);
                            }
                        }
                        None
                    },
                    default(Duration::from_millis(100)) => None,
                }
            } else {
                cmds.try_recv().ok()
            };
            if let Some((cmd, reply)) = next {
                match cmd {
                    Command::Pause => {
                        paused = true;
                        let _ = reply.send(Ok(Reply::Paused { passes: self.n }));
                    }
                    Command::Resume => {
                        paused = false;
                        let _ = reply.send(Ok(Reply::Resumed));
                    }
                    Command::Step => {
                        paused = true;
                        step = Some(reply);
                    }
                    Command::Stop => {
                        let _ = reply.send(Ok(Reply::Stopping));
                        return Ok(EndReason::Stopped);
                    }
                    Command::Restart => {
                        self.restart();
                        let _ = reply.send(Ok(Reply::Restarted { next_pass: self.n }));
                    }
                    Command::SetDispatch(d) => {
                        let opts = DecoderOptions {
                            dispatch: d,
                            ..self.b.opts.clone()
                        };
                        let r = self.rebuild(opts, None);
                        let _ = reply.send(r);
                    }
                    Command::SetGrid(g) => {
                        let opts = DecoderOptions {
                            grid: g,
                            ..self.b.opts.clone()
                        };
                        let r = self.rebuild(opts, None);
                        let _ = reply.send(r);
                    }
                    Command::LoadModel(m) => {
                        let opts = self.b.opts.clone();
                        let r = self.rebuild(opts, Some(m));
                        let _ = reply.send(r);
                    }
                }
                continue;
            }
            if paused && step.is_none() {
                continue;
            }
            let pass = self.n;
            let flow = self.one_pass()?;
            if let Some(r) = step.take() {
                let _ = r.send(Ok(Reply::Stepped { pass }));
            }
            if let Flow::End(reason) = flow {
                return Ok(reason);
            }
        }
    }

    fn restart(&mut self) {
        self.pos = 0;
        self.token = self.prompt[0];
    }

    /// Build a decoder with `opts` (and `model`); on success it replaces the running one.
    fn rebuild(&mut self, opts: DecoderOptions, model: Option<Box<Model>>) -> Result<Reply> {
        let m = model.as_deref().unwrap_or(&self.b.model);
        let dec = VulkanDecoder::new(self.b.ctx.clone(), m, opts.clone())?;
        let plan = self.b.plan(m);
        let mut details = dec.run_details(&m.source);
        details.check = plan;
        if let Some(m) = model {
            // The shadow follows the new model (a shadow starts if the plan now wants one).
            match (&mut self.shadow, plan) {
                (Some(sh), Some(_)) => {
                    let _ = sh.tx.send(ToShadow::Model(m.clone()));
                }
                (None, Some(_)) => {
                    self.shadow = Some(Shadow::spawn(
                        (*m).clone(),
                        crate::generate::Decode::max_seq(&dec),
                        self.b.near_tie,
                        self.b.reference_hook.clone(),
                    )?);
                }
                (_, None) => {}
            }
            self.prompt = m.tokenizer.encode(&self.b.prompt, true, false);
            self.sampler = Sampler::new(
                m.config.vocab_size,
                self.b.temperature,
                self.b.topp,
                self.b.seed,
            );
            self.b.model = *m;
        }
        self.plan = plan;
        self.dec = dec;
        self.b.opts = opts;
        self.details = details.clone();
        self.budget
            .store(self.dec.watchdog().as_nanos() as u64, Ordering::Relaxed);
        self.restart();
        // The sensors' state survives the rebuild: a reading is sent when it changes, so a
        // fresh state would forget, e.g., the lock holder until it changes again.
        let sensors = std::mem::take(&mut self.labeler.sensors);
        self.labeler = baro_telemetry::labels::PassLabeler::for_run(&details);
        self.labeler.sensors = sensors;
        self.emit(&Telemetry::Start(details.clone()));
        Ok(Reply::Rebuilt(Box::new(details)))
    }

    /// Run one pass and send its frame.
    fn one_pass(&mut self) -> Result<Flow> {
        let (pos, token, n) = (self.pos, self.token, self.n);
        let p = self.dec.step(token, pos)?;
        let next = if pos + 1 < self.prompt.len() {
            self.prompt[pos + 1]
        } else if self.b.temperature == 0.0 {
            p.argmax
        } else {
            self.sampler.sample(self.dec.logits_mut())
        };
        let mut f = self.dec.frame(&self.details, n, pos, token, next, &p);
        f.host_start_ns = self
            .dec
            .last_pass_window()
            .and_then(|(t0, _)| self.host_clock.host_ns(t0));
        let ok = p.fail.ok();
        f.check = match (&mut self.shadow, self.plan) {
            (Some(sh), Some(plan)) if ok && plan.covers(pos as u32) => {
                let sent = sh.tx.send(ToShadow::Pass {
                    pass: n,
                    pos,
                    token,
                    gpu_token: p.argmax,
                });
                if sent.is_ok() {
                    sh.sent += 1;
                    CheckState::Pending
                } else {
                    CheckState::Skipped
                }
            }
            (Some(_), Some(_)) => CheckState::Skipped,
            _ => CheckState::Off,
        };
        f.check_lag = self.shadow.as_ref().map_or(0, Shadow::lag);
        // Sensor samples taken since the last pass go out before it, and label it: power
        // mode (the pass's own latency, cross-checked with clocks) and contention (other GPU
        // clients, a busy CPU, time the spans do not account for).
        let samples: Vec<_> = self.sensor_rx.try_iter().collect();
        for smp in samples {
            self.labeler.observe(&smp);
            self.emit(&Telemetry::Sensor(smp));
        }
        let _ = self.labeler.label(&mut f);
        let alive = self.emit(&Telemetry::Frame(Box::new(f)));
        self.n += 1;
        let wall = Duration::from_nanos(p.wall.as_nanos() as u64);
        self.budget.store(
            (wall + self.dec.watchdog()).as_nanos() as u64,
            Ordering::Relaxed,
        );
        if !alive {
            return Ok(Flow::End(EndReason::ConsumerGone));
        }
        if self.n.is_multiple_of(RESYNC_EVERY) {
            let c = self.sync(self.n)?;
            self.emit(&Telemetry::Clock(c));
        }
        if !ok {
            self.failed_passes += 1;
            if p.fail.has(fail::WATCHDOG) {
                return Ok(Flow::End(EndReason::Watchdog));
            }
            if self.b.stop_on_fail {
                return Ok(Flow::End(EndReason::FailedPass {
                    pass: n,
                    fail: baro_telemetry::FailReport::new(p.fail, |l| self.details.level_name(l)),
                }));
            }
            // A failed pass left no token to feed back and may have left a bad KV entry:
            // start the sequence over.
            self.restart();
            return Ok(Flow::Go);
        }
        self.pos += 1;
        self.token = next;
        let max = crate::generate::Decode::max_seq(&self.dec);
        if self.pos >= max || next == self.b.model.tokenizer.bos_id() {
            self.restart();
        }
        Ok(Flow::Go)
    }

    /// Collect the shadow's last verdicts (all of them when the run completed; none when it
    /// was stopped: the reference is cancelled, never awaited), send `End`, and report.
    fn finish(
        mut self,
        reason: EndReason,
        stop: &AtomicBool,
        cmds: &Receiver<(Command, Sender<Result<Reply>>)>,
    ) -> Outcome {
        let wait_for_shadow = matches!(reason, EndReason::Completed | EndReason::FailedPass { .. });
        if let Some(mut sh) = self.shadow.take() {
            if wait_for_shadow {
                while sh.lag() > 0 && !stop.load(Ordering::SeqCst) {
                    // A stop command while waiting cancels the wait.
                    if let Ok((Command::Stop, r)) = cmds.try_recv() {
                        let _ = r.send(Ok(Reply::Stopping));
                        break;
                    }
                    match sh.rx.recv_timeout(Duration::from_millis(100)) {
                        Ok((pass, c)) => {
                            sh.received += 1;
                            self.checked += 1;
                            if c.verdict.is_failure() {
                                self.failed_checks += 1;
                            }
                            self.emit(&Telemetry::Correctness {
                                pass,
                                correctness: c,
                            });
                        }
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                        Err(_) => break,
                    }
                }
            }
            sh.cancel.store(true, Ordering::SeqCst);
            let idle = sh.lag() == 0;
            drop(sh.tx);
            if idle {
                if let Some(j) = sh.join.take() {
                    let _ = j.join();
                }
            } // else: still inside a forward pass: detached, it ends at its next job check
        }
        self.emit(&Telemetry::End {
            passes: self.n,
            dropped: 0,
            reason: reason.clone(),
        });
        // Answer whatever is still queued, so no caller waits for a reply that never comes.
        for (c, r) in cmds.try_iter() {
            let _ = r.send(match c {
                Command::Stop => Ok(Reply::Stopping),
                _ => Err(Error::EngineThread("the session has ended".into())),
            });
        }
        Outcome {
            reason,
            passes: self.n,
            failed_passes: self.failed_passes,
            failed_checks: self.failed_checks,
            checked: self.checked,
        }
    }
}

/// The end reason of an engine error.
fn reason_of(e: &Error) -> EndReason {
    match e.kind() {
        ErrorKind::DeviceLost => EndReason::DeviceLost,
        ErrorKind::Watchdog => EndReason::Watchdog,
        _ => EndReason::Error {
            message: e.to_string(),
        },
    }
}

/// The sensor thread for this device: NVML on NVIDIA, sysfs on AMD, CPU and `/proc` clients
/// everywhere; `None` (and the run goes on unlabelled by sensors) if it cannot start.
fn spawn_sensors(
    ctx: &GpuContext,
    lock_path: Option<PathBuf>,
    tx: Sender<baro_telemetry::SensorSample>,
) -> Option<crate::sensors::SensorThread> {
    use crate::sensors::{GpuSensor, SensorConfig, SensorThread};
    let gpu = match ctx.info.vendor_id {
        0x10de => GpuSensor::Nvidia { index: 0 },
        0x1002 => GpuSensor::Amd { index: 0 },
        _ => GpuSensor::None,
    };
    let cfg = SensorConfig {
        gpu,
        lock_path,
        ..Default::default()
    };
    SensorThread::spawn_with(cfg, move |smp| {
        let _ = tx.send(smp);
    })
    .ok()
}

#[cfg(test)]
mod tests;
