//! `baro-top bench rec` on the Vulkan device (lavapipe in CI, stories260K): one session, the
//! recorder switched off and on every `--block` passes; both arms have passes, a Δ% is
//! printed, and the recording (`--out`) replays. Flags are checked before any device work.

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_baro-top");

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("baro-bench-rec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("tmp dir");
        TempDir(p)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn baro(dir: &TempDir, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("BARO_TOP_LOCK_DIR", dir.path("locks"))
        .env(
            "LP_NUM_THREADS",
            std::env::var("LP_NUM_THREADS").unwrap_or("2".into()),
        )
        .output()
        .expect("baro-top runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The passes column of `arm`'s row.
fn arm_passes(out: &str, arm: &str) -> u64 {
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(arm))
        .unwrap_or_else(|| panic!("no {arm} row in\n{out}"));
    row.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no passes in {row:?}"))
}

#[test]
fn bench_rec_prints_both_arms_and_a_delta_and_its_recording_replays() {
    let dir = TempDir::new("run");
    let file = dir.path("rec.baro");
    let f = file.to_str().expect("utf-8");
    let o = baro(
        &dir,
        &[
            "bench",
            "rec",
            "--allow-cpu",
            "--passes",
            "60",
            "--block",
            "10",
            "--chain",
            "1",
            "--out",
            f,
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("6 blocks of 10 passes") && err.contains("first 2 passes of every block"),
        "{err}"
    );
    // 3 blocks per arm, 8 measured passes each (2 of 10 are the switch's transition).
    assert_eq!(arm_passes(&out, "off"), 24, "{out}");
    assert_eq!(arm_passes(&out, "on"), 24, "{out}");
    let delta = out
        .lines()
        .find(|l| l.starts_with("Δ% on vs off"))
        .unwrap_or_else(|| panic!("no Δ% line in\n{out}"));
    assert!(delta.contains("wall ") && delta.contains(" %"), "{delta}");
    assert!(
        out.contains("per block pair Δ% (wall, 3 pairs): median "),
        "{out}"
    );
    let rec = out
        .lines()
        .find(|l| l.starts_with(&format!("recorded {f}: ")))
        .unwrap_or_else(|| panic!("no recorded line in\n{out}"));
    let passes: u64 = rec
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{rec}"));
    // Three on-blocks of 10 (a switch may land a pass late or early).
    assert!((20..=40).contains(&passes), "{rec}");

    let r = baro(&dir, &["replay", f, "--headless", "--json"]);
    let lines = text(&r.stdout);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let frames = lines
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"frame\""))
        .count() as u64;
    assert_eq!(frames, passes, "{rec}");
    let starts = lines
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"start\""))
        .count();
    assert_eq!(starts, 1, "the run's Start once, not once per on-block");
    assert!(
        lines
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("{\"type\":\"end\"")),
        "the recording ends with the session's End"
    );
}

#[test]
fn bench_rec_refuses_short_runs_small_blocks_and_cpu_devices_without_allow_cpu() {
    let dir = TempDir::new("flags");
    let o = baro(&dir, &["bench", "rec", "--passes", "15", "--block", "10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--passes 15 is less than 2 x --block 10"),
        "{}",
        text(&o.stderr)
    );
    let o = baro(&dir, &["bench", "rec", "--block", "9"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("must be at least 10"),
        "{}",
        text(&o.stderr)
    );
    // The default chain (16 passes a submission) makes a 10-pass block mostly transition.
    let o = baro(&dir, &["bench", "rec", "--passes", "20", "--block", "10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--block 10 with --chain 16: the first 17 passes")
            && text(&o.stderr).contains("at least 34"),
        "{}",
        text(&o.stderr)
    );
    let o = baro(
        &dir,
        &[
            "bench", "rec", "--passes", "20", "--block", "10", "--chain", "1",
        ],
    );
    let err = text(&o.stderr);
    if err.contains("CPU device") {
        assert_eq!(o.status.code(), Some(2));
        assert!(err.contains("--allow-cpu"), "{err}");
    }
}
