//! Loading a [`Model`]: the embedded stories260K, GGUF files (memory-mapped) and llama2.c
//! checkpoints with their tokenizers.

use std::path::Path;

use super::types::{Arch, Config, Layer, Tensor, Weights};
use super::vocab::tokenizer_from_gguf;
use super::{Model, STORIES260K_BIN, STORIES260K_TOK};
use crate::gguf::{GgufFile, Value};
use crate::input::{open_input, read_up_to};
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
    /// Every file is opened through [`open_input`]: non-blocking, regular files only (a FIFO
    /// or a device is refused by kind, never waited on), and remembered as one of the
    /// process's inputs so that no output can replace it. Reads are bounded by what the
    /// file's own header allows: a llama2.c checkpoint is read only up to the size its header
    /// gives (a file of another size is refused before any weights are read); a GGUF is
    /// memory-mapped.
    pub fn open(path: &Path, tokenizer: Option<&Path>) -> Result<Model> {
        let io = |e| Error::io(path, e);
        let mut f = open_input(path, "model")?;
        let meta = f.metadata().map_err(io)?;
        let regular_len = meta.is_file().then_some(meta.len());
        let mut bytes = Vec::new();
        read_up_to(&mut f, &mut bytes, 4).map_err(io)?;
        let read_tok = |p: &Path, vocab: usize| -> Result<Tokenizer> {
            Tokenizer::read_llama2c_file(p, vocab).map_err(|e| match e {
                Error::Io { .. } => e,
                // The class's own "tokenizer: " comes once, before the path.
                Error::Tokenizer(m) => Error::Tokenizer(format!("{}: {m}", p.display())),
                e => Error::Tokenizer(format!("{}: {e}", p.display())),
            })
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
            let external = tokenizer.map(|p| move |vocab: usize| read_tok(p, vocab));
            let external = external
                .as_ref()
                .map(|f| f as &dyn Fn(usize) -> Result<Tokenizer>);
            let mut m = Model::from_gguf(&file, external)?;
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
            let tokenizer = match tokenizer {
                Some(p) => read_tok(p, ck.config.vocab_size)?,
                None => {
                    return Err(Error::Invalid(format!(
                        "{} is a llama2.c checkpoint: pass its tokenizer with --tokenizer tok*.bin",
                        path.display()
                    )))
                }
            };
            Ok(Model {
                config: ck.config,
                weights: ck.weights,
                tokenizer,
                source: path.display().to_string(),
            })
        }
    }

    /// Build a model from a parsed GGUF file (`llama`, `qwen2` or `qwen3`: [`Arch`]). Its
    /// tokenizer is the file's `tokenizer.ggml.*` (missing or malformed: an error), or, with
    /// `external`, the one that reads for the model's vocabulary size (the file's own
    /// vocabulary is then not read at all).
    ///
    /// Strict about the math: every `{arch}.*` metadata key and every tensor of the file must
    /// be one this decoder implements (or one that changes nothing, named in
    /// [`HARMLESS_KEYS`]); anything else (an unknown architecture, MoE, sliding-window
    /// attention, YaRN or LongRoPE scaling, partial RoPE, a bias the architecture does not
    /// define, one shard of a split file) is refused by name, so a model baro-top would
    /// decode wrongly never loads.
    pub fn from_gguf(
        file: &GgufFile,
        external: Option<&dyn Fn(usize) -> Result<Tokenizer>>,
    ) -> Result<Model> {
        refuse_split(file)?;
        let arch_name = file.get_str("general.architecture")?.unwrap_or("");
        let arch = Arch::from_name(arch_name).ok_or_else(|| {
            Error::Model(format!(
                "general.architecture is '{arch_name}': baro-top implements llama, qwen2 and qwen3 (an architecture's blocks differ in ways that change the math)"
            ))
        })?;
        let config = config_from_gguf(file, arch)?;
        let tensor = |name: String| -> Result<Tensor> {
            let info = file
                .tensor(&name)
                .ok_or_else(|| Error::Model(format!("missing tensor {name}")))?;
            // A matrix is two dimensions and a vector one (trailing 1s allowed, as ggml pads
            // every shape to four): llama.cpp refuses any other shape, so a 3-D tensor whose
            // planes happen to multiply out to the expected rows is not read as a matrix.
            if info.dims.iter().skip(2).any(|&d| d != 1) {
                return Err(Error::Model(format!(
                    "tensor {name} has dimensions {:?} (ggml order): baro-top reads only matrices and vectors here, and llama.cpp refuses a tensor of more dimensions",
                    info.dims
                )));
            }
            let (rows, cols) = (info.rows() as usize, info.cols() as usize);
            Tensor::new(name, info.ty, rows, cols, file.tensor_blob(info))
        };
        let optional = |name: String| -> Result<Option<Tensor>> {
            match file.tensor(&name) {
                Some(_) => tensor(name).map(Some),
                None => Ok(None),
            }
        };
        // Every blk.N tensor must belong to a block the metadata declares: a block_count that
        // is too small would otherwise silently decode a shallower model.
        let mut blocks = 0u64;
        for t in &file.tensors {
            let block = t
                .name
                .strip_prefix("blk.")
                .and_then(|r| r.split('.').next())
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(b) = block.filter(|&b| b >= config.n_layers as u64) {
                return Err(Error::Model(format!(
                    "tensor {} belongs to block {b}, but {arch_name}.block_count is {} (blocks 0..{}): \
                     the metadata and the tensors disagree",
                    t.name,
                    config.n_layers,
                    config.n_layers - 1
                )));
            }
            if let Some(b) = block {
                blocks = blocks.max(b + 1);
            }
        }
        // And a block_count that is too large names the first block with no tensor at all,
        // before anything is sized by it (a 1 MB file may claim a million blocks).
        if blocks < config.n_layers as u64 {
            return Err(Error::Model(format!(
                "{arch_name}.block_count is {}, but the file holds tensors of {blocks} blocks \
                 (missing tensor blk.{blocks}.attn_norm.weight): the metadata and the tensors disagree",
                config.n_layers
            )));
        }
        let mut layers = Vec::with_capacity(config.n_layers);
        for l in 0..config.n_layers {
            let t = |s: &str| tensor(format!("blk.{l}.{s}.weight"));
            // Each q/k/v bias on its own, as llama.cpp reads them (create_tensor_qkv: every
            // bias TENSOR_NOT_REQUIRED; build_qkv adds the ones present): a qwen2 file
            // without some decodes there as here, so it is not refused.
            let bias = |s: &str| -> Result<Option<Tensor>> {
                if arch.has_qkv_bias() {
                    optional(format!("blk.{l}.{s}.bias"))
                } else {
                    Ok(None)
                }
            };
            let norm = |s: &str| -> Result<Option<Tensor>> {
                if arch.has_qk_norm() {
                    t(s).map(Some)
                } else {
                    Ok(None)
                }
            };
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
                q_bias: bias("attn_q")?,
                k_bias: bias("attn_k")?,
                v_bias: bias("attn_v")?,
                q_norm: norm("attn_q_norm")?,
                k_norm: norm("attn_k_norm")?,
            });
        }
        let weights = Weights {
            token_embd: tensor("token_embd.weight".into())?,
            // llama.cpp reads rope_freqs for `llama` only (qwen2/qwen3 have no such tensor:
            // there it is refused below as one this decoder does not use).
            rope_freqs: match arch {
                Arch::Llama => optional("rope_freqs.weight".into())?,
                _ => None,
            },
            layers,
            output_norm: tensor("output_norm.weight".into())?,
            output: optional("output.weight".into())?,
        };
        // Every tensor of the file is one the decoder consumes: an extra one (a bias in a
        // llama block, an MoE router, a second norm) would change the math if it were read.
        let used: std::collections::HashSet<&str> = weights
            .tensors()
            .into_iter()
            .map(|t| t.name.as_str())
            .collect();
        if let Some(t) = file
            .tensors
            .iter()
            .find(|t| !used.contains(t.name.as_str()))
        {
            return Err(Error::Model(format!(
                "tensor {} is not part of the {arch_name} decoder baro-top implements (reading it would change the math; ignoring it would decode another model)",
                t.name
            )));
        }
        weights.validate(&config)?;
        let tokenizer = match external {
            Some(read) => read(config.vocab_size)?,
            None => tokenizer_from_gguf(file)?,
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

/// `{arch}.*` keys the decoder reads (see [`config_from_gguf`]).
const READ_KEYS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scale_linear",
    "rope.scaling.attn_factor",
    "vocab_size",
    "expert_count",
    "expert_used_count",
    "attention.causal",
    "attention.sliding_window",
];

