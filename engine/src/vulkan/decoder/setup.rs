//! Creating a decoder: buffers, upload, warm-up (the pipeline is built in `pipeline`), and
//! the submit/wait path every command buffer goes through.

use super::*;

/// Whether device `info` can run the q8 activation path: shaderIntegerDotProduct (packed
/// int8 dot products) and subgroups of a multiple of 8 lanes (a block is quantised on 8 lanes
/// of one subgroup). A decoder refuses an explicit q8 run with this error; `--act auto`
/// ([`crate::act::ActCaps::of`]) takes f32 where it fails.
pub fn check_q8_device(info: &crate::vulkan::DeviceInfo) -> Result<()> {
    if !info.integer_dot {
        return Err(Error::Invalid(format!(
            "activations q8: device {} ({}) lacks shaderIntegerDotProduct (packed int8 dot products), which the q8 activation path needs; use f32 activations",
            info.index, info.name
        )));
    }
    let sg = info.subgroup_size.max(1);
    if !sg.is_multiple_of(8) {
        return Err(Error::Invalid(format!(
            "activations q8: device {} ({}) runs subgroups of {sg} lanes; the q8 path quantises a block on 8 lanes of one subgroup (a multiple of 8)",
            info.index, info.name
        )));
    }
    Ok(())
}

impl crate::act::ActCaps {
    /// A Vulkan device: q8 where the decoder would accept an explicit q8 run on it
    /// ([`check_q8_device`]), an f16 cache where it would accept `--kv f16`.
    pub fn of(info: &crate::vulkan::DeviceInfo) -> crate::act::ActCaps {
        crate::act::ActCaps {
            q8: check_q8_device(info).is_ok(),
            kv16: info.storage_16bit,
        }
    }
}

