//! Chained passes (`VulkanDecoder::step_chain`): several greedy passes in one submission, each
//! reading the previous pass's argmax on the GPU. They must be the same passes, bit for bit,
//! as one submission per pass, keep each pass's fail word, logits and ring frame, and refuse
//! what they cannot do. Runs on lavapipe in CI (a missing device fails).

use std::time::Duration;

use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{fail, DecoderOptions, Dispatch, Feed, Pass, VulkanDecoder, MAX_CHAIN};
use baro_engine::Error;

use crate::common::device;

fn tiny(ty: GgmlType) -> Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    synth::generate(&cfg, tied, ty, 11, |_, _| {}).expect("model")
}

/// (argmax, logits bits) per pass, one submission per pass, feeding each argmax back.
fn one_by_one(dec: &mut VulkanDecoder, prompt: &[u32], n: usize) -> Vec<(u32, Vec<u32>)> {
    let mut out = vec![];
    let mut tok = prompt[0];
    for pos in 0..n {
        let p = dec.step(tok, pos).expect("pass");
        assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
        out.push((p.argmax, dec.logits().iter().map(|f| f.to_bits()).collect()));
        tok = if pos + 1 < prompt.len() {
            prompt[pos + 1]
        } else {
            p.argmax
        };
    }
    out
}

fn bits_of(dec: &VulkanDecoder, i: usize) -> Vec<u32> {
    dec.logits_at(i).iter().map(|f| f.to_bits()).collect()
}

#[test]
fn greedy_passes_chained_on_the_gpu_equal_the_same_passes_one_submission_each() {
    let Some((ctx, _turn)) = device() else { return };
    for (ty, dispatch, pass_loop) in [
        (GgmlType::Q4_0, Dispatch::Mega, true),
        (GgmlType::Q4_0, Dispatch::Mega, false),
        (GgmlType::Q4_0, Dispatch::Multi, true),
        (GgmlType::Q8_0, Dispatch::Mega, true),
    ] {
        let model = tiny(ty);
        let prompt = [model.tokenizer.bos_id(), 5, 9];
        let n = 12;
        let base = DecoderOptions {
            dispatch,
            max_seq: 16,
            ..Default::default()
        };
        let mut single = VulkanDecoder::new(ctx.clone(), &model, base.clone()).expect("decoder");
        let want = one_by_one(&mut single, &prompt, n);
        let mut dec = VulkanDecoder::new(
            ctx.clone(),
            &model,
            DecoderOptions {
                chain: 5,
                pass_loop,
                ..base
            },
        )
        .expect("decoder");
        // The multi dispatch has no pass loop, whatever the option says.
        let looped = pass_loop && dispatch == Dispatch::Mega;
        assert_eq!(dec.pass_loop(), looped);
        // The prompt's tokens from the host, then the GPU's own argmax: one submission of 5,
        // then 5 more continuing from the last argmax of the first, then 2. With the pass
        // loop a dispatch runs a host token and the argmax passes after it: 3, 1 and 1
        // dispatches.
        let mut feeds: Vec<Feed> = prompt.iter().map(|&t| Feed::Token(t)).collect();
        feeds.extend([Feed::Argmax, Feed::Argmax]);
        let mut got: Vec<(u32, Vec<u32>)> = vec![];
        let mut pos = 0;
        // A CPU device loops over at most 4 passes a dispatch.
        let five = if ctx.info.kind == baro_engine::vulkan::DeviceKind::Cpu {
            2
        } else {
            1
        };
        for (chunk, loop_dispatches) in [
            (feeds, 3),
            (vec![Feed::Argmax; 5], five),
            (vec![Feed::Argmax; 2], 1),
        ] {
            let passes = dec.step_chain(&chunk, pos).expect("chain");
            assert_eq!(passes.len(), chunk.len());
            let want_dispatches = if looped { loop_dispatches } else { chunk.len() };
            assert_eq!(
                dec.last_dispatches(),
                want_dispatches,
                "{ty:?} {} pass loop {pass_loop} at {pos}",
                dispatch.name()
            );
            for (i, p) in passes.iter().enumerate() {
                assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
                got.push((p.argmax, bits_of(&dec, i)));
            }
            pos += chunk.len();
        }
        assert_eq!(got.len(), n);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.0,
                w.0,
                "{ty:?} {} loop {pass_loop} pass {i}: argmax",
                dispatch.name()
            );
            assert!(
                g.1 == w.1,
                "{ty:?} {} loop {pass_loop} pass {i}: logits differ from one submission per pass",
                dispatch.name()
            );
        }
        // The last pass's logits are what `logits()` shows.
        assert_eq!(
            dec.logits().iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            want[n - 1].1
        );
    }
}

