//! The shape and the weights of a llama-family decoder, each tensor kept in its file type as a
//! view into the file's bytes. A leaf: the format readers (GGUF, llama2.c), the synthetic
//! generator and both decoders build on these types.

use crate::blob::Blob;
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// The shape and constants of a llama-family decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Model width (embedding length).
    pub dim: usize,
    /// FFN inner width.
    pub hidden_dim: usize,
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (GQA when fewer than `n_heads`).
    pub n_kv_heads: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Maximum context length.
    pub seq_len: usize,
    /// RoPE base frequency.
    pub rope_theta: f32,
    /// RMSNorm epsilon.
    pub norm_eps: f32,
}

impl Config {
    /// Per-head width.
    pub fn head_size(&self) -> usize {
        self.dim / self.n_heads
    }

    /// Width of the K and V projections.
    pub fn kv_dim(&self) -> usize {
        self.head_size() * self.n_kv_heads
    }

    /// Check the shape is one the decoders can run.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Model(m));
        if self.dim == 0 || self.hidden_dim == 0 || self.n_layers == 0 || self.vocab_size == 0 {
            return bad(format!(
                "empty dimension: dim {}, hidden_dim {}, n_layers {}, vocab_size {} (each must be at least 1)",
                self.dim, self.hidden_dim, self.n_layers, self.vocab_size
            ));
        }
        if self.n_heads == 0 || !self.dim.is_multiple_of(self.n_heads) {
            return bad(format!(
                "dim {} is not a multiple of n_heads {}",
                self.dim, self.n_heads
            ));
        }
        if self.n_kv_heads == 0 || !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return bad(format!(
                "n_heads {} is not a multiple of n_kv_heads {}",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_size().is_multiple_of(2) {
            return bad(format!(
                "head size {} is odd: RoPE rotates pairs",
                self.head_size()
            ));
        }
        if self.seq_len == 0 {
            return bad("seq_len is 0".into());
        }
        // Guard against absurd shapes from crafted metadata before anything is allocated.
        const MAX: usize = 1 << 20;
        for (n, v) in [
            ("dim", self.dim),
            ("hidden_dim", self.hidden_dim),
            ("n_layers", self.n_layers),
            ("vocab_size", self.vocab_size),
            ("seq_len", self.seq_len),
        ] {
            if v > MAX {
                return bad(format!(
                    "{n} = {v} is larger than baro-top supports ({MAX})"
                ));
            }
        }
        Ok(())
    }
}

/// One weight matrix or vector in its file type. Matrices are row-major `[rows][cols]`
/// (GGUF `ne[0] = cols`, `ne[1] = rows`); vectors have `rows == 1`.
#[derive(Clone, Debug)]
pub struct Tensor {
    /// GGUF name.
    pub name: String,
    /// Element type.
    pub ty: GgmlType,
    /// Number of rows.
    pub rows: usize,
    /// Elements per row.
    pub cols: usize,
    /// Raw bytes, exactly `ty.bytes_for(rows * cols)`.
    pub data: Blob,
}

impl Tensor {
    /// Build a tensor, checking the byte count.
    pub fn new(
        name: impl Into<String>,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        data: Blob,
    ) -> Result<Self> {
        let name = name.into();
        if !cols.is_multiple_of(ty.block_len()) {
            return Err(Error::Model(format!(
                "{name}: row length {cols} is not a multiple of the {ty} block size {}",
                ty.block_len()
            )));
        }
        let need = ty.bytes_for((rows as u64) * (cols as u64));
        if need != Some(data.len() as u64) {
            return Err(Error::Model(format!(
                "{name}: {rows}x{cols} {ty} needs {need:?} bytes, has {}",
                data.len()
            )));
        }
        Ok(Tensor {
            name,
            ty,
            rows,
            cols,
            data,
        })
    }

    /// An f32 tensor from values.
    pub fn from_f32(
        name: impl Into<String>,
        rows: usize,
        cols: usize,
        values: &[f32],
    ) -> Result<Self> {
        Tensor::new(name, GgmlType::F32, rows, cols, Blob::from_f32(values))
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_len() * self.ty.block_bytes()
    }

