//! Model-level validation of GGUF files: what changes the math, or does not match the
//! metadata, is refused saying what and where. Files are built in memory from tiny synthetic
//! models and edited before they are read (no device, no fixture files).

use std::sync::Arc;

use super::types::Arch;
use super::{gguf_tensors, Model};
use crate::blob::Storage;
use crate::gguf::{GgufFile, GgufWriter, Value};
use crate::quant::GgmlType;
use crate::synth::{self, Shape};
use crate::Result;

type Tensors = Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>;
type Metadata = Vec<(String, Value)>;

/// A tiny f32 model of `arch` with `layers` blocks (d 128, 8/4 heads, vocab 512, tied).
fn tiny(arch: Arch, layers: usize) -> Model {
    let (base, _) = Shape::Tiny.config();
    let cfg = super::Config {
        n_layers: layers,
        arch,
        ..base
    };
    synth::generate(&cfg, true, GgmlType::F32, 3, |_, _| {}).expect("tiny model")
}

/// `m` as GGUF bytes, its metadata and tensors edited by `edit` first.
fn gguf_bytes(m: &Model, edit: impl FnOnce(&mut Metadata, &mut Tensors)) -> Vec<u8> {
    let mut md = m.gguf_metadata("crafted").expect("metadata");
    let mut ts: Tensors = gguf_tensors(m);
    edit(&mut md, &mut ts);
    let shapes: Vec<_> = ts
        .iter()
        .map(|(n, d, t, _)| (n.clone(), d.clone(), *t))
        .collect();
    let mut w = GgufWriter::new(Vec::new(), &md, &shapes).expect("header");
    for (_, _, _, b) in &ts {
        w.write_tensor(b).expect("tensor");
    }
    w.finish().expect("finish")
}

/// Load `m` written as GGUF after `edit`, with the file's own tokenizer.
fn load(m: &Model, edit: impl FnOnce(&mut Metadata, &mut Tensors)) -> Result<Model> {
    let file = GgufFile::from_storage(Arc::new(Storage::Owned(gguf_bytes(m, edit))))?;
    Model::from_gguf(&file, None)
}

fn refused(r: Result<Model>, want: &[&str]) -> String {
    let e = match r {
        Ok(_) => panic!("loaded; expected a refusal naming {want:?}"),
        Err(e) => e.to_string(),
    };
    for w in want {
        assert!(e.contains(w), "{e:?} does not name {w:?}");
    }
    e
}

fn set(md: &mut Metadata, k: &str, v: Value) {
    md.retain(|(n, _)| n != k);
    md.push((k.to_string(), v));
}

fn tensor<'a>(ts: &'a mut Tensors, name: &str) -> &'a mut (String, Vec<u64>, GgmlType, Vec<u8>) {
    ts.iter_mut().find(|t| t.0 == name).expect("tensor in file")
}

#[test]
fn a_file_without_the_rms_epsilon_is_refused_naming_the_key_not_decoded_with_a_guess() {
    for arch in [Arch::Llama, Arch::Qwen2, Arch::Qwen3] {
        let m = tiny(arch, 1);
        let k = format!("{}.attention.layer_norm_rms_epsilon", arch.name());
        let r = load(&m, |md, _| md.retain(|(n, _)| *n != k));
        refused(r, &["missing metadata", &k]);
        // With it, the file loads with the value it gives.
        let got = load(&m, |md, _| set(md, &k, Value::F32(1e-6))).expect("loads");
        assert_eq!(got.config.norm_eps, 1e-6);
    }
}

#[test]
fn a_tensor_of_more_than_two_dimensions_is_refused_even_where_its_planes_multiply_out() {
    let m = tiny(Arch::Llama, 1);
    // 512 rows of 128 stored as 256 x 2 planes: the same bytes, but not the matrix llama.cpp
    // reads (it refuses the shape).
    let r = load(&m, |_, ts| {
        tensor(ts, "token_embd.weight").1 = vec![128, 256, 2];
    });
    refused(r, &["token_embd.weight", "[128, 256, 2]", "dimensions"]);
    let r = load(&m, |_, ts| {
        tensor(ts, "blk.0.ffn_gate.weight").1 = vec![128, 192, 1, 2];
    });
    refused(r, &["blk.0.ffn_gate.weight", "[128, 192, 1, 2]"]);
    // Trailing dimensions of 1 are the same shape (ggml pads every shape to four).
    let got = load(&m, |_, ts| {
        tensor(ts, "token_embd.weight").1 = vec![128, 512, 1, 1];
        tensor(ts, "blk.0.attn_norm.weight").1 = vec![128, 1, 1];
    })
    .expect("trailing 1s load");
    assert_eq!(got.weights.token_embd.rows, 512);
}

#[test]
fn a_block_count_beyond_the_blocks_in_the_file_is_refused_naming_the_first_missing_block() {
    let m = tiny(Arch::Llama, 2);
    // A million blocks claimed by a file of two: refused before anything is sized by it.
    let r = load(&m, |md, _| {
        set(md, "llama.block_count", Value::U32(1 << 20))
    });
    refused(
        r,
        &[
            "llama.block_count is 1048576",
            "tensors of 2 blocks",
            "blk.2.attn_norm.weight",
        ],
    );
    // One block short of the claim.
    let r = load(&m, |md, _| set(md, "llama.block_count", Value::U32(3)));
    refused(r, &["llama.block_count is 3", "blk.2.attn_norm.weight"]);
}

