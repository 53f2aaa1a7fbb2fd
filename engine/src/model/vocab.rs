//! The tokenizer ↔ GGUF bridge (`tokenizer.ggml.*` metadata in and out) and the synthetic
//! SentencePiece-shaped vocabularies of generated models.
//!
//! Reading checks every value a tokenizer uses before building it: types, array lengths, token
//! ids inside the vocabulary, merges that split into two halves, byte tokens that name a byte;
//! a model or pre-tokenizer not implemented is refused by its name.

use crate::gguf::{GgufFile, Value};
use crate::tokenizer::llama::{attr, attr_of_type, LlamaVocab, ModelSpec, Spec, SpecialIds};
use crate::tokenizer::pretok::Pre;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// The special-token id keys llama.cpp reads (all checked to be inside the vocabulary).
const ID_KEYS: &[&str] = &[
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.mask_token_id",
    "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id",
    "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id",
    "tokenizer.ggml.fim_sep_token_id",
    "tokenizer.ggml.prefix_token_id",
    "tokenizer.ggml.suffix_token_id",
    "tokenizer.ggml.middle_token_id",
];

/// The tokenizer stored in a GGUF's `tokenizer.ggml.*` metadata, run as llama.cpp runs it:
/// `tokenizer.ggml.model` `llama` (SentencePiece) or `gpt2` (byte-level BPE with one of the
/// pre-tokenizers of [`Pre`]). A file without `tokenizer.ggml.model` (baro-top's own early
/// files) is read as `llama`.
pub fn tokenizer_from_gguf(file: &GgufFile) -> Result<Tokenizer> {
    let model = file.get_str("tokenizer.ggml.model")?.unwrap_or("llama");
    let tokens = strings(file, "tokenizer.ggml.tokens")?
        .ok_or_else(|| terr("missing tokenizer.ggml.tokens".into()))?;
    let n = tokens.len();
    if n == 0 {
        return Err(terr("tokenizer.ggml.tokens is empty".into()));
    }
    if u32::try_from(n).is_err() {
        return Err(terr(format!("{n} tokens do not fit 32-bit token ids")));
    }
    let scores = scores(file, n)?;
    let attrs = attrs(file, &tokens)?;
    let ids = special_ids(file, n)?;
    if let Some(v) = file.get("tokenizer.chat_template") {
        if v.as_str().is_none() {
            return Err(terr(format!(
                "tokenizer.chat_template is {}, expected a string",
                v.type_name()
            )));
        }
    }
    // llama.cpp strips the spaces around special tokens for vocabularies it knows by name
    // (Phi-3); that changes the ids, and it is not implemented here.
    let name = file.get_str("general.name")?.unwrap_or("").to_lowercase();
    if name.contains("phi-3") || name.contains("phi3") {
        return Err(terr(format!(
            "general.name is '{name}': llama.cpp strips spaces around Phi-3's special tokens, which baro-top does not implement"
        )));
    }
    let model = model_spec(file, model)?;
    let meta = file
        .metadata
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .cloned()
        .collect();
    let v = LlamaVocab::build(Spec {
        model,
        tokens,
        scores,
        attrs,
        ids,
        add_bos: flag(file, "tokenizer.ggml.add_bos_token")?,
        add_eos: flag(file, "tokenizer.ggml.add_eos_token")?,
        meta,
    });
    Tokenizer::from_llama_vocab(v)
}

fn terr(m: String) -> Error {
    Error::Tokenizer(m)
}

/// Array `k`, if present.
fn arr<'a>(file: &'a GgufFile, k: &str) -> Result<Option<&'a [Value]>> {
    match file.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_array()
            .map(Some)
            .ok_or_else(|| terr(format!("{k} is {}, expected an array", v.type_name()))),
    }
}

/// Array `k` of strings, if present.
fn strings(file: &GgufFile, k: &str) -> Result<Option<Vec<String>>> {
    let Some(a) = arr(file, k)? else {
        return Ok(None);
    };
    a.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| terr(format!("{k}[{i}] is {}, expected a string", v.type_name())))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Bool `k`, if present.
fn flag(file: &GgufFile, k: &str) -> Result<Option<bool>> {
    match file.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| terr(format!("{k} is {}, expected a bool", v.type_name()))),
    }
}

/// Array `k` has one entry per token (`n`).
fn same_len(k: &str, len: usize, n: usize) -> Result<()> {
    if len != n {
        return Err(terr(format!(
            "{k} has {len} entries but tokenizer.ggml.tokens has {n}"
        )));
    }
    Ok(())
}

