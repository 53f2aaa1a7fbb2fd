//! The llama model as the decoders consume it: a [`Config`] and the [`Weights`], each tensor
//! kept in its file type (F32/F16/Q8_0/Q4_0) as a view into the file's bytes.
//!
//! Tensor names follow GGUF's convention (`token_embd.weight`, `blk.N.attn_q.weight`, …).
//! Three architectures ([`types::Arch`]): `llama` (RoPE on adjacent pairs (2i, 2i+1), as
//! llama2.c and ggml's "normal" mode; optional `rope_freqs.weight`), `qwen2` (q/k/v biases,
//! NEOX RoPE: pairs (i, i + head_size/2)) and `qwen3` (per-head q/k RMSNorm, NEOX RoPE).

//!
//! Modules: [`types`] (the shape, tensors and weights: a leaf the format readers and the
//! decoders build on), `load` (embedded model, GGUF and llama2.c files), `write` (GGUF out,
//! requantising), [`mix`] (which type each matrix gets: one type or llama-quantize's K-quant
//! mixes), [`vocab`] (the tokenizer ↔ GGUF metadata bridge, synthetic vocabularies).

mod load;
pub mod mix;
pub mod types;
pub mod vocab;
mod write;

#[cfg(test)]
mod tests;

pub use mix::{file_type_name, KMix, Quant, Role};
pub use types::{Config, Layer, Tensor, Weights};
pub use vocab::{synthetic_tokenizer, tokenizer_from_gguf, tokenizer_gguf_metadata};
pub use write::{gguf_info, gguf_tensors};

use crate::tokenizer::Tokenizer;

/// A loaded model: configuration, weights, tokenizer and a short description of its origin.
#[derive(Clone)]
pub struct Model {
    /// Shape and constants.
    pub config: Config,
    /// The weights.
    pub weights: Weights,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// Where it came from ("stories260K (embedded)", a path, "synthetic llama-1b q4_0 seed 1").
    pub source: String,
}

/// The stories260K checkpoint and its tokenizer, compiled into the binary (MIT, see
/// `engine/models/stories260K/LICENSE`).
pub static STORIES260K_BIN: &[u8] = include_bytes!("../../models/stories260K/stories260K.bin");
/// The tok512 tokenizer of stories260K.
pub static STORIES260K_TOK: &[u8] = include_bytes!("../../models/stories260K/tok512.bin");
