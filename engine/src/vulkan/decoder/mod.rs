//! `VulkanDecoder`: uploads a model, builds the decode pipeline and runs one pass per token,
//! as one persistent dispatch (`Dispatch::Mega`) or one dispatch per stage (`Dispatch::Multi`).
//!
//! Safety is always on: every pass resets the sync words and poisons the logits and argmax,
//! the kernel's spins are bounded and raise the fail word, each workgroup stamps its
//! residency, and the host waits on the fence with a watchdog timeout. A pass's [`FailWord`]
//! is returned with its result, pass or fail, for the caller to print.
//!
//! Files: this one (options, the decoder's state, buffers, drop), `setup` (buffers, upload,
//! warm-up, submission), `pipeline` (SPIR-V variant, specialisation, the plain pipeline of a
//! sampled run, compiler statistics), `frame` (run details, frame building, ring readback),
//! `pass` (one pass: recording, submission under the watchdog, fail word and
//! logits readback), `readback` (where each pass's results lie in the readback buffer),
//! `calibrate` (device clock ↔ timestamps ↔ host).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::context::{vkr, DeviceKind, GpuContext};
use super::program::{repack, Program, StageKind, TensorPlace};
pub use crate::act::ActType;
pub use crate::kv::KvType;
use crate::model::Model;
use crate::{Error, Result};
use baro_telemetry::{
    FailReport, Frame, LevelDetails, PipelineStat, PipelineStats, RunDetails, StageDetails,
    StatValue,
};

// The decode modules: `decode` (GPUs, device clock), `_noclock`, `_cpu` (lavapipe's memory
// model), each with `_kv16` (able to store the KV cache as f16: it declares 16-bit storage, so
// it loads only where storageBuffer16BitAccess is enabled) and `_q8` (the q8 activation path:
// integer dot products). The reference path (f32 KV, f32 activations) runs the modules with
// neither, which every device loads.
mod modules {
    include!(concat!(env!("OUT_DIR"), "/modules.rs"));
}

/// The SPIR-V of the module for a CPU device or a GPU, with or without the device clock,
/// the f16-capable KV cache and the q8 activation path.
fn module(cpu: bool, clock: bool, kv16: bool, q8: bool, looped: bool) -> &'static [u8] {
    let name = format!(
        "decode{}{}{}{}{}",
        if cpu { "_cpu" } else { "" },
        if clock { "" } else { "_noclock" },
        if kv16 { "_kv16" } else { "" },
        if q8 { "_q8" } else { "" },
        if looped { "_loop" } else { "" },
    );
    modules::MODULES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .unwrap_or_else(|| unreachable!("build.rs builds every combination; {name} is missing"))
}

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

/// The driver's bounds checks on the decoder's buffer loads and stores
/// ([`DecoderOptions::robust_buffers`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RobustBuffers {
    /// What the device does when no robustness feature is enabled (none is; `baro-top
    /// devices` prints the default where the device reports it: NVIDIA's driver 580 leaves
    /// storage buffers unchecked, and `Off` compiles to the same machine code there).
    #[default]
    DeviceDefault,
    /// The pipelines ask for storage and uniform buffer accesses without robustness
    /// (VK_EXT_pipeline_robustness, `DISABLED`): no bounds check, no size load, no predicate
    /// per load. The kernel's accesses are in bounds by construction (every index comes from
    /// the validated program tables), so the logits are the same bits; a device without the
    /// extension refuses it, naming it.
    Off,
}

impl RobustBuffers {
    /// `default` or `off` (the CLI's `--robust-buffers`).
    pub fn parse(s: &str) -> std::result::Result<RobustBuffers, String> {
        match s {
            "default" => Ok(RobustBuffers::DeviceDefault),
            "off" => Ok(RobustBuffers::Off),
            _ => Err(format!("buffer robustness '{s}': one of default, off")),
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            RobustBuffers::DeviceDefault => "default",
            RobustBuffers::Off => "off",
        }
    }
}

