//! llama.cpp's own tokenizer test cases on its vocabulary files (tests/data/vocab, MIT, see
//! SOURCE.md there): every input must give exactly the ids llama.cpp gives (no BOS, special
//! tokens not parsed), and the pieces of those ids must spell the input again.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use baro_engine::gguf::{GgufFile, Value};
use baro_engine::model::tokenizer_from_gguf;
use baro_engine::tokenizer::Tokenizer;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vocab")
        .join(name)
}

/// The vocabulary `ggml-vocab-NAME.gguf`, decompressed to a temporary file (the GGUF reader
/// memory-maps a path) and built once per test binary (the tokenizer owns its data, so the file
/// goes away after).
fn vocab(name: &str) -> ((), Tokenizer) {
    type Slot = Arc<OnceLock<Tokenizer>>;
    static CACHE: OnceLock<Mutex<HashMap<String, Slot>>> = OnceLock::new();
    let slot = CACHE
        .get_or_init(Default::default)
        .lock()
        .expect("cache lock")
        .entry(name.to_owned())
        .or_default()
        .clone();
    let tok = slot.get_or_init(|| {
        let (_dir, path) = vocab_file(name);
        let file = GgufFile::open(&path).expect("gguf parses");
        tokenizer_from_gguf(&file).expect("tokenizer builds")
    });
    ((), tok.clone())
}

/// The decompressed vocabulary file `ggml-vocab-NAME.gguf` in a temporary directory.
fn vocab_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let zst =
        std::fs::File::open(data(&format!("ggml-vocab-{name}.gguf.zst"))).expect("vocab file");
    let mut dec =
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(zst)).expect("zstd frame");
    let mut bytes = Vec::new();
    dec.read_to_end(&mut bytes).expect("zstd data");
    let dir = tempfile::tempdir().expect("tmp dir");
    let path = dir.path().join(format!("ggml-vocab-{name}.gguf"));
    std::fs::write(&path, &bytes).expect("write vocab");
    (dir, path)
}

