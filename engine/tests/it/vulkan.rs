//! Vulkan decoder tests. They run on whatever Vulkan device is present — in CI, lavapipe with
//! LP_NUM_THREADS=2 (scripts/test.sh). A missing device is a failure, never a silent skip;
//! outside CI, BARO_SKIP_VULKAN=1 skips them explicitly (and says so).

use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_engine::gate::{rel_l2, run_gate, GateConfig};
use baro_engine::generate::generate;
use baro_engine::model::{Config, KMix, Model, Quant};
use baro_engine::quant::{GgmlType, QK_K};
use baro_engine::sampler::Sampler;
use baro_engine::synth::{self, Shape};
use baro_engine::vulkan::{
    fail, ActType, DecoderOptions, DeviceKind, Dispatch, GpuContext, RobustBuffers, VulkanDecoder,
};

const GOLDEN_TEXT: &[u8] = include_bytes!("../../models/stories260K/greedy_empty_prompt_200.txt");

fn co_resident(ctx: &GpuContext) -> u32 {
    baro_engine::vulkan::default_grid(ctx)
}

use crate::common::{device, device_alone};

fn text_on(ctx: &Arc<GpuContext>, model: &Model, dispatch: Dispatch, steps: usize) -> Vec<u8> {
    let opts = DecoderOptions {
        dispatch,
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
    for mode in [Dispatch::Multi, Dispatch::Mega] {
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
    // The GPU decoder has every type baro-top reads, and `model gen` writes every one (and
    // llama-quantize's mixes): each gates here, the super-block types on a model whose rows
    // are whole super-blocks. Random valid blocks of the super-block types (every scale bit
    // pattern) gate in quant_types.rs, llama-quantize's own files in real_models.rs.
    for ty in GgmlType::ALL {
        assert!(
            baro_engine::vulkan::program::gpu_supports(ty),
            "{ty}: not on the GPU"
        );
    }
    let wide = Config {
        dim: 256,
        hidden_dim: 512,
        n_heads: 4,
        n_kv_heads: 2,
        ..cfg.clone()
    };
    let mut cases: Vec<(Quant, &Config)> = GgmlType::ALL
        .into_iter()
        .map(|t| {
            (
                Quant::Uniform(t),
                if t.block_len() < QK_K { &cfg } else { &wide },
            )
        })
        .collect();
    cases.push((Quant::Mix(KMix::Q4KM), &wide));
    for (ty, cfg) in cases {
        let model = synth::generate(cfg, tied, ty, 3, |_, _| {}).expect("model");
        let gate = GateConfig::new(
            12,
            vec![Dispatch::Mega, Dispatch::Multi],
            vec![model.tokenizer.bos_id()],
        );
        let ran = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {});
        let r = ran.expect("gate ran");
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
                    m.dispatch.name(),
                    m.rel_l2
                );
            }
        }
    }
}

