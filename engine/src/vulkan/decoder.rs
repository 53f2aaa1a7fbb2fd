//! `VulkanDecoder`: uploads a model, builds the decode pipeline and runs one pass per token,
//! as one persistent dispatch (`Dispatch::Mega`) or one dispatch per stage (`Dispatch::Multi`).
//!
//! Safety is always on: every pass resets the sync words and poisons the logits and argmax,
//! the kernel's spins are bounded and raise the fail word, each workgroup stamps its
//! residency, and the host waits on the fence with a watchdog timeout. A pass's [`FailWord`]
//! is returned with its result, pass or fail, for the caller to print.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::context::{vkr, DeviceKind, GpuContext};
use super::program::{repack, Program, StageKind, TensorPlace};
use crate::model::Model;
use crate::{Error, Result};
use baro_telemetry::{FailReport, Frame, LevelDetails, RunDetails, StageDetails};

static SPV_CLOCK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decode.spv"));
static SPV_NOCLOCK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decode_noclock.spv"));
static SPV_CPU: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decode_cpu.spv"));
static SPV_CPU_NOCLOCK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decode_cpu_noclock.spv"));

use super::interface::{spec, sy};

/// Poison written over the logits before each pass (a NaN no arithmetic produces).
pub const POISON: u32 = 0x7FC0_0BAD;
/// Weight buffers bound (shader `NCHUNK`).
const NCHUNK: usize = 8;

/// Fail-word bits (the telemetry crate's definition, shared with the shader's `FAIL_*`).
pub use baro_telemetry::fail::bits as fail;
/// The decoded fail word of one pass (the telemetry crate's type).
pub use baro_telemetry::FailWord;

/// How a pass is dispatched (the telemetry crate's type: `mega` or `multi`; "mode" is kept
/// for the GPU's power states).
pub use baro_telemetry::Dispatch;

/// Decoder options.
#[derive(Clone, Debug)]
pub struct DecoderOptions {
    /// Dispatch style.
    pub dispatch: Dispatch,
    /// Workgroups; default from the device ([`default_grid`]).
    pub grid: Option<u32>,
    /// Workgroup size; default 512 (dim < 4096) or 1024 lanes on GPUs, 64 on CPU devices.
    pub wg_size: Option<u32>,
    /// Positions the KV cache holds (clamped to the model's context).
    pub max_seq: usize,
    /// Write the telemetry ring.
    pub instrument: bool,
    /// Grid-barrier spin bound.
    pub spin_timeout: Duration,
    /// Host watchdog on each pass's fence; `None`: automatic ([`VulkanDecoder::watchdog`]:
    /// the expected pass time plus the spin timeout plus a second on GPUs, more slack on CPU
    /// devices, whose passes are at the mercy of the OS scheduler).
    pub fence_timeout: Option<Duration>,
    /// Copy the logits back every pass (needed for sampling and checks).
    pub read_logits: bool,
    /// Test only: make this stage kind do extra work.
    pub test_slow_kind: Option<StageKind>,
    /// Test only: this workgroup never arrives at a barrier.
    pub test_stall_wg: Option<u32>,
    /// Run the documented fallback for devices without VK_KHR_shader_clock even where the
    /// clock exists: spins are bounded by the iteration budget alone and stamps read 0.
    pub no_device_clock: bool,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        DecoderOptions {
            dispatch: Dispatch::Mega,
            grid: None,
            wg_size: None,
            max_seq: 2048,
            instrument: false,
            spin_timeout: Duration::from_secs(1),
            fence_timeout: None,
            read_logits: true,
            test_slow_kind: None,
            test_stall_wg: None,
            no_device_clock: false,
        }
    }
}

/// Result of one pass.
#[derive(Clone, Debug)]
pub struct Pass {
    /// Argmax of the logits (lowest index on ties), `u32::MAX` if never written.
    pub argmax: u32,
    /// Its logit.
    pub argmax_value: f32,
    /// The fail word.
    pub fail: FailWord,
    /// GPU time of the whole pass from timestamps, ns.
    pub gpu_ns: Option<u64>,
    /// Per-dispatch GPU times (multi mode), ns.
    pub dispatch_ns: Vec<u64>,
    /// Host wall time from submit to fence.
    pub wall: Duration,
}