/// `{arch}.*` keys that change nothing these architectures compute (llama.cpp reads them
/// only for YaRN, for other architectures' LayerNorm, or not at all for the math).
pub const HARMLESS_KEYS: &[&str] = &[
    // YaRN's original context (refused) and a training flag.
    "rope.scaling.original_context_length",
    "rope.scaling.finetuned",
    // LayerNorm epsilon: these architectures use RMSNorm only.
    "attention.layer_norm_epsilon",
];

/// The configuration from `{arch}.*` metadata, as llama.cpp reads it for these architectures,
/// refusing by name every key whose math is not implemented.
fn config_from_gguf(file: &GgufFile, arch: Arch) -> Result<Config> {
    let p = arch.name();
    let key = |k: &str| format!("{p}.{k}");
    refuse_unknown_keys(file, p)?;
    let get = |k: &str| -> Result<Option<usize>> {
        let k = key(k);
        match file.get_u64(&k)? {
            Some(v) => usize::try_from(v)
                .map(Some)
                .map_err(|_| Error::Model(format!("{k} = {v} is too large"))),
            None => Ok(None),
        }
    };
    let req = |k: &str| -> Result<usize> {
        get(k)?.ok_or_else(|| Error::Model(format!("missing metadata {}", key(k))))
    };
    for k in ["expert_count", "expert_used_count"] {
        if let Some(n) = get(k)?.filter(|&n| n > 0) {
            return Err(Error::Model(format!(
                "{} = {n}: mixture-of-experts blocks are not implemented",
                key(k)
            )));
        }
    }
    if let Some(n) = get("attention.sliding_window")?.filter(|&n| n > 0) {
        return Err(Error::Model(format!(
            "{} = {n}: sliding-window attention is not implemented",
            key("attention.sliding_window")
        )));
    }
    if let Some(v) = file.get(&key("attention.causal")) {
        match v.as_bool() {
            Some(true) => {}
            Some(false) => {
                return Err(Error::Model(format!(
                    "{} is false: only causal attention is implemented",
                    key("attention.causal")
                )))
            }
            None => {
                return Err(Error::Model(format!(
                    "{} has type {}, not bool (llama.cpp reads it as a bool; only causal attention, true, is implemented)",
                    key("attention.causal"),
                    v.type_name()
                )))
            }
        }
    }
    let dim = req("embedding_length")?;
    let n_heads = req("attention.head_count")?;
    let vocab_size = match get("vocab_size")? {
        Some(v) => v,
        None => file
            .tensor("token_embd.weight")
            .ok_or_else(|| Error::Model("missing tensor token_embd.weight".into()))?
            .rows() as usize,
    };
    // The head size: attention.key_length where given (it must equal value_length: one
    // head size for queries, keys and values, as llama.cpp's graphs of these architectures
    // assert), else dim / n_heads.
    // Either length defaults to dim / n_heads, as in llama.cpp.
    let even = (n_heads > 0 && dim.is_multiple_of(n_heads)).then(|| dim / n_heads);
    let (kl, vl) = (get("attention.key_length")?, get("attention.value_length")?);
    // A width that heads do not divide has no default: llama.cpp then takes the missing
    // length as the integer quotient, which differs from the given one and is refused. Say
    // so by name rather than use the one length for both.
    if even.is_none() && kl.is_some() != vl.is_some() {
        let (given, missing) = if kl.is_some() {
            ("attention.key_length", "attention.value_length")
        } else {
            ("attention.value_length", "attention.key_length")
        };
        return Err(Error::Model(format!(
            "{} = {} but {} is missing, and embedding_length {dim} is not a multiple of head_count {n_heads}: the missing head size has no default (llama.cpp takes {} and refuses the pair)",
            key(given),
            kl.or(vl).unwrap_or(0),
            key(missing),
            dim.checked_div(n_heads).unwrap_or(0)
        )));
    }
    let (k, v) = (kl.or(even), vl.or(even));
    if let (Some(k), Some(v)) = (k, v) {
        if k != v {
            return Err(Error::Model(format!(
                "{} = {k} but {} = {v}: key and value heads of different sizes are not implemented",
                key("attention.key_length"),
                key("attention.value_length")
            )));
        }
    }
    let head_dim = match k.or(v) {
        h if h == even => None,
        h => h,
    };
    let rope_scale = rope_scale(file, p)?;
    let config = Config {
        dim,
        hidden_dim: req("feed_forward_length")?,
        n_layers: req("block_count")?,
        n_heads,
        n_kv_heads: get("attention.head_count_kv")?.unwrap_or(n_heads),
        vocab_size,
        seq_len: req("context_length")?,
        rope_theta: file.get_f32(&key("rope.freq_base"))?.unwrap_or(10000.0),
        // Required, as llama.cpp requires it for these architectures: a default would
        // guess a constant of every norm (Llama uses 1e-5, Qwen 1e-6).
        norm_eps: file
            .get_f32(&key("attention.layer_norm_rms_epsilon"))?
            .ok_or_else(|| {
                Error::Model(format!(
                    "missing metadata {}: the RMSNorm epsilon changes every norm, and llama.cpp refuses a {p} file without it",
                    key("attention.layer_norm_rms_epsilon")
                ))
            })?,
        arch,
        head_dim,
        rope_scale,
    };
    check_keys(file, &config, &key)?;
    config.validate()?;
    if let Some(n) = get("rope.dimension_count")? {
        if n != config.head_size() {
            return Err(Error::Model(format!(
                "{} = {n} but the head size is {}: partial RoPE is not implemented",
                key("rope.dimension_count"),
                config.head_size()
            )));
        }
    }
    Ok(config)
}

