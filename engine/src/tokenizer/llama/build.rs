//! Building a [`LlamaVocab`] from what a GGUF file says ([`Spec`]): the per-model defaults,
//! the special tokens llama.cpp recognises by their text, the end-of-generation set and the
//! special-token cache.

use std::collections::HashMap;

use super::{attr, Algo, Bpe, LlamaVocab};
use crate::gguf::Value;
use crate::tokenizer::pretok::Pre;

/// Which model a GGUF vocabulary names, with what that model needs.
#[derive(Clone, Debug)]
pub enum ModelSpec {
    /// `llama`: SentencePiece.
    Spm {
        /// `tokenizer.ggml.add_space_prefix`, if given.
        add_space_prefix: Option<bool>,
    },
    /// `gpt2`: byte-level BPE.
    Bpe {
        /// `tokenizer.ggml.pre`.
        pre: Pre,
        /// `tokenizer.ggml.merges`, each split at its separating space.
        merges: Vec<(String, String)>,
    },
}

/// Special-token ids a file gives (each already checked to be inside the vocabulary).
#[derive(Clone, Debug, Default)]
pub struct SpecialIds {
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.eom_token_id`.
    pub eom: Option<u32>,
    /// `tokenizer.ggml.fim_pad_token_id`.
    pub fim_pad: Option<u32>,
    /// `tokenizer.ggml.fim_rep_token_id`.
    pub fim_rep: Option<u32>,
    /// `tokenizer.ggml.fim_sep_token_id`.
    pub fim_sep: Option<u32>,
}

/// Everything `model::vocab` reads from a file, checked.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The model and its data.
    pub model: ModelSpec,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`, if present (same length as tokens).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type` as attribute bits, if present (same length as tokens).
    pub attrs: Option<Vec<u8>>,
    /// Special ids.
    pub ids: SpecialIds,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// The `tokenizer.*` metadata as read.
    pub meta: Vec<(String, Value)>,
}

/// Texts llama.cpp takes for an end-of-turn token when the file names none.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<end_of_utterance>",
];
const FIM_PRE: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\u{ff5c}fim\u{2581}begin\u{ff5c}>",
    "<PRE>",
    "\u{2581}<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\u{ff5c}fim\u{2581}hole\u{ff5c}>",
    "<SUF>",
    "\u{2581}<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\u{ff5c}fim\u{2581}end\u{ff5c}>",
    "<MID>",
    "\u{2581}<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP: &[&str] = &["<|file_sep|>"];
/// Texts llama.cpp ends generation on, whatever the file says.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

impl LlamaVocab {
    /// Build the vocabulary as llama.cpp's `llama_vocab::impl::load` does after reading the
    /// file: defaults per model, the special tokens it recognises by their text (which also
    /// turns them into control tokens), the end-of-generation set and the special-token cache.
    pub fn build(spec: Spec) -> LlamaVocab {
        let n = spec.tokens.len();
        let texts: Vec<String> = spec
            .tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_empty() {
                    format!("[EMPTY_{i}]")
                } else {
                    t
                }
            })
            .collect();
        let mut to_id = HashMap::with_capacity(n);
        for (i, t) in texts.iter().enumerate() {
            to_id.insert(t.as_bytes().to_vec(), i as u32);
        }
        let scores = spec.scores.unwrap_or_else(|| vec![0.0; n]);
        let mut attrs = spec.attrs.unwrap_or_else(|| vec![attr::NORMAL; n]);
        let in_range = |id: u32| (id as usize) < n;
        let (algo, mut add_bos, def_bos, def_eos, def_unk) = match spec.model {
            ModelSpec::Spm { add_space_prefix } => (
                Algo::Spm {
                    add_space_prefix: add_space_prefix.unwrap_or(true),
                },
                true,
                Some(1),
                Some(2),
                Some(0),
            ),
            ModelSpec::Bpe { pre, merges } => (
                Algo::Bpe(Box::new(Bpe::new(pre, &merges))),
                pre == Pre::Llama3,
                Some(11),
                Some(11),
                None,
            ),
        };
        let ids = spec.ids;
        let pick =
            |given: Option<u32>, default: Option<u32>| given.or(default.filter(|&d| in_range(d)));
        let bos = pick(ids.bos, def_bos);
        let eos = pick(ids.eos, def_eos);
        let unk = pick(ids.unk, def_unk);
        let mut eot = ids.eot;
        let mut eom = ids.eom;
        let (mut fim_pad, mut fim_rep, mut fim_sep) = (ids.fim_pad, ids.fim_rep, ids.fim_sep);
        let (mut fim_pre, mut fim_suf, mut fim_mid) = (None::<u32>, None::<u32>, None::<u32>);
        if let Some(b) = spec.add_bos {
            add_bos = b;
        }
        let add_eos = spec.add_eos.unwrap_or(false);

        for (i, t) in texts.iter().enumerate() {
            let t = t.as_str();
            let id = i as u32;
            for (slot, list) in [
                (&mut eot, EOT_TEXTS),
                (&mut eom, &["<|eom_id|>"][..]),
                (&mut fim_pre, FIM_PRE),
                (&mut fim_suf, FIM_SUF),
                (&mut fim_mid, FIM_MID),
                (&mut fim_pad, FIM_PAD),
                (&mut fim_rep, FIM_REP),
                (&mut fim_sep, FIM_SEP),
            ] {
                if slot.is_none() && list.contains(&t) {
                    *slot = Some(id);
                    attrs[i] |= attr::CONTROL;
                }
            }
        }
        for (i, t) in texts.iter().enumerate() {
            if attrs[i] & attr::CONTROL != 0 && t.contains("unused") {
                attrs[i] |= attr::UNUSED;
            }
        }
        let eog = end_of_generation(
            &texts,
            &mut attrs,
            [fim_pad, fim_rep, fim_sep],
            [eos, eot, eom],
        );
        let mut special: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        special.sort_by(|&a, &b| texts[b as usize].len().cmp(&texts[a as usize].len()));
        LlamaVocab {
            texts,
            scores,
            attrs,
            to_id,
            special,
            algo,
            bos,
            eos,
            unk,
            add_bos,
            add_eos,
            eog,
            meta: spec.meta,
        }
    }
}

/// The end-of-generation set, as llama.cpp builds it: the FIM pad/rep/sep ids (`fim`), every
/// token whose text is one llama.cpp ends on (made a control token), then EOS, EOT and EOM
/// (`ends`); gpt-oss's `<|end|>` and a `</s>` beside other enders leave it again. gpt-oss's
/// channel markers become user-defined (they always render). Marks `attrs` as it goes.
fn end_of_generation(
    texts: &[String],
    attrs: &mut [u8],
    fim: [Option<u32>; 3],
    ends: [Option<u32>; 3],
) -> Vec<u32> {
    let mut eog: Vec<u32> = fim.into_iter().flatten().collect();
    for (i, t) in texts.iter().enumerate() {
        if EOG_TEXTS.contains(&t.as_str()) {
            eog.push(i as u32);
            attrs[i] |= attr::CONTROL;
        }
    }
    for (i, t) in texts.iter().enumerate() {
        // gpt-oss's channel markers always render, as in llama.cpp.
        if matches!(
            t.as_str(),
            "<|channel|>" | "<|message|>" | "<|start|>" | "<|constrain|>"
        ) {
            attrs[i] = attr::USER_DEFINED;
        }
    }
    eog.extend(ends.into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    let has = |eog: &[u32], s: &str| eog.iter().any(|&id| texts[id as usize] == s);
    let find_in = |eog: &[u32], s: &str| eog.iter().copied().find(|&id| texts[id as usize] == s);
    if let Some(end) = find_in(&eog, "<|end|>") {
        let call = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
        if call && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
            eog.retain(|&x| x != end);
            attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    if let Some(s) = find_in(&eog, "</s>") {
        if has(&eog, "<|tool_response>") || has(&eog, "<|plamo:eos|>") {
            eog.retain(|&x| x != s);
            attrs[s as usize] = attr::NORMAL;
        }
    }
    eog
}
