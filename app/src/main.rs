//! baro-top: terminal profiler and live decode monitor for a persistent-megakernel LLM decoder
//! on Vulkan. This binary parses the command line and hands each subcommand to its module.

#[macro_use]
mod out;
mod cmd;
mod files;
mod metrics;
mod validate;
/// The dashboard (a library target of this package, so its tests and benches can reach it).
use baro_ui as ui;

use std::path::PathBuf;
use std::process::ExitCode;

use baro_engine::device::{DecoderOptions, Device, Dispatch};
use clap::{Args, Parser, Subcommand};

/// Terminal profiler and live decode monitor for a persistent-megakernel LLM decoder on Vulkan.
#[derive(Parser, Debug)]
#[command(name = "baro-top", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Headless live decode with telemetry: one line per pass and a closing summary (`--json`:
    /// the telemetry messages).
    Run(cmd::run::RunArgs),
    /// Generate text exactly as llama2.c's run.c prints it (stdout: the text; stderr: timing).
    Generate(cmd::generate::GenerateArgs),
    /// Tokenize a text with a model file's tokenizer, as llama.cpp's llama-tokenize prints it.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Decode on the GPU next to the CPU reference; exit 0 only if every pass is clean.
    Gate(cmd::gate::GateArgs),
    /// Decode throughput over prompts (prompt and generation), paired and alternating arms;
    /// `bench ab` A/Bs two arms or two binaries; `bench rec` measures the recorder's cost.
    Bench(cmd::bench::BenchArgs),
    /// List Vulkan devices, their capabilities and (with --probe) the largest resident grid.
    Devices(cmd::devices::DevicesArgs),
    /// The live dashboard (ratatui): `--synthetic` runs it on generated telemetry, no GPU.
    Live(LiveArgs),
    /// Create, convert and inspect model files.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Record a headless decode to a file (`.baro`): every message, losslessly.
    Record(cmd::recording::RecordArgs),
    /// Replay a recording (`.baro`): the dashboard, or --headless lines / --json.
    Replay(cmd::recording::ReplayArgs),
    /// Export a recording as a trace (Perfetto protobuf, Trace Event JSON) and/or CSVs.
    Export(cmd::recording::ExportArgs),
    /// Compare two recordings within one power mode: per stage kind busy/charged medians, and
    /// their tokens.
    Diff(cmd::recording::DiffArgs),
    /// Serve Prometheus/OpenMetrics metrics of the telemetry stream (--metrics ADDR).
    Serve(metrics::cmd::ServeArgs),
}

#[derive(Subcommand, Debug)]
enum ModelCommand {
    /// Write a deterministic synthetic llama model as GGUF.
    Gen(cmd::model::GenArgs),
    /// Convert a llama2.c checkpoint (+ tokenizer) to GGUF.
    Import(cmd::model::ImportArgs),
    /// Show a model's architecture, tensors and sizes.
    Info(cmd::model::InfoArgs),
}

/// `baro-top live` options.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// Feed the dashboard from the synthetic producer (no GPU, no model).
    #[arg(long)]
    pub synthetic: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Dispatch mode at the start [default: mega]; `m` switches it live.
    #[arg(long, value_enum, alias = "mode")]
    pub dispatch: Option<DispatchArg>,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Layout preset name (default, flame, compact) or a layout file path.
    #[arg(long, default_value = "default")]
    pub layout: String,
    /// Redraws per second at most, 1..=240.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=240))]
    pub fps: u32,
    /// Draw with ASCII only (no braille, block or box glyphs).
    #[arg(long)]
    pub ascii: bool,
    /// Also serve Prometheus/OpenMetrics metrics of the session on this IP:PORT (port 0: any
    /// free port, printed at start).
    #[arg(long, value_name = "ADDR", value_parser = metrics::cmd::parse_addr)]
    pub metrics: Option<std::net::SocketAddr>,
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
    /// Which passes the shadow CPU reference judges: auto, all, off, or N (the first N
    /// positions of every sequence) [default: auto].
    #[arg(long, value_parser = cmd::run::parse_check)]
    pub check: Option<baro_engine::session::Check>,
    /// Turn the in-kernel event ring off (stage timings and the flame chart disappear; the
    /// fail word stays).
    #[arg(long)]
    pub no_instrument: bool,
    /// Synthetic: passes per second, 0.1..=10000 [default: 60].
    #[arg(long, value_parser = validate::rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Stop after N passes (default: decode until quit).
    #[arg(long, value_parser = validate::repetitions, allow_negative_numbers = true)]
    pub passes: Option<u64>,
    /// Where `r` writes recordings (`baro-<UTC yyyymmdd-hhmmss>.baro`) [default: the current
    /// directory]; checked for writing at startup.
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<std::path::PathBuf>,
    /// Test hook (not for use): the producer panics after forwarding N passes, 1..=1,000,000,
    /// so a test can see a producer panic restore the terminal, finish a recording and exit
    /// 101.
    #[arg(long, hide = true, value_parser = validate::inject_panic_after)]
    pub inject_producer_panic: Option<u64>,
}

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

