//! baro-top against llama.cpp on llama.cpp's own files (tests/data/models, README.md there):
//! GGUFs that `llama-quantize` wrote in every supported tensor type and in the llama (Llama-3.2
//! rope), qwen2 and qwen3 architectures with real vocabularies, and the greedy ids, top-4 logits
//! and margins llama.cpp decoded from them. The prompts are fed as llama.cpp's token ids, so
//! the decode checks do not depend on the tokenizer; one test checks the tokenizer separately.
//!
//! Rules (also in each golden): the ids must equal llama.cpp's; a first divergence is accepted
//! only where llama.cpp's own top-1/top-2 margin is below `near_tie_rel` (1e-3) of the step's
//! logit range, and that case ends there. At every compared step the decoder's logits of the
//! golden's 4 leading ids are within `logit_tol_rel` (1 %) of the range of llama.cpp's
//! (llama.cpp quantises activations in its matmuls: 0.2-0.6 % apart from an f32 reference).
//!
//! The CPU reference decodes all 3 prompts x 64 tokens. On Vulkan (lavapipe in CI) mega and
//! multi decode the first prompt and its first `VK_STEPS` tokens, bit-identical to each other;
//! `BARO_REAL_MODELS_FULL=1` makes them decode everything (the H200 run,
//! scripts/fixtures/check.sh). `BARO_FIXTURES` points at another copy of the fixtures.
//! Every test prints one `fixture path: ...` line, which check.sh collects.

use crate::common;

use std::io::Read;
use std::path::PathBuf;

use baro_engine::model::Model;
use baro_engine::reference::CpuDecoder;
use baro_engine::vulkan::{DecoderOptions, DeviceKind, Dispatch, VulkanDecoder};
use serde_json::Value;

/// Generated tokens per case on Vulkan unless BARO_REAL_MODELS_FULL is set.
const VK_STEPS: usize = 6;

fn dir() -> PathBuf {
    match std::env::var_os("BARO_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/models"),
    }
}

fn full() -> bool {
    std::env::var("BARO_REAL_MODELS_FULL").is_ok_and(|v| !v.is_empty() && v != "0")
}

struct Step {
    top: Vec<(u32, f32)>,
    margin: f32,
    range: f32,
}

struct Case {
    prompt: String,
    prompt_ids: Vec<u32>,
    generated: Vec<u32>,
    steps: Vec<Step>,
}

struct Golden {
    near_tie_rel: f32,
    logit_tol_rel: f32,
    cases: Vec<Case>,
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|t| t.as_u64().expect("id") as u32)
        .collect()
}

fn golden(name: &str) -> Golden {
    let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).expect("golden");
    let v: Value = serde_json::from_str(&text).expect("golden parses");
    let f = |k: &str| v[k].as_f64().expect(k) as f32;
    let cases = v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case {
            prompt: c["prompt"].as_str().expect("prompt").to_owned(),
            prompt_ids: ids(&c["prompt_ids"]),
            generated: ids(&c["generated"]),
            steps: c["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .map(|s| Step {
                    top: s["top"]
                        .as_array()
                        .expect("top")
                        .iter()
                        .map(|p| {
                            (
                                p[0].as_u64().expect("top id") as u32,
                                p[1].as_f64().expect("top logit") as f32,
                            )
                        })
                        .collect(),
                    margin: s["margin"].as_f64().expect("margin") as f32,
                    range: s["range"].as_f64().expect("range") as f32,
                })
                .collect(),
        })
        .collect();
    Golden {
        near_tie_rel: f("near_tie_rel"),
        logit_tol_rel: f("logit_tol_rel"),
        cases,
    }
}

/// The fixture decompressed to a temporary file (the loader memory-maps a path) and loaded.
pub(crate) fn model(name: &str) -> (tempfile::TempDir, Model) {
    let zst = std::fs::File::open(dir().join(format!("{name}.gguf.zst"))).expect("fixture file");
    let mut dec =
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(zst)).expect("zstd frame");
    let mut bytes = Vec::new();
    dec.read_to_end(&mut bytes).expect("zstd data");
    let tmp = tempfile::tempdir().expect("tmp dir");
    let path = tmp.path().join(format!("{name}.gguf"));
    std::fs::write(&path, &bytes).expect("write fixture");
    let m = Model::open(&path, None).unwrap_or_else(|e| panic!("{name}: {e}"));
    (tmp, m)
}