/// [`Config::validate`]'s checks that one key of the file decides, naming the key and its
/// value as the file holds it (an f64 beyond f32's range is shown as written, not as `inf`).
fn check_keys(file: &GgufFile, c: &Config, key: &dyn Fn(&str) -> String) -> Result<()> {
    let bad = |m: String| Err(Error::Model(m));
    for (k, v) in [
        ("embedding_length", c.dim),
        ("feed_forward_length", c.hidden_dim),
        ("block_count", c.n_layers),
        ("context_length", c.seq_len),
        ("attention.head_count", c.n_heads),
    ] {
        if v == 0 {
            return bad(format!("{} is 0 (must be at least 1)", key(k)));
        }
    }
    if c.n_kv_heads == 0 || !c.n_heads.is_multiple_of(c.n_kv_heads) {
        return bad(format!(
            "{} = {} does not divide {} = {} (grouped-query attention needs a whole number of query heads per key/value head)",
            key("attention.head_count_kv"),
            c.n_kv_heads,
            key("attention.head_count"),
            c.n_heads
        ));
    }
    // A head size given apart from dim / n_heads comes from key_length (or value_length):
    // name the key that set it.
    if let Some(h) = c.head_dim.filter(|h| *h == 0 || !h.is_multiple_of(2)) {
        let k = match file.get(&key("attention.key_length")) {
            Some(_) => key("attention.key_length"),
            None => key("attention.value_length"),
        };
        return bad(format!(
            "{k} = {h}: the head size must be even and at least 2 (RoPE rotates pairs of a head's elements)"
        ));
    }
    let shown = |k: &str, v: f32| match file.get(&key(k)) {
        Some(Value::F64(x)) => format!("{x:?}"),
        _ => format!("{v}"),
    };
    if !(c.rope_theta.is_finite() && c.rope_theta > 0.0) {
        return bad(format!(
            "{} = {}: the RoPE base frequency must be finite and positive (as f32)",
            key("rope.freq_base"),
            shown("rope.freq_base", c.rope_theta)
        ));
    }
    if !(c.norm_eps.is_finite() && c.norm_eps >= 0.0) {
        return bad(format!(
            "{} = {}: the RMSNorm epsilon must be finite and at least 0 (as f32)",
            key("attention.layer_norm_rms_epsilon"),
            shown("attention.layer_norm_rms_epsilon", c.norm_eps)
        ));
    }
    Ok(())
}

