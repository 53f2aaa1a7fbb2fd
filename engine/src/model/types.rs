//! The shape and the weights of a llama-family decoder, each tensor kept in its file type as a
//! view into the file's bytes. A leaf: the format readers (GGUF, llama2.c), the synthetic
//! generator and both decoders build on these types.

use crate::blob::Blob;
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

/// The architecture a GGUF file names (`general.architecture`): which optional parts a block
/// has and how RoPE pairs a head's elements. Everything else is shared (pre-norm blocks,
/// RMSNorm, GQA attention, SwiGLU FFN, untied or tied classifier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Arch {
    /// `llama` (Llama 1-3, Mistral, SmolLM, llama2.c checkpoints): RoPE on adjacent pairs,
    /// optional `rope_freqs` (llama3 rope scaling), no biases.
    #[default]
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5): q/k/v biases, NEOX RoPE.
    Qwen2,
    /// `qwen3` (dense Qwen3): per-head q/k RMSNorm before RoPE, NEOX RoPE, head size from
    /// `attention.key_length`.
    Qwen3,
}

impl Arch {
    /// The GGUF name (`general.architecture`, the metadata keys' prefix).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    /// Parse a GGUF architecture name; `None` for one baro-top does not implement.
    pub fn from_name(s: &str) -> Option<Arch> {
        Some(match s {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            _ => return None,
        })
    }

    /// How RoPE pairs the elements of a head (llama.cpp's rope type of the architecture).
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Normal,
            Arch::Qwen2 | Arch::Qwen3 => RopeStyle::Neox,
        }
    }

    /// Whether blocks may carry q/k/v biases (`blk.N.attn_{q,k,v}.bias`).
    pub fn has_qkv_bias(self) -> bool {
        self == Arch::Qwen2
    }

    /// Whether blocks carry per-head q/k RMSNorm weights (`blk.N.attn_{q,k}_norm.weight`).
    pub fn has_qk_norm(self) -> bool {
        self == Arch::Qwen3
    }
}

/// Which elements of a head RoPE rotates together (ggml's rope modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` (ggml's "normal" mode; llama2.c, `llama`).
    Normal,
    /// Pairs `(i, i + head_size/2)` (ggml's NEOX mode; `qwen2`, `qwen3`).
    Neox,
}

impl RopeStyle {
    /// The two elements of pair `i` (0 ≤ i < head_size/2) of a head, offsets within it.
    pub fn pair(self, i: usize, head_size: usize) -> (usize, usize) {
        match self {
            RopeStyle::Normal => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + head_size / 2),
        }
    }
}

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
    /// The architecture (optional block parts, RoPE pairing).
    pub arch: Arch,
    /// The head size where it is not `dim / n_heads` (GGUF `attention.key_length`, equal to
    /// `attention.value_length`); `None`: `dim / n_heads`.
    pub head_dim: Option<usize>,
    /// Linear RoPE scaling factor (`rope.scaling.type = linear`, `rope.scaling.factor`); 1
    /// without scaling. Every rotation angle is multiplied by `1 / rope_scale` (llama.cpp's
    /// `freq_scale`, computed in f32).
    pub rope_scale: f32,
}

impl Config {
    /// Per-head width (of queries, keys and values).
    pub fn head_size(&self) -> usize {
        match self.head_dim {
            Some(h) => h,
            None => self.dim / self.n_heads.max(1),
        }
    }

    /// Width of the K and V projections.
    pub fn kv_dim(&self) -> usize {
        self.head_size() * self.n_kv_heads
    }

    /// Width of the Q projection and of the attention output (`n_heads · head_size`; `dim`
    /// unless the head size is given apart from it).
    pub fn q_dim(&self) -> usize {
        self.head_size() * self.n_heads
    }

