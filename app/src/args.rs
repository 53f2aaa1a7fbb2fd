//! Argument groups that several subcommands share, each declared once and flattened into
//! the commands that take it (`#[command(flatten)]`), so a flag's name, help, parser and
//! default are the same wherever it appears: the model ([`ModelArgs`]), the Vulkan device and
//! decoder ([`GpuArgs`]), a live session's prompt and sampling ([`SessionArgs`]), a timing
//! run's device and lock policy ([`TimingArgs`]), one dispatch style ([`DispatchStyle`]) and a
//! restarting sequence's positions ([`SequenceArgs`]).

use std::path::PathBuf;

use baro_engine::act::{resolve_act, ActCaps, ActChoice, ActType};
use baro_engine::device::{DecoderOptions, DeviceInfo, Dispatch};
use baro_engine::kv::{resolve_kv, KvChoice, KvType};
use baro_engine::model::{Model, Weights};
use clap::Args;

use crate::validate;

/// Which model to load: a GGUF or llama2.c file, or the embedded stories260K.
#[derive(Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Model file: GGUF, or a llama2.c checkpoint (then --tokenizer is required). Default: the
    /// embedded stories260K.
    #[arg(long, short = 'm')]
    pub model: Option<PathBuf>,
    /// llama2.c tokenizer (tok*.bin); overrides a GGUF's own vocabulary.
    #[arg(long, short = 'z')]
    pub tokenizer: Option<PathBuf>,
}

/// Passes per submission unless `--chain` says otherwise (bench/rounds/10.md).
pub const DEFAULT_CHAIN: u32 = 16;

