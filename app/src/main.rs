//! baro-top: terminal profiler and live decode monitor for a persistent-megakernel LLM decoder
//! on Vulkan. This binary parses the command line and hands each subcommand to its module.

mod cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Terminal profiler and live decode monitor for a persistent-megakernel LLM decoder on Vulkan.
#[derive(Parser, Debug)]
#[command(name = "baro-top", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate text exactly as llama2.c's run.c prints it (stdout: the text; stderr: timing).
    Generate(cmd::generate::GenerateArgs),
    /// Create, convert and inspect model files.
    #[command(subcommand)]
    Model(ModelCommand),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(a) => cmd::generate::run(a),
        Command::Model(ModelCommand::Gen(a)) => cmd::model::gen(a),
        Command::Model(ModelCommand::Import(a)) => cmd::model::import(a),
        Command::Model(ModelCommand::Info(a)) => cmd::model::info(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("baro-top: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