struct Buffer {
    buffer: vk::Buffer,
    alloc: Option<Allocation>,
}

impl Buffer {
    fn null() -> Self {
        Buffer {
            buffer: vk::Buffer::null(),
            alloc: None,
        }
    }
}

/// Default grid for a device: NVIDIA SM count (one 256-lane workgroup per SM fits beside the
/// decoder's registers and shared memory); CPU devices: LP_NUM_THREADS or the core count
/// (lavapipe runs one workgroup per pool thread); otherwise 64.
pub fn default_grid(ctx: &GpuContext) -> u32 {
    let i = &ctx.info;
    if i.kind == DeviceKind::Cpu {
        let env = std::env::var("LP_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n > 0);
        return env
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    }
    i.sm_count.unwrap_or(64)
}

/// The largest workgroup size the decoder runs on a device: min(max workgroup size, 60
/// subgroups), rounded down to a multiple of the subgroup size.
pub fn max_wg_size(info: &super::context::DeviceInfo) -> u32 {
    let sg = info.subgroup_size.max(1);
    info.max_wg.min(60 * sg) / sg * sg
}

/// The decoder.
pub struct VulkanDecoder {
    ctx: Arc<GpuContext>,
    /// The program it runs.
    pub program: Program,
    /// Options in force.
    pub opts: DecoderOptions,
    /// Workgroups.
    pub grid: u32,
    /// Workgroup size.
    pub wg_size: u32,
    vocab: usize,
    mat_type: u32,
    chunks: Vec<Buffer>,
    state: Buffer,
    kv: Buffer,
    out: Buffer,
    sync: Buffer,
    prog: Buffer,
    ring: Buffer,
    readback: Buffer,
    ring_frame_words: u32,
    dsl: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    dpool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    /// This decoder's own command pool (a pool must be externally synchronized; one per
    /// decoder lets decoders run on different threads without a lock).
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    qpool: vk::QueryPool,
    n_queries: u32,
    passes: u32,
    last_window: Option<(u64, u64)>,
    broken: Option<String>,
    /// Wall times of the last completed passes (the watchdog's expectation).
    recent_walls: std::collections::VecDeque<Duration>,
    /// Weight bytes (the first pass's expectation on CPU devices).
    weight_bytes: u64,
    logits: Vec<f32>,
}

/// Passes the watchdog's expectation looks back over.
const RECENT_WALLS: usize = 32;

fn create_buffer(
    ctx: &GpuContext,
    name: &str,
    size: u64,
    usage: vk::BufferUsageFlags,
    loc: MemoryLocation,
) -> Result<Buffer> {
    let size = size.max(16);
    let ci = vk::BufferCreateInfo::default()
        .size(size)
        .usage(usage)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    let d = &ctx.device;
    // SAFETY: valid device and create info.
    let buffer = vkr(&format!("vkCreateBuffer {name}"), unsafe {
        d.create_buffer(&ci, None)
    })?;
    // SAFETY: buffer just created.
    let requirements = unsafe { d.get_buffer_memory_requirements(buffer) };
    let alloc = ctx
        .allocator
        .lock()
        .map_err(|_| Error::Vulkan("allocator lock poisoned".into()))?
        .allocate(&AllocationCreateDesc {
            name,
            requirements,
            location: loc,
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        });
    let alloc = match alloc {
        Ok(a) => a,
        Err(e) => {
            // SAFETY: unbound buffer.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(Error::Vulkan(format!(
                "allocating {name} ({:.1} MB): {e}",
                size as f64 / 1e6
            )));
        }
    };
    // SAFETY: memory from the allocator satisfies the requirements.
    if let Err(e) = unsafe { d.bind_buffer_memory(buffer, alloc.memory(), alloc.offset()) } {
        let _ = ctx.allocator.lock().map(|mut a| a.free(alloc));
        // SAFETY: buffer unused.
        unsafe { d.destroy_buffer(buffer, None) };
        return Err(Error::Vulkan(format!("binding {name}: {e:?}")));
    }
    Ok(Buffer {
        buffer,
        alloc: Some(alloc),
    })
}

