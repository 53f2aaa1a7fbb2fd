//! Every tensor type baro-top reads, against gguf-py and ggml: `tests/data/quant/goldens.bin`
//! (written by `scripts/quant_goldens.py` with `gguf.quants`) holds random-but-valid blocks of
//! each type with gguf-py's dequantisation, and f32 inputs with gguf-py's quantisation for the
//! types gguf-py quantises; `tests/data/quant/kquant_goldens.bin` (written by
//! `scripts/fixtures/kquant_goldens.c` with ggml's own `ggml_quantize_chunk`, what
//! llama-quantize runs) f32 rows with ggml's Q4_K, Q5_K, Q6_K, IQ4_XS and IQ4_NL encodings,
//! the search algorithms' corner cases included, and random IQ4_NL blocks with ggml's
//! dequantisation of them. baro-top must reproduce every bit.

use baro_engine::quant::{self, GgmlType, QK_K};

const GOLDENS: &[u8] = include_bytes!("../data/quant/goldens.bin");
const KQUANT_GOLDENS: &[u8] = include_bytes!("../data/quant/kquant_goldens.bin");

/// One golden record.
struct Record {
    /// 0: `bytes` dequantise to `floats`; 1: `floats` quantise to `bytes`.
    kind: u32,
    ty: u32,
    bytes: Vec<u8>,
    floats: Vec<f32>,
}

fn u32_at(b: &[u8], at: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*at..*at + 4].try_into().expect("4 bytes"));
    *at += 4;
    v
}

fn records() -> Vec<Record> {
    let mut out = parse(GOLDENS);
    out.extend(parse(KQUANT_GOLDENS));
    out
}

fn parse(goldens: &[u8]) -> Vec<Record> {
    assert_eq!(&goldens[..4], b"BTQG", "golden magic");
    let mut at = 4;
    assert_eq!(u32_at(goldens, &mut at), 1, "golden version");
    let n = u32_at(goldens, &mut at);
    let mut out = vec![];
    for _ in 0..n {
        let kind = u32_at(goldens, &mut at);
        let ty = u32_at(goldens, &mut at);
        let elems = u32_at(goldens, &mut at) as usize;
        let nbytes = u32_at(goldens, &mut at) as usize;
        let bytes = goldens[at..at + nbytes].to_vec();
        at += nbytes;
        let floats = goldens[at..at + 4 * elems]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        at += 4 * elems;
        out.push(Record {
            kind,
            ty,
            bytes,
            floats,
        });
    }
    assert_eq!(at, goldens.len(), "trailing bytes in the goldens");
    out
}

fn record(kind: u32, ty: GgmlType) -> Record {
    records()
        .into_iter()
        .find(|r| r.kind == kind && r.ty == ty.id())
        .unwrap_or_else(|| panic!("no golden of kind {kind} for {}", ty.ggml_name()))
}

/// baro-top's dequantisation of the golden blocks equals gguf-py's in every element's bits.
fn dequantises_bit_exactly(ty: GgmlType) {
    dequantises_as(ty, record(0, ty));
}

/// baro-top's dequantisation of `r`'s blocks equals the golden's floats in every bit.
fn dequantises_as(ty: GgmlType, r: Record) {
    let mut got = vec![0.0f32; r.floats.len()];
    quant::dequantize(ty, &r.bytes, &mut got).expect("whole blocks");
    let bl = ty.block_len();
    let mut bad = 0usize;
    for (i, (g, w)) in got.iter().zip(&r.floats).enumerate() {
        if g.to_bits() != w.to_bits() {
            if bad < 5 {
                eprintln!(
                    "{} block {} element {}: {g:e} ({:#010x}) vs gguf-py {w:e} ({:#010x})",
                    ty.ggml_name(),
                    i / bl,
                    i % bl,
                    g.to_bits(),
                    w.to_bits()
                );
            }
            bad += 1;
        }
    }
    assert_eq!(
        bad,
        0,
        "{}: {bad} of {} elements differ from gguf-py",
        ty.ggml_name(),
        got.len()
    );
    // The goldens hold more than one value per element position: the test could fail.
    assert!(r.floats.iter().any(|v| *v != 0.0));
}

