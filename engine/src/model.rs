//! The llama model as the decoders consume it: a [`Config`] and the [`Weights`], each tensor
//! kept in its file type (F32/F16/Q8_0/Q4_0) as a view into the file's bytes.
//!
//! Tensor names follow GGUF's llama convention (`token_embd.weight`, `blk.N.attn_q.weight`, …).
//! RoPE rotates adjacent pairs (i, i+1), as llama2.c and ggml's "normal" rope mode do.

use std::path::Path;

use crate::blob::Blob;
use crate::gguf::{GgufFile, GgufWriter, Value};
use crate::llama2c;
use crate::quant::{self, GgmlType};
use crate::tokenizer::Tokenizer;
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
pub static STORIES260K_BIN: &[u8] = include_bytes!("../models/stories260K/stories260K.bin");
/// The tok512 tokenizer of stories260K.
pub static STORIES260K_TOK: &[u8] = include_bytes!("../models/stories260K/tok512.bin");

impl Model {
    /// The embedded default model (stories260K, f32).
    pub fn embedded() -> Result<Model> {
        let ck = llama2c::read_checkpoint(STORIES260K_BIN)?;
        let tokenizer = Tokenizer::from_llama2c(STORIES260K_TOK, ck.config.vocab_size)?;
        Ok(Model {
            config: ck.config,
            weights: ck.weights,
            tokenizer,
            source: "stories260K (embedded)".into(),
        })
    }

    /// Load a model file: GGUF (by its magic) or a llama2.c checkpoint, which needs
    /// `tokenizer` (a llama2.c `tok*.bin`). A GGUF may also take an external llama2.c tokenizer.
    ///
    /// Reads are bounded by what the file's own header allows: a llama2.c checkpoint is read
    /// only up to the size its header gives (a regular file of another size is refused before
    /// any weights are read), a GGUF is memory-mapped and must be a regular file, so devices
    /// and pipes (`/dev/zero`, FIFOs) end in a format error, not in reading without end.
    pub fn open(path: &Path, tokenizer: Option<&Path>) -> Result<Model> {
        let io = |e| Error::io(path, e);
        let mut f = std::fs::File::open(path).map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        let regular_len = meta.is_file().then_some(meta.len());
        let mut bytes = Vec::new();
        read_up_to(&mut f, &mut bytes, 4).map_err(io)?;
        let read_tok = |vocab: usize| -> Result<Option<Tokenizer>> {
            match tokenizer {
                Some(p) => Tokenizer::read_llama2c_file(p, vocab)
                    .map(Some)
                    .map_err(|e| match e {
                        Error::Io { .. } => e,
                        e => Error::Tokenizer(format!("{}: {e}", p.display())),
                    }),
                None => Ok(None),
            }
        };
        if bytes == b"GGUF" {
            if regular_len.is_none() {
                return Err(Error::Invalid(format!(
                    "{} is a GGUF model but not a regular file: GGUF models are memory-mapped, \
                     so pass the file itself",
                    path.display()
                )));
            }
            let file = GgufFile::open(path)?;
            let mut m = Model::from_gguf(&file, tokenizer.is_none())?;
            if let Some(t) = read_tok(m.config.vocab_size)? {
                m.tokenizer = t;
            }
            m.source = path.display().to_string();
            Ok(m)
        } else {
            // A llama2.c checkpoint: the header says how big the file must be.
            read_up_to(&mut f, &mut bytes, llama2c::HEADER_BYTES as u64).map_err(io)?;
            let header = llama2c::Header::parse(&bytes)?;
            if let Some(len) = regular_len {
                header.check_len(len.into())?;
            }
            // One byte past the largest allowed size, so a longer stream is reported as such.
            let limit = u64::try_from(header.size_with_freq() + 1).unwrap_or(u64::MAX);
            read_up_to(&mut f, &mut bytes, limit).map_err(io)?;
            let ck = llama2c::read_checkpoint(&bytes)?;
            drop(bytes);
            let tokenizer = read_tok(ck.config.vocab_size)?.ok_or_else(|| {
                Error::Invalid(format!(
                    "{} is a llama2.c checkpoint: pass its tokenizer with --tokenizer tok*.bin",
                    path.display()
                ))
            })?;
            Ok(Model {
                config: ck.config,
                weights: ck.weights,
                tokenizer,
                source: path.display().to_string(),
            })
        }
    }