/// `tokenizer.ggml.scores` (f32, or i32 taken as f32), if present: one per token.
fn scores(file: &GgufFile, n: usize) -> Result<Option<Vec<f32>>> {
    let Some(a) = arr(file, "tokenizer.ggml.scores")? else {
        return Ok(None);
    };
    same_len("tokenizer.ggml.scores", a.len(), n)?;
    a.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::I32(x) => Ok(*x as f32),
            _ => v.as_f32().ok_or_else(|| {
                terr(format!(
                    "tokenizer.ggml.scores[{i}] is {}, expected f32",
                    v.type_name()
                ))
            }),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// `tokenizer.ggml.token_type` as attribute bits, if present: one per token, and a byte
/// token's piece names a byte.
fn attrs(file: &GgufFile, tokens: &[String]) -> Result<Option<Vec<u8>>> {
    let Some(a) = arr(file, "tokenizer.ggml.token_type")? else {
        return Ok(None);
    };
    same_len("tokenizer.ggml.token_type", a.len(), tokens.len())?;
    let attrs = a
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let t = v.as_i64().ok_or_else(|| {
                terr(format!(
                    "tokenizer.ggml.token_type[{i}] is {}, expected an integer",
                    v.type_name()
                ))
            })?;
            attr_of_type(t).ok_or_else(|| {
                terr(format!(
                    "tokenizer.ggml.token_type[{i}] is {t}: token types are 0..=6 (undefined, normal, unknown, control, user-defined, unused, byte)"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    for (i, &at) in attrs.iter().enumerate() {
        if at == attr::BYTE && crate::tokenizer::byte_piece_value(tokens[i].as_bytes()).is_none() {
            return Err(terr(format!(
                "tokenizer.ggml.tokens[{i}] {:?} has token type 6 (byte) but is not of the form <0xXX>",
                tokens[i]
            )));
        }
    }
    Ok(Some(attrs))
}

/// The special ids of [`ID_KEYS`] (each inside the vocabulary of `n` tokens).
fn special_ids(file: &GgufFile, n: usize) -> Result<SpecialIds> {
    let mut ids = SpecialIds::default();
    for &k in ID_KEYS {
        let Some(v) = file.get_u64(k)? else { continue };
        if v >= n as u64 {
            return Err(terr(format!(
                "{k} = {v} is outside the vocabulary of {n} tokens"
            )));
        }
        let id = Some(v as u32);
        match k {
            "tokenizer.ggml.bos_token_id" => ids.bos = id,
            "tokenizer.ggml.eos_token_id" => ids.eos = id,
            "tokenizer.ggml.eot_token_id" => ids.eot = id,
            "tokenizer.ggml.eom_token_id" => ids.eom = id,
            "tokenizer.ggml.unknown_token_id" => ids.unk = id,
            "tokenizer.ggml.fim_pad_token_id" => ids.fim_pad = id,
            "tokenizer.ggml.fim_rep_token_id" => ids.fim_rep = id,
            "tokenizer.ggml.fim_sep_token_id" => ids.fim_sep = id,
            _ => {}
        }
    }
    Ok(ids)
}

/// `tokenizer.ggml.model` `model` with its data: SentencePiece's space prefix flag, or a
/// BPE vocabulary's pre-tokenizer and merges.
fn model_spec(file: &GgufFile, model: &str) -> Result<ModelSpec> {
    Ok(match model {
        "llama" => ModelSpec::Spm {
            add_space_prefix: flag(file, "tokenizer.ggml.add_space_prefix")?,
        },
        "gpt2" => {
            let pre_name = file.get_str("tokenizer.ggml.pre")?.ok_or_else(|| {
                terr(format!(
                    "tokenizer.ggml.pre is missing: llama.cpp then runs its 'default' pre-tokenizer, which baro-top does not implement (implemented: {})",
                    Pre::NAMES
                ))
            })?;
            let pre = Pre::from_name(pre_name).ok_or_else(|| {
                terr(format!(
                    "tokenizer.ggml.pre is '{pre_name}': not implemented (implemented: {})",
                    Pre::NAMES
                ))
            })?;
            let merges = strings(file, "tokenizer.ggml.merges")?.ok_or_else(|| {
                terr("tokenizer.ggml.model is 'gpt2' but tokenizer.ggml.merges is missing".into())
            })?;
            let merges = merges
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    // The halves split at the first space after the first byte, as llama.cpp.
                    match m.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) {
                        Some(p) if p + 1 < m.len() => Ok((m[..p].to_owned(), m[p + 1..].to_owned())),
                        _ => Err(terr(format!(
                            "tokenizer.ggml.merges[{i}] {m:?} is not two non-empty halves separated by a space"
                        ))),
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            ModelSpec::Bpe { pre, merges }
        }
        other => {
            return Err(terr(format!(
                "tokenizer.ggml.model is '{other}': implemented are 'llama' (SentencePiece) and 'gpt2' (byte-level BPE)"
            )))
        }
    })
}

/// GGUF `tokenizer.ggml.*` metadata for `tok`.
///
/// A vocabulary read from a GGUF file is written back as it was read (every `tokenizer.*`
/// key); a run.c vocabulary as a SentencePiece `llama` one.
pub fn tokenizer_gguf_metadata(tok: &Tokenizer) -> Result<Vec<(String, Value)>> {
    if let Some(v) = tok.llama_vocab() {
        return Ok(v.meta.clone());
    }
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
    let mut rng = crate::rng::Rng::new(seed ^ 0x70C5);
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