/// The cases of `ggml-vocab-NAME.gguf{set}.inp` / `.out` (`set` "" for llama.cpp's own,
/// ".adversarial" for ours), split as llama.cpp's test-tokenizer-0.
fn cases(name: &str, set: &str) -> Vec<(String, Vec<u32>)> {
    let inp =
        std::fs::read_to_string(data(&format!("ggml-vocab-{name}.gguf{set}.inp"))).expect(".inp");
    let out =
        std::fs::read_to_string(data(&format!("ggml-vocab-{name}.gguf{set}.out"))).expect(".out");
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

fn check(name: &str, set: &str) {
    let (_dir, tok) = vocab(name);
    let cases = cases(name, set);
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
        // SPM writes spaces as '▁' before tokenizing, so a '▁' in the text comes back a space.
        let expect = if spm {
            format!(" {text}").replace('\u{2581}', " ")
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
    check("llama-bpe", "");
}

#[test]
fn qwen2_vocabulary_reproduces_every_llama_cpp_case() {
    check("qwen2", "");
}

#[test]
fn gpt2_vocabulary_reproduces_every_llama_cpp_case() {
    check("gpt-2", "");
}

#[test]
fn llama_spm_vocabulary_reproduces_every_llama_cpp_case() {
    check("llama-spm", "");
}

// The adversarial sets: whitespace runs of every kind, digit runs, mixed-case contractions,
// ZWJ emoji, combining marks, special-token text (not parsed), control characters, long runs;
// their ids are llama.cpp's (llama_tokenize, no BOS, parse_special off), found by a
// differential fuzz against it (SOURCE.md).

#[test]
fn llama_bpe_vocabulary_reproduces_every_adversarial_case() {
    check("llama-bpe", ".adversarial");
}

#[test]
fn qwen2_vocabulary_reproduces_every_adversarial_case() {
    check("qwen2", ".adversarial");
}

#[test]
fn gpt2_vocabulary_reproduces_every_adversarial_case() {
    check("gpt-2", ".adversarial");
}

#[test]
fn llama_spm_vocabulary_reproduces_every_adversarial_case() {
    check("llama-spm", ".adversarial");
}

#[test]
fn invalid_utf8_and_nul_bytes_tokenize_as_in_llama_cpp() {
    // Byte-level BPE decodes each invalid byte to U+FFFD (surrogates and overlong forms to the
    // value their bits spell); SPM keeps the bytes, grouping a lead byte with the next ones
    // whatever they are (`\xe2\x82` takes the first byte of the `▁` the space became).
    // Ids from llama.cpp's llama_tokenize (no BOS, parse_special off).
    let texts: [&[u8]; 6] = [
        b"\xff",
        b"a\xc3(",
        b"\xed\xa0\x80",
        b"\xc0\x80",
        b"x\0y",
        b"\xe2\x82 z",
    ];
    let want: [(&str, [&[u32]; 6]); 4] = [
        (
            "llama-spm",
            [
                &[29871, 258],
                &[263, 198, 43],
                &[29871, 240, 163, 131],
                &[29871, 195, 131],
                &[921, 3, 29891],
                &[29871, 229, 133, 229, 153, 132, 29920],
            ],
        ),
        (
            "llama-bpe",
            [
                &[5809],
                &[64, 5809, 7],
                &[169, 64319],
                &[188],
                &[87, 188, 88],
                &[10178, 1167],
            ],
        ),
        (
            "qwen2",
            [
                &[5691],
                &[64, 5691, 7],
                &[169, 63219],
                &[188],
                &[87, 188, 88],
                &[9973, 1147],
            ],
        ),
        (
            "gpt-2",
            [
                &[4210],
                &[64, 4210, 7],
                &[169, 254, 222],
                &[188],
                &[87, 188, 88],
                &[6353, 1976],
            ],
        ),
    ];
    for (name, ids) in want {
        let (_d, t) = vocab(name);
        for (text, want) in texts.iter().zip(ids) {
            assert_eq!(t.tokenize(text, false, false), want, "{name} {text:?}");
        }
    }
}

#[test]
fn code_points_that_unicode_16_assigns_split_as_in_llama_cpp_s_unicode_15_1_tables() {
    // U+1C89 and U+10D40 are letters / numbers from Unicode 16 on; llama.cpp's tables (15.1)
    // leave them undefined, so its pre-tokenizers split them as punctuation. Ids from
    // llama.cpp's llama-tokenize (--no-bos) on these vocabularies.
    let cases: [(&str, &str, &[u32]); 5] = [
        ("llama-bpe", "\u{1c89}'s", &[157, 110, 231, 6, 82]),
        ("qwen2", "\u{1c89}'s", &[128233, 231, 6, 82]),
        ("gpt-2", "\u{1c89}'s", &[157, 110, 231, 6, 82]),
        ("llama-bpe", " \u{10d40}", &[109697, 238, 113, 222]),
        ("qwen2", "\u{10d40}'s", &[123934, 113, 222, 6, 82]),
    ];
    for (name, text, want) in cases {
        let (_d, t) = vocab(name);
        assert_eq!(
            t.tokenize(text.as_bytes(), false, false),
            want,
            "{name} {text:?}"
        );
    }
}

#[test]
fn control_tokens_come_from_prompt_text_only_with_parse_special() {
    let (_d, t) = vocab("llama-bpe");
    let eot = t.token_id("<|eot_id|>").expect("<|eot_id|>");
    assert_eq!(eot, 128009);
    let plain = t.tokenize(b"a<|eot_id|>", false, false);
    assert!(!plain.contains(&eot), "{plain:?}");
    assert!(plain.len() > 3, "{plain:?}");
    assert_eq!(t.tokenize(b"a<|eot_id|>", false, true), [64, eot]);
    let (_d, q) = vocab("qwen2");
    let im_start = q.token_id("<|im_start|>").expect("<|im_start|>");
    assert_eq!(q.tokenize(b"<|im_start|>", false, true), [im_start]);
    assert_ne!(q.tokenize(b"<|im_start|>", false, false), [im_start]);
}

#[test]
fn bos_and_eos_follow_the_metadata_and_llama_cpp_defaults() {
    // llama-bpe: no add_bos_token key, llama.cpp's default for the Llama 3 pre-tokenizer adds BOS.
    let (_d, t) = vocab("llama-bpe");
    assert_eq!(t.tokenize(b"Hi", true, false)[0], 128000);
    assert_eq!(t.tokenize(b"Hi", false, false), [13347]);
    // qwen2 and gpt-2: BPE default adds nothing.
    let (_d, q) = vocab("qwen2");
    assert_eq!(
        q.tokenize(b"Hi", true, false),
        q.tokenize(b"Hi", false, false)
    );
    let (_d, g) = vocab("gpt-2");
    assert_eq!(
        g.tokenize(b"Hi", true, false),
        g.tokenize(b"Hi", false, false)
    );
    // llama-spm: add_bos_token true, add_eos_token false.
    let (_d, s) = vocab("llama-spm");
    let ids = s.tokenize(b"Hi", true, false);
    assert_eq!(ids[0], 1);
    assert_ne!(*ids.last().expect("ids"), 2);
    assert_eq!(s.encode(b"Hi", true, false), ids);
}

#[test]
fn end_of_generation_ids_are_the_metadata_ones_and_llama_cpp_s_control_texts() {
    let (_d, t) = vocab("llama-bpe");
    for text in ["<|end_of_text|>", "<|eot_id|>"] {
        let id = t.token_id(text).expect(text);
        assert!(t.is_eog(id), "{text}");
    }
    assert!(!t.is_eog(128000), "BOS does not end a generation");
    assert!(!t.is_eog(13347));
    let (_d, q) = vocab("qwen2");
    for text in ["<|im_end|>", "<|endoftext|>"] {
        assert!(q.is_eog(q.token_id(text).expect(text)), "{text}");
    }
    assert!(!q.is_eog(q.token_id("<|im_start|>").expect("im_start")));
    let (_d, s) = vocab("llama-spm");
    assert!(s.is_eog(2) && !s.is_eog(1));
}

#[test]
fn control_tokens_decode_to_nothing_unless_asked() {
    let (_d, t) = vocab("llama-bpe");
    let eot = t.token_id("<|eot_id|>").expect("eot");
    assert_eq!(t.decode(64, eot), b"");
    assert_eq!(t.decode_special(64, eot, true), b"<|eot_id|>");
    // Byte-level BPE: 'Ġ' is a space.
    let hello = t.tokenize(b" Hello", false, false);
    assert_eq!(hello.len(), 1);
    assert_eq!(t.decode(64, hello[0]), b" Hello");
    // SPM: the space prefix goes after BOS, '<0xXX>' is the byte.
    let (_d, s) = vocab("llama-spm");
    let ids = s.tokenize(b"Hello", true, false);
    assert_eq!(s.decode(ids[0], ids[1]), b"Hello");
    assert_eq!(s.decode(0, ids[1]), b" Hello");
    let nl = s.token_id("<0x0A>").expect("<0x0A>");
    assert_eq!(s.decode(5, nl), b"\n");
}

#[test]
fn a_character_split_over_byte_tokens_streams_as_one_valid_character() {
    use baro_engine::tokenizer::TokenText;
    let (_d, s) = vocab("llama-spm");
    // The SPM vocabulary has no piece for this emoji: four <0xXX> byte tokens.
    let ids = s.tokenize("\u{1F9A9}".as_bytes(), true, false);
    assert_eq!(ids.len(), 6, "{ids:?}"); // BOS, '▁', 4 bytes
    let mut text = TokenText::new(&s, ids[0], false);
    let outs: Vec<Vec<u8>> = ids[1..].iter().map(|&id| text.push(id)).collect();
    assert_eq!(outs[..4], [b"".to_vec(), vec![], vec![], vec![]]);
    assert_eq!(outs[4], "\u{1F9A9}".as_bytes());
    assert!(text.finish().is_empty());
}

#[test]
fn a_chat_prompt_tokenizes_its_header_tokens_as_control_tokens() {
    use baro_engine::tokenizer::chat::ChatTemplate;
    let (_d, t) = vocab("llama-bpe");
    let p = ChatTemplate::Llama3.user_prompt("Hi");
    let ids = t.tokenize(p.as_bytes(), true, true);
    let id = |s: &str| t.token_id(s).expect(s);
    assert_eq!(ids[..3], [128000, id("<|start_header_id|>"), 882]); // 882 = "user"
    assert_eq!(ids.iter().filter(|&&x| x == id("<|eot_id|>")).count(), 1);
    assert_eq!(*ids.last().expect("ids"), 271); // "\n\n"
    let (_d, q) = vocab("qwen2");
    let p = ChatTemplate::ChatMl.user_prompt("Hi");
    let ids = q.tokenize(p.as_bytes(), true, true);
    assert_eq!(ids[0], q.token_id("<|im_start|>").expect("im_start"));
    assert_eq!(
        ids.iter()
            .filter(|&&x| x == q.token_id("<|im_end|>").expect("im_end"))
            .count(),
        1
    );
}

/// The error of the gpt-2 (or `base`) vocabulary with its metadata changed by `edit`.
fn crafted(base: &str, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> String {
    let (dir, path) = vocab_file(base);
    let file = GgufFile::open(&path).expect("gguf parses");
    let mut md = file.metadata.clone();
    edit(&mut md);
    let out = dir.path().join("crafted.gguf");
    baro_engine::gguf::write_file(&out, &md, &[]).expect("write crafted");
    let file = GgufFile::open(&out).expect("crafted gguf parses");
    match tokenizer_from_gguf(&file) {
        Ok(_) => panic!("a crafted {base} vocabulary was accepted"),
        Err(e) => e.to_string(),
    }
}

fn set(md: &mut [(String, Value)], key: &str, v: Value) {
    let slot = md.iter_mut().find(|(k, _)| k == key).expect(key);
    slot.1 = v;
}

fn array_mut<'a>(md: &'a mut [(String, Value)], key: &str) -> &'a mut Vec<Value> {
    match &mut md.iter_mut().find(|(k, _)| k == key).expect(key).1 {
        Value::Array(a) => a,
        _ => panic!("{key} is not an array"),
    }
}

#[test]
fn crafted_vocabularies_are_refused_saying_what_and_where() {
    let e = crafted("gpt-2", |md| {
        set(
            md,
            "tokenizer.ggml.pre",
            Value::String("deepseek-llm".into()),
        )
    });
    assert!(
        e.contains("tokenizer.ggml.pre is 'deepseek-llm'") && e.contains("llama-bpe"),
        "{e}"
    );
    let e = crafted("gpt-2", |md| md.retain(|(k, _)| k != "tokenizer.ggml.pre"));
    assert!(e.contains("tokenizer.ggml.pre is missing"), "{e}");
    let e = crafted("gpt-2", |md| {
        set(md, "tokenizer.ggml.model", Value::String("t5".into()))
    });
    assert!(e.contains("tokenizer.ggml.model is 't5'"), "{e}");
    let e = crafted("gpt-2", |md| {
        set(md, "tokenizer.ggml.eos_token_id", Value::U32(50257))
    });
    assert!(
        e.contains("tokenizer.ggml.eos_token_id = 50257 is outside the vocabulary of 50257"),
        "{e}"
    );
    let e = crafted("gpt-2", |md| {
        array_mut(md, "tokenizer.ggml.token_type").pop();
    });
    assert!(
        e.contains(
            "tokenizer.ggml.token_type has 50256 entries but tokenizer.ggml.tokens has 50257"
        ),
        "{e}"
    );
    let e = crafted("gpt-2", |md| {
        array_mut(md, "tokenizer.ggml.token_type")[7] = Value::I32(9)
    });
    assert!(e.contains("tokenizer.ggml.token_type[7] is 9"), "{e}");
    let e = crafted("gpt-2", |md| {
        array_mut(md, "tokenizer.ggml.merges")[3] = Value::String("nospace".into())
    });
    assert!(e.contains("tokenizer.ggml.merges[3] \"nospace\""), "{e}");
    let e = crafted("gpt-2", |md| {
        md.retain(|(k, _)| k != "tokenizer.ggml.merges")
    });
    assert!(e.contains("tokenizer.ggml.merges is missing"), "{e}");
    let e = crafted("gpt-2", |md| {
        set(
            md,
            "tokenizer.ggml.tokens",
            Value::Array(vec![Value::U32(5); 50257]),
        )
    });
    assert!(
        e.contains("tokenizer.ggml.tokens[0] is u32, expected a string"),
        "{e}"
    );
    let e = crafted("gpt-2", |md| {
        set(md, "tokenizer.ggml.bos_token_id", Value::String("x".into()))
    });
    assert!(e.contains("tokenizer.ggml.bos_token_id"), "{e}");
    // A byte token must name a byte.
    let e = crafted("llama-spm", |md| {
        array_mut(md, "tokenizer.ggml.tokens")[3] = Value::String("<0xZZ>".into())
    });
    assert!(
        e.contains("tokenizer.ggml.tokens[3] \"<0xZZ>\" has token type 6"),
        "{e}"
    );
    let e = crafted("llama-spm", |md| {
        array_mut(md, "tokenizer.ggml.scores").push(Value::F32(0.0));
    });
    assert!(e.contains("tokenizer.ggml.scores has 32001 entries"), "{e}");
    let e = crafted("llama-spm", |md| {
        set(md, "tokenizer.ggml.add_bos_token", Value::U8(1))
    });
    assert!(
        e.contains("tokenizer.ggml.add_bos_token is u8, expected a bool"),
        "{e}"
    );
}

/// A decoder whose logits pick `script[pos]` at each position (the prompt positions' picks
/// are ignored: generate forces the prompt).
struct Scripted {
    vocab: usize,
    script: Vec<u32>,
    logits: Vec<f32>,
}

impl baro_engine::generate::Decode for Scripted {
    fn max_seq(&self) -> usize {
        self.script.len() + 1
    }
    fn forward(&mut self, _token: u32, pos: usize) -> baro_engine::Result<&mut [f32]> {
        self.logits.clear();
        self.logits.resize(self.vocab, 0.0);
        if let Some(&id) = self.script.get(pos) {
            self.logits[id as usize] = 1.0;
        }
        Ok(&mut self.logits)
    }
}

#[test]
fn generation_stops_at_an_end_of_generation_token_and_prints_whole_characters() {
    use baro_engine::generate::{generate_with, GenerateOptions};
    use baro_engine::sampler::Sampler;
    let (_d, t) = vocab("llama-bpe");
    let prompt = t.tokenize(b"Hi", true, false); // [BOS, Hi]
    let eot = t.token_id("<|eot_id|>").expect("eot");
    // An emoji whose bytes byte-level BPE splits over several tokens, then EOT, then more.
    let emoji = t.tokenize("\u{1F9A9}".as_bytes(), false, false);
    assert!(emoji.len() > 1, "{emoji:?}");
    let mut script = vec![0; prompt.len() - 1];
    script.extend(t.tokenize(b" there", false, false));
    script.extend(&emoji);
    script.push(eot);
    script.extend(t.tokenize(b" never", false, false));
    let mut dec = Scripted {
        vocab: t.vocab_size(),
        script: script.clone(),
        logits: Vec::new(),
    };
    let mut sampler = Sampler::new(t.vocab_size(), 0.0, 0.9, 1);
    let mut out = Vec::new();
    let g = generate_with(
        &mut dec,
        &t,
        &mut sampler,
        b"Hi",
        100,
        &mut out,
        GenerateOptions::default(),
    )
    .expect("generate");
    assert_eq!(
        String::from_utf8(out).expect("valid UTF-8"),
        "Hi there\u{1F9A9}\n"
    );
    assert!(!g.tokens.contains(&eot));
    assert_eq!(
        *g.tokens.last().expect("tokens"),
        *emoji.last().expect("emoji")
    );
}

/// The model fixtures (tests/data/models, made by llama.cpp) carry llama.cpp's prompt ids:
/// the vocabulary of each file must give the same ids for the same prompt, BOS as the file says.
#[test]
fn fixture_prompts_tokenize_to_llama_cpp_s_prompt_ids() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/models");
    let tmp = tempfile::tempdir().expect("tmp dir");
    let mut checked = 0;
    for name in ["llama3-q4_0", "qwen2-q4_0", "qwen3-q4_0", "kq-q4_0"] {
        let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("fixture json");
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        let zst = std::fs::File::open(dir.join(format!("{name}.gguf.zst"))).expect("fixture");
        let mut dec =
            ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(zst)).expect("zstd");
        let mut bytes = Vec::new();
        dec.read_to_end(&mut bytes).expect("zstd data");
        let path = tmp.path().join(format!("{name}.gguf"));
        std::fs::write(&path, &bytes).expect("write");
        let file = GgufFile::open(&path).expect("gguf");
        let tok = tokenizer_from_gguf(&file).expect("tokenizer");
        for case in v["cases"].as_array().expect("cases") {
            let prompt = case["prompt"].as_str().expect("prompt");
            let want: Vec<u32> = case["prompt_ids"]
                .as_array()
                .expect("prompt_ids")
                .iter()
                .map(|x| x.as_u64().expect("id") as u32)
                .collect();
            assert_eq!(
                tok.tokenize(prompt.as_bytes(), true, false),
                want,
                "{name}: {prompt:?}"
            );
            // llama.cpp's greedy text decodes to valid UTF-8 through the streaming decoder.
            let mut text =
                baro_engine::tokenizer::TokenText::new(&tok, *want.last().expect("ids"), false);
            let mut out = Vec::new();
            for id in case["generated"].as_array().expect("generated") {
                out.extend(text.push(id.as_u64().expect("id") as u32));
            }
            out.extend(text.finish());
            assert!(std::str::from_utf8(&out).is_ok(), "{name}");
            checked += 1;
        }
    }
    assert!(checked >= 12, "{checked} prompts");
}