fn destroy_buffer(ctx: &GpuContext, b: &mut Buffer) {
    if let Some(a) = b.alloc.take() {
        if let Ok(mut al) = ctx.allocator.lock() {
            let _ = al.free(a);
        }
        // SAFETY: the device is idle (callers wait) and the buffer is no longer used.
        unsafe { ctx.device.destroy_buffer(b.buffer, None) };
    }
}

const STORAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw(),
);

impl VulkanDecoder {
    /// Upload `model` and build the pipeline.
    pub fn new(ctx: Arc<GpuContext>, model: &Model, opts: DecoderOptions) -> Result<VulkanDecoder> {
        let info = ctx.info.clone();
        let cpu = info.kind == DeviceKind::Cpu;
        if opts.grid == Some(0) {
            return Err(Error::Invalid(
                "grid 0: a pass needs at least one workgroup".into(),
            ));
        }
        let grid = opts.grid.unwrap_or_else(|| default_grid(&ctx)).max(1);
        // Measured on the H200 (bench/RESULTS.md, round 4): more warps per SM keep more weight
        // loads in flight; 512 lanes are best for d 2048, 1024 for d 4096. CPU devices: 64.
        // A default is clamped to the device; a size the caller asked for is refused when the
        // device cannot run it, naming the real limit.
        let sg = info.subgroup_size.max(1);
        let limit = max_wg_size(&info);
        let wg_size = match opts.wg_size {
            Some(w) => w,
            None => (if cpu {
                64
            } else if model.config.dim >= 4096 {
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
        if grid > 65535 {
            return Err(Error::Invalid(format!("grid {grid} is larger than 65535")));
        }
        let c = &model.config;
        let max_seq = opts.max_seq.clamp(1, c.seq_len);
        // Shared memory: the input vector, plus small reduction arrays.
        // Usable floats of the skewed input vector (one pad per 32), beside the small arrays.
        let shared_floats = ((info.max_shared as usize).saturating_sub(1024)) / 4 * 32 / 33;
        if c.dim > shared_floats {
            return Err(Error::Invalid(format!(
                "model dim {} needs {} bytes of shared memory; the device has {}",
                c.dim,
                c.dim * 4 + 1024,
                info.max_shared
            )));
        }
        // The FFN input goes through shared memory whole when it fits, else in as few
        // block-aligned chunks as the shared memory allows (see stage_down_chunked).
        let sx_cap = if c.hidden_dim <= shared_floats {
            c.hidden_dim.max(c.dim)
        } else {
            (shared_floats / 32 * 32).max(c.dim)
        };
        let program = Program::new(model, max_seq);

        let mut dec = VulkanDecoder {
            ctx: ctx.clone(),
            opts: DecoderOptions {
                max_seq,
                ..opts.clone()
            },
            grid,
            wg_size,
            vocab: c.vocab_size,
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
            out: Buffer::null(),
            sync: Buffer::null(),
            prog: Buffer::null(),
            ring: Buffer::null(),
            readback: Buffer::null(),
            ring_frame_words: 0,
            dsl: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            dpool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            qpool: vk::QueryPool::null(),
            n_queries: 0,
            passes: 0,
            last_window: None,
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
        dec.setup(c, sx_cap as u32, cpu)?;
        Ok(dec)
    }

    fn setup(&mut self, cfg: &crate::model::Config, sx_cap: u32, cpu: bool) -> Result<()> {
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
            let (words, row_words, sc) = repack(t);
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
        // These are bound whole: each must fit one storage-buffer range.
        let range = ctx.info.max_storage_range;
        for (name, bytes) in [
            ("state", c_state),
            ("kv_cache", self.program.kv_floats * 4),
            ("logits", (self.vocab as u64 + 2 + 2 * self.grid as u64) * 4),
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
            "kv_cache",
            self.program.kv_floats * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let out_words = self.vocab as u64 + 2 + 2 * self.grid as u64;
        self.out = create_buffer(
            &ctx,
            "logits",
            out_words * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let sync_words = 16 + self.grid as u64;
        self.sync = create_buffer(
            &ctx,
            "sync",
            sync_words * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let n_stages = self.program.stages.len() as u32;
        let n_levels = self.program.levels.len() as u32;
        self.ring_frame_words = 4 + (n_stages + n_levels) * self.grid * 4;
        let ring_slots = 1u32;
        self.ring = create_buffer(
            &ctx,
            "telemetry.ring",
            self.ring_frame_words as u64 * 4 * ring_slots as u64,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let prog_words = self
            .program
            .words(&places, (self.ring_frame_words, ring_slots));
        self.prog = create_buffer(
            &ctx,
            "program",
            prog_words.len() as u64 * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        let rb = (sync_words + out_words + self.ring_frame_words as u64) * 4;
        self.readback = create_buffer(
            &ctx,
            "readback",
            rb,
            vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuToCpu,
        )?;

        // Uploads.
        let rope: Vec<u32> = Program::rope_table(cfg, self.program.max_seq as usize)
            .iter()
            .map(|f| f.to_bits())
            .collect();
        let off_rope = prog_words[super::program::h::OFF_ROPE] as u64;
        let mut uploads: Vec<(usize, u64, Vec<u32>)> = vec![]; // (buffer id, word offset, words)
        for (p, w) in places.iter().zip(packed) {
            uploads.push((p.chunk as usize, p.qs as u64, w));
        }
        uploads.push((100, 0, prog_words));
        uploads.push((101, off_rope, rope));
        self.upload(uploads)?;
        self.build_pipeline(sx_cap, cpu)?;
        self.warm_up()?;
        Ok(())
    }

    /// Write `(buffer, word offset, words)` through a staging buffer. Buffer ids: chunk index,
    /// 100 program, 101 state.
    fn upload(&mut self, items: Vec<(usize, u64, Vec<u32>)>) -> Result<()> {
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

    /// Dispatch the pipeline once (one workgroup, the calibration branch) so its JIT compile
    /// happens here and not under the first pass's watchdog: llvmpipe compiles a pipeline at
    /// its first dispatch, which for this kernel takes seconds on a small CPU.
    fn warm_up(&mut self) -> Result<()> {
        let saved = self.opts.fence_timeout;
        self.opts.fence_timeout = Some(Duration::from_secs(600));
        let (pipeline, layout, set) = (self.pipeline, self.layout, self.set);
        let push: [u32; 8] = [0, 0, 0, 0, 0, 0, 0, 1];
        // SAFETY: `cb` is recording (one_shot begins it); pipeline, layout and set are this
        // decoder's live handles, and the push constants match the layout's 32-byte range.
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
    fn begin_commands(&self) -> Result<vk::CommandBuffer> {
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
    fn submit_and_wait(&mut self, timeout: Duration, what: &str) -> Result<bool> {
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

    fn one_shot(&mut self, rec: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<()> {
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

    fn build_pipeline(&mut self, sx_cap: u32, cpu: bool) -> Result<()> {
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        let spv = match (cpu, self.has_clock()) {
            (false, true) => SPV_CLOCK,
            (false, false) => SPV_NOCLOCK,
            (true, true) => SPV_CPU,
            (true, false) => SPV_CPU_NOCLOCK,
        };
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spv))
            .map_err(|e| Error::Vulkan(format!("embedded SPIR-V: {e}")))?;
        let n_chunks = self.chunks.len();
        // SAFETY: all create infos reference live locals; handles are stored for Drop.
        unsafe {
            let mut bindings = vec![vk::DescriptorSetLayoutBinding::default()
                .binding(0)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(NCHUNK as u32)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)];
            for b in 1..=6 {
                bindings.push(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                );
            }
            self.dsl = vkr(
                "vkCreateDescriptorSetLayout",
                d.create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                ),
            )?;
            let pcr = [vk::PushConstantRange {
                stage_flags: vk::ShaderStageFlags::COMPUTE,
                offset: 0,
                size: 32,
            }];
            let dsls = [self.dsl];
            self.layout = vkr(
                "vkCreatePipelineLayout",
                d.create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&dsls)
                        .push_constant_ranges(&pcr),
                    None,
                ),
            )?;
            let mega = self.opts.dispatch == Dispatch::Mega;
            // Back-edge budget: lavapipe ends loops silently at 65,535; a GPU without a
            // device clock bounds its spins by count (~1 s at ~50 ns per poll). Counted
            // conservatively (quantised blocks' inner loops included), so the budget can sit
            // just under the limit.
            let budget = if cpu {
                64_000
            } else if !self.has_clock() {
                20_000_000
            } else {
                0
            };
            // Indexed by the interface table's ids, so no value can land on another's id.
            let mut spec = [0u32; spec::COUNT as usize];
            for (id, value) in [
                (spec::WG_SIZE, self.wg_size),
                (spec::MEGA, mega as u32),
                (spec::GRID, self.grid),
                (spec::SX_CAP, sx_cap),
                (spec::INSTR, self.opts.instrument as u32),
                (spec::HAS_CLOCK, self.has_clock() as u32),
                (spec::ITER_BUDGET, budget),
                (spec::CPU_PAUSE, cpu as u32),
                (
                    spec::TEST_SLOW_KIND,
                    self.opts.test_slow_kind.map_or(0xFFFF, |k| k as u32),
                ),
                (
                    spec::TEST_STALL_WG,
                    self.opts.test_stall_wg.unwrap_or(u32::MAX),
                ),
                (spec::NCHUNK_USED, n_chunks as u32),
                (spec::MAX_WG, 1024),
                (spec::MAT_TY, self.mat_type),
            ] {
                spec[id as usize] = value;
            }
            let entries: Vec<vk::SpecializationMapEntry> = (0..spec::COUNT)
                .map(|i| vk::SpecializationMapEntry {
                    constant_id: i,
                    offset: i * 4,
                    size: 4,
                })
                .collect();
            let spec_bytes = unsafe_words_as_bytes(&spec);
            let si = vk::SpecializationInfo::default()
                .map_entries(&entries)
                .data(spec_bytes);
            // Created last, so no error path above leaks it; destroyed right after use.
            let module = vkr(
                "vkCreateShaderModule",
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None),
            )?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main")
                .specialization_info(&si);
            let pci = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(self.layout)];
            let p = d.create_compute_pipelines(vk::PipelineCache::null(), &pci, None);
            d.destroy_shader_module(module, None);
            self.pipeline = match p {
                Ok(v) => v[0],
                Err((_, e)) => {
                    return Err(Error::Vulkan(format!(
                        "creating the decode pipeline: {e:?}"
                    )))
                }
            };
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: NCHUNK as u32 + 6,
            }];
            self.dpool = vkr(
                "vkCreateDescriptorPool",
                d.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(1)
                        .pool_sizes(&sizes),
                    None,
                ),
            )?;
            self.set = vkr(
                "vkAllocateDescriptorSets",
                d.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(self.dpool)
                        .set_layouts(&dsls),
                ),
            )?[0];
            let chunk_infos: Vec<vk::DescriptorBufferInfo> = (0..NCHUNK)
                .map(|i| {
                    let b = &self.chunks[i.min(n_chunks - 1)];
                    vk::DescriptorBufferInfo {
                        buffer: b.buffer,
                        offset: 0,
                        range: vk::WHOLE_SIZE,
                    }
                })
                .collect();
            let one = |b: &Buffer| {
                [vk::DescriptorBufferInfo {
                    buffer: b.buffer,
                    offset: 0,
                    range: vk::WHOLE_SIZE,
                }]
            };
            let infos = [
                one(&self.state),
                one(&self.kv),
                one(&self.out),
                one(&self.sync),
                one(&self.prog),
                one(&self.ring),
            ];
            let mut writes = vec![vk::WriteDescriptorSet::default()
                .dst_set(self.set)
                .dst_binding(0)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&chunk_infos)];
            for (i, inf) in infos.iter().enumerate() {
                writes.push(
                    vk::WriteDescriptorSet::default()
                        .dst_set(self.set)
                        .dst_binding(i as u32 + 1)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(inf),
                );
            }
            d.update_descriptor_sets(&writes, &[]);
            self.n_queries = 2 + self.program.stages.len() as u32 * 2;
            let qci = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(self.n_queries);
            self.qpool = vkr("vkCreateQueryPool", d.create_query_pool(&qci, None))?;
        }
        Ok(())
    }
}

/// One global memory barrier from (`src`, `src_access`) to (`dst`, `dst_access`).
///
/// # Safety
/// `cb` must be a command buffer of `d` in the recording state.
unsafe fn barrier(
    d: &ash::Device,
    cb: vk::CommandBuffer,
    src: vk::PipelineStageFlags,
    dst: vk::PipelineStageFlags,
    src_access: vk::AccessFlags,
    dst_access: vk::AccessFlags,
) {
    let b = [vk::MemoryBarrier::default()
        .src_access_mask(src_access)
        .dst_access_mask(dst_access)];
    // SAFETY: guaranteed by the caller.
    unsafe { d.cmd_pipeline_barrier(cb, src, dst, vk::DependencyFlags::empty(), &b, &[], &[]) };
}

/// View u32 words as bytes (little-endian hosts only, which is all Vulkan runs on here).
fn unsafe_words_as_bytes(w: &[u32]) -> &[u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length is exact.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
}

impl VulkanDecoder {
    /// The device this decoder runs on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Whether the kernel reads the device clock (VK_KHR_shader_clock present and not
    /// disabled).
    pub fn has_clock(&self) -> bool {
        self.ctx.info.device_clock && !self.opts.no_device_clock
    }

    /// Name of level `i`.
    pub fn level_name(&self, i: u32) -> String {
        self.program
            .levels
            .get(i as usize)
            .map_or_else(|| format!("#{i}"), |l| l.name.clone())
    }

    /// Logits of the last pass (valid when `read_logits` is on).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Static details of this decoder's program for the telemetry stream.
    pub fn run_details(&self, model: &str) -> RunDetails {
        let p = &self.program;
        RunDetails {
            schema_version: baro_telemetry::SCHEMA_VERSION,
            device: self.ctx.info.name.clone(),
            driver: self.ctx.info.driver.clone(),
            device_kind: self.ctx.info.kind,
            model: model.to_string(),
            dispatch: self.opts.dispatch,
            grid: self.grid,
            wg_size: self.wg_size,
            stages: p
                .stages
                .iter()
                .enumerate()
                .map(|(i, s)| StageDetails {
                    id: i as u32,
                    name: s.name.as_str().into(),
                    level: s.level,
                    kind: baro_telemetry::StageKind::from_code(s.kind as u32)
                        .unwrap_or(baro_telemetry::StageKind::Argmax),
                    rows: s.rows,
                    units: s.units,
                })
                .collect(),
            levels: p
                .levels
                .iter()
                .enumerate()
                .map(|(i, l)| LevelDetails {
                    index: i as u32,
                    name: l.name.as_str().into(),
                    stages: (l.first..l.first + l.count).collect(),
                })
                .collect(),
            instrumented: self.opts.instrument,
            check: None,
        }
    }

    /// Build the telemetry frame of the pass just run (`p` is what [`Self::step`] returned).
    /// Stage timings come from the in-kernel ring when instrumentation is on; a torn ring
    /// frame is flagged, never read.
    pub fn frame(
        &self,
        details: &RunDetails,
        pass_no: u64,
        pos: usize,
        token: u32,
        next: u32,
        p: &Pass,
    ) -> Frame {
        let mut f = Frame {
            pass: pass_no,
            pos: pos as u32,
            token,
            next,
            wall_ns: p.wall.as_nanos() as u64,
            gpu_ns: p.gpu_ns,
            fail: FailReport::new(p.fail, |l| details.level_name(l)),
            dispatch_ns: p.dispatch_ns.clone(),
            timestamp_start_ns: self.last_window.map(|(t0, _)| t0),
            ..Default::default()
        };
        // Without a device clock every stamp reads 0: there is nothing to decode (not torn).
        if let Some(words) = self.last_frame().filter(|_| self.has_clock()) {
            let mega = self.opts.dispatch == Dispatch::Mega;
            // The sequence word is pass_id + 1 of the pass just run (`passes` was bumped).
            match details.ring_layout().decode(&words, self.passes, mega) {
                Ok(r) => {
                    let disp: &[u64] = if mega { &[] } else { &p.dispatch_ns };
                    f.stages = r
                        .spans
                        .stage_timings(&details.stages, &details.levels, disp);
                    f.barriers = r.spans.barrier_timings();
                    f.device_start_ns = Some(r.device_start_ns);
                    f.spans = r.spans;
                }
                Err(_) => f.torn = true,
            }
        }
        f
    }

    /// Logits of the last pass, mutable (samplers scale them in place).
    pub fn logits_mut(&mut self) -> &mut [f32] {
        &mut self.logits
    }

    /// The raw telemetry frame of the last pass (instrumented decoders), as words.
    pub fn last_frame(&self) -> Option<Vec<u32>> {
        if !self.opts.instrument {
            return None;
        }
        let sync_words = 16 + self.grid as usize;
        let out_words = self.vocab + 2 + 2 * self.grid as usize;
        let map = self.readback.alloc.as_ref()?.mapped_slice()?;
        let start = (sync_words + out_words) * 4;
        let n = self.ring_frame_words as usize * 4;
        Some(
            map[start..start + n]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        )
    }

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

/// Device clock ↔ timestamp-query calibration (see [`VulkanDecoder::calibrate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// `timestamp_ns − clock_ns` at the sample (low 32 bits of the clock are what moves on
    /// lavapipe: apply with wrapping arithmetic).
    pub offset_ns: i64,
    /// Half the width of the timestamp window around the clock sample.
    pub uncertainty_ns: u64,
    /// Timestamp (ns) at which it was taken.
    pub at_ts_ns: u64,
}

impl VulkanDecoder {
    /// Calibrate the shader's device clock against the timestamp-query domain: `samples`
    /// single-workgroup dispatches that read the clock between two timestamps; the tightest
    /// window wins. Returns `None` without a device clock or timestamps.
    pub fn calibrate(&mut self, samples: usize) -> Result<Option<Calibration>> {
        if !self.has_clock() || self.ctx.info.timestamp_bits == 0 {
            return Ok(None);
        }
        let period = self.ctx.info.timestamp_period as f64;
        let mut best: Option<Calibration> = None;
        let (pipeline, layout, set, qpool, sync, readback) = (
            self.pipeline,
            self.layout,
            self.set,
            self.qpool,
            self.sync.buffer,
            self.readback.buffer,
        );
        for _ in 0..samples.max(1) {
            let push: [u32; 8] = [0, 0, 0, 0, 0, 0, 0, 1];
            // SAFETY: `cb` is recording (one_shot begins it); the query pool, pipeline,
            // layout, set and buffers are this decoder's live handles; the copy reads 8 bytes
            // inside `sync` and writes them at the start of `readback`.
            self.one_shot(|d, cb| unsafe {
                d.cmd_reset_query_pool(cb, qpool, 0, 2);
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(
                    cb,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    0,
                    &[set],
                    &[],
                );
                d.cmd_push_constants(
                    cb,
                    layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    unsafe_words_as_bytes(&push),
                );
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qpool, 0);
                d.cmd_dispatch(cb, 1, 1, 1);
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qpool, 1);
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
                    sync,
                    readback,
                    &[vk::BufferCopy {
                        src_offset: sy::CALIB as u64 * 4,
                        dst_offset: 0,
                        size: 8,
                    }],
                );
                barrier(
                    d,
                    cb,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::HOST,
                    vk::AccessFlags::TRANSFER_WRITE,
                    vk::AccessFlags::HOST_READ,
                );
            })?;
            let mut ts = [0u64; 2];
            // SAFETY: the queries were written by the submission waited on above.
            let got = unsafe {
                self.ctx.device.get_query_pool_results(
                    qpool,
                    0,
                    &mut ts,
                    vk::QueryResultFlags::TYPE_64,
                )
            };
            vkr("vkGetQueryPoolResults", got)?;
            let map = self
                .readback
                .alloc
                .as_ref()
                .and_then(|a| a.mapped_slice())
                .ok_or_else(|| Error::Vulkan("readback buffer is not host-mapped".into()))?;
            let clock = u64::from_le_bytes([
                map[0], map[1], map[2], map[3], map[4], map[5], map[6], map[7],
            ]);
            let t0 = (ts[0] as f64 * period) as u64;
            let t1 = (ts[1] as f64 * period) as u64;
            let mid = t0 / 2 + t1 / 2;
            let c = Calibration {
                offset_ns: mid as i64 - clock as i64,
                uncertainty_ns: t1.saturating_sub(t0) / 2,
                at_ts_ns: mid,
            };
            if best.is_none_or(|b| c.uncertainty_ns < b.uncertainty_ns) {
                best = Some(c);
            }
        }
        Ok(best)
    }

    /// The last pass's timestamp window `(start, end)` in ns of the timestamp domain.
    pub fn last_pass_window(&self) -> Option<(u64, u64)> {
        self.last_window
    }
}

