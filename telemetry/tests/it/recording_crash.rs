//! A recorder killed with SIGKILL mid-run leaves a file whose every complete frame replays.
//!
//! The test re-runs this test binary as the child (`--exact` on the helper below, by its path
//! in the binary, with `BARO_CRASH_CHILD` naming the file): the child records synthetic frames
//! forever; the parent kills it with SIGKILL once a few hundred KiB are on disk, then reads
//! the file.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use baro_telemetry::recording::{Reader, RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{RunDetails, Telemetry};

const ENV: &str = "BARO_CRASH_CHILD";
const SEED: u64 = 11;

fn run() -> RunDetails {
    synthetic_run(64, 60, 40)
}

/// Only as the child (with `BARO_CRASH_CHILD` set): record frames until killed.
#[test]
fn crash_child_records_frames_until_killed_when_asked() {
    let Some(path) = std::env::var_os(ENV) else {
        return;
    };
    let run = run();
    let mut w = Writer::create(&path, &RecordingHeader::new(run.clone(), "test")).unwrap();
    w.write(&Telemetry::Start(run.clone())).unwrap();
    for pass in 0.. {
        let f = synthetic_frame(&run, pass, SEED);
        w.write(&Telemetry::Frame(Box::new(f))).unwrap();
    }
}

/// The helper's name as the test harness lists it: its module path without the crate's name.
fn child_test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    match module {
        "" => "crash_child_records_frames_until_killed_when_asked".to_owned(),
        m => format!("{m}::crash_child_records_frames_until_killed_when_asked"),
    }
}

#[test]
fn a_recorder_killed_with_sigkill_leaves_every_complete_frame_replayable() {
    let dir = std::env::temp_dir().join(format!("baro-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("killed.baro");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test_name(), "--nocapture"])
        .env(ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 400 << 10 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the child wrote nothing"
        );
        assert!(child.try_wait().unwrap().is_none(), "the child exited");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let run = run();
    let mut r = Reader::open(&path).unwrap();
    assert_eq!(r.header().run, run);
    assert!(r.index().is_none(), "no footer after a kill");
    let mut frames = 0u64;
    let mut damage = None;
    for m in r.by_ref() {
        match m {
            Ok(Telemetry::Start(d)) => assert_eq!(d, run),
            Ok(Telemetry::Frame(f)) => {
                assert_eq!(f.pass, frames, "frames in order, none missing");
                assert_eq!(*f, synthetic_frame(&run, frames, SEED), "pass {frames}");
                frames += 1;
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => damage = Some(e),
        }
    }
    assert!(frames >= 10, "{frames} frames");
    assert!(!r.finished());
    // Either the kill fell between two records, or the last one is cut: nothing else.
    if let Some(e) = damage {
        assert!(e.is_truncation(), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