#[test]
fn a_prompt_without_bos_is_printed_from_its_first_token() {
    use baro_engine::generate::{generate_with, GenerateOptions};
    use baro_engine::sampler::Sampler;
    let (_d, q) = vocab("qwen2");
    let prompt = q.tokenize(b"Hello world", true, false);
    assert_eq!(prompt.len(), 2, "qwen2 adds no BOS: {prompt:?}");
    let eos = q.eos_id();
    let mut dec = Scripted {
        vocab: q.vocab_size(),
        script: vec![0, eos],
        logits: Vec::new(),
    };
    let mut sampler = Sampler::new(q.vocab_size(), 0.0, 0.9, 1);
    let mut out = Vec::new();
    let g = generate_with(
        &mut dec,
        &q,
        &mut sampler,
        b"Hello world",
        10,
        &mut out,
        GenerateOptions::default(),
    )
    .expect("generate");
    assert_eq!(String::from_utf8_lossy(&out), "Hello world\n");
    assert_eq!(g.positions, 2);
}

#[test]
fn a_vocabulary_read_from_gguf_is_written_back_unchanged() {
    let (dir, path) = vocab_file("llama-bpe");
    let file = GgufFile::open(&path).expect("gguf");
    let tok = tokenizer_from_gguf(&file).expect("tokenizer");
    let md = baro_engine::model::tokenizer_gguf_metadata(&tok).expect("metadata");
    let want: Vec<_> = file
        .metadata
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .cloned()
        .collect();
    assert_eq!(md, want);
    let out = dir.path().join("back.gguf");
    baro_engine::gguf::write_file(&out, &md, &[]).expect("write");
    let back = tokenizer_from_gguf(&GgufFile::open(&out).expect("gguf")).expect("tokenizer");
    let text = "Hello world! 1234 \u{1F9A9} <|eot_id|>";
    assert_eq!(
        back.tokenize(text.as_bytes(), true, true),
        tok.tokenize(text.as_bytes(), true, true)
    );
}

