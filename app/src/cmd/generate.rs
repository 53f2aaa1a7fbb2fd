//! `baro-top generate`: run.c's generate() on the chosen backend. stdout carries exactly the
//! text run.c would print; everything else (device, timing) goes to stderr.

use std::process::ExitCode;

use anyhow::{bail, Context};
use baro_engine::generate::{effective_steps, generate, Decode};
use baro_engine::reference::CpuDecoder;
use baro_engine::sampler::Sampler;
use baro_engine::vulkan::VulkanDecoder;
use clap::{Args, ValueEnum};

use crate::ModelArgs;

/// Where the forward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The f32 CPU reference (run.c's arithmetic).
    Cpu,
    /// The Vulkan decoder (see --mode).
    Vulkan,
}

/// Arguments of `generate` (run.c's flags, spelled long).
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text (run.c -i).
    #[arg(long, short = 'i', default_value = "")]
    pub prompt: String,
    /// Positions to run, prompt included; 0 = the model's context length (run.c -n).
    #[arg(long = "steps", short = 'n', default_value_t = 200)]
    pub steps: usize,
    /// Temperature; 0 = greedy argmax (run.c -t).
    #[arg(long, short = 't', default_value_t = 0.0)]
    pub temp: f32,
    /// Top-p nucleus threshold (run.c -p).
    #[arg(long, short = 'p', default_value_t = 0.9)]
    pub topp: f32,
    /// RNG seed; 0 = the current time, as run.c does (run.c -s).
    #[arg(long, short = 's', default_value_t = 0)]
    pub seed: u64,
    /// Decoder backend.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    #[command(flatten)]
    pub gpu: crate::GpuArgs,
}

pub fn run(mut a: GenerateArgs) -> anyhow::Result<ExitCode> {
    if !a.temp.is_finite() || !a.topp.is_finite() {
        bail!(
            "--temp and --topp must be finite numbers (got {} and {})",
            a.temp,
            a.topp
        );
    }
    // run.c's own parameter validation, so the same arguments give the same text.
    if a.temp < 0.0 {
        a.temp = 0.0;
    }
    if !(0.0..=1.0).contains(&a.topp) {
        a.topp = 0.9;
    }
    let model = super::load_model(&a.model)?;
    let steps = effective_steps(a.steps, model.config.seq_len);
    let seed = if a.seed == 0 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    } else {
        a.seed
    };
    let mut sampler = Sampler::new(model.config.vocab_size, a.temp, a.topp, seed);
    let mut dec: Box<dyn Decode + '_> = match a.backend {
        Backend::Cpu => Box::new(CpuDecoder::new(&model.config, &model.weights, steps)),
        Backend::Vulkan => {
            let ctx = super::open_gpu(&a.gpu)?;
            let opts = a.gpu.decoder_options(steps);
            Box::new(super::PassLogger::new(
                VulkanDecoder::new(ctx, &model, opts).context("building the Vulkan decoder")?,
            ))
        }
    };
    eprintln!(
        "baro-top: model {} ({} layers, dim {}, vocab {}), backend {:?}",
        model.source, model.config.n_layers, model.config.dim, model.config.vocab_size, a.backend
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let g = generate(
        dec.as_mut(),
        &model.tokenizer,
        &mut sampler,
        a.prompt.as_bytes(),
        steps,
        &mut out,
    )
    .context("generating")?;
    if let Some(tps) = g.tok_per_s() {
        eprintln!("achieved tok/s: {tps:.6}");
    }
    Ok(ExitCode::SUCCESS)
}