/// baro-top's quantisation of the golden inputs equals the golden's (gguf-py's, or for the
/// K types ggml's) byte for byte, block by block; where baro-top refuses a block (a scale or
/// value past the 16-bit float's range, which llama-quantize refuses too), the golden's
/// encoding of it must indeed not decode to finite values.
fn quantises_bit_exactly(ty: GgmlType) {
    let r = record(1, ty);
    let (bl, bb) = (ty.block_len(), ty.block_bytes());
    assert_eq!(
        r.floats.len() / bl * bb,
        r.bytes.len(),
        "{}: encoded size",
        ty.ggml_name()
    );
    let (mut refused, mut blocks) = (0usize, 0usize);
    for (b, (x, want)) in r.floats.chunks(bl).zip(r.bytes.chunks(bb)).enumerate() {
        blocks += 1;
        let mut got = vec![];
        match quant::quantize(ty, x, &mut got) {
            Ok(()) => assert_eq!(
                got,
                want,
                "{}: block {b} differs from the golden",
                ty.ggml_name()
            ),
            Err(e) => {
                let mut back = vec![0.0f32; bl];
                quant::dequantize(ty, want, &mut back).expect("one block");
                assert!(
                    back.iter().chain(x).any(|v| !v.is_finite()),
                    "{}: block {b} refused ({e}) though its golden encoding is finite",
                    ty.ggml_name()
                );
                refused += 1;
            }
        }
    }
    assert!(
        refused * 8 < blocks,
        "{}: {refused} of {blocks} blocks refused: the goldens test little",
        ty.ggml_name()
    );
}

#[test]
fn q4_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_0);
}
#[test]
fn q4_1_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_1);
}
#[test]
fn q5_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_0);
}
#[test]
fn q5_1_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_1);
}
#[test]
fn q8_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q8_0);
}
#[test]
fn q4_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_K);
}
#[test]
fn q5_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_K);
}
#[test]
fn q6_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q6_K);
}
#[test]
fn iq4_xs_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::IQ4_XS);
}
#[test]
fn iq4_nl_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::IQ4_NL);
}
#[test]
fn iq4_nl_dequantises_as_ggml() {
    let r = parse(KQUANT_GOLDENS)
        .into_iter()
        .find(|r| r.kind == 0 && r.ty == GgmlType::IQ4_NL.id())
        .expect("ggml's IQ4_NL dequantisation golden");
    dequantises_as(GgmlType::IQ4_NL, r);
}
#[test]
fn f16_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::F16);
}
#[test]
fn bf16_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::BF16);
}

#[test]
fn f16_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::F16);
}
#[test]
fn bf16_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::BF16);
}
#[test]
fn q4_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q4_0);
}
#[test]
fn q4_1_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q4_1);
}
#[test]
fn q5_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q5_0);
}
#[test]
fn q5_1_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q5_1);
}
#[test]
fn q8_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q8_0);
}
#[test]
fn q4_k_quantises_as_ggml() {
    quantises_bit_exactly(GgmlType::Q4_K);
}
#[test]
fn q5_k_quantises_as_ggml() {
    quantises_bit_exactly(GgmlType::Q5_K);
}
#[test]
fn q6_k_quantises_as_ggml() {
    quantises_bit_exactly(GgmlType::Q6_K);
}
#[test]
fn iq4_xs_quantises_as_ggml() {
    quantises_bit_exactly(GgmlType::IQ4_XS);
}
#[test]
fn iq4_nl_quantises_as_ggml() {
    quantises_bit_exactly(GgmlType::IQ4_NL);
}

#[test]
fn every_type_baro_top_reads_has_a_dequantisation_golden_and_a_quantisation_golden() {
    let rs = records();
    for ty in GgmlType::ALL {
        if ty == GgmlType::F32 {
            continue;
        }
        assert!(
            rs.iter().any(|r| r.kind == 0 && r.ty == ty.id()),
            "{}: no dequantisation golden",
            ty.ggml_name()
        );
        assert!(
            rs.iter().any(|r| r.kind == 1 && r.ty == ty.id()),
            "{}: no quantisation golden",
            ty.ggml_name()
        );
    }
}

// ---- the GPU paths (lavapipe in CI; a missing device fails) ----

