//! `baro-top bench` and `bench ab` on the Vulkan device (lavapipe in CI, stories260K): the
//! row formats carry llama-bench's fields, `--prompts` errors name the line, `ab` compares
//! two arms with a logits parity check and a frozen prediction, and the GPU host lock is
//! waited for or, with `--no-wait`, labels every pass contended. Each test uses its own lock
//! directory, so parallel tests (and other timing runs on this machine) do not meet.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use baro_engine::sensors::host_lock::{self, HostLock};

mod wide;

const BIN: &str = env!("CARGO_BIN_EXE_baro-top");

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("baro-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("tmp dir");
        TempDir(p)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    fn s(&self, f: &str) -> String {
        self.path(f).to_str().expect("utf-8").to_string()
    }
    /// Two short prompts (a quick workload on a CPU device).
    fn prompts(&self) -> String {
        std::fs::write(self.path("p.txt"), "Hi\nOnce\n").expect("write");
        self.s("p.txt")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cmd(dir: &TempDir, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("BARO_TOP_LOCK_DIR", dir.path("locks"))
        .env(
            "LP_NUM_THREADS",
            std::env::var("LP_NUM_THREADS").unwrap_or("2".into()),
        );
    c
}

fn baro(dir: &TempDir, args: &[&str]) -> Output {
    cmd(dir, args).output().expect("baro-top runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A quick single-arm bench with `extra` flags.
fn quick<'a>(prompts: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "bench",
        "--allow-cpu",
        "--dispatch",
        "multi",
        "--tokens",
        "2",
        "--runs",
        "1",
        "--prompts",
        prompts,
    ];
    a.extend_from_slice(extra);
    a
}

const FIELDS: [&str; 16] = [
    "model_filename",
    "model_size",
    "model_n_params",
    "model_type",
    "device",
    "driver",
    "commit",
    "dispatch",
    "n_prompt",
    "n_gen",
    "avg_ns",
    "stddev_ns",
    "samples_ns",
    "avg_ts",
    "samples_ts",
    "mode",
];

fn check_row(r: &serde_json::Value) {
    for f in FIELDS {
        assert!(r.get(f).is_some(), "row lacks {f}: {r}");
    }
    for f in [
        "passes_fast",
        "passes_slow",
        "passes_unknown",
        "contended_passes",
    ] {
        assert!(r[f].is_u64(), "{f}: {r}");
    }
    assert_eq!(r["dispatch"], "multi");
    assert_eq!(r["samples_ns"].as_array().map(Vec::len), Some(2), "{r}");
    let passes = r["passes_fast"].as_u64().unwrap_or(0)
        + r["passes_slow"].as_u64().unwrap_or(0)
        + r["passes_unknown"].as_u64().unwrap_or(0);
    // "Hi" and "Once" are a few tokens each, BOS included, plus 2 generated each.
    assert!(passes >= 2 * (2 + 2), "{passes} passes: {r}");
    assert!(r["avg_ts"].as_f64().is_some_and(|t| t > 0.0), "{r}");
}

#[test]
fn bench_rows_in_json_jsonl_csv_and_md_parse_and_carry_llama_bench_fields() {
    let dir = TempDir::new("formats");
    let p = dir.prompts();

    let o = baro(&dir, &quick(&p, &["-o", "json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
    assert_eq!(rows.len(), 2, "one pp and one tg row");
    rows.iter().for_each(check_row);
    assert_eq!(
        (rows[0]["test"].as_str(), rows[0]["n_gen"].as_u64()),
        (Some("pp"), Some(0))
    );
    assert_eq!(
        (rows[1]["test"].as_str(), rows[1]["n_gen"].as_u64()),
        (Some("tg"), Some(2))
    );
    assert_eq!(rows[0]["contended_passes"], 0);

    let o = baro(&dir, &quick(&p, &["-o", "jsonl"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    lines.iter().for_each(check_row);

    let o = baro(&dir, &quick(&p, &["-o", "csv"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut csv = out.lines();
    let header: Vec<&str> = csv.next().expect("a header").split(',').collect();
    for f in FIELDS {
        assert!(header.contains(&f), "csv header lacks {f}: {header:?}");
    }
    assert_eq!(csv.count(), 2, "{out}");

    let o = baro(&dir, &quick(&p, &["-o", "md"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let md: Vec<&str> = out.lines().collect();
    assert_eq!(md.len(), 4, "header, rule, two rows: {out}");
    assert!(
        md.iter().all(|l| l.starts_with('|') && l.ends_with('|')),
        "{out}"
    );
    assert!(
        md[0].contains("t/s") && md[2].contains("pp") && md[3].contains("tg2"),
        "{out}"
    );
}

#[test]
fn bench_text_reports_prompt_and_generation_per_arm_and_the_compared_mode() {
    let dir = TempDir::new("text");
    let p = dir.prompts();
    let o = baro(&dir, &quick(&p, &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("tok/s median (min, max)"), "{out}");
    let arm_lines: Vec<&str> = out.lines().filter(|l| l.starts_with("multi ")).collect();
    assert_eq!(arm_lines.len(), 2, "{out}");
    assert!(arm_lines[1].contains("tg2"), "{out}");
    assert!(
        out.contains("compared within the") || out.contains("no power mode common"),
        "{out}"
    );
    assert!(
        out.contains("parity (bitwise logits of every pass, every arm): yes"),
        "{out}"
    );
}

#[test]
fn bench_prompts_file_errors_name_the_file_and_line() {
    let dir = TempDir::new("prompts");
    let empty = dir.s("empty.txt");
    std::fs::write(&empty, "").expect("write");
    let o = baro(&dir, &quick(&empty, &[]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("empty.txt: empty file"),
        "{}",
        stderr(&o)
    );

    let blank = dir.s("blank.txt");
    std::fs::write(&blank, "Hi\n\nThere\n").expect("write");
    let o = baro(&dir, &quick(&blank, &[]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("blank.txt line 2: empty line"),
        "{}",
        stderr(&o)
    );

    // stories260K's context is 512 positions: 300 words do not fit beside 256 tokens.
    let long = dir.s("long.txt");
    std::fs::write(&long, format!("Hi\n{}\n", "the cat sat ".repeat(100))).expect("write");
    let o = baro(
        &dir,
        &[
            "bench",
            "--allow-cpu",
            "--prompts",
            &long,
            "--tokens",
            "256",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("long.txt line 2") && e.contains("context of 512") && e.contains("--tokens 256"),
        "{e}"
    );

    let o = baro(&dir, &quick(&dir.s("missing.txt"), &[]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--prompts") && stderr(&o).contains("missing.txt"),
        "{}",
        stderr(&o)
    );
}

/// A quick `bench ab` (one pair unless `extra` says otherwise).
fn ab<'a>(prompts: &'a str, log: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let pairs = if extra.contains(&"--pairs") {
        &[][..]
    } else {
        &["--pairs", "1"][..]
    };
    let mut a = vec![
        "bench",
        "ab",
        "--allow-cpu",
        "--tokens",
        "2",
        "--prompts",
        prompts,
        "--log",
        log,
    ];
    a.extend_from_slice(pairs);
    a.extend_from_slice(extra);
    a
}

#[test]
fn bench_ab_mega_against_multi_prints_both_arms_delta_parity_ok_and_the_verdict() {
    let dir = TempDir::new("ab");
    let p = dir.prompts();
    let log = dir.s("pred.log");
    let o = baro(
        &dir,
        &ab(
            &p,
            &log,
            &[
                "--a",
                "--dispatch mega",
                "--b",
                "--dispatch multi",
                "--predict",
                // Any Δ is inside (mega on a busy CPU device may be many times slower).
                "-100%..1000000%",
            ],
        ),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "A: generation",
        "B: generation",
        "Δ B vs A: generation",
        "parity of logits: OK",
        "verdict: inside",
    ] {
        assert!(out.contains(want), "{want:?} missing: {out}");
    }
    let logged = std::fs::read_to_string(&log).expect("the log");
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(lines.len(), 2, "{logged}");
    assert!(
        lines[0].contains("PREDICT") && lines[0].contains("commit="),
        "{logged}"
    );
    assert!(
        lines[1].contains("VERDICT inside") && lines[1].contains("parity OK"),
        "{logged}"
    );
    // ISO 8601 UTC time first.
    assert!(
        lines[0].as_bytes()[4] == b'-'
            && lines[0].split(' ').next().is_some_and(|t| t.ends_with('Z')),
        "{logged}"
    );
}

#[test]
fn bench_ab_logs_the_prediction_before_running_even_when_the_run_then_fails() {
    let dir = TempDir::new("abfail");
    let log = dir.s("pred.log");
    let missing = dir.s("missing-prompts.txt");
    let o = baro(&dir, &ab(&missing, &log, &["--predict", "5%..15%"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing-prompts.txt"), "{}", stderr(&o));
    let logged = std::fs::read_to_string(&log).expect("the prediction was logged");
    assert!(
        logged.contains("PREDICT") && logged.contains("[+5%, +15%]"),
        "{logged}"
    );
    assert!(!logged.contains("VERDICT"), "{logged}");
}

#[test]
fn bench_ab_refuses_bad_ranges_zero_pairs_and_bad_arm_options_logging_nothing() {
    let dir = TempDir::new("abbad");
    let p = dir.prompts();
    let log = dir.s("pred.log");
    for (extra, want) in [
        (&["--predict", "15%..5%"][..], "above HI"),
        (&["--predict", "5%"][..], "LO%..HI%"),
        (&["--predict", "a%..5%"][..], "not a percentage"),
        (&["--pairs", "0"][..], "--pairs"),
        (
            &["--a", "--frobnicate", "--predict", "1%..2%"][..],
            "--frobnicate",
        ),
        (
            &["--b", "--device 0", "--predict", "1%..2%"][..],
            "one device",
        ),
        (
            &["--a-binary", "/nonexistent/baro", "--predict", "1%..2%"][..],
            "no such file",
        ),
    ] {
        let o = baro(&dir, &ab(&p, &log, extra));
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
        assert!(!Path::new(&log).exists(), "{extra:?} logged a prediction");
    }
}

#[test]
fn bench_ab_between_binaries_runs_each_as_a_child_and_compares_them() {
    let dir = TempDir::new("abbin");
    let p = dir.prompts();
    let log = dir.s("pred.log");
    let o = baro(
        &dir,
        &ab(
            &p,
            &log,
            &[
                "--a-binary",
                BIN,
                "--b-binary",
                BIN,
                "--a",
                "--dispatch multi",
                "--b",
                "--dispatch multi --instrument on",
                "--pairs",
                "2",
                "-o",
                "json",
            ],
        ),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
    assert_eq!(rows.len(), 4, "pp and tg of A and B");
    assert_eq!(rows[0]["arm"], "A");
    assert_eq!(rows[2]["arm"], "B");
    assert_eq!(rows[2]["instrument"], true);
    // Two pairs of two prompts: four samples per arm.
    assert_eq!(rows[0]["samples_ns"].as_array().map(Vec::len), Some(4));
    let e = stderr(&o);
    assert!(
        e.contains("parity of logits: OK") && e.contains("Δ B vs A"),
        "{e}"
    );
}

/// `--depth D`: every row says it, the passes run at positions D.. (the logits differ from
/// depth 0's), `bench ab` hands it to binary children (their logits equal plain bench's at
/// that depth), and a depth the context cannot hold is refused naming the sums.
#[test]
fn bench_at_a_depth_runs_there_says_so_in_every_row_and_refuses_one_past_the_context() {
    let dir = TempDir::new("depth");
    let p = dir.prompts();
    let rows = |o: &Output| -> Vec<serde_json::Value> {
        assert!(o.status.success(), "{}", stderr(o));
        serde_json::from_str(&stdout(o)).expect("a JSON array")
    };
    let flat = rows(&baro(&dir, &quick(&p, &["-o", "json"])));
    let deep = rows(&baro(&dir, &quick(&p, &["--depth", "300", "-o", "json"])));
    assert!(flat.iter().all(|r| r["n_depth"] == 0), "{flat:?}");
    assert!(deep.iter().all(|r| r["n_depth"] == 300), "{deep:?}");
    assert_ne!(
        flat[0]["logits_checksum"], deep[0]["logits_checksum"],
        "the same logits at depth 0 and 300: the depth was not applied"
    );
    let o = baro(&dir, &quick(&p, &["--depth", "300"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("tg2 @ d300"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("at depth 300 (zeroed cache rows)"),
        "{}",
        stderr(&o)
    );

    let log = dir.s("pred.log");
    let children = rows(&baro(
        &dir,
        &ab(
            &p,
            &log,
            &[
                "--a-binary",
                BIN,
                "--b-binary",
                BIN,
                "--a",
                "--dispatch multi",
                "--b",
                "--dispatch multi",
                "--depth",
                "300",
                "-o",
                "json",
            ],
        ),
    ));
    assert!(children.iter().all(|r| r["n_depth"] == 300), "{children:?}");
    assert_eq!(
        children[0]["logits_checksum"], deep[0]["logits_checksum"],
        "a child's logits are not plain bench's at depth 300: the depth was not handed on"
    );

    // A binary arm cannot take a workload option of its own: its rows would be compared as
    // if it ran the shared workload.
    let o = baro(
        &dir,
        &ab(
            &p,
            &log,
            &[
                "--a-binary",
                BIN,
                "--b-binary",
                BIN,
                "--a",
                "--dispatch multi --depth 300",
                "--b",
                "--dispatch multi",
            ],
        ),
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--depth belongs to the workload"),
        "{}",
        stderr(&o)
    );

    // stories260K has 512 positions: 509 + "Hi" (BOS + 1 or more) + 2 generated does not fit
    // (the prompt's line is named); 510 + BOS + 2 generated does not even leave room for a
    // prompt.
    let o = baro(&dir, &quick(&p, &["--depth", "509"]));
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("line 1: --depth 509 + ") && e.contains("context of 512"),
        "{e}"
    );
    let o = baro(&dir, &quick(&p, &["--depth", "510"]));
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("--tokens 2 at --depth 510 does not fit the model's context of 512"),
        "{e}"
    );
    let o = baro(&dir, &quick(&p, &["--depth", "-1"]));
    assert!(
        !o.status.success() && stderr(&o).contains("--depth"),
        "{}",
        stderr(&o)
    );
}

/// Hold this device's lock as another timing run would.
fn hold_lock(dir: &TempDir) -> HostLock {
    let devs = baro_engine::device::Device::list().expect("a Vulkan device");
    let name = &devs.first().expect("a device").name;
    let path = host_lock::lock_path(&dir.path("locks"), name);
    let me = baro_engine::telemetry::LockHolder {
        pid: std::process::id(),
        command: "the lock test".into(),
        since_unix_ms: 0,
    };
    HostLock::try_lock(&path, me).expect("the lock")
}

#[test]
fn bench_no_wait_under_a_held_lock_warns_and_labels_every_pass_contended() {
    let dir = TempDir::new("nowait");
    let p = dir.prompts();
    let _held = hold_lock(&dir);
    let o = baro(&dir, &quick(&p, &["--no-wait", "-o", "jsonl"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.matches("--no-wait").count(), 1, "warned once: {e}");
    assert!(e.contains("the lock test"), "names the holder: {e}");
    for l in stdout(&o).lines() {
        let r: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
        let passes = r["passes_fast"].as_u64().unwrap_or(0)
            + r["passes_slow"].as_u64().unwrap_or(0)
            + r["passes_unknown"].as_u64().unwrap_or(0);
        assert!(passes > 0);
        assert_eq!(r["contended_passes"].as_u64(), Some(passes), "{r}");
    }
}

#[test]
fn bench_waits_for_a_held_lock_saying_who_holds_it_then_runs() {
    let dir = TempDir::new("wait");
    let p = dir.prompts();
    let held = hold_lock(&dir);
    let mut child = cmd(&dir, &quick(&p, &["-o", "jsonl"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).expect("read") > 0,
            "bench ended without waiting"
        );
        if line.contains("waiting for the GPU's host lock") {
            break;
        }
    }
    assert!(line.contains("the lock test"), "{line}");
    drop(held);
    let o = child.wait_with_output().expect("bench ends");
    assert!(o.status.success());
    let rows = stdout(&o);
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(rows.contains("\"contended_passes\":0"), "{rows}");
}

#[test]
fn bench_chain_runs_chained_passes_with_the_one_pass_per_submission_tokens_and_says_so() {
    let dir = TempDir::new("chain");
    let p = dir.prompts();
    // 5 generated tokens in submissions of 3 (3 + 2) after the prompt's; the parity sweep
    // runs one pass per submission, and any token that differs is reported as
    // nondeterminism.
    let o = baro(
        &dir,
        &[
            "bench",
            "--allow-cpu",
            "--dispatch",
            "both",
            "--tokens",
            "5",
            "--runs",
            "1",
            "--chain",
            "3",
            "--prompts",
            &p,
            "-o",
            "json",
        ],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("3 passes per submission"), "{err}");
    assert!(!err.contains("nondeterminism"), "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
    assert_eq!(rows.len(), 4, "pp and tg for mega and multi");
    for r in &rows {
        assert_eq!(r["chain"], 3, "{r}");
    }
    // Out of range is refused before anything runs.
    for bad in ["0", "65", "-1"] {
        let o = baro(&dir, &quick(&p, &["--chain", bad]));
        assert!(!o.status.success(), "--chain {bad} accepted");
        assert!(stderr(&o).contains("--chain"), "{}", stderr(&o));
    }
}

#[test]
fn bench_ab_one_pass_per_submission_against_chained_passes_has_bitwise_parity() {
    let dir = TempDir::new("abchain");
    let p = dir.prompts();
    let log = dir.s("pred.log");
    let o = baro(
        &dir,
        &ab(&p, &log, &["--a", "--chain 1", "--b", "--chain 4"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("parity of logits: OK"), "{out}");
}

#[test]
fn bench_ring_every_names_the_sampled_arm_and_is_refused_without_the_ring() {
    let dir = TempDir::new("ringevery");
    let p = dir.prompts();
    let o = baro(
        &dir,
        &quick(&p, &["--instrument", "both", "--ring-every", "4"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("multi+instr/4"), "{out}");
    let o = baro(&dir, &quick(&p, &["--ring-every", "4"]));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--instrument"), "{}", stderr(&o));
    for bad in ["0", "x"] {
        let o = baro(
            &dir,
            &quick(&p, &["--instrument", "on", "--ring-every", bad]),
        );
        assert!(!o.status.success(), "--ring-every {bad} accepted");
    }
    // A command without the ring refuses it too (never accepted and ignored).
    let o = baro(
        &dir,
        &[
            "generate",
            "--backend",
            "vulkan",
            "-n",
            "2",
            "--ring-every",
            "2",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no event ring"), "{}", stderr(&o));
}

#[test]
fn bench_rows_carry_the_resolved_act_q8_by_default_on_a_q4_model_f32_with_act_f32_and_on_stories260k(
) {
    let dir = TempDir::new("act");
    let p = dir.prompts();
    let m = dir.s("tiny-q4.gguf");
    let o = baro(
        &dir,
        &[
            "model", "gen", "--shape", "tiny", "--quant", "q4_0", "-o", &m,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The default (--act auto) on an all-quantised model is q8 (lavapipe has the integer dot
    // product); rows carry the type the run used, never "auto".
    for (extra, want) in [
        (&[][..], "q8"),
        (&["--act", "auto"][..], "q8"),
        (&["--act", "f32"][..], "f32"),
        (&["--act", "q8"][..], "q8"),
    ] {
        let mut a = quick(&p, &["-o", "json", "-m", &m]);
        a.extend_from_slice(extra);
        let o = baro(&dir, &a);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
        assert_eq!(rows.len(), 2, "pp and tg");
        for r in &rows {
            assert_eq!(r["act"], want, "{extra:?}: {r}");
        }
    }
    // The f32 stories260K model has no quantised matrix: auto (the default) is f32 there.
    let o = baro(&dir, &quick(&p, &["-o", "json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
    assert!(rows.iter().all(|r| r["act"] == "f32"), "{rows:?}");
    // And q8 by name is refused, naming a matrix.
    let o = baro(&dir, &quick(&p, &["--act", "q8"]));
    assert!(!o.status.success(), "--act q8 on an f32 model accepted");
    assert!(
        stderr(&o).contains("every matrix must be of a quantised type")
            && stderr(&o).contains("is F32"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bench_rows_carry_the_resolved_kv_f16_for_q8_on_a_wide_model_f32_otherwise_and_an_asked_for_type_as_asked(
) {
    let dir = TempDir::new("kv");
    let p = dir.prompts();
    // stories260K runs f32 activations, so the default (--kv auto) keeps the f32 cache there.
    for (extra, want) in [(&[][..], "f32"), (&["--kv", "f16"][..], "f16")] {
        let mut a = quick(&p, &["-o", "json"]);
        a.extend_from_slice(extra);
        let o = baro(&dir, &a);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
        assert_eq!(rows.len(), 2, "pp and tg");
        for r in &rows {
            assert_eq!(r["kv"], want, "{extra:?}: {r}");
        }
    }
    // An all-quantised model runs q8 by default (lavapipe has the integer dot product and
    // 16-bit storage); the default cache is f16 where the model is 4096 wide
    // (baro_engine::kv::KV_AUTO_F16_DIM), else f32. Rows carry the type used.
    let tiny = dir.s("tiny-q4.gguf");
    let wide = dir.s("wide-q4.gguf");
    let o = baro(
        &dir,
        &[
            "model", "gen", "--shape", "tiny", "--quant", "q4_0", "-o", &tiny,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = baro(&dir, &wide::gen_args(&wide));
    assert!(o.status.success(), "{}", stderr(&o));
    for (m, extra, want) in [
        (&tiny, &[][..], "f32"),
        (&tiny, &["--kv", "f16"][..], "f16"),
        (&wide, &[][..], "f16"),
        (&wide, &["--act", "f32"][..], "f32"),
    ] {
        let mut a = quick(&p, &["-o", "json", "-m", m]);
        a.extend_from_slice(extra);
        let o = baro(&dir, &a);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("a JSON array");
        for r in &rows {
            assert_eq!(r["kv"], want, "{extra:?}: {r}");
        }
    }
    let o = baro(&dir, &quick(&p, &["--kv", "f64"]));
    assert!(!o.status.success(), "--kv f64 accepted");
    assert!(stderr(&o).contains("auto, f32, f16"), "{}", stderr(&o));
}
