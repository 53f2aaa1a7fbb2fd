//! `baro-top generate`: run.c's generate() on the chosen backend. stdout carries exactly the
//! text run.c would print; everything else (device, timing) goes to stderr. With a GGUF
//! vocabulary the text ends at the model's end-of-generation tokens (EOS, EOT, ...), `--chat`
//! wraps the prompt in the file's chat template, `--special` parses and prints control tokens.

use std::process::ExitCode;

use anyhow::{bail, Context};
use baro_engine::device::GpuDecoder;
use baro_engine::generate::{effective_steps, generate_with, Decode, GenerateOptions};
use baro_engine::reference::CpuDecoder;
use baro_engine::sampler::Sampler;
use baro_engine::tokenizer::chat::ChatTemplate;
use clap::{Args, ValueEnum};

use crate::args::{DispatchArg, GpuArgs, ModelArgs};

/// Where the forward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The f32 CPU reference (run.c's arithmetic).
    Cpu,
    /// The Vulkan decoder (see --dispatch).
    Vulkan,
}

/// Arguments of `generate` (run.c's flags, spelled long).
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text (run.c -i), byte for byte: bytes that are not UTF-8 are encoded as run.c
    /// encodes them (byte fallback), and a prompt may start with `-` (`-i "- a list"`).
    #[arg(long, short = 'i', default_value = "", allow_hyphen_values = true)]
    pub prompt: std::ffi::OsString,
    /// Positions to run, prompt included, a whole number >= 0; 0 or more than the model's
    /// context length = the context length, as run.c clamps it (run.c -n).
    #[arg(long = "steps", short = 'n', default_value_t = 200, value_parser = crate::validate::steps, allow_negative_numbers = true)]
    pub steps: usize,
    /// Temperature, a finite number >= 0; 0 = greedy argmax (run.c -t).
    #[arg(long, short = 't', default_value_t = 0.0, value_parser = crate::validate::temperature, allow_negative_numbers = true)]
    pub temp: f32,
    /// Top-p nucleus threshold, 0..=1 (run.c -p).
    #[arg(long, short = 'p', default_value_t = 0.9, value_parser = crate::validate::top_p, allow_negative_numbers = true)]
    pub topp: f32,
    /// RNG seed; 0 = the current time, as run.c does (run.c -s).
    #[arg(long, short = 's', default_value_t = 0, value_parser = crate::validate::seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Wrap the prompt as one user message in the model's chat template (detected from
    /// `tokenizer.chat_template`: Llama-3 headers, ChatML, Mistral/Llama-2 [INST]).
    #[arg(long)]
    pub chat: bool,
    /// Control tokens written in the prompt are those tokens, and control tokens generated
    /// are printed (GGUF vocabularies).
    #[arg(long)]
    pub special: bool,
    /// Decoder backend.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// Dispatch style of the Vulkan decoder [default: mega].
    #[arg(long, value_enum, alias = "mode")]
    pub dispatch: Option<DispatchArg>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

