//! Outputs that are not plain files: stdout closed by its reader (`| head` after it has quit),
//! `/dev/stdout` and `/proc/self/fd/1` named as paths, `/dev/null`. A reader that went away
//! ends a command quietly with status 0 (nothing on stderr), except that a command whose
//! status is a verdict (gate, run, record, bench, diff, replay --headless) runs on, silenced, and
//! exits with its verdict; an output that cannot be synced is written and not synced, never
//! an error.
//!
//! Tests that need a Vulkan device run on lavapipe, one at a time (hardening::vulkan).

mod hardening;

use std::process::{Output, Stdio};

use hardening::*;

/// Run with stdout connected to a pipe nobody reads any more (`| head` after it has quit).
fn with_stdout_closed(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut c = cmd(args);
    c.stdout(writer).stderr(Stdio::piped());
    let child = c.spawn().expect("baro-top starts");
    drop(c); // the parent's copy of the write end
    child.wait_with_output().expect("wait")
}

#[track_caller]
fn quiet_exit(args: &[&str]) {
    let o = with_stdout_closed(args);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?} with stdout closed: {:?}\n{err}",
        o.status
    );
    for bad in ["panicked", "Broken pipe", "error"] {
        assert!(!err.contains(bad), "{args:?}: stderr has {bad:?}:\n{err}");
    }
}

#[test]
fn closed_stdout_ends_cpu_subcommands_quietly_with_status_0() {
    quiet_exit(&["generate", "-n", "20"]);
    quiet_exit(&["model", "info", STORIES, "-z", TOK]);
}

#[test]
fn closed_stdout_ends_gpu_subcommands_quietly_with_status_0() {
    let Some(_turn) = vulkan() else { return };
    quiet_exit(&["devices"]);
    quiet_exit(&["devices", "--probe", "--probe-max", "1"]);
    quiet_exit(&["gate", "--steps", "2", "--dispatch", "multi"]);
    quiet_exit(&["run", "--passes", "2", "--dispatch", "multi"]);
    quiet_exit(&[
        "generate",
        "--backend",
        "vulkan",
        "--dispatch",
        "multi",
        "-n",
        "3",
    ]);
}

/// A command whose exit status is a verdict keeps it when its reader goes: the closed pipe
/// silences the lines, quietly, and the status is still the verdict (it was 0: `set -o
/// pipefail; baro-top gate | head -1` passed a gate that refused).
#[track_caller]
fn verdict_kept(args: &[&str], want: i32) {
    let o = with_stdout_closed(args);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(want),
        "{args:?} with stdout closed: {:?}\n{err}",
        o.status
    );
    for bad in ["panicked", "Broken pipe"] {
        assert!(!err.contains(bad), "{args:?}: stderr has {bad:?}:\n{err}");
    }
}