    /// How RoPE pairs a head's elements.
    pub fn rope_style(&self) -> RopeStyle {
        self.arch.rope_style()
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
        if self.n_heads == 0 {
            return bad("n_heads is 0".into());
        }
        match self.head_dim {
            None if !self.dim.is_multiple_of(self.n_heads) => {
                return bad(format!(
                "dim {} is not a multiple of n_heads {} (and no head size is given apart from it)",
                self.dim, self.n_heads
            ))
            }
            Some(0) => return bad("head size 0".into()),
            _ => {}
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
        if !(self.rope_scale.is_finite() && self.rope_scale > 0.0) {
            return bad(format!(
                "RoPE scaling factor {} must be finite and positive",
                self.rope_scale
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return bad(format!(
                "RoPE base frequency {} must be finite and positive",
                self.rope_theta
            ));
        }
        if !(self.norm_eps.is_finite() && self.norm_eps >= 0.0) {
            return bad(format!(
                "RMSNorm epsilon {} must be finite and at least 0",
                self.norm_eps
            ));
        }
        // Guard against absurd shapes from crafted metadata before anything is allocated.
        const MAX: usize = 1 << 20;
        for (n, v) in [
            ("dim", self.dim),
            ("hidden_dim", self.hidden_dim),
            ("n_layers", self.n_layers),
            ("vocab_size", self.vocab_size),
            ("seq_len", self.seq_len),
            ("n_heads", self.n_heads),
            ("head size", self.head_size()),
            (
                "n_heads x head size",
                self.head_size().saturating_mul(self.n_heads),
            ),
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

    /// Re-encode as type `ty` (through f32; exact when `ty` is F32 or the same type), rows
    /// in parallel. Fails naming the tensor (and the row) when a row is not whole blocks of
    /// `ty` or holds what `ty` cannot encode ([`quant::quantize`]).
    pub fn convert(&self, ty: GgmlType) -> Result<Tensor> {
        if ty == self.ty {
            return Ok(self.clone());
        }
        if !self.cols.is_multiple_of(ty.block_len()) {
            return Err(Error::Model(format!(
                "{}: {} columns is not a whole number of {ty} blocks of {}",
                self.name,
                self.cols,
                ty.block_len()
            )));
        }
        let bytes =
            quant::quantize_rows(ty, self.rows, self.cols, |r, row| self.dequant_row(r, row))
                .map_err(|(r, e)| {
                    let why = match e {
                        Error::Invalid(m) => m,
                        e => e.to_string(),
                    };
                    Error::Model(format!("{} row {r}: {why}", self.name))
                })?;
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
    /// Query projection `[q_dim][dim]`.
    pub wq: Tensor,
    /// Key projection `[kv_dim][dim]`.
    pub wk: Tensor,
    /// Value projection `[kv_dim][dim]`.
    pub wv: Tensor,
    /// Attention output projection `[dim][q_dim]`.
    pub wo: Tensor,
    /// RMSNorm weight before the FFN, `[dim]`.
    pub ffn_norm: Tensor,
    /// FFN gate (llama2.c w1) `[hidden][dim]`.
    pub w_gate: Tensor,
    /// FFN down (llama2.c w2) `[dim][hidden]`.
    pub w_down: Tensor,
    /// FFN up (llama2.c w3) `[hidden][dim]`.
    pub w_up: Tensor,
    /// Query bias `[q_dim]` (`qwen2`), added to `wq · x`.
    pub q_bias: Option<Tensor>,
    /// Key bias `[kv_dim]` (`qwen2`).
    pub k_bias: Option<Tensor>,
    /// Value bias `[kv_dim]` (`qwen2`).
    pub v_bias: Option<Tensor>,
    /// Per-head query RMSNorm weight `[head_size]` (`qwen3`), applied to each head before RoPE.
    pub q_norm: Option<Tensor>,
    /// Per-head key RMSNorm weight `[head_size]` (`qwen3`).
    pub k_norm: Option<Tensor>,
}

impl Layer {
    /// A block without the optional parts (biases, q/k norms).
    #[allow(clippy::too_many_arguments)]
    pub fn plain(
        attn_norm: Tensor,
        wq: Tensor,
        wk: Tensor,
        wv: Tensor,
        wo: Tensor,
        ffn_norm: Tensor,
        w_gate: Tensor,
        w_down: Tensor,
        w_up: Tensor,
    ) -> Layer {
        Layer {
            attn_norm,
            wq,
            wk,
            wv,
            wo,
            ffn_norm,
            w_gate,
            w_down,
            w_up,
            q_bias: None,
            k_bias: None,
            v_bias: None,
            q_norm: None,
            k_norm: None,
        }
    }

    /// The optional vectors, in GGUF order.
    pub fn extras(&self) -> impl Iterator<Item = &Tensor> {
        [
            &self.q_bias,
            &self.k_bias,
            &self.v_bias,
            &self.q_norm,
            &self.k_norm,
        ]
        .into_iter()
        .flatten()
    }
}

/// All weights of a llama model.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Token embedding `[vocab][dim]`.
    pub token_embd: Tensor,
    /// RoPE frequency factors `[head_size/2]`, F32 (`rope_freqs.weight`: Llama 3.1+ "llama3"
    /// rope scaling): pair i's rotation frequency is divided by factor i.
    pub rope_freqs: Option<Tensor>,
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
        v.extend(&self.rope_freqs);
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
            v.extend(l.extras());
        }
        v.push(&self.output_norm);
        if let Some(o) = &self.output {
            v.push(o);
        }
        v
    }

    /// The RoPE frequency factors as f32 (`None` without `rope_freqs`).
    pub fn rope_factors(&self) -> Option<Vec<f32>> {
        self.rope_freqs.as_ref().map(Tensor::to_f32)
    }

    /// Check every tensor's shape against `cfg`, and that the optional parts are the ones
    /// its architecture defines (a bias in a `llama` block, a missing q norm in a `qwen3`
    /// block: refused by name).
    pub fn validate(&self, cfg: &Config) -> Result<()> {
        let (d, h, kv, v) = (cfg.dim, cfg.hidden_dim, cfg.kv_dim(), cfg.vocab_size);
        let (q, hs) = (cfg.q_dim(), cfg.head_size());
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
        if let Some(f) = &self.rope_freqs {
            want(f, 1, hs / 2)?;
            if f.ty != GgmlType::F32 {
                return Err(Error::Model(format!(
                    "{}: RoPE frequency factors must be F32 (as ggml requires), not {}",
                    f.name, f.ty
                )));
            }
            if let Some(x) = f.to_f32().iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                return Err(Error::Model(format!(
                    "{}: factor {x} is not finite and positive",
                    f.name
                )));
            }
        }
        if self.layers.len() != cfg.n_layers {
            return Err(Error::Model(format!(
                "{} blocks, config says {}",
                self.layers.len(),
                cfg.n_layers
            )));
        }
        let arch = cfg.arch;
        for (li, l) in self.layers.iter().enumerate() {
            want(&l.attn_norm, 1, d)?;
            want(&l.wq, q, d)?;
            want(&l.wk, kv, d)?;
            want(&l.wv, kv, d)?;
            want(&l.wo, d, q)?;
            want(&l.ffn_norm, 1, d)?;
            want(&l.w_gate, h, d)?;
            want(&l.w_down, d, h)?;
            want(&l.w_up, h, d)?;
            let optional = [
                (&l.q_bias, q, arch.has_qkv_bias(), false),
                (&l.k_bias, kv, arch.has_qkv_bias(), false),
                (&l.v_bias, kv, arch.has_qkv_bias(), false),
                (&l.q_norm, hs, arch.has_qk_norm(), true),
                (&l.k_norm, hs, arch.has_qk_norm(), true),
            ];
            for (i, (t, len, allowed, required)) in optional.into_iter().enumerate() {
                match t {
                    Some(t) if !allowed => {
                        return Err(Error::Model(format!(
                            "tensor {}: architecture {} has no such tensor (it would change the math and is not part of {}'s definition)",
                            t.name,
                            arch.name(),
                            arch.name()
                        )))
                    }
                    Some(t) => want(t, 1, len)?,
                    None if required && allowed => {
                        let what = ["attn_q_norm", "attn_k_norm"][i - 3];
                        return Err(Error::Model(format!(
                            "missing tensor blk.{li}.{what}.weight: architecture {} normalises every query and key head",
                            arch.name()
                        )));
                    }
                    None => {}
                }
            }
        }
        want(&self.output_norm, 1, d)?;
        if let Some(o) = &self.output {
            want(o, v, d)?;
        }
        Ok(())
    }
}