/// Whether device `info` can build pipelines with buffer robustness `r`: `Off` needs
/// VK_EXT_pipeline_robustness (a decoder asked for it on a device without refuses, naming the
/// extension, rather than run with the checks it was asked to leave out).
pub fn check_robust_buffers(info: &crate::vulkan::DeviceInfo, r: RobustBuffers) -> Result<()> {
    if r == RobustBuffers::Off && !info.pipeline_robustness {
        return Err(Error::Invalid(format!(
            "buffer robustness off: device {} ({}) lacks VK_EXT_pipeline_robustness (pipelineRobustness), which a pipeline needs to ask for its buffer accesses without the driver's bounds checks; leave --robust-buffers at default",
            info.index, info.name
        )));
    }
    Ok(())
}

/// Decoder options.
#[derive(Clone, Debug)]
pub struct DecoderOptions {
    /// Dispatch style.
    pub dispatch: Dispatch,
    /// Workgroups; default from the device ([`default_grid`]).
    pub grid: Option<u32>,
    /// Workgroup size; default 512 (dim < 2048) or 1024 lanes on GPUs, 64 on CPU devices.
    pub wg_size: Option<u32>,
    /// Weight rows a team streams at once in the matvec stages: 1, 2 or 4 (default
    /// [`DEFAULT_ROWS`]). Every value gives bit-identical logits; only the speed differs.
    pub rows: Option<u32>,
    /// The driver's bounds checks on buffer accesses ([`RobustBuffers`]): the device's
    /// default, or off. Logits are bit-identical either way; only the speed can differ.
    pub robust_buffers: RobustBuffers,
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
    /// Test only: a CPU device's back-edge budget instead of `budget::CPU_BUDGET` (the
    /// estimate's tests bracket the kernel's own count with it; GPUs ignore it).
    pub test_iter_budget: Option<u32>,
    /// Run the documented fallback for devices without VK_KHR_shader_clock even where the
    /// clock exists: spins are bounded by the iteration budget alone and stamps read 0.
    pub no_device_clock: bool,
    /// Test only: the device clock's rate (ticks a ns) instead of measuring it.
    pub test_clock_rate: Option<f64>,
    /// Passes one submission may hold ([`VulkanDecoder::step_chain`]: greedy passes chained
    /// on the GPU, each reading the previous pass's argmax there); 1..=[`MAX_CHAIN`]. Each
    /// slot has its own readback (fail word, argmax, logits when read, ring frame) and
    /// timestamps.
    pub chain: u32,
    /// Megakernel: the chained passes of a submission that read the previous pass's argmax
    /// on the GPU ([`Feed::Argmax`]) run as one dispatch, a loop over passes inside the
    /// kernel with a grid barrier between them, instead of one dispatch each with a compute
    /// barrier between (every pass on its own slot of sync and output words either way; the
    /// resets and readback copies run once per submission). It runs the `_loop` modules,
    /// which find a pass's slot themselves; the logits are bit-identical either way, and
    /// every pass keeps its own fail word, argmax, logits and ring frame. A dispatch's run of passes breaks where a pass takes its token from the host or
    /// where the ring sampling switches pipelines, and after 4 passes on a CPU device (one
    /// invocation's loop iterations are capped over the whole dispatch: lavapipe ends loops
    /// silently past 65,535) or without a device clock (the spins' iteration budget is
    /// sized for one pass). Its passes' GPU times come from the device clock (workgroup 0's
    /// end of each pass) inside the dispatch's timestamps; without a device clock they are
    /// unknown (`None`). Off by default: on the H200 (bench/rounds/48.md) chained dispatches
    /// on their own slots leave ≈ 1 µs between passes, and the loop is slower than them
    /// (1B f32 −0.7 %); its modules also lose the 1B q8 module's register budget (97 → 64
    /// with spills, as the f16 KV modules do; round 47: −3 % at the same work). The multi
    /// dispatch has no pass loop. [`VulkanDecoder::pass_loop`] says what a decoder runs.
    pub pass_loop: bool,
    /// With `instrument`: the kernel writes the event ring on every `ring_every`-th pass
    /// (pass id a multiple of it) and runs the others without stamps, barriers or readback
    /// of the ring: the ring's cost divided by `ring_every`, at the price of those passes'
    /// spans and stage timings (their frames carry wall, GPU time, fail word and token, as
    /// with instrumentation off). 1 = every pass.
    pub ring_every: u32,
    /// How the KV cache stores keys and values. [`KvType::F32`] (the default) is the
    /// reference path: bit-exact against the goldens. [`KvType::F16`] rounds every key and
    /// value to f16 when it is stored (round to nearest even; all arithmetic stays f32), giving
    /// up those bits for half the cache bytes and half the attention's cache reads; mega and
    /// multi still agree bitwise, and the gate checks it against a reference that rounds the
    /// same way. Needs `storageBuffer16BitAccess` (refused where the device lacks it). Always
    /// a concrete type: the CLI's `--kv auto` ([`crate::kv::KvChoice`]) is resolved before the
    /// options are built ([`crate::kv::resolve_kv`]).
    pub kv: KvType,
    /// `kv` was chosen by `--kv auto` rather than asked for by name: reported in the run
    /// details ([`RunDetails::kv_auto`]) and nowhere else; the decoder stores `kv` either way.
    pub kv_auto: bool,
    /// What the quantised matrices multiply against. [`ActType::F32`] (the default) is the
    /// reference path: bit-exact against the goldens. [`ActType::Q8`] quantises each matvec's
    /// input vector per 32-element block to int8 with a power-of-two scale and takes every
    /// block's sum as an exact integer dot product ([`crate::act`]): a fraction of the
    /// instructions per weight, at the price of ≈ 1 % per matvec; mega and multi still agree
    /// bitwise, and the gate checks it against a reference that quantises the same way.
    /// Needs shaderIntegerDotProduct and every matrix of a quantised type (F32, F16 and BF16
    /// matrices are refused by name). Always a concrete type: the CLI's `--act auto`
    /// ([`crate::act::ActChoice`]) is resolved before the options are built
    /// ([`crate::act::resolve_act`]).
    pub act: ActType,
    /// `act` was chosen by `--act auto` rather than asked for by name: reported in the run
    /// details ([`RunDetails::act_auto`]) and nowhere else; the decoder runs `act` either way.
    pub act_auto: bool,
    /// Write the driver's pipeline cache to this file once the decode pipelines are built:
    /// the device's compiled binaries of this exact build and specialisation, to be read at
    /// the instruction level (`bench/sass.py` extracts NVIDIA's and disassembles them). The
    /// file is the `vkGetPipelineCacheData` blob, header first; failing to write it fails the
    /// decoder's creation, naming the path.
    pub pipeline_cache_out: Option<std::path::PathBuf>,
    /// Megakernel only: ns of the device clock that a workgroup without a unit in an
    /// attention level waits after it arrives at that level's barrier, before its first
    /// poll (0: none). `None` (the default) is [`default_idle_wait_ns`] for the device:
    /// [`DEFAULT_IDLE_WAIT_NS`] on GPUs with a device clock, else 0. A nonzero value needs the
    /// device clock. Every value of the pass is unchanged (mega ≡ multi bitwise); only speed
    /// can differ. Measured on the H200 (bench/rounds/45.md, round 45e): 2000 against 0, 1B
    /// q8, +0.04 % — the wait itself buys nothing there. What matters is that its block sits
    /// between the grid barrier's arrival and its polls at every value: without a block
    /// there, NVIDIA's driver 580 compiles the whole kernel with warp reconvergence enforced,
    /// 14–17 % slower (the speed rounds 37–44 credited to the read-ahead). At most
    /// [`MAX_IDLE_WAIT_NS`]. [`VulkanDecoder::idle_wait_ns`] says what a decoder resolved.
    pub idle_wait_ns: Option<u32>,
    /// Megakernel only: MiB of weights (whole grid) that the workgroups without a unit in an
    /// attention level read ahead into the GPU's L2 while that level runs: the tensors of the
    /// levels after it, in order, up to the next attention level (0: none, the default on
    /// every device since round 45). The words read are never used, so every value of the
    /// pass is unchanged (mega ≡ multi bitwise); only where the following levels' loads are
    /// served from changes. Each pass reports the bytes it read ahead ([`Pass::prefetched`]);
    /// [`VulkanDecoder::prefetch_mib`] says what a decoder resolved. What it bought on the
    /// H200 (rounds 37–45) was neither L2 residency nor a later first poll but the compile
    /// mode: its block kept the barrier's two lane-0 blocks apart, which the idle wait's
    /// block now does without reading 16 MiB of HBM per attention level.
    pub prefetch_mib: Option<u32>,
    /// A control for the read-ahead's mechanism, not for speed: read the weights of the
    /// levels after the attention level `prefetch_skew` attention levels later instead (the
    /// same kind and amount of traffic, issued at the same time, but of weights that are not
    /// read next, so L2 residency cannot serve the next levels; nothing after the last layer's
    /// stream). 0 (the default): the levels that come next. At most [`MAX_PREFETCH_SKEW`];
    /// a nonzero skew without a read-ahead is refused (it would move nothing).
    pub prefetch_skew: u32,
    /// Where the attention's position chunks are combined, up to [`ATT_PRO_CHUNKS`] of them
    /// (short contexts; more chunks, or a head size that is not a multiple of 4, always go
    /// the second way): `true`, by every workgroup of the output projection as its prologue
    /// loads the attention output (the attention stage then ends at its chunks' records,
    /// and the combine is part of the output projection's stage time); `false`, once per
    /// head group by its last-arriving unit, which the prologue then loads. The same
    /// arithmetic either way, so every value of the pass is the same (mega ≡ multi
    /// bitwise); only speed differs. `None` (the default):
    /// [`default_att_prologue_combine`].
    ///
    /// [`ATT_PRO_CHUNKS`]: crate::vulkan::program::ATT_PRO_CHUNKS
    pub att_prologue_combine: Option<bool>,
}