/// Vulkan device and decoder options shared by every GPU command (default: none given).
#[derive(Args, Debug, Clone, Default)]
pub struct GpuArgs {
    /// Vulkan device: index or name substring (default: the first discrete GPU, CPU devices last).
    #[arg(long)]
    pub device: Option<String>,
    /// Workgroups in the grid, 1..=65535 (default: from the device).
    #[arg(long, value_parser = validate::grid, allow_negative_numbers = true)]
    pub grid: Option<u32>,
    /// Workgroup size in lanes: a multiple of the device's subgroup size, at most 60 subgroups
    /// (default on GPUs: 512 lanes for dim < 2048, else 1024; CPU devices 64, or more where a
    /// pass would not fit their loop limit).
    #[arg(long, value_parser = validate::wg_size, allow_negative_numbers = true)]
    pub wg_size: Option<u32>,
    /// Weight rows each team (subgroup) streams at once in the matvec stages: 1, 2 or 4
    /// [default: the engine's]. Logits are bit-identical for every value; only speed differs.
    #[arg(long, value_parser = validate::rows, allow_negative_numbers = true)]
    pub rows: Option<u32>,
    /// Write the in-kernel event ring on every N-th pass only, 1..=1000000 [default: 1, every
    /// pass]: the other passes run on a second, plain pipeline (no ring code, no stamps) and
    /// carry no spans or stage timings (wall, GPU time, fail word and token still). Needs the
    /// ring on.
    #[arg(long, value_parser = validate::ring_every, allow_negative_numbers = true)]
    pub ring_every: Option<u32>,
    /// Passes per submission when decoding greedily, 1..=64 [default: 16]: past the prompt,
    /// each generated token is the previous pass's argmax read on the GPU, with no host round
    /// trip inside a submission (1: one pass per submission). Every pass keeps its own fail
    /// word, timestamps and frame; passes after one that ends the sequence (a failure, BOS,
    /// the context's end) are dropped. (bench: the timed passes, prompt tokens from the host.)
    #[arg(long, value_parser = validate::chain, allow_negative_numbers = true)]
    pub chain: Option<u32>,
    /// Megakernel: run a submission's chained passes (those that read the previous pass's
    /// argmax on the GPU) as one dispatch, a loop over passes inside the kernel with a grid
    /// barrier between them: on or off [default: off]. off dispatches every pass on its own
    /// slot of sync and output words, with only a compute barrier between chained passes (no
    /// resets or copies: those run once per submission). Logits are bit-identical either way;
    /// every pass keeps its own fail word, argmax and frame; inside a loop a pass's GPU time
    /// comes from the device clock. On the H200 the loop is slower (bench/rounds/48.md): 1B
    /// f32 −0.7 %, and its kernels hold fewer registers at 1B q8 (64, not 97; −3 %). The
    /// multi dispatch has no pass loop.
    #[arg(long, value_name = "on|off", value_parser = validate::on_off)]
    pub pass_loop: Option<bool>,
    /// KV cache storage: auto, f32 or f16 [default: auto]. auto is f16 where the run's
    /// activations are q8 (what `--act auto` picks for the files people download), the model
    /// is at least 4096 wide (8B and up: where the q8 kernel runs 1,024 lanes, so the f16
    /// cache costs no registers; measured +1.2 % at depth 0 and +4.7 % at 4,096 positions on
    /// an 8B Q4_K_M, while a 1B's 512-lane kernel lost 4.7 % with it) and the device has
    /// storageBuffer16BitAccess, else f32: stories260K, 1B-wide models and every
    /// f32-activation run keep f32. f32 is the reference path (bit-exact against the
    /// goldens); f16 rounds every key and value to f16 when stored (all arithmetic stays f32):
    /// half the cache's bytes and half the attention's cache reads, logits within ~1e-3 of
    /// f32's (a tenth of q8's own error; llama.cpp's default cache is f16 too). What auto
    /// chose is what the run reports (`KV cache f16 (auto)`; JSON: `"kv"` is the type used,
    /// `"kv_auto": true` beside it), what bench rows carry, and what the gate checks against:
    /// a reference that rounds the same way. f16 by name needs storageBuffer16BitAccess
    /// (`baro-top devices` says).
    #[arg(long, value_name = "auto|f32|f16", value_parser = validate::kv)]
    pub kv: Option<baro_engine::kv::KvChoice>,
    /// What quantised matrices multiply against: auto, f32 or q8 [default: auto]. auto is q8
    /// where every matrix the decoder multiplies is quantised and the backend can run q8 (a
    /// Vulkan device with shaderIntegerDotProduct and subgroups of a multiple of 8 lanes; the
    /// CPU backend always), else f32: a Q4_K_M file runs q8, stories260K (F32 matrices) f32.
    /// What auto chose is what the run reports (`act q8 (auto)`; JSON: `"act"` is the type
    /// used, `"act_auto": true` beside it), what bench rows and metrics carry, and what the
    /// gate checks against. f32 is the reference path (bit-exact against the goldens); q8
    /// quantises each matvec's input vector per 32-element block to int8 with a power-of-two
    /// scale and sums every block as an exact integer dot product (4-way packed int8): a
    /// fraction of the instructions per weight, logits within ≈ 1 % of f32's. The gate then
    /// checks against a reference that quantises the same way. q8 by name needs
    /// shaderIntegerDotProduct (`baro-top devices` says) and every matrix quantised (F32, F16
    /// and BF16 matrices are refused).
    #[arg(long, value_name = "auto|f32|q8", value_parser = validate::act)]
    pub act: Option<baro_engine::act::ActChoice>,
    /// Megakernel: nanoseconds, 0..=100000, that a workgroup without a unit in an attention
    /// level waits after it arrives at that level's grid barrier, before it first polls
    /// [default: 2000 on GPUs with a device clock, else 0; 0: none]. Logits are bit-identical
    /// for every value; only speed can differ. Measured on the H200 (bench/rounds/45.md):
    /// 2000 and 0 run at the same speed (1B q8). A nonzero value needs the device clock.
    #[arg(long, value_name = "NS", value_parser = validate::idle_wait_ns, allow_negative_numbers = true)]
    pub idle_wait_ns: Option<u32>,
    /// Megakernel: MiB of weights, 0..=4096, that the workgroups without an attention unit
    /// read ahead into the GPU's L2 while an attention level runs (the tensors of the levels
    /// after it, in order, up to the next attention level) [default: 0, none]. Logits are
    /// bit-identical for every value; only speed differs. `run --json` reports the budget
    /// (`prefetch_mib`) and the bytes per pass (`prefetched_bytes`). It was the default (16)
    /// until round 45 for a speed that was the driver's compile mode, not the reads
    /// (bench/rounds/45.md).
    #[arg(long, value_name = "MIB", value_parser = validate::prefetch_mib, allow_negative_numbers = true)]
    pub prefetch_mib: Option<u32>,
    /// A control for measuring what the read-ahead does, not for speed: read the weights
    /// after the attention level N attention levels later instead of those read next, 0..=64
    /// [default: 0]. The same traffic at the same moments, but L2 cannot serve the next
    /// levels from it: the speed it keeps is not residency. Needs `--prefetch-mib` above 0.
    #[arg(long, value_name = "N", value_parser = validate::prefetch_skew, allow_negative_numbers = true)]
    pub prefetch_skew: Option<u32>,
    /// The driver's bounds checks on the decoder's buffer loads and stores: default or off
    /// [default: default, the device's own behaviour, which `baro-top devices` prints where
    /// the driver reports it; NVIDIA's 580 reports none for storage buffers, and off
    /// compiles to the same code there]. off builds the pipelines with
    /// VK_EXT_pipeline_robustness's DISABLED for storage and uniform buffers: no size load,
    /// comparison or predicate per load. Every access the kernel makes is in bounds by
    /// construction, so the logits are bit-identical; only speed can differ. A device
    /// without the extension refuses off.
    #[arg(long, value_name = "default|off", value_parser = validate::robust_buffers)]
    pub robust_buffers: Option<baro_engine::device::RobustBuffers>,
    /// Grid-barrier spin timeout, milliseconds, at least 1 [default: 1000].
    #[arg(long, value_parser = validate::spin_timeout_ms, allow_negative_numbers = true)]
    pub spin_timeout_ms: Option<u64>,
    /// Host watchdog on each pass, milliseconds [default: automatic: the slowest recent pass
    /// plus the spin timeout plus 1 s on GPUs; more slack on CPU devices]. A pass past it
    /// abandons the device: the run ends with an error within seconds, never waiting on it.
    #[arg(long, value_parser = validate::watchdog_ms, allow_negative_numbers = true)]
    pub watchdog_ms: Option<u64>,
    /// Test hook (not for use): this workgroup, 0..=65534, never arrives at a barrier (the
    /// gate must fail, not hang).
    #[arg(long, hide = true, value_parser = validate::stall_wg)]
    pub inject_stall_wg: Option<u32>,
}