#[test]
fn a_head_size_of_zero_or_odd_from_key_length_is_refused_naming_the_key() {
    let m = tiny(Arch::Qwen3, 1);
    for (h, want) in [(0u32, "= 0"), (15, "= 15")] {
        let r = load(&m, |md, _| {
            set(md, "qwen3.attention.key_length", Value::U32(h));
            set(md, "qwen3.attention.value_length", Value::U32(h));
        });
        refused(r, &["qwen3.attention.key_length", want, "even"]);
    }
    // value_length alone where dim / n_heads is not whole: that key is named.
    let r = load(&m, |md, _| {
        set(md, "qwen3.attention.head_count", Value::U32(3));
        set(md, "qwen3.attention.head_count_kv", Value::U32(3));
        set(md, "qwen3.attention.value_length", Value::U32(7));
    });
    refused(r, &["qwen3.attention.value_length = 7"]);
}

#[test]
fn one_head_length_without_the_other_is_refused_where_heads_do_not_divide_the_width() {
    // llama.cpp would take the missing one as dim / n_heads rounded down, unequal to the one
    // given; using the given length for both would decode another model.
    for arch in [Arch::Llama, Arch::Qwen3] {
        let m = tiny(arch, 1);
        let a = arch.name();
        for (given, missing) in [
            ("key_length", "value_length"),
            ("value_length", "key_length"),
        ] {
            let r = load(&m, |md, _| {
                set(md, &format!("{a}.attention.head_count"), Value::U32(3));
                set(md, &format!("{a}.attention.head_count_kv"), Value::U32(3));
                set(md, &format!("{a}.attention.{given}"), Value::U32(22));
            });
            refused(
                r,
                &[
                    &format!("{a}.attention.{given} = 22"),
                    &format!("{a}.attention.{missing} is missing"),
                    "not a multiple of head_count 3",
                ],
            );
        }
    }
}

#[test]
fn attention_causal_of_another_type_is_refused_naming_the_type() {
    let m = tiny(Arch::Llama, 1);
    let r = load(&m, |md, _| set(md, "llama.attention.causal", Value::U8(1)));
    refused(r, &["llama.attention.causal has type u8, not bool"]);
    let r = load(&m, |md, _| {
        set(md, "llama.attention.causal", Value::Bool(false))
    });
    refused(r, &["llama.attention.causal is false"]);
    load(&m, |md, _| {
        set(md, "llama.attention.causal", Value::Bool(true))
    })
    .expect("causal true");
}

/// A llama2.c tokenizer file of `n` pieces (`<unk>`, `<s>`, `</s>`, then one letter each).
fn llama2c_tokenizer(n: usize) -> Vec<u8> {
    let mut b = 8i32.to_le_bytes().to_vec();
    for i in 0..n {
        let piece = match i {
            0 => "<unk>".to_string(),
            1 => "<s>".to_string(),
            2 => "</s>".to_string(),
            _ => format!("t{i}"),
        };
        b.extend((-(i as f32)).to_le_bytes());
        b.extend((piece.len() as i32).to_le_bytes());
        b.extend(piece.as_bytes());
    }
    b
}

#[test]
fn an_external_tokenizer_stands_in_for_the_file_s_vocabulary_whatever_its_size() {
    let d = tempfile::tempdir().expect("scratch dir");
    let m = tiny(Arch::Llama, 1);
    // The embedding cut to 100 rows: a vocabulary too small for a synthetic SentencePiece
    // one and unlike the 512 tokens the file's own metadata lists.
    let cut = |md: &mut Metadata, ts: &mut Tensors| {
        set(md, "llama.vocab_size", Value::U32(100));
        let t = tensor(ts, "token_embd.weight");
        t.1 = vec![128, 100];
        t.3.truncate(100 * 128 * 4);
    };
    let tok = d.path().join("tok100.bin");
    std::fs::write(&tok, llama2c_tokenizer(100)).expect("write tokenizer");
    for strip in [false, true] {
        let bytes = gguf_bytes(&m, |md, ts| {
            cut(md, ts);
            if strip {
                md.retain(|(k, _)| !k.starts_with("tokenizer."));
            }
        });
        let p = d.path().join(format!("m{strip}.gguf"));
        std::fs::write(&p, bytes).expect("write model");
        // Without the external tokenizer the file's own is read, and refused.
        let e = Model::open(&p, None).err().expect("refused").to_string();
        assert!(e.contains("tokenizer"), "{e}");
        let got = Model::open(&p, Some(&tok)).expect("loads with the external tokenizer");
        assert_eq!(got.config.vocab_size, 100);
        assert_eq!(got.tokenizer.vocab_size(), 100);
        assert_eq!(got.tokenizer.pieces()[3], b"t3");
    }
}
