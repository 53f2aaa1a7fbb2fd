//! `record` and the per-GPU host lock, two processes: this test holds the lock (a real
//! `flock`, named "lock-holder-for-test"), `baro-top record` is the other process. Without
//! `--no-wait` it waits, saying who holds the lock; with it, it records at once and every
//! pass is labelled contended naming the holder. Runs on the first Vulkan device (lavapipe
//! in CI), the lock directory private to the test (`BARO_TOP_LOCK_DIR`).

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use baro_engine::sensors::host_lock::{self, HostLock};
use baro_telemetry::LockHolder;

/// Kills the child on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p =
            std::env::temp_dir().join(format!("baro-lock-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const HOLDER_COMMAND: &str = "lock-holder-for-test";

/// Take device 0's host lock in `dir` as this process.
fn hold_lock(dir: &Path) -> HostLock {
    let devices = baro_engine::device::Device::list().expect("a Vulkan device (lavapipe in CI)");
    let name = &devices.first().expect("at least one Vulkan device").name;
    let me = LockHolder {
        pid: std::process::id(),
        command: HOLDER_COMMAND.into(),
        since_unix_ms: 0,
    };
    HostLock::try_lock(&host_lock::lock_path(dir, name), me).expect("the lock is free")
}

fn record(lock_dir: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baro-top"));
    c.args(["record", "--device", "0", "-o"])
        .arg(out)
        .args(extra)
        .env("BARO_TOP_LOCK_DIR", lock_dir)
        .env("LP_NUM_THREADS", "2");
    c
}

#[test]
fn record_waits_for_the_held_host_lock_naming_the_holder_and_records_once_it_is_released() {
    let dir = TempDir::new("wait");
    let out = dir.0.join("waited.baro");
    let lock = hold_lock(&dir.0);
    let mut child = record(&dir.0, &out, &["--passes", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    let stderr = child.stderr.take().unwrap();
    let mut guard = Guard(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let holder = format!("held by pid {} ({HOLDER_COMMAND})", std::process::id());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut said = vec![];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no waiting line within 60 s: {said:?}"));
        if line.contains("waiting for the GPU's host lock") {
            assert!(line.contains(&holder), "{line}");
            break;
        }
        said.push(line);
    }
    // Still waiting a second later: no recording yet.
    std::thread::sleep(Duration::from_secs(1));
    assert!(guard.0.try_wait().unwrap().is_none(), "record did not wait");
    assert!(!out.exists(), "record wrote before it had the lock");
    drop(lock);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = guard.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "record did not finish within 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(0));
    assert!(out.is_file());
}

#[test]
fn record_no_wait_labels_every_frame_contended_naming_the_lock_holder_and_warns_once() {
    let dir = TempDir::new("nowait");
    let out = dir.0.join("disturbed.baro");
    let _lock = hold_lock(&dir.0);
    let run = record(&dir.0, &out, &["--passes", "6", "--no-wait"])
        .output()
        .expect("baro-top runs");
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{err}");
    let holder = format!("pid {} ({HOLDER_COMMAND})", std::process::id());
    assert_eq!(
        err.matches("--no-wait: another timing run holds this GPU")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains(&holder), "{err}");
    let replay = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["replay", "--headless", "--json"])
        .arg(&out)
        .output()
        .expect("baro-top runs");
    assert_eq!(replay.status.code(), Some(0));
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|m| m["type"] == "frame")
        .collect();
    assert_eq!(frames.len(), 6);
    for f in &frames {
        let reasons = f["contention"]["reasons"].as_array().unwrap();
        assert!(
            reasons.iter().any(|r| r["kind"] == "host_lock"
                && r["holder"]["pid"] == std::process::id()
                && r["holder"]["command"] == HOLDER_COMMAND),
            "pass {}: {}",
            f["pass"],
            f["contention"]
        );
    }
}
