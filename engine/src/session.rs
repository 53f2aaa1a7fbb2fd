//! A decode session on its own named thread: decodes pass after pass on the GPU and streams
//! [`Telemetry`] over a bounded channel. The engine never blocks on a consumer: frames go out
//! with `try_send`; a full channel drops the frame and counts it, and the count travels with
//! the next frame that gets through.
//!
//! Decoding follows run.c's loop (prompt forced, then argmax or the seeded sampler). When the
//! context is full, the sequence restarts from the prompt: a live monitor keeps running.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use crate::model::Model;
use crate::sampler::Sampler;
use crate::telemetry::{ClockSync, HostClock, Telemetry};

/// Passes between clock re-calibrations (drift tracking).
const RESYNC_EVERY: u64 = 256;
use crate::vulkan::{DecoderOptions, GpuContext, VulkanDecoder};
use crate::{Error, Result};

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
    capacity: usize,
    stop_on_fail: bool,
}

/// A running session.
pub struct Session {
    /// The telemetry stream.
    pub rx: Receiver<Telemetry>,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    join: Option<JoinHandle<Result<()>>>,
}

impl SessionBuilder {
    /// A session decoding `model` on `ctx` with `opts` (instrumentation on by default).
    pub fn new(ctx: Arc<GpuContext>, model: Model, opts: DecoderOptions) -> Self {
        SessionBuilder {
            model,
            ctx,
            opts,
            passes: None,
            prompt: vec![],
            temperature: 0.0,
            topp: 0.9,
            seed: 1,
            capacity: 256,
            stop_on_fail: true,
        }
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
    /// Channel capacity in frames.
    pub fn capacity(mut self, c: usize) -> Self {
        self.capacity = c.max(1);
        self
    }
    /// Whether a failed pass ends the session (default true).
    pub fn stop_on_fail(mut self, s: bool) -> Self {
        self.stop_on_fail = s;
        self
    }

    /// Build the decoder and start the engine thread `baro-engine`.
    pub fn spawn(self) -> Result<Session> {
        let (tx, rx) = bounded(self.capacity);
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let (s2, d2) = (stop.clone(), dropped.clone());
        let join = std::thread::Builder::new()
            .name("baro-engine".into())
            .spawn(move || self.run(tx, s2, d2))
            .map_err(|e| Error::Vulkan(format!("spawning the engine thread: {e}")))?;
        Ok(Session {
            rx,
            stop,
            dropped,
            join: Some(join),
        })
    }

    fn run(
        self,
        tx: Sender<Telemetry>,
        stop: Arc<AtomicBool>,
        dropped: Arc<AtomicU64>,
    ) -> Result<()> {
        let mut dec = VulkanDecoder::new(self.ctx.clone(), &self.model, self.opts.clone())?;
        let details = dec.run_details(&self.model.source);
        // Start must arrive: block for it (the consumer is waiting for it by construction).
        let _ = tx.send(Telemetry::Start(details.clone()));
        let tok = &self.model.tokenizer;
        let prompt = tok.encode(&self.prompt, true, false);
        let mut sampler = Sampler::new(
            self.model.config.vocab_size,
            self.temperature,
            self.topp,
            self.seed,
        );
        let max = crate::generate::Decode::max_seq(&dec);
        let mut host_clock = HostClock::default();
        let sync =
            |dec: &mut VulkanDecoder, at_pass: u64, hc: &mut HostClock| -> Result<ClockSync> {
                let cal = dec.calibrate(8)?;
                let corr = self.ctx.host_correlation();
                let drift_ppm = corr.and_then(|c| hc.add(c.device_ns, c.host_ns));
                Ok(ClockSync {
                    at_pass,
                    shader_offset_ns: cal.map(|c| c.offset_ns),
                    shader_uncertainty_ns: cal.map(|c| c.uncertainty_ns),
                    host_offset_ns: corr.map(|c| c.host_ns as i64 - c.device_ns as i64),
                    host_deviation_ns: corr.map(|c| c.max_deviation_ns),
                    drift_ppm,
                })
            };
        let _ = tx.send(Telemetry::Clock(sync(&mut dec, 0, &mut host_clock)?));
        let mut n: u64 = 0;
        let mut pos = 0usize;
        let mut token = prompt[0];
        let mut reason = "done".to_string();
        while self.passes.is_none_or(|p| n < p) && !stop.load(Ordering::Relaxed) {
            let p = dec.step(token, pos)?;
            let next = if pos + 1 < prompt.len() {
                prompt[pos + 1]
            } else if self.temperature == 0.0 {
                p.argmax
            } else {
                sampler.sample(dec.logits_mut())
            };
            let mut f = dec.frame(&details, n, pos, token, next, &p);
            f.dropped = dropped.load(Ordering::Relaxed);
            f.host_start_ns = dec
                .last_pass_window()
                .and_then(|(t0, _)| host_clock.host_ns(t0));
            match tx.try_send(Telemetry::Frame(Box::new(f))) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => {
                    reason = "consumer gone".into();
                    break;
                }
            }
            n += 1;
            if n.is_multiple_of(RESYNC_EVERY) {
                let c = sync(&mut dec, n, &mut host_clock)?;
                if tx.try_send(Telemetry::Clock(c)).is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            if !p.fail.ok() {
                if self.stop_on_fail {
                    reason = format!("failed: {}", p.fail.line(|l| dec.level_name(l)));
                    break;
                }
                // A failed pass left no token to feed back and may have left a bad KV entry:
                // start the sequence over.
                pos = 0;
                token = prompt[0];
                continue;
            }
            pos += 1;
            token = next;
            if pos >= max || next == tok.bos_id() {
                pos = 0;
                token = prompt[0];
            }
        }
        let _ = tx.send_timeout(
            Telemetry::End {
                passes: n,
                dropped: dropped.load(Ordering::Relaxed),
                reason,
            },
            std::time::Duration::from_secs(1),
        );
        Ok(())
    }
}

impl Session {
    /// Ask the engine to stop after the current pass.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Wait for the engine thread and return its result.
    pub fn join(mut self) -> Result<()> {
        match self.join.take().map(|j| j.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Vulkan("the engine thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop();
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