    /// Dequantise row `r` into `out` (`out.len() == cols`).
    pub fn dequant_row(&self, r: usize, out: &mut [f32]) {
        let rb = self.row_bytes();
        // Shapes and sizes were checked in `Tensor::new`, so this cannot fail.
        let _ = quant::dequantize(self.ty, &self.data[r * rb..(r + 1) * rb], out);
    }

    /// Dequantise the whole tensor.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequant_row(r, row);
        }
        out
    }

    /// Re-encode as type `ty` (through f32; exact when `ty` is F32 or the same type).
    pub fn convert(&self, ty: GgmlType) -> Result<Tensor> {
        if ty == self.ty {
            return Ok(self.clone());
        }
        let mut bytes = Vec::new();
        quant::quantize(ty, &self.to_f32(), &mut bytes)
            .map_err(|e| Error::Model(format!("{}: {e}", self.name)))?;
        Tensor::new(
            self.name.clone(),
            ty,
            self.rows,
            self.cols,
            Blob::owned(bytes),
        )
    }
}

/// The weights of one transformer block.
#[derive(Clone, Debug)]
pub struct Layer {
    /// RMSNorm weight before attention, `[dim]`.
    pub attn_norm: Tensor,
    /// Query projection `[dim][dim]`.
    pub wq: Tensor,
    /// Key projection `[kv_dim][dim]`.
    pub wk: Tensor,
    /// Value projection `[kv_dim][dim]`.
    pub wv: Tensor,
    /// Attention output projection `[dim][dim]`.
    pub wo: Tensor,
    /// RMSNorm weight before the FFN, `[dim]`.
    pub ffn_norm: Tensor,
    /// FFN gate (llama2.c w1) `[hidden][dim]`.
    pub w_gate: Tensor,
    /// FFN down (llama2.c w2) `[dim][hidden]`.
    pub w_down: Tensor,
    /// FFN up (llama2.c w3) `[hidden][dim]`.
    pub w_up: Tensor,
}

/// All weights of a llama model.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Token embedding `[vocab][dim]`.
    pub token_embd: Tensor,
    /// The blocks.
    pub layers: Vec<Layer>,
    /// Final RMSNorm weight `[dim]`.
    pub output_norm: Tensor,
    /// Classifier `[vocab][dim]`; `None` when tied to the embedding.
    pub output: Option<Tensor>,
}

impl Weights {
    /// The classifier matrix (the embedding when tied).
    pub fn classifier(&self) -> &Tensor {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Every tensor, in GGUF order.
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.token_embd];
        for l in &self.layers {
            v.extend([
                &l.attn_norm,
                &l.wq,
                &l.wk,
                &l.wv,
                &l.wo,
                &l.ffn_norm,
                &l.w_gate,
                &l.w_down,
                &l.w_up,
            ]);
        }
        v.push(&self.output_norm);
        if let Some(o) = &self.output {
            v.push(o);
        }
        v
    }

    /// Check every tensor's shape against `cfg`.
    pub fn validate(&self, cfg: &Config) -> Result<()> {
        let (d, h, kv, v) = (cfg.dim, cfg.hidden_dim, cfg.kv_dim(), cfg.vocab_size);
        let want = |t: &Tensor, rows: usize, cols: usize| {
            if t.rows == rows && t.cols == cols {
                Ok(())
            } else {
                Err(Error::Model(format!(
                    "{}: shape {}x{}, expected {rows}x{cols}",
                    t.name, t.rows, t.cols
                )))
            }
        };
        want(&self.token_embd, v, d)?;
        if self.layers.len() != cfg.n_layers {
            return Err(Error::Model(format!(
                "{} blocks, config says {}",
                self.layers.len(),
                cfg.n_layers
            )));
        }
        for l in &self.layers {
            want(&l.attn_norm, 1, d)?;
            want(&l.wq, d, d)?;
            want(&l.wk, kv, d)?;
            want(&l.wv, kv, d)?;
            want(&l.wo, d, d)?;
            want(&l.ffn_norm, 1, d)?;
            want(&l.w_gate, h, d)?;
            want(&l.w_down, d, h)?;
            want(&l.w_up, h, d)?;
        }
        want(&self.output_norm, 1, d)?;
        if let Some(o) = &self.output {
            want(o, v, d)?;
        }
        Ok(())
    }
}
