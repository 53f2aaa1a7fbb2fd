//! One pass: record, submit under the watchdog, read back the fail word and logits.

use super::*;
use baro_telemetry::clock::pass_loop_split;

impl VulkanDecoder {
    /// The fence watchdog for the next pass: `fence_timeout` if set, else the expected pass
    /// time (the slowest of the last 32 passes) plus the spin timeout (a kernel-detected
    /// failure may spin that long) plus 1 s on GPUs; on CPU devices eight times the
    /// expectation plus 10 s, since a loaded CPU stretches passes (and a hang there costs only
    /// time). Before any pass the expectation is
    /// 1 s on GPUs and, on CPU devices, 2 s plus the weights read at 100 MB/s.
    pub fn watchdog(&self) -> Duration {
        self.watchdog_for(1)
    }

    /// The fence watchdog for a submission of `n` chained passes: as [`Self::watchdog`] with
    /// the expectation `n` times one pass's.
    pub fn watchdog_for(&self, n: usize) -> Duration {
        if let Some(t) = self.opts.fence_timeout {
            return t * n.max(1) as u32;
        }
        let cpu = self.ctx.info.kind == DeviceKind::Cpu;
        let expected = self.recent_walls.iter().max().copied().unwrap_or_else(|| {
            if cpu {
                Duration::from_secs(2) + Duration::from_nanos(self.weight_bytes * 10)
            } else {
                Duration::from_secs(1)
            }
        });
        let expected = expected * n.max(1) as u32;
        if cpu {
            expected * 8 + self.opts.spin_timeout + Duration::from_secs(10)
        } else {
            expected + self.opts.spin_timeout + Duration::from_secs(1)
        }
    }

    /// Run one pass: `token` at `pos`. A kernel or host check failure is reported in the
    /// returned [`Pass::fail`], not as an error; errors are Vulkan failures (device lost) and
    /// bad arguments. After a watchdog timeout the decoder refuses further passes.
    pub fn step(&mut self, token: u32, pos: usize) -> Result<Pass> {
        let mut v = self.step_chain(&[Feed::Token(token)], pos)?;
        Ok(v.pop().expect("a chain of one pass returns one pass"))
    }

