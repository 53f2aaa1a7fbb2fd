//! Loading a [`Model`]: the embedded stories260K, GGUF files (memory-mapped) and llama2.c
//! checkpoints with their tokenizers.

use std::path::Path;

use super::types::{Config, Layer, Tensor, Weights};
use super::vocab::{synthetic_tokenizer, tokenizer_from_gguf};
use super::{Model, STORIES260K_BIN, STORIES260K_TOK};
use crate::gguf::GgufFile;
use crate::llama2c;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

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
