//! Attention split over position chunks: past 64 positions a head's attention runs as up to
//! four (head, chunk) units on different workgroups, combined in the next level's prologue.
//! The result must track the CPU reference, stay bit-identical between mega and multi, and
//! not depend on the grid (which workgroup runs which chunk). Runs on lavapipe
//! in CI (a missing device fails).

mod common;

use baro_engine::gate::{run_gate, GateConfig};
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::program::{att_chunks, ATT_CHUNKS, ATT_CHUNK_MIN};
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};

use common::{assert_gate_clean, device};

/// Positions decoded: every chunk count from 1 to ATT_CHUNKS, and uneven chunk lengths.
const N: usize = 300;

fn model() -> baro_engine::model::Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    synth::generate(&cfg, tied, GgmlType::Q8_0, 5, |_, _| {}).expect("model")
}

/// A forced token sequence (no argmax feedback: the comparison never stops at a near-tie).
fn tokens(vocab: usize) -> Vec<u32> {
    (0..N).map(|p| ((p * 37 + 11) % vocab) as u32).collect()
}

#[test]
fn the_chunk_count_grows_with_the_context_to_its_cap() {
    assert_eq!(att_chunks(1), 1);
    assert_eq!(att_chunks(ATT_CHUNK_MIN), 1);
    assert_eq!(att_chunks(ATT_CHUNK_MIN + 1), 2);
    assert_eq!(att_chunks(N as u32), ATT_CHUNKS);
    assert_eq!(att_chunks(16384), ATT_CHUNKS);
    assert!(
        att_chunks(N as u32) > 1 && N as u32 > ATT_CHUNKS * ATT_CHUNK_MIN,
        "the tests below must reach the cap"
    );
}

#[test]
fn chunked_attention_tracks_the_reference_and_mega_equals_multi_past_256_positions() {
    let Some((ctx, _turn)) = device() else { return };
    let model = model();
    let mut prompt = tokens(model.config.vocab_size);
    prompt[0] = model.tokenizer.bos_id();
    let gate = GateConfig::new(N, vec![Dispatch::Mega, Dispatch::Multi], prompt);
    let r = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {}).expect("gate ran");
    assert_gate_clean(&r, N, 1e-4, "f32 KV");
}

#[test]
fn chunked_attention_gives_the_same_bits_on_one_workgroup_and_on_two() {
    let Some((ctx, _turn)) = device() else { return };
    let model = model();
    let toks = tokens(model.config.vocab_size);
    let run = |grid: u32| -> Vec<Vec<u32>> {
        let opts = DecoderOptions {
            dispatch: Dispatch::Mega,
            grid: Some(grid),
            max_seq: N,
            read_logits: true,
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
        toks.iter()
            .enumerate()
            .map(|(pos, &t)| {
                let p = dec.step(t, pos).expect("pass");
                assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
                dec.logits().iter().map(|f| f.to_bits()).collect()
            })
            .collect()
    };
    let (one, two) = (run(1), run(2));
    for (pos, (a, b)) in one.iter().zip(&two).enumerate() {
        assert!(
            a == b,
            "position {pos} ({} chunks): logits differ between grid 1 and grid 2",
            att_chunks(pos as u32 + 1)
        );
    }
}
