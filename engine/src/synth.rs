//! Deterministic synthetic llama models of any shape, so performance work needs no downloads.
//!
//! Every architecture baro-top implements ([`Arch`]: llama, qwen2 with q/k/v biases, qwen3
//! with per-head q/k norms and any head size) and Llama 3's rope scaling factors
//! ([`add_llama3_rope`]) can be generated, so tests need no downloads.
//!
//! Every tensor is generated from `(seed, tensor name, row)` alone, in parallel, so the same
//! arguments give the same bytes on any machine with any thread count. Scales are chosen so
//! the residual stream stays O(1) through the blocks and the logits have a standard deviation
//! of about 4: greedy decoding then has healthy top-1/top-2 margins (see
//! [`median_margin`]), which keeps GPU-vs-reference comparisons meaningful.

use crate::blob::Blob;
use crate::model::mix::{Quant, Role};
use crate::model::types::{Arch, Config, Layer, Tensor, Weights};
use crate::model::vocab::synthetic_tokenizer;
use crate::model::Model;
use crate::quant::{self, GgmlType};
use crate::rng::Rng;
use crate::{Error, Result};

/// FNV-1a of a name, to derive per-tensor streams.
fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A named model shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A small model for tests: d 128, 4 blocks, 8/4 heads, ffn 384, vocab 512.
    Tiny,
    /// Llama-3.2-1B: d 2048, 16 blocks, 32/8 heads, ffn 8192, vocab 128256, tied head.
    Llama1B,
    /// Llama-3.1-8B: d 4096, 32 blocks, 32/8 heads, ffn 14336, vocab 128256, untied head.
    Llama8B,
}

impl Shape {
    /// Parse `tiny`, `llama-1b`, `llama-8b`.
    pub fn parse(s: &str) -> Result<Shape> {
        Ok(match s {
            "tiny" => Shape::Tiny,
            "llama-1b" => Shape::Llama1B,
            "llama-8b" => Shape::Llama8B,
            _ => {
                return Err(Error::Invalid(format!(
                    "unknown shape '{s}' (tiny|llama-1b|llama-8b)"
                )))
            }
        })
    }

    /// The configuration and whether the classifier is tied to the embedding.
    pub fn config(self) -> (Config, bool) {
        let c =
            |dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, rope_theta| {
                Config {
                    dim,
                    hidden_dim,
                    n_layers,
                    n_heads,
                    n_kv_heads,
                    vocab_size,
                    seq_len,
                    rope_theta,
                    norm_eps: 1e-5,
                    arch: Arch::Llama,
                    head_dim: None,
                    rope_scale: 1.0,
                }
            };
        match self {
            Shape::Tiny => (c(128, 384, 4, 8, 4, 512, 512, 10000.0), true),
            Shape::Llama1B => (c(2048, 8192, 16, 32, 8, 128256, 2048, 500000.0), true),
            Shape::Llama8B => (c(4096, 14336, 32, 32, 8, 128256, 2048, 500000.0), false),
        }
    }
}

/// Generate one tensor: uniform values with standard deviation `std` around `mean`, encoded
/// as `ty`, rows generated in parallel.
fn gen_tensor(
    seed: u64,
    name: &str,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    mean: f32,
    std: f32,
) -> Result<Tensor> {
    if !cols.is_multiple_of(ty.block_len()) {
        return Err(Error::Invalid(format!(
            "{name}: row length {cols} is not a multiple of the {ty} block size {}; pick dimensions that are multiples of it (or a mix such as q4_k_m, which falls back where rows are not whole super-blocks)",
            ty.block_len()
        )));
    }
    let base = seed ^ name_hash(name);
    let amp = std * 3f32.sqrt();
    let out = quant::quantize_rows(ty, rows, cols, |r, row| {
        let mut rng = Rng::new(base.wrapping_add((r as u64).wrapping_mul(0xA24B_AED4_963E_E407)));
        for v in row.iter_mut() {
            *v = mean + amp * rng.next_signed();
        }
    })
    .map_err(|(r, e)| Error::Model(format!("{name} row {r}: {e}")))?;
    Tensor::new(name, ty, rows, cols, Blob::owned(out))
}

