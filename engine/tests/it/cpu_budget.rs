//! A CPU device's loop budget (engine/src/vulkan/decoder/budget.rs): lavapipe ends an
//! invocation's loops after 65,535 back-edges a dispatch, so the decoder estimates a pass's
//! back-edges before it decodes, sizes its defaults to fit and refuses what cannot fit. These
//! tests hold the estimate to the kernel's own count (the kernel fails a pass by name past
//! its budget, which a test option sets) and the defaults to real vocabulary sizes. A GPU has
//! no such budget: there the decoder must report no estimate.

use crate::common::{device, device_alone};

use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{
    default_grid, fail, ActType, DecoderOptions, DeviceKind, Dispatch, VulkanDecoder,
};

/// Every pass of positions 0..max_seq under `budget` back-edges: the fail words' union.
fn decode_all(
    ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>,
    model: &Model,
    opts: &DecoderOptions,
    budget: u32,
) -> u32 {
    let opts = DecoderOptions {
        test_iter_budget: Some(budget),
        ..opts.clone()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
    let mut bits = 0;
    let mut tok = model.tokenizer.bos_id();
    for pos in 0..dec.opts.max_seq {
        let p = dec.step(tok, pos).expect("pass ran");
        bits |= p.fail.bits;
        if !p.fail.ok() {
            break;
        }
        tok = p.argmax;
    }
    bits
}

/// A CPU device's resident grid (its threads: lavapipe's LP_NUM_THREADS), 2 on a GPU.
fn cpu_grid(ctx: &baro_engine::vulkan::GpuContext) -> usize {
    if ctx.info.kind == DeviceKind::Cpu {
        default_grid(ctx).max(1) as usize
    } else {
        2
    }
}

fn vocab_model(vocab: usize, ty: GgmlType) -> Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 1;
    cfg.vocab_size = vocab;
    synth::generate(&cfg, tied, ty, 7, |_, _| {}).expect("model")
}

#[test]
fn the_cpu_loop_estimate_is_at_most_2_percent_under_a_stage_dispatchs_count_and_a_third_over_a_pass(
) {
    let Some((ctx, _turn)) = device() else { return };
    if ctx.info.kind != DeviceKind::Cpu {
        let model = Model::embedded().expect("model");
        let dec =
            VulkanDecoder::new(ctx.clone(), &model, DecoderOptions::default()).expect("decoder");
        assert_eq!(
            dec.cpu_pass_loops(),
            None,
            "a GPU has no loop budget to estimate"
        );
        return;
    }
    assert!(
        ctx.info.integer_dot,
        "CI's lavapipe has integer dot products (the q8 cases need them)"
    );
    let stories = Model::embedded().expect("model");
    let wide = vocab_model(40_000, GgmlType::Q8_0);
    // llama.cpp's Q4_K_M file: Q4_K and Q6_K rows.
    let (_tmp, kq) = crate::real_models::model("kq-q4_k_m");
    // A stage dispatch (multi) has no grid barrier: its count is its loops' alone, and the
    // estimate must be within 2 % under it (every pass clean at est + 2 %) and at most a
    // third over (the kernel runs out at 3/4 of it). A megakernel's count adds its barrier
    // waits' polls, which a busy machine lengthens: only the second bound holds there.
    let cases: [(&str, &Model, Dispatch, ActType, usize); 4] = [
        (
            "40k-vocab Q8_0 multi q8",
            &wide,
            Dispatch::Multi,
            ActType::Q8,
            2,
        ),
        ("kq-q4_k_m multi q8", &kq, Dispatch::Multi, ActType::Q8, 6),
        // The attention's loops: 200 positions of stories260K's 8 heads.
        (
            "stories260K multi",
            &stories,
            Dispatch::Multi,
            ActType::F32,
            200,
        ),
        (
            "40k-vocab Q8_0 mega",
            &wide,
            Dispatch::Mega,
            ActType::F32,
            2,
        ),
    ];
    for (name, model, dispatch, act, positions) in cases {
        let opts = DecoderOptions {
            dispatch,
            act,
            max_seq: positions,
            ..Default::default()
        };
        let est = VulkanDecoder::new(ctx.clone(), model, opts.clone())
            .expect("decoder")
            .cpu_pass_loops()
            .expect("a CPU device's estimate") as u32;
        assert!(est > 200, "{name}: estimate {est}");
        if dispatch == Dispatch::Multi {
            let bits = decode_all(&ctx, model, &opts, est + est / 50);
            assert_eq!(
                bits,
                0,
                "{name}: estimate {est}, fail bits {bits:#x} at {}",
                est + est / 50
            );
        }
        let bits = decode_all(&ctx, model, &opts, est / 4 * 3);
        assert!(
            bits & fail::BUDGET != 0,
            "{name}: estimate {est}, yet every pass fit in {} (bits {bits:#x})",
            est / 4 * 3
        );
    }
}