impl GpuArgs {
    /// The GPU options the user gave (for refusing them where no GPU runs).
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--device", self.device.is_some()),
            ("--grid", self.grid.is_some()),
            ("--wg-size", self.wg_size.is_some()),
            ("--rows", self.rows.is_some()),
            ("--ring-every", self.ring_every.is_some()),
            ("--chain", self.chain.is_some()),
            ("--pass-loop", self.pass_loop.is_some()),
            ("--kv", self.kv.is_some()),
            ("--act", self.act.is_some()),
            ("--idle-wait-ns", self.idle_wait_ns.is_some()),
            ("--prefetch-mib", self.prefetch_mib.is_some()),
            ("--prefetch-skew", self.prefetch_skew.is_some()),
            ("--robust-buffers", self.robust_buffers.is_some()),
            ("--spin-timeout-ms", self.spin_timeout_ms.is_some()),
            ("--watchdog-ms", self.watchdog_ms.is_some()),
            ("--inject-stall-wg", self.inject_stall_wg.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect()
    }

    /// What `--act` asked for: `auto` where not given.
    pub fn act_choice(&self) -> ActChoice {
        self.act.unwrap_or_default()
    }

    /// The activation type a run of `weights` takes on a backend that can do `caps`
    /// (`--act auto` resolved, [`resolve_act`]), and whether auto chose it.
    pub fn resolved_act(&self, weights: &Weights, caps: ActCaps) -> (ActType, bool) {
        let choice = self.act_choice();
        (
            resolve_act(choice, weights, caps),
            choice == ActChoice::Auto,
        )
    }