/// Vulkan device and decoder options shared by every GPU command.
#[derive(Args, Debug, Clone)]
pub struct GpuArgs {
    /// Vulkan device: index or name substring (default: the first discrete GPU, CPU devices last).
    #[arg(long)]
    pub device: Option<String>,
    /// Workgroups in the grid, 1..=65535 (default: from the device).
    #[arg(long, value_parser = validate::grid, allow_negative_numbers = true)]
    pub grid: Option<u32>,
    /// Workgroup size in lanes: a multiple of the device's subgroup size, at most 60 subgroups
    /// (default on GPUs: 512 lanes for dim < 2048, else 1024; CPU devices 64).
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
    /// KV cache storage: f32 or f16 [default: f32]. f32 is the reference path (bit-exact
    /// against the goldens); f16 rounds every key and value to f16 when stored (all arithmetic
    /// stays f32): half the cache's bytes and half the attention's cache reads, logits within
    /// ~1e-3 of f32's. The gate then checks against a reference that rounds the same way.
    /// Needs storageBuffer16BitAccess (`baro-top devices` says).
    #[arg(long, value_name = "f32|f16", value_parser = validate::kv)]
    pub kv: Option<baro_engine::device::KvType>,
    /// What quantised matrices multiply against: f32 or q8 [default: f32]. f32 is the
    /// reference path (bit-exact against the goldens); q8 quantises each matvec's input
    /// vector per 32-element block to int8 with a power-of-two scale and sums every block as
    /// an exact integer dot product (4-way packed int8): a fraction of the instructions per
    /// weight, logits within ≈ 1 % of f32's. The gate then checks against a reference that
    /// quantises the same way. Needs shaderIntegerDotProduct (`baro-top devices` says) and
    /// every matrix quantised (F32, F16 and BF16 matrices are refused).
    #[arg(long, value_name = "f32|q8", value_parser = validate::act)]
    pub act: Option<baro_engine::device::ActType>,
    /// Megakernel: MiB of weights, 0..=4096, that the workgroups without an attention unit
    /// read ahead into the GPU's L2 while an attention level runs (the tensors of the levels
    /// after it, in order, up to the next attention level) [default: 0, none]. Logits are
    /// bit-identical for every value; only speed differs. `run --json` reports the bytes per
    /// pass (`prefetched`).
    #[arg(long, value_name = "MIB", value_parser = validate::prefetch_mib, allow_negative_numbers = true)]
    pub prefetch_mib: Option<u32>,
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
            ("--kv", self.kv.is_some()),
            ("--act", self.act.is_some()),
            ("--prefetch-mib", self.prefetch_mib.is_some()),
            ("--spin-timeout-ms", self.spin_timeout_ms.is_some()),
            ("--watchdog-ms", self.watchdog_ms.is_some()),
            ("--inject-stall-wg", self.inject_stall_wg.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect()
    }

    /// Decoder options for `max_seq` positions with dispatch style `dispatch`.
    pub fn decoder_options(&self, dispatch: Dispatch, max_seq: usize) -> DecoderOptions {
        DecoderOptions {
            dispatch,
            grid: self.grid,
            wg_size: self.wg_size,
            rows: self.rows,
            ring_every: self.ring_every.unwrap_or(1),
            chain: self.chain.unwrap_or(DEFAULT_CHAIN),
            kv: self.kv.unwrap_or_default(),
            act: self.act.unwrap_or_default(),
            prefetch_mib: self.prefetch_mib.unwrap_or(0),
            max_seq,
            spin_timeout: std::time::Duration::from_millis(self.spin_timeout_ms.unwrap_or(1000)),
            test_stall_wg: self.inject_stall_wg,
            fence_timeout: self.watchdog_ms.map(std::time::Duration::from_millis),
            ..Default::default()
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => cmd::default_run(),
        Some(c) => dispatch(c),
    };
    // A caught signal (or a panic in any thread) ended the command after it finished its
    // work (the terminal restored, a recording's footer written): say so in the status.
    let signalled = ui::terminal::caught().map(ui::terminal::exit_status);
    let code: u8 = match result {
        Ok(code) => {
            if let Some(s) = signalled {
                s
            } else if !Device::any_hung() {
                return code;
            } else {
                // An ExitCode cannot be read back; a run whose device hung did not succeed.
                1
            }
        }
        Err(e) => {
            note!("baro-top: error: {e:#}");
            signalled.unwrap_or(2)
        }
    };
    if Device::any_hung() {
        out::device_abandoned(code);
    }
    ExitCode::from(code)
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => cmd::run::run(a),
        Command::Generate(a) => cmd::generate::run(a),
        Command::Tokenize(a) => cmd::tokenize::run(a),
        Command::Gate(a) => cmd::gate::run(a),
        Command::Devices(a) => cmd::devices::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Live(a) => live(a),
        Command::Model(ModelCommand::Gen(a)) => cmd::model::gen(a),
        Command::Model(ModelCommand::Import(a)) => cmd::model::import(a),
        Command::Model(ModelCommand::Info(a)) => cmd::model::info(a),
        Command::Replay(a) if a.headless => cmd::recording::replay_headless(&a),
        Command::Replay(a) => cmd::recording::replay_dashboard(&a),
        Command::Record(a) => cmd::recording::record(a),
        Command::Export(a) => cmd::recording::export(&a),
        Command::Diff(a) => cmd::recording::diff(&a),
        Command::Serve(a) => metrics::cmd::run(a),
    }
}

fn live(a: LiveArgs) -> anyhow::Result<ExitCode> {
    if a.synthetic {
        cmd::live::synthetic(a)
    } else {
        cmd::live::run(a)
    }
}