#[test]
fn a_cpu_device_grows_the_default_workgroup_alike_for_mega_and_multi_and_keeps_their_bits() {
    // Alone among the device tests: its passes are sized to three quarters of the loop budget,
    // and a workgroup polling at a barrier for a pool thread that the OS has descheduled (for
    // another test's host work) spends the rest.
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    // 60,000 rows of head for each 2 workgroups of the resident grid (lavapipe's threads):
    // some 165,000 back-edges a pass at 64 lanes.
    let model = vocab_model(30_000 * cpu_grid(&ctx), GgmlType::Q4_0);
    let opts = |dispatch| DecoderOptions {
        dispatch,
        max_seq: 3,
        ..Default::default()
    };
    let mut mega = VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Mega)).expect("mega");
    let mut multi = VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Multi)).expect("multi");
    assert_eq!(
        mega.wg_size, multi.wg_size,
        "one default workgroup size for both dispatches (the norms sum over its lanes)"
    );
    if ctx.info.kind == DeviceKind::Cpu {
        assert!(
            mega.wg_size > 64,
            "the default grew: {} lanes",
            mega.wg_size
        );
        let est = mega.cpu_pass_loops().expect("estimate");
        assert!(est <= 48_000, "a default mega pass leaves a quarter: {est}");
    }
    let mut tok = model.tokenizer.bos_id();
    for pos in 0..3 {
        let a = mega.step(tok, pos).expect("mega pass");
        let b = multi.step(tok, pos).expect("multi pass");
        assert!(
            a.fail.ok() && b.fail.ok(),
            "pos {pos}: {:#x} {:#x}",
            a.fail.bits,
            b.fail.bits
        );
        let same = mega
            .logits()
            .iter()
            .zip(multi.logits())
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "pos {pos}: mega and multi logits differ");
        tok = a.argmax;
    }
}

#[test]
fn a_152k_vocabulary_runs_multi_on_a_cpu_device_and_a_megakernel_that_cannot_fit_is_refused() {
    let Some((ctx, _turn)) = device() else { return };
    // Qwen's 151,936 rows for each 2 workgroups of the resident grid (lavapipe's threads).
    let model = vocab_model(75_968 * cpu_grid(&ctx), GgmlType::Q4_0);
    let opts = |dispatch, wg_size| DecoderOptions {
        dispatch,
        wg_size,
        max_seq: 3,
        ..Default::default()
    };
    if ctx.info.kind != DeviceKind::Cpu {
        let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Mega, None))
            .expect("a GPU runs it");
        assert_eq!(dec.cpu_pass_loops(), None);
        let p = dec.step(model.tokenizer.bos_id(), 0).expect("pass");
        assert!(p.fail.ok(), "{:#x}", p.fail.bits);
        return;
    }
    // The megakernel by default: even the largest workgroup leaves the barriers' waits less
    // than their quarter; refused before anything runs, naming the stage and the remedy.
    let err = VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Mega, None))
        .err()
        .expect("the default megakernel refused")
        .to_string();
    assert!(err.contains("in head"), "names the stage: {err}");
    assert!(
        err.contains("65,535") && err.contains("--dispatch multi"),
        "says the limit and the remedy: {err}"
    );
    // 64 lanes asked for: some 400,000 back-edges, refused with a size that fits.
    let err = VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Mega, Some(64)))
        .err()
        .expect("64 lanes refused")
        .to_string();
    assert!(
        err.contains("in head") && err.contains("--wg-size") && err.contains("fits"),
        "{err}"
    );
    // The multi path by default, and at 64 lanes, where its grid widens (a grid changes no
    // bits): clean.
    for wg in [None, Some(64)] {
        let mut dec =
            VulkanDecoder::new(ctx.clone(), &model, opts(Dispatch::Multi, wg)).expect("multi fits");
        let est = dec.cpu_pass_loops().expect("estimate");
        assert!(est <= 48_000, "{wg:?}: {est}");
        if wg.is_some() {
            assert!(dec.grid > default_grid(&ctx), "grid {}", dec.grid);
        }
        let mut tok = model.tokenizer.bos_id();
        for pos in 0..3 {
            let p = dec.step(tok, pos).expect("pass");
            assert!(p.fail.ok(), "{wg:?} pos {pos}: {:#x}", p.fail.bits);
            tok = p.argmax;
        }
    }
}