#[test]
fn a_pass_chained_after_a_failed_one_fails_as_bad_chained_token_and_computes_nothing() {
    let Some((ctx, _turn)) = device() else { return };
    for pass_loop in [true, false] {
        chained_after_a_failure(&ctx, pass_loop);
    }
}

/// A stalled workgroup fails the first of three chained passes; the two after it, in one
/// dispatch with the pass loop or in their own without, fail as bad chained tokens.
fn chained_after_a_failure(ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>, pass_loop: bool) {
    let model = tiny(GgmlType::Q4_0);
    let grid = baro_engine::vulkan::default_grid(ctx);
    if grid < 2 {
        panic!("this test needs a grid of at least 2 workgroups (lavapipe: LP_NUM_THREADS=2)");
    }
    let opts = DecoderOptions {
        pass_loop,
        dispatch: Dispatch::Mega,
        grid: Some(grid),
        max_seq: 4,
        chain: 3,
        spin_timeout: Duration::from_millis(300),
        test_stall_wg: Some(1),
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    let passes = dec
        .step_chain(
            &[
                Feed::Token(model.tokenizer.bos_id()),
                Feed::Argmax,
                Feed::Argmax,
            ],
            0,
        )
        .expect("submission ran");
    let first = &passes[0];
    assert!(
        first.fail.bits & (fail::TIMEOUT | fail::BUDGET) != 0,
        "{}",
        first.fail.line(|l| dec.level_name(l))
    );
    for p in &passes[1..] {
        let line = p.fail.line(|l| dec.level_name(l));
        assert_eq!(p.fail.first, fail::BAD_TOKEN, "{line}");
        assert!(
            p.fail.has(fail::BAD_TOKEN) && p.fail.has(fail::POISONED),
            "{line}"
        );
        assert!(line.contains("bad-chained-token"), "{line}");
        // Nobody waited at a barrier: the bad token stopped every workgroup first.
        assert!(!p.fail.has(fail::TIMEOUT), "{line}");
    }
    assert_eq!(dec.last_dispatches(), if pass_loop { 1 } else { 3 });
    // After a failed pass the GPU's argmax cannot seed another chain.
    let err = dec.step_chain(&[Feed::Argmax], 3).expect_err("refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}

#[test]
fn step_chain_refuses_past_the_chain_option_the_context_a_bad_token_and_an_unseeded_argmax() {
    let Some((ctx, _turn)) = device() else { return };
    let model = tiny(GgmlType::Q4_0);
    let opts = DecoderOptions {
        max_seq: 8,
        chain: 4,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts.clone()).expect("decoder");
    let bos = model.tokenizer.bos_id();
    let msg = |r: Result<Vec<Pass>, Error>| match r {
        Err(Error::Invalid(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let m = msg(dec.step_chain(&[Feed::Argmax], 0));
    assert!(m.contains("completed clean"), "{m}");
    let m = msg(dec.step_chain(&[Feed::Token(bos); 5], 0));
    assert!(m.contains("1 to 4"), "{m}");
    let m = msg(dec.step_chain(&[], 0));
    assert!(m.contains("0 passes"), "{m}");
    let m = msg(dec.step_chain(&[Feed::Token(bos); 3], 6));
    assert!(m.contains("context 8"), "{m}");
    let v = model.config.vocab_size as u32;
    let m = msg(dec.step_chain(&[Feed::Token(bos), Feed::Token(v)], 0));
    assert!(m.contains(&format!("token {v}")), "{m}");
    // Nothing ran; the decoder still works.
    let p = dec.step(bos, 0).expect("pass");
    assert!(p.fail.ok());
    for chain in [0, MAX_CHAIN + 1] {
        let err = VulkanDecoder::new(
            ctx.clone(),
            &model,
            DecoderOptions {
                chain,
                ..opts.clone()
            },
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("chain"), "{err}");
    }
}

#[test]
fn each_chained_pass_keeps_its_own_ring_frame_and_timestamps() {
    let Some((ctx, _turn)) = device() else { return };
    for pass_loop in [true, false] {
        own_ring_frames(&ctx, pass_loop);
    }
}

fn own_ring_frames(ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>, pass_loop: bool) {
    let model = tiny(GgmlType::Q4_0);
    let opts = DecoderOptions {
        max_seq: 8,
        chain: 3,
        instrument: true,
        pass_loop,
        ..Default::default()
    };
    let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
    if !dec.has_clock() {
        panic!("this device has no shader clock: the ring frames would read 0");
    }
    let details = dec.run_details("tiny");
    let bos = model.tokenizer.bos_id();
    let passes = dec
        .step_chain(&[Feed::Token(bos), Feed::Argmax, Feed::Argmax], 0)
        .expect("chain");
    let mut starts = vec![];
    for (i, p) in passes.iter().enumerate() {
        assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
        let f = dec.frame_at(&details, i, i as u64, i, 0, p.argmax, p);
        assert!(
            !f.torn,
            "pass {i}: its ring frame must decode with its own sequence word"
        );
        assert_eq!(f.stages.len(), details.stages.len(), "pass {i}");
        let (t0, t1) = p.window.expect("timestamps");
        assert!(t1 > t0, "pass {i}: window {t0}..{t1}");
        starts.push(t0);
    }
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "the passes ran in order: {starts:?}"
    );
    // Each slot has its own sequence word: pass id + 1, consecutive along the chain.
    let words0 = dec.frame_words_at(0).expect("words");
    let words2 = dec.frame_words_at(2).expect("words");
    assert_eq!(
        words2[0],
        words0[0] + 2,
        "sequence words {} and {}",
        words0[0],
        words2[0]
    );
    assert!(
        dec.frame_words_at(3).is_none(),
        "no fourth pass in this submission"
    );
}

#[test]
fn ring_every_n_stamps_every_nth_pass_only_on_its_own_pipeline_and_changes_no_logit_bit() {
    let Some((ctx, _turn)) = device() else { return };
    for pass_loop in [true, false] {
        ring_every_3(&ctx, pass_loop);
    }
}

/// Six chained passes stamping every third (with the pass loop: four dispatches, a stamped
/// pass, two plain ones, a stamped one, two plain ones).
fn ring_every_3(ctx: &std::sync::Arc<baro_engine::vulkan::GpuContext>, pass_loop: bool) {
    let model = tiny(GgmlType::Q4_0);
    let base = DecoderOptions {
        max_seq: 8,
        chain: 6,
        read_logits: true,
        pass_loop,
        ..Default::default()
    };
    let bos = model.tokenizer.bos_id();
    let mut feeds = vec![Feed::Argmax; 6];
    feeds[0] = Feed::Token(bos);
    let mut plain = VulkanDecoder::new(ctx.clone(), &model, base.clone()).expect("decoder");
    assert!(
        !plain.has_unstamped_pipeline(),
        "a plain decoder has one pipeline"
    );
    let want: Vec<u32> = plain
        .step_chain(&feeds, 0)
        .expect("chain")
        .iter()
        .map(|p| p.argmax)
        .collect();
    let want_logits: Vec<Vec<u32>> = (0..6)
        .map(|i| plain.logits_at(i).iter().map(|x| x.to_bits()).collect())
        .collect();
    let mut dec = VulkanDecoder::new(
        ctx.clone(),
        &model,
        DecoderOptions {
            instrument: true,
            ring_every: 3,
            ..base.clone()
        },
    )
    .expect("decoder");
    if !dec.has_clock() {
        panic!("this device has no shader clock: the ring frames would read 0");
    }
    assert!(
        dec.has_unstamped_pipeline(),
        "sampling every 3rd pass runs the others on a plain pipeline"
    );
    let details = dec.run_details("tiny");
    // The driver's statistics, where it reports them: one entry per pipeline.
    let (one, two) = if ctx.info.pipeline_stats {
        (1, 2)
    } else {
        (0, 0)
    };
    assert_eq!(plain.run_details("tiny").pipelines.len(), one);
    assert_eq!(details.pipelines.len(), two, "{:?}", details.pipelines);
    let passes = dec.step_chain(&feeds, 0).expect("chain");
    let got: Vec<u32> = passes.iter().map(|p| p.argmax).collect();
    assert_eq!(got, want, "the ring never changes a token");
    for (i, w) in want_logits.iter().enumerate() {
        let g: Vec<u32> = dec.logits_at(i).iter().map(|x| x.to_bits()).collect();
        assert!(&g == w, "pass {i}: logits differ from the plain decoder's");
    }
    let stamped: Vec<usize> = (0..6)
        .filter(|&i| dec.frame_words_at(i).is_some())
        .collect();
    assert_eq!(
        stamped.len(),
        2,
        "two of six consecutive passes: {stamped:?}"
    );
    assert_eq!(stamped[1] - stamped[0], 3, "{stamped:?}");
    assert_eq!(dec.last_dispatches(), if pass_loop { 4 } else { 6 });
    for (i, p) in passes.iter().enumerate() {
        assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
        let f = dec.frame_at(&details, i, i as u64, i, 0, p.argmax, p);
        assert!(!f.torn, "pass {i}");
        if stamped.contains(&i) {
            assert_eq!(
                f.stages.len(),
                details.stages.len(),
                "pass {i} has its spans"
            );
        } else {
            assert!(
                f.stages.is_empty() && f.spans.is_empty(),
                "pass {i} carries no spans"
            );
            assert!(f.gpu_ns.is_some(), "pass {i} still has its GPU time");
        }
    }
    for (every, instrument) in [(0, true), (2, false)] {
        let err = VulkanDecoder::new(
            ctx.clone(),
            &model,
            DecoderOptions {
                ring_every: every,
                instrument,
                ..base.clone()
            },
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("ring every"), "{err}");
    }
}

#[test]
fn a_pass_loop_gives_each_pass_a_device_clock_gpu_time_and_the_windows_tile_its_dispatch() {
    let Some((ctx, _turn)) = device() else { return };
    let model = tiny(GgmlType::Q4_0);
    let mut dec = VulkanDecoder::new(
        ctx.clone(),
        &model,
        DecoderOptions {
            max_seq: 8,
            chain: 4,
            pass_loop: true,
            ..Default::default()
        },
    )
    .expect("decoder");
    if !dec.has_clock() {
        panic!("this device has no shader clock: a pass loop's passes would have no GPU time");
    }
    let mut feeds = vec![Feed::Argmax; 4];
    feeds[0] = Feed::Token(model.tokenizer.bos_id());
    let passes = dec.step_chain(&feeds, 0).expect("chain");
    assert_eq!(dec.last_dispatches(), 1);
    let windows: Vec<(u64, u64)> = passes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
            p.window
                .unwrap_or_else(|| panic!("pass {i}: no window (GPU time {:?})", p.gpu_ns))
        })
        .collect();
    for (i, (p, w)) in passes.iter().zip(&windows).enumerate() {
        let g = p.gpu_ns.expect("a GPU time");
        assert!(g > 0, "pass {i}: GPU time 0");
        assert_eq!(w.1 - w.0, g, "pass {i}: its window is its GPU time");
    }
    // Back to back, in order: together they are the dispatch's timestamps.
    for (i, w) in windows.windows(2).enumerate() {
        assert_eq!(w[0].1, w[1].0, "passes {i} and {}", i + 1);
    }
    let total: u64 = passes.iter().map(|p| p.gpu_ns.expect("a GPU time")).sum();
    assert_eq!(total, windows[3].1 - windows[0].0);
}

#[test]
fn stories260k_greedy_through_the_pass_loop_gives_the_upstream_golden_ids() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("embedded model");
    let want = crate::golden::golden_ids();
    let n = want.len().min(model.config.seq_len);
    let mut dec = VulkanDecoder::new(
        ctx.clone(),
        &model,
        DecoderOptions {
            max_seq: n,
            chain: 16,
            pass_loop: true,
            read_logits: false,
            ..Default::default()
        },
    )
    .expect("decoder");
    // BOS from the host, then every token the GPU's own argmax: 16 passes a submission, in
    // one dispatch on a GPU, in dispatches of at most 4 on a CPU device.
    let per = if ctx.info.kind == baro_engine::vulkan::DeviceKind::Cpu {
        4
    } else {
        16
    };
    let mut got = vec![];
    let mut pos = 0;
    while pos < n {
        let k = (n - pos).min(16);
        let mut feeds = vec![Feed::Argmax; k];
        if pos == 0 {
            feeds[0] = Feed::Token(model.tokenizer.bos_id());
        }
        let passes = dec.step_chain(&feeds, pos).expect("chain");
        assert_eq!(dec.last_dispatches(), k.div_ceil(per), "at {pos}");
        for (j, p) in passes.iter().enumerate() {
            assert!(
                p.fail.ok(),
                "pass {}: {}",
                pos + j,
                p.fail.line(|l| dec.level_name(l))
            );
            got.push(p.argmax);
        }
        pos += k;
    }
    assert_eq!(got, want[..n]);
}

#[test]
fn the_gate_replays_its_passes_through_the_pass_loop_bit_for_bit() {
    let Some((ctx, _turn)) = device() else { return };
    let model = tiny(GgmlType::Q4_0);
    for pass_loop in [true, false] {
        let mut gate = baro_engine::gate::GateConfig::new(
            12,
            vec![Dispatch::Mega, Dispatch::Multi],
            vec![model.tokenizer.bos_id()],
        );
        gate.decoder.pass_loop = pass_loop;
        let r = baro_engine::gate::run_gate(&ctx.clone().into(), &model, &gate, |_, _| {})
            .expect("gate ran");
        assert!(r.ok(), "loop {pass_loop}");
        match (&r.pass_loop, pass_loop) {
            (Some(c), true) => {
                assert_eq!((c.passes, c.equal), (12, 12), "{c:?}");
                assert!(c.failure.is_none(), "{c:?}");
                assert!(c.dispatches < c.passes, "the loop ran: {c:?}");
            }
            (None, false) => {}
            (c, _) => panic!("loop {pass_loop}: check {c:?}"),
        }
    }
}
