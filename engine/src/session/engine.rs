//! The engine thread: the decode loop, commands, rebuilds, clocks, checks and sensors.

use super::frames::{ended, Frames, Job, RingCopy};
use super::shadow::{Shadow, ToShadow};
use super::*;
use crate::vulkan::Feed;

/// The engine thread's state.
pub(super) struct Engine {
    pub(super) b: SessionBuilder,
    pub(super) dec: VulkanDecoder,
    pub(super) details: Arc<RunDetails>,
    pub(super) plan: Option<CheckPlan>,
    pub(super) shadow: Option<Shadow>,
    pub(super) shared: Arc<Shared>,
    pub(super) budget: Arc<AtomicU64>,
    pub(super) prompt: Vec<u32>,
    pub(super) sampler: Sampler,
    pub(super) host_clock: HostClock,
    /// Passes run.
    pub(super) n: u64,
    pub(super) pos: usize,
    pub(super) token: u32,
    pub(super) failed_passes: u64,
    pub(super) failed_checks: u64,
    pub(super) checked: u64,
    /// The sensor thread (CPU busy, other GPU clients, clocks; low rate) and its samples.
    pub(super) _sensors: Option<crate::sensors::SensorThread>,
    pub(super) sensor_rx: Receiver<baro_telemetry::SensorSample>,
    /// The frame builder: finishes each frame (ring, labels) and emits every message, in
    /// the order queued, while this thread runs the next pass.
    pub(super) frames: Frames,
}

/// What the loop does next.
pub(super) enum Flow {
    Go,
    End(EndReason),
}

