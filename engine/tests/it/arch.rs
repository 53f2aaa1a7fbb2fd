//! The architectures real GGUF files use: `llama` with Llama 3 rope scaling
//! (`rope_freqs.weight`), linear rope scaling and a head size apart from dim / n_heads;
//! `qwen2` (q/k/v biases, NEOX RoPE); `qwen3` (per-head q/k RMSNorm, NEOX RoPE, its own head
//! size). Each is checked three ways:
//! - on the CPU reference alone: the part changes the logits (an implementation that ignored
//!   it would fail), and a GGUF round trip keeps the model;
//! - with crafted files: whatever changes the math and is not implemented is refused by name;
//! - on the Vulkan device (lavapipe in CI, a missing device fails): the gate over a few
//!   positions, mega and multi bit-identical and within the gate's bound of the reference.
//!
//! Shapes are tiny (one or two blocks, d 64–128) and the GPU runs few positions: a lavapipe
//! pass costs tens of milliseconds.

use crate::common;

use std::path::PathBuf;

use baro_engine::gate::{run_gate, GateConfig};
use baro_engine::gguf::{write_file, Value};
use baro_engine::model::types::Arch;
use baro_engine::model::{gguf_tensors, Config, Model};
use baro_engine::quant::GgmlType;
use baro_engine::reference::CpuDecoder;
use baro_engine::synth::{self, Llama3Rope, Shape};
use baro_engine::vulkan::{DecoderOptions, Dispatch};

/// A tiny shape of `arch`: d 128, 8 heads (head size 16, or `head_dim`), 4 KV heads.
fn shape(arch: Arch, layers: usize, head_dim: Option<usize>) -> Config {
    let (base, _) = Shape::Tiny.config();
    Config {
        n_layers: layers,
        arch,
        head_dim,
        ..base
    }
}

fn model(cfg: &Config, ty: GgmlType, seed: u64) -> Model {
    synth::generate(cfg, true, ty, seed, |_, _| {}).expect("model")
}

/// Logits of forced tokens at positions 0..n on the CPU reference.
fn logits(m: &Model, n: usize) -> Vec<Vec<f32>> {
    let mut d = CpuDecoder::new(&m.config, &m.weights, n);
    (0..n)
        .map(|p| {
            d.forward(((p * 37 + 1) % m.config.vocab_size) as u32, p)
                .to_vec()
        })
        .collect()
}

fn rel(a: &[f32], b: &[f32]) -> f64 {
    baro_engine::gate::rel_l2(a, b)
}

// ---- the CPU reference: every part changes the math ----------------------------------------

#[test]
fn llama3_rope_factors_change_the_logits_from_position_one_on() {
    let cfg = shape(Arch::Llama, 2, None);
    let plain = model(&cfg, GgmlType::F32, 1);
    let mut scaled = plain.clone();
    // A short original context, so that most of a 16-wide head's pairs are scaled.
    let p = Llama3Rope {
        original_context: 64.0,
        ..Llama3Rope::LLAMA_3_2
    };
    synth::add_llama3_rope(&mut scaled, &p).expect("rope_freqs");
    let f = p.factors(&cfg);
    assert_eq!(f.len(), 8);
    assert_eq!(f[0], 1.0, "the highest frequency keeps its rate");
    assert_eq!(f[7], 32.0, "the lowest is divided by the factor");
    assert!(
        f.iter().any(|&x| x > 1.0 && x < 32.0),
        "a smooth pair: {f:?}"
    );
    let (a, b) = (logits(&plain, 6), logits(&scaled, 6));
    // Position 0 rotates by nothing: equal to the bit.
    assert_eq!(a[0], b[0]);
    for pos in 1..6 {
        let e = rel(&a[pos], &b[pos]);
        assert!(
            e > 1e-4,
            "position {pos}: rope_freqs moved the logits by only {e:.2e}"
        );
    }
}