/// Generate a model of configuration `cfg` (tied head if `tied`), matrices as `ty`, norms F32.
pub fn generate(
    cfg: &Config,
    tied: bool,
    quant: impl Into<Quant>,
    seed: u64,
    mut progress: impl FnMut(usize, usize),
) -> Result<Model> {
    let quant = quant.into();
    cfg.validate()?;
    let ty =
        |role: Role, layer: usize, cols: usize| quant.tensor_type(role, layer, cols, cfg, tied);
    let (d, h, kv, v) = (cfg.dim, cfg.hidden_dim, cfg.kv_dim(), cfg.vocab_size);
    let q = cfg.q_dim();
    let n_steps = cfg.n_layers + 2;
    let inv = |n: usize| 1.0 / (n as f32).sqrt();
    // Logit std ≈ 4: classifier rows have norm 4 against a unit-RMS normalised state.
    let head_std = 4.0 * inv(d);
    let norm = |name: String| gen_tensor(seed, &name, GgmlType::F32, 1, d, 1.0, 0.05);
    progress(0, n_steps);
    let token_embd = gen_tensor(
        seed,
        "token_embd.weight",
        ty(Role::TokenEmbd, 0, d),
        v,
        d,
        0.0,
        head_std,
    )?;
    progress(1, n_steps);
    let mut layers = Vec::with_capacity(cfg.n_layers);
    for l in 0..cfg.n_layers {
        let m = |s: &str, role: Role, rows, cols, std| {
            gen_tensor(
                seed,
                &format!("blk.{l}.{s}.weight"),
                ty(role, l, cols),
                rows,
                cols,
                0.0,
                std,
            )
        };
        // Residual branches scaled by 1/sqrt(2 n_layers) keep the stream from growing.
        let branch = inv(2 * cfg.n_layers);
        // Biases of the size of a projection's typical output (qwen2's are large, its k bias
        // especially); q/k norm weights around 1 with some spread, so both change the math.
        let vec = |s: &str, len: usize, mean: f32, std: f32, on: bool| -> Result<Option<Tensor>> {
            on.then(|| {
                gen_tensor(
                    seed,
                    &format!("blk.{l}.{s}"),
                    GgmlType::F32,
                    1,
                    len,
                    mean,
                    std,
                )
            })
            .transpose()
        };
        let (bias, qkn) = (cfg.arch.has_qkv_bias(), cfg.arch.has_qk_norm());
        let hs = cfg.head_size();
        layers.push(Layer {
            q_bias: vec("attn_q.bias", q, 0.0, 0.5, bias)?,
            k_bias: vec("attn_k.bias", kv, 0.0, 0.5, bias)?,
            v_bias: vec("attn_v.bias", kv, 0.0, 0.5, bias)?,
            q_norm: vec("attn_q_norm.weight", hs, 1.0, 0.3, qkn)?,
            k_norm: vec("attn_k_norm.weight", hs, 1.0, 0.3, qkn)?,
            attn_norm: norm(format!("blk.{l}.attn_norm.weight"))?,
            wq: m("attn_q", Role::AttnQ, q, d, inv(d))?,
            wk: m("attn_k", Role::AttnK, kv, d, inv(d))?,
            wv: m("attn_v", Role::AttnV, kv, d, inv(d))?,
            wo: m("attn_output", Role::AttnOutput, d, q, inv(q) * branch * 4.0)?,
            ffn_norm: norm(format!("blk.{l}.ffn_norm.weight"))?,
            w_gate: m("ffn_gate", Role::FfnGate, h, d, inv(d))?,
            w_down: m("ffn_down", Role::FfnDown, d, h, inv(h) * branch * 4.0)?,
            w_up: m("ffn_up", Role::FfnUp, h, d, inv(d))?,
        });
        progress(2 + l, n_steps);
    }
    let output = if tied {
        None
    } else {
        Some(gen_tensor(
            seed,
            "output.weight",
            ty(Role::Output, 0, d),
            v,
            d,
            0.0,
            head_std,
        )?)
    };
    let weights = Weights {
        token_embd,
        rope_freqs: None,
        layers,
        output_norm: norm("output_norm.weight".into())?,
        output,
    };
    weights.validate(cfg)?;
    progress(n_steps, n_steps);
    Ok(Model {
        config: cfg.clone(),
        weights,
        tokenizer: synthetic_tokenizer(v, seed)?,
        source: format!("synthetic {quant} seed {seed}"),
    })
}

