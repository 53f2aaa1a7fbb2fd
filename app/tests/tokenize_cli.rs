//! `baro-top tokenize` and the tokenizer options of `generate`, as a user runs them, on
//! llama.cpp's vocabulary files (engine/tests/data/vocab).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn baro(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

/// `ggml-vocab-NAME.gguf` decompressed into `dir`.
fn vocab(dir: &Path, name: &str) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/data/vocab")
        .join(format!("ggml-vocab-{name}.gguf.zst"));
    let f = std::fs::File::open(src).expect("vocab");
    let mut dec =
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(f)).expect("zstd");
    let mut bytes = Vec::new();
    dec.read_to_end(&mut bytes).expect("zstd data");
    let p = dir.join(format!("{name}.gguf"));
    std::fs::write(&p, bytes).expect("write");
    p
}

/// A fresh directory removed when dropped.
struct Tmp(PathBuf);
impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("baro-tok-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("tmp dir");
        Tmp(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf8 stdout")
}

#[test]
fn tokenize_prints_ids_and_pieces_like_llama_tokenize() {
    let dir = Tmp::new("ids");
    let p = vocab(dir.path(), "llama-bpe");
    let ps = p.to_str().expect("path");
    // Llama 3 adds BOS (128000); " world" is one token.
    assert_eq!(
        ok(&baro(&["tokenize", "-m", ps, "--ids", "Hello world"])),
        "[128000, 9906, 1917]\n"
    );
    assert_eq!(
        ok(&baro(&[
            "tokenize",
            "-m",
            ps,
            "--ids",
            "--no-bos",
            "Hello world"
        ])),
        "[9906, 1917]\n"
    );
    assert_eq!(
        ok(&baro(&["tokenize", "-m", ps, "Hello world"])),
        "128000 -> '<|begin_of_text|>'\n  9906 -> 'Hello'\n  1917 -> ' world'\n"
    );
    // Control tokens only with --special.
    assert_eq!(
        ok(&baro(&[
            "tokenize",
            "-m",
            ps,
            "--ids",
            "--no-bos",
            "--special",
            "<|eot_id|>"
        ])),
        "[128009]\n"
    );
    let plain = ok(&baro(&[
        "tokenize",
        "-m",
        ps,
        "--ids",
        "--no-bos",
        "<|eot_id|>",
    ]));
    assert!(!plain.contains("128009"), "{plain}");
}

#[test]
fn tokenize_of_a_file_without_a_tokenizer_says_so() {
    let dir = Tmp::new("none");
    // A valid GGUF v3 with no metadata and no tensors.
    let p = dir.path().join("empty.gguf");
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    std::fs::write(&p, b).expect("write");
    let out = baro(&["tokenize", "-m", p.to_str().expect("path"), "hi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("empty.gguf has no tokenizer") && err.contains("tokenizer.ggml.tokens"),
        "{err}"
    );
    let out = baro(&["tokenize", "-m", "/no/such.gguf", "hi"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such.gguf"));
}

/// A tiny synthetic model (`model gen --shape tiny`, a GGUF vocabulary run as llama.cpp runs
/// it, no chat template) written into `dir`.
fn tiny_gguf(dir: &Tmp) -> PathBuf {
    let p = dir.path().join("tiny.gguf");
    ok(&baro(&[
        "model",
        "gen",
        "--shape",
        "tiny",
        "--seed",
        "3",
        "-o",
        p.to_str().expect("path"),
    ]));
    p
}

#[test]
fn generate_chat_refuses_a_model_without_a_chat_template_naming_it() {
    let dir = Tmp::new("chat");
    let p = tiny_gguf(&dir);
    let ps = p.to_str().expect("path");
    let out = baro(&["generate", "-m", ps, "-n", "4", "--chat", "-i", "Hi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--chat") && err.contains("no tokenizer.chat_template"),
        "{err}"
    );
    // Without --chat the same model generates (its vocabulary is run as llama.cpp runs it).
    let text = ok(&baro(&["generate", "-m", ps, "-n", "4", "-i", "Hi"]));
    assert!(text.ends_with('\n'), "{text}");
    // The embedded llama2.c model has no chat template either.
    let out = baro(&["generate", "--chat", "-i", "Hi", "-n", "4"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("llama2.c tokenizer"));
}

#[test]
fn generate_chat_refuses_a_prompt_that_is_not_utf8_naming_it_and_without_chat_encodes_its_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Tmp::new("chat-bytes");
    let p = tiny_gguf(&dir);
    let ps = p.to_str().expect("path");
    let run = |chat: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_baro-top"));
        c.args(["generate", "-m", ps, "-n", "4"]);
        if chat {
            c.arg("--chat");
        }
        c.arg("-i")
            .arg(std::ffi::OsStr::from_bytes(b"a\xffb"))
            .output()
            .expect("runs")
    };
    // A chat template is text: the bytes are refused by name, before any template is looked
    // for, with the way out.
    let out = run(true);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--chat: the prompt is not UTF-8") && err.contains("drop --chat"),
        "{err}"
    );
    // Without --chat the same bytes are encoded as they are (run.c's way) and it generates.
    let text = ok(&run(false));
    assert!(text.ends_with('\n'), "{text}");
}

/// `base`'s vocabulary with `tokenizer.ggml.add_bos_token` / `add_eos_token` set.
fn with_adds(dir: &Path, base: &str, bos: bool, eos: bool) -> PathBuf {
    use baro_engine::gguf::{GgufFile, Value};
    let file = GgufFile::open(&vocab(dir, base)).expect("gguf parses");
    let mut md = file.metadata.clone();
    md.retain(|(k, _)| k != "tokenizer.ggml.add_bos_token" && k != "tokenizer.ggml.add_eos_token");
    md.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(bos)));
    md.push(("tokenizer.ggml.add_eos_token".into(), Value::Bool(eos)));
    let out = dir.join(format!("{base}-bos{bos}-eos{eos}.gguf"));
    baro_engine::gguf::write_file(&out, &md, &[]).expect("write");
    out
}