    /// Run `feeds.len()` passes at positions `pos, pos + 1, ...` in one submission: pass `i`
    /// reads `feeds[i]` — a token, or [`Feed::Argmax`], the previous pass's argmax read on the
    /// GPU (greedy decoding with no host round trip between passes). Every pass keeps its own
    /// fail word, argmax, timestamps, logits (when read) and ring frame; a pass after a failed
    /// one reads a poisoned argmax and fails with `bad-chained-token` instead of computing
    /// from it. `Feed::Argmax` first continues from the last pass of the previous submission,
    /// which must have completed clean. At most `chain` (an option) passes.
    pub fn step_chain(&mut self, feeds: &[Feed], pos: usize) -> Result<Vec<Pass>> {
        if let Some(why) = &self.broken {
            return Err(if self.ctx.is_hung() {
                Error::Watchdog(format!("decoder unusable: {why}"))
            } else {
                Error::Vulkan(format!("decoder unusable: {why}"))
            });
        }
        let n = feeds.len();
        if n == 0 || n > self.opts.chain as usize {
            return Err(Error::Invalid(format!(
                "a submission of {n} passes: this decoder holds 1 to {} (the chain option)",
                self.opts.chain
            )));
        }
        for (i, f) in feeds.iter().enumerate() {
            match *f {
                Feed::Token(t) if t as usize >= self.vocab => {
                    return Err(Error::Invalid(format!(
                        "token {t} at position {} outside vocab {}",
                        pos + i,
                        self.vocab
                    )))
                }
                Feed::Argmax if i == 0 && !self.last_ok => {
                    return Err(Error::Invalid(
                        "a chain starting from the previous argmax needs a previous pass that completed clean".into(),
                    ))
                }
                _ => {}
            }
        }
        if pos + n > self.program.max_seq as usize {
            return Err(Error::Invalid(format!(
                "positions {pos}..{} outside context {}",
                pos + n,
                self.program.max_seq
            )));
        }
        self.last_ok = false;
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        let cb = self.begin_commands()?;
        let first_id = self.passes;
        self.passes = self.passes.wrapping_add(n as u32);
        let t0 = Instant::now();
        // SAFETY: the command buffer is recording and was idle (the previous submission's
        // fence was waited on); every query and range lies inside its pool or buffer.
        unsafe {
            d.cmd_reset_query_pool(cb, self.qpool, 0, self.queries_per_pass * n as u32);
            self.slot_stamped.clear();
            self.slot_run.clear();
            let stamps: Vec<bool> = (0..n)
                .map(|i| {
                    let id = first_id.wrapping_add(i as u32);
                    self.opts.instrument && id.is_multiple_of(self.opts.ring_every.max(1))
                })
                .collect();
            self.record_resets(cb, &stamps, feeds[0] == Feed::Argmax);
            let mut bound = vk::Pipeline::null();
            let mut bound_set = vk::DescriptorSet::null();
            let runs = self.runs(feeds, &stamps);
            self.last_dispatches = runs.len();
            for (k, &(first, count)) in runs.iter().enumerate() {
                let stamp = stamps[first];
                // Unstamped passes of a sampled run take the plain pipeline where there is
                // one. (Bound sets and push constants survive: one layout for both.)
                let want = if stamp || self.pipeline_plain == vk::Pipeline::null() {
                    self.pipeline
                } else {
                    self.pipeline_plain
                };
                if want != bound {
                    d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, want);
                    bound = want;
                }
                // The pass loop's modules find a pass's slot themselves (set 0 binds every
                // slot); the others run on the set that binds their slot's words.
                let set = self.sets[if self.pass_loop() { 0 } else { first }];
                if set != bound_set {
                    d.cmd_bind_descriptor_sets(
                        cb,
                        vk::PipelineBindPoint::COMPUTE,
                        self.layout,
                        0,
                        &[set],
                        &[],
                    );
                    bound_set = set;
                }
                if k > 0 {
                    // The previous dispatch wrote the KV cache, the state and this pass's
                    // token word: nothing else lies between two chained dispatches.
                    compute_barrier(d, cb);
                }
                self.record_run(
                    cb,
                    (first, count),
                    first_id.wrapping_add(first as u32),
                    feeds[first],
                    pos + first,
                    stamp,
                );
                for _ in 0..count {
                    self.slot_stamped.push(stamp);
                    self.slot_run.push((first, count));
                }
            }
            self.record_readback(cb, &stamps);
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::HOST_READ,
            );
        }
        let watchdog = self.watchdog_for(n);
        let what = if n == 1 {
            format!("pass {first_id}")
        } else {
            format!("passes {first_id}..{}", first_id.wrapping_add(n as u32))
        };
        let done = self.submit_and_wait(watchdog, &what)?;
        let wall = t0.elapsed();
        // One pass's share of the submission (the host sees only the whole).
        let each = wall / n as u32;
        if done {
            for _ in 0..n {
                if self.recent_walls.len() == RECENT_WALLS {
                    self.recent_walls.pop_front();
                }
                self.recent_walls.push_back(each);
            }
        }
        self.last_slot = n - 1;
        self.last_count = n;
        if !done {
            return Ok((0..n)
                .map(|_| Pass {
                    argmax: u32::MAX,
                    argmax_value: f32::NAN,
                    fail: FailWord {
                        bits: fail::WATCHDOG,
                        grid: self.grid,
                        ..Default::default()
                    },
                    gpu_ns: None,
                    dispatch_ns: vec![],
                    wall: each,
                    window: None,
                    prefetched: 0,
                })
                .collect());
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(self.read_pass(i, first_id.wrapping_add(i as u32), each)?);
        }
        self.last_ok = out.last().is_some_and(|p| p.fail.ok());
        Ok(out)
    }

    /// The dispatches of a submission as `(first slot, passes)`: with the pass loop (a
    /// megakernel, [`DecoderOptions::pass_loop`]) a dispatch runs a pass that takes its token
    /// from the host (or continues the previous submission) and the [`Feed::Argmax`] passes
    /// after it that stamp the ring as it does (one pipeline per dispatch); otherwise one
    /// dispatch a pass.
    fn runs(&self, feeds: &[Feed], stamps: &[bool]) -> Vec<(usize, usize)> {
        let looped = self.pass_loop();
        // The kernel's back-edge budget (ITER_BUDGET) spans a whole dispatch and is sized for
        // one pass: a CPU device caps an invocation's loop iterations over the dispatch
        // (lavapipe: 65,535, past which it ends loops silently; stories260K ran out at its
        // tenth looped pass), and a GPU without a device clock bounds its spins by that
        // budget alone (≈ 1 s of polls). Both loop over a few passes at most; a CPU device
        // over as many as its estimated pass fits in the budget's share (budget.rs).
        let cap = if self.ctx.info.kind == DeviceKind::Cpu {
            let fit = budget::CPU_FIT / self.cpu_pass_loops.max(1);
            (fit as usize).clamp(1, MAX_CPU_LOOP)
        } else if !self.has_clock() {
            MAX_CPU_LOOP
        } else {
            usize::MAX
        };
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for i in 0..feeds.len() {
            match runs.last_mut() {
                Some((first, count))
                    if looped
                        && feeds[i] == Feed::Argmax
                        && stamps[i] == stamps[*first]
                        && *count < cap =>
                {
                    *count += 1
                }
                _ => runs.push((i, 1)),
            }
        }
        runs
    }

    /// Record what a submission of `stamps.len()` passes does before its first dispatch:
    /// after a barrier on the previous submission's work, the token a chained first pass
    /// reads (`argmax_first`: the previous submission's last argmax, into slot 0's token
    /// word), then one wave that resets every slot's sync words and output words from their
    /// images and zeroes the stamped passes' ring frames. Each command of the wave writes
    /// ranges no other one touches, so none waits for another (round 45: each extra barrier
    /// and wave cost the pass microseconds of idle device). Slot 0's token word is left as it
    /// is; every later slot's is reset to the poison, so a pass whose predecessor never wrote
    /// its argmax reads a token outside the vocabulary and fails as a bad chained token.
    ///
    /// # Safety
    /// `cb` is recording; `stamps.len()` lies within the chain option.
    unsafe fn record_resets(&self, cb: vk::CommandBuffer, stamps: &[bool], argmax_first: bool) {
        let d = &self.ctx.device;
        let n = stamps.len();
        let frame_bytes = self.rb.ring_frame_words as u64 * 4;
        // SAFETY: guaranteed by the caller; every range lies inside its buffer (the sync
        // buffer holds chain + 1 slots, the output and ring buffers chain slots).
        unsafe {
            // The previous submission (whose fence was waited on) wrote the KV cache, state
            // and argmax in its shaders and read the sync and output words in its readback.
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE,
            );
            if argmax_first {
                // Read before the reset below poisons the slot it lies in.
                let copy = vk::BufferCopy {
                    src_offset: self.out_slot_bytes(self.last_slot) + self.vocab as u64 * 4,
                    dst_offset: sy::TOKEN as u64 * 4,
                    size: 4,
                };
                d.cmd_copy_buffer(cb, self.out.buffer, self.sync.buffer, &[copy]);
                barrier(
                    d,
                    cb,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
                    vk::AccessFlags::TRANSFER_WRITE,
                );
            }
            let syncs: Vec<vk::BufferCopy> = sync_reset_copies(n, self.sync_slot_words())
                .map(|(slot, lo, hi)| vk::BufferCopy {
                    src_offset: lo as u64 * 4,
                    dst_offset: self.sync_slot_bytes(slot) + lo as u64 * 4,
                    size: (hi - lo) as u64 * 4,
                })
                .collect();
            d.cmd_copy_buffer(cb, self.reset_sync.buffer, self.sync.buffer, &syncs);
            let outs: Vec<vk::BufferCopy> = (0..n)
                .map(|s| vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: self.out_slot_bytes(s),
                    size: self.rb.out_words as u64 * 4,
                })
                .collect();
            d.cmd_copy_buffer(cb, self.reset_out.buffer, self.out.buffer, &outs);
            for (first, count) in stamped_runs(stamps) {
                d.cmd_fill_buffer(
                    cb,
                    self.ring.buffer,
                    first as u64 * frame_bytes,
                    count as u64 * frame_bytes,
                    0,
                );
            }
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
            );
        }
    }

    /// Record the dispatch that runs passes `run.0 .. run.0 + run.1` of a submission (the
    /// pipeline and the descriptor set are bound, the slots reset): one megakernel dispatch
    /// (a pass loop's when the run holds more than one pass), or a pass's stage dispatches,
    /// between the first slot's timestamps. `pass_id`, `feed` and `pos` are the first pass's;
    /// a chained pass reads the previous pass's argmax from its slot's token word, where
    /// that pass's kernel wrote it (the later passes of a pass loop read it on the GPU).
    ///
    /// # Safety
    /// `cb` is recording; the run's slots lie below the chain option; a run of more than one
    /// pass is a megakernel's.
    unsafe fn record_run(
        &self,
        cb: vk::CommandBuffer,
        run: (usize, usize),
        pass_id: u32,
        feed: Feed,
        pos: usize,
        stamp: bool,
    ) {
        let (slot, count) = run;
        let d = &self.ctx.device;
        let grid = self.grid;
        let timeout_ticks = (self.opts.spin_timeout.as_nanos().min(u32::MAX as u128 / 2)) as u32;
        let (token, mut flags) = match feed {
            Feed::Token(t) => (t, 0u32),
            Feed::Argmax => (0, 2u32),
        };
        if stamp {
            flags |= 4;
        }
        let push = |level: u32, stage: u32| -> [u32; PUSH_WORDS] {
            Push {
                token,
                pos: pos as u32,
                level,
                stage,
                pass_id,
                timeout: timeout_ticks,
                ring_slot: slot as u32,
                flags,
                npasses: count as u32,
            }
            .words()
        };
        let mega = self.opts.dispatch == Dispatch::Mega;
        let q0 = self.queries_per_pass * slot as u32;
        // SAFETY: guaranteed by the caller.
        unsafe {
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::COMPUTE_SHADER, self.qpool, q0);
            if mega {
                d.cmd_push_constants(
                    cb,
                    self.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    unsafe_words_as_bytes(&push(0, u32::MAX)),
                );
                d.cmd_dispatch(cb, grid, 1, 1);
            } else {
                for (i, s) in self.program.stages.iter().enumerate() {
                    if i > 0 {
                        compute_barrier(d, cb);
                    }
                    d.cmd_write_timestamp(
                        cb,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        self.qpool,
                        q0 + 2 + 2 * i as u32,
                    );
                    d.cmd_push_constants(
                        cb,
                        self.layout,
                        vk::ShaderStageFlags::COMPUTE,
                        0,
                        unsafe_words_as_bytes(&push(s.level, i as u32)),
                    );
                    d.cmd_dispatch(cb, grid, 1, 1);
                    d.cmd_write_timestamp(
                        cb,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                        self.qpool,
                        q0 + 3 + 2 * i as u32,
                    );
                }
            }
            d.cmd_write_timestamp(
                cb,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.qpool,
                q0 + 1,
            );
        }
    }

    /// Record the copies of every slot's sync words, output words (all of them, or the
    /// argmax alone) and, for stamped passes, ring frame into the readback buffer, after a
    /// barrier on the submission's last dispatch.
    ///
    /// # Safety
    /// `cb` is recording; `stamps.len()` lies within the chain option.
    unsafe fn record_readback(&self, cb: vk::CommandBuffer, stamps: &[bool]) {
        let d = &self.ctx.device;
        let rb = self.rb;
        let n = stamps.len();
        let frame_bytes = rb.ring_frame_words as u64 * 4;
        // SAFETY: guaranteed by the caller; every range lies inside its buffer.
        unsafe {
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::TRANSFER,
                vk::AccessFlags::SHADER_WRITE,
                vk::AccessFlags::TRANSFER_READ,
            );
            let syncs: Vec<vk::BufferCopy> = (0..n)
                .map(|s| vk::BufferCopy {
                    src_offset: self.sync_slot_bytes(s),
                    dst_offset: rb.sync_offset(s),
                    size: rb.sync_words as u64 * 4,
                })
                .collect();
            d.cmd_copy_buffer(cb, self.sync.buffer, self.readback.buffer, &syncs);
            let (src, size) = if self.opts.read_logits {
                (0u64, rb.out_words as u64 * 4)
            } else {
                (self.vocab as u64 * 4, 8)
            };
            let outs: Vec<vk::BufferCopy> = (0..n)
                .map(|s| vk::BufferCopy {
                    src_offset: self.out_slot_bytes(s) + src,
                    dst_offset: rb.out_offset(s, 0) + src,
                    size,
                })
                .collect();
            d.cmd_copy_buffer(cb, self.out.buffer, self.readback.buffer, &outs);
            let rings: Vec<vk::BufferCopy> = (0..n)
                .filter(|&s| stamps[s])
                .map(|s| vk::BufferCopy {
                    src_offset: s as u64 * frame_bytes,
                    dst_offset: rb.ring_bytes(s).start as u64,
                    size: frame_bytes,
                })
                .collect();
            if !rings.is_empty() {
                d.cmd_copy_buffer(cb, self.ring.buffer, self.readback.buffer, &rings);
            }
        }
    }

    /// Whether this decoder runs a submission's chained passes as one dispatch (a megakernel
    /// with [`DecoderOptions::pass_loop`]).
    pub fn pass_loop(&self) -> bool {
        self.opts.dispatch == Dispatch::Mega && self.opts.pass_loop
    }

    /// Dispatches of the last submission ([`Self::step_chain`]): one per pass, or fewer where
    /// the pass loop ran chained passes in one.
    pub fn last_dispatches(&self) -> usize {
        self.last_dispatches
    }

    /// Words between two chain slots' sync words in the sync buffer (the kernel's
    /// `SYNC_STRIDE`): the sync words, then the attention's arrival counters, rounded up to
    /// the device's descriptor offset alignment.
    pub(super) fn sync_slot_words(&self) -> usize {
        let words = super::super::program::sync_buffer_words(self.grid, self.program.att_groups());
        align_words(words, self.ctx.info.storage_align)
    }

    /// Words between two chain slots' output words in the output buffer (the pass loop's
    /// `OUT_STRIDE`): the output words rounded up as the sync words are.
    pub(super) fn out_slot_words(&self) -> usize {
        align_words(self.rb.out_words, self.ctx.info.storage_align)
    }

    /// Byte offset of chain slot `slot`'s sync words in the sync buffer.
    pub(super) fn sync_slot_bytes(&self, slot: usize) -> u64 {
        (slot * self.sync_slot_words()) as u64 * 4
    }

    /// Byte offset of chain slot `slot`'s output words in the output buffer.
    pub(super) fn out_slot_bytes(&self, slot: usize) -> u64 {
        (slot * self.out_slot_words()) as u64 * 4
    }

    /// Read back pass `slot` of the submission just completed.
    fn read_pass(&mut self, slot: usize, pass_id: u32, wall: Duration) -> Result<Pass> {
        let d = &self.ctx.device;
        let grid = self.grid;
        let mega = self.opts.dispatch == Dispatch::Mega;
        let n_stages = self.program.stages.len();
        let qpp = self.queries_per_pass as usize;
        let (first, count) = self.slot_run.get(slot).copied().unwrap_or((slot, 1));
        // Timestamps: the dispatch's (a pass loop's first slot holds them).
        let nq = if mega { 2 } else { qpp };
        let mut ts = vec![0u64; nq];
        // SAFETY: the submission completed; its queries are available.
        let got = unsafe {
            d.get_query_pool_results(
                self.qpool,
                (qpp * first) as u32,
                &mut ts,
                vk::QueryResultFlags::TYPE_64,
            )
        };
        let map = super::calibrate::readback_map(&self.readback)?;
        let rb = self.rb;
        let word = |i: usize| {
            let b = i * 4;
            u32::from_le_bytes([map[b], map[b + 1], map[b + 2], map[b + 3]])
        };
        let period = self.ctx.info.timestamp_period as f64;
        let (gpu_ns, dispatch_ns) = if got.is_ok() && self.ctx.info.timestamp_bits > 0 {
            let span = |a: u64, b: u64| (b.wrapping_sub(a) as f64 * period) as u64;
            let disp = if mega {
                vec![]
            } else {
                (0..n_stages)
                    .map(|i| span(ts[2 + 2 * i], ts[3 + 2 * i]))
                    .collect()
            };
            let (t0, t1) = (
                (ts[0] as f64 * period) as u64,
                (ts[1] as f64 * period) as u64,
            );
            if count == 1 {
                self.last_window = Some((t0, t1));
                (Some(span(ts[0], ts[1])), disp)
            } else {
                // A pass loop: the device clock at workgroup 0's end of each pass.
                let end = |s: usize| {
                    u64::from(word(rb.sync_word(s, sy::PASS_END)))
                        | (u64::from(word(rb.sync_word(s, sy::PASS_END + 1))) << 32)
                };
                let ends: Vec<u64> = (first..first + count).map(end).collect();
                let split = if self.has_clock() {
                    pass_loop_split(t1.saturating_sub(t0), &ends)
                } else {
                    None
                };
                match split {
                    Some(each) => {
                        let k = slot - first;
                        let start = t0 + each[..k].iter().sum::<u64>();
                        self.last_window = Some((start, start + each[k]));
                        (Some(each[k]), disp)
                    }
                    None => {
                        self.last_window = None;
                        (None, disp)
                    }
                }
            }
        } else {
            self.last_window = None;
            (None, vec![])
        };
        let mut fw = FailWord {
            bits: word(rb.sync_word(slot, sy::FAIL)),
            first: word(rb.sync_word(slot, sy::FAIL_FIRST)),
            level: Some(word(rb.sync_word(slot, sy::FAIL_LEVEL))).filter(|&l| l != u32::MAX),
            seen: word(rb.sync_word(slot, sy::FAIL_SEEN)),
            wg: word(rb.sync_word(slot, sy::FAIL_WG)),
            resident: (0..grid as usize)
                .filter(|&g| word(rb.sync_word(slot, sy::RESIDENT + g)) == pass_id.wrapping_add(1))
                .count() as u32,
            started: word(rb.sync_word(slot, sy::STARTED)),
            arrivals: word(rb.sync_word(slot, sy::COUNTER)),
            grid,
        };
        if fw.resident < grid {
            fw.bits |= fail::MISSING_WG;
        }
        let argmax = word(rb.argmax_word(slot));
        let argmax_value = f32::from_bits(word(rb.argmax_word(slot) + 1));
        if argmax as usize >= self.vocab {
            fw.bits |= fail::POISONED;
        }
        if self.opts.read_logits {
            let mut poisoned = false;
            let v = self.vocab;
            for (i, l) in self.logits[slot * v..(slot + 1) * v].iter_mut().enumerate() {
                let w = word(rb.out_word(slot, i));
                poisoned |= w == POISON;
                *l = f32::from_bits(w);
            }
            if poisoned {
                fw.bits |= fail::POISONED;
            }
        }
        Ok(Pass {
            argmax,
            argmax_value,
            fail: fw,
            gpu_ns,
            dispatch_ns,
            wall,
            window: self.last_window,
            prefetched: u64::from(word(rb.sync_word(slot, sy::PREFETCHED))) * 32,
        })
    }
}

