//! `baro-top model gen|import|info`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use baro_engine::gguf::GgufFile;
use baro_engine::model::types::{Arch, RopeStyle};
use baro_engine::model::{file_type_name, gguf_info, Config, Model, Quant};
use baro_engine::synth::{self, Llama3Rope, Shape};
use clap::Args;

/// `model gen`: a synthetic llama model.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Named shape: tiny | llama-1b | llama-8b (explicit dimensions below override it).
    #[arg(long, default_value = "tiny")]
    pub shape: String,
    /// Model width (embedding size), 1..=2^20 (default: as the shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub dim: Option<usize>,
    /// Feed-forward hidden size, 1..=2^20 (default: as the shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub hidden: Option<usize>,
    /// Number of transformer layers, 1..=2^20 (default: as the shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub layers: Option<usize>,
    /// Attention (query) heads, 1..=2^20 (default: as the shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub heads: Option<usize>,
    /// Key/value heads, dividing --heads, 1..=2^20 (grouped-query attention; default: as the
    /// shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub kv_heads: Option<usize>,
    /// Vocabulary size, 1..=2^20 (token ids; the file has no real vocabulary; default: as the
    /// shape has it).
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub vocab: Option<usize>,
    /// Context length written to the metadata, 1..=2^20.
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub seq: Option<usize>,
    /// Architecture: llama | qwen2 (q/k/v biases, NEOX RoPE) | qwen3 (per-head q/k norms,
    /// NEOX RoPE).
    #[arg(long, default_value = "llama")]
    pub arch: String,
    /// Head size apart from dim / heads (written as attention.key_length/value_length;
    /// qwen3 models have one), 1..=2^20.
    #[arg(long, value_parser = crate::validate::model_dim, allow_negative_numbers = true)]
    pub head_dim: Option<usize>,
    /// Llama 3 RoPE scaling (rope_freqs.weight, llama only): `3.1` (factor 8), `3.2`
    /// (factor 32), or FACTOR,LOW,HIGH,ORIGINAL_CONTEXT.
    #[arg(long)]
    pub llama3_rope: Option<String>,
    /// Linear RoPE scaling factor (rope.scaling.type linear), 1/1024..=1024.
    #[arg(long, value_parser = crate::validate::rope_scale, allow_negative_numbers = true)]
    pub rope_scale: Option<f32>,
    /// Untie the classifier from the embedding (default: as the shape has it).
    #[arg(long)]
    pub untied: bool,
    /// Matrix types: one type for every matrix, f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 |
    /// q5_1 | q4_k | q5_k, or llama-quantize's mix tensor by tensor, q4_k_s | q4_k_m | q5_k_s |
    /// q5_k_m | q6_k | iq4_xs | iq4_nl (ggml's reference quantisers, bit for bit: the file
    /// llama-quantize writes from the same F32 values, without an importance matrix).
    #[arg(long, default_value = "q4_0")]
    pub quant: String,
    /// Seed of the random weights, any 64-bit value (the same seed makes the same file).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Greedy steps on the CPU reference used to report the top-1/top-2 margin, 0..=4096
    /// (0 = skip).
    #[arg(long, default_value_t = 8, value_parser = crate::validate::margin_steps, allow_negative_numbers = true)]
    pub margin_steps: usize,
    /// The GGUF file to write.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
}

/// `model import`: llama2.c checkpoint to GGUF.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// llama2.c checkpoint (legacy version-0 .bin).
    pub input: PathBuf,
    /// llama2.c tokenizer (tok*.bin).
    #[arg(long, short = 'z')]
    pub tokenizer: PathBuf,
    /// Matrix types: one type for every matrix, f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 |
    /// q5_1 | q4_k | q5_k, or llama-quantize's mix tensor by tensor, q4_k_s | q4_k_m | q5_k_s |
    /// q5_k_m | q6_k | iq4_xs | iq4_nl (ggml's reference quantisers, bit for bit: the file
    /// llama-quantize writes from the same F32 values, without an importance matrix).
    #[arg(long, default_value = "f32")]
    pub quant: String,
    #[arg(long, short = 'o')]
    pub out: PathBuf,
}