/// A shard of a split model (llama-gguf-split's `split.count` above 1, or a `split.no` past
/// the first): its tensors are only part of the model, and where the missing part is just
/// `output.weight` the rest would load as a complete model with a classifier tied to the
/// embedding, and decode another model. llama.cpp opens the other shards; baro-top reads one
/// file, so a shard is refused by name with the way to merge it.
fn refuse_split(file: &GgufFile) -> Result<()> {
    let count = file.get_u64("split.count")?;
    let no = file.get_u64("split.no")?;
    if count.is_some_and(|c| c > 1) || no.is_some_and(|n| n > 0) {
        let of = count.map_or_else(|| "?".to_string(), |c| c.to_string());
        let shard = no.map_or_else(|| "?".to_string(), |n| (n + 1).to_string());
        return Err(Error::Model(format!(
            "split.count/split.no: this file is shard {shard} of {of} of a split GGUF, not a whole model; baro-top reads one file: merge the shards first (`llama-gguf-split --merge FIRST-SHARD.gguf OUT.gguf`)"
        )));
    }
    Ok(())
}

/// Any key under the architecture's prefix `p` that is neither read nor harmless may change
/// the math (a new llama.cpp feature, a softcap, a scale): refused, never ignored.
fn refuse_unknown_keys(file: &GgufFile, p: &str) -> Result<()> {
    for (k, _) in &file.metadata {
        if let Some(rest) = k.strip_prefix(&format!("{p}.")) {
            if !READ_KEYS.contains(&rest) && !HARMLESS_KEYS.contains(&rest) {
                return Err(Error::Model(format!(
                    "metadata {k} is not implemented by baro-top (it may change the math of a {p} model; refused rather than ignored)"
                )));
            }
        }
    }
    Ok(())
}