    /// The KV cache type a run of a `dim`-wide model whose activations are `act` takes on a
    /// backend that can do `caps` (`--kv auto` resolved, [`resolve_kv`]), and whether auto
    /// chose it.
    pub fn resolved_kv(&self, act: ActType, dim: usize, caps: ActCaps) -> (KvType, bool) {
        let choice = self.kv.unwrap_or_default();
        (
            resolve_kv(choice, act, dim, caps.kv16),
            choice == KvChoice::Auto,
        )
    }

    /// Decoder options for `model` on `device`, `max_seq` positions with dispatch style
    /// `dispatch`. `--act auto` and then `--kv auto` (which follows the activation type) are
    /// resolved here, where the model and the device are both known: the options (and so the
    /// decoder, its run details, bench rows and the gate's reference) carry the concrete
    /// types, with `act_auto` / `kv_auto` saying auto chose them.
    pub fn decoder_options(
        &self,
        dispatch: Dispatch,
        max_seq: usize,
        model: &Model,
        device: &DeviceInfo,
    ) -> DecoderOptions {
        let caps = ActCaps::of(device);
        let (act, act_auto) = self.resolved_act(&model.weights, caps);
        let (kv, kv_auto) = self.resolved_kv(act, model.config.dim, caps);
        DecoderOptions {
            dispatch,
            grid: self.grid,
            wg_size: self.wg_size,
            rows: self.rows,
            robust_buffers: self.robust_buffers.unwrap_or_default(),
            ring_every: self.ring_every.unwrap_or(1),
            chain: self.chain.unwrap_or(DEFAULT_CHAIN),
            pass_loop: self.pass_loop.unwrap_or(false),
            kv,
            kv_auto,
            act,
            act_auto,
            idle_wait_ns: self.idle_wait_ns,
            prefetch_mib: self.prefetch_mib,
            prefetch_skew: self.prefetch_skew.unwrap_or(0),
            max_seq,
            spin_timeout: std::time::Duration::from_millis(self.spin_timeout_ms.unwrap_or(1000)),
            test_stall_wg: self.inject_stall_wg,
            fence_timeout: self.watchdog_ms.map(std::time::Duration::from_millis),
            ..Default::default()
        }
    }
}

/// `--dispatch` where one style runs at a time (run, generate).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchArg {
    /// One persistent dispatch per token.
    Mega,
    /// One dispatch per stage.
    Multi,
}

impl DispatchArg {
    /// The engine's dispatch style.
    pub fn dispatch(self) -> Dispatch {
        match self {
            DispatchArg::Mega => Dispatch::Mega,
            DispatchArg::Multi => Dispatch::Multi,
        }
    }
}

/// `--dispatch` where both styles can be compared (gate, bench).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchSet {
    /// The persistent megakernel only.
    Mega,
    /// One dispatch per stage only.
    Multi,
    /// Both (gate: their logits must be bit-identical; bench: paired arms).
    Both,
}

impl DispatchSet {
    /// The styles, mega first.
    pub fn dispatches(self) -> Vec<Dispatch> {
        match self {
            DispatchSet::Mega => vec![Dispatch::Mega],
            DispatchSet::Multi => vec![Dispatch::Multi],
            DispatchSet::Both => vec![Dispatch::Mega, Dispatch::Multi],
        }
    }
}