#[test]
fn a_grid_larger_than_co_resident_fails_the_gate_within_seconds() {
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    let model = Model::embedded().expect("model");
    // On lavapipe one pool thread runs one workgroup: twice that many cannot all be resident.
    // On a GPU, 65535 workgroups of 256 lanes exceed any device's residency.
    let grid = if ctx.info.kind == DeviceKind::Cpu {
        2 * co_resident(&ctx)
    } else {
        65535
    };
    let opts = DecoderOptions {
        dispatch: Dispatch::Mega,
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
    // And it says what it looks like, with the command that finds a grid that fits.
    let hint = p.fail.residency_hint();
    assert!(
        hint.as_deref()
            .is_some_and(|h| h.contains("devices --probe")),
        "{line}: no residency hint ({hint:?})"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn an_injected_stalled_workgroup_fails_within_seconds_and_names_the_level() {
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    let model = Model::embedded().expect("model");
    let grid = co_resident(&ctx).clamp(2, 64);
    let opts = DecoderOptions {
        dispatch: Dispatch::Mega,
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
        dispatch: Dispatch::Mega,
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
    // Wider than the shared memory holds in floats (lavapipe: ~7.0k, H200: ~10.6k), small
    // enough for lavapipe's loop budget in one megakernel pass.
    cfg.hidden_dim = if ctx.info.kind == DeviceKind::Cpu {
        8192
    } else {
        16384
    };
    let model = synth::generate(&cfg, tied, GgmlType::Q4_0, 5, |_, _| {}).expect("model");
    let mut gate = GateConfig::new(
        4,
        vec![Dispatch::Mega, Dispatch::Multi],
        vec![model.tokenizer.bos_id()],
    );
    // On a CPU device the back-edge budget is per invocation: 256-lane workgroups (32 teams
    // of 8) give each team a quarter of the FFN's 8,192 rows that 64 lanes would, leaving the
    // barrier waits most of the budget even on a loaded CPU.
    if ctx.info.kind == DeviceKind::Cpu {
        gate.decoder.wg_size = Some(256);
    }
    let r = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {}).expect("gate ran");
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(r.ok(), "{fails:?}");
    assert!(r.passes.iter().all(|p| p.bitwise_equal == Some(true)));
}

#[test]
fn a_bad_device_selector_is_an_error_naming_the_devices_and_leaves_vulkan_usable() {
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
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
        dispatch: Dispatch::Multi,
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

/// The tiny model with the last 256 bytes of its classifier (F32) set to NaN: the last 64
/// logits come out NaN while the argmax looks like a normal token.
fn model_with_nan_classifier_tail() -> Model {
    use baro_engine::blob::{Blob, Storage};
    use baro_engine::model::Tensor;
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 1;
    let mut model = synth::generate(&cfg, tied, GgmlType::F32, 9, |_, _| {}).expect("model");
    let t = model.weights.classifier().clone();
    let mut bytes = t.data.to_vec();
    let n = bytes.len();
    for w in bytes[n - 256..].chunks_exact_mut(4) {
        w.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    let blob = Blob::new(Arc::new(Storage::Owned(bytes)), 0, n);
    let nan = Tensor::new(t.name.clone(), t.ty, t.rows, t.cols, blob).expect("tensor");
    match model.weights.output.as_mut() {
        Some(o) => *o = nan,
        None => model.weights.token_embd = nan,
    }
    model
}

#[test]
fn a_non_finite_logit_raises_its_own_fail_bit_in_both_modes() {
    let Some((ctx, _turn)) = device() else { return };
    let model = model_with_nan_classifier_tail();
    for mode in [Dispatch::Mega, Dispatch::Multi] {
        let opts = DecoderOptions {
            dispatch: mode,
            max_seq: 4,
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx.clone(), &model, opts).expect("decoder");
        let p = dec.step(model.tokenizer.bos_id(), 0).expect("pass ran");
        let line = p.fail.line(|l| dec.level_name(l));
        assert!(
            p.fail.bits & fail::NON_FINITE != 0,
            "{}: {line}",
            mode.name()
        );
        assert!(
            line.contains("non-finite-logits") && line.contains("logit row"),
            "{line}"
        );
        let row = p.fail.seen as usize;
        assert!(
            row >= model.config.vocab_size - 64 && row < model.config.vocab_size,
            "the row named ({row}) is one of the NaN rows: {line}"
        );
    }
}

#[test]
fn the_gate_refuses_nan_weights_and_reports_nan_not_zero() {
    let Some((ctx, _turn)) = device() else { return };
    let model = model_with_nan_classifier_tail();
    let gate = GateConfig::new(
        3,
        vec![Dispatch::Mega, Dispatch::Multi],
        vec![model.tokenizer.bos_id()],
    );
    let r = run_gate(&ctx.clone().into(), &model, &gate, |_, _| {}).expect("gate ran");
    assert!(!r.ok(), "a NaN model passed the gate");
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(
        fails.iter().any(|f| f.contains("not finite")),
        "the reference's NaN is named: {fails:?}"
    );
    assert!(
        fails.iter().any(|f| f.contains("non-finite-logits")),
        "the GPU's fail bit is named: {fails:?}"
    );
    assert!(
        r.min_margin().expect("passes").is_nan(),
        "margin must be NaN, not inf"
    );
    assert_eq!(
        r.first_token_mismatch(),
        None,
        "no token verdict on a broken reference"
    );
}

/// Busy threads beside the decode: lavapipe's pool threads get descheduled while other
/// workgroups wait at a barrier, which must not spend the back-edge budget (0x002) or time
/// out. Two burners on the test machine's cores, several megakernel passes each on the two
/// models that need the most barrier waiting.
#[test]
fn the_megakernel_stays_clean_with_two_cpu_burners_running() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let burners: Vec<_> = (0..2)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = i as u64 + 1;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let result = std::panic::catch_unwind(|| {
        let (mut cfg, tied) = Shape::Tiny.config();
        cfg.n_layers = 1;
        cfg.hidden_dim = if ctx.info.kind == DeviceKind::Cpu {
            8192
        } else {
            16384
        };
        let wide = synth::generate(&cfg, tied, GgmlType::Q4_0, 5, |_, _| {}).expect("model");
        let stories = Model::embedded().expect("model");
        let cpu = ctx.info.kind == DeviceKind::Cpu;
        for (model, passes, wg) in [(&wide, 4, cpu.then_some(256)), (&stories, 24, None)] {
            let opts = DecoderOptions {
                dispatch: Dispatch::Mega,
                max_seq: passes,
                wg_size: wg,
                ..Default::default()
            };
            let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
            let mut token = model.tokenizer.bos_id();
            for pos in 0..passes {
                let p = dec.step(token, pos).expect("pass ran");
                assert!(
                    p.fail.ok(),
                    "pass {pos} under CPU load: {}",
                    p.fail.line(|l| dec.level_name(l))
                );
                token = p.argmax;
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    for b in burners {
        b.join().expect("burner");
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Logits bits of `steps` greedy passes from BOS.
fn logit_bits(
    ctx: &Arc<GpuContext>,
    model: &Model,
    opts: DecoderOptions,
    steps: usize,
) -> Vec<Vec<u32>> {
    let mut dec = VulkanDecoder::new(ctx.clone(), model, opts).expect("decoder");
    let mut token = model.tokenizer.bos_id();
    let mut out = Vec::new();
    for pos in 0..steps {
        let p = dec.step(token, pos).expect("pass");
        assert!(p.fail.ok(), "pass {pos}: fail word {:#x}", p.fail.bits);
        out.push(dec.logits().iter().map(|v| v.to_bits()).collect());
        token = p.argmax;
    }
    out
}

#[test]
fn streaming_1_2_or_4_rows_per_team_gives_bit_identical_logits_in_q4_0_and_f16() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    // Q4_0 streams rows together; the other types run one row at a time inside the group.
    for ty in [GgmlType::Q4_0, GgmlType::F16] {
        let model = synth::generate(&cfg, tied, ty, 7, |_, _| {}).expect("model");
        let mut want = None;
        for dispatch in [Dispatch::Mega, Dispatch::Multi] {
            for rows in [1, 2, 4] {
                let opts = DecoderOptions {
                    dispatch,
                    rows: Some(rows),
                    max_seq: 8,
                    ..Default::default()
                };
                let got = logit_bits(&ctx, &model, opts, 6);
                match &want {
                    None => want = Some(got),
                    Some(w) => assert!(
                        *w == got,
                        "{ty} {} rows {rows}: logits differ from mega rows 1",
                        dispatch.name()
                    ),
                }
            }
        }
    }
}

#[test]
fn unchecked_buffers_are_refused_without_pipeline_robustness_or_give_the_checked_logits_and_say_so()
{
    // `RobustBuffers::Off` (no driver bounds checks) changes no access the kernel makes: where
    // the device has VK_EXT_pipeline_robustness the logits must be the checked run's bits,
    // mega and multi, f32 and q8, and the run details say the buffers ran unchecked (a default
    // run's do not); where it has not (Debian 12's lavapipe, Mesa 22.3), the decoder must
    // refuse, naming the extension, rather than run with the checks left in.
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    let model = synth::generate(&cfg, tied, GgmlType::Q4_0, 7, |_, _| {}).expect("model");
    let checked = DecoderOptions {
        max_seq: 8,
        ..Default::default()
    };
    let dec = VulkanDecoder::new(ctx.clone(), &model, checked).expect("decoder");
    assert!(
        !dec.run_details("tiny").robust_buffers_off,
        "a default run's details say its buffers ran unchecked"
    );
    for act in [ActType::F32, ActType::Q8] {
        for dispatch in [Dispatch::Mega, Dispatch::Multi] {
            let opts = |robust_buffers| DecoderOptions {
                dispatch,
                act,
                robust_buffers,
                max_seq: 8,
                ..Default::default()
            };
            if !ctx.info.pipeline_robustness {
                let err = VulkanDecoder::new(ctx.clone(), &model, opts(RobustBuffers::Off))
                    .err()
                    .expect("buffer robustness off was accepted without the extension");
                let msg = err.to_string();
                assert!(
                    msg.contains("VK_EXT_pipeline_robustness") && msg.contains("robustness off"),
                    "{msg}"
                );
                continue;
            }
            let want = logit_bits(&ctx, &model, opts(RobustBuffers::DeviceDefault), 6);
            let got = logit_bits(&ctx, &model, opts(RobustBuffers::Off), 6);
            assert!(
                want == got,
                "{act} {}: unchecked buffers changed the logits",
                dispatch.name()
            );
            let dec = VulkanDecoder::new(ctx.clone(), &model, opts(RobustBuffers::Off))
                .expect("decoder without buffer checks");
            assert!(
                dec.run_details("tiny").robust_buffers_off,
                "the run details do not say the buffers ran unchecked"
            );
        }
    }
}

#[test]
fn rows_in_flight_other_than_1_2_or_4_are_refused_naming_the_value() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    for rows in [0, 3, 8] {
        let opts = DecoderOptions {
            rows: Some(rows),
            max_seq: 4,
            ..Default::default()
        };
        let err = VulkanDecoder::new(ctx.clone(), &model, opts)
            .err()
            .unwrap_or_else(|| panic!("rows {rows} was accepted"));
        assert!(
            err.to_string().contains(&format!("rows in flight {rows}")),
            "{err}"
        );
    }
}

#[test]
fn run_details_carry_each_stages_weight_bytes_from_its_matrices() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = Shape::Tiny.config();
    cfg.n_layers = 2;
    let model = synth::generate(&cfg, tied, GgmlType::Q4_0, 3, |_, _| {}).expect("model");
    let dec = VulkanDecoder::new(ctx.clone(), &model, DecoderOptions::default()).expect("decoder");
    let d = dec.run_details("tiny");
    let bytes = |t: &baro_engine::model::Tensor| t.data.len() as u64;
    let w = &model.weights;
    let want = |s: &baro_engine::telemetry::StageDetails| -> u64 {
        let l = s
            .name
            .rsplit_once(".l")
            .and_then(|(_, n)| n.parse::<usize>().ok());
        use baro_engine::telemetry::StageKind as K;
        if s.kind == K::Head {
            return bytes(w.classifier());
        }
        let Some(lw) = l.map(|l| &w.layers[l]) else {
            return 0;
        };
        match s.kind {
            K::Q => bytes(&lw.wq),
            K::K => bytes(&lw.wk),
            K::V => bytes(&lw.wv),
            K::Wo => bytes(&lw.wo),
            K::Ffn => bytes(&lw.w_gate) + bytes(&lw.w_up),
            K::Down => bytes(&lw.w_down),
            K::Head | K::Attn | K::Argmax => 0,
        }
    };
    for s in &d.stages {
        assert_eq!(s.weight_bytes, want(s), "stage {}", s.name);
    }
    let total: u64 = d.stages.iter().map(|s| s.weight_bytes).sum();
    assert!(total > 0 && d.stages.iter().any(|s| s.weight_bytes == 0));
}

/// `bench --depth` stands on this: a new decoder's cache, and one cleared by
/// `clear_kv_cache` after decoding D positions, read as zeros below D. One token at D then
/// tracks a CPU reference that decoded only that token at D (its cache is zeros), while a
/// decoder that kept its rows does not (so the cleared rows were live before the clear).
#[test]
fn a_new_or_cleared_kv_cache_reads_as_zeros_below_the_first_decoded_position() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    const D: usize = 40;
    let vocab = model.config.vocab_size;
    let opts = DecoderOptions {
        max_seq: D + 1,
        read_logits: true,
        ..Default::default()
    };
    let mk = || VulkanDecoder::new(ctx.clone(), &model, opts.clone()).expect("decoder");
    let (mut fresh, mut cleared, mut kept) = (mk(), mk(), mk());
    for dec in [&mut cleared, &mut kept] {
        for p in 0..D {
            let t = if p == 0 {
                model.tokenizer.bos_id()
            } else {
                ((p * 37 + 11) % vocab) as u32
            };
            assert!(dec.step(t, p).expect("step").fail.ok(), "pos {p}");
        }
    }
    cleared.clear_kv_cache().expect("clear");
    let t = 7u32;
    let mut cpu = baro_engine::reference::CpuDecoder::new(&model.config, &model.weights, D + 1);
    let want = cpu.forward(t, D).to_vec();
    let mut err = vec![];
    for dec in [&mut fresh, &mut cleared, &mut kept] {
        assert!(dec.step(t, D).expect("step").fail.ok());
        err.push(rel_l2(dec.logits(), &want));
    }
    assert!(
        err[0] < 1e-4,
        "a new decoder's cache is not zero: rel-L2 {:.3e}",
        err[0]
    );
    assert!(
        err[1] < 1e-4,
        "the cleared cache is not zero: rel-L2 {:.3e}",
        err[1]
    );
    assert!(
        err[2] > 1e-2,
        "the rows below {D} did not change the logits (rel-L2 {:.3e}): the test proves nothing",
        err[2]
    );
}

/// `pipeline_cache_out` (`run --pipeline-cache-out`): the driver's pipeline cache, written
/// once the decode pipelines are built, is a Vulkan pipeline cache blob for this device (header
/// length ≥ 32, header version one, the device's vendor ID); a path that cannot be written
/// fails the decoder's creation and names the path.
#[test]
fn the_pipeline_cache_out_file_holds_this_devices_cache_header_or_the_error_names_the_path() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let dir = std::env::temp_dir().join(format!("baro-pcache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("decode.vkcache");
    let opts = DecoderOptions {
        max_seq: 4,
        instrument: true,
        ring_every: 2,
        pipeline_cache_out: Some(path.clone()),
        ..Default::default()
    };
    drop(VulkanDecoder::new(ctx.clone(), &model, opts.clone()).expect("decoder"));
    let blob = std::fs::read(&path).expect("the cache file was written");
    let word = |i: usize| {
        u32::from_le_bytes([
            blob[4 * i],
            blob[4 * i + 1],
            blob[4 * i + 2],
            blob[4 * i + 3],
        ])
    };
    assert!(blob.len() >= 32, "{} bytes", blob.len());
    assert!(word(0) >= 32, "header length {}", word(0));
    assert_eq!(word(1), 1, "header version");
    assert_eq!(word(2), ctx.info.vendor_id, "vendor ID");
    let bad = dir.join("missing").join("decode.vkcache");
    let err = VulkanDecoder::new(
        ctx.clone(),
        &model,
        DecoderOptions {
            pipeline_cache_out: Some(bad.clone()),
            ..opts
        },
    )
    .err()
    .expect("an unwritable path was accepted");
    assert!(
        err.to_string().contains(&bad.display().to_string()),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