/// The RoPE scaling factor of architecture `p`, as llama.cpp defines it: the type defaults to
/// linear, whose factor (0 or absent: none) divides every angle; "none" never scales. YaRN
/// and LongRoPE are refused, and so is an attention factor other than 1.
fn rope_scale(file: &GgufFile, p: &str) -> Result<f32> {
    let key = |k: &str| format!("{p}.{k}");
    let scaling = file.get_str(&key("rope.scaling.type"))?;
    let factor = match file.get_f32(&key("rope.scaling.factor"))? {
        Some(f) => Some(f),
        None => file.get_f32(&key("rope.scale_linear"))?,
    };
    let rope_scale = match scaling.unwrap_or("linear") {
        "none" => 1.0,
        "linear" => match factor {
            None => 1.0,
            Some(0.0) => 1.0,
            Some(f) if f.is_finite() && f > 0.0 => f,
            Some(f) => {
                return Err(Error::Model(format!(
                    "{} = {f}: a linear RoPE scaling factor must be finite and positive",
                    key("rope.scaling.factor")
                )))
            }
        },
        t @ ("yarn" | "longrope") => {
            return Err(Error::Model(format!(
                "{} = '{t}': {t} RoPE scaling is not implemented (none and linear are, and llama3 scaling through rope_freqs.weight)",
                key("rope.scaling.type")
            )))
        }
        t => {
            return Err(Error::Model(format!(
                "{} = '{t}': unknown RoPE scaling type (llama.cpp defines none, linear, yarn and longrope; baro-top implements none and linear)",
                key("rope.scaling.type")
            )))
        }
    };
    if let Some(a) = file.get_f32(&key("rope.scaling.attn_factor"))? {
        if a != 1.0 {
            return Err(Error::Model(format!(
                "{} = {a}: a RoPE attention factor other than 1 is not implemented",
                key("rope.scaling.attn_factor")
            )));
        }
    }
    Ok(rope_scale)
}