    /// Build a model from a parsed GGUF file (llama architecture). With `need_tokenizer`, a
    /// missing `tokenizer.ggml.*` is an error.
    pub fn from_gguf(file: &GgufFile, need_tokenizer: bool) -> Result<Model> {
        let arch = file.get_str("general.architecture")?.unwrap_or("");
        if arch != "llama" {
            return Err(Error::Model(format!(
                "general.architecture is '{arch}': baro-top decodes llama-family models only"
            )));
        }
        let req = |k: &str| -> Result<usize> {
            let v = file
                .get_u64(k)?
                .ok_or_else(|| Error::Model(format!("missing metadata {k}")))?;
            usize::try_from(v).map_err(|_| Error::Model(format!("{k} = {v} is too large")))
        };
        let dim = req("llama.embedding_length")?;
        let n_heads = req("llama.attention.head_count")?;
        let tok_embd = file
            .tensor("token_embd.weight")
            .ok_or_else(|| Error::Model("missing tensor token_embd.weight".into()))?;
        let vocab_size = match file.get_u64("llama.vocab_size")? {
            Some(v) => v as usize,
            None => tok_embd.rows() as usize,
        };
        let config = Config {
            dim,
            hidden_dim: req("llama.feed_forward_length")?,
            n_layers: req("llama.block_count")?,
            n_heads,
            n_kv_heads: match file.get_u64("llama.attention.head_count_kv")? {
                Some(v) => v as usize,
                None => n_heads,
            },
            vocab_size,
            seq_len: req("llama.context_length")?,
            rope_theta: file.get_f32("llama.rope.freq_base")?.unwrap_or(10000.0),
            norm_eps: file
                .get_f32("llama.attention.layer_norm_rms_epsilon")?
                .unwrap_or(1e-5),
        };
        config.validate()?;
        let tensor = |name: String| -> Result<Tensor> {
            let info = file
                .tensor(&name)
                .ok_or_else(|| Error::Model(format!("missing tensor {name}")))?;
            let (rows, cols) = (info.rows() as usize, info.cols() as usize);
            Tensor::new(name, info.ty, rows, cols, file.tensor_blob(info))
        };
        // Every blk.N tensor must belong to a block the metadata declares: a block_count that
        // is too small would otherwise silently decode a shallower model.
        for t in &file.tensors {
            let block = t
                .name
                .strip_prefix("blk.")
                .and_then(|r| r.split('.').next())
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(b) = block.filter(|&b| b >= config.n_layers as u64) {
                return Err(Error::Model(format!(
                    "tensor {} belongs to block {b}, but llama.block_count is {} (blocks 0..{}): \
                     the metadata and the tensors disagree",
                    t.name,
                    config.n_layers,
                    config.n_layers - 1
                )));
            }
        }
        let mut layers = Vec::with_capacity(config.n_layers);
        for l in 0..config.n_layers {
            let t = |s: &str| tensor(format!("blk.{l}.{s}.weight"));
            layers.push(Layer {
                attn_norm: t("attn_norm")?,
                wq: t("attn_q")?,
                wk: t("attn_k")?,
                wv: t("attn_v")?,
                wo: t("attn_output")?,
                ffn_norm: t("ffn_norm")?,
                w_gate: t("ffn_gate")?,
                w_down: t("ffn_down")?,
                w_up: t("ffn_up")?,
            });
        }
        let weights = Weights {
            token_embd: tensor("token_embd.weight".into())?,
            layers,
            output_norm: tensor("output_norm.weight".into())?,
            output: match file.tensor("output.weight") {
                Some(_) => Some(tensor("output.weight".into())?),
                None => None,
            },
        };
        weights.validate(&config)?;
        let tokenizer = match tokenizer_from_gguf(file) {
            Ok(t) => t,
            Err(e) if need_tokenizer => return Err(e),
            Err(_) => synthetic_tokenizer(config.vocab_size, 0)?,
        };
        if tokenizer.vocab_size() != config.vocab_size {
            return Err(Error::Model(format!(
                "tokenizer has {} tokens, model vocab is {}",
                tokenizer.vocab_size(),
                config.vocab_size
            )));
        }
        Ok(Model {
            config,
            weights,
            tokenizer,
            source: String::new(),
        })
    }

