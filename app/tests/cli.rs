//! The baro-top binary as a user runs it.

use std::process::Command;

fn baro(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

const GOLDEN: &str = include_str!("../../engine/models/stories260K/greedy_empty_prompt_200.txt");

#[test]
fn generate_with_no_arguments_prints_the_upstream_golden_story() {
    let out = baro(&["generate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{GOLDEN}\n"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("achieved tok/s"),
        "timing goes to stderr"
    );
}

#[test]
fn a_prompt_is_echoed_and_steps_count_positions() {
    let out = baro(&["generate", "-i", "Once upon a time", "-n", "12"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Once upon a time"), "{text}");
    assert!(text.ends_with('\n'));
}

#[test]
fn seeded_sampling_is_reproducible_and_differs_from_greedy() {
    let a = baro(&["generate", "-t", "1.0", "-s", "42", "-n", "60"]);
    let b = baro(&["generate", "-t", "1.0", "-s", "42", "-n", "60"]);
    let c = baro(&["generate", "-t", "1.0", "-s", "43", "-n", "60"]);
    assert!(a.status.success() && b.status.success() && c.status.success());
    assert_eq!(a.stdout, b.stdout, "same seed, same text");
    assert_ne!(a.stdout, c.stdout, "another seed, another text");
    assert!(!GOLDEN.starts_with(String::from_utf8_lossy(&a.stdout).trim_end()));
}

#[test]
fn generate_reads_temperature_and_top_p_as_run_c_atof_does() {
    // run.c's `topp = atof(s)` turns 0.99999997019767761 into the double halfway between the
    // floats 0.99999994 and 1, then to 1 (ties to even): no nucleus, the same text as -p 1.
    let run = |p: &str| {
        let o = baro(&[
            "generate", "-t", "1", "-p", p, "-s", "7", "-n", "40", "-i", "Once",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let want = "Once upon a time, there was a powerful dog named Kitty. They were playing in the park in the table, but\n";
    assert_eq!(String::from_utf8_lossy(&run("1")), want);
    assert_eq!(String::from_utf8_lossy(&run("0.99999997019767761")), want);
}

#[test]
fn generate_encodes_a_prompt_that_is_not_utf8_byte_by_byte_as_run_c_does() {
    use std::os::unix::ffi::OsStrExt;
    // run.c's output for these prompts: a lone byte (0xE9, a stray 0x80) is its byte-fallback
    // token, which safe_printf does not print.
    for (prompt, want) in [
        (
            &b"caf\xe9"[..],
            "caf was a big, red ball. It was a big, red ball. The ball was very s\n",
        ),
        (
            b"\x80\x80 stray",
            " strayed in the park. A little boy named Tim went to the park with his\n",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_baro-top"))
            .args(["generate", "-n", "30", "-i"])
            .arg(std::ffi::OsStr::from_bytes(prompt))
            .output()
            .expect("baro-top runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{prompt:?}");
    }
}

#[test]
fn generate_takes_a_prompt_that_starts_with_a_dash_as_run_c_does() {
    let out = baro(&["generate", "-n", "12", "-i", "- a list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "- a listening is a big\n"
    );
}

#[test]
fn a_level_run_in_one_round_keeps_mega_and_multi_bit_identical_and_the_gate_clean() {
    // Ten workgroups of 64 lanes (8 teams on lavapipe): the q/k/v level's shares follow its
    // units (4, 2, 4 workgroups; by bytes the value rows would take two rounds), the
    // engine's program test pins that. Lavapipe runs a workgroup per pool thread, hence
    // LP_NUM_THREADS; on a GPU the same flags run the same gate.
    let out = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["gate", "--grid", "10", "--wg-size", "64", "--steps", "6"])
        .env("LP_NUM_THREADS", "10")
        .output()
        .expect("baro-top runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("6/6 passes bit-identical")
            && text.contains("tokens vs CPU reference      exact"),
        "{text}"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_status_2() {
    let out = baro(&["generate", "--model", "/no/such/model.gguf"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/no/such/model.gguf") && err.contains("No such file"),
        "{err}"
    );

    let out = baro(&["generate", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));

    let dir = std::env::temp_dir().join(format!("baro-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"GGUF\x03\x00\x00\x00\x05").expect("write");
    let out = baro(&["model", "info", junk.to_str().expect("utf8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gguf") && err.contains("truncated"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn model_gen_import_and_info_round_trip() {
    let dir = std::env::temp_dir().join(format!("baro-cli-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let p = dir.join("tiny.gguf");
    let ps = p.to_str().expect("utf8 path");
    let out = baro(&[
        "model", "gen", "--shape", "tiny", "--quant", "q8_0", "--seed", "3", "-o", ps,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("margin"),
        "the margin is reported"
    );
    let info = baro(&["model", "info", ps]);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains("GGUF v3") && text.contains("blk.0.attn_q.weight") && text.contains("q8_0"),
        "{text}"
    );
    let gen = baro(&["generate", "-m", ps, "-n", "8"]);
    assert!(gen.status.success());

    // stories260K's FFN width (172) is not whole Q4_0 blocks: refused, naming the tensor.
    let q = dir.join("s.gguf");
    let out = baro(&[
        "model",
        "import",
        "../engine/models/stories260K/stories260K.bin",
        "-z",
        "../engine/models/stories260K/tok512.bin",
        "--quant",
        "q4_0",
        "-o",
        q.to_str().expect("utf8 path"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ffn_down"));
    assert!(!q.exists(), "no partial output left behind");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn model_gen_writes_a_q4_k_m_mix_that_info_names_and_the_reference_decodes_and_refuses_what_it_cannot_write(
) {
    let dir = std::env::temp_dir().join(format!("baro-cli-kmix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let p = dir.join("k.gguf");
    let ps = p.to_str().expect("utf8 path");
    let out = baro(&[
        "model",
        "gen",
        "--dim",
        "256",
        "--hidden",
        "512",
        "--layers",
        "2",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--vocab",
        "512",
        "--quant",
        "q4_k_m",
        "-o",
        ps,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = baro(&["model", "info", ps]);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        text.contains("file type  Q4_K_M (general.file_type 15)"),
        "{text}"
    );
    // Layer 1 of 2 gets more bits (attn_v, ffn_down Q6_K), as llama-quantize gives it; the
    // tied embedding is the classifier: Q6_K.
    for (tensor, ty) in [
        ("token_embd.weight", "q6_k"),
        ("blk.0.attn_v.weight", "q4_k"),
        ("blk.1.attn_v.weight", "q6_k"),
        ("blk.1.ffn_down.weight", "q6_k"),
        ("blk.1.ffn_up.weight", "q4_k"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(tensor))
            .unwrap_or_else(|| panic!("{tensor} not listed: {text}"));
        assert!(line.contains(ty), "{tensor}: {line}");
    }
    let gen = baro(&["generate", "-m", ps, "-n", "4", "--backend", "cpu"]);
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );

    // A mix baro-top does not write is refused with the choices, before anything is written.
    let q = dir.join("q3.gguf");
    let qs = q.to_str().expect("utf8 path");
    let out = baro(&["model", "gen", "--quant", "q3_k_m", "-o", qs]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q3_k_m") && err.contains("q4_k_m|"), "{err}");
    assert!(!q.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn model_gen_iq4_xs_on_rows_not_whole_super_blocks_writes_iq4_nl_tensors_and_iq4_nl_files_decode() {
    let dir = std::env::temp_dir().join(format!("baro-cli-iq4nl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    // The tiny shape's rows of 128 and 384 are whole 32-blocks, not whole super-blocks:
    // llama-quantize's IQ4_XS falls back to IQ4_NL there (the tied classifier to Q8_0).
    for (quant, file_type) in [
        ("iq4_xs", "IQ4_XS (general.file_type 30)"),
        ("iq4_nl", "IQ4_NL (general.file_type 25)"),
    ] {
        let p = dir.join(format!("{quant}.gguf"));
        let ps = p.to_str().expect("utf8 path");
        let out = baro(&[
            "model", "gen", "--shape", "tiny", "--quant", quant, "-o", ps,
        ]);
        assert!(
            out.status.success(),
            "{quant}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info = baro(&["model", "info", ps]);
        let text = String::from_utf8_lossy(&info.stdout);
        assert!(text.contains(&format!("file type  {file_type}")), "{text}");
        for (tensor, ty) in [
            ("token_embd.weight", "q8_0"),
            ("blk.0.attn_q.weight", "iq4_nl"),
            ("blk.0.ffn_down.weight", "iq4_nl"),
        ] {
            let line = text
                .lines()
                .find(|l| l.contains(tensor))
                .unwrap_or_else(|| panic!("{tensor} not listed: {text}"));
            assert!(line.contains(ty), "{quant} {tensor}: {line}");
        }
        let gen = baro(&["generate", "-m", ps, "-n", "4", "--backend", "cpu"]);
        assert!(
            gen.status.success(),
            "{quant}: {}",
            String::from_utf8_lossy(&gen.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