/// The most passes one dispatch's pass loop runs on a CPU device or without a device clock
/// (see `runs`).
const MAX_CPU_LOOP: usize = 4;

/// `words` rounded up to a multiple of `align_bytes` (a power of two or not) in words.
fn align_words(words: usize, align_bytes: u64) -> usize {
    let a = (align_bytes as usize).div_ceil(4).max(1);
    words.div_ceil(a) * a
}

/// What one chain slot's `words` sync words are reset to before a submission: every word
/// zero but `FAIL_LEVEL` (u32::MAX: no failing level yet) and `TOKEN` (u32::MAX, outside
/// every vocabulary: a chained pass whose predecessor never wrote its argmax fails as a bad
/// chained token).
pub(super) fn sync_reset_image(words: usize) -> Vec<u32> {
    assert!(words > sy::TOKEN, "{words} sync words hold no token word");
    let mut w = vec![0u32; words];
    w[sy::FAIL_LEVEL] = u32::MAX;
    w[sy::TOKEN] = u32::MAX;
    w
}

/// What one chain slot's output words are reset to: the logits, argmax and its value
/// poisoned, every workgroup's partial "none" (index u32::MAX).
pub(super) fn out_reset_image(vocab: usize, grid: u32) -> Vec<u32> {
    let mut w = vec![POISON; vocab + 2];
    w.resize(super::readback::out_words(grid, vocab), u32::MAX);
    w
}