use crate::common;

use baro_engine::act::ActType;
use baro_engine::blob::Blob;
use baro_engine::gate::{run_gate, GateConfig};
use baro_engine::model::{Model, Tensor};
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};
use half::f16;

/// xorshift64: deterministic bytes for random-but-valid blocks.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 24) as u8
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() >> 33) as u32 % (hi - lo + 1)
    }
}

fn put_f16(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// Pack eight 6-bit scales and mins as Q4_K/Q5_K store them (the inverse of
/// `quant::kquants::scale_min_k4`).
fn pack_scale_min(sc: [u8; 8], m: [u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            q[j] |= sc[j];
            q[j + 4] |= m[j];
        } else {
            q[j + 4] = (sc[j] & 15) | (m[j] & 15) << 4;
            q[j - 4] |= (sc[j] >> 4) << 6;
            q[j] |= (m[j] >> 4) << 6;
        }
    }
    q
}

/// One random-but-valid block of `ty` whose elements have roughly standard deviation `std`
/// around 0 (scales chosen for the quants' spread; mins centre the K-quants' sub-blocks).
fn random_block(ty: GgmlType, std: f32, rng: &mut Rng) -> Vec<u8> {
    let mut b: Vec<u8> = (0..ty.block_bytes()).map(|_| rng.byte()).collect();
    match ty {
        GgmlType::Q4_K | GgmlType::Q5_K => {
            // Value (d·sc)·n − (dmin·m) with m ≈ sc·(mid quant)·d/dmin: centred.
            let (spread, mid) = if ty == GgmlType::Q4_K {
                (4.6, 7.5)
            } else {
                (9.2, 15.5)
            };
            let s = std / (36.0 * spread);
            let (mut sc, mut m) = ([0u8; 8], [0u8; 8]);
            for j in 0..8 {
                sc[j] = rng.range(8, 63) as u8;
                m[j] = (sc[j] as f32 * mid / 16.0).round() as u8;
            }
            put_f16(&mut b, 0, s);
            put_f16(&mut b, 2, 16.0 * s);
            b[4..16].copy_from_slice(&pack_scale_min(sc, m));
        }
        GgmlType::Q6_K => {
            for j in 0..16 {
                let mag = rng.range(16, 63) as i32;
                let v = if rng.byte() & 1 == 0 { mag } else { -mag };
                b[192 + j] = v as i8 as u8;
            }
            put_f16(&mut b, 208, std / (18.5 * 40.0));
        }
        GgmlType::IQ4_XS => put_f16(&mut b, 0, std / (65.0 * 16.0)),
        _ => panic!("{ty}: build it with its quantiser"),
    }
    b
}

/// `t` with its values replaced by random blocks of `ty` of the same spread.
fn random_tensor(t: &Tensor, ty: GgmlType, seed: u64) -> Tensor {
    let v = t.to_f32();
    let std = (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
    let mut rng = Rng(seed | 1);
    let n = t.rows * t.cols / ty.block_len();
    let bytes: Vec<u8> = (0..n)
        .flat_map(|_| random_block(ty, std, &mut rng))
        .collect();
    Tensor::new(t.name.clone(), ty, t.rows, t.cols, Blob::owned(bytes)).expect("whole blocks")
}

/// A tiny model whose K-quant rows fit (dim 256, FFN 256), every matrix and the embedding
/// of the type `pick(layer, index)` gives (index: wq, wk, wv, wo, gate, down, up; the
/// embedding is layer usize::MAX index 0, the classifier index 1). The super-block types get
/// random valid blocks (every scale bit pattern, which a quantiser's output may never reach);
/// the others are quantised.
fn typed_model(layers: usize, pick: impl Fn(usize, usize) -> GgmlType) -> Model {
    typed_model_sized(layers, 256, 256, pick)
}

/// [`typed_model`] at width `dim` and FFN width `hidden` (multiples of 256).
fn typed_model_sized(
    layers: usize,
    dim: usize,
    hidden: usize,
    pick: impl Fn(usize, usize) -> GgmlType,
) -> Model {
    let (mut cfg, _) = Shape::Tiny.config();
    cfg.dim = dim;
    cfg.hidden_dim = hidden;
    cfg.n_layers = layers;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 2;
    cfg.seq_len = 64;
    let mut m = synth::generate(&cfg, false, GgmlType::F32, 11, |_, _| {}).expect("model");
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut conv = |t: &mut Tensor, ty: GgmlType| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *t = if ty.block_len() != QK_K {
            t.convert(ty).expect("quantises")
        } else {
            random_tensor(t, ty, seed)
        };
    };
    let w = &mut m.weights;
    conv(&mut w.token_embd, pick(usize::MAX, 0));
    if let Some(o) = w.output.as_mut() {
        conv(o, pick(usize::MAX, 1));
    }
    for (li, l) in w.layers.iter_mut().enumerate() {
        for (i, t) in [
            &mut l.wq,
            &mut l.wk,
            &mut l.wv,
            &mut l.wo,
            &mut l.w_gate,
            &mut l.w_down,
            &mut l.w_up,
        ]
        .into_iter()
        .enumerate()
        {
            conv(t, pick(li, i));
        }
    }
    m.source = "quant_types test model".into();
    m
}

