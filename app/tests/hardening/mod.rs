//! The harness of the hardening suites (cli_hardening, closed_pipes): the binary run with a
//! time limit, refusals checked by status and message, Vulkan tests taken in turns, scratch
//! directories. Each suite uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_baro-top");
pub const STORIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/models/stories260K/stories260K.bin"
);
pub const TOK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/models/stories260K/tok512.bin"
);

pub fn cmd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    if std::env::var_os("LP_NUM_THREADS").is_none() {
        c.env("LP_NUM_THREADS", "2");
    }
    c
}

/// Run to completion, but never longer than `limit`: a hang or a runaway allocation fails.
pub fn run_within(mut c: Command, limit: Duration) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top starts");
    let t0 = Instant::now();
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let o = std::thread::spawn(move || {
        let mut v = vec![];
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = vec![];
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("baro-top {:?} still running after {limit:?}", c.get_args());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: o.join().expect("stdout reader"),
        stderr: e.join().expect("stderr reader"),
    }
}

/// How long one command may run before it counts as a hang. Generous: on a loaded 2-core CI
/// machine `bench --allow-cpu` over the 20 built-in prompts on lavapipe took 18 s idle and 80 s
/// beside six busy processes, and a hang is caught all the same, only later.
pub const HANG: Duration = Duration::from_secs(300);

/// A refusal that must come "at once" (before any real work): bounded far below the work it
/// skips (terabytes of weights, an endless /dev/zero), far above a process start on a loaded
/// machine.
pub const AT_ONCE: Duration = Duration::from_secs(30);

pub fn baro(args: &[&str]) -> Output {
    run_within(cmd(args), HANG)
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Status 2 and a message on stderr containing every one of `want`.
#[track_caller]
pub fn refused(o: &Output, want: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "status: {:?}\n{err}", o.status);
    assert!(!err.contains("panicked"), "{err}");
    for w in want {
        assert!(err.contains(w), "message lacks {w:?}:\n{err}");
    }
}

/// Vulkan tests take turns (lavapipe's threads are the grid) and need a device.
pub fn vulkan() -> Option<MutexGuard<'static, ()>> {
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let out = baro(&["devices"]);
    if out.status.success() {
        return Some(turn);
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !in_ci && std::env::var_os("BARO_SKIP_VULKAN").is_some() {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device");
        return None;
    }
    panic!(
        "no usable Vulkan device: {}{}\ninstall lavapipe: apt-get install mesa-vulkan-drivers libvulkan1 (or run scripts/test.sh)",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("baro-hard-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    pub fn partials(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .expect("read dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".partial"))
            .collect()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