#[test]
fn linear_rope_scaling_changes_the_logits_and_factor_one_changes_nothing() {
    let cfg = shape(Arch::Llama, 2, None);
    let plain = model(&cfg, GgmlType::F32, 2);
    let mut one = plain.clone();
    one.config.rope_scale = 1.0;
    let mut four = plain.clone();
    four.config.rope_scale = 4.0;
    let (a, b, c) = (logits(&plain, 5), logits(&one, 5), logits(&four, 5));
    assert_eq!(a, b);
    assert!(rel(&a[3], &c[3]) > 1e-4);
}

#[test]
fn neox_pairing_changes_the_logits_against_adjacent_pairs() {
    // The same weights decoded as llama (adjacent pairs) and as qwen2 without biases (NEOX).
    let cfg = shape(Arch::Llama, 2, None);
    let normal = model(&cfg, GgmlType::F32, 3);
    let mut neox = normal.clone();
    neox.config.arch = Arch::Qwen2;
    neox.weights
        .validate(&neox.config)
        .expect("qwen2 without biases");
    let (a, b) = (logits(&normal, 5), logits(&neox, 5));
    assert_eq!(a[0], b[0], "position 0 rotates by nothing");
    for pos in 1..5 {
        assert!(rel(&a[pos], &b[pos]) > 1e-4, "position {pos}");
    }
}

#[test]
fn qwen2_biases_and_qwen3_norms_change_the_logits() {
    let q2 = model(&shape(Arch::Qwen2, 2, None), GgmlType::F32, 4);
    assert!(q2.weights.layers[1].k_bias.is_some());
    let mut no_bias = q2.clone();
    for l in &mut no_bias.weights.layers {
        l.q_bias = None;
        l.k_bias = None;
        l.v_bias = None;
    }
    assert!(rel(&logits(&q2, 3)[2], &logits(&no_bias, 3)[2]) > 1e-3);

    let cfg3 = shape(Arch::Qwen3, 2, Some(32));
    let q3 = model(&cfg3, GgmlType::F32, 5);
    assert_eq!((cfg3.q_dim(), cfg3.kv_dim()), (256, 128));
    assert_eq!(
        (q3.weights.layers[0].wq.rows, q3.weights.layers[0].wo.cols),
        (256, 256)
    );
    // Norm weights of 1 are not the identity (the heads are normalised), so compare against
    // other weights: the norm's weight reaches the logits.
    let mut flat = q3.clone();
    for l in &mut flat.weights.layers {
        let n = l.q_norm.as_ref().expect("q norm");
        l.q_norm = Some(
            baro_engine::model::Tensor::from_f32(n.name.clone(), 1, 32, &[1.0; 32]).expect("norm"),
        );
    }
    assert!(rel(&logits(&q3, 3)[2], &logits(&flat, 3)[2]) > 1e-3);
}

// ---- GGUF: round trips and refusals by name ------------------------------------------------

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
fn dir(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("baro-arch-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    Dir(d)
}

/// `m` as a GGUF file, its metadata and tensor list edited by `edit` first.
fn crafted(
    d: &Dir,
    m: &Model,
    edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>),
) -> PathBuf {
    let mut md = m.gguf_metadata("crafted").expect("metadata");
    let mut ts = gguf_tensors(m);
    edit(&mut md, &mut ts);
    let p = d.0.join("m.gguf");
    let refs: Vec<_> = ts
        .iter()
        .map(|(n, dims, ty, b)| (n.clone(), dims.clone(), *ty, &b[..]))
        .collect();
    write_file(&p, &md, &refs).expect("write");
    p
}

fn refused(p: &std::path::Path, want: &[&str]) {
    let e = match Model::open(p, None) {
        Ok(_) => panic!("loaded; expected a refusal naming {want:?}"),
        Err(e) => e.to_string(),
    };
    for w in want {
        assert!(e.contains(w), "{e:?} does not name {w:?}");
    }
}

fn set(md: &mut Vec<(String, Value)>, k: &str, v: Value) {
    md.retain(|(n, _)| n != k);
    md.push((k.to_string(), v));
}