    /// The llama metadata and tokenizer as GGUF key/values.
    pub fn gguf_metadata(&self, name: &str) -> Result<Vec<(String, Value)>> {
        let c = &self.config;
        let u32v = |v: usize| Value::U32(v as u32);
        let mut md = vec![
            (
                "general.architecture".to_string(),
                Value::String("llama".into()),
            ),
            ("general.name".to_string(), Value::String(name.into())),
            ("general.alignment".to_string(), Value::U32(32)),
            ("llama.context_length".to_string(), u32v(c.seq_len)),
            ("llama.embedding_length".to_string(), u32v(c.dim)),
            ("llama.block_count".to_string(), u32v(c.n_layers)),
            ("llama.feed_forward_length".to_string(), u32v(c.hidden_dim)),
            ("llama.attention.head_count".to_string(), u32v(c.n_heads)),
            (
                "llama.attention.head_count_kv".to_string(),
                u32v(c.n_kv_heads),
            ),
            (
                "llama.rope.dimension_count".to_string(),
                u32v(c.head_size()),
            ),
            ("llama.rope.freq_base".to_string(), Value::F32(c.rope_theta)),
            (
                "llama.attention.layer_norm_rms_epsilon".to_string(),
                Value::F32(c.norm_eps),
            ),
            ("llama.vocab_size".to_string(), u32v(c.vocab_size)),
        ];
        md.extend(tokenizer_gguf_metadata(&self.tokenizer)?);
        Ok(md)
    }

