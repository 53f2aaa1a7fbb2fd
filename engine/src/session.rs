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
//! restart the sequence, load another model. The requests every producer shares
//! ([`baro_telemetry::control::Command`]: the dashboard's vocabulary) convert into a
//! [`Command`] but for seeking, which only a replay can do. A rebuild (dispatch, grid, model) that fails
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
//! ([`EndReason::ConsumerGone`]; seen a few passes late: the frame builder tells).
//!
//! # The frame builder
//!
//! Per pass the engine thread copies the ring frame out of the readback and queues it; a
//! second thread (`baro-frames`, `session/frames.rs`) reads it (spans, stage and barrier
//! timings), labels the pass and emits it while the engine runs the next pass. Every message
//! goes out through that one queue, so the stream is exactly what the engine queued, in
//! order; a command's reply waits until the queue is out (a reply still follows the frames it
//! names), and so does the end of the run.
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

mod engine;
mod frames;
pub mod host_cost;
mod shadow;
mod sinks;

use engine::Engine;
use sinks::Shared;

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

/// The live session's part of the control vocabulary: every request but seeking (a live
/// decode has no recording to move about in), which comes back as the error.
impl TryFrom<baro_telemetry::control::Command> for Command {
    type Error = baro_telemetry::control::Command;

    fn try_from(c: baro_telemetry::control::Command) -> std::result::Result<Self, Self::Error> {
        use baro_telemetry::control::Command as C;
        Ok(match c {
            C::Pause => Command::Pause,
            C::Resume => Command::Resume,
            C::Step => Command::Step,
            C::Stop => Command::Stop,
            C::SetDispatch(d) => Command::SetDispatch(d),
            C::Restart => Command::Restart,
            C::Seek(_) | C::SeekSlowest => return Err(c),
        })
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

#[cfg(test)]
mod tests;