/// `model info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// GGUF file (or llama2.c checkpoint with --tokenizer).
    pub file: PathBuf,
    #[arg(long, short = 'z')]
    pub tokenizer: Option<PathBuf>,
}

/// A progress callback: a `\r`-rewritten line when stderr is a terminal; otherwise only the
/// final line (a log file gets no carriage returns).
fn progress_bar(label: &str) -> impl FnMut(u64, u64) {
    let label = label.to_string();
    let start = Instant::now();
    let tty = crate::out::stderr_is_terminal();
    let mut last = None;
    move |done, total| {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if last == Some(pct) && done != total {
            return;
        }
        last = Some(pct);
        let mb = done as f64 / 1e6;
        let rate = mb / start.elapsed().as_secs_f64().max(1e-9);
        let line = format!("{label}: {pct:3}% ({mb:.0} MB, {rate:.0} MB/s)");
        if tty {
            note_raw!("\r{line}   {}", if done == total { "\n" } else { "" });
        } else if done == total {
            note!("{line}");
        }
    }
}

fn write(model: &Model, out: &Path, name: &str, quant: Quant) -> anyhow::Result<()> {
    crate::files::write_atomic(out, |tmp| {
        model
            .write_gguf(
                tmp,
                name,
                Some(quant),
                progress_bar(&format!("writing {}", out.display())),
            )
            .map_err(anyhow::Error::from)
    })
}

/// Memory available to this process for a model built in memory (Linux: MemAvailable).
fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

fn gigabytes(b: u128) -> String {
    format!("{:.1} GB", b as f64 / 1e9)
}