/// Where [`DecoderOptions::att_prologue_combine`] is `None`: in the prologue where a workgroup
/// has 1,024 lanes or more, else by the last unit. At 1,024 lanes (64 registers a lane
/// whatever the kernel holds) it takes the arrival, the fence and the last arriver's loads
/// off the attention level's critical path; the 512-lane 1B q8 kernel holds 91 registers a
/// lane, a budget that NVIDIA's driver gives up at the smallest change of its attention code,
/// so it keeps main's (bench/rounds/51.md, H200, with wg_max4's 1,024-lane form: 1B f32
/// +3.3 %, 8B q8 +1.3 %, 8B f32 +1.7 % at short context, 1B q8 ±0.5 %, nothing at depth 4096).
pub fn default_att_prologue_combine(wg_size: u32) -> bool {
    wg_size >= 1024
}

/// The read-ahead budget where [`DecoderOptions::prefetch_mib`] is `None`, on every device:
/// none. (Until round 45 it was 16 MiB on GPUs, for a speed that came from the compile mode
/// its code kept, not from the bytes; see [`DecoderOptions::idle_wait_ns`].)
pub const DEFAULT_PREFETCH_MIB: u32 = 0;

/// The read-ahead budget a decoder takes where none is asked: [`DEFAULT_PREFETCH_MIB`].
pub fn default_prefetch_mib(_kind: DeviceKind) -> u32 {
    DEFAULT_PREFETCH_MIB
}

