//! The megakernel's read-ahead (`DecoderOptions::prefetch_mib`): the workgroups without an
//! attention unit read the weights of the levels after each attention level into L2. It may
//! change where loads are served from, never a value: the logits keep their bits (against the
//! same decoder without it and against multi), the gate stays clean, and each pass reports
//! exactly the bytes the op definition says it reads.

use crate::common;

use baro_engine::model::types::Tensor;
use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};

fn one_head_group(ty: GgmlType) -> Model {
    common::one_head_group(ty, 41)
}

/// 32-byte sectors of a tensor's quants, then of its block scales (Q4_0 and Q8_0 keep them
/// apart; the touch reads one word of each sector).
fn sectors(t: &Tensor) -> u64 {
    let n = (t.rows * t.cols) as u64;
    let (quant_bytes, scale_words) = match t.ty {
        GgmlType::Q4_0 => (n / 2, (n / 32).div_ceil(2)),
        GgmlType::Q8_0 => (n, (n / 32).div_ceil(2)),
        GgmlType::F32 => (n * 4, 0),
        other => panic!("the test's model has no {other} tensors"),
    };
    quant_bytes.div_ceil(32) + scale_words.div_ceil(8)
}

/// Bytes of the stream after layer l's attention level: the tensors of the levels up to the
/// next attention level (wo, gate, up, down, then layer l + 1's q, k, v, or the classifier
/// after the last layer).
fn stream_bytes(m: &Model, l: usize) -> u64 {
    let w = &m.weights;
    let y = &w.layers[l];
    let mut s = sectors(&y.wo) + sectors(&y.w_gate) + sectors(&y.w_up) + sectors(&y.w_down);
    s += match w.layers.get(l + 1) {
        Some(next) => sectors(&next.wq) + sectors(&next.wk) + sectors(&next.wv),
        None => sectors(w.classifier()),
    };
    s * 32
}

/// Bytes one pass reads ahead with one idle workgroup and a budget above every stream, with
/// skew k: during layer l's attention level, the stream after layer l + k's (none past the
/// last layer).
fn expected_bytes_skewed(m: &Model, skew: usize) -> u64 {
    let n = m.weights.layers.len();
    (0..n)
        .filter(|l| l + skew < n)
        .map(|l| stream_bytes(m, l + skew))
        .sum()
}

fn expected_bytes(m: &Model) -> u64 {
    expected_bytes_skewed(m, 0)
}

fn run(
    ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>,
    m: &Model,
    dispatch: Dispatch,
    mib: u32,
    passes: usize,
) -> (Vec<Vec<u32>>, Vec<u64>) {
    run_with(
        ctx,
        m,
        DecoderOptions {
            dispatch,
            prefetch_mib: Some(mib),
            max_seq: passes,
            ..Default::default()
        },
        passes,
    )
}

fn run_with(
    ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>,
    m: &Model,
    opts: DecoderOptions,
    passes: usize,
) -> (Vec<Vec<u32>>, Vec<u64>) {
    let (dispatch, mib) = (opts.dispatch, opts.prefetch_mib);
    let mut dec = VulkanDecoder::new(ctx.clone(), m, opts).expect("decoder");
    let (mut logits, mut bytes) = (vec![], vec![]);
    for pos in 0..passes {
        let p = dec
            .step(((pos * 37 + 1) % m.config.vocab_size) as u32, pos)
            .expect("pass");
        assert!(
            p.fail.ok(),
            "{} prefetch {mib:?} pass {pos}: {:?}",
            dispatch.name(),
            p.fail
        );
        logits.push(dec.logits().iter().map(|v| v.to_bits()).collect());
        bytes.push(p.prefetched);
    }
    (logits, bytes)
}

#[test]
fn read_ahead_reports_the_weights_after_each_attention_level_and_keeps_every_logit_bit() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let m = one_head_group(ty);
        let want = expected_bytes(&m);
        let (plain, none) = run(&ctx, &m, Dispatch::Mega, 0, 4);
        let (ahead, read) = run(&ctx, &m, Dispatch::Mega, 16, 4);
        let (multi, multi_read) = run(&ctx, &m, Dispatch::Multi, 16, 4);
        assert!(
            none.iter().all(|&b| b == 0),
            "{ty}: no read-ahead asked, {none:?} read"
        );
        assert!(
            read.iter().all(|&b| b == want),
            "{ty}: read {read:?} bytes per pass, the op reads {want}"
        );
        assert!(
            multi_read.iter().all(|&b| b == 0),
            "{ty}: multi has no attention level to idle in"
        );
        assert!(
            plain == ahead,
            "{ty}: the read-ahead changed the megakernel's logits"
        );
        assert!(
            multi == ahead,
            "{ty}: mega with read-ahead and multi differ"
        );
    }
}

