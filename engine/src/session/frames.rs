//! The frame builder: a thread (`baro-frames`) that finishes each pass's frame while the
//! engine thread runs the next pass, and the one road by which the engine's telemetry reaches
//! the sinks.
//!
//! Per pass the engine thread only copies the ring frame out of the mapped readback (the next
//! pass overwrites it) and queues it with the frame's head (fail word, tokens, times, check
//! state); this thread decodes the ring with its timings ([`Frame::read_ring`]), labels the
//! pass ([`PassLabeler`]) and emits it. Every other message the engine sends (start, clock,
//! sensor samples, verdicts, end) goes through the same queue, so the stream's order is the
//! order the engine queued it in, exactly as when the engine emitted it itself: every pass's
//! frame, in pass order, sensor samples before the frame they label. The engine waits for the
//! queue to drain ([`Frames::flush`]) before it answers a command and before it ends, so a
//! reply still follows the frames it names. Ring copies are recycled, not reallocated.
//!
//! It must never drop or reorder a message, and never block on a sink (the sinks never block).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use baro_telemetry::labels::PassLabeler;
use baro_telemetry::{Frame, RunDetails, SensorSample, Telemetry};
use crossbeam_channel::{bounded, Receiver, Sender};

use super::sinks::Shared;
use crate::{Error, Result};

/// Jobs queued at most: the engine runs at most this many passes ahead of the sinks (then
/// it waits, as it did when it built every frame itself).
const QUEUE: usize = 4;

/// A pass's ring frame, copied out of the readback.
pub(super) struct RingCopy {
    /// The frame's little-endian bytes.
    pub(super) bytes: Vec<u8>,
    /// The sequence word that marks it complete (`pass_id + 1`).
    pub(super) expect_seq: u32,
    /// Megakernel (barrier records meaningful).
    pub(super) mega: bool,
}

/// What the engine queues.
pub(super) enum Job {
    /// Emit as is.
    Msg(Telemetry),
    /// Fold into the labels, then emit.
    Sensor(SensorSample),
    /// Read the ring into the frame (if any), label it, emit it.
    Pass {
        frame: Box<Frame>,
        ring: Option<RingCopy>,
        details: Arc<RunDetails>,
    },
    /// A rebuilt decoder: the labels start over for its run (the sensors' state stays: a
    /// reading is sent when it changes).
    Relabel(Arc<RunDetails>),
    /// Answer once every job before this one is out.
    Flush(Sender<()>),
}

/// The builder's state: what a pass needs after the engine thread is done with it.
pub struct Builder {
    shared: Arc<Shared>,
    /// Labels every pass with its power mode and contention (telemetry crate's rules).
    pub(super) labeler: PassLabeler,
}

impl Builder {
    pub(super) fn new(shared: Arc<Shared>, labeler: PassLabeler) -> Self {
        Builder { shared, labeler }
    }

    /// Do one job; false when every sink that was ever added is gone. A ring copy, once
    /// read, is handed to `done`.
    pub(super) fn handle(&mut self, job: Job, mut done: impl FnMut(Vec<u8>)) -> bool {
        match job {
            Job::Msg(m) => self.shared.lock().emit(m),
            Job::Sensor(s) => {
                let _ = self.labeler.observe(&s);
                self.shared.lock().emit(Telemetry::Sensor(s))
            }
            Job::Pass {
                mut frame,
                ring,
                details,
            } => {
                if let Some(r) = ring {
                    frame.read_ring(&details, &r.bytes, r.expect_seq, r.mega);
                    done(r.bytes);
                }
                let _ = self.labeler.label(&mut frame);
                self.shared.lock().emit(Telemetry::Frame(frame))
            }
            Job::Relabel(d) => {
                let sensors = std::mem::take(&mut self.labeler.sensors);
                self.labeler = PassLabeler::for_run(&d);
                self.labeler.sensors = sensors;
                true
            }
            Job::Flush(tx) => {
                let _ = tx.send(());
                true
            }
        }
    }
}

/// The engine thread's end of the builder.
pub(super) struct Frames {
    jobs: Option<Sender<Job>>,
    /// Ring copies the builder is done with.
    free: Receiver<Vec<u8>>,
    /// Every sink that was ever added is gone (seen by the builder).
    gone: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

impl Frames {
    /// Start the builder thread.
    pub(super) fn spawn(shared: Arc<Shared>, labeler: PassLabeler) -> Result<Frames> {
        let (jobs, rx) = bounded::<Job>(QUEUE);
        let (free_tx, free) = bounded::<Vec<u8>>(QUEUE + 2);
        let gone = Arc::new(AtomicBool::new(false));
        let g = gone.clone();
        let join = std::thread::Builder::new()
            .name("baro-frames".into())
            .spawn(move || {
                let mut b = Builder::new(shared, labeler);
                for job in rx.iter() {
                    if !b.handle(job, |buf| {
                        let _ = free_tx.try_send(buf);
                    }) {
                        g.store(true, Ordering::SeqCst);
                    }
                }
            })
            .map_err(|e| Error::EngineThread(format!("spawning the frame builder: {e}")))?;
        Ok(Frames {
            jobs: Some(jobs),
            free,
            gone,
            join: Some(join),
        })
    }

    /// Queue a job (waits while the queue is full); the job back when the builder is gone
    /// (it panicked).
    pub(super) fn send(&self, job: Job) -> std::result::Result<(), Box<Job>> {
        match &self.jobs {
            Some(j) => j.send(job).map_err(|e| Box::new(e.into_inner())),
            None => Err(Box::new(job)),
        }
    }

    /// Whether some sink is still there, as far as the builder has seen.
    pub(super) fn alive(&self) -> bool {
        !self.gone.load(Ordering::SeqCst)
    }

    /// A buffer for the next ring copy: one the builder is done with, if any.
    pub(super) fn buffer(&self) -> Vec<u8> {
        self.free.try_recv().unwrap_or_default()
    }

    /// Wait until every queued job is out.
    pub(super) fn flush(&self) -> Result<()> {
        let (tx, rx) = bounded(1);
        self.send(Job::Flush(tx)).map_err(|_| ended())?;
        rx.recv().map_err(|_| ended())
    }

    /// Emit what is queued, then stop the builder and wait for it.
    pub(super) fn finish(&mut self) {
        self.jobs = None;
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// The error of a builder that is gone.
pub(super) fn ended() -> Error {
    Error::EngineThread("the frame builder thread ended".into())
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.finish();
    }
}
