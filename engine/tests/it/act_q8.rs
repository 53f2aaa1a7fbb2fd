//! The q8 activation path (`DecoderOptions::act = ActType::Q8`): every quantised matvec
//! quantises its input per 32-block to int8 (power-of-two scale) and sums blocks as exact
//! integer dot products (the other types per type in quant_types.rs). It must track the CPU reference that quantises the same way, keep
//! mega and multi bit-identical (the FFN input whole in shared memory and in chunks), change
//! the logits against the f32 path by about the quantisation's noise and no more, and be
//! refused where it cannot run. Runs on lavapipe in CI (a missing device fails).

use baro_engine::act::ActType;
use baro_engine::gate::{rel_l2, run_gate, GateConfig};
use baro_engine::kv::KvType;
use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::reference::CpuDecoder;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{DecoderOptions, DeviceKind, Dispatch, VulkanDecoder};

use crate::common::device;

/// Positions decoded: past 64 (the attention's second chunk count).
const N: usize = 72;

fn model(ty: GgmlType, layers: usize) -> Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = layers;
    synth::generate(&cfg, tied, ty, 5, |_, _| {}).expect("model")
}

/// A forced token sequence (no argmax feedback).
fn prompt(model: &Model, n: usize) -> Vec<u32> {
    let vocab = model.config.vocab_size;
    let mut t: Vec<u32> = (0..n).map(|p| ((p * 37 + 11) % vocab) as u32).collect();
    t[0] = model.tokenizer.bos_id();
    t
}

fn gate_q8(model: &Model, n: usize) -> GateConfig {
    let mut gate = GateConfig::new(n, vec![Dispatch::Mega, Dispatch::Multi], prompt(model, n));
    gate.decoder.act = ActType::Q8;
    gate
}

#[test]
fn q8_activations_pass_the_gate_against_the_q8_reference_with_mega_equal_to_multi() {
    let Some((ctx, _turn)) = device() else { return };
    assert!(
        ctx.info.integer_dot,
        "the test device must have shaderIntegerDotProduct"
    );
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let model = model(ty, 2);
        let r = run_gate(&ctx.clone().into(), &model, &gate_q8(&model, N), |_, _| {})
            .expect("gate ran");
        let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
        assert!(r.ok() && r.passes.len() == N, "{ty}: {fails:?}");
        assert!(
            r.passes.iter().all(|p| p.bitwise_equal == Some(true)),
            "{ty}: mega and multi differ"
        );
        // Before any quant has flipped the run tracks its reference to f32 rounding: the
        // quantised values and every integer sum are exact on both sides.
        let first = r.passes[0].modes[0].rel_l2;
        assert!(first < 1e-4, "{ty}: first pass rel-L2 {first:.3e}");
        eprintln!(
            "{ty} q8: worst rel-L2 against the q8 reference {:.3e}",
            r.max_rel_l2().unwrap_or(f64::NAN)
        );
    }
}

#[test]
fn q8_activations_move_the_logits_off_the_f32_path_by_the_quantisation_noise_only() {
    assert_eq!(
        DecoderOptions::default().act,
        ActType::F32,
        "f32 is the default"
    );
    let Some((ctx, _turn)) = device() else { return };
    let model = model(GgmlType::Q4_0, 2);
    let toks = prompt(&model, 8);
    let run = |act: ActType| -> Vec<Vec<f32>> {
        let opts = DecoderOptions {
            dispatch: Dispatch::Mega,
            max_seq: toks.len(),
            act,
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
        // The run's details (a recording's Start) say which activations it ran with.
        assert_eq!(dec.run_details("tiny").act, act);
        toks.iter()
            .enumerate()
            .map(|(pos, &t)| {
                assert!(dec.step(t, pos).expect("pass").fail.ok(), "{act} pos {pos}");
                dec.logits().to_vec()
            })
            .collect()
    };
    let (f32s, q8s) = (run(ActType::F32), run(ActType::Q8));
    let mut cpu = CpuDecoder::with_types(
        &model.config,
        &model.weights,
        toks.len(),
        KvType::F32,
        ActType::Q8,
    );
    for (pos, (a, b)) in f32s.iter().zip(&q8s).enumerate() {
        let d = rel_l2(b, a);
        assert!(
            (1e-3..0.1).contains(&d),
            "pos {pos}: q8 vs f32 rel-L2 {d:.3e} (the q8 path must change the logits by its noise)"
        );
        let want = cpu.forward(toks[pos], pos).to_vec();
        assert!(
            rel_l2(b, &want) < d,
            "pos {pos}: the q8 run is nearer the f32 path than the q8 reference"
        );
    }
}

#[test]
fn q8_with_an_ffn_wider_than_shared_memory_goes_through_chunks_and_stays_bit_identical() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 1;
    // Wider than the int8 vector's room (48 bytes per 32 elements beside the dim-wide f32
    // vector: lavapipe ≈ 20.7k elements, the H200 ≈ 30k for dim 128).
    cfg.hidden_dim = if ctx.info.kind == DeviceKind::Cpu {
        24576
    } else {
        32768
    };
    let model = synth::generate(&cfg, tied, GgmlType::Q4_0, 5, |_, _| {}).expect("model");
    let mut gate = gate_q8(&model, 3);
    if ctx.info.kind == DeviceKind::Cpu {
        // As the f32 chunk test: fewer rows per team keep lavapipe's loop budget.
        gate.decoder.wg_size = Some(256);
    }
    let r = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {}).expect("gate ran");
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(r.ok(), "{fails:?}");
    assert!(r.passes.iter().all(|p| p.bitwise_equal == Some(true)));
    assert!(r.passes[0].modes[0].rel_l2 < 1e-4, "{:?}", r.passes[0]);
}

#[test]
fn q8_is_refused_for_a_model_with_an_unquantised_matrix_naming_it() {
    let Some((ctx, _turn)) = device() else { return };
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let model = model(ty, 1);
        let opts = DecoderOptions {
            act: ActType::Q8,
            max_seq: 4,
            ..Default::default()
        };
        let e = VulkanDecoder::new(ctx.clone(), &model, opts)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("no int8 dot product")
                && e.contains("blk.0.attn_q.weight")
                && e.contains(ty.ggml_name()),
            "{ty}: {e}"
        );
    }
}