fn shipped(name: &str) -> String {
    format!("{}/../recordings/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn closed_stdout_keeps_the_verdict_of_a_diff_and_a_replay() {
    let (f32, q8, multi) = (
        shipped("h200-llama1b-mega.baro"),
        shipped("h200-llama1b-q8-mega.baro"),
        shipped("h200-llama1b-multi.baro"),
    );
    // Tokens that differ: 1; that agree: 0.
    verdict_kept(&["diff", &f32, &q8], 1);
    verdict_kept(&["diff", &f32, &multi], 0);
    verdict_kept(&["replay", &f32, "--headless"], 0);
}

#[test]
fn closed_stdout_keeps_a_refusing_gates_and_a_failed_runs_status_1() {
    let Some(_turn) = vulkan() else { return };
    // Workgroup 0 of the megakernel never arrives: every pass fails its barrier.
    let stall = ["--dispatch", "mega", "--inject-stall-wg", "0"];
    verdict_kept(&[&["gate", "--steps", "2"][..], &stall].concat(), 1);
    verdict_kept(&[&["run", "--passes", "2"][..], &stall].concat(), 1);
}

/// `record -o FILE 2>&1 | head -1`: the reader of its diagnostics goes at the first line; the
/// recording still finishes, whole (it was cut: the quiet exit removed the file being written).
#[test]
fn a_recording_into_a_file_finishes_when_the_reader_of_its_diagnostics_goes() {
    let Some(_turn) = vulkan() else { return };
    let dir = std::env::temp_dir().join(format!("baro-closed-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("r.baro");
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut c = cmd(&[
        "record",
        "-o",
        f.to_str().expect("utf-8"),
        "--passes",
        "3",
        "--dispatch",
        "multi",
    ]);
    c.stdout(Stdio::null()).stderr(writer);
    let o = c
        .spawn()
        .expect("baro-top starts")
        .wait_with_output()
        .expect("wait");
    drop(c);
    assert_eq!(o.status.code(), Some(0), "{:?}", o.status);
    let r = cmd(&["replay", f.to_str().expect("utf-8"), "--headless"])
        .output()
        .expect("replay");
    let lines = String::from_utf8_lossy(&r.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(
        lines.lines().filter(|l| l.starts_with("pass ")).count(),
        3,
        "{lines}"
    );
}

/// An output named by a path that is this process's stdout (`/dev/stdout`, `/proc/self/fd/1`)
/// follows stdout's rule: a reader that went away ends the command quietly (was "error:
/// writing /dev/stdout: Broken pipe", status 2).
#[test]
fn export_into_dev_stdout_with_stdout_closed_exits_quietly_with_status_0() {
    let rec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../recordings/h200-llama1b-mega.baro"
    );
    for out in ["/dev/stdout", "/proc/self/fd/1"] {
        for flag in ["--csv", "--csv-passes", "--perfetto", "--perfetto-proto"] {
            quiet_exit(&["export", rec, flag, out]);
        }
    }
}

/// `record -o -` (or `/dev/stdout`) into a pipe whose reader quit: a quiet exit, not "error:
/// writing -: Broken pipe" (status 2).
#[test]
fn record_into_stdout_with_stdout_closed_exits_quietly_with_status_0() {
    let Some(_turn) = vulkan() else { return };
    for out in ["-", "/dev/stdout"] {
        quiet_exit(&["record", "-o", out, "--passes", "2", "--dispatch", "multi"]);
    }
}

/// The smallest `bench rec` (one pair of 10-pass blocks on lavapipe) writing its recording
/// into `out`.
fn bench_rec_into(out: &str) -> [&str; 14] {
    [
        "bench",
        "rec",
        "--passes",
        "20",
        "--block",
        "10",
        "--chain",
        "1",
        "--dispatch",
        "multi",
        "--allow-cpu",
        "--no-wait",
        "--out",
        out,
    ]
}

/// `bench rec --out -` (or `/dev/stdout`) into a pipe whose reader quit: a quiet exit, as
/// `record`'s (was "error: writing -: Broken pipe", status 2).
#[test]
fn bench_rec_into_stdout_with_stdout_closed_exits_quietly_with_status_0() {
    let Some(_turn) = vulkan() else { return };
    for out in ["-", "/dev/stdout"] {
        quiet_exit(&bench_rec_into(out));
    }
}

/// `bench rec --out -` into a pipe that is read: stdout is the recording alone, whole (its
/// results table goes to stderr, as `record`'s summary does), status 0 (was "error: syncing
/// - to disk: Invalid argument", status 2: a pipe has no disk to sync).
#[test]
fn bench_rec_into_stdout_writes_the_recording_alone_and_its_results_on_stderr() {
    let Some(_turn) = vulkan() else { return };
    let o = baro(&bench_rec_into("-"));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("median wall"), "the results on stderr:\n{err}");
    let r = baro_telemetry::recording::Reader::new(std::io::Cursor::new(&o.stdout))
        .expect("stdout is a recording");
    let frames = r
        .map(|m| m.expect("the recording reads to its end, undamaged"))
        .filter(|m| matches!(m, baro_telemetry::Telemetry::Frame(_)))
        .count();
    assert!(frames > 0, "no frames recorded");
}

/// `bench ab` comparing mega with multi on two short prompts, its prediction logged to `log`.
fn bench_ab_logging_into<'a>(prompts: &'a str, log: &'a str) -> Vec<&'a str> {
    vec![
        "bench",
        "ab",
        "--allow-cpu",
        "--no-wait",
        "--tokens",
        "2",
        "--pairs",
        "1",
        "--prompts",
        prompts,
        "--a",
        "--dispatch mega",
        "--b",
        "--dispatch multi",
        "--predict",
        "-100%..1000000%",
        "--log",
        log,
    ]
}

/// `bench ab --log -` (or `/dev/stdout`) into a pipe whose reader quit: a quiet exit at the
/// prediction's line, before anything runs (was "error: --log /dev/stdout: Broken pipe",
/// status 2; `-` was a file named "-").
#[test]
fn bench_ab_logging_into_stdout_with_stdout_closed_exits_quietly_with_status_0() {
    let dir = TempDir::new("ab-closed");
    let prompts = dir.path("p.txt");
    std::fs::write(&prompts, "Hi\n").expect("write");
    for log in ["-", "/dev/stdout"] {
        quiet_exit(&bench_ab_logging_into(s(&prompts), log));
    }
    assert!(!std::path::Path::new("-").exists(), "a file named -");
}

/// `bench ab --log /dev/null` runs (was "error: --log /dev/null: Invalid argument", status 2:
/// fsync refuses a character device), and `--log -` puts the prediction and then its verdict
/// on stdout, beside the report.
#[test]
fn bench_ab_logs_into_dev_null_and_onto_stdout_without_syncing_them() {
    let Some(_turn) = vulkan() else { return };
    let dir = TempDir::new("ab-log");
    let prompts = dir.path("p.txt");
    std::fs::write(&prompts, "Hi\nOnce\n").expect("write");
    let o = baro(&bench_ab_logging_into(s(&prompts), "/dev/null"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let mut c = cmd(&bench_ab_logging_into(s(&prompts), "-"));
    c.current_dir(&dir.0);
    let o = run_within(c, HANG);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let predict = out.find(" PREDICT B vs A ").expect(&out);
    let verdict = out.find(" VERDICT inside ").expect(&out);
    assert!(
        predict < verdict && out.contains("Δ B vs A: generation"),
        "{out}"
    );
    assert!(!dir.path("-").exists(), "a file named -");
}
