//! The device clock's unit (`VulkanDecoder::new`, `baro_telemetry::clock::ClockRate`):
//! VK_KHR_shader_clock leaves it to the driver, and every stage span, barrier time, spin
//! timeout and idle wait is read as ns. The first decoder of a device measures the clock
//! against the timestamp queries; one that does not count ns is turned off and the run says
//! why, with the same values.

use crate::common;
use crate::idle_wait::logits;

use baro_engine::quant::GgmlType;
use baro_engine::vulkan::{DecoderOptions, GpuContext, VulkanDecoder};
use baro_telemetry::clock::ClockRate;
use std::sync::Arc;

fn opts(rate: Option<f64>) -> DecoderOptions {
    DecoderOptions {
        max_seq: 4,
        test_clock_rate: rate,
        ..Default::default()
    }
}

#[test]
fn the_test_devices_clock_counts_ns_and_the_decoder_keeps_it() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    assert!(
        ctx.info.device_clock,
        "the test device must have the device clock whose unit is measured"
    );
    let m = common::one_head_group(GgmlType::Q4_0, 53);
    let mut dec = VulkanDecoder::new(ctx.clone(), &m, opts(None)).expect("decoder");
    assert!(dec.has_clock(), "a clock that counts ns stays on");
    assert_eq!(dec.clock_off(), None);
    assert_eq!(dec.run_details("m").device_clock_off, None);
    let r = dec
        .measure_clock_rate()
        .expect("measured")
        .expect("a rate from a device with a clock and timestamps");
    eprintln!(
        "device clock: {:.4} ticks a ns (±{:.1e})",
        r.ticks_per_ns, r.uncertainty
    );
    assert!(
        r.counts_ns() && (r.ticks_per_ns - 1.0).abs() < 0.02 + 3.0 * r.uncertainty,
        "{r:?}"
    );
    assert!(
        r.uncertainty < 0.05,
        "a measurement too loose to judge a clock: {r:?}"
    );
    // The device keeps what its first decoder with the clock measured.
    let kept = ctx.clock_rate().expect("the device's measured rate");
    assert!(kept.counts_ns(), "{kept:?}");
}

#[test]
fn a_device_whose_measured_clock_does_not_count_ns_turns_it_off_for_every_decoder() {
    let Some((shared, _turn)) = common::device() else {
        return;
    };
    // A context of its own: the shared one keeps its real measurement.
    let ctx = Arc::new(GpuContext::new(None).expect("a second context on the test device"));
    assert_eq!(shared.info.name, ctx.info.name);
    assert!(ctx.test_set_clock_rate(ClockRate {
        ticks_per_ns: 0.1,
        uncertainty: 1e-4,
    }));
    let m = common::one_head_group(GgmlType::Q4_0, 53);
    for _ in 0..2 {
        let dec = VulkanDecoder::new(ctx.clone(), &m, opts(None)).expect("decoder");
        assert!(!dec.has_clock());
        let why = dec.clock_off().expect("the reason");
        assert!(why.contains("100.0 MHz (±0.0)"), "{why}");
    }
}

#[test]
fn a_device_clock_that_does_not_count_ns_is_turned_off_and_the_run_says_why() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let m = common::one_head_group(GgmlType::Q4_0, 53);
    // AMD's 100 MHz reference clock.
    let off = VulkanDecoder::new(ctx.clone(), &m, opts(Some(0.1))).expect("decoder");
    assert!(!off.has_clock(), "a 100 MHz clock is turned off");
    let why = off.clock_off().expect("the reason");
    assert!(
        why.contains("100.0 MHz") && why.contains("no stage or barrier times"),
        "{why}"
    );
    assert_eq!(
        off.run_details("m").device_clock_off.as_deref(),
        Some(why),
        "the run details carry the reason to every view"
    );
    drop(off);
    // 3 % fast is not ns either; 1 % is.
    let fast = VulkanDecoder::new(ctx.clone(), &m, opts(Some(1.03))).expect("decoder");
    assert!(!fast.has_clock() && fast.clock_off().is_some());
    drop(fast);
    let near = VulkanDecoder::new(ctx.clone(), &m, opts(Some(1.01))).expect("decoder");
    assert!(near.has_clock() && near.clock_off().is_none());
    drop(near);
    // Off, the values keep their bits.
    assert!(
        logits(&ctx, &m, opts(Some(0.1)), 3) == logits(&ctx, &m, opts(None), 3),
        "turning the clock off changed the logits"
    );
    // A wait asked for by name needs the clock: refused, saying why it is off.
    let err = VulkanDecoder::new(
        ctx.clone(),
        &m,
        DecoderOptions {
            idle_wait_ns: Some(2_000),
            ..opts(Some(0.1))
        },
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        err.contains("needs the device clock") && err.contains("100.0 MHz"),
        "{err}"
    );
}