/// Bytes of weight data [`generate`] would allocate for this shape (exact, in u128 so no
/// shape overflows it). Check it against the memory available before calling [`generate`]:
/// the model is built in memory.
pub fn weight_bytes(cfg: &Config, tied: bool, quant: impl Into<Quant>) -> u128 {
    let quant = quant.into();
    let (d, h, kv, v) = (
        cfg.dim as u128,
        cfg.hidden_dim as u128,
        cfg.kv_dim() as u128,
        cfg.vocab_size as u128,
    );
    let (q, hs) = (cfg.q_dim() as u128, cfg.head_size() as u128);
    // Rows rounded up to whole blocks: a shape that is not whole blocks is refused later anyway.
    let mat = |role: Role, layer: usize, rows: u128, cols: u128| -> u128 {
        let ty = quant.tensor_type(role, layer, cols as usize, cfg, tied);
        rows * cols.div_ceil(ty.block_len() as u128) * ty.block_bytes() as u128
    };
    let f32s = |n: u128| 4 * n;
    let biases = if cfg.arch.has_qkv_bias() {
        f32s(q + 2 * kv)
    } else {
        0
    };
    let norms = if cfg.arch.has_qk_norm() {
        f32s(2 * hs)
    } else {
        0
    };
    let output = if tied { 0 } else { mat(Role::Output, 0, v, d) };
    let mut layers = 0u128;
    for l in 0..cfg.n_layers {
        layers += mat(Role::AttnQ, l, q, d)
            + mat(Role::AttnK, l, kv, d)
            + mat(Role::AttnV, l, kv, d)
            + mat(Role::AttnOutput, l, d, q)
            + mat(Role::FfnGate, l, h, d)
            + mat(Role::FfnDown, l, d, h)
            + mat(Role::FfnUp, l, h, d)
            + 2 * f32s(d)
            + biases
            + norms;
    }
    mat(Role::TokenEmbd, 0, v, d) + output + layers + f32s(d)
}

/// Llama 3.1+ RoPE scaling ("llama3" in a Hugging Face config's `rope_scaling`), which a
/// GGUF carries as per-pair frequency factors (`rope_freqs.weight`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Rope {
    /// Factor of the lowest frequencies.
    pub factor: f32,
    /// Wavelengths above `original_context / low_freq_factor` get `factor`.
    pub low_freq_factor: f32,
    /// Wavelengths below `original_context / high_freq_factor` keep their frequency.
    pub high_freq_factor: f32,
    /// The context the model was pre-trained at.
    pub original_context: f32,
}

impl Llama3Rope {
    /// Llama 3.1's (8B, 70B, 405B): factor 8.
    pub const LLAMA_3_1: Llama3Rope = Llama3Rope {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_context: 8192.0,
    };
    /// Llama 3.2's (1B, 3B): factor 32.
    pub const LLAMA_3_2: Llama3Rope = Llama3Rope {
        factor: 32.0,
        ..Llama3Rope::LLAMA_3_1
    };

    /// The factors of a head of `cfg`, one per RoPE pair, as llama.cpp's converter computes
    /// them: pair i's frequency ω_i = 1 / theta^(2i / head_size) has wavelength λ = 2π / ω_i;
    /// λ < L / high → 1, λ > L / low → factor, else with s = (L / λ - low) / (high - low)
    /// the factor 1 / ((1 - s) / factor + s) (L the original context). In f64, rounded once.
    pub fn factors(&self, cfg: &Config) -> Vec<f32> {
        let hs = cfg.head_size();
        let (f, lo, hi, l) = (
            f64::from(self.factor),
            f64::from(self.low_freq_factor),
            f64::from(self.high_freq_factor),
            f64::from(self.original_context),
        );
        (0..hs / 2)
            .map(|i| {
                let freq = 1.0 / f64::from(cfg.rope_theta).powf((2 * i) as f64 / hs as f64);
                let wavelen = 2.0 * std::f64::consts::PI / freq;
                if wavelen < l / hi {
                    1.0
                } else if wavelen > l / lo {
                    self.factor
                } else {
                    let s = (l / wavelen - lo) / (hi - lo);
                    (1.0 / ((1.0 - s) / f + s)) as f32
                }
            })
            .collect()
    }
}

/// Give `model` Llama 3 rope scaling: `rope_freqs.weight` with `p`'s factors (refused for an
/// architecture other than llama, which llama.cpp reads no such tensor for).
pub fn add_llama3_rope(model: &mut Model, p: &Llama3Rope) -> Result<()> {
    if model.config.arch != Arch::Llama {
        return Err(Error::Invalid(format!(
            "llama3 rope scaling (rope_freqs.weight) belongs to llama models, not {}",
            model.config.arch.name()
        )));
    }
    let f = p.factors(&model.config);
    model.weights.rope_freqs = Some(Tensor::from_f32("rope_freqs.weight", 1, f.len(), &f)?);
    model.weights.validate(&model.config)
}

