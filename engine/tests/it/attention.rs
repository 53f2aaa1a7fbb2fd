//! Attention over position chunks and head groups: a unit is (head group, position chunk),
//! a head group up to `ATT_HEADS` query heads of one KV head (each key and value loaded once
//! for all of them), and past `ATT_CHUNK_MIN` positions a group's attention runs as up to
//! `ATT_CHUNKS` units on different workgroups, the last to finish combining them. The result
//! must track the CPU reference, stay bit-identical between mega and multi, and not depend on
//! the grid (which workgroup runs which chunk, which one arrives last). Runs on lavapipe in CI
//! (a missing device fails).
//!
//! Cost: a lavapipe pass costs tens of milliseconds at any position, so each shape decodes
//! once: its decoders (grids and dispatch styles) run in lockstep with one CPU reference
//! ([`lockstep`]), each checked against the reference and against the first one's bits,
//! instead of a gate and a further decode per grid.

use baro_engine::act::ActType;
use baro_engine::gate::rel_l2;
use baro_engine::kv::KvType;
use baro_engine::model::{Config, Model};
use baro_engine::quant::GgmlType;
use baro_engine::reference::CpuDecoder;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::program::{
    att_chunks, att_groups, ATT_CHUNKS, ATT_CHUNK_MIN, ATT_HEADS, ATT_PRO_CHUNKS,
};
use baro_engine::vulkan::{default_att_prologue_combine, DecoderOptions, Dispatch, VulkanDecoder};
use baro_telemetry::judge::NEAR_TIE;
use baro_telemetry::Judge;

use crate::common::device;

/// Positions decoded on the small shapes: chunk counts 1 to 5, uneven chunk lengths.
const N: usize = 300;

/// Positions decoded on the GQA shape: past the point where the chunk count reaches its cap.
const N_CAP: usize = (ATT_CHUNKS * ATT_CHUNK_MIN) as usize + 40;

/// Tiny: 8 query heads, 4 KV heads (two query heads per group), head size 16.
fn tiny_model() -> Model {
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    synth::generate(&cfg, tied, GgmlType::Q8_0, 5, |_, _| {}).expect("model")
}

fn config(dim: usize, hidden_dim: usize, n_heads: usize, n_kv_heads: usize, seq: usize) -> Config {
    let (base, _) = Shape::Tiny.config();
    Config {
        dim,
        hidden_dim,
        n_layers: 2,
        n_heads,
        n_kv_heads,
        seq_len: seq,
        ..base
    }
}

/// The Llama 3 attention shape in small: 4 query heads per KV head, head size 64 (on lavapipe's
/// 8-lane subgroups a key row is read by 2 lanes and summed by the shuffle butterfly; the
/// hidden width leaves shared memory for 3 value clusters' partials at a time, so past 24
/// positions a chunk runs more clusters and adds their partials in rounds). One layer: this
/// shape decodes past the chunk cap ([`N_CAP`] positions per decoder) and a lavapipe pass
/// costs about its layers' matrix work; the arrival counters' count over layers is checked on
/// the two-layer shapes (tiny, head size 10).
fn gqa_model() -> Model {
    let cfg = Config {
        n_layers: 1,
        ..config(256, 768, 4, 1, N_CAP)
    };
    assert_eq!((cfg.head_size(), cfg.n_heads / cfg.n_kv_heads), (64, 4));
    synth::generate(&cfg, true, GgmlType::Q8_0, 7, |_, _| {}).expect("model")
}

/// Head size 10 (not a multiple of 4: the scalar loads, a padded last quad) and 8 query heads
/// per KV head (two head groups per KV head).
fn odd_model() -> Model {
    let cfg = config(160, 480, 16, 2, N);
    assert_eq!((cfg.head_size(), cfg.n_heads / cfg.n_kv_heads), (10, 8));
    synth::generate(&cfg, true, GgmlType::Q8_0, 9, |_, _| {}).expect("model")
}