fn argmax(l: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in l.iter().enumerate() {
        if v > l[best] {
            best = i;
        }
    }
    best as u32
}

/// What one decode path did on one fixture.
#[derive(Default)]
struct Tally {
    steps: usize,
    near_ties: Vec<String>,
    worst_logit_rel: f32,
}

/// Decode every case (the first `cases`, `steps` tokens each) through `forward` and hold it to
/// the golden's rules; `forward(token, pos)` returns that position's logits.
fn compare(
    name: &str,
    g: &Golden,
    cases: usize,
    steps: usize,
    mut forward: impl FnMut(u32, usize) -> Vec<f32>,
) -> Tally {
    let mut t = Tally::default();
    for (ci, c) in g.cases.iter().take(cases).enumerate() {
        let n = c.prompt_ids.len();
        let mut logits = Vec::new();
        for (pos, &tok) in c.prompt_ids.iter().enumerate() {
            logits = forward(tok, pos);
        }
        for (i, (st, &want)) in c.steps.iter().zip(&c.generated).take(steps).enumerate() {
            let got = argmax(&logits);
            if got != want {
                assert!(
                    st.margin < g.near_tie_rel * st.range,
                    "{name} case {ci} ({:?}) step {i}: got {got}, llama.cpp {want} with margin {} \
                     of range {} (near-tie threshold {})",
                    c.prompt,
                    st.margin,
                    st.range,
                    g.near_tie_rel
                );
                t.near_ties
                    .push(format!("case {ci} step {i} (margin {})", st.margin));
                break;
            }
            for &(id, want_l) in &st.top {
                let d = (logits[id as usize] - want_l).abs() / st.range;
                assert!(
                    d <= g.logit_tol_rel,
                    "{name} case {ci} step {i}: logit of {id} is {} vs llama.cpp's {want_l}: \
                     {d:.4} of the range {} (tolerance {})",
                    logits[id as usize],
                    st.range,
                    g.logit_tol_rel
                );
                t.worst_logit_rel = t.worst_logit_rel.max(d);
            }
            t.steps += 1;
            if i + 1 < steps.min(c.generated.len()) {
                logits = forward(want, n + i);
            }
        }
    }
    t
}

fn line(name: &str, path: &str, t: &Tally) {
    println!(
        "fixture {name} {path}: ok, {} steps, near-ties accepted {} {:?}, max |dlogit|/range {:.2e}",
        t.steps,
        t.near_ties.len(),
        t.near_ties,
        t.worst_logit_rel
    );
}

fn cpu(name: &str) {
    let g = golden(name);
    let (_tmp, m) = model(name);
    let mut dec = CpuDecoder::new(&m.config, &m.weights, m.config.seq_len);
    let t = compare(name, &g, usize::MAX, usize::MAX, |tok, pos| {
        dec.forward(tok, pos).to_vec()
    });
    let total: usize = g.cases.iter().map(|c| c.generated.len()).sum();
    assert!(
        t.steps == total || !t.near_ties.is_empty(),
        "{name}: {} of {total} steps compared",
        t.steps
    );
    line(name, "cpu", &t);
}

fn vulkan(name: &str) {
    vulkan_with(name, false)
}