#[test]
fn every_architecture_round_trips_through_gguf_with_its_metadata_names() {
    let d = dir("rt");
    let mut llama = model(&shape(Arch::Llama, 1, Some(32)), GgmlType::Q8_0, 6);
    llama.config.rope_scale = 2.0;
    synth::add_llama3_rope(&mut llama, &Llama3Rope::LLAMA_3_1).expect("rope");
    let q2 = model(&shape(Arch::Qwen2, 1, None), GgmlType::F16, 7);
    let q3 = model(&shape(Arch::Qwen3, 1, Some(32)), GgmlType::Q4_0, 8);
    for m in [llama, q2, q3] {
        let a = m.config.arch.name();
        let p = crafted(&d, &m, |md, _| {
            let keys: Vec<&str> = md.iter().map(|(k, _)| k.as_str()).collect();
            assert!(keys.contains(&"general.architecture"));
            assert!(keys.iter().any(|k| *k == format!("{a}.embedding_length")));
            if m.config.head_dim.is_some() {
                assert!(keys
                    .iter()
                    .any(|k| *k == format!("{a}.attention.key_length")));
            }
        });
        let back = Model::open(&p, None).expect("load");
        assert_eq!(back.config, m.config, "{a}");
        assert_eq!(logits(&back, 3), logits(&m, 3), "{a}");
    }
}

#[test]
fn an_unknown_architecture_is_refused_by_name() {
    let d = dir("arch");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 9);
    let p = crafted(&d, &m, |md, _| {
        set(md, "general.architecture", Value::String("gemma2".into()));
    });
    refused(&p, &["general.architecture", "gemma2"]);
}

#[test]
fn rope_freqs_with_an_unknown_or_unimplemented_scaling_type_is_refused_by_name() {
    let d = dir("scaling");
    let mut m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 10);
    synth::add_llama3_rope(&mut m, &Llama3Rope::LLAMA_3_2).expect("rope");
    for (t, want) in [
        ("llama4", "unknown RoPE scaling type"),
        ("yarn", "yarn"),
        ("longrope", "longrope"),
    ] {
        let p = crafted(&d, &m, |md, _| {
            set(md, "llama.rope.scaling.type", Value::String(t.into()));
        });
        refused(&p, &["llama.rope.scaling.type", t, want]);
    }
    // With none or linear it loads (both defined with rope_freqs, as ggml applies them).
    for t in ["none", "linear"] {
        let p = crafted(&d, &m, |md, _| {
            set(md, "llama.rope.scaling.type", Value::String(t.into()));
        });
        let back = Model::open(&p, None).expect(t);
        assert!(back.weights.rope_freqs.is_some());
    }
}

#[test]
fn a_tensor_the_decoder_does_not_use_is_refused_by_name() {
    let d = dir("unused");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 11);
    // A bias in a llama block (llama has none here), and a qwen-only or unknown tensor.
    for (name, len) in [
        ("blk.0.attn_q.bias", 128u64),
        ("blk.0.attn_q_norm.weight", 16),
        ("blk.0.ffn_gate_inp.weight", 128),
    ] {
        let p = crafted(&d, &m, |_, ts| {
            ts.push((
                name.into(),
                vec![len],
                GgmlType::F32,
                vec![0; len as usize * 4],
            ));
        });
        refused(&p, &[name, "not part of the llama decoder"]);
    }
    // rope_freqs in a qwen2 file: llama.cpp reads none there.
    let q2 = model(&shape(Arch::Qwen2, 1, None), GgmlType::F32, 12);
    let p = crafted(&d, &q2, |_, ts| {
        ts.push((
            "rope_freqs.weight".into(),
            vec![8],
            GgmlType::F32,
            vec![0; 32],
        ));
    });
    refused(&p, &["rope_freqs.weight", "qwen2"]);
    // A qwen3 file without its k norm.
    let q3 = model(&shape(Arch::Qwen3, 1, None), GgmlType::F32, 13);
    let p = crafted(&d, &q3, |_, ts| {
        ts.retain(|t| t.0 != "blk.0.attn_k_norm.weight")
    });
    refused(&p, &["blk.0.attn_k_norm.weight"]);
}