/// A forced token sequence, BOS first (no argmax feedback: the comparison never stops at a
/// near-tie).
fn tokens(model: &Model, n: usize) -> Vec<u32> {
    let vocab = model.config.vocab_size;
    let mut t: Vec<u32> = (0..n).map(|p| ((p * 37 + 11) % vocab) as u32).collect();
    t[0] = model.tokenizer.bos_id();
    t
}

/// rel-L2 bounds against the reference: f32 as the other gate tests; f16 the gate's own bound
/// (an f32 ulp between the GPU's and the reference's key or value now and then crosses an f16
/// rounding boundary, a whole f16 ulp: head size 64 measured 2.6e-4 here).
fn bound(kv: KvType) -> f64 {
    match kv {
        KvType::F32 => 1e-4,
        KvType::F16 => 1e-3,
    }
}

/// The two logit vectors hold the same bits, element for element.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A dispatch style on a grid, and where a few chunks are combined
/// ([`DecoderOptions::att_prologue_combine`]; `None`: the default, the last unit on lavapipe's
/// 64 lanes). lavapipe runs 2 workgroups at a time (its pool threads), so larger grids run
/// multi (one stage per dispatch: no co-residency needed).
type Run = (Dispatch, u32, Option<bool>);

/// The gate's checks, with every run in `runs` a decoder of its own, over `n` forced positions
/// next to one CPU reference (whose KV cache is `kv` too): at every position every run's pass
/// is clean, its token is the reference's (the gate's judge: a near-tie ends the token
/// comparison), its logits are within `bound(kv)` rel-L2 of the reference's, and they have the
/// bits of the first run's.
fn lockstep(model: &Model, n: usize, kv: KvType, runs: &[Run], what: &str) {
    let Some((ctx, _turn)) = device() else { return };
    let mut decs: Vec<VulkanDecoder> = runs
        .iter()
        .map(|&(dispatch, grid, att_prologue_combine)| {
            let opts = DecoderOptions {
                dispatch,
                grid: Some(grid),
                att_prologue_combine,
                max_seq: n,
                read_logits: true,
                kv,
                // Mega on 2 workgroups spins at grid barriers for lavapipe's other pool
                // thread; on a loaded 2-core machine that thread can be off the CPU longer
                // than the default 1 s, which would say nothing about the attention.
                spin_timeout: std::time::Duration::from_secs(10),
                ..Default::default()
            };
            VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder")
        })
        .collect();
    let name = |(dispatch, grid, pro): Run| {
        let how = match pro {
            Some(true) => ", chunks combined in the prologue",
            Some(false) => ", chunks combined by the last unit",
            None => "",
        };
        format!("{} on grid {grid}{how}", dispatch.name())
    };
    let mut judges = vec![Judge::new(NEAR_TIE); runs.len()];
    let mut cpu = CpuDecoder::with_kv(&model.config, &model.weights, n, kv);
    let mut worst = 0f64;
    for (pos, &token) in tokens(model, n).iter().enumerate() {
        let reference = cpu.forward(token, pos).to_vec();
        assert!(
            reference.iter().all(|v| v.is_finite()),
            "{what}: position {pos}: the reference's logits are not finite"
        );
        for ((dec, judge), &run) in decs.iter_mut().zip(&mut judges).zip(runs) {
            let p = dec.step(token, pos).expect("pass");
            assert!(
                p.fail.ok(),
                "{what}: {} position {pos}: {}",
                name(run),
                p.fail.line(|l| dec.level_name(l))
            );
            let c = judge.judge(pos as u64, p.argmax, Some(dec.logits()), &reference);
            assert!(
                !c.verdict.is_failure(),
                "{what}: {} position {pos}: {:?}",
                name(run),
                c
            );
            let e = rel_l2(dec.logits(), &reference);
            // NaN fails too, hence not `!(e > bound)`.
            assert!(
                e < bound(kv),
                "{what}: {} position {pos}: rel-L2 {e:.3e}",
                name(run)
            );
            worst = worst.max(e);
        }
        let first = decs[0].logits();
        for (dec, &run) in decs.iter().zip(runs).skip(1) {
            assert!(
                same_bits(first, dec.logits()),
                "{what}: position {pos} ({} chunks): logits differ between {} and {}",
                att_chunks(pos as u32 + 1),
                name(runs[0]),
                name(run)
            );
        }
    }
    eprintln!("{what}: worst rel-L2 {worst:.3e}");
}