/// Mega and multi bit for bit against llama.cpp; `mega_refused_on_cpu`: a CPU device must
/// refuse the megakernel (its head does not fit lavapipe's loop limit with room to wait).
fn vulkan_with(name: &str, mega_refused_on_cpu: bool) {
    let g = golden(name);
    let (_tmp, m) = model(name);
    let (ctx, _turn) = match common::device() {
        Some(d) => d,
        None => return,
    };
    let (cases, steps) = if full() {
        (usize::MAX, usize::MAX)
    } else {
        (1, VK_STEPS)
    };
    // The positions decoded: a CPU device sizes the launch for the run's last position.
    let max_seq = if full() {
        m.config.seq_len
    } else {
        g.cases[0].prompt_ids.len() + VK_STEPS
    };
    let opts = |dispatch| DecoderOptions {
        dispatch,
        max_seq,
        ..Default::default()
    };
    // On a CPU device a megakernel whose pass cannot leave the barriers' waits their share of
    // lavapipe's loop limit is refused (decoder/budget.rs): the 152k-token heads. Those decode
    // multi alone there, and the refusal is asserted, not skipped.
    let mut mega = match VulkanDecoder::new(ctx.clone(), &m, opts(Dispatch::Mega)) {
        Ok(d) => Some(d),
        Err(e) if mega_refused_on_cpu && ctx.info.kind == DeviceKind::Cpu => {
            let e = e.to_string();
            assert!(e.contains("--dispatch multi"), "{name}: {e}");
            None
        }
        Err(e) => panic!("{name}: mega: {e}"),
    };
    // At lavapipe's grid of 2 (CI: LP_NUM_THREADS=2) and the positions decoded here; more
    // threads give the head more teams.
    let grid2 = baro_engine::vulkan::default_grid(&ctx) <= 2 && !full();
    if mega_refused_on_cpu && ctx.info.kind == DeviceKind::Cpu && grid2 {
        assert!(
            mega.is_none(),
            "{name}: expected the CPU device to refuse mega"
        );
    }
    let mut multi = VulkanDecoder::new(ctx.clone(), &m, opts(Dispatch::Multi)).expect("multi");
    let mut passes = 0;
    let t = compare(name, &g, cases, steps, |tok, pos| {
        let b = multi.step(tok, pos).expect("multi pass");
        assert!(
            b.fail.ok(),
            "{name} pos {pos}: multi fail word {:#x}",
            b.fail.bits
        );
        let lb = multi.logits().to_vec();
        assert_eq!(
            b.argmax,
            argmax(&lb),
            "{name} pos {pos}: the GPU's own argmax"
        );
        if let Some(mega) = mega.as_mut() {
            let a = mega.step(tok, pos).expect("mega pass");
            assert!(
                a.fail.ok(),
                "{name} pos {pos}: mega fail word {:#x}",
                a.fail.bits
            );
            let same = lb
                .iter()
                .zip(mega.logits())
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{name} pos {pos}: mega and multi logits differ");
        }
        passes += 1;
        lb
    });
    assert!(t.steps >= 1, "{name}: nothing compared");
    let how = if mega.is_some() {
        "mega=multi"
    } else {
        "multi (mega refused on this CPU device)"
    };
    line(
        name,
        &format!("vulkan {how} ({} passes, {})", passes, ctx_name(&ctx)),
        &t,
    );
}

fn vulkan_multi_where_mega_cannot_fit(name: &str) {
    vulkan_with(name, true)
}

fn ctx_name(ctx: &baro_engine::vulkan::GpuContext) -> String {
    ctx.describe()
}

/// One test per fixture and path, named for what it asserts.
macro_rules! on {
    ($path:ident, $name:literal, $test:ident) => {
        #[test]
        fn $test() {
            $path($name);
        }
    };
}

on!(cpu, "kq-q4_k_m", cpu_reference_matches_llama_cpp_on_q4_k_m);
on!(cpu, "kq-q5_k_m", cpu_reference_matches_llama_cpp_on_q5_k_m);
on!(cpu, "kq-q6_k", cpu_reference_matches_llama_cpp_on_q6_k);
on!(cpu, "kq-q8_0", cpu_reference_matches_llama_cpp_on_q8_0);
on!(cpu, "kq-iq4_xs", cpu_reference_matches_llama_cpp_on_iq4_xs);
on!(cpu, "kq-iq4_nl", cpu_reference_matches_llama_cpp_on_iq4_nl);
on!(
    cpu,
    "kq-q4_0",
    cpu_reference_matches_llama_cpp_on_q4_0_with_q6_k_output
);
on!(
    cpu,
    "kq-mix-q5_0-q5_1-q4_1-bf16",
    cpu_reference_matches_llama_cpp_on_q5_0_q5_1_q4_1_bf16_mix
);
on!(
    cpu,
    "llama3-q4_0",
    cpu_reference_matches_llama_cpp_on_llama3_vocab_and_rope_freqs
);
on!(cpu, "qwen2-q4_0", cpu_reference_matches_llama_cpp_on_qwen2);
on!(cpu, "qwen3-q4_0", cpu_reference_matches_llama_cpp_on_qwen3);

