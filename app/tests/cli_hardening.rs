//! What the binary does with input a user can give it by mistake: absurd sizes, endless
//! files, bad values (closed pipes: closed_pipes.rs). Every case ends in a clear message
//! (status 2) or a quiet exit, never a panic, an abort, a hang, a silent clamp or a leftover
//! file.
//!
//! Tests that need a Vulkan device run on lavapipe (`LP_NUM_THREADS=2`), one at a time; with no
//! device they fail, unless `BARO_SKIP_VULKAN` is set outside CI (as in engine/tests/common).

mod hardening;
mod wide;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use hardening::*;

#[test]
fn zero_bench_runs_or_tokens_are_refused_naming_the_flag_not_a_panic() {
    refused(
        &baro(&["bench", "--allow-cpu", "--runs", "0"]),
        &["--runs", "at least 1"],
    );
    refused(
        &baro(&["bench", "--allow-cpu", "--tokens", "0"]),
        &["--tokens", "at least 1"],
    );
    refused(
        &baro(&["bench", "--allow-cpu", "--tokens", "512"]),
        &["--tokens 512", "context of 512", "at most 511"],
    );
}

#[test]
fn model_gen_refuses_a_shape_too_big_for_memory_at_once_naming_the_size() {
    let dir = TempDir::new("huge");
    let out = dir.path("huge.gguf");
    for args in [
        &["--dim", "1048576"][..],
        &["--shape", "llama-8b", "--layers", "1048576"][..],
    ] {
        let mut a = vec!["model", "gen", "-o", s(&out)];
        a.extend_from_slice(args);
        let t0 = Instant::now();
        let o = run_within(cmd(&a), 2 * AT_ONCE);
        refused(&o, &["needs", " GB of q4_0 weights", "available"]);
        assert!(t0.elapsed() < AT_ONCE, "{:?}", t0.elapsed());
        assert!(!out.exists() && dir.partials().is_empty());
    }
    refused(
        &baro(&["model", "gen", "--dim", "2097152", "-o", s(&out)]),
        &["2097152 is too large", "at most 1048576"],
    );
}

// ---- 5. unbounded reads ---------------------------------------------------------------------