fn prompt(model: &Model, n: usize) -> Vec<u32> {
    let vocab = model.config.vocab_size;
    let mut t: Vec<u32> = (0..n).map(|p| ((p * 37 + 11) % vocab) as u32).collect();
    t[0] = model.tokenizer.bos_id();
    t
}

/// Positions a GPU type test decodes (forced tokens: every logit of every pass compared).
const STEPS: usize = 4;

/// The gate for `model` with activations `act` over forced tokens, mega and multi.
fn gate(model: &Model, act: ActType) -> GateConfig {
    let mut g = GateConfig::new(
        STEPS,
        vec![Dispatch::Mega, Dispatch::Multi],
        prompt(model, STEPS),
    );
    g.decoder.act = act;
    g
}

/// The GPU's logits within the gate's bounds of the CPU reference at every position (the
/// f32 bounds, or for q8 the bounds of the q8 reference, which quantises the same way), mega
/// and multi bit-identical. On the q8 path the first pass tracks its reference to f32
/// rounding: every quantised value and integer sum is exact on both sides.
///
/// The device alone: these models' lavapipe pipelines (every type's branches) take minutes
/// to build and their megakernel passes need both of CI's cores for the grid, so beside
/// another test's pipeline build or passes a pass outran the fence watchdog or a transfer
/// its 60 s (CI 2026-12-04: `FAIL watchdog` on the mixed q8 model, a transfer timeout on q4_k).
fn gate_passes(model: &Model, act: ActType, what: &str) {
    let Some((ctx, _turn)) = common::device_alone() else {
        return;
    };
    let t0 = std::time::Instant::now();
    let r = run_gate(&ctx.clone().into(), model, &gate(model, act), |_, _| {}).expect("gate ran");
    match act {
        ActType::F32 => common::assert_gate_clean(&r, STEPS, 1e-3, what),
        ActType::Q8 => {
            common::assert_gate_clean(&r, STEPS, 5e-2, what);
            let first = r.passes[0].modes[0].rel_l2;
            assert!(first < 1e-4, "{what} q8: first pass rel-L2 {first:.3e}");
        }
    }
    let slowest = r
        .passes
        .iter()
        .flat_map(|p| p.modes.iter().filter_map(|m| m.gpu_ns))
        .max()
        .unwrap_or(0);
    eprintln!(
        "{what} {act}: worst rel-L2 {:.3e}, slowest pass {:.2} s, test {:.1} s",
        r.max_rel_l2().unwrap_or(f64::NAN),
        slowest as f64 * 1e-9,
        t0.elapsed().as_secs_f64()
    );
}

/// Every matrix and the embedding of `ty` on the path `act`.
fn gpu_matches_reference(ty: GgmlType, act: ActType) {
    gate_passes(&typed_model(1, |_, _| ty), act, ty.ggml_name());
}

/// One test per type and activation path, named for what it asserts.
macro_rules! gpu_type {
    ($ty:ident, $f32:ident, $q8:ident) => {
        #[test]
        fn $f32() {
            gpu_matches_reference(GgmlType::$ty, ActType::F32);
        }
        #[test]
        fn $q8() {
            gpu_matches_reference(GgmlType::$ty, ActType::Q8);
        }
    };
}