/// The copies from the sync reset image that reset the first `n` slots of a submission, as
/// `(slot, lo, hi)` word ranges of the image (and of the slot): all of every slot but slot
/// 0's token word, which holds the token a chained first pass reads (copied there just
/// before when the first pass is [`Feed::Argmax`]; unread otherwise). Disjoint and none
/// empty (a zero-sized copy region is invalid).
fn sync_reset_copies(n: usize, words: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..n).flat_map(move |slot| {
        let ranges: &[(usize, usize)] = if slot == 0 {
            &[(0, sy::TOKEN), (sy::TOKEN + 1, usize::MAX)]
        } else {
            &[(0, usize::MAX)]
        };
        ranges
            .iter()
            .map(move |&(lo, hi)| (slot, lo, hi.min(words)))
            .filter(|&(_, lo, hi)| lo < hi)
    })
}

/// The stamped passes of a submission as `(first slot, passes)` runs of consecutive slots.
fn stamped_runs(stamps: &[bool]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, &s) in stamps.iter().enumerate() {
        if !s {
            continue;
        }
        match runs.last_mut() {
            Some((first, count)) if *first + *count == i => *count += 1,
            _ => runs.push((i, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reset_copies_cover_every_slot_word_once_but_the_first_slots_token() {
        for (n, words) in [(1, sy::TOKEN + 1), (1, 300), (3, sy::TOKEN + 2), (16, 300)] {
            let mut seen = vec![0u32; n * words];
            for (slot, lo, hi) in sync_reset_copies(n, words) {
                assert!(lo < hi && hi <= words, "slot {slot}: {lo}..{hi} of {words}");
                for w in &mut seen[slot * words + lo..slot * words + hi] {
                    *w += 1;
                }
            }
            for (i, &c) in seen.iter().enumerate() {
                let want = u32::from(i != sy::TOKEN);
                assert_eq!(c, want, "word {} of slot {} (n {n})", i % words, i / words);
            }
        }
    }

    #[test]
    fn the_sync_image_poisons_the_token_and_marks_no_failing_level_and_zeroes_the_rest() {
        let w = sync_reset_image(300);
        assert_eq!(w.len(), 300);
        for (i, &v) in w.iter().enumerate() {
            let want = if i == sy::TOKEN || i == sy::FAIL_LEVEL {
                u32::MAX
            } else {
                0
            };
            assert_eq!(v, want, "word {i}");
        }
        // The poisoned token is outside every vocabulary the kernel accepts (H_VOCAB is a
        // u32 word; a token is valid below it).
        assert!(w[sy::TOKEN] as u64 >= u32::MAX as u64);
    }

    #[test]
    fn the_output_image_poisons_logits_and_argmax_and_marks_every_partial_none() {
        let (vocab, grid) = (1000, 7);
        let w = out_reset_image(vocab, grid);
        assert_eq!(w.len(), super::super::readback::out_words(grid, vocab));
        assert!(w[..vocab + 2].iter().all(|&v| v == POISON));
        assert!(w[vocab + 2..].iter().all(|&v| v == u32::MAX));
    }

    #[test]
    fn slot_strides_round_up_to_the_descriptor_offset_alignment() {
        assert_eq!(align_words(300, 4), 300);
        assert_eq!(align_words(300, 16), 300);
        assert_eq!(align_words(301, 16), 304);
        assert_eq!(align_words(1, 256), 64);
        assert_eq!(align_words(65, 256), 128);
        assert_eq!(align_words(10, 12), 12);
    }

    #[test]
    fn stamped_runs_group_consecutive_stamped_slots() {
        assert_eq!(
            stamped_runs(&[true, true, false, true]),
            vec![(0, 2), (3, 1)]
        );
        assert_eq!(stamped_runs(&[false, false]), vec![]);
        assert_eq!(stamped_runs(&[false, true, true, true]), vec![(1, 3)]);
    }
}