/// Address space capped at 2 GB: reading /dev/zero into memory would fail, not pass.
fn capped(args: &[&str]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("ulimit -v 2000000 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args);
    run_within(c, 2 * AT_ONCE)
}

#[test]
fn dev_zero_as_model_or_tokenizer_is_refused_by_kind_without_reading_it() {
    let t0 = Instant::now();
    // Every command that opens a model or a tokenizer refuses a device before reading it
    // (issue 25 item 9: inputs are regular files), `model info` and `model import` too.
    refused(
        &capped(&["generate", "-m", "/dev/zero"]),
        &["/dev/zero", "a character device"],
    );
    refused(
        &capped(&["model", "info", "/dev/zero"]),
        &["/dev/zero", "a character device"],
    );
    refused(
        &capped(&["generate", "-z", "/dev/zero"]),
        &["/dev/zero", "a character device"],
    );
    refused(
        &capped(&["generate", "-m", STORIES, "-z", "/dev/zero"]),
        &["/dev/zero", "a character device"],
    );
    // Four refusals, each a process start and a header read: an endless read would be cut
    // off by `capped`'s limit (or its 2 GB address space) long before this.
    assert!(t0.elapsed() < AT_ONCE, "{:?}", t0.elapsed());
}

#[test]
fn a_checkpoint_whose_size_disagrees_with_its_header_is_refused_naming_the_header_fields() {
    let dir = TempDir::new("size");
    let p = dir.path("long.bin");
    let mut bytes = std::fs::read(STORIES).expect("stories");
    bytes.extend_from_slice(&[0; 64]);
    std::fs::write(&p, &bytes).expect("write");
    refused(
        &baro(&["model", "info", s(&p), "-z", TOK]),
        &["needs a file of", "trailing bytes", "dim 64"],
    );
}

#[test]
fn a_checkpoint_with_one_bad_header_field_gets_the_loaders_error_naming_that_field() {
    // One zeroed or negative field is a damaged checkpoint, not "not a model file": the error
    // names the field and its byte (n_kv_heads at 0x10, seq_len at 0x18).
    let dir = TempDir::new("hdr");
    for (at, v, want) in [
        (16usize, 0i32, "n_kv_heads at byte 0x10 is 0"),
        (24, -5, "seq_len at byte 0x18 is -5"),
    ] {
        let p = dir.path(&format!("bad{at}.bin"));
        let mut bytes = std::fs::read(STORIES).expect("stories");
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        std::fs::write(&p, &bytes).expect("write");
        for cmd in ["generate", "info"] {
            let args: Vec<&str> = match cmd {
                "info" => vec!["model", "info", s(&p), "-z", TOK],
                _ => vec!["generate", "-m", s(&p), "-z", TOK, "-n", "2"],
            };
            let o = baro(&args);
            refused(&o, &[want]);
            assert!(!stderr(&o).contains("not a model file"), "{}", stderr(&o));
        }
    }
    // Text given to `model info` is no model at all, as every other command says.
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    refused(
        &baro(&["model", "info", readme]),
        &["not a model file", "starts with \"# baro-top"],
    );
    // An empty file says so, not that it starts with "".
    let empty = dir.path("empty.bin");
    std::fs::write(&empty, b"").expect("write");
    refused(
        &baro(&["generate", "-m", s(&empty), "-n", "2"]),
        &["not a model file", "this file is empty"],
    );
}

// ---- 6. leftovers ---------------------------------------------------------------------------

#[test]
fn failed_model_writes_leave_no_partial_file() {
    let dir = TempDir::new("left");
    let sub = dir.path("existing-dir");
    std::fs::create_dir_all(&sub).expect("dir");
    let o = baro(&["model", "import", STORIES, "-z", TOK, "-o", s(&sub)]);
    refused(&o, &["is a directory"]);
    assert!(sub.is_dir());
    assert_eq!(dir.partials(), Vec::<String>::new());

    // A quantisation that fails midway (rows not whole Q4_0 blocks), into a real file name.
    let q = dir.path("s.gguf");
    let o = baro(&[
        "model",
        "import",
        STORIES,
        "-z",
        TOK,
        "--quant",
        "q4_0",
        "-o",
        s(&q),
    ]);
    refused(&o, &["ffn_down"]);
    assert!(!q.exists());
    assert_eq!(dir.partials(), Vec::<String>::new());

    // A directory that does not exist: the temporary cannot even be created.
    let o = baro(&[
        "model",
        "import",
        STORIES,
        "-z",
        TOK,
        "-o",
        s(&dir.path("no/x.gguf")),
    ]);
    refused(&o, &["x.gguf.partial"]);
    assert_eq!(dir.partials(), Vec::<String>::new());
}

// ---- 7. one validation per parameter --------------------------------------------------------

#[test]
fn temperature_must_be_finite_and_not_negative_in_every_command() {
    for cmdname in ["run", "generate"] {
        for t in ["nan", "inf", "-1", "-0.5"] {
            refused(
                &baro(&[cmdname, "-t", t]),
                &["--temp", "finite number >= 0"],
            );
        }
    }
}

#[test]
fn top_p_must_be_a_probability_in_every_command() {
    for cmdname in ["run", "generate"] {
        for p in ["1.5", "-0.1", "nan"] {
            refused(&baro(&[cmdname, "-p", p]), &["--topp", "from 0 to 1"]);
        }
    }
}

#[test]
fn seed_0_means_the_current_time_in_run_as_in_generate() {
    let o = baro(&["generate", "-n", "5", "-t", "1", "-s", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("seed 0 = the current time: seed "));
    refused(&baro(&["run", "-s", "-1"]), &["--seed", "at least 0"]);
    let Some(_turn) = vulkan() else { return };
    let o = baro(&[
        "run",
        "--dispatch",
        "multi",
        "--passes",
        "3",
        "-t",
        "1",
        "-s",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("seed 0 = the current time: seed "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn position_counts_must_be_at_least_1_and_fit_the_model_context() {
    refused(&baro(&["run", "--ctx", "0"]), &["--ctx", "at least 1"]);
    refused(&baro(&["run", "--ctx", "-5"]), &["--ctx", "at least 1"]);
    refused(
        &baro(&["run", "--ctx", "100000"]),
        &["--ctx 100000", "context of 512 positions"],
    );
    refused(&baro(&["gate", "--steps", "0"]), &["--steps", "at least 1"]);
    refused(
        &baro(&["gate", "--steps", "100000"]),
        &["--steps 100000", "context of 512 positions"],
    );
    refused(
        &baro(&["run", "--passes", "0"]),
        &["--passes", "at least 1"],
    );
}

#[test]
fn near_tie_margin_must_be_finite_and_not_negative() {
    for v in ["nan", "inf", "-1"] {
        refused(
            &baro(&["gate", "--near-tie", v]),
            &["--near-tie", "finite number >= 0"],
        );
    }
}

#[test]
fn grid_and_probe_limits_are_refused_naming_the_range() {
    refused(&baro(&["gate", "--grid", "0"]), &["--grid", "at least 1"]);
    refused(
        &baro(&["gate", "--grid", "70000"]),
        &["--grid", "at most 65535"],
    );
    refused(
        &baro(&["devices", "--probe", "--probe-max", "0"]),
        &["--probe-max", "at least 1"],
    );
    refused(
        &baro(&["run", "--wg-size", "0"]),
        &["--wg-size", "at least 1"],
    );
    refused(
        &baro(&["run", "--spin-timeout-ms", "0"]),
        &["--spin-timeout-ms", "at least 1"],
    );
    refused(
        &baro(&["run", "--idle-wait-ns", "100001"]),
        &["--idle-wait-ns", "at most 100000"],
    );
    refused(
        &baro(&["bench", "--idle-wait-ns", "-1"]),
        &["--idle-wait-ns"],
    );
}

/// Every value of `bad` for `flag` refused by every GPU command, the message naming the flag
/// and `accepted`.
#[track_caller]
fn refused_in_every_gpu_command(flag: &str, bad: &[&str], accepted: &str) {
    for c in ["gate", "run", "generate", "bench", "record"] {
        for b in bad {
            refused(&baro(&[c, flag, b]), &[flag, accepted]);
        }
    }
}

#[test]
fn robust_buffers_other_than_default_or_off_is_refused_naming_the_accepted_values() {
    refused_in_every_gpu_command(
        "--robust-buffers",
        &["on", "OFF", "none", ""],
        "one of default, off",
    );
}

#[test]
fn kv_type_other_than_auto_f32_or_f16_is_refused_naming_the_accepted_values() {
    refused_in_every_gpu_command(
        "--kv",
        &["f64", "F16", "fp16", "Auto", ""],
        "expected one of auto, f32, f16",
    );
}

#[test]
fn kv_f16_gates_against_the_f16_rounded_reference_and_generates_on_the_cpu_too() {
    let o = baro(&["generate", "-n", "12", "--kv", "f16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend cpu, KV cache f16"),
        "{}",
        stderr(&o)
    );
    let Some(_turn) = vulkan() else { return };
    let o = baro(&["gate", "--steps", "40", "--kv", "f16"]);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{err}\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        err.contains("KV cache f16 (the reference rounds its cache to f16 too)"),
        "{err}"
    );
}

#[test]
fn act_type_other_than_auto_f32_or_q8_is_refused_naming_the_accepted_values() {
    refused_in_every_gpu_command(
        "--act",
        &["bogus", "q8_0", "Q8", "Auto", "int8", ""],
        "expected one of auto, f32, q8",
    );
}

#[test]
fn act_auto_is_accepted_and_is_f32_on_the_f32_stories260k_whose_cpu_run_still_says_auto() {
    for extra in [&[][..], &["--act", "auto"][..]] {
        let mut a = vec!["generate", "-n", "4"];
        a.extend_from_slice(extra);
        let o = baro(&a);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("backend cpu, KV cache f32 (auto), activations f32 (auto)"),
            "{extra:?}: {}",
            stderr(&o)
        );
    }
    let o = baro(&["generate", "-n", "4", "--act", "f32"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("backend cpu"))
        .unwrap_or_else(|| panic!("no setup line: {err}"));
    assert!(
        line.ends_with("activations f32"),
        "an asked-for f32 does not say auto: {line}"
    );
}

#[test]
fn stories260k_with_the_default_act_decodes_the_golden_story_on_vulkan_mega_and_multi() {
    let Some(_turn) = vulkan() else { return };
    let golden = include_str!("../../engine/models/stories260K/greedy_empty_prompt_200.txt");
    for d in ["mega", "multi"] {
        let o = baro(&[
            "generate",
            "--backend",
            "vulkan",
            "--dispatch",
            d,
            "-n",
            "200",
        ]);
        assert!(o.status.success(), "{d}: {}", stderr(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("{golden}\n"),
            "{d}: the default (auto) must stay f32 on F32 matrices"
        );
        assert!(
            stderr(&o).contains("activations f32 (auto)"),
            "{d}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn the_default_act_on_an_all_quantised_narrow_model_is_q8_with_the_f32_cache_and_its_gate_passes_against_the_same_reference(
) {
    let dir = std::env::temp_dir().join(format!("baro-act-auto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let m = dir.join("tiny-q4.gguf");
    let m = m.to_str().expect("utf-8");
    let o = baro(&[
        "model", "gen", "--shape", "tiny", "--quant", "q4_0", "-o", m,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The CPU backend always runs q8: auto takes it on an all-quantised model. The cache
    // stays f32 under auto on a model narrower than 4096 (baro_engine::kv::KV_AUTO_F16_DIM).
    let o = baro(&["generate", "-m", m, "-n", "12"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend cpu, KV cache f32 (auto), activations q8 (auto)"),
        "{}",
        stderr(&o)
    );
    let Some(_turn) = vulkan() else { return };
    // lavapipe has the integer dot product: the default is q8 there, and the gate's CPU
    // reference must quantise as the run does (an f32 reference would be the wrong one).
    let o = baro(&["gate", "-m", m, "--steps", "24"]);
    let err = stderr(&o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}\n{out}");
    assert!(
        err.contains(
            "activations q8 (auto) (the reference quantises its matvec inputs the same way)"
        ),
        "{err}"
    );
    assert!(err.contains("KV cache f32 (auto), activations"), "{err}");
    let reference = out
        .lines()
        .find(|l| l.starts_with("reference activations"))
        .unwrap_or_else(|| panic!("no reference activations line:\n{out}"));
    assert_eq!(
        reference.split_whitespace().collect::<Vec<_>>(),
        ["reference", "activations", "q8", "(auto)"],
        "{out}"
    );
    assert!(out.contains("24/24 passes bit-identical"), "{out}");
    assert!(out.contains("GATE") && out.contains("PASS"), "{out}");
    // The same file with --act f32 is checked against the f32 reference, by name.
    let o = baro(&["gate", "-m", m, "--steps", "8", "--act", "f32"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}\n{out}", stderr(&o));
    assert!(
        out.lines().any(
            |l| l.split_whitespace().collect::<Vec<_>>() == ["reference", "activations", "f32"]
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_kv_of_a_q8_run_of_a_4096_wide_model_is_f16_and_its_gate_passes_against_the_f16_reference(
) {
    let dir = std::env::temp_dir().join(format!("baro-kv-auto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let m = dir.join("wide-q4.gguf");
    let m = m.to_str().expect("utf-8");
    let o = baro(&wide::gen_args(m));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = baro(&["generate", "-m", m, "-n", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend cpu, KV cache f16 (auto), activations q8 (auto)"),
        "{}",
        stderr(&o)
    );
    // f32 activations or an asked-for cache keep what they say, without "auto".
    for (extra, want) in [
        (
            &["--act", "f32"][..],
            "KV cache f32 (auto), activations f32",
        ),
        (&["--kv", "f32"][..], "KV cache f32, activations q8 (auto)"),
    ] {
        let mut a = vec!["generate", "-m", m, "-n", "2"];
        a.extend_from_slice(extra);
        let o = baro(&a);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
    }
    let Some(_turn) = vulkan() else { return };
    // lavapipe stores f16 (storageBuffer16BitAccess): the gate's reference must round its
    // cache as the run does (an f32 reference would be the wrong one).
    let o = baro(&["gate", "-m", m, "--steps", "4"]);
    let err = stderr(&o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}\n{out}");
    assert!(
        err.contains("KV cache f16 (auto) (the reference rounds its cache to f16 too)"),
        "{err}"
    );
    assert!(out.contains("4/4 passes bit-identical"), "{out}");
    assert!(out.contains("GATE") && out.contains("PASS"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn act_q8_gates_against_the_q8_reference_runs_on_the_cpu_and_is_refused_for_f32_matrices() {
    let dir = std::env::temp_dir().join(format!("baro-act-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let m = dir.join("tiny-q4.gguf");
    let m = m.to_str().expect("utf-8");
    let o = baro(&[
        "model", "gen", "--shape", "tiny", "--quant", "q4_0", "-o", m,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = baro(&["generate", "-m", m, "-n", "12", "--act", "q8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("backend cpu, KV cache f32 (auto), activations q8"),
        "{}",
        stderr(&o)
    );
    // The embedded stories260K is F32: a q8 run of it on the CPU would compute in f32 while
    // saying q8, so it is refused as the Vulkan decoder refuses it, naming the matrix.
    refused(
        &baro(&["generate", "-n", "4", "--act", "q8"]),
        &["activations q8", "blk.0.attn_q.weight is F32"],
    );
    let Some(_turn) = vulkan() else { return };
    let o = baro(&["gate", "-m", m, "--steps", "24", "--act", "q8"]);
    let err = stderr(&o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}\n{out}");
    assert!(
        err.contains("activations q8 (the reference quantises its matvec inputs the same way)"),
        "{err}"
    );
    assert!(out.contains("24/24 passes bit-identical"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wg_size_is_checked_against_the_device_limit_not_clamped() {
    let Some(_turn) = vulkan() else { return };
    let o = baro(&[
        "generate",
        "--backend",
        "vulkan",
        "--wg-size",
        "100000",
        "-n",
        "2",
    ]);
    refused(&o, &["--wg-size 100000", "up to", "lanes"]);
    let err = stderr(&o);
    if err.contains("llvmpipe") {
        // lavapipe: subgroup 8, 60 subgroups at most.
        assert!(err.contains("up to 480 lanes"), "{err}");
    }
    assert!(!err.contains("workgroup size 1024"), "{err}");
}

#[test]
fn a_gate_on_a_grid_too_large_to_be_resident_is_refused_with_the_probe_hint() {
    let Some(_turn) = vulkan() else { return };
    // lavapipe keeps one workgroup per pool thread resident (2 in the tests); a GPU none
    // near 65535 workgroups of 1024 lanes.
    let cpu = stderr(&baro(&["devices"])).contains("llvmpipe")
        || String::from_utf8_lossy(&baro(&["devices"]).stdout).contains("llvmpipe");
    let grid = if cpu { "64" } else { "65535" };
    let o = baro(&[
        "gate",
        "--steps",
        "1",
        "--grid",
        grid,
        "--spin-timeout-ms",
        "300",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("GATE                         REFUSED"),
        "{out}"
    );
    let hint = out
        .lines()
        .find(|l| l.starts_with("hint"))
        .unwrap_or_else(|| panic!("no hint line:\n{out}"));
    assert!(
        hint.contains(&format!("of {grid} workgroups"))
            || hint.contains(&format!("grid of {grid}")),
        "{hint}"
    );
    assert!(hint.contains("devices --probe"), "{hint}");
}

#[test]
fn gpu_only_flags_with_the_cpu_backend_are_an_error() {
    for flag in [
        &["--dispatch", "multi"][..],
        &["--grid", "2"][..],
        &["--wg-size", "64"][..],
        &["--device", "0"][..],
        &["--spin-timeout-ms", "5"][..],
    ] {
        let mut a = vec!["generate", "-n", "2"];
        a.extend_from_slice(flag);
        refused(&baro(&a), &[flag[0], "--backend vulkan"]);
    }
    refused(&baro(&["bench", "--mode", "multi"]), &["--mode"]);
    refused(&baro(&["bench", "--arms", "mega"]), &["--arms"]);
}

/// The GGUF bytes of `model gen` with `llama.block_count` rewritten to `n`.
fn gguf_with_block_count(dir: &TempDir, layers: usize, n: u32) -> PathBuf {
    let p = dir.path("m.gguf");
    let o = baro(&[
        "model",
        "gen",
        "--layers",
        &layers.to_string(),
        "--dim",
        "64",
        "--hidden",
        "128",
        "--heads",
        "2",
        "--kv-heads",
        "2",
        "--margin-steps",
        "0",
        "-o",
        s(&p),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut b = std::fs::read(&p).expect("read");
    let key = b"llama.block_count";
    let at = b
        .windows(key.len())
        .position(|w| w == key)
        .expect("block_count key")
        + key.len();
    // value type u32 (4), then the value.
    assert_eq!(&b[at..at + 4], &4u32.to_le_bytes());
    assert_eq!(&b[at + 4..at + 8], &(layers as u32).to_le_bytes());
    b[at + 4..at + 8].copy_from_slice(&n.to_le_bytes());
    std::fs::write(&p, b).expect("write");
    p
}

#[test]
fn gguf_tensors_beyond_block_count_are_an_error_naming_the_tensor() {
    let dir = TempDir::new("blocks");
    let p = gguf_with_block_count(&dir, 4, 3);
    refused(
        &baro(&["model", "info", s(&p)]),
        &["blk.3.", "llama.block_count is 3"],
    );
}

#[test]
fn llama2c_vocab_i32_min_is_refused_with_the_range_not_as_zero() {
    let dir = TempDir::new("vocab");
    let p = dir.path("min.bin");
    let h: [i32; 7] = [64, 172, 5, 8, 4, i32::MIN, 512];
    std::fs::write(
        &p,
        h.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .expect("write");
    let o = baro(&["model", "info", s(&p), "-z", TOK]);
    refused(
        &o,
        &[
            "vocab_size",
            "-2147483648",
            "magnitude must be from 1 to 2147483647",
        ],
    );
    assert!(!stderr(&o).contains("must be non-zero"), "{}", stderr(&o));
}

// ---- 8. output a user reads -----------------------------------------------------------------

#[track_caller]
fn no_debug_values(what: &str, o: &Output) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for bad in [
        "Some(",
        "None",
        "Config {",
        "[Cpu]",
        "(Cpu,",
        "backend Cpu",
        "modes Both",
        "\"mega,",
    ] {
        assert!(!text.contains(bad), "{what}: {bad:?} in\n{text}");
    }
}

#[test]
fn cpu_commands_print_no_debug_values_and_no_carriage_returns_into_a_pipe() {
    let dir = TempDir::new("out");
    let p = dir.path("t.gguf");
    let o = baro(&[
        "model",
        "gen",
        "--layers",
        "1",
        "--margin-steps",
        "0",
        "-o",
        s(&p),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    no_debug_values("model gen", &o);
    assert!(
        !o.stderr.contains(&b'\r'),
        "\\r progress into a pipe: {:?}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("writing"),
        "the final progress line stays"
    );
    let o = baro(&["generate", "-n", "3"]);
    assert!(o.status.success());
    no_debug_values("generate", &o);
    assert!(stderr(&o).contains("backend cpu"), "{}", stderr(&o));
}

#[test]
fn gpu_commands_print_no_debug_values() {
    let Some(_turn) = vulkan() else { return };
    for args in [
        &["devices"][..],
        &["gate", "--steps", "2"][..],
        &["run", "--passes", "2", "--dispatch", "multi"][..],
        &[
            "generate",
            "--backend",
            "vulkan",
            "--dispatch",
            "multi",
            "-n",
            "3",
        ][..],
        &[
            "bench",
            "--allow-cpu",
            "--dispatch",
            "multi",
            "--tokens",
            "2",
            "--runs",
            "1",
        ][..],
    ] {
        let o = baro(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        no_debug_values(&args.join(" "), &o);
    }
}

#[test]
fn pass_loop_where_no_pass_loop_runs_is_refused_not_ignored() {
    // generate runs one pass per submission; the multi dispatch has no pass loop.
    refused(
        &baro(&["generate", "--backend", "vulkan", "--pass-loop", "on"]),
        &["--pass-loop", "one pass per submission"],
    );
    refused(
        &baro(&["gate", "--dispatch", "multi", "--pass-loop", "on"]),
        &["--pass-loop on", "multi dispatch has no pass loop"],
    );
}
