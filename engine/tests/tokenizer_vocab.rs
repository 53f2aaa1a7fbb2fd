//! llama.cpp's own tokenizer test cases on its vocabulary files (tests/data/vocab, MIT, see
//! SOURCE.md there): every input must give exactly the ids llama.cpp gives (no BOS, special
//! tokens not parsed), and the pieces of those ids must spell the input again.

use std::io::Read;
use std::path::PathBuf;

use baro_engine::gguf::GgufFile;
use baro_engine::model::tokenizer_from_gguf;
use baro_engine::tokenizer::Tokenizer;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vocab")
        .join(name)
}

/// The vocabulary `ggml-vocab-NAME.gguf`, decompressed to a temporary file (the GGUF reader
/// memory-maps a path).
fn vocab(name: &str) -> (tempfile::TempDir, Tokenizer) {
    let zst =
        std::fs::File::open(data(&format!("ggml-vocab-{name}.gguf.zst"))).expect("vocab file");
    let mut dec =
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(zst)).expect("zstd frame");
    let mut bytes = Vec::new();
    dec.read_to_end(&mut bytes).expect("zstd data");
    let dir = tempfile::tempdir().expect("tmp dir");
    let path = dir.path().join(format!("ggml-vocab-{name}.gguf"));
    std::fs::write(&path, &bytes).expect("write vocab");
    let file = GgufFile::open(&path).expect("gguf parses");
    let tok = tokenizer_from_gguf(&file).expect("tokenizer builds");
    (dir, tok)
}

/// The cases of `ggml-vocab-NAME.gguf.inp` / `.out`, split as llama.cpp's test-tokenizer-0.
fn cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(data(&format!("ggml-vocab-{name}.gguf.inp"))).expect(".inp");
    let out = std::fs::read_to_string(data(&format!("ggml-vocab-{name}.gguf.out"))).expect(".out");
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut rest = inp.as_str();
    while !rest.is_empty() {
        match rest.find(sep) {
            Some(i) => {
                inputs.push(rest[..i].to_owned());
                rest = &rest[i + sep.len()..];
            }
            None => {
                inputs.push(rest.to_owned());
                rest = "";
            }
        }
    }
    let outputs: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("id"))
                .collect()
        })
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{name}: inputs and outputs differ in number"
    );
    inputs.into_iter().zip(outputs).collect()
}

fn check(name: &str) {
    let (_dir, tok) = vocab(name);
    let cases = cases(name);
    assert!(cases.len() >= 40, "{name}: {} cases", cases.len());
    let mut failed = Vec::new();
    for (i, (text, want)) in cases.iter().enumerate() {
        let got = tok.tokenize(text.as_bytes(), false, false);
        if &got != want {
            failed.push(format!(
                "case {i} {text:?}:\n   want {want:?}\n    got {got:?}"
            ));
            continue;
        }
        // Decoding the ids gives the text back (SPM with the space prefix it added).
        let mut back = Vec::new();
        let mut prev = u32::MAX;
        for &id in &got {
            back.extend_from_slice(tok.decode_special(prev, id, true));
            prev = id;
        }
        let spm = name == "llama-spm" && !text.is_empty();
        let expect = if spm {
            format!(" {text}")
        } else {
            text.clone()
        };
        if back != expect.as_bytes() {
            failed.push(format!(
                "case {i} {text:?} decodes to {:?}",
                String::from_utf8_lossy(&back)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: {} of {} cases differ from llama.cpp; first: {}",
        failed.len(),
        cases.len(),
        failed[0]
    );
}

#[test]
fn llama_bpe_vocabulary_reproduces_every_llama_cpp_case() {
    check("llama-bpe");
}

#[test]
fn qwen2_vocabulary_reproduces_every_llama_cpp_case() {
    check("qwen2");
}

#[test]
fn gpt2_vocabulary_reproduces_every_llama_cpp_case() {
    check("gpt-2");
}

#[test]
fn llama_spm_vocabulary_reproduces_every_llama_cpp_case() {
    check("llama-spm");
}