pub fn gen(a: GenArgs) -> anyhow::Result<ExitCode> {
    let ty = Quant::parse(&a.quant)?;
    let (base, tied) = Shape::parse(&a.shape)?.config();
    let cfg = Config {
        dim: a.dim.unwrap_or(base.dim),
        hidden_dim: a.hidden.unwrap_or(base.hidden_dim),
        n_layers: a.layers.unwrap_or(base.n_layers),
        n_heads: a.heads.unwrap_or(base.n_heads),
        n_kv_heads: a.kv_heads.unwrap_or(base.n_kv_heads),
        vocab_size: a.vocab.unwrap_or(base.vocab_size),
        seq_len: a.seq.unwrap_or(base.seq_len),
        arch: Arch::from_name(&a.arch)
            .with_context(|| format!("unknown --arch '{}' (llama|qwen2|qwen3)", a.arch))?,
        head_dim: a.head_dim.or(base.head_dim),
        rope_scale: a.rope_scale.unwrap_or(base.rope_scale),
        ..base
    };
    cfg.validate().context("model shape")?;
    let llama3 = a.llama3_rope.as_deref().map(parse_llama3).transpose()?;
    if llama3.is_some() && cfg.arch != Arch::Llama {
        bail!(
            "--llama3-rope: rope_freqs.weight belongs to llama models (llama.cpp reads none for {})",
            cfg.arch.name()
        );
    }
    let tied = tied && !a.untied;
    // The model is built in memory before it is written: refuse a shape that cannot fit
    // before allocating any of it.
    let need = synth::weight_bytes(&cfg, tied, ty);
    if let Some(avail) = memory_available() {
        if need > u128::from(avail) {
            bail!(
                "this shape needs {} of {ty} weights ({} bytes) in memory (dim {}, hidden {}, layers {}, vocab {}; the model is generated in memory before it is written), more than the {} this machine has available",
                gigabytes(need),
                need,
                cfg.dim,
                cfg.hidden_dim,
                cfg.n_layers,
                cfg.vocab_size,
                gigabytes(avail.into())
            );
        }
    }
    let t0 = Instant::now();
    note!(
        "generating {} {} {ty} seed {}: dim {} hidden {} layers {} heads {} kv_heads {} head_size {} vocab {} context {} rope theta {}, {} of weights, tied head: {tied}",
        cfg.arch.name(),
        a.shape,
        a.seed,
        cfg.dim,
        cfg.hidden_dim,
        cfg.n_layers,
        cfg.n_heads,
        cfg.n_kv_heads,
        cfg.head_size(),
        cfg.vocab_size,
        cfg.seq_len,
        cfg.rope_theta,
        gigabytes(need)
    );
    let tty = crate::out::stderr_is_terminal();
    let mut model = synth::generate(&cfg, tied, ty, a.seed, |done, total| {
        if tty {
            note_raw!("\rgenerating tensors: {done}/{total}   ");
            if done == total {
                note!();
            }
        }
    })?;
    if let Some(p) = &llama3 {
        synth::add_llama3_rope(&mut model, p)?;
    }
    model.source = format!("synthetic {} {ty} seed {}", a.shape, a.seed);
    note!(
        "generated {:.2} GB in {:.1} s",
        model.weight_bytes() as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    if a.margin_steps > 0 {
        let (median, all) = synth::median_margin(&model, a.margin_steps);
        let min = all.iter().copied().fold(f32::INFINITY, f32::min);
        note!(
            "greedy top-1/top-2 logit margin over {} steps: median {median:.4}, min {min:.4}",
            all.len()
        );
    }
    let name = format!("baro-top synthetic {} {ty} seed {}", a.shape, a.seed);
    write(&model, &a.out, &name, ty)?;
    note!("wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// `--llama3-rope`: `3.1`, `3.2` or FACTOR,LOW,HIGH,ORIGINAL_CONTEXT.
fn parse_llama3(s: &str) -> anyhow::Result<Llama3Rope> {
    Ok(match s {
        "3.1" => Llama3Rope::LLAMA_3_1,
        "3.2" => Llama3Rope::LLAMA_3_2,
        _ => {
            let v: Vec<f32> = s
                .split(',')
                .map(|x| x.trim().parse::<f32>())
                .collect::<Result<_, _>>()
                .with_context(|| format!("--llama3-rope '{s}': 3.1, 3.2 or four numbers"))?;
            let [factor, low_freq_factor, high_freq_factor, original_context] = v[..] else {
                bail!("--llama3-rope '{s}': 3.1, 3.2 or FACTOR,LOW,HIGH,ORIGINAL_CONTEXT");
            };
            if !v.iter().all(|x| x.is_finite() && *x > 0.0) || low_freq_factor >= high_freq_factor {
                bail!("--llama3-rope '{s}': every number positive and LOW < HIGH");
            }
            Llama3Rope {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_context,
            }
        }
    })
}

pub fn import(a: ImportArgs) -> anyhow::Result<ExitCode> {
    let ty = Quant::parse(&a.quant)?;
    let model = super::open_model_file(&a.input, Some(&a.tokenizer), "reading")?;
    let model = model.quantized(ty).context("quantising")?;
    let name = a
        .input
        .file_stem()
        .map_or("imported".into(), |s| s.to_string_lossy().into_owned());
    write(&model, &a.out, &name, ty)?;
    note!("wrote {} ({ty})", a.out.display());
    Ok(ExitCode::SUCCESS)
}

pub fn info(a: InfoArgs) -> anyhow::Result<ExitCode> {
    let model = super::open_model_file(&a.file, a.tokenizer.as_deref(), "reading")?;
    outln!("model      {}", model.source)?;
    print_format(&a.file)?;
    print_shape(&model)?;
    let total = print_tensors(&model)?;
    if total == 0 {
        bail!("model has no weight data");
    }
    Ok(ExitCode::SUCCESS)
}

/// `model info`'s file format line (and the GGUF's own name).
fn print_format(file: &Path) -> std::io::Result<()> {
    if let Ok(f) = GgufFile::open(file) {
        outln!(
            "format     GGUF v{} ({} tensors, {} metadata keys, alignment {})",
            f.version,
            f.tensors.len(),
            f.metadata.len(),
            f.alignment
        )?;
        if let Ok(Some(n)) = f.get_str("general.name") {
            outln!("name       {n}")?;
        }
        if let Ok(Some(t)) = f.get_u64("general.file_type") {
            let name = u32::try_from(t).ok().and_then(file_type_name);
            outln!(
                "file type  {} (general.file_type {t})",
                name.unwrap_or("unknown to this build")
            )?;
        }
    } else {
        outln!("format     llama2.c checkpoint")?;
    }
    Ok(())
}

/// `model info`'s architecture, vocabulary, context, RoPE and head lines.
fn print_shape(model: &Model) -> std::io::Result<()> {
    let c = &model.config;
    let w = &model.weights;
    let mut parts = vec![];
    if w.layers.iter().any(|l| l.q_bias.is_some()) {
        parts.push("q/k/v biases");
    }
    if w.layers.iter().any(|l| l.q_norm.is_some()) {
        parts.push("per-head q/k norms");
    }
    outln!(
        "arch       {}: dim {} ffn {} layers {} heads {} kv_heads {} head_size {}{}{}",
        c.arch.name(),
        c.dim,
        c.hidden_dim,
        c.n_layers,
        c.n_heads,
        c.n_kv_heads,
        c.head_size(),
        if c.head_dim.is_some() {
            " (attention.key_length)"
        } else {
            ""
        },
        if parts.is_empty() {
            String::new()
        } else {
            format!(", {}", parts.join(", "))
        }
    )?;
    outln!(
        "vocab      {} (bos {}, eos {})",
        c.vocab_size,
        model.tokenizer.bos_id(),
        model.tokenizer.eos_id()
    )?;
    outln!(
        "context    {}  rope theta {}  rms eps {:e}",
        c.seq_len,
        c.rope_theta,
        c.norm_eps
    )?;
    let pairs = match c.rope_style() {
        RopeStyle::Normal => "adjacent pairs",
        RopeStyle::Neox => "NEOX pairs (i, i + head_size/2)",
    };
    let mut scaling = vec![];
    if c.rope_scale != 1.0 {
        scaling.push(format!("linear factor {}", c.rope_scale));
    }
    if let Some(f) = w.rope_factors() {
        let (lo, hi) = f
            .iter()
            .fold((f32::INFINITY, 0f32), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        scaling.push(format!(
            "llama3 rope_freqs ({} factors, {lo}..{hi})",
            f.len()
        ));
    }
    outln!(
        "rope       {pairs}, scaling {}",
        if scaling.is_empty() {
            "none".to_string()
        } else {
            scaling.join(" + ")
        }
    )?;
    outln!(
        "head       {}",
        if model.weights.output.is_some() {
            "untied (output.weight)"
        } else {
            "tied to token_embd"
        }
    )?;
    Ok(())
}

/// `model info`'s weight total and one row per tensor; the weights' bytes.
fn print_tensors(model: &Model) -> std::io::Result<u64> {
    let total = model.weight_bytes();
    let params: u64 = model
        .weights
        .tensors()
        .iter()
        .map(|t| (t.rows * t.cols) as u64)
        .sum();
    outln!(
        "weights    {params} parameters, {:.3} MB",
        total as f64 / 1e6
    )?;
    outln!()?;
    outln!(
        "{:<32} {:>6} {:>16} {:>12}",
        "tensor",
        "type",
        "dims (ggml)",
        "bytes"
    )?;
    for t in model.weights.tensors() {
        let (_, dims, _) = gguf_info(t);
        let d = dims
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x");
        outln!(
            "{:<32} {:>6} {:>16} {:>12}",
            t.name,
            t.ty.name(),
            d,
            t.data.len()
        )?;
    }
    Ok(total)
}