    /// Write the model as GGUF v3, tensor by tensor (`progress(bytes_done, bytes_total)`).
    pub fn write_gguf(
        &self,
        path: &Path,
        name: &str,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<()> {
        let md = self.gguf_metadata(name)?;
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

    /// The same model with every matrix re-encoded as `ty` (norm vectors stay F32, as
    /// llama.cpp keeps them). Fails, naming the tensor, when a row is not whole blocks.
    pub fn quantized(&self, ty: GgmlType) -> Result<Model> {
        let conv = |t: &Tensor| t.convert(ty);
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .map(|l| {
                Ok(Layer {
                    attn_norm: l.attn_norm.convert(GgmlType::F32)?,
                    wq: conv(&l.wq)?,
                    wk: conv(&l.wk)?,
                    wv: conv(&l.wv)?,
                    wo: conv(&l.wo)?,
                    ffn_norm: l.ffn_norm.convert(GgmlType::F32)?,
                    w_gate: conv(&l.w_gate)?,
                    w_down: conv(&l.w_down)?,
                    w_up: conv(&l.w_up)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Model {
            config: self.config.clone(),
            weights: Weights {
                token_embd: conv(&w.token_embd)?,
                layers,
                output_norm: w.output_norm.convert(GgmlType::F32)?,
                output: w.output.as_ref().map(conv).transpose()?,
            },
            tokenizer: self.tokenizer.clone(),
            source: format!("{} as {ty}", self.source),
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

/// Append to `buf` from `r` until `buf` holds `len` bytes or the input ends. Reads only as
/// far as data arrives, so a bogus `len` never allocates ahead of the bytes.
pub(crate) fn read_up_to(
    r: &mut impl std::io::Read,
    buf: &mut Vec<u8>,
    len: u64,
) -> std::io::Result<()> {
    let want = len.saturating_sub(buf.len() as u64);
    std::io::Read::read_to_end(&mut std::io::Read::take(r, want), buf)?;
    Ok(())
}

/// GGUF tensor info of a tensor: dims in ggml order (`[cols]` for vectors, `[cols, rows]`).
pub fn gguf_info(t: &Tensor) -> (String, Vec<u64>, GgmlType) {
    let dims = if t.rows == 1 && t.name.ends_with("norm.weight") {
        vec![t.cols as u64]
    } else {
        vec![t.cols as u64, t.rows as u64]
    };
    (t.name.clone(), dims, t.ty)
}

/// The tokenizer stored in a GGUF's `tokenizer.ggml.*` metadata (SentencePiece "llama" model).
pub fn tokenizer_from_gguf(file: &GgufFile) -> Result<Tokenizer> {
    let terr = |m: String| Error::Tokenizer(m);
    if let Some(m) = file.get_str("tokenizer.ggml.model")? {
        if m != "llama" {
            return Err(terr(format!(
                "tokenizer.ggml.model is '{m}': only SentencePiece-style 'llama' vocabularies are supported"
            )));
        }
    }
    let arr = |k: &str| -> Result<&[Value]> {
        file.get(k)
            .ok_or_else(|| terr(format!("missing {k}")))?
            .as_array()
            .ok_or_else(|| terr(format!("{k} is not an array")))
    };
    let tokens = arr("tokenizer.ggml.tokens")?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| terr(format!("tokenizer.ggml.tokens[{i}] is not a string")))
        })
        .collect::<Result<Vec<_>>>()?;
    let scores = match file.get("tokenizer.ggml.scores") {
        Some(_) => arr("tokenizer.ggml.scores")?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_f32()
                    .ok_or_else(|| terr(format!("tokenizer.ggml.scores[{i}] is not a float")))
            })
            .collect::<Result<Vec<_>>>()?,
        None => vec![0.0; tokens.len()],
    };
    let id = |k: &str, default: u32| -> Result<u32> {
        Ok(file.get_u64(k)?.map(|v| v as u32).unwrap_or(default))
    };
    let bos = id("tokenizer.ggml.bos_token_id", 1)?;
    let eos = id("tokenizer.ggml.eos_token_id", 2)?;
    Tokenizer::from_gguf_arrays(&tokens, &scores, bos, eos)
}

/// GGUF `tokenizer.ggml.*` metadata for `tok`.
pub fn tokenizer_gguf_metadata(tok: &Tokenizer) -> Result<Vec<(String, Value)>> {
    let tokens = tok.gguf_tokens()?;
    // SentencePiece token types: 1 normal, 2 unknown, 3 control, 6 byte.
    let types = tok
        .pieces()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = if i == 0 {
                2
            } else if i as u32 == tok.bos_id() || i as u32 == tok.eos_id() {
                3
            } else if p.len() == 6 && p.starts_with(b"<0x") && p.ends_with(b">") {
                6
            } else {
                1
            };
            Value::I32(t)
        })
        .collect();
    Ok(vec![
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(tok.scores().iter().map(|&s| Value::F32(s)).collect()),
        ),
        ("tokenizer.ggml.token_type".into(), Value::Array(types)),
        (
            "tokenizer.ggml.bos_token_id".into(),
            Value::U32(tok.bos_id()),
        ),
        (
            "tokenizer.ggml.eos_token_id".into(),
            Value::U32(tok.eos_id()),
        ),
        ("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)),
    ])
}

/// A deterministic SentencePiece-shaped vocabulary of `vocab` tokens for synthetic models:
/// `<unk>`, BOS, EOS, the 256 byte tokens, then pseudo-words (" kato", "rin", …) whose scores
/// fall with their rank, so encoding merges like a real BPE vocabulary.
pub fn synthetic_tokenizer(vocab: usize, seed: u64) -> Result<Tokenizer> {
    if vocab < 259 {
        return Err(Error::Invalid(format!(
            "vocab {vocab} is too small: a SentencePiece vocabulary needs 3 control and 256 byte tokens"
        )));
    }
    let mut pieces: Vec<Vec<u8>> =
        vec![b"<unk>".to_vec(), b"\n<s>\n".to_vec(), b"\n</s>\n".to_vec()];
    let mut scores = vec![0.0f32; 3];
    for b in 0..=255u8 {
        pieces.push(format!("<0x{b:02X}>").into_bytes());
        scores.push(0.0);
    }
    let mut seen: std::collections::HashSet<Vec<u8>> = pieces.iter().cloned().collect();
    let mut rng = crate::synth::Rng::new(seed ^ 0x70C5);
    const SYL: [&str; 24] = [
        "ka", "to", "ri", "n", "e", "mo", "la", "s", "an", "ti", "ve", "ro", "su", "mi", "d", "o",
        "ne", "pa", "li", "th", "a", "re", "ch", "u",
    ];
    let mut rank = 0u64;
    while pieces.len() < vocab {
        let syl = 1 + (rng.next_u64() % 3) as usize;
        let mut w = if rng.next_u64().is_multiple_of(3) {
            String::new()
        } else {
            " ".into()
        };
        for _ in 0..syl {
            w.push_str(SYL[(rng.next_u64() % SYL.len() as u64) as usize]);
        }
        if rank > 20_000 {
            // Large vocabularies run out of short words: make the rest unique.
            w.push_str(&format!("{rank}"));
        }
        rank += 1;
        let b = w.into_bytes();
        if seen.insert(b.clone()) {
            pieces.push(b);
            scores.push(-(rank as f32));
        }
    }
    Tokenizer::new(pieces, scores, 1, 2)
}
