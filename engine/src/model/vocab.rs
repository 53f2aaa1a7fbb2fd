//! The tokenizer ↔ GGUF bridge (`tokenizer.ggml.*` metadata in and out) and the synthetic
//! SentencePiece-shaped vocabularies of generated models.

use crate::gguf::{GgufFile, Value};
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

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