#[test]
fn a_read_ahead_budget_caps_what_the_idle_workgroups_read() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    // One 1 MiB budget against a stream larger than it: d 1024 (wo alone is 576 KiB in Q4_0).
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 1;
    cfg.dim = 1024;
    cfg.hidden_dim = 1024;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 1;
    let m = synth::generate(&cfg, tied, GgmlType::Q4_0, 43, |_, _| {}).expect("model");
    assert!(
        expected_bytes(&m) > 1 << 20,
        "the stream must exceed the budget"
    );
    let (_, read) = run(&ctx, &m, Dispatch::Mega, 1, 2);
    assert!(
        read.iter().all(|&b| b == 1 << 20),
        "read {read:?}, the budget is 1 MiB"
    );
}

#[test]
fn a_read_ahead_past_its_largest_value_is_refused_naming_it() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let m = one_head_group(GgmlType::Q4_0);
    let opts = DecoderOptions {
        prefetch_mib: Some(baro_engine::vulkan::MAX_PREFETCH_MIB + 1),
        max_seq: 2,
        ..Default::default()
    };
    let err = VulkanDecoder::new(ctx.clone(), &m, opts)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("read-ahead 4097 MiB"), "{err}");
}

#[test]
fn the_gate_passes_with_read_ahead_mega_and_multi_bit_identical() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    let m = one_head_group(GgmlType::Q4_0);
    common::assert_gate_clean_with(&ctx, &m, |o| o.prefetch_mib = Some(4), "read-ahead 4 MiB");
}

#[test]
fn a_skewed_read_ahead_reads_the_stream_of_a_later_attention_level_and_keeps_every_logit_bit() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    // Three layers, so skew 1 reads two layers' later streams and the last layer's none.
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 3;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 1;
    let m = synth::generate(&cfg, tied, GgmlType::Q4_0, 47, |_, _| {}).expect("model");
    let opts = |skew| DecoderOptions {
        prefetch_mib: Some(16),
        prefetch_skew: skew,
        max_seq: 3,
        ..Default::default()
    };
    let (next, next_read) = run_with(&ctx, &m, opts(0), 3);
    let (skewed, skewed_read) = run_with(&ctx, &m, opts(1), 3);
    let want = expected_bytes_skewed(&m, 1);
    assert_ne!(
        want,
        expected_bytes(&m),
        "the test's layers must differ in what skew 1 reads"
    );
    assert!(
        next_read.iter().all(|&b| b == expected_bytes(&m)),
        "skew 0 read {next_read:?}"
    );
    assert!(
        skewed_read.iter().all(|&b| b == want),
        "skew 1 read {skewed_read:?} bytes per pass, the op reads {want}"
    );
    assert!(next == skewed, "the skewed read-ahead changed the logits");
    // Skew past every attention level reads nothing.
    let (_, none) = run_with(&ctx, &m, opts(3), 1);
    assert_eq!(none, vec![0], "skew 3 of 3 layers read something");
    let err = VulkanDecoder::new(
        ctx.clone(),
        &m,
        opts(baro_engine::vulkan::MAX_PREFETCH_SKEW + 1),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("read-ahead skew 65"), "{err}");
    // A skew of no read-ahead (the default is none) would be accepted and move nothing.
    let err = VulkanDecoder::new(
        ctx.clone(),
        &m,
        DecoderOptions {
            prefetch_skew: 1,
            max_seq: 3,
            ..Default::default()
        },
    )
    .err()
    .expect("refused");
    assert!(
        err.to_string()
            .contains("read-ahead skew 1 needs a read-ahead"),
        "{err}"
    );
}

#[test]
fn the_read_ahead_is_off_by_default_on_every_device_kind() {
    let Some((ctx, _turn)) = common::device() else {
        return;
    };
    use baro_engine::vulkan::{default_prefetch_mib, DeviceKind, DEFAULT_PREFETCH_MIB};
    // Round 45: its speed was the compile mode its block kept, which the idle wait's block
    // keeps without the reads.
    assert_eq!(DEFAULT_PREFETCH_MIB, 0);
    for k in std::iter::once(DeviceKind::Cpu).chain(common::GPU_KINDS) {
        assert_eq!(default_prefetch_mib(k), 0, "{k:?}");
    }
    let m = one_head_group(GgmlType::Q4_0);
    let opts = DecoderOptions {
        max_seq: 2,
        ..Default::default()
    };
    assert_eq!(opts.prefetch_mib, None, "no budget asked");
    let dec = VulkanDecoder::new(ctx.clone(), &m, opts).expect("decoder");
    assert_eq!(dec.prefetch_mib(), 0, "device kind {:?}", ctx.info.kind);
    assert_eq!(dec.run_details("m").prefetch_mib, 0);
    let (_, read) = run_with(
        &ctx,
        &m,
        DecoderOptions {
            max_seq: 2,
            ..Default::default()
        },
        2,
    );
    assert!(read.iter().all(|&b| b == 0), "read {read:?} by default");
}
