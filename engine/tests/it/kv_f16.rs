//! The f16 KV cache (`DecoderOptions::kv = KvType::F16`): keys and values rounded to f16 on
//! store, all arithmetic f32. Past 256 positions (every attention chunk count) it must track
//! the CPU reference that rounds its cache the same way, keep mega and multi bit-identical,
//! and actually change the logits against the f32 cache while staying close to them. Runs on
//! lavapipe in CI (a missing device fails).

use baro_engine::gate::{rel_l2, run_gate, GateConfig};
use baro_engine::kv::KvType;
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};

use crate::common::{assert_gate_clean, device};

/// Positions decoded: past 4 x 64, so the attention runs every chunk count.
const N: usize = 300;

fn model() -> baro_engine::model::Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    synth::generate(&cfg, tied, GgmlType::Q8_0, 5, |_, _| {}).expect("model")
}

/// A forced token sequence (no argmax feedback: the comparison never stops at a near-tie).
fn prompt(model: &baro_engine::model::Model) -> Vec<u32> {
    let vocab = model.config.vocab_size;
    let mut t: Vec<u32> = (0..N).map(|p| ((p * 37 + 11) % vocab) as u32).collect();
    t[0] = model.tokenizer.bos_id();
    t
}

/// Decodes N positions with the f16 cache (at `wg_size` lanes, or the device's default) in
/// mega and multi next to the CPU reference that rounds its cache the same way; asserts
/// every pass clean, the tokens exact, mega ≡ multi bitwise and rel-L2 < 1e-4.
fn f16_kv_gate(wg_size: Option<u32>, what: &str) {
    let Some((ctx, _turn)) = device() else { return };
    assert!(
        ctx.info.storage_16bit,
        "the test device must have storageBuffer16BitAccess"
    );
    let model = model();
    let mut gate = GateConfig::new(N, vec![Dispatch::Mega, Dispatch::Multi], prompt(&model));
    // rel-L2 < 1e-4 (assert_gate_clean). The f16 run sits above the f32 run's ~2e-6 (here: median
    // ~2e-5, worst ~8e-5 on lavapipe): the GPU's keys and values differ from the reference's
    // by f32 ulps (another summation order), and now and then such an ulp carries a value
    // across an f16 rounding boundary, which costs a whole f16 ulp (2^13 f32 ulps).
    gate.decoder.kv = KvType::F16;
    gate.decoder.wg_size = wg_size;
    let r = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {}).expect("gate ran");
    assert_gate_clean(&r, N, 1e-4, what);
    eprintln!(
        "{what} vs the f16-rounded reference: worst rel-L2 {:.3e}",
        r.max_rel_l2().unwrap_or(f64::NAN)
    );
}

/// Lavapipe's default 64 lanes run the f16 attention loops' widen-as-it-lands form (each
/// quad widened as it is loaded).
#[test]
fn f16_kv_tracks_the_f16_rounded_reference_and_mega_equals_multi_past_256_positions() {
    f16_kv_gate(None, "f16 KV");
}

/// At 128 lanes a CPU device runs the f16 attention loops' raw-first form (decode.comp's
/// F16_RAW_FIRST: every raw quad loaded, then widened; a GPU runs it from 1,024 lanes). Both
/// forms must give the f16-rounded reference's values, and mega and multi the same bits.
#[test]
fn f16_kv_raw_first_loops_at_128_lanes_track_the_f16_rounded_reference_and_mega_equals_multi() {
    f16_kv_gate(Some(128), "f16 KV at 128 lanes");
}

#[test]
fn f16_kv_changes_the_logits_of_the_f32_kv_run_but_stays_close_to_them() {
    assert_eq!(
        DecoderOptions::default().kv,
        KvType::F32,
        "f32 is the default"
    );
    let Some((ctx, _turn)) = device() else { return };
    let model = model();
    let toks = prompt(&model);
    let run = |kv: KvType| -> Vec<Vec<f32>> {
        let opts = DecoderOptions {
            dispatch: Dispatch::Mega,
            max_seq: N,
            read_logits: true,
            kv,
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
        // The run's details (a recording's Start) say which cache it ran with.
        assert_eq!(dec.run_details("tiny").kv, kv);
        toks.iter()
            .enumerate()
            .map(|(pos, &t)| {
                let p = dec.step(t, pos).expect("pass");
                assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
                dec.logits().to_vec()
            })
            .collect()
    };
    let (full, half) = (run(KvType::F32), run(KvType::F16));
    let mut differing = 0;
    let mut worst = 0f64;
    for (a, b) in full.iter().zip(&half) {
        if a.iter().zip(b).any(|(x, y)| x.to_bits() != y.to_bits()) {
            differing += 1;
        }
        worst = worst.max(rel_l2(b, a));
    }
    assert!(
        differing > N / 2,
        "the f16 KV run gave the f32 run's bits at {} of {N} positions: the option is ignored",
        N - differing
    );
    assert!(
        worst < 1e-2,
        "f16 KV moved the logits by rel-L2 {worst} against the f32 KV run"
    );
    eprintln!("f16 KV vs f32 KV: {differing}/{N} positions differ, worst rel-L2 {worst:.3e}");
    // Far enough apart that the 1e-4 bound of the gate test above tells an f16-rounded
    // reference from an f32 one.
    assert!(
        worst > 1e-4,
        "f16 KV moved the logits by only rel-L2 {worst}: too little to tell the references apart"
    );
}
