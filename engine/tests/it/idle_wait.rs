//! The megakernel's idle wait (`DecoderOptions::idle_wait_ns`): the workgroups without a unit
//! in an attention level wait that long after arriving at the level's barrier before they
//! poll. It may change when a workgroup polls, never a value: the logits keep their bits at
//! every wait (against no wait and against multi), the gate stays clean, the run details say
//! what ran, and values the kernel cannot honour are refused by name.

use crate::common;

use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::vulkan::{
    default_idle_wait_ns, DecoderOptions, DeviceKind, Dispatch, VulkanDecoder,
    DEFAULT_IDLE_WAIT_NS, MAX_IDLE_WAIT_NS,
};

fn one_head_group(ty: GgmlType) -> Model {
    common::one_head_group(ty, 53)
}

/// Logits (as bits) of `passes` passes, every one clean.
pub(crate) fn logits(
    ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>,
    m: &Model,
    opts: DecoderOptions,
    passes: usize,
) -> Vec<Vec<u32>> {
    let (dispatch, wait) = (opts.dispatch, opts.idle_wait_ns);
    let mut dec = VulkanDecoder::new(ctx.clone(), m, opts).expect("decoder");
    (0..passes)
        .map(|pos| {
            let p = dec
                .step(((pos * 29 + 3) % m.config.vocab_size) as u32, pos)
                .expect("pass");
            assert!(
                p.fail.ok(),
                "{} idle wait {wait:?} pass {pos}: {:?}",
                dispatch.name(),
                p.fail
            );
            dec.logits().iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

#[test]
fn every_idle_wait_keeps_every_logit_bit_and_mega_equals_multi() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    assert!(
        ctx.info.device_clock,
        "the test device must have the device clock the wait reads"
    );
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let m = one_head_group(ty);
        let opts = |dispatch, wait| DecoderOptions {
            dispatch,
            idle_wait_ns: Some(wait),
            max_seq: 4,
            ..Default::default()
        };
        let none = logits(&ctx, &m, opts(Dispatch::Mega, 0), 4);
        for wait in [DEFAULT_IDLE_WAIT_NS, MAX_IDLE_WAIT_NS] {
            let waited = logits(&ctx, &m, opts(Dispatch::Mega, wait), 4);
            assert!(
                none == waited,
                "{ty}: a wait of {wait} ns changed the logits"
            );
        }
        let multi = logits(&ctx, &m, opts(Dispatch::Multi, DEFAULT_IDLE_WAIT_NS), 4);
        assert!(multi == none, "{ty}: mega and multi differ");
    }
}

/// Without the device clock the decoder resolves no wait and the kernel's timed loops fold
/// away: the logits keep the bits of a run with the clock, mega and multi alike.
#[test]
fn without_the_device_clock_the_logits_keep_their_bits_mega_and_multi() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let m = one_head_group(ty);
        let opts = |dispatch, no_device_clock| DecoderOptions {
            dispatch,
            no_device_clock,
            max_seq: 4,
            ..Default::default()
        };
        let clocked = logits(&ctx, &m, opts(Dispatch::Mega, false), 4);
        let dec = VulkanDecoder::new(ctx.clone(), &m, opts(Dispatch::Mega, true)).expect("decoder");
        assert_eq!(dec.idle_wait_ns(), 0, "{ty}: no clock, no wait");
        drop(dec);
        for dispatch in [Dispatch::Mega, Dispatch::Multi] {
            let unclocked = logits(&ctx, &m, opts(dispatch, true), 4);
            assert!(
                unclocked == clocked,
                "{ty}: {} without the device clock changed the logits",
                dispatch.name()
            );
        }
    }
}

#[test]
fn the_gate_passes_with_the_idle_wait_mega_and_multi_bit_identical() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let m = one_head_group(GgmlType::Q4_0);
    common::assert_gate_clean_with(
        &ctx,
        &m,
        |o| o.idle_wait_ns = Some(DEFAULT_IDLE_WAIT_NS),
        "idle wait 2000 ns",
    );
}

#[test]
fn the_idle_wait_defaults_to_2_us_on_gpus_with_a_clock_and_to_none_elsewhere() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    assert_eq!(DEFAULT_IDLE_WAIT_NS, 2000);
    for k in common::GPU_KINDS {
        assert_eq!(default_idle_wait_ns(k, true), DEFAULT_IDLE_WAIT_NS, "{k:?}");
        assert_eq!(default_idle_wait_ns(k, false), 0, "{k:?} without a clock");
    }
    assert_eq!(default_idle_wait_ns(DeviceKind::Cpu, true), 0);
    let m = one_head_group(GgmlType::Q4_0);
    let dec = VulkanDecoder::new(
        ctx.clone(),
        &m,
        DecoderOptions {
            max_seq: 2,
            ..Default::default()
        },
    )
    .expect("decoder");
    let want = default_idle_wait_ns(ctx.info.kind, ctx.info.device_clock);
    assert_eq!(dec.idle_wait_ns(), want, "device kind {:?}", ctx.info.kind);
    assert_eq!(dec.run_details("m").idle_wait_ns, want);
    // What was asked is what runs, and the run details say it (multi waits nowhere).
    for (dispatch, reported) in [(Dispatch::Mega, 1500), (Dispatch::Multi, 0)] {
        let dec = VulkanDecoder::new(
            ctx.clone(),
            &m,
            DecoderOptions {
                dispatch,
                idle_wait_ns: Some(1500),
                max_seq: 2,
                ..Default::default()
            },
        )
        .expect("decoder");
        assert_eq!(dec.idle_wait_ns(), 1500);
        assert_eq!(
            dec.run_details("m").idle_wait_ns,
            reported,
            "{}",
            dispatch.name()
        );
    }
}

#[test]
fn an_idle_wait_past_its_largest_value_or_without_the_device_clock_is_refused_naming_it() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let m = one_head_group(GgmlType::Q4_0);
    let refused = |opts: DecoderOptions| {
        VulkanDecoder::new(ctx.clone(), &m, opts)
            .err()
            .expect("refused")
            .to_string()
    };
    let err = refused(DecoderOptions {
        idle_wait_ns: Some(MAX_IDLE_WAIT_NS + 1),
        max_seq: 2,
        ..Default::default()
    });
    assert!(err.contains("idle wait 100001 ns: at most 100000"), "{err}");
    let err = refused(DecoderOptions {
        idle_wait_ns: Some(2000),
        no_device_clock: true,
        max_seq: 2,
        ..Default::default()
    });
    assert!(
        err.contains("idle wait 2000 ns needs the device clock"),
        "{err}"
    );
    // With the clock off and nothing asked, nothing waits (and nothing is refused).
    let dec = VulkanDecoder::new(
        ctx.clone(),
        &m,
        DecoderOptions {
            no_device_clock: true,
            max_seq: 2,
            ..Default::default()
        },
    )
    .expect("decoder");
    assert_eq!(dec.idle_wait_ns(), 0);
}