/// The idle workgroups' wait where [`DecoderOptions::idle_wait_ns`] is `None`, on GPUs with
/// a device clock: 2 µs, the configuration proven on the H200 in round 45e (1B and 8B, f32
/// and q8, depth 0 and 4096, gates passing), where it measured the same as 0 at 1B q8.
pub const DEFAULT_IDLE_WAIT_NS: u32 = 2000;

/// The longest [`DecoderOptions::idle_wait_ns`]: 100 µs (longer than a whole attention level
/// at short context, so a longer wait only delays the release).
pub const MAX_IDLE_WAIT_NS: u32 = 100_000;

/// The idle workgroups' wait a decoder takes where none is asked: [`DEFAULT_IDLE_WAIT_NS`] on
/// GPUs, 0 on CPU devices (their workgroups are pool threads, paced by CPU_PAUSE) and
/// without a device clock (nothing to wait on).
pub fn default_idle_wait_ns(kind: DeviceKind, has_clock: bool) -> u32 {
    if kind == DeviceKind::Cpu || !has_clock {
        0
    } else {
        DEFAULT_IDLE_WAIT_NS
    }
}

/// The largest [`DecoderOptions::prefetch_skew`] (attention levels).
pub const MAX_PREFETCH_SKEW: u32 = 64;