pub fn run(a: GenerateArgs) -> anyhow::Result<ExitCode> {
    if a.gpu.chain.is_some() {
        anyhow::bail!(
            "--chain: generate runs one pass per submission, printing each as run.c does (bench, live, run, record and serve chain passes)"
        );
    }
    if a.gpu.pass_loop.is_some() {
        anyhow::bail!(
            "--pass-loop: generate runs one pass per submission, so no pass loop runs (it loops over a submission's chained passes: bench, live, run, record and serve chain them)"
        );
    }
    // --temp and --topp were validated by their parsers (crate::validate).
    if a.backend == Backend::Cpu {
        // --kv and --act apply to the CPU reference too (its cache rounded, its matvec inputs
        // quantised as the GPU's would be).
        let mut given: Vec<_> = a
            .gpu
            .given()
            .into_iter()
            .filter(|f| *f != "--kv" && *f != "--act")
            .collect();
        if a.dispatch.is_some() {
            given.insert(0, "--dispatch");
        }
        if !given.is_empty() {
            bail!(
                "{} {} for the Vulkan decoder, and --backend is cpu: pass --backend vulkan, or drop {} for the CPU reference",
                given.join(", "),
                if given.len() == 1 { "is an option" } else { "are options" },
                if given.len() == 1 { "it" } else { "them" }
            );
        }
    }
    let model = super::load_model(&a.model)?;
    let prompt = if a.chat {
        if !model.tokenizer.is_llama_cpp() {
            bail!(
                "--chat: {} has a llama2.c tokenizer, which carries no chat template",
                model.source
            );
        }
        let Some(msg) = a.prompt.to_str() else {
            bail!("--chat: the prompt is not UTF-8, and a chat template is text (drop --chat to encode its bytes as they are)");
        };
        ChatTemplate::detect(model.tokenizer.chat_template(), &model.source)?
            .user_prompt(msg)
            .into_bytes()
    } else {
        // run.c encodes the prompt's bytes as they are: a prompt that is not UTF-8 is no error.
        std::os::unix::ffi::OsStrExt::as_bytes(a.prompt.as_os_str()).to_vec()
    };
    let opts = GenerateOptions {
        // The template's header tokens are control tokens: --chat parses them.
        parse_special: a.special || a.chat,
        render_special: a.special,
    };
    let steps = effective_steps(a.steps, model.config.seq_len);
    let seed = crate::validate::resolve_seed(a.seed);
    if a.seed == 0 && a.temp > 0.0 {
        note!(
            "baro-top: seed 0 = the current time: seed {seed} (pass -s {seed} to repeat this text)"
        );
    }
    if a.backend == Backend::Cpu && a.gpu.act == Some(baro_engine::act::ActChoice::Q8) {
        // As the Vulkan decoder refuses it: a q8 run of F32 matrices would be an f32 run.
        baro_engine::act::check_q8_matrices(&model.weights)?;
    }
    let mut sampler = Sampler::new(model.config.vocab_size, a.temp, a.topp, seed);
    // The activation type the decoder runs (`--act auto` resolved for this model and
    // backend), and whether auto chose it.
    let (act, act_auto, kv, kv_auto);
    let mut dec: Box<dyn Decode + '_> = match a.backend {
        Backend::Cpu => {
            let caps = baro_engine::act::ActCaps::CPU_REFERENCE;
            (act, act_auto) = a.gpu.resolved_act(&model.weights, caps);
            (kv, kv_auto) = a.gpu.resolved_kv(act, model.config.dim, caps);
            Box::new(CpuDecoder::with_types(
                &model.config,
                &model.weights,
                steps,
                kv,
                act,
            ))
        }
        Backend::Vulkan => {
            let ctx = super::open_gpu(&a.gpu)?;
            let dispatch = a.dispatch.unwrap_or(DispatchArg::Mega).dispatch();
            let opts = baro_engine::device::DecoderOptions {
                chain: 1,
                ..a.gpu.decoder_options(dispatch, steps, &model, ctx.info())
            };
            (act, act_auto, kv, kv_auto) = (opts.act, opts.act_auto, opts.kv, opts.kv_auto);
            Box::new(super::PassLogger::new(
                GpuDecoder::new(&ctx, &model, opts).context("building the Vulkan decoder")?,
            ))
        }
    };
    note!(
        "baro-top: model {} ({} layers, dim {}, vocab {}), backend {}, KV cache {}, activations {}",
        model.source,
        model.config.n_layers,
        model.config.dim,
        model.config.vocab_size,
        match a.backend {
            Backend::Cpu => "cpu",
            Backend::Vulkan => "vulkan",
        },
        baro_engine::kv::kv_words(kv, kv_auto),
        baro_engine::act::act_words(act, act_auto)
    );
    // Generated text is the vocabulary's bytes: no escape sequence reaches a terminal.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut out = crate::out::TerminalSafe::new(crate::out::Stdout::lock(), tty);
    let g = generate_with(
        dec.as_mut(),
        &model.tokenizer,
        &mut sampler,
        &prompt,
        steps,
        &mut out,
        opts,
    )
    .context("generating")?;
    if let Some(tps) = g.tok_per_s() {
        note!("achieved tok/s: {tps:.6}");
    }
    Ok(ExitCode::SUCCESS)
}