// Vulkan: every fixture. The 128k-token vocabulary fits lavapipe's loop limit (65,535
// back-edges an invocation a dispatch) only because a CPU device's default workgroup grows to
// fit the pass (decoder/budget.rs: 480 lanes there, where 64 runs 8,000 head rows a team);
// the 152k ones run multi there (the megakernel is refused); check.sh's gate covers them on a
// GPU too.
on!(
    vulkan,
    "kq-q8_0",
    vulkan_mega_and_multi_match_llama_cpp_on_q8_0
);
on!(
    vulkan,
    "kq-q4_k_m",
    vulkan_mega_and_multi_match_llama_cpp_on_q4_k_m
);
on!(
    vulkan,
    "kq-q6_k",
    vulkan_mega_and_multi_match_llama_cpp_on_q6_k
);
on!(
    vulkan,
    "kq-q4_0",
    vulkan_mega_and_multi_match_llama_cpp_on_q4_0_with_q6_k_output
);
on!(
    vulkan,
    "kq-q5_k_m",
    vulkan_mega_and_multi_match_llama_cpp_on_q5_k_m
);
on!(
    vulkan,
    "kq-iq4_xs",
    vulkan_mega_and_multi_match_llama_cpp_on_iq4_xs
);
on!(
    vulkan,
    "kq-iq4_nl",
    vulkan_mega_and_multi_match_llama_cpp_on_iq4_nl
);
on!(
    vulkan,
    "kq-mix-q5_0-q5_1-q4_1-bf16",
    vulkan_mega_and_multi_match_llama_cpp_on_q5_0_q5_1_q4_1_bf16_mix
);
on!(
    vulkan,
    "llama3-q4_0",
    vulkan_mega_and_multi_match_llama_cpp_on_llama3_vocab_and_rope_freqs
);
on!(
    vulkan_multi_where_mega_cannot_fit,
    "qwen2-q4_0",
    vulkan_matches_llama_cpp_on_qwen2_and_a_cpu_device_refuses_its_megakernel
);
on!(
    vulkan_multi_where_mega_cannot_fit,
    "qwen3-q4_0",
    vulkan_matches_llama_cpp_on_qwen3_and_a_cpu_device_refuses_its_megakernel
);

#[test]
fn every_golden_prompt_tokenizes_as_llama_cpp_tokenized_it() {
    for name in ["kq-q8_0", "llama3-q4_0", "qwen2-q4_0", "qwen3-q4_0"] {
        let g = golden(name);
        let (_tmp, m) = model(name);
        for c in &g.cases {
            let got = m.tokenizer.tokenize(c.prompt.as_bytes(), true, false);
            assert_eq!(got, c.prompt_ids, "{name}: {:?}", c.prompt);
        }
    }
}

/// `model gen --quant q4_k_m` (and q5_k_m, q6_k) give every tensor of these files the type
/// llama-quantize gave it (read back from llama-quantize's own files), so the synthetic K-quant
/// files bench/ measures are the mixes people download.
#[test]
fn k_quant_mixes_type_every_tensor_as_llama_quantize_typed_the_fixtures() {
    use baro_engine::model::{KMix, Quant, Role, Tensor};
    use baro_engine::quant::GgmlType;
    for (name, mix) in [
        ("kq-q4_k_m", KMix::Q4KM),
        ("kq-q5_k_m", KMix::Q5KM),
        ("kq-q6_k", KMix::Q6K),
        ("kq-iq4_xs", KMix::IQ4XS),
        ("kq-iq4_nl", KMix::IQ4NL),
    ] {
        let (_tmp, m) = model(name);
        let (w, cfg) = (&m.weights, &m.config);
        let tied = w.output.is_none();
        let mut seen = vec![];
        let mut check = |t: &Tensor, role: Role, layer: usize| {
            let want = Quant::Mix(mix).tensor_type(role, layer, t.cols, cfg, tied);
            assert_eq!(want, t.ty, "{name}: {} ({role:?}, layer {layer})", t.name);
            seen.push(t.ty);
        };
        check(&w.token_embd, Role::TokenEmbd, 0);
        if let Some(o) = &w.output {
            check(o, Role::Output, 0);
        }
        for (i, l) in w.layers.iter().enumerate() {
            for (t, role) in [
                (&l.wq, Role::AttnQ),
                (&l.wk, Role::AttnK),
                (&l.wv, Role::AttnV),
                (&l.wo, Role::AttnOutput),
                (&l.w_gate, Role::FfnGate),
                (&l.w_up, Role::FfnUp),
                (&l.w_down, Role::FfnDown),
            ] {
                check(t, role, i);
            }
        }
        assert_eq!(seen.len(), 1 + usize::from(!tied) + 7 * cfg.n_layers);
        assert!(seen.contains(&GgmlType::Q6_K), "{name}: no Q6_K tensor");
        assert!(
            seen.contains(&mix.base()),
            "{name}: no {} tensor",
            mix.base()
        );
    }
}