/// The largest [`DecoderOptions::prefetch_mib`] (the shader counts 32-byte sectors in 32 bits).
pub const MAX_PREFETCH_MIB: u32 = 4096;

/// The most passes one submission holds.
pub const MAX_CHAIN: u32 = 64;

/// Where a chained pass's input token comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// This token.
    Token(u32),
    /// The previous pass's argmax, read on the GPU (greedy decoding without the host).
    Argmax,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        DecoderOptions {
            dispatch: Dispatch::Mega,
            grid: None,
            wg_size: None,
            rows: None,
            robust_buffers: RobustBuffers::DeviceDefault,
            max_seq: 2048,
            instrument: false,
            spin_timeout: Duration::from_secs(1),
            fence_timeout: None,
            read_logits: true,
            test_slow_kind: None,
            test_stall_wg: None,
            test_iter_budget: None,
            test_clock_rate: None,
            pipeline_cache_out: None,
            idle_wait_ns: None,
            prefetch_mib: None,
            prefetch_skew: 0,
            att_prologue_combine: None,
            no_device_clock: false,
            chain: 1,
            pass_loop: false,
            ring_every: 1,
            kv: KvType::F32,
            kv_auto: false,
            act: ActType::F32,
            act_auto: false,
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
    /// Host wall time from submit to fence (a chained pass: its share of the submission's).
    pub wall: Duration,
    /// The pass's GPU timestamps (start, end), ns in the timestamp-query domain.
    pub window: Option<(u64, u64)>,
    /// Weight bytes read ahead into L2 during the attention levels
    /// ([`DecoderOptions::prefetch_mib`]).
    pub prefetched: u64,
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

/// Rows a team streams at once unless asked otherwise (bench/rounds/07.md).
pub const DEFAULT_ROWS: u32 = 1;

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
    /// Weight rows a team streams at once.
    pub rows: u32,
    /// A CPU device's estimated back-edges per invocation of a pass's heaviest dispatch
    /// (`budget::pass_loops`; 0 on a GPU): how many looped passes share a dispatch's budget.
    cpu_pass_loops: u64,
    vocab: usize,
    mat_type: u32,
    /// Elements of the shared int8 input vector (the q8 activation path; 32 otherwise).
    sq_cap: u32,
    chunks: Vec<Buffer>,
    state: Buffer,
    kv: Buffer,
    kv_v: Buffer,
    out: Buffer,
    sync: Buffer,
    prog: Buffer,
    ring: Buffer,
    readback: Buffer,
    /// What a pass's sync words and output words are reset to before it runs (one chain
    /// slot's image each, copied over every slot of a submission at its start).
    reset_sync: Buffer,
    reset_out: Buffer,
    dsl: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    /// The plain (INSTR off) pipeline an instrumented decoder with `ring_every` > 1 runs its
    /// unstamped passes on; null otherwise.
    pipeline_plain: vk::Pipeline,
    /// The driver's statistics for each pipeline, where it reports them.
    pipeline_stats: Vec<PipelineStats>,
    dpool: vk::DescriptorPool,
    /// One descriptor set per chain slot: set `s` binds the sync and output buffers at slot
    /// `s`'s words (its sync binding runs on over the next slot's token word), so a pass
    /// dispatched on its own slot runs the plain modules unchanged. The pass loop's modules
    /// offset by slot themselves and run on set 0.
    sets: Vec<vk::DescriptorSet>,
    /// This decoder's own command pool (a pool must be externally synchronized; one per
    /// decoder lets decoders run on different threads without a lock).
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    qpool: vk::QueryPool,
    n_queries: u32,
    passes: u32,
    last_window: Option<(u64, u64)>,
    /// Why the device clock is off though the device has one (its unit is not the ns).
    clock_off: Option<String>,
    /// Where each chain slot's sync words, output words and ring frame lie in `readback`.
    rb: ReadbackLayout,
    /// Timestamp queries per chain slot.
    queries_per_pass: u32,
    /// Chain slot of the last pass run (its ring frame and logits in the readback).
    last_slot: usize,
    /// The last pass completed clean: its argmax on the GPU may feed the next pass.
    last_ok: bool,
    /// Dispatches the last submission ran (one per pass without the pass loop).
    last_dispatches: usize,
    /// Per chain slot of the last submission: that pass wrote the ring.
    slot_stamped: Vec<bool>,
    /// Per chain slot of the last submission: the first slot and the pass count of the
    /// dispatch that ran it (a pass loop holds more than one).
    slot_run: Vec<(usize, usize)>,
    broken: Option<String>,
    /// Wall times of the last completed passes (the watchdog's expectation).
    recent_walls: std::collections::VecDeque<Duration>,
    /// Weight bytes (the first pass's expectation on CPU devices).
    weight_bytes: u64,
    /// Logits of the last submission's passes, `vocab` per chain slot (when read).
    logits: Vec<f32>,
    /// Passes in the last submission.
    last_count: usize,
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

mod budget;
pub use budget::CPU_BUDGET as CPU_LOOP_BUDGET;
mod calibrate;
mod frame;
mod pass;
mod pipeline;
mod push;
mod readback;
mod setup;
use push::{calibration_push, Push, PUSH_WORDS};
use readback::ReadbackLayout;

pub use calibrate::Calibration;
pub use setup::check_q8_device;

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

/// A barrier between two dispatches: the later one reads and writes what the earlier wrote.
///
/// # Safety
/// `cb` is recording on `d`.
unsafe fn compute_barrier(d: &ash::Device, cb: vk::CommandBuffer) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        barrier(
            d,
            cb,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::SHADER_WRITE,
            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
        )
    };
}

