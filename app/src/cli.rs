//! The command line: `baro-top`'s subcommands, each with its arguments (declared in its
//! module under `cmd`; the groups several share are in `args`).

use clap::{Parser, Subcommand};

use crate::cmd;

/// Terminal profiler and live decode monitor for a persistent-megakernel LLM decoder on Vulkan.
#[derive(Parser, Debug)]
#[command(name = "baro-top", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    Live(cmd::live::LiveArgs),
    /// Create, convert and inspect model files.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Record a headless decode to a file (`.baro`): every message, losslessly.
    Record(cmd::record::RecordArgs),
    /// Replay a recording (`.baro`): the dashboard, or --headless lines / --json.
    Replay(cmd::recording::ReplayArgs),
    /// Export a recording as a trace (Perfetto protobuf, Trace Event JSON) and/or CSVs.
    Export(cmd::recording::ExportArgs),
    /// Compare two recordings within one power mode: per stage kind busy/charged medians, and
    /// their tokens.
    Diff(cmd::recording::DiffArgs),
    /// Serve Prometheus/OpenMetrics metrics of the telemetry stream (--metrics ADDR).
    Serve(cmd::serve::ServeArgs),
}

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Write a deterministic synthetic llama model as GGUF.
    Gen(cmd::model::GenArgs),
    /// Convert a llama2.c checkpoint (+ tokenizer) to GGUF.
    Import(cmd::model::ImportArgs),
    /// Show a model's architecture, tensors and sizes.
    Info(cmd::model::InfoArgs),
}
