//! Vulkan decoder tests. They run on whatever Vulkan device is present — in CI, lavapipe with
//! LP_NUM_THREADS=2 (scripts/test.sh). A missing device is a failure, never a silent skip;
//! outside CI, BARO_SKIP_VULKAN=1 skips them explicitly (and says so).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_engine::gate::{run_gate, GateConfig};
use baro_engine::generate::generate;
use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::sampler::Sampler;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{fail, DecoderOptions, DeviceKind, GpuContext, Mode, VulkanDecoder};

const GOLDEN_TEXT: &[u8] = include_bytes!("../models/stories260K/greedy_empty_prompt_200.txt");

fn co_resident(ctx: &GpuContext) -> u32 {
    baro_engine::vulkan::default_grid(ctx)
}

use common::device;

fn text_on(ctx: &Arc<GpuContext>, model: &Model, mode: Mode, steps: usize) -> Vec<u8> {
    let opts = DecoderOptions {
        mode,
        max_seq: steps,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
    let mut sampler = Sampler::new(model.config.vocab_size, 0.0, 0.9, 1);
    let mut out = Vec::new();
    generate(
        &mut dec,
        &model.tokenizer,
        &mut sampler,
        b"",
        steps,
        &mut out,
    )
    .expect("generate");
    out
}

#[test]
fn stories260k_golden_on_vulkan_multi_and_mega() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let mut want = GOLDEN_TEXT.to_vec();
    want.push(b'\n');
    for mode in [Mode::Multi, Mode::Mega] {
        let got = text_on(&ctx, &model, mode, 200);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "mode {}",
            mode.name()
        );
    }
}

#[test]
fn mega_equals_multi_bitwise_and_tracks_the_reference_in_every_quant_type() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    for ty in GgmlType::ALL {
        let model = synth::generate(&cfg, tied, ty, 3, |_, _| {}).expect("model");
        let gate = GateConfig::new(
            12,
            vec![Mode::Mega, Mode::Multi],
            vec![model.tokenizer.bos_id()],
        );
        let r = run_gate(&ctx, &model, &gate, |_, _| {}).expect("gate ran");
        let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
        assert!(r.ok(), "{ty}: {fails:?}");
        assert!(
            r.near_tie_at.is_none() || r.passes.len() > 1,
            "{ty}: stopped at a near-tie at once"
        );
        for p in &r.passes {
            assert_eq!(p.bitwise_equal, Some(true), "{ty} pass {}", p.pos);
            for m in &p.modes {
                assert!(
                    m.rel_l2 < 1e-4,
                    "{ty} pass {} {}: rel-L2 {}",
                    p.pos,
                    m.mode.name(),
                    m.rel_l2
                );
            }
        }
    }
}

#[test]
fn a_grid_larger_than_co_resident_fails_the_gate_within_seconds() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    // On lavapipe one pool thread runs one workgroup: twice that many cannot all be resident.
    // On a GPU, 65535 workgroups of 256 lanes exceed any device's residency.
    let grid = if ctx.info.kind == DeviceKind::Cpu {
        2 * co_resident(&ctx)
    } else {
        65535
    };
    let opts = DecoderOptions {
        mode: Mode::Mega,
        grid: Some(grid),
        max_seq: 4,
        spin_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    let t0 = Instant::now();
    let p = dec.step(model.tokenizer.bos_id(), 0).expect("pass ran");
    let line = p.fail.line(|l| dec.level_name(l));
    assert!(!p.fail.ok(), "oversubscribed pass looked clean: {line}");
    assert!(
        p.fail.bits & (fail::TIMEOUT | fail::BUDGET | fail::LATE) != 0,
        "{line}"
    );
    assert!(
        p.fail.bits & fail::POISONED != 0,
        "the poisoned argmax must be caught: {line}"
    );
    assert!(line.contains("FAIL") && line.contains("resident"), "{line}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn an_injected_stalled_workgroup_fails_within_seconds_and_names_the_level() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let grid = co_resident(&ctx).clamp(2, 64);
    let opts = DecoderOptions {
        mode: Mode::Mega,
        grid: Some(grid),
        max_seq: 4,
        spin_timeout: Duration::from_millis(500),
        test_stall_wg: Some(1),
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    let t0 = Instant::now();
    let p = dec.step(model.tokenizer.bos_id(), 0).expect("pass ran");
    let line = p.fail.line(|l| dec.level_name(l));
    assert!(p.fail.bits & (fail::TIMEOUT | fail::BUDGET) != 0, "{line}");
    assert_eq!(
        p.fail.level,
        Some(0),
        "the first barrier is where the stall shows: {line}"
    );
    assert!(line.contains("qkv.l0"), "{line}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
    // A clean decoder on the same device still works afterwards.
    let opts = DecoderOptions {
        mode: Mode::Mega,
        grid: Some(grid),
        max_seq: 4,
        ..Default::default()
    };
    let mut ok = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    let p = ok.step(model.tokenizer.bos_id(), 0).expect("pass ran");
    assert!(p.fail.ok(), "{}", p.fail.line(|l| ok.level_name(l)));
    assert_eq!(p.argmax, 403);
}

#[test]
fn an_ffn_wider_than_shared_memory_goes_through_chunks_and_stays_bit_identical() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 1;
    // Wider than the shared memory holds in floats (lavapipe: ~7.7k, H200: ~11.9k), small
    // enough for lavapipe's loop budget in one megakernel pass.
    cfg.hidden_dim = if ctx.info.kind == DeviceKind::Cpu {
        8192
    } else {
        16384
    };
    let model = synth::generate(&cfg, tied, GgmlType::Q4_0, 5, |_, _| {}).expect("model");
    let gate = GateConfig::new(
        4,
        vec![Mode::Mega, Mode::Multi],
        vec![model.tokenizer.bos_id()],
    );
    let r = run_gate(&ctx, &model, &gate, |_, _| {}).expect("gate ran");
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(r.ok(), "{fails:?}");
    assert!(r.passes.iter().all(|p| p.bitwise_equal == Some(true)));
}

#[test]
fn a_bad_device_selector_is_an_error_naming_the_devices_and_leaves_vulkan_usable() {
    let Some((ctx, _turn)) = device() else { return };
    for sel in ["9999", "no-such-gpu-name"] {
        let err = GpuContext::new(Some(sel))
            .err()
            .expect("must fail")
            .to_string();
        assert!(err.contains(sel) && err.contains(&ctx.info.name), "{err}");
    }
    // The failed opens must not have torn down the loader under the live context.
    let model = Model::embedded().expect("model");
    let opts = DecoderOptions {
        mode: Mode::Multi,
        max_seq: 2,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    assert_eq!(
        dec.step(model.tokenizer.bos_id(), 0).expect("pass").argmax,
        403
    );
    let zero = DecoderOptions {
        grid: Some(0),
        ..Default::default()
    };
    let err = VulkanDecoder::new(ctx, &model, zero)
        .err()
        .expect("grid 0 refused")
        .to_string();
    assert!(err.contains("grid 0"), "{err}");
}
