//! The correctness anchor: stories260K (upstream llama2.c goldens) on the CPU reference,
//! from the embedded checkpoint and after conversion to GGUF.

use baro_engine::generate::generate;
use baro_engine::model::Model;
use baro_engine::quant::GgmlType;
use baro_engine::reference::CpuDecoder;
use baro_engine::sampler::Sampler;

const GOLDEN_TEXT: &[u8] = include_bytes!("../../models/stories260K/greedy_empty_prompt_200.txt");
const GOLDEN_JSON: &str = include_str!("../../models/stories260K/expected_greedy.json");

pub(crate) fn golden_ids() -> Vec<u32> {
    let v: serde_json::Value =
        serde_json::from_str(GOLDEN_JSON).expect("expected_greedy.json parses");
    v["cases"][0]["tokens_after_bos"]
        .as_array()
        .expect("tokens_after_bos")
        .iter()
        .map(|t| t.as_u64().expect("id") as u32)
        .collect()
}

fn greedy(model: &Model, prompt: &str, steps: usize) -> (Vec<u8>, Vec<u32>) {
    let mut dec = CpuDecoder::new(&model.config, &model.weights, steps);
    let mut sampler = Sampler::new(model.config.vocab_size, 0.0, 0.9, 1);
    let mut out = Vec::new();
    let g = generate(
        &mut dec,
        &model.tokenizer,
        &mut sampler,
        prompt.as_bytes(),
        steps,
        &mut out,
    )
    .expect("generate");
    (out, g.tokens)
}

#[test]
fn embedded_stories260k_greedy_200_matches_upstream_text_and_ids() {
    let model = Model::embedded().expect("embedded model");
    let (text, ids) = greedy(&model, "", 200);
    let mut want = GOLDEN_TEXT.to_vec();
    want.push(b'\n');
    assert_eq!(
        String::from_utf8_lossy(&text),
        String::from_utf8_lossy(&want)
    );
    assert_eq!(ids, golden_ids());
}

#[test]
fn golden_holds_after_conversion_to_gguf_f32() {
    let model = Model::embedded().expect("embedded model");
    let dir = std::env::temp_dir().join(format!("baro-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("stories260K.f32.gguf");
    model
        .write_gguf(&path, "stories260K", None, |_, _| {})
        .expect("write gguf");
    let back = Model::open(&path, None).expect("open gguf");
    assert_eq!(back.config, model.config);
    assert_eq!(back.tokenizer.vocab_size(), 512);
    let (text, ids) = greedy(&back, "", 200);
    assert_eq!(ids, golden_ids());
    assert!(text.starts_with(b"Once upon a time, there was a little girl named Lily."));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn f16_conversion_keeps_the_story_close() {
    // F16 weights are not the golden's weights, so only the opening is pinned.
    let model = Model::embedded()
        .expect("embedded model")
        .quantized(GgmlType::F16)
        .expect("f16");
    let (text, _) = greedy(&model, "", 30);
    assert!(
        text.starts_with(b"Once upon a time"),
        "{}",
        String::from_utf8_lossy(&text)
    );
}

#[test]
fn block_quantisation_of_stories260k_is_refused_with_the_tensor_named() {
    // hidden_dim 172 is not a multiple of the 32-element Q8_0/Q4_0 block.
    let model = Model::embedded().expect("embedded model");
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0] {
        let err = model.quantized(ty).err().expect("must fail").to_string();
        assert!(err.contains("ffn_down") && err.contains("172"), "{err}");
    }
}

#[test]
fn prompt_positions_are_forced_and_counted_in_steps() {
    let model = Model::embedded().expect("embedded model");
    let prompt_ids = model.tokenizer.encode(b"Once upon a time", true, false);
    let (text, ids) = greedy(&model, "Once upon a time", 10);
    // -n counts positions, prompt included: each of the 10 positions emits one token.
    assert_eq!(ids.len(), 10);
    assert_eq!(&ids[..prompt_ids.len() - 1], &prompt_ids[1..]);
    assert!(text.starts_with(b"Once upon a time"));
    assert_eq!(*text.last().expect("newline"), b'\n');
}