impl crate::generate::Decode for VulkanDecoder {
    fn max_seq(&self) -> usize {
        self.program.max_seq as usize
    }

    fn forward(&mut self, token: u32, pos: usize) -> Result<&mut [f32]> {
        let p = self.step(token, pos)?;
        if !p.fail.ok() {
            return Err(Error::Vulkan(format!(
                "pass at position {pos}: {}",
                p.fail.line(|l| self.level_name(l))
            )));
        }
        Ok(&mut self.logits)
    }
}

impl Drop for VulkanDecoder {
    fn drop(&mut self) {
        let ctx = self.ctx.clone();
        if ctx.is_hung() {
            // Some work on this device missed its watchdog and may never finish: waiting for
            // the device could block for minutes, and freeing what it may still use is
            // undefined. Leak every handle (the process exit reclaims them).
            return;
        }
        let d = &ctx.device;
        // SAFETY: wait for the device, then destroy every handle this decoder created.
        unsafe {
            ctx.wait_idle();
            if self.qpool != vk::QueryPool::null() {
                d.destroy_query_pool(self.qpool, None);
            }
            if self.dpool != vk::DescriptorPool::null() {
                d.destroy_descriptor_pool(self.dpool, None);
            }
            if self.pipeline != vk::Pipeline::null() {
                d.destroy_pipeline(self.pipeline, None);
            }
            if self.layout != vk::PipelineLayout::null() {
                d.destroy_pipeline_layout(self.layout, None);
            }
            if self.dsl != vk::DescriptorSetLayout::null() {
                d.destroy_descriptor_set_layout(self.dsl, None);
            }
            if self.fence != vk::Fence::null() {
                d.destroy_fence(self.fence, None);
            }
            if self.cmd != vk::CommandBuffer::null() {
                d.free_command_buffers(self.pool, &[self.cmd]);
            }
            if self.pool != vk::CommandPool::null() {
                d.destroy_command_pool(self.pool, None);
            }
        }
        let mut bufs = std::mem::take(&mut self.chunks);
        for b in [
            &mut self.state,
            &mut self.kv,
            &mut self.out,
            &mut self.sync,
            &mut self.prog,
            &mut self.ring,
            &mut self.readback,
        ] {
            destroy_buffer(&ctx, b);
        }
        for b in bufs.iter_mut() {
            destroy_buffer(&ctx, b);
        }
    }
}
