//! Writing a [`Model`] as GGUF (metadata, tokenizer, tensors) and requantising it.

use std::path::Path;

use super::mix::{Quant, Role};
use super::types::{Layer, Tensor, Weights};
use super::vocab::tokenizer_gguf_metadata;
use super::Model;
use crate::gguf::{GgufWriter, Value};
use crate::quant::GgmlType;
use crate::{Error, Result};

impl Model {
    /// The architecture's metadata (`{arch}.*`, as llama.cpp names it) and the tokenizer as
    /// GGUF key/values.
    pub fn gguf_metadata(&self, name: &str) -> Result<Vec<(String, Value)>> {
        let c = &self.config;
        let a = c.arch.name();
        let u32v = |v: usize| Value::U32(v as u32);
        let k = |s: &str| format!("{a}.{s}");
        let mut md = vec![
            ("general.architecture".to_string(), Value::String(a.into())),
            ("general.name".to_string(), Value::String(name.into())),
            ("general.alignment".to_string(), Value::U32(32)),
            (k("context_length"), u32v(c.seq_len)),
            (k("embedding_length"), u32v(c.dim)),
            (k("block_count"), u32v(c.n_layers)),
            (k("feed_forward_length"), u32v(c.hidden_dim)),
            (k("attention.head_count"), u32v(c.n_heads)),
            (k("attention.head_count_kv"), u32v(c.n_kv_heads)),
            (k("rope.dimension_count"), u32v(c.head_size())),
            (k("rope.freq_base"), Value::F32(c.rope_theta)),
            (
                k("attention.layer_norm_rms_epsilon"),
                Value::F32(c.norm_eps),
            ),
            (k("vocab_size"), u32v(c.vocab_size)),
        ];
        if c.head_dim.is_some() {
            md.push((k("attention.key_length"), u32v(c.head_size())));
            md.push((k("attention.value_length"), u32v(c.head_size())));
        }
        if c.rope_scale != 1.0 {
            md.push((k("rope.scaling.type"), Value::String("linear".into())));
            md.push((k("rope.scaling.factor"), Value::F32(c.rope_scale)));
        }
        md.extend(tokenizer_gguf_metadata(&self.tokenizer)?);
        Ok(md)
    }

    /// Write the model as GGUF v3, tensor by tensor (`progress(bytes_done, bytes_total)`).
    /// `quant`, when the caller encoded the matrices, is recorded as llama.cpp records it:
    /// `general.file_type` and `general.quantization_version` 2.
    pub fn write_gguf(
        &self,
        path: &Path,
        name: &str,
        quant: Option<Quant>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<()> {
        let mut md = self.gguf_metadata(name)?;
        if let Some(q) = quant {
            md.insert(3, ("general.file_type".into(), Value::U32(q.file_type())));
            md.insert(4, ("general.quantization_version".into(), Value::U32(2)));
        }
        let tensors = self.weights.tensors();
        let infos: Vec<(String, Vec<u64>, GgmlType)> =
            tensors.iter().map(|t| gguf_info(t)).collect();
        let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
        let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut w = GgufWriter::new(std::io::BufWriter::with_capacity(1 << 20, f), &md, &infos)?;
        let mut done = 0u64;
        for t in tensors {
            w.write_tensor(&t.data)?;
            done += t.data.len() as u64;
            progress(done, total);
        }
        use std::io::Write;
        w.finish()?.flush().map_err(|e| Error::io(path, e))?;
        Ok(())
    }

    /// The same model with every matrix re-encoded as `quant` says (one type, or one of
    /// llama-quantize's mixes tensor by tensor: [`super::mix`]); norm vectors stay F32, as
    /// llama.cpp keeps them. Fails, naming the tensor, when a row is not whole blocks of its
    /// type or holds what the type cannot encode.
    pub fn quantized(&self, quant: impl Into<Quant>) -> Result<Model> {
        let quant = quant.into();
        let cfg = &self.config;
        let w = &self.weights;
        let tied = w.output.is_none();
        let conv = |t: &Tensor, role: Role, layer: usize| {
            t.convert(quant.tensor_type(role, layer, t.cols, cfg, tied))
        };
        // Vectors (biases, norms, RoPE factors) stay F32.
        let f32v = |t: &Option<Tensor>| t.as_ref().map(|t| t.convert(GgmlType::F32)).transpose();
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Ok(Layer {
                    attn_norm: l.attn_norm.convert(GgmlType::F32)?,
                    wq: conv(&l.wq, Role::AttnQ, i)?,
                    wk: conv(&l.wk, Role::AttnK, i)?,
                    wv: conv(&l.wv, Role::AttnV, i)?,
                    wo: conv(&l.wo, Role::AttnOutput, i)?,
                    ffn_norm: l.ffn_norm.convert(GgmlType::F32)?,
                    w_gate: conv(&l.w_gate, Role::FfnGate, i)?,
                    w_down: conv(&l.w_down, Role::FfnDown, i)?,
                    w_up: conv(&l.w_up, Role::FfnUp, i)?,
                    q_bias: f32v(&l.q_bias)?,
                    k_bias: f32v(&l.k_bias)?,
                    v_bias: f32v(&l.v_bias)?,
                    q_norm: f32v(&l.q_norm)?,
                    k_norm: f32v(&l.k_norm)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Model {
            config: self.config.clone(),
            weights: Weights {
                token_embd: conv(&w.token_embd, Role::TokenEmbd, 0)?,
                rope_freqs: f32v(&w.rope_freqs)?,
                layers,
                output_norm: w.output_norm.convert(GgmlType::F32)?,
                output: w
                    .output
                    .as_ref()
                    .map(|t| conv(t, Role::Output, 0))
                    .transpose()?,
            },
            tokenizer: self.tokenizer.clone(),
            source: format!("{} as {quant}", self.source),
        })
    }

    /// Bytes of weight data.
    pub fn weight_bytes(&self) -> u64 {
        self.weights
            .tensors()
            .iter()
            .map(|t| t.data.len() as u64)
            .sum()
    }
}

/// Every tensor of `m` as a GGUF file lists it (name, dims in ggml order, type) with its bytes
/// copied: what a test edits before writing a crafted file.
pub fn gguf_tensors(m: &Model) -> Vec<(String, Vec<u64>, GgmlType, Vec<u8>)> {
    m.weights
        .tensors()
        .into_iter()
        .map(|t| {
            let (n, dims, ty) = gguf_info(t);
            (n, dims, ty, t.data.to_vec())
        })
        .collect()
}

/// GGUF tensor info of a tensor: dims in ggml order (`[cols]` for vectors, `[cols, rows]`).
pub fn gguf_info(t: &Tensor) -> (String, Vec<u64>, GgmlType) {
    let vector = t.name.ends_with("norm.weight")
        || t.name.ends_with(".bias")
        || t.name == "rope_freqs.weight";
    let dims = if t.rows == 1 && vector {
        vec![t.cols as u64]
    } else {
        vec![t.cols as u64, t.rows as u64]
    };
    (t.name.clone(), dims, t.ty)
}