#[test]
fn tokenize_adds_eos_only_where_the_vocabulary_adds_bos_as_llama_tokenize_does() {
    // llama-tokenize passes add_special = add_bos && !--no-bos: a vocabulary that adds EOS
    // but no BOS gets neither, one that adds both gets both (ids from llama-tokenize).
    let dir = Tmp::new("eos");
    let cases = [
        (false, true, "[5303]"),
        (true, true, "[50256, 5303, 50256]"),
    ];
    for (bos, eos, want) in cases {
        let p = with_adds(dir.path(), "gpt-2", bos, eos);
        let got = ok(&baro(&[
            "tokenize",
            "-m",
            p.to_str().expect("path"),
            "--ids",
            "hi",
        ]));
        assert_eq!(got.trim(), want, "add_bos {bos} add_eos {eos}");
        let got = ok(&baro(&[
            "tokenize",
            "-m",
            p.to_str().expect("path"),
            "--ids",
            "--no-bos",
            "hi",
        ]));
        assert_eq!(got.trim(), "[5303]", "add_bos {bos} add_eos {eos} --no-bos");
    }
}

#[test]
fn tokenize_takes_the_text_byte_for_byte_invalid_utf8_and_a_leading_dash_after_double_dash() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Tmp::new("bytes");
    let p = vocab(dir.path(), "llama-bpe");
    // b"a\xffb": llama.cpp decodes the invalid byte as U+FFFD (ids from llama-tokenize).
    let o = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["tokenize", "-m", p.to_str().expect("path"), "--ids"])
        .arg(std::ffi::OsStr::from_bytes(b"a\xffb"))
        .output()
        .expect("runs");
    assert_eq!(ok(&o).trim(), "[128000, 64, 5809, 65]");
    // No escapes: a backslash and an n are two characters (llama-tokenize --no-escape; with
    // its escapes on, the two would be one newline, id 198).
    let o = baro(&[
        "tokenize",
        "-m",
        p.to_str().expect("path"),
        "--ids",
        "--no-bos",
        "a\\nb",
    ]);
    assert_eq!(ok(&o).trim(), "[64, 1734, 65]");
    let o = baro(&[
        "tokenize",
        "-m",
        p.to_str().expect("path"),
        "--ids",
        "--",
        "-x",
    ]);
    assert_eq!(ok(&o).trim(), "[128000, 6695]");
}