impl Engine {
    pub(super) fn run(
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
                shared.lock().emit(Telemetry::End {
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

    pub(super) fn new(
        b: SessionBuilder,
        shared: Arc<Shared>,
        budget: Arc<AtomicU64>,
    ) -> Result<Engine> {
        let dec = VulkanDecoder::new(b.ctx.clone(), &b.model, b.opts.clone())?;
        let plan = b.plan(&b.model);
        let mut details = dec.run_details(&b.model.source);
        details.check = plan;
        let shadow = match plan {
            Some(_) => Some(Shadow::spawn(
                b.model.clone(),
                crate::generate::Decode::max_seq(&dec),
                (dec.opts.kv, dec.opts.act),
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
        let frames = Frames::spawn(shared.clone(), labeler)?;
        let mut e = Engine {
            b,
            dec,
            details: Arc::new(details),
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
            frames,
        };
        e.emit(Telemetry::Start((*e.details).clone()));
        let c = e.sync(0)?;
        e.emit(Telemetry::Clock(c));
        Ok(e)
    }

    /// Queue `msg` behind every frame queued before it; false once every sink that was
    /// ever added is gone (as far as the builder has seen). Should the builder be gone (it
    /// panicked), the message goes out directly.
    pub(super) fn emit(&self, msg: Telemetry) -> bool {
        match self.frames.send(Job::Msg(msg)) {
            Ok(()) => self.frames.alive(),
            Err(job) => match *job {
                Job::Msg(m) => self.shared.lock().emit(m),
                _ => false,
            },
        }
    }

    /// Answer a command once every message queued before it is out (a reply follows the
    /// frames it names).
    fn answer(&self, tx: Sender<Result<Reply>>, r: Result<Reply>) -> Result<()> {
        let flushed = self.frames.flush();
        let _ = tx.send(r);
        flushed
    }

    pub(super) fn sync(&mut self, at_pass: u64) -> Result<ClockSync> {
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
    pub(super) fn drain_shadow(&mut self) -> bool {
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
            alive &= self.emit(Telemetry::Correctness {
                pass,
                correctness: c,
            });
        }
        alive
    }

    pub(super) fn main_loop(
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
                            if !self.emit(Telemetry::Correctness { pass: r.0, correctness: r.1 }) {
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
                        self.answer(reply, Ok(Reply::Paused { passes: self.n }))?;
                    }
                    Command::Resume => {
                        paused = false;
                        self.answer(reply, Ok(Reply::Resumed))?;
                    }
                    Command::Step => {
                        paused = true;
                        step = Some(reply);
                    }
                    Command::Stop => {
                        self.answer(reply, Ok(Reply::Stopping))?;
                        return Ok(EndReason::Stopped);
                    }
                    Command::Restart => {
                        self.restart();
                        self.answer(reply, Ok(Reply::Restarted { next_pass: self.n }))?;
                    }
                    Command::SetDispatch(d) => {
                        let opts = DecoderOptions {
                            dispatch: d,
                            ..self.b.opts.clone()
                        };
                        let r = self.rebuild(opts, None);
                        self.answer(reply, r)?;
                    }
                    Command::SetGrid(g) => {
                        let opts = DecoderOptions {
                            grid: g,
                            ..self.b.opts.clone()
                        };
                        let r = self.rebuild(opts, None);
                        self.answer(reply, r)?;
                    }
                    Command::LoadModel(m) => {
                        let opts = self.b.opts.clone();
                        let r = self.rebuild(opts, Some(m));
                        self.answer(reply, r)?;
                    }
                }
                continue;
            }
            if paused && step.is_none() {
                continue;
            }
            let pass = self.n;
            // A step is one pass; a pass limit caps the chain.
            let max_k = if step.is_some() {
                1
            } else {
                self.b
                    .passes
                    .map_or(usize::MAX, |p| p.saturating_sub(self.n) as usize)
            };
            let flow = self.one_pass(max_k)?;
            if let Some(r) = step.take() {
                self.answer(r, Ok(Reply::Stepped { pass }))?;
            }
            if let Flow::End(reason) = flow {
                return Ok(reason);
            }
        }
    }

    pub(super) fn restart(&mut self) {
        self.pos = 0;
        self.token = self.prompt[0];
    }

    /// Build a decoder with `opts` (and `model`); on success it replaces the running one.
    pub(super) fn rebuild(
        &mut self,
        mut opts: DecoderOptions,
        model: Option<Box<Model>>,
    ) -> Result<Reply> {
        let m = model.as_deref().unwrap_or(&self.b.model);
        // `--act auto` is resolved per model: a new model may take the other type (a Q4 file
        // q8, F32 matrices f32), and `--kv auto` follows the activation type and the width
        // (q8 at 4096 and up f16, else f32); the shadow reference follows both.
        let caps = crate::act::ActCaps::of(&self.b.ctx.info);
        if model.is_some() && opts.act_auto {
            opts.act = crate::act::resolve_act(crate::act::ActChoice::Auto, &m.weights, caps);
        }
        if model.is_some() && opts.kv_auto {
            opts.kv =
                crate::kv::resolve_kv(crate::kv::KvChoice::Auto, opts.act, m.config.dim, caps.kv16);
        }
        let dec = VulkanDecoder::new(self.b.ctx.clone(), m, opts.clone())?;
        let plan = self.b.plan(m);
        let mut details = dec.run_details(&m.source);
        details.check = plan;
        if let Some(m) = model {
            // The shadow follows the new model (a shadow starts if the plan now wants one).
            match (&mut self.shadow, plan) {
                (Some(sh), Some(_)) => {
                    let _ = sh.tx.send(ToShadow::Model(
                        m.clone(),
                        crate::generate::Decode::max_seq(&dec),
                        (dec.opts.kv, dec.opts.act),
                    ));
                }
                (None, Some(_)) => {
                    self.shadow = Some(Shadow::spawn(
                        (*m).clone(),
                        crate::generate::Decode::max_seq(&dec),
                        (dec.opts.kv, dec.opts.act),
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
        self.details = Arc::new(details.clone());
        self.budget
            .store(self.dec.watchdog().as_nanos() as u64, Ordering::Relaxed);
        self.restart();
        // The labels start over for the new run; the sensors' state survives the rebuild: a
        // reading is sent when it changes, so a fresh state would forget, e.g., the lock
        // holder until it changes again.
        self.frames
            .send(Job::Relabel(self.details.clone()))
            .map_err(|_| ended())?;
        self.emit(Telemetry::Start(details.clone()));
        Ok(Reply::Rebuilt(Box::new(details)))
    }

    /// Run the next submission and send its passes' frames: one pass, or — decoding greedily
    /// past the prompt — up to `max_k` passes chained on the GPU (the decoder's `chain`
    /// option), each reading the previous pass's argmax there. Passes after one that ends the
    /// sequence (a failure, BOS, the context's end) ran speculatively and are dropped: the
    /// stream carries exactly the passes a pass-per-submission session would.
    pub(super) fn one_pass(&mut self, max_k: usize) -> Result<Flow> {
        let (pos0, token0) = (self.pos, self.token);
        let max = crate::generate::Decode::max_seq(&self.dec);
        let greedy = self.b.temperature == 0.0 && pos0 + 1 >= self.prompt.len();
        let k = if greedy {
            max_k
                .min(self.dec.opts.chain as usize)
                .min(max.saturating_sub(pos0))
                .max(1)
        } else {
            1
        };
        let mut feeds = vec![Feed::Argmax; k];
        feeds[0] = Feed::Token(token0);
        let passes = self.dec.step_chain(&feeds, pos0)?;
        let wall: Duration = passes.iter().map(|p| p.wall).sum();
        self.budget.store(
            (wall + self.dec.watchdog_for(self.dec.opts.chain as usize)).as_nanos() as u64,
            Ordering::Relaxed,
        );
        for (i, p) in passes.iter().enumerate() {
            let before = self.n;
            let flow = self.finish_pass(i, p)?;
            // Carry on along the chain only while the sequence advanced to the token the GPU
            // fed the next pass.
            let advanced = self.pos == pos0 + i + 1 && self.token == p.argmax;
            if !matches!(flow, Flow::Go) || !advanced || self.n != before + 1 {
                return Ok(flow);
            }
        }
        Ok(Flow::Go)
    }

    /// Send the frame of pass `slot` of the submission just run and advance the sequence.
    fn finish_pass(&mut self, slot: usize, p: &crate::vulkan::Pass) -> Result<Flow> {
        let (pos, token, n) = (self.pos, self.token, self.n);
        let ok = p.fail.ok();
        // A failed pass feeds nothing back (the sequence restarts below) and its logits may be
        // NaN: only a clean pass is sampled. A sampling error (a temperature that overflows
        // the logits) ends the run once this pass's frame is out.
        let sampled = if pos + 1 < self.prompt.len() {
            Ok(self.prompt[pos + 1])
        } else if self.b.temperature == 0.0 || !ok {
            Ok(p.argmax)
        } else {
            self.sampler.sample(self.dec.logits_mut())
        };
        let next = *sampled.as_ref().unwrap_or(&p.argmax);
        // The frame's head now; its ring is copied out (the next pass overwrites the
        // readback) and read, with the labels, on the frame builder while this thread goes on.
        let mut f = self.dec.frame_head(&self.details, n, pos, token, next, p);
        let mut bytes = self.frames.buffer();
        let ring = self.dec.copy_ring_at(slot, &mut bytes).then(|| RingCopy {
            bytes,
            expect_seq: self.dec.ring_seq_at(slot),
            mega: self.dec.ring_barriers(),
        });
        f.host_start_ns = p.window.and_then(|(t0, _)| self.host_clock.host_ns(t0));
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
            self.frames.send(Job::Sensor(smp)).map_err(|_| ended())?;
        }
        self.frames
            .send(Job::Pass {
                frame: Box::new(f),
                ring,
                details: self.details.clone(),
            })
            .map_err(|_| ended())?;
        let alive = self.frames.alive();
        self.n += 1;
        if !alive {
            return Ok(Flow::End(EndReason::ConsumerGone));
        }
        sampled?;
        if self.n.is_multiple_of(RESYNC_EVERY) {
            let c = self.sync(self.n)?;
            self.emit(Telemetry::Clock(c));
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
        // The sequence ends where `generate` ends it: at an end-of-generation token of a GGUF
        // vocabulary (EOS, EOT, <|im_end|>, ...), at BOS for run.c's (llama2.c) vocabularies.
        if self.pos >= max || self.b.model.tokenizer.is_eog(next) {
            self.restart();
        }
        Ok(Flow::Go)
    }

    /// Collect the shadow's last verdicts (all of them when the run completed; none when it
    /// was stopped: the reference is cancelled, never awaited), send `End`, and report.
    pub(super) fn finish(
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
                            self.emit(Telemetry::Correctness {
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
        self.emit(Telemetry::End {
            passes: self.n,
            dropped: 0,
            reason: reason.clone(),
        });
        // Everything queued goes out before the run is over.
        self.frames.finish();
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
pub(super) fn reason_of(e: &Error) -> EndReason {
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
pub(super) fn spawn_sensors(
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