/// `--dispatch` where one style runs and the help says the default (run, serve, bench rec).
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct DispatchStyle {
    /// Dispatch style [default: mega].
    #[arg(long, value_enum, alias = "mode")]
    pub dispatch: Option<DispatchArg>,
}

impl DispatchStyle {
    /// The style asked for, mega by default.
    pub fn get(&self) -> Dispatch {
        self.dispatch.unwrap_or(DispatchArg::Mega).dispatch()
    }
}

/// A live session's sequence (live, serve): its prompt, sampling and positions, each with the
/// engine's default where not given (so a command can tell which were given).
#[derive(Args, Debug, Clone, Default)]
pub struct SessionArgs {
    /// Prompt text (forced at the start of every sequence).
    #[arg(long, short = 'i')]
    pub prompt: Option<String>,
    /// Temperature, a finite number >= 0 (0 = greedy) [default: 0].
    #[arg(long, short = 't', value_parser = validate::temperature, allow_negative_numbers = true)]
    pub temp: Option<f32>,
    /// Top-p, 0..=1 [default: 0.9].
    #[arg(long, short = 'p', value_parser = validate::top_p, allow_negative_numbers = true)]
    pub topp: Option<f32>,
    /// Sampler seed; 0 = the current time [default: 1].
    #[arg(long, short = 's', value_parser = validate::seed, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Positions in the KV cache (the sequence restarts when full) [default: 256, or the
    /// model's context if shorter].
    #[arg(long, value_parser = validate::positions, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
}

impl SessionArgs {
    /// The flags given, in declaration order (for refusing them where no engine runs).
    pub fn given(&self) -> [(&'static str, bool); 5] {
        [
            ("--prompt", self.prompt.is_some()),
            ("--temp", self.temp.is_some()),
            ("--topp", self.topp.is_some()),
            ("--seed", self.seed.is_some()),
            ("--ctx", self.ctx.is_some()),
        ]
    }

    /// The prompt's bytes (empty by default).
    pub fn prompt_bytes(&self) -> &[u8] {
        self.prompt.as_deref().unwrap_or("").as_bytes()
    }

    /// Temperature and top-p (0 and 0.9 by default).
    pub fn temp_topp(&self) -> (f32, f32) {
        (self.temp.unwrap_or(0.0), self.topp.unwrap_or(0.9))
    }

    /// The seed as given (1 by default; 0 still means the current time).
    pub fn seed_or_default(&self) -> u64 {
        self.seed.unwrap_or(1)
    }

    /// Positions in the KV cache for a model of context `seq_len`.
    pub fn positions(&self, seq_len: usize) -> anyhow::Result<usize> {
        positions(self.ctx, seq_len)
    }
}

/// `--ctx` of a run whose sequence restarts from its prompt (record, bench rec).
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct SequenceArgs {
    /// Positions per sequence [default: the smaller of 256 and the model's context].
    #[arg(long, value_parser = validate::positions, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
}

impl SequenceArgs {
    /// Positions per sequence for a model of context `seq_len`.
    pub fn positions(&self, seq_len: usize) -> anyhow::Result<usize> {
        positions(self.ctx, seq_len)
    }
}

/// `--ctx N` checked against the model's context `seq_len`; without it, 256 or the model's
/// context if shorter.
pub fn positions(ctx: Option<usize>, seq_len: usize) -> anyhow::Result<usize> {
    match ctx {
        Some(n) => {
            validate::positions_fit("--ctx", n, seq_len)?;
            Ok(n)
        }
        None => Ok(seq_len.min(256)),
    }
}

/// How a timing run treats its device (bench, bench rec): a CPU device is refused unless
/// allowed, and another timing run holding the GPU's lock is waited for unless told not to.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct TimingArgs {
    /// Allow a CPU device (lavapipe): its numbers say nothing about a GPU.
    #[arg(long)]
    pub allow_cpu: bool,
    /// Do not wait for another timing run holding this GPU's lock: warn, run, and label
    /// every pass contended.
    #[arg(long)]
    pub no_wait: bool,
}