/// The tokenizer of vocabulary `base` with its metadata changed by `edit`.
fn edited(base: &str, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> Tokenizer {
    let (dir, path) = vocab_file(base);
    let mut md = GgufFile::open(&path).expect("gguf").metadata.clone();
    edit(&mut md);
    let out = dir.path().join("edited.gguf");
    baro_engine::gguf::write_file(&out, &md, &[]).expect("write");
    tokenizer_from_gguf(&GgufFile::open(&out).expect("gguf")).expect("tokenizer")
}

#[test]
fn user_defined_tokens_are_matched_in_plain_text_and_space_prefix_follows_the_metadata() {
    let (_d, g) = vocab("gpt-2");
    let id = g.token_id("world").expect("world");
    let (a, b) = (g.token_id("a").expect("a"), g.token_id("b").expect("b"));
    assert_ne!(g.tokenize(b"aworldb", false, false), [a, id, b]);
    // The same token made user-defined (type 4) is cut out of plain text first, as llama.cpp
    // does (a control token would need parse_special).
    let u = edited("gpt-2", |md| {
        array_mut(md, "tokenizer.ggml.token_type")[id as usize] = Value::I32(4)
    });
    assert_eq!(u.tokenize(b"aworldb", false, false), [a, id, b]);
    let c = edited("gpt-2", |md| {
        array_mut(md, "tokenizer.ggml.token_type")[id as usize] = Value::I32(3)
    });
    assert_eq!(
        c.tokenize(b"aworldb", false, false),
        g.tokenize(b"aworldb", false, false)
    );
    assert_eq!(c.tokenize(b"aworldb", false, true), [a, id, b]);
    // SPM: add_space_prefix false drops the leading '▁'.
    let (_d, s) = vocab("llama-spm");
    let with = s.tokenize(b"Hello", false, false);
    let n = edited("llama-spm", |md| {
        md.push(("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)))
    });
    let without = n.tokenize(b"Hello", false, false);
    assert_ne!(with, without);
    assert!(!n.decode(0, without[0]).starts_with(b" "));
    assert!(s.decode(0, with[0]).starts_with(b" "));
}