#[test]
fn metadata_that_changes_the_math_is_refused_by_name() {
    let d = dir("keys");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 14);
    let cases: [(&str, Value, &str); 8] = [
        ("llama.expert_count", Value::U32(8), "mixture-of-experts"),
        (
            "llama.attention.sliding_window",
            Value::U32(4096),
            "sliding-window",
        ),
        (
            "llama.attn_logit_softcapping",
            Value::F32(50.0),
            "not implemented",
        ),
        ("llama.attention.scale", Value::F32(0.1), "not implemented"),
        ("llama.rope.dimension_count", Value::U32(8), "partial RoPE"),
        (
            "llama.attention.value_length",
            Value::U32(32),
            "different sizes",
        ),
        (
            "llama.rope.scaling.attn_factor",
            Value::F32(0.5),
            "attention factor",
        ),
        ("llama.attention.causal", Value::Bool(false), "causal"),
    ];
    for (k, v, want) in cases {
        let p = crafted(&d, &m, |md, _| set(md, k, v));
        refused(&p, &[k, want]);
    }
    // Harmless keys load: MoE keys at 0, a zero window, the original context.
    let p = crafted(&d, &m, |md, _| {
        set(md, "llama.expert_count", Value::U32(0));
        set(md, "llama.attention.sliding_window", Value::U32(0));
        set(
            md,
            "llama.rope.scaling.original_context_length",
            Value::U32(8192),
        );
    });
    Model::open(&p, None).expect("harmless keys");
}

#[test]
fn a_shard_of_a_split_gguf_is_refused_naming_the_split_even_when_its_tensors_would_load() {
    let d = dir("split");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 15);
    // The first of two shards whose second holds only output.weight: every other tensor is
    // here, so without the check it loads with the classifier tied to the embedding.
    let p = crafted(&d, &m, |md, ts| {
        set(md, "split.count", Value::U16(2));
        set(md, "split.no", Value::U16(0));
        set(md, "split.tensors.count", Value::I32(ts.len() as i32));
        ts.retain(|t| t.0 != "output.weight");
    });
    refused(
        &p,
        &["split.count", "shard 1 of 2", "llama-gguf-split --merge"],
    );
    // A later shard (split.no past the first), whatever split.count says.
    let p = crafted(&d, &m, |md, _| set(md, "split.no", Value::U16(1)));
    refused(&p, &["shard 2 of ?"]);
    // A "split" of one file is the whole model, as llama.cpp reads it.
    let p = crafted(&d, &m, |md, _| {
        set(md, "split.count", Value::U16(1));
        set(md, "split.no", Value::U16(0));
    });
    Model::open(&p, None).expect("a one-shard split is a whole model");
    // A split key of another type is an error naming it, not a skipped check.
    let p = crafted(&d, &m, |md, _| {
        set(md, "split.count", Value::String("2".into()))
    });
    refused(&p, &["split.count"]);
}

#[test]
fn metadata_values_outside_the_math_are_refused_naming_the_key_and_the_value() {
    let d = dir("values");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 16);
    let eps = "llama.attention.layer_norm_rms_epsilon";
    let base = "llama.rope.freq_base";
    let cases: [(&str, Value, &str); 9] = [
        (eps, Value::F32(f32::NAN), "= NaN"),
        (eps, Value::F32(-1e-5), "= -0.00001"),
        (eps, Value::F32(f32::INFINITY), "= inf"),
        // An f64 beyond f32's range is shown as the file has it, not as the inf it becomes.
        (eps, Value::F64(1e300), "= 1e300"),
        (base, Value::F32(0.0), "= 0"),
        (base, Value::F64(1e300), "= 1e300"),
        ("llama.context_length", Value::U32(0), "is 0"),
        ("llama.attention.head_count", Value::U32(0), "is 0"),
        (
            "llama.attention.head_count_kv",
            Value::U32(3),
            "does not divide",
        ),
    ];
    for (k, v, want) in cases {
        let p = crafted(&d, &m, |md, _| set(md, k, v));
        refused(&p, &[k, want]);
    }
    // An epsilon of 0 is in ggml's domain (eps >= 0): it loads.
    let p = crafted(&d, &m, |md, _| set(md, eps, Value::F32(0.0)));
    let got = Model::open(&p, None).expect("epsilon 0 loads");
    assert_eq!(got.config.norm_eps, 0.0);
}

