//! One pass: record, submit under the watchdog, read back the fail word and logits.

use super::*;

impl VulkanDecoder {
    /// The fence watchdog for the next pass: `fence_timeout` if set, else the expected pass
    /// time (the slowest of the last 32 passes) plus the spin timeout (a kernel-detected
    /// failure may spin that long) plus 1 s on GPUs; on CPU devices eight times the
    /// expectation plus 10 s, since a loaded CPU stretches passes (and a hang there costs only
    /// time). Before any pass the expectation is
    /// 1 s on GPUs and, on CPU devices, 2 s plus the weights read at 100 MB/s.
    pub fn watchdog(&self) -> Duration {
        if let Some(t) = self.opts.fence_timeout {
            return t;
        }
        let cpu = self.ctx.info.kind == DeviceKind::Cpu;
        let expected = self.recent_walls.iter().max().copied().unwrap_or_else(|| {
            if cpu {
                Duration::from_secs(2) + Duration::from_nanos(self.weight_bytes * 10)
            } else {
                Duration::from_secs(1)
            }
        });
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
        if let Some(why) = &self.broken {
            return Err(if self.ctx.is_hung() {
                Error::Watchdog(format!("decoder unusable: {why}"))
            } else {
                Error::Vulkan(format!("decoder unusable: {why}"))
            });
        }
        if token as usize >= self.vocab || pos >= self.program.max_seq as usize {
            return Err(Error::Invalid(format!(
                "token {token} at position {pos} outside vocab {} / context {}",
                self.vocab, self.program.max_seq
            )));
        }
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        let grid = self.grid;
        let sync_words = 16 + grid as usize;
        let out_words = self.vocab + 2 + 2 * grid as usize;
        let timeout_ticks = (self.opts.spin_timeout.as_nanos().min(u32::MAX as u128 / 2)) as u32;
        let pass_id = self.passes;
        self.passes = self.passes.wrapping_add(1);
        let push = |level: u32, stage: u32| -> [u32; 8] {
            [
                token,
                pos as u32,
                level,
                stage,
                pass_id,
                timeout_ticks,
                0,
                0,
            ]
        };
        let mega = self.opts.dispatch == Dispatch::Mega;
        let n_stages = self.program.stages.len() as u32;
        let t0 = Instant::now();
        let cb = self.begin_commands()?;
        // SAFETY: all handles belong to this decoder; the command buffer is recording and was
        // idle (the previous pass's fence was waited on); every range lies inside its buffer.
        unsafe {
            d.cmd_reset_query_pool(cb, self.qpool, 0, self.n_queries);
            // Sync words: all zero but the "no failing level yet" marker. (Fill, not one big
            // update: vkCmdUpdateBuffer is limited to 64 KiB and large grids exceed it.)
            d.cmd_fill_buffer(cb, self.sync.buffer, 0, sync_words as u64 * 4, 0);
            let none = [u32::MAX];
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::TRANSFER,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::TRANSFER_WRITE,
            );
            d.cmd_update_buffer(
                cb,
                self.sync.buffer,
                sy::FAIL_LEVEL as u64 * 4,
                unsafe_words_as_bytes(&none),
            );
            d.cmd_fill_buffer(cb, self.out.buffer, 0, (self.vocab as u64 + 2) * 4, POISON);
            // Partials: index u32::MAX = "none".
            d.cmd_fill_buffer(
                cb,
                self.out.buffer,
                (self.vocab as u64 + 2) * 4,
                2 * grid as u64 * 4,
                u32::MAX,
            );
            if self.opts.instrument {
                d.cmd_fill_buffer(cb, self.ring.buffer, 0, self.ring_frame_words as u64 * 4, 0);
            }
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
            );
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            d.cmd_bind_descriptor_sets(
                cb,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[self.set],
                &[],
            );
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::COMPUTE_SHADER, self.qpool, 0);
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
                        barrier(
                            d,
                            cb,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::AccessFlags::SHADER_WRITE,
                            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                        );
                    }
                    d.cmd_write_timestamp(
                        cb,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        self.qpool,
                        2 + 2 * i as u32,
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
                        3 + 2 * i as u32,
                    );
                }
            }
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.qpool, 1);
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::TRANSFER,
                vk::AccessFlags::SHADER_WRITE,
                vk::AccessFlags::TRANSFER_READ,
            );
            d.cmd_copy_buffer(
                cb,
                self.sync.buffer,
                self.readback.buffer,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size: sync_words as u64 * 4,
                }],
            );
            let (src, size) = if self.opts.read_logits {
                (0u64, out_words as u64 * 4)
            } else {
                (self.vocab as u64 * 4, 8)
            };
            d.cmd_copy_buffer(
                cb,
                self.out.buffer,
                self.readback.buffer,
                &[vk::BufferCopy {
                    src_offset: src,
                    dst_offset: sync_words as u64 * 4 + src,
                    size,
                }],
            );
            if self.opts.instrument {
                let off = (sync_words + out_words) as u64 * 4;
                d.cmd_copy_buffer(
                    cb,
                    self.ring.buffer,
                    self.readback.buffer,
                    &[vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: off,
                        size: self.ring_frame_words as u64 * 4,
                    }],
                );
            }
            barrier(
                d,
                cb,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::HOST_READ,
            );
        }
        let watchdog = self.watchdog();
        let done = self.submit_and_wait(watchdog, &format!("pass {pass_id}"))?;
        let wall = t0.elapsed();
        if done {
            if self.recent_walls.len() == RECENT_WALLS {
                self.recent_walls.pop_front();
            }
            self.recent_walls.push_back(wall);
        }
        if !done {
            return Ok(Pass {
                argmax: u32::MAX,
                argmax_value: f32::NAN,
                fail: FailWord {
                    bits: fail::WATCHDOG,
                    grid,
                    ..Default::default()
                },
                gpu_ns: None,
                dispatch_ns: vec![],
                wall,
            });
        }
        // SAFETY: the pass completed; its queries and readback are ready.
        unsafe {
            // Timestamps.
            let nq = if mega { 2 } else { self.n_queries as usize };
            let mut ts = vec![0u64; nq];
            let got =
                d.get_query_pool_results(self.qpool, 0, &mut ts, vk::QueryResultFlags::TYPE_64);
            let period = ctx.info.timestamp_period as f64;
            let (gpu_ns, dispatch_ns) = if got.is_ok() && ctx.info.timestamp_bits > 0 {
                let span = |a: u64, b: u64| (b.wrapping_sub(a) as f64 * period) as u64;
                let disp = if mega {
                    vec![]
                } else {
                    (0..n_stages as usize)
                        .map(|i| span(ts[2 + 2 * i], ts[3 + 2 * i]))
                        .collect()
                };
                self.last_window = Some((
                    (ts[0] as f64 * period) as u64,
                    (ts[1] as f64 * period) as u64,
                ));
                (Some(span(ts[0], ts[1])), disp)
            } else {
                self.last_window = None;
                (None, vec![])
            };
            let map = self
                .readback
                .alloc
                .as_ref()
                .and_then(|a| a.mapped_slice())
                .ok_or_else(|| Error::Vulkan("readback buffer is not host-mapped".into()))?;
            let word = |i: usize| {
                u32::from_le_bytes([map[i * 4], map[i * 4 + 1], map[i * 4 + 2], map[i * 4 + 3]])
            };
            let mut fw = FailWord {
                bits: word(sy::FAIL),
                first: word(sy::FAIL_FIRST),
                level: Some(word(sy::FAIL_LEVEL)).filter(|&l| l != u32::MAX),
                seen: word(sy::FAIL_SEEN),
                wg: word(sy::FAIL_WG),
                resident: (0..grid as usize)
                    .filter(|&g| word(sy::RESIDENT + g) == pass_id + 1)
                    .count() as u32,
                started: word(sy::STARTED),
                arrivals: word(sy::COUNTER),
                grid,
            };
            if fw.resident < grid {
                fw.bits |= fail::MISSING_WG;
            }
            let argmax = word(sync_words + self.vocab);
            let argmax_value = f32::from_bits(word(sync_words + self.vocab + 1));
            if argmax as usize >= self.vocab {
                fw.bits |= fail::POISONED;
            }
            if self.opts.read_logits {
                let mut poisoned = false;
                for (i, l) in self.logits.iter_mut().enumerate() {
                    let w = word(sync_words + i);
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
            })
        }
    }
}