gpu_type!(
    Q4_K,
    q4_k_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q4_k_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    Q5_K,
    q5_k_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q5_k_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    Q6_K,
    q6_k_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q6_k_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    IQ4_XS,
    iq4_xs_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    iq4_xs_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    IQ4_NL,
    iq4_nl_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    iq4_nl_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    Q4_1,
    q4_1_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q4_1_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    Q5_0,
    q5_0_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q5_0_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);
gpu_type!(
    Q5_1,
    q5_1_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi,
    q5_1_with_q8_activations_decodes_as_the_q8_reference_with_mega_equal_to_multi
);

#[test]
fn bf16_decodes_on_the_gpu_as_the_reference_with_mega_equal_to_multi() {
    gpu_matches_reference(GgmlType::BF16, ActType::F32);
}

#[test]
fn bf16_matrices_are_refused_on_the_q8_path_naming_the_tensor_and_type() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let model = typed_model(1, |_, _| GgmlType::BF16);
    let opts = baro_engine::vulkan::DecoderOptions {
        act: ActType::Q8,
        max_seq: 4,
        ..Default::default()
    };
    let e = baro_engine::vulkan::VulkanDecoder::new(ctx.clone(), &model, opts)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("blk.0.attn_q.weight") && e.contains("BF16") && e.contains("int8"),
        "{e}"
    );
}

/// Every type in one model, a different one per matrix and layer (the shader reads each
/// tensor's type: no single-type specialisation).
const MIX: [GgmlType; 13] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::IQ4_XS,
    GgmlType::IQ4_NL,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::BF16,
    GgmlType::F16,
    GgmlType::F32,
];

#[test]
fn a_model_mixing_every_type_per_tensor_and_layer_decodes_as_the_reference() {
    // Layer l's matrix i is MIX[(7 l + i) % 13]; the embedding BF16, the classifier Q6_K.
    let model = typed_model(2, |l, i| match l {
        usize::MAX => [GgmlType::BF16, GgmlType::Q6_K][i],
        _ => MIX[(7 * l + i) % MIX.len()],
    });
    gate_passes(&model, ActType::F32, "mix");
}

#[test]
fn a_model_mixing_every_quantised_type_decodes_with_q8_activations_as_the_q8_reference() {
    // The ten quantised types over the seven matrices of two layers and the classifier; the
    // embedding (a lookup, no matvec) BF16.
    let model = typed_model(2, |l, i| match l {
        usize::MAX => [GgmlType::BF16, GgmlType::Q5_K][i],
        _ => MIX[(7 * l + i) % 10],
    });
    gate_passes(&model, ActType::Q8, "mix");
}

/// llama-quantize's IQ4_XS mix on a model whose FFN is 288 wide: the down projection's rows
/// are whole 32-blocks but not whole super-blocks, so it is IQ4_NL (its fallback) beside
/// IQ4_XS matrices (and the Q6_K classifier), as in a Qwen2-0.5B IQ4_XS file (rows of 896).
/// 512 wide, so that the IQ4 loops' lanes hold two units (16 a row over lavapipe's 8-lane
/// teams; the down projection's 9 blocks give lane 0 two): both units of a trip are live.
fn iq4_xs_mix_with_iq4_nl_fallback() -> Model {
    use baro_engine::model::{KMix, Quant};
    let (mut cfg, _) = Shape::Tiny.config();
    cfg.dim = 512;
    cfg.hidden_dim = 288;
    cfg.n_layers = 1;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 2;
    cfg.seq_len = 64;
    let mut m = synth::generate(&cfg, true, Quant::Mix(KMix::IQ4XS), 13, |_, _| {}).expect("model");
    let l = &m.weights.layers[0];
    assert_eq!((l.wq.ty, l.w_up.ty), (GgmlType::IQ4_XS, GgmlType::IQ4_XS));
    assert_eq!(l.w_down.ty, GgmlType::IQ4_NL);
    m.source = "quant_types IQ4_XS model with IQ4_NL fallback".into();
    m
}

