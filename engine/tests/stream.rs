//! Weights touched ahead (`DecoderOptions::stream_ahead`, issue 23, bench/README.md rounds
//! 31-32): each team touches its next level's first weight rows between its grid-barrier
//! arrival and the wait (before the prologue in a one-stage dispatch and at level 0), and the
//! head its rows two units ahead — loads whose values no arithmetic reads. The logits must be
//! the plain schedule's bit for bit in both dispatch styles and both activation paths. Runs on
//! lavapipe in CI (a missing device fails).

mod common;

use std::sync::Arc;

use baro_engine::act::ActType;
use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{DecoderOptions, Dispatch, GpuContext, VulkanDecoder};

use common::device;

fn model(layers: usize) -> Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = layers;
    synth::generate(&cfg, tied, GgmlType::Q4_0, 11, |_, _| {}).expect("model")
}

/// Logit bits of `steps` passes over a forced token sequence (no argmax feedback: each pass's
/// input is fixed, whatever the previous one computed).
fn logit_bits(
    ctx: &Arc<GpuContext>,
    model: &Model,
    opts: DecoderOptions,
    steps: usize,
) -> Vec<u32> {
    let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
    let vocab = model.config.vocab_size;
    let mut out = Vec::new();
    for pos in 0..steps {
        let token = if pos == 0 {
            model.tokenizer.bos_id()
        } else {
            ((pos * 37 + 11) % vocab) as u32
        };
        let p = dec.step(token, pos).expect("pass");
        assert!(p.fail.ok(), "pass {pos}: fail word {:#x}", p.fail.bits);
        out.extend(dec.logits().iter().map(|v| v.to_bits()));
    }
    out
}

fn opts(dispatch: Dispatch, act: ActType, stream: bool) -> DecoderOptions {
    DecoderOptions {
        dispatch,
        act,
        stream_ahead: stream,
        max_seq: 8,
        ..Default::default()
    }
}

#[test]
fn weights_touched_ahead_give_the_plain_schedules_logits_bit_for_bit_in_mega_multi_f32_and_q8() {
    let Some((ctx, _turn)) = device() else { return };
    let model = model(2);
    // Multi against mega runs in every other test (both with the touches); here each
    // activation path against its own plain schedule.
    for (act, modes) in [
        (ActType::F32, &[Dispatch::Mega, Dispatch::Multi][..]),
        (ActType::Q8, &[Dispatch::Mega][..]),
    ] {
        let plain = logit_bits(&ctx, &model, opts(Dispatch::Mega, act, false), 4);
        for &dispatch in modes {
            let ahead = logit_bits(&ctx, &model, opts(dispatch, act, true), 4);
            assert!(
                ahead == plain,
                "{act:?} {}: logits with weights touched ahead differ from mega's plain schedule",
                dispatch.name()
            );
        }
    }
}