#[test]
fn a_head_size_apart_from_dim_over_heads_comes_from_key_length() {
    let d = dir("headdim");
    let m = model(&shape(Arch::Llama, 1, None), GgmlType::F32, 15);
    // Same file, metadata claiming head size 32: the projections' shapes disagree.
    let p = crafted(&d, &m, |md, _| {
        set(md, "llama.attention.key_length", Value::U32(32));
        set(md, "llama.attention.value_length", Value::U32(32));
        set(md, "llama.rope.dimension_count", Value::U32(32));
    });
    refused(&p, &["blk.0.attn_q.weight", "256x128"]);
}

// ---- the GPU: mega ≡ multi bitwise, within the gate's bound of the reference ---------------

fn gate(m: &Model, steps: usize, rows: Option<u32>, what: &str) {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let mut g = GateConfig::new(
        steps,
        vec![Dispatch::Mega, Dispatch::Multi],
        vec![m.tokenizer.bos_id(), 5, 77],
    );
    g.decoder = DecoderOptions {
        rows,
        ..Default::default()
    };
    let r = run_gate(&ctx.clone().into(), m, &g, |_, _| {}).expect("gate ran");
    common::assert_gate_clean(&r, steps, g.max_rel_l2, what);
}

#[test]
fn llama3_rope_and_a_separate_head_size_pass_the_gate_on_vulkan() {
    let mut m = model(&shape(Arch::Llama, 1, Some(32)), GgmlType::Q4_0, 16);
    m.config.rope_scale = 2.0;
    let p = Llama3Rope {
        original_context: 64.0,
        ..Llama3Rope::LLAMA_3_2
    };
    synth::add_llama3_rope(&mut m, &p).expect("rope");
    gate(&m, 3, None, "llama3 rope, head size 32");
}

#[test]
fn qwen2_passes_the_gate_on_vulkan_one_and_four_rows_at_a_time() {
    let m = model(&shape(Arch::Qwen2, 1, None), GgmlType::Q4_0, 17);
    gate(&m, 3, None, "qwen2 rows 1");
    gate(&m, 3, Some(4), "qwen2 rows 4");
}

#[test]
fn qwen3_passes_the_gate_on_vulkan_with_f32_and_q8_activations() {
    let m = model(&shape(Arch::Qwen3, 1, Some(32)), GgmlType::Q8_0, 18);
    gate(&m, 3, None, "qwen3 head size 32");
    // q8 activations: the attention output (n_heads · head_size = 256 > dim) quantised into
    // the int8 vector, against the q8 reference (the gate's q8 bounds).
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let mut g = GateConfig::new(
        3,
        vec![Dispatch::Mega, Dispatch::Multi],
        vec![m.tokenizer.bos_id(), 5, 77],
    );
    g.decoder.act = baro_engine::act::ActType::Q8;
    let r = run_gate(&ctx.clone().into(), &m, &g, |_, _| {}).expect("gate ran");
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(r.ok() && r.passes.len() == 3, "qwen3 q8: {fails:?}");
    assert!(
        r.passes.iter().all(|p| p.bitwise_equal == Some(true)),
        "qwen3 q8: mega and multi differ"
    );
}

#[test]
fn a_narrow_model_whose_vector_holds_fewer_slots_than_its_attention_runs_on_the_f32_path() {
    // dim 64 and one head of 64: x and the FFN input (64 floats, 19 slots of sx) are smaller
    // than one head group's queries and the team maxima (24 slots at 64 lanes on lavapipe).
    // The f32 path sizes sx for the attention then, as the q8 path always did; it was refused.
    let c = Config {
        dim: 64,
        hidden_dim: 64,
        n_heads: 1,
        n_kv_heads: 1,
        vocab_size: 300,
        ..shape(Arch::Llama, 1, None)
    };
    let m = model(&c, GgmlType::Q4_0, 19);
    gate(&m, 4, None, "dim 64, one head of 64, f32 activations");
}