#[test]
fn the_chunk_count_grows_with_the_context_to_its_cap_and_no_chunk_is_empty() {
    assert_eq!(att_chunks(1), 1);
    assert_eq!(att_chunks(ATT_CHUNK_MIN), 1);
    assert_eq!(att_chunks(ATT_CHUNK_MIN + 1), 2);
    assert_eq!(att_chunks(N as u32), (N as u32).div_ceil(ATT_CHUNK_MIN));
    assert_eq!(att_chunks(N_CAP as u32), ATT_CHUNKS);
    assert_eq!(att_chunks(1 << 20), ATT_CHUNKS);
    assert!(
        ((ATT_CHUNKS - 1) * ATT_CHUNK_MIN) < N_CAP as u32,
        "the GQA tests below must reach the cap"
    );
    // The shader's chunk c is [c·cl, min(n, (c+1)·cl)), cl = ceil(n / nch): never empty.
    for n in 1..=(1u32 << 17) {
        let nch = att_chunks(n);
        let cl = n.div_ceil(nch);
        assert!(
            (nch - 1) * cl < n,
            "n {n}: the last of {nch} chunks is empty"
        );
    }
}

#[test]
fn a_head_group_is_up_to_att_heads_query_heads_of_one_kv_head() {
    let shape = |n_heads, n_kv_heads| Config {
        n_heads,
        n_kv_heads,
        ..Shape::Tiny.config().0
    };
    assert_eq!(ATT_HEADS, 4);
    // Llama 3 1B / 8B: 32 query heads, 8 KV heads: 8 groups of 4.
    assert_eq!(att_groups(&Shape::Llama8B.config().0), 8);
    assert_eq!(att_groups(&Shape::Llama1B.config().0), 8);
    assert_eq!(att_groups(&shape(8, 8)), 8, "one query head per KV head");
    assert_eq!(att_groups(&shape(8, 4)), 4, "two query heads per group");
    assert_eq!(
        att_groups(&shape(16, 2)),
        4,
        "8 per KV head: two groups each"
    );
    assert_eq!(
        att_groups(&shape(12, 2)),
        4,
        "6 per KV head: groups of 4 and 2"
    );
}

#[test]
fn chunked_attention_tracks_the_reference_past_256_positions_with_the_same_bits_mega_on_one_and_two_workgroups_and_multi_on_two(
) {
    let runs = [
        (Dispatch::Mega, 1, None),
        (Dispatch::Mega, 2, None),
        (Dispatch::Multi, 2, None),
    ];
    lockstep(&tiny_model(), N, KvType::F32, &runs, "tiny, f32 KV");
}

#[test]
fn gqa_past_the_chunk_cap_tracks_the_reference_with_the_same_bits_mega_on_one_and_two_workgroups_and_multi_on_three(
) {
    let runs = [
        (Dispatch::Mega, 1, None),
        (Dispatch::Mega, 2, None),
        (Dispatch::Multi, 3, None),
    ];
    lockstep(
        &gqa_model(),
        N_CAP,
        KvType::F32,
        &runs,
        "GQA 4:1, head size 64, f32 KV",
    );
}

#[test]
fn gqa_with_an_f16_cache_tracks_its_reference_and_mega_equals_multi() {
    let runs = [(Dispatch::Mega, 2, None), (Dispatch::Multi, 2, None)];
    lockstep(
        &gqa_model(),
        N,
        KvType::F16,
        &runs,
        "GQA 4:1, head size 64, f16 KV",
    );
}