/// Greedy-decode `steps` tokens from BOS on the CPU reference and return the median
/// top-1/top-2 logit margin (and all margins).
pub fn median_margin(model: &Model, steps: usize) -> (f32, Vec<f32>) {
    let mut dec = crate::reference::CpuDecoder::new(&model.config, &model.weights, steps.max(1));
    let mut tok = model.tokenizer.bos_id();
    let mut margins = Vec::new();
    for pos in 0..dec.max_seq() {
        let m = crate::reference::margin(dec.forward(tok, pos));
        margins.push(m.margin);
        tok = m.top1;
    }
    let mut sorted = margins.clone();
    sorted.sort_by(f32::total_cmp);
    (
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        margins,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_bytes_is_what_generate_allocates() {
        use crate::model::mix::KMix;
        let (tiny, tied) = Shape::Tiny.config();
        let tiny = Config {
            n_layers: 2,
            ..tiny
        };
        // A K-quant mix on rows of 256 (whole super-blocks) and on the tiny shape's 128 and
        // 384 (every matrix falls back, to Q5_0, Q8_0, Q5_1, IQ4_NL): each tensor's own type
        // counts.
        let wide = Config {
            dim: 256,
            hidden_dim: 768,
            n_layers: 3,
            ..tiny.clone()
        };
        for (cfg, quant) in [
            (&tiny, Quant::Uniform(GgmlType::Q4_0)),
            (&tiny, Quant::Uniform(GgmlType::F16)),
            (&tiny, Quant::Mix(KMix::Q4KM)),
            (&tiny, Quant::Mix(KMix::Q5KS)),
            (&wide, Quant::Mix(KMix::Q4KM)),
            (&wide, Quant::Uniform(GgmlType::Q6_K)),
            (&wide, Quant::Mix(KMix::IQ4XS)),
            // Rows of 128 and 384: IQ4_XS falls back to IQ4_NL (its Q5_K ffn_down to Q5_1).
            (&tiny, Quant::Mix(KMix::IQ4XS)),
            (&tiny, Quant::Mix(KMix::IQ4NL)),
            (&wide, Quant::Uniform(GgmlType::IQ4_NL)),
        ] {
            for tied in [tied, !tied] {
                let m = generate(cfg, tied, quant, 1, |_, _| {}).unwrap();
                assert_eq!(
                    weight_bytes(cfg, tied, quant),
                    u128::from(m.weight_bytes()),
                    "{quant} tied {tied}"
                );
            }
        }
        // Rows of 128 are not whole IQ4_XS super-blocks: its fallback, IQ4_NL, is written.
        let m = generate(&tiny, tied, Quant::Mix(KMix::IQ4XS), 1, |_, _| {}).unwrap();
        assert_eq!(m.weights.layers[1].wq.ty, GgmlType::IQ4_NL);
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let (cfg, tied) = Shape::Tiny.config();
        let a = generate(&cfg, tied, GgmlType::Q4_0, 7, |_, _| {}).unwrap();
        let b = generate(&cfg, tied, GgmlType::Q4_0, 7, |_, _| {}).unwrap();
        let c = generate(&cfg, tied, GgmlType::Q4_0, 8, |_, _| {}).unwrap();
        assert_eq!(&*a.weights.layers[2].wq.data, &*b.weights.layers[2].wq.data);
        assert_ne!(&*a.weights.layers[2].wq.data, &*c.weights.layers[2].wq.data);
    }

    #[test]
    fn tiny_model_has_healthy_greedy_margins() {
        let (cfg, tied) = Shape::Tiny.config();
        let m = generate(&cfg, tied, GgmlType::F32, 1, |_, _| {}).unwrap();
        let (median, all) = median_margin(&m, 32);
        assert_eq!(all.len(), 32);
        assert!(
            median > 0.1,
            "median margin {median} too small for stable greedy decoding"
        );
    }

    #[test]
    fn odd_dimensions_are_refused_for_block_types() {
        let (mut cfg, tied) = Shape::Tiny.config();
        cfg.hidden_dim = 100;
        assert!(generate(&cfg, tied, GgmlType::Q8_0, 1, |_, _| {}).is_err());
    }
}