/// View u32 words as bytes (little-endian hosts only, which is all Vulkan runs on here).
fn unsafe_words_as_bytes(w: &[u32]) -> &[u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length is exact.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
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
        Ok(self.logits_mut())
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
            if self.pipeline_plain != vk::Pipeline::null() {
                d.destroy_pipeline(self.pipeline_plain, None);
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
            &mut self.kv_v,
            &mut self.out,
            &mut self.sync,
            &mut self.prog,
            &mut self.ring,
            &mut self.readback,
            &mut self.reset_sync,
            &mut self.reset_out,
        ] {
            destroy_buffer(&ctx, b);
        }
        for b in bufs.iter_mut() {
            destroy_buffer(&ctx, b);
        }
    }
}

#[cfg(test)]
mod spirv_tests {
    use std::process::Command;

    /// Every embedded decode module passes SPIRV-Tools' validator for the Vulkan 1.2
    /// environment the build targets: a malformed module must never reach a driver, whose
    /// compiler may crash on it rather than refuse it (round 68: NVIDIA's 580 compiler crashed
    /// on a candidate module; it validated, so the crash was the driver's, and this test is
    /// what tells the two apart). In CI (CI=true) a missing spirv-val fails; outside CI it
    /// skips with a printed reason (scripts/test.sh installs spirv-tools).
    #[test]
    fn every_embedded_decode_module_passes_spirv_val_for_vulkan_1_2() {
        let have = Command::new("spirv-val")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "spirv-val is missing in CI (scripts/test.sh installs spirv-tools)"
            );
            eprintln!("spirv-val not installed: skipping (outside CI)");
            return;
        }
        assert_eq!(super::modules::MODULES.len(), 32, "build.rs's 2^5 variants");
        let dir = std::env::temp_dir().join(format!("baro-spirv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (name, spv) in super::modules::MODULES {
            let path = dir.join(format!("{name}.spv"));
            std::fs::write(&path, spv).expect("writing the module");
            let o = Command::new("spirv-val")
                .args(["--target-env", "vulkan1.2"])
                .arg(&path)
                .output()
                .expect("spirv-val runs");
            assert!(
                o.status.success(),
                "{name}: spirv-val refused it:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        // And the validator does refuse: the first module cut short.
        let (name, spv) = super::modules::MODULES[0];
        let path = dir.join("cut.spv");
        std::fs::write(&path, &spv[..spv.len() / 2 / 4 * 4]).expect("writing the cut module");
        let o = Command::new("spirv-val")
            .args(["--target-env", "vulkan1.2"])
            .arg(&path)
            .output()
            .expect("spirv-val runs");
        assert!(!o.status.success(), "spirv-val accepted half of {name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