#[test]
fn head_size_10_and_two_groups_per_kv_head_track_the_reference_with_the_same_bits_mega_on_one_and_two_workgroups_and_multi_on_three(
) {
    let runs = [
        (Dispatch::Mega, 1, None),
        (Dispatch::Mega, 2, None),
        (Dispatch::Multi, 3, None),
        // The records in the prologue's layout, combined by the last unit (head size 10
        // is not whole quads).
        (Dispatch::Mega, 2, Some(true)),
    ];
    lockstep(
        &odd_model(),
        N,
        KvType::F32,
        &runs,
        "head size 10, 8 query heads per KV head",
    );
}

#[test]
fn chunks_combined_in_the_output_projections_prologue_track_the_reference_with_the_last_units_bits_mega_and_multi(
) {
    // N positions: one chunk, then 2..=ATT_PRO_CHUNKS chunks (the prologue combines them),
    // then more (the last unit does, whatever the option).
    assert!(att_chunks(N as u32) > ATT_PRO_CHUNKS && ATT_PRO_CHUNKS > 1);
    let runs = [
        (Dispatch::Mega, 2, Some(false)),
        (Dispatch::Mega, 2, Some(true)),
        (Dispatch::Mega, 1, Some(true)),
        (Dispatch::Multi, 2, Some(true)),
    ];
    lockstep(&tiny_model(), N, KvType::F32, &runs, "tiny, f32 KV");
}

#[test]
fn q8_activations_quantise_the_same_bits_whether_the_prologue_or_the_last_unit_combines_the_chunks()
{
    // The q8 path's prologue quantises the combined output as it combines it (quant_act's
    // QA_ATT source): its int8 blocks, and so every later value, must be the last unit's.
    let Some((ctx, _turn)) = device() else { return };
    let model = tiny_model();
    let mut decs: Vec<VulkanDecoder> = [
        (Dispatch::Mega, false),
        (Dispatch::Mega, true),
        (Dispatch::Multi, true),
    ]
    .iter()
    .map(|&(dispatch, pro)| {
        let opts = DecoderOptions {
            dispatch,
            grid: Some(2),
            max_seq: N,
            act: ActType::Q8,
            att_prologue_combine: Some(pro),
            spin_timeout: std::time::Duration::from_secs(10),
            ..Default::default()
        };
        VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder")
    })
    .collect();
    assert!(!decs[0].att_prologue_combine() && decs[1].att_prologue_combine());
    for (pos, &token) in tokens(&model, N).iter().enumerate() {
        for dec in decs.iter_mut() {
            let p = dec.step(token, pos).expect("pass");
            assert!(
                p.fail.ok(),
                "position {pos}: {}",
                p.fail.line(|l| dec.level_name(l))
            );
        }
        for (i, dec) in decs.iter().enumerate().skip(1) {
            assert!(
                same_bits(decs[0].logits(), dec.logits()),
                "position {pos} ({} chunks): run {i}'s logits differ from the last unit's",
                att_chunks(pos as u32 + 1)
            );
        }
    }
}

#[test]
fn the_prologue_combines_the_chunks_by_default_only_at_1024_lanes_and_more() {
    assert!(default_att_prologue_combine(1024));
    assert!(!default_att_prologue_combine(512));
    assert!(!default_att_prologue_combine(64));
}

#[test]
fn a_head_wider_than_the_workgroup_has_lanes_for_its_quads_is_refused_naming_the_sizes() {
    let Some((ctx, _turn)) = device() else { return };
    // Head size 1024: 256 quads, one value-row quad per lane, on lavapipe's 64-lane
    // workgroups.
    let cfg = config(1024, 1024, 1, 1, 8);
    let model = synth::generate(&cfg, true, GgmlType::Q8_0, 3, |_, _| {}).expect("model");
    let opts = DecoderOptions {
        wg_size: Some(64),
        max_seq: 8,
        ..Default::default()
    };
    let e = match VulkanDecoder::new(ctx.clone(), &model, opts) {
        Ok(_) => panic!("head size 1024 on 64 lanes was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("head size 1024")
            && e.contains("256 quads on as many lanes, and the workgroup has 64 (--wg-size 256"),
        "{e}"
    );
}