#[test]
fn an_iq4_xs_model_with_iq4_nl_fallback_tensors_decodes_on_the_gpu_as_the_reference() {
    gate_passes(
        &iq4_xs_mix_with_iq4_nl_fallback(),
        ActType::F32,
        "IQ4_XS+NL",
    );
}

#[test]
fn an_iq4_xs_model_with_iq4_nl_fallback_tensors_decodes_with_q8_activations_as_the_q8_reference() {
    gate_passes(&iq4_xs_mix_with_iq4_nl_fallback(), ActType::Q8, "IQ4_XS+NL");
}

/// Logits bits of `steps` passes over forced tokens.
fn logit_bits(model: &Model, opts: DecoderOptions, steps: usize) -> Vec<Vec<u32>> {
    // Alone, as gate_passes (its note says why).
    let Some((ctx, _turn)) = common::device_alone() else {
        return vec![];
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
    prompt(model, steps)
        .into_iter()
        .enumerate()
        .map(|(pos, tok)| {
            let p = dec.step(tok, pos).expect("pass");
            assert!(p.fail.ok(), "pass {pos}: fail word {:#x}", p.fail.bits);
            dec.logits().iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

/// Mega rows 4 and multi rows 2 against mega rows 1, logits bit for bit, on the activation
/// paths `acts`.
fn rows_streamed_match_one_row(model: &Model, acts: &[ActType], what: &str) {
    for &act in acts {
        let run = |dispatch, rows| {
            let opts = DecoderOptions {
                dispatch,
                rows: Some(rows),
                act,
                max_seq: 4,
                ..Default::default()
            };
            logit_bits(model, opts, 3)
        };
        let want = run(Dispatch::Mega, 1);
        assert!(
            want.iter().flatten().any(|&b| b != 0),
            "{what} {act}: logits"
        );
        for (dispatch, rows) in [(Dispatch::Mega, 4), (Dispatch::Multi, 2)] {
            assert!(
                run(dispatch, rows) == want,
                "{what} {act} {} rows {rows}: logits differ from mega rows 1",
                dispatch.name()
            );
        }
    }
}

#[test]
fn q4_k_and_q6_k_rows_streamed_2_or_4_per_team_give_the_one_row_logits_bit_for_bit() {
    // A Q4_K_M-like mix: Q4_K matrices, Q6_K value and down projections and classifier (the
    // FFN's gate/up pair and the rope pairs stream as row pairs, single rows in fours).
    let model = typed_model(1, |l, i| match (l, i) {
        (usize::MAX, _) | (_, 2) | (_, 5) => GgmlType::Q6_K,
        _ => GgmlType::Q4_K,
    });
    rows_streamed_match_one_row(&model, &[ActType::F32, ActType::Q8], "Q4_K+Q6_K");
}

#[test]
fn iq4_rows_streamed_together_and_two_units_a_lane_give_the_same_logits_bit_for_bit() {
    // The q8 path streams IQ4 rows together below 1,024 lanes (act_q8.glsl's quant_rows;
    // lavapipe runs 64), one unit a row a trip; its one-row loops (iq4xs_q8_one,
    // iq4nl_q8_one) take a lane's units u and u + S in one trip. Rows wide enough that a lane
    // has several units (dim 512: 16 a row, the down projection 32, over lavapipe's 8-lane
    // teams), so both of a trip's units are live: mega rows 4 and multi rows 2 must give
    // --rows 1's logits bit for bit. An IQ4_XS mix with Q5_K values (as llama-quantize's for
    // GQA models) and a Q6_K classifier, and IQ4_NL throughout. (The f32 path takes them one
    // row at a time under --rows as without it: nothing new to compare there.)
    let xs = typed_model_sized(1, 512, 1024, |l, i| match (l, i) {
        (usize::MAX, 1) => GgmlType::Q6_K,
        (_, 2) => GgmlType::Q5_K,
        _ => GgmlType::IQ4_XS,
    });
    rows_streamed_match_one_row(&xs, &[ActType::Q8], "IQ4_XS+Q5_K");
    let nl = typed_model_sized(1, 512, 1024, |_, _| GgmlType::IQ4_NL);
    rows_streamed_match_one_row(&nl, &[ActType::Q8], "IQ4_NL");
}