impl VulkanDecoder {
    /// Upload `model` and build the pipeline ([`VulkanDecoder::new`] checks the clock's unit).
    pub(super) fn build(
        ctx: Arc<GpuContext>,
        model: &Model,
        opts: DecoderOptions,
    ) -> Result<VulkanDecoder> {
        let info = ctx.info.clone();
        let cpu = info.kind == DeviceKind::Cpu;
        check_robust_buffers(&info, opts.robust_buffers)?;
        if opts.grid == Some(0) {
            return Err(Error::Invalid(
                "grid 0: a pass needs at least one workgroup".into(),
            ));
        }
        let grid = opts.grid.unwrap_or_else(|| default_grid(&ctx)).max(1);
        // Measured on the H200 (bench/rounds/04.md and 10.md): more warps per SM keep
        // more weight loads in flight; 1024 lanes from d 2048 up (round 10: +5 % over 512 on
        // the 1b), 512 below. With q8 activations (round 29) the 1b is faster at 512 lanes
        // (+8.2 %: 100 registers per lane instead of the 64 that 1024 lanes allow) and the
        // 8b at 1024 (512: −9.2 %): 1024 from d 4096 up. CPU devices: 64.
        // A default is clamped to the device; a size the caller asked for is refused when the
        // device cannot run it, naming the real limit.
        let sg = info.subgroup_size.max(1);
        let limit = max_wg_size(&info);
        let wg_size = match opts.wg_size {
            Some(w) => w,
            None => (if cpu {
                64
            } else if model.config.dim >= 2048
                && (opts.act == ActType::F32 || model.config.dim >= 4096)
            {
                1024
            } else {
                512
            })
            .min(limit.max(sg)),
        };
        if wg_size == 0 || wg_size > limit || !wg_size.is_multiple_of(sg) {
            return Err(Error::Invalid(format!(
                "workgroup size {wg_size}: this device runs multiples of its subgroup size {sg} up to {limit} lanes (min(max workgroup {}, 60 subgroups), rounded down to the subgroup size)",
                info.max_wg
            )));
        }
        if opts.chain == 0 || opts.chain > MAX_CHAIN {
            return Err(Error::Invalid(format!(
                "chain {}: a submission holds 1 to {MAX_CHAIN} passes",
                opts.chain
            )));
        }
        if opts.ring_every == 0 {
            return Err(Error::Invalid(
                "ring every 0 passes: 1 stamps every pass, N every N-th".into(),
            ));
        }
        if opts.ring_every > 1 && !opts.instrument {
            return Err(Error::Invalid(format!(
                "ring every {} passes: this run has no event ring (instrumentation is off)",
                opts.ring_every
            )));
        }
        if grid > 65535 {
            return Err(Error::Invalid(format!("grid {grid} is larger than 65535")));
        }
        if opts.kv == KvType::F16 && !info.storage_16bit {
            return Err(Error::Invalid(format!(
                "KV cache f16: device {} ({}) lacks storageBuffer16BitAccess (16-bit loads and stores in storage buffers), which an f16 KV cache needs; use the f32 KV cache",
                info.index, info.name
            )));
        }
        if let Some(t) = model
            .weights
            .tensors()
            .into_iter()
            .find(|t| !crate::vulkan::program::gpu_supports(t.ty))
        {
            return Err(Error::Invalid(format!(
                "tensor '{}': type {} is not implemented on the GPU decoder (the CPU reference reads it)",
                t.name,
                t.ty.ggml_name()
            )));
        }
        let q8 = opts.act == ActType::Q8;
        if q8 {
            check_q8_device(&info)?;
            crate::act::check_q8_matrices(&model.weights)?;
        }
        let rows = opts.rows.unwrap_or(DEFAULT_ROWS);
        if ![1, 2, 4].contains(&rows) {
            return Err(Error::Invalid(format!(
                "rows in flight {rows}: the matvec streams 1, 2 or 4 rows per team"
            )));
        }
        let prefetch = opts.prefetch_mib.unwrap_or(default_prefetch_mib(info.kind));
        if prefetch > MAX_PREFETCH_MIB {
            return Err(Error::Invalid(format!(
                "read-ahead {prefetch} MiB: at most {MAX_PREFETCH_MIB} MiB (the whole grid's reads during one attention level)"
            )));
        }
        if opts.prefetch_skew > MAX_PREFETCH_SKEW {
            return Err(Error::Invalid(format!(
                "read-ahead skew {} attention levels: at most {MAX_PREFETCH_SKEW}",
                opts.prefetch_skew
            )));
        }
        if opts.prefetch_skew != 0 && prefetch == 0 {
            // The skew moves what the read-ahead reads; with none it would move nothing.
            return Err(Error::Invalid(format!(
                "read-ahead skew {} needs a read-ahead (prefetch MiB above 0; the default is none)",
                opts.prefetch_skew
            )));
        }
        let has_clock = info.device_clock && !opts.no_device_clock;
        let idle_wait = opts
            .idle_wait_ns
            .unwrap_or(default_idle_wait_ns(info.kind, has_clock));
        if idle_wait > MAX_IDLE_WAIT_NS {
            return Err(Error::Invalid(format!(
                "idle wait {idle_wait} ns: at most {MAX_IDLE_WAIT_NS} ns (a longer wait only delays the attention level's release)"
            )));
        }
        if idle_wait != 0 && !has_clock {
            return Err(Error::Invalid(format!(
                "idle wait {idle_wait} ns needs the device clock (VK_KHR_shader_clock{}); 0 waits for nothing",
                if info.device_clock { ", turned off here" } else { ", which this device lacks" }
            )));
        }
        // What this decoder runs with, from here on (the frames and the run details say it).
        let opts = DecoderOptions {
            idle_wait_ns: Some(idle_wait),
            prefetch_mib: Some(prefetch),
            ..opts
        };
        let c = &model.config;
        let max_seq = opts.max_seq.clamp(1, c.seq_len);
        // The q8 modules' IQ4 code-book table (act_q8.glsl's iq4_tab: 256 words), in a module
        // whose program has an IQ4 tensor.
        let program = Program::new(model, max_seq);
        let iq4 = [
            crate::quant::GgmlType::IQ4_NL,
            crate::quant::GgmlType::IQ4_XS,
        ];
        let iq4_tab = if iq4.iter().any(|t| (program.type_mask() >> t.id()) & 1 == 1) {
            1024
        } else {
            0
        };
        // Shared memory for a workgroup size: the input vector (SX_CAP) and the q8 path's
        // quantised input (SQ_CAP), or why the shape does not fit.
        let caps = |wg_size: u32| -> Result<(usize, usize)> {
            // Shared memory: the input vector, plus small reduction arrays.
            // Usable floats of the skewed input vector (four pad floats per 32, see SXI in
            // decode.comp), beside the small arrays.
            let shared_floats = ((info.max_shared as usize).saturating_sub(1024)) / 4 * 32 / 36;
            // The input vectors: x (dim) and the attention output (n_heads · head_size, which
            // qwen3 makes wider than dim).
            let width = c.dim.max(c.q_dim());
            if width > shared_floats {
                return Err(Error::Invalid(format!(
                    "model width {width} (dim {}, n_heads x head size {}) needs {} bytes of shared memory; the device has {}",
                    c.dim,
                    c.q_dim(),
                    width.div_ceil(32) * 36 * 4 + 1024,
                    info.max_shared
                )));
            }
            // The FFN input goes through shared memory whole when it fits, else in as few
            // block-aligned chunks as the shared memory allows (see stage_down_chunked).
            // The attention's 16-byte slots in sx (checked below): a head group's queries and the
            // subgroups' maxima, which also hold one value cluster's partials (its heads' quads
            // and the sums).
            let (hs, att_heads) = (
                c.head_size(),
                (c.n_heads / c.n_kv_heads).min(super::super::program::ATT_HEADS as usize),
            );
            let quads = hs.div_ceil(4);
            let att_slots = att_heads * quads + (wg_size / sg).max(1) as usize;
            // A chunk of the FFN input holds whole blocks of the down projection (256 elements
            // for the K-quants and IQ4_XS).
            let blk = model
                .weights
                .layers
                .iter()
                .map(|l| l.w_down.ty.block_len())
                .max()
                .unwrap_or(32)
                .max(32);
            let (sx_cap, sq_cap) = if q8 {
                // The q8 path: sx holds the dim-wide vector the norm reads (and the attention's
                // scratch); every matvec input lives quantised in sq (48 bytes per block, see
                // quant_act), the FFN width whole when it fits, else in chunks.
                let sx = c.dim.max(4 * att_slots);
                let sx_bytes = vec4s(sx) * 16;
                let left = (info.max_shared as usize).saturating_sub(1024 + iq4_tab + sx_bytes);
                let sq_fit = (left / 48).saturating_sub(1) * 32 / blk * blk;
                if sq_fit < width {
                    return Err(Error::Invalid(format!(
                        "activations q8: model width {width} needs {} bytes of shared memory; the device has {}",
                        1024 + iq4_tab + sx_bytes + (width / 32 + 1) * 48,
                        info.max_shared
                    )));
                }
                let sq = if c.hidden_dim <= sq_fit {
                    c.hidden_dim.max(width)
                } else {
                    sq_fit
                };
                (sx, sq)
            } else {
                let sx = if c.hidden_dim <= shared_floats {
                    c.hidden_dim.max(width)
                } else {
                    (shared_floats / blk * blk).max(width)
                };
                // A narrow model's vector may hold fewer 16-byte slots than its attention needs
                // (dim 64, one head of 64: 24 slots in 19): then sx grows to the attention's
                // size, as the q8 path sizes it. Only then: SX_CAP is part of the attention's
                // reduction order, so a shape that fitted keeps its bits.
                // Whole blocks, so that a chunked FFN's chunks stay block-aligned; past the device's
                // shared memory the check below refuses.
                let need = (4 * att_slots).next_multiple_of(blk);
                let sx = if vec4s(sx) < att_slots && need <= shared_floats {
                    sx.max(need)
                } else {
                    sx
                };
                (sx, 32)
            };
            // The attention (decode.comp, unit_attn) keeps a head group's query vectors with its
            // subgroups' maxima, then a value cluster's partials, in the shared vector, and runs a
            // value row's quads (four elements each) on that many lanes: shapes where these do not
            // fit are refused here.
            if att_slots > vec4s(sx_cap) {
                return Err(Error::Invalid(format!(
                    "head size {hs} with {att_heads} query heads per attention unit: the attention needs {att_slots} 16-byte slots of shared memory (the queries' {quads} quads each and one per subgroup of the {wg_size}-lane workgroup: {} bytes with the rest); the device has {} bytes",
                    vec4s(4 * att_slots) * 16 + 1024,
                    info.max_shared
                )));
            }
            if quads > wg_size as usize {
                return Err(Error::Invalid(format!(
                    "head size {hs}: the attention runs a value row's {quads} quads on as many lanes, and the workgroup has {wg_size} (--wg-size {} or more)",
                    quads.div_ceil(sg as usize) * sg as usize
                )));
            }
            Ok((sx_cap, sq_cap))
        };
        // A CPU device's loop budget (budget.rs): the defaults grow until a pass fits, and a
        // pass that cannot fit is refused here rather than failing every pass.
        let (wg_size, grid, pass_loops) = if cpu {
            budget::fit_cpu(&budget::CpuFit {
                program: &program,
                config: c,
                opts: &opts,
                device: &info.name,
                wg_size,
                grid,
                limit,
                resident: default_grid(&ctx),
                sg,
                q8,
                caps: &caps,
            })?
        } else {
            (wg_size, grid, 0)
        };
        let (sx_cap, sq_cap) = caps(wg_size)?;

        let mut dec = VulkanDecoder {
            ctx: ctx.clone(),
            opts: DecoderOptions {
                max_seq,
                ..opts.clone()
            },
            grid,
            wg_size,
            rows,
            cpu_pass_loops: pass_loops,
            vocab: c.vocab_size,
            sq_cap: sq_cap as u32,
            mat_type: {
                let w = &model.weights;
                let mut tys = w
                    .layers
                    .iter()
                    .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_down, &l.w_up])
                    .chain([w.classifier()])
                    .map(|t| t.ty);
                let first = tys.next();
                match first {
                    Some(f) if tys.all(|t| t == f) => f.id(),
                    _ => 0xFFFF,
                }
            },
            chunks: vec![],
            state: Buffer::null(),
            kv: Buffer::null(),
            kv_v: Buffer::null(),
            out: Buffer::null(),
            sync: Buffer::null(),
            prog: Buffer::null(),
            ring: Buffer::null(),
            readback: Buffer::null(),
            reset_sync: Buffer::null(),
            reset_out: Buffer::null(),
            dsl: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            pipeline_plain: vk::Pipeline::null(),
            pipeline_stats: Vec::new(),
            dpool: vk::DescriptorPool::null(),
            sets: vec![],
            pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            qpool: vk::QueryPool::null(),
            n_queries: 0,
            passes: 0,
            last_window: None,
            clock_off: None,
            rb: ReadbackLayout::default(),
            queries_per_pass: 0,
            last_slot: 0,
            last_ok: false,
            slot_stamped: vec![],
            slot_run: vec![],
            last_dispatches: 0,
            last_count: 0,
            broken: None,
            recent_walls: Default::default(),
            weight_bytes: model
                .weights
                .tensors()
                .iter()
                .map(|t| t.data.len() as u64)
                .sum(),
            logits: vec![0.0; c.vocab_size],
            program,
        };
        // From here on, Drop cleans up whatever was created if a step fails.
        dec.setup(model, sx_cap as u32, cpu)?;
        Ok(dec)
    }

    pub(super) fn setup(
        &mut self,
        model: &crate::model::Model,
        sx_cap: u32,
        cpu: bool,
    ) -> Result<()> {
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        // SAFETY: every handle is created from `d` and stored in `self`, which destroys them
        // in Drop after waiting for the device (or leaks them when the device hung).
        unsafe {
            self.pool = vkr(
                "vkCreateCommandPool",
                d.create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(ctx.info.queue_family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                ),
            )?;
            let ci = vk::CommandBufferAllocateInfo::default()
                .command_pool(self.pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            self.cmd = vkr("vkAllocateCommandBuffers", d.allocate_command_buffers(&ci))?[0];
            self.fence = vkr(
                "vkCreateFence",
                d.create_fence(&vk::FenceCreateInfo::default(), None),
            )?;
        }
        // Weights: pack tensors into chunks no larger than the storage range.
        let cap_words = (ctx.info.max_storage_range.min(1 << 31) / 4).saturating_sub(64);
        let mut places = vec![];
        let mut chunk_words: Vec<u64> = vec![0];
        let mut packed = vec![];
        for t in &self.program.tensors {
            let pk = repack(t);
            let (words, row_words, sc, x) = (pk.words, pk.row_words, pk.sc, pk.x);
            let n = words.len() as u64;
            if n > cap_words {
                return Err(Error::Invalid(format!(
                    "{}: {} MB is larger than one storage buffer can hold",
                    t.name,
                    n * 4 / 1_000_000
                )));
            }
            if chunk_words.last().copied().unwrap_or(0) + n > cap_words {
                chunk_words.push(0);
            }
            if chunk_words.len() > NCHUNK {
                return Err(Error::Invalid(format!(
                    "model needs more than {NCHUNK} weight buffers of {} MB",
                    cap_words * 4 / 1_000_000
                )));
            }
            let chunk = chunk_words.len() - 1;
            let base = chunk_words[chunk];
            places.push(TensorPlace {
                chunk: chunk as u32,
                qs: base as u32,
                sc: base as u32 + sc,
                x: base as u32 + x,
                row_words,
                words: n,
            });
            // Keep each tensor 16-byte aligned.
            chunk_words[chunk] = (base + n).div_ceil(4) * 4;
            packed.push(words);
        }
        for (i, &w) in chunk_words.iter().enumerate() {
            let b = create_buffer(
                &ctx,
                &format!("weights.chunk{i}"),
                w * 4,
                STORAGE,
                MemoryLocation::GpuOnly,
            )?;
            self.chunks.push(b);
        }
        let c_state = self.program.state_floats * 4;
        // Each cache holds cache_floats elements of the KV type (f32 or f16), rounded up to
        // whole words.
        let cache_bytes = (self.program.cache_floats * self.opts.kv.bytes()).div_ceil(4) * 4;
        // These are bound whole (the logits one slot at a time, or every slot with the pass
        // loop): each must fit one storage-buffer range.
        let range = ctx.info.max_storage_range;
        let out_slot = (self.vocab as u64 + 2 + 2 * self.grid as u64) * 4;
        let out_bound = if self.pass_loop() {
            out_slot * self.opts.chain.max(1) as u64
        } else {
            out_slot
        };
        for (name, bytes) in [
            ("state", c_state),
            ("key cache", cache_bytes),
            ("value cache", cache_bytes),
            ("logits", out_bound),
        ] {
            if bytes > range {
                return Err(Error::Invalid(format!(
                    "{name} needs {:.1} MiB but the device binds at most {:.1} MiB per storage buffer: use a shorter context (max_seq {})",
                    bytes as f64 / 1048576.0,
                    range as f64 / 1048576.0,
                    self.program.max_seq
                )));
            }
        }
        self.state = create_buffer(&ctx, "state", c_state, STORAGE, MemoryLocation::GpuOnly)?;
        self.kv = create_buffer(
            &ctx,
            "kv_cache.keys",
            cache_bytes,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        self.kv_v = create_buffer(
            &ctx,
            "kv_cache.values",
            cache_bytes,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let n_stages = self.program.stages.len() as u32;
        let n_levels = self.program.levels.len() as u32;
        let ring_slots = self.opts.chain.max(1);
        self.rb = ReadbackLayout::new(
            self.grid,
            self.vocab,
            4 + (n_stages + n_levels) * self.grid * 4,
            ring_slots,
        );
        // Every pass a submission holds has its own slot of output words and of sync words
        // (reset together before its first dispatch, so nothing but a barrier lies between
        // two chained dispatches), at strides a descriptor offset can start at. The sync
        // buffer holds one slot more: the last pass writes the next slot's token word. A sync
        // slot also holds the attention's arrival counters (zeroed, not read back).
        let slots = ring_slots as u64;
        self.out = create_buffer(
            &ctx,
            "logits",
            self.out_slot_words() as u64 * 4 * slots,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        self.sync = create_buffer(
            &ctx,
            "sync",
            self.sync_slot_words() as u64 * 4 * (slots + 1),
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let reset_sync = super::pass::sync_reset_image(self.sync_slot_words());
        let reset_out = super::pass::out_reset_image(self.vocab, self.grid);
        let image = |name: &str, words: &[u32]| {
            create_buffer(
                &ctx,
                name,
                words.len() as u64 * 4,
                STORAGE,
                MemoryLocation::GpuOnly,
            )
        };
        self.reset_sync = image("sync.reset", &reset_sync)?;
        self.reset_out = image("logits.reset", &reset_out)?;
        let ring_frame_words = self.rb.ring_frame_words as u32;
        self.ring = create_buffer(
            &ctx,
            "telemetry.ring",
            ring_frame_words as u64 * 4 * ring_slots as u64,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let mut prog_words = self.program.words(
            &places,
            (ring_frame_words, ring_slots),
            self.grid,
            self.wg_size / self.ctx.info.subgroup_size.max(1),
        );
        // A decoder option, not the model's: the idle workgroups' wait (a header word, so
        // its block stays in the kernel at every value; see the shader's grid_barrier).
        prog_words[super::super::interface::h::IDLE_WAIT_NS] = self.idle_wait_ns();
        self.prog = create_buffer(
            &ctx,
            "program",
            prog_words.len() as u64 * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let rb = self.rb.bytes();
        self.logits = vec![0.0; self.vocab * ring_slots as usize];
        self.readback = create_buffer(
            &ctx,
            "readback",
            rb,
            vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuToCpu,
        )?;

        // Uploads.
        let rope: Vec<u32> = Program::rope_table(model, self.program.max_seq as usize)
            .iter()
            .map(|f| f.to_bits())
            .collect();
        let off_rope = prog_words[crate::vulkan::program::h::OFF_ROPE] as u64;
        let mut uploads: Vec<(usize, u64, Vec<u32>)> = vec![]; // (buffer id, word offset, words)
        for (p, w) in places.iter().zip(packed) {
            uploads.push((p.chunk as usize, p.qs as u64, w));
        }
        uploads.push((100, 0, prog_words));
        uploads.push((101, off_rope, rope));
        uploads.push((102, 0, reset_sync));
        uploads.push((103, 0, reset_out));
        self.upload(uploads)?;
        // A fresh cache holds whatever the memory held; zeroed, every row a pass has not
        // written reads as 0 (a bench at depth attends over such rows).
        self.clear_kv_cache()?;
        self.build_pipeline(sx_cap, cpu)?;
        self.warm_up()?;
        Ok(())
    }

    /// Write `(buffer, word offset, words)` through a staging buffer. Buffer ids: chunk index,
    /// 100 program, 101 state, 102 and 103 the sync and output words' reset images.
    pub(super) fn upload(&mut self, items: Vec<(usize, u64, Vec<u32>)>) -> Result<()> {
        let ctx = self.ctx.clone();
        let stage_bytes: u64 = 64 << 20;
        let mut staging = create_buffer(
            &ctx,
            "staging",
            stage_bytes,
            vk::BufferUsageFlags::TRANSFER_SRC,
            MemoryLocation::CpuToGpu,
        )?;
        let r = (|| -> Result<()> {
            for (id, off, words) in items {
                let dst = match id {
                    100 => self.prog.buffer,
                    101 => self.state.buffer,
                    102 => self.reset_sync.buffer,
                    103 => self.reset_out.buffer,
                    i => self.chunks[i].buffer,
                };
                let bytes: &[u8] = unsafe_words_as_bytes(&words);
                let mut done = 0usize;
                while done < bytes.len() {
                    let n = (bytes.len() - done).min(stage_bytes as usize);
                    let map = staging
                        .alloc
                        .as_mut()
                        .and_then(|a| a.mapped_slice_mut())
                        .ok_or_else(|| Error::Vulkan("staging buffer is not host-mapped".into()))?;
                    map[..n].copy_from_slice(&bytes[done..done + n]);
                    let region = vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: off * 4 + done as u64,
                        size: n as u64,
                    };
                    // SAFETY: `cb` is this decoder's command buffer in the recording state
                    // (one_shot begins it); both buffers are live and the region lies inside
                    // each (staging holds n bytes, dst was sized for the whole upload).
                    self.one_shot(|d, cb| unsafe {
                        d.cmd_copy_buffer(cb, staging.buffer, dst, &[region])
                    })?;
                    done += n;
                }
            }
            Ok(())
        })();
        if self.broken.is_none() {
            destroy_buffer(&ctx, &mut staging);
        } // else: a copy may still be reading it; leak it rather than free it under the GPU

        r
    }

    /// Zero every row of the key and value caches (both KV types: 0.0 is all-zero bits in
    /// f32 and f16). Rows below a position the decoder then starts at read as zeros: the
    /// pass attends over them at a real context's cost (`bench --depth`).
    pub fn clear_kv_cache(&mut self) -> Result<()> {
        if let Some(why) = &self.broken {
            return Err(Error::Vulkan(format!("the decoder is broken: {why}")));
        }
        let (k, v) = (self.kv.buffer, self.kv_v.buffer);
        // SAFETY: `cb` is recording (one_shot begins it); both caches are live buffers created
        // with TRANSFER_DST, filled whole. The next pass's transfer-to-compute barrier orders
        // these writes before any shader reads them.
        self.one_shot(|d, cb| unsafe {
            d.cmd_fill_buffer(cb, k, 0, vk::WHOLE_SIZE, 0);
            d.cmd_fill_buffer(cb, v, 0, vk::WHOLE_SIZE, 0);
        })
    }

    /// Dispatch the pipeline once (one workgroup, the calibration branch) so its JIT compile
    /// happens here and not under the first pass's watchdog: llvmpipe compiles a pipeline at
    /// its first dispatch, which for this kernel takes seconds on a small CPU.
    pub(super) fn warm_up(&mut self) -> Result<()> {
        let saved = self.opts.fence_timeout;
        self.opts.fence_timeout = Some(Duration::from_secs(600));
        let (pipeline, layout, set) = (self.pipeline, self.layout, self.sets[0]);
        let push: [u32; PUSH_WORDS] = calibration_push();
        // SAFETY: `cb` is recording (one_shot begins it); pipeline, layout and set are this
        // decoder's live handles, and the push constants match the layout's range.
        let r = self.one_shot(|d, cb| unsafe {
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
            d.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
            d.cmd_push_constants(
                cb,
                layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                unsafe_words_as_bytes(&push),
            );
            d.cmd_dispatch(cb, 1, 1, 1);
        });
        self.opts.fence_timeout = saved;
        r.map_err(|e| {
            Error::Vulkan(format!(
                "compiling the decode pipeline (first dispatch): {e}"
            ))
        })
    }

    /// Reset and begin the decoder's command buffer.
    pub(super) fn begin_commands(&self) -> Result<vk::CommandBuffer> {
        let d = &self.ctx.device;
        // SAFETY: the command buffer is ours and idle (every submission is waited on).
        unsafe {
            vkr(
                "vkResetCommandBuffer",
                d.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty()),
            )?;
            vkr(
                "vkBeginCommandBuffer",
                d.begin_command_buffer(
                    self.cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                ),
            )?;
        }
        Ok(self.cmd)
    }

    /// End, submit and wait up to `timeout` (the watchdog). `Ok(false)`: it timed out; the
    /// caller reports it and the decoder refuses further work.
    pub(super) fn submit_and_wait(&mut self, timeout: Duration, what: &str) -> Result<bool> {
        let d = &self.ctx.device;
        // SAFETY: the command buffer was recorded by begin_commands and its users; the fence is
        // unsignalled (reset after every completed wait).
        unsafe {
            vkr("vkEndCommandBuffer", d.end_command_buffer(self.cmd))?;
            let cbs = [self.cmd];
            let si = [vk::SubmitInfo::default().command_buffers(&cbs)];
            self.ctx.submit(&si, self.fence)?;
            let r = d.wait_for_fences(&[self.fence], true, timeout.as_nanos() as u64);
            if r == Err(vk::Result::TIMEOUT) {
                self.broken = Some(format!(
                    "{what} did not finish within {:.1} s (watchdog); the device is abandoned",
                    timeout.as_secs_f64()
                ));
                // The GPU may never finish it: from now on nothing waits for this device.
                self.ctx.mark_hung();
                return Ok(false);
            }
            vkr("vkWaitForFences", r)?;
            vkr("vkResetFences", d.reset_fences(&[self.fence]))?;
        }
        Ok(true)
    }

    pub(super) fn one_shot(
        &mut self,
        rec: impl FnOnce(&ash::Device, vk::CommandBuffer),
    ) -> Result<()> {
        let cb = self.begin_commands()?;
        rec(&self.ctx.device, cb);
        let limit = self.opts.fence_timeout.unwrap_or(Duration::from_secs(60));
        if !self.submit_and_wait(limit, "a transfer")? {
            return Err(Error::Watchdog(format!(
                "a transfer did not complete within {} s",
                limit.as_secs_f64()
            )));
        }
        Ok(())
    }
}

/// The 16-byte slots of a shared vector of `sx` floats (four pad floats per 32: SXI in
/// decode.comp), as unit_attn counts them.
fn vec4s(sx: usize) -> usize {
    sx / 4 + sx / 32 + 1
}
